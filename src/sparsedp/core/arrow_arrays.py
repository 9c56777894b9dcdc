"""Numeric columns between numpy and Arrow without pandas: pyarrow's ``pa.array(ndarray)``, ``to_numpy`` and
``to_pandas_dtype`` each import pandas (about 0.4 s of CPU at start-up), which a release does not otherwise need."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["numpy_to_arrow", "arrow_to_float64"]


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
