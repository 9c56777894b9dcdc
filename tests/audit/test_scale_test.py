"""The audit's scale test (``sparsedp.audit.scale_test``): closed-form moment generating functions against direct
sums over the pmf, and its p-value against the exact tail of ``S = Σ g(X_j)`` computed by convolution on tiny
cases (the p-value must never be below the exact two-sided tail: a bound, so the test cannot false-alarm more often
than its level)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy.special import logsumexp

from sparsedp.accounting.discrete import dgauss_pmf
from sparsedp.audit.scale_test import discrete_gaussian, normal, scale_test, two_sided_geometric
from sparsedp.noise import InsecureSeededRandom, sample_discrete_gaussian


def _geometric_pmf(base: float, lower: int | None, xs: np.ndarray) -> np.ndarray:
    w = base ** np.abs(xs.astype(float))
    if lower is not None:
        w = np.where(xs >= lower, w, 0.0)
    return w / w.sum()


def _pmf(law, xs):
    if law.family == "gaussian":
        p = dgauss_pmf(xs.astype(float), law.param)
        return p / p.sum()
    return _geometric_pmf(float(law.param), law.lower, xs)


LAWS = [discrete_gaussian(Fraction(3, 2)), discrete_gaussian(Fraction(9)), two_sided_geometric(Fraction(1, 2)),
        two_sided_geometric(Fraction(2, 3), lower=-3), two_sided_geometric(0.4, lower=0)]


@pytest.mark.parametrize("law", LAWS, ids=lambda x: f"{x.family}-{x.param}-{x.lower}")
def test_moment_generating_function_is_the_pmf_sum(law):
    xs = np.arange(-400, 401)
    p = _pmf(law, xs)
    g = law.g(xs)
    assert law.mean() == pytest.approx(float(np.sum(p * g)), rel=1e-10)
    top = law.lam_range()[1]
    with np.errstate(divide="ignore"):
        logp = np.log(p)
    for lam in (-1.0, -0.2, 0.3 * top, 0.6 * top):
        assert law.log_mgf(lam) == pytest.approx(float(logsumexp(logp + lam * g)), rel=1e-9, abs=1e-12)


def _exact_tails(law, n: int, s: float) -> tuple[float, float]:
    """(P[S <= s], P[S >= s]) for S the sum of n i.i.d. g(X), by convolution of the exact pmf."""
    xs = np.arange(-30, 31) if law.family == "gaussian" else np.arange(-90, 91)
    p = _pmf(law, xs)
    g = law.g(xs).astype(np.int64)
    one = np.zeros(int(g.max()) + 1)
    np.add.at(one, g, p)
    dist = np.array([1.0])
    for _ in range(n):
        dist = np.convolve(dist, one)
    k = int(round(s))
    return float(dist[: k + 1].sum()), float(dist[k:].sum())


@pytest.mark.parametrize("law", LAWS[:4], ids=lambda x: f"{x.family}-{x.param}-{x.lower}")
def test_p_value_bounds_the_exact_two_sided_tail(law):
    """On 6 values, every possible S from far below to far above its mean: p >= 2·min(exact tails)."""
    n = 6
    mean = n * law.mean()
    for s in sorted({int(x) for x in np.linspace(0, 4 * mean + 6, 40)}):
        lo, hi = _exact_tails(law, n, s)
        # a sample with that S: n − 1 zeros and one value whose g is s (the test only reads S)
        root = math.isqrt(s) if law.family == "gaussian" else s
        if law.g(np.array([root]))[0] != s:
            continue
        if law.lower is not None and law.lower == 0 and root < 0:
            continue
        values = np.zeros(n)
        values[0] = root
        t = scale_test([(law, values)])
        exact = min(1.0, 2.0 * min(lo, hi))
        assert t.p_value >= exact * (1 - 1e-9), (s, t.p_value, exact)
        assert t.ratio == pytest.approx(s / mean)


def test_calibrated_noise_is_rarely_refuted_and_half_scale_always():
    """100 batches of 300 exact discrete Gaussian draws at the calibrated scale: the p-value is a bound, so at most
    a level's share (here well under it) is below 0.05; at half the scale every batch is refuted."""
    rng = InsecureSeededRandom(12)
    s = Fraction(25)
    law = discrete_gaussian(s)
    ps = [scale_test([(law, np.asarray(sample_discrete_gaussian(s, 300, rng=rng)))]).p_value for _ in range(100)]
    assert np.mean(np.array(ps) < 0.05) <= 0.05
    half = [scale_test([(law, np.asarray(sample_discrete_gaussian(s / 4, 300, rng=rng)))]).p_value for _ in range(10)]
    assert max(half) < 1e-20


def test_off_lattice_values_are_refuted_and_float_noise_has_its_own_law():
    law = discrete_gaussian(Fraction(4))
    t = scale_test([(law, np.array([0.0, 1.5, -2.0]))])
    assert t.p_value == 0.0 and t.off_lattice == 1
    z = np.random.default_rng(3).normal(size=500) * 2.0
    f = scale_test([(normal(4.0), z)])
    assert f.off_lattice == 0 and f.p_value > 0.01 and f.ratio == pytest.approx(float(np.mean(z * z)) / 4.0)
