"""Which numpy (and AES) operations of the bucket step hold the GIL, and what merging k sorted runs costs.

The bucket step (:func:`sparsedp.engines.pair_ids._map_parts`) runs on a pool of threads; an operation that holds
the GIL while it works runs on one core at a time however many threads there are, and makes every other thread
that finishes its own operation wait to take the GIL back. Two measurements on arrays of ``--rows`` elements:

- **GIL held**: each operation runs in a loop for 0.3 s while a pure-Python thread counts beside it; the share
  of the counter's solo rate it loses is about the share of the operation's time the GIL was held (medians of
  3; on a machine with fewer free cores than two the figure is not meaningful).
- **merge of k runs**: a bucket of ``--rows`` ids made of k sorted segments (as a bucket of the sorted runs is
  on a machine with k threads), merged by ``np.concatenate`` and ``sort(kind="stable")`` (timsort, what the
  engine does) or by the default quicksort; medians of 5, one thread.

    python benchmarks/gil_ops.py [--rows 4e6]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from typing import Any, Callable

import numpy as np


def operations(n: int) -> dict[str, Callable[[], Any]]:
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

    g = np.random.default_rng(0)
    k = g.integers(0, 50_000, n)
    u = np.sort(g.integers(0, 2**40, n).astype(np.uint64))
    mask = g.random(n) < 0.5
    idx = g.integers(0, n, n)
    deg = g.integers(1, 5, n // 3)
    starts = np.sort(g.choice(n, n // 4, replace=False))
    v = g.integers(0, 100, n)
    block = np.zeros(2 * min(n, 1 << 16), dtype="<u8")
    ct = np.empty(8 * block.size + 15, dtype=np.uint8)
    enc = Cipher(algorithms.AES(bytes(32)), modes.ECB()).encryptor()
    return {
        "np.bincount": lambda: np.bincount(k, minlength=50_000),
        "np.bincount, weights": lambda: np.bincount(k, weights=v.astype(np.float64), minlength=50_000),
        "np.add.at": lambda: np.add.at(np.zeros(50_000, np.int64), k, v),
        "np.repeat": lambda: np.repeat(deg, deg),
        "boolean mask": lambda: u[mask],
        "gather (fancy index)": lambda: u[idx],
        "np.flatnonzero": lambda: np.flatnonzero(mask),
        "np.not_equal": lambda: np.not_equal(u[1:], u[:-1]),
        "np.cumsum": lambda: np.cumsum(v),
        "np.add.reduceat": lambda: np.add.reduceat(v, starts),
        "np.concatenate": lambda: np.concatenate([u, u]),
        "sort (quicksort)": lambda: np.sort(idx),
        "sort (stable)": lambda: np.sort(idx, kind="stable"),
        "np.searchsorted": lambda: np.searchsorted(u, u[::4]),
        "AES-ECB update_into (64 Ki blocks)": lambda: enc.update_into(block.data.cast("B"), ct.data),
    }


def spinner_rate(work: Callable[[], Any] | None) -> float:
    state = {"stop": False, "n": 0}

    def spin() -> None:
        c = 0
        while not state["stop"]:
            c += 1
        state["n"] = c

    th = threading.Thread(target=spin)
    th.start()
    t = time.perf_counter()
    while time.perf_counter() - t < 0.3:
        if work is None:
            time.sleep(0.01)
        else:
            work()
    elapsed = time.perf_counter() - t
    state["stop"] = True
    th.join()
    return state["n"] / elapsed


def merge_costs(n: int) -> None:
    g = np.random.default_rng(1)
    ids = np.sort(g.integers(0, 2**62, n, dtype=np.uint64))
    print(f"\nmerge of a bucket of {n:,} ids in k sorted segments (one thread, medians of 5)")
    print(f"{'k':>4s} {'stable (timsort) ms':>20s} {'quicksort ms':>13s}")
    for k in (1, 2, 4, 8, 16, 32):
        pieces = [np.sort(p) for p in np.array_split(g.permutation(ids), k)]
        res = []
        for kind in ("stable", "quicksort"):
            ts = []
            for _ in range(5):
                t = time.perf_counter()
                out = np.concatenate(pieces)
                out.sort(kind=kind)
                ts.append(time.perf_counter() - t)
            res.append(statistics.median(ts) * 1e3)
        print(f"{k:4d} {res[0]:20.1f} {res[1]:13.1f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=float, default=4e6)
    args = ap.parse_args()
    n = int(args.rows)
    sys.setswitchinterval(0.0005)  # the counter asks for the GIL often, so a held GIL shows as lost counts
    solo = statistics.median(spinner_rate(None) for _ in range(3))
    print(f"numpy {np.__version__}; {n:,} elements; GIL held = 1 - (counter's rate beside the operation / solo)")
    print(f"{'operation':36s} {'GIL held':>9s}")
    for name, op in operations(n).items():
        op()
        rate = statistics.median(spinner_rate(op) for _ in range(3))
        print(f"{name:36s} {max(0.0, 1 - rate / solo):9.0%}")
    merge_costs(min(n, 1_000_000))


if __name__ == "__main__":
    main()
