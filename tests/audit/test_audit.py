"""Empirical privacy audit: statistics, worst-case scenarios, and the acceptance runs (fast mode)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from typer.testing import CliRunner

from sparsedp.accounting import calibrate
from sparsedp.audit import audit, best_event_bound, clopper_pearson, epsilon_lower_bound, scenarios_for
from sparsedp.audit import build_target, default_runs, law_runs_needed, release_many
from sparsedp.audit.laws import law_count, release_count_law
from sparsedp.audit.runner import _events, _statistic, scaled_calibration
from sparsedp.cli import app
from sparsedp.errors import InvalidParameterError
from sparsedp.noise import InsecureSeededRandom

EPS, DELTA, RUNS = 1.0, 1e-3, 40_000
CASES = [("gshm", 2, 11), ("laplace", 2, 12)]
#: the tests that build top-k CSH run in one xdist worker (``--dist loadgroup``): its calibration is computed once
TOPK = pytest.mark.xdist_group("topk-csh")


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


@TOPK
def test_scenarios_are_neighbours_of_the_declared_model():
    for mech, bound in (("gshm", 2), ("laplace", 3), ("csh", 4), ("topk-csh", 2), ("stability", 1)):
        t = build_target(mech, epsilon=EPS, delta=DELTA, bound=bound)
        names = set()
        for sc in scenarios_for(mech, t.calibration, bound):
            names.add(sc.name)
            diff = sc.counts1 - sc.counts0
            assert set(np.unique(diff)) <= {0, 1} and 1 <= diff.sum() <= bound  # one unit, <= 1 per key
            assert np.count_nonzero(diff) <= bound
            if mech == "csh":  # k-sparse monotonic: at most k keys, every key moves
                assert np.count_nonzero(sc.counts1) <= bound and np.all(diff == 1)
        assert {"shared", "new"} <= names and (bound < 2 or "mixed" in names)
    # replace-one (pure mechanisms without max_units, n public): one unit moves between keys, totals equal
    t = build_target("stability", epsilon=EPS, delta=DELTA, bound=1)
    for sc in scenarios_for("stability", t.calibration, 1, replace_one=True):
        diff = sc.counts1 - sc.counts0
        assert sc.counts1.sum() == sc.counts0.sum() and sorted(diff.tolist()) == [-1, 1] and sc.statistic == "diff"


def test_real_path_matches_the_release_law():
    """The releases the audit draws (Mechanism.run on the Arrow engine) have the accountant's release
    probability: a count at the pre-threshold is released with P[Z >= margin] (GSHM) within sampling error."""
    from sparsedp.accounting.discrete import dgauss_sf

    t = build_target("gshm", epsilon=EPS, delta=0.05, bound=1)
    p = dgauss_sf(int(t.calibration.tau), t.calibration.noise.sigma2)
    out = release_many(t, np.array([1], np.int64), 400_000, InsecureSeededRandom(2))
    got = np.count_nonzero(~np.isnan(out)) / out.size
    assert abs(got - p) < 5 * math.sqrt(p * (1 - p) / out.size)


@TOPK
def test_release_many_runs_the_mechanism_object():
    """A release of a key far above the threshold returns count + noise; top-k de-biased adds t̃ (not an integer
    count minus the cut-off), the shifted variant does not: the two registered variants really differ."""
    rng = InsecureSeededRandom(4)
    deb = build_target("topk-csh", epsilon=EPS, delta=DELTA, bound=2)
    sh = build_target("topk-csh-shifted", epsilon=EPS, delta=DELTA, bound=2)
    counts = np.array([200, 200, 100], np.int64)  # t = 100: shifted values estimate 100, de-biased 200
    a = release_many(deb, counts, 6, rng)
    b = release_many(sh, counts, 6, rng)
    assert np.all(np.isnan(a[:, 2])) and np.all(np.isnan(b[:, 2]))
    assert abs(np.nanmean(a[:, :2]) - 200) < 30 and abs(np.nanmean(b[:, :2]) - 100) < 30


def test_new_key_scenario_catches_a_threshold_that_is_too_low():
    t = build_target("gshm", epsilon=EPS, delta=DELTA, bound=2)
    broken = build_target("gshm", epsilon=EPS, delta=DELTA, bound=2, margin_shift=2 - int(t.calibration.tau))
    sc = [s for s in scenarios_for("gshm", broken.calibration, 2) if s.name == "new"][0]
    rng = InsecureSeededRandom(3)
    t1 = _statistic(sc, release_many(broken, sc.counts1, 20_000, rng))
    t0 = _statistic(sc, release_many(broken, sc.counts0, 20_000, rng))
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


@TOPK
def test_margin_shift_moves_the_rule_and_keeps_the_reference():
    t = build_target("topk-csh", epsilon=EPS, delta=DELTA, bound=2, margin_shift=-3)
    assert t.calibration.tau == t.reference.tau - 3 and t.calibration.sigma == t.reference.sigma
    with pytest.raises(InvalidParameterError, match="negative"):
        build_target("gshm", epsilon=EPS, delta=DELTA, bound=2, margin_shift=-10_000)
    with pytest.raises(InvalidParameterError, match="thresholded"):
        build_target("stability", epsilon=EPS, delta=DELTA, bound=1, sigma_scale=0.5)


# ------------------------------------------------------------------------------------------- exact laws


@TOPK
@pytest.mark.parametrize("mech,bound", [("gshm", 3), ("laplace", 2), ("csh", 3), ("topk-csh", 2)])
def test_release_count_law_is_a_law_and_matches_the_marginal(mech, bound):
    """The exact law of N sums to 1 and its mean is b × the single-key release probability, which for rounded
    CSH is Φ̄((T − c − ½)/√(σ² + σ_c²)) in closed form (G + A is Gaussian)."""
    from scipy import special

    t = build_target(mech, epsilon=EPS, delta=DELTA, bound=bound)
    c = law_count(t)
    pmf = release_count_law(t, bound, c)
    assert pmf.shape == (bound + 1,) and abs(pmf.sum() - 1) < 1e-12 and np.all(pmf >= 0)
    one = release_count_law(t, 1, c)[1]
    assert (np.arange(bound + 1) * pmf).sum() == pytest.approx(bound * one, rel=1e-9)
    if mech in ("csh", "topk-csh"):
        law = t.reference.noise
        j = math.ceil(1 + t.reference.tau) - c
        closed = special.ndtr(-(j - 0.5) / math.hypot(law.sigma, law.shared_sigma))
        assert one == pytest.approx(closed, rel=1e-9)
        # the shared term makes N over-dispersed: P[N = b] far above the binomial's one^b
        assert pmf[-1] > 1.5 * one ** bound


@TOPK
def test_law_runs_needed_grows_as_the_error_shrinks():
    ref = build_target("topk-csh", epsilon=EPS, delta=DELTA, bound=2)
    n3 = law_runs_needed(ref, build_target("topk-csh", epsilon=EPS, delta=DELTA, bound=2, margin_shift=-3))
    n1 = law_runs_needed(ref, build_target("topk-csh", epsilon=EPS, delta=DELTA, bound=2, margin_shift=-1))
    assert 10 < n3 < n1 < 5_000


# ------------------------------------------------------------------------------------------- acceptance


@pytest.mark.parametrize("mech,bound,seed", CASES)
def test_calibrated_mechanism_is_not_flagged(mech, bound, seed):
    res = audit(mech, epsilon=EPS, delta=DELTA, bound=bound, runs=RUNS, law_runs=RUNS,
                rng=InsecureSeededRandom(seed))
    assert not res.contradicts, str(res)
    assert res.epsilon_lower <= EPS


@pytest.mark.parametrize("mech,bound,seed", CASES)
def test_half_sigma_is_flagged(mech, bound, seed):
    res = audit(mech, epsilon=EPS, delta=DELTA, bound=bound, runs=RUNS, law_runs=0, sigma_scale=0.5,
                rng=InsecureSeededRandom(seed + 100))
    assert res.refutes_claim, str(res)  # the privacy check alone refutes the claim
    assert res.epsilon_lower > 1.2 * EPS


@pytest.mark.parametrize("mech,bound,seed", CASES)
def test_margin_minus_one_is_flagged_by_the_law(mech, bound, seed):
    res = audit(mech, epsilon=EPS, delta=DELTA, bound=bound, scenarios=(), law_runs=RUNS, margin_shift=-1,
                rng=InsecureSeededRandom(seed + 200))
    assert res.refutes_calibration and res.contradicts, str(res)


#: top-k CSH (ε = 1, δ = 1e-3, k = 2, the audit's default) through the real rounded path costs ~20–70 ms per
#: release on this machine: the law check alone, at 80 releases (law_runs_needed at 1 check: 49 give power 0.9 for
#: σ/2, 30 for margin −3). Every top-k CSH test of the default suite uses k = 2 and runs in one xdist group, so the
#: one calibration they share (~10 s on a loaded machine) is computed once.
TOPK_LAW_RUNS = 80


@TOPK
@pytest.mark.parametrize("kw", [{}, {"sigma_scale": 0.5}, {"margin_shift": -3}])
def test_topk_csh_law_check(kw):
    res = audit("topk-csh", epsilon=EPS, delta=DELTA, bound=2, scenarios=(), law_runs=TOPK_LAW_RUNS,
                rng=InsecureSeededRandom(21), **kw)
    assert res.contradicts == bool(kw), str(res)


@TOPK
def test_topk_default_runs_are_chosen_for_what_they_detect():
    """The default audit of top-k CSH: the law runs give power >= 0.9 against σ/2 and margin −3 at the audit's 5
    checks, and the privacy runs, fewer than 100, still refute the claim on a complete separation of the two sides
    (a noise-free release, a threshold at 0)."""
    t = build_target("topk-csh", epsilon=EPS, delta=DELTA)
    runs, law = default_runs(t)
    assert runs < 100 and t.bound == 2
    for kw in ({"sigma_scale": 0.5}, {"margin_shift": -3}):
        assert law >= law_runs_needed(t, build_target("topk-csh", epsilon=EPS, delta=DELTA, **kw), checks=5)
    b = epsilon_lower_bound(runs // 2, runs // 2, 0, runs // 2, DELTA, confidence=1 - 0.05 / 5)
    assert b.epsilon_lower > EPS
    b = epsilon_lower_bound(runs // 2 - 1, runs // 2 - 1, 0, runs // 2 - 1, DELTA, confidence=1 - 0.05 / 5)
    assert b.epsilon_lower < EPS + 0.5  # the fewest that do


@pytest.mark.slow
@pytest.mark.parametrize("mech", ["csh", "topk-csh", "topk-csh-shifted"])
def test_correlated_full_audit(mech):
    ok = audit(mech, epsilon=EPS, delta=DELTA, bound=4, rng=InsecureSeededRandom(31))
    assert not ok.contradicts, str(ok)
    for kw in ({"sigma_scale": 0.5}, {"margin_shift": -3}, {"margin_shift": -1}):
        bad = audit(mech, epsilon=EPS, delta=DELTA, bound=4, rng=InsecureSeededRandom(32), **kw)
        assert bad.contradicts, (kw, str(bad))


@pytest.mark.slow
@pytest.mark.parametrize("mech,bound,delta", [("stability", 1, DELTA), ("pure-sparse", 1, 0.0),
                                              ("auto", 2, DELTA), ("misra-gries", 1, DELTA)])
def test_other_registered_mechanisms_pass(mech, bound, delta):
    res = audit(mech, epsilon=EPS, delta=delta, bound=bound, rng=InsecureSeededRandom(41))
    assert not res.contradicts, str(res)


def test_cli_audit_states_confidence_and_exit_codes():
    runner = CliRunner()
    ok = runner.invoke(app, ["audit", "laplace", "--epsilon", "1", "--delta", "1e-3", "--runs", "20000",
                             "--law-runs", "20000", "--seed", "1"])
    assert ok.exit_code == 0, ok.output
    assert "confidence 0.95" in ok.output and "no contradiction" in ok.output
    bad = runner.invoke(app, ["audit", "laplace", "--epsilon", "1", "--delta", "1e-3", "--runs", "20000",
                              "--law-runs", "0", "--seed", "1", "--sigma-scale", "0.5", "--confidence", "0.99"])
    assert bad.exit_code == 1 and "CONTRADICTION" in bad.output and "confidence 0.99" in bad.output
    shifted = runner.invoke(app, ["audit", "gshm", "--epsilon", "1", "--delta", "1e-3", "--l0", "2",
                                  "--scenario", "new", "--runs", "1000", "--law-runs", "5000", "--seed", "2",
                                  "--margin-shift", "-1"])
    assert shifted.exit_code == 1 and "not the calibrated mechanism" in shifted.output, shifted.output
    err = runner.invoke(app, ["audit", "nope", "--epsilon", "1", "--delta", "1e-3"])
    assert err.exit_code == 2 and "mechanism" in err.output
    err = runner.invoke(app, ["audit", "gshm", "--epsilon", "1", "--delta", "1e-3", "--margin-shift", "-999"])
    assert err.exit_code == 2 and "--margin-shift" in err.output, err.output


def test_audit_argument_validation():
    with pytest.raises(InvalidParameterError, match="sigma_scale"):
        audit("gshm", epsilon=1, delta=1e-3, sigma_scale=0)
    with pytest.raises(InvalidParameterError, match="runs"):
        audit("gshm", epsilon=1, delta=1e-3, runs=3)
    with pytest.raises(InvalidParameterError, match="scenario"):
        audit("gshm", epsilon=1, delta=1e-3, scenarios=("nope",))


def test_real_path_without_the_shared_term_is_refuted(monkeypatch):
    """The review's blind spot: per-key rounding noise with no shared term (exact δ 0.022 against 0.01) passed the
    float simulation. Through the real path the law check refutes it (N is binomial with the wrong marginal)."""
    import sparsedp.mechanisms.kernel as kernel
    from sparsedp.noise.rounded import SharedGaussianTerm

    real = kernel.draw_shared_noise

    def no_shared(calibration, rng=None, *, insecure_float=False):
        term = real(calibration, rng, insecure_float=insecure_float)
        return SharedGaussianTerm.draw(1e-12, rng) if isinstance(term, SharedGaussianTerm) else term

    monkeypatch.setattr(kernel, "draw_shared_noise", no_shared)
    # rounded CSH (the kernel top-k CSH runs with at most k keys) at k = 4: its calibration is cheap, and with 4
    # keys the shared term's over-dispersion of N is plain at 150 releases (at k = 2 it needs ~400)
    res = audit("csh", epsilon=EPS, delta=DELTA, bound=4, scenarios=(), law_runs=150,
                rng=InsecureSeededRandom(22))
    assert res.refutes_calibration, str(res)
