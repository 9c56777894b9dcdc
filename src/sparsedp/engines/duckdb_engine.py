"""DuckDB engine: DuckDB reads the input and joins each row to its key index (and, past memory, de-duplicates
the pairs with its spilling ``DISTINCT``); the process bounds them with the Polars engine's code.

Accepts a ``DuckDBPyRelation``, SQL text (``"SELECT user_id, url, country FROM shares WHERE action = 'share'"``,
run on ``connection`` or DuckDB's default connection), a Parquet/CSV path (``read_parquet``/``read_csv``), or
a Polars, pandas or Arrow frame (scanned by DuckDB in place: Arrow zero-copy, Polars through its Arrow
export, pandas through DuckDB's pandas scan).

**The bounded histogram** (:meth:`DuckDBEngine.bounded_raw_counts`). After the input checks (rows, nulls, NaN
keys, in one SQL aggregate):

0. the distinct keys (``SELECT DISTINCT`` over the key columns only: 0.2 CPU s at 10^7 rows) leave DuckDB once;
   each gets its key index, its position in DuckDB's result, and the table ``(key, key index)`` is registered
   back on the connection under a random name. Then the secret is drawn. In the process the keys get their
   canonical positions (:func:`~sparsedp.core.key_order.canonical_order`, by Polars, the definition) and
   fingerprints (``h_k``, Polars' hash of the canonical values), both by key index.
1. **in memory** (one pass, and no more rows than :meth:`DuckDBEngine.batch_budget`: a 256th of the
   connection's memory limit, 75 million rows under DuckDB's default limit on a 24 GiB machine): the rows
   joined to the key table, ``(unit, key index[, values])`` (:func:`pairs_sql` with ``distinct=False``),
   leave DuckDB as Arrow. The process gives them the Polars engine's pair ids
   (:func:`~sparsedp.engines.pair_ids.pack_pairs`), sorts them, de-duplicates and bounds them
   (:func:`~sparsedp.engines.pair_ids.bound_pair_ids`: slices of whole units on a thread pool, each giving its
   units' degrees, the distinct units per key index, and for the units with more than ``l0`` keys their
   fingerprints ``h_u``, the ranks :func:`~sparsedp.engines.bounding.prf_ranks` (``AES-256_{K'}(h_u ‖ h_k)``)
   and :func:`~sparsedp.engines.bounding.keep_smallest`, the ``l0`` smallest ``(rank, canonical position)``).
2. **past the budget, or with** ``passes``: ``p`` (:func:`pairs_sql`), the distinct ``(unit, key index)``
   pairs de-duplicated by DuckDB (``SELECT DISTINCT``, which spills under its memory limit) in a temporary
   table, leave DuckDB in batches of whole units, ``(hash(unit) // passes) % batches``, of at most the budget
   in pairs each (:func:`batch_sql`; for integer units whose offsets fit beside the key bits, DuckDB packs each
   pair into the Polars engine's pair id ``(unit − min) · 2^b + key index``). Each batch goes through the same
   :func:`~sparsedp.engines.pair_ids.bound_pair_ids`, without de-duplication. The per-key counts are integer
   sums over the batches and passes.

Session 5 of issue 19 (``docs/engines_speed.md``) moved the per-unit work out of SQL. Session 4 computed each
unit's degree, the per-key totals and the heavy units' pairs with three more statements (a hash aggregation by
unit and a join back to the pairs), then ranked the heavy pairs in the process. A Polars sort of packed
integers costs less than that aggregation and join, and less than DuckDB's own ``DISTINCT`` of the same rows.
With the in-memory route the release costs less CPU than the plain ``COUNT(DISTINCT) GROUP BY``, and it shares
one implementation of the per-unit work with the Polars engine. DuckDB's ``DISTINCT`` stays for inputs larger
than memory, where it spills. The temporary table and the key table have random names and are removed
afterwards. The input is read twice (keys, then rows or pairs), as the input checks already read it: a source
that is not deterministic (SQL with ``random()``, a ``LIMIT`` without ``ORDER BY``) may give the two reads
different rows; a pair whose key the first read did not see is not counted.

With SUM/MEAN aggregates (:meth:`DuckDBEngine.bounded_raw_counts_with_sums`) the in-memory route carries the
rows' values out and the process sums them per pair and grids them (the Polars engine's code). The other route
makes step 2's pairs a ``GROUP BY unit, key index`` carrying each aggregate's clipped, gridded, re-centred
contribution (:func:`contribution_sql`), and the contributions leave DuckDB with the pairs. Either way the kept
pairs' contributions are summed per key exactly (int64), which gives the same table as the shared Polars path
for the same secret.

This is exactly the choice of :func:`sparsedp.engines.bounding.select_pairs` (module docstring there): the same
fingerprints, the same rank, the same ``l0`` smallest ``(rank, canonical key)`` per unit. DuckDB runs the
scan, the join and the ``DISTINCT`` with its own threads. It spills them to its temporary directory when they
do not fit in memory (an engine-owned connection gets a private temporary directory). ``passes`` splits the
units when even the pairs table should not be built at once.

The secret never enters DuckDB: not its SQL text, plans or functions (:mod:`sparsedp.engines.duckdb_objects`);
set :attr:`DuckDBEngine.plan_log` to a list to record the SQL and the ``EXPLAIN`` output of every statement
the engine runs after drawing it.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator, Sequence, cast

import numpy as np

from ..aggregates import Aggregate, Squares, Sum, noise_columns
from ..core import sources
from ..core.sources import InputData
from ..core.checks import check_columns
from ..core.unit_keys import UnitKeyCounts
from ..errors import InputDataError, InvalidParameterError
from ..progress import listening, polling, report
from .aggregate_exprs import bad_values, grid_column_name, missing_value_column, non_numeric_value_column
from ..core.arrow_arrays import numpy_to_arrow
from .base import EmbeddedEngine, RawCounts
from .input_checks import (check_key_values, check_mixed_types, check_nulls_and_rows, check_unique_names,
                           nan_key_error)
from .bounding import COUNT, draw_bounding_secret
from .duckdb_objects import bounding_objects, drop_tables
from .duckdb_settings import DuckDBSettings, size_bytes
from .pair_ids import PairContext, PairCounts, bits_for, bound_pair_ids, key_context, offset_values, pack_pairs

if TYPE_CHECKING:  # DuckDB, Polars and pyarrow are imported when the engine runs (``import sparsedp`` stays light)
    import pandas as pd
    import polars as pl
    import pyarrow as pa
    from duckdb import DuckDBPyConnection, DuckDBPyRelation
    from duckdb.sqltypes import DuckDBPyType

    from ..core.engine import RandomSource


def _q(name: str) -> str:
    """Quote an identifier for DuckDB SQL."""
    return '"' + name.replace('"', '""') + '"'


def _query(rel: DuckDBPyRelation, name: str, sql: str) -> DuckDBPyRelation:
    """``rel.query(name, sql)``: the SELECT ``sql`` over ``rel`` (named ``name`` in it) as a relation."""
    out = rel.query(name, sql)
    assert out is not None  # a query, not a statement: DuckDB returns its relation
    return out


def to_arrow_table(rel: DuckDBPyRelation) -> pa.Table:
    """A relation's result as a ``pyarrow.Table`` (``to_arrow_table`` in new DuckDB, ``fetch_arrow_table`` before)."""
    f = getattr(rel, "to_arrow_table", None) or rel.fetch_arrow_table
    return f()


