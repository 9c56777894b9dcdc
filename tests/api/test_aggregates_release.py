"""sparsedp.release with SUM/MEAN aggregates (issue 16): the joint GSHM release end to end.

The grid sums are those of the pairs the count keeps; the count decision is the kernel's; the column noise has
the accountant's law; every embedded engine gives the same table for a seeded source; bad input is refused
before the ledger charge; nothing unreleased (no exact sum) reaches the Result.
"""

from __future__ import annotations

import math
import pickle

import numpy as np
import pandas as pd
import polars as pl
import pytest
from scipy import stats

import sparsedp as sd
from sparsedp.errors import InputDataError, InvalidParameterError, InvalidTypeError
from sparsedp.noise import InsecureSeededRandom

AGGS = [sd.Count(), sd.Sum("dwell", lower=0, upper=600), sd.Mean("dwell", lower=0, upper=600)]
KW = dict(privacy_unit="user", by="url", epsilon=1.0, delta=1e-6, max_groups_per_unit=2)


def _data(n_units=3000, seed=3) -> pl.DataFrame:
    """Units visit 1–5 of 6 urls (so l0 = 2 drops pairs) with several rows each; dwell values up to 900."""
    g = np.random.default_rng(seed)
    urls = np.array(["home", "news", "sport", "blog", "shop", "help"])
    rows_u, rows_k, rows_x = [], [], []
    for u in range(n_units):
        keys = g.choice(urls, size=g.integers(1, 6), replace=False, p=[.3, .25, .2, .1, .1, .05])
        for k in keys:
            r = int(g.integers(1, 4))
            rows_u += [u] * r
            rows_k += [k] * r
            rows_x += list(g.uniform(0, 300, r))
    return pl.DataFrame({"user": rows_u, "url": rows_k, "dwell": rows_x})


class Tripwire:
    """A random source that fails the test if anything draws from it."""

    def uint64(self, size):
        raise AssertionError("randomness drawn before validation finished")

    random_bytes = getrandbits = randbelow = uint64


@pytest.fixture(scope="module")
def df():
    return _data()


def test_grid_sums_are_those_of_the_kept_pairs(df):
    """The histogram's grid sums equal key_grid_sums over select_pairs' kept pairs (same secret), and its
    counts equal the count-only histogram's: one ℓ0 choice for both."""
    from sparsedp.aggregates import noise_columns
    from sparsedp.core.key_order import canonical_order
    from sparsedp.engines.aggregate_exprs import grid_column_name, key_grid_sums
    from sparsedp.engines.bounding import draw_bounding_secret, select_pairs
    from sparsedp.engines.polars_engine import PolarsEngine

    sums = tuple(a for a in AGGS if isinstance(a, sd.Sum))
    eng = PolarsEngine()
    h = eng.histogram(df, "user", ["url"], 2, InsecureSeededRandom(5), aggregates=sums)
    h0 = eng.histogram(df, "user", ["url"], 2, InsecureSeededRandom(5))
    assert h.keys.equals(h0.keys) and np.array_equal(h.counts, h0.counts)
    assert h.stats.pairs_dropped_l0 > 0  # the bound does drop pairs here
    kept = select_pairs(df, "user", ["url"], 2, draw_bounding_secret(InsecureSeededRandom(5)))
    ref = key_grid_sums(df, "user", ["url"], sums, kept_pairs=kept).collect()
    ref = ref.sort(canonical_order(ref.schema, ["url"]))
    assert ref["url"].to_list() == h.keys.column("url").to_pylist()
    assert len(h.columns) == len(noise_columns(sums)[0]) == 1  # a Sum and a Mean of one column share it
    assert np.array_equal(h.columns[0], ref[grid_column_name(0)].to_numpy())


