"""Pair ids sorted in runs, read back in buckets of whole units: a sort that keeps every core busy.

The ℓ0 choice of :mod:`sparsedp.engines.pair_ids` needs each unit's pair ids next to each other, sorted, a
slice of whole units at a time. A parallel quicksort of the whole array (Polars' ``Series.sort``, used before)
partitions it on one core before it splits the work: it kept 5 of 16 cores busy and sped up 1.1× from one
core to two (``docs/engines_speed.md``). Here no step passes over the whole array on one core, and no second
array as large as the input is written:

1. :meth:`SortedRuns.sort_in_place`: the ids cut into ``t`` equal runs, one per thread, each sorted in place
   by ``ndarray.sort`` (numpy's vectorised quicksort; numpy releases the GIL while it sorts);
2. :meth:`SortedRuns.buckets`: splitters drawn from evenly spaced positions of every run (each run is sorted,
   so these are its quantiles), each rounded down to the first pair id of its unit (``s >> b << b`` with ``b``
   key bits), cut every run by ``searchsorted(…, side="left")``: bucket ``j`` is the ``j``-th segment of
   every run, and all the pairs of a unit fall in one bucket;
3. :meth:`SortedRuns.bucket_values`: a bucket's segments copied next to each other and merged by
   ``ndarray.sort(kind="stable")`` (numpy's timsort finds the sorted segments and merges them), done by the
   thread that then bounds the bucket, while the bucket is in its cache. One run: the bucket is a view.

Every id lies in exactly one bucket (every run is cut at the same values) and the buckets are in value
order, so the buckets' values one after the other are the sorted ids, whatever the number of runs or
buckets (``tests/engines/test_sorted_runs.py``). A bucket's ``start``/``stop`` are its place in that order.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .threads import in_threads

__all__ = ["Bucket", "SortedRuns"]

#: below this many ids one sort on one thread is faster than the threads' start-up
_MIN_PARALLEL = 1 << 20
#: the splitters are quantiles of this many evenly spaced ids of each run per bucket
_SAMPLES_PER_BUCKET = 8


@dataclass(frozen=True)
class Bucket:
    """One bucket of :meth:`SortedRuns.buckets`: its place ``start … stop−1`` in the sorted order, and its
    segment ``(a, b)`` of each run (in run order; ``(0, 0)`` in an empty run)."""

    start: int
    stop: int
    segments: tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class SortedRuns:
    """Sorted runs of ``uint64`` ids (any number; read only is fine)."""

    runs: tuple[np.ndarray, ...] = field(repr=False)

    @classmethod
    def sort_in_place(cls, values: np.ndarray, threads: int) -> SortedRuns:
        """Step 1: ``values`` (writable: sorted in place) cut into ``threads`` runs of about equal length (one
        run below :data:`_MIN_PARALLEL` ids), each sorted in its own thread."""
        n = int(values.size)
        t = max(1, threads) if n >= _MIN_PARALLEL else 1
        runs = tuple(values[n * i // t:n * (i + 1) // t] for i in range(t))
        in_threads(lambda r: r.sort(), runs, t)
        return cls(runs)

    @property
    def size(self) -> int:
        return sum(int(r.size) for r in self.runs)

    def buckets(self, n_buckets: int, key_bits: int) -> list[Bucket]:
        """Step 2: at most ``n_buckets`` non-empty buckets of about equal size in value order, each holding all
        the ids ``u · 2^key_bits + k`` of its units ``u`` (a unit is never split)."""
        n = self.size
        if n == 0:
            return []
        n_buckets = max(1, min(n_buckets, n))
        per_run = n_buckets * _SAMPLES_PER_BUCKET
        sample = np.sort(np.concatenate([r[(np.arange(per_run) * r.size) // per_run] for r in self.runs if r.size]))
        at = (np.arange(1, n_buckets) * sample.size) // n_buckets
        b = np.uint64(key_bits)
        splitters = np.unique((sample[at] >> b) << b)
        cut = [np.concatenate([[0], np.searchsorted(r, splitters, side="left"), [r.size]]) for r in self.runs]
        out: list[Bucket] = []
        start = 0
        for j in range(splitters.size + 1):
            segments = tuple((int(c[j]), int(c[j + 1])) for c in cut)
            size = sum(y - x for x, y in segments)
            if size:
                out.append(Bucket(start=start, stop=start + size, segments=segments))
            start += size
        return out

    def bucket_values(self, bucket: Bucket) -> np.ndarray:
        """Step 3: the bucket's ids sorted (a view of the run when it has one non-empty segment)."""
        pieces = [r[x:y] for r, (x, y) in zip(self.runs, bucket.segments) if y > x]
        if len(pieces) == 1:
            return pieces[0]
        out = np.concatenate(pieces)
        out.sort(kind="stable")
        return out
