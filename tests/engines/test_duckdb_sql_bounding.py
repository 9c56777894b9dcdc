"""DuckDB engine: the ℓ0 choice in SQL equals the Polars engine's (and select_pairs'), the secret never reaches
SQL text or a plan, and bad input is refused before any randomness is drawn."""

from __future__ import annotations

import hashlib

import duckdb
import numpy as np
import polars as pl
import pyarrow as pa
import pytest

from sparsedp.engines import draw_bounding_secret, get_engine, select_pairs
from sparsedp.engines.bounding import (_TAG, canonical_exprs, fingerprint_exprs, key_fingerprints, prf_ranks,
                                      unit_fingerprints)
from sparsedp.engines.duckdb_engine import DuckDBEngine
from sparsedp.engines.duckdb_settings import size_bytes
from sparsedp.errors import InputDataError
from sparsedp.noise import InsecureSeededRandom

SEED = 20261124


def _frame(n_rows=6000, n_units=400, seed=11) -> pl.DataFrame:
    """Units with 4–30 distinct keys each (so l0 = 3 binds for almost every unit), duplicates, several dtypes."""
    g = np.random.default_rng(seed)
    units = np.repeat(np.arange(n_units), g.integers(6, 30, n_units))[:n_rows]
    n = units.size
    q = g.integers(0, 120, n)
    words = np.array([f"q{i:03d}" for i in range(119)] + ["café ☕"])
    t = pl.Series((g.integers(0, 40, n) * 3_600_000_000).astype("datetime64[us]"))
    return pl.DataFrame({
        "u64": (units * 7919 + 3).astype(np.int64), "u32": units.astype(np.int32),
        "ustr": [f"user-{u}" for u in units],
        "q": words[q], "c": g.choice(["DE", "US", "FR", "BR"], n), "b": (q % 9).astype(np.int16),
        "t": t.dt.replace_time_zone("America/New_York"),
    }).with_columns(pl.col("c").cast(pl.Categorical).alias("cat"))


def _hist(bh) -> pl.DataFrame:
    return pl.from_arrow(bh.keys).with_columns(__n=pl.Series(bh.counts))


def _normalise(df: pl.DataFrame) -> pl.DataFrame:
    """DuckDB returns categorical keys as strings and instants in UTC: compare values, not dtypes."""
    return df.with_columns([pl.col(c).cast(pl.String) for c, t in df.schema.items() if t == pl.Categorical]
                           + [pl.col(c).dt.convert_time_zone("UTC") for c, t in df.schema.items()
                              if isinstance(t, pl.Datetime) and t.time_zone is not None])


CASES = [("u64", ["q"]), ("u32", ["q"]), ("ustr", ["q"]), ("u64", ["q", "c"]), ("u32", ["cat"]),
         ("u64", ["cat", "b"]), ("u32", ["t"]), ("ustr", ["t", "q"]), ("u64", ["b"])]


@pytest.fixture(scope="module")
def frame():
    return _frame()


@pytest.mark.parametrize("unit,by", CASES)
def test_same_bounded_histogram_as_polars(frame, unit, by):
    """Same seeded source: identical keys in the same (canonical) order, identical counts and statistics."""
    l0 = 3
    ref = get_engine("polars").histogram(frame, unit, by, l0, InsecureSeededRandom(SEED))
    got = DuckDBEngine().histogram(frame, unit, by, l0, InsecureSeededRandom(SEED))
    assert ref.stats.units_over_l0 >= 0.75 * ref.stats.units_in  # the bound binds for most units
    assert ref.stats.pairs_dropped_l0 > 0
    assert got.stats == ref.stats
    assert _normalise(_hist(got)).equals(_normalise(_hist(ref)))
    # and it is the choice of the definition (select_pairs with the same secret)
    kept = select_pairs(frame, unit, by, l0, draw_bounding_secret(InsecureSeededRandom(SEED)))
    truth = kept.group_by(by).agg(pl.len().alias("__n"))
    j = _normalise(_hist(got)).join(_normalise(truth), on=by, how="full", coalesce=True)
    assert j.height == len(got) and (j["__n"] == j["__n_right"]).all()