def test_every_embedded_engine_gives_the_same_table(df):
    tables = {}
    for eng in ("polars", "duckdb", "pandas", "arrow"):
        data = {"polars": df, "duckdb": df, "pandas": df.to_pandas(), "arrow": df.to_arrow()}[eng]
        t = sd.release(data, **KW, aggregates=AGGS, engine=eng, rng=InsecureSeededRandom(11)).table
        tables[eng] = pl.from_pandas(t) if isinstance(t, pd.DataFrame) else pl.DataFrame(t)
    assert tables["polars"].columns == ["url", "count", "count_lo", "count_hi", "sum_dwell", "sum_dwell_lo", "sum_dwell_hi",
                                       "mean_dwell", "mean_dwell_lo", "mean_dwell_hi"]  # intervals: default 95 %
    for eng, t in tables.items():
        assert t.equals(tables["polars"]), eng
    # a different seed gives different noise (the test can fail)
    other = sd.release(df, **KW, aggregates=AGGS, rng=InsecureSeededRandom(12)).table
    assert not other.equals(tables["polars"])


def test_mean_and_sum_close_to_the_truth_on_heavy_keys():
    """Without a binding l0 (each unit one key) the released SUM/MEAN estimate the clipped truth."""
    g = np.random.default_rng(0)
    n = 20_000
    frame = pl.DataFrame({"user": np.arange(n), "url": g.choice(["a", "b"], n), "dwell": g.uniform(0, 800, n)})
    res = sd.release(frame, "user", "url", 1.0, 1e-6, max_groups_per_unit=1, aggregates=AGGS,
                     rng=InsecureSeededRandom(2))
    truth = frame.with_columns(pl.col("dwell").clip(0, 600)).group_by("url").agg(
        pl.len().alias("n"), pl.col("dwell").sum().alias("s"), pl.col("dwell").mean().alias("m"))
    j = res.table.join(truth, on="url")
    assert j.height == 2
    err = res.report.column_errors
    assert set(err) == {"sum_dwell", "mean_dwell"}
    # within 5 expected standard errors (+ the grid's rounding, at most g/2 per unit)
    assert ((j["sum_dwell"] - j["s"]).abs() < 5 * err["sum_dwell"] + j["n"] * 600 / 2**13).all()
    assert ((j["mean_dwell"] - j["m"]).abs() < 1.0).all()  # ~10^4 units per key: the mean is within 1 s
    assert ((j["count"] - j["n"]).abs() < 6 * res.report.noise_std).all()


def test_count_decision_is_the_kernels_and_column_noise_has_the_accountants_law():
    """apply_joint releases exactly the keys and counts apply releases (same words of the chunk stream), and
    its column noise (grid units) fits N_Z(0, s_j) of the joint calibration (chi-square at a fixed seed)."""
    import dataclasses

    from sparsedp.accounting.discrete import dgauss_logpmf
    from sparsedp.mechanisms.base import ReleaseRequest
    from sparsedp.mechanisms.thresholded import GSHM, _key_task

    agg = sd.Sum("dwell", lower=-3, upper=3, granularity=1, recentre=False)  # centre 0: value = g·(A + Y)
    req = ReleaseRequest(epsilon=1.0, delta=1e-6, max_groups_per_unit=1, aggregates=(agg,))
    cal = GSHM().calibrate(req)
    assert cal.analysis == "discrete-exact-joint" and cal.delta_achieved <= 1e-6
    task = _key_task(cal, 1, InsecureSeededRandom(4), False)
    joint = dataclasses.replace(task, aggregates=(agg,), column_sigma2s=tuple(cal.joint.column_sigma2s))
    n = 40_000
    margin = int(cal.tau)
    counts = np.full(n, 1 + margin, dtype=np.int64)  # at the threshold: released iff Z >= 0
    zero = np.zeros(n, dtype=np.int64)
    pos0, val0 = task.apply(counts, 7)
    pos, val, cols = joint.apply_joint(counts, [zero], 7)
    assert np.array_equal(pos, pos0) and np.array_equal(val, val0)
    # release probability P[Z >= 0] of N_Z(0, s) (two-sided binomial test)
    s = cal.joint.count_sigma2
    p_rel = float(np.exp(dgauss_logpmf(np.arange(0, 200), s)).sum())
    assert stats.binomtest(pos.size, n, p_rel).pvalue > 1e-3
    y = cols["sum_dwell"].astype(np.int64)
    sj = cal.joint.column_sigma2s[0]
    w = int(4 * math.sqrt(float(sj)))
    edges = np.arange(-w, w + 1)
    p = np.exp(dgauss_logpmf(edges, sj))
    obs = np.array([(y == e).sum() for e in edges] + [np.abs(y).__gt__(w).sum()])
    exp = np.r_[p, max(1.0 - p.sum(), 1e-12)] * y.size
    keep = exp > 5
    chi2 = ((obs[keep] - exp[keep]) ** 2 / exp[keep]).sum()
    assert stats.chi2.sf(chi2, keep.sum() - 1) > 1e-3
    # and not the law of a scale 4x smaller (the test can fail)
    p_bad = np.exp(dgauss_logpmf(edges, sj / 4))
    exp_bad = np.r_[p_bad, max(1.0 - p_bad.sum(), 1e-12)] * y.size
    kb = exp_bad > 5
    assert stats.chi2.sf(((obs[kb] - exp_bad[kb]) ** 2 / exp_bad[kb]).sum(), kb.sum() - 1) < 1e-6


