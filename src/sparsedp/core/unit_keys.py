"""Per-unit key counts: what an engine counts for ``max_groups_per_unit="auto"`` (:mod:`sparsedp.auto_bound`).

Never released: the choice made from them is (Report Noisy Max, ``docs/proofs/auto-bound.md``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

__all__ = ["UnitKeyCounts"]


@dataclass(frozen=True)
class UnitKeyCounts:
    """What the engine counts for the choice (never released): ``units`` = N, and ``at_most[i]`` = A_{c_i}, the
    number of units with at most ``candidates[i]`` distinct keys."""

    candidates: tuple[int, ...]
    units: int
    at_most: tuple[int, ...]

    @classmethod
    def from_degrees(cls, candidates: Sequence[int], degrees: Any, units: Any) -> "UnitKeyCounts":
        """From a histogram of distinct keys per unit: ``degrees[j]`` keys held by ``units[j]`` units."""
        d = np.asarray(degrees, dtype=np.int64)
        n = np.asarray(units, dtype=np.int64)
        return cls(candidates=tuple(candidates), units=int(n.sum()),
                   at_most=tuple(int(n[d <= c].sum()) for c in candidates))
