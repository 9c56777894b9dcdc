"""Benchmark: ``sparsedp.release`` on each engine against the plain ``COUNT(DISTINCT) GROUP BY`` of DuckDB and
of Polars, on the same Parquet file, in the same run.

Data: a synthetic click log ``(user_id, url)`` (``sparsedp.demo_data.search_log``: Zipf(1.1) popularity over a
200 000-page vocabulary, Pareto-tailed users with ``rows/10`` users by default), written once to Parquet.

**Whole process** (default section): every measurement is a fresh ``python`` process started on the file and
timed from outside (wall time from start to exit, imports and start-up included; peak RSS = the child's
``ru_maxrss`` from ``wait4``), the runs of all modes alternating. Medians of ``--runs`` runs:

- ``plain DuckDB``  ``SELECT url, count(DISTINCT user_id) FROM read_parquet(…) GROUP BY url`` (Arrow result)
- ``plain Polars``  ``scan_parquet(…).group_by("url").agg(pl.col("user_id").n_unique())``
- ``sparsedp <engine>``  ``sparsedp.release(path, "user_id", "url", epsilon=1, delta=1e-6,
  max_groups_per_unit=l0, engine=…)``: input checks, ℓ0 bounding (secure random choice), calibration, exact
  discrete Gaussian noise, threshold (fixed costs included); ``default`` is
  :func:`sparsedp.engines.choice.fastest_engine` of the path.

Each sparsedp line gives its ratio against its own plain query (DuckDB engine → plain DuckDB, Polars engine →
plain Polars, default → the plain query of the engine it chose) and against plain DuckDB (issue 19 targets:
5·10^7 rows: default ≤ 1.2× plain DuckDB in time and ≤ 1.5× its peak memory, every engine ≤ 1.3× its own
plain query; 10^7 rows ≤ 1.5×). The machine is shared: the load average (``uptime``) is printed before and
after, and only ratios measured in the same run are meaningful.

**Engine choice** (``--choice``): for each input kind (Parquet file, Polars frame, pyarrow Table, pandas
DataFrame) and each engine, a fresh process loads the input (not timed), warms up on 10 000 rows, then times
``Engine.histogram`` alone: wall and CPU seconds (CPU, all threads, is the robust measure on a loaded
machine). This is the measurement behind :mod:`sparsedp.engines.choice`.

    python benchmarks/release.py                       # 1e7 rows, 3 runs, whole process
    python benchmarks/release.py --rows 5e7 --runs 3
    python benchmarks/release.py --rows 1e7 --choice
    python benchmarks/release.py --baseline /path/to/checkout-of-main   # also '<engine>@before', same runs
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
import json, sys
path, what, l0 = sys.argv[1], sys.argv[2], int(sys.argv[3])
if what == "plain-duckdb":
    import duckdb
    con = duckdb.connect()
    rel = con.sql("SELECT url, count(DISTINCT user_id) AS n FROM read_parquet('" + path.replace("'", "''")
                  + "') GROUP BY url")
    n = (getattr(rel, "to_arrow_table", None) or rel.fetch_arrow_table)().num_rows
elif what == "plain-polars":
    import polars as pl
    n = pl.scan_parquet(path).group_by("url").agg(pl.col("user_id").n_unique().alias("n")).collect().height
else:
    import sparsedp as sd
    engine = what.split(":", 1)[1]
    res = sd.release(path, "user_id", "url", epsilon=1.0, delta=1e-6, max_groups_per_unit=l0,
                     engine=None if engine == "default" else engine)
    n = res.report.released_keys
print(json.dumps({"keys": n}))
"""

