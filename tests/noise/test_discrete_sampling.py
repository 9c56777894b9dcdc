"""The vectorised exact samplers against the laws of sparsedp.accounting.discrete: chi-square
goodness of fit at α = 1e-4 (1e6 draws, fixed seeds), tail frequencies beyond 3σ and 5σ, mean and
variance within their standard errors; the exact slow path on its own; large scales; independence;
parameter validation."""

from __future__ import annotations

import math
import os
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from sparsedp.accounting import discrete as law
from sparsedp.errors import InvalidParameterError, SparsedpError
from sparsedp.noise import (
    InsecureSeededRandom, sample_discrete_gaussian, sample_discrete_laplace, sample_gaussian, sample_laplace,
    sample_two_sided_geometric,
)
from sparsedp.noise import discrete as vec
from sparsedp.audit.stats import pooled_chisquare

N = 1_000_000
Z = 4.4  # two-sided normal quantile for α ≈ 1e-5 per statistic (several statistics per case)


def _bins(scale: float, n: int):
    """Integer bin edges with >= ~100 expected draws per bin (single integers for small scales)."""
    half = max(2, int(math.ceil(6 * scale)))
    width = max(1, int(math.ceil(scale / 20)))
    edges = np.arange(-half, half + width, width)
    return edges  # bins [e_i, e_{i+1}), plus two tail bins


def _chi_square(xs: np.ndarray, sf, scale: float) -> float:
    """p-value of the chi-square test of xs against the law with survival function sf(t) = P[X >= t]."""
    edges = _bins(scale, xs.size)
    sf_edges = np.array([sf(int(e)) for e in edges])
    probs = np.concatenate([[1.0 - sf_edges[0]], sf_edges[:-1] - sf_edges[1:], [sf_edges[-1]]])
    idx = np.searchsorted(edges, xs, side="right")  # 0: below edges[0]; len(edges): at/above last edge
    obs = np.bincount(idx, minlength=len(edges) + 1)
    return pooled_chisquare(obs, probs, min_expected=20)  # sparse bins pooled into their neighbours


def _check_law(xs, sf, var, m4, scale, sigma_for_tails):
    n = xs.size
    assert xs.dtype == np.int64 and xs.shape == (n,)
    assert _chi_square(xs, sf, scale) > 1e-4
    # tails beyond 3σ and 5σ (two-sided, |X| >= ceil(kσ)), binomial standard errors
    for k in (3, 5):
        t = max(1, math.ceil(k * sigma_for_tails))
        p = 2 * sf(t)
        count = int(np.sum(np.abs(xs) >= t))
        assert abs(count - n * p) <= Z * math.sqrt(n * p * (1 - p)) + 1, (k, count, n * p)
    mean = xs.mean()
    assert abs(mean) <= Z * math.sqrt(var / n)
    x2 = xs.astype(np.float64) ** 2
    assert abs(x2.mean() - var) <= Z * math.sqrt((m4 - var**2) / n)


def _dgauss_m4(s2: float) -> float:
    if s2 > 1e6:
        return 3 * law.dgauss_variance(s2) ** 2  # lattice corrections are e^{-2π² s} here
    w = int(40 * math.sqrt(s2)) + 2
    x = np.arange(-w, w + 1, dtype=np.float64)
    return float(np.sum(x**4 * law.dgauss_pmf(x, s2)))


def _dlap_m4(b: float) -> float:
    # E X^4 = 2 (1−q)/(1+q) Σ_{k>=1} k^4 q^k, Σ k^4 q^k = q (1 + 11q + 11q² + q³)/(1 − q)^5
    q = math.exp(-1 / b)
    om = -math.expm1(-1 / b)
    return 2 * om / (1 + q) * q * (1 + 11 * q + 11 * q**2 + q**3) / om**5


def _gauss_case(sigma, seed):
    s2 = Fraction(sigma) ** 2
    xs = sample_discrete_gaussian(s2, N, InsecureSeededRandom(seed))
    _check_law(xs, lambda t: law.dgauss_sf(t, s2), law.dgauss_variance(s2), _dgauss_m4(float(s2)), sigma, sigma)


