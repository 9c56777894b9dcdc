"""The discrete Gaussian / discrete Laplace laws (sparsedp.accounting.discrete) against independent
high-precision summation (mpmath), the Poisson-summation identity and closed forms."""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath as mp
import numpy as np
import pytest

from sparsedp.accounting import discrete as D
from sparsedp.errors import InvalidParameterError, SparsedpError

mp.mp.dps = 40


def _mp_normaliser(s):
    s = mp.mpf(s)
    n = int(40 * mp.sqrt(s)) + 5
    return 1 + 2 * mp.fsum(mp.exp(-mp.mpf(y) ** 2 / (2 * s)) for y in range(1, n))


def _mp_upper(t, s, n_terms):
    s = mp.mpf(s)
    return mp.fsum(mp.exp(-mp.mpf(y) ** 2 / (2 * s)) for y in range(t, t + n_terms))


@pytest.mark.parametrize("s", [0.01, 0.25, 1.0, 2.5, 9.0, 100.0, 1e4])
def test_normaliser_and_variance_match_direct_summation(s):
    z = _mp_normaliser(s)
    assert D.dgauss_log_normaliser(s) == pytest.approx(float(mp.log(z)), rel=1e-14, abs=1e-15)
    n = int(40 * math.sqrt(s)) + 5
    m2 = 2 * mp.fsum(mp.mpf(y) ** 2 * mp.exp(-mp.mpf(y) ** 2 / (2 * mp.mpf(s))) for y in range(1, n)) / z
    assert D.dgauss_variance(s) == pytest.approx(float(m2), rel=1e-13)
    assert D.dgauss_variance(s) <= s  # strictly below in exact arithmetic; equal in float for s >= 2


def test_variance_large_sigma_is_just_below_sigma2():
    # Poisson dual: s − Var = 4π²s²·2e^{−2π²s}/(1+…), which underflows for s ≥ 40.
    assert D.dgauss_variance(1.0) == pytest.approx(1 - 8 * math.pi**2 * math.exp(-2 * math.pi**2), rel=1e-15)
    assert D.dgauss_variance(1e10) == 1e10


@pytest.mark.parametrize("s", [0.25, 1.0, 2.5, 100.0, 1e6])
def test_tail_matches_direct_summation(s):
    z = _mp_normaliser(s) if s < 1e5 else mp.sqrt(2 * mp.pi * s)  # dual correction < e^-1e6
    sigma = math.sqrt(s)
    for t in [1, 2, int(3 * sigma) + 1, int(10 * sigma) + 1, int(100 * sigma) + 1, 10**9]:
        n_terms = int(60 * s / t) + 60
        if n_terms > 200_000:
            continue
        ref = float(mp.log(_mp_upper(t, s, n_terms) / z))
        assert D.dgauss_logsf(t, s) == pytest.approx(ref, rel=1e-13, abs=1e-13)


def test_tail_properties():
    s = 7.3
    xs = np.arange(-60, 61)
    pmf = D.dgauss_pmf(xs, s)
    assert pmf.sum() == pytest.approx(1.0, rel=1e-14)
    # P[X >= t] by summing the pmf, for every t, including t <= 0 (symmetry branch)
    for t in range(-20, 21):
        assert D.dgauss_sf(t, s) == pytest.approx(pmf[xs >= t].sum(), rel=1e-13, abs=1e-300)
        assert D.dgauss_cdf(t, s) == pytest.approx(pmf[xs <= t].sum(), rel=1e-13, abs=1e-300)
    # non-integer thresholds round up, infinities
    assert D.dgauss_sf(2.2, s) == D.dgauss_sf(3, s)
    assert D.dgauss_sf(-math.inf, s) == 1.0 and D.dgauss_sf(math.inf, s) == 0.0
    # vectorised over t
    np.testing.assert_allclose(D.dgauss_sf(np.array([1, 5]), s), [D.dgauss_sf(1, s), D.dgauss_sf(5, s)])
    # huge thresholds: log space, no underflow to -inf
    assert D.dgauss_logsf(10**6, 1.0) < -4.9e11
    assert math.isfinite(D.dgauss_logsf(10**6, 1.0))


@pytest.mark.parametrize("s, ts", [(1e10, [1, 1000, 30_000, 200_000, 600_000]),
                                   (4.5e6, [1, 100, 2000, 6000, 10_000])])
def test_euler_maclaurin_branch_agrees_with_direct_sum(monkeypatch, s, ts):
    monkeypatch.setattr(D, "_DIRECT_MAX_TERMS", 10**8)  # force plain summation (up to 1e6 terms)
    direct = [D.dgauss_logsf(t, s) for t in ts]
    monkeypatch.setattr(D, "_DIRECT_MAX_TERMS", 10)     # force the Euler–Maclaurin evaluation
    em = [D.dgauss_logsf(t, s) for t in ts]
    np.testing.assert_allclose(em, direct, rtol=1e-13, atol=1e-14)


def test_huge_sigma_tail_and_pmf_are_consistent():
    s = 1e14  # sigma = 1e7: the Euler–Maclaurin branch near the centre
    assert D.dgauss_sf(1, s) == pytest.approx(0.5 - 0.5 * D.dgauss_pmf(0, s), rel=1e-13)
    assert D.dgauss_pmf(0, s) == pytest.approx(1 / math.sqrt(2 * math.pi * s), rel=1e-14)
    # P[X >= 3σ] is close to the continuous tail Q(3) = 1.3499e-3 (within the lattice correction)
    assert D.dgauss_sf(3e7, s) == pytest.approx(1.3498980316301e-3, rel=1e-6)


def test_pmf_values_and_parameter_types():
    s = Fraction(9, 4)
    lz = D.dgauss_log_normaliser(s)
    assert D.dgauss_logpmf(3, s) == pytest.approx(-9 / 4.5 - lz, rel=1e-15)
    assert D.dgauss_logpmf(0.5, s) == -math.inf
    assert D.dgauss_pmf(2, "2.25") == D.dgauss_pmf(2, 2.25) == D.dgauss_pmf(-2, s)


@pytest.mark.parametrize("b", [0.3, 1.0, 2.5, 40.0])
def test_discrete_laplace_law(b):
    q = math.exp(-1 / b)
    w = int(80 * b) + 40
    xs = np.arange(-w, w + 1)
    pmf = D.dlaplace_pmf(xs, b)
    assert pmf.sum() == pytest.approx(1.0, rel=1e-13)
    assert pmf[w] == pytest.approx((1 - q) / (1 + q), rel=1e-14)
    assert D.dlaplace_variance(b) == pytest.approx(float((pmf * xs.astype(float) ** 2).sum()), rel=1e-12)
    for t in [-7, -1, 0, 1, 2, 10]:
        assert D.dlaplace_sf(t, b) == pytest.approx(pmf[xs >= t].sum(), rel=1e-12)
        assert D.dlaplace_cdf(t, b) == pytest.approx(pmf[xs <= t].sum(), rel=1e-12)
    assert D.dlaplace_logsf(10**9, b) == pytest.approx(-10**9 / b - math.log1p(q), rel=1e-15)


@pytest.mark.parametrize("bad", [0, -1.0, math.nan, math.inf, "x", "-2", None])
def test_bad_parameters_raise_sparsedp_errors(bad):
    for fn in (D.dgauss_log_normaliser, D.dgauss_variance, D.dlaplace_variance):
        with pytest.raises(SparsedpError):
            fn(bad)
    with pytest.raises(SparsedpError):
        D.dgauss_sf(1, bad)
    with pytest.raises(InvalidParameterError):
        D.dgauss_sf(math.nan, 1.0)