def test_joint_delta_is_reported_and_charged_once(df, tmp_path):
    from sparsedp.ledger import Ledger

    path = tmp_path / "l.db"
    with Ledger(path) as led:
        led.set_budget("d", epsilon=2.0, delta=1e-5)
    res = sd.release(df, **KW, aggregates=AGGS, ledger=str(path), dataset="d", rng=InsecureSeededRandom(1),
                     mechanism="gshm")
    r = res.report
    assert r.analysis == "discrete-exact-joint" and r.delta_achieved <= 1e-6
    from sparsedp.accounting.aggregates import calibrate_joint_gshm
    from sparsedp.aggregates import column_sensitivities

    j = calibrate_joint_gshm(1.0, 1e-6, 2, column_sensitivities(AGGS))
    assert r.margin == j.margin and r.delta_achieved == pytest.approx(j.parts.total)
    assert "sum_dwell" in str(r) and "mean_dwell" in str(r)
    with Ledger(path) as led:
        h = led.history("d")
    assert len(h) == 1
    # charged as the joint event (never the count-only profile, which would under-charge the columns)
    from sparsedp.accounting.events import AggregateGSHMEvent

    assert isinstance(h[0].event, AggregateGSHMEvent) and h[0].profile is None
    assert h[0].event.margin == j.margin and h[0].event.delta_at(1.0) == pytest.approx(j.parts.total)


@pytest.mark.parametrize("mutate,exc,msg", [
    (lambda d: d.with_columns(pl.when(pl.col("user") == 5).then(None).otherwise(pl.col("dwell")).alias("dwell")),
     InputDataError, "null"),
    (lambda d: d.with_columns(pl.when(pl.col("user") == 5).then(float("nan")).otherwise(pl.col("dwell"))
                              .alias("dwell")), InputDataError, "NaN or infinite"),
    (lambda d: d.with_columns(pl.when(pl.col("user") == 5).then(float("inf")).otherwise(pl.col("dwell"))
                              .alias("dwell")), InputDataError, "NaN or infinite"),
    (lambda d: d.with_columns(pl.col("dwell").cast(pl.String)), InvalidTypeError, "numeric"),
    (lambda d: d.drop("dwell"), InputDataError, "not in the data"),
])
def test_bad_value_columns_are_refused_before_the_charge_and_any_draw(df, tmp_path, mutate, exc, msg):
    from sparsedp.ledger import Ledger

    path = tmp_path / "l.db"
    with Ledger(path) as led:
        led.set_budget("d", epsilon=2.0, delta=1e-5)
    for eng in ("polars", "duckdb"):
        with pytest.raises(exc, match=msg):
            sd.release(mutate(df), **KW, aggregates=AGGS, ledger=str(path), dataset="d", rng=Tripwire(),
                       engine=eng)
    with Ledger(path) as led:
        assert led.history("d") == []


