"""Numeric columns between numpy and Arrow without pandas: pyarrow's ``pa.array(ndarray)``, ``to_numpy`` and
``to_pandas_dtype`` each import pandas (about 0.4 s of CPU at start-up), which a release does not otherwise need."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["numpy_to_arrow", "arrow_to_float64", "take_rows"]


def numpy_to_arrow(a: np.ndarray, dtype: npt.DTypeLike | None = None) -> Any:
    """A 1-d numeric numpy array as a ``pyarrow`` array over the same buffer (``dtype``: cast first). Unlike
    ``pa.array(a)`` it never imports pandas (pyarrow checks every ``pa.array`` input for pandas objects: about
    0.4 s of CPU at start-up)."""
    import pyarrow as pa

    a = np.ascontiguousarray(a if dtype is None else np.asarray(a, dtype=dtype))
    if a.ndim != 1 or a.dtype.kind not in "iuf" or a.dtype.byteorder == ">":
        return pa.array(a)
    return pa.Array.from_buffers(pa.from_numpy_dtype(a.dtype), a.size, [None, pa.py_buffer(a)])


def arrow_to_float64(column: Any) -> np.ndarray:
    """An Arrow (chunked) numeric column's values as float64, read from its data buffer when it has no nulls;
    nulls (or another type) go through ``to_numpy`` (NaN for nulls)."""
    import pyarrow as pa

    arr = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    t = arr.type
    if arr.null_count == 0 and (pa.types.is_integer(t) or pa.types.is_floating(t)):
        kind = "f" if pa.types.is_floating(t) else "i" if pa.types.is_signed_integer(t) else "u"
        raw = np.frombuffer(arr.buffers()[1], dtype=np.dtype(f"{kind}{t.bit_width // 8}"), count=len(arr),
                            offset=arr.offset)
        return raw.astype(np.float64)
    return np.asarray(arr.to_numpy(zero_copy_only=False), dtype=np.float64)


def take_rows(table: Any, idx: np.ndarray) -> Any:
    """``table.take(idx)`` (the rows ``idx`` of an Arrow Table, in that order; ``idx`` a 1-d integer numpy array)
    without importing ``pyarrow.compute``: that module builds its Python wrappers of every Arrow function on
    import (about 0.05 s of a fresh process's first release, issue 31). A run of consecutive rows (none, all, or
    one stretch) is a zero-copy ``slice``; any other selection calls Arrow's ``take`` kernel itself, through
    ``pyarrow._compute.call_function`` with ``TakeOptions(boundscheck=True)``, which is what ``Table.take``
    calls; where that module cannot be loaded, ``table.take``. The same values and types either way."""
    idx = np.asarray(idx)
    n = int(idx.size)
    if n == 0:
        return table.slice(0, 0)
    start = int(idx[0])
    if 0 <= start and int(idx[-1]) == start + n - 1 and start + n <= table.num_rows and (
            n == 1 or bool(np.all(np.diff(idx) == 1))):
        return table.slice(start, n)
    indices = numpy_to_arrow(idx, np.int64)
    try:
        from pyarrow import _compute
    except ImportError:  # a pyarrow without the private module: its public route
        return table.take(indices)
    return _compute.call_function("take", [table, indices], _compute.TakeOptions(boundscheck=True))
