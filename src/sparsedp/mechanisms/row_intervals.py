"""Per-row intervals added to a released table: ``<column>_lo`` / ``<column>_hi`` next to each value column.

Post-processing only: every interval is a function of the row's released values and of public laws
(:class:`~sparsedp.accounting.intervals.RowLaws`, from the calibration), so adding it costs no privacy and reads
no data. For a count or SUM column ``value ± width`` (``width`` the exact half-width of
:meth:`~sparsedp.accounting.intervals.LinearNoise.halfwidth`; a count's lower end is raised to 0, which never
excludes a true count); for a MEAN column :func:`~sparsedp.accounting.intervals.ratio_interval` of the row's
mean and count; a VARIANCE/STD column's interval is added by the per-key step, which holds the noisy sums it
needs (:func:`~sparsedp.accounting.intervals.variance_interval`), and only described here. Guarantees and how to read them: ``docs/proofs/intervals.md``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..accounting.intervals import RowLaws, ratio_interval
from ..core.arrow_arrays import arrow_to_float64, numpy_to_arrow
from ..errors import InvalidParameterError

__all__ = ["IntervalColumns", "interval_names", "add_intervals", "interval_notes", "CONDITIONAL_NOTE", "INDEPENDENT_NOTE",
           "VARIANCE_NOTE"]

#: the report's statement of what the intervals mean for released (selected) keys
INDEPENDENT_NOTE = (
    "the released values' noise is drawn independently of which keys were selected (two-stage: stage 2 counts "
    "the keys stage 1 selected with fresh noise), so each interval has its stated coverage exactly also for the "
    "keys shown, with no selection bias")

CONDITIONAL_NOTE = (
    "intervals are exact over the noise for every key, released or not, but the table shows released keys "
    "only: a key near the release threshold is released mostly when its count noise was positive, so "
    "conditionally on its release its count (and a MEAN dividing by it) tends to be too high and its interval "
    "to sit too high; read an interval at its stated level for keys far above the threshold (release "
    "probability near 1: Result.release_probability(count)), as optimistic for keys near it")


#: the report's statement on VARIANCE/STD intervals (accounting.intervals.variance_interval)
VARIANCE_NOTE = (
    "VARIANCE/STD intervals are conservative: the noisy count, sum and sum of squares are each taken at level "
    "1 - (1 - level)/3 and combined by interval arithmetic (union bound), so they cover the clamped variance of "
    "the units' clipped per-key totals on the grid (its square root for STD) with probability at least the "
    "stated coverage, usually more, and are wider than an exact interval would be")
#: why a VARIANCE/STD column of a release has no interval
NO_VARIANCE = ("this release path does not carry the noisy sum and sum of squares to the interval step (its "
               "interval needs them and they are not published)")


@dataclass(frozen=True)
class IntervalColumns:
    """What :func:`add_intervals` added: per value column its exact coverage (>= the level)."""

    level: float
    coverage: dict[str, float]
    #: columns with a law but no interval, and why (a law too wide to compute exactly)
    skipped: dict[str, str] = field(default_factory=dict)


def interval_names(column: str) -> tuple[str, str]:
    """The two columns of ``column``'s interval."""
    return f"{column}_lo", f"{column}_hi"