def test_different_seeds_choose_differently_with_the_same_totals(frame):
    a = DuckDBEngine().histogram(frame, "u64", ["q"], 3, InsecureSeededRandom(1))
    b = DuckDBEngine().histogram(frame, "u64", ["q"], 3, InsecureSeededRandom(2))
    assert not _hist(a).equals(_hist(b))
    assert a.counts.sum() == b.counts.sum()


@pytest.mark.parametrize("kind", ["arrow", "pandas", "parquet", "relation", "sql"])
def test_every_input_kind_gives_the_same_release(frame, kind, tmp_path):
    """Arrow and pandas scanned in place, a Parquet file, a relation of a non-default connection (its own
    connection is used for the functions) and SQL text on a given connection."""
    df = frame.select("u64", "q", "c")
    ref = get_engine("polars").histogram(df, "u64", ["q", "c"], 4, InsecureSeededRandom(SEED))
    con = duckdb.connect()
    con.register("logs", df.to_arrow())
    eng = DuckDBEngine(con if kind == "sql" else None)
    data = {"arrow": df.to_arrow(), "pandas": df.to_pandas(), "relation": con.sql("SELECT * FROM logs"),
            "sql": "SELECT u64, q, c FROM logs"}.get(kind)
    if kind == "parquet":
        data = str(tmp_path / "x.parquet")
        df.write_parquet(data)
    got = eng.histogram(data, "u64", ["q", "c"], 4, InsecureSeededRandom(SEED))
    assert got.stats == ref.stats and _hist(got).equals(_hist(ref))
    assert not [f for f in con.sql("SELECT function_name FROM duckdb_functions()").fetchall()
                if f[0].startswith("__sparsedp")]  # the functions are removed afterwards
    assert not [v for v in con.sql("SELECT view_name FROM duckdb_views()").fetchall()
                if v[0].startswith("__sparsedp")]  # and so is the registered key table


def test_no_bound_counts_distinct_units(frame):
    got = DuckDBEngine().histogram(frame, "u32", ["q"], None, InsecureSeededRandom(SEED))
    truth = frame.group_by("q").agg(pl.col("u32").n_unique().alias("__n")).sort("q")
    assert _hist(got).equals(truth.with_columns(pl.col("__n").cast(pl.Int64)))
    assert got.stats.pairs_dropped_l0 == 0 and got.stats.units_over_l0 == 0


@pytest.mark.parametrize("pair_batch", [None, 1000])
def test_secret_never_in_sql_or_plan(frame, pair_batch):
    secret = draw_bounding_secret(InsecureSeededRandom(SEED))  # what the engine draws first from this source
    derived = hashlib.sha256(_TAG + secret).digest()
    eng = DuckDBEngine()
    if pair_batch is not None:
        eng.PAIR_BATCH = pair_batch
    eng.plan_log = []
    bh = eng.histogram(frame, "u64", ["q", "c"], 3, InsecureSeededRandom(SEED))
    assert bh.stats.pairs_dropped_l0 > 0
    # every statement after the draw is logged: in memory, the joined rows read out (de-duplicated, ranked and
    # cut in the process, outside DuckDB); past the budget, the distinct pairs, their number, and the batches
    sqls = [sql for sql, _ in eng.plan_log]
    if pair_batch is None:
        assert len(sqls) == 1 and sqls[0].startswith("SELECT __sparsedp_u, __sparsedp_ki FROM")
    else:
        assert len(sqls) > 3 and sqls[0].startswith("CREATE TEMP TABLE __sparsedp_p_")
        assert sqls[1].startswith("SELECT count(*)") and all("__sparsedp_pid" in q for q in sqls[2:])
    assert all("__sparsedp" in plan for _, plan in eng.plan_log)
    words = np.frombuffer(secret, dtype="<u8")
    needles = [secret.hex(), secret.hex().upper(), repr(secret), str(list(secret)), derived.hex(),
               derived.hex().upper(), *[str(int(w)) for w in words], *[str(int(w) - 2**64) for w in words]]
    for sql, plan in eng.plan_log:
        for text in (sql, plan):
            for needle in needles:
                assert needle not in text
            assert secret.decode("latin-1") not in text


class _NoDraws:
    """A random source that fails the test if anything draws from it."""

    def __getattr__(self, name):
        raise AssertionError(f"randomness drawn ({name}) before the input was validated")


