"""Dominating pairs of the thresholded mechanisms and their composition (docs/proofs/composition.md)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import integrate, stats

from sparsedp.accounting import calibrate, gaussian_delta
from sparsedp.accounting import pld
from sparsedp.accounting.composition import compose
from sparsedp.accounting.discrete import dgauss_pmf
from sparsedp.accounting.discrete_histograms import dgauss_shift_hockey_stick
from sparsedp.accounting.profiles import (CSHProfile, GaussianProfile, GSHMDiscreteProfile, GSHMProfile,
                                          LaplaceDiscreteProfile, PureProfile, profile_from_dict, profile_of)

EPS = np.array([-0.5, 0.0, 0.1, 0.5, 1.0, 2.0, 3.0, 5.0])


# ------------------------------------------------------------------ Gaussian closed form


@pytest.mark.parametrize("mu,k", [(0.1, 1), (0.1, 36), (0.3, 7), (1.0, 100), (0.05, 1000)])
def test_k_gaussians_match_closed_form(mu, k):
    pair = GaussianProfile(mu).pair().repeat(k)
    got = pair.delta(EPS)
    want = gaussian_delta(mu * math.sqrt(k), EPS)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=0)
    assert np.all(got >= want)


def test_compose_is_repeat():
    a = GSHMDiscreteProfile(Fraction(809), 161, 10).pair()
    assert compose([a] * 7).delta(2.0) == pytest.approx(a.repeat(7).delta(2.0), rel=1e-9)


# ------------------------------------------------------------------ exact enumeration of the theorem


def _row_laws(kind, count, pre, m, s, support):
    """(P, Q) of one key's output over outcomes [∅, value pre+m-..]: kind '+' (count c under D, c−1 under D'),
    '=' (count pre under D, pre−1 under D'), '-' (below pre in both)."""
    z = np.arange(-support, support + 1)
    pz = dgauss_pmf(z, s)
    lo = pre + m  # smallest released value
    vals = np.arange(lo, max(count, pre) + support + 2)

    def law(c):
        out = np.zeros(vals.size + 1)
        if c < pre:
            out[0] = 1.0
            return out
        y = c + z
        rel = y >= pre + m
        out[0] = pz[~rel].sum()
        np.add.at(out, 1 + (y[rel] - lo), pz[rel])
        return out

    if kind == "+":
        return law(count), law(count - 1)
    if kind == "=":
        return law(pre), law(pre - 1)
    return law(pre - 2), law(pre - 3)


def _joint(configs, pre, m, s, support):
    p, q = np.array([1.0]), np.array([1.0])
    for config in configs:  # releases
        for kind, count in config:  # keys touched by the unit
            a, b = _row_laws(kind, count, pre, m, s, support)
            p, q = np.outer(p, a).ravel(), np.outer(q, b).ravel()
    return p, q


def _hs(p, q, eps):
    return float(np.maximum(p - math.exp(eps) * q, 0.0).sum())


@pytest.mark.parametrize("configs", [
    ((("+", 5), ("=", 0)), (("=", 0), ("=", 0))),
    ((("+", 3), ("+", 9)), (("+", 4), ("=", 0))),
    ((("=", 0), ("-", 0)), (("+", 3), ("-", 0))),
    ((("+", 4), ("=", 0)), (("+", 4), ("=", 0))),
])
def test_two_releases_exact_enumeration(configs):
    """Lemmas 2–3 on tiny inputs: two discrete GSHM releases (l0 = 2, s = 1 and 2, margins 2 and 1) over
    key configurations; the composed pair's δ(ε) bounds the exact δ in both orders."""
    pre = 3
    params = [(Fraction(1), 2), (Fraction(2), 1)]
    support = 14  # dropped mass < 1e-40 per draw
    p = np.array([1.0])
    q = np.array([1.0])
    for (s, m), config in zip(params, configs):
        a, b = _joint([config], pre, m, float(s), support)
        p, q = np.outer(p, a).ravel(), np.outer(q, b).ravel()
    pair = compose(GSHMDiscreteProfile(s, m, 2).pair() for s, m in params)
    bound = pair.delta(EPS)
    for e, bnd in zip(EPS, bound):
        exact = max(_hs(p, q, e), _hs(q, p, e))
        assert exact <= bnd + 1e-12, (e, exact, bnd)
    # the bound is not vacuous: for the all-leak/all-shift configuration it is within 2x at ε = 1
    assert bound[4] < 1.0


def test_single_release_pair_bounds_exact_accountant():
    prof = GSHMDiscreteProfile(Fraction(25, 2), 9, 3)
    pair = prof.pair()
    eps = np.array([0.0, 0.2, 0.5, 1.0, 2.0])
    assert np.all(pair.delta(eps) >= prof.delta(eps))
    # and is at most about δ_inf + δ_G (Lemma 2 remark)
    d_inf = pair.p_infinite
    for e in eps:
        assert pair.delta(e) <= d_inf + dgauss_shift_hockey_stick(3, e, prof.sigma2) + 1e-12


# ------------------------------------------------------------------ k GSHM releases vs independent computations


_LAWS: dict = {}


def _independent_dgauss_h(s, j, eps, support_sd=14.0):
    """h(ε) of N_Z(1,s)^j vs N_Z(0,s)^j by direct convolution of the truncated pmf (no Poisson bound)."""
    key = (s, j, support_sd)
    if key not in _LAWS:
        half = int(support_sd * math.sqrt(s)) + 2
        z = np.arange(-half, half + 1)
        pz = np.exp(-z.astype(float) ** 2 / (2 * s))
        pz /= pz.sum()
        law = np.array([1.0])
        for _ in range(j):
            law = np.convolve(law, pz)
        x = np.arange(law.size) - j * half
        _LAWS[key] = (law, (2.0 * x + j) / (2.0 * s))
    law, loss = _LAWS[key]
    return np.array([float(np.dot(law, np.maximum(0.0, -np.expm1(np.minimum(e - loss, 0.0)))))
                     for e in np.atleast_1d(eps)])


def _form_delta(h_fn, log_keep, eps):
    p = -math.expm1(log_keep)
    fwd = p + (1 - p) * h_fn(eps - log_keep)
    rev = h_fn(eps + log_keep)
    return np.maximum(fwd, rev)


@pytest.fixture(scope="module")
def gshm_cal():
    return calibrate("gshm", epsilon=0.5, delta=1e-7, l0=10)


@pytest.mark.parametrize("k", [1, 3, 10])
def test_k_discrete_gshm_vs_direct_convolution(gshm_cal, k):
    prof = profile_of(gshm_cal)
    pair = prof.pair().repeat(k)
    s, j = float(prof.sigma2), prof.l0 * k
    eps = np.array([0.3, 0.8, 1.5, 2.5])
    ours = pair.delta(eps)
    indep = _form_delta(lambda e: _independent_dgauss_h(s, j, e), pair.log_keep, eps)
    assert np.all(ours >= indep * (1 - 1e-9))
    np.testing.assert_allclose(ours, indep, rtol=1e-6)
    # within 10% in ε at δ = 1e-6
    def eps_at(fn, d):
        lo, hi = 0.0, 20.0
        for _ in range(60):
            mid = (lo + hi) / 2
            lo, hi = (lo, mid) if fn(mid) <= d else (mid, hi)
        return hi
    e_ours = pair.epsilon(1e-6)
    e_ind = eps_at(lambda e: float(_form_delta(lambda x: _independent_dgauss_h(s, j, x), pair.log_keep,
                                               np.array([e]))[0]), 1e-6)
    assert e_ind * (1 - 1e-6) <= e_ours <= 1.1 * e_ind


@pytest.mark.parametrize("k", [1, 10, 40])
def test_k_continuous_gshm_vs_quadrature(k):
    cal = calibrate("gshm", epsilon=0.5, delta=1e-7, l0=10, discrete=False)
    pair = profile_of(cal).pair().repeat(k)
    mu = math.sqrt(pair.gaussian_mu2)
    p = pair.p_infinite

    def h(e):  # ∫ (φ(x − μ) − e^e φ(x))_+ dx by quadrature over x > crossing point
        x0 = e / mu + mu / 2
        val, _ = integrate.quad(lambda x: stats.norm.pdf(x - mu) - math.exp(e) * stats.norm.pdf(x), x0, np.inf,
                                epsabs=1e-16, epsrel=1e-10)
        return max(val, 0.0)

    for e in (0.5, 1.5, 3.0):
        indep = max(p + (1 - p) * h(e - math.log1p(-p)), h(e + math.log1p(-p)))
        ours = pair.delta(e)
        assert ours >= indep * (1 - 1e-7)
        assert ours <= indep * (1 + 1e-6)


# ------------------------------------------------------------------ numeric PLD path


def test_numeric_path_bounds_exact_same_scale():
    s, j1, j2 = 800.0, 30, 50
    grid = pld.dgauss_part(s, j1).convolve(pld.dgauss_part(s, j2))
    eps = np.array([0.0, 0.5, 1.0, 2.0])
    exact = np.array([dgauss_shift_hockey_stick(j1 + j2, e, s) for e in eps])
    num = grid.hockey_stick(eps)
    assert np.all(num >= exact)
    # pessimism of the discretisation: at most a shift of 2 grid steps in ε
    shifted = np.array([dgauss_shift_hockey_stick(j1 + j2, e - 3 * pld.DEFAULT_STEP, s) for e in eps])
    assert np.all(num <= shifted + 1e-9)


def test_numeric_path_gaussian_and_laplace():
    g = pld.gaussian_part(0.04).convolve(pld.gaussian_part(0.05))
    eps = np.array([0.0, 0.3, 1.0])
    exact = gaussian_delta(0.3, eps)
    num = g.hockey_stick(eps)
    assert np.all(num >= exact)
    assert np.all(num <= gaussian_delta(0.3, eps - 3 * pld.DEFAULT_STEP) + 1e-9)
    from sparsedp.accounting.discrete_histograms import dlaplace_shift_hockey_stick

    lap = pld.dlaplace_part(20.0, 7).convolve(pld.dlaplace_part(20.0, 5))
    ex = dlaplace_shift_hockey_stick(12, eps, 20.0)
    nm = lap.hockey_stick(eps)
    assert np.all(nm >= ex - 1e-15)
    assert np.all(nm <= dlaplace_shift_hockey_stick(12, eps - 3 * pld.DEFAULT_STEP, 20.0) + 1e-9)


def test_mixed_pairs_use_numeric_path_and_sit_between_their_parts(gshm_cal):
    disc = profile_of(gshm_cal).pair()
    cont = profile_of(calibrate("gshm", epsilon=0.5, delta=1e-7, l0=10, discrete=False)).pair()
    mixed = disc.repeat(20).compose(cont.repeat(19))
    d = mixed.delta(3.0)
    lo = min(disc.repeat(39).delta(3.0), cont.repeat(39).delta(3.0))
    hi = max(disc.repeat(39).delta(3.0), cont.repeat(39).delta(3.0))
    assert lo * 0.999 <= d <= hi * 1.01


# ------------------------------------------------------------------ profiles


@pytest.mark.parametrize("mech,kw", [
    ("gshm", dict(l0=10)), ("gshm", dict(l0=3, discrete=False)), ("laplace", dict(l0=4)),
    ("topk-csh", dict(top_k=20)), ("csh", dict(k=8, discrete=False)), ("topk-csh", dict(top_k=9, debias=True)),
])
def test_profile_agrees_with_calibration_and_pair_is_an_upper_bound(mech, kw):
    cal = calibrate(mech, epsilon=0.7, delta=1e-6, **kw)
    prof = profile_of(cal)
    assert prof is not None
    assert prof.delta(cal.epsilon) == pytest.approx(cal.delta_achieved, rel=1e-12)
    assert profile_from_dict(prof.to_dict()) == prof
    eps = np.array([0.2, 0.7, 1.5])
    assert np.all(prof.pair().delta(eps) >= prof.delta(eps) * (1 - 1e-12))
    assert prof.epsilon(cal.delta) <= cal.epsilon * (1 + 1e-8)


def test_profiles_without_pair():
    assert profile_of(calibrate("laplace", epsilon=1.0, delta=1e-6, l0=2, discrete=False)) is None
    assert profile_of(calibrate("topk-csh", epsilon=1.0, delta=1e-6, top_k=5, csh_noise="alg4")) is None
    pure = PureProfile(0.5)
    assert pure.pair() is None and pure.delta(0.5) == 0.0
    assert pure.delta(0.0) == pytest.approx((math.exp(0.5) - 1) / (1 + math.exp(0.5)))
    # exact hockey-stick of randomised response at every ε (including ε < −ε₀)
    a = np.array([math.exp(0.5), 1.0]) / (1 + math.exp(0.5))
    for e in (-2.0, -0.7, -0.2, 0.0, 0.3, 0.6):
        want = max(max(a[0] - math.exp(e) * a[1], 0) + max(a[1] - math.exp(e) * a[0], 0), 0.0)
        assert pure.delta(e) == pytest.approx(want, abs=1e-15)


def test_laplace_pair_is_pure_in_the_core():
    prof = profile_of(calibrate("laplace", epsilon=1.0, delta=1e-8, l0=5))
    assert isinstance(prof, LaplaceDiscreteProfile)
    pair = prof.pair()
    # the core alone: H(l0, ε) = 0 at ε >= l0/t; what remains is the threshold event
    assert pair.delta(1.0) == pytest.approx(pair.p_infinite, rel=1e-6, abs=1e-15)


def test_gshm_tradeoff_curve_is_thm_7_1():
    prof = GSHMProfile(sigma=3.0, tau=9.0, l0=4)
    alpha = np.linspace(0.0, 1.0, 20001)
    f = prof.tradeoff_curve(alpha)
    assert f[0] == pytest.approx(math.exp(4 * stats.norm.logcdf(3.0)), rel=1e-12)
    assert np.all(np.diff(f) <= 1e-15) and np.all(f <= 1 - alpha + 1e-15)
    from sparsedp.accounting import gshm_delta

    for e in (0.1, 0.5, 1.0):
        conj = float(np.max(1 - f - math.exp(e) * alpha))  # δ(ε) = 1 + f*(−e^ε) (spec §7.2)
        want = gshm_delta(e, 3.0, 9.0, 4, "fdp")
        assert want - 1e-4 <= conj <= want + 1e-12


def test_generic_tradeoff_is_a_valid_curve(gshm_cal):
    prof = profile_of(gshm_cal)
    alpha = np.linspace(0.0, 1.0, 101)
    f = prof.tradeoff_curve(alpha)
    assert np.all(f >= 0) and np.all(f <= 1 - alpha + 1e-15)
    # it implies the profile back on its grid: 1 − f(α) − e^ε α <= δ(ε)
    for e in (0.5, 1.0):
        assert float(np.max(1 - f - math.exp(e) * alpha)) <= prof.delta(e) + 1e-12


def test_composed_tradeoff_curve_is_below_the_single_one(gshm_cal):
    pair = profile_of(gshm_cal).pair()
    alpha = np.linspace(0.0, 1.0, 51)
    one, many = pair.tradeoff_curve(alpha), pair.repeat(40).tradeoff_curve(alpha)
    assert np.all(many <= one + 1e-12) and np.any(many < one - 1e-3)


@pytest.mark.parametrize("k,debias", [(1, False), (10, False), (200, False), (16, True)])
def test_csh_pair_is_thm_3_3(k, debias):
    """Lemma 4: one CSH release's form gives exactly Theorem 3.3's δ = BW(½√(k+√k), σ, ε) + δ_inf."""
    from sparsedp.accounting import csh_delta

    prof = CSHProfile(sigma=4.0, tau=20.0, k=k, analysis="add", debias=debias)
    for e in (0.1, 0.5, 2.0):
        assert prof.pair().delta(e) == pytest.approx(csh_delta(e, 4.0, 20.0, k, "add", debias=debias), rel=1e-9)


def test_fft_convolve_is_scipy_signals_fftconvolve_to_the_last_bit():
    """The privacy-loss tables are composed by pld.fft_convolve (scipy.fft, not scipy.signal: seconds of import
    on a loaded machine): the same bits as scipy.signal.fftconvolve, so no composed δ moves; one-point tables
    (a product there) included."""
    from scipy import signal

    from sparsedp.accounting.pld import fft_convolve

    r = np.random.default_rng(2)
    sizes = [(1, 1), (1, 9), (9, 1), (2, 3), (97, 1000), (4097, 33), (30011, 20011)]
    sizes += [(int(a), int(b)) for a, b in r.integers(2, 5000, (40, 2))]
    for n1, n2 in sizes:
        a, b = r.random(n1) ** 3, r.random(n2) ** 7
        want = signal.fftconvolve(a, b)
        got = fft_convolve(a, b)
        assert got.shape == want.shape and np.array_equal(got, want), (n1, n2)
