"""Discrete GSHM calibration at large l0 stays conservative; discrete de-biased top-k CSH is wired into
``calibrate``."""

import math

import pytest

from sparsedp.accounting import calibrate
from sparsedp.accounting.discrete import dgauss_sf
from sparsedp.accounting.discrete_histograms import (
    calibrate_gshm_discrete, dgauss_shift_hockey_stick, gshm_discrete_delta, topk_debias_discrete_delta_parts)


def full_discrete_gshm_delta(eps, s, margin, l0):
    """Karrer's decomposition (seed 001 §4.6) with the discrete law, every a evaluated (no blocks)."""
    log_b = math.log1p(-dgauss_sf(margin, s))
    best = -math.expm1(l0 * log_b)
    for a in range(l0):
        lb = a * log_b
        t2 = -math.expm1(lb) + math.exp(lb) * dgauss_shift_hockey_stick(l0 - a, eps - lb, s)
        t3 = dgauss_shift_hockey_stick(l0 - a, eps + lb, s)
        best = max(best, t2, t3)
    return best


def _check_conservative(eps, delta, l0):
    cal = calibrate_gshm_discrete(eps, delta, l0)
    s, m = cal.noise.sigma2, int(cal.tau)
    full = full_discrete_gshm_delta(eps, float(s), m, l0)
    assert full <= delta
    assert full <= cal.delta_achieved * (1 + 1e-12)  # the blockwise bound is an upper bound of the full one
    # the margin is the smallest integer that works (the full accountant rejects margin - 1)
    assert full_discrete_gshm_delta(eps, float(s), m - 1, l0) > delta or gshm_discrete_delta(eps, s, m - 1, l0) > delta
    return cal


def test_discrete_gshm_blockwise_calibration_is_conservative_above_the_exact_cutoff():
    _check_conservative(0.5, 1e-6, 1500)  # > 400: the calibration uses the blockwise bound


@pytest.mark.slow
def test_discrete_gshm_calibration_is_conservative_at_l0_51914():
    cal = _check_conservative(0.349, 1e-5, 51914)
    assert int(cal.tau) >= 13_950  # at least the continuous exact-GSHM margin (plan: 13,950.05)


def test_discrete_topk_debias_is_wired_into_calibrate():
    k, eps, dlt = 50, 1.0, 1e-6
    cal = calibrate("topk-csh", epsilon=eps, delta=dlt, top_k=k, discrete=True, debias=True, csh_noise="alg4")
    assert cal.debias is True and cal.discrete is True
    assert cal.analysis.startswith("discrete-zcdp")
    parts = topk_debias_discrete_delta_parts(eps, cal.sigma, cal.tau, k, "cks")
    assert sum(parts.values()) <= dlt
    assert cal.delta_achieved <= dlt
    plain = calibrate("topk-csh", epsilon=eps, delta=dlt, top_k=k, discrete=True, csh_noise="alg4")
    # releasing t~ as well costs privacy: the de-biased variant needs at least as much noise
    assert cal.sigma >= plain.sigma * (1 - 1e-9)
