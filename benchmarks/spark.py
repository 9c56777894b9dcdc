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
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=float, default=1e7)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--master", default="local[2]")
    args = ap.parse_args()
    n = int(args.rows)

    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    import sparsedp as sd

    warehouse = tempfile.mkdtemp(prefix="sparsedp-bench-warehouse-")
    spark = (SparkSession.builder.master(args.master).appName("sparsedp-bench")
             .config("spark.sql.warehouse.dir", warehouse).config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.memory", "4g").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    with tempfile.TemporaryDirectory() as tmp:
        path = f"{tmp}/rows.parquet"
        t = time.perf_counter()
        (spark.range(n).select(
            F.pmod(F.xxhash64(F.col("id"), F.lit(1)), F.lit(max(n // 20, 1))).alias("unit"),
            F.floor(F.pow(F.rand(7), F.lit(3)) * max(n // 100, 1)).cast("long").alias("key"))
         .write.parquet(path))
        print(f"data: {n:.3g} rows written in {time.perf_counter() - t:.1f}s; master {args.master}, "
              f"shuffle partitions {spark.conf.get('spark.sql.shuffle.partitions')}")
        df = spark.read.parquet(path)

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
            return res

        jobs = {"baseline countDistinct": baseline, "sparsedp gshm l0=10": release_l0,
                "sparsedp top-k csh k=1000": release_topk}
        baseline()  # warm-up (JIT, Python workers)
        times: dict[str, list[float]] = {k: [] for k in jobs}
        last = {}
        for _ in range(args.repeats):
            for name, job in jobs.items():
                t = time.perf_counter()
                last[name] = job()
                times[name].append(time.perf_counter() - t)
        base = statistics.median(times["baseline countDistinct"])
        print(f"{'job':28s} {'median s':>9s} {'ratio':>6s}  runs")
        for name, ts in times.items():
            med = statistics.median(ts)
            print(f"{name:28s} {med:9.2f} {med / base:6.2f}  {', '.join(f'{x:.2f}' for x in ts)}")
        for name in ("sparsedp gshm l0=10", "sparsedp top-k csh k=1000"):
            r = last[name].report
            print(f"{name}: {r.released_keys} keys released; spark timings {dict(r.timings)}")
    spark.stop()
    shutil.rmtree(warehouse, ignore_errors=True)


if __name__ == "__main__":
    main()