CHOICE_CHILD = r"""
import json, resource, sys, time
import polars as pl
from sparsedp.engines import get_engine
from sparsedp.noise import InsecureSeededRandom
path, kind, engine, l0 = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
if kind == "file":
    data, small = path, pl.read_parquet(path, n_rows=10_000)
else:
    df = pl.read_parquet(path)
    data = {"polars": lambda: df, "arrow": df.to_arrow, "pandas": df.to_pandas}[kind]()
    small = data[:10_000] if kind != "pandas" else data.iloc[:10_000]
    del df
eng = get_engine(engine)
eng.histogram(small, "user_id", ["url"], l0, InsecureSeededRandom(1))
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
c0, t0 = cpu(), time.perf_counter()
bh = eng.histogram(data, "user_id", ["url"], l0, InsecureSeededRandom(1))
print(json.dumps({"time": time.perf_counter() - t0, "cpu": cpu() - c0, "keys": len(bh)}))
"""


def _uptime() -> str:
    try:
        with open("/proc/loadavg") as fh:
            return "load average " + ", ".join(fh.read().split()[:3]) + f" on {os.cpu_count()} cores"
    except OSError:
        return "load average unavailable"


def child_env() -> dict:
    """The children's environment: bytecode caching allowed (an installed package has its ``.pyc`` files; with
    ``PYTHONDONTWRITEBYTECODE`` set every fresh process would recompile sparsedp, ~0.5 s of CPU); sparsedp is
    compiled once before the runs (:func:`main`)."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def run_process(args: list[str], src: str | None = None) -> dict:
    """Run ``python -c …`` to completion: its wall time, peak RSS (GiB) and the JSON line it printed. ``src``:
    import sparsedp from this directory (``PYTHONPATH``) instead."""
    t = time.perf_counter()
    env = child_env()
    if src is not None:
        env["PYTHONPATH"] = src
    p = subprocess.Popen([sys.executable, "-c", *args], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         text=True, env=env)
    out = p.stdout.read() if p.stdout else ""
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        raise RuntimeError(f"benchmark child failed ({p.returncode}): {args[1:]}")
    res = json.loads(out.strip().splitlines()[-1])
    res.update(wall=wall, rss_gib=usage.ru_maxrss / 2**20,  # ru_maxrss is in KiB on Linux
               cpu=usage.ru_utime + usage.ru_stime)  # CPU seconds, all threads: the robust figure under load
    return res


WRITE_CHILD = r"""
import sys
from sparsedp.demo_data import search_log
df = search_log(int(sys.argv[2]), int(sys.argv[3]), seed=1).select("user_id", url="query")
df.write_parquet(sys.argv[1])
print(df["url"].n_unique())
"""


def write_data(path: str, rows: int, units: int) -> int:
    """Write the data in a child process: the parent must stay small, because a child's ``ru_maxrss`` starts at
    its parent's high-water mark (``vfork`` + ``exec`` keeps the parent's peak), which would put a floor under
    every peak-memory figure."""
    out = subprocess.run([sys.executable, "-c", WRITE_CHILD, path, str(rows), str(units)], capture_output=True,
                         text=True, check=True, env=child_env())
    return int(out.stdout.strip().splitlines()[-1])


def whole_process(path: str, runs: int, l0: int, engines: list[str], baseline: str | None = None,
                  baseline_engines: tuple[str, ...] = ()) -> None:
    from sparsedp.engines.choice import fastest_engine

    modes = ["plain-duckdb", "plain-polars"] + [f"sparsedp:{e}" for e in engines]
    modes += [f"sparsedp:{e}@before" for e in baseline_engines]
    res: dict[str, list[dict]] = {m: [] for m in modes}
    for i in range(runs):
        for m in modes:
            before = m.endswith("@before")
            res[m].append(run_process([CHILD, path, m.removesuffix("@before"), str(l0)],
                                      src=os.path.join(baseline, "src") if before and baseline else None))
        print(f"  run {i + 1}/{runs}: " + ", ".join(f"{m} {res[m][-1]['wall']:.2f} s {res[m][-1]['rss_gib']:.2f} GiB"
                                                   for m in modes) + f"; {_uptime()}", flush=True)
    med = {m: {k: statistics.median(r[k] for r in rs) for k in ("wall", "rss_gib", "cpu")} for m, rs in res.items()}
    duck = med["plain-duckdb"]
    own = {"duckdb": "plain-duckdb", "polars": "plain-polars"}
    default = fastest_engine(path)
    print(f"{'whole process':34s} {'wall s':>7s} {'peak GiB':>8s}  {'vs own plain':>17s}  {'vs plain DuckDB':>17s}  "
          f"runs (s)")
    for m in modes:
        w, r = med[m]["wall"], med[m]["rss_gib"]
        if m.startswith("plain"):
            label, own_s = ("plain DuckDB COUNT(DISTINCT)" if m == "plain-duckdb" else "plain Polars n_unique"), ""
        else:
            e = m.split(":", 1)[1]
            chosen = default if e.removesuffix("@before") == "default" else e.removesuffix("@before")
            label = f"sparsedp {e}" + (f" (= {default})" if e == "default" else "")
            b = med[own.get(chosen, "plain-polars")]
            own_s = f"{w / b['wall']:.2f}x t {r / b['rss_gib']:.2f}x m"
        vs = f"{w / duck['wall']:.2f}x t {r / duck['rss_gib']:.2f}x m"
        print(f"{label:34s} {w:7.2f} {r:8.2f}  {own_s:>17s}  {vs:>17s}  "
              + ", ".join(f"{x['wall']:.2f}" for x in res[m]), flush=True)
    print("CPU s (median, all threads): " + ", ".join(f"{m} {med[m]['cpu']:.2f}" for m in modes))
    keys = {m: rs[0]["keys"] for m, rs in res.items()}
    print("keys: " + ", ".join(f"{m} {k:,}" for m, k in keys.items()))


def choice(path: str, runs: int, l0: int) -> None:
    kinds = ["file", "polars", "arrow", "pandas"]
    print(f"{'input':8s} {'engine':7s} {'wall s':>7s} {'CPU s':>7s}  runs (wall s)")
    for kind in kinds:
        for eng in ("polars", "duckdb"):
            rs = [run_process([CHOICE_CHILD, path, kind, eng, str(l0)]) for _ in range(runs)]
            print(f"{kind:8s} {eng:7s} {statistics.median(r['time'] for r in rs):7.2f} "
                  f"{statistics.median(r['cpu'] for r in rs):7.2f}  " + ", ".join(f"{r['time']:.2f}" for r in rs),
                  flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=float, default=1e7)
    ap.add_argument("--units", type=float, default=None, help="distinct users (default rows/10)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--l0", type=int, default=10)
    ap.add_argument("--engines", default="polars,duckdb,default")
    ap.add_argument("--choice", action="store_true", help="time the bounded histogram per input kind and engine")
    ap.add_argument("--data", default=None, help="reuse this Parquet file (columns user_id, url)")
    ap.add_argument("--baseline", default=None,
                    help="a checkout of an earlier commit: its sparsedp (DIR/src) also runs, as '<engine>@before'")
    ap.add_argument("--baseline-engines", default="duckdb")
    args = ap.parse_args()
    rows = int(args.rows)
    units = int(args.units) if args.units else max(1, rows // 10)
    import sparsedp

    subprocess.run([sys.executable, "-m", "compileall", "-q", os.path.dirname(sparsedp.__file__)], env=child_env(),
                   check=False)
    with tempfile.TemporaryDirectory() as d:
        path = args.data or os.path.join(d, "clicks.parquet")
        if args.data is None:
            n_keys = write_data(path, rows, units)
            print(f"data: {rows:,} rows (user_id, url), {units:,} users, {n_keys:,} distinct urls (Zipf); "
                  f"l0 = {args.l0}; Parquet {os.path.getsize(path) / 2**20:.0f} MiB")
        print(f"before: {_uptime()}", flush=True)
        t = time.perf_counter()
        if args.choice:
            choice(path, args.runs, args.l0)
        else:
            whole_process(path, args.runs, args.l0, args.engines.split(","), args.baseline,
                          tuple(args.baseline_engines.split(",")) if args.baseline else ())
        print(f"after ({time.perf_counter() - t:.0f} s): {_uptime()}")


if __name__ == "__main__":
    main()
