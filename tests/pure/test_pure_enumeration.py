"""Exact privacy by enumeration (spec §8: T8–T10, T13–T16, T25, T26, T31) and errata E1, E4, E8.

Every mechanism's complete output law on tiny instances is computed with Fractions and the maximum
likelihood ratio over replace-one neighbours and outputs is compared with a rational bound on e^ε
(exact ``(b/a)^2 = e^{ε̃}`` for GeoSample-based mechanisms; the Taylor lower bound ``L_40(ε) <= e^ε``
otherwise).
"""

from __future__ import annotations

from collections import Counter
from fractions import Fraction as F

import pytest
from scipy import stats

from pure_helpers import CountingRandom
from sparsedp.mechanisms.pure import exact as ex
from sparsedp.mechanisms.pure.keep_heavy import keep_heavy, kh_double_prime, kh_prime
from sparsedp.mechanisms.pure.labels import coupon_draws, coupon_failure_probability, coupon_labels
from sparsedp.mechanisms.pure.pure_sparse import pure_sparse_delta, pure_sparse_histogram
from sparsedp.mechanisms.pure.stability import stability_histogram, stability_threshold
from sparsedp.noise.clamped_geometric import FastSample, GeoSample
from test_pure_ordstats import ordsample_paper_dist


def e_eps_tilde(s) -> F:
    return s.ratio_bound ** 2


@pytest.mark.parametrize("X,n", [(3, 1), (3, 3), (4, 2), (5, 2)])
@pytest.mark.parametrize("eps", [1, F(1, 2), F(1, 3)])
def test_T8_basic_histogram(X, n, eps):
    s = GeoSample(n, eps)
    r, _ = ex.max_ratio(lambda c: ex.basic_dist(s, c, range(X)), X, n)
    assert r == e_eps_tilde(s)  # attained exactly


def test_T8_basic_histogram_fast_sample():
    s = FastSample(4, 1, F(1, 2), t="min")
    r, _ = ex.max_ratio(lambda c: ex.basic_dist(s, c, range(3)), 3, 4)
    assert r <= ex.exp_lower(F(1))


def test_T9_keep_heavy():
    s = GeoSample(2, 1)
    r, _ = ex.max_ratio(lambda c: ex.keep_heavy_dist(s, c, 5), 5, 2)
    assert r == F(9, 4)


@pytest.mark.parametrize("X,n,eps", [(4, 3, 1), (6, 2, F(1, 2)), (4, 1, F(1, 3)), (5, 3, F(1, 5))])
def test_keep_heavy_several_eps(X, n, eps):
    s = GeoSample(n, eps)
    r, _ = ex.max_ratio(lambda c: ex.keep_heavy_dist(s, c, X), X, n)
    assert r <= e_eps_tilde(s)


@pytest.mark.parametrize("X,n,eps", [(5, 2, 1), (6, 2, F(1, 2)), (5, 1, F(1, 3))])
def test_T13_kh_prime_equals_keep_heavy(X, n, eps):
    s = GeoSample(n, eps)
    for D in ex.datasets(X, n):
        c = ex.as_counts(D)
        assert ex.tv_distance(ex.kh_prime_dist(s, c, X), ex.keep_heavy_dist(s, c, X)) == 0
    r, _ = ex.max_ratio(lambda c: ex.kh_prime_dist(s, c, X), X, n)
    assert r <= e_eps_tilde(s)


def test_T14_regression_kh_prime_with_paper_ordsample_breaks_dp():
    s = GeoSample(2, 1)
    Fz = lambda z: s.cdf(0, z)  # noqa: E731
    paper = lambda c: ex.kh_prime_dist(s, c, 5, lambda m: ordsample_paper_dist(Fz, 2, m))  # noqa: E731
    tv = max(ex.tv_distance(paper(ex.as_counts(D)), ex.keep_heavy_dist(s, ex.as_counts(D), 5))
             for D in ex.datasets(5, 2))
    assert float(tv) == pytest.approx(0.168, abs=1e-3)
    r, (D, D2, o) = ex.max_ratio(paper, 5, 2)
    assert r == F(30375, 8996) and r > F(9, 4)
    assert paper(ex.as_counts((0, 1)))[((0, 2), (4, 1))] / paper(ex.as_counts((1, 1)))[((0, 2), (4, 1))] == r


