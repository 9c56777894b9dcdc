"""DuckDB engine: bounding and counting in SQL, inside DuckDB.

Accepts a ``DuckDBPyRelation``, SQL text (``"SELECT user_id, url, country FROM shares WHERE action = 'share'"``,
run on ``connection`` or DuckDB's default connection), a Parquet/CSV path (``read_parquet``/``read_csv``), or
any frame DuckDB can scan (Polars, pandas, Arrow). The distinct (unit, key) pairs are materialised once in
DuckDB; only the per-key counts and the heavy units' pairs come back to Python, as Arrow.
"""

from __future__ import annotations

import os
from typing import Any

from ..errors import InputDataError
from . import sources
from .base import EmbeddedEngine, RawCounts, check_nulls_and_rows
from .bounding import COUNT


def _q(name: str) -> str:
    """Quote an identifier for DuckDB SQL."""
    return '"' + name.replace('"', '""') + '"'


def to_arrow_table(rel):
    """A relation's result as a ``pyarrow.Table`` (``to_arrow_table`` in new DuckDB, ``fetch_arrow_table`` before)."""
    f = getattr(rel, "to_arrow_table", None) or rel.fetch_arrow_table
    return f()


class DuckDBEngine(EmbeddedEngine):
    """Bounded histograms computed by DuckDB."""

    name = "duckdb"

    def __init__(self, connection: Any = None):
        self.connection = connection

    def _con(self):
        import duckdb

        return self.connection if self.connection is not None else duckdb.default_connection()

    def relation(self, data: Any):
        """A DuckDB relation over ``data``."""
        import duckdb

        k = sources.kind(data)
        con = self._con()
        try:
            if k == "duckdb":
                return data
            if k == "sql":
                return con.sql(data)
            if k == "file":
                fmt = sources.file_format(data)
                path = os.fspath(data).replace("'", "''")
                return con.sql(f"SELECT * FROM read_{fmt}('{path}')")
            if k == "polars-lazy":
                return con.from_arrow(data.collect().to_arrow())
            if k == "polars":
                return con.from_arrow(data.to_arrow())
            if k == "pandas":
                return con.from_df(data)
            if k == "arrow":
                return con.from_arrow(data)
        except duckdb.Error as e:
            raise InputDataError(f"DuckDB could not read the input: {e}") from None
        raise InputDataError(f"unsupported input for the DuckDB engine: {type(data).__name__}")

    def columns(self, data: Any) -> list[str]:
        return list(self.relation(data).columns)

    def rows_lazy(self, data: Any) -> Any:
        """The relation's rows as a Polars LazyFrame (SUM/MEAN releases run the shared Polars path)."""
        import polars as pl

        k = sources.kind(data)
        if k in ("polars", "polars-lazy", "pandas", "arrow", "file"):
            return super().rows_lazy(data)
        return pl.from_arrow(to_arrow_table(self.relation(data))).lazy()

    def raw_counts(self, data: Any, privacy_unit: str, by: list[str], l0: int | None) -> RawCounts:
        import duckdb

        rel = self.relation(data)
        u = _q(privacy_unit)
        ks = ", ".join(_q(c) for c in by)
        cols = [privacy_unit] + by
        try:
            check = rel.query("__src", "SELECT count(*), " + ", ".join(f"count(*) - count({_q(c)})" for c in cols)
                              + " FROM __src").fetchall()[0]
            check_nulls_and_rows(int(check[0]), dict(zip(cols, map(int, check[1:]))))
            pairs = rel.query("__src", f"SELECT DISTINCT {u}, {ks} FROM __src").materialize()
            lim = l0 if l0 is not None else 2**62
            units, npairs, heavy_n = pairs.query(
                "__p", f"SELECT count(*), coalesce(sum(d), 0), count(*) FILTER (WHERE d > {lim}) "
                       f"FROM (SELECT count(*) AS d FROM __p GROUP BY {u})").fetchall()[0]
            key_counts = to_arrow_table(pairs.query(
                "__p", f"SELECT {ks}, count(*)::BIGINT AS {COUNT} FROM __p GROUP BY {ks}"))
            heavy = None
            if l0 is not None:
                heavy = to_arrow_table(pairs.query(
                    "__p", f"SELECT {u}, {ks} FROM __p WHERE {u} IN "
                           f"(SELECT {u} FROM __p GROUP BY {u} HAVING count(*) > {lim})"))
        except duckdb.Error as e:
            raise InputDataError(f"DuckDB could not group the input: {e}") from None
        return RawCounts(rows_in=int(check[0]), units_in=int(units), pairs_in=int(npairs),
                         units_over_l0=int(heavy_n) if l0 is not None else 0,
                         key_counts=key_counts, heavy_pairs=heavy)
