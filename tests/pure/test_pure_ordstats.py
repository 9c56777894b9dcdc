"""Order statistics of empty-bin noise (spec §5.8, P4, P5; tests T11, T12, T17, T18) and erratum E1."""

from __future__ import annotations

import itertools
import random
from collections import Counter
from fractions import Fraction as F

import pytest

from pure_helpers import FixedRandom
from sparsedp.mechanisms.pure import dyadic as dy
from sparsedp.mechanisms.pure import ordstats as o
from sparsedp.mechanisms.pure.exact import tv_distance
from sparsedp.noise.clamped_geometric import GeoSample


def brute_force_top(pmf, n, m):
    """Law of the top n+1 of m iid values with pmf on [0..n] by enumerating [n]^m."""
    out = {}
    for vals in itertools.product(range(len(pmf)), repeat=m):
        p = F(1)
        for x in vals:
            p *= pmf[x]
        key = tuple(sorted(vals, reverse=True)[: n + 1])
        key = key + (0,) * (n + 1 - len(key))
        out[key] = out.get(key, 0) + p
    return out


def ordsample_paper_dist(Fz, n, m):
    """The law of the paper's OrdSample (Alg 6) — WRONG for tied values (E1); regression only."""
    def rec(i, v_prev):
        if i > n:
            return {(): F(1)}
        e = m - i
        den = Fz(v_prev) ** e
        out = {}
        for z in range(v_prev + 1):
            p = F(Fz(z) ** e - (Fz(z - 1) ** e if z > 0 else 0), den)
            if p:
                for rest, q in rec(i + 1, z).items():
                    out[(z,) + rest] = out.get((z,) + rest, 0) + p * q
        return out
    return rec(0, n)


def level_dist(Fz, n, m):
    return o.top_order_stats_dist(Fz, n, m, o.exact_trunc_binomial_dist)


def test_T11_level_sampler_is_exact():
    g = GeoSample(2, 1)
    Fz = lambda z: g.cdf(0, z)  # noqa: E731
    for m in (3, 4, 5, 6):
        assert tv_distance(level_dist(Fz, 2, m), brute_force_top(g.pmf(0), 2, m)) == 0
    g = GeoSample(3, F(1, 2))
    Fz = lambda z: g.cdf(0, z)  # noqa: E731
    assert tv_distance(level_dist(Fz, 3, 5), brute_force_top(g.pmf(0), 3, 5)) == 0


def test_T12_paper_ordsample_is_wrong():
    g = GeoSample(2, 1)
    Fz = lambda z: g.cdf(0, z)  # noqa: E731
    want = {2: 0.06669, 3: 0.13448, 4: 0.17338, 5: 0.24352}
    for m, tv in want.items():
        truth = brute_force_top(g.pmf(0), 2, m)
        assert float(tv_distance(ordsample_paper_dist(Fz, 2, m), truth)) == pytest.approx(tv, abs=5e-6)
    # Bernoulli(1/2), m = 2, both order statistics
    Fb = lambda z: [1, 2][z] if z >= 0 else 0  # noqa: E731
    assert ordsample_paper_dist(Fb, 1, 2) == {(0, 0): F(1, 4), (1, 0): F(3, 8), (1, 1): F(3, 8)}
    assert level_dist(Fb, 1, 2) == {(0, 0): F(1, 4), (1, 0): F(1, 2), (1, 1): F(1, 4)}


def test_level_sampler_matches_its_law(rng):
    g = GeoSample(2, 1)
    Fz = lambda z: g.cdf(0, z)  # noqa: E731
    law = level_dist(Fz, 2, 5)
    N = 3000
    binom = lambda M, pn, pd, T: o.exact_trunc_binomial(M, pn, pd, T, rng)  # noqa: E731
    got = Counter(o.top_order_stats(Fz, 2, 5, binom) for _ in range(N))
    assert set(got) <= set(law)
    for key, p in law.items():
        sd = (float(p) * (1 - float(p)) * N) ** 0.5
        assert abs(got[key] - float(p) * N) <= 5 * sd + 2