def test_T15_coupon_failure_probability():
    worst = 0.0
    for n in (1, 2, 3, 5):
        for X in (4 * n, 4 * n + 1, 8 * n, 100):
            for g1 in (2, 3, 5, 10):
                pf = coupon_failure_probability(X, n, g1)
                assert 0 <= pf <= F(1, g1)
                worst = max(worst, float(pf * g1))
    assert worst == pytest.approx(0.0029, abs=1e-4)


def test_T16_kh_double_prime_law_and_privacy():
    s = GeoSample(1, 1)
    for X, g1 in ((4, 1), (5, 2)):
        pf = coupon_failure_probability(X, 1, g1)
        for D in ex.datasets(X, 1):
            c = ex.as_counts(D)
            law = ex.kh_double_prime_dist(s, c, X, g1)
            kh = ex.keep_heavy_dist(s, c, X)
            want = {o: (1 - pf) * p for o, p in kh.items()}
            want[()] = want.get((), 0) + pf
            assert ex.tv_distance(law, want) == 0
        r, _ = ex.max_ratio(lambda c: ex.kh_double_prime_dist(s, c, X, g1), X, 1)
        assert r <= e_eps_tilde(s)


def test_T10_uniform_component_full_support():
    sizes = {(4, 1): (F(1, 8), 5), (5, 2): (F(2, 225), 51), (8, 2): (F(1, 288), 129),
             (6, 3): (F(1, 2304), 694), (12, 3): (F(1, 18432), 6571)}
    from math import comb, factorial

    for (X, n), (pmin, size) in sizes.items():
        law = ex.uniform_component_dist(X, n)
        # |H_{n,n}(X)| = sum_j C(X, j) n^j  (j nonzero bins, counts 1..n): full support
        assert len(law) == size == sum(comb(X, j) * n ** j for j in range(n + 1))
        assert min(law.values()) == pmin == F(factorial(n), ((n + 1) * X) ** n) >= F(1, (6 * X) ** n)
        assert sum(law.values()) == 1
    # E8: the reference code's uniform component always returned () -- its min over H_{n,n} is 0,
    # so Lemma 3.1's condition (1) can hold for no delta > 0.


def test_E4_delta_exponent_is_n():
    assert pure_sparse_delta(1, 6, 10, 3) == F(1, 3 * 6 * 60 ** 3)
    # Lemma 3.1 condition (1) with tanh(eps/2) >= eps/3, gamma/(1-gamma) >= gamma, min D >= (6|X|)^-n
    for X, n in ((4, 1), (5, 2), (8, 2), (6, 3)):
        dmin = min(ex.uniform_component_dist(X, n).values())
        for k, g2 in ((1, 2), (2, 6), (5, 10)):
            delta = pure_sparse_delta(k, g2, X, n)
            assert delta <= F(1, 3 * k) * F(1, g2 - 1) * dmin


@pytest.mark.parametrize("X", [4, 5, 6])
@pytest.mark.parametrize("eps,g1,g2", [(1, 2, 2), (F(1, 2), None, 6), (1, None, 3)])
def test_pure_sparse_histogram_is_pure_dp(X, eps, g1, g2):
    s = GeoSample(1, eps)
    r, _ = ex.max_ratio(lambda c: ex.pure_sparse_dist(s, c, X, g1, g2), X, 1)
    assert r <= ex.exp_lower(F(eps))


def test_sparse_histogram_within_delta_of_kh_double_prime():
    s = GeoSample(1, 1)
    X = 5
    delta = pure_sparse_delta(1, 2, X, 1)
    for D in ex.datasets(X, 1):
        c = ex.as_counts(D)
        assert ex.tv_distance(ex.sparse_dist(s, c, X, 2, delta), ex.kh_double_prime_dist(s, c, X, 2)) <= delta


