"""Benchmark: the first write to a new 400 MB ``uint64`` array, as ``pack_pairs`` makes one for the pair ids.

Each measurement is a fresh ``python`` process (the first touch of new memory is what is timed): it allocates
``--rows`` elements either with ``np.empty`` (numpy advises transparent huge pages for allocations of 4 MiB
or more) or with :func:`sparsedp.engines.buffers.fresh_uint64` (a private anonymous mapping: ordinary
pages), then writes every element from ``--threads`` threads (a shift of a column that already exists, as
the pack does). Wall seconds and the process's user and system CPU seconds of that step, medians of
``--runs``, the two allocations alternating run by run. The kernel's transparent huge page settings are
printed: the difference depends on them and on how fragmented the machine's memory is.

``--data FILE.parquet --column user_id``: the process first reads that column with Polars (as a release's pass
over the rows allocates and frees memory before the pack) and writes the new array from it, one element per
row: the case the release meets.

    python benchmarks/first_touch.py --runs 5
    python benchmarks/first_touch.py --runs 5 --data clicks.parquet --column user_id
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

CHILD = r"""
import json, os, sys, time
from concurrent.futures import ThreadPoolExecutor
import numpy as np
from sparsedp.engines.buffers import fresh_uint64
how, n, t, data, column = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
if data:
    import polars as pl
    src = pl.scan_parquet(data).select(pl.col(column).cast(pl.UInt64)).collect().to_series().to_numpy()
    n = src.size
else:
    src = np.arange(n, dtype=np.uint64)
w0, c0 = time.perf_counter(), os.times()
p = np.empty(n, dtype=np.uint64) if how == "np.empty" else fresh_uint64(n)
def block(i):
    a, b = i * n // t, (i + 1) * n // t
    np.left_shift(src[a:b], np.uint64(3), out=p[a:b])
with ThreadPoolExecutor(t) as ex:
    list(ex.map(block, range(t)))
c1 = os.times()
print(json.dumps([time.perf_counter() - w0, c1.user - c0.user, c1.system - c0.system]))
"""


def thp_settings() -> str:
    base = Path("/sys/kernel/mm/transparent_hugepage")
    parts = []
    for name in ("enabled", "defrag"):
        try:
            parts.append(f"{name}: {(base / name).read_text().strip()}")
        except OSError:
            parts.append(f"{name}: (not readable)")
    return "; ".join(parts)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=float, default=5e7)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--data", default="", help="a Parquet file whose column is read first (see above)")
    ap.add_argument("--column", default="user_id")
    args = ap.parse_args()
    n = int(args.rows)
    modes = ("np.empty", "fresh_uint64")
    got: dict[str, list[list[float]]] = {m: [] for m in modes}
    for _ in range(args.runs):
        for m in modes:
            out = subprocess.run([sys.executable, "-c", CHILD, m, str(n), str(args.threads), args.data,
                                  args.column], check=True,
                                 capture_output=True, text=True).stdout
            got[m].append(json.loads(out))
    where = f"after reading {args.data}:{args.column}" if args.data else f"{n:,} uint64 ({n * 8 / 1e6:.0f} MB)"
    print(f"{os.cpu_count()} cores, {args.threads} threads, {where}; "
          f"transparent huge pages: {thp_settings()}")
    print(f"{'allocation':14s} {'wall s':>7s} {'user s':>7s} {'sys s':>7s}   runs (wall s), medians of {args.runs}")
    for m in modes:
        cols = list(zip(*got[m]))
        print(f"{m:14s} " + " ".join(f"{statistics.median(c):7.3f}" for c in cols)
              + "   " + ", ".join(f"{w:.2f}" for w in cols[0]))
    ratio = statistics.median(r[0] for r in got["fresh_uint64"]) / statistics.median(r[0] for r in got["np.empty"])
    print(f"fresh_uint64 / np.empty, wall: {ratio:.2f}")


if __name__ == "__main__":
    main()