@pytest.mark.parametrize("kw,msg", [
    (dict(mechanism="laplace"), "counts only"),
    (dict(mechanism="pure-sparse", max_groups_per_unit=None, delta=0.0), "counts only"),
    (dict(insecure_float=True), "secure discrete noise only"),
    (dict(aggregates=[sd.Sum("user", 0, 1)]), "must not be the privacy unit"),
    (dict(aggregates=[sd.Sum("dwell", 0, 1, name="url")]), "also an input column"),
    (dict(aggregates=[sd.Count(name="s"), sd.Sum("dwell", 0, 1, name="s")]), "duplicate output"),
])
def test_bad_requests_are_refused_before_reading(df, kw, msg):
    args = {**KW, "aggregates": AGGS, **kw}
    with pytest.raises(InvalidParameterError, match=msg):
        sd.release(df, **args, rng=Tripwire())
    with pytest.raises(InvalidParameterError, match="lower must be <= upper"):
        sd.Sum("dwell", lower=5, upper=1)


def test_result_holds_no_unreleased_key_and_no_exact_sum():
    rows = [(u, "popular", 100.0) for u in range(300)] + [(10**6, "secret-one-unit-key", 123.456)]
    frame = pl.DataFrame(rows, schema={"user": pl.Int64, "url": pl.String, "dwell": pl.Float64}, orient="row")
    res = sd.release(frame, "user", "url", 1.0, 1e-6, max_groups_per_unit=1, aggregates=AGGS,
                     rng=InsecureSeededRandom(3))
    blob = pickle.dumps(res)
    text = repr(res) + str(res)
    assert b"secret-one-unit-key" not in blob and "secret-one-unit-key" not in text
    assert res.table["url"].to_list() == ["popular"]
    exact_sum = 300 * 100.0
    assert res.table["sum_dwell"][0] != exact_sum  # noisy
    # no exact per-key figure anywhere in the public report or the curator's figures
    figures = list(res.report.to_dict().values()) + list(res.report.column_errors.values()) + \
        list(res.curator.bounding.to_dict().values())
    assert not any(isinstance(x, (int, float)) and x in (exact_sum, 123.456, 300) for x in figures)


# ---------------------------------------------------------------- top-k CSH with columns (de-biased only)


def test_topk_with_aggregates_same_table_everywhere_and_close_to_truth():
    g = np.random.default_rng(4)
    n = 30_000
    frame = pl.DataFrame({"user": g.integers(0, 8000, n), "url": [f"k{x}" for x in g.zipf(1.5, n) % 200],
                          "dwell": g.uniform(0, 700, n)})
    kw = dict(privacy_unit="user", by="url", epsilon=1.0, delta=1e-6, top_k=3, aggregates=AGGS)
    tables = {}
    for eng in ("polars", "duckdb", "pandas", "arrow"):
        data = {"polars": frame, "duckdb": frame, "pandas": frame.to_pandas(), "arrow": frame.to_arrow()}[eng]
        res = sd.release(data, **kw, engine=eng, rng=InsecureSeededRandom(8))
        t = res.table
        tables[eng] = pl.from_pandas(t) if isinstance(t, pd.DataFrame) else pl.DataFrame(t)
    for eng, t in tables.items():
        assert t.equals(tables["polars"]), eng
    r = res.report
    assert r.mechanism == "topk-csh" and r.analysis == "rounded-add-joint" and r.delta_achieved <= 1e-6
    assert set(r.column_errors) == {"sum_dwell", "mean_dwell"}
    t = tables["polars"]
    assert t.height == 3
    truth = (frame.group_by("user", "url").agg(pl.col("dwell").sum().clip(0, 600).alias("v"))
             .group_by("url").agg(pl.len().alias("n"), pl.col("v").sum().alias("s"), pl.col("v").mean().alias("m")))
    j = t.join(truth, on="url")
    # de-biased counts and sums: within 5 expected errors (count std from the report)
    assert ((j["count"] - j["n"]).abs() < 5 * r.noise_std).all()
    assert ((j["sum_dwell"] - j["s"]).abs() < 5 * r.column_errors["sum_dwell"]).all()
    assert ((j["mean_dwell"] - j["m"]).abs() < 5 * r.column_errors["mean_dwell"]).all()


