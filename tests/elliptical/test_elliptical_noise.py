"""Chapter 4 mechanisms: noise laws (moments, fits), Monte-Carlo error, grid accounting, data handling."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from sparsedp import noise
from sparsedp.accounting.zcdp import gaussian_rho
from sparsedp.errors import InputDataError
from sparsedp.mechanisms import elliptical as ell
from sparsedp.noise import InsecureSeededRandom


@pytest.mark.parametrize("p", [1.0, 2.0])
def test_monte_carlo_error_matches_theorem_4_1(p, rng):
    # float noise (research mode): E‖η‖_p^p within 3% of Theorem 4.1 / 4.2 (acceptance criterion)
    d = np.random.default_rng(11).lognormal(0, 1, size=50)
    lo, hi = np.zeros(50), d
    x = np.zeros((1, 50))
    for cal_fn, kw in ((ell.gaussian_sum, {"rho": 0.5}), (ell.laplace_sum, {"epsilon": 0.8})):
        draws = []
        for _ in range(1500):
            rel = cal_fn(x, lo, hi, p=p, rng=rng, insecure_float=True, **kw)
            draws.append(np.sum(np.abs(rel.values) ** p))
        assert np.mean(draws) == pytest.approx(rel.calibration.expected_error, rel=0.03)


def test_monte_carlo_error_secure_noise(rng):
    # the default (discrete, grid) path has the same expected error as Theorem 4.1 / 4.2, within 3 %
    d = np.random.default_rng(12).lognormal(0, 1, size=40)
    x = np.zeros((1, 40))
    for fn, kw, p in ((ell.gaussian_sum, {"rho": 0.5}, 2.0), (ell.laplace_sum, {"epsilon": 0.8}, 1.0)):
        rels = [fn(x, 0.0, d, p=p, rng=rng, **kw) for _ in range(800)]
        mc = np.mean([np.sum(np.abs(r.values) ** p) for r in rels])
        assert mc == pytest.approx(rels[0].calibration.expected_error, rel=0.03)


def test_discrete_gaussian_noise_law_per_coordinate(rng):
    # secure path: release − clipped sum is γ·Z with Z ~ N_Z(0, (σ_i/γ)²): check moments and normal fit
    lo, hi = np.array([0.0, -1.0, 0.0]), np.array([4.0, 0.0, 0.25])
    x = np.array([[1.0, -0.5, 0.1], [3.9, -0.2, 0.2], [0.0, -1.0, 0.0]])
    truth = x.sum(axis=0)
    out = np.array([ell.gaussian_sum(x, lo, hi, rho=2.0, rng=rng).values for _ in range(1500)])
    cal = ell.calibrate_gaussian(hi - lo, rho=2.0)
    rel = ell.gaussian_sum(x, lo, hi, rho=2.0, rng=rng)
    err = out - truth
    assert np.all(np.abs(err.mean(axis=0)) < 4 * cal.scales / math.sqrt(1500) + rel.rounding_bound)
    np.testing.assert_allclose(err.std(axis=0), cal.scales, rtol=0.06)
    for i in range(3):
        assert stats.kstest(err[:, i] / cal.scales[i], "norm").pvalue > 1e-3


def test_discrete_laplace_noise_law_per_coordinate(rng):
    lo, hi = np.zeros(2), np.array([4.0, 1.0])
    x = np.array([[2.0, 0.5], [1.0, 0.25]])
    cal = ell.calibrate_laplace(hi - lo, epsilon=1.0)
    err = np.array([ell.laplace_sum(x, lo, hi, epsilon=1.0, rng=rng).values for _ in range(1500)]) - x.sum(0)
    np.testing.assert_allclose(np.abs(err).mean(axis=0), cal.scales, rtol=0.07)      # E|Lap(s)| = s
    np.testing.assert_allclose(err.std(axis=0), math.sqrt(2) * cal.scales, rtol=0.08)
    for i in range(2):
        assert stats.kstest(err[:, i], "laplace", args=(0, cal.scales[i])).pvalue > 1e-3


def test_grid_noise_is_accounted_by_the_accounting_layer(monkeypatch, rng):
    # spy on the sampler: the discrete noise actually drawn must give ρ-zCDP (CKS Thm 14 via gaussian_rho)
    calls = []
    real = noise.sample_discrete_gaussian

    def spy(sigma2, size, rng=None):
        calls.append((sigma2, size))
        return real(sigma2, size, rng=rng)

    monkeypatch.setattr(noise, "sample_discrete_gaussian", spy)
    lo, hi = np.array([0.0, 0.0, 0.0]), np.array([8.0, 1.0, 0.001])
    x = np.random.default_rng(0).uniform(0, 1, size=(1000, 3)) * hi
    rel = ell.gaussian_sum(x, lo, hi, rho=0.3, rng=rng)
    assert len(calls) == 1 and calls[0][1] == 3                # one batch for all coordinates
    k = rel.grid_sensitivity
    # the rounded rows lie in {0..K_i}: the ℓ₂ sensitivity of the integer sum is ‖K‖₂
    assert np.all(k >= (hi - lo) / rel.grid_spacing - 1e-9)
    used = gaussian_rho(math.sqrt(float(calls[0][0])), float(np.linalg.norm(k)))
    assert used <= 0.3 * (1 + 1e-12)
    assert used == pytest.approx(0.3, rel=1e-9)
    cal = rel.calibration
    assert np.all(rel.noise_scales >= cal.scales * (1 - 1e-12))
    np.testing.assert_allclose(rel.noise_scales, cal.scales, rtol=2e-3)
    assert np.all(rel.rounding_bound <= cal.scales / 1000 * (1 + 1e-12))


def test_grid_laplace_accounting(monkeypatch, rng):
    calls = []
    real = noise.sample_discrete_laplace

    def spy(scale, size, rng=None):
        calls.append((scale, size))
        return real(scale, size, rng=rng)

    monkeypatch.setattr(noise, "sample_discrete_laplace", spy)
    lo, hi = np.zeros(4), np.array([4.0, 1.0, 0.5, 9.0])
    rel = ell.laplace_sum(np.ones((20, 4)) * 0.25, lo, hi, epsilon=0.7, rng=rng)
    assert len(calls) == 1
    # discrete Laplace with scale t and integer sensitivity K_i per coordinate: loss Σ K_i/t <= ε
    assert float(sum(int(v) for v in rel.grid_sensitivity)) / float(calls[0][0]) <= 0.7 * (1 + 1e-12)
    np.testing.assert_allclose(rel.noise_scales, rel.calibration.scales, rtol=2e-3)


def test_grid_values_lie_on_grid(rng):
    lo, hi = np.array([-2.0]), np.array([2.0])
    x = np.random.default_rng(1).uniform(-3, 3, size=(50, 1))
    rel = ell.gaussian_sum(x, lo, hi, rho=1.0, rng=rng)
    units = (rel.values[0] - 50 * lo[0]) / rel.grid_spacing[0]
    assert units == pytest.approx(round(units), abs=1e-6)
    assert rel.n_clipped == int(np.sum(np.abs(x[:, 0]) > 2))


def test_clipping_and_mean(rng):
    x = np.array([[10.0, 0.5], [-10.0, 0.5], [0.5, 0.5], [0.5, 0.5]])
    rel = ell.gaussian_sum(x, [0, 0], [1, 1], rho=1e6, rng=rng)  # tiny noise
    np.testing.assert_allclose(rel.values, [2.0, 2.0], atol=0.05)
    np.testing.assert_allclose(rel.mean, [0.5, 0.5], atol=0.02)
    assert rel.n_clipped == 2


def test_dataframe_input_and_zero_width(rng):
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame({"a": [0.1, 0.2, 0.3], "b": [1.0, 1.0, 1.0]})
    rel = ell.laplace_sum(df, [0, 1], [1, 1], epsilon=1e6, rng=rng)
    assert rel.values[1] == 3.0  # zero sensitivity: exact, no noise
    assert rel.values[0] == pytest.approx(0.6, abs=0.01)


def test_bad_data():
    with pytest.raises(InputDataError, match="NaN"):
        ell.gaussian_sum(np.array([[np.nan, 1.0]]), 0, 1, rho=1)
    with pytest.raises(InputDataError, match="columns"):
        ell.gaussian_sum(np.zeros((2, 3)), [0, 0], [1, 1], rho=1)
    with pytest.raises(InputDataError, match="no rows"):
        ell.gaussian_sum(np.zeros((0, 2)), [0, 0], [1, 1], rho=1)


def test_approx_dp_release_uses_zcdp_sigma(rng):
    rel = ell.gaussian_sum(np.zeros((2, 2)), 0, [1, 1], epsilon=1.0, delta=1e-6, rng=rng)
    assert rel.calibration.unit_sigma == pytest.approx(ell.unit_sigma(epsilon=1.0, delta=1e-6))
    assert rel.calibration.privacy == "approx"
    rel = ell.gaussian_sum(np.zeros((2, 2)), 0, [1, 1], epsilon=1.0, delta=1e-6, rng=rng, insecure_float=True)
    assert rel.calibration.unit_sigma == pytest.approx(4.2247, abs=1e-3)


def test_seeded_determinism():
    a = ell.gaussian_sum(np.ones((3, 2)), 0, 2, rho=1, rng=InsecureSeededRandom(5)).values
    b = ell.gaussian_sum(np.ones((3, 2)), 0, 2, rho=1, rng=InsecureSeededRandom(5)).values
    np.testing.assert_array_equal(a, b)