def test_exact_trunc_binomial_exhaustive():
    M, pn, pd, T = 4, 1, 3, 2
    law = o.exact_trunc_binomial_dist(M, pn, pd, T)
    assert law == [F(16, 81), F(32, 81), F(33, 81)]
    got = Counter(o.exact_trunc_binomial(M, pn, pd, T, FixedRandom([u])) for u in range(pd ** M))
    assert [F(got[j], pd ** M) for j in range(T + 1)] == law


def test_P4_dyadic_round_down():
    P = 20
    rnd = random.Random(4)
    for _ in range(200):
        num, den = rnd.randint(1, 10 ** 12), rnd.randint(1, 10 ** 12)
        m, e = dy.frac(num, den, P)
        x = F(m) * F(2) ** e
        assert x <= F(num, den) and (2 ** (P - 1) <= m < 2 ** P)
        k = rnd.randint(1, 5000)
        q = F(min(num, den), max(num, den))
        pm, pe = dy.power(dy.frac(q.numerator, q.denominator, P), k, P)
        approx = F(pm) * F(2) ** pe
        assert approx <= q ** k
        lam = (2 * k - 1) * F(1, 2 ** (P - 3))
        assert approx >= q ** k * (1 - lam)  # e^{-lam} >= 1 - lam


def test_T17_approx_binomial_tv_bound():
    rnd = random.Random(17)
    for _ in range(60):
        M = rnd.randint(1, 300)
        T = rnd.randint(1, min(M, 12))
        pd = rnd.randint(2, 10 ** 6)
        pn = rnd.randint(1, pd - 1)
        P = rnd.randint(8, 40)
        tv = tv_distance(dict(enumerate(o.approx_trunc_binomial_dist(M, pn, pd, T, P))),
                         dict(enumerate(o.exact_trunc_binomial_dist(M, pn, pd, T))))
        assert tv <= F(16 * M + 9 * T, 2 ** P)


def test_approx_binomial_sampler_matches_its_law():
    M, pn, pd, T, P = 7, 2, 5, 3, 8
    law = o.approx_trunc_binomial_dist(M, pn, pd, T, P)
    got = Counter(o.approx_trunc_binomial(M, pn, pd, T, P, FixedRandom([u])) for u in range(2 ** P))
    assert [F(got[j], 2 ** P) for j in range(T + 1)] == law


def test_certified_zero_never_changes_the_output():
    """The low-precision pre-check returns 0 only when the full P-bit walk would return 0."""
    rnd = random.Random(3)
    for _ in range(400):
        M = rnd.choice([rnd.randint(1, 50), rnd.randint(1, 10 ** 6), 2 ** 64 - rnd.randint(0, 99)])
        pd = rnd.randint(2, 10 ** 30)
        pn = min(pd - 1, rnd.randint(0, max(1, pd // 10 ** rnd.randint(0, 25))))
        P = rnd.choice([200, 400, 2000])
        C0 = dy.scaled_floor(dy.power(dy.frac(pd - pn, pd, P), M, P), P)
        for u in (C0, C0 + 1, max(1, C0 - rnd.randint(0, 2 ** 100)), rnd.randint(1, 2 ** P)):
            if 1 <= u <= 2 ** P and o._certified_zero(M, pn, pd, P, u):
                assert u <= C0


@pytest.mark.parametrize("m", [5, 50, 1000])
@pytest.mark.parametrize("P", [10, 20, 40])
def test_T18_approx_top_order_stats_tv(m, P):
    g = GeoSample(2, 1)
    Fz = lambda z: g.cdf(0, z)  # noqa: E731
    approx = o.top_order_stats_dist(Fz, 2, m, lambda M, pn, pd, T: o.approx_trunc_binomial_dist(M, pn, pd, T, P))
    exact = level_dist(Fz, 2, m)
    assert tv_distance(approx, exact) <= F(3 * (16 * m + 27), 2 ** P)


def test_levels_bounded_by_n():
    calls = []
    g = GeoSample(5, 1)

    def binom(M, pn, pd, T):
        calls.append(T)
        return 0

    out = o.top_order_stats(lambda z: g.cdf(0, z), 5, 100, binom)
    assert out == (0,) * 6 and len(calls) == 5
    with pytest.raises(ValueError):
        o.top_order_stats(lambda z: g.cdf(0, z), 5, 5, binom)
