"""sd.Variance / sd.Std end to end: the squares column's grid and sensitivity, the released law against the
accountant's noise (two-sample KS against the formula with independently drawn exact discrete Gaussians of the
calibrated scales), every engine the same, the ledger charge, the clamp, the CLI, and nothing non-private."""

from __future__ import annotations

import pickle
import numpy as np
import polars as pl
import pytest
from scipy import stats

import sparsedp as sd
from sparsedp.aggregates import Squares, column_sensitivities, noise_columns, square_columns
from sparsedp.errors import InvalidParameterError
from sparsedp.noise import InsecureSeededRandom, sample_discrete_gaussian

KEYS, UNITS = 2000, 150
KW = dict(privacy_unit="u", by="k", epsilon=1.0, delta=1e-7, max_groups_per_unit=1)


def _frame(keys=KEYS, units=UNITS) -> pl.DataFrame:
    """Each key: half its units at 20, half at 80 (variance 900, sum 50·n); both on the value and squares grids."""
    u = np.arange(keys * units)
    return pl.DataFrame({"u": u, "k": u // units, "x": np.where(u % 2 == 0, 20.0, 80.0)})


def test_squares_column_grid_and_sensitivity():
    var = sd.Variance("x", 0, 100)
    cols, where = noise_columns([sd.Count(), sd.Sum("x", 0, 100), var, sd.Std("x", 0, 100)])
    assert len(cols) == 2 and where == [None, 0, 0, 0]          # one sum column and one squares column, shared
    sq = cols[1]
    assert isinstance(sq, Squares) and sq.granularity == 4.0     # 2^12 steps over [0, 100²]
    assert sq.grid_bounds == (0, 2500) and sq.centre == 1250 and sq.sensitivity == 1250
    assert square_columns([sd.Sum("x", 0, 100), var]) == [None, 1]
    assert column_sensitivities([var]) == [1600, 1250]
    # bounds straddling 0: v² ranges over [0, max(lower², upper²)]
    assert Squares("x", -3, 2).value_bounds == (0.0, 9.0)
    assert Squares("x", 2, 3).value_bounds == (4.0, 9.0)


def _formula(n_hat, s1, s2, upper):
    return np.clip(s2 / n_hat - (s1 / n_hat) ** 2, 0.0, upper)


def test_released_variance_has_the_accountants_law():
    """2000 released variances (one per key, real pipeline) against 20000 draws of the estimator with exact
    discrete Gaussian noise of the calibration's scales on the true grid sums: two-sample KS."""
    df = _frame()
    aggs = [sd.Count(), sd.Variance("x", 0, 100), sd.Std("x", 0, 100)]
    res = sd.release(df, **KW, aggregates=aggs, mechanism="gshm", rng=InsecureSeededRandom(7))
    assert res.table.height == KEYS
    cal = sd.GSHM().calibrate(sd.mechanisms.base.ReleaseRequest(epsilon=1.0, delta=1e-7, max_groups_per_unit=1,
                                                                aggregates=tuple(aggs[1:])))
    j = cal.joint
    assert j.column_sensitivities == (1600, 1250)
    rng = InsecureSeededRandom(99)
    m = 20000
    z = sample_discrete_gaussian(j.count_sigma2, m, rng)
    y1 = sample_discrete_gaussian(j.column_sigma2s[0], m, rng)
    y2 = sample_discrete_gaussian(j.column_sigma2s[1], m, rng)
    n_hat = (UNITS + z).astype(float)
    # grid sums: x ∈ {20, 80} -> q = 640, 2560 (step 1/32, centre 1600); x² ∈ {400, 6400} -> 100, 1600 (step 4,
    # centre 1250); the released values are g·(A' + Y) + g·c·n̂
    a1 = (UNITS // 2) * (640 - 1600) + (UNITS // 2) * (2560 - 1600)
    a2 = (UNITS // 2) * (100 - 1250) + (UNITS // 2) * (1600 - 1250)
    s1 = (a1 + y1 + 1600 * n_hat) / 32.0
    s2 = 4.0 * (a2 + y2 + 1250 * n_hat)
    sim = _formula(n_hat, s1, s2, 2500.0)
    got = res.table["variance_x"].to_numpy()
    assert stats.ks_2samp(got, sim).pvalue > 1e-3
    assert np.allclose(res.table["std_x"].to_numpy(), np.sqrt(got))
    # and it estimates the truth (900) on average to within the noise
    assert abs(got.mean() - 900.0) < 4 * got.std() / np.sqrt(KEYS) + 10.0


def test_every_engine_gives_the_same_variance():
    df = _frame(keys=4, units=UNITS)
    aggs = [sd.Count(), sd.Mean("x", 0, 100), sd.Variance("x", 0, 100)]
    tables = [sd.release(df, **KW, aggregates=aggs, engine=e, rng=InsecureSeededRandom(3)).table.sort("k")
              for e in ("polars", "duckdb", "pandas", "arrow")]
    for t in tables[1:]:
        assert t.equals(tables[0])


def test_clamp_to_the_possible_range():
    """Keys of variance 0 (every unit at 7) and keys of the largest possible variance 25 (half at 0, half at 10, in
    [0, 10]): the noisy plug-in falls outside [0, 25] about half the time on each side, and the released value
    is clamped into [0, ((U − L)/2)²], and so are both ends of its default interval."""
    u = np.arange(400 * 200)
    k = u // 200
    x = np.where(k < 200, 7.0, np.where(u % 2 == 0, 0.0, 10.0))
    df = pl.DataFrame({"u": u, "k": k, "x": x})
    res = sd.release(df, **{**KW, "epsilon": 0.3, "delta": 1e-6}, aggregates=[sd.Count(), sd.Variance("x", 0, 10)],
                     rng=InsecureSeededRandom(5))
    t = res.table
    v = t["variance_x"].to_numpy()
    assert v.size == 400 and v.min() >= 0.0 and v.max() <= 25.0
    lo, hi = t["variance_x_lo"].to_numpy(), t["variance_x_hi"].to_numpy()  # the default intervals: clamped too
    assert np.all((0.0 <= lo) & (lo <= hi) & (hi <= 25.0))
    low, high = t.filter(pl.col("k") < 200)["variance_x"], t.filter(pl.col("k") >= 200)["variance_x"]
    assert 40 < (low == 0.0).sum() < 160 and 40 < (high == 25.0).sum() < 160


def test_ledger_charges_the_joint_event_with_the_squares_column(tmp_path):
    from sparsedp.accounting.aggregates import calibrate_joint_gshm
    from sparsedp.accounting.events import AggregateGSHMEvent
    from sparsedp.ledger import Ledger

    path = tmp_path / "l.db"
    with Ledger(path) as led:
        led.set_budget("d", epsilon=2.0, delta=1e-5)
    aggs = [sd.Count(), sd.Std("x", 0, 100)]
    res = sd.release(_frame(keys=3), **KW, aggregates=aggs, ledger=str(path), dataset="d",
                     rng=InsecureSeededRandom(1))
    j = calibrate_joint_gshm(1.0, 1e-7, 1, [1600, 1250])
    without = calibrate_joint_gshm(1.0, 1e-7, 1, [1600])
    assert res.report.margin == j.margin and j.count_sigma2 > without.count_sigma2  # the squares cost privacy
    with Ledger(path) as led:
        h = led.history("d")
    assert len(h) == 1 and isinstance(h[0].event, AggregateGSHMEvent)
    assert h[0].event.margin == j.margin and h[0].event.delta_at(1.0) == pytest.approx(j.parts.total)


def test_nothing_non_private_and_refusals():
    rows = [(u, "popular", 40.0 + u % 3) for u in range(300)] + [(10**6, "secret-one-unit-key", 1.5)]
    frame = pl.DataFrame(rows, schema={"u": pl.Int64, "k": pl.String, "x": pl.Float64}, orient="row")
    res = sd.release(frame, **KW, aggregates=[sd.Count(), sd.Variance("x", 0, 100)], rng=InsecureSeededRandom(3))
    assert b"secret-one-unit-key" not in pickle.dumps(res) and "secret-one-unit-key" not in repr(res) + str(res)
    exact = float(np.var([40.0 + u % 3 for u in range(300)]))
    assert res.table["variance_x"][0] != exact
    with pytest.raises(InvalidParameterError, match="counts only"):
        sd.release(frame, **KW, aggregates=[sd.Variance("x", 0, 1)], mechanism="laplace")
    with pytest.raises(InvalidParameterError, match="lower must be <= upper"):
        sd.Variance("x", 5, 1)


def test_cli_variance_and_std(tmp_path):
    from typer.testing import CliRunner

    from sparsedp.cli import app

    path = tmp_path / "d.parquet"
    _frame(keys=3).write_parquet(path)
    out = tmp_path / "o.csv"
    r = CliRunner().invoke(app, ["release", str(path), "--unit", "u", "--by", "k", "--epsilon", "1", "--delta",
                                 "1e-7", "--max-groups", "1", "--variance", "x:0:100", "--std", "x:0:100:sd",
                                 "--out", str(out)])
    assert r.exit_code == 0, r.output
    t = pl.read_csv(out)
    assert {"variance_x", "sd"} <= set(t.columns) and np.allclose(t["sd"] ** 2, t["variance_x"])
