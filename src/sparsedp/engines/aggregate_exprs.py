"""Per-(unit, key) clipped, gridded contributions of ``Sum``/``Mean`` aggregates, and their per-key sums.

Engine-neutral in the sense that it is plain Polars (every engine of sparsedp can hand Polars a LazyFrame or
an Arrow table). The contribution model and the grid are defined in :mod:`sparsedp.aggregates`:

    contribution(u, k) = clip(floor(clip(Σ_{rows of u, k} value, lower, upper)/g + 1/2), q(lower), q(upper)) − c

an Int64 per (unit, key) in ``[q(lower) − c, q(upper) − c]`` (so its absolute value is at most the aggregate's
``sensitivity``), and the key's grid sum is the Int64 sum of its kept units' contributions. Call it *after*
bounding (:func:`sparsedp.engines.bounding.select_pairs`): pass the kept pairs, or rows already restricted
to them.

Bad input is refused before anything is computed (nothing is released or charged): a value column that is
missing or not numeric (:class:`~sparsedp.errors.InputDataError` / :class:`~sparsedp.errors.InvalidTypeError`),
and null, NaN or infinite values (:func:`check_value_columns`, one pass).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

from ..aggregates import Aggregate, Squares, Sum, noise_columns
from ..errors import InputDataError, InvalidTypeError
from .bounding import COUNT, Choice, choose_from_per_key

if TYPE_CHECKING:  # Polars is imported when the expressions are built (``import sparsedp`` stays light)
    import polars as pl

__all__ = ["grid_column_name", "check_value_columns", "value_check_exprs", "raise_bad_values", "contribution_exprs", "gridded", "gridded_array", "unit_key_contributions",
           "key_grid_sums"]


def grid_column_name(i: int) -> str:
    """Internal name of the i-th aggregate's grid column (kept apart from user column names)."""
    return f"__sparsedp_agg_{i}"


def _sums(aggregates: Sequence[Aggregate]) -> list[Sum]:
    """The distinct noisy grid columns (:func:`sparsedp.aggregates.noise_columns`)."""
    return noise_columns(aggregates)[0]


def value_columns(aggregates: Sequence[Aggregate], cols: Sequence[str]) -> list[str]:
    """The SUM/MEAN value columns of ``aggregates``, each once in order; refused if one is the privacy unit or a
    key column (``cols``)."""
    vcols = list(dict.fromkeys(a.column for a in _sums(aggregates)))
    if set(vcols) & set(cols):
        raise InputDataError(f"a SUM/MEAN column cannot be the privacy unit or a key column: {vcols}")
    return vcols


def check_value_columns(lf: pl.LazyFrame | pl.DataFrame, aggregates: Sequence[Aggregate]) -> None:
    """Raise if a Sum/Mean value column is missing, non-numeric, or holds null, NaN or ±inf values.

    ``lf``: Polars LazyFrame or DataFrame of the rows. One pass (a single ``select`` of counts).
    """
    import polars as pl

    lf = lf.lazy() if isinstance(lf, pl.DataFrame) else lf
    exprs = value_check_exprs(lf.collect_schema(), aggregates)
    if exprs:
        raise_bad_values(lf.select(exprs).collect().row(0, named=True))


def value_check_exprs(schema: pl.Schema, aggregates: Sequence[Aggregate]) -> list[pl.Expr]:
    """The counting expressions of :func:`check_value_columns` (nulls, non-finite values per value column),
    for a ``select`` that may hold other counts too; raises at once on a missing or non-numeric column."""
    import polars as pl

    exprs = []
    for c in sorted({a.column for a in _sums(aggregates)}):
        if c not in schema:
            raise missing_value_column(c, list(schema.names()))
        dt = schema[c]
        if not dt.is_numeric() or dt == pl.Boolean:
            raise non_numeric_value_column(c, dt)
        exprs.append(pl.col(c).null_count().alias(f"null|{c}"))
        if dt.is_float():
            exprs.append((~pl.col(c).is_finite()).sum().alias(f"nonfinite|{c}"))
    return exprs