@pytest.mark.parametrize("col", ["u", "q"])
def test_nulls_refused_before_any_draw(col):
    df = pl.DataFrame({"u": [1, 2, 3, 3], "q": ["a", "b", "c", "d"]})
    df = df.with_columns(pl.when(pl.int_range(4) == 1).then(None).otherwise(pl.col(col)).alias(col))
    for data in (df, df.to_arrow(), df.to_pandas()):
        with pytest.raises(InputDataError, match=f"null values in '{col}' \\(1 nulls\\)"):
            DuckDBEngine().histogram(data, "u", ["q"], 1, _NoDraws())


def test_empty_input_refused_before_any_draw(tmp_path):
    df = pl.DataFrame({"u": pl.Series([], dtype=pl.Int64), "q": pl.Series([], dtype=pl.String)})
    path = tmp_path / "empty.parquet"
    df.write_parquet(path)
    for data in (df, path):
        with pytest.raises(InputDataError, match="no rows"):
            DuckDBEngine().histogram(data, "u", ["q"], 1, _NoDraws())


def test_fingerprints_of_arrow_columns_match_the_polars_definitions(frame):
    """The fingerprints the DuckDB engine computes on the Arrow columns it reads out equal Polars' definitions
    on the user's frame whatever Arrow types DuckDB hands over (Int32 vs Int64, string views, dictionary,
    time zones)."""
    for unit, by in CASES:
        canon = frame.select(canonical_exprs(frame.schema, [unit] + by))
        hu_ref, hk_ref = (canon.select(e).to_series().to_numpy() for e in fingerprint_exprs(unit, by))
        t = frame.to_arrow()
        hu = unit_fingerprints(pl.Series(unit, t.column(unit).combine_chunks()))
        hk = key_fingerprints(pl.DataFrame([pl.Series(c, t.column(c).combine_chunks()) for c in by]), by)
        assert (hu == hu_ref).all() and (hk == hk_ref).all(), (unit, by)
    t64 = pa.array(frame["u64"].to_numpy())
    assert (unit_fingerprints(pl.Series("u32", pa.array(frame["u32"].to_numpy()).cast(pa.int64())))
            == unit_fingerprints(pl.Series("u32", pa.array(frame["u32"].to_numpy())))).all()
    assert t64.type == pa.int64()


