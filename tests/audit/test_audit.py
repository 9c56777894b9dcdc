"""Empirical privacy audit: statistics, worst-case scenarios, and the acceptance runs (fast mode)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from typer.testing import CliRunner

from sparsedp.accounting import calibrate
from sparsedp.audit import audit, best_event_bound, clopper_pearson, epsilon_lower_bound, scenarios_for
from sparsedp.audit.runner import _events, _simulate, _statistic, scaled_calibration
from sparsedp.cli import app
from sparsedp.errors import InvalidParameterError
from sparsedp.noise import InsecureSeededRandom

EPS, DELTA, RUNS = 1.0, 1e-3, 200_000
CASES = [("gshm", 2, 11), ("laplace", 2, 12), ("csh", 4, 13), ("topk-csh", 4, 14)]


# ------------------------------------------------------------------------------------------- statistics


def test_clopper_pearson_closed_forms():
    # k = 0 and k = n have closed forms: upper = 1 - a^(1/n), lower = a^(1/n)
    n, a = 1000, 0.025
    assert clopper_pearson(0, n, a) == (0.0, pytest.approx(1 - a ** (1 / n), rel=1e-9))
    assert clopper_pearson(n, n, a) == (pytest.approx(a ** (1 / n), rel=1e-9), 1.0)
    # k = 1, n = 1: lower = a, upper = 1
    assert clopper_pearson(1, 1, a) == (pytest.approx(a), 1.0)
    with pytest.raises(InvalidParameterError):
        clopper_pearson(5, 3, a)


def test_epsilon_lower_bound_cases():
    b = epsilon_lower_bound(500, 1000, 0, 1000, 1e-3)  # never on D: p0 <= 1 - 0.025^(1/1000)
    assert b.epsilon_lower == pytest.approx(math.log((b.p1_lower - 1e-3) / (1 - 0.025 ** 1e-3)))
    assert b.epsilon_point == math.inf and b.contradicts(4.5) and not b.contradicts(5.0)
    b = epsilon_lower_bound(0, 1000, 10, 1000, 1e-3)
    assert b.epsilon_lower == -math.inf and not b.contradicts(0.01)
    b = epsilon_lower_bound(2718, 10000, 1000, 10000, 0.0, confidence=0.95)
    assert b.epsilon_lower < 1.0 < b.epsilon_lower + 0.2 and b.epsilon_point == pytest.approx(1.0, abs=1e-3)


def test_lower_bound_coverage_on_an_exactly_tight_pair():
    """Randomised response with ε = 1 is exactly tight: the 90% bound must exceed 1 in <= ~10% of trials."""
    g = np.random.default_rng(5)
    p1 = math.e / (1 + math.e)
    bad = 0
    trials = 300
    for _ in range(trials):
        k1, k0 = g.binomial(2000, p1), g.binomial(2000, 1 - p1)
        bad += epsilon_lower_bound(k1, 2000, k0, 2000, 0.0, confidence=0.9).epsilon_lower > 1.0
    assert bad <= 0.1 * trials + 3 * math.sqrt(0.1 * 0.9 * trials)


def test_best_event_bound_selects_on_one_half_only():
    g = np.random.default_rng(1)
    e1 = g.random((1000, 3)) < [0.5, 0.2, 0.9]
    e0 = g.random((1000, 3)) < [0.1, 0.2, 0.9]
    b = best_event_bound(e1, e0, ["a", "b", "c"], 1e-3)
    assert b.event == "a" and b.n1 == 500 and b.k1 == int(e1[500:, 0].sum())


# ------------------------------------------------------------------------------------------- scenarios


def test_scenarios_are_neighbours_of_the_declared_model():
    for mech, bound, _ in CASES:
        cal = calibrate(mech, epsilon=EPS, delta=DELTA, **{"gshm": {"l0": bound}, "laplace": {"l0": bound},
                                                             "csh": {"k": bound}, "topk-csh": {"top_k": bound}}[mech])
        for sc in scenarios_for(mech, cal, bound):
            diff = sc.counts1 - sc.counts0
            assert set(np.unique(diff)) <= {0, 1} and 1 <= diff.sum() <= bound  # one unit, <= 1 per key
            if mech in ("gshm", "laplace"):
                assert np.count_nonzero(diff) <= bound
            if mech == "csh":  # k-sparse monotonic: at most k keys, every key moves
                assert np.count_nonzero(sc.counts1) <= bound and np.all(diff == 1)


def test_simulation_matches_the_release_law():
    """The vectorised simulation is the mechanism: release probability of a count at the pre-threshold
    equals the accountant's P[Z >= margin] (GSHM) within sampling error."""
    from sparsedp.accounting.discrete import dgauss_sf

    cal = calibrate("gshm", epsilon=EPS, delta=0.05, l0=1)
    p = dgauss_sf(int(cal.tau), cal.noise.sigma2)
    out = _simulate("gshm", cal, np.array([1], np.int64), 400_000, 1, InsecureSeededRandom(2))
    got = np.count_nonzero(~np.isnan(out)) / out.size
    assert abs(got - p) < 5 * math.sqrt(p * (1 - p) / out.size)