def raise_bad_values(row: Mapping[str, Any]) -> None:
    """Raise :func:`bad_values` if a ``null|…``/``nonfinite|…`` count of :func:`value_check_exprs` in ``row``
    (a collected row; other fields are ignored) is not zero."""
    bad = [(k.split("|", 1)[1], k.split("|", 1)[0], int(n)) for k, n in row.items()
           if k.startswith(("null|", "nonfinite|")) and n]
    if bad:
        raise bad_values(bad)


def missing_value_column(column: str, available: list[str]) -> InputDataError:
    """The error for a Sum/Mean value column not in the data (every engine raises this one)."""
    return InputDataError(f"value column {column!r} is not in the data (columns: {available})")


def non_numeric_value_column(column: str, dtype: object) -> InvalidTypeError:
    """The error for a value column that is not numeric (``dtype``: the engine's name of its type)."""
    return InvalidTypeError(f"value column {column!r} must be numeric, got {dtype}")


def bad_values(bad: Sequence[tuple[str, str, int]]) -> InputDataError:
    """The error for null / NaN / infinite values: ``bad`` = ``(column, "null" or "nonfinite", count)``."""
    what = "; ".join(f"{c!r}: {n} {'null' if kind == 'null' else 'NaN or infinite'} value(s)" for c, kind, n in bad)
    return InputDataError(f"value columns must be finite numbers without nulls: {what}. Nothing was released.")


def contribution_exprs(aggregates: Sequence[Aggregate]) -> list[pl.Expr]:
    """Polars aggregation expressions (for ``group_by([unit, *by]).agg``) of each Sum/Mean's gridded,
    clipped, re-centred contribution (module docstring), named :func:`grid_column_name` (i = index of the
    distinct grid column, :func:`sparsedp.aggregates.noise_columns`: a Sum and a Mean of the same column and
    bounds share one)."""
    import polars as pl

    return [gridded(pl.col(a.column).cast(pl.Float64).sum(), a).alias(grid_column_name(i))
            for i, a in enumerate(_sums(aggregates))]


def gridded(total: pl.Expr, a: Sum) -> pl.Expr:
    """The expression of a pair's contribution to ``a``'s grid column given ``total``, the expression of the
    pair's Float64 sum of values: ``clip(floor(clip(total, lower, upper)/g + 1/2), q(lower), q(upper)) − c``
    (a :class:`~sparsedp.aggregates.Squares` column squares the clipped total first and grids ``v²``)."""
    import polars as pl

    ql, qu = a.grid_bounds
    v = total.clip(a.lower, a.upper)
    if isinstance(a, Squares):  # a Variance's sum of squares: the square of the clipped total, then its grid
        v = v * v
    q = (v / a.granularity + 0.5).floor().clip(float(ql), float(qu))
    return q.cast(pl.Int64) - a.centre


def gridded_array(total: np.ndarray, a: Sum) -> np.ndarray:
    """:func:`gridded` on a numpy array of the pairs' Float64 sums: the same IEEE operations in the same order
    (clip, square for :class:`~sparsedp.aggregates.Squares`, divide, add 1/2, floor, clip, truncate to Int64,
    subtract the centre), so the same Int64 contributions (``tests/engines/test_pair_ids.py`` compares them
    with the Polars expression's on boundary values); a sum of +0 or −0 gives the same contribution."""
    ql, qu = a.grid_bounds
    assert a.granularity is not None  # set when the Sum was built
    v = np.clip(total, a.lower, a.upper)
    if isinstance(a, Squares):
        np.multiply(v, v, out=v)
    np.divide(v, a.granularity, out=v)
    np.add(v, 0.5, out=v)
    np.floor(v, out=v)
    np.clip(v, float(ql), float(qu), out=v)
    q: np.ndarray = v.astype(np.int64)
    q -= a.centre
    return q


