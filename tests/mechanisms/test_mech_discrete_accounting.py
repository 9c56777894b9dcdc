"""The accountants of the discrete noise actually sampled (sparsedp.accounting.discrete_histograms).

Oracles are independent computations: brute-force enumeration of the output distributions of the
worst-case neighbouring pairs (Karrer et al.'s configurations, seed 001 §4.1) on a grid of integers, using
only the probability mass functions of ``sparsedp.accounting.discrete``.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from sparsedp.accounting import calibrate, gshm_delta
from sparsedp.accounting.discrete import dgauss_pmf, dlaplace_pmf
from sparsedp.accounting.discrete_histograms import (
    calibrate_correlated_discrete, calibrate_gshm_discrete, calibrate_laplace_discrete, correlated_discrete_delta,
    dgauss_shift_hockey_stick, dlaplace_shift_hockey_stick, gshm_discrete_delta, laplace_discrete_delta)


def _grid_pmf(pmf, scale, width):
    z = np.arange(-width, width + 1)
    return z, pmf(z, scale)


def _hockey(p, q, eps):
    return float(np.sum(np.maximum(p - math.exp(eps) * q, 0.0)))


def _product(p1, a):
    """Joint pmf of a independent coordinates on the grid (a <= 2), flattened."""
    if a == 0:
        return np.ones(1)
    out = p1
    for _ in range(a - 1):
        out = np.multiply.outer(out, p1).ravel()
    return out


def _brute_histogram_delta(pmf, scale, margin, l0, eps, width):
    """Exact δ of the thresholded histogram by enumeration (counts of the a_+ rows taken to infinity).

    P: a_+ rows shifted by one, a_= leak rows released w.p. p; Q: a_+ rows unshifted, leak rows never
    released. Outputs with a released leak row have Q = 0; the rest are the a_+ coordinates.
    """
    z, w = _grid_pmf(pmf, scale, width)
    w_shift = np.concatenate([[0.0], w[:-1]])  # pmf of Z + 1 on the same grid
    p_rel = float(np.sum(w[z >= margin]))      # release probability of a count at the pre-threshold
    b = 1.0 - p_rel
    best = 0.0
    for a_plus, a_eq in itertools.product(range(l0 + 1), repeat=2):
        if a_plus + a_eq > l0 or a_plus + a_eq == 0:
            continue
        P, Q = _product(w_shift, a_plus), _product(w, a_plus)
        beta = b ** a_eq
        fwd = (1.0 - beta) + _hockey(beta * P, Q, eps)
        rev = _hockey(Q, beta * P, eps)
        best = max(best, fwd, rev)
    return best


@pytest.mark.parametrize("j,eps,s", [(1, 0.5, 4), (2, -0.3, 6), (3, 0.3, 9.5), (5, 1.0, 20), (1, 2.0, 1.5)])
def test_dgauss_shift_hockey_stick_matches_convolution(j, eps, s):
    z, w = _grid_pmf(dgauss_pmf, s, int(40 * math.sqrt(s)) + 2)
    S = w.copy()
    for _ in range(j - 1):
        S = np.convolve(S, w)
    x = np.arange(S.size) - (z.size // 2) * j
    exact = S[(2 * x + j) >= 2 * s * eps].sum() - math.exp(eps) * S[(2 * x - j) >= 2 * s * eps].sum()
    got = dgauss_shift_hockey_stick(j, eps, s)
    assert got >= exact - 1e-15  # an upper bound ...
    assert got == pytest.approx(exact, rel=1e-7, abs=1e-15)  # ... and tight


@pytest.mark.parametrize("j,eps,t", [(1, 0.05, 3.0), (2, 0.2, 4.0), (3, -0.1, 2.5), (1, 1.0 / 3.0, 3.0)])
def test_dlaplace_shift_hockey_stick_matches_enumeration(j, eps, t):
    z, w = _grid_pmf(dlaplace_pmf, t, int((80 if j <= 2 else 30) * t) + 5)  # tails < e^-30 relative
    w_shift = np.concatenate([[0.0], w[:-1]])
    exact = _hockey(_product(w_shift, j), _product(w, j), eps) if j <= 2 else None
    got = float(dlaplace_shift_hockey_stick(j, eps, t))
    if exact is None:  # j = 3: enumerate via the 3-fold product
        P = np.multiply.outer(_product(w_shift, 2), w_shift).ravel()
        Q = np.multiply.outer(_product(w, 2), w).ravel()
        exact = _hockey(P, Q, eps)
    assert got == pytest.approx(exact, rel=1e-9, abs=1e-14)
    assert got >= exact - 1e-15


@pytest.mark.parametrize("l0,s,margin,eps", [(1, 4.0, 5, 0.5), (2, 6.0, 7, 0.3), (2, 9.0, 6, 1.0),
                                              (2, 16.0, 9, 0.05)])
def test_gshm_discrete_delta_equals_enumerated_worst_case(l0, s, margin, eps):
    got = gshm_discrete_delta(eps, s, margin, l0)
    exact = _brute_histogram_delta(dgauss_pmf, s, margin, l0, eps, int(40 * math.sqrt(s)) + 2)
    assert got >= exact * (1 - 1e-12)
    assert got == pytest.approx(exact, rel=1e-8)


@pytest.mark.parametrize("l0,t,margin,eps", [(1, 2.0, 6, 0.5), (2, 2.0, 9, 1.0), (2, 3.0, 8, 0.7)])
def test_laplace_discrete_delta_equals_enumerated_worst_case(l0, t, margin, eps):
    got = laplace_discrete_delta(eps, t, margin, l0)
    exact = _brute_histogram_delta(dlaplace_pmf, t, margin, l0, eps, int(80 * t) + 5)
    assert got >= exact * (1 - 1e-12)
    assert got == pytest.approx(exact, rel=1e-8)


def test_release_probability_term_is_exact_tail_with_ge():
    """The accountant's per-key term is P[Z >= margin], summed here from the pmf (the kernel uses >=)."""
    s, margin, l0 = 37.5, 19, 3
    delta, info = gshm_discrete_delta(0.7, s, margin, l0, parts=True)
    z = np.arange(margin, margin + 60 * 7)
    p_exact = float(np.sum(dgauss_pmf(z, s)))
    assert info["release_probability_at_pre_threshold"] == pytest.approx(p_exact, rel=1e-12)
    assert info["infinite"] == pytest.approx(1 - (1 - p_exact) ** l0, rel=1e-10)
    # the > comparison would be P[Z >= margin + 1]: a different number, so the match is not vacuous
    assert float(np.sum(dgauss_pmf(z + 1, s))) < 0.9 * p_exact


