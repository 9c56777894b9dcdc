"""DuckDB engine: pairs, degrees and counts in SQL inside DuckDB; the ℓ0 choice on heavy pairs, in batches.

Accepts a ``DuckDBPyRelation``, SQL text (``"SELECT user_id, url, country FROM shares WHERE action = 'share'"``,
run on ``connection`` or DuckDB's default connection), a Parquet/CSV path (``read_parquet``/``read_csv``), or
a Polars, pandas or Arrow frame (scanned by DuckDB in place: Arrow zero-copy, Polars through its Arrow
export, pandas through DuckDB's pandas scan).

**The bounded histogram: the distinct keys, then a few statements on integers**
(:meth:`DuckDBEngine.bounded_raw_counts`). After the input checks (rows, nulls, NaN keys):

0. the distinct keys (``SELECT DISTINCT`` over the key columns only: cheap, 0.3 CPU s at 10^7 rows) leave
   DuckDB once; they are put in canonical key order (:func:`~sparsedp.engines.bounding.canonical_order`,
   by Polars, the definition) and fingerprinted (``h_k``, Polars' hash of the canonical values); the table
   ``(key, key index)`` is registered back on the connection under a random name. Then the secret is drawn.
1. ``p`` (:func:`pairs_sql`): the distinct ``(unit, key index)`` pairs — the rows joined to the key table (a
   hash join whose build side is the small key table), de-duplicated on integers (``SELECT DISTINCT``), stored
   in a temporary table (DuckDB spills it under a memory limit);
2. ``d`` (:func:`degrees_sql`): each unit's number of distinct keys (a temporary table); per key index, its
   number of distinct units (:func:`key_totals_sql`) and the statistics (:func:`stats_sql`) leave DuckDB;
3. for the units with ``d > l0`` only (:meth:`DuckDBEngine._drop_heavy`): a dense index
   (:func:`heavy_units_sql`); the units leave DuckDB and get their fingerprint ``h_u`` (Polars' hash, one call:
   :func:`~sparsedp.engines.bounding.unit_fingerprints`); their pairs leave DuckDB in
   batches of whole units (:func:`heavy_pairs_sql`, :func:`heavy_batches`: at most
   :attr:`DuckDBEngine.HEAVY_BATCH` pairs, fewer under a ``memory_limit``) and are ranked **in the process** by
   the Polars engine's code: :func:`~sparsedp.engines.bounding.prf_ranks` (``AES-256_{K'}(h_u ‖ h_k)``) and
   :func:`~sparsedp.engines.bounding.keep_smallest` (the ``l0`` smallest ``(rank, key index)`` per unit); the
   dropped pairs are subtracted from the key totals by key index.

The temporary tables and the key table have random names and are removed afterwards. No string is hashed, joined or grouped after step 1's join, and only per-key rows and the heavy
units' integer pairs leave DuckDB. Session 4 of issue 19 (``docs/engines_speed.md``) replaced session 3's single
statement (a rank UDF called by DuckDB on 2 048-row batches, then a ``row_number()`` window): the UDF's
per-batch Arrow conversion and GIL hand-over, and the window's sort, cost more than ranking the same pairs
in numpy. The input is read twice (keys, then pairs), as the input checks already read it: a source
that is not deterministic (SQL with ``random()``, a ``LIMIT`` without ``ORDER BY``) may give the two reads
different rows; a pair whose key the first read did not see is not counted.

With SUM/MEAN aggregates (:meth:`DuckDBEngine.bounded_raw_counts_with_sums`) step 1 is a ``GROUP BY unit,
key index`` carrying each aggregate's clipped, gridded, re-centred contribution (:func:`contribution_sql`), the
per-key totals sum them in DuckDB, the heavy pairs carry them out and the dropped ones are subtracted exactly
(int64): the same table as the shared Polars path for the same secret.

This is exactly the choice of :func:`sparsedp.engines.bounding.select_pairs` (module docstring there): the same
fingerprints, the same rank, the same ``l0`` smallest ``(rank, canonical key)`` per unit (the key index is the
position in the canonical key order, so ordering by it is the canonical tie-break). Only the per-key bounded
counts, five statistics and the heavy units' pairs leave DuckDB; DuckDB runs the aggregations and the joins
with its own threads and spills them to its temporary directory when they do not fit in memory (an
engine-owned connection gets a private temporary directory).

The secret never enters DuckDB: not its SQL text, plans or functions (:mod:`sparsedp.engines.duckdb_objects`);
set :attr:`DuckDBEngine.plan_log` to a list to record the SQL and the ``EXPLAIN`` output of every statement
the engine runs after drawing it.
"""

