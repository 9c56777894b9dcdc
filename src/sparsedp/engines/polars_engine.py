"""Polars engine (the default): one lazy query plan, run by Polars' streaming engine.

Files are scanned lazily (``scan_parquet``/``scan_csv``) with only the unit and key columns projected, so a
file is never loaded into Python objects; the de-duplication of (unit, key) pairs streams over the rows, and
the later steps work on the (much smaller) distinct pairs.
"""

from __future__ import annotations

import os
from typing import Any

from ..errors import InputDataError
from . import sources
from .base import Engine, RawCounts, check_nulls_and_rows
from .bounding import COUNT


def to_lazy(data: Any):
    """A Polars LazyFrame over any supported input (files scanned lazily, frames zero-copy where possible)."""
    import polars as pl

    k = sources.kind(data)
    if k == "polars-lazy":
        return data
    if k == "polars":
        return data.lazy()
    if k == "pandas":
        return pl.from_pandas(data).lazy()
    if k == "arrow":
        import pyarrow as pa
        t = pa.Table.from_batches([data]) if isinstance(data, pa.RecordBatch) else data
        return pl.from_arrow(t).lazy()
    if k == "duckdb":
        return data.pl().lazy()
    if k == "file":
        fmt = sources.file_format(data)
        path = os.fspath(data)
        return pl.scan_parquet(path) if fmt == "parquet" else pl.scan_csv(path)
    raise InputDataError("SQL text needs the DuckDB engine (engine='duckdb' or engine=None)")


class PolarsEngine(Engine):
    """Bounded histograms with Polars (lazy, streaming)."""

    name = "polars"

    def columns(self, data: Any) -> list[str]:
        import polars as pl

        try:
            return to_lazy(data).collect_schema().names()
        except pl.exceptions.PolarsError as e:
            raise InputDataError(f"could not read the input: {e}") from None

    def raw_counts(self, data: Any, privacy_unit: str, by: list[str], l0: int | None) -> RawCounts:
        import polars as pl

        cols = [privacy_unit] + by
        lf = to_lazy(data).select(cols)
        check = lf.select(pl.len().alias("__rows"), *[pl.col(c).null_count().alias(c) for c in cols])
        try:
            # The de-duplication is the one pass over all rows; the rest works on the distinct pairs, one
            # lazy (streaming) query at a time, which measured faster than one combined plan or eager calls.
            if sources.kind(data) == "polars":  # row and null counts are metadata of an in-memory frame
                out = [data.select(cols).null_count().with_columns(pl.lit(data.height).alias("__rows")),
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
        s = s.row(0, named=True)
        return RawCounts(rows_in=int(out[0]["__rows"][0]), units_in=int(s["units"]), pairs_in=int(s["pairs"] or 0),
                         units_over_l0=int(s["heavy"] or 0) if l0 is not None else 0,
                         key_counts=key_counts, heavy_pairs=heavy)
