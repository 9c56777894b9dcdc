"""The thread pool of the engines' numpy steps: as many threads as Polars uses (``POLARS_MAX_THREADS`` limits
both), so that numpy work between Polars calls keeps the same cores busy. numpy's ufuncs, sorts and gathers
on large buffers, Polars and the AES release the GIL while they work."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Sequence, TypeVar

_T = TypeVar("_T")
_U = TypeVar("_U")

__all__ = ["in_threads", "thread_count"]


def thread_count() -> int:
    """Threads for the numpy steps: the cores Polars uses (at least 1, at most the machine's cores)."""
    import polars as pl

    return max(1, min(os.cpu_count() or 1, pl.thread_pool_size()))


def in_threads(fn: Callable[[_T], _U], items: Sequence[_T], threads: int | None = None) -> list[_U]:
    """``[fn(x) for x in items]`` in that order, in a pool of at most ``threads`` threads (default
    :func:`thread_count`) when there is more than one item and one thread."""
    threads = thread_count() if threads is None else threads
    if len(items) <= 1 or threads <= 1:
        return [fn(x) for x in items]
    with ThreadPoolExecutor(max_workers=min(threads, len(items))) as ex:
        return list(ex.map(fn, items))