def _laplace_case(b, seed):
    xs = sample_discrete_laplace(Fraction(b), N, InsecureSeededRandom(seed))
    var = law.dlaplace_variance(b)
    _check_law(xs, lambda t: law.dlaplace_sf(t, b), var, _dlap_m4(b), b, math.sqrt(var))


FAST_SIGMAS = [0.5, 3, 1000]
ALL_SIGMAS = [0.5, 1, 3, 10, 1000, 10**5]


@pytest.mark.parametrize("sigma", FAST_SIGMAS)
def test_discrete_gaussian_goodness_of_fit(sigma):
    _gauss_case(sigma, 20261122)


@pytest.mark.parametrize("b", FAST_SIGMAS)
def test_discrete_laplace_goodness_of_fit(b):
    _laplace_case(b, 20261123)


@pytest.mark.slow
@pytest.mark.parametrize("sigma", ALL_SIGMAS)
def test_discrete_gaussian_goodness_of_fit_full_grid(sigma):
    _gauss_case(sigma, 1122)


@pytest.mark.slow
@pytest.mark.parametrize("b", ALL_SIGMAS)
def test_discrete_laplace_goodness_of_fit_full_grid(b):
    _laplace_case(b, 1123)


@pytest.mark.slow
@pytest.mark.parametrize("sigma", [10**7])
def test_discrete_gaussian_huge_sigma_goodness_of_fit(sigma):
    _gauss_case(sigma, 77)


def test_float_sigma2_with_a_long_binary_expansion():
    """A float σ² (as calibration produces) is used at its exact binary value, by sampler and law alike."""
    s2 = 123.456**2
    xs = sample_discrete_gaussian(s2, 200_000, InsecureSeededRandom(12))
    _check_law(xs, lambda t: law.dgauss_sf(t, s2), law.dgauss_variance(s2), _dgauss_m4(s2), 123.456, 123.456)
    b = 0.3
    ys = sample_discrete_laplace(b, 200_000, InsecureSeededRandom(13))
    var = law.dlaplace_variance(b)
    _check_law(ys, lambda t: law.dlaplace_sf(t, b), var, _dlap_m4(b), b, math.sqrt(var))


def test_exact_slow_path_alone_has_the_right_law(monkeypatch):
    """Disable the float fast path: every decision then goes through the big-integer lazy path."""
    def undecided(u, x_f, err):
        return np.zeros(u.shape, bool), np.zeros(u.shape, bool)

    monkeypatch.setattr(vec, "_decide", undecided)
    n = 4000
    xs = sample_discrete_gaussian(Fraction(9, 4), n, InsecureSeededRandom(5))
    edges = np.arange(-4, 5)
    obs = np.array([np.sum(xs < -4)] + [np.sum(xs == e) for e in edges] + [np.sum(xs > 4)])
    p_mid = law.dgauss_pmf(edges, 2.25)
    exp_ = n * np.concatenate([[law.dgauss_sf(5, 2.25)], p_mid, [law.dgauss_sf(5, 2.25)]])
    assert stats.chisquare(obs, exp_ * n / exp_.sum()).pvalue > 1e-4
    ys = sample_discrete_laplace(2, n, InsecureSeededRandom(6))
    assert abs(ys.mean()) < Z * math.sqrt(law.dlaplace_variance(2) / n)
    assert abs((ys.astype(float) ** 2).mean() - law.dlaplace_variance(2)) < Z * math.sqrt(_dlap_m4(2) / n)


def test_fast_path_and_slow_path_make_the_same_decisions(monkeypatch):
    """The fast path only decides what is certain: forcing the slow path must not change any draw
    whose random bits were decided by the fast path (same seed ⇒ same output when the slow path
    consumes no extra bits, i.e. when it decides on the first 53 bits)."""
    fast = sample_discrete_gaussian(Fraction(10**6), 20_000, InsecureSeededRandom(8))
    real_decide = vec._decide
    calls = {"n": 0}

    def counting(u, x_f, err):
        acc, rej = real_decide(u, x_f, err)
        calls["n"] += int(np.sum(~acc & ~rej))
        return acc, rej

    monkeypatch.setattr(vec, "_decide", counting)
    again = sample_discrete_gaussian(Fraction(10**6), 20_000, InsecureSeededRandom(8))
    assert np.array_equal(fast, again)
    assert calls["n"] == 0  # at this size, the slow path is essentially never needed