def test_bounding_under_a_small_memory_limit_spills(tmp_path):
    """A connection with a small memory limit over a larger working set: DuckDB spills to its temporary
    directory (seen in its profile) instead of failing, and the result is unchanged. The smallest limit that
    completes depends on DuckDB's version (50 MB did with 2.0.0, not with 2.0.1), so the first of a few small
    limits that completes is used; it must have spilled, with its buffer pool near its limit."""
    import json

    g = np.random.default_rng(2)
    n = 1_000_000
    df = pl.DataFrame({"u": g.integers(0, 100_000, n), "k": g.integers(0, 400_000, n)}).select(
        "u", q=pl.format("key-{}-padding-padding", "k"))
    ref = get_engine("polars").histogram(df, "u", ["q"], 5, InsecureSeededRandom(SEED))
    systems: list[dict] = []

    class Profiled(DuckDBEngine):
        """Keeps the profile's system figures of every statement (the output file holds the last one only)."""

        def _run(self, con, sql, fetch=False, src=None):
            out = super()._run(con, sql, fetch, src)
            systems.append(json.loads(prof.read_text())["system"])
            return out

    got = None
    for mb in (50, 64, 96):
        systems.clear()
        prof = tmp_path / f"profile{mb}.json"
        con = duckdb.connect(config={"temp_directory": str(tmp_path / f"spill{mb}"), "memory_limit": f"{mb}MB",
                                     "threads": 2, "preserve_insertion_order": False})
        con.execute("PRAGMA enable_profiling='json'")
        con.execute(f"PRAGMA profiling_output='{prof}'")
        try:
            got = Profiled(con).histogram(df.to_arrow(), "u", ["q"], 5, InsecureSeededRandom(SEED))
        except InputDataError as e:
            assert "Out of Memory" in str(e)
            continue
        break
    assert got is not None, "no small memory limit completed"
    # the bounding statements: the pairs, their number, then batches whose budget follows the connection's limit
    # as the engine itself reads it (DuckDB may round or re-express the limit it was given, e.g. 64MB as 61.0 MiB)
    budget = Profiled(con).batch_budget(con, 0)
    limit = size_bytes(con.execute("SELECT current_setting('memory_limit')").fetchall()[0][0])
    assert limit is not None and limit <= mb * 10**6
    assert budget == max(1 << 16, limit // 256)
    assert len(systems) >= 4 and len(systems) - 2 == -(-got.stats.pairs_in // budget)
    assert max(s["peak_temp_dir_size"] for s in systems) > 0, "did not spill"
    # DuckDB's limit is enforced on its buffer pool, not to the byte (2.0.1 peaked 0.3 % above it): the property is
    # that the limit was in force (it spilled rather than grew), so allow a small overshoot
    assert max(s["peak_buffer_memory"] for s in systems) <= 1.25 * limit
    assert got.stats == ref.stats and _hist(got).equals(_hist(ref))


def test_batches_partition_each_pass_into_whole_units():
    """The batches of a pass (:func:`batch_sql`) split its pairs without loss or overlap and never split a unit,
    also when the number of batches shares a factor with the number of passes (the pass's units share
    ``hash(unit) % passes``); packed pair ids are ``(unit - lo) · 2^b + key index``."""
    from sparsedp.engines.duckdb_engine import batch_sql

    con = duckdb.connect()
    con.execute("CREATE TABLE pp AS SELECT (i * 7919) % 1000 AS __sparsedp_u, (i * 31) % 97 AS __sparsedp_ki "
                "FROM range(20000) t(i) GROUP BY ALL")
    for passes in (1, 2, 3):
        for i in range(passes):
            pass_pairs = set(con.sql(f"SELECT * FROM pp WHERE hash(__sparsedp_u) % {passes} = {i}").fetchall())
            con.execute(f"CREATE OR REPLACE TABLE p1 AS SELECT * FROM pp WHERE hash(__sparsedp_u) % {passes} = {i}")
            for batches in (1, 2, 4, 5):
                got = [set(con.sql(batch_sql("p1", 0, b, batches, passes)).fetchall()) for b in range(batches)]
                assert sum(map(len, got)) == len(pass_pairs) and set().union(*got) == pass_pairs
                units = [{u for u, _ in g} for g in got]
                assert sum(map(len, units)) == len(set().union(*units))  # no unit in two batches
                assert all(got)  # even with batches sharing a factor with passes
    lo = -3
    packed = con.sql(batch_sql("pp", 0, 0, 1, 1, (lo, 7, "bigint"))).fetchall()
    assert sorted(p for p, in packed) == sorted(((u - lo) << 7) | k for u, k in con.sql("SELECT * FROM pp").fetchall())


def test_pairs_in_batches_give_the_same_histogram(frame):
    """The distinct pairs leave DuckDB in batches of whole units (a budget of pairs each, smaller under a
    memory limit): any batching gives the one-batch histogram, for every unit and key shape (packed pair ids
    for integer units, ids from the process for string units)."""
    from sparsedp.engines.duckdb_settings import DuckDBSettings, size_bytes

    for unit, by in CASES[:4]:
        ref = DuckDBEngine().histogram(frame, unit, by, 3, InsecureSeededRandom(SEED))
        eng = DuckDBEngine()
        eng.PAIR_BATCH = 40
        eng.plan_log = []
        got = eng.histogram(frame, unit, by, 3, InsecureSeededRandom(SEED))
        assert sum("WHERE (hash(__sparsedp_u)" in sql for sql, _ in eng.plan_log) > 20
        assert got.stats == ref.stats and _hist(got).equals(_hist(ref))
    assert DuckDBSettings(memory_limit="6GB").limit_bytes() == 6 * 10**9
    assert DuckDBSettings(memory_limit=" 1.5 GiB").limit_bytes() == 3 * 2**29
    assert DuckDBSettings(memory_limit="512kb").limit_bytes() == 512_000
    assert DuckDBSettings().limit_bytes() is None
    assert size_bytes("18.8 GiB") == int(18.8 * 2**30) and size_bytes("47.6 MiB") == int(47.6 * 2**20)
    assert size_bytes("unlimited") is None and size_bytes("12 parsecs") is None
    con = duckdb.connect(config={"memory_limit": "100MB"})
    shown = size_bytes(con.execute("SELECT current_setting('memory_limit')").fetchall()[0][0])  # "95.3 MiB"
    assert shown is not None and abs(shown - 10**8) < 10**6
    assert DuckDBEngine().batch_budget(con, 0) == shown // 256
    assert DuckDBEngine().batch_budget(con, 1) == shown // 384
    con.execute("SET memory_limit = '1MB'")
    assert DuckDBEngine().batch_budget(con, 0) == 1 << 16


@pytest.mark.parametrize("unit_kind", ["offsets", "strings"])
def test_bound_pair_ids_keeps_each_units_l0_smallest(unit_kind):
    """:func:`~sparsedp.engines.pair_ids.bound_pair_ids` on distinct pairs in any order (as DuckDB returns
    them) drops exactly each unit's pairs beyond its l0 smallest (rank, canonical key position), whatever
    the unit ids (offsets computed outside, or dense ids from the process)."""
    from sparsedp.engines.pair_ids import PairContext, bits_for, bound_pair_ids, offset_values, pack_pairs

    g = np.random.default_rng(3)
    n_units, n_keys, l0 = 300, 50, 4
    pairs = np.unique(np.stack([g.integers(0, n_units, 6000), g.integers(0, n_keys, 6000)]), axis=1)
    pairs = pairs[:, g.permutation(pairs.shape[1])]
    unit, ki = pairs[0], pairs[1].astype(np.int32)
    hk = g.integers(0, 2**63, n_keys).astype(np.uint64)
    pos = g.permutation(n_keys).astype(np.int64)  # a canonical order that is not the key index order
    secret = bytes(range(32))
    values = pl.Series("u", unit * 10 + 5) if unit_kind == "offsets" else pl.Series("u", [f"u{v}" for v in unit])
    bk = bits_for(n_keys - 1)
    ctx = PairContext(bk=bk, n_keys=n_keys, l0=l0, secret=secret, hk=hk, pos=pos, unit="u")
    if unit_kind == "offsets":
        pid = pl.Series((values.to_numpy() - 5).astype(np.uint64) << np.uint64(bk) | ki.astype(np.uint64))
        got = bound_pair_ids(ctx, pid, offset_values("u", 5, pl.Int64))
    else:
        pid, value_of = pack_pairs(values, pl.Series(ki), bk)
        got = bound_pair_ids(ctx, pid, value_of)
    from sparsedp.engines.bounding import unit_fingerprints

    hu = unit_fingerprints(values)
    rank = prf_ranks(hu, hk, secret, np.arange(unit.size), ki)
    dropped = np.zeros(n_keys, dtype=np.int64)
    for u in range(n_units):
        mine = np.flatnonzero(unit == u)
        for i in sorted(mine, key=lambda i: (int(rank[i]), int(pos[ki[i]])))[l0:]:
            dropped[ki[i]] += 1
    assert got.dropped.tolist() == dropped.tolist() and dropped.sum() > 1000
    assert got.upk.tolist() == np.bincount(ki, minlength=n_keys).tolist()
    assert (got.units, got.pairs) == (np.unique(unit).size, unit.size)
    assert got.heavy == int((np.bincount(unit) > l0).sum())


def test_file_release_does_not_import_pandas(tmp_path):
    """A fresh process releasing a Parquet file on the DuckDB engine never imports pandas (pyarrow's
    ``pa.array(numpy)`` and ``to_numpy`` do: about 0.4 s of CPU, a fixed cost of every release)."""
    import os
    import subprocess
    import sys

    path = tmp_path / "x.parquet"
    pl.DataFrame({"u": list(range(300)) * 4, "k": [f"k{i % 7}" for i in range(1200)]}).write_parquet(path)
    code = ("import sys, sparsedp as sd\n"
            f"r = sd.release({str(path)!r}, 'u', 'k', epsilon=1.0, delta=1e-6, max_groups_per_unit=3, "
            "engine='duckdb')\n"
            "assert r.curator.bounding.pairs_dropped_l0 > 0\n"
            "print('pandas' in sys.modules)\n")
    env = dict(os.environ)
    src = os.path.join(os.path.dirname(__file__), "..", "..", "src")
    env["PYTHONPATH"] = os.path.abspath(src) + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.strip().splitlines()[-1] == "False"
