"""Gaussian mechanism profile f(μ, ε) (Balle–Wang Thm 8) and its inverse.

Golden values: shared/specs/seed-001-exact-gshm.md §9.2 (mpmath, 40 digits). Properties: §9.1 P12, P15.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, special

from sparsedp.accounting import gaussian_delta, gaussian_sigma
from sparsedp.errors import InvalidParameterError, InvalidTypeError

# seed 001 §9.2: (μ, ε, f(μ, ε))
GOLDEN_F = [
    (1.0, 0.5, 0.2384217081348766),
    (2.0, -1.0, 0.8196881814042136),
    (3.0, 10.0, 0.01858951431585781),
    (0.5, 0.0, 0.1974126513658474),
    (math.sqrt(51914) / 2228, 0.349, 1.003103848512687e-5),
    (math.sqrt(51914) / 2240, 0.349, 9.28591645614796e-6),
    (0.102242860768589, 0.349, 1.0e-5),
]


@pytest.mark.parametrize("mu,eps,expected", GOLDEN_F)
def test_golden_values(mu, eps, expected):
    # the last row's μ* is printed to 15 digits, hence the looser tolerance there
    rtol = 1e-12 if expected != 1.0e-5 else 1e-12 * 1e3
    assert gaussian_delta(mu, eps) == pytest.approx(expected, rel=rtol)


def test_case_study_sigma_min():
    # seed 001 §9.4 item 1 and §6.1: σ_min = 2228.48263245917, μ* = 0.102242860768589
    sigma = gaussian_sigma(0.349, 1e-5, sensitivity=math.sqrt(51914))
    assert sigma == pytest.approx(2228.48263245917, abs=1e-6)
    assert math.sqrt(51914) / sigma == pytest.approx(0.102242860768589, rel=1e-13)


def test_vectorised_and_scalar_types():
    mus = np.array([0.5, 1.0, 2.0])
    eps = np.array([[0.0], [1.0]])
    out = gaussian_delta(mus, eps)
    assert out.shape == (2, 3)
    for i in range(2):
        for j in range(3):
            # numpy's SIMD and scalar exp/erfc kernels may differ in the last bit, nothing more
            assert out[i, j] == pytest.approx(gaussian_delta(float(mus[j]), float(eps[i, 0])), rel=1e-14, abs=0)
    assert isinstance(gaussian_delta(1.0, 0.5), float)
    assert isinstance(gaussian_delta(np.float64(1.0), np.float64(0.5)), float)
    assert gaussian_delta(np.array(1.0), [0.5]) == pytest.approx([gaussian_delta(1.0, 0.5)])


def test_mu_zero_limit():
    # f(0, ε) = max(0, 1 − e^ε), and f is continuous there (seed 001 §0)
    for eps in (-3.0, -0.5, -1e-3, 0.0, 0.2, 5.0):
        lim = max(0.0, -math.expm1(eps))
        assert gaussian_delta(0.0, eps) == lim
        assert gaussian_delta(1e-9, eps) == pytest.approx(lim, abs=1e-9)
    assert gaussian_delta(1e-9, 0.0) == pytest.approx(1e-9 / math.sqrt(2 * math.pi), rel=1e-6)


def test_extreme_arguments_finite():
    # e^ε never overflows, huge/negative ε are fine, tiny δ keep relative precision
    assert 0.0 <= gaussian_delta(2.0, 700.0) <= 1e-300  # true value ~1e-30000: underflow bound
    assert gaussian_delta(1.0, -800.0) == 1.0
    assert gaussian_delta(150.0, 1e4) == pytest.approx(1 - 4.16e-17)  # the naive e^ε·Φ(·) would be inf·0
    v = gaussian_delta(3.0, 60.0)  # ≈ 1e-200 region: compare with the cancellation-free integral
    ref = _integral_form(3.0, 60.0)
    assert v == pytest.approx(ref, rel=1e-9)


def _integral_form(mu: float, eps: float) -> float:
    """P15: f(μ, ε) = ∫_0^∞ e^{−t} Q((ε + t − μ²/2)/μ) dt (seed 001 §5.1 item 4(b)); via log-space integrand."""
    c = (eps - mu * mu / 2) / mu
    # substitute the Gaussian-tail scale: integrand = exp(−t + log_ndtr(−(c + t/μ)))
    peak_log = special.log_ndtr(-c)
    g = lambda t: math.exp(-t + special.log_ndtr(-(c + t / mu)) - peak_log)
    val, _ = integrate.quad(g, 0.0, np.inf, epsabs=0.0, epsrel=1e-13, limit=400)
    return val * math.exp(peak_log)


def test_p15_integral_form_matches_closed_form():
    r = np.random.default_rng(15)
    for _ in range(40):
        mu = float(np.exp(r.uniform(np.log(0.05), np.log(20))))
        eps = float(r.uniform(-3, 10))
        assert gaussian_delta(mu, eps) == pytest.approx(_integral_form(mu, eps), rel=1e-9, abs=1e-300)


def test_p12_bounds_and_monotonicity():
    r = np.random.default_rng(12)
    mu = np.exp(r.uniform(np.log(0.01), np.log(30), 400))
    eps = r.uniform(-5, 8, 400)
    f = gaussian_delta(mu, eps)
    assert np.all(f >= np.maximum(0.0, -np.expm1(eps)) - 1e-15)
    mask = f > 1e-300
    assert np.all((f[mask] > 0) & (f[mask] <= 1))  # f < 1 mathematically; may round to 1
    # increasing in μ, decreasing in ε
    assert np.all(gaussian_delta(mu * 1.01, eps) >= f)
    assert np.all(gaussian_delta(mu, eps + 0.01) <= f)


def test_p12_derivatives():
    # ∂f/∂μ = φ(μ/2 − ε/μ), ∂f/∂ε = −e^ε Φ(−μ/2 − ε/μ) (seed 001 A.9, A.10)
    r = np.random.default_rng(1012)
    for _ in range(30):
        mu = float(r.uniform(0.2, 5))
        eps = float(r.uniform(-2, 4))
        h = 1e-6
        d_mu = (gaussian_delta(mu + h, eps) - gaussian_delta(mu - h, eps)) / (2 * h)
        d_eps = (gaussian_delta(mu, eps + h) - gaussian_delta(mu, eps - h)) / (2 * h)
        phi = math.exp(-0.5 * (mu / 2 - eps / mu) ** 2) / math.sqrt(2 * math.pi)
        assert d_mu == pytest.approx(phi, rel=1e-6, abs=1e-10)
        assert d_eps == pytest.approx(-math.exp(eps) * special.ndtr(-mu / 2 - eps / mu), rel=1e-6, abs=1e-10)


def test_sigma_is_smallest_and_conservative():
    r = np.random.default_rng(7)
    for _ in range(40):
        eps = float(r.uniform(0.01, 5))
        dlt = float(10 ** r.uniform(-15, -1))
        sens = float(10 ** r.uniform(-1, 3))
        s = gaussian_sigma(eps, dlt, sens)
        assert gaussian_delta(sens / s, eps) <= dlt
        assert gaussian_delta(sens / (s * (1 - 1e-9)), eps) > dlt


def test_sigma_epsilon_zero_and_tiny_delta():
    s = gaussian_sigma(0.0, 0.1)
    assert gaussian_delta(1 / s, 0.0) <= 0.1
    assert gaussian_delta(1 / s, 0.0) == pytest.approx(0.1, rel=1e-12)
    s = gaussian_sigma(1.0, 1e-250)
    assert 0 < gaussian_delta(1 / s, 1.0) <= 1e-250 or gaussian_delta(1 / s, 1.0) == 0.0


@pytest.mark.parametrize("bad", [
    lambda: gaussian_delta(-1.0, 0.5),
    lambda: gaussian_delta(float("nan"), 0.5),
    lambda: gaussian_delta(1.0, float("inf")),
    lambda: gaussian_delta(np.array([1.0, -1.0]), 0.5),
    lambda: gaussian_sigma(-1, 1e-5),
    lambda: gaussian_sigma(1, 0.0),
    lambda: gaussian_sigma(1, 1.0),
    lambda: gaussian_sigma(1, 1e-5, sensitivity=0),
])
def test_invalid_arguments(bad):
    with pytest.raises(InvalidParameterError):
        bad()


def test_invalid_types():
    with pytest.raises(InvalidTypeError):
        gaussian_delta(True, 0.5)
    with pytest.raises(InvalidTypeError):
        gaussian_sigma("1", 1e-5)
