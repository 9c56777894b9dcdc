"""Benchmark: ``sparsedp.release`` with and without SUM aggregates (``--aggregates``) on Polars vs a plain Polars group-by.

Same data, same run: a synthetic search log (``sparsedp.demo_data.search_log``: Zipf(1.1) queries over a
200 000-phrase vocabulary, Pareto-tailed users), written once to Parquet. Every measurement runs in a fresh
subprocess that reads the Parquet file into a Polars DataFrame, warms up on a 10 000-row slice (imports,
thread pools, calibration cache), resets the peak-RSS counter
(``/proc/self/clear_refs``), then times the operation and reports its peak memory *above the loaded data*.
Prints medians of ``--runs`` runs and the ratios (targets: time <= 2x, peak memory <= 2x).

The private release does strictly more work than the plain count: de-duplication, the per-unit l0 bound
(secure random choice), calibration, exact discrete Gaussian noise for every key, thresholding.
Comparisons with OpenDP and PipelineDP belong to the peers benchmark (separate virtual environments), not here.

    python benchmarks/release_aggregates.py                 # 1e7 rows, 1e6 units, 3 runs
    python benchmarks/release_aggregates.py --rows 1e6 --units 1e5 --runs 5
    python benchmarks/release_aggregates.py --aggregates    # count + two sums (dwell_s in [0, 600], clicks in [0, 10])
                                                 # vs group_by(key).agg(n_unique(unit), sum, sum); target <= 1.3x

With ``--aggregates`` the data get two value columns (``dwell_s`` uniform on [0, 900), ``clicks`` integers in
[0, 20), numpy seed 0) and the release is GSHM with ``[Count(), Sum("dwell_s", 0, 600), Sum("clicks", 0, 10)]``
(per-(unit, key) totals clipped, gridded, bounded to the same kept pairs as the count, column noise); the
baseline is the plain Polars ``group_by(key).agg(n_unique(unit), sum(dwell_s), sum(clicks))`` (no per-unit
clipping, no bound).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

CHILD = r"""
import json, os, resource, sys, time
import polars as pl
path, what, l0 = sys.argv[1], sys.argv[2], int(sys.argv[3])
df = pl.read_parquet(path)
AGG = "dwell_s" in df.columns
kw = {}
if AGG:
    import sparsedp as sd
    kw = dict(aggregates=[sd.Count(), sd.Sum("dwell_s", 0, 600), sd.Sum("clicks", 0, 10)])
SUMS = [pl.col("dwell_s").sum(), pl.col("clicks").sum()] if AGG else []

def rss_kb(field):
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0

# Warm-up on a 10 000-row slice (imports, thread pools, the calibration cache), as a long-running service
# would be; the timed call then runs on the full data.
small = df.head(10_000)
if what == "release":
    import sparsedp as sd
    sd.release(small, "user_id", "query", epsilon=1.0, delta=1e-6, max_groups_per_unit=l0, **kw)
else:
    small.lazy().group_by("query").agg(pl.col("user_id").n_unique(), *SUMS).collect()
try:
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")                              # reset the peak RSS (VmHWM) to the current RSS
    reset = True
except OSError:
    reset = False
before = rss_kb("VmRSS")
t = time.perf_counter()
if what == "baseline":
    out = df.lazy().group_by("query").agg(pl.col("user_id").n_unique().alias("n"), *SUMS).collect()
    n_out = out.height
else:
    res = sd.release(df, "user_id", "query", epsilon=1.0, delta=1e-6, max_groups_per_unit=l0, **kw)
    n_out = res.report.released_keys
elapsed = time.perf_counter() - t
peak = rss_kb("VmHWM") if reset else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"time": elapsed, "peak_mb": max(peak - before, 0) / 1024, "keys": n_out, "reset": reset}))
"""


def measure(path: str, what: str, l0: int) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, path, what, str(l0)], capture_output=True, text=True,
                         check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=float, default=1e7)
    ap.add_argument("--units", type=float, default=1e6)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--l0", type=int, default=10)
    ap.add_argument("--aggregates", action="store_true", help="count + two sums (see the module docstring)")
    args = ap.parse_args()
    from sparsedp.demo_data import search_log

    rows, units = int(args.rows), int(args.units)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "log.parquet")
        df = search_log(rows, units, seed=1)
        if args.aggregates:
            import numpy as np
            import polars as pl

            g = np.random.default_rng(0)
            df = df.with_columns(pl.Series("dwell_s", g.uniform(0, 900, df.height)),
                                 pl.Series("clicks", g.integers(0, 20, df.height)))
        n_keys = df["query"].n_unique()
        df.write_parquet(path)
        del df
        print(f"data: {rows:,} rows, {units:,} units, {n_keys:,} distinct keys (Zipf); l0 = {args.l0}; "
              f"{args.runs} runs each, alternating, each in a fresh process")
        res: dict[str, list[dict]] = {"baseline": [], "release": []}
        for _ in range(args.runs):
            for what in res:
                res[what].append(measure(path, what, args.l0))
    med = {w: {m: statistics.median(r[m] for r in rs) for m in ("time", "peak_mb")} for w, rs in res.items()}
    b, s = med["baseline"], med["release"]
    what = "n_unique(unit), sum(dwell_s), sum(clicks)" if args.aggregates else "n_unique(unit)"
    target = 1.3 if args.aggregates else 2.0
    print(f"plain Polars group_by(key).agg({what}): {b['time']:.3f} s, peak +{b['peak_mb']:.0f} MB "
          f"({res['baseline'][0]['keys']:,} keys, all, no privacy)")
    print(f"sparsedp.release (polars engine, auto mechanism{', count + 2 sums' if args.aggregates else ''}): "
          f"{s['time']:.3f} s, peak +{s['peak_mb']:.0f} MB "
          f"({res['release'][0]['keys']:,} keys released at eps=1, delta=1e-6)")
    print(f"ratio time {s['time'] / b['time']:.2f}x (target <= {target:g}x), "
          f"ratio peak memory {s['peak_mb'] / max(b['peak_mb'], 1e-9):.2f}x (target <= 2x)")
    print("all runs (s): baseline " + ", ".join(f"{r['time']:.2f}" for r in res["baseline"]) +
          "; release " + ", ".join(f"{r['time']:.2f}" for r in res["release"]))
    if not res["baseline"][0]["reset"]:
        print("note: /proc/self/clear_refs unavailable; peak memory is the process high-water mark")


if __name__ == "__main__":
    main()