def add_intervals(table: Any, laws: RowLaws, level: float, count_column: str) -> tuple[Any, IntervalColumns]:
    """``table`` (a ``pyarrow.Table`` of released rows) with ``<c>_lo``/``<c>_hi`` after every column ``c``
    that ``laws`` gives a law for, and the exact coverage of each. ``count_column``: the noisy count (a MEAN's
    interval reads it; its own interval's lower end is raised to 0)."""
    import pyarrow as pa

    cols: dict[str, Any] = {}
    cov: dict[str, float] = {}
    skipped: dict[str, str] = {}
    for name in table.column_names:
        cols[name] = table.column(name)
        why = _too_wide(laws, name, level)
        if why is not None:  # no exact interval computable for this law: said in the report, nothing fails
            skipped[name] = why
        elif name in laws.additive:
            h = laws.additive[name].halfwidth(level)
            x = arrow_to_float64(table.column(name))
            lo, hi = x - h.width, x + h.width
            if name == count_column:  # a true count is >= 0: intersect with [0, ∞) (hi too, so lo <= hi)
                lo, hi = np.maximum(lo, 0.0), np.maximum(hi, 0.0)
            cols.update(_pair(name, lo, hi, table.schema.field(name).type, h.width))
            cov[name] = h.coverage
        elif name in laws.means:
            m = arrow_to_float64(table.column(name))
            n = arrow_to_float64(table.column(count_column))
            lo, hi, c = ratio_interval(m, n, laws.means[name], level)
            cols.update(_pair(name, lo, hi, pa.float64(), 0.5))
            cov[name] = c
        elif name in laws.variances and interval_names(name)[0] in table.column_names:
            cov[name] = laws.variances[name].box(level).coverage  # added by the per-key step (noisy sums)
    return pa.table(cols), IntervalColumns(level=level, coverage=cov, skipped=skipped)


def _too_wide(laws: RowLaws, name: str, level: float) -> str | None:
    """Why ``name``'s law gives no exact interval (its convolution is beyond the exact computation's size:
    :class:`~sparsedp.accounting.intervals.LinearNoise`), or None."""
    try:
        if name in laws.additive:
            laws.additive[name].halfwidth(level)
        elif name in laws.means:
            m = laws.means[name]
            m.column.halfwidth(math.sqrt(level))
            m.count.halfwidth(math.sqrt(level))
        elif name in laws.variances:
            laws.variances[name].box(level)
    except InvalidParameterError as e:
        return str(e)
    return None


def _pair(name: str, lo: Any, hi: Any, dtype: Any, width: float) -> dict[str, Any]:
    """The two Arrow arrays, integer when the value column is and the half-width is an integer."""
    import pyarrow as pa

    lo_n, hi_n = interval_names(name)
    if pa.types.is_integer(dtype) and float(width).is_integer():
        return {lo_n: numpy_to_arrow(lo, np.int64), hi_n: numpy_to_arrow(hi, np.int64)}
    return {lo_n: numpy_to_arrow(lo, np.float64), hi_n: numpy_to_arrow(hi, np.float64)}


def interval_notes(laws: RowLaws | None, level: float, coverage: dict[str, float], mechanism: str,
                   skipped: dict[str, str] | None = None) -> tuple[str, ...]:
    """The report's lines on the intervals: each column's half-width and exact coverage, what they cover, the
    columns without one and why, and :data:`CONDITIONAL_NOTE`."""
    if laws is None:
        return (f"no per-row intervals: {mechanism}'s released values have no exact per-row noise law here "
                f"(float noise, a sketch, or a data-dependent shift)",)
    parts = []
    if not coverage and skipped:  # every column's law too wide: no interval at all
        return tuple(f"no interval for {name}: {why}" for name, why in skipped.items())
    for name, c in coverage.items():
        if name in laws.additive:
            h = laws.additive[name].halfwidth(level)
            parts.append(f"{name} ± {h.width:.6g} (exact coverage {c:.4%})")
        elif name in laws.variances:
            parts.append(f"{name}: from the row's noisy count, sum and sum of squares (coverage >= {c:.4%})")
        else:
            parts.append(f"{name}: from the row's mean and count (coverage >= {c:.4%})")
    notes = [f"intervals at {level:.4g} ({'; '.join(parts)}) in columns <column>_lo/<column>_hi; they cover "
             f"{laws.covers} (docs/proofs/intervals.md)"]
    if any(name in laws.variances for name in coverage):
        notes.append(VARIANCE_NOTE)
    notes += [f"no interval for {name}: {why}" for name, why in laws.missing.items()]
    skipped = skipped or {}
    notes += [f"no interval for {name}: {why}" for name, why in skipped.items()]
    notes += [f"no interval for {name}: {NO_VARIANCE}" for name in laws.variances
              if name not in coverage and name not in skipped]
    if laws.independent_of_release:
        notes.append(INDEPENDENT_NOTE)
    elif not laws.every_key:
        notes.append(CONDITIONAL_NOTE)
    return tuple(notes)
