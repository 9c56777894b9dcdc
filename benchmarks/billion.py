"""Benchmark: a larger-than-memory release (issue 19: 10^9 rows, peak RSS <= 8 GiB), against the plain DuckDB
query on the same file, in the same run.

**Generator** (``--rows N``): a click log ``(user_id, url)`` of the same kind as :mod:`benchmarks.release`'s
(:func:`sparsedp.demo_data.search_log`), written by one DuckDB ``COPY (SELECT … FROM range(N)) TO …parquet``
whose columns are hash-based pseudo-random functions of the row number, so nothing is held in memory (DuckDB
streams the rows into Parquet row groups; ``memory_limit`` 1 GB, peak RSS printed):

- ``user_id``: with probability ``units/rows`` a uniform user (the "every user has a row" part of
  ``search_log``), else a user drawn with probability proportional to a Pareto(α = 1.5) activity weight capped
  at 2000 (``search_log``'s law), by the closed-form inverse of the weights' CDF over the users' quantiles
  ``q`` (weight ``min(2000, q^(-2/3))``); user indices are scrambled by a bijection ``i ↦ i·2654435761 mod
  units`` and mapped to account-number-like ids ``·7919 + 100000``;
- ``url``: Zipf(1.1) popularity over ``--vocab`` pages (default ``max(200 000, rows/1000)``: 10^6 at 10^9
  rows), by the inverse CDF of the continuous Zipf law on ``[1, vocab + 1)``, ranks scrambled the same way and
  written as short strings ``/p/<n>``.

The expected number of distinct urls is computed from the same law (``Σ_r 1 − (1 − p_r)^rows``).

**Runs** (fresh processes, as ``benchmarks/release.py``: wall time from outside, CPU = user + system of the
child, peak RSS = the child's ``ru_maxrss`` from ``wait4``; a watchdog kills a child whose RSS passes
``--kill-gib`` so that an in-memory engine cannot take the shared machine down):

- ``plain-duckdb``: ``SELECT url, count(DISTINCT user_id) FROM read_parquet(…) GROUP BY url`` on a connection
  with ``memory_limit``, a temporary directory and ``preserve_insertion_order = false`` (it can spill);
- ``sparsedp-duckdb``: ``sparsedp.release(path, "user_id", "url", ε = 1, δ = 1e-6, max_groups_per_unit = 10,
  engine=DuckDBEngine(memory_limit=…, temp_directory=…))`` (the out-of-core settings as engine options);
- ``sparsedp-default``: the same with no engine given (the default choice must not be an in-memory path that
  exceeds the machine's RAM: :mod:`sparsedp.engines.choice`);
- ``sparsedp-polars``: the Polars engine (in memory; reported, killed past ``--kill-gib``);
- ``plain-polars-streaming``: ``scan_parquet(…).group_by("url").agg(n_unique).collect(engine="streaming")``.

Measured (``docs/engines_speed.md``): session 3 released 3·10^8 rows within a peak RSS of 6.94 GiB
(``--memory-limit 6.5GB``), and 10^9 rows stopped with DuckDB's "Out of Memory Error" at that limit (its spilling
DISTINCT needs more). Session 5, ``--rows 1e9 --memory-limit 6GB --passes 4 --modes sparsedp-duckdb``: 10^9 rows
released in 362 s wall, 609 CPU s, at a peak RSS of 5.78 GiB.

    python benchmarks/billion.py --rows 1e8                      # generate, run, delete the file
    python benchmarks/billion.py --rows 1e9 --modes plain-duckdb,sparsedp-duckdb
    python benchmarks/billion.py --rows 1e7 --generate-only --keep
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from release import _uptime, child_env  # noqa: E402  (the same child environment and load report)

GENERATE = r"""
import json, resource, sys, time, duckdb
path, rows, units, vocab, tmp = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
con = duckdb.connect(config={"memory_limit": "1GB", "temp_directory": tmp, "preserve_insertion_order": False})
S, CAP = 1.1, 2000.0
q0 = CAP ** -1.5
Z = CAP * q0 + 3 * (1 - q0 ** (1 / 3))  # ∫_0^1 min(CAP, q^(-2/3)) dq
def unif(salt):  # a uniform double in [0, 1): 53 bits of DuckDB's hash of 4·row + salt (salt < 4)
    return f"((hash(i * 4 + {salt}) >> 11)::DOUBLE / 9007199254740992.0)"
