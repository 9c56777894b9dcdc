"""A general column noise shape for the secure joint release (sparsedp.accounting.column_shape,
docs/proofs/aggregates.md §7): noise ``L z`` with an integer unit lower-triangular L.

The exact-enumeration tests build the output law of one key of the joint release (suppression, noisy count,
two noisy columns) from the law of ``Y = L z`` itself (the pmf of z pushed through L, not the reduction the
proof uses), for every count near the threshold and every integer column shift in the box, and compute the
true hockey-stick divergence in both directions; the accountant must be above it.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest

from sparsedp.accounting import column_shape as cs
from sparsedp.accounting.aggregates import calibrate_joint_gshm, joint_gshm_delta, joint_hockey_stick
from sparsedp.accounting.column_shape import (
    calibrate_joint_gshm_shaped, fit_column_shape, joint_gshm_delta_unimodular, joint_hockey_stick_unimodular,
    unimodular_shift_bounds,
)
from sparsedp.accounting.discrete import dgauss_pmf, dgauss_variance
from sparsedp.errors import InvalidParameterError

PRE = 1


def _window(s: float) -> np.ndarray:
    w = int(math.ceil(math.sqrt(2 * s * 60))) + 2  # pmf beyond is < e^-60
    return np.arange(-w, w + 1)


def _y_law(s1: float, s2: float, l21: int, pad1: int, pad2: int):
    """pmf of Y = (z1, l21·z1 + z2) on a grid with room for shifts up to (pad1, pad2); returns (pmf, origin)."""
    w1, w2 = _window(s1), _window(s2)
    r1 = w1[-1] + pad1
    r2 = abs(l21) * w1[-1] + w2[-1] + pad2
    out = np.zeros((2 * r1 + 1, 2 * r2 + 1))
    p1, p2 = dgauss_pmf(w1, s1), dgauss_pmf(w2, s2)
    for z1, q1 in zip(w1, p1):
        out[z1 + r1, l21 * z1 + w2 + r2] += q1 * p2
    return out, (r1, r2)


def _true_delta(eps, s, s1, s2, l21, m, d1, d2):
    """max over counts c and column shifts |Δ_k| <= D_k of both hockey-stick directions, l0 = 1."""
    py, (r1, r2) = _y_law(s1, s2, l21, d1, d2)
    counts = list(range(PRE, PRE + m + 14))
    zw = _window(s)
    vs = np.arange(PRE + m, max(counts) + zw[-1] + 1)
    e = math.exp(eps)
    best = 0.0
    for c in counts:
        pz = dgauss_pmf(vs - c, s) * (np.abs(vs - c) <= zw[-1])
        qz = dgauss_pmf(vs - c + 1, s) * (np.abs(vs - c + 1) <= zw[-1]) if c - 1 >= PRE else np.zeros_like(pz)
        p_off, q_off = 1.0 - pz.sum(), 1.0 - qz.sum()
        for a1, a2 in itertools.product(range(-d1, d1 + 1), range(-d2, d2 + 1)):
            shifted = np.roll(np.roll(py, a1, axis=0), a2, axis=1)    # law of Δ + L z (no wrap: padded grid)
            p = np.multiply.outer(pz, shifted)
            q = np.multiply.outer(qz, py)
            fwd = max(p_off - e * q_off, 0.0) + float(np.sum(np.maximum(p - e * q, 0.0)))
            rev = max(q_off - e * p_off, 0.0) + float(np.sum(np.maximum(q - e * p, 0.0)))
            best = max(best, fwd, rev)
    return best


@pytest.mark.parametrize("eps,s,s1,s2,l21,m,d1,d2", [
    (1.0, 3.0, 12.0, 12.0, 2, 6, 1, 1),
    (0.5, 3.0, 20.0, 10.0, -1, 5, 2, 1),
    (1.0, 2.0, 16.0, 14.0, 3, 6, 1, 2),
])
def test_accountant_is_above_the_enumerated_delta_of_the_sampled_law(eps, s, s1, s2, l21, m, d1, d2):
    true = _true_delta(eps, s, s1, s2, l21, m, d1, d2)
    lower = [[1, 0], [l21, 1]]
    acc = joint_gshm_delta_unimodular(eps, Fraction(s), m, 1, [Fraction(s1), Fraction(s2)], lower, [d1, d2])
    assert acc >= true * (1 - 1e-9)
    assert acc <= true * 1.25 + 1e-12          # the separate vertex maxima and the smoothing cost little
    # the correlation matters: the independent-columns accountant at the same scales is below the true δ
    diag = joint_gshm_delta(eps, Fraction(s), m, 1, [Fraction(s1), Fraction(s2)], [d1, d2])
    assert diag < true


def test_identity_is_the_diagonal_accountant():
    for j, e, s, ss, ds in [(1, 0.5, 3, [40, 30], [3, 2]), (5, 1.0, 300, [4000, 9000], [30, 40])]:
        a = joint_hockey_stick(j, e, s, ss, ds)
        b = joint_hockey_stick_unimodular(j, e, s, ss, [[1, 0], [0, 1]], ds)
        assert b >= a and b == pytest.approx(a, rel=1e-9)


def _brute(lower, sens, scales):
    """max over EVERY integer point of the box of Σ w²/s and Σ w²/s², w = L⁻¹Δ (exact rationals)."""
    j = len(sens)
    inv = cs._inverse_lower(lower)
    best_m = best_e = Fraction(0)
    for delta in itertools.product(*[range(-d, d + 1) for d in sens]):
        w = [sum(inv[k][i] * delta[i] for i in range(j)) for k in range(j)]
        best_m = max(best_m, sum(Fraction(x * x) / Fraction(s) for x, s in zip(w, scales)))
        best_e = max(best_e, sum(Fraction(x * x) / Fraction(s) ** 2 for x, s in zip(w, scales)))
    return best_m, best_e


@pytest.mark.parametrize("lower,sens,scales", [
    ([[1, 0, 0], [2, 1, 0], [-3, 1, 1]], [2, 1, 3], [Fraction(7), Fraction(11, 2), Fraction(13)]),
    ([[1, 0, 0], [-1, 1, 0], [0, 5, 1]], [1, 3, 2], [Fraction(3), Fraction(50), Fraction(2)]),
])
def test_shift_bounds_are_the_exact_maxima_over_the_box(lower, sens, scales):
    mu2, eta = unimodular_shift_bounds(lower, sens, scales)
    bm, be = _brute(lower, sens, scales)
    assert mu2 >= bm and mu2 == pytest.approx(float(bm), rel=1e-11)
    assert eta >= be and eta == pytest.approx(float(be), rel=1e-11)


def test_many_columns_use_a_bounding_box_above_the_vertex_maximum(monkeypatch):
    # L⁻¹ rows (1,0,0), (1,1,0), (1,−1,1): w_2 and w_3 peak at different vertices
    lower = cs._inverse_lower([[1, 0, 0], [1, 1, 0], [1, -1, 1]])
    sens, scales = [2, 1, 3], [Fraction(7), Fraction(11, 2), Fraction(13)]
    exact = unimodular_shift_bounds(lower, sens, scales)
    monkeypatch.setattr(cs, "_VERTEX_COLUMNS", 2)
    box = unimodular_shift_bounds(lower, sens, scales)
    assert box[0] >= exact[0] and box[1] >= exact[1]
    assert box[0] > exact[0] * 1.01           # a genuinely different (coarser) bound


def _shape(rho, sa, sb):
    return [[sa * sa, rho * sa * sb], [rho * sa * sb, sb * sb]]


def test_fit_diagonal_and_correlated():
    g, d = [0.25, 2.0 ** -8], [1200, 1280]
    sa, sb = d[0] * g[0], d[1] * g[1]
    fit = fit_column_shape(_shape(0.0, sa, sb), g, d)
    assert fit.diagonal and fit.weights == (1.0, 1.0) and fit.deviation == 0.0
    for rho in (0.6, -0.35, 0.97):
        fit = fit_column_shape(_shape(rho, sa, sb), g, d)
        assert not fit.diagonal and fit.deviation <= cs.SHAPE_TOLERANCE
        cov = fit.noise_covariance([Fraction(x) * 10**6 for x in fit.innovations]) / 10**6
        target = np.array(_shape(rho, sa, sb))
        norm = np.sqrt(np.outer(np.diag(target), np.diag(target)))
        assert np.max(np.abs(cov - target) / norm) < 2 * cs.SHAPE_TOLERANCE
    # a dyadic coefficient is matched exactly once the grid is fine enough
    fit = fit_column_shape(_shape(0.5, 1.0, 1.0), [1.0, 1.0], [1, 1])
    assert fit.deviation == 0.0 and fit.lower == ((1, 0), (1, 1)) and fit.refine == (1, 2)


@pytest.mark.parametrize("shape,msg", [
    ([[1.0, 0.5], [0.4, 1.0]], "symmetric"),
    ([[1.0, 2.0], [2.0, 1.0]], "positive definite"),
    ([[1.0, 0.0], [0.0, 0.0]], "positive definite"),
    ([[1.0]], "2 x 2"),
    ([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]], "2 x 2"),
    ([[1.0, float("nan")], [float("nan"), 1.0]], "finite"),
    ("abc", "matrix of numbers"),
])
def test_bad_shapes_are_refused(shape, msg):
    with pytest.raises(InvalidParameterError, match=msg):
        fit_column_shape(shape, [1.0, 1.0], [4, 4])


def test_calibration_meets_delta_and_is_minimal():
    g, d = [0.25, 2.0 ** -8], [1200, 1280]
    sa, sb = d[0] * g[0], d[1] * g[1]
    fit = fit_column_shape(_shape(0.6, sa, sb), g, d)
    cal = calibrate_joint_gshm_shaped(1.0, 1e-6, 3, fit)
    assert cal.shape is fit and cal.column_sensitivities == fit.fine_sensitivities
    args = (cal.column_sigma2s, fit.lower, fit.fine_sensitivities)
    assert joint_gshm_delta_unimodular(1.0, cal.count_sigma2, cal.margin, 3, *args) <= 1e-6
    assert joint_gshm_delta_unimodular(1.0, cal.count_sigma2, cal.margin - 1, 3, *args) > 1e-6
    # the scales follow the fitted innovations: s_k ≈ s·D₀_k
    for sk, d0 in zip(cal.column_sigma2s, fit.innovations):
        assert float(sk) == pytest.approx(float(cal.count_sigma2 * d0), rel=1e-6)
    # the column variances are those of L z (in the aggregates' grids)
    var = [dgauss_variance(x) for x in cal.column_sigma2s]
    want = [var[0], (fit.lower[1][0] ** 2 * var[0] + var[1]) / fit.refine[1] ** 2]
    assert cal.column_variances == pytest.approx(want, rel=1e-12)
    # a diagonal shape IS the independent-columns calibration
    diag = calibrate_joint_gshm_shaped(1.0, 1e-6, 3, fit_column_shape(_shape(0.0, sa, sb), g, d))
    ref = calibrate_joint_gshm(1.0, 1e-6, 3, d)
    assert (diag.count_sigma2, diag.margin, diag.column_sigma2s) == (ref.count_sigma2, ref.margin,
                                                                     ref.column_sigma2s)


def test_correlation_against_the_box_costs_privacy():
    """With the box contribution model the worst shift is against the correlation: μ_o² = (2 + 2|ρ|)/(1 − ρ²)
    per unit count variance for two unit-normalised columns (vs 2 independent), so σ rises with |ρ|."""
    g, d = [0.25, 2.0 ** -8], [1200, 1280]
    sa, sb = d[0] * g[0], d[1] * g[1]
    sig = [float(calibrate_joint_gshm_shaped(1.0, 1e-6, 3, fit_column_shape(_shape(r, sa, sb), g, d)).count_sigma2)
           for r in (0.0, 0.3, 0.6)]
    assert sig[0] < sig[1] < sig[2]
    fit = fit_column_shape(_shape(0.6, sa, sb), g, d)
    cal = calibrate_joint_gshm_shaped(1.0, 1e-6, 3, fit)
    mu2, _ = unimodular_shift_bounds(fit.lower, fit.fine_sensitivities, cal.column_sigma2s)
    assert mu2 * float(cal.count_sigma2) == pytest.approx((2 + 2 * 0.6) / (1 - 0.36), rel=2e-3)


@pytest.mark.slow
def test_calibrated_shaped_release_is_private_and_quarter_scales_are_not():
    """Exact enumeration at a calibrated correlated release (L₂₁ = 1, correlation 0.71, l0 = 1): the true δ of
    the sampled law is at most the target (0.0487 <= 0.05); with every scale divided by 4 (σ/2) it exceeds the
    target (0.317). About 50 s: slow."""
    fit = fit_column_shape([[4.0, 4.0], [4.0, 8.0]], [1.0, 1.0], [2, 2])
    assert fit.lower == ((1, 0), (1, 1)) and fit.refine == (1, 1) and fit.deviation == 0.0
    cal = calibrate_joint_gshm_shaped(1.0, 0.05, 1, fit)
    s, (s1, s2), m = float(cal.count_sigma2), [float(x) for x in cal.column_sigma2s], cal.margin
    assert _true_delta(1.0, s, s1, s2, 1, m, 2, 2) <= 0.05
    assert _true_delta(1.0, s / 4, s1 / 4, s2 / 4, 1, m, 2, 2) > 0.05
