"""GSHM accounting: add-the-deltas, exact (Karrer et al. Thm 5.4) and f-DP (Thm 7.1), and inversions.

Golden values are copied from shared/specs/seed-001-exact-gshm.md §9.2–§9.4 and §4.8, and from
shared/specs/seed-000-csh.md §5.3, §6.1 and §6.3 (all recomputed there with mpmath). Properties
P1–P16 of seed 001 §9.1 run on seeded random grids.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, optimize, special, stats

from sparsedp.accounting import (gaussian_delta, gaussian_sigma, gshm_calibrate, gshm_delta,
                                 gshm_delta_parts, gshm_epsilon, gshm_sigma, gshm_tau)
from sparsedp.errors import InfeasibleError, InvalidParameterError, InvalidTypeError

CU = 51914  # Karrer et al. case study: C_u
EPS, DLT = 0.349, 1e-5
SIGMA_MIN = 2228.48263245917

# seed 001 §9.3: (C_u, σ, Δτ, ε, μ_o², δ_exact, δ_inf, δ_G, δ_fDP, argmax a_= of Eq. 7.1, δ_add)
TABLE_9_3 = [
    (1, 1, 2, 0.5, 0, 0.238421708134877, 0.0227501319481792, 0.238421708134877, 0.238421708134877, 0, 0.261171840083056),
    (1, 2, 3, 1, 0, 0.0668072012688581, 0.0668072012688581, 0.00682959498311458, 0.0668072012688581, 1, 0.0736367962519726),
    (2, 1, 1, 0.1, 0, 0.496439701823131, 0.292139018262859, 0.496439701823131, 0.496439701823131, 0, 0.78857872008599),
    (2, 2, 2, 0.05, 0, 0.292139018262859, 0.292139018262859, 0.258453653274776, 0.308270120179002, 1, 0.550592671537635),
    (3, 1, 2, 1, 0, 0.411188978611398, 0.0667094650853094, 0.411188978611398, 0.411188978611398, 0, 0.477898443696707),
    (3, 2, 2, 0.1, 0, 0.404444882068536, 0.404444882068536, 0.302227546678009, 0.404873317392882, 2, 0.706672428746545),
    (5, 3, 6, 0.5, 0, 0.138194993479529, 0.108691388930266, 0.138194993479529, 0.138194993479529, 0, 0.246886382409795),
    (10, 10, 22, 0.01, 0, 0.130650508209262, 0.130650508209262, 0.121301773217371, 0.15224858483004, 8, 0.251952281426633),
    (10, 5, 15, 0.5, 0.01, 0.123724879557207, 0.0134172746869163, 0.123724879557207, 0.123724879557207, 0, 0.137142154244123),
    (20, 20, 50, 0.02, 0, 0.117132820881895, 0.117132820881895, 0.0801771360929362, 0.123608344543223, 17, 0.197309956974831),
    (100, 10, 40, 1, 0, 0.126936737506644, 0.00316216413190028, 0.126936737506644, 0.126936737506644, 0, 0.130098901638544),
    (100, 10, 40, 1, 0.5, 0.999418101889774, 0.00316216413190028, 0.999418101889774, 0.999418101889774, 0, 1.00258026602167),
    (1000, 30, 150, 1, 0, 0.146342831667377, 0.000286610532315528, 0.146342831667377, 0.146342831667377, 0, 0.146629442199692),
]


@pytest.mark.parametrize("row", TABLE_9_3, ids=lambda r: f"Cu{r[0]}-s{r[1]}-t{r[2]}-e{r[3]}-m{r[4]}")
def test_table_9_3(row):
    cu, s, t, e, m, d_exact, d_inf, d_g, d_fdp, a_fdp, d_add = row
    rel = 1e-12
    assert gshm_delta(e, s, t, cu, "exact", m) == pytest.approx(d_exact, rel=rel)
    assert gshm_delta(e, s, t, cu, "fdp", m) == pytest.approx(d_fdp, rel=rel)
    assert gshm_delta(e, s, t, cu, "add", m) == pytest.approx(min(1.0, d_add), rel=rel)
    parts = gshm_delta_parts(e, s, t, cu, "fdp", m)
    assert parts["threshold"] == pytest.approx(d_inf, rel=rel)
    assert parts["gaussian"] == pytest.approx(d_g, rel=rel)
    if d_fdp > max(d_inf, d_g) * (1 + 1e-9):  # argmax unique only where fdp is strictly looser
        assert parts["worst_at_threshold_rows"] == a_fdp
    add_parts = gshm_delta_parts(e, s, t, cu, "add", m)
    assert add_parts["gaussian"] + add_parts["threshold"] == pytest.approx(d_add, rel=rel)  # unclipped


def test_per_term_vector_cu3():
    # seed 001 §9.3 per-term table for C_u = 3, σ = 2, Δτ = 2, ε = 0.1: T2, T3, T_fDP per a_=
    cu, s, t, e = 3, 2.0, 2.0, 0.1
    b = special.ndtr(t / s)
    assert b == pytest.approx(0.841344746068543, rel=1e-14)
    assert math.log(b) == pytest.approx(-0.17275377902345, rel=1e-13)
    expected = {0: (0.302227546678009, 0.302227546678009, 0.302227546678009),
                1: (0.314486637061527, 0.303068112793421, 0.361464377353337),
                2: (0.336436969521202, 0.305006376269546, 0.404873317392882)}
    terms = []
    for a, (t2e, t3e, tfe) in expected.items():
        mu = math.sqrt(cu - a) / s
        beta = b**a
        t2 = 1 - beta + beta * gaussian_delta(mu, e - a * math.log(b))
        t3 = gaussian_delta(mu, e + a * math.log(b))
        tf = 1 - beta + beta * gaussian_delta(mu, e)
        assert (t2, t3, tf) == pytest.approx((t2e, t3e, tfe), rel=1e-12)
        terms += [t2, t3]
    t1 = 1 - b**cu
    assert t1 == pytest.approx(0.404444882068536, rel=1e-12)
    assert max(0.0, 1 - math.exp(e) * b**cu) == pytest.approx(0.341809803551033, rel=1e-12)
    assert gshm_delta(e, s, t, cu) == pytest.approx(max(terms + [t1]), rel=1e-15)


# ---------------------------------------------------------------------------------------------------
# case study (seed 001 §6, §9.4)

def test_case_study_sigma_min_and_add_infeasible():
    s = gaussian_sigma(EPS, DLT, math.sqrt(CU))
    assert s == pytest.approx(SIGMA_MIN, abs=1e-6)
    sg, tau = gshm_calibrate(EPS, DLT, CU, "exact")
    assert sg == pytest.approx(SIGMA_MIN, abs=1e-6)
    # item 3: at σ_min add-the-deltas has no finite threshold. In floating point σ_G sits a few ulps
    # above the root (δ_G = δ(1 − 2e-14)), where the add margin is already far beyond any useful value;
    # a hair below the root it is infeasible.
    assert gshm_tau(EPS, DLT, sg, CU, "add") > 1.5 * tau
    with pytest.raises(InfeasibleError, match="Gaussian part alone"):
        gshm_tau(EPS, DLT, sg * (1 - 1e-12), CU, "add")
    # item 2: σ = 2228 exactly is (slightly) infeasible even for the exact analysis (δ_G = 1.0031e-5)
    with pytest.raises(InfeasibleError, match="raise sigma or delta"):
        gshm_tau(EPS, DLT, 2228.0, CU, "exact")


def test_case_study_tau_star_13948_at_sigma_2228():
    # item 2: the closed-form T1 threshold at σ = 2228 is Δτ = 13947.0301, τ* = τ + Δτ = 13948.03
    parts = gshm_delta_parts(EPS, 2228.0, 13947.0301, CU)
    assert parts["threshold"] == pytest.approx(1e-5, rel=1e-6)
    assert parts["gaussian"] == pytest.approx(1.003103848512687e-5, rel=1e-12)


# Figure 1a table (seed 001 §6.2): σ, δ_G(σ), Δτ_exact, Δτ_add (None = +inf)
FIG_1A = [
    (2228.5, 9.9988848e-6, 13950.1601, 16828.9467),
    (2229, 9.9668294e-6, 13953.2900, 15818.4972),
    (2230, 9.9030125e-6, 13959.5499, 15491.3791),
    (2235, 9.5897306e-6, 13990.8493, 15064.5758),
    (2240, 9.2859165e-6, 14022.1488, 14916.8706),
    (2250, 8.7056116e-6, 14084.7476, 14785.5001),
    (2275, 7.4023887e-6, 14241.2448, 14712.0601),
    (2300, 6.2867080e-6, 14397.7420, 14748.9867),
    (2350, 4.5180862e-6, 14710.7364, 14929.4867),
    (2396, 3.3197215e-6, 14998.6913, 15148.7168),
    (2400, 3.2313021e-6, 15023.7308, 15169.1312),
    (2450, 2.2997350e-6, 15336.7252, 15436.2650),
    (2500, 1.6287006e-6, 15649.7196, 15718.8839),
    (2528.48263, 1.3351378e-6, 15828.0177, 15884.4307),
    (2600, 8.0483268e-7, 16275.7084, 16309.6962),
    (2699, 3.9270242e-7, 16895.4373, 16912.2917),
    (3000, 3.9203254e-8, 18779.6635, 18781.5012),
]


@pytest.mark.parametrize("sigma,d_g,t_exact,t_add", FIG_1A)
def test_figure_1a_rows(sigma, d_g, t_exact, t_add):
    assert gshm_delta_parts(EPS, sigma, 1e9, CU)["gaussian"] == pytest.approx(d_g, rel=6e-8)
    te = gshm_tau(EPS, DLT, sigma, CU, "exact")
    ta = gshm_tau(EPS, DLT, sigma, CU, "add")
    # the grid-end row's σ is printed to 5 decimals: allow for that rounding (6.26·5e-6)
    tol = 5e-4 if sigma != 2528.48263 else 1e-3
    assert te == pytest.approx(t_exact, abs=tol)
    assert ta == pytest.approx(t_add, abs=tol)
    # exact closed form: Δτ_exact = 6.2598878379724·σ
    assert te == pytest.approx(6.2598878379724 * sigma, rel=1e-12)
    # item 7: the full Eq. 5.8 at Δτ_exact returns δ = 1e-5 (the lower bound is attained)
    assert gshm_delta(EPS, sigma, te, CU) == pytest.approx(DLT, rel=1e-12)
    assert gshm_delta(EPS, sigma, te, CU) <= DLT
    assert gshm_delta(EPS, sigma, ta, CU, "add") <= DLT


def test_figure_1a_sigma_min_row():
    _, tau = gshm_calibrate(EPS, DLT, CU, "exact")
    assert tau == pytest.approx(13950.0513, abs=5e-4)


def test_convergence_crossings():
    # item 4/5: Δτ_add/Δτ_exact = 1.01 at σ = 2396.0312 and 1.001 at σ = 2698.6757
    def ratio(s):
        return gshm_tau(EPS, DLT, s, CU, "add") / gshm_tau(EPS, DLT, s, CU, "exact")

    s1 = optimize.brentq(lambda s: ratio(s) - 1.01, 2300, 2500, xtol=1e-6)
    s2 = optimize.brentq(lambda s: ratio(s) - 1.001, 2600, 2800, xtol=1e-6)
    assert s1 == pytest.approx(2396.0312, abs=1e-3)
    assert s2 == pytest.approx(2698.6757, abs=1e-3)
    assert gshm_tau(EPS, DLT, s1, CU, "add") == pytest.approx(15148.875, abs=1e-3)
    assert gshm_tau(EPS, DLT, s1, CU, "exact") == pytest.approx(14998.886, abs=1e-3)
    assert gshm_tau(EPS, DLT, s2, CU, "add") == pytest.approx(16910.301, abs=1e-3)
    assert gshm_tau(EPS, DLT, s2, CU, "exact") == pytest.approx(16893.407, abs=1e-3)


# ---------------------------------------------------------------------------------------------------
# Scenario 2 (seed 001 §6.3)

def test_scenario_2():
    s = 2228.0
    # Δτ with δ_inf = 1e-8: the exact analysis at large ε is limited by δ_inf only
    dtau = gshm_tau(2.0, 1e-8, s, CU, "exact")
    assert dtau == pytest.approx(16176.7142, abs=1e-4)
    assert gshm_tau(2.0, 1e-8, SIGMA_MIN, CU, "exact") == pytest.approx(16180.2184, abs=1e-4)
    assert gshm_delta_parts(1.0, s, 16176.0, CU)["threshold"] == pytest.approx(1.00237e-8, rel=1e-5)
    eps_k = {8: 0.5045578, 7: 0.4577865, 6: 0.4064764, 5: 0.3490823}
    ratios = {8: 2.000000, 7: 1.100000, 6: 1.010000, 5: 1.001000}
    ratios_16176 = {8: 1.997633, 7: 1.100237, 6: 1.010024, 5: 1.001002}
    for k, e_ref in eps_k.items():
        # ε where δ_G = 10^-k (δ_inf negligible at a huge margin)
        e = gshm_epsilon(s, 1e6, 10.0**-k, CU, "exact")
        assert e == pytest.approx(e_ref, abs=1e-7)
        d_exact = gshm_delta(e, s, dtau, CU, "exact")
        assert d_exact == pytest.approx(10.0**-k, rel=1e-6)
        assert gshm_delta(e, s, dtau, CU, "fdp") == pytest.approx(d_exact, rel=1e-12)
        assert gshm_delta(e, s, dtau, CU, "add") / d_exact == pytest.approx(ratios[k], abs=2e-6)
        r16176 = gshm_delta(e, s, 16176.0, CU, "add") / gshm_delta(e, s, 16176.0, CU, "exact")
        assert r16176 == pytest.approx(ratios_16176[k], abs=2e-6)
    # ε range upper end: 0.5046 at σ = 2228, 0.5044 at σ_min
    assert gshm_epsilon(SIGMA_MIN, 1e6, 1e-8, CU) == pytest.approx(0.5044433, abs=1e-7)


@pytest.mark.parametrize("eps,d_gshm,d_add", [
    (0.1, 9.333617e-3, 9.333627e-3),
    (0.2, 1.078583e-3, 1.078593e-3),
    (0.3, 5.724133e-5, 5.725133e-5),
    (0.4, 1.315439e-6, 1.325439e-6),
    (0.5, 1.262369e-8, 2.262369e-8),
])
def test_scenario_2_curve(eps, d_gshm, d_add):
    assert gshm_delta(eps, 2228.0, 16176.714, CU) == pytest.approx(d_gshm, rel=1e-6)
    assert gshm_delta(eps, 2228.0, 16176.714, CU, "add") == pytest.approx(d_add, rel=1e-6)


def test_corollary_5_4_2_worked_check():
    # seed 001 §4.8: C_u = 1, σ = 1, ε = 2
    dg = gshm_delta_parts(2.0, 1.0, 1e3, 1)["gaussian"]
    assert dg == pytest.approx(0.0209236358211138, rel=1e-13)
    te, ta = gshm_tau(2.0, 0.05, 1.0, 1, "exact"), gshm_tau(2.0, 0.05, 1.0, 1, "add")
    assert te == pytest.approx(1.64485362695147, rel=1e-12)
    assert ta == pytest.approx(1.89454484083461, rel=1e-12)
    assert ta / te == pytest.approx(1.15180147934860, rel=1e-12)
    r03 = gshm_tau(2.0, 0.03, 1.0, 1, "add") / gshm_tau(2.0, 0.03, 1.0, 1, "exact")
    assert r03 == pytest.approx(1.25611231626669, rel=1e-12)


# ---------------------------------------------------------------------------------------------------
# seed 000 (CSH paper) GSHM numbers: §5.3, §6.1, §6.3

def test_seed000_minimal_thresholds():
    # §5.3: min over σ of the minimal margin, k = 51914, δ = 1e-5
    s_add, t_add = gshm_calibrate(0.349, 1e-5, CU, "add")
    s_ex, t_ex = gshm_calibrate(0.349, 1e-5, CU, "exact")
    assert t_add == pytest.approx(14712.04, abs=0.05)
    assert s_add == pytest.approx(2274.43, abs=0.5)  # the minimum is flat in σ
    assert t_ex == pytest.approx(13950.05, abs=0.05)
    assert s_ex == pytest.approx(2228.48, abs=0.01)
    assert gshm_calibrate(0.35, 1e-5, CU, "add")[1] == pytest.approx(14673.33, abs=0.05)
    assert gshm_calibrate(0.35, 1e-5, CU, "exact")[1] == pytest.approx(13913.45, abs=0.05)
    # k = 10 (Fig. 3b)
    s10, t10 = gshm_calibrate(0.349, 1e-5, 10, "add")
    assert t10 == pytest.approx(158.008, abs=5e-4) and s10 == pytest.approx(31.925, abs=0.01)
    assert gshm_calibrate(0.349, 1e-5, 10, "exact") == pytest.approx((30.9291, 147.019), abs=5e-4)
    assert gshm_calibrate(0.35, 1e-5, 10, "add")[1] == pytest.approx(157.591, abs=5e-4)
    assert gshm_calibrate(0.35, 1e-5, 10, "exact")[1] == pytest.approx(146.633, abs=5e-4)


@pytest.mark.parametrize("eps,k,tau", [
    (0.35, 51914, 13913.4546), (0.35, 10, 146.6333), (0.35, 1, 41.6039),
    (0.349, 51914, 13950.0513), (1.0, 51914, 5320.9744), (0.1, 51914, 43857.8957),
])
def test_seed000_closed_form_min_tau(eps, k, tau):
    # §6.1 item 5: τ*_GSHM,exact = σ*_G · Φ^{-1}((1−δ)^{1/k})
    assert gshm_calibrate(eps, 1e-5, k, "exact")[1] == pytest.approx(tau, abs=1e-4)


@pytest.mark.parametrize("sigma_tot,add_35,add_349,exact", [
    (2230, 14991.15, 15491.38, 13959.55), (2250, 14709.76, 14785.50, 14084.75),
    (2300, 14726.49, 14748.99, 14397.74), (2500, 15715.47, 15718.88, 15649.72),
    (3000, 18781.39, 18781.50, 18779.66),
])
def test_seed000_curve_values(sigma_tot, add_35, add_349, exact):
    # The ε = 0.35 add column is 0.005 high at σ = 2250 and 3000 in the spec: 40-digit mpmath of the
    # same closed form gives 14709.754515 and 18781.384969 (which we match to 1e-9), so allow 0.01.
    assert gshm_tau(0.35, 1e-5, sigma_tot, CU, "add") == pytest.approx(add_35, abs=0.01)
    assert gshm_tau(0.349, 1e-5, sigma_tot, CU, "add") == pytest.approx(add_349, abs=0.005)
    for e in (0.35, 0.349):
        assert gshm_tau(e, 1e-5, sigma_tot, CU, "exact") == pytest.approx(exact, abs=0.005)


@pytest.mark.parametrize("eps,k,sigma,tau,add,exact", [
    (0.35, 10, 20, 140, 8.8325979538e-04, 8.8325978258e-04),
    (0.35, 10, 18, 133, 1.8087637416e-03, 1.8087637409e-03),
    (1.0, 10, 10, 60, 1.0982034680e-04, 1.0981048092e-04),
    (0.35, 100, 55, 360, 2.2359455959e-03, 2.2359426302e-03),
    (0.35, 1, 8, 50, 1.1314166746e-04, 1.1314146224e-04),
    (0.35, 2, 10, 60, 3.6411512771e-04, 3.6411315453e-04),
    (0.35, 51914, 1150, 7700, 3.6506185394e-03, 3.6500612119e-03),
    (0.35, 51914, 2300, 14500, 1.3552929633e-05, 7.5121847322e-06),
])
def test_seed000_golden_deltas(eps, k, sigma, tau, add, exact):
    # §6.3 (11 significant digits printed)
    assert gshm_delta(eps, sigma, tau, k, "add") == pytest.approx(add, rel=1e-9)
    assert gshm_delta(eps, sigma, tau, k, "exact") == pytest.approx(exact, rel=1e-9)


def test_seed000_k1_degeneracy():
    # §6.1 item 7: k = 1 gives max(1 − Φ(τ/σ), BW(1, σ, ε))
    r = np.random.default_rng(71)
    for _ in range(30):
        s, t, e = float(r.uniform(0.5, 20)), float(r.uniform(0, 80)), float(r.uniform(0, 3))
        ref = max(special.ndtr(-t / s), gaussian_delta(1 / s, e))
        assert gshm_delta(e, s, t, 1) == pytest.approx(ref, rel=1e-14)


# ---------------------------------------------------------------------------------------------------
# properties P1–P16 (seed 001 §9.1) on seeded random grids

def _random_params(seed: int, n: int, max_cu: int = 300):
    r = np.random.default_rng(seed)
    for _ in range(n):
        cu = int(r.integers(1, max_cu + 1))
        sigma = float(np.exp(r.uniform(math.log(0.3), math.log(50))))
        x = float(r.uniform(0, 8))
        eps = float(r.uniform(0, 4)) if r.random() < 0.8 else float(r.uniform(0, 0.05))
        mu_o2 = 0.0 if r.random() < 0.6 else float(10 ** r.uniform(-3, 0))
        yield cu, sigma, x * sigma, eps, mu_o2


def test_p1_p2_p3_ordering():
    for cu, s, t, e, m in _random_params(1, 150):
        p = gshm_delta_parts(e, s, t, cu, "exact", m)
        d_inf, d_g, d_ex = p["threshold"], p["gaussian"], p["total"]
        d_fdp = gshm_delta(e, s, t, cu, "fdp", m)
        d_add = gshm_delta(e, s, t, cu, "add", m)
        assert max(d_inf, d_g) <= d_ex * (1 + 1e-12)                       # P1
        assert d_ex <= (d_inf + (1 - d_inf) * d_g) * (1 + 1e-12) + 1e-300  # P2 (stronger form)
        if d_inf > 1e-12 and d_g > 1e-12 and d_inf + d_g < 1:
            assert d_ex < d_inf + d_g
        assert d_ex <= d_fdp * (1 + 1e-12) and d_fdp <= d_add * (1 + 1e-12)  # P3


def test_p4_cu_one_equality():
    for _, s, t, e, m in _random_params(4, 100):
        p = gshm_delta_parts(e, s, t, 1, "exact", m)
        assert p["total"] == pytest.approx(max(p["threshold"], p["gaussian"]), rel=1e-13)
        assert gshm_delta(e, s, t, 1, "fdp", m) == pytest.approx(p["total"], rel=1e-13)


def test_p5_only_the_margin_matters():
    # the accountant's interface takes τ* − τ; shifting both thresholds by the same integer is exact
    for cu, s, t, e, m in _random_params(5, 20):
        t_star, t_pre = 1000.0 + round(t * 1024) / 1024, 1000.0  # dyadic: the shifts below are exact
        for shift in (0.0, 1.0, 37.0, 1e4):
            assert gshm_delta(e, s, (t_star + shift) - (t_pre + shift), cu, "exact", m) == \
                gshm_delta(e, s, t_star - t_pre, cu, "exact", m)


@pytest.mark.parametrize("analysis", ["exact", "fdp", "add"])
def test_p6_p7_p8_monotonicity(analysis):
    for cu, s, t, e, m in _random_params(6, 40, max_cu=120):
        d = gshm_delta(e, s, t, cu, analysis, m)
        tol = 1 + 1e-12
        assert gshm_delta(e + 0.05, s, t, cu, analysis, m) <= d * tol           # P6
        assert gshm_delta(e, s, t * 1.05 + 0.01, cu, analysis, m) <= d * tol     # P7
        assert gshm_delta(e, s, t, cu + 1, analysis, m) >= d / tol               # P8 (C_u)
        assert gshm_delta(e, s, t, cu, analysis, m + 0.01) >= d / tol            # P8 (μ_o²)


def test_p9_p10_p11_limits():
    for cu, s, t, e, m in _random_params(9, 60, max_cu=200):
        p = gshm_delta_parts(e, s, t, cu, "exact", m)
        # P9: ε → ∞ leaves δ_inf ("∞": far beyond μ(C_u)²/2, where every Gaussian term underflows)
        mu2 = cu * (1 / s**2 + m)
        e_big = 60 * math.sqrt(mu2) + mu2 + 50
        assert gshm_delta(e_big, s, t, cu, "exact", m) == pytest.approx(p["threshold"], rel=1e-12, abs=1e-300)
        # P10: Δτ → ∞ leaves δ_G
        assert gshm_delta(e, s, 60 * s, cu, "exact", m) == pytest.approx(p["gaussian"], rel=1e-12)
        # P11: Δτ = 0
        assert gshm_delta(e, s, 0.0, cu, "exact", m) >= -math.expm1(-cu * math.log(2)) * (1 - 1e-15)


def test_p13_threshold_ratio_cu_one():
    r = np.random.default_rng(13)
    for _ in range(40):
        s, e = float(r.uniform(0.5, 10)), float(r.uniform(0.05, 3))
        dg = gshm_delta_parts(e, s, 1e9, 1)["gaussian"]
        if not 1e-6 < dg < 0.4:
            continue
        dlt = float(dg + r.uniform(0.01, 1) * (0.5 - dg))
        ratio = gshm_tau(e, dlt, s, 1, "add") / gshm_tau(e, dlt, s, 1, "exact")
        expected = special.ndtri(1 - dlt + dg) / special.ndtri(1 - dlt)
        assert ratio == pytest.approx(expected, rel=1e-9)
        assert ratio > 1
    # unbounded as δ → δ_G⁺
    dg = gshm_delta_parts(2.0, 1.0, 1e9, 1)["gaussian"]
    assert gshm_tau(2.0, dg * (1 + 1e-9), 1.0, 1, "add") / gshm_tau(2.0, dg * (1 + 1e-9), 1.0, 1) > 3


def test_p14_lower_bound_attained_soft():
    # empirical, not a theorem (seed 001 §4.7); a regression check on the full evaluation
    for cu, s, t, e, m in _random_params(14, 120):
        p = gshm_delta_parts(e, s, t, cu, "exact", m)
        assert p["total"] == pytest.approx(max(p["threshold"], p["gaussian"]), rel=1e-9)


def _hockey_stick_direct(cu_plus: int, a_eq: int, sigma: float, dtau: float, eps: float) -> tuple[float, float]:
    """P16: H_{e^ε}(P‖Q) and H_{e^ε}(Q‖P) by numerical integration over the output space.

    P: the unit's a_+ rows at a huge count N (Gaussian outputs, suppression negligible) plus a_= rows at
    count τ (released w.p. 1 − b); Q: the same data without the unit, the a_+ rows at N − 1, the a_=
    rows below τ (never released). The Gaussian coordinates are integrated with quad.
    """
    b = special.ndtr(dtau / sigma)
    beta = b**a_eq
    e_eps = math.exp(eps)
    pdf = lambda y, m: stats.norm.pdf(y, loc=m, scale=sigma)
    lim = 12 * sigma
    if cu_plus == 0:
        return 1 - beta, max(0.0, 1 - e_eps * beta)
    if cu_plus == 1:
        fwd = lambda y: max(0.0, beta * pdf(y, 1.0) - e_eps * pdf(y, 0.0))
        rev = lambda y: max(0.0, pdf(y, 0.0) - e_eps * beta * pdf(y, 1.0))
        h1 = integrate.quad(fwd, -lim, lim, epsabs=1e-14, epsrel=1e-12, limit=500, points=[0.5])[0]
        h2 = integrate.quad(rev, -lim, lim, epsabs=1e-14, epsrel=1e-12, limit=500, points=[0.5])[0]
        return (1 - beta) + h1, h2
    # a_+ = 2: rotate (y1, y2) to u = (y1 + y2)/√2, w = (y1 − y2)/√2; the shift (1, 1) becomes (√2, 0),
    # both laws have the same N(0, σ²) density in w, which integrates to 1 (Fubini)
    r2 = math.sqrt(2.0)
    fwd = lambda u: max(0.0, beta * pdf(u, r2) - e_eps * pdf(u, 0.0))
    rev = lambda u: max(0.0, pdf(u, 0.0) - e_eps * beta * pdf(u, r2))
    h1 = integrate.quad(fwd, -lim, lim, epsabs=1e-14, epsrel=1e-12, limit=500, points=[r2 / 2])[0]
    h2 = integrate.quad(rev, -lim, lim, epsabs=1e-14, epsrel=1e-12, limit=500, points=[r2 / 2])[0]
    return (1 - beta) + h1, h2


@pytest.mark.parametrize("sigma,dtau,eps", [(1.0, 1.0, 0.3), (2.0, 2.5, 0.05), (1.5, 0.5, 1.0)])
def test_p16_direct_integration(sigma, dtau, eps):
    for cu in (1, 2):
        worst = 0.0
        for a_plus in range(cu + 1):
            for a_eq in range(cu - a_plus + 1):
                worst = max(worst, *_hockey_stick_direct(a_plus, a_eq, sigma, dtau, eps))
        assert gshm_delta(eps, sigma, dtau, cu, "exact") == pytest.approx(worst, rel=1e-7)


# ---------------------------------------------------------------------------------------------------
# inversions: conservative and (nearly) smallest

@pytest.mark.parametrize("analysis", ["exact", "fdp", "add"])
def test_tau_inverse_smallest_and_conservative(analysis):
    r = np.random.default_rng(21)
    for cu, s, _, e, m in _random_params(22, 40, max_cu=200):
        e = max(e, 0.05)
        dg = gshm_delta_parts(e, s, 1e12 * s, cu, "exact", m)["gaussian"]
        if dg > 0.5:
            continue
        dlt = float(dg + r.uniform(0.05, 1.0) * (0.9 - dg)) if r.random() < 0.5 else float(min(0.99, dg * 1.5 + 1e-12))
        t = gshm_tau(e, dlt, s, cu, analysis, m)
        assert gshm_delta(e, s, t, cu, analysis, m) <= dlt
        if t > 1e-9:
            assert gshm_delta(e, s, t * (1 - 1e-8), cu, analysis, m) > dlt


@pytest.mark.parametrize("analysis", ["exact", "fdp", "add"])
def test_epsilon_inverse(analysis):
    for cu, s, t, _, m in _random_params(31, 25, max_cu=200):
        d_inf = gshm_delta_parts(1.0, s, t, cu, "exact", m)["threshold"]
        if d_inf > 0.45:
            continue
        dlt = d_inf * 2 + 1e-9
        e = gshm_epsilon(s, t, dlt, cu, analysis, m)
        assert gshm_delta(e, s, t, cu, analysis, m) <= dlt
        if e > 0:
            assert gshm_delta(e * (1 - 1e-9), s, t, cu, analysis, m) > dlt


@pytest.mark.parametrize("analysis", ["exact", "fdp", "add"])
def test_sigma_inverse(analysis):
    for cu in (1, 5, 100, CU):
        _, t_min = gshm_calibrate(0.5, 1e-6, cu, analysis)
        # at exactly the minimal add margin the feasible σ set is a single point; step just inside it
        for factor in ((1.0 if analysis != "add" else 1.0 + 1e-6), 1.05, 1.5):
            tau = t_min * factor
            s = gshm_sigma(0.5, 1e-6, tau, cu, analysis)
            assert gshm_delta(0.5, s, tau, cu, analysis) <= 1e-6
            # nothing smaller works (checked just below and on a coarse grid below)
            assert gshm_delta(0.5, s * (1 - 1e-7), tau, cu, analysis) > 1e-6
            for s_low in np.linspace(s * 0.5, s * 0.999, 7):
                assert gshm_delta(0.5, float(s_low), tau, cu, analysis) > 1e-6
    with pytest.raises(InfeasibleError, match="raise tau or delta"):
        gshm_sigma(0.349, 1e-5, 13000.0, CU, analysis)


@pytest.mark.parametrize("analysis", ["exact", "fdp", "add"])
def test_calibrate_is_minimal(analysis):
    # the returned τ is feasible and no σ on a grid reaches a smaller τ
    for cu, e, dlt, m in [(1, 1.0, 1e-6, 0.0), (7, 0.3, 1e-8, 0.0), (300, 2.0, 1e-5, 1e-5), (2, 0.05, 0.1, 0.0)]:
        s, t = gshm_calibrate(e, dlt, cu, analysis, m)
        assert gshm_delta(e, s, t, cu, analysis, m) <= dlt
        for f in (1.0001, 1.001, 1.01, 1.03, 1.1, 1.3, 2.0):
            try:
                t2 = gshm_tau(e, dlt, s * f, cu, analysis, m)
            except InfeasibleError:
                continue
            assert t2 >= t * (1 - 1e-7)


def test_fdp_closed_form_matches_bisection():
    # the fdp inversion is closed form; bisection on Eq. 7.1 must agree
    for cu, s, e, dlt in [(2, 2.0, 0.05, 0.35), (10, 10.0, 0.01, 0.2), (20, 20.0, 0.02, 0.15), (3, 2.0, 0.1, 0.45)]:
        t = gshm_tau(e, dlt, s, cu, "fdp")
        ref = optimize.brentq(lambda x: gshm_delta(e, s, x, cu, "fdp") - dlt, 0.0, 100 * s, xtol=1e-13)
        assert t == pytest.approx(ref, rel=1e-9)
        # where the fdp bound is strictly looser, its margin is larger than the exact one
        assert t >= gshm_tau(e, dlt, s, cu, "exact") * (1 - 1e-12)


def test_chunked_evaluation_matches_single_block(monkeypatch):
    from sparsedp.accounting import gshm as g
    args = (0.7, 60.0, 150.0, 1000)
    for an in ("exact", "fdp"):
        full = gshm_delta(*args, an, 1e-4)
        t_full = gshm_tau(0.7, 0.2, 60.0, 1000, an, 1e-4)
        monkeypatch.setattr(g, "CHUNK", 37)
        assert gshm_delta(*args, an, 1e-4) == full
        assert gshm_tau(0.7, 0.2, 60.0, 1000, an, 1e-4) == t_full
        monkeypatch.undo()


def test_aggregate_columns_infeasible_message():
    with pytest.raises(InfeasibleError, match="aggregate columns"):
        gshm_calibrate(0.349, 1e-5, 100, "exact", mu_o2=1.0)
    with pytest.raises(InfeasibleError, match="not above the threshold part"):
        gshm_epsilon(2228.0, 10000.0, 1e-5, CU)


@pytest.mark.parametrize("call,exc", [
    (lambda: gshm_delta(-0.1, 1, 1, 1), InvalidParameterError),
    (lambda: gshm_delta(0.1, 0, 1, 1), InvalidParameterError),
    (lambda: gshm_delta(0.1, 1, -1, 1), InvalidParameterError),
    (lambda: gshm_delta(0.1, 1, 1, 0), InvalidParameterError),
    (lambda: gshm_delta(0.1, 1, 1, 2.0), InvalidTypeError),
    (lambda: gshm_delta(0.1, 1, 1, 1, "tight"), InvalidParameterError),
    (lambda: gshm_delta(0.1, 1, 1, 1, "exact", -1.0), InvalidParameterError),
    (lambda: gshm_tau(0.0, 1e-5, 1, 1), InvalidParameterError),
    (lambda: gshm_tau(0.1, 1.0, 1, 1), InvalidParameterError),
    (lambda: gshm_sigma(0.1, 1e-5, float("nan"), 1), InvalidParameterError),
    (lambda: gshm_epsilon(1, 1, 0.0, 1), InvalidParameterError),
    (lambda: gshm_calibrate(1.0, 1e-5, True), InvalidTypeError),
])
def test_invalid_arguments(call, exc):
    with pytest.raises(exc):
        call()


def test_results_are_python_floats():
    for an in ("exact", "fdp", "add"):
        s, t = gshm_calibrate(0.5, 1e-6, 1000, an)
        assert type(s) is float and type(t) is float
        assert type(gshm_tau(0.5, 1e-6, s * 1.1, 1000, an)) is float
        assert type(gshm_sigma(0.5, 1e-6, t * 1.1, 1000, an)) is float
        assert type(gshm_epsilon(s, t * 1.1, 1e-6, 1000, an)) is float
        assert type(gshm_delta(0.5, s, t, 1000, an)) is float
        assert all(type(x) is float for x in gshm_delta_parts(0.5, s, t, 1000, an).values())