from __future__ import annotations

import os
import shutil
from contextlib import contextmanager
from typing import Any, Iterator, Sequence

from ..errors import InputDataError
from . import sources
from .base import EmbeddedEngine, RawCounts, check_nulls_and_rows, nan_key_error, numpy_to_arrow
from .bounding import COUNT, canonical_order, draw_bounding_secret


def _q(name: str) -> str:
    """Quote an identifier for DuckDB SQL."""
    return '"' + name.replace('"', '""') + '"'


def to_arrow_table(rel):
    """A relation's result as a ``pyarrow.Table`` (``to_arrow_table`` in new DuckDB, ``fetch_arrow_table`` before)."""
    f = getattr(rel, "to_arrow_table", None) or rel.fetch_arrow_table
    return f()


def polars_to_arrow(df: Any):
    """A Polars DataFrame as Arrow without re-encoding strings (newest compat level: string views)."""
    import polars as pl

    try:
        return df.to_arrow(compat_level=pl.CompatLevel.newest())
    except (AttributeError, TypeError):  # older Polars
        return df.to_arrow()


_U = "__sparsedp_u"
_D = "__sparsedp_d"
_C = "__sparsedp_c"
_KI = "__sparsedp_ki"
_HI = "__sparsedp_hi"
_STATS = ("__sparsedp_units", "__sparsedp_pairs", "__sparsedp_heavy")


def _input_error(what: str, e: BaseException) -> BaseException:
    """A DuckDB error as the exception to raise: an interrupt (DuckDB turns Ctrl-C into its
    ``InterruptException``) stays an interrupt (:class:`KeyboardInterrupt`: the CLI exits 130), anything else is
    an :class:`InputDataError` with DuckDB's message on one line."""
    import duckdb

    if isinstance(e, duckdb.InterruptException):
        return KeyboardInterrupt()
    return InputDataError(f"{what}: {sources.sql_error(e)}")


@contextmanager
def query_progress(con: Any) -> Iterator[None]:
    """While the block runs a query on ``con``, report DuckDB's own estimate of its progress (percent,
    ``query_progress()``) to the display (:mod:`sparsedp.progress`); nothing when no display listens. DuckDB's
    progress bar is enabled for the block (not printed) and the connection's settings restored after."""
    from ..progress import listening, polling, report

    if not listening():
        yield
        return
    try:
        old = [con.execute(f"SELECT current_setting('{k}')").fetchone()[0]
               for k in ("enable_progress_bar", "enable_progress_bar_print")]
        con.execute("SET enable_progress_bar = true; SET enable_progress_bar_print = false")
    except Exception:  # a connection that cannot report: no progress, same release
        yield
        return

    def sample() -> tuple[float, float, str] | None:
        pct = float(con.query_progress())
        return (max(0.0, min(pct, 100.0)), 100.0, "%") if pct >= 0 else None

    try:
        report(0.0, 100.0, "%")  # the stage shows as a percentage from its start (DuckDB estimates only some plans)
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


def contribution_sql(a: Any, col: str) -> str:
    """SQL aggregate (over the rows of one (unit, key) group) of a Sum/Mean's gridded, clipped, re-centred
    contribution, the same IEEE double operations as
    :func:`~sparsedp.engines.aggregate_exprs.contribution_exprs`:
    ``CAST(clip(floor(clip(Σ CAST(v AS DOUBLE), lower, upper)/g + 0.5), q(lower), q(upper)) AS BIGINT) − c``."""
    ql, qu = a.grid_bounds
    v = f"least(greatest(sum(CAST({col} AS DOUBLE)), {_dbl(a.lower)}), {_dbl(a.upper)})"
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


