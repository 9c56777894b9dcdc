"""Spark engine vs a plain Spark ``groupBy(key).agg(countDistinct(unit))`` on the same data, same session.

    python benchmarks/spark.py --rows 1e7 --repeats 3 [--master local[2]]

Data: ``rows`` rows (unit, key) written once to Parquet in a temporary directory (units uniform over
rows/20 ids, keys skewed over rows/100 ids, some duplicate pairs), read back by every run. Each timing is
the wall time of the whole job until the result is materialised (``write.format("noop")``):

- baseline   ``groupBy(key).agg(countDistinct(unit))``                 (no privacy)
- sparsedp   ``sparsedp.release(df, max_groups_per_unit=10)`` + writing its table (GSHM; ℓ0 bounding,
             noise and threshold in the executors, plus the input checks and report counts)
- top-k      ``sparsedp.release(df, top_k=1000)`` + writing its table (top-k CSH)

Prints, per job, the median wall time over ``repeats`` runs and the CPU seconds of the process tree (driver,
Spark's JVM and its Python workers, from ``/proc``; steadier than wall time on a shared machine), each with its
ratio to the baseline of the same run (issue 19's target: sparsedp <= 1.2x ``countDistinct`` at 10^8 rows).

``--peers tumult,pipelinedp`` then runs each peer on the same Parquet rows, each in its own venv (its own
pyspark) and a fresh local session of that venv with the same settings, timing in that session its own
``countDistinct`` baseline too, and prints every job against both baselines (``--install`` creates the venvs
with pip first; they are cached under ``.venvs/``):

- ``tumult``      Tumult Analytics (``.venvs/tumult``: ``tmlt.analytics``, pyspark 3.5: on Python 3.11 it
                  requires pyspark >= 3.4, < 3.6) from
                  ``Session.from_dataframe(…, AddRowsWithID("unit"))`` under ``MaxGroupsPerID("key", l0)`` and
                  ``MaxRowsPerGroupPerID("key", 1)``: the key domain is unknown, and Tumult's way for that is its
                  own private key selection ``get_groups(["key"])`` (ε/2, δ), whose keys become the
                  ``KeySet`` of a ``count_distinct("unit")`` (Laplace, ε/2: its Gaussian needs a zCDP budget).
                  The query of ``benchmarks/peers_scripts/tumult_peer.py``; the released rows are written to
                  Parquet (the action) and counted.
- ``pipelinedp``  PipelineDP's Spark backend (``.venvs/pipelinedp-spark``: ``pipeline-dp`` with python-dp and
                  the newest pyspark, which it does not pin): ``DPEngine(…, SparkRDDBackend(sc)).aggregate`` on
                  ``df.rdd`` of (unit, key) rows, ``PRIVACY_ID_COUNT`` per key with
                  ``max_partitions_contributed = l0``, ``max_contributions_per_partition = 1``, Gaussian noise and
                  Gaussian-thresholding partition selection after aggregation (the count's noise decides release,
                  as in sparsedp's GSHM), ``NaiveBudgetAccountant(ε, δ)``; the action is ``count()`` of the
                  released RDD.

Every release is at ε = 1, δ = 1e-8 and ``--l0`` (default 10) keys per unit.
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

ROOT = Path(__file__).resolve().parents[1]
EPSILON, DELTA = 1.0, 1e-8
#: the Spark peers: venv under ``.venvs/`` and what pip installs there (``None``: ``peers.PEERS[name]``, the
#: venv ``benchmarks/peers.py`` uses for that peer)
SPARK_PEERS = {
    "tumult": {"venv": "tumult", "pip": None},
    "pipelinedp": {"venv": "pipelinedp-spark", "pip": ["pipeline-dp", "python-dp", "pyspark", "pyarrow"]},
}


def _session(master: str, warehouse: str):
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master(master).appName("sparsedp-bench")
             .config("spark.sql.warehouse.dir", warehouse).config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.memory", "4g").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def write_rows(spark, n: int, path: str) -> None:
    """The click log: ``n`` rows (unit uniform over n/20 ids by a hash of the row id, key = ⌊U³·n/100⌋)."""
    from pyspark.sql import functions as F

    (spark.range(n).select(
        F.pmod(F.xxhash64(F.col("id"), F.lit(1)), F.lit(max(n // 20, 1))).alias("unit"),
        F.floor(F.pow(F.rand(7), F.lit(3)) * max(n // 100, 1)).cast("long").alias("key"))
     .write.parquet(path))


def tree_cpu_seconds(root: int | None = None) -> float:
    """CPU seconds (user + system, including reaped children) of ``root`` (default: this process) and all its
    live descendants — the driver, Spark's JVM and its Python workers — from Linux ``/proc``. On a machine
    shared with other jobs this is steadier than wall time."""
    from peers import process_tree_sum

    ticks = process_tree_sum(os.getpid() if root is None else root,
                             lambda f: sum(int(x) for x in f[11:15]))  # utime stime cutime cstime
    return ticks / os.sysconf("SC_CLK_TCK")


def _report(times: dict[str, list[float]], base_name: str, cpus: dict[str, list[float]] | None = None) -> None:
    base = statistics.median(times[base_name])
    cbase = statistics.median(cpus[base_name]) if cpus else None
    print(f"{'job':34s} {'median s':>9s} {'ratio':>6s} {'cpu s':>8s} {'ratio':>6s}  runs (wall s)", flush=True)
    for name, ts in times.items():
        med = statistics.median(ts)
        c = f"{statistics.median(cpus[name]):8.1f} {statistics.median(cpus[name]) / cbase:6.2f}" if cpus else ""
        print(f"{name:34s} {med:9.2f} {med / base:6.2f} {c}  {', '.join(f'{x:.2f}' for x in ts)}", flush=True)


def _run(jobs: dict, repeats: int) -> tuple[dict[str, list[float]], dict[str, list[float]], dict]:
    """Each job ``repeats`` times, interleaved; wall times, CPU seconds of the process tree
    (:func:`tree_cpu_seconds`) and each job's last return value."""
    times: dict[str, list[float]] = {k: [] for k in jobs}
    cpus: dict[str, list[float]] = {k: [] for k in jobs}
    last: dict = {}
    for _ in range(repeats):
        for name, job in jobs.items():
            c, t = tree_cpu_seconds(), time.perf_counter()
            last[name] = job()
            times[name].append(time.perf_counter() - t)
            cpus[name].append(tree_cpu_seconds() - c)
            print(f"  {name}: {times[name][-1]:.1f} s wall, {cpus[name][-1]:.1f} s cpu; load average "
                  f"{os.getloadavg()[0]:.1f}", flush=True)
    return times, cpus, last


