"""The canonical key order and the public fingerprint seeds: one definition for every engine (contribution
bounding, the noise chunks, the released table's order) and for the public-key mechanisms (the key list is put
in the same order, so a listed key reads the same noise on every engine).

A key column is compared in its *canonical* dtype (:func:`canonical_expr`), so equivalent inputs (an Int32 and
an Int64 column, a Categorical and a String column, time-zone-aware and UTC datetimes) order and fingerprint
identically. The expressions are Polars expressions (Polars is imported only when one is built); engines that
run SQL (DuckDB) or Spark apply the same rule to Arrow batches through these expressions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping, Sequence

if TYPE_CHECKING:  # Polars is imported when an expression is built (``import sparsedp`` stays light)
    import numpy as np
    import polars as pl

__all__ = ["SEED_UNIT", "SEED_KEY", "canonical_expr", "canonical_exprs", "canonical_order", "canonical_rows"]

_ROW = "__sparsedp_row"

#: fixed public seeds of the fingerprints (any fixed values; part of the definition of the choice)
SEED_UNIT = 0x73706470_756E6974
SEED_KEY = 0x73706470_6B657973


def canonical_expr(name: str, dtype: pl.DataType) -> pl.Expr:
    """Expression of column ``name`` in its canonical dtype, so that equivalent inputs fingerprint and order
    identically: integers → Int64 (UInt64 kept), Float32 → Float64, Categorical/Enum → String, Datetime → UTC
    naive microseconds, Duration → microseconds; other dtypes (String, Binary, Boolean, Date, Decimal…) as
    they are."""
    import polars as pl

    c = pl.col(name)
    if isinstance(dtype, (pl.Categorical, pl.Enum)) or dtype in (pl.Categorical, pl.Enum):
        return c.cast(pl.String)
    if dtype.is_integer():
        return c if dtype == pl.UInt64 else c.cast(pl.Int64)
    if dtype == pl.Float32:
        return c.cast(pl.Float64)
    if isinstance(dtype, pl.Datetime):
        if dtype.time_zone is not None:
            c = c.dt.convert_time_zone("UTC").dt.replace_time_zone(None)
        return c.cast(pl.Datetime("us"))
    if isinstance(dtype, pl.Duration):
        return c.cast(pl.Duration("us"))
    return c


def canonical_exprs(schema: Mapping[str, pl.DataType], cols: Sequence[str]) -> list[pl.Expr]:
    """:func:`canonical_expr` of each column, keeping the column names."""
    return [canonical_expr(c, schema[c]).alias(c) for c in cols]


def canonical_order(schema: Mapping[str, pl.DataType], cols: Sequence[str]) -> list[pl.Expr]:
    """Sort expressions of the canonical key order: canonical values, then (for dtypes whose canonical form
    truncates, e.g. nanosecond datetimes) the values themselves, so the order is total and depends on values
    only."""
    import polars as pl

    lossy = [pl.col(c) for c in cols if isinstance(schema[c], (pl.Datetime, pl.Duration))]
    return [canonical_expr(c, schema[c]) for c in cols] + lossy


def canonical_rows(frame: pl.DataFrame, cols: Sequence[str]) -> np.ndarray:
    """The row numbers of ``frame`` in the canonical order of its columns ``cols`` (:func:`canonical_order`),
    rows of equal keys by row number (int64 numpy array).

    The row number is the sort's last key: for distinct keys the order is the same, and Polars sorts several
    keys (row-encoded) about twice as fast as it arg-sorts one string column (822 248 URLs: 0.27 s against
    0.56 s on two cores; ``docs/engines_speed.md``, session 13)."""
    import polars as pl

    ranked = frame.select(cols).with_row_index(_ROW)
    return ranked.sort([*canonical_order(frame.schema, cols), pl.col(_ROW)])[_ROW].to_numpy().astype("int64")