def pairs_sql(unit_type_id: str, key_type_ids: list[str], keys_view: str, sums: Sequence[tuple[Any, int]] = (),
              part: tuple[int, int] | None = None) -> str:
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
    """
    src_cols, ks = _src_cols(unit_type_id, key_type_ids)
    kl = ", ".join(ks)
    vals = "".join(f", {_vcol(j)}" for _, j in sums)
    where = "" if part is None else f" WHERE hash(__sp_unit) % {int(part[1])} = {int(part[0])}"
    joined = f"(SELECT {src_cols}{vals} FROM __src{where}) JOIN {keys_view} USING ({kl})"
    if sums:
        contrib = "".join(f", {contribution_sql(a, _vcol(j))} AS {_acol(i)}" for i, (a, j) in enumerate(sums))
        return f"SELECT {_U}, {_KI}{contrib} FROM {joined} GROUP BY {_U}, {_KI}"
    return f"SELECT DISTINCT {_U}, {_KI} FROM {joined}"


def degrees_sql(pairs: str) -> str:
    """Step 2: each unit's number of distinct keys ``{_D}`` from the pairs table ``pairs``."""
    return f"SELECT {_U}, count(*) AS {_D} FROM {pairs} GROUP BY {_U}"


def key_totals_sql(pairs: str, n_sums: int) -> str:
    """Step 2: per key index, its number of distinct units :data:`COUNT` (before the bound) and the sums of
    the pairs' contributions ``__sparsedp_a{j}``, all BIGINT."""
    a_sum = "".join(f", sum({_acol(j)})::BIGINT AS {_acol(j)}" for j in range(n_sums))
    return f"SELECT {_KI}, count(*)::BIGINT AS {_q(COUNT)}{a_sum} FROM {pairs} GROUP BY {_KI}"


def stats_sql(degrees: str, l0: int | None) -> str:
    """The statistics :data:`_STATS` (units, pairs, units over ``l0``) from the degrees table."""
    lim = l0 if l0 is not None else 2**62
    return (f"SELECT count(*) AS {_STATS[0]}, coalesce(sum({_D}), 0)::BIGINT AS {_STATS[1]}, "
            f"count(*) FILTER (WHERE {_D} > {lim}) AS {_STATS[2]} FROM {degrees}")


def heavy_units_sql(degrees: str, l0: int) -> str:
    """Step 3: the units over ``l0``, each with a dense index ``{_HI}`` (0, 1, …: any order) and its degree."""
    return (f"SELECT {_U}, (row_number() OVER () - 1)::BIGINT AS {_HI}, {_D} "
            f"FROM {degrees} WHERE {_D} > {int(l0)}")


def heavy_pairs_sql(pairs: str, heavy: str, lo: int, hi: int, n_sums: int) -> str:
    """Step 3: the pairs of the heavy units of index ``lo ≤ {_HI} < hi``, as ``({_HI} - lo, key index[,
    contributions])``."""
    a_sel = "".join(f", {_acol(j)}" for j in range(n_sums))
    return (f"SELECT ({_HI} - {int(lo)})::INTEGER AS {_HI}, {_KI}{a_sel} FROM {pairs} JOIN {heavy} USING ({_U}) "
            f"WHERE {_HI} >= {int(lo)} AND {_HI} < {int(hi)}")


def heavy_batches(degrees: Any, budget: int) -> list[tuple[int, int]]:
    """Split the heavy units ``0 … len(degrees)-1`` (``degrees``: their numbers of pairs, by index) into
    consecutive ranges ``[lo, hi)`` of at most ``budget`` pairs each (a unit with more pairs is a range alone)."""
    import numpy as np

    ends = np.cumsum(np.asarray(degrees, dtype=np.int64))
    out: list[tuple[int, int]] = []
    lo = 0
    while lo < ends.size:
        base = int(ends[lo - 1]) if lo else 0
        hi = max(int(np.searchsorted(ends, base + budget, side="right")), lo + 1)
        out.append((lo, hi))
        lo = hi
    return out


def _numpy_columns(t: Any) -> dict:
    """An Arrow table's (null-free, numeric) columns as numpy arrays, through Polars (pyarrow's own
    ``to_numpy`` imports pandas: about 0.4 s of CPU in a fresh process)."""
    import polars as pl

    df = pl.from_arrow(t)
    assert isinstance(df, pl.DataFrame)
    return {c: df[c].to_numpy() for c in df.columns}