@pytest.mark.slow
@pytest.mark.parametrize("X,n", [(8, 2), (9, 2)])
def test_pure_sparse_histogram_is_pure_dp_n2(X, n):
    s = GeoSample(n, 1)
    r, _ = ex.max_ratio(lambda c: ex.pure_sparse_dist(s, c, X, None, 2), X, n)
    assert r <= ex.exp_lower(F(1))


@pytest.mark.slow
def test_T13_kh_prime_equals_keep_heavy_larger():
    s = GeoSample(3, 1)
    for D in ex.datasets(7, 3):
        c = ex.as_counts(D)
        assert ex.tv_distance(ex.kh_prime_dist(s, c, 7), ex.keep_heavy_dist(s, c, 7)) == 0


@pytest.mark.parametrize("X,n,eps,delta,tau,worst", [
    (3, 12, 1, F(1, 10), 7, 0.035117),
    (4, 10, 1, F(1, 20), 8, 0.023411),
    (3, 12, 1, F(1, 100), 12, 0.0)])
def test_T31_stability_histogram(X, n, eps, delta, tau, worst):
    s = GeoSample(n, eps)
    assert stability_threshold(s, delta) == tau
    h = ex.hockey_stick(lambda c: ex.stability_dist(s, c, delta), X, n, e_eps_tilde(s))
    assert h <= delta / 2
    assert float(h) == pytest.approx(worst, abs=1e-6)


# ---------------------------------------------------------------- samplers against their exact laws
def _chi2(sample, law, N):
    obs = Counter(sample() for _ in range(N))
    assert set(obs) <= {o for o, p in law.items() if p > 0}
    items = sorted(law.items(), key=lambda kv: kv[1])
    eo, oo, ae, ao = [], [], 0.0, 0
    for o, p in items:
        ae += float(p) * N
        ao += obs[o]
        if ae >= 10:
            eo.append(ae)
            oo.append(ao)
            ae, ao = 0.0, 0
    eo[-1] += ae
    oo[-1] += ao
    return stats.chisquare(oo, eo).pvalue


def test_samplers_match_exact_laws(rng):
    s = GeoSample(2, 1)
    c = {0: 2}
    assert _chi2(lambda: keep_heavy(s, c, 5, rng), ex.keep_heavy_dist(s, c, 5), 3000) > 1e-4
    c = {1: 1, 3: 1}
    assert _chi2(lambda: kh_prime(s, c, 5, rng), ex.kh_prime_dist(s, c, 5), 3000) > 1e-4
    s1 = GeoSample(1, 1)
    c = {2: 1}
    assert _chi2(lambda: kh_double_prime(s1, c, 4, 1, rng), ex.kh_double_prime_dist(s1, c, 4, 1), 3000) > 1e-4
    assert _chi2(lambda: pure_sparse_histogram(s1, c, 4, 1, F(1, 2), rng),
                 ex.pure_sparse_dist(s1, c, 4, 1, 2), 3000) > 1e-4
    s6 = GeoSample(6, 1)
    c = {0: 5, 2: 1}
    assert _chi2(lambda: stability_histogram(s6, c, 3, F(1, 2), rng), ex.stability_dist(s6, c, F(1, 2)), 3000) > 1e-4


def test_T25_canonical_output(rng):
    from sparsedp.noise import InsecureSeededRandom

    s = GeoSample(6, 1)
    a = {5: 2, 1: 3, 9: 1}
    b = {9: 1, 1: 3, 5: 2}
    for f in (lambda c, r: kh_prime(s, c, 30, r), lambda c, r: pure_sparse_histogram(s, c, 40, F(1, 10), F(1, 10), r)):
        oa, ob = f(a, InsecureSeededRandom(7)), f(b, InsecureSeededRandom(7))
        assert oa == ob and list(oa) == sorted(oa) and all(cnt > 0 for _, cnt in oa)


def test_T26_coupon_draws_bounded(rng):
    for n, g1 in ((1, 1), (3, 5), (10, 2)):
        cr = CountingRandom(rng)
        coupon_labels(4 * n, set(range(n)), n, g1, cr)
        assert cr.calls <= coupon_draws(n, g1) == (4 * n + 2) * g1
