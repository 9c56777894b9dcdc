"""max_groups_per_unit="auto" (sparsedp.auto_bound; proof: docs/proofs/auto-bound.md)."""

from __future__ import annotations

import itertools
from typing import Any
import math
from collections import Counter

import numpy as np
import polars as pl
import pytest

import sparsedp as sd
from sparsedp.auto_bound import AutoBound, noise_scale, select_bound, utilities
from sparsedp.core.unit_keys import UnitKeyCounts
from sparsedp.errors import InfeasibleError, InputDataError, InvalidParameterError
from sparsedp.noise import InsecureSeededRandom


class Tripwire:
    """A random source that fails the test if anything draws from it."""

    def uint64(self, size):
        raise AssertionError("randomness drawn before validation finished")

    random_bytes = getrandbits = randbelow = uint64


# ------------------------------------------------------------- exact law of the selection (report noisy max)


def rnm_law(u: list[int], scale) -> np.ndarray:
    """P[output = i] of argmax_i (u_i + Z_i), ties to the smallest index, Z_i iid discrete Laplace(scale), by
    exact enumeration of z_i over [-W, W] with the closed-form pmf and cdf (P[Z <= x] = q^{-x}/(1+q) for x < 0,
    1 - q^{x+1}/(1+q) for x >= 0, q = e^{-1/s}); W = 60 s, so the neglected tail mass is <= e^-60 relative."""
    s = float(scale)
    q = math.exp(-1 / s)
    W = int(math.ceil(60 * s)) + max(abs(x) for x in u)
    z = np.arange(-W, W + 1)

    def cdf(x):
        return np.where(x >= 0, 1 - q ** (np.maximum(x, 0) + 1) / (1 + q), q ** np.maximum(-x, 0) / (1 + q))

    pmf = (1 - q) / (1 + q) * q ** np.abs(z)
    out = []
    for i, ui in enumerate(u):
        p = pmf.copy()
        for j, uj in enumerate(u):
            if j < i:
                p *= cdf(ui + z - uj - 1)  # strictly below
            elif j > i:
                p *= cdf(ui + z - uj)  # at most (ties go to i)
        out.append(p.sum())
    out = np.array(out)
    assert abs(out.sum() - 1) < 1e-12
    return out


def _counts(degrees: list[int], cands: tuple[int, ...]) -> UnitKeyCounts:
    c = Counter(degrees)
    return UnitKeyCounts.from_degrees(cands, list(c), list(c.values()))


def _max_log_ratio(opts: AutoBound, eps1: float, scale, max_units: int = 4) -> float:
    """max over neighbouring inputs (degrees in 1..4, up to max_units units, one unit added) and outputs of
    |log P_D[i] - log P_D'[i]|."""
    worst = 0.0
    cands = opts.candidates
    for n in range(0, max_units + 1):
        for base in itertools.combinations_with_replacement((1, 2, 3, 4), n):
            law = rnm_law(utilities(_counts(list(base), cands), opts), scale)
            for d in (1, 2, 3, 4):
                law2 = rnm_law(utilities(_counts(list(base) + [d], cands), opts), scale)
                worst = max(worst, float(np.max(np.abs(np.log(law) - np.log(law2)))))
    return worst


@pytest.mark.parametrize("quantile", [0.5, 0.75])
def test_selection_is_pure_eps1_dp_by_exact_enumeration(quantile):
    opts = AutoBound(share=0.5, candidates=(1, 2, 3), quantile=quantile)
    eps1 = 0.7
    worst = _max_log_ratio(opts, eps1, noise_scale(opts, eps1))
    assert worst <= eps1 * (1 + 1e-9)
    assert worst > 0.3 * eps1  # the enumeration does reach large ratios (not vacuous)


def test_half_the_scale_breaks_the_guarantee():
    """The check above can fail: with scale Δ/ε₁ (no factor 2) some neighbouring pair exceeds e^{ε₁}."""
    opts = AutoBound(share=0.5, candidates=(1, 2, 3), quantile=0.5)
    eps1 = 0.7
    assert _max_log_ratio(opts, eps1, noise_scale(opts, eps1) / 2) > eps1 * 1.01


def test_sampled_selection_follows_the_exact_law():
    """select_bound (secure sampler path, seeded) draws from the law enumerated above (ties included)."""
    from scipy import stats

    opts = AutoBound(share=0.5, candidates=(1, 2, 3), quantile=0.5)
    counts = _counts([1, 2, 2, 3], opts.candidates)  # u = (-2, 0, -2): rank 2 of 4 lies in (1, 3]
    eps1 = 1.0
    law = rnm_law(utilities(counts, opts), noise_scale(opts, eps1))
    rng = InsecureSeededRandom(7)
    n = 3000
    obs = Counter(select_bound(counts, opts, eps1, 1.0, rng).bound for _ in range(n))
    o = np.array([obs.get(c, 0) for c in opts.candidates], float)
    e = np.array(law) * n
    assert stats.chisquare(o, e).pvalue > 1e-4


