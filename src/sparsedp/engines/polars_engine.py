"""Polars engine (the default): one pass over the rows, then integer work on the distinct pairs.

Files are scanned lazily (``scan_parquet``/``scan_csv``) with only the unit and key columns projected, so a
file is never loaded into Python objects. The one pass over all rows hashes the key once (a dense key id per
row); the pairs become one ``u64`` id each, are de-duplicated by a sort, and the ℓ0 choice runs on integers
(:func:`sparsedp.engines.pair_ids.bounded_raw_counts`: the same choice as
:func:`~sparsedp.engines.bounding.select_pairs` and :func:`~sparsedp.engines.bounding.choose_from_per_key`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence, cast

from ..aggregates import Aggregate
from ..core import sources
from ..errors import InputDataError
from .base import EmbeddedEngine, RawCounts
from .bounding import COUNT
from .input_checks import check_nulls_and_rows
from .pair_ids import ReadPairs, RowChecks, bounded_raw_counts
from ..core.sources import InputData, to_lazy
from ..core.unit_keys import UnitKeyCounts

if TYPE_CHECKING:  # Polars is imported when the engine runs (``import sparsedp`` stays light)
    import polars as pl

    from ..core.engine import RandomSource


__all__ = ["PolarsEngine", "to_lazy"]


class PolarsEngine(EmbeddedEngine):
    """Bounded histograms with Polars: :meth:`bounded_raw_counts` applies the ℓ0 choice itself (fast path);
    :meth:`raw_counts` is the generic interface (choice left to :func:`~sparsedp.engines.bounding.bound`)."""

    name = "polars"

    def columns(self, data: InputData) -> list[str]:
        import polars as pl

        try:
            return to_lazy(data).collect_schema().names()
        except pl.exceptions.PolarsError as e:
            raise InputDataError(f"could not read the input: {e}") from None

    def bounded_raw_counts(self, data: InputData, privacy_unit: str, by: list[str], l0: int | None,
                           rng: RandomSource) -> RawCounts:
        import polars as pl

        lf = to_lazy(data).select([privacy_unit] + by)
        try:  # rows and nulls counted on the rows the pass over them reads (a file is read once)
            return bounded_raw_counts(lf, privacy_unit, by, l0, rng, checks=RowChecks())
        except pl.exceptions.PolarsError as e:
            raise InputDataError(f"could not read or group the input: {e}") from None

    def read_unit_key_counts(self, data: InputData, privacy_unit: str, by: Sequence[str], candidates: Sequence[int],
                             aggregates: Sequence[Aggregate] = ()) -> tuple[UnitKeyCounts, InputData]:
        """:meth:`~sparsedp.core.engine.Engine.read_unit_key_counts`: the rows are read once (with the SUM/MEAN
        values, checked), their sorted pairs kept for the release at the bound chosen."""
        rows = self.read_pairs(data, privacy_unit, by, aggregates)
        return UnitKeyCounts.from_degrees(candidates, *rows.degrees()), self.release_rows(rows, data)

    def release_rows(self, rows: ReadPairs, data: InputData) -> InputData:
        """The rows read, kept: the release at the chosen bound bounds the same sorted pairs (one read)."""
        return rows

    def raw_counts(self, data: InputData, privacy_unit: str, by: list[str], l0: int | None) -> RawCounts:
        import polars as pl

        cols = [privacy_unit] + by
        lf = to_lazy(data).select(cols)
        check = lf.select(pl.len().alias("__rows"), *[pl.col(c).null_count().alias(c) for c in cols])
        try:
            # Generic path (tests compare it with the fast path): de-duplicate, then group the distinct pairs.
            if sources.kind(data) == "polars":  # row and null counts are metadata of an in-memory frame
                frame = cast("pl.DataFrame", data)
                out = [frame.select(cols).null_count().with_columns(pl.lit(frame.height).alias("__rows")),
                       lf.unique().collect()]
            else:
                out = pl.collect_all([check, lf.unique()])
        except pl.exceptions.PolarsError as e:
            raise InputDataError(f"could not read or group the input: {e}") from None
        pairs = out[1].lazy()
        deg = pairs.group_by(privacy_unit).agg(pl.len().alias("__d")).collect()
        over = pl.col("__d") > (l0 if l0 is not None else 2**62)
        s = deg.select(pl.len().alias("units"), pl.col("__d").sum().alias("pairs"), over.sum().alias("heavy"))
        key_counts = pairs.group_by(by).agg(pl.len().cast(pl.Int64).alias(COUNT)).collect()
        heavy = None
        if l0 is not None:
            heavy_units = deg.lazy().filter(over).select(privacy_unit)
            heavy = pairs.join(heavy_units, on=privacy_unit, how="semi").collect()
        c = out[0].row(0, named=True)
        check_nulls_and_rows(int(c.pop("__rows")), {k: int(v) for k, v in c.items()})
        n = s.row(0, named=True)
        return RawCounts(rows_in=int(out[0]["__rows"][0]), units_in=int(n["units"]), pairs_in=int(n["pairs"] or 0),
                         units_over_l0=int(n["heavy"] or 0) if l0 is not None else 0,
                         key_counts=key_counts, heavy_pairs=heavy)