def unit_key_contributions(rows: pl.LazyFrame | pl.DataFrame, unit: str, by: Sequence[str],
                           aggregates: Sequence[Aggregate],
                           kept_pairs: pl.LazyFrame | pl.DataFrame | None = None) -> pl.LazyFrame:
    """LazyFrame ``[unit, *by, grid columns…]``: one row per kept (unit, key) with each contribution.

    ``rows``: the input rows (LazyFrame/DataFrame with ``unit``, ``by`` and the value columns).
    ``kept_pairs``: the bounded pairs ``[unit, *by]`` (e.g. :func:`~sparsedp.engines.bounding.select_pairs`);
    ``None`` if ``rows`` are already restricted to them.
    """
    import polars as pl

    lf = rows.lazy() if isinstance(rows, pl.DataFrame) else rows
    by = list(by)
    if kept_pairs is not None:
        kp = kept_pairs.lazy() if isinstance(kept_pairs, pl.DataFrame) else kept_pairs
        lf = lf.join(kp.select([unit] + by), on=[unit] + by, how="semi", nulls_equal=True)
    return lf.group_by([unit] + by).agg(contribution_exprs(aggregates))


def key_grid_sums(rows: pl.LazyFrame | pl.DataFrame, unit: str, by: Sequence[str], aggregates: Sequence[Aggregate],
                  kept_pairs: pl.LazyFrame | pl.DataFrame | None = None) -> pl.LazyFrame:
    """LazyFrame ``[*by, grid columns…]``: each key's Int64 sum of its kept units' contributions."""
    import polars as pl

    n = len(_sums(aggregates))
    contrib = unit_key_contributions(rows, unit, by, aggregates, kept_pairs)
    return contrib.group_by(list(by)).agg([pl.col(grid_column_name(i)).sum() for i in range(n)])


def per_key_contributions(lf: pl.LazyFrame | pl.DataFrame, unit: str, by: Sequence[str],
                          aggregates: Sequence[Aggregate]) -> pl.DataFrame:
    """Collected Polars frame: one row per key with the list of its distinct units and, aligned with it, the
    list of each unit's contribution to every grid column (:func:`contribution_exprs`). One group-by by
    ``(unit, *by)`` over the rows (it de-duplicates the pairs), then one by ``by`` over the pairs."""
    import polars as pl

    by = list(by)
    names = [grid_column_name(i) for i in range(len(_sums(aggregates)))]
    lf = lf.lazy() if isinstance(lf, pl.DataFrame) else lf
    return (lf.group_by([unit] + by).agg(contribution_exprs(aggregates))
            .group_by(by).agg(pl.col(unit), *[pl.col(n) for n in names]).collect())


def bounded_key_sums(pk: pl.DataFrame, unit: str, by: Sequence[str], l0: int | None, secret: bytes | None,
                     n_columns: int) -> tuple[pl.DataFrame, Choice]:
    """``(key_counts, choice)``: the ℓ0 choice on :func:`per_key_contributions` (the one
    :func:`~sparsedp.engines.bounding.choose_from_per_key`, same secret = same kept pairs as the count-only
    path) and a Polars frame ``[*by, COUNT, grid columns…]`` of every input key in canonical order: the
    bounded count and the Int64 grid sums over the kept pairs. Spark's bounding task calls it per partition."""
    import polars as pl

    names = [grid_column_name(i) for i in range(n_columns)]
    ch = choose_from_per_key(pk, unit, list(by), l0, secret, sums=names)
    kc = ch.keys.with_columns(pl.Series(COUNT, ch.units_per_key - ch.dropped_per_key, dtype=pl.Int64),
                              *[pl.Series(n, t, dtype=pl.Int64) for n, t in zip(names, ch.kept_sums)])
    return kc, ch
