"""The quantile contribution model, enforced on the rows of every embedded engine (Polars, DuckDB, pandas, Arrow).

Model (``docs/proofs/quantiles.md`` §1): given the keys the count mechanism released (public),

1. each privacy unit keeps at most ``l0`` of the released keys it has rows for, chosen uniformly at random
   (independent 64-bit ranks from the release's secure source, the smallest ``l0`` per unit);
2. for each kept (unit, key) pair at most ``max_rows`` of its rows count, chosen uniformly at random in the same
   way (rows with equal values are interchangeable, so the multiset kept is well defined);
3. each kept row's value is clipped to [lower, upper] and mapped to its grid cell
   ``min(cells − 1, floor((x − lower)/(upper − lower)·cells))``.

So a unit changes the multisets of at most ``l0`` keys, each by at most ``max_rows`` values: the sensitivity the
quantile accountant assumes (:mod:`sparsedp.accounting.quantiles`). The choice in steps 1–2 depends only on the
unit's own rows and fresh randomness, so it never weakens the guarantee (it only affects accuracy). One choice of
keys serves every quantile of the release. The rows are read through :meth:`EmbeddedEngine.rows_lazy` (the
shared Polars path of the SUM/MEAN aggregates); the ranks are attached after a sort, so a seeded source gives the
same result on every engine. Spark has no such path: the pipeline refuses quantiles on it before any charge.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from ..aggregates import Quantile
from ..core.quantile_cells import KeyCells
from ..errors import ColumnNotFoundError, InputDataError

if TYPE_CHECKING:
    import polars as pl
    import pyarrow as pa

__all__ = ["check_quantile_columns", "bounded_cells"]

_KEY = "__sdp_key"
_RANK = "__sdp_rank"


def check_quantile_columns(lf: pl.LazyFrame, quantiles: Sequence[Quantile]) -> None:
    """Each quantile's value column exists, is numeric, and has no null, NaN or infinite value (InputDataError
    otherwise, naming the column); called before the ledger charge."""
    import polars as pl

    schema = lf.collect_schema()
    cols = sorted({q.column for q in quantiles})
    for c in cols:
        if c not in schema:
            raise ColumnNotFoundError(f"the quantile column {c!r} is not in the input (columns: "
                                      f"{', '.join(schema.names())}). Nothing was released.")
        if not schema[c].is_numeric():
            raise InputDataError(f"the quantile column {c!r} must be numeric, got {schema[c]}. Nothing was released.")
    exprs = []
    for c in cols:
        x = pl.col(c).cast(pl.Float64)
        exprs.append((x.is_null() | ~x.is_finite()).sum().alias(c))
    bad = lf.select(exprs).collect().row(0, named=True)
    wrong = {c: int(n) for c, n in bad.items() if n}
    if wrong:
        what = "; ".join(f"{c!r}: {n} null, NaN or infinite value(s)" for c, n in wrong.items())
        raise InputDataError(f"quantile columns must be finite numbers without nulls: {what}. Nothing was released.")


def _ranked(frame: pl.DataFrame, rng: Any) -> pl.DataFrame:
    import polars as pl

    return frame.with_columns(pl.Series(_RANK, np.asarray(rng.uint64(frame.height), dtype=np.uint64)))


def bounded_cells(lf: pl.LazyFrame, unit: str, by: Sequence[str], keys: pa.Table, quantiles: Sequence[Quantile],
                  l0: int, rng: Any) -> list[KeyCells]:
    """Per quantile, the :class:`KeyCells` of the released ``keys`` (an Arrow table of the ``by`` columns, row i =
    key i) under the model of the module docstring, every random rank from ``rng``."""
    import polars as pl

    by = list(by)
    kf = pl.from_arrow(keys.select(by))
    assert isinstance(kf, pl.DataFrame)
    kf = kf.with_row_index(_KEY).with_columns(pl.col(_KEY).cast(pl.Int64))
    vcols = list(dict.fromkeys(q.column for q in quantiles))
    rows = (lf.select([unit, *by, *vcols]).join(kf.lazy(), on=by, how="inner", nulls_equal=True)
            .select([unit, _KEY, *vcols]))
    pairs = rows.select(unit, _KEY).unique().sort([unit, _KEY]).collect()
    kept = (_ranked(pairs, rng).filter(pl.col(_RANK).rank("ordinal").over(unit) <= l0).select(unit, _KEY))
    rows_kept = rows.join(kept.lazy(), on=[unit, _KEY], how="semi")
    out = []
    for q in quantiles:
        vals = rows_kept.select(unit, _KEY, pl.col(q.column).cast(pl.Float64).alias("__v")) \
            .sort([unit, _KEY, "__v"]).collect()
        vals = _ranked(vals, rng).filter(pl.col(_RANK).rank("ordinal").over([unit, _KEY]) <= q.max_rows)
        cell = ((pl.col("__v").clip(q.lower, q.upper) - q.lower) / (q.upper - q.lower) * q.cells).floor() \
            .clip(0, q.cells - 1).cast(pl.Int64)
        agg = (vals.select(pl.col(_KEY), cell.alias("__c")).group_by(_KEY, "__c").len().sort(_KEY, "__c"))
        out.append(KeyCells(n_keys=kf.height, key=agg[_KEY].to_numpy().astype(np.int64),
                            cell=agg["__c"].to_numpy().astype(np.int64),
                            count=agg["len"].to_numpy().astype(np.int64)))
    return out
