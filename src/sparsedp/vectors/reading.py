"""Reading a vector release's input: every unit's vector, the input checks, and the clipped sums.

Contribution model (enforced here, never trusted): a unit's vector v has v_i = the sum of the unit's values for
coordinate i (over all its rows); a coordinate a unit has no row for is 0. Then v is clipped — to the box
[lower_i, upper_i] per coordinate, or scaled down to the ℓ2 ball ‖v‖₂ <= C — and, on the public grid of
:mod:`sparsedp.mechanisms.vector_grid`, rounded to its integer grid units. One unit therefore moves a released
sum by at most its bound, whatever its raw values.

Input: any input :func:`sparsedp.release` accepts through the Polars engine (Polars/pandas frames, Polars
LazyFrame, pyarrow Table, DuckDB relation or SQL, Parquet/CSV path or glob); Spark is refused. Every input check
(columns, types, nulls, NaN/inf, no rows) happens here, before any charge or noise.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from ..core import sources
from ..engines.polars_engine import to_lazy
from ..errors import InputDataError, InvalidTypeError
from .arguments import VectorInput

__all__ = ["MAX_DENSE", "PerUnit", "per_unit", "dense", "clipped_sums"]

MAX_DENSE = 300_000_000      # PLAN needs the n x d matrix in memory


@dataclass(frozen=True, eq=False)
class PerUnit:
    """The per-unit frame of one read (curator figures: ``rows`` read, ``n_units``, ``ignored`` rows whose
    coordinate is not listed). Wide: one row per unit, columns ``__u, __c0 … __c{d−1}`` (the unit's sums).
    Long: one row per (unit, listed coordinate) with ``__u, __i, __v`` (and ``__j``, the unit's index in order
    of first appearance, when read ``index_units``)."""

    frame: pl.DataFrame
    rows: int
    n_units: int
    ignored: int


def per_unit(spec: VectorInput, index_units: bool = False) -> PerUnit:
    """Every unit's vector (:class:`PerUnit`). Wide frames keep the units' first-appearance order when
    ``index_units`` (PLAN's draws then do not depend on hash order)."""
    unit, coords, coordinate, value = spec.unit, spec.coords, spec.coordinate, spec.value
    lf, schema = _lazy_input(spec.data, spec.connection)
    rows = _checked_rows(lf, schema, unit, coords, spec.long, coordinate, value)
    if not spec.long:
        # wide: one group-by over the units, per-unit sums of every coordinate column (named __c0, __c1, …)
        wide = lf.group_by(pl.col(unit).alias("__u"), maintain_order=index_units).agg(
            [pl.col(c).cast(pl.Float64).sum().alias(f"__c{j}") for j, c in enumerate(coords)])
        try:
            frame = wide.collect()
        except pl.exceptions.PolarsError as e:
            raise InputDataError(f"could not aggregate the input per unit: {e}") from None
        return PerUnit(frame, rows, frame.height, 0)
    raw = lf.select(pl.col(unit).alias("__u"), pl.col(coordinate).cast(pl.String).alias("__k"),
                    pl.col(value).cast(pl.Float64).alias("__v"))
    keys = pl.DataFrame({"__k": list(coords), "__i": np.arange(len(coords), dtype=np.int64)}).lazy()
    agg = raw.join(keys, on="__k", how="inner").group_by("__u", "__i").agg(pl.col("__v").sum(),
                                                                            pl.len().alias("__rows"))
    if index_units:
        units = lf.select(pl.col(unit).alias("__u")).unique(maintain_order=True).with_row_index("__j")
        agg = agg.join(units, on="__u", how="inner")
        count = units.select(pl.len().alias("n"))
    else:
        count = lf.select(pl.col(unit).n_unique().alias("n"))
    try:
        agg_df, n_df = pl.collect_all([agg, count])
    except pl.exceptions.PolarsError as e:
        raise InputDataError(f"could not aggregate the input per unit: {e}") from None
    used = int(agg_df["__rows"].sum()) if agg_df.height else 0
    return PerUnit(agg_df.drop("__rows"), rows, int(n_df["n"][0]), rows - used)


def _lazy_input(data: Any, connection: Any) -> tuple[Any, Any]:
    """``(LazyFrame, schema)`` of a vector release's input (frames, DuckDB relations/SQL, files; not Spark)."""
    k = sources.kind(data)
    if k == "file":
        sources.file_format(data)
    if k == "spark":
        raise InputDataError("vector releases read frames, DuckDB relations/SQL and Parquet/CSV files; convert the "
                             "Spark DataFrame first (e.g. write it to Parquet)")
    try:
        if k == "sql":
            import duckdb

            data = (connection if connection is not None else duckdb).sql(data)
        lf = to_lazy(data)
        return lf, lf.collect_schema()
    except Exception as e:  # noqa: BLE001 - Polars' and DuckDB's read errors, reported in the user's terms
        if isinstance(e, pl.exceptions.PolarsError) or type(e).__module__.split(".")[0] in ("duckdb", "_duckdb"):
            raise InputDataError(f"could not read the input: {e}") from None
        raise
def _checked_rows(lf: Any, schema: Any, unit: str, coords: tuple[str, ...], long: bool, coordinate: Any,
                  value: Any) -> int:
    """The number of input rows, after checking the columns exist, the values are numeric, and the unit,
    coordinate and value columns hold no null, NaN or infinity (one pass over the data)."""
    value_cols = list(coords) if not long else [value]
    needed = [unit] + ([coordinate] if long else []) + value_cols
    missing = [c for c in needed if c not in schema]
    if missing:
        raise InputDataError(f"column(s) {missing!r} not in the data (columns: {list(schema.names())})")
    for c in value_cols:
        dt = schema[c]
        if not dt.is_numeric() or dt == pl.Boolean:
            raise InvalidTypeError(f"value column {c!r} must be numeric, got {dt}")
    checks = [pl.len().alias("rows"), pl.col(unit).null_count().alias(f"null|{unit}")]
    if long:
        checks.append(pl.col(coordinate).null_count().alias(f"null|{coordinate}"))
    for c in value_cols:
        checks.append(pl.col(c).null_count().alias(f"null|{c}"))
        if schema[c].is_float():
            checks.append((~pl.col(c).is_finite()).sum().alias(f"nonfinite|{c}"))
    try:
        row = lf.select(checks).collect().row(0, named=True)
    except pl.exceptions.PolarsError as e:
        raise InputDataError(f"could not read the input: {e}") from None
    rows = int(row.pop("rows"))
    if rows == 0:
        raise InputDataError("the input has no rows; nothing to release")
    bad = [(key.split("|", 1)[1], key.split("|", 1)[0], int(n)) for key, n in row.items() if n]
    if bad:
        what = "; ".join(f"{c!r}: {n} {'null' if kind == 'null' else 'NaN or infinite'} value(s)" for c, kind, n in bad)
        raise InputDataError(f"the unit, coordinate and value columns must be free of nulls, NaN and infinities: "
                             f"{what}. Nothing was released.")
    return rows


def dense(frame, long: bool, n_units: int, d: int) -> np.ndarray:
    """The units × coordinates matrix (units in order of first appearance; missing coordinates 0)."""
    if not long:
        return frame.select([f"__c{j}" for j in range(d)]).to_numpy().astype(float, copy=True)
    x = np.zeros((n_units, d))
    x[frame["__j"].to_numpy(), frame["__i"].to_numpy()] = frame["__v"].to_numpy()
    return x


def clipped_sums(agg, long: bool, d: int, n_units: int, lo, hi, max_norm, grid) -> tuple[np.ndarray, int, int]:
    """Per-coordinate sums of the clipped (and, with a grid, gridded) unit vectors; coordinates a unit has no row
    for count as 0 (clipped like any value). Returns (sums: int64 grid sums or float sums, values clipped,
    units clipped)."""
    if not long:
        return _clipped_sums_wide(agg, d, lo, hi, max_norm, grid)
    if max_norm is not None:
        norms = agg.group_by("__u").agg((pl.col("__v") ** 2).sum().sqrt().alias("__n"))
        f = agg.join(norms, on="__u").with_columns(
            pl.when(pl.col("__n") > max_norm).then(max_norm / pl.col("__n")).otherwise(1.0).alias("__f"))
        units_clipped = int((norms["__n"] > max_norm).sum())
        vals = pl.col("__v") * pl.col("__f")
        if grid is None:
            s = f.group_by("__i").agg(vals.sum().alias("__s"))
            out = np.zeros(d)
            out[s["__i"].to_numpy()] = s["__s"].to_numpy()
            return out, units_clipped, units_clipped
        g = float(grid.spacing[0])
        k = int(grid.radius_units) + 1
        r = (vals / g).round().clip(-k, k).cast(pl.Int64)
        s = f.group_by("__i").agg(r.sum().alias("__s"))
        out = np.zeros(d, dtype=np.int64)
        out[s["__i"].to_numpy()] = s["__s"].to_numpy()
        return out, units_clipped, units_clipped
    params = {"__i": np.arange(d, dtype=np.int64), "__lo": lo, "__hi": hi}
    if grid is not None:
        gam = np.where(grid.spacing > 0, grid.spacing, 1.0)
        params.update({"__o": np.asarray(grid.offset), "__g": gam, "__rlo": np.asarray(grid.r_lo),
                       "__rhi": np.asarray(grid.r_hi)})
    f = agg.join(pl.DataFrame(params), on="__i")
    clipped = (pl.col("__v") < pl.col("__lo")) | (pl.col("__v") > pl.col("__hi"))
    cv = pl.col("__v").clip(pl.col("__lo"), pl.col("__hi"))
    if grid is not None:
        contrib = ((cv - pl.col("__o")) / pl.col("__g")).round().clip(pl.col("__rlo"), pl.col("__rhi")) \
            .cast(pl.Int64)
    else:
        contrib = cv
    s = f.group_by("__i").agg(contrib.sum().alias("__s"), pl.len().alias("__c"))
    stats = f.select(clipped.sum().alias("v"), pl.col("__u").filter(clipped).n_unique().alias("u")).row(0)
    present = np.zeros(d, dtype=np.int64)
    present[s["__i"].to_numpy()] = s["__c"].to_numpy()
    # coordinates a unit has no row for: value 0, clipped to the box like any value
    zero = np.clip(0.0, lo, hi)
    missing = n_units - present
    if grid is not None:
        gam = np.where(grid.spacing > 0, grid.spacing, 1.0)
        r0 = np.clip(np.rint((zero - grid.offset) / gam), grid.r_lo, grid.r_hi).astype(np.int64)
        out = np.zeros(d, dtype=np.int64)
        out[s["__i"].to_numpy()] = s["__s"].to_numpy()
        out = out + missing * r0
    else:
        out = np.zeros(d)
        out[s["__i"].to_numpy()] = s["__s"].to_numpy()
        out = out + missing * zero
    # implicit zeros outside the box are clipped too (counted as values; their units are not identified)
    extra = int(np.sum(np.where(zero != 0.0, missing, 0)))
    return out, int(stats[0]) + extra, int(stats[1])


def _clipped_sums_wide(frame, d: int, lo, hi, max_norm, grid) -> tuple[np.ndarray, int, int]:
    """:func:`_clipped_sums` for the wide per-unit frame: one ``select`` of per-column expressions (no reshaping)."""
    cols = [pl.col(f"__c{j}") for j in range(d)]
    if max_norm is not None:
        norm = pl.sum_horizontal([c * c for c in cols]).sqrt()
        f = pl.when(norm > max_norm).then(max_norm / norm).otherwise(1.0)
        vals = [c * f for c in cols]
        over = norm > max_norm
        if grid is None:
            exprs = [x.sum().alias(f"s{j}") for j, x in enumerate(vals)]
        else:
            g, k = float(grid.spacing[0]), int(grid.radius_units) + 1
            exprs = [(x / g).round().clip(-k, k).cast(pl.Int64).sum().alias(f"s{j}") for j, x in enumerate(vals)]
        row = frame.select(*exprs, over.sum().alias("u")).row(0)
        out = np.array(row[:d], dtype=np.int64 if grid is not None else float)
        return out, int(row[d]), int(row[d])
    exprs = []
    for j, c in enumerate(cols):
        cv = c.clip(float(lo[j]), float(hi[j]))
        if grid is None:
            exprs.append(cv.sum().alias(f"s{j}"))
        elif grid.spacing[j] > 0:
            exprs.append(((cv - float(grid.offset[j])) / float(grid.spacing[j])).round()
                         .clip(int(grid.r_lo[j]), int(grid.r_hi[j])).cast(pl.Int64).sum().alias(f"s{j}"))
        else:
            exprs.append(pl.lit(0, dtype=pl.Int64).alias(f"s{j}"))
    outside = [(c < float(lo[j])) | (c > float(hi[j])) for j, c in enumerate(cols)]
    row = frame.select(*exprs, pl.sum_horizontal([o.cast(pl.Int64) for o in outside]).sum().alias("v"),
                       pl.any_horizontal(outside).sum().alias("u")).row(0)
    out = np.array(row[:d], dtype=np.int64 if grid is not None else float)
    return out, int(row[d]), int(row[d + 1])


