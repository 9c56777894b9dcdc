"""The input checks every engine makes, with one error per rule on every engine (Spark included): NaN keys,
nested key values, repeated column names, mixed-type columns, nulls and empty inputs. All run before anything is
charged, drawn or written.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Sequence, cast

from ..core.sources import InputData
from ..errors import ColumnTypeError, InputDataError

if TYPE_CHECKING:  # the data libraries are imported where a check needs them (``import sparsedp`` stays light)
    import pandas as pd
    import polars as pl
    import pyarrow as pa

__all__ = ["nan_key_error", "check_nan_keys", "check_pandas_nan_keys", "check_key_values", "check_unique_names",
           "check_mixed_types", "check_nulls_and_rows"]


def nan_key_error(column: str) -> InputDataError:
    """The one error for a NaN key, on every engine (Spark included)."""
    return InputDataError(f"key column {column!r} contains NaN; replace NaN (e.g. by null and then drop, or by a "
                          f"sentinel value) before releasing")


def check_nan_keys(keys: pa.Table | pl.DataFrame, by: Sequence[str]) -> None:
    """The NaN-key rule: a float key column holding NaN is refused (:func:`nan_key_error`), before bounding,
    the ledger charge or any randomness. NaN never equals itself, so "the units with key NaN" is ill-defined
    (engines group it differently), and it is not null either (pandas' missing value is checked separately,
    :func:`check_pandas_nan_keys`, so a pandas frame gets the same error). ``keys``: every distinct input key
    (``pyarrow.Table`` or Polars DataFrame: :attr:`RawCounts.key_counts`)."""
    polars_frame = type(keys).__module__.split(".")[0] == "polars"  # no pyarrow import for a Polars frame
    for c in by:
        if polars_frame:
            col_pl = cast("pl.DataFrame", keys)[c]
            if col_pl.dtype.is_float() and col_pl.is_nan().any():
                raise nan_key_error(c)
            continue
        import pyarrow as pa

        col = cast("pa.Table", keys).column(c)
        if pa.types.is_floating(col.type) and len(col) and _any_nan(col):
            raise nan_key_error(c)


def check_pandas_nan_keys(data: InputData, by: Sequence[str]) -> None:
    """:func:`check_nan_keys` on a pandas frame's float key columns, before any engine converts NaN to null."""
    if type(data).__module__.split(".")[0] != "pandas":
        return
    frame = cast("pd.DataFrame", data)
    for c in by:
        col = frame[c]
        if getattr(col.dtype, "kind", "") == "f" and bool(col.isna().any()):
            raise nan_key_error(c)


def check_key_values(keys: pa.Table, by: Sequence[str]) -> None:
    """The one rule for key values on every engine (checked on the bounded histogram's keys, before any
    charge or noise): nested values (lists, structs, maps) are refused, and so is NaN in a float key column
    (NaN never equals itself, so its "count" is ill-defined and engines disagree on it; :func:`check_nan_keys`
    already refused it on every input key)."""
    import pyarrow as pa

    for c in by:
        t = keys.schema.field(c).type
        if pa.types.is_nested(t) or pa.types.is_null(t) or pa.types.is_dictionary(t) and pa.types.is_nested(
                t.value_type):
            raise InputDataError(f"key column {c!r} has type {t}; keys must be scalar values (strings, numbers, "
                                 f"dates, booleans): flatten or cast it before releasing")
        if pa.types.is_floating(t) and len(keys) and _any_nan(keys.column(c)):
            raise nan_key_error(c)


def _any_nan(column: pa.Array | pa.ChunkedArray) -> bool:
    """Whether a float Arrow column holds NaN (``pyarrow.compute`` imported only here: ~0.2 s at start-up)."""
    import pyarrow.compute as pc

    return bool(pc.any(pc.is_nan(column)).as_py())


def check_unique_names(data: InputData) -> None:
    """Frames with a repeated column name are ambiguous (which "user_id"?): refuse them by name."""
    names = getattr(data, "column_names", None)  # pyarrow
    if names is None and type(data).__module__.split(".")[0] == "pandas":
        names = [str(c) if not isinstance(c, str) else c for c in cast("pd.DataFrame", data).columns]
    if names is None:
        return
    dup = sorted({repr(n) for n, c in Counter(names).items() if c > 1})
    if dup:
        raise InputDataError(f"the input has duplicate column names ({', '.join(dup)}); rename them so "
                             f"each column is unambiguous")


#: pandas' names (``pandas.api.types.infer_dtype``) of object columns mixing values of different kinds
_MIXED = ("mixed", "mixed-integer")


def check_mixed_types(data: InputData, privacy_unit: str | None, by: Sequence[str]) -> None:
    """The one rule on every engine for a unit or key column holding values of different kinds (a pandas
    object column with ``1`` and ``"1"``): refused with :class:`~sparsedp.errors.ColumnTypeError` naming the
    column, before any budget is charged. Engines would otherwise disagree: Polars and pandas fail on it, and
    DuckDB casts it to VARCHAR, where ``1`` and ``"1"`` become one unit (removing one person would then not
    remove one unit: the guarantee would not hold as stated) or one key. Only pandas frames can hold such a
    column (Polars, Arrow, DuckDB, Spark and files are typed per column). Called before the engine converts or
    scans the frame; a missing column is left to :func:`check_columns`."""
    if type(data).__module__.split(".")[0] != "pandas":
        return
    from pandas.api.types import infer_dtype

    frame = cast("pd.DataFrame", data)
    for role, col in ([("privacy_unit", privacy_unit)] if privacy_unit is not None else []) + [("by", c)
                                                                                               for c in by]:
        if col not in frame.columns:
            continue
        series = frame[col]
        if getattr(series.dtype, "kind", "") != "O":
            continue
        kind = infer_dtype(series, skipna=True)
        if kind in _MIXED:
            kinds = sorted({type(x).__name__ for x in series.dropna().head(10_000)})
            raise ColumnTypeError(
                f"⟨{role}⟩ column {col!r} mixes values of different types ({', '.join(kinds)}): 1 and '1' would be "
                f"one {'unit' if role == 'privacy_unit' else 'key'} on some engines and two on others",
                column=col, param=role, fix=f"cast the column to one type first (e.g. "
                f"df[{col!r}] = df[{col!r}].astype(str))")


def check_nulls_and_rows(rows: int, null_counts: dict[str, int]) -> None:
    """Shared data checks: non-empty input, no null unit or key (nulls are not silently dropped)."""
    if rows == 0:
        raise InputDataError("the input has no rows; nothing to release (check the filter or the file)")
    bad = {c: n for c, n in null_counts.items() if n}
    if bad:
        desc = ", ".join(f"{c!r} ({n} nulls)" for c, n in bad.items())
        raise InputDataError(f"null values in {desc}; drop or fill them before releasing "
                             f"(a null unit would merge unrelated people, a null key is ambiguous)")
