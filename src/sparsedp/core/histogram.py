"""The histogram values mechanisms consume and produce (engines build :class:`SparseHistogram`).

A mechanism's per-key step works on the ``int64`` count array only and returns the *positions* of the
released keys and their noisy counts; keys are carried along untouched, so any key representation
(a pyarrow Table, a Polars DataFrame, a numpy array, a list of tuples) works, and engines (including
Spark partitions) can run the same kernel.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from ..errors import InputDataError


def take_keys(keys: Any, idx: np.ndarray) -> Any:
    """Select rows ``idx`` of a key container (Arrow/Polars/pandas table, numpy array, or list)."""
    if hasattr(keys, "take") and not isinstance(keys, np.ndarray):  # pyarrow Table/Array, pandas
        try:
            return keys.take(idx)
        except TypeError:
            pass
    if hasattr(keys, "__getitem__") and type(keys).__module__.startswith("polars"):
        return keys[idx]
    if isinstance(keys, np.ndarray):
        return keys[idx]
    return [keys[i] for i in idx.tolist()]


@dataclass(frozen=True)
class SparseHistogram:
    """Keys with their true (bounded) counts; keys absent are zero.

    ``counts[i]`` is the count of the i-th key (row i of ``keys``); counts are non-negative ``int64``.
    Keys must be distinct: engines guarantee it by construction (group-by), :meth:`from_mapping` by
    being a mapping.
    """

    keys: Any
    counts: np.ndarray
    #: True when the producer guarantees distinct keys by construction (an engine's group-by); lets
    #: :func:`check_distinct_keys` skip the O(n) hash check.
    distinct: bool = False

    def __post_init__(self) -> None:
        c = np.asarray(self.counts)
        if c.ndim != 1:
            raise InputDataError(f"counts must be one-dimensional, got shape {c.shape}")
        if c.dtype.kind not in "iu":
            raise InputDataError(f"counts must be integers, got dtype {c.dtype}")
        c = c.astype(np.int64, copy=False)
        if c.size and c.min() < 0:
            raise InputDataError("counts must be non-negative")
        if len(self.keys) != c.size:
            raise InputDataError(f"{len(self.keys)} keys but {c.size} counts")
        object.__setattr__(self, "counts", c)

    @classmethod
    def from_mapping(cls, m: Mapping[Any, int]) -> "SparseHistogram":
        keys = list(m.keys())
        bad = [(k, x) for k, x in m.items() if isinstance(x, bool) or not isinstance(x, numbers.Integral)]
        if bad:
            k, x = bad[0]
            raise InputDataError(f"counts must be integers; key {k!r} has count {x!r} ({type(x).__name__})")
        return cls(keys=keys, counts=np.fromiter((int(x) for x in m.values()), dtype=np.int64, count=len(keys)),
                   distinct=True)

    def __len__(self) -> int:
        return int(self.counts.size)


def check_distinct_keys(keys: Any) -> None:
    """Raise :class:`InputDataError` if a key occurs twice (before any noise is drawn).

    Numpy arrays that are strictly increasing pass in O(n); otherwise a hash count (Polars ``n_unique``)
    or a Python set is used. Works for numpy arrays, lists (of scalars or tuples), Arrow/Polars/pandas
    tables.
    """
    n = len(keys)
    if n < 2:
        return
    mod = type(keys).__module__
    if isinstance(keys, np.ndarray):
        if keys.ndim == 1 and keys.dtype.kind in "iuf" and bool(np.all(keys[1:] > keys[:-1])):
            return
        if keys.ndim == 1 and keys.dtype.kind != "O":
            import polars as pl

            uniq = pl.Series(keys).n_unique()
        elif keys.ndim == 2:
            uniq = np.unique(keys, axis=0).shape[0]
        else:
            uniq = len(set(keys.tolist()))
    elif mod.startswith("polars"):
        uniq = keys.n_unique()
    elif mod.startswith("pyarrow"):
        import polars as pl

        uniq = pl.from_arrow(keys).n_unique()
    elif mod.startswith("pandas"):
        uniq = n - int(keys.duplicated().sum())
    else:
        uniq = len(set(keys))
    if uniq != n:
        raise InputDataError(f"keys must be distinct: {n - uniq} duplicate key(s) among {n}; aggregate the "
                             "counts per key (group by) before releasing")


@dataclass(frozen=True)
class Release:
    """A private release: the released keys with their noisy counts, and how it was calibrated."""

    keys: Any
    counts: np.ndarray
    calibration: Any  # accounting.Calibration
    n_keys_in: int
    n_keys_out: int
    extra: Mapping[str, Any] = field(default_factory=dict)  # e.g. top-k's released threshold t~

    def to_dict(self) -> dict[Any, Any]:
        """Released {key: noisy count} (keys as Python objects)."""
        keys = self.keys
        if hasattr(keys, "to_pylist"):
            keys = [tuple(r.values()) if len(r) > 1 else next(iter(r.values())) for r in keys.to_pylist()]
        elif hasattr(keys, "rows"):
            keys = [r if len(r) > 1 else r[0] for r in keys.rows()]
        return dict(zip(list(keys), self.counts.tolist()))
