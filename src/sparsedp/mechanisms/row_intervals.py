"""Per-row intervals added to a released table: ``<column>_lo`` / ``<column>_hi`` next to each value column.

Post-processing only: every interval is a function of the row's released values and of public laws
(:class:`~sparsedp.accounting.intervals.RowLaws`, from the calibration), so adding it costs no privacy and reads
no data. For a count or SUM column ``value ± width`` (``width`` the exact half-width of
:meth:`~sparsedp.accounting.intervals.LinearNoise.halfwidth`; a count's lower end is raised to 0, which never
excludes a true count); for a MEAN column :func:`~sparsedp.accounting.intervals.ratio_interval` of the row's
mean and count. Guarantees and how to read them: ``docs/proofs/intervals.md``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from ..accounting.intervals import Halfwidth, LinearNoise, RowLaws, ratio_interval

__all__ = ["IntervalColumns", "interval_names", "add_intervals", "interval_notes", "CONDITIONAL_NOTE"]

#: the report's statement of what the intervals mean for released (selected) keys
CONDITIONAL_NOTE = (
    "intervals are exact over the noise for every key, released or not, but the table shows released keys "
    "only: a key near the release threshold is released mostly when its count noise was positive, so "
    "conditionally on its release its count (and a MEAN dividing by it) tends to be too high and its interval "
    "to sit too high; read an interval at its stated level for keys far above the threshold (release "
    "probability near 1: Result.release_probability(count)), as optimistic for keys near it")


@lru_cache(maxsize=256)
def _halfwidth(noise: LinearNoise, level: float) -> Halfwidth:
    return noise.halfwidth(level)


@dataclass(frozen=True)
class IntervalColumns:
    """What :func:`add_intervals` added: per value column its exact coverage (>= the level)."""

    level: float
    coverage: dict[str, float]


def interval_names(column: str) -> tuple[str, str]:
    """The two columns of ``column``'s interval."""
    return f"{column}_lo", f"{column}_hi"


def add_intervals(table: Any, laws: RowLaws, level: float, count_column: str,
                  other: tuple[str, LinearNoise] | None = None) -> tuple[Any, IntervalColumns]:
    """``table`` (a ``pyarrow.Table`` of released rows) with ``<c>_lo``/``<c>_hi`` after every column ``c``
    that ``laws`` gives a law for, and the exact coverage of each. ``count_column``: the noisy count (a MEAN's
    interval reads it; its own interval's lower end is raised to 0). ``other``: ``(flag column, law)`` of the
    other row (``release(..., other=True)``): its count's interval uses that law (its noise, independent of which
    keys were released), its other columns' intervals are null."""
    import pyarrow as pa

    cols: dict[str, Any] = {}
    cov: dict[str, float] = {}
    mask = np.zeros(table.num_rows, dtype=bool)
    if other is not None and other[0] in table.column_names:
        mask = np.asarray(table.column(other[0]).to_numpy(zero_copy_only=False), dtype=bool)
    for name in table.column_names:
        cols[name] = table.column(name)
        if name in laws.additive:
            h = _halfwidth(laws.additive[name], level)
            x = np.asarray(table.column(name).to_numpy(zero_copy_only=False), dtype=np.float64)
            width = np.full(x.size, h.width)
            null = mask
            if name == count_column and other is not None:
                ho = _halfwidth(other[1], level)
                width, null = np.where(mask, ho.width, h.width), np.zeros(x.size, dtype=bool)
                cov[f"{name} (other row)"] = ho.coverage
            lo, hi = x - width, x + width
            if name == count_column:
                lo = np.maximum(lo, 0.0)
            whole = bool(np.all(width == np.floor(width)))
            cols.update(_pair(name, lo, hi, table.schema.field(name).type, whole, null))
            cov[name] = h.coverage
        elif name in laws.means:
            m = np.asarray(table.column(name).to_numpy(zero_copy_only=False), dtype=np.float64)
            n = np.asarray(table.column(count_column).to_numpy(zero_copy_only=False), dtype=np.float64)
            lo, hi, c = ratio_interval(np.where(mask, 0.0, m), np.where(mask, 1.0, n), laws.means[name], level)
            cols.update(_pair(name, lo, hi, pa.float64(), False, mask))
            cov[name] = c
    return pa.table(cols), IntervalColumns(level=level, coverage=cov)


def _pair(name: str, lo: Any, hi: Any, dtype: Any, whole: bool, null: Any) -> dict[str, Any]:
    """The two Arrow arrays (null where ``null``), integer when the value column is and the half-widths are
    integers."""
    import pyarrow as pa

    lo_n, hi_n = interval_names(name)
    kind = np.int64 if pa.types.is_integer(dtype) and whole else np.float64
    mask = np.asarray(null, dtype=bool) if np.any(null) else None
    return {lo_n: pa.array(np.asarray(lo).astype(kind), mask=mask),
            hi_n: pa.array(np.asarray(hi).astype(kind), mask=mask)}


def interval_notes(laws: RowLaws | None, level: float, coverage: dict[str, float], mechanism: str) -> tuple[str, ...]:
    """The report's lines on the intervals: each column's half-width and exact coverage, what they cover, the
    columns without one and why, and :data:`CONDITIONAL_NOTE`."""
    if laws is None:
        return (f"no per-row intervals: {mechanism}'s released values have no exact per-row noise law here "
                f"(float noise, a sketch, or a data-dependent shift)",)
    parts = []
    for name, c in coverage.items():
        if name in laws.additive:
            h = _halfwidth(laws.additive[name], level)
            parts.append(f"{name} ± {h.width:.6g} (exact coverage {c:.4%})")
        elif name.endswith(" (other row)"):
            parts.append(f"{name}: its own noise (exact coverage {c:.4%}; it covers the bounded total of the keys "
                         f"not released, whichever they are)")
        else:
            parts.append(f"{name}: from the row's mean and count (coverage >= {c:.4%})")
    notes = [f"intervals at {level:.4g} ({'; '.join(parts)}) in columns <column>_lo/<column>_hi; they cover "
             f"{laws.covers} (docs/proofs/intervals.md)"]
    notes += [f"no interval for {name}: {why}" for name, why in laws.missing.items()]
    if not laws.every_key:
        notes.append(CONDITIONAL_NOTE)
    return tuple(notes)
