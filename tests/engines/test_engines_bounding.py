"""Engines: identical bounded histograms across engines and inputs; the bounding invariants; uniformity."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import polars as pl
import pyarrow as pa
import pytest
from scipy import stats

from sparsedp.engines import ENGINES, bound, draw_bounding_secret, get_engine, select_pairs
from sparsedp.engines.bounding import COUNT
from sparsedp.errors import InputDataError
from sparsedp.noise import InsecureSeededRandom

SEED = 20261122


def _log(n_rows=6000, n_units=300, n_keys=400, seed=5) -> pl.DataFrame:
    """Heavy-tailed units, Zipf-like keys, two key columns, duplicates, a unicode key."""
    g = np.random.default_rng(seed)
    w = g.pareto(1.3, n_units) + 1
    units = g.choice(n_units, size=n_rows, p=w / w.sum())
    ranks = np.minimum(g.zipf(1.3, n_rows), n_keys) - 1
    words = np.array([f"q{i:03d}" for i in range(n_keys - 1)] + ["café ☕"])
    return pl.DataFrame({"uid": (units * 7 + 11).astype(np.int64), "query": words[ranks],
                         "country": np.where(units % 3 == 0, "DE", "US"), "extra": np.arange(n_rows)})


def _canon(bh) -> pl.DataFrame:
    return pl.from_arrow(bh.keys).with_columns(n=pl.Series(bh.counts)).sort(pl.all())


@pytest.fixture(scope="module")
def log():
    return _log()


@pytest.fixture(scope="module")
def inputs(log, tmp_path_factory):
    import duckdb

    d = tmp_path_factory.mktemp("engines")
    log.write_parquet(d / "log.parquet")
    log.write_csv(d / "log.csv")
    con = duckdb.connect()
    con.register("logs", log.to_arrow())
    return con, {
        "polars": log, "lazy": log.lazy(), "pandas": log.to_pandas(), "arrow": log.to_arrow(),
        "parquet": str(d / "log.parquet"), "csv": d / "log.csv",
        "relation": con.sql("SELECT * FROM logs"),
        "sql": "SELECT uid, query, country FROM logs WHERE extra >= 0",
    }


@pytest.mark.parametrize("l0", [3, None])
def test_same_histogram_every_engine_and_input(inputs, l0):
    con, data = inputs
    results = {}
    for eng, (name, d) in itertools.product(ENGINES, data.items()):
        if name == "sql" and eng != "duckdb":
            continue
        bh = get_engine(eng, d, connection=con).histogram(d, "uid", ["query", "country"], l0,
                                                                   InsecureSeededRandom(SEED))
        results[(eng, name)] = bh
    ref = results[("polars", "polars")]
    assert ref.stats.rows_in == 6000
    if l0 is not None:  # the bound binds for many units
        assert ref.stats.pairs_dropped_l0 > 0 and ref.stats.units_over_l0 >= ref.stats.units_in // 4
    for key, bh in results.items():
        assert _canon(bh).equals(_canon(ref)), key
        assert bh.stats == ref.stats, key
        assert bh.counts.dtype == np.int64


def test_different_seed_changes_the_choice(log):
    eng = get_engine("polars")
    a = eng.histogram(log, "uid", ["query"], 2, InsecureSeededRandom(1))
    b = eng.histogram(log, "uid", ["query"], 2, InsecureSeededRandom(2))
    assert not _canon(a).equals(_canon(b))
    assert a.counts.sum() == b.counts.sum()  # same number of kept pairs


def _oracle_degrees(df: pl.DataFrame) -> pl.DataFrame:
    return df.select("uid", "query").unique().group_by("uid").agg(pl.len().alias("d"))


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("l0", [1, 2, 7])
def test_bounding_invariants_disjoint_keys(engine, l0):
    """Each unit has its own key namespace, so the histogram shows exactly which pairs each unit kept:
    every kept key has count 1 (<= 1 per key, duplicates collapsed) and each unit keeps min(d, l0) keys."""
    g = np.random.default_rng(3)
    n = 3000
    units = g.integers(0, 60, n)
    keys = g.integers(0, 15, n)  # repeats create duplicate (unit, key) rows
    df = pl.DataFrame({"uid": units, "query": [f"u{u}-k{k}" for u, k in zip(units, keys)]})
    bh = get_engine(engine).histogram(df.to_pandas() if engine == "pandas" else df, "uid", ["query"], l0,
                                              InsecureSeededRandom(SEED))
    h = pl.from_arrow(bh.keys).with_columns(n=pl.Series(bh.counts))
    assert (h["n"] == 1).all()
    kept = h.with_columns(uid=pl.col("query").str.extract(r"^u(\d+)-").cast(pl.Int64)).group_by("uid").len()
    expect = _oracle_degrees(df).with_columns(k=pl.min_horizontal(pl.col("d"), l0))
    both = expect.join(kept, on="uid", how="left").fill_null(0)
    assert (both["len"] == both["k"]).all()
    assert bh.stats.pairs_in == int(expect["d"].sum())
    assert bh.stats.pairs_dropped_l0 == int((expect["d"] - expect["k"]).sum())
    assert bh.stats.units_over_l0 == int((expect["d"] > l0).sum())
    assert bh.stats.duplicate_rows_removed == n - bh.stats.pairs_in


@pytest.mark.parametrize("engine", ENGINES)
def test_shared_keys_counts_are_bounded(engine, log):
    """With shared keys: per-key count <= distinct units having it; total = sum_u min(d_u, l0)."""
    l0 = 3
    bh = get_engine(engine).histogram(log, "uid", ["query"], l0, InsecureSeededRandom(SEED))
    h = pl.from_arrow(bh.keys).with_columns(n=pl.Series(bh.counts))
    truth = log.group_by("query").agg(pl.col("uid").n_unique().alias("t"))
    j = h.join(truth, on="query")
    assert j.height == h.height and (j["n"] <= j["t"]).all() and (j["n"] >= 1).all()
    deg = _oracle_degrees(log)
    assert int(h["n"].sum()) == int(deg.select(pl.min_horizontal(pl.col("d"), l0)).sum().item())


def _units_own_keys(n_units, n_keys):
    """``n_units`` units, unit u with its own keys ``u{u}-k{i}``, i < ``n_keys`` (disjoint namespaces, so a
    bounded histogram shows which keys each unit kept)."""
    u = np.repeat(np.arange(n_units, dtype=np.int64), n_keys)
    i = np.tile(np.arange(n_keys), n_units)
    return pl.DataFrame({"u": u, "q": [f"u{a:02d}-k{b:02d}" for a, b in zip(u, i)]})


def _unit_and_index(keys: list[str]) -> tuple[np.ndarray, np.ndarray]:
    return np.array([int(k[1:3]) for k in keys]), np.array([int(k[5:]) for k in keys])


#: releases × units per release = 1500 draws of one unit's choice in each uniformity test below. Each release
#: draws a fresh secret; a unit's ranks are AES under that secret of its own (h_u, h_k) pairs, distinct from every
#: other unit's, so the 30 units of one release are 30 independent draws, as 30 releases of one unit were, and
#: the chi-square statistics below have the law (and the power) they had with 1500 one-unit releases, for about
#: a thirtieth of the calls (the per-call cost is fixed, not per row)
_RELEASES, _UNITS = 50, 30


def test_choice_is_uniform_on_a_unit_with_many_keys():
    """Units with 40 keys, l0 = 8, 1500 draws (50 releases of 30 units): each key index is kept 300 times in
    expectation."""
    rng = InsecureSeededRandom(SEED)
    df = _units_own_keys(_UNITS, 40)
    freq = np.zeros(40)
    reps = _RELEASES * _UNITS
    for _ in range(_RELEASES):
        kept = select_pairs(df, "u", ["q"], 8, draw_bounding_secret(rng))
        unit, idx = _unit_and_index(kept["q"].to_list())
        assert kept.height == 8 * _UNITS and kept["q"].n_unique() == 8 * _UNITS
        assert (np.bincount(unit, minlength=_UNITS) == 8).all() and (kept["u"].to_numpy() == unit).all()
        freq += np.bincount(idx, minlength=40)
    # Draws without replacement are less variable than the multinomial, so this chi-square is conservative
    # for over-dispersion; it catches any bias towards some keys (e.g. by sort position).
    p = stats.chisquare(freq, np.full(40, reps * 8 / 40)).pvalue
    assert p > 1e-3, p
    assert abs(freq[:20].sum() - freq[20:].sum()) < 0.06 * reps * 8


def test_choice_is_uniform_over_subsets():
    """5 keys per unit, l0 = 2: the 10 subsets are equally likely (chi-square, 9 dof, 1500 draws: 50 releases
    of 30 units); through bound() as engines do."""
    rng = InsecureSeededRandom(SEED + 1)
    df = _units_own_keys(_UNITS, 5)
    kc = pa.table({"q": df["q"].to_list(), COUNT: np.ones(df.height, dtype=np.int64)})
    subsets = {s: 0 for s in itertools.combinations(range(5), 2)}
    for _ in range(_RELEASES):
        hist, info = bound(kc, df.to_arrow(), "u", ["q"], 2, draw_bounding_secret(rng))
        assert info["pairs_dropped_l0"] == 3 * _UNITS and (hist.counts == 1).all()
        unit, idx = _unit_and_index(hist.keys.column("q").to_pylist())
        assert (np.bincount(unit, minlength=_UNITS) == 2).all()
        for u in range(_UNITS):
            subsets[tuple(sorted(idx[unit == u]))] += 1
    assert sum(subsets.values()) == _RELEASES * _UNITS
    p = stats.chisquare(list(subsets.values())).pvalue
    assert p > 1e-3, p


def test_units_sharing_keys_choose_independently_enough():
    """3000 units with the same 30 keys, l0 = 6, one release: every unit must not drop the same keys."""
    n_units, n_keys = 3000, 30
    df = pl.DataFrame({"u": np.repeat(np.arange(n_units), n_keys),
                       "q": np.tile([f"k{i:02d}" for i in range(n_keys)], n_units)})
    bh = get_engine("polars").histogram(df, "u", ["q"], 6, InsecureSeededRandom(SEED))
    assert bh.counts.sum() == n_units * 6
    p = stats.chisquare(bh.counts, np.full(n_keys, n_units * 6 / n_keys)).pvalue
    assert p > 1e-3, p


def test_pre_threshold_drops_small_counts(log):
    eng = get_engine("polars")
    a = eng.histogram(log, "uid", ["query"], 3, InsecureSeededRandom(SEED))
    b = eng.histogram(log, "uid", ["query"], 3, InsecureSeededRandom(SEED), pre_threshold=5)
    assert b.counts.min() >= 5
    assert _canon(b).equals(_canon(a).filter(pl.col("n") >= 5))
    assert b.stats.keys_out == len(b) < b.stats.keys_bounded == a.stats.keys_out


# ------------------------------------------------------------------ bad input


@pytest.mark.parametrize("engine", ENGINES)
def test_missing_column_names_the_close_match(engine, log):
    with pytest.raises(InputDataError, match=r"'qeury'.*did you mean 'query'"):
        get_engine(engine).histogram(log, "uid", ["qeury"], 3, InsecureSeededRandom(1))
    with pytest.raises(InputDataError, match="privacy_unit column 'user'"):
        get_engine(engine).histogram(log, "user", ["query"], 3, InsecureSeededRandom(1))


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("col", ["uid", "query"])
def test_nulls_are_refused(engine, col):
    df = pl.DataFrame({"uid": [1, 2, 3], "query": ["a", "b", "c"]})
    df = df.with_columns(pl.when(pl.int_range(3) == 1).then(None).otherwise(pl.col(col)).alias(col))
    with pytest.raises(InputDataError, match=f"null values in '{col}' \\(1 nulls\\)"):
        get_engine(engine).histogram(df, "uid", ["query"], 3, InsecureSeededRandom(1))


@pytest.mark.parametrize("engine", ENGINES)
def test_empty_input_is_refused(engine):
    df = pl.DataFrame({"uid": pl.Series([], dtype=pl.Int64), "query": pl.Series([], dtype=pl.String)})
    with pytest.raises(InputDataError, match="no rows"):
        get_engine(engine).histogram(df, "uid", ["query"], 3, InsecureSeededRandom(1))


@pytest.mark.parametrize("engine", ENGINES)
def test_files_that_are_not_parquet_or_csv(engine, tmp_path):
    bad = tmp_path / "data.json"
    bad.write_text('{"uid": 1}')
    with pytest.raises(InputDataError, match="not a Parquet or CSV file"):
        get_engine(engine).histogram(bad, "uid", ["query"], 3, InsecureSeededRandom(1))
    fake = tmp_path / "data.parquet"
    fake.write_text("uid,query\n1,a\n")
    with pytest.raises(InputDataError, match="not a Parquet file"):
        get_engine(engine).histogram(fake, "uid", ["query"], 3, InsecureSeededRandom(1))
    with pytest.raises(InputDataError, match="does not exist"):
        get_engine(engine).histogram(tmp_path / "nope.csv", "uid", ["query"], 3, InsecureSeededRandom(1))


def test_sql_with_where_clause():
    import duckdb

    con = duckdb.connect()
    con.execute("CREATE TABLE shares AS SELECT * FROM (VALUES (1, 'a.com', 'DE', 'share'), "
                "(1, 'a.com', 'DE', 'share'), (2, 'a.com', 'DE', 'view'), (2, 'b.com', 'FR', 'share'), "
                "(3, 'a.com', 'DE', 'share')) t(user_id, url, country, action)")
    sql = "SELECT user_id, url, country FROM shares WHERE action = 'share'"
    bh = get_engine(None, sql, connection=con).histogram(sql, "user_id", ["url", "country"], 5,
                                                                 InsecureSeededRandom(1))
    got = dict(zip(map(tuple, pl.from_arrow(bh.keys).rows()), bh.counts.tolist()))
    assert got == {("a.com", "DE"): 2, ("b.com", "FR"): 1}
    assert bh.stats.rows_in == 4 and bh.stats.duplicate_rows_removed == 1


def test_key_dtypes_survive(log):
    df = log.with_columns(pl.col("country").cast(pl.Categorical), (pl.col("extra") % 5).alias("bucket"))
    for eng in ENGINES:
        bh = get_engine(eng).histogram(df, "uid", ["bucket"], 2, InsecureSeededRandom(1))
        assert pa.types.is_integer(bh.keys.schema.field("bucket").type), eng


def test_unknown_engine():
    from sparsedp.errors import InvalidParameterError

    with pytest.raises(InvalidParameterError, match="engine must be one of"):
        get_engine("spark-ish")
    assert get_engine(None, pd.DataFrame()).name == "polars"