def test_utilities_and_sensitivity():
    opts = AutoBound(quantile=0.9)
    assert str(opts.quantile_fraction) == "9/10"
    assert opts.sensitivity == 9
    c = UnitKeyCounts(candidates=opts.candidates, units=100, at_most=(10, 20, 40, 80, 90, 95, 99, 100, 100))
    assert utilities(c, opts)[4] == 0 and utilities(c, opts)[0] == -(900 - 100)
    assert float(noise_scale(opts, 0.1)) == pytest.approx(180.0)


def test_candidates_above_every_units_keys_do_not_tie_with_the_smallest_that_keeps_them_all():
    """Issue 33: the old utility −|b·A_c − a·N| gave every candidate at or above the largest keys-per-unit the
    same value, and the noise chose among them (up to 256 where no unit holds more than 3 keys). The interval
    utility scores the first candidate covering the q-quantile 0 and every later one −(b − a)·N."""
    opts = AutoBound(quantile=0.9)
    n = 1000
    c = _counts([1] * 500 + [2] * 300 + [3] * 200, opts.candidates)  # every unit holds at most 3 keys
    u = utilities(c, opts)
    assert u[2] == 0 and max(u) == 0  # l0 = 4: the smallest candidate with A_c >= 0.9 N
    assert all(x == -(10 - 9) * n for x in u[3:])  # 8 … 256: an empty interval at rank N
    assert u.index(max(u)) == 2
    one_key = _counts([1] * 950 + [5] * 50, opts.candidates)  # most units hold one key
    assert utilities(one_key, opts).index(0) == 0


def test_release_on_units_with_at_most_three_keys_chooses_a_small_bound():
    """The private choice on a frame where every unit holds at most 3 keys: l0 <= 4 in every seed (the noise
    is about 18 units at ε₁ = 0.1 against a gap of 0.1·N = 300 units)."""
    g = np.random.default_rng(5)
    rows = [(u, f"k{int(k)}") for u in range(3000) for k in g.choice(40, size=int(g.integers(1, 4)), replace=False)]
    small = pl.DataFrame(rows, schema=["user", "key"], orient="row")
    for seed in (1, 2, 3):
        res = sd.release(small, "user", "key", 1.0, 1e-6, max_groups_per_unit="auto", rng=InsecureSeededRandom(seed))
        assert res.report.auto_bound["bound"] in (2, 4), seed


# ------------------------------------------------------------- engines and the release


def _data() -> pl.DataFrame:
    g = np.random.default_rng(3)
    rows = []
    for u in range(3000):
        n = int(min(1 + g.pareto(1.2), 60))
        for k in g.zipf(1.3, n):
            rows.append((u, f"k{min(int(k), 400)}"))
    return pl.DataFrame(rows, schema=["user", "key"], orient="row")


@pytest.fixture(scope="module")
def df():
    return _data()


def test_engine_counts_match_a_direct_count(df):
    from sparsedp.engines import get_engine

    deg = df.unique().group_by("user").len()["len"].to_numpy()
    cands = (1, 2, 4, 8, 16, 32)
    want = tuple(int((deg <= c).sum()) for c in cands)
    for name in ("polars", "duckdb", "pandas", "arrow"):
        data = df.to_pandas() if name == "pandas" else df.to_arrow() if name == "arrow" else df
        got = get_engine(name, data, None).keys_per_unit_counts(data, "user", ["key"], cands)
        assert got.units == 3000 and got.at_most == want, name


@pytest.mark.parametrize("shape", ["string key", "two keys", "parquet file", "repeated rows"])
def test_degree_histogram_is_the_distinct_keys_per_unit(tmp_path, shape):
    """The embedded engines read the degrees from the count path's sorted pair ids
    (:meth:`sparsedp.engines.pair_ids.ReadPairs.degrees`): the same histogram as counting distinct (unit, key) rows
    per unit directly, whatever the key's type or the input's form, with every unit counted once."""
    from sparsedp.engines import get_engine

    g = np.random.default_rng(7)
    frame = pl.DataFrame({"user": g.integers(0, 4000, 60_000), "a": g.integers(0, 300, 60_000).astype(str),
                          "b": g.integers(0, 4, 60_000)})
    by = ["a", "b"] if shape == "two keys" else ["a"]
    if shape == "repeated rows":
        frame = pl.concat([frame, frame.head(20_000)])
    direct = (frame.unique(["user", *by]).group_by("user").agg(pl.len().alias("d"))
              .group_by("d").agg(pl.len().alias("n")).sort("d"))
    data = frame
    if shape == "parquet file":
        data = str(tmp_path / "rows.parquet")
        frame.write_parquet(data)
    degrees, units = get_engine("polars", data, None).read_pairs(data, "user", by).degrees()
    assert degrees.tolist() == direct["d"].to_list() and units.tolist() == direct["n"].to_list()
    assert int(units.sum()) == frame["user"].n_unique()


