"""Chapter 4 closed forms (spec seed-004b §2, §4 N19–N26, §5.3): no randomness."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import optimize, special

from sparsedp.accounting.zcdp import zcdp_to_dp_delta
from sparsedp.errors import InvalidParameterError
from sparsedp.mechanisms import elliptical as ell


def _qnorm_p(d, q, p):
    """‖Δ‖_q^p = (Σ Δ_i^q)^{p/q}."""
    return float(np.sum(np.asarray(d) ** q)) ** (p / q)


def test_figure_4_1_numbers():
    # spec §2.5 / N26: Δ = (4, 1): 17/ρ, 17/ρ, 12.5/ρ (Gaussian p=2); 10/ε, 10/ε, 9/ε (Laplace p=1)
    g = {s: ell.calibrate_gaussian((4, 1), rho=1.0, p=2, shape=s).expected_error
         for s in ("spherical", "proportional", "optimal")}
    assert g == pytest.approx({"spherical": 17.0, "proportional": 17.0, "optimal": 12.5}, rel=1e-12)
    lap = {s: ell.calibrate_laplace((4, 1), epsilon=1.0, p=1, shape=s).expected_error
           for s in ("spherical", "proportional", "optimal")}
    assert lap == pytest.approx({"spherical": 10.0, "proportional": 10.0, "optimal": 9.0}, rel=1e-12)
    # scales with 1/ρ and 1/ε
    assert ell.calibrate_gaussian((4, 1), rho=0.25).expected_error == pytest.approx(12.5 / 0.25)
    assert ell.calibrate_laplace((4, 1), epsilon=0.5).expected_error == pytest.approx(9 / 0.5)


def test_spec_p1_example():
    # spec §4 derived numbers: Δ = (4,1), p = 1, ρ = 1: spherical 4.652, elliptical 3.7256, ratio 1.2487
    c = ell.calibrate_gaussian((4, 1), rho=1.0, p=1)
    assert c.spherical_error == pytest.approx(4.652, abs=5e-4)
    assert c.expected_error == pytest.approx(3.7256, abs=2e-4)
    assert c.improvement == pytest.approx(1.2487, abs=1e-4)
    assert _qnorm_p((4, 1), 2 / 3, 1) == pytest.approx(6.6036, abs=1e-4)


@pytest.mark.parametrize("eps,delta,expected", [(1, 1e-5, 3.7306), (1, 1e-6, 4.2247), (0.5, 1e-5, 7.0318),
                                                (2, 1e-6, 2.2305)])
def test_unit_sigma_approx_dp_float(eps, delta, expected):
    # spec §2.2 reference values of σ_opt (analytic Gaussian, Lemma 4.2)
    assert ell.unit_sigma(epsilon=eps, delta=delta, insecure_float=True) == pytest.approx(expected, abs=1e-3)


def test_unit_sigma_approx_dp_discrete_uses_zcdp_conversion():
    s = ell.unit_sigma(epsilon=1.0, delta=1e-5)
    rho = 1.0 / (2.0 * s * s)
    assert zcdp_to_dp_delta(rho, 1.0) <= 1e-5
    assert zcdp_to_dp_delta(rho * (1 + 1e-6), 1.0) > 1e-5 * (1 - 1e-3)  # tight, not wasteful
    assert s > ell.unit_sigma(epsilon=1.0, delta=1e-5, insecure_float=True)  # conversion costs a bit
    assert ell.unit_sigma(rho=0.5) == pytest.approx(1.0)


@pytest.mark.parametrize("p", [0.5, 1.0, 2.0, 3.0])
def test_closed_forms(p):
    rng = np.random.default_rng(7)
    d = rng.uniform(0.1, 10.0, size=12)
    rho = 0.7
    c = ell.calibrate_gaussian(d, rho=rho, p=p)
    s_opt = 1 / math.sqrt(2 * rho)
    sig = s_opt * d ** (2 / (p + 2)) * math.sqrt(np.sum(d ** (2 * p / (p + 2))))
    np.testing.assert_allclose(c.scales, sig, rtol=1e-12)
    mp = 2 ** (p / 2) * special.gamma((p + 1) / 2) / math.sqrt(math.pi)
    assert c.expected_error == pytest.approx(mp * s_opt ** p * _qnorm_p(d, 2 * p / (p + 2), p), rel=1e-12)
    assert c.improvement == pytest.approx(d.size * np.linalg.norm(d) ** p / _qnorm_p(d, 2 * p / (p + 2), p),
                                          rel=1e-12)
    lap = ell.calibrate_laplace(d, epsilon=0.3, p=p)
    np.testing.assert_allclose(lap.scales, d ** (1 / (p + 1)) * np.sum(d ** (p / (p + 1))) / 0.3, rtol=1e-12)
    assert lap.expected_error == pytest.approx(special.gamma(p + 1) * _qnorm_p(d, p / (p + 1), p) / 0.3 ** p,
                                               rel=1e-12)


@pytest.mark.parametrize("p", [0.5, 1.0, 2.0, 3.0])
def test_optimal_shape_matches_numerical_optimisation(p):
    rng = np.random.default_rng(int(p * 10))
    for _ in range(3):
        d = rng.lognormal(0.0, 1.0, size=6)
        # Gaussian: minimise Σ(Δ_i/b_i)^p over ‖b‖₂ = 1 (parametrise b = u/‖u‖₂, u > 0 via exp)
        f = lambda t: np.sum((d / (np.exp(t) / np.linalg.norm(np.exp(t)))) ** p)  # noqa: E731
        res = optimize.minimize(f, np.zeros(d.size), method="BFGS", options={"gtol": 1e-10})
        b_num = np.exp(res.x) / np.linalg.norm(np.exp(res.x))
        np.testing.assert_allclose(ell.gaussian_shape(d, p), b_num, rtol=2e-4)
        cal = ell.calibrate_gaussian(d, rho=1.0, p=p)
        assert cal.expected_error <= ell.gaussian_moment(p) * 0.5 ** (p / 2) * res.fun * (1 + 1e-9)
        # Laplace: ‖b‖₁ = 1
        g = lambda t: np.sum((d / (np.exp(t) / np.sum(np.exp(t)))) ** p)  # noqa: E731
        res = optimize.minimize(g, np.zeros(d.size), method="BFGS", options={"gtol": 1e-10})
        b_num = np.exp(res.x) / np.sum(np.exp(res.x))
        np.testing.assert_allclose(ell.laplace_shape(d, p), b_num, rtol=2e-4)


def test_random_feasible_shapes_never_beat_optimum():
    rng = np.random.default_rng(3)
    d = rng.lognormal(0, 1.5, size=5)
    for p in (1.0, 2.0):
        best = np.sum((d / ell.gaussian_shape(d, p)) ** p)
        best_l = np.sum((d / ell.laplace_shape(d, p)) ** p)
        for _ in range(2000):
            u = rng.uniform(0.01, 1.0, size=d.size)
            assert np.sum((d / (u / np.linalg.norm(u))) ** p) >= best * (1 - 1e-12)
            assert np.sum((d / (u / np.sum(u))) ** p) >= best_l * (1 - 1e-12)


def test_privacy_condition_ellipsoid_through_corners():
    # Lemma 4.6 / 4.9: Σ(Δ_i/σ_i)² = 1/σ_opt² (‖b‖₂ = 1) and Σ Δ_i/s_i = ε (‖b‖₁ = 1), every shape
    d = np.array([5.0, 0.3, 1.0, 2.0])
    for shape in ell.SHAPES:
        for p in (0.5, 2.0, 7.0):
            c = ell.calibrate_gaussian(d, rho=0.2, p=p, shape=shape)
            assert np.sum((d / c.scales) ** 2) == pytest.approx(2 * 0.2, rel=1e-12)
            lap = ell.calibrate_laplace(d, epsilon=1.3, p=p, shape=shape)
            assert np.sum(d / lap.scales) == pytest.approx(1.3, rel=1e-12)


def test_improvement_ratio_range_and_limits():
    assert ell.calibrate_gaussian(np.full(7, 3.0), rho=1).improvement == pytest.approx(1.0)
    d = np.array([1e6] + [1.0] * 9)
    imp = ell.calibrate_gaussian(d, rho=1, p=2).improvement
    assert 9.9 < imp < 10.0  # → d as one coordinate dominates, never reaches it
    rng = np.random.default_rng(1)
    for _ in range(50):
        x = rng.lognormal(0, 2, size=8)
        assert 1 - 1e-12 <= ell.calibrate_gaussian(x, rho=1, p=rng.uniform(0.3, 4)).improvement < 8
    # p → ∞: spherical; p → 0: noise ∝ sensitivity (spec §2.3)
    x = np.array([4.0, 1.0, 0.5])
    np.testing.assert_allclose(ell.gaussian_shape(x, 1e7), ell.gaussian_shape(x, 2, "spherical"), rtol=1e-5)
    np.testing.assert_allclose(ell.gaussian_shape(x, 1e-7), ell.gaussian_shape(x, 2, "proportional"), rtol=1e-5)
    np.testing.assert_allclose(ell.laplace_shape(x, 1e7), ell.laplace_shape(x, 1, "spherical"), rtol=1e-5)
    np.testing.assert_allclose(ell.laplace_shape(x, 1e-7), ell.laplace_shape(x, 1, "proportional"), rtol=1e-5)


def test_p2_spherical_equals_proportional():
    d = np.array([3.0, 1.0, 0.2])
    a = ell.calibrate_gaussian(d, rho=1, p=2, shape="spherical").expected_error
    b = ell.calibrate_gaussian(d, rho=1, p=2, shape="proportional").expected_error
    assert a == pytest.approx(b) == pytest.approx(d.size * np.sum(d ** 2) / 2)
    assert ell.calibrate_gaussian(d, rho=1, p=2).expected_error == pytest.approx(np.sum(d) ** 2 / 2)


def test_zero_sensitivity_coordinates_get_no_noise():
    c = ell.calibrate_gaussian([4.0, 0.0, 1.0], rho=1.0)
    assert c.scales[1] == 0.0
    assert c.expected_error == pytest.approx(12.5)


def test_validation():
    with pytest.raises(InvalidParameterError):
        ell.calibrate_gaussian([1.0, -1.0], rho=1)
    with pytest.raises(InvalidParameterError):
        ell.calibrate_gaussian([0.0, 0.0], rho=1)
    with pytest.raises(InvalidParameterError):
        ell.calibrate_gaussian([1.0], rho=1, epsilon=1, delta=1e-6)
    with pytest.raises(InvalidParameterError):
        ell.calibrate_gaussian([1.0], epsilon=1)
    with pytest.raises(ValueError, match="rho"):
        ell.calibrate_gaussian([1.0], rho=-1)
    with pytest.raises(InvalidParameterError, match="shape"):
        ell.calibrate_laplace([1.0], epsilon=1, shape="round")
    with pytest.raises(ValueError, match="p must be"):
        ell.gaussian_shape([1.0], p=0)
    with pytest.raises(InvalidParameterError, match="upper must be >= lower"):
        ell.gaussian_sum(np.zeros((3, 2)), [0, 1], [1, 0], rho=1, insecure_float=True)
