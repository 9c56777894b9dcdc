"""Spark engine vs a plain Spark ``groupBy(key).agg(countDistinct(unit))`` on the same data, same session.

    python benchmarks/spark.py --rows 1e7 --repeats 3 [--master local[2]]

Data: ``rows`` rows (unit, key) written once to Parquet in a temporary directory (units uniform over
rows/20 ids, keys skewed over rows/100 ids, some duplicate pairs), read back by every run. Each timing is
the wall time of the whole job until the result is materialised (``write.format("noop")``):

- baseline   ``groupBy(key).agg(countDistinct(unit))``                 (no privacy)
- sparsedp   ``sparsedp.release(df, max_groups_per_unit=10)`` + writing its table (GSHM; ℓ0 bounding,
             noise and threshold in the executors, plus the input checks and report counts)
- top-k      ``sparsedp.release(df, top_k=1000)`` + writing its table (top-k CSH)

Prints medians over ``repeats`` runs and the ratios to the baseline (target <= 1.5x).

``--peers tumult`` then runs Tumult Analytics (its venv ``.venvs/tumult``, pyspark 3.5; create it with
``python benchmarks/peers.py --peers tumult``) on the same Parquet rows in a fresh session of that venv, with
its own countDistinct baseline in that session: ``get_groups`` + ``count_distinct`` (Laplace: Tumult's
Gaussian needs a zCDP budget) under
``MaxGroupsPerID("key", 10)``, the query of ``benchmarks/peers_scripts/tumult_peer.py``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TUMULT_PYTHON = Path(__file__).resolve().parents[1] / ".venvs" / "tumult" / "bin" / "python"


def _session(master: str, warehouse: str):
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master(master).appName("sparsedp-bench")
             .config("spark.sql.warehouse.dir", warehouse).config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.memory", "4g").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _report(times: dict[str, list[float]], base_name: str) -> None:
    base = statistics.median(times[base_name])
    print(f"{'job':28s} {'median s':>9s} {'ratio':>6s}  runs")
    for name, ts in times.items():
        med = statistics.median(ts)
        print(f"{name:28s} {med:9.2f} {med / base:6.2f}  {', '.join(f'{x:.2f}' for x in ts)}", flush=True)


def tumult_worker(path: str, master: str, repeats: int, l0: int = 10) -> None:
    """Runs inside the Tumult venv: countDistinct baseline and Tumult's release, same session, same rows."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    import tmlt.analytics as ta
    from pyspark.sql import functions as F

    warehouse = tempfile.mkdtemp(prefix="sparsedp-bench-tumult-")
    spark = _session(master, warehouse)
    df = spark.read.parquet(path)

    def baseline():
        df.groupBy("key").agg(F.countDistinct("unit").alias("count")).write.format("noop").mode(
            "overwrite").save()

    def tumult():
        eps, delta = 1.0, 1e-8
        sess = ta.Session.from_dataframe(privacy_budget=ta.ApproxDPBudget(eps, delta), source_id="t",
                                         dataframe=df, protected_change=ta.AddRowsWithID("unit"))
        def bounded():
            return (ta.QueryBuilder("t").enforce(ta.MaxGroupsPerID("key", l0))
                    .enforce(ta.MaxRowsPerGroupPerID("key", 1)))

        groups = sess.evaluate(bounded().get_groups(["key"]), ta.ApproxDPBudget(eps / 2, delta))
        q = (bounded().groupby(ta.KeySet.from_dataframe(groups))
             .count_distinct(["unit"], name="count", mechanism=ta.CountDistinctMechanism.LAPLACE))
        sess.evaluate(q, ta.PureDPBudget(eps / 2)).write.format("noop").mode("overwrite").save()

    baseline()
    jobs = {"tumult baseline countDistinct": baseline, f"tumult get_groups+cd l0={l0}": tumult}
    times: dict[str, list[float]] = {k: [] for k in jobs}
    for _ in range(repeats):
        for name, job in jobs.items():
            t = time.perf_counter()
            job()
            times[name].append(time.perf_counter() - t)
    _report(times, "tumult baseline countDistinct")
    spark.stop()
    shutil.rmtree(warehouse, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=float, default=1e7)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--data", default=None, help="Parquet directory of the rows: written once if missing, "
                    "then reused (default: a temporary directory, removed at the end)")
    ap.add_argument("--jobs", default="baseline,l0,topk", help="comma-separated subset of baseline,l0,topk")
    ap.add_argument("--peers", default="", help="'tumult': also time Tumult Analytics (see above)")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    n = int(args.rows)
    if args.worker == "tumult":
        tumult_worker(args.data, args.master, args.repeats)
        return

    from pyspark.sql import functions as F

    import sparsedp as sd

    warehouse = tempfile.mkdtemp(prefix="sparsedp-bench-warehouse-")
    spark = _session(args.master, warehouse)
    with tempfile.TemporaryDirectory() as tmp:
        path = args.data or f"{tmp}/rows.parquet"
        t = time.perf_counter()
        if not os.path.exists(path):
            (spark.range(n).select(
                F.pmod(F.xxhash64(F.col("id"), F.lit(1)), F.lit(max(n // 20, 1))).alias("unit"),
                F.floor(F.pow(F.rand(7), F.lit(3)) * max(n // 100, 1)).cast("long").alias("key"))
             .write.parquet(path))
            print(f"data: {n:.3g} rows written in {time.perf_counter() - t:.1f}s", flush=True)
        df = spark.read.parquet(path)
        print(f"data: {df.count():.3g} rows in {path}; master {args.master}, shuffle partitions "
              f"{spark.conf.get('spark.sql.shuffle.partitions')}", flush=True)

        def baseline():
            df.groupBy("key").agg(F.countDistinct("unit").alias("count")).write.format("noop").mode(
                "overwrite").save()

        def release_l0():
            res = sd.release(df, "unit", "key", epsilon=1.0, delta=1e-8, max_groups_per_unit=10, mechanism="gshm")
            res.table.write.format("noop").mode("overwrite").save()
            res.table.unpersist()
            return res

        def release_topk():
            res = sd.release(df, "unit", "key", epsilon=1.0, delta=1e-8, top_k=1000)
            res.table.write.format("noop").mode("overwrite").save()
            res.table.unpersist()
            return res

        jobs = {"baseline countDistinct": baseline, "sparsedp gshm l0=10": release_l0,
                "sparsedp top-k csh k=1000": release_topk}
        wanted = {"baseline": "baseline countDistinct", "l0": "sparsedp gshm l0=10",
                  "topk": "sparsedp top-k csh k=1000"}
        jobs = {wanted[j]: jobs[wanted[j]] for j in ["baseline"] + args.jobs.split(",") if j in wanted}
        baseline()  # warm-up (JIT, Python workers)
        times: dict[str, list[float]] = {k: [] for k in jobs}
        last = {}
        for _ in range(args.repeats):
            for name, job in jobs.items():
                t = time.perf_counter()
                last[name] = job()
                times[name].append(time.perf_counter() - t)
        _report(times, "baseline countDistinct")
        for name in [j for j in ("sparsedp gshm l0=10", "sparsedp top-k csh k=1000") if j in last]:
            r = last[name]
            print(f"{name}: {r.report.released_keys} keys released; timings {dict(r.curator.timings)}")
        spark.stop()
        shutil.rmtree(warehouse, ignore_errors=True)
        if "tumult" in args.peers.split(","):
            if not TUMULT_PYTHON.exists():
                print(f"tumult: no venv at {TUMULT_PYTHON} (python benchmarks/peers.py --peers tumult)")
            else:
                subprocess.run([str(TUMULT_PYTHON), __file__, "--worker", "tumult", "--data", path,
                                "--master", args.master, "--repeats", str(args.repeats)], check=False)


if __name__ == "__main__":
    main()
