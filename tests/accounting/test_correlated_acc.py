"""Correlated Gaussian calibration (seed 002): spec S3.8 / S5 / S6 tables and identities."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sparsedp.accounting import (bounded_density_noise, correlated_gaussian_calibrate,
                                 correlated_gaussian_error_ratio, correlated_gaussian_sigma1, gaussian_delta,
                                 grouped_correlated_gaussian_calibrate)
from sparsedp.errors import InvalidParameterError, InvalidTypeError


@pytest.mark.parametrize("eps,delta,sigma1", [
    (0.1, 1e-5, 30.74956613), (0.5, 1e-5, 7.031826676), (1, 1e-5, 3.730631635), (1, 1e-6, 4.224678889),
    (2, 1e-6, 2.230476271), (4, 1e-6, 1.193518587), (8, 1e-9, 0.7922370498), (1, 1e-10, 5.86777775),
])
def test_sigma1_reference_values(eps, delta, sigma1):
    s1 = correlated_gaussian_sigma1(eps, delta)
    assert s1 == pytest.approx(sigma1, rel=1e-8)
    assert gaussian_delta(1 / s1, eps) <= delta


@pytest.mark.parametrize("d,eta,z,per_query,standard,n_std", [
    (1, 2.637955, 2.637955, 3.730632, 3.730632, 5.275910),
    (4, 3.230822, 4.569072, 5.595947, 7.461263, 6.461644),
    (100, 6.186553, 19.563597, 20.518474, 37.306316, 12.373105),
    (10**4, 18.746192, 187.461920, 188.396898, 373.063164, 37.492384),
])
def test_worked_example_eps1_delta1e5(d, eta, z, per_query, standard, n_std):
    n = correlated_gaussian_calibrate(1.0, 1e-5, d)
    assert n.shared_std == pytest.approx(eta, abs=2e-6)
    assert n.independent_std == pytest.approx(z, abs=2e-6)
    assert n.per_query_std == pytest.approx(per_query, abs=2e-6)
    assert n.standard_std == pytest.approx(standard, abs=2e-6)
    assert n.count_std == pytest.approx(n_std, abs=2e-6)
    assert n.embedding_c == pytest.approx(d ** 0.25)


@pytest.mark.parametrize("d,var,ratio,std_ratio,var_eta,var_z,var_n", [
    (1, 1, 1, 1, 0.5, 0.5, 2), (2, 1.457107, 0.728553, 0.853553, 0.603553, 0.853553, 2.414214),
    (3, 1.866025, 0.622008, 0.788675, 0.683013, 1.183013, 2.732051), (4, 2.25, 0.5625, 0.75, 0.75, 1.5, 3),
    (10, 4.331139, 0.433114, 0.658114, 1.040569, 3.290569, 4.162278),
    (1000, 266.061388, 0.266061, 0.515811, 8.155694, 257.905694, 32.622777),
    (10**6, 250500.25, 0.2505, 0.5005, 250.25, 250250, 1001),
])
def test_ratio_table_units_of_sigma1(d, var, ratio, std_ratio, var_eta, var_z, var_n):
    n = correlated_gaussian_calibrate(1.0, 1e-5, d)
    s2 = n.sigma1**2
    assert n.per_query_std**2 / s2 == pytest.approx(var, abs=1e-6 * max(1, var))
    assert (n.per_query_std / n.standard_std) ** 2 == pytest.approx(ratio, abs=1e-6)
    assert n.error_ratio == pytest.approx(std_ratio, abs=1e-6)
    assert correlated_gaussian_error_ratio(d) == pytest.approx(std_ratio, abs=1e-6)
    assert n.shared_std**2 / s2 == pytest.approx(var_eta, abs=1e-6 * max(1, var_eta))
    assert n.independent_std**2 / s2 == pytest.approx(var_z, abs=1e-6 * max(1, var_z))
    assert n.count_std**2 / s2 == pytest.approx(var_n, abs=1e-6 * max(1, var_n))


def test_general_c_figure2_and_symmetry():
    # d = 10^4 (Figure 2 data): per-query variance (A+B)/4 in units of σ₁²
    for c, var, a in ((1, 5000.5, 10001), (2, 3126.25, 2501), (10, 2550.25, 101), (100, 5000.5, 2),
                      (20, 2606.5, 26), (150, 8125.3611, 1.4444)):
        n = correlated_gaussian_calibrate(1.0, 1e-5, 10**4, c=c)
        s2 = n.sigma1**2
        assert n.per_query_std**2 / s2 == pytest.approx(var, abs=1e-4)
        assert n.count_std**2 / s2 == pytest.approx(a, abs=1e-4)
    d = 10**4
    at = correlated_gaussian_calibrate(1, 1e-5, d, c=d ** 0.25).per_query_std
    for f in (0.5, 0.9, 0.99, 1.01, 1.1, 2.0):  # C = d^{1/4} minimises the per-query error (Lemma 3.5)
        assert correlated_gaussian_calibrate(1, 1e-5, d, c=f * d ** 0.25).per_query_std > at
    for c in (1.5, 3.0, 7.0):  # C ↔ √d / C symmetry
        assert correlated_gaussian_calibrate(1, 1e-5, d, c=c).per_query_std == pytest.approx(
            correlated_gaussian_calibrate(1, 1e-5, d, c=math.sqrt(d) / c).per_query_std, rel=1e-12)


def test_embedding_equivalence_h_sigma_ht():
    # S6.9: with Σ the covariance of (x̃, ñ) and H(x̃, ñ) = (2x̃ − ñ1, Cñ): H Σ Hᵀ = (d + C²)σ₁² I.
    for d, c in ((1, 1.0), (5, 5 ** 0.25), (16, 2.0), (16, 4.0), (30, 7.0)):
        n = correlated_gaussian_calibrate(1.0, 1e-5, d, c=c)
        a, ind = n.shared_std**2, n.independent_std**2  # Var η = A/4, Var z = B/4
        cov = np.full((d + 1, d + 1), a)
        cov[:d, :d] += np.eye(d) * ind
        cov[:d, d] = cov[d, :d] = 2 * a
        cov[d, d] = 4 * a
        h = np.zeros((d + 1, d + 1))
        h[:d, :d] = 2 * np.eye(d)
        h[:d, d] = -1
        h[d, d] = c
        assert np.allclose(h @ cov @ h.T, n.embedding_std**2 * np.eye(d + 1), rtol=1e-12, atol=1e-9)
        # and the embedded Gaussian is exactly a unit-sensitivity Gaussian with std σ₁ after scaling
        assert n.embedding_std == pytest.approx(math.sqrt(d + c * c) * n.sigma1, rel=1e-14)


def test_mahalanobis_tightness_binary_shifts():
    # S6.12: every binary v gives (v,1)ᵀ Σ⁻¹ (v,1) = 1/σ₁² (privacy exactly σ₁'s Gaussian).
    for d in (1, 3, 6):
        n = correlated_gaussian_calibrate(1.0, 1e-5, d)
        a, ind = n.shared_std**2, n.independent_std**2
        cov = np.full((d + 1, d + 1), a)
        cov[:d, :d] += np.eye(d) * ind
        cov[:d, d] = cov[d, :d] = 2 * a
        cov[d, d] = 4 * a
        inv = np.linalg.inv(cov)
        for bits in range(2**d):
            v = np.array([(bits >> i) & 1 for i in range(d)] + [1], dtype=float)
            assert v @ inv @ v == pytest.approx(1 / n.sigma1**2, rel=1e-10)


def test_grouped_algorithm2():
    s1 = correlated_gaussian_sigma1(1.0, 1e-5)
    for d in (1, 4, 100):
        ar = grouped_correlated_gaussian_calibrate(1.0, 1e-5, d)
        assert ar == correlated_gaussian_calibrate(1.0, 1e-5, d)
        rp = grouped_correlated_gaussian_calibrate(1.0, 1e-5, d, neighbours="replacement")
        assert rp.shared_std**2 == pytest.approx(s1**2)  # corrected 1/μ² (spec S4.1 erratum)
        assert rp.per_query_std**2 == pytest.approx((d + 1) * s1**2)
        assert rp.count_std**2 == pytest.approx(4 * s1**2)
        assert rp.standard_std**2 == pytest.approx(2 * d * s1**2)
        lit = grouped_correlated_gaussian_calibrate(1.0, 1e-5, d, neighbours="replacement", paper_literal=True)
        assert lit.per_query_std**2 == pytest.approx((d + 4) * s1**2)
        assert (rp.per_query_std < rp.standard_std * (1 - 1e-12)) == (d > 1)
        assert (lit.per_query_std < lit.standard_std * (1 - 1e-12)) == (d > 4)
    # replacement embedding: worst squared Mahalanobis exactly 1 (units μ²) in both cases (S6.16)
    d = 3
    rp = grouped_correlated_gaussian_calibrate(1.0, 1e-5, d, neighbours="replacement")
    c = rp.embedding_c
    diff_same_row = np.array([2.0] * d + [0.0])
    diff_move = np.array([1.0] * d + [c] + [1.0] * d + [-c])
    assert diff_same_row @ diff_same_row / rp.embedding_std**2 == pytest.approx(1 / rp.sigma1**2)
    assert diff_move @ diff_move / rp.embedding_std**2 == pytest.approx(1 / rp.sigma1**2)


@pytest.mark.parametrize("d,opt", [(2, 4 / 3), (3, 9 / 5), (4, 9 / 4), (5, 18 / 7), (6, 2.961012), (8, 40 / 11),
                                   (9, 4.0), (10, 56 / 13), (20, 7.482499), (50, 16.280702), (100, 121 / 4),
                                   (1000, 266.061352)])
def test_bounded_density_opt_d_d(d, opt):
    n = bounded_density_noise(1.0, 1e-5, d, d)
    assert (n["ellipse"].per_query_std / n["ellipse"].sigma1) ** 2 == pytest.approx(opt, abs=1e-6)
    assert n["ellipse"].per_query_std <= n["correlated"].per_query_std * (1 + 1e-12)


def test_bounded_density_figure3_and_lemmas():
    s1 = correlated_gaussian_sigma1(1.0, 1e-5)
    for k, jy in ((1, 1.0), (10, 9.9531), (50, 48.1439), (100, 91.8164), (200, 164.9371), (266, 202.5494),
                  (300, 218.5705), (400, 252.3073), (500, 265.8035)):
        n = bounded_density_noise(1.0, 1e-5, 1000, k)
        assert (n["ellipse"].per_query_std / s1) ** 2 == pytest.approx(jy, abs=1e-4)
        assert (n["standard"].per_query_std / s1) ** 2 == pytest.approx(k)
        assert (n["correlated"].per_query_std / s1) ** 2 == pytest.approx(266.061388, abs=1e-6)
        # decision rule of S4.2: Algorithm 1 beats the standard mechanism iff k >= 267 at d = 1000
        assert (n["correlated"].per_query_std < n["standard"].per_query_std) == (k >= 267)
    for d, want in ((2, 1.0), (4, 1.866025), (10, 4.0), (100, 29.974937), (1000, 265.803481)):  # Lemma 4.3
        n = bounded_density_noise(1.0, 1e-5, d, d // 2)
        assert (n["ellipse"].per_query_std / s1) ** 2 == pytest.approx(want, abs=1e-6)
    # Lemma 4.4: 0 <= Var_Alg1 − OPT <= 2√3/4 for k >= d/2
    for d in range(1, 41):
        for k in range(math.ceil(d / 2), d + 1):
            n = bounded_density_noise(1.0, 1e-5, d, k)
            gap = (n["correlated"].per_query_std**2 - n["ellipse"].per_query_std**2) / s1**2
            assert -1e-9 <= gap <= 2 * math.sqrt(3) / 4 + 1e-9


def test_validation():
    with pytest.raises(InvalidParameterError, match="d"):
        correlated_gaussian_calibrate(1.0, 1e-5, 0)
    with pytest.raises(InvalidTypeError, match="d"):
        correlated_gaussian_calibrate(1.0, 1e-5, 2.5)
    with pytest.raises(InvalidParameterError, match="c"):
        correlated_gaussian_calibrate(1.0, 1e-5, 4, c=0)
    with pytest.raises(InvalidParameterError, match="epsilon"):
        correlated_gaussian_calibrate(-1.0, 1e-5, 4)
    with pytest.raises(InvalidParameterError, match="neighbours"):
        grouped_correlated_gaussian_calibrate(1.0, 1e-5, 4, neighbours="swap")
    with pytest.raises(InvalidParameterError, match="k"):
        bounded_density_noise(1.0, 1e-5, 4, 5)
