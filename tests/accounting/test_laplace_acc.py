"""Laplace / geometric stability histogram accountant (sparsedp.accounting.laplace).

Checks: Google/Wilson et al. (2020) closed-form threshold, exact enumeration of the hockey-stick divergence
on tiny inputs (both directions, worst pairs), agreement with the independent exact Karrer-style accountant
of ``discrete_histograms`` for the discrete law, 40-digit mpmath, validation and infeasibility messages.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from sparsedp.accounting import (laplace_calibrate, laplace_delta, laplace_noise_std, laplace_scale,
                                 laplace_tau)
from sparsedp.accounting.discrete import dlaplace_pmf, dlaplace_variance
from sparsedp.errors import InfeasibleError, InvalidParameterError, InvalidTypeError


def test_google_wilson_threshold_formula():
    # τ* = 1 − (l0/ε)·ln(2 − 2(1−δ)^{1/l0}) (Wilson et al. 2020; Google LaplacePartitionSelection)
    for eps, dlt, l0 in ((1.0, 1e-6, 1), (0.5, 1e-5, 10), (2.0, 1e-9, 100), (0.1, 1e-3, 7), (1.0, 1e-8, 51914)):
        scale, tau = laplace_calibrate(eps, dlt, l0, discrete=False)
        assert scale == pytest.approx(l0 / eps, rel=1e-15)
        absolute = 1 - (l0 / eps) * math.log(2 * -math.expm1(math.log1p(-dlt) / l0))  # 2 − 2(1−δ)^{1/l0}
        assert 1 + tau == pytest.approx(absolute, rel=1e-7)
        assert laplace_delta(eps, scale, tau, l0) <= dlt
        assert laplace_delta(eps, scale, tau * (1 - 1e-9), l0) > dlt


def test_delta_closed_form_spot_values():
    # l0 = 1: δ = q = ½ e^{−τ/b}.
    assert laplace_delta(1.0, 1.0, 0.0, 1) == pytest.approx(0.5, rel=1e-15)
    assert laplace_delta(1.0, 2.0, 10.0, 1) == pytest.approx(0.5 * math.exp(-5), rel=1e-14)
    # discrete, l0 = 1: q = α^{⌊τ⌋+1}/(1+α)
    a = math.exp(-1 / 2.0)
    assert laplace_delta(1.0, 2.0, 3.7, 1, discrete=True) == pytest.approx(a**4 / (1 + a), rel=1e-14)
    assert laplace_delta(1.0, 2.0, 4.0, 1, discrete=True) == pytest.approx(a**5 / (1 + a), rel=1e-14)


def _key_classes(c_x, c_xp, t, margin, support):
    """One key's output law under X (count c_x, None = absent) and X' (count c_xp), grouped by likelihood ratio.

    Pre-threshold 1; a key is released iff count + Z > 1 + margin (strict), and then shows count + Z.
    Merging outputs with equal ratio P_X/P_X' is lossless for hockey-stick divergences (sufficient
    statistic), and keeps the product over keys small. Returns {class: (P_X, P_X')}.
    """
    pmf = dlaplace_pmf(np.asarray(support, dtype=float), t).tolist()

    def law(c):
        d: dict = {}
        if c is None:
            return {None: 1.0}
        for z, pz in zip(support, pmf):
            out = c + z if c + z > 1 + margin else None
            d[out] = d.get(out, 0.0) + pz
        return d

    lx, lxp = law(c_x), law(c_xp)
    classes: dict = {}
    for o in set(lx) | set(lxp):
        a, b = lx.get(o, 0.0), lxp.get(o, 0.0)
        if a == 0.0 and b == 0.0:
            continue
        key = "x-only" if b == 0.0 else "xp-only" if a == 0.0 else round(math.log(a / b), 9)
        pa, pb = classes.get(key, (0.0, 0.0))
        classes[key] = (pa + a, pb + b)
    return classes


def _pair_delta(counts_x, counts_xp, t, margin, eps, support):
    """max of both hockey-stick directions between the release laws on X and X' (exact enumeration)."""
    per_key = [_key_classes(a, b, t, margin, support) for a, b in zip(counts_x, counts_xp)]
    fwd = rev = 0.0
    for combo in itertools.product(*(d.values() for d in per_key)):
        px = math.prod(p for p, _ in combo)
        pxp = math.prod(q for _, q in combo)
        fwd += max(0.0, pxp - math.exp(eps) * px)
        rev += max(0.0, px - math.exp(eps) * pxp)
    return max(fwd, rev)


@pytest.mark.parametrize("eps,l0,margin", [(1.0, 2, 3), (0.7, 2, 1), (2.0, 3, 2), (1.5, 3, 0), (0.4, 4, 5)])
def test_exact_enumeration_on_tiny_inputs(eps, l0, margin):
    """All neighbour pairs (X, X' = X + one unit over l0 keys) with small counts: δ(ε) <= laplace_delta."""
    t = laplace_scale(eps, l0)
    support = range(-int(40 * t) - 5, int(40 * t) + 6)
    bound = laplace_delta(eps, t, margin, l0, discrete=True)
    worst = 0.0
    for base in itertools.product((None, 1, 3), repeat=l0):  # counts in X of the unit's keys
        xp = [1 if c is None else c + 1 for c in base]
        worst = max(worst, _pair_delta(list(base), xp, t, margin, eps, support))
    assert worst <= bound * (1 + 1e-9) + 1e-15
    assert worst == pytest.approx(bound, rel=1e-9)  # attained by the all-new-keys pair


def test_continuous_worst_pair_is_exact():
    # X = {}, X' = l0 new keys of count 1: P[some key released] = 1 − (1 − ½e^{−τ/b})^{l0} exactly.
    eps, l0, tau = 0.8, 5, 12.0
    b = laplace_scale(eps, l0)
    q = 0.5 * math.exp(-tau / b)
    assert laplace_delta(eps, b, tau, l0) == pytest.approx(1 - (1 - q) ** l0, rel=1e-13)


def test_agrees_with_exact_karrer_style_accountant():
    dh = pytest.importorskip("sparsedp.accounting.discrete_histograms")
    for eps, l0 in ((1.0, 1), (0.5, 10), (2.0, 100), (0.35, 1000)):
        t = laplace_scale(eps, l0)
        for margin in (0, 3, 17, 150):
            ours = laplace_delta(eps, t, margin, l0, discrete=True)
            # their convention: released iff count + Z >= pre_threshold + m, i.e. m = our margin + 1
            theirs = dh.laplace_discrete_delta(eps, t, margin + 1, l0)
            assert ours == pytest.approx(theirs, rel=1e-9)


def test_discrete_tau_is_integer_and_minimal():
    for eps, dlt, l0 in ((1.0, 1e-6, 1), (0.5, 1e-5, 10), (2.0, 1e-9, 100), (0.3, 1e-7, 3000)):
        scale, tau = laplace_calibrate(eps, dlt, l0, discrete=True)
        assert tau == int(tau) and tau >= 0
        assert laplace_delta(eps, scale, tau, l0, discrete=True) <= dlt
        if tau >= 1:
            assert laplace_delta(eps, scale, tau - 1, l0, discrete=True) > dlt
        # the discrete threshold is within one unit of the continuous one
        cont = laplace_tau(eps, dlt, scale, l0)
        assert abs(tau - cont) <= 1.5


def test_larger_scale_needs_larger_threshold():
    eps, dlt, l0 = 1.0, 1e-6, 10
    b, t = laplace_calibrate(eps, dlt, l0)
    assert laplace_tau(eps, dlt, 2 * b, l0) > t


def test_noise_std():
    assert laplace_noise_std(3.0) == pytest.approx(math.sqrt(2) * 3.0)
    for b in (0.3, 1.0, 7.5, 1000.0):
        assert laplace_noise_std(b, discrete=True) == pytest.approx(math.sqrt(dlaplace_variance(b)), rel=1e-12)


def test_mpmath_40_digits():
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 40
    gen = np.random.default_rng(7)
    for _ in range(40):
        l0 = int(gen.integers(1, 100000))
        eps = float(gen.uniform(0.05, 4))
        b = laplace_scale(eps, l0) * float(gen.uniform(1, 2))
        tau = float(gen.uniform(0, 40)) * b
        q = mpmath.mpf(0.5) * mpmath.exp(-mpmath.mpf(tau) / b)
        want = 1 - (1 - q) ** l0
        assert laplace_delta(eps, b, tau, l0) == pytest.approx(float(want), rel=1e-9)
        a = mpmath.exp(-1 / mpmath.mpf(b))
        qd = a ** (math.floor(tau) + 1) / (1 + a)
        assert laplace_delta(eps, b, tau, l0, discrete=True) == pytest.approx(float(1 - (1 - qd) ** l0), rel=1e-9)


def test_validation_and_infeasible():
    with pytest.raises(InvalidParameterError, match="epsilon"):
        laplace_delta(0.0, 1.0, 1.0, 1)
    with pytest.raises(InvalidParameterError, match="scale"):
        laplace_delta(1.0, -1.0, 1.0, 1)
    with pytest.raises(InvalidParameterError, match="tau"):
        laplace_delta(1.0, 1.0, -1.0, 1)
    with pytest.raises(InvalidTypeError, match="l0"):
        laplace_delta(1.0, 1.0, 1.0, 1.5)
    with pytest.raises(InvalidParameterError, match="delta"):
        laplace_calibrate(1.0, 0.0, 3)
    with pytest.raises(InvalidTypeError, match="discrete"):
        laplace_delta(1.0, 1.0, 1.0, 1, discrete="yes")
    with pytest.raises(InfeasibleError, match="scale.*l0/epsilon"):
        laplace_delta(1.0, 9.99, 5.0, 10)
    # the rounded-up scale satisfies l0 <= scale·ε exactly
    from fractions import Fraction
    for eps, l0 in ((0.1, 3), (0.3, 7), (1 / 3, 10)):
        assert Fraction(laplace_scale(eps, l0)) * Fraction(eps) >= l0
