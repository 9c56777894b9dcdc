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

**Cores** (``--cores 1,2``): every mode also runs pinned to one core and to two (``taskset -c 0`` and
``taskset -c 0,1``, alternating). Printed per mode: the medians on 1 and 2 cores, the speed-up ``T1/T2`` next
to plain DuckDB's and plain Polars' (issue 31: the default release's ≥ 0.95× plain DuckDB's), and the implied
serial time of ``T(p) = s + w/p`` fitted to the two points (``s = 2·T2 − T1``, ``w = 2·(T1 − T2)``; issue 31:
≤ 1.2× plain DuckDB's). On a 2-core machine this is the proxy for what a 16-core machine shows.

**Data shapes** (``--data-shape``): ``search-log`` (default, above) or ``wide-keys``: many distinct string keys
(the issue 31 high-cardinality file: 5·10^7 rows, Zipf(1.25) popularity over 2·10^6 string keys, 5·10^6
Pareto-tailed users; with ``--rows`` smaller, keys ``rows/25`` and users ``rows/10``), printed as time and
peak-memory ratios against plain DuckDB.

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
    python benchmarks/release.py --rows 5e7 --cores 1,2 --engines default      # 1-core vs 2-core proxy
    python benchmarks/release.py --rows 5e7 --data-shape wide-keys --engines default
    python benchmarks/release.py --baseline /path/to/checkout-of-main   # also '<engine>@before', same runs
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import shutil
import tempfile
import time

CHILD = r"""
import json, sys
path, what, l0 = sys.argv[1], sys.argv[2], sys.argv[3]
l0 = l0 if l0 == "auto" else int(l0)
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


def run_process(args: list[str], src: str | None = None, cpus: str | None = None) -> dict:
    """Run ``python -c …`` to completion: its wall time, peak RSS (GiB) and the JSON line it printed. ``src``:
    import sparsedp from this directory (``PYTHONPATH``) instead; ``cpus``: pin it to these cores
    (``taskset -c``)."""
    t = time.perf_counter()
    env = child_env()
    if src is not None:  # first on the path; what was there stays (wheels installed with --target)
        env["PYTHONPATH"] = os.pathsep.join([src, *filter(None, [env.get("PYTHONPATH")])])
    pin = ["taskset", "-c", cpus] if cpus else []
    with tempfile.TemporaryFile() as err:  # a file, not a pipe: a chatty child cannot block on it
        p = subprocess.Popen([*pin, sys.executable, "-c", *args], stdout=subprocess.PIPE, stderr=err, text=True,
                             env=env)
        out = p.stdout.read() if p.stdout else ""
        _, status, usage = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t
        p.returncode = os.waitstatus_to_exitcode(status)
        if p.returncode != 0:
            err.seek(0)
            tail = err.read().decode(errors="replace")[-3000:]
            raise RuntimeError(f"benchmark child failed ({p.returncode}): {args[1:]}\n{tail}")
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

WIDE_CHILD = r"""
import sys
import numpy as np
import polars as pl
path, rows, units, keys = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
g = np.random.Generator(np.random.PCG64(1))
w = np.minimum(g.pareto(1.5, units) + 1.0, 2000.0)  # Pareto-tailed activity, every user at least one row
extra = g.multinomial(rows - units, w / w.sum())
user = (g.permutation(units).astype(np.int64) * 7919 + 100_000)[np.repeat(np.arange(units), 1 + extra)]
cdf = np.cumsum(np.arange(1, keys + 1, dtype=np.float64) ** -1.25)  # Zipf(1.25) over the keys
cdf /= cdf[-1]
q = g.permutation(keys)[np.minimum(np.searchsorted(cdf, g.random(rows)), keys - 1)]  # rank -> key number
del cdf, extra
df = pl.DataFrame({"user_id": g.permutation(user), "q": q}).select(
    "user_id", url=pl.format("https://example.org/item/{}", pl.col("q")))
df.write_parquet(path)
print(df["url"].n_unique())
"""


def write_data(path: str, rows: int, units: int, shape: str = "search-log", keys: int = 0) -> int:
    """Write the data in a child process: the parent must stay small, because a child's ``ru_maxrss`` starts at
    its parent's high-water mark (``vfork`` + ``exec`` keeps the parent's peak), which would put a floor under
    every peak-memory figure. ``shape``: ``search-log`` or ``wide-keys`` (``keys`` distinct string keys)."""
    args = [WRITE_CHILD, path, str(rows), str(units)] if shape == "search-log" else \
        [WIDE_CHILD, path, str(rows), str(units), str(keys)]
    out = subprocess.run([sys.executable, "-c", *args], capture_output=True, text=True, check=True,
                         env=child_env())
    return int(out.stdout.strip().splitlines()[-1])


def _pins(cores: list[int]) -> dict[int, str | None]:
    """``taskset -c`` lists of the core counts asked for (``0``, ``0,1``, …); no pinning when none is asked."""
    return {c: ",".join(str(i) for i in range(c)) for c in cores} if cores else {0: None}


def whole_process(path: str, runs: int, l0: int | str, engines: list[str], baseline: str | None = None,
                  baseline_engines: tuple[str, ...] = (), cores: list[int] | None = None) -> None:
    from sparsedp.engines.choice import fastest_engine

    modes = ["plain-duckdb", "plain-polars"] + [f"sparsedp:{e}" for e in engines]
    modes += [f"sparsedp:{e}@before" for e in baseline_engines]
    pins = _pins(cores or [])
    res: dict[tuple[str, int], list[dict]] = {(m, c): [] for m in modes for c in pins}
    for i in range(runs):
        for c, cpus in pins.items():
            for m in modes:
                before = m.endswith("@before")
                res[m, c].append(run_process([CHILD, path, m.removesuffix("@before"), str(l0)],
                                             src=os.path.join(baseline, "src") if before and baseline else None,
                                             cpus=cpus))
            print(f"  run {i + 1}/{runs}" + (f", {c} core(s)" if cpus else "") + ": "
                  + ", ".join(f"{m} {res[m, c][-1]['wall']:.2f} s {res[m, c][-1]['rss_gib']:.2f} GiB" for m in modes)
                  + f"; {_uptime()}", flush=True)
    med = {k: {f: statistics.median(r[f] for r in rs) for f in ("wall", "rss_gib", "cpu")} for k, rs in res.items()}
    top = max(pins)
    own = {"duckdb": "plain-duckdb", "polars": "plain-polars"}
    default = fastest_engine(path)
    print(f"{'whole process' + (f', {top} core(s)' if pins[top] else ''):34s} {'wall s':>7s} {'peak GiB':>8s}  "
          f"{'vs own plain':>17s}  {'vs plain DuckDB':>17s}  runs (s)")
    duck = med["plain-duckdb", top]
    for m in modes:
        w, r = med[m, top]["wall"], med[m, top]["rss_gib"]
        if m.startswith("plain"):
            label, own_s = ("plain DuckDB COUNT(DISTINCT)" if m == "plain-duckdb" else "plain Polars n_unique"), ""
        else:
            e = m.split(":", 1)[1]
            chosen = default if e.removesuffix("@before") == "default" else e.removesuffix("@before")
            label = f"sparsedp {e}" + (f" (= {default})" if e == "default" else "")
            b = med[own.get(chosen, "plain-polars"), top]
            own_s = f"{w / b['wall']:.2f}x t {r / b['rss_gib']:.2f}x m"
        vs = f"{w / duck['wall']:.2f}x t {r / duck['rss_gib']:.2f}x m"
        print(f"{label:34s} {w:7.2f} {r:8.2f}  {own_s:>17s}  {vs:>17s}  "
              + ", ".join(f"{x['wall']:.2f}" for x in res[m, top]), flush=True)
    print("CPU s (median, all threads): " + ", ".join(f"{m} {med[m, top]['cpu']:.2f}" for m in modes))
    keys = {m: res[m, top][0]["keys"] for m in modes}
    print("keys: " + ", ".join(f"{m} {k:,}" for m, k in keys.items()))
    if len(pins) >= 2:
        scaling(modes, med, sorted(pins))


def scaling(modes: list[str], med: dict, cores: list[int]) -> None:
    """Speed-up from the fewest to the most cores, next to plain DuckDB's and Polars', and the serial time of
    ``T(p) = s + w/p`` through the two points (``s = (p2·T2 − p1·T1) / (p2 − p1)``)."""
    p1, p2 = cores[0], cores[-1]

    def fit(m: str) -> tuple[float, float, float, float]:
        t1, t2 = med[m, p1]["wall"], med[m, p2]["wall"]
        s = (p2 * t2 - p1 * t1) / (p2 - p1)
        return t1, t2, t1 / t2, s

    d_up, d_s = fit("plain-duckdb")[2:]
    print(f"\n{'cores ' + str(p1) + ' -> ' + str(p2):34s} {'T' + str(p1) + ' s':>7s} {'T' + str(p2) + ' s':>7s} "
          f"{'speed-up':>8s} {'vs DuckDB':>9s}  {'serial s':>8s} {'vs DuckDB':>9s}")
    for m in modes:
        t1, t2, up, s = fit(m)
        print(f"{m:34s} {t1:7.2f} {t2:7.2f} {up:7.2f}x {up / d_up:8.2f}x  {s:8.2f} "
              + (f"{s / d_s:8.2f}x" if d_s > 0 else f"{'(DuckDB s <= 0)':>9s}"), flush=True)
    print(f"serial time s = ({p2}*T{p2} - {p1}*T{p1}) / {p2 - p1} of T(p) = s + w/p; issue 31 targets: the default "
          f"release's speed-up >= 0.95x plain DuckDB's, its serial time <= 1.2x plain DuckDB's")


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
    ap.add_argument("--l0", default="10", help="max_groups_per_unit: a number, or 'auto' (the automatic bound; "
                    "whole-process modes only)")
    ap.add_argument("--engines", default="polars,duckdb,default")
    ap.add_argument("--choice", action="store_true", help="time the bounded histogram per input kind and engine")
    ap.add_argument("--data", default=None, help="reuse this Parquet file (columns user_id, url)")
    ap.add_argument("--baseline", default=None,
                    help="a checkout of an earlier commit: its sparsedp (DIR/src) also runs, as '<engine>@before'")
    ap.add_argument("--baseline-engines", default="duckdb")
    ap.add_argument("--cores", default=None,
                    help="core counts to pin every mode to with taskset, e.g. 1,2 (speed-up and serial time)")
    ap.add_argument("--data-shape", choices=("search-log", "wide-keys"), default="search-log")
    ap.add_argument("--keys", type=float, default=None, help="wide-keys: distinct keys (default rows/25)")
    args = ap.parse_args()
    if args.l0 != "auto":
        args.l0 = int(args.l0)
    elif args.choice:
        ap.error("--choice times the bounded histogram at a fixed --l0")
    rows = int(args.rows)
    units = int(args.units) if args.units else max(1, rows // 10)
    n_wide = int(args.keys) if args.keys else max(1, rows // 25)
    cores = [int(c) for c in args.cores.split(",")] if args.cores else None
    if cores and (shutil.which("taskset") is None or max(cores) > len(os.sched_getaffinity(0))):
        ap.error(f"--cores needs taskset and at most {len(os.sched_getaffinity(0))} cores")
    import sparsedp

    subprocess.run([sys.executable, "-m", "compileall", "-q", os.path.dirname(sparsedp.__file__)], env=child_env(),
                   check=False)
    with tempfile.TemporaryDirectory() as d:
        path = args.data or os.path.join(d, "clicks.parquet")
        if args.data is None:
            n_keys = write_data(path, rows, units, args.data_shape, n_wide)
            law = "Zipf(1.1) over 200 000 phrases" if args.data_shape == "search-log" else \
                f"Zipf(1.25) over {n_wide:,} string keys"
            print(f"data ({args.data_shape}): {rows:,} rows (user_id, url), {units:,} users, {n_keys:,} distinct urls "
                  f"({law}); l0 = {args.l0}; Parquet {os.path.getsize(path) / 2**20:.0f} MiB")
        print(f"before: {_uptime()}", flush=True)
        t = time.perf_counter()
        if args.choice:
            choice(path, args.runs, args.l0)
        else:
            whole_process(path, args.runs, args.l0, args.engines.split(","), args.baseline,
                          tuple(args.baseline_engines.split(",")) if args.baseline else (), cores)
        print(f"after ({time.perf_counter() - t:.0f} s): {_uptime()}")


if __name__ == "__main__":
    main()
