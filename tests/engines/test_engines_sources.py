"""Recognising inputs without reading them: frame kinds, SQL text, Parquet/CSV files and globs."""

from __future__ import annotations

import pandas as pd
import polars as pl
import pytest

from sparsedp.core import sources
from sparsedp.errors import InputDataError, InvalidTypeError


def test_kinds(tmp_path):
    import duckdb

    df = pl.DataFrame({"a": [1]})
    assert sources.kind(df) == "polars" and sources.kind(df.lazy()) == "polars-lazy"
    assert sources.kind(df.to_pandas()) == "pandas" and sources.kind(df.to_arrow()) == "arrow"
    assert sources.kind(duckdb.sql("SELECT 1 AS a")) == "duckdb"
    for sql in ("SELECT 1", "  select a from t", "WITH x AS (SELECT 1) SELECT * FROM x", "(SELECT 1)",
                "FROM 'x.parquet'"):
        assert sources.kind(sql) == "sql", sql
    assert sources.kind("selection.parquet") == "file" and sources.kind(tmp_path / "x.csv") == "file"
    with pytest.raises(InvalidTypeError, match="data must be"):
        sources.kind({"a": [1]})
    assert sources.display(pd.DataFrame()) == "pandas DataFrame"
    assert sources.display("SELECT " + "x" * 100).endswith("…")


def test_file_formats_and_globs(tmp_path):
    df = pl.DataFrame({"u": [1, 2], "k": ["a", "b"]})
    df.write_parquet(tmp_path / "a.parquet")
    df.write_parquet(tmp_path / "b.parquet")
    df.write_csv(tmp_path / "c.CSV")
    assert sources.file_format(tmp_path / "a.parquet") == "parquet"
    assert sources.file_format(str(tmp_path / "*.parquet")) == "parquet"
    assert sources.file_format(tmp_path / "c.CSV") == "csv"
    with pytest.raises(InputDataError, match="does not exist"):
        sources.file_format(str(tmp_path / "none*.parquet"))
    (tmp_path / "bin.csv").write_bytes(b"PAR1\x00\x01")
    with pytest.raises(InputDataError, match="does not look like a CSV"):
        sources.file_format(tmp_path / "bin.csv")


def test_glob_input_releases_all_files(tmp_path, rng):
    from sparsedp.engines import get_engine

    pl.DataFrame({"u": [1, 2, 3], "k": ["a", "a", "b"]}).write_parquet(tmp_path / "p1.parquet")
    pl.DataFrame({"u": [4, 1], "k": ["a", "a"]}).write_parquet(tmp_path / "p2.parquet")
    for eng in ("polars", "duckdb", "pandas", "arrow"):
        bh = get_engine(eng).histogram(str(tmp_path / "p*.parquet"), "u", ["k"], 1, rng)
        got = dict(zip(bh.keys.column("k").to_pylist(), bh.counts.tolist()))
        assert got == {"a": 3, "b": 1}, eng
        assert bh.stats.rows_in == 5 and bh.stats.duplicate_rows_removed == 1