def peer_worker(peer: str, path: str, master: str, repeats: int, l0: int, warmup: bool) -> None:
    """Runs inside the peer's venv: the countDistinct baseline and the peer's release, same session, same rows.
    Prints the table, then one line ``RESULT {json}`` for the parent."""
    import json
    from importlib.metadata import version

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import functions as F

    warehouse = tempfile.mkdtemp(prefix=f"sparsedp-bench-{peer}-")
    spark = _session(master, warehouse)
    df = spark.read.parquet(path)

    def baseline():
        df.groupBy("key").agg(F.countDistinct("unit").alias("count")).write.format("noop").mode(
            "overwrite").save()

    if peer == "tumult":
        import tmlt.analytics as ta

        what = (f"tmlt.analytics {version('tmlt.analytics')}, pyspark {version('pyspark')}",
                f"get_groups (ε/2, δ) + count_distinct Laplace (ε/2), MaxGroupsPerID {l0}")

        def release() -> int:
            sess = ta.Session.from_dataframe(privacy_budget=ta.ApproxDPBudget(EPSILON, DELTA), source_id="t",
                                             dataframe=df, protected_change=ta.AddRowsWithID("unit"))

            def bounded():
                return (ta.QueryBuilder("t").enforce(ta.MaxGroupsPerID("key", l0))
                        .enforce(ta.MaxRowsPerGroupPerID("key", 1)))

            groups = sess.evaluate(bounded().get_groups(["key"]), ta.ApproxDPBudget(EPSILON / 2, DELTA))
            q = (bounded().groupby(ta.KeySet.from_dataframe(groups))
                 .count_distinct(["unit"], name="count", mechanism=ta.CountDistinctMechanism.LAPLACE))
            out = f"{warehouse}/tumult-out"
            sess.evaluate(q, ta.PureDPBudget(EPSILON / 2)).write.mode("overwrite").parquet(out)
            return spark.read.parquet(out).count()
    elif peer == "pipelinedp":
        import pipeline_dp

        what = (f"pipeline-dp {version('pipeline-dp')}, python-dp {version('python-dp')}, "
                f"pyspark {version('pyspark')}",
                f"SparkRDDBackend PRIVACY_ID_COUNT, Gaussian thresholding (post-aggregation), l0 {l0}, linf 1")

        def release() -> int:
            acc = pipeline_dp.NaiveBudgetAccountant(total_epsilon=EPSILON, total_delta=DELTA)
            engine = pipeline_dp.DPEngine(acc, pipeline_dp.SparkRDDBackend(spark.sparkContext))
            params = pipeline_dp.AggregateParams(
                metrics=[pipeline_dp.Metrics.PRIVACY_ID_COUNT], noise_kind=pipeline_dp.NoiseKind.GAUSSIAN,
                max_partitions_contributed=l0, max_contributions_per_partition=1,
                partition_selection_strategy=pipeline_dp.PartitionSelectionStrategy.GAUSSIAN_THRESHOLDING,
                post_aggregation_thresholding=True)
            ex = pipeline_dp.DataExtractors(privacy_id_extractor=lambda r: r[0],
                                            partition_extractor=lambda r: r[1], value_extractor=lambda r: 0)
            res = engine.aggregate(df.rdd.map(lambda r: (r[0], r[1])), params, ex)
            acc.compute_budgets()
            return res.count()
    else:
        raise SystemExit(f"unknown peer {peer!r}")

    if warmup:
        baseline()
    base_name, peer_name = f"{peer} session: countDistinct", f"{peer}: release"
    times, cpus, last = _run({base_name: baseline, peer_name: release}, repeats)
    _report(times, base_name, cpus)
    print("RESULT " + json.dumps({"peer": peer, "version": what[0], "mechanism": what[1], "times": times,
                                  "cpus": cpus,
                                  "baseline": base_name, "release": peer_name, "keys": last[peer_name]}),
          flush=True)
    spark.stop()
    shutil.rmtree(warehouse, ignore_errors=True)


