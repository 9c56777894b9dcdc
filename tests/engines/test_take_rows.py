"""``core.arrow_arrays.take_rows`` equals ``pyarrow.Table.take`` (values, types, nulls, dictionaries, several
chunks) on every kind of selection: none, all, a stretch of consecutive rows, one row, any order, repeats; and an
index out of range fails as ``Table.take`` does (issue 31: the release's row selections without
``pyarrow.compute``)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from sparsedp.core.arrow_arrays import take_rows


def _table() -> pa.Table:
    a = pa.table({"s": pa.array(["a", None, "ccc", "d", "", "f", "g"], pa.large_string()),
                  "i": pa.array([1, 2, None, 4, 5, 6, 7], pa.int64()),
                  "d": pa.array(["x", "y", "x", None, "z", "y", "x"]).dictionary_encode()})
    # two chunks: a selection may span both
    return pa.concat_tables([a.slice(0, 3), a.slice(3)])


SELECTIONS = [[], list(range(7)), [2, 3, 4], [5], [0], [6], [3, 1], [6, 0, 2], [1, 1, 4], [4, 5, 6, 0],
              [0, 1, 3], [2, 4]]


@pytest.mark.parametrize("idx", SELECTIONS)
@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint32])
def test_take_rows_equals_table_take(idx, dtype):
    t = _table()
    got = take_rows(t, np.asarray(idx, dtype=dtype))
    want = t.take(pa.array(np.asarray(idx, np.int64), pa.int64()))
    assert got.schema == want.schema
    assert got.equals(want)
    assert got.to_pylist() == [t.to_pylist()[i] for i in idx]


def test_out_of_range_fails_like_take():
    t = _table()
    for idx in ([7], [6, 7], [-1], [3, 9, 1]):
        with pytest.raises(IndexError):
            t.take(pa.array(idx, pa.int64()))
        with pytest.raises(IndexError):
            take_rows(t, np.asarray(idx, np.int64))


def test_the_kernel_route_is_arrow_take(monkeypatch):
    """Without the private kernel module the public ``Table.take`` is used: same result."""
    import builtins

    real = builtins.__import__

    def no_private(name, globals=None, locals=None, fromlist=(), level=0):
        if name == "pyarrow" and fromlist and "_compute" in fromlist:
            raise ImportError("no pyarrow._compute")
        return real(name, globals, locals, fromlist, level)

    t = _table()
    want = take_rows(t, np.asarray([6, 0, 2]))
    monkeypatch.setattr(builtins, "__import__", no_private)
    assert take_rows(t, np.asarray([6, 0, 2])).equals(want)