def _count_reads(monkeypatch) -> list[int]:
    """Count the Polars pair path's passes over the rows (:func:`sparsedp.engines.pair_ids.sorted_pairs`)."""
    from sparsedp.engines import pair_ids

    calls: list[int] = []
    real = pair_ids.sorted_pairs

    def counted(*a, **k):
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(pair_ids, "sorted_pairs", counted)
    return calls


def _with_values(df: pl.DataFrame) -> pl.DataFrame:
    return df.with_columns(x=(pl.col("user") % 7).cast(pl.Float64) / 2, y=pl.col("user") % 3)


_SUMS = [sd.Count(), sd.Sum("x", 0, 3), sd.Mean("y", 0, 2)]


@pytest.mark.parametrize("kind", ["frame", "parquet file", "sum and mean", "keys objective"])
def test_auto_release_reads_the_input_once(df, tmp_path, monkeypatch, kind):
    """On the Polars engine the automatic bound's first read keeps its sorted pairs (and SUM/MEAN values) for the
    release at the bound chosen (:meth:`~sparsedp.core.engine.Engine.read_unit_key_counts`): one pass over the
    rows, and the same released table as reading the input again (the DuckDB engine reads twice, in SQL)."""
    data: Any = df
    extra: dict[str, Any] = {}
    if kind == "parquet file":
        data = str(tmp_path / "rows.parquet")
        df.write_parquet(data)
    elif kind == "sum and mean":
        data, extra = _with_values(df), {"aggregates": _SUMS}
    bound: Any = AutoBound(objective="keys") if kind == "keys objective" else "auto"
    calls = _count_reads(monkeypatch)
    once = sd.release(data, "user", "key", 1.0, 1e-6, max_groups_per_unit=bound, engine="polars",
                      rng=InsecureSeededRandom(3), **extra)
    assert len(calls) == 1
    twice = sd.release(data, "user", "key", 1.0, 1e-6, max_groups_per_unit=bound, engine="duckdb",
                       rng=InsecureSeededRandom(3), **extra)
    assert once.report.auto_bound == twice.report.auto_bound
    assert once.table.sort("key").equals(twice.table.sort("key"))
    assert once.curator.bounding == twice.curator.bounding


def test_auto_release_reads_again_for_a_mechanism_with_its_own_read(df, monkeypatch):
    """A mechanism whose read is not the engine's count histogram alone (two-stage) reads the input again: the
    rows kept are not handed to it."""
    calls = _count_reads(monkeypatch)
    res = sd.release(df, "user", "key", 1.0, 1e-6, max_groups_per_unit="auto", mechanism="two-stage",
                     engine="polars", rng=InsecureSeededRandom(3))
    assert len(calls) >= 2 and res.report.auto_bound["bound"] in AutoBound().candidates


def test_read_pairs_are_used_once_for_their_own_columns(df):
    """:class:`sparsedp.engines.pair_ids.ReadPairs` serves one count release, for the columns it read."""
    from sparsedp.engines import get_engine

    eng = get_engine("polars", df, None)
    rows = eng.read_pairs(df, "user", ["key"])
    with pytest.raises(ValueError, match="read for unit 'user', keys"):
        rows.bounded_raw_counts("key", ["user"], 4, InsecureSeededRandom(1))
    with pytest.raises(ValueError, match=r"and values \[\], not 'user', \['key'\] and \['x'\]"):
        eng.histogram(rows, "user", ["key"], 4, InsecureSeededRandom(1), aggregates=[sd.Sum("x", 0, 1)])
    hist = eng.histogram(rows, "user", ["key"], 4, InsecureSeededRandom(1))
    assert hist.counts.sum() > 0
    with pytest.raises(RuntimeError, match="already released from"):
        rows.degrees()