v = f"({unif(2)} * {Z!r})"
q = f"(CASE WHEN {v} <= {CAP * q0!r} THEN {v} / {CAP!r} ELSE pow(({v} - {CAP * q0!r}) / 3 + {q0 ** (1 / 3)!r}, 3) END)"
idx = f"least(floor((CASE WHEN {unif(1)} < {units / rows!r} THEN {unif(2)} ELSE {q} END) * {units})::BIGINT, {units - 1})"
zr = f"least(floor(pow(1 - {unif(3)} * (1 - pow({vocab + 1}, {1 - S!r})), {1 / (1 - S)!r}))::BIGINT, {vocab})"
sql = (f"COPY (SELECT ((({idx}) * 2654435761) % {units}) * 7919 + 100000 AS user_id, "
       f"'/p/' || ((({zr} - 1) * 2654435761) % {vocab})::VARCHAR AS url FROM range({rows}) t(i)) "
       f"TO '{path}' (FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE 1048576)")
t = time.perf_counter()
con.execute(sql)
print(json.dumps({"time": time.perf_counter() - t}))
"""

CHILD = r"""
import json, sys
path, what, l0, mem, tmp, passes = (sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5],
                                    int(sys.argv[6]))
if what == "plain-duckdb":
    import duckdb
    con = duckdb.connect(config={"memory_limit": mem, "temp_directory": tmp, "preserve_insertion_order": False})
    rel = con.sql("SELECT url, count(DISTINCT user_id) AS n FROM read_parquet('" + path.replace("'", "''")
                  + "') GROUP BY url")
    n = (getattr(rel, "to_arrow_table", None) or rel.fetch_arrow_table)().num_rows
elif what == "plain-polars-streaming":
    import polars as pl
    n = (pl.scan_parquet(path).group_by("url").agg(pl.col("user_id").n_unique().alias("n"))
         .collect(engine="streaming").height)
else:
    import sparsedp as sd
    from sparsedp.engines.duckdb_engine import DuckDBEngine
    engine = {"sparsedp-duckdb": DuckDBEngine(memory_limit=mem, temp_directory=tmp, passes=passes),
              "sparsedp-default": None,
              "sparsedp-polars": "polars"}[what]
    res = sd.release(path, "user_id", "url", epsilon=1.0, delta=1e-6, max_groups_per_unit=l0, engine=engine)
    n = res.report.released_keys
    print("engine:", res.curator.engine, res.curator.engine_choice, file=sys.stderr)
