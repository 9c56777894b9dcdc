"""Audit targets of the public-key mechanisms (``release(..., keys=…)``): the real ``prepare``/``run`` path on the
worst-case add-one-unit pair, the likelihood-ratio statistic, and the variance check of the projection."""

from __future__ import annotations

import numpy as np
import pytest

from sparsedp.audit import audit, build_target, release_many
from sparsedp.audit.scenarios import public_scenarios
from sparsedp.errors import InvalidParameterError
from sparsedp.noise import InsecureSeededRandom

EPS, DELTA = 1.0, 1e-5


@pytest.mark.parametrize("mech,runs,seed", [("public-gaussian", 20_000, 1), ("public-laplace", 20_000, 2),
                                            ("correlated-gaussian", 1_000, 3), ("bounded-density", 1_000, 4),
                                            ("grouped-correlated-gaussian", 1_000, 5)])
def test_calibrated_public_key_mechanism_passes(mech, runs, seed):
    r = audit(mech, epsilon=EPS, delta=DELTA, bound=2, runs=runs, law_runs=runs, rng=InsecureSeededRandom(seed))
    assert not r.contradicts, str(r)
    assert r.law is not None and 0.85 < r.law.ratio < 1.15
    assert set(r.bounds) == {"shift"}


@pytest.mark.parametrize("mech,runs", [("public-gaussian", 2_000), ("correlated-gaussian", 600),
                                       ("grouped-correlated-gaussian", 600)])
def test_half_sigma_is_detected(mech, runs):
    r = audit(mech, epsilon=EPS, delta=DELTA, bound=2, sigma_scale=0.5, runs=runs, law_runs=runs,
              rng=InsecureSeededRandom(7))
    assert r.refutes_calibration and r.contradicts, str(r)
    assert 0.2 < r.law.ratio < 0.3  # variance scales by 0.5² = 0.25


def test_public_laplace_privacy_check_catches_half_scale():
    r = audit("public-laplace", epsilon=EPS, delta=DELTA, bound=2, sigma_scale=0.5, runs=20_000, law_runs=0,
              rng=InsecureSeededRandom(8))
    assert r.refutes_claim and r.epsilon_lower > EPS, str(r)


@pytest.mark.parametrize("mech,seed", [("correlated-gaussian", 9), ("grouped-correlated-gaussian", 19)])
def test_embedding_release_recovers_the_size_estimate_exactly(mech, seed):
    """Column d is ñ: y = (q·f̃ − p·ñ, c·ñ) is an exact integer vector with mean (q·f − p·n, c·n). The grouped
    target releases group 0 of two groups (8 listed keys) through the real ``prepare``/``run``, whatever group 1
    holds."""
    t = build_target(mech, epsilon=EPS, delta=DELTA, bound=2)
    cal = t.calibration
    assert cal.d == 4 and t.request.keys.d == (8 if mech.startswith("grouped") else 4)
    out = release_many(t, np.array([2, 2, 0, 5]), 400, InsecureSeededRandom(seed), units=6)
    assert out.shape == (400, 5) and not np.isnan(out).any()
    y = np.concatenate([cal.q * out[:, :4] - cal.p * out[:, 4:], cal.c * out[:, 4:]], axis=1)
    assert np.allclose(y, np.round(y), atol=1e-6)
    mean = np.array([cal.q * 2 - 6 * cal.p, cal.q * 2 - 6 * cal.p, -6 * cal.p, cal.q * 5 - 6 * cal.p, cal.c * 6])
    se = np.sqrt(float(cal.scale) / 400)
    assert np.all(np.abs(y.mean(0) - mean) < 5 * se)


def test_worst_case_shift_follows_the_accountant():
    t = build_target("bounded-density", epsilon=EPS, delta=DELTA, bound=2)
    (sc,) = public_scenarios("bounded-density", t.calibration)
    p, q, c = sc.embed
    d, k = t.calibration.d, t.calibration.k
    best = max(a * (q - p) ** 2 + (d - a) * p * p for a in (0, k)) + c * c
    assert float(sc.direction @ sc.direction) == best
    assert sc.units1 == sc.units0 + 1 and (sc.counts1 - sc.counts0).sum() in (0, k)
    t = build_target("public-gaussian", epsilon=EPS, delta=DELTA, bound=3, d=5)
    (sc,) = public_scenarios("public-gaussian", t.calibration)
    assert (sc.counts1 - sc.counts0).tolist() == [1, 1, 1, 0, 0]


def test_margin_shift_refused_for_public_keys():
    with pytest.raises(InvalidParameterError, match="margin_shift"):
        build_target("public-gaussian", epsilon=EPS, delta=DELTA, margin_shift=1)


# ------------------------------------------------------------------ Balcer–Vadhan stepping stones (replace-one)


def _stone(mech, seed):
    return audit(mech, epsilon=EPS, delta=1e-5 if mech == "sparse-histogram" else 0.0, bound=1, runs=100,
                 rng=InsecureSeededRandom(seed))


@pytest.mark.parametrize("mech,seed", [("keep-heavy", 11), ("sparse-histogram", 12)])
def test_calibrated_stepping_stone_passes(mech, seed):
    r = _stone(mech, seed)
    assert not r.contradicts and set(r.bounds) == {"shared", "new"}, str(r)


@pytest.mark.slow
@pytest.mark.parametrize("mech,seed", [("kh-prime", 13), ("kh-double-prime", 14)])
def test_calibrated_exact_order_statistic_stones_pass(mech, seed):
    r = _stone(mech, seed)
    assert not r.contradicts and set(r.bounds) == {"shared", "new"}, str(r)