def dropped_pairs(g: Any, ki: Any, hu: Any, hk: Any, secret: bytes, l0: int, workers: int = 1) -> Any:
    """Positions of the pairs ``(g[i], ki[i])`` that the ℓ0 choice drops: unit ``g`` (``0 … len(hu)-1``, each
    with at least one pair) keeps its ``l0`` pairs of smallest ``(prf_ranks(hu[g], hk[ki]), ki)``
    (:func:`~sparsedp.engines.bounding.prf_ranks`, :func:`~sparsedp.engines.bounding.keep_smallest`; ``ki`` is
    the canonical key position, hence the canonical tie-break). With ``workers > 1`` the units are cut into
    that many ranges, each ranked and cut by its own thread (the AES and numpy's sort release the GIL); each
    unit's choice is its own, so the result is the same."""
    import numpy as np

    from .bounding import keep_smallest, prf_ranks

    n_units = len(hu)

    def part(a: int, b: int) -> Any:
        if workers == 1:
            idx, gg, kk = None, g, ki
        else:
            idx = np.flatnonzero((g >= a) & (g < b))
            gg, kk = g[idx] - a, ki[idx]
        gone = np.flatnonzero(~keep_smallest(gg, prf_ranks(hu[a:b], hk, secret, gg, kk), kk, l0, b - a))
        return gone if idx is None else idx[gone]

    cuts = [(n_units * i // workers, n_units * (i + 1) // workers) for i in range(workers)]
    cuts = [(a, b) for a, b in cuts if a < b]
    if len(cuts) <= 1:
        return part(0, n_units) if workers == 1 else part(*cuts[0]) if cuts else np.zeros(0, dtype=np.int64)
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(len(cuts)) as ex:
        return np.concatenate(list(ex.map(lambda ab: part(*ab), cuts)))


class DuckDBEngine(EmbeddedEngine):
    """Bounded histograms computed by DuckDB (pairs, degrees and counts in SQL; the heavy units' pairs ranked
    in this process, in batches of whole units; see the module docstring)."""

    name = "duckdb"

    def __init__(self, connection: Any = None, *, memory_limit: str | None = None,
                 temp_directory: str | os.PathLike | None = None, threads: int | None = None, passes: int = 1):
        """``connection``: run on this DuckDB connection (its own settings) instead of a private one.
        ``memory_limit``, ``temp_directory``, ``threads``: the out-of-core settings of the private connection
        (:class:`~sparsedp.engines.duckdb_settings.DuckDBSettings`; for inputs larger than memory); refused
        together with ``connection``, whose settings are the caller's.
        ``passes``: run the bounding statement once per slice of the units (``hash(unit) % passes``) and add
        the per-key results. Each unit's ℓ0 choice depends on its own pairs and the secret only, so the slices'
        bounded counts and grid sums add up to exactly the one-pass histogram; DuckDB's working set (the
        distinct pairs, 7–17 bytes each when spilling) shrinks by the number of passes, at one read of the input
        per pass. For inputs whose distinct pairs do not fit in ``memory_limit`` in one pass."""
        from .duckdb_settings import DuckDBSettings

        if isinstance(passes, bool) or not isinstance(passes, int) or not 1 <= passes <= 4096:
            from ..errors import InvalidParameterError

            raise InvalidParameterError(f"passes must be an integer from 1 to 4096; got {passes!r}")
        self.passes = passes

        self.settings = DuckDBSettings(memory_limit=memory_limit, temp_directory=temp_directory, threads=threads)
        if connection is not None and self.settings != DuckDBSettings():
            from ..errors import InvalidParameterError

            raise InvalidParameterError("memory_limit, temp_directory and threads configure the engine's own "
                                        "connection; with connection=…, set them on that connection (SET …)")
        self.connection = connection
        #: when a list: (SQL text, EXPLAIN output) of every statement run after the secret was drawn
        self.plan_log: list[tuple[str, str]] | None = None

    def _con(self):
        import duckdb

        return self.connection if self.connection is not None else duckdb.default_connection()

    @contextmanager
    def _source(self, data: Any) -> Iterator[tuple[Any, Any]]:
        """``(connection, relation)`` over ``data``. SQL text runs on the given (or default) connection and a
        relation on its own; files and frames on the given connection, else on a private one (all threads,
        spilling to a private temporary directory), closed afterwards."""
        import duckdb

        k = sources.kind(data)
        own = None
        tmp = None
        try:
            if k == "duckdb":
                con = getattr(data, "_con", None) or self._con()
                yield con, data
                return
            if k == "sql":
                con = self._con()
                rel = con.sql(data)
                yield con, rel
                return
            if self.connection is not None:
                con = self.connection
            else:
                # spilling to a private directory, row order never needed; memory limit and threads as set
                # (duckdb_settings: DuckDB's defaults, 80 % of RAM and all cores, unless given)
                tmp = self.settings.spill_directory()
                own = con = duckdb.connect(config=self.settings.config(tmp))
            if k == "file":
                fmt = sources.file_format(data)
                path = os.fspath(data).replace("'", "''")
                rel = con.sql(f"SELECT * FROM read_{fmt}('{path}')")
            elif k == "polars-lazy":
                rel = con.from_arrow(polars_to_arrow(data.collect()))
            elif k == "polars":
                rel = con.from_arrow(polars_to_arrow(data))
            elif k == "pandas":
                rel = con.from_df(data)
            elif k == "arrow":
                rel = con.from_arrow(data)
            else:
                raise InputDataError(f"unsupported input for the DuckDB engine: {type(data).__name__}")
            yield con, rel
        except duckdb.Error as e:
            raise _input_error(_read_error(k), e) from None
        finally:
            if own is not None:
                own.close()
            if tmp is not None:
                shutil.rmtree(tmp, ignore_errors=True)

    def relation(self, data: Any):
        """A DuckDB relation over ``data`` (on the given or default connection; kept for callers that scan
        it themselves)."""
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
                return con.from_arrow(polars_to_arrow(data.collect()))
            if k == "polars":
                return con.from_arrow(polars_to_arrow(data))
            if k == "pandas":
                return con.from_df(data)
            if k == "arrow":
                return con.from_arrow(data)
        except duckdb.Error as e:
            raise _input_error(_read_error(k), e) from None
        raise InputDataError(f"unsupported input for the DuckDB engine: {type(data).__name__}")

    def columns(self, data: Any) -> list[str]:
        k = sources.kind(data)
        if k == "file":
            return sources.file_columns(data)  # schema only (raises the friendly errors for foreign files)
        if k == "polars":
            return list(data.columns)
        if k == "polars-lazy":
            return data.collect_schema().names()
        if k == "pandas":
            return [str(c) for c in data.columns]
        if k == "arrow":
            return list(data.schema.names)
        return list(self.relation(data).columns)

    def bounded_raw_counts(self, data: Any, privacy_unit: str, by: list[str], l0: int | None,
                           rng: Any) -> RawCounts:
        """The bounded counts of every key, computed in DuckDB (module docstring), in canonical key order."""
        return self._bounded(data, privacy_unit, by, l0, rng, ())

    def bounded_raw_counts_with_sums(self, data: Any, privacy_unit: str, by: list[str], l0: int | None, rng: Any,
                                     aggregates: Sequence[Any]) -> RawCounts:
        """The bounded counts AND the per-key grid sums of the SUM/MEAN ``aggregates``, all in the one DuckDB
        statement (:func:`bounding_sql` with ``sums``): the same table as the shared Polars path
        (:func:`~sparsedp.engines.aggregate_exprs.bounded_raw_counts_with_sums`) for the same secret — the same
        kept pairs, the same contributions (:func:`contribution_sql`), the same checks and errors, the secret
        drawn at the same point. Only per-key rows leave DuckDB.

        One caveat shared with every engine: a unit's per-key value total is a floating-point sum, and with
        three or more rows per (unit, key) the order of additions (row order, parallel partial aggregates)
        may change its last bit, hence its grid value by one step when it lies within one ulp of a rounding
        boundary. Privacy is unaffected (each contribution stays clipped to the grid bounds whatever the
        rounding)."""
        return self._bounded(data, privacy_unit, by, l0, rng, aggregates)

    _NUMERIC = frozenset({"tinyint", "smallint", "integer", "bigint", "hugeint", "utinyint", "usmallint",
                          "uinteger", "ubigint", "uhugeint", "float", "double", "decimal"})

    def _bounded(self, data: Any, privacy_unit: str, by: list[str], l0: int | None, rng: Any,
                 aggregates: Sequence[Any]) -> RawCounts:
        import duckdb
        import polars as pl

        import numpy as np

        from .bounding import key_fingerprints
        from .duckdb_objects import bounding_objects, drop_tables

        cols = [privacy_unit] + by
        sums: list = []
        grid_names: list[str] = []
        vcols: list[str] = []
        if aggregates:
            from ..aggregates import noise_columns
            from .aggregate_exprs import bad_values, grid_column_name, missing_value_column, non_numeric_value_column

            grid = noise_columns(aggregates)[0]
            vcols = list(dict.fromkeys(a.column for a in grid))
            if set(vcols) & set(cols):
                raise InputDataError(f"a SUM/MEAN column cannot be the privacy unit or a key column: {vcols}")
            sums = [(a, vcols.index(a.column)) for a in grid]
            grid_names = [grid_column_name(i) for i in range(len(grid))]
        with self._source(data) as (con, rel):
            types = dict(zip(rel.columns, rel.types))
            for c in sorted(vcols):  # as check_value_columns: missing / non-numeric first, by name
                if c not in types:
                    raise missing_value_column(c, list(rel.columns))
                if types[c].id not in self._NUMERIC:
                    raise non_numeric_value_column(c, types[c])
            vchecks = []
            for c in sorted(vcols):
                v = _vcol(vcols.index(c))
                vchecks.append((c, "null", f"count(*) - count({v})"))
                if types[c].id in ("float", "double"):
                    vchecks.append((c, "nonfinite", f"count(*) FILTER (WHERE NOT isfinite({v}))"))
            try:
                proj = rel.query("__in", "SELECT " + ", ".join(
                    [f"{_q(privacy_unit)} AS __sp_unit"] + [f"{_q(c)} AS __sp_key{i}" for i, c in enumerate(by)]
                    + [f"{_q(c)} AS {_vcol(j)}" for j, c in enumerate(vcols)]) + " FROM __in")
                floats = [i for i, c in enumerate(by) if types[c].id in ("float", "double")]
                check = proj.query("__src", "SELECT count(*), " + ", ".join(
                    ["count(*) - count(__sp_unit)"] + [f"count(*) - count(__sp_key{i})" for i in range(len(by))]
                    + [e for _, _, e in vchecks]
                    + [f"count(*) FILTER (WHERE isnan(__sp_key{i}))" for i in floats]) + " FROM __src").fetchall()[0]
            except duckdb.Error as e:
                raise _input_error("DuckDB could not read the input", e) from None
            n_v = 1 + len(cols)
            bad = [(c, kind, int(n)) for (c, kind, _), n in zip(vchecks, check[n_v:n_v + len(vchecks)]) if n]
            if bad:
                raise bad_values(bad)
            rows = int(check[0])
            check_nulls_and_rows(rows, dict(zip(cols, map(int, check[1:1 + len(cols)]))))
            for i, n in zip(floats, check[n_v + len(vchecks):]):  # the NaN-key rule (base.check_nan_keys)
                if n:
                    raise nan_key_error(by[i])
            tid = [types[c].id for c in cols]
            try:  # the distinct keys (no randomness), in canonical key order, each with its index
                keys = to_arrow_table(proj.query("__src", keys_sql(tid[1:])))
            except duckdb.Error as e:
                raise _input_error("DuckDB could not group the input", e) from None
            secret = draw_bounding_secret(rng) if l0 is not None else None  # after validation only
            ks = [_kcol(i) for i in range(len(by))]
            kdf = pl.from_arrow(keys)
            assert isinstance(kdf, pl.DataFrame)
            order = kdf.with_row_index("__i").sort(canonical_order(kdf.schema, ks))["__i"].to_numpy()
            n_keys = keys.num_rows
            pos = np.empty(n_keys, dtype=np.int32 if n_keys < 2**31 else np.int64)
            pos[order] = np.arange(n_keys, dtype=pos.dtype)  # each key's index in canonical order
            hk = None
            if l0 is not None:  # the key fingerprints h_k (bounding module), by key index
                hk = key_fingerprints(kdf[order], ks)
            with bounding_objects(con) as (view, tag):
                # registered in DuckDB's order (a sorted build side made the join fail to spill under a memory limit)
                con.register(view, keys.append_column(_KI, numpy_to_arrow(pos)))
                # every key has at least one pair: the passes' key indices cover 0 … n_keys-1 together
                counts = np.zeros(n_keys, dtype=np.int64)
                grids = [np.zeros(n_keys, dtype=np.int64) for _ in grid_names]
                st = np.zeros(len(_STATS), dtype=np.int64)
                tp, td, th = (f"__sparsedp_{t}_{tag}" for t in ("p", "d", "h"))
                for i in range(self.passes):
                    part = None if self.passes == 1 else (i, self.passes)
                    try:
                        with query_progress(con):  # the relation may start executing when it is built
                            self._run(con, f"CREATE TEMP TABLE {tp} AS "
                                      + pairs_sql(tid[0], tid[1:], view, sums, part), src=proj)
                        self._run(con, f"CREATE TEMP TABLE {td} AS {degrees_sql(tp)}")
                        kc = pl.from_arrow(self._run(con, key_totals_sql(tp, len(sums)), fetch=True))
                        stats = np.asarray(list(self._run(con, stats_sql(td, l0), fetch=True).to_pylist()[0].values()),
                                           dtype=np.int64)
                        st += stats
                        assert isinstance(kc, pl.DataFrame)
                        idx = kc[_KI].to_numpy()
                        counts[idx] += kc[COUNT].to_numpy()  # key indices are distinct within a pass
                        for j, g in enumerate(grids):
                            g[idx] += kc[_acol(j)].to_numpy()
                        if l0 is not None and stats[2]:
                            self._drop_heavy(con, tp, td, th, privacy_unit, l0, hk, secret, counts, grids)
                    except duckdb.Error as e:
                        raise _input_error("DuckDB could not group the input", e) from None
                    finally:
                        drop_tables(con, tag)  # before the next pass: DuckDB holds one slice at a time
        grid = [pl.Series(name, g) for name, g in zip(grid_names, grids)]
        kc = kdf[order].rename(dict(zip(ks, by))).with_columns(pl.Series(COUNT, counts), *grid)
        pairs = int(st[1])
        return RawCounts(rows_in=rows, units_in=int(st[0]), pairs_in=pairs,
                         units_over_l0=int(st[2]) if l0 is not None else 0, key_counts=kc, heavy_pairs=None,
                         pairs_dropped_l0=pairs - int(counts.sum()))

    def _run(self, con: Any, sql: str, fetch: bool = False, src: Any = None) -> Any:
        """Run one statement of the bounded histogram on ``con`` (or on ``src``, the input's projection, which
        the statement reads as ``__src``), recording it and its plan in :attr:`plan_log`; with ``fetch`` return
        its result as an Arrow table."""
        def rel(text: str) -> Any:
            return src.query("__src", text) if src is not None else con.sql(text)

        if self.plan_log is not None:
            self.plan_log.append((sql, "\n".join(str(r[-1]) for r in rel("EXPLAIN " + sql).fetchall())))
        if fetch:
            return to_arrow_table(rel(sql))
        if src is not None:
            src.query("__src", sql)  # a statement that is not a query runs when its relation is built
        else:
            con.execute(sql)
        return None

    #: heavy pairs read out of DuckDB and ranked per batch (about 60 bytes each in the process at once, plus 8
    #: per SUM/MEAN column; under a ``memory_limit`` at most a 256th of it: the batch then takes about a
    #: quarter of the limit beside DuckDB's own memory)
    HEAVY_BATCH = 1 << 25
    #: a batch of at least this many heavy pairs is ranked by several threads (:func:`dropped_pairs`)
    PARALLEL_MIN = 1 << 16

    def _drop_heavy(self, con: Any, tp: str, td: str, th: str, unit: str, l0: int, hk: Any, secret: bytes,
                    counts: Any, grids: list) -> None:
        """Step 3 of the module docstring for one pass: the heavy units (rows of ``td`` with ``d > l0``) get a
        dense index (table ``th``) and their fingerprint (``unit``: the privacy unit's name); their pairs are read out in batches of whole units
        (:func:`heavy_batches`, at most :attr:`HEAVY_BATCH` pairs, or a 256th of ``memory_limit`` in bytes),
        ranked and cut to each unit's ``l0`` smallest ``(rank, key index)`` by :func:`dropped_pairs` (the
        Polars engine's :func:`~sparsedp.engines.bounding.prf_ranks` and
        :func:`~sparsedp.engines.bounding.keep_smallest`, on several threads); the dropped pairs are subtracted
        from ``counts`` (and their contributions from ``grids``) by key index."""
        import numpy as np

        import polars as pl

        from .bounding import unit_fingerprints

        self._run(con, f"CREATE TEMP TABLE {th} AS {heavy_units_sql(td, l0)}")
        # the heavy units' fingerprints h_u, in index order, by Polars in one call (a DuckDB UDF was called on
        # small batches: 0.17 s at 10^7 rows for 173 076 units, against a few milliseconds)
        units = self._run(con, f"SELECT {_U}, {_D} FROM {th} ORDER BY {_HI}", fetch=True)
        hu = unit_fingerprints(pl.Series(unit, units.column(_U)))
        deg = pl.Series(units.column(_D)).to_numpy()
        del units
        budget = self.HEAVY_BATCH
        limit = self.settings.limit_bytes()
        if limit is not None:
            budget = max(1 << 16, min(budget, limit // 256))
        workers = max(1, min(8, self.settings.threads or os.cpu_count() or 1))
        for lo, hi in heavy_batches(deg, budget):
            t = _numpy_columns(self._run(con, heavy_pairs_sql(tp, th, lo, hi, len(grids)), fetch=True))
            ki = t[_KI]
            w = workers if ki.size >= self.PARALLEL_MIN else 1
            gone = dropped_pairs(t[_HI], ki, hu[lo:hi], hk, secret, l0, w)
            kd = ki[gone]
            counts -= np.bincount(kd, minlength=counts.size)
            for j, gr in enumerate(grids):
                np.subtract.at(gr, kd, t[_acol(j)][gone])

    def keys_per_unit_counts(self, data: Any, privacy_unit: str, by: list[str], candidates: Any) -> Any:
        """In DuckDB: the histogram of distinct keys per unit (:meth:`Engine.keys_per_unit_counts`), with the
        same input checks as the histogram (columns, nulls, no rows, key values) before any charge."""
        import duckdb

        from ..auto_bound import UnitKeyCounts
        from .base import check_columns, check_key_values, check_unique_names

        by = list(by)
        check_unique_names(data)
        check_columns(self.columns(data), privacy_unit, by)
        cols = [privacy_unit] + by
        with self._source(data) as (con, rel):
            types = dict(zip(rel.columns, rel.types))
            u, ks = _q(privacy_unit), ", ".join(_q(c) for c in by)
            floats = [c for c in by if types[c].id in ("float", "double")]
            try:
                check = rel.query("__src", "SELECT count(*), " + ", ".join(
                    f"count(*) - count({_q(c)})" for c in cols) + " FROM __src").fetchall()[0]
                check_nulls_and_rows(int(check[0]), dict(zip(cols, map(int, check[1:]))))
                where = " OR ".join(f"isnan({_q(c)})" for c in floats) or "false"
                bad = to_arrow_table(rel.query("__src", f"SELECT {ks} FROM __src WHERE {where} LIMIT 1"))
                check_key_values(bad, by)
                hist = rel.query("__src", f"SELECT d, count(*) FROM (SELECT {u}, count(*) AS d FROM "
                                          f"(SELECT DISTINCT {u}, {ks} FROM __src) GROUP BY {u}) GROUP BY d").fetchall()
            except duckdb.Error as e:
                raise InputDataError(f"DuckDB could not group the input: {e}") from None
        return UnitKeyCounts.from_degrees(candidates, [int(d) for d, _ in hist], [int(n) for _, n in hist])

    def rows_lazy(self, data: Any) -> Any:
        """The relation's rows as a Polars LazyFrame (SUM/MEAN releases run the shared Polars path)."""
        import polars as pl

        k = sources.kind(data)
        if k in ("polars", "polars-lazy", "pandas", "arrow", "file"):
            return super().rows_lazy(data)
        return pl.from_arrow(to_arrow_table(self.relation(data))).lazy()

    def raw_counts(self, data: Any, privacy_unit: str, by: list[str], l0: int | None) -> RawCounts:
        """Generic interface (the choice left to :func:`~sparsedp.engines.bounding.bound`): unbounded counts per
        key and the heavy units' pairs. :meth:`bounded_raw_counts` is the fast path."""
        import duckdb

        with self._source(data) as (con, rel):
            u = _q(privacy_unit)
            ks = ", ".join(_q(c) for c in by)
            cols = [privacy_unit] + by
            try:
                check = rel.query("__src", "SELECT count(*), " + ", ".join(
                    f"count(*) - count({_q(c)})" for c in cols) + " FROM __src").fetchall()[0]
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
                raise _input_error("DuckDB could not group the input", e) from None
        return RawCounts(rows_in=int(check[0]), units_in=int(units), pairs_in=int(npairs),
                         units_over_l0=int(heavy_n) if l0 is not None else 0,
                         key_counts=key_counts, heavy_pairs=heavy)