@pytest.mark.parametrize("engine", ["polars", "duckdb"])
@pytest.mark.parametrize("objective", ["quantile", "keys"])
@pytest.mark.parametrize("bad", ["nan", "missing", "key column"])
def test_auto_release_refuses_bad_sum_columns_before_the_charge(df, tmp_path, engine, objective, bad):
    """With SUM/MEAN the automatic bound checks the value columns in its first read, before the ledger charge:
    a bad value column charges nothing (it used to be found by the release after the choice, once charged)."""
    from sparsedp.ledger import Ledger

    path = str(tmp_path / "l.db")
    with Ledger(path) as led:
        led.set_budget("d", epsilon=3.0, delta=1e-5)
    data = _with_values(df)
    aggregates = list(_SUMS)
    if bad == "nan":
        data = data.with_columns(x=pl.when(pl.int_range(pl.len()) == 5).then(float("nan")).otherwise(pl.col("x")))
        match = "finite numbers"
    elif bad == "missing":
        aggregates.append(sd.Sum("absent", 0, 1))
        match = "absent"
    else:
        aggregates.append(sd.Sum("key", 0, 1))
        match = "privacy unit or a key column"
    with pytest.raises((InputDataError, InvalidParameterError), match=match):
        sd.release(data, "user", "key", 1.0, 1e-6, max_groups_per_unit=AutoBound(objective=objective),
                   aggregates=aggregates, engine=engine, ledger=path, dataset="d")
    with Ledger(path) as led:
        assert led.history("d") == []


@pytest.mark.parametrize("engine", ["polars", "duckdb"])
def test_auto_release_refuses_a_nested_key_before_the_charge(tmp_path, engine):
    """A list-typed key column is refused by the automatic bound's first read, before the ledger charge (the
    Polars engine used to find it on the release's histogram, once charged)."""
    from sparsedp.ledger import Ledger

    path = str(tmp_path / "l.db")
    with Ledger(path) as led:
        led.set_budget("d", epsilon=3.0, delta=1e-5)
    frame = pl.DataFrame({"user": [i % 300 for i in range(6000)], "key": [[i % 5] for i in range(6000)]})
    with pytest.raises(InputDataError, match="keys must be scalar values"):
        sd.release(frame, "user", "key", 1.0, 1e-6, max_groups_per_unit="auto", engine=engine, ledger=path,
                   dataset="d")
    with Ledger(path) as led:
        assert led.history("d") == []


def test_auto_release_fixed_seed_same_on_two_engines(df, tmp_path):
    from sparsedp.ledger import Ledger

    path = tmp_path / "l.db"
    with Ledger(path) as led:
        led.set_budget("d", epsilon=3.0, delta=1e-5)
    out = {}
    for eng in ("polars", "duckdb"):
        res = sd.release(df, "user", "key", 1.0, 1e-6, max_groups_per_unit="auto", engine=eng,
                         rng=InsecureSeededRandom(11), ledger=str(path), dataset="d")
        r = res.report
        assert r.epsilon == 1.0 and r.auto_bound["share"] == 0.05
        assert r.auto_bound["epsilon_selection"] + r.auto_bound["epsilon_release"] <= 1.0
        assert r.auto_bound["bound"] in AutoBound().candidates
        assert f"max_groups_per_unit={r.auto_bound['bound']}" in str(r)
        assert res.curator.bounding.l0 == r.auto_bound["bound"]
        assert res.curator.auto_bound.units == 3000
        out[eng] = res.table.sort("key")
    assert out["polars"].equals(out["duckdb"])
    with Ledger(path) as led:
        h = led.history("d")
    assert len(h) == 2 and all(c.epsilon == 1.0 and c.delta == 1e-6 for c in h)  # one charge per release


def test_auto_bound_options_object(df):
    res = sd.release(df, "user", "key", 1.0, 1e-6, rng=InsecureSeededRandom(2),
                     max_groups_per_unit=sd.AutoBound(share=0.25, candidates=(1, 3, 9, 27), quantile=0.75))
    a = res.report.auto_bound
    assert a["candidates"] == [1, 3, 9, 27] and a["quantile"] == 0.75
    assert a["epsilon_selection"] == 0.25 and a["bound"] in (1, 3, 9, 27)


@pytest.mark.parametrize("kw,exc,msg", [
    (dict(max_groups_per_unit=AutoBound), Exception, "max_groups_per_unit"),  # the class, not an instance
    (dict(max_groups_per_unit="automatic"), InvalidParameterError, "'auto'"),
    (dict(max_groups_per_unit="auto", top_k=10), InvalidParameterError, "not both"),
    (dict(max_groups_per_unit="auto", mechanism="pure-sparse"), InvalidParameterError, "chooses l0"),
])
def test_bad_requests_are_refused_before_any_charge_or_draw(df, tmp_path, kw, exc, msg):
    from sparsedp.ledger import Ledger

    path = tmp_path / "l.db"
    with Ledger(path) as led:
        led.set_budget("d", epsilon=3.0, delta=1e-5)
    args = dict(epsilon=1.0, delta=1e-6) | kw
    with pytest.raises(exc, match=msg):
        sd.release(df, "user", "key", ledger=str(path), dataset="d", rng=Tripwire(), **args)
    with Ledger(path) as led:
        assert led.history("d") == []