def test_discrete_close_to_continuous_for_large_scale():
    """Sanity: at a large scale the discrete GSHM δ is within 1% of Karrer's continuous exact δ."""
    s, eps, l0 = 400.0, 0.5, 4
    tau = 75
    d = gshm_discrete_delta(eps, s, tau, l0)
    c = gshm_delta(eps, math.sqrt(s), tau - 0.5, l0)  # P[Z >= m] ≈ P[N >= m - 1/2]
    assert d == pytest.approx(c, rel=1e-2)


def test_monotone_in_margin_and_epsilon():
    ds = [gshm_discrete_delta(0.5, 25.0, m, 5) for m in range(5, 40, 5)]
    assert all(a >= b for a, b in zip(ds, ds[1:]))
    es = [gshm_discrete_delta(e, 25.0, 20, 5) for e in (0.1, 0.5, 1.0, 2.0)]
    assert all(a >= b for a, b in zip(es, es[1:]))


@pytest.mark.parametrize("eps,dlt,l0", [(1.0, 1e-6, 1), (1.0, 1e-6, 10), (0.35, 1e-5, 7)])
def test_calibrate_gshm_discrete_is_minimal_and_valid(eps, dlt, l0):
    cal = calibrate_gshm_discrete(eps, dlt, l0)
    m = int(cal.tau)
    s = cal.noise.sigma2
    assert cal.delta_achieved <= dlt
    assert gshm_discrete_delta(eps, s, m, l0) <= dlt
    assert gshm_discrete_delta(eps, s, m - 1, l0) > dlt  # the margin is the smallest integer
    assert cal.tau == m and cal.discrete and cal.comparison == ">="
    # the sampled scale is a short exact rational, never below the continuous optimum's square
    assert s.denominator <= 1 << 20
    assert calibrate("gshm", epsilon=eps, delta=dlt, l0=l0).noise.sigma2 == s  # wired into calibrate()


def test_calibrate_laplace_discrete_is_minimal_and_valid():
    cal = calibrate_laplace_discrete(1.0, 1e-6, 10)
    t, m = cal.noise.scale, int(cal.tau)
    assert t * 1.0 >= 10  # scale >= l0/ε exactly
    assert laplace_discrete_delta(1.0, t, m, 10) <= 1e-6 < laplace_discrete_delta(1.0, t, m - 1, 10)


@pytest.mark.parametrize("d,c", [(1, 1), (2, 1), (3, 2)])
def test_correlated_discrete_delta_matches_enumeration(d, c):
    s, eps = 6.0, 0.4
    z, w = _grid_pmf(dgauss_pmf, s, int(40 * math.sqrt(s)) + 2)
    # T = Z_1 + ... + Z_d + c Z_{d+1}; privacy loss (2T ± (d + c²))/(2s)
    T = w.copy()
    for _ in range(d - 1):
        T = np.convolve(T, w)
    dil = np.zeros(c * (w.size - 1) + 1)
    dil[::c] = w
    T = np.convolve(T, dil)
    x = np.arange(T.size) - (T.size - 1) // 2
    sh = d + c * c
    exact = T[2 * x + sh >= 2 * s * eps].sum() - math.exp(eps) * T[2 * x - sh >= 2 * s * eps].sum()
    got = correlated_discrete_delta(eps, s, d, c)
    assert got == pytest.approx(exact, rel=1e-7)
    assert got >= exact * (1 - 1e-12)


def test_calibrate_correlated_discrete():
    cal = calibrate_correlated_discrete(1.0, 1e-5, 100)
    assert cal.noise.c == 3  # best integer C for d = 100 (seed 002 S4.4 table)
    assert cal.delta_achieved <= 1e-5
    # per-query std within 1% of the continuous σ₁(√d+1)/2 = 3.7306·5.5 (seed 002 S3.8 worked example)
    assert cal.noise_std == pytest.approx(20.518474 * math.sqrt(30.277778 / 30.25), rel=1e-2)


def test_case_study_scale_matches_continuous_golden_values():
    """Seed 001 §9.4 / seed 000 §5.3 case study (l0 = 51914, ε = 0.349, δ = 1e-5): σ_min = 2228.4826 and
    τ = 13950.05 for continuous noise; the discrete calibration (blocked maxima) stays within 0.1%."""
    cal = calibrate_gshm_discrete(0.349, 1e-5, 51914)
    assert cal.sigma == pytest.approx(2228.48263245917, rel=1e-4)
    assert 13950.05 <= cal.tau <= 13950.05 * 1.001
    assert cal.delta_achieved <= 1e-5
