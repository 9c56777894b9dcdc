"""Accuracy helpers: Figures 1 and 2 and Cor 7.3 (spec §7.1–§7.3, T29), exact bounds (§7.5), E3."""

from __future__ import annotations

from fractions import Fraction as F

import pytest

from sparsedp.mechanisms.pure import accuracy as acc
from sparsedp.mechanisms.pure.pure_sparse import pure_sparse_histogram
from sparsedp.noise.clamped_geometric import FastSample, GeoSample, counting_sampler

CASES = [(1, 2 ** 32, 0.05), (0.1, 10 ** 6, 0.01)]


def test_T29_figure_formulas():
    (e1, X1, b1), (e2, X2, b2) = CASES
    f = acc.figure1(e1, X1, b1)
    assert (f["geometric"], f["geosample"], f["fastsample"]) == ((6, 51), (14, 114), (17, 117))
    f = acc.figure1(e2, X2, b2)
    assert (f["geometric"], f["geosample"], f["fastsample"]) == ((93, 369), (208, 829), (239, 861))
    f = acc.figure2(e1, X1, b1)
    assert (f["geosample"], f["fastsample"]) == ((20, 240, 234), (23, 246, 240))
    f = acc.figure2(e2, X2, b2)
    assert (f["geosample"], f["fastsample"]) == ((270, 1784, 1722), (301, 1846, 1784))
    assert acc.corollary73(e1, X1, b1) == (19, 130)
    assert acc.corollary73(e2, X2, b2) == (265, 956)


@pytest.mark.parametrize("eps,X,beta", CASES)
def test_exact_bounds_never_worse_than_the_tables(eps, X, beta):
    n = 5000
    beta_q = F(beta).limit_denominator(1000)
    g = GeoSample(n, eps)
    f1, f2 = acc.figure1(eps, X, beta), acc.figure2(eps, X, beta)
    b = acc.basic_accuracy(g, beta_q, X)
    assert b.per_query <= f1["geosample"][0] and b.simultaneous <= f1["geosample"][1]
    fs = FastSample(n, eps, F(1, int(2 * X / beta_q) + 1))
    b = acc.basic_accuracy(fs, beta_q, X)
    assert b.per_query <= f1["fastsample"][0] and b.simultaneous <= f1["fastsample"][1]
    b6 = F(1, int(6 / beta_q))
    p = acc.pure_sparse_accuracy(g, beta_q, X, b6, b6)
    assert p.per_query <= f2["geosample"][0] and p.threshold <= f2["geosample"][1]
    assert p.simultaneous <= f2["geosample"][2]
    fs = FastSample(n, eps, F(1, int(8 * X / beta_q) + 1))  # E3: gamma = beta/(8|X|)
    p = acc.pure_sparse_accuracy(fs, beta_q, X, b6, b6)
    assert p.per_query <= f2["fastsample"][0] and p.threshold <= f2["fastsample"][1]
    assert p.simultaneous <= f2["fastsample"][2]


def test_E3_figure2_fastsample_gamma():
    """With the caption's gamma = beta/(4|X|) the threshold's per-bin budget beta/(4|X|) − gamma is 0."""
    X, beta = 2 ** 16, F(1, 20)
    fs = FastSample(3000, 1, beta / (4 * X))
    p = acc.pure_sparse_accuracy(fs, beta, X, beta / 6, beta / 6)
    assert p.threshold == 2 * fs.n  # no guarantee at all
    fs = FastSample(3000, 1, beta / (8 * X))
    assert acc.pure_sparse_accuracy(fs, beta, X, beta / 6, beta / 6).threshold < 2 * fs.n // 5


def test_keep_heavy_and_stability_helpers():
    g = GeoSample(100, 1)
    kh = acc.keep_heavy_accuracy(g, F(1, 20), 1000)
    assert kh.per_query == g.accuracy(F(1, 40)) and kh.threshold == 2 * g.accuracy(F(1, 40000))
    st = acc.stability_accuracy(g, F(1, 20), 30)
    assert st.threshold == 30 + st.per_query and st.simultaneous == 30 + g.accuracy(F(1, 2000))


@pytest.mark.slow
def test_T28_pure_sparse_empirical_error(rng):
    """Monte Carlo: per-query error on a heavy bin and simultaneous error stay within beta."""
    n, X, beta = 400, 2 ** 20, F(1, 10)
    s = counting_sampler(n, 1, beta / (8 * X))
    b6 = beta / 6
    a = acc.pure_sparse_accuracy(s, beta, X, b6, b6)
    counts = {7: 300, 8: 60, 9: 40}
    fails_pq = fails_sim = 0
    N = 300
    for _ in range(N):
        out = dict(pure_sparse_histogram(s, counts, X, b6, b6, rng))
        fails_pq += abs(out.get(7, 0) - 300) > a.per_query
        errs = [abs(out.get(x, 0) - c) for x, c in counts.items()] + [c for x, c in out.items() if x not in counts]
        fails_sim += max(errs) > a.simultaneous
    assert fails_pq <= 0.1 * N + 3 * (0.09 * N) ** 0.5
    assert fails_sim <= 0.1 * N + 3 * (0.09 * N) ** 0.5
