"""The sort in runs read back in buckets of whole units (:mod:`sparsedp.engines.sorted_runs`): the buckets'
values one after the other are ``np.sort`` of the input, whatever the runs and buckets, and no unit's pairs
are ever split between two buckets."""
import numpy as np
import pytest

from sparsedp.engines import sorted_runs as S
from sparsedp.engines.sorted_runs import SortedRuns


def _ids(n: int, units: int, bk: int, seed: int) -> np.ndarray:
    g = np.random.default_rng(seed)
    return (g.integers(0, units, n).astype(np.uint64) << np.uint64(bk)) | g.integers(0, 1 << bk, n).astype(np.uint64)


def _check(runs: SortedRuns, want: np.ndarray, n_buckets: int, bk: int) -> None:
    buckets = runs.buckets(n_buckets, bk)
    got = [runs.bucket_values(b) for b in buckets]
    assert np.array_equal(np.concatenate(got) if got else np.empty(0, np.uint64), want)
    assert len(buckets) <= n_buckets
    assert all(b.stop > b.start for b in buckets)
    assert [b.start for b in buckets[1:]] == [b.stop for b in buckets[:-1]]
    assert all(g.size == b.stop - b.start for g, b in zip(got, buckets))
    for left, right in zip(got[:-1], got[1:]):  # a unit's pairs stay together
        assert left[-1] >> np.uint64(bk) < right[0] >> np.uint64(bk)


@pytest.mark.parametrize("threads", [1, 2, 3, 8])
@pytest.mark.parametrize("n_buckets", [1, 2, 7, 64, 100_000])
def test_buckets_of_runs_are_the_sorted_ids_and_never_split_a_unit(monkeypatch, threads, n_buckets):
    monkeypatch.setattr(S, "_MIN_PARALLEL", 1)  # runs even on a small input
    for n, units, bk, seed in ((5000, 40, 5, 1), (3001, 3000, 3, 2), (17, 2, 1, 3), (4000, 1, 12, 4)):
        ids = _ids(n, units, bk, seed)
        want = np.sort(ids)
        runs = SortedRuns.sort_in_place(ids.copy(), threads)
        assert len(runs.runs) == min(threads, n)
        assert all(np.all(r[:-1] <= r[1:]) for r in runs.runs)
        _check(runs, want, n_buckets, bk)


def test_one_sorted_run_gives_views_cut_at_units():
    ids = np.sort(_ids(3000, 40, 5, 5))
    runs = SortedRuns((ids,))
    for n_parts in (1, 2, 3, 10, 100, 5000):
        _check(runs, ids, n_parts, 5)
        for b in runs.buckets(n_parts, 5):
            assert np.shares_memory(runs.bucket_values(b), ids)  # one run: no copy


def test_small_input_is_one_run_and_empty_input_has_no_bucket():
    ids = _ids(1000, 10, 4, 6)
    runs = SortedRuns.sort_in_place(ids, 8)
    assert len(runs.runs) == 1 and np.array_equal(runs.runs[0], np.sort(_ids(1000, 10, 4, 6)))
    assert SortedRuns.sort_in_place(np.empty(0, np.uint64), 4).buckets(10, 3) == []


def test_largest_ids_are_sorted_and_bucketed():
    top = np.uint64(2**64 - 1)
    ids = np.array([top, 0, top - np.uint64(1), 5, top, 2**63], dtype=np.uint64)
    for threads in (1, 3):
        runs = SortedRuns((np.sort(ids[:3]), np.sort(ids[3:]))) if threads == 3 else SortedRuns((np.sort(ids),))
        _check(runs, np.sort(ids), 4, 0)
        _check(runs, np.sort(ids), 4, 63)


def test_an_empty_run_among_others_gives_empty_segments():
    ids = _ids(2000, 30, 4, 7)
    runs = SortedRuns((np.empty(0, np.uint64), np.sort(ids[:900]), np.empty(0, np.uint64), np.sort(ids[900:])))
    _check(runs, np.sort(ids), 9, 4)
    assert all(b.segments[0] == (0, 0) and b.segments[2] == (0, 0) for b in runs.buckets(9, 4))
