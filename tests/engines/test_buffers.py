"""engines/buffers.py: the pair ids' array on ordinary pages behaves as a new writable numpy array."""

import gc
import mmap
import sys

import numpy as np
import pytest

from sparsedp.engines.buffers import _MIN_BYTES, fresh_uint64


@pytest.mark.parametrize("n", [0, 1, 1000, _MIN_BYTES // 8 - 1, _MIN_BYTES // 8, 3 * _MIN_BYTES // 8 + 5])
def test_a_new_writable_uint64_array_of_n_elements(n):
    a = fresh_uint64(n)
    assert a.dtype == np.uint64 and a.shape == (n,) and a.flags.writeable and a.flags.c_contiguous
    a[:] = np.arange(n, dtype=np.uint64) * np.uint64(3)
    assert np.array_equal(a, np.arange(n, dtype=np.uint64) * np.uint64(3))
    if n:
        a[-1] = np.uint64(2**64 - 1)  # the whole range of the type
        assert int(a[-1]) == 2**64 - 1


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="private anonymous mappings: Linux")
def test_large_arrays_live_in_their_own_mapping_and_small_ones_are_numpys():
    large = fresh_uint64(_MIN_BYTES // 8).base
    assert isinstance(large, memoryview) and isinstance(large.obj, mmap.mmap)  # np.frombuffer's view of it
    assert fresh_uint64(_MIN_BYTES // 8 - 1).base is None


def test_a_view_keeps_the_mapping_alive_after_the_array_is_freed():
    n = _MIN_BYTES // 8 + 10
    a = fresh_uint64(n)
    a[:] = 7
    view = a[n // 2:]
    del a
    gc.collect()
    view.sort()  # in place, as the sorted runs do on views of the pair ids
    assert view.size == n - n // 2 and bool((view == 7).all())


def test_a_mapping_that_fails_leaves_the_allocation_to_numpy(monkeypatch):
    def refuse(*args, **kwargs):
        raise OSError(12, "Cannot allocate memory")

    monkeypatch.setattr(mmap, "mmap", refuse)
    a = fresh_uint64(_MIN_BYTES // 8 + 1)
    assert a.base is None and a.flags.writeable and a.size == _MIN_BYTES // 8 + 1
