"""How the two steps of the Polars engine's bounding that follow the read scale with cores (issue 31): the sort
of the pair ids and the numpy work on slices of whole units (:mod:`sparsedp.engines.pair_ids`), on the pairs of
a real file, each timed alone (best of ``--reps``, wall and process CPU seconds).

- sort: Polars ``Series.sort`` (what the engine does), numpy ``np.sort`` on one thread, and two parallel
  bucket sorts (the pair ids cut by value range into buckets, each sorted by numpy in a thread pool): buckets
  by Polars ``partition_by``, and buckets by a counting scatter in numpy threads. Each is checked equal.
- slices: :func:`~sparsedp.engines.pair_ids._map_parts` with the default slicing and with other slice counts.

    python benchmarks/parallel_steps.py clicks.parquet [--reps 3]
"""
from __future__ import annotations

import argparse
import dataclasses
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

import numpy as np
import polars as pl

from sparsedp.engines import pair_ids as P
from sparsedp.engines.bounding import draw_bounding_secret
from sparsedp.noise import InsecureSeededRandom


def best(label: str, f: Callable[[], Any], reps: int) -> Any:
    ts, cs, r = [], [], None
    for _ in range(reps):
        t, c = time.perf_counter(), time.process_time()
        r = f()
        ts.append(time.perf_counter() - t)
        cs.append(time.process_time() - c)
    i = int(np.argmin(ts))
    print(f"{label:52s} {ts[i]:7.3f} s wall {cs[i]:7.2f} s CPU ({cs[i] / ts[i]:.1f} cores)", flush=True)
    return r


def shift_for(p: np.ndarray, buckets: int) -> int:
    return max(0, int(p.max()).bit_length() - max(1, buckets - 1).bit_length())


def partition_sort(s: pl.Series, p: np.ndarray, buckets: int, threads: int) -> np.ndarray:
    shift = shift_for(p, buckets)
    parts = (pl.DataFrame({"p": s}).with_columns(b=pl.col("p") // pl.lit(1 << shift, dtype=pl.UInt64))
             .partition_by("b", as_dict=True, include_key=False))
    keys = sorted(parts)
    offs = np.concatenate([[0], np.cumsum([parts[k].height for k in keys])])
    out = np.empty(p.size, dtype=np.uint64)

    def one(i: int) -> None:
        seg = out[offs[i]:offs[i + 1]]
        seg[:] = parts[keys[i]]["p"].to_numpy()
        seg.sort()
    with ThreadPoolExecutor(threads) as ex:
        list(ex.map(one, range(len(keys))))
    return out


def scatter_sort(p: np.ndarray, buckets: int, threads: int) -> np.ndarray:
    shift = np.uint64(shift_for(p, buckets))
    nb = int(p.max() >> shift) + 1
    bounds = [(p.size * i // threads, p.size * (i + 1) // threads) for i in range(threads)]

    def count(ab: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
        b = (p[ab[0]:ab[1]] >> shift).astype(np.uint16)
        return np.argsort(b, kind="stable"), np.bincount(b, minlength=nb)
    out = np.empty_like(p)
    with ThreadPoolExecutor(threads) as ex:
        res = list(ex.map(count, bounds))
        cnt = np.stack([r[1] for r in res])
        start = np.concatenate([[0], np.cumsum(cnt.sum(0))])
        off = start[:-1][None, :] + np.vstack([np.zeros((1, nb), dtype=np.int64), np.cumsum(cnt, 0)[:-1]])

        def scatter(i: int) -> None:
            src = p[bounds[i][0]:bounds[i][1]][res[i][0]]
            pos = 0
            for j in np.flatnonzero(cnt[i]):
                c = int(cnt[i, j])
                out[off[i, j]:off[i, j] + c] = src[pos:pos + c]
                pos += c
        list(ex.map(scatter, range(threads)))

        def sort(j: int) -> None:
            out[start[j]:start[j + 1]].sort()
        list(ex.map(sort, range(nb)))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("path")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--l0", type=int, default=10)
    args = ap.parse_args()
    threads = P._threads()
    print(f"{threads} threads; {args.path}")
    cats = pl.Categories.random()
    g = best("read: the pass over the rows (cast to Categorical)", lambda: pl.scan_parquet(args.path).select(
        pl.col("url").cast(pl.Categorical(cats)), "user_id").collect(), 1)
    kid = g["url"].to_physical()
    n_ids = int(kid.max() or 0) + 1
    bk = P.bits_for(n_ids - 1)
    s, value_of = best("pack_pairs", lambda: P.pack_pairs(g["user_id"], kid, bk), args.reps)
    p = s.to_numpy()
    ref = best("sort: Polars Series.sort (the engine)", lambda: s.sort().to_numpy(), args.reps)
    best("sort: numpy np.sort, one thread", lambda: np.sort(p), 1)
    for nb in (threads * 4, threads * 16):
        r = best(f"sort: Polars partition_by, {nb} buckets, numpy threads", lambda: partition_sort(s, p, nb, threads),
                 args.reps)
        assert np.array_equal(r, ref)
        r = best(f"sort: numpy scatter, {nb} buckets, numpy threads", lambda: scatter_sort(p, nb, threads), args.reps)
        assert np.array_equal(r, ref)
    keys = P._category_strings(cats, None, "url", n_ids)  # the engine's keys: row i is key id i
    del g, p, s
    ctx = P.key_context(keys, ["url"], bk, args.l0, draw_bounding_secret(InsecureSeededRandom(1)), "user_id")
    ctx = dataclasses.replace(ctx, value_of=value_of)
    n = ref.size
    default = -(-n // P._block_size(ctx.n_keys))
    for chunks in (default, threads, 2 * threads, 4 * threads, 8 * threads):
        best(f"slices: _map_parts, {chunks} slices" + (" (default)" if chunks == default else ""),
             lambda: P._map_parts(ctx, ref, {}, chunks), args.reps)


if __name__ == "__main__":
    main()