def polars_to_arrow(df: pl.DataFrame) -> pa.Table:
    """A Polars DataFrame as Arrow without re-encoding strings (newest compat level: string views)."""
    import polars as pl

    try:
        return df.to_arrow(compat_level=pl.CompatLevel.newest())
    except (AttributeError, TypeError):  # older Polars
        return df.to_arrow()


_U = "__sparsedp_u"
_KI = "__sparsedp_ki"


def _input_error(what: str, e: BaseException) -> BaseException:
    """A DuckDB error as the exception to raise: an interrupt (DuckDB turns Ctrl-C into its
    ``InterruptException``) stays an interrupt (:class:`KeyboardInterrupt`: the CLI exits 130), anything else is
    an :class:`InputDataError` with DuckDB's message on one line."""
    import duckdb

    if isinstance(e, duckdb.InterruptException):
        return KeyboardInterrupt()
    return InputDataError(f"{what}: {sources.sql_error(e)}")


@contextmanager
def query_progress(con: DuckDBPyConnection, lo: float = 0.0, hi: float = 100.0) -> Iterator[None]:
    """While the block runs a query on ``con``, report DuckDB's own estimate of its progress (percent,
    ``query_progress()``) to the display (:mod:`sparsedp.progress`), mapped onto ``[lo, hi]`` percent of the
    stage (the bounding stage runs several queries and in-process work: each gets its share of the bar, so
    the bar advances through the whole stage); nothing when no display listens. DuckDB's progress bar is
    enabled for the block (not printed) and the connection's settings restored after."""
    if not listening():
        yield
        return
    try:
        old = [con.execute(f"SELECT current_setting('{k}')").fetchall()[0][0]
               for k in ("enable_progress_bar", "enable_progress_bar_print")]
        con.execute("SET enable_progress_bar = true; SET enable_progress_bar_print = false")
    except Exception:  # a connection that cannot report: no progress, same release
        yield
        return

    def sample() -> tuple[float, float, str] | None:
        pct = float(con.query_progress())
        return (lo + (hi - lo) * max(0.0, min(pct, 100.0)) / 100.0, 100.0, "%") if pct >= 0 else None

    try:
        report(lo, 100.0, "%")  # the stage shows as a percentage from its start (DuckDB estimates only some plans)
        with polling(sample):
            yield
    finally:
        try:
            con.execute(f"SET enable_progress_bar = {str(old[0]).lower()}; "
                        f"SET enable_progress_bar_print = {str(old[1]).lower()}")
        except Exception:
            pass


def _read_error(kind: str) -> str:
    return "SQL error in the query" if kind == "sql" else "DuckDB could not read the input"


def _kcol(i: int) -> str:
    return f"__sparsedp_k{i}"


def _dbl(x: float) -> str:
    """A DOUBLE literal equal to ``x`` (the shortest round-trip decimal, parsed by DuckDB as a string to DOUBLE:
    correctly rounded, unlike a DECIMAL literal cast to DOUBLE)."""
    return f"CAST('{float(x)!r}' AS DOUBLE)"


def contribution_sql(a: Sum, col: str) -> str:
    """SQL aggregate (over the rows of one (unit, key) group) of a Sum/Mean's gridded, clipped, re-centred
    contribution, the same IEEE double operations as
    :func:`~sparsedp.engines.aggregate_exprs.contribution_exprs`:
    ``CAST(clip(floor(clip(Σ CAST(v AS DOUBLE), lower, upper)/g + 0.5), q(lower), q(upper)) AS BIGINT) − c``."""
    ql, qu = a.grid_bounds
    assert a.granularity is not None  # set when the Sum was built
    v = f"least(greatest(sum(CAST({col} AS DOUBLE)), {_dbl(a.lower)}), {_dbl(a.upper)})"
    if isinstance(a, Squares):  # a Variance's sum of squares: the square of the clipped total
        v = f"(({v}) * ({v}))"
    q = f"least(greatest(floor({v} / {_dbl(a.granularity)} + {_dbl(0.5)}), {_dbl(ql)}), {_dbl(qu)})"
    return f"(CAST({q} AS BIGINT) - {int(a.centre)})"


