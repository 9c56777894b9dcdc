"""Recognising inputs: frames, DuckDB relations, SQL text, Parquet/CSV files.

Nothing here reads data: only types, paths, a file's first bytes and the start of a SQL string.
"""

from __future__ import annotations

import glob
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias, cast

from ..errors import InputDataError, InputFormatError, InvalidTypeError

if TYPE_CHECKING:  # the data libraries are imported when data are read (``import sparsedp`` stays light)
    import pandas as pd
    import polars as pl
    import pyarrow as pa
    from duckdb import DuckDBPyRelation
    from pyspark.sql import DataFrame as SparkDataFrame

#: what a release reads (:func:`kind` tells which): a frame of one of the data libraries, a DuckDB relation,
#: SQL text, or the path (or glob) of Parquet/CSV files
InputData: TypeAlias = ("pl.DataFrame | pl.LazyFrame | pa.Table | pa.RecordBatch | pd.DataFrame | DuckDBPyRelation"
                        " | SparkDataFrame | str | os.PathLike[str]")

PARQUET_SUFFIXES = (".parquet", ".pq", ".parq")
CSV_SUFFIXES = (".csv",)
_SQL = re.compile(r"^\s*(\(\s*)*(select|with|from|values|table)\b", re.IGNORECASE)
_SQL_WORD = re.compile(r"\b(select|from|where|group|join|with|values)\b", re.IGNORECASE)


def kind(data: object) -> str:
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


def file_format(path: str | os.PathLike[str]) -> str:
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


def as_path(data: InputData) -> str:
    """The path of an input of kind "file" (:func:`kind`), as a string."""
    return os.fspath(cast("str | os.PathLike[str]", data))


def expand(path: str | os.PathLike[str]) -> list[str]:
    """The files a path or glob names (sorted; ``**`` matches any depth)."""
    p = os.fspath(path)
    return sorted(glob.glob(p, recursive=True)) if glob.has_magic(p) else [p]


def resolve_file(path: InputData) -> InputData:
    """A directory of Parquet (or CSV) parts, as Spark, DuckDB and Hive-partitioned datasets write them, as the
    glob of its data files (``dir/*.parquet``, or ``dir/**/*.parquet`` when they sit in subdirectories); any
    other input unchanged. Every engine reads the glob; files that are not data (``_SUCCESS``, ``.crc``) are
    left out. A directory with no data file, or with both Parquet and CSV files, is refused naming what it
    holds."""
    if not isinstance(path, (str, os.PathLike)) or not os.path.isdir(path):
        return path
    p = os.fspath(path).rstrip("/\\") or os.fspath(path)
    found = {}
    for suffixes in (PARQUET_SUFFIXES, CSV_SUFFIXES):
        for suffix in suffixes:
            flat = glob.glob(os.path.join(glob.escape(p), f"*{suffix}"))
            deep = glob.glob(os.path.join(glob.escape(p), "**", f"*{suffix}"), recursive=True)
            if deep:
                found[suffix] = (flat, deep)
    kinds = {"parquet" if s in PARQUET_SUFFIXES else "csv" for s in found}
    if not found:
        raise InputFormatError(f"directory {p!r} holds no Parquet or CSV file (expected names ending in "
                               f"{', '.join(PARQUET_SUFFIXES + CSV_SUFFIXES)})")
    if len(kinds) > 1 or len(found) > 1:
        raise InputFormatError(f"directory {p!r} mixes data files ({', '.join(sorted('*' + s for s in found))}); "
                               f"pass a glob naming one kind, e.g. {os.path.join(p, '*' + next(iter(found)))!r}")
    (suffix, (flat, deep)), = found.items()
    return os.path.join(p, f"*{suffix}") if len(flat) == len(deep) else os.path.join(p, "**", f"*{suffix}")