def test_topk_count_decision_unchanged_by_columns():
    import dataclasses

    from sparsedp.mechanisms.base import ReleaseRequest
    from sparsedp.mechanisms.thresholded import TopKCSH, _key_task

    agg = sd.Sum("dwell", lower=0, upper=10, granularity=1)
    m = TopKCSH(k=50)
    cal = m.calibrate(ReleaseRequest(epsilon=1.0, delta=1e-6, aggregates=(agg,)))
    g = np.random.default_rng(1)
    counts = np.r_[g.integers(1, 50, 1950), g.integers(100, 2000, 50)]  # truncated values around the margin
    t = int(np.sort(counts)[-51])
    task = _key_task(cal, 1, InsecureSeededRandom(6), False, cutoff=t, debias=True)
    joint = dataclasses.replace(task, aggregates=(agg,), column_sigma2s=tuple(cal.joint.column_sigma2s))
    pos0, val0 = task.apply(counts, 3)
    pos, val, cols = joint.apply_joint(counts, [np.zeros(counts.size, dtype=np.int64)], 3)
    assert np.array_equal(pos, pos0) and np.array_equal(val, val0) and 0 < pos.size < 50
    assert cols["sum_dwell"].shape == pos.shape
    with pytest.raises(InvalidParameterError, match="debias=True"):
        TopKCSH(k=5, debias=False).calibrate(ReleaseRequest(epsilon=1.0, delta=1e-6, aggregates=(agg,)))


def test_cli_sum_and_mean(df, tmp_path):
    from typer.testing import CliRunner

    from sparsedp.cli import app

    path = tmp_path / "d.parquet"
    df.write_parquet(path)
    out = tmp_path / "o.parquet"
    res = CliRunner().invoke(app, ["release", str(path), "--unit", "user", "--by", "url", "--epsilon", "1",
                                   "--delta", "1e-6", "--max-groups", "2", "--sum", "dwell:0:600",
                                   "--mean", "dwell:0:600:avg_dwell", "--out", str(out)])
    assert res.exit_code == 0, res.output
    t = pl.read_parquet(out)
    assert t.columns == ["url", "count", "count_lo", "count_hi", "sum_dwell", "sum_dwell_lo", "sum_dwell_hi", "avg_dwell",
                         "avg_dwell_lo", "avg_dwell_hi"] and t.height > 0
    assert "expected error" in res.output
    bad = CliRunner().invoke(app, ["release", str(path), "--unit", "user", "--by", "url", "--epsilon", "1",
                                   "--delta", "1e-6", "--max-groups", "2", "--sum", "dwell:0"])
    assert bad.exit_code == 2 and "COLUMN:LOWER:UPPER" in bad.output


def test_plan_with_aggregates_matches_the_release(df):
    p0 = sd.plan(1.0, 1e-6, max_groups_per_unit=2)
    p = sd.plan(1.0, 1e-6, max_groups_per_unit=2, top_k=3, aggregates=AGGS)
    names = [m.name for m in p.mechanisms]
    assert names == ["gshm", "topk-csh"]  # Laplace and the shifted top-k release no columns
    gshm0 = p0[[m.name for m in p0.mechanisms].index("gshm")]
    assert p[0].tau > gshm0.tau and p[0].sigma > gshm0.sigma  # the columns cost margin and noise
    row = p.rows()[0]
    res = sd.release(df, **KW, aggregates=AGGS, rng=InsecureSeededRandom(1))
    assert res.report.margin == p[0].tau
    assert row["err_sum_dwell"] == pytest.approx(res.report.column_errors["sum_dwell"])
    with pytest.raises(InvalidParameterError, match="pure"):
        sd.plan(0.5, 0.0, max_units=100, aggregates=AGGS)