@pytest.mark.parametrize("bad", [dict(share=0), dict(share=1.0), dict(candidates=()), dict(candidates=(4, 2)),
                                 dict(candidates=(0, 2)), dict(quantile=1.0), dict(quantile=math.pi / 4)])
def test_bad_auto_bound_options(bad):
    with pytest.raises((InvalidParameterError, TypeError)):
        AutoBound(**bad)


def test_infeasible_at_the_largest_candidate_is_refused_before_the_data(df, tmp_path, monkeypatch):
    """Feasibility is checked at the largest candidate before any data are read: nothing charged, nothing
    drawn. (A calibration that fails above l0 = 100 stands in for an infeasible request.)"""
    from sparsedp.ledger import Ledger
    from sparsedp.mechanisms.thresholded import GSHM

    orig = GSHM.calibrate

    def calibrate(self, request):
        if request.max_groups_per_unit > 100:
            raise InfeasibleError("test: infeasible above l0 = 100")
        return orig(self, request)

    monkeypatch.setattr(GSHM, "calibrate", calibrate)
    path = tmp_path / "l.db"
    with Ledger(path) as led:
        led.set_budget("d", epsilon=3.0, delta=1e-5)
    with pytest.raises(InfeasibleError):
        sd.release(df, "user", "key", 1.0, 1e-6, ledger=str(path), dataset="d", rng=Tripwire(),
                   max_groups_per_unit=AutoBound(candidates=(1, 200)), mechanism="gshm")
    with Ledger(path) as led:
        assert led.history("d") == []
    res = sd.release(df, "user", "key", 1.0, 1e-6, ledger=str(path), dataset="d", rng=InsecureSeededRandom(1),
                     max_groups_per_unit=AutoBound(candidates=(1, 50)), mechanism="gshm")
    assert res.report.auto_bound["bound"] in (1, 50)


@pytest.mark.parametrize("eng", ["polars", "duckdb"])
def test_bad_input_refused_before_the_charge(df, tmp_path, eng):
    from sparsedp.ledger import Ledger

    path = tmp_path / "l.db"
    with Ledger(path) as led:
        led.set_budget("d", epsilon=3.0, delta=1e-5)
    bad = df.with_columns(pl.when(pl.col("user") == 5).then(None).otherwise(pl.col("key")).alias("key"))
    nan = pl.DataFrame({"user": [1, 2, 3], "key": [1.0, float("nan"), 2.0]})
    for data, msg in ((bad, "null"), (nan, "NaN")):
        with pytest.raises(InputDataError, match=msg):
            sd.release(data, "user", "key", 1.0, 1e-6, max_groups_per_unit="auto", engine=eng, ledger=str(path),
                       dataset="d", rng=Tripwire())
    with Ledger(path) as led:
        assert led.history("d") == []


def test_cli_max_groups_auto(df, tmp_path):
    from typer.testing import CliRunner

    from sparsedp.cli import app

    path = tmp_path / "in.parquet"
    df.write_parquet(path)
    out = tmp_path / "out.parquet"
    r = CliRunner().invoke(app, ["release", str(path), "--unit", "user", "--by", "key", "--epsilon", "1",
                                 "--delta", "1e-6", "--max-groups", "auto", "--auto-share", "0.2", "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert "l0 (auto)" in r.output and "chosen with 0.2 of epsilon" in r.output
    import json

    import pyarrow.parquet as pq

    from sparsedp.engines.output import METADATA_KEY

    meta = json.loads(pq.read_schema(out).metadata[METADATA_KEY.encode()])
    assert meta["epsilon"] == 1.0 and meta["auto_bound"]["share"] == 0.2
    for args, msg in ((["--max-groups", "auto", "--auto-share", "1.5"], "--auto-share"),
                      (["--max-groups", "x"], "--max-groups"), (["--max-groups", "4", "--auto-share", "0.2"],
                                                                "--max-groups auto")):
        r = CliRunner().invoke(app, ["release", str(path), "--unit", "user", "--by", "key", "--epsilon", "1",
                                     "--delta", "1e-6", *args])
        assert r.exit_code == 2 and msg in r.output, r.output