@pytest.mark.parametrize("sigma2", [10**10, 10**14, Fraction(2**80)])
def test_large_scales_do_not_overflow(sigma2):
    rng = InsecureSeededRandom(3)
    xs = sample_discrete_gaussian(sigma2, 20_000, rng)
    sigma = math.sqrt(float(sigma2))
    assert xs.dtype == np.int64
    assert abs(xs.std() / sigma - 1) < 0.03
    assert np.max(np.abs(xs)) < 7 * sigma
    ys = sample_discrete_laplace(Fraction(10**7), 20_000, rng)
    assert ys.dtype == np.int64 and abs(ys.std() / (math.sqrt(2) * 1e7) - 1) < 0.05


def test_parameter_types_are_exact_and_equivalent():
    a = sample_discrete_gaussian("2.25", 1000, InsecureSeededRandom(1))
    b = sample_discrete_gaussian(Fraction(9, 4), 1000, InsecureSeededRandom(1))
    c = sample_discrete_gaussian(2.25, 1000, InsecureSeededRandom(1))  # 2.25 is exact in binary
    assert np.array_equal(a, b) and np.array_equal(a, c)
    assert sample_discrete_gaussian(4, 0, InsecureSeededRandom(1)).shape == (0,)
    assert np.array_equal(sample_two_sided_geometric(3, 500, InsecureSeededRandom(2)),
                          sample_discrete_laplace(3, 500, InsecureSeededRandom(2)))


def test_successive_batches_and_default_source_differ():
    rng = InsecureSeededRandom(4)
    assert not np.array_equal(sample_discrete_gaussian(1e6, 1000, rng), sample_discrete_gaussian(1e6, 1000, rng))
    assert not np.array_equal(sample_discrete_gaussian(1e6, 1000), sample_discrete_gaussian(1e6, 1000))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_forked_processes_draw_different_noise():
    sample_discrete_gaussian(1e6, 10)  # parent keyed and buffered
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.write(w, sample_discrete_gaussian(1e6, 100).tobytes())
        finally:
            os._exit(0)
    os.close(w)
    data = b""
    while len(data) < 800:
        chunk = os.read(r, 800)
        if not chunk:
            break
        data += chunk
    os.close(r)
    os.waitpid(pid, 0)
    child = np.frombuffer(data, dtype=np.int64)
    parent = sample_discrete_gaussian(1e6, 100)
    assert child.size == 100 and not np.array_equal(child, parent)


@pytest.mark.parametrize("bad", [0, -1, "0", -0.5, math.nan, math.inf, "abc", None, True, 2**81, 1e-12])
def test_bad_sigma2_and_scale_raise(bad):
    with pytest.raises(SparsedpError):
        sample_discrete_gaussian(bad, 10)
    with pytest.raises(SparsedpError):
        sample_discrete_laplace(bad if bad != 2**81 else 2**41, 10)


@pytest.mark.parametrize("size", [-1, 1.5, "3", None])
def test_bad_size_raises(size):
    with pytest.raises(SparsedpError):
        sample_discrete_gaussian(1, size)
    with pytest.raises(SparsedpError):
        sample_discrete_laplace(1, size)


def test_error_messages_name_the_argument():
    with pytest.raises(InvalidParameterError, match="sigma2"):
        sample_discrete_gaussian(-1, 3)
    with pytest.raises(InvalidParameterError, match="size"):
        sample_discrete_laplace(1, -3)


def test_float_samplers_refuse_without_flag():
    with pytest.raises(InvalidParameterError, match="insecure_float"):
        sample_gaussian(1.0, 10)
    with pytest.raises(InvalidParameterError, match="insecure_float"):
        sample_laplace(1.0, 10, insecure_float=1)
    g = sample_gaussian(2.0, 100_001, InsecureSeededRandom(1), insecure_float=True)
    assert g.shape == (100_001,) and abs(g.std() - 2) < 0.03 and abs(g.mean()) < 0.03
    lap = sample_laplace(2.0, 100_000, InsecureSeededRandom(1), insecure_float=True)
    assert abs(lap.std() - 2 * math.sqrt(2)) < 0.05 and abs(lap.mean()) < 0.05
