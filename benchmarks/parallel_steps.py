"""How the two steps of the Polars engine's bounding that follow the read scale with cores (issue 31): the sort
of the pair ids and the numpy work on slices of whole units (:mod:`sparsedp.engines.pair_ids`), on the pairs of
a real file, each timed alone (best of ``--reps``, wall and process CPU seconds).

- sort: the engine's runs sorted in place in threads (:mod:`sparsedp.engines.sorted_runs`), Polars
  ``Series.sort`` (what the engine used before), numpy ``np.sort`` on one thread.
- buckets: :func:`~sparsedp.engines.pair_ids._map_parts` (each bucket's runs merged, then bounded) with the
  default bucket count and others, on the engine's runs and on one sorted run (no merge); checked equal; and
  at the default count with numpy's huge-page advice turned off (its temporaries on ordinary pages).

    python benchmarks/parallel_steps.py clicks.parquet [--reps 3]
"""
from __future__ import annotations

import argparse
import dataclasses
import time
from typing import Any, Callable

import numpy as np
import polars as pl

from sparsedp.engines import pair_ids as P
from sparsedp.engines.bounding import draw_bounding_secret
from sparsedp.engines.sorted_runs import SortedRuns
from sparsedp.engines.threads import thread_count
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("path")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--l0", type=int, default=10)
    args = ap.parse_args()
    threads = thread_count()
    print(f"{threads} threads; {args.path}")
    cats = pl.Categories.random()
    g = best("read: the pass over the rows (cast to Categorical)", lambda: pl.scan_parquet(args.path).select(
        pl.col("url").cast(pl.Categorical(cats)), "user_id").collect(), 1)
    kid = g["url"].to_physical()
    n_ids = int(kid.max() or 0) + 1
    bk = P.bits_for(n_ids - 1)
    p, value_of = best("pack_pairs (numpy, in threads)", lambda: P.pack_pairs(g["user_id"], kid, bk), args.reps)
    s = pl.Series(p)
    ref = best("sort: Polars Series.sort (the engine until session 10)", lambda: s.sort().to_numpy(), args.reps)
    best("sort: numpy np.sort, one thread", lambda: np.sort(p), 1)
    runs = best("sort: runs sorted in place in threads (the engine)",
                lambda: SortedRuns.sort_in_place(p.copy(), threads), args.reps)
    keys = P._category_strings(cats, "url", n_ids)  # the engine's keys: row i is key id i
    del g, s
    ctx = P.key_context(keys, ["url"], bk, args.l0, draw_bounding_secret(InsecureSeededRandom(1)), "user_id")
    ctx = dataclasses.replace(ctx, value_of=value_of)
    default = -(-ref.size // P._block_size(ctx.n_keys))
    one = SortedRuns((ref,))
    for chunks in (default, threads, 2 * threads, 4 * threads, 8 * threads):
        tag = f"{chunks} buckets" + (" (default)" if chunks == default else "")
        a = best(f"buckets: _map_parts on {len(runs.runs)} runs, {tag}", lambda: P._map_parts(ctx, runs, {}, chunks),
                 args.reps)
        b = best(f"buckets: _map_parts on one sorted run, {tag}", lambda: P._map_parts(ctx, one, {}, chunks),
                 args.reps)
        assert np.array_equal(a.upk, b.upk) and np.array_equal(a.dropped, b.dropped)
    # numpy advises huge pages for its allocations of 4 MiB or more (the buckets' temporaries); with the kernel's
    # default THP defrag a fault may wait for compaction, more so with many threads faulting at once
    advise = getattr(getattr(np, "_core", None), "multiarray", None)
    if advise is not None and hasattr(advise, "_set_madvise_hugepage"):
        for advice in (True, False, True):  # alternating: later runs find more memory already faulted in
            before = advise._set_madvise_hugepage(advice)
            try:
                best(f"buckets: _map_parts on {len(runs.runs)} runs, {default} buckets, huge-page advice "
                     f"{'on' if advice else 'off'}", lambda: P._map_parts(ctx, runs, {}, default), args.reps)
            finally:
                advise._set_madvise_hugepage(before)


if __name__ == "__main__":
    main()
