"""How the pass over the rows scales with many distinct keys (issue 31's wide-keys data): ways to give every row
a dense key id, each timed alone on the same Parquet file (best of ``--reps``, wall and process CPU seconds).

On 16 cores the engine's pass (a cast of the String key to a Categorical of a private namespace) took 0.39 s
with 15 cores busy on the search log (88 244 keys) and 0.97 s on the wide keys (822 248 keys) at the same row
count, with 2.5× the CPU seconds (``docs/engines_speed.md``, session 10); on two cores the two cost the same.

- ``read``: the two columns read, nothing else (the floor);
- ``categorical``: the engine's pass, ``cast(pl.Categorical(pl.Categories.random()))``;
- ``categorical, streaming``: the same query on Polars' streaming engine;
- ``enum after unique``: the distinct keys first (``select(key).unique()``, a second read of the column),
  then a cast to a ``pl.Enum`` of them (a lookup in a fixed dictionary, no insertion);
- ``group_by, list``: ``group_by(key).agg(unit)`` (the engine's way for non-String keys);
- ``row and null counts, alone`` and ``categorical + counts (collect_all)``: the query the engine used until
  session 11 to check a file's rows and nulls, alone and collected with the pass (Polars read the file twice;
  the engine now counts them on the rows the pass read: ``pair_ids.RowChecks``).

    python benchmarks/key_pass.py wide.parquet [--key url --unit user_id --reps 3]
"""
from __future__ import annotations

import argparse
import time
from typing import Any, Callable

import polars as pl


def best(label: str, f: Callable[[], Any], reps: int) -> None:
    runs = []
    for _ in range(reps):
        t, c = time.perf_counter(), time.process_time()
        r = f()
        runs.append((time.perf_counter() - t, time.process_time() - c))
        del r
    w, c = min(runs)
    print(f"{label:40s} {w:7.3f} s wall {c:7.2f} s CPU ({c / w:.1f} cores)", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("path")
    ap.add_argument("--key", default="url")
    ap.add_argument("--unit", default="user_id")
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    key, unit = args.key, args.unit

    def scan() -> pl.LazyFrame:
        return pl.scan_parquet(args.path)

    def categorical(engine: str) -> pl.DataFrame:
        cats = pl.Categories.random()
        return scan().select(pl.col(key).cast(pl.Categorical(cats)), unit).collect(engine=engine)  # type: ignore

    def enum_after_unique() -> pl.DataFrame:
        keys = scan().select(pl.col(key).unique()).collect()[key]
        return scan().select(pl.col(key).cast(pl.Enum(keys)), unit).collect()

    print(f"{pl.thread_pool_size()} threads; {args.path}")
    best("read", lambda: scan().select(key, unit).collect(), args.reps)
    best("categorical (the engine)", lambda: categorical("in-memory"), args.reps)
    best("categorical, streaming", lambda: categorical("streaming"), args.reps)
    best("enum after unique", enum_after_unique, args.reps)
    best("group_by, list", lambda: scan().group_by(key).agg(pl.col(unit)).collect(), args.reps)
    counts = scan().select(pl.len(), pl.col(unit).null_count(), pl.col(key).null_count())
    best("row and null counts, alone", counts.collect, args.reps)
    best("categorical + counts (collect_all)", lambda: pl.collect_all([
        scan().select(pl.col(key).cast(pl.Categorical(pl.Categories.random())), unit), counts]), args.reps)


if __name__ == "__main__":
    main()