def _vcol(j: int) -> str:
    return f"__sp_v{j}"


def _acol(j: int) -> str:
    return f"__sparsedp_a{j}"


def _val(col: str, tid: str) -> str:
    """Column ``col`` as the statements read it: ENUM values as VARCHAR (they compare and export as strings)."""
    return f"CAST({col} AS VARCHAR)" if tid == "enum" else col


def _src_cols(unit_type_id: str, key_type_ids: list[str]) -> tuple[str, list[str]]:
    """The projection of ``__src`` onto the unit ``__sparsedp_u`` and the key columns ``__sparsedp_k{i}``, and
    the key column names."""
    ks = [_kcol(i) for i in range(len(key_type_ids))]
    return ", ".join([f"{_val('__sp_unit', unit_type_id)} AS {_U}"]
                     + [f"{_val(f'__sp_key{i}', t)} AS {k}" for i, (k, t) in enumerate(zip(ks, key_type_ids))]), ks


def keys_sql(key_type_ids: list[str]) -> str:
    """The distinct keys of ``__src`` (columns ``__sparsedp_k{i}``): one aggregation over the key columns only."""
    return "SELECT DISTINCT " + ", ".join(f"{_val(f'__sp_key{i}', t)} AS {_kcol(i)}"
                                          for i, t in enumerate(key_type_ids)) + " FROM __src"


def pairs_sql(unit_type_id: str, key_type_ids: list[str], keys_view: str, sums: Sequence[tuple[Sum, int]] = (),
              part: tuple[int, int] | None = None, distinct: bool = True) -> str:
    """Step 1 of the module docstring over the relation ``__src`` and the registered key table ``keys_view``
    (the distinct keys ``__sparsedp_k{i}`` with their index ``{_KI}`` in canonical key order): the distinct
    ``(unit, key index)`` pairs, columns ``{_U}, {_KI}``.

    Args:
        unit_type_id, key_type_ids: DuckDB type ids (``DuckDBPyType.id``) of the unit and key columns.
        keys_view: name of the registered key table.
        sums: the SUM/MEAN grid columns (:func:`sparsedp.aggregates.noise_columns`) as ``(Sum, j)``, ``j`` the
            index of its value column ``__sp_v{j}`` in ``__src``; the pairs are then a ``GROUP BY`` carrying each
            one's :func:`contribution_sql` as ``__sparsedp_a{j}`` (BIGINT).
        part: ``(i, passes)``: only the units with ``hash(unit) % passes = i`` (one pass of
            :attr:`DuckDBEngine.passes`; ``None``: every unit).
        distinct: ``False``: the joined rows themselves, ``({_U}, {_KI}[, __sp_v{j}…])``, not de-duplicated
            (the in-memory route of :meth:`DuckDBEngine._bounded`: the process de-duplicates them).
    """
    src_cols, ks = _src_cols(unit_type_id, key_type_ids)
    kl = ", ".join(ks)
    vals = "".join(f", {_vcol(j)}" for j in dict.fromkeys(j for _, j in sums))  # each value column once
    where = "" if part is None else f" WHERE hash(__sp_unit) % {int(part[1])} = {int(part[0])}"
    joined = f"(SELECT {src_cols}{vals} FROM __src{where}) JOIN {keys_view} USING ({kl})"
    if not distinct:
        return f"SELECT {_U}, {_KI}{vals} FROM {joined}"
    if sums:
        contrib = "".join(f", {contribution_sql(a, _vcol(j))} AS {_acol(i)}" for i, (a, j) in enumerate(sums))
        return f"SELECT {_U}, {_KI}{contrib} FROM {joined} GROUP BY {_U}, {_KI}"
    return f"SELECT DISTINCT {_U}, {_KI} FROM {joined}"


#: DuckDB integer unit types whose pair ids DuckDB packs itself (:func:`batch_sql`), with their Polars dtype
_PACKED_UNITS = {"tinyint": "Int8", "smallint": "Int16", "integer": "Int32", "bigint": "Int64", "utinyint": "UInt8",
                 "usmallint": "UInt16", "uinteger": "UInt32", "ubigint": "UInt64"}
_P = "__sparsedp_pid"


def batch_sql(pairs: str, n_sums: int, batch: int, batches: int, passes: int,
              pack: tuple[int, int, str] | None = None) -> str:
    """Step 2: the pairs of one batch of the units of the pairs table ``pairs``: those with
    ``(hash(unit) // passes) % batches = batch`` (every pair when ``batches`` is 1; the division keeps the
    batches even within a pass, whose units share ``hash(unit) % passes``), as ``({_U}, {_KI}[,
    contributions])``, or with ``pack = (lo, key bits b, unit type id)`` (integer units whose offsets fit
    beside the key bits) as the pair ids of :mod:`~sparsedp.engines.pair_ids`, ``(unit − lo) · 2^b + key
    index`` (UBIGINT ``{_P}``), computed by DuckDB."""
    a_sel = "".join(f", {_acol(j)}" for j in range(n_sums))
    where = "" if batches == 1 else f" WHERE (hash({_U}) // {int(passes)}) % {int(batches)} = {int(batch)}"
    if pack is None:
        return f"SELECT {_U}, {_KI}{a_sel} FROM {pairs}{where}"
    lo, b, tid = pack
    off = (f"({_U} - CAST({int(lo)} AS UBIGINT))" if tid == "ubigint"
           else f"CAST(CAST({_U} AS BIGINT) - {int(lo)} AS UBIGINT)")
    return f"SELECT ({off} << {int(b)}) | CAST({_KI} AS UBIGINT) AS {_P}{a_sel} FROM {pairs}{where}"


