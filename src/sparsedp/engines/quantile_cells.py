"""The quantile contribution model, one per-unit definition for every engine (Polars, DuckDB, pandas, Arrow, and
Spark, which runs :func:`partial_cells` in its executors).

Model (``docs/proofs/quantiles.md`` §1): given the keys the count mechanism released (public, indexed ``0 … n−1``
in canonical key order), and a fresh 32-byte secret ``K`` drawn from the release's source after the count's draw,

1. each privacy unit keeps at most ``l0`` of the released keys it has rows for: those of smallest keyed rank
   ``r(unit, key index)`` (ties by key index);
2. for each kept (unit, key) pair at most ``max_rows`` of its rows count: those of smallest keyed rank
   ``r(unit, (key index, value, j))``, ``j`` numbering the pair's rows of equal value (rows with equal values are
   interchangeable, so the multiset kept is well defined);
3. each kept row's value is clipped to [lower, upper] and mapped to its grid cell
   ``min(cells − 1, floor((x − lower)/(upper − lower)·cells))``.

The ranks are the keyed AES PRF of :func:`sparsedp.engines.bounding.prf_ranks` (its docstring: why the choice is
uniform under the PRP assumption on AES, unpredictable, and the same on every engine), under two keys derived
from ``K`` (one per step). So a unit changes the multisets of at most ``l0`` keys, each by at most ``max_rows``
values: the sensitivity the quantile accountant assumes (:mod:`sparsedp.accounting.quantiles`). The choice
depends only on the unit's own rows and ``K`` (independent of the data), never on other units, row order or
partitioning, so it never weakens the guarantee, and :func:`partial_cells` on a part of the input holding all
rows of its units gives exactly those units' share of the cell counts: Spark sums the partial counts of its
partitions (``repartition(unit)``) and obtains the embedded engines' cells for the same ``K``.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from ..aggregates import Quantile
from ..core.key_order import SEED_KEY, canonical_exprs, canonical_rows
from ..core.quantile_cells import KeyCells
from ..errors import ColumnNotFoundError, InputDataError
from .bounding import draw_bounding_secret, key_fingerprints, prf_ranks, unit_fingerprints

if TYPE_CHECKING:
    import polars as pl
    import pyarrow as pa

    from ..core.engine import RandomSource

__all__ = ["check_quantile_columns", "bounded_cells", "partial_cells", "cells_from_partials", "indexed_keys",
           "KEY", "QUANTILE", "CELL", "COUNT"]

KEY = "__sdp_key"      # the released key's index (canonical key order)
QUANTILE = "__sdp_q"   # the quantile's position in the release's list
CELL = "__sdp_cell"
COUNT = "__sdp_n"
_RANK = "__sdp_rank"
_VALUE = "__sdp_v"
_J = "__sdp_j"
_KEYS_TAG = b"sparsedp quantile keys v1"
_ROWS_TAG = b"sparsedp quantile rows v1"


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


def indexed_keys(keys: pa.Table, by: Sequence[str]) -> pl.DataFrame:
    """The released keys (an Arrow table with the ``by`` columns) in canonical key order with their index
    :data:`KEY` (Int64): the order every engine numbers them in."""
    import polars as pl

    kf = pl.from_arrow(keys.select(list(by)))
    assert isinstance(kf, pl.DataFrame)
    kf = kf[canonical_rows(kf, list(by))]
    return kf.with_row_index(KEY).with_columns(pl.col(KEY).cast(pl.Int64))


def _subkey(secret: bytes, tag: bytes) -> bytes:
    return hashlib.sha256(tag + secret).digest()


def _smallest(frame: pl.DataFrame, group: list[str], order: list[str], limit: int) -> pl.DataFrame:
    """The rows of ``frame`` among the ``limit`` first of their ``group`` in the order ``order``."""
    import polars as pl

    return frame.sort([*group, *order]).filter(pl.int_range(pl.len()).over(group) < limit)


def _kept_pairs(rows: pl.DataFrame, unit: str, l0: int, secret: bytes) -> pl.DataFrame:
    """Step 1: the ``(unit, KEY)`` pairs kept (a unit with at most ``l0`` released keys keeps all)."""
    import polars as pl

    pairs = rows.select(unit, KEY).unique()
    deg = pl.len().over(unit)
    light = pairs.filter(deg <= l0)
    heavy = pairs.filter(deg > l0)
    if not heavy.height:
        return light
    rank = prf_ranks(unit_fingerprints(heavy[unit]), key_fingerprints(heavy.select(KEY), [KEY]),
                     _subkey(secret, _KEYS_TAG))
    heavy = _smallest(heavy.with_columns(pl.Series(_RANK, rank)), [unit], [_RANK, KEY], l0).select(unit, KEY)
    return pl.concat([light, heavy])


def _kept_values(rows: pl.DataFrame, unit: str, column: str, max_rows: int, secret: bytes) -> pl.DataFrame:
    """Step 2 for one value column: ``(KEY, value)`` of the rows kept (a pair with at most ``max_rows`` rows
    keeps all)."""
    import polars as pl

    v = rows.select(unit, KEY, pl.col(column).cast(pl.Float64).alias(_VALUE))
    n = pl.len().over(unit, KEY)
    light = v.filter(n <= max_rows).select(KEY, _VALUE)
    heavy = v.filter(n > max_rows)
    if not heavy.height:
        return light
    heavy = heavy.with_columns(pl.int_range(pl.len()).over(unit, KEY, _VALUE).cast(pl.Int64).alias(_J))
    row_fp = heavy.select(pl.struct(KEY, _VALUE, _J).hash(SEED_KEY)).to_series().to_numpy()
    rank = prf_ranks(unit_fingerprints(heavy[unit]), row_fp, _subkey(secret, _ROWS_TAG))
    heavy = _smallest(heavy.with_columns(pl.Series(_RANK, rank)), [unit, KEY], [_RANK, _VALUE, _J],
                      max_rows).select(KEY, _VALUE)
    return pl.concat([light, heavy])


def partial_cells(rows: pl.DataFrame | pl.LazyFrame, unit: str, by: Sequence[str], keys: pl.DataFrame,
                  quantiles: Sequence[Quantile], l0: int, secret: bytes) -> pl.DataFrame:
    """The cell counts of the model (module docstring) contributed by the units of ``rows`` (all rows of each
    of them): a Polars DataFrame ``[QUANTILE (Int32), KEY, CELL, COUNT (Int64)]``, one row per non-empty
    (quantile, key, cell). ``keys``: :func:`indexed_keys`. Per-unit local and deterministic given ``secret``."""
    import polars as pl

    by = list(by)
    vcols = list(dict.fromkeys(q.column for q in quantiles))
    lf = rows.lazy() if isinstance(rows, pl.DataFrame) else rows
    lf = lf.select([unit, *by, *vcols])
    schema = lf.collect_schema()
    kf = keys.lazy().with_columns(canonical_exprs(keys.schema, by))
    got = (lf.with_columns(canonical_exprs(schema, by)).join(kf, on=by, how="inner", nulls_equal=True)
           .select([unit, KEY, *vcols]).collect())
    kept = got.join(_kept_pairs(got, unit, l0, secret), on=[unit, KEY], how="semi")
    out = []
    for i, q in enumerate(quantiles):
        vals = _kept_values(kept, unit, q.column, q.max_rows, secret)
        cell = ((pl.col(_VALUE).clip(q.lower, q.upper) - q.lower) / (q.upper - q.lower) * q.cells).floor() \
            .clip(0, q.cells - 1).cast(pl.Int64)
        out.append(vals.group_by(KEY, cell.alias(CELL)).agg(pl.len().cast(pl.Int64).alias(COUNT))
                   .select(pl.lit(i, dtype=pl.Int32).alias(QUANTILE), KEY, CELL, COUNT))
    return pl.concat(out)


def cells_from_partials(partials: pl.DataFrame, n_keys: int, n_quantiles: int) -> list[KeyCells]:
    """Per quantile, the :class:`KeyCells` of the summed partial counts (``[QUANTILE, KEY, CELL, COUNT]`` rows,
    several rows per (quantile, key, cell) allowed)."""
    import polars as pl

    total = partials.group_by(QUANTILE, KEY, CELL).agg(pl.col(COUNT).sum()).sort(QUANTILE, KEY, CELL)
    out = []
    for i in range(n_quantiles):
        t = total.filter(pl.col(QUANTILE) == i)
        out.append(KeyCells(n_keys=n_keys, key=t[KEY].to_numpy().astype(np.int64),
                            cell=t[CELL].to_numpy().astype(np.int64), count=t[COUNT].to_numpy().astype(np.int64)))
    return out


def bounded_cells(lf: pl.LazyFrame, unit: str, by: Sequence[str], keys: pa.Table, quantiles: Sequence[Quantile],
                  l0: int, rng: RandomSource | Any) -> list[KeyCells]:
    """Per quantile, the :class:`KeyCells` of the released ``keys`` (an Arrow table of the ``by`` columns; key
    ``i`` is row ``i`` of :func:`indexed_keys`) under the model of the module docstring, the secret drawn from
    ``rng`` (the embedded engines: the whole input is one part)."""
    kf = indexed_keys(keys, by)
    secret = draw_bounding_secret(rng)
    return cells_from_partials(partial_cells(lf, unit, by, kf, quantiles, l0, secret), kf.height, len(quantiles))
