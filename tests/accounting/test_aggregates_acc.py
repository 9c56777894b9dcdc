"""Joint count + aggregate-column accounting (sparsedp.accounting.aggregates, docs/proofs/aggregates.md).

The exact-enumeration tests build the full output distributions of the joint release (release/suppression
event, noisy count, noisy column) for every neighbouring configuration of one unit touching l0 <= 2 keys, from
the discrete-Gaussian pmf summed over windows whose neglected mass is below 1e-30, and compute the true
hockey-stick divergence in both directions. The accountant must be above it (it is an upper bound of the
privacy profile) and close to it.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest

from sparsedp.accounting.aggregates import (
    aggregate_impact, calibrate_joint_gshm, calibrate_joint_gshm_continuous, column_scales, joint_gshm_delta,
    joint_gshm_delta_continuous, joint_hockey_stick,
)
from sparsedp.accounting.discrete import dgauss_pmf
from sparsedp.accounting.discrete_histograms import calibrate_gshm_discrete, gshm_discrete_delta
from sparsedp.accounting.gaussian import gaussian_delta
from sparsedp.accounting.gshm import gshm_calibrate
from sparsedp.errors import InvalidParameterError

PRE = 1


def _window(s: float) -> np.ndarray:
    w = int(math.ceil(math.sqrt(2 * s * 70))) + 2  # pmf beyond is < e^-70
    return np.arange(-w, w + 1)


def _key_law(c: int, a: int, s: float, s1: float, m: int, cmax: int, D: int) -> np.ndarray:
    """Output law of one key with count c and column total a: [P(∅), P(count = v, column = y) for the grid]."""
    zw, yw = _window(s), _window(s1)
    vs = np.arange(PRE + m, cmax + zw[-1] + 1)             # released count values
    ys = np.arange(-D + yw[0], D + yw[-1] + 1)             # column values
    out = np.zeros(1 + vs.size * ys.size)
    if c < PRE:
        out[0] = 1.0
        return out
    pz = dgauss_pmf(vs - c, s) * (np.abs(vs - c) <= zw[-1])
    py = dgauss_pmf(ys - a, s1) * (np.abs(ys - a) <= yw[-1])
    out[1:] = np.outer(pz, py).ravel()
    out[0] = 1.0 - out[1:].sum()
    return out


def _hs(p: np.ndarray, q: np.ndarray, eps: float) -> float:
    return float(np.sum(np.maximum(p - math.exp(eps) * q, 0.0)))


def _hs_product(p1: np.ndarray, q1: np.ndarray, p2: np.ndarray, q2: np.ndarray, eps: float) -> float:
    """``_hs(outer(p1, p2).ravel(), outer(q1, q2).ravel(), eps)`` without the n1·n2 outer products.

    Σ_{x1,x2} max(p1 p2 − e^ε q1 q2, 0) = Σ_{x1} p1(x1) · Σ_{x2: p2/q2 > c(x1)} (p2 − c(x1) q2) with
    c(x1) = e^ε q1(x1) / p1(x1) (x1 with p1 = 0 add nothing; q1 = 0 gives c = 0). The inner sums are tails of
    the x2 sorted by likelihood ratio, summed from the largest ratio down (the same terms as the direct sum)."""
    keep = p2 > 0                      # x2 with p2 = 0 never add a positive term
    pk, qk = p2[keep], q2[keep]
    with np.errstate(divide="ignore"):
        ratio = np.where(qk > 0, pk / np.where(qk > 0, qk, 1.0), np.inf)
    order = np.argsort(-ratio, kind="stable")
    r_desc = ratio[order]
    ptail = np.concatenate(([0.0], np.cumsum(pk[order])))
    qtail = np.concatenate(([0.0], np.cumsum(qk[order])))
    on = p1 > 0
    c = math.exp(eps) * q1[on] / p1[on]
    n_above = np.searchsorted(-r_desc, -c, side="left")   # count of ratios strictly above c
    inner = np.maximum(ptail[n_above] - c * qtail[n_above], 0.0)
    return float(np.sum(p1[on] * inner))


def _true_delta(eps, s, s1, m, D, l0, counts):
    """max over configurations of both hockey-stick directions (one unit on l0 keys; column shift in [-D, D])."""
    cmax = max(counts)
    opts = [(c, d) for c in counts for d in range(-D, D + 1)]
    best = 0.0
    if l0 == 2:
        laws = {(c, d): (_key_law(c, d, s, s1, m, cmax, D), _key_law(c - 1, 0, s, s1, m, cmax, D))
                for c, d in opts}
        for a, b in itertools.combinations_with_replacement(opts, 2):
            (p1, q1), (p2, q2) = laws[a], laws[b]
            best = max(best, _hs_product(p1, q1, p2, q2, eps), _hs_product(q1, p1, q2, p2, eps))
        return best
    for conf in itertools.combinations_with_replacement(opts, l0):
        p = q = None
        for c, d in conf:
            lp = _key_law(c, d, s, s1, m, cmax, D)          # with the unit: count c, column d
            lq = _key_law(c - 1, 0, s, s1, m, cmax, D)      # without: count c - 1, column 0
            p = lp if p is None else np.outer(p, lp).ravel()
            q = lq if q is None else np.outer(q, lq).ravel()
        best = max(best, _hs(p, q, eps), _hs(q, p, eps))
    return best


@pytest.mark.parametrize("eps,s,s1,m,D", [
    (0.5, 3.0, 40.0, 4, 3),
    (1.0, 3.0, 30.0, 8, 3),
    (1.0, 2.0, 20.0, 5, 2),
    (0.3, 4.0, 100.0, 6, 5),
])
def test_l0_1_accountant_above_and_close_to_enumerated_delta(eps, s, s1, m, D):
    counts = list(range(PRE, PRE + m + 14))
    true = _true_delta(eps, s, s1, m, D, 1, counts)
    acc = joint_gshm_delta(eps, Fraction(s), m, 1, [Fraction(s1)], [D])
    assert acc >= true * (1 - 1e-9)
    assert acc <= true * 1.03 + 1e-12


@pytest.mark.parametrize("eps,s,s1,m,D", [
    (0.7, 1.5, 12.0, 4, 1),
    (0.5, 2.0, 12.0, 6, 1),
])
def test_l0_2_accountant_above_and_close_to_enumerated_delta(eps, s, s1, m, D):
    counts = [PRE, PRE + 1, PRE + 2, PRE + m + 8]   # at, just above and far above the pre-threshold
    true = _true_delta(eps, s, s1, m, D, 2, counts)
    acc = joint_gshm_delta(eps, Fraction(s), m, 2, [Fraction(s1)], [D])
    assert acc >= true * (1 - 1e-9)
    assert acc <= true * 1.10 + 1e-12


def test_product_hockey_stick_equals_the_direct_sum():
    """The l0 = 2 enumeration's shortcut is the same sum as the direct one over the outer products (random laws
    with zeros on either side, and the two-key laws of the enumeration itself)."""
    rng = np.random.default_rng(5)
    for n1, n2, eps in ((40, 60, 0.5), (90, 30, 1.3), (7, 200, 0.0)):
        p1, q1, p2, q2 = (rng.dirichlet(np.ones(n)) for n in (n1, n1, n2, n2))
        p1[:3], q1[3:5], p2[-4:], q2[:2] = 0.0, 0.0, 0.0, 0.0
        for a, b, c, d in ((p1, q1, p2, q2), (q1, p1, q2, p2)):
            direct = _hs(np.outer(a, c).ravel(), np.outer(b, d).ravel(), eps)
            assert _hs_product(a, b, c, d, eps) == pytest.approx(direct, rel=1e-12, abs=1e-15)
    eps, s, s1, m, D = 0.7, 1.5, 6.0, 4, 1
    for c1, c2 in ((PRE, PRE + 1), (PRE + 2, PRE + m + 8)):
        laws = [(_key_law(c, 1, s, s1, m, PRE + m + 8, D), _key_law(c - 1, 0, s, s1, m, PRE + m + 8, D))
                for c in (c1, c2)]
        (p1, q1), (p2, q2) = laws
        direct = _hs(np.outer(p1, p2).ravel(), np.outer(q1, q2).ravel(), eps)
        assert direct > 1e-6 and _hs_product(p1, q1, p2, q2, eps) == pytest.approx(direct, rel=1e-10)


def test_enumeration_is_sensitive_to_the_column():
    """The true δ with the column is well above the count-only δ: the check above is not vacuous."""
    eps, s, s1, m, D = 1.0, 3.0, 30.0, 8, 3
    counts = list(range(PRE, PRE + m + 14))
    true = _true_delta(eps, s, s1, m, D, 1, counts)
    assert true > 1.2 * gshm_discrete_delta(eps, s, m, 1)


def test_hockey_stick_bound_tracks_continuous_gaussian_at_large_scales():
    for j, eps, s, ds in [(1, 1.0, 400.0, [1000]), (5, 0.5, 1e4, [4096, 7]), (40, 2.0, 2e3, [300])]:
        ss = [s * d * d * 1.3 for d in ds]
        mu = math.sqrt(j / s + j * sum(d * d / x for d, x in zip(ds, ss)))
        b = joint_hockey_stick(j, eps, s, ss, ds)
        f = gaussian_delta(mu, eps)
        assert f * (1 - 1e-6) <= b <= f * (1 + 1e-3) + 1e-15


def test_without_columns_equals_count_only():
    assert joint_gshm_delta(1.0, 9, 6, 3, [], []) == gshm_discrete_delta(1.0, 9, 6, 3)
    assert joint_hockey_stick(3, 0.2, 9, [100], [0]) == pytest.approx(
        joint_hockey_stick(3, 0.2, 9, [], []), rel=0)


def test_monotone_in_sensitivity_and_scale():
    base = joint_gshm_delta(1.0, 16, 40, 4, [16 * 100], [10])
    assert joint_gshm_delta(1.0, 16, 40, 4, [16 * 100], [20]) > base
    assert joint_gshm_delta(1.0, 16, 40, 4, [16 * 400], [10]) < base


@pytest.mark.parametrize("eps,delta,l0,ds", [(1.0, 1e-6, 1, [4096]), (0.5, 1e-5, 3, [2048, 100]),
                                             (2.0, 1e-8, 10, [4000])])
def test_calibration_meets_delta_and_is_minimal(eps, delta, l0, ds):
    cal = calibrate_joint_gshm(eps, delta, l0, ds)
    assert cal.parts.total <= delta
    assert joint_gshm_delta(eps, cal.count_sigma2, cal.margin, l0, cal.column_sigma2s, ds) <= delta
    assert joint_gshm_delta(eps, cal.count_sigma2, cal.margin - 1, l0, cal.column_sigma2s, ds) > delta
    for sk, d in zip(cal.column_sigma2s, ds):  # default allocation: same μ per column as the count
        assert Fraction(d * d) / sk <= 1 / cal.count_sigma2
        assert float(Fraction(d * d) / sk) == pytest.approx(1 / float(cal.count_sigma2), rel=1e-4)
    # close to the continuous reference with μ_o² = J/σ²
    ref = calibrate_joint_gshm_continuous(eps, delta, l0, ds)
    assert math.sqrt(float(cal.count_sigma2)) == pytest.approx(ref.sigma, rel=0.02)
    assert ref.delta_achieved <= delta


def test_weights_move_noise_between_columns():
    a = calibrate_joint_gshm(1.0, 1e-6, 2, [1000, 1000], weights=[1.0, 4.0])
    assert a.column_sigma2s[0] == pytest.approx(4 * a.column_sigma2s[1], rel=1e-6)
    assert a.column_noise_stds[0] == pytest.approx(2 * a.column_noise_stds[1], rel=1e-4)


def test_continuous_reference_matches_gshm_with_mu_o2():
    ref = calibrate_joint_gshm_continuous(1.0, 1e-6, 4, [100.0, 30.0])
    assert ref.mu_o2 == pytest.approx(2 / ref.sigma ** 2)
    assert joint_gshm_delta_continuous(1.0, ref.sigma, ref.tau, 4, ref.column_sigmas, [100.0, 30.0]) <= 1e-6
    s0, t0 = gshm_calibrate(1.0, 1e-6, 4)
    assert ref.sigma > s0 * 1.5   # μ² per row tripled: σ grows by about √3


def test_impact_for_plan():
    imp = aggregate_impact(1.0, 1e-6, 2, [4096, 4096])
    base = calibrate_gshm_discrete(1.0, 1e-6, 2)
    assert imp.count_sigma_without == pytest.approx(base.sigma)
    assert imp.count_sigma_with > imp.count_sigma_without * 1.6   # √3 more noise for two extra columns
    assert imp.margin_with > imp.margin_without
    assert len(imp.column_noise_stds) == 2


def test_bad_arguments():
    with pytest.raises(InvalidParameterError):
        joint_gshm_delta(1.0, 4, 3, 1, [100], [1, 2])
    with pytest.raises(InvalidParameterError):
        joint_gshm_delta(1.0, 0.5, 3, 1, [100], [1])
    with pytest.raises(InvalidParameterError):
        column_scales(4, [3], weights=[0.0])


@pytest.mark.parametrize("eps,delta,D", [(1.0, 0.05, 2), (0.5, 0.1, 3)])
def test_calibrated_release_is_private_and_half_sigma_is_not(eps, delta, D):
    """Exact enumeration at the calibrated noise: true δ <= target; with every noise scale at σ/2
    (scales / 4) the true δ of the sampled mechanism exceeds the target."""
    cal = calibrate_joint_gshm(eps, delta, 1, [D])
    s, s1, m = float(cal.count_sigma2), float(cal.column_sigma2s[0]), cal.margin
    counts = list(range(PRE, PRE + m + 14))
    assert _true_delta(eps, s, s1, m, D, 1, counts) <= delta
    assert _true_delta(eps, s / 4, s1 / 4, m, D, 1, counts) > delta
    # the column alone matters too: only the column noise halved
    assert _true_delta(eps, s, s1 / 4, m, D, 1, counts) > delta


# ------------------------------------------------------------------ general (non-diagonal) Σ, continuous reference


def _brute_mu_o2(cov, d, grid=41):
    """max of ΔᵀΣ⁻¹Δ over a fine grid of the box (interior points included), in exact rationals (fractions)."""
    from fractions import Fraction
    import itertools

    j = len(d)
    c = [[Fraction(x) for x in row] for row in cov]
    # exact inverse of a 2x2 / 3x3 by Gauss–Jordan on rationals
    m = [row[:] + [Fraction(int(i == k)) for k in range(j)] for i, row in enumerate(c)]
    for i in range(j):
        piv = m[i][i]
        m[i] = [x / piv for x in m[i]]
        for r in range(j):
            if r != i:
                f = m[r][i]
                m[r] = [a - f * b for a, b in zip(m[r], m[i])]
    p = [row[j:] for row in m]
    best = Fraction(0)
    steps = [Fraction(2 * t, grid - 1) - 1 for t in range(grid)]
    for u in itertools.product(steps, repeat=j):
        delta = [ui * Fraction(di) for ui, di in zip(u, d)]
        q = sum(delta[a] * p[a][b] * delta[b] for a in range(j) for b in range(j))
        best = max(best, q)
    return best


@pytest.mark.parametrize("cov,d", [
    ([[4.0, 1.5], [1.5, 1.0]], [2.0, 1.0]),
    ([[1.0, -0.9], [-0.9, 1.0]], [1.0, 3.0]),
    ([[2.0, 0.5, -0.3], [0.5, 1.0, 0.2], [-0.3, 0.2, 0.5]], [1.0, 2.0, 0.5]),
])
def test_mahalanobis_sensitivity_is_the_exact_max_over_the_box(cov, d):
    from sparsedp.accounting.aggregates import mahalanobis_sensitivity

    got = mahalanobis_sensitivity(cov, d)
    exact = float(_brute_mu_o2(cov, d, grid=21 if len(d) == 3 else 41))   # the grid contains the vertices
    assert exact <= got <= exact * (1 + 1e-8)
    # interior points never exceed it (convexity), random checks
    p = np.linalg.inv(np.array(cov))
    u = np.random.default_rng(0).uniform(-1, 1, size=(2000, len(d))) * np.array(d)
    assert np.max(np.einsum("ij,jk,ik->i", u, p, u)) <= got


def test_general_sigma_reduces_to_the_diagonal_case_and_changes_delta():
    from sparsedp.accounting.aggregates import mahalanobis_sensitivity

    sig, ds = [3.0, 7.0], [2.0, 5.0]
    assert mahalanobis_sensitivity(np.diag(np.square(sig)), ds) == pytest.approx(sum((a / b) ** 2 for a, b in
                                                                                   zip(ds, sig)), rel=1e-8)
    diag = joint_gshm_delta_continuous(1.0, 4.0, 20.0, 3, sig, ds)
    same = joint_gshm_delta_continuous(1.0, 4.0, 20.0, 3, None, ds, column_covariance=np.diag(np.square(sig)))
    assert same == pytest.approx(diag, rel=1e-6)
    # strong negative correlation with same-sign worst case (+D1, +D2) raises μ_o², hence δ
    cov = [[9.0, -0.9 * 21.0], [-0.9 * 21.0, 49.0]]
    assert joint_gshm_delta_continuous(1.0, 4.0, 20.0, 3, None, ds, column_covariance=cov) > diag
    with pytest.raises(InvalidParameterError, match="positive definite"):
        mahalanobis_sensitivity([[1.0, 2.0], [2.0, 1.0]], [1.0, 1.0])


def test_calibration_with_a_general_column_shape_meets_delta():
    shape = [[1.0, 0.6], [0.6, 2.0]]
    cal = calibrate_joint_gshm_continuous(1.0, 1e-6, 4, [3.0, 1.0], column_shape=shape)
    cov = np.array(cal.column_covariance)
    np.testing.assert_allclose(cov, np.array(shape) * cal.sigma ** 2)
    assert joint_gshm_delta_continuous(1.0, cal.sigma, cal.tau, 4, None, [3.0, 1.0], column_covariance=cov) <= 1e-6
    assert cal.delta_achieved <= 1e-6
