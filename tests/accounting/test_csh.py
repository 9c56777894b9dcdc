"""CSH accountants (seed 000): golden values of spec §6.3/§5.3/§5.4 and claims 1–20 of spec §6.

Every expected number below is copied from ``shared/specs/seed-000-csh.md``; nothing is computed by the
code under test and then asserted back.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, optimize, special, stats

from sparsedp.accounting import (csh_calibrate, csh_delta, csh_delta_parts, csh_discrete_calibrate,
                                 csh_discrete_delta, csh_discrete_delta_parts, csh_discrete_scales,
                                 csh_discrete_tau, csh_epsilon, csh_noise_std, csh_sigma, csh_sigma_star,
                                 csh_tau, gaussian_delta, gaussian_sigma, gshm_calibrate, gshm_delta,
                                 zcdp_to_dp_delta)
from sparsedp.accounting import csh as csh_mod
from sparsedp.errors import InfeasibleError, InvalidParameterError, InvalidTypeError

Phi = special.ndtr


def bw(delta_l2, sigma, eps):
    """Balle–Wang δ written out with scipy (independent of the library's evaluation)."""
    a, b = delta_l2 / (2 * sigma), eps * sigma / delta_l2
    return Phi(a - b) - math.exp(eps) * Phi(-a - b)


# ------------------------------------------------------------------ §6.3 golden δ values

# (ε, k, σ, τ, GSHM add, GSHM exact, CSH add, CSH tight, [T1, T2, T3, T4])
GOLDEN = [
    (0.35, 10, 20, 140, 8.8325979538e-04, 8.8325978258e-04, 4.2394038954e-05, 4.0965483211e-05,
     [4.09655e-5, 1.42856e-6, 3.72414e-5, 6.95816e-7]),
    (0.35, 10, 18, 133, 1.8087637416e-03, 1.8087637409e-03, 2.0192196683e-05, 1.2386949752e-05,
     [1.23869e-5, 7.80525e-6, 1.12609e-5, 4.27721e-6]),
    (1.0, 10, 10, 60, 1.0982034680e-04, 1.0981048092e-04, 6.7540799239e-04, 6.7540709199e-04,
     [6.75407e-4, 9.00391e-10, 6.14025e-4, 2.3175e-10]),
    (0.35, 100, 55, 360, 2.2359455959e-03, 2.2359426302e-03, 3.6629681646e-05, 3.3310483932e-05,
     [3.33105e-5, 3.3192e-6, 3.29807e-5, 3.0822e-6]),
    (0.35, 1, 8, 50, 1.1314166746e-04, 1.1314146224e-04, 1.7781578604e-03, 1.7772602322e-03,
     [1.77726e-3, 8.97628e-7, None, None]),
    (0.35, 2, 10, 60, 3.6411512771e-04, 3.6411315453e-04, 1.6764515581e-03, 1.6744850207e-03,
     [1.67449e-3, 1.96654e-6, 1.1167e-3, 6.71258e-8]),
    (0.35, 51914, 1150, 7700, 3.6506185394e-03, 3.6500612119e-03, 1.5053449293e-05, 8.8092297276e-06,
     [8.80923e-6, 6.24422e-6, 8.80906e-6, 6.24332e-6]),
    (0.35, 51914, 2300, 14500, 1.3552929633e-05, 7.5121847322e-06, 8.7385773044e-05, 8.7385773037e-05,
     [8.73858e-5, 7.1888e-15, 8.73841e-5, 7.18518e-15]),
]


@pytest.mark.parametrize("row", GOLDEN, ids=[f"k{r[1]}-s{r[2]}-t{r[3]}" for r in GOLDEN])
def test_golden_delta_values(row):
    eps, k, s, t, g_add, g_exact, c_add, c_tight, terms = row
    assert csh_delta(eps, s, t, k, "add") == pytest.approx(c_add, rel=1e-9)
    assert csh_delta(eps, s, t, k, "tight") == pytest.approx(c_tight, rel=1e-9)
    parts = csh_delta_parts(eps, s, t, k, "tight")
    for name, want in zip(("T1", "T2", "T3", "T4"), terms):
        if want is None:  # k = 1: [k−1] is empty
            assert parts[name] == 0.0
        else:
            assert parts[name] == pytest.approx(want, rel=5e-5)  # the table has 5–6 significant digits
    # the GSHM columns of the same table, through the GSHM accountant
    assert gshm_delta(eps, s, t, k, "add") == pytest.approx(g_add, rel=1e-9)
    assert gshm_delta(eps, s, t, k, "exact") == pytest.approx(g_exact, rel=1e-9)


# (ε, k, σ, τ, Lemma 7.3 (total, gauss, inf), CKS (total, gauss, inf))
DISCRETE_GOLDEN = [
    (0.35, 10, 20, 160, (6.96765e-4, 6.95035e-4, 1.72941e-6), (7.55265e-6, 5.82324e-6, 1.72941e-6)),
    (0.35, 51914, 1250, 8600, (7.73875e-4, 7.71021e-4, 2.85395e-6), (9.40239e-6, 6.54844e-6, 2.85395e-6)),
    (1.0, 10, 10, 80, (2.05430e-6, 4.13317e-7, 1.64099e-6), (1.64591e-6, 4.92443e-9, 1.64099e-6)),
]


@pytest.mark.parametrize("row", DISCRETE_GOLDEN, ids=lambda r: f"k{r[1]}-s{r[2]}")
def test_discrete_golden_values(row):
    eps, k, s, t, bs, cks = row
    for conv, (total, gauss, inf) in (("bs", bs), ("cks", cks)):
        parts = csh_discrete_delta_parts(eps, s, t, k, conv)
        assert parts["gaussian"] == pytest.approx(gauss, rel=2e-5)
        assert parts["threshold"] == pytest.approx(inf, rel=2e-5)
        assert csh_discrete_delta(eps, s, t, k, conv) == pytest.approx(total, rel=2e-5)


# ------------------------------------------------------------------ §5.3 / §5.4 reproduction targets


@pytest.mark.parametrize("eps,k,add,tight,g_add,g_exact", [
    (0.349, 51914, 7860.54, 7453.42, 14712.04, 13950.05),
    (0.35, 51914, 7839.86, 7433.87, 14673.33, 13913.45),
])
def test_minimal_thresholds_section_5_3(eps, k, add, tight, g_add, g_exact):
    assert csh_calibrate(eps, 1e-5, k, "add")[1] == pytest.approx(add, abs=0.05)
    assert csh_calibrate(eps, 1e-5, k, "tight")[1] == pytest.approx(tight, abs=0.05)
    assert gshm_calibrate(eps, 1e-5, k, "add")[1] == pytest.approx(g_add, abs=0.05)
    assert gshm_calibrate(eps, 1e-5, k, "exact")[1] == pytest.approx(g_exact, abs=0.05)


def test_section_5_3_argmin_sigmas_and_k10():
    s_add, _ = csh_calibrate(0.349, 1e-5, 51914, "add")
    assert s_add == pytest.approx(1139.709, abs=0.01)
    s_t, _ = csh_calibrate(0.349, 1e-5, 51914, "tight")
    assert s_t == pytest.approx(1116.6838, abs=1e-3)
    assert csh_noise_std(s_t, 51914) == pytest.approx(1119.1316, abs=1e-3)
    # k = 10 table
    for eps, add, tight in ((0.349, 142.139, 132.293), (0.35, 141.764, 131.946)):
        assert csh_calibrate(eps, 1e-5, 10, "add")[1] == pytest.approx(add, abs=2e-3)
        assert csh_calibrate(eps, 1e-5, 10, "tight")[1] == pytest.approx(tight, abs=2e-3)
    assert csh_calibrate(0.35, 1e-5, 10, "add")[0] == pytest.approx(18.262, abs=2e-3)


@pytest.mark.parametrize("sigma_tot,add35,add349,tight", [
    (1120, 8005.62, 8255.84, 7459.20), (1130, 7859.01, 7899.27, 7525.80), (1140, 7839.96, 7861.39, 7592.40),
    (1150, 7854.43, 7868.64, 7659.00), (1200, 8072.04, 8076.37, 7992.00), (1500, 9991.02, 9991.09, 9990.00),
    (2000, 13320.01, 13320.01, 13320.01), (3000, 19980.01, 19980.01, 19980.01),
])
def test_curve_values_min_tau_at_total_noise(sigma_tot, add35, add349, tight):
    k = 51914
    s = sigma_tot / math.sqrt(1 + 1 / math.sqrt(k))
    assert csh_tau(0.35, 1e-5, s, k, "add") == pytest.approx(add35, abs=0.01)
    assert csh_tau(0.349, 1e-5, s, k, "add") == pytest.approx(add349, abs=0.01)
    assert csh_tau(0.35, 1e-5, s, k, "tight") == pytest.approx(tight, abs=0.01)


def test_curve_values_k10():
    k = 10
    for sigma_tot, add, tight in ((20.5, 144.237, 133.237), (21, 141.778, 136.486), (22, 145.054, 142.986),
                                  (31, 201.481, 201.480), (50, 324.967, 324.967)):
        s = sigma_tot / math.sqrt(1 + 1 / math.sqrt(k))
        assert csh_tau(0.35, 1e-5, s, k, "add") == pytest.approx(add, abs=2e-3)
        assert csh_tau(0.35, 1e-5, s, k, "tight") == pytest.approx(tight, abs=2e-3)


@pytest.mark.parametrize("k,conv,tau", [(10, "bs", 197.6), (10, "cks", 154.7), (51914, "bs", 10996),
                                         (51914, "cks", 8554.5)])
def test_discrete_min_threshold_section_5_4(k, conv, tau):
    # the spec's grid optima are "±0.3% accuracy, for orientation only"
    sigma, t = csh_discrete_calibrate(0.35, 1e-5, k, conv)
    assert t == pytest.approx(tau, rel=3e-3)
    assert csh_discrete_delta(0.35, sigma, t, k, conv) <= 1e-5
    # margin is minimal at that sigma (up to the bisection tolerance)
    assert csh_discrete_tau(0.35, 1e-5, sigma, k, conv) == pytest.approx(t, rel=1e-9)


def test_discrete_sigma_min_section_5_4():
    # σ_min: smallest σ whose zCDP part alone meets δ = 1e-5 (spec §5.4 table)
    for k, conv, want in ((51914, "bs", 1577.13), (51914, "cks", 1217.84), (10, "bs", 25.058), (10, "cks", 19.349)):
        s = csh_mod._discrete_sigma_star(0.35, 1e-5, k, conv)
        assert s == pytest.approx(want, rel=2e-5)


# ------------------------------------------------------------------ §6.1 identities (claims 1–10)

GRID = np.random.default_rng(20261122)


def _random_points(n, kmax=2000):
    ks = GRID.integers(1, kmax, size=n)
    eps = GRID.uniform(0.05, 3.0, size=n)
    sig = GRID.uniform(0.2, 20.0, size=n) * np.sqrt(ks)
    return list(zip(ks.tolist(), eps.tolist(), sig.tolist()))


def test_claim1_lemma_2_8_reformulation():
    for d, eps, sigma in _random_points(50):
        gamma = GRID.uniform(0.1, 10) * math.sqrt(d)
        r = math.sqrt(d + gamma)
        u, w = r / (4 * sigma), 2 * eps * sigma / r
        displayed = Phi(u - w) - math.exp(eps) * Phi(-u - w)
        assert gaussian_delta(0.5 * r / sigma, eps) == pytest.approx(displayed, rel=1e-9, abs=1e-15)


def test_claim2_effective_sensitivity_equivalence():
    for k, eps, sigma in _random_points(50):
        lhs = bw(0.5 * math.sqrt(k + math.sqrt(k)), sigma, eps)
        rhs = bw(math.sqrt(k), 2 * sigma / math.sqrt(1 + k ** -0.5), eps)
        assert lhs == pytest.approx(rhs, rel=1e-9, abs=1e-15)
    for k, want in ((1, 1.0), (10, 0.658114), (51914, 0.502194)):
        ratio = csh_noise_std(csh_sigma_star(0.35, 1e-5, k), k) / gaussian_sigma(0.35, 1e-5, math.sqrt(k))
        assert ratio == pytest.approx(want, abs=1e-6)
    assert csh_noise_std(csh_sigma_star(0.35, 1e-5, 51914), 51914) == pytest.approx(1116.1957, abs=1e-4)
    assert gaussian_sigma(0.35, 1e-5, math.sqrt(51914)) == pytest.approx(2222.6364, abs=1e-4)
    for k in (1, 7, 100, 51914):
        r = csh_sigma_star(0.7, 1e-6, k) / gaussian_sigma(0.7, 1e-6, math.sqrt(k))
        assert r == pytest.approx(0.5 * math.sqrt(1 + k ** -0.5), rel=1e-9)


def test_claim3_cgm_error_scaling():
    for d in (1, 2, 10, 12345, 10**7):
        assert 0.5 * math.sqrt(d + math.sqrt(d)) * math.sqrt(1 + 1 / math.sqrt(d)) == pytest.approx(
            (math.sqrt(d) + 1) / 2, rel=1e-12)


@pytest.mark.parametrize("delta,k,ratio", [
    (1e-5, 1, 1.46471), (1e-5, 2, 1.22628), (1e-5, 3, 1.12001), (1e-5, 4, 1.05606), (1e-5, 5, 1.01197),
    (1e-5, 6, 0.97909), (1e-5, 10, 0.89984), (1e-5, 100, 0.69048), (1e-5, 1000, 0.59817),
    (1e-5, 10000, 0.5527), (1e-5, 51914, 0.53429), (1e-8, 5, 1.00888), (1e-8, 6, 0.97663), (1e-8, 10, 0.89852),
])
def test_claim4_threshold_ratio(delta, k, ratio):
    for eps in (0.35, 1.0):  # independent of ε
        r = csh_calibrate(eps, delta, k, "tight")[1] / gshm_calibrate(eps, delta, k, "exact")[1]
        assert r == pytest.approx(ratio, abs=6e-5 if ratio > 0.6 else 1e-4)


@pytest.mark.parametrize("eps,k,g,c", [
    (0.35, 51914, 13913.4546, 7433.8664), (0.35, 10, 146.6333, 131.9463), (0.35, 1, 41.6039, 60.9376),
    (0.349, 51914, 13950.0513, 7453.4198), (1.0, 51914, 5320.9744, 2842.9613), (0.1, 51914, 43857.8957, 23432.9825),
])
def test_claim5_closed_form_min_tau(eps, k, g, c):
    dlt = 1e-5
    sc, tc = csh_calibrate(eps, dlt, k, "tight")
    sstar = csh_sigma_star(eps, dlt, k)
    closed = sstar * (1 + k ** -0.25) * stats.norm.isf(-math.expm1(math.log1p(-dlt) / (k + 1)))
    assert tc == pytest.approx(closed, rel=2e-9)
    assert tc == pytest.approx(c, abs=2e-4)
    assert gshm_calibrate(eps, dlt, k, "exact")[1] == pytest.approx(g, abs=2e-4)


def test_claim6_corrected_lemma_3_4_and_erratum():
    for k, eps, sigma in _random_points(25, kmax=60000):
        dlt = 10 ** GRID.uniform(-9, -3)
        sigma = csh_sigma_star(eps, dlt, k) * GRID.uniform(1.001, 1.05)  # δ_gauss a visible share of δ
        g = bw(0.5 * math.sqrt(k + math.sqrt(k)), sigma, eps)
        assert 1e-3 * dlt < g < dlt
        tau = csh_tau(eps, dlt, sigma, k, "add")
        root = optimize.brentq(lambda t: csh_delta(eps, sigma, t, k, "add") - dlt, 1e-3 * tau, 10 * tau,
                               xtol=1e-14, rtol=1e-15)
        assert tau == pytest.approx(root, rel=1e-9)
        assert csh_delta(eps, sigma, tau, k, "add") <= dlt
        # the printed Lemma 3.4 (1 − δ − δ_gauss) gives a threshold that violates δ
        printed = sigma * (1 + k ** -0.25) * stats.norm.isf(-math.expm1(math.log1p(-dlt - g) / (k + 1)))
        assert printed < tau
        assert csh_delta(eps, sigma, printed, k, "add") > dlt


def test_claim7_k1_degeneracy():
    for _, eps, sigma in _random_points(20):
        tau = GRID.uniform(0.5, 8) * sigma
        p = csh_delta_parts(eps, sigma, tau, 1, "tight")
        assert p["T3"] == p["T4"] == 0.0
        assert csh_delta(eps, sigma, tau, 1) == max(p["T1"], p["T2"])
        want = max(1 - Phi(tau / sigma), bw(1.0, sigma, eps))
        assert gshm_delta(eps, sigma, tau, 1, "exact") == pytest.approx(want, rel=1e-9)
    assert csh_noise_std(csh_sigma_star(0.35, 1e-5, 1), 1) == pytest.approx(9.7550, abs=1e-4)
    assert gaussian_sigma(0.35, 1e-5, 1.0) == pytest.approx(9.7550, abs=1e-4)


def test_claim8_noise_moments_monte_carlo():
    # The variance formula behind csh_noise_std: Var(Z_i + Z_corr) = σ²(1 + k^{-1/2}), Cov = σ²/√k.
    gen = np.random.default_rng(8)
    k, sigma, n = 16, 3.0, 1_000_000
    zc = gen.normal(0, sigma * k ** -0.25, size=n)
    z1, z2 = gen.normal(0, sigma, size=(2, n))
    assert np.var(z1 + zc) == pytest.approx(csh_noise_std(sigma, k) ** 2, rel=6e-3)
    assert np.cov(z1 + zc, z2 + zc)[0, 1] == pytest.approx(sigma**2 / math.sqrt(k), rel=2e-2)


def test_claim9_discrete_rho_and_lemma_7_3():
    for k, eps, sigma in _random_points(10):
        s_ind, s_corr = csh_discrete_scales(sigma, k)
        rho = 0.5 * (k / float(s_ind) + 1 / float(s_corr))
        assert rho == pytest.approx((k + math.sqrt(k)) / (8 * sigma**2), rel=1e-12)
        dlt = 10 ** GRID.uniform(-10, -3)
        e = rho + 2 * math.sqrt(rho * math.log(1 / dlt))
        assert zcdp_to_dp_delta(rho, e, conversion="bs") == pytest.approx(dlt, rel=1e-9)
        assert csh_discrete_delta_parts(e, sigma, 10 * sigma, k, "bs")["gaussian"] == pytest.approx(dlt, rel=1e-9)


def test_claim10_topk_debias_variant():
    for k, eps, sigma in _random_points(20):
        tau = 5 * sigma
        p = csh_delta_parts(eps, sigma, tau, k, "add", debias=True)
        want = bw(0.5 * math.sqrt(k + 5 * math.sqrt(k)), sigma, eps)
        assert p["gaussian"] == pytest.approx(want, rel=1e-9, abs=1e-15)
        assert p["threshold"] == csh_delta_parts(eps, sigma, tau, k, "add")["threshold"]
    with pytest.raises(InvalidParameterError, match="debias"):
        csh_delta(1.0, 10.0, 50.0, 10, "tight", debias=True)


# ------------------------------------------------------------------ §6.2 inequalities (claims 11–20)


def _grid_6300():
    for k in (1, 2, 3, 5, 10, 50, 200):
        for eps in (0.1, 0.35, 1.0, 3.0):
            for sk in np.geomspace(0.2, 20, 6):
                for ts in np.geomspace(0.1, 10, 8):
                    sigma = sk * math.sqrt(k)
                    yield k, eps, sigma, ts * sigma


def test_claim11_gshm_exact_le_add():
    for k, eps, sigma, tau in _grid_6300():
        assert gshm_delta(eps, sigma, tau, k, "exact") <= gshm_delta(eps, sigma, tau, k, "add") * (1 + 1e-12)


def test_claim12_csh_tight_le_add():
    for k, eps, sigma, tau in _grid_6300():
        assert csh_delta(eps, sigma, tau, k, "tight") <= csh_delta(eps, sigma, tau, k, "add") * (1 + 1e-12)


def test_claim13_nonincreasing_in_tau():
    for k in (1, 3, 10, 200, 5000):
        for eps in (0.35, 2.0):
            for sk in (0.3, 1.0, 5.0):
                sigma = sk * math.sqrt(k)
                taus = np.geomspace(0.05, 12, 60) * sigma
                for an in ("tight", "add"):
                    d = [csh_delta(eps, sigma, t, k, an) for t in taus]
                    assert all(b <= a * (1 + 1e-12) for a, b in zip(d, d[1:]))
                d = [csh_discrete_delta(eps, sigma, t, k) for t in taus[::4]]
                assert all(b <= a * (1 + 1e-12) for a, b in zip(d, d[1:]))


def test_claim14_monotone_in_sigma():
    for k in (1, 10, 1000):
        for eps in (0.35, 1.0):
            sigmas = np.geomspace(0.3, 30, 40) * math.sqrt(k)
            tau = 5 * math.sqrt(k)
            parts = [csh_delta_parts(eps, s, tau, k, "add") for s in sigmas]
            g = [p["gaussian"] for p in parts]
            inf = [p["threshold"] for p in parts]
            assert all(b <= a for a, b in zip(g, g[1:]))
            assert all(b >= a for a, b in zip(inf, inf[1:]))


@pytest.mark.parametrize("j,k,sigma,tau,bound,exact", [
    (10, 10, 1, 2.5, 0.46191, 0.11929), (5, 10, 1, 3.0, 0.15363, 0.021274), (100, 100, 1, 3.5, 0.32728, 0.039916),
    (1, 1, 1, 2.0, 0.29214, 0.07865),
])
def test_claim15_lemma_3_2_is_an_upper_bound(j, k, sigma, tau, bound, exact):
    ours = csh_mod._one_minus_pow_phi(tau / (sigma * (k ** -0.25 + 1)), j + 1)
    assert ours == pytest.approx(bound, abs=6e-6)
    sc = sigma * k ** -0.25

    def integrand(z):
        return stats.norm.pdf(z, scale=sc) * -math.expm1(j * special.log_ndtr((tau - z) / sigma))

    quad = integrate.quad(integrand, -12 * sc, 12 * sc + tau, limit=200)[0]
    assert quad == pytest.approx(exact, rel=5e-4)
    assert ours >= quad
    if k == 1:
        assert quad == pytest.approx(1 - Phi(tau / (math.sqrt(2) * sigma)), rel=1e-7)


def test_claim16_t2_dominates_exact_same_support_delta():
    for k in (1, 2, 5, 10, 100, 1000):
        for s in sorted({1, max(1, k // 3), k}):
            m = np.arange(0, s + 1)
            d2_exact = float(np.max(m - m**2 / (math.sqrt(k) + s)))
            g2 = min(s, (s + math.sqrt(k)) / 4)
            assert d2_exact <= g2 + 1e-12
            for eps in (0.35, 1.0):
                for sigma in (0.5, 2.0, 10.0):
                    if d2_exact > 0:
                        assert bw(math.sqrt(d2_exact), sigma, eps) <= bw(math.sqrt(g2), sigma, eps) + 1e-15


def _truncate_topk(h, k):
    """Algorithm 3's pre-processing: subtract the (k+1)-th largest count (0 if absent), clip at 0."""
    srt = sorted(h, reverse=True)
    t = srt[k] if len(srt) > k else 0
    return [max(0, x - t) for x in h]


def test_claim17_lemma_4_1_topk_is_sparse_monotonic():
    gen = np.random.default_rng(17)
    for _ in range(3000):
        d = int(gen.integers(1, 7))
        k = int(gen.integers(1, 5))
        n = int(gen.integers(0, 6))
        users = gen.integers(0, 2, size=(n + 1, d))
        h_big = users.sum(axis=0).tolist()
        h_small = users[:-1].sum(axis=0).tolist()  # the neighbour without the last user
        a, b = _truncate_topk(h_big, k), _truncate_topk(h_small, k)
        diff = [x - y for x, y in zip(a, b)]
        assert set(diff) <= {0, 1} or set(diff) <= {0, -1}
        assert sum(1 for x in a if x) <= k and sum(1 for x in b if x) <= k


@pytest.mark.parametrize("eps", [0.35, 0.349])
def test_claim18_orderings(eps):
    ct = csh_calibrate(eps, 1e-5, 10, "tight")[1]
    ca = csh_calibrate(eps, 1e-5, 10, "add")[1]
    ge = gshm_calibrate(eps, 1e-5, 10, "exact")[1]
    ga = gshm_calibrate(eps, 1e-5, 10, "add")[1]
    assert ct < ca < ge < ga
    r = csh_calibrate(eps, 1e-5, 51914, "add")[1] / gshm_calibrate(eps, 1e-5, 51914, "exact")[1]
    assert 0.562 <= r <= 0.566
    if eps == 0.349:
        assert gshm_calibrate(eps, 1e-5, 51914, "exact")[1] == pytest.approx(13950, abs=10)
        assert csh_calibrate(eps, 1e-5, 51914, "add")[1] == pytest.approx(7860, abs=5)


def test_claim19_crossovers():
    eps, dlt = 0.35, 1e-5
    ct = {k: csh_calibrate(eps, dlt, k, "tight")[1] for k in range(1, 21)}
    ca = {k: csh_calibrate(eps, dlt, k, "add")[1] for k in range(1, 21)}
    ge = {k: gshm_calibrate(eps, dlt, k, "exact")[1] for k in range(1, 21)}
    ga = {k: gshm_calibrate(eps, dlt, k, "add")[1] for k in range(1, 21)}
    for k in range(1, 21):
        assert (ct[k] < ge[k]) == (k >= 6)
        assert (ca[k] < ga[k]) == (k >= 6)
        assert (ca[k] < ge[k]) == (k >= 9)
    assert ct[5] / ge[5] == pytest.approx(1.0120, abs=1e-4)
    assert ct[6] / ge[6] == pytest.approx(0.9791, abs=1e-4)
    assert ca[5] / ga[5] == pytest.approx(1.0113, abs=1e-4)
    assert ca[6] / ga[6] == pytest.approx(0.9786, abs=1e-4)
    assert ca[8] / ge[8] == pytest.approx(1.0023, abs=1e-4)
    assert ca[9] / ge[9] == pytest.approx(0.9832, abs=1e-4)
    for k in (50, 1000, 51914):  # and it stays that way for large k
        assert csh_calibrate(eps, dlt, k, "tight")[1] < gshm_calibrate(eps, dlt, k, "exact")[1]


def test_claim20_per_user_bound_p9():
    for k in (4, 10, 100, 1000, 51914):
        csh_total = csh_noise_std(csh_sigma_star(0.35, 1e-5, k), k)
        for m in sorted({1, 2, k // 4, k // 4 + 1, int((math.sqrt(k) + 1) ** 2 / 4), k // 2, k}):
            if m < 1:
                continue
            gshm_noise = gaussian_sigma(0.35, 1e-5, math.sqrt(m))
            assert (gshm_noise < csh_total) == (m < (math.sqrt(k) + 1) ** 2 / 4)
        assert gaussian_sigma(0.35, 1e-5, math.sqrt(max(1, k // 4))) < csh_total


# ------------------------------------------------------------------ inversions


def test_csh_tau_is_minimal_and_valid():
    for k, eps, sigma in _random_points(15, kmax=5000):
        dlt = 10 ** GRID.uniform(-8, -3)
        sigma = max(sigma, csh_sigma_star(eps, dlt, k) * 1.05)
        for an in ("tight", "add"):
            t = csh_tau(eps, dlt, sigma, k, an)
            assert csh_delta(eps, sigma, t, k, an) <= dlt
            assert csh_delta(eps, sigma, t * (1 - 1e-9), k, an) > dlt


def test_csh_sigma_and_epsilon_round_trip():
    eps, dlt, k = 0.5, 1e-6, 300
    for an in ("tight", "add"):
        s_opt, t_opt = csh_calibrate(eps, dlt, k, an)
        tau = 1.3 * t_opt
        s = csh_sigma(eps, dlt, tau, k, an)
        assert csh_delta(eps, s, tau, k, an) <= dlt
        assert csh_delta(eps, s * (1 - 1e-6), tau, k, an) > dlt
        assert s <= s_opt
        e = csh_epsilon(s_opt * 1.1, 1.5 * t_opt, dlt, k, an)
        assert csh_delta(e, s_opt * 1.1, 1.5 * t_opt, k, an) <= dlt
        assert csh_delta(e * (1 - 1e-6), s_opt * 1.1, 1.5 * t_opt, k, an) > dlt
        with pytest.raises(InfeasibleError, match="below the smallest margin"):
            csh_sigma(eps, dlt, 0.9 * t_opt, k, an)


def test_joint_calibration_minimises_tau():
    for eps, dlt, k in ((0.35, 1e-5, 10), (1.0, 1e-7, 777)):
        for an in ("tight", "add"):
            s, t = csh_calibrate(eps, dlt, k, an)
            assert csh_delta(eps, s, t, k, an) <= dlt
            sstar = csh_sigma_star(eps, dlt, k)
            for f in (1.0005, 1.01, 1.05, 1.2, 1.5, 2.0):
                try:
                    assert csh_tau(eps, dlt, sstar * f, k, an) >= t * (1 - 1e-9)
                except InfeasibleError:
                    pass


def test_debias_calibration():
    s, t = csh_calibrate(0.35, 1e-5, 1000, "add", debias=True)
    assert csh_delta(0.35, s, t, 1000, "add", debias=True) <= 1e-5
    assert t > csh_calibrate(0.35, 1e-5, 1000, "add")[1]


def test_chunked_evaluation_matches_single_block(monkeypatch):
    want = [csh_delta(0.35, s, t, 51914) for s, t in ((1150, 7700), (2300, 14500), (900, 5000))]
    monkeypatch.setattr(csh_mod, "_CHUNK", 997)
    got = [csh_delta(0.35, s, t, 51914) for s, t in ((1150, 7700), (2300, 14500), (900, 5000))]
    assert got == want


# ------------------------------------------------------------------ validation and errors


@pytest.mark.parametrize("args,exc,name", [
    ((-1, 10.0, 50.0, 10), InvalidParameterError, "epsilon"),
    ((1.0, 0.0, 50.0, 10), InvalidParameterError, "sigma"),
    ((1.0, 10.0, -5.0, 10), InvalidParameterError, "tau"),
    ((1.0, 10.0, 50.0, 0), InvalidParameterError, "k"),
    ((1.0, 10.0, 50.0, 2.5), InvalidTypeError, "k"),
    ((1.0, float("nan"), 50.0, 10), InvalidParameterError, "sigma"),
    (("1", 10.0, 50.0, 10), InvalidTypeError, "epsilon"),
])
def test_arguments_are_validated(args, exc, name):
    with pytest.raises(exc, match=name):
        csh_delta(*args)
    with pytest.raises(exc, match=name):
        csh_discrete_delta(*args)


def test_bad_analysis_and_conversion():
    with pytest.raises(InvalidParameterError, match="analysis"):
        csh_delta(1.0, 10.0, 50.0, 10, "exact")
    with pytest.raises(InvalidParameterError, match="conversion"):
        csh_discrete_delta(1.0, 10.0, 50.0, 10, "rdp")
    with pytest.raises(InvalidParameterError, match="delta"):
        csh_tau(1.0, 1.5, 10.0, 10)


def test_infeasible_requests_explain_the_constraint():
    sstar = csh_sigma_star(0.35, 1e-5, 100)
    with pytest.raises(InfeasibleError, match="sigma=.*too small.*Gaussian part"):
        csh_tau(0.35, 1e-5, 0.9 * sstar, 100)
    with pytest.raises(InfeasibleError, match="threshold part"):
        csh_epsilon(10.0, 5.0, 1e-5, 100)
    with pytest.raises(InfeasibleError, match="zCDP part"):
        csh_discrete_tau(0.35, 1e-5, 0.5 * sstar, 100)


# ------------------------------------------------------------------ 40-digit mpmath cross-check

mpmath = pytest.importorskip("mpmath")


def _mp_bw(delta_l2, sigma, eps):
    mp = mpmath.mp
    a, b = mp.mpf(delta_l2) / (2 * mp.mpf(sigma)), mp.mpf(eps) * mp.mpf(sigma) / mp.mpf(delta_l2)
    return mp.ncdf(a - b) - mp.exp(eps) * mp.ncdf(-a - b)


def _mp_csh(eps, sigma, tau, k, analysis, debias=False):
    """Theorem 3.3 / 3.5 of seed 000, evaluated term by term at 40 digits."""
    mp = mpmath.mp
    eps, sigma, tau = mp.mpf(eps), mp.mpf(sigma), mp.mpf(tau)
    rk = mp.sqrt(k)
    x = tau / (sigma * (1 + mp.mpf(k) ** mp.mpf(-0.25)))
    phi = mp.ncdf(x)
    if analysis == "add":
        g = _mp_bw(mp.sqrt(k + (5 if debias else 1) * rk) / 2, sigma, eps)
        return min(mp.mpf(1), g + 1 - phi ** (k + 1))
    terms = [1 - phi ** (k + 1), _mp_bw(mp.sqrt(k + rk) / 2, sigma, eps)]
    for j in range(1, k):
        gam = min(mp.sqrt(j), mp.sqrt(j + rk) / 2)
        psi = phi ** (k - j + 1)
        terms.append(1 - psi + _mp_bw(gam, sigma, eps))
        terms.append(_mp_bw(gam, sigma, eps + mp.log(psi)))
    return min(mp.mpf(1), max(terms))


def _mp_dgauss_le(m, s):
    """P[N_Z(0, s) <= m] by direct summation at 40 digits."""
    mp = mpmath.mp
    n = int(40 * math.sqrt(s)) + 10
    w = [mp.exp(-mp.mpf(y) ** 2 / (2 * mp.mpf(s))) for y in range(0, n + 1)]
    z = w[0] + 2 * mp.fsum(w[1:])
    upper = mp.fsum(w[y] for y in range(m + 1, n + 1)) if m >= 0 else None
    return 1 - upper / z


def _mp_points(n, kmax, seed):
    gen = np.random.default_rng(seed)
    for _ in range(n):
        k = int(gen.integers(1, kmax))
        eps = float(gen.uniform(0.05, 3.0))
        sigma = float(gen.uniform(0.3, 5.0) * math.sqrt(k))
        tau = float(gen.uniform(1.0, 8.0) * sigma)
        yield k, eps, sigma, tau


def _check_mpmath(n, kmax, seed):
    mpmath.mp.dps = 40
    checked = 0
    for k, eps, sigma, tau in _mp_points(n, kmax, seed):
        for an in ("add", "tight"):
            want = _mp_csh(eps, sigma, tau, k, an)
            if want < mpmath.mpf("1e-200"):
                continue
            assert csh_delta(eps, sigma, tau, k, an) == pytest.approx(float(want), rel=1e-9), (k, eps, sigma, tau, an)
            checked += 1
        want = _mp_csh(eps, sigma, tau, k, "add", debias=True)
        assert csh_delta(eps, sigma, tau, k, "add", debias=True) == pytest.approx(float(want), rel=1e-9)
        # discrete CSH, Lemma 7.6 δ_inf and the Lemma 7.3 conversion, at the sampled scales
        s_ind, s_corr = (float(x) for x in csh_discrete_scales(sigma, k))
        r = math.sqrt(s_corr / s_ind)
        a_c, a_i = math.floor(2 * tau * r / (1 + r)), math.floor(2 * tau / (1 + r))
        inf = 1 - _mp_dgauss_le(a_c, s_corr) * _mp_dgauss_le(a_i, s_ind) ** k
        rho = mpmath.mpf(k) / (2 * mpmath.mpf(s_ind)) + 1 / (2 * mpmath.mpf(s_corr))
        bs = mpmath.exp(-((eps - rho) ** 2) / (4 * rho)) if eps > rho else mpmath.mpf(1)
        parts = csh_discrete_delta_parts(eps, sigma, tau, k, "bs")
        if inf > mpmath.mpf("1e-250"):
            assert parts["threshold"] == pytest.approx(float(inf), rel=1e-9)
        assert parts["gaussian"] == pytest.approx(float(bs), rel=1e-9)
    assert checked >= n  # the sample is not vacuous


def test_mpmath_40_digits_quick():
    _check_mpmath(12, 40, seed=40)


@pytest.mark.slow
def test_mpmath_40_digits_slow():
    _check_mpmath(60, 1500, seed=41)