def explain_read_error(data: InputData, err: InputDataError) -> InputDataError:
    """A read error on a CSV input, explained: a file that is not UTF-8 (the line of the first bad byte and how
    to read it), or a ragged file (the first line whose field count differs from the header's). The file is
    scanned only here, after a reader failed. Any other error is returned as it is."""
    if type(err) is not InputDataError or kind(data) != "file" or not as_path(data).lower().endswith(
            CSV_SUFFIXES):
        return err
    text = str(err).lower()
    files = expand(as_path(data))
    if "utf-8" in text or "utf8" in text or "unicode" in text or "encod" in text:
        for f in files:
            line = _first_non_utf8_line(f)
            if line is not None:
                return InputFormatError(
                    f"{f!r} is not UTF-8 text: line {line} holds a byte that is not UTF-8 (the file is probably "
                    f"Latin-1 or Windows-1252)", fix=f"convert it (iconv -f latin1 -t utf-8 {f} > utf8.csv), or "
                    f"read it with its encoding through DuckDB: pass the SQL text "
                    f"\"SELECT * FROM read_csv('{f}', encoding='latin-1')\" as the input")
    if "ragged" in text or "more fields" in text or ("expected" in text and "columns" in text) or "fields" in text:
        for f in files:
            bad = _first_ragged_line(f)
            if bad is not None:
                line, got, want = bad
                return InputFormatError(
                    f"{f!r} is ragged: line {line} has {got} fields, the header has {want} (an unquoted comma in a "
                    f"value, or a missing/extra field)",
                    fix=f"fix the file (quote values holding the delimiter), or read it leniently through DuckDB: "
                    f"pass the SQL text \"SELECT * FROM read_csv('{f}', null_padding=true, ignore_errors=true)\" "
                    f"as the input (DuckDB then pads short rows with nulls and skips rows it cannot parse: check the row "
                    f"count)")
    return err


def _first_non_utf8_line(path: str) -> int | None:
    with open(path, "rb") as fh:
        for i, raw in enumerate(fh, start=1):
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError:
                return i
    return None


def _first_ragged_line(path: str) -> tuple[int, int, int] | None:
    """(line, fields, header fields) of the first record whose field count differs from the header's."""
    import csv

    with open(path, newline="", encoding="utf-8", errors="replace") as fh:
        reader = csv.reader(fh)
        header = next(reader, None)
        if header is None:
            return None
        for row in reader:
            if row and len(row) != len(header):
                return reader.line_num, len(row), len(header)
    return None


def file_columns(path: str | os.PathLike[str]) -> list[str]:
    """Column names of a Parquet/CSV input (its first file, for a glob), read from the schema only (Parquet by
    Polars: ``pyarrow.parquet`` costs a DuckDB release 0.05 s of imports)."""
    first = expand(path)[0]
    if file_format(path) == "parquet":
        import polars as pl

        return list(pl.read_parquet_schema(first))
    import pyarrow.csv as pacsv

    with pacsv.open_csv(first) as r:
        return list(r.schema.names)


def to_lazy(data: InputData) -> pl.LazyFrame:
    """A Polars LazyFrame over any supported input (files scanned lazily, frames zero-copy where possible)."""
    import polars as pl

    k = kind(data)
    if k == "polars-lazy":
        return cast("pl.LazyFrame", data)
    if k == "polars":
        return cast("pl.DataFrame", data).lazy()
    if k == "pandas":
        return pl.from_pandas(cast("pd.DataFrame", data)).lazy()
    if k == "arrow":
        import pyarrow as pa
        t = pa.Table.from_batches([data]) if isinstance(data, pa.RecordBatch) else data
        frame = pl.from_arrow(t)
        assert isinstance(frame, pl.DataFrame)  # a table gives a frame
        return frame.lazy()
    if k == "duckdb":
        rows: pl.DataFrame = cast("DuckDBPyRelation", data).pl()
        return rows.lazy()
    if k == "file":
        path = as_path(data)
        fmt = file_format(path)
        return pl.scan_parquet(path) if fmt == "parquet" else pl.scan_csv(path)
    raise InputDataError("SQL text needs the DuckDB engine (engine='duckdb' or engine=None)")


def display(data: InputData) -> str:
    """Short description of an input for reports."""
    k = kind(data)
    if k == "file":
        return f"file {Path(as_path(data)).name}"
    if k == "sql":
        s = " ".join(str(data).split())
        return f"SQL {s[:60]}{'…' if len(s) > 60 else ''}"
    return {"spark": "Spark DataFrame", "polars": "Polars DataFrame", "polars-lazy": "Polars LazyFrame", "pandas": "pandas DataFrame",
            "arrow": "pyarrow Table", "duckdb": "DuckDB relation"}[k]