def run_peer(peer: str, path: str, args) -> dict | None:
    """The peer's worker in its venv (a fresh JVM); its RESULT, or None after printing why it failed."""
    import json

    py = ROOT / ".venvs" / SPARK_PEERS[peer]["venv"] / "bin" / "python"
    if not py.exists():
        print(f"{peer}: no venv at {py} (run with --install)", flush=True)
        return None
    cmd = [str(py), __file__, "--worker", peer, "--data", path, "--master", args.master, "--repeats",
           str(args.repeats), "--l0", str(args.l0)] + (["--no-warmup"] if args.no_warmup else [])
    r = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, PYTHONWARNINGS="ignore"))
    result = None
    for line in r.stdout.splitlines():
        if line.startswith("RESULT "):
            result = json.loads(line[len("RESULT "):])
        else:
            print(line, flush=True)
    if r.returncode != 0 or result is None:
        print(f"{peer}: failed (exit {r.returncode}):\n" + "\n".join(r.stderr.strip().splitlines()[-25:]),
              flush=True)
        return None
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=float, default=1e7)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--data", default=None, help="Parquet directory of the rows: written once if missing, "
                    "then reused (default: a temporary directory, removed at the end)")
    ap.add_argument("--jobs", default="baseline,l0,topk", help="comma-separated subset of baseline,l0,topk")
    ap.add_argument("--l0", type=int, default=10, help="keys per unit (sparsedp GSHM and the peers)")
    ap.add_argument("--peers", default="", help="comma-separated subset of tumult,pipelinedp (see above)")
    ap.add_argument("--install", action="store_true", help="create/fill the peers' venvs with pip first")
    ap.add_argument("--no-warmup", action="store_true", help="skip the warm-up baseline run (at 1e8 rows it "
                    "costs a full run; the median of >= 3 repeats absorbs the first run's JIT instead)")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    n = int(args.rows)
    if args.worker:
        peer_worker(args.worker, args.data, args.master, args.repeats, args.l0, not args.no_warmup)
        return
    peers = [p for p in args.peers.split(",") if p]
    unknown = sorted(set(peers) - set(SPARK_PEERS))
    if unknown:
        ap.error(f"unknown peers {unknown}; choose among {sorted(SPARK_PEERS)}")
    if args.install:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from peers import PEERS, ensure_venv

        for p in peers:
            why = ensure_venv(p, 1800, False, spec=SPARK_PEERS[p] if SPARK_PEERS[p]["pip"] else PEERS[p])
            if why:
                print(f"{p}: {why}", flush=True)

    from pyspark.sql import functions as F

    import sparsedp as sd

    warehouse = tempfile.mkdtemp(prefix="sparsedp-bench-warehouse-")
    spark = _session(args.master, warehouse)
    with tempfile.TemporaryDirectory() as tmp:
        path = args.data or f"{tmp}/rows.parquet"
        t = time.perf_counter()
        if not os.path.exists(path):
            write_rows(spark, n, path)
            print(f"data: {n:.3g} rows written in {time.perf_counter() - t:.1f}s", flush=True)
        df = spark.read.parquet(path)
        print(f"data: {df.count():.3g} rows in {path}; master {args.master}, shuffle partitions "
              f"{spark.conf.get('spark.sql.shuffle.partitions')}", flush=True)

        def baseline():
            df.groupBy("key").agg(F.countDistinct("unit").alias("count")).write.format("noop").mode(
                "overwrite").save()

        def release_l0():
            res = sd.release(df, "unit", "key", epsilon=EPSILON, delta=DELTA, max_groups_per_unit=args.l0,
                             mechanism="gshm")
            res.table.write.format("noop").mode("overwrite").save()
            res.table.unpersist()
            return res

        def release_topk():
            res = sd.release(df, "unit", "key", epsilon=EPSILON, delta=DELTA, top_k=1000)
            res.table.write.format("noop").mode("overwrite").save()
            res.table.unpersist()
            return res

        names = {"baseline": "baseline countDistinct", "l0": f"sparsedp gshm l0={args.l0}",
                 "topk": "sparsedp top-k csh k=1000"}
        fns = {"baseline": baseline, "l0": release_l0, "topk": release_topk}
        jobs = {names[j]: fns[j] for j in ["baseline"] + args.jobs.split(",") if j in names}
        if not args.no_warmup:
            baseline()  # warm-up (JIT, Python workers)
        times, cpus, last = _run(jobs, args.repeats)
        _report(times, names["baseline"], cpus)
        keys = {}
        for name in [names[j] for j in ("l0", "topk") if names[j] in last]:
            r = last[name]
            keys[name] = r.report.released_keys
            print(f"{name}: {r.report.released_keys} keys released; timings {dict(r.curator.timings)}")
        spark.stop()
        shutil.rmtree(warehouse, ignore_errors=True)
        results = [res for p in peers if (res := run_peer(p, path, args)) is not None]
        if results:
            med = statistics.median
            base, cbase = med(times[names["baseline"]]), med(cpus[names["baseline"]])
            print(f"\nsummary ({n:.3g} rows, {args.master}, medians of {args.repeats}; each job against the "
                  f"countDistinct of its own session and against sparsedp's session's ({base:.2f} s wall, "
                  f"{cbase:.1f} s cpu))")
            print("| job | wall s | ÷ own countDistinct | ÷ sparsedp session's | cpu s | ÷ own countDistinct | "
                  "÷ sparsedp session's | keys released |")
            print("|---|---|---|---|---|---|---|---|")
            rows = [(name, med(times[name]), base, med(cpus[name]), cbase, keys.get(name, "–")) for name in jobs]
            for res in results:
                own, cown = med(res["times"][res["baseline"]]), med(res["cpus"][res["baseline"]])
                rows.append((f"{res['baseline']} ({res['version']})", own, own, cown, cown, "–"))
                rows.append((f"{res['release']} ({res['mechanism']})", med(res["times"][res["release"]]), own,
                             med(res["cpus"][res["release"]]), cown, res["keys"]))
            for name, w, wb, c, cb, k in rows:
                print(f"| {name} | {w:.2f} | {w / wb:.2f} | {w / base:.2f} | {c:.1f} | {c / cb:.2f} | "
                      f"{c / cbase:.2f} | {k} |", flush=True)

if __name__ == "__main__":
    main()
