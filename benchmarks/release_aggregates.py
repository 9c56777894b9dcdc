"""Benchmark: ``sparsedp.release`` with and without SUM aggregates (``--aggregates``) on each engine vs a plain
Polars group-by and the same plain query in DuckDB, plus the start-up cost of a small release.

Same data, same run: a synthetic search log (``sparsedp.demo_data.search_log``: Zipf(1.1) queries over a
200 000-phrase vocabulary, Pareto-tailed users), written once to Parquet. Every measurement runs in a fresh
subprocess that reads the Parquet file into a Polars DataFrame, warms up on a 10 000-row slice (imports,
thread pools, calibration), resets the peak-RSS counter (``/proc/self/clear_refs``), then times the operation
on the frame (``--source frame``, default) or on the Parquet file (``--source file``): wall and CPU seconds
(all threads; the robust figure on a loaded machine) and peak memory *above the loaded data*. The modes run
interleaved; medians of ``--runs`` runs and the ratios against plain Polars (issue 16 target: count + two sums
<= 1.3x plain Polars). The load average is printed before, during and after: only ratios of one run mean
anything on a shared machine.

``--small N``: first, N cold processes each import polars and sparsedp and release a 3 000-row frame (issue
19: "a release of a small frame takes well under a second"), wall and CPU seconds of the whole process.
Bytecode caching is allowed in the children (``PYTHONDONTWRITEBYTECODE`` removed, sparsedp compiled first), as
for an installed package.

The private release does strictly more work than the plain count: de-duplication, the per-unit l0 bound
(secure random choice), calibration, exact discrete Gaussian noise for every key, thresholding.
Comparisons with OpenDP and PipelineDP belong to the peers benchmark (separate virtual environments), not here.

    python benchmarks/release_aggregates.py                 # 1e7 rows, 1e6 units, 3 runs
    python benchmarks/release_aggregates.py --rows 1e6 --units 1e5 --runs 5
    python benchmarks/release_aggregates.py --aggregates    # count + two sums (dwell_s in [0, 600], clicks in [0, 10])
                                                 # vs group_by(key).agg(n_unique(unit), sum, sum); target <= 1.3x
    python benchmarks/release_aggregates.py --aggregates --source file --engines duckdb,polars
    python benchmarks/release_aggregates.py --aggregates --source file --engines duckdb --baseline CHECKOUT
    python benchmarks/release_aggregates.py --intervals [--baseline CHECKOUT]   # per-row intervals' cost only

``--intervals``: only the cost of the default 95 % per-row intervals: a release with ``interval=None`` against
the same release with ``interval=0.95``, for VARIANCE + STD at ε = 0.3 (400 keys of 200 units, half of
variance 0 and half of the largest variance, values in [0, 10]) and for COUNT + two SUMs + MEAN at ε = 0.5 (the same
frame, ``y`` = unit mod 8 in [0, 20]); each timed call in a fresh process after a warm-up release at another ε (imports, thread pools; the
intervals' memoised laws are not warm), medians of ``--runs``.

With ``--aggregates`` the data get two value columns (``dwell_s`` uniform on [0, 900), ``clicks`` integers in
[0, 20), numpy seed 0) and the release is GSHM with ``[Count(), Sum("dwell_s", 0, 600), Sum("clicks", 0, 10)]``
(per-(unit, key) totals clipped, gridded, bounded to the same kept pairs as the count, column noise); the
baselines are the plain Polars ``group_by(key).agg(n_unique(unit), sum(dwell_s), sum(clicks))`` and DuckDB's
``SELECT query, count(DISTINCT user_id), sum(dwell_s), sum(clicks) … GROUP BY query`` (no per-unit clipping, no
bound).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

CHILD = r"""
import json, os, resource, sys, time
import polars as pl
path, what, l0, source = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
df = pl.read_parquet(path)
AGG = "dwell_s" in df.columns
kw = {}
if AGG:
    import sparsedp as sd
    kw = dict(aggregates=[sd.Count(), sd.Sum("dwell_s", 0, 600), sd.Sum("clicks", 0, 10)])
