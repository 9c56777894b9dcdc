"""Recognising inputs: frames, DuckDB relations, SQL text, Parquet/CSV files.

Nothing here reads data: only types, paths, a file's first bytes and the start of a SQL string.
"""

from __future__ import annotations

import glob
import os
import re
from pathlib import Path
from typing import Any

from ..errors import InputDataError, InvalidTypeError

PARQUET_SUFFIXES = (".parquet", ".pq", ".parq")
CSV_SUFFIXES = (".csv",)
_SQL = re.compile(r"^\s*(\(\s*)*(select|with|from|values|table)\b", re.IGNORECASE)
_SQL_WORD = re.compile(r"\b(select|from|where|group|join|with|values)\b", re.IGNORECASE)


def kind(data: Any) -> str:
    """What ``data`` is: "polars", "polars-lazy", "pandas", "arrow", "duckdb", "sql" or "file"."""
    mod = type(data).__module__.split(".")[0]
    name = type(data).__name__
    if mod == "polars":
        if name == "LazyFrame":
            return "polars-lazy"
        if name == "DataFrame":
            return "polars"
    if mod == "pandas" and name == "DataFrame":
        return "pandas"
    if mod == "pyarrow" and name in ("Table", "RecordBatch"):
        return "arrow"
    if mod == "duckdb" and name == "DuckDBPyRelation":
        return "duckdb"
    if mod == "pyspark" and name == "DataFrame":
        return "spark"
    if isinstance(data, str) and (_SQL.match(data) or _sql_like(data)):
        return "sql"
    if isinstance(data, (str, os.PathLike)):
        return "file"
    raise InvalidTypeError(
        f"data must be a Polars/pandas DataFrame, a Polars LazyFrame, a pyarrow Table, a DuckDB relation, "
        f"SQL text (SELECT …) or the path of a Parquet/CSV file; got {type(data).__name__}")


def _sql_like(text: str) -> bool:
    """Text that is not a file name: several words, one of them a SQL keyword (FROM, SELECT, WHERE…), no
    data-file suffix, no such file. Treated as SQL so a typo
    in the first keyword (``SELEC …``) is reported by DuckDB's parser, not as "not a Parquet or CSV file"."""
    t = text.strip()
    return (len(t.split()) > 2 and _SQL_WORD.search(t) is not None
            and not t.lower().endswith(PARQUET_SUFFIXES + CSV_SUFFIXES) and not glob.has_magic(t)
            and not os.path.exists(t))


def check_sql(text: str) -> None:
    """Parse SQL text with DuckDB (no data read): a syntax error is an :class:`InputDataError` saying so, before
    anything else runs."""
    import duckdb

    try:
        duckdb.extract_statements(text)
    except duckdb.Error as e:
        raise InputDataError(f"SQL error in the query: {sql_error(e)}") from None


def sql_error(e: BaseException) -> str:
    """DuckDB's error message on one line (its ``LINE n:`` excerpt and caret line left out)."""
    lines = [ln.strip() for ln in str(e).splitlines()
             if ln.strip() and not re.match(r"^\s*(LINE \d+:.*|\^+)\s*$", ln)]
    return "; ".join(lines)


def file_format(path: str | os.PathLike) -> str:
    """"parquet" or "csv" for an existing file (or glob of files); raises InputDataError otherwise."""
    p = os.fspath(path)
    low = p.lower()
    if low.endswith(PARQUET_SUFFIXES):
        fmt = "parquet"
    elif low.endswith(CSV_SUFFIXES):
        fmt = "csv"
    else:
        raise InputDataError(f"{p!r} is not a Parquet or CSV file (expected a name ending in "
                             f"{', '.join(PARQUET_SUFFIXES + CSV_SUFFIXES)}); convert it or pass a DataFrame")
    files = expand(p)
    if not files or not all(os.path.isfile(f) for f in files):
        raise InputDataError(f"input file {p!r} does not exist")
    if fmt == "parquet":
        for f in files:
            with open(f, "rb") as fh:
                head = fh.read(4)
            if head != b"PAR1":
                raise InputDataError(f"{f!r} is not a Parquet file (it does not start with the PAR1 magic bytes)")
    else:
        for f in files:
            with open(f, "rb") as fh:
                head = fh.read(4096)
            if b"\x00" in head or head.startswith(b"PAR1"):
                raise InputDataError(f"{f!r} does not look like a CSV text file")
    return fmt


def expand(path: str | os.PathLike) -> list[str]:
    """The files a path or glob names (sorted)."""
    p = os.fspath(path)
    return sorted(glob.glob(p)) if glob.has_magic(p) else [p]


def file_columns(path: str | os.PathLike) -> list[str]:
    """Column names of a Parquet/CSV input (its first file, for a glob), read from the schema only (Parquet by
    Polars: ``pyarrow.parquet`` costs a DuckDB release 0.05 s of imports)."""
    first = expand(path)[0]
    if file_format(path) == "parquet":
        import polars as pl

        return list(pl.read_parquet_schema(first))
    import pyarrow.csv as pacsv

    with pacsv.open_csv(first) as r:
        return list(r.schema.names)


def display(data: Any) -> str:
    """Short description of an input for reports."""
    k = kind(data)
    if k == "file":
        return f"file {Path(os.fspath(data)).name}"
    if k == "sql":
        s = " ".join(str(data).split())
        return f"SQL {s[:60]}{'…' if len(s) > 60 else ''}"
    return {"spark": "Spark DataFrame", "polars": "Polars DataFrame", "polars-lazy": "Polars LazyFrame", "pandas": "pandas DataFrame",
            "arrow": "pyarrow Table", "duckdb": "DuckDB relation"}[k]
