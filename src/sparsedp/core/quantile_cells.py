"""What the engine hands the quantile mechanism: per released key, the grid-cell counts of its bounded values.

Curator-only (never released): :class:`KeyCells` holds, for one :class:`~sparsedp.aggregates.Quantile`, the
sparse (key, cell, count) triples of the values that survived the contribution bounding
(:mod:`sparsedp.engines.quantile_cells`); ``key`` indexes the released keys' table.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["KeyCells"]


@dataclass(frozen=True, eq=False)
class KeyCells:
    """Sparse cell counts of ``n_keys`` keys: ``count[i]`` bounded values of key ``key[i]`` fell in grid cell
    ``cell[i]`` (int64 arrays, sorted by key then cell, counts >= 1). ``rows``: values counted in all (curator)."""

    n_keys: int
    key: np.ndarray
    cell: np.ndarray
    count: np.ndarray

    @property
    def rows(self) -> int:
        return int(self.count.sum())

    def dense(self, key: int, cells: int) -> np.ndarray:
        """The cell counts of one key as a dense int64 array of length ``cells``."""
        lo, hi = np.searchsorted(self.key, [key, key + 1])
        out = np.zeros(cells, dtype=np.int64)
        np.add.at(out, self.cell[lo:hi], self.count[lo:hi])
        return out