def test_new_key_scenario_catches_a_threshold_that_is_too_low():
    cal = calibrate("gshm", epsilon=EPS, delta=DELTA, l0=2)
    broken = dataclasses.replace(cal, tau=2.0)
    sc = [s for s in scenarios_for("gshm", broken, 2) if s.name == "new"][0]
    rng = InsecureSeededRandom(3)
    t1 = _statistic(sc, _simulate("gshm", broken, sc.counts1, 20_000, 1, rng))
    t0 = _statistic(sc, _simulate("gshm", broken, sc.counts0, 20_000, 1, rng))
    b = best_event_bound(*_events(t1, t0, sc), DELTA)
    assert b.epsilon_lower > 5 and b.contradicts(EPS)


def test_scaled_calibration_scales_the_sampled_noise_exactly():
    cal = calibrate("csh", epsilon=EPS, delta=DELTA, k=4, csh_noise="alg4")
    half = scaled_calibration(cal, 0.5)
    assert half.noise.sigma2 == cal.noise.sigma2 / 4 and half.noise.shared_sigma2 == cal.noise.shared_sigma2 / 4
    assert half.tau == cal.tau and half.sigma == cal.sigma / 2
    rounded = calibrate("csh", epsilon=EPS, delta=DELTA, k=4)  # secure default: both continuous scales halve
    half = scaled_calibration(rounded, 0.5)
    assert half.sigma == rounded.sigma / 2 and half.noise.shared_sigma == rounded.noise.shared_sigma / 2
    assert half.tau == rounded.tau == int(rounded.tau) and half.noise.sigma == rounded.noise.sigma / 2
    lap = scaled_calibration(calibrate("laplace", epsilon=EPS, delta=DELTA, l0=2), 0.5)
    assert lap.noise.scale == 1  # l0/eps = 2, halved


# ------------------------------------------------------------------------------------------- acceptance


@pytest.mark.parametrize("mech,bound,seed", CASES)
def test_calibrated_mechanism_is_not_flagged(mech, bound, seed):
    res = audit(mech, epsilon=EPS, delta=DELTA, bound=bound, runs=RUNS, rng=InsecureSeededRandom(seed))
    assert not res.contradicts, str(res)
    assert res.epsilon_lower <= EPS


@pytest.mark.parametrize("mech,bound,seed", CASES)
def test_half_sigma_is_flagged(mech, bound, seed):
    res = audit(mech, epsilon=EPS, delta=DELTA, bound=bound, runs=RUNS, sigma_scale=0.5,
                rng=InsecureSeededRandom(seed + 100))
    assert res.contradicts, str(res)
    assert res.epsilon_lower > 1.2 * EPS


def test_cli_audit_states_confidence_and_exit_codes():
    runner = CliRunner()
    ok = runner.invoke(app, ["audit", "laplace", "--epsilon", "1", "--delta", "1e-3", "--runs", "50000",
                             "--seed", "1"])
    assert ok.exit_code == 0, ok.output
    assert "confidence 0.95" in ok.output and "no contradiction" in ok.output
    bad = runner.invoke(app, ["audit", "laplace", "--epsilon", "1", "--delta", "1e-3", "--runs", "50000",
                              "--seed", "1", "--sigma-scale", "0.5", "--confidence", "0.99"])
    assert bad.exit_code == 1 and "CONTRADICTION" in bad.output and "confidence 0.99" in bad.output
    err = runner.invoke(app, ["audit", "nope", "--epsilon", "1", "--delta", "1e-3"])
    assert err.exit_code == 2 and "mechanism" in err.output


def test_audit_argument_validation():
    with pytest.raises(InvalidParameterError, match="sigma_scale"):
        audit("gshm", epsilon=1, delta=1e-3, sigma_scale=0)
    with pytest.raises(InvalidParameterError, match="runs"):
        audit("gshm", epsilon=1, delta=1e-3, runs=3)
