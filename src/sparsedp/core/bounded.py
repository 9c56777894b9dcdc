"""What an engine hands a mechanism: bounded histograms held in this process, what bounding did, released rows,
and the (unit, key) pairs of the pair primitives (:class:`~sparsedp.core.engine.Engine`).

Every value here is curator-only (never released) except :class:`LocalRelease`, which holds released rows.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Mapping

import numpy as np

__all__ = ["BoundingStats", "LocalHistogram", "LocalRelease", "UnitPairs", "KeptPairs", "PairIds", "OneGroupRows",
           "RoundsInput"]


@dataclass(frozen=True)
class BoundingStats:
    """What contribution bounding did (curator-facing; NOT differentially private, never released).

    Attributes:
        rows_in: input rows.
        units_in: distinct privacy units.
        pairs_in: distinct (unit, key) pairs, i.e. rows after de-duplication.
        duplicate_rows_removed: ``rows_in - pairs_in`` (repeat contributions of a unit to a key).
        units_over_l0: units that had more than ``l0`` distinct keys and were truncated.
        pairs_dropped_l0: (unit, key) pairs removed by the ``l0`` bound.
        keys_in: distinct keys in the input.
        keys_bounded: keys with a non-zero count after bounding.
        keys_out: keys handed to the mechanism (count >= ``pre_threshold``).
        l0: the bound applied (``None``: no ℓ0 bound, de-duplication only).

    ``None`` for a unit- or pair-level number the engine does not compute (Spark: each would cost another
    shuffle of the input; :class:`~sparsedp.engines.spark_engine.SparkBoundingStats`).
    """

    rows_in: int
    units_in: int | None
    pairs_in: int | None
    units_over_l0: int | None
    pairs_dropped_l0: int | None
    keys_in: int | None
    keys_bounded: int
    keys_out: int
    l0: int | None

    @property
    def duplicate_rows_removed(self) -> int | None:
        return None if self.pairs_in is None else self.rows_in - self.pairs_in

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["duplicate_rows_removed"] = self.duplicate_rows_removed
        return d


@dataclass(frozen=True)
class LocalHistogram:
    """A bounded histogram held in this process (the embedded engines' :meth:`Engine.histogram`).

    ``keys``: ``pyarrow.Table`` of the key columns, one row per key with a bounded count >= the pre-threshold,
    in canonical key order (:func:`~sparsedp.core.key_order.canonical_order`); ``counts``: their bounded
    distinct-unit counts (int64); ``stats``: what bounding did (curator only); ``columns``: for a release with
    SUM/MEAN aggregates, one int64 array per distinct noisy grid column (:func:`sparsedp.aggregates.noise_columns`
    order) aligned with ``counts``: each key's grid sum over exactly the (unit, key) pairs its count keeps
    (:func:`~sparsedp.engines.pair_ids.bounded_raw_counts_with_sums`); empty otherwise. Never released.
    """

    keys: Any
    counts: Any
    stats: BoundingStats
    columns: tuple[np.ndarray, ...] = ()

    def __len__(self) -> int:
        return int(len(self.counts))


@dataclass(frozen=True)
class LocalRelease:
    """Released keys (``pyarrow.Table``) and their noisy values, as an embedded engine returns them;
    ``columns``: the released SUM/MEAN columns (output name → float64 values in value units), aligned."""

    keys: Any
    values: Any
    columns: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class UnitPairs:
    """The distinct ``(unit, *by)`` pairs of an input, read in this process after every input check the engines
    make (columns, duplicate names, mixed types, nulls, NaN keys, no rows): :meth:`Engine.distinct_pairs`.

    ``pairs``: Polars DataFrame of the unit column and the key columns, one row per distinct pair, in no
    particular order; ``rows``: the number of input rows. Curator only."""

    pairs: Any
    rows: int


@dataclass(frozen=True)
class KeptPairs:
    """The pairs kept by the engines' one ℓ0 choice (:meth:`Engine.kept_pairs`), as integer codes.

    ``unit_codes[i]``, ``key_codes[i]``: the i-th kept pair's unit (its dense rank among the kept units' values,
    ``0 … n_units − 1``) and key (its row of ``keys``); ``keys``: ``pyarrow.Table`` of every distinct input key in
    canonical key order (checked: no nested values, no NaN); ``stats``: what bounding did, with
    ``keys_bounded = keys_out = len(keys)`` (a mechanism that drops keys narrows them). Curator only."""

    unit_codes: np.ndarray
    key_codes: np.ndarray
    n_units: int
    keys: Any
    stats: BoundingStats


@dataclass(frozen=True)
class PairIds:
    """The distinct (unit, key) pairs of an input as integer ids (:meth:`Engine.pair_ids`), for the user-level
    Misra–Gries sketch: ``unit_ids`` are the dense ranks of the unit values (increasing value: a fixed public
    order), ``key_ids`` the rows of ``keys`` (``pyarrow.Table`` of the distinct keys sorted by value, checked);
    ``rows``: input rows, ``pairs``: distinct pairs. Curator only."""

    unit_ids: np.ndarray
    key_ids: np.ndarray
    keys: Any
    rows: int
    pairs: int


@dataclass(frozen=True)
class OneGroupRows:
    """The rows of an input restricted to the listed groups and, per unit, to ONE group (the keyed choice of
    :meth:`Engine.one_group_per_unit`). ``rows``: the kept rows (Polars DataFrame, the unit and key columns);
    ``n_per_group``: Polars DataFrame of the group value and ``len``, its number of units (groups without units
    absent); ``rows_in``: input rows before the filter. Curator only."""

    rows: Any
    n_per_group: Any
    rows_in: int


@dataclass(frozen=True)
class RoundsInput:
    """What the later rounds of the adaptive-weighting set union read (:meth:`~sparsedp.core.engine.Engine.
    round_histogram` returns it with round 1's histogram; curator only, never released): ``pairs``, the engine's
    own handle on the checked input (the embedded engines: its sorted pair ids, read once; Spark: the checked
    frame); ``secret``, round 1's ℓ0 secret (``mad`` keeps that choice); the unit and key columns, the bound
    and the integer weights ``weights[t − 1] = W_t``."""

    pairs: Any = field(repr=False)
    secret: bytes = field(repr=False)
    unit: str
    by: tuple[str, ...]
    l0: int
    weights: tuple[int, ...]