@dataclass(frozen=True)
class _ValueColumns:
    """The SUM/MEAN value columns of a release as the DuckDB statements read them: ``vcols`` (each value
    column once, ``__sp_v{j}`` in ``__src``), ``sums`` (each distinct grid column,
    :func:`sparsedp.aggregates.noise_columns`, with the index ``j`` of its value column) and ``grid_names``
    (:func:`~sparsedp.engines.aggregate_exprs.grid_column_name`). Empty for a count-only release."""

    vcols: list[str]
    sums: list[tuple[Sum, int]]
    grid_names: list[str]


def _value_columns(aggregates: Sequence[Any], cols: list[str]) -> _ValueColumns:
    """The :class:`_ValueColumns` of ``aggregates``; a value column that is the unit or a key is refused."""
    if not aggregates:
        return _ValueColumns([], [], [])
    grid = noise_columns(aggregates)[0]
    vcols = list(dict.fromkeys(a.column for a in grid))
    if set(vcols) & set(cols):
        raise InputDataError(f"a SUM/MEAN column cannot be the privacy unit or a key column: {vcols}")
    return _ValueColumns(vcols=vcols, sums=[(a, vcols.index(a.column)) for a in grid],
                         grid_names=[grid_column_name(i) for i in range(len(grid))])


_NUMERIC = frozenset({"tinyint", "smallint", "integer", "bigint", "hugeint", "utinyint", "usmallint",
                      "uinteger", "ubigint", "uhugeint", "float", "double", "decimal"})


def _value_checks(types: dict[str, DuckDBPyType], vcols: list[str],
                  columns: list[str]) -> list[tuple[str, str, str]]:
    """The SQL counts of bad values, ``(column, "null" or "nonfinite", SQL count)``, after refusing a missing
    or non-numeric value column (as :func:`~sparsedp.engines.aggregate_exprs.check_value_columns`: missing /
    non-numeric first, by name)."""
    for c in sorted(vcols):
        if c not in types:
            raise missing_value_column(c, columns)
        if types[c].id not in _NUMERIC:
            raise non_numeric_value_column(c, types[c])
    vchecks = []
    for c in sorted(vcols):
        v = _vcol(vcols.index(c))
        vchecks.append((c, "null", f"count(*) - count({v})"))
        if types[c].id in ("float", "double"):
            vchecks.append((c, "nonfinite", f"count(*) FILTER (WHERE NOT isfinite({v}))"))
    return vchecks


def _checked_projection(con: DuckDBPyConnection, rel: DuckDBPyRelation, privacy_unit: str, by: list[str],
                        vcols: list[str], types: dict[str, DuckDBPyType], vchecks: list[tuple[str, str, str]]
                        ) -> tuple[DuckDBPyRelation, tuple[Any, ...], list[int]]:
    """``(proj, check, floats)``: the input projected onto ``__sp_unit``, ``__sp_key{i}`` and the value columns
    ``__sp_v{j}``; the input checks' counts (rows, null units and keys, ``vchecks``, NaN in the float keys),
    one SQL aggregate and the first read of the rows; the positions of the float key columns."""
    import duckdb

    try:
        proj = _query(rel, "__in", "SELECT " + ", ".join(
            [f"{_q(privacy_unit)} AS __sp_unit"] + [f"{_q(c)} AS __sp_key{i}" for i, c in enumerate(by)]
            + [f"{_q(c)} AS {_vcol(j)}" for j, c in enumerate(vcols)]) + " FROM __in")
        floats = [i for i, c in enumerate(by) if types[c].id in ("float", "double")]
        with query_progress(con, 0.0, 30.0):  # the input checks: the first read of the rows
            check = _query(proj, "__src", "SELECT count(*), " + ", ".join(
                ["count(*) - count(__sp_unit)"] + [f"count(*) - count(__sp_key{i})" for i in range(len(by))]
                + [e for _, _, e in vchecks]
                + [f"count(*) FILTER (WHERE isnan(__sp_key{i}))" for i in floats]) + " FROM __src"
            ).fetchall()[0]
    except duckdb.Error as e:
        raise _input_error("DuckDB could not read the input", e) from None
    return proj, check, floats


def _rows_after_checks(check: tuple[Any, ...], cols: list[str], by: list[str],
                       vchecks: list[tuple[str, str, str]], floats: list[int]) -> int:
    """The input's number of rows, once the counts of :func:`_checked_projection` passed: bad values first
    (naming the column), then no rows / null units or keys, then the NaN-key rule
    (:func:`~sparsedp.engines.input_checks.check_nan_keys`)."""
    n_v = 1 + len(cols)
    bad = [(c, kind, int(n)) for (c, kind, _), n in zip(vchecks, check[n_v:n_v + len(vchecks)]) if n]
    if bad:
        raise bad_values(bad)
    rows = int(check[0])
    check_nulls_and_rows(rows, dict(zip(cols, map(int, check[1:1 + len(cols)]))))
    for i, n in zip(floats, check[n_v + len(vchecks):]):
        if n:
            raise nan_key_error(by[i])
    return rows