SUMS = [pl.col("dwell_s").sum(), pl.col("clicks").sum()] if AGG else []
DSUMS = ", sum(dwell_s), sum(clicks)" if AGG else ""

def rss_kb(field):
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0

def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime

engine = what.split(":", 1)[1] if what.startswith("release") else None
if what == "plain-duckdb":
    import duckdb
    con = duckdb.connect(config={"preserve_insertion_order": False})
    rel_src = (f"read_parquet('{path}')" if source == "file" else "df")

    def plain_duckdb(src):
        return con.sql(f"SELECT query, count(DISTINCT user_id) AS n{DSUMS} FROM {src} GROUP BY query").to_arrow_table()

# Warm-up on a 10 000-row slice (imports, thread pools, the calibration cache), as a long-running service
# would be; the timed call then runs on the full data (the frame already in memory, or the Parquet file).
small = df.head(10_000)
if what.startswith("release"):
    import sparsedp as sd
    sd.release(small, "user_id", "query", epsilon=1.0, delta=1e-6, max_groups_per_unit=l0, engine=engine, **kw)
elif what == "plain-duckdb":
    plain_duckdb("small")
else:
    small.lazy().group_by("query").agg(pl.col("user_id").n_unique(), *SUMS).collect()
data = path if source == "file" else df
try:
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")                              # reset the peak RSS (VmHWM) to the current RSS
    reset = True
except OSError:
    reset = False
before = rss_kb("VmRSS")
c0, t = cpu(), time.perf_counter()
if what == "baseline":
    lf = pl.scan_parquet(path) if source == "file" else df.lazy()
    out = lf.group_by("query").agg(pl.col("user_id").n_unique().alias("n"), *SUMS).collect()
    n_out = out.height
elif what == "plain-duckdb":
    n_out = plain_duckdb(rel_src).num_rows
else:
    res = sd.release(data, "user_id", "query", epsilon=1.0, delta=1e-6, max_groups_per_unit=l0, engine=engine, **kw)
    n_out = res.report.released_keys
elapsed = time.perf_counter() - t
used = cpu() - c0
peak = rss_kb("VmHWM") if reset else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"time": elapsed, "cpu": used, "peak_mb": max(peak - before, 0) / 1024, "keys": n_out,
                  "reset": reset}))
"""

SMALL_CHILD = r"""
import time
t0 = time.perf_counter()
import polars as pl
import sparsedp as sd
df = pl.DataFrame({"user_id": [i % 700 for i in range(3000)], "query": [f"q{i % 50}" for i in range(3000)]})
res = sd.release(df, "user_id", "query", epsilon=1.0, delta=1e-6, max_groups_per_unit=5)
print(f"{time.perf_counter() - t0:.3f}")
"""


INTERVAL_CHILD = r"""
import json, sys, time
import numpy as np, polars as pl
import sparsedp as sd
case, level = sys.argv[1], (None if sys.argv[2] == "none" else float(sys.argv[2]))
u = np.arange(400 * 200)
k = u // 200
df = pl.DataFrame({"u": u, "k": k, "x": np.where(k < 200, 7.0, np.where(u % 2 == 0, 0.0, 10.0)),
                   "y": (u % 8).astype(float)})
aggs, eps = {"variance": ([sd.Count(), sd.Variance("x", 0, 10), sd.Std("x", 0, 10)], 0.3),
             "sum-mean": ([sd.Count(), sd.Sum("x", 0, 10), sd.Mean("x", 0, 10), sd.Sum("y", 0, 20)], 0.5)}[case]
kw = dict(privacy_unit="u", by="k", delta=1e-6, max_groups_per_unit=1, aggregates=aggs)
sd.release(df.head(2000), epsilon=1.7, **kw)  # warm-up: imports and pools, not the timed laws
t = time.perf_counter()
res = sd.release(df, epsilon=eps, interval=level, **kw)
print(json.dumps({"time": time.perf_counter() - t, "keys": res.table.height,
                  "columns": sum(c.endswith("_lo") for c in res.table.columns)}))
