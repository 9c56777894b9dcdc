"""What an embedded engine computes natively before the shared ℓ0 choice (:class:`RawCounts`): a value of the
engines' own, below the drivers that make it (:mod:`sparsedp.engines.pair_ids`) and consume it
(:class:`~sparsedp.engines.base.EmbeddedEngine`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # Polars and pyarrow are imported where the counts are made (``import sparsedp`` stays light)
    import polars as pl
    import pyarrow as pa

__all__ = ["RawCounts"]


@dataclass(frozen=True)
class RawCounts:
    """What an engine computes natively (steps 1–2 of :mod:`sparsedp.engines.base`); :meth:`~sparsedp.engines.base.EmbeddedEngine.histogram` does
    the rest.

    Attributes:
        rows_in, units_in, pairs_in: see :class:`~sparsedp.core.bounded.BoundingStats`.
        units_over_l0: units with more than ``l0`` keys (0 when ``l0`` is None).
        key_counts: ``pyarrow.Table`` (or Polars DataFrame) of the key columns plus :data:`~sparsedp.engines.bounding.COUNT` (distinct units
            per key, before the ℓ0 bound).
        heavy_pairs: ``pyarrow.Table`` (or Polars DataFrame) with the unit column and the key columns: every
            distinct pair of every unit with more than ``l0`` keys, in any order. ``None`` when ``l0`` is None.
        pairs_dropped_l0: see the attribute comment (``None``: the choice is left to :func:`~sparsedp.engines.bounding.bound`).
    """

    rows_in: int
    units_in: int
    pairs_in: int
    units_over_l0: int
    key_counts: pa.Table | pl.DataFrame
    heavy_pairs: pa.Table | pl.DataFrame | None
    #: set by engines that apply the ℓ0 choice themselves (:meth:`~sparsedp.engines.base.EmbeddedEngine.bounded_raw_counts`): ``key_counts``
    #: then holds the *bounded* counts of every input key and ``heavy_pairs`` is None
    pairs_dropped_l0: int | None = None