def _distinct_keys(con: DuckDBPyConnection, proj: DuckDBPyRelation, tid: list[str]) -> pa.Table:
    """Step 0: the distinct keys (no randomness), in DuckDB's order (a key's index is its row)."""
    import duckdb

    try:
        with query_progress(con, 30.0, 50.0):
            return to_arrow_table(_query(proj, "__src", keys_sql(tid[1:])))
    except duckdb.Error as e:
        raise _input_error("DuckDB could not group the input", e) from None


def _key_frame(keys: pa.Table, by: list[str]) -> pl.DataFrame:
    """The distinct keys as a Polars frame with the key columns' own names (row ``i``: key index ``i``)."""
    import polars as pl

    kdf = pl.from_arrow(keys)
    assert isinstance(kdf, pl.DataFrame)
    return kdf.rename({_kcol(i): c for i, c in enumerate(by)})


def _scan(con: DuckDBPyConnection, data: InputData, k: str) -> DuckDBPyRelation:
    """A relation on ``con`` over a file or frame input of kind ``k`` (:func:`~sparsedp.core.sources.kind`):
    a Parquet/CSV scan, or the frame scanned in place (Arrow zero-copy, Polars through its Arrow export)."""
    if k == "file":
        fmt = sources.file_format(sources.as_path(data))
        path = sources.as_path(data).replace("'", "''")
        return con.sql(f"SELECT * FROM read_{fmt}('{path}')")
    if k == "polars-lazy":
        return con.from_arrow(polars_to_arrow(cast("pl.LazyFrame", data).collect()))
    if k == "polars":
        return con.from_arrow(polars_to_arrow(cast("pl.DataFrame", data)))
    if k == "pandas":
        return con.from_df(data)
    if k == "arrow":
        return con.from_arrow(data)
    raise InputDataError(f"unsupported input for the DuckDB engine: {type(data).__name__}")