"""


def interval_timings(runs: int, baseline: str | None) -> None:
    """``--intervals``: release time without and with the default per-row intervals (module docstring)."""
    modes = [(case, lv, src) for case in ("variance", "sum-mean") for lv in ("none", "0.95")
             for src in ([None, os.path.join(baseline, "src")] if baseline else [None])]
    times: dict[tuple, list[float]] = {m: [] for m in modes}
    print(f"before: {_uptime()}", flush=True)
    for i in range(runs):
        for m in modes:
            env = child_env()
            if m[2] is not None:
                env["PYTHONPATH"] = m[2]
            out = subprocess.run([sys.executable, "-c", INTERVAL_CHILD, m[0], m[1]], capture_output=True,
                                 text=True, check=True, env=env)
            times[m].append(json.loads(out.stdout.strip().splitlines()[-1])["time"])
        print(f"  run {i + 1}/{runs}: " + ", ".join(f"{c}/{lv}{'@before' if s else ''} {times[(c, lv, s)][-1]:.2f} s"
                                                   for c, lv, s in modes) + f"; {_uptime()}", flush=True)
    for case in ("variance", "sum-mean"):
        for s in ([None, baseline] if baseline else [None]):
            src = None if s is None else os.path.join(s, "src")
            off = statistics.median(times[(case, "none", src)])
            on = statistics.median(times[(case, "0.95", src)])
            print(f"{case:9s}{' @before' if s else '':8s} release interval=None {off:6.2f} s, interval=0.95 "
                  f"{on:6.2f} s: intervals add {on - off:6.2f} s ({on / off:.2f}x), medians of {runs}")
    print(f"after: {_uptime()}")


def child_env() -> dict:
    """The children's environment: bytecode caching allowed (an installed package has its ``.pyc`` files;
    with ``PYTHONDONTWRITEBYTECODE`` set, every fresh process would recompile sparsedp, ~0.5 s of CPU)."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def small_release(runs: int) -> list[tuple[float, float]]:
    """Whole-process time of a small-frame release (3 000 rows, imports included), cold process: wall and
    CPU seconds (``wait4``) of each run, after one unmeasured run that writes the bytecode caches."""
    out = []
    for i in range(runs + 1):
        t = time.perf_counter()
        p = subprocess.Popen([sys.executable, "-c", SMALL_CHILD], env=child_env(), stdout=subprocess.DEVNULL)
        _, status, usage = os.wait4(p.pid, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            raise RuntimeError("small release failed")
        if i:
            out.append((time.perf_counter() - t, usage.ru_utime + usage.ru_stime))
    return out


def _uptime() -> str:
    with open("/proc/loadavg") as fh:
        return "load average " + ", ".join(fh.read().split()[:3]) + f" on {os.cpu_count()} cores"


def measure(path: str, what: str, l0: int, source: str, src: str | None = None) -> dict:
    """One fresh child; ``src``: import sparsedp from this directory (``PYTHONPATH``) instead."""
    env = child_env()
    if src is not None:
        env["PYTHONPATH"] = src
    out = subprocess.run([sys.executable, "-c", CHILD, path, what, str(l0), source], capture_output=True, text=True,
                         check=True, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=float, default=1e7)
    ap.add_argument("--units", type=float, default=1e6)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--l0", type=int, default=10)
    ap.add_argument("--aggregates", action="store_true", help="count + two sums (see the module docstring)")
    ap.add_argument("--engines", default="polars,duckdb", help="sparsedp engines to time (comma-separated)")
    ap.add_argument("--source", choices=("frame", "file"), default="frame",
                    help="timed input: the Polars frame in memory (default) or the Parquet file")
    ap.add_argument("--small", type=int, default=3, help="cold-process small-frame release runs (0: skip)")
    ap.add_argument("--data", default=None, help="reuse this Parquet file (as written by this benchmark)")
    ap.add_argument("--baseline", default=None,
                    help="a checkout of an earlier commit: its sparsedp (DIR/src) also runs, as '<engine>@before'")
    ap.add_argument("--intervals", action="store_true",
                    help="only the per-row intervals' cost: releases with interval=None vs 0.95 (module docstring)")
    args = ap.parse_args()
    if args.intervals:
        interval_timings(args.runs, args.baseline)
        return
    from sparsedp.demo_data import search_log

    rows, units = int(args.rows), int(args.units)
    engines = [e for e in args.engines.split(",") if e]
    subprocess.run([sys.executable, "-m", "compileall", "-q", os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))) + "/src/sparsedp"], env=child_env(), check=False)
    print(f"before: {_uptime()}", flush=True)
    if args.small:
        sm = small_release(args.small)
        print(f"small-frame release, cold process (3 000 rows, imports included): median "
              f"{statistics.median(w for w, _ in sm):.2f} s wall, {statistics.median(c for _, c in sm):.2f} s CPU "
              f"(runs: " + ", ".join(f"{w:.2f}/{c:.2f}" for w, c in sm) + ")", flush=True)
    with tempfile.TemporaryDirectory() as d:
        path = args.data or os.path.join(d, "log.parquet")
        if args.data is None:
            df = search_log(rows, units, seed=1)
            if args.aggregates:
                import numpy as np
                import polars as pl

                g = np.random.default_rng(0)
                df = df.with_columns(pl.Series("dwell_s", g.uniform(0, 900, df.height)),
                                     pl.Series("clicks", g.integers(0, 20, df.height)))
            df.write_parquet(path)
            del df
        import polars as pl

        n_keys = pl.scan_parquet(path).select(pl.col("query").n_unique()).collect().item()
        print(f"data: {rows:,} rows, {units:,} units, {n_keys:,} distinct keys (Zipf); l0 = {args.l0}; "
              f"input: {args.source}; {args.runs} runs each, interleaved, each in a fresh process", flush=True)
        modes = ["baseline", "plain-duckdb"] + [f"release:{e}" for e in engines]
        modes += [f"release:{e}@before" for e in engines] if args.baseline else []
        res: dict[str, list[dict]] = {m: [] for m in modes}
        for i in range(args.runs):
            for m in modes:
                before = m.endswith("@before") and args.baseline
                res[m].append(measure(path, m.removesuffix("@before"), args.l0, args.source,
                                      os.path.join(args.baseline, "src") if before else None))
            print(f"  run {i + 1}/{args.runs}: " + ", ".join(f"{m} {res[m][-1]['time']:.2f} s" for m in modes)
                  + f"; {_uptime()}", flush=True)
    med = {w: {m: statistics.median(r[m] for r in rs) for m in ("time", "cpu", "peak_mb")} for w, rs in res.items()}
    b = med["baseline"]
    target = 1.3 if args.aggregates else 2.0
    print(f"{'':44s} {'wall s':>7s} {'CPU s':>6s} {'peak MB':>8s}  {'vs plain Polars (t / CPU / m)':>30s}")
    labels = {"baseline": f"plain Polars group_by(key).agg({'n_unique + 2 sums' if args.aggregates else 'n_unique'})",
              "plain-duckdb": "plain DuckDB COUNT(DISTINCT)" + (" + 2 SUMs" if args.aggregates else "")}
    for m in modes:
        r = med[m]
        label = labels[m] if m in labels else (f"sparsedp.release, {m.split(':')[1]} engine"
                                               + (", count + 2 sums" if args.aggregates else ""))
        print(f"{label:44s} {r['time']:7.2f} {r['cpu']:6.2f} {r['peak_mb']:8.0f}  "
              f"{r['time'] / b['time']:>9.2f}x / {r['cpu'] / b['cpu']:.2f}x / {r['peak_mb'] / max(b['peak_mb'], 1e-9):.2f}x"
              f"   ({res[m][0]['keys']:,} keys)")
    print(f"target: release <= {target:g}x the plain Polars time (issue 16)")
    print("all runs (s): " + "; ".join(f"{m} " + ", ".join(f"{x['time']:.2f}" for x in res[m]) for m in modes))
    print(f"after: {_uptime()}")
    if not res["baseline"][0]["reset"]:
        print("note: /proc/self/clear_refs unavailable; peak memory is the process high-water mark")


if __name__ == "__main__":
    main()