print(json.dumps({"keys": n}))
"""


def _rss_gib(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 2**20
    except OSError:
        pass
    return 0.0


def run(args: list[str], kill_gib: float, log: str | None = None) -> dict:
    """Run ``python -c …`` to completion: wall, CPU (user + system), peak RSS (``wait4``), the JSON line it
    printed; killed (``"killed": True``) if its RSS passes ``kill_gib``."""
    t = time.perf_counter()
    err = open(log, "a") if log else subprocess.DEVNULL
    p = subprocess.Popen([sys.executable, "-c", *args], stdout=subprocess.PIPE, stderr=err, text=True,
                         env=child_env())
    killed = threading.Event()

    def watch() -> None:
        while p.poll() is None:
            if _rss_gib(p.pid) > kill_gib:
                killed.set()
                p.kill()
                return
            time.sleep(0.2)

    threading.Thread(target=watch, daemon=True).start()
    out = p.stdout.read() if p.stdout else ""
    _, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    if log:
        err.close()
    res: dict = {"wall": time.perf_counter() - t, "cpu": usage.ru_utime + usage.ru_stime,
                 "rss_gib": usage.ru_maxrss / 2**20, "killed": killed.is_set(), "rc": p.returncode}
    if p.returncode == 0:
        res.update(json.loads(out.strip().splitlines()[-1]))
    return res


def expected_distinct(rows: int, vocab: int, s: float = 1.1) -> float:
    """Expected distinct urls under the generator's law: ``Σ_r 1 − (1 − p_r)^rows``, ``p_r`` the continuous Zipf
    mass of ``[r, r + 1)`` over ``[1, vocab + 1)``."""
    import numpy as np

    r = np.arange(1, vocab + 2, dtype=np.float64)
    cdf = (1 - r ** (1 - s)) / (1 - (vocab + 1) ** (1 - s))
    p = np.diff(cdf)
    return float(np.sum(-np.expm1(rows * np.log1p(-p))))


def generate(path: str, rows: int, units: int, vocab: int, tmp: str, kill_gib: float) -> None:
    r = run([GENERATE, path, str(rows), str(units), str(vocab), tmp], kill_gib)
    if r["rc"] != 0:
        raise RuntimeError(f"generator failed: {r}")
    print(f"data: {rows:,} rows (user_id, url), {units:,} users (Pareto-tailed), {vocab:,}-page Zipf(1.1) "
          f"vocabulary, expected distinct urls {expected_distinct(rows, vocab):,.0f}; Parquet "
          f"{os.path.getsize(path) / 2**30:.2f} GiB; generated in {r['wall']:.0f} s wall, {r['cpu']:.0f} s CPU, "
          f"peak RSS {r['rss_gib']:.2f} GiB", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=float, default=1e8)
    ap.add_argument("--units", type=float, default=None, help="distinct users (default rows/10)")
    ap.add_argument("--vocab", type=float, default=None, help="pages (default max(200000, rows/1000))")
    ap.add_argument("--l0", type=int, default=10)
    ap.add_argument("--dir", default="/work/bigdata", help="where the file and the spill directories go")
    ap.add_argument("--data", default=None, help="reuse this Parquet file (columns user_id, url)")
    ap.add_argument("--keep", action="store_true", help="keep the generated file")
    ap.add_argument("--generate-only", action="store_true")
    ap.add_argument("--modes", default="plain-duckdb,sparsedp-duckdb,sparsedp-default")
    ap.add_argument("--memory-limit", default="6GB", help="DuckDB memory_limit of the runs")
    ap.add_argument("--passes", type=int, default=1, help="DuckDBEngine(passes=…) of the sparsedp-duckdb run")
    ap.add_argument("--kill-gib", type=float, default=12.0, help="kill a child whose RSS passes this")
    ap.add_argument("--log", default=None, help="append the children's stderr to this file")
    args = ap.parse_args()
    rows = int(args.rows)
    units = int(args.units) if args.units else max(1, rows // 10)
    vocab = int(args.vocab) if args.vocab else max(200_000, rows // 1000)
    os.makedirs(args.dir, exist_ok=True)
    tmp = os.path.join(args.dir, "spill")
    path = args.data or os.path.join(args.dir, f"clicks_{rows:.0e}.parquet".replace("+", ""))
    import sparsedp

    subprocess.run([sys.executable, "-m", "compileall", "-q", os.path.dirname(sparsedp.__file__)], env=child_env(),
                   check=False)
    try:
        print(f"before: {_uptime()}", flush=True)
        if args.data is None:
            generate(path, rows, units, vocab, tmp, args.kill_gib)
        from sparsedp.engines.choice import choose_engine, in_memory_bytes

        print(f"uncompressed Parquet {in_memory_bytes(path) / 2**30:.2f} GiB; default {choose_engine(path).describe()}",
              flush=True)
        if args.generate_only:
            return
        head = f"{'run':24s} {'wall s':>8s} {'CPU s':>8s} {'peak GiB':>8s}"
        print(head + "  released keys (plain: groups)", flush=True)
        results = {}
        for m in args.modes.split(","):
            shutil.rmtree(tmp, ignore_errors=True)
            os.makedirs(tmp)
            r = results[m] = run([CHILD, path, m, str(args.l0), args.memory_limit, tmp, str(args.passes)], args.kill_gib,
                                  args.log)
            state = (f"{r['keys']:,}" if r["rc"] == 0 else
                     f"KILLED at > {args.kill_gib} GiB RSS" if r["killed"] else f"FAILED (exit {r['rc']})")
            print(f"{m:24s} {r['wall']:8.1f} {r['cpu']:8.1f} {r['rss_gib']:8.2f}  {state}; {_uptime()}", flush=True)
        base = results.get("plain-duckdb")
        if base is not None and base["rc"] == 0:
            print("against plain DuckDB (same file, same memory_limit, same run):")
            for m, r in results.items():
                if m != "plain-duckdb" and r["rc"] == 0:
                    print(f"  {m:22s} {r['wall'] / base['wall']:.2f}x wall  {r['cpu'] / base['cpu']:.2f}x CPU  "
                          f"{r['rss_gib'] / base['rss_gib']:.2f}x peak RSS")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if args.data is None and not args.keep and os.path.exists(path):
            os.remove(path)


if __name__ == "__main__":
    main()