class DuckDBEngine(EmbeddedEngine):
    """Bounded histograms of DuckDB inputs: DuckDB reads and joins (and past memory de-duplicates) the
    (unit, key index) pairs; degrees, counts and the ℓ0 choice are computed in this process by the Polars
    engine's code (see the module docstring)."""

    name = "duckdb"

    def __init__(self, connection: DuckDBPyConnection | None = None, *, memory_limit: str | None = None,
                 temp_directory: str | os.PathLike[str] | None = None, threads: int | None = None,
                 passes: int = 1) -> None:
        """``connection``: run on this DuckDB connection (its own settings) instead of a private one.
        ``memory_limit``, ``temp_directory``, ``threads``: the out-of-core settings of the private connection
        (:class:`~sparsedp.engines.duckdb_settings.DuckDBSettings`; for inputs larger than memory); refused
        together with ``connection``, whose settings are the caller's.
        ``passes``: run the bounding statement once per slice of the units (``hash(unit) % passes``) and add
        the per-key results. Each unit's ℓ0 choice depends on its own pairs and the secret only, so the slices'
        bounded counts and grid sums add up to exactly the one-pass histogram; DuckDB's working set (the
        distinct pairs, 7–17 bytes each when spilling) shrinks by the number of passes, at one read of the input
        per pass. For inputs whose distinct pairs do not fit in ``memory_limit`` in one pass."""
        if isinstance(passes, bool) or not isinstance(passes, int) or not 1 <= passes <= 4096:
            raise InvalidParameterError(f"passes must be an integer from 1 to 4096; got {passes!r}")
        self.passes = passes

        self.settings = DuckDBSettings(memory_limit=memory_limit, temp_directory=temp_directory, threads=threads)
        if connection is not None and self.settings != DuckDBSettings():
            raise InvalidParameterError("memory_limit, temp_directory and threads configure the engine's own "
                                        "connection; with connection=…, set them on that connection (SET …)")
        self.connection = connection
        #: when a list: (SQL text, EXPLAIN output) of every statement run after the secret was drawn
        self.plan_log: list[tuple[str, str]] | None = None

    def _con(self) -> DuckDBPyConnection:
        import duckdb

        return self.connection if self.connection is not None else duckdb.default_connection()

    @contextmanager
    def _source(self, data: InputData) -> Iterator[tuple[DuckDBPyConnection, DuckDBPyRelation]]:
        """``(connection, relation)`` over ``data``. SQL text runs on the given (or default) connection and a
        relation on its own; files and frames on the given connection, else on a private one (all threads,
        spilling to a private temporary directory), closed afterwards."""
        import duckdb

        k = sources.kind(data)
        own = None
        tmp = None
        try:
            if k == "duckdb":
                rel = cast("DuckDBPyRelation", data)
                con = getattr(data, "_con", None) or self._con()
                yield con, rel
                return
            if k == "sql":
                con = self._con()
                yield con, con.sql(cast(str, data))
                return
            if self.connection is not None:
                con = self.connection
            else:
                # spilling to a private directory, row order never needed; memory limit and threads as set
                # (duckdb_settings: DuckDB's defaults, 80 % of RAM and all cores, unless given)
                tmp = self.settings.spill_directory()
                own = con = duckdb.connect(config=self.settings.config(tmp))
            yield con, _scan(con, data, k)
        except duckdb.Error as e:
            raise _input_error(_read_error(k), e) from None
        finally:
            if own is not None:
                own.close()
            if tmp is not None:
                shutil.rmtree(tmp, ignore_errors=True)

    def relation(self, data: InputData) -> DuckDBPyRelation:
        """A DuckDB relation over ``data`` (on the given or default connection; kept for callers that scan
        it themselves)."""
        import duckdb

        k = sources.kind(data)
        con = self._con()
        try:
            if k == "duckdb":
                return cast("DuckDBPyRelation", data)
            if k == "sql":
                return con.sql(cast(str, data))
            return _scan(con, data, k)
        except duckdb.Error as e:
            raise _input_error(_read_error(k), e) from None

    def columns(self, data: InputData) -> list[str]:
        k = sources.kind(data)
        if k == "file":  # schema only (raises the friendly errors for foreign files)
            return sources.file_columns(sources.as_path(data))
        if k == "polars":
            return list(cast("pl.DataFrame", data).columns)
        if k == "polars-lazy":
            return cast("pl.LazyFrame", data).collect_schema().names()
        if k == "pandas":
            return [str(c) for c in cast("pd.DataFrame", data).columns]
        if k == "arrow":
            return list(cast("pa.Table", data).schema.names)
        return list(self.relation(data).columns)

    def bounded_raw_counts(self, data: InputData, privacy_unit: str, by: list[str], l0: int | None,
                           rng: RandomSource) -> RawCounts:
        """The bounded counts of every key, computed in DuckDB (module docstring), in canonical key order."""
        return self._bounded(data, privacy_unit, by, l0, rng, ())

    def bounded_raw_counts_with_sums(self, data: InputData, privacy_unit: str, by: list[str], l0: int | None,
                                     rng: RandomSource, aggregates: Sequence[Aggregate]) -> RawCounts:
        """The bounded counts AND the per-key grid sums of the SUM/MEAN ``aggregates``: each distinct pair's
        contribution computed in DuckDB's pairs statement (:func:`pairs_sql` with ``sums``,
        :func:`contribution_sql`), the kept ones summed per key in the process. The same table as the shared
        Polars path (:func:`~sparsedp.engines.pair_ids.bounded_raw_counts_with_sums`) for the same
        secret — the same kept pairs, the same contributions, the same checks and errors, the secret drawn at
        the same point.

        One caveat shared with every engine: a unit's per-key value total is a floating-point sum, and with
        three or more rows per (unit, key) the order of additions (row order, parallel partial aggregates)
        may change its last bit, hence its grid value by one step when it lies within one ulp of a rounding
        boundary. Privacy is unaffected (each contribution stays clipped to the grid bounds whatever the
        rounding)."""
        return self._bounded(data, privacy_unit, by, l0, rng, aggregates)

    def _bounded(self, data: InputData, privacy_unit: str, by: list[str], l0: int | None, rng: RandomSource,
                 aggregates: Sequence[Aggregate]) -> RawCounts:
        """The bounded counts (and grid sums) of the module docstring, in named steps: the value columns'
        plan, the input checks (one SQL aggregate), the distinct keys, the secret (only now), then the
        in-memory route or the passes over DuckDB's distinct pairs."""
        cols = [privacy_unit] + by
        values = _value_columns(aggregates, cols)
        with self._source(data) as (con, rel):
            types = dict(zip(rel.columns, rel.types))
            vchecks = _value_checks(types, values.vcols, list(rel.columns))
            proj, check, floats = _checked_projection(con, rel, privacy_unit, by, values.vcols, types, vchecks)
            rows = _rows_after_checks(check, cols, by, vchecks, floats)
            tid: list[str] = [types[c].id for c in cols]
            budget = self.batch_budget(con, len(values.sums))
            keys = _distinct_keys(con, proj, tid)
            secret = draw_bounding_secret(rng) if l0 is not None else None  # after validation only
            kdf = _key_frame(keys, by)
            ctx = key_context(kdf, by, bits_for(kdf.height - 1), l0, secret, privacy_unit,
                              [a for a, _ in values.sums], values.grid_names)
            acc = self._bound_keyed(con, proj, keys, tid, values, ctx, rows, budget)
        return acc.raw_counts(kdf, ctx, rows)

    def _bound_keyed(self, con: DuckDBPyConnection, proj: DuckDBPyRelation, keys: pa.Table, tid: list[str],
                     values: _ValueColumns, ctx: PairContext, rows: int, budget: int) -> PairCounts:
        """Register the key table ``(key, key index)`` and bound the pairs: in memory (one pass, at most
        ``budget`` rows) or in :attr:`passes` over DuckDB's distinct pairs; the temporary objects are removed
        afterwards (:func:`~sparsedp.engines.duckdb_objects.bounding_objects`)."""
        with bounding_objects(con) as (view, tag):
            # the key index is the row's position in DuckDB's order (a sorted build side made the join fail
            # to spill under a memory limit); the canonical order is applied in the process (ctx.pos)
            ki = np.arange(ctx.n_keys, dtype=np.int32 if ctx.n_keys < 2**31 else np.int64)
            con.register(view, keys.append_column(_KI, numpy_to_arrow(ki)))
            if self.passes == 1 and rows <= budget:  # in memory: the rows go to the process
                return self._bound_in_memory(con, proj, view, tid, values, ctx)
            return self._bound_in_passes(con, proj, view, tag, tid, values.sums, ctx, budget)

    def _bound_in_memory(self, con: DuckDBPyConnection, proj: DuckDBPyRelation, view: str, tid: list[str],
                         values: _ValueColumns, ctx: PairContext) -> PairCounts:
        """Step 1 of the module docstring: the joined rows leave DuckDB once and are bounded in the process."""
        import duckdb

        try:
            with query_progress(con, 50.0, 70.0):
                rows_t = self._fetch(con, pairs_sql(tid[0], tid[1:], view, values.sums, None, distinct=False),
                                     src=proj)
        except duckdb.Error as e:
            raise _input_error("DuckDB could not group the input", e) from None
        report(70.0, 100.0, "%")  # the bound and the counts, in the process
        return self._bound_rows(rows_t, ctx, values.vcols)

    def _bound_in_passes(self, con: DuckDBPyConnection, proj: DuckDBPyRelation, view: str, tag: str,
                         tid: list[str], sums: Sequence[tuple[Sum, int]], ctx: PairContext,
                         budget: int) -> PairCounts:
        """Step 2 of the module docstring: per pass, DuckDB's distinct pairs in a temporary table, bounded in
        batches (:meth:`_bound_pairs`); the per-key results of the passes added up."""
        import duckdb

        tp = f"__sparsedp_p_{tag}"
        acc: PairCounts | None = None
        for i in range(self.passes):
            part = None if self.passes == 1 else (i, self.passes)
            try:
                step = 50.0 / self.passes
                with query_progress(con, 50.0 + i * step, 50.0 + (i + 0.7) * step):  # runs when built
                    self._run(con, f"CREATE TEMP TABLE {tp} AS "
                              + pairs_sql(tid[0], tid[1:], view, sums, part), src=proj)
                report(50.0 + (i + 0.7) * step, 100.0, "%")
                got = self._bound_pairs(con, tp, tid[0], ctx, budget)
                acc = got if acc is None else acc.add(got)
            except duckdb.Error as e:
                raise _input_error("DuckDB could not group the input", e) from None
            finally:
                drop_tables(con, tag)  # before the next pass: DuckDB holds one slice at a time
        assert acc is not None  # at least one pass and one batch
        return acc

    @staticmethod
    def _bound_rows(rows: pa.Table, ctx: PairContext, vcols: list[str]) -> PairCounts:
        """The in-memory route of :meth:`_bounded`: the joined rows ``({_U}, {_KI}[, values])`` (Arrow, not
        de-duplicated) through the Polars engine's steps 2–4 (:func:`~sparsedp.engines.pair_ids.pack_pairs`,
        :func:`~sparsedp.engines.pair_ids.bound_pair_ids` with de-duplication, and with SUM/MEAN the rows'
        values summed per pair and gridded in the process)."""
        import polars as pl

        t = pl.from_arrow(rows)  # no copy
        assert isinstance(t, pl.DataFrame)
        del rows
        pid, value_of = pack_pairs(t[_U].alias(ctx.unit), t[_KI], ctx.bk)
        values = {c: t[_vcol(j)].alias(c) for j, c in enumerate(vcols)}
        del t
        return bound_pair_ids(ctx, pid, value_of, values)

    def _bound_pairs(self, con: DuckDBPyConnection, pairs: str, unit_type_id: str, ctx: PairContext,
                     budget: int) -> PairCounts:
        """Steps 2–3 of the module docstring for one pass: the pairs table ``pairs`` leaves DuckDB in batches
        of whole units of at most about ``budget`` pairs (:func:`batch_sql`; pair ids packed by DuckDB for
        integer units whose offsets fit beside the key bits), each bounded by
        :func:`~sparsedp.engines.pair_ids.bound_pair_ids`; the per-key results added up."""
        import polars as pl

        # distinct pairs; with SUM/MEAN, each carries its contribution computed in SQL (contribution_sql)
        ctx = dataclasses.replace(ctx, distinct=True, given=bool(ctx.names))
        packable = unit_type_id in _PACKED_UNITS
        info = self._fetch(con, "SELECT count(*) AS n" + (f", min({_U}) AS lo, max({_U}) AS hi" if packable else "")
                           + f" FROM {pairs}").to_pylist()[0]
        n_batches = max(1, -(-int(info["n"]) // budget))
        pack = None
        if packable and info["n"] and bits_for(int(info["hi"]) - int(info["lo"])) + ctx.bk <= 64:
            pack = (int(info["lo"]), ctx.bk, unit_type_id)
        acc: PairCounts | None = None
        for b in range(n_batches):
            t = pl.from_arrow(self._fetch(con, batch_sql(pairs, len(ctx.names), b, n_batches, self.passes,
                                                         pack)))  # no copy
            assert isinstance(t, pl.DataFrame)
            pid: np.ndarray | pl.Series
            if pack is not None:  # pair ids packed by DuckDB: unit offsets from lo
                pid = t[_P]
                value_of = offset_values(ctx.unit, pack[0], getattr(pl, _PACKED_UNITS[unit_type_id]))
            else:  # dense unit ids from a hash aggregation in the process
                pid, value_of = pack_pairs(t[_U].alias(ctx.unit), t[_KI], ctx.bk)
            got = bound_pair_ids(ctx, pid, value_of, {n: t[_acol(j)].alias(n) for j, n in enumerate(ctx.names)})
            del t, pid
            acc = got if acc is None else acc.add(got)
        assert acc is not None
        return acc

    #: distinct pairs read out of DuckDB and bounded per batch at most (about 28 bytes each in the process at
    #: once, plus 16 per SUM/MEAN column): the cap when the connection's memory limit allows more
    PAIR_BATCH = 1 << 27

    def batch_budget(self, con: DuckDBPyConnection, n_sums: int) -> int:
        """Pairs per batch: the connection's ``memory_limit`` (DuckDB's default: 80 % of RAM) / (256 + 128 per
        SUM/MEAN column), at least 2^16, at most :attr:`PAIR_BATCH`: a batch then takes about a ninth of the
        limit in the process, beside DuckDB's own memory."""
        limit = size_bytes(con.execute("SELECT current_setting('memory_limit')").fetchall()[0][0])
        if limit is None:
            return self.PAIR_BATCH
        return min(self.PAIR_BATCH, max(1 << 16, limit // (256 + 128 * n_sums)))

    def _fetch(self, con: DuckDBPyConnection, sql: str, src: DuckDBPyRelation | None = None) -> pa.Table:
        """:meth:`_run` of a query, with its result as an Arrow table."""
        out = self._run(con, sql, fetch=True, src=src)
        assert out is not None  # fetched
        return out

    def _run(self, con: DuckDBPyConnection, sql: str, fetch: bool = False,
             src: DuckDBPyRelation | None = None) -> pa.Table | None:
        """Run one statement of the bounded histogram on ``con`` (or on ``src``, the input's projection, which
        the statement reads as ``__src``), recording it and its plan in :attr:`plan_log`; with ``fetch`` return
        its result as an Arrow table."""
        def rel(text: str) -> DuckDBPyRelation:
            return _query(src, "__src", text) if src is not None else con.sql(text)

        if self.plan_log is not None:
            self.plan_log.append((sql, "\n".join(str(r[-1]) for r in rel("EXPLAIN " + sql).fetchall())))
        if fetch:
            return to_arrow_table(rel(sql))
        if src is not None:
            src.query("__src", sql)  # a statement that is not a query runs when its relation is built
        else:
            con.execute(sql)
        return None

    def keys_per_unit_counts(self, data: InputData, privacy_unit: str, by: Sequence[str],
                             candidates: Sequence[int]) -> UnitKeyCounts:
        """In DuckDB: the histogram of distinct keys per unit (:meth:`Engine.keys_per_unit_counts`), with the
        same input checks as the histogram (columns, nulls, no rows, key values) before any charge."""
        import duckdb


        by = list(by)
        check_unique_names(data)
        check_mixed_types(data, privacy_unit, by)
        check_columns(self.columns(data), privacy_unit, by)
        cols = [privacy_unit] + by
        with self._source(data) as (con, rel):
            types = dict(zip(rel.columns, rel.types))
            u, ks = _q(privacy_unit), ", ".join(_q(c) for c in by)
            floats = [c for c in by if types[c].id in ("float", "double")]
            try:
                check = _query(rel, "__src", "SELECT count(*), " + ", ".join(
                    f"count(*) - count({_q(c)})" for c in cols) + " FROM __src").fetchall()[0]
                check_nulls_and_rows(int(check[0]), dict(zip(cols, map(int, check[1:]))))
                where = " OR ".join(f"isnan({_q(c)})" for c in floats) or "false"
                bad = to_arrow_table(_query(rel, "__src", f"SELECT {ks} FROM __src WHERE {where} LIMIT 1"))
                check_key_values(bad, by)
                hist = _query(rel, "__src", f"SELECT d, count(*) FROM (SELECT {u}, count(*) AS d FROM "
                                          f"(SELECT DISTINCT {u}, {ks} FROM __src) GROUP BY {u}) GROUP BY d").fetchall()
            except duckdb.Error as e:
                raise InputDataError(f"DuckDB could not group the input: {e}") from None
        return UnitKeyCounts.from_degrees(candidates, [int(d) for d, _ in hist], [int(n) for _, n in hist])

    def rows_lazy(self, data: InputData) -> pl.LazyFrame:
        """The relation's rows as a Polars LazyFrame (SUM/MEAN releases run the shared Polars path)."""
        import polars as pl

        k = sources.kind(data)
        if k in ("polars", "polars-lazy", "pandas", "arrow", "file"):
            return super().rows_lazy(data)
        rows = pl.from_arrow(to_arrow_table(self.relation(data)))
        assert isinstance(rows, pl.DataFrame)  # a table gives a frame
        return rows.lazy()

    def raw_counts(self, data: InputData, privacy_unit: str, by: list[str], l0: int | None) -> RawCounts:
        """Generic interface (the choice left to :func:`~sparsedp.engines.bounding.bound`): unbounded counts per
        key and the heavy units' pairs. :meth:`bounded_raw_counts` is the fast path."""
        import duckdb

        with self._source(data) as (con, rel):
            u = _q(privacy_unit)
            ks = ", ".join(_q(c) for c in by)
            cols = [privacy_unit] + by
            try:
                check = _query(rel, "__src", "SELECT count(*), " + ", ".join(
                    f"count(*) - count({_q(c)})" for c in cols) + " FROM __src").fetchall()[0]
                check_nulls_and_rows(int(check[0]), dict(zip(cols, map(int, check[1:]))))
                pairs = _query(rel, "__src", f"SELECT DISTINCT {u}, {ks} FROM __src").materialize()
                lim = l0 if l0 is not None else 2**62
                units, npairs, heavy_n = _query(pairs, 
                    "__p", f"SELECT count(*), coalesce(sum(d), 0), count(*) FILTER (WHERE d > {lim}) "
                           f"FROM (SELECT count(*) AS d FROM __p GROUP BY {u})").fetchall()[0]
                key_counts = to_arrow_table(_query(pairs, 
                    "__p", f"SELECT {ks}, count(*)::BIGINT AS {COUNT} FROM __p GROUP BY {ks}"))
                heavy = None
                if l0 is not None:
                    heavy = to_arrow_table(_query(pairs, 
                        "__p", f"SELECT {u}, {ks} FROM __p WHERE {u} IN "
                               f"(SELECT {u} FROM __p GROUP BY {u} HAVING count(*) > {lim})"))
            except duckdb.Error as e:
                raise _input_error("DuckDB could not group the input", e) from None
        return RawCounts(rows_in=int(check[0]), units_in=int(units), pairs_in=int(npairs),
                         units_over_l0=int(heavy_n) if l0 is not None else 0,
                         key_counts=key_counts, heavy_pairs=heavy)
