"""CompactHistogram (seed 003 §7; spec §5.12, P8; tests T20–T24)."""

from __future__ import annotations

import random
from fractions import Fraction as F

import pytest

from pure_helpers import FixedRandom
from sparsedp.errors import InputDataError
from sparsedp.mechanisms.pure.accuracy import compact_accuracy, corollary73
from sparsedp.mechanisms.pure.compact import BlockMap, CompactHistogram, choose_ell, compact_histogram
from sparsedp.mechanisms.pure.gf2 import GF2k, _clmul_loop, clmul
from sparsedp.noise.clamped_geometric import FastSample, GeoSample


def _polymod(a, f):
    df = f.bit_length()
    while a.bit_length() >= df:
        a ^= f << (a.bit_length() - df)
    return a


def _polygcd(a, b):
    while b:
        a, b = b, _polymod(a, b)
    return a


@pytest.mark.parametrize("ell", range(6))
def test_T20_modulus_irreducible_rabin(ell):
    F_ = GF2k(ell)
    k, f = F_.k, F_.modulus
    assert k == [2, 6, 18, 54, 162, 486][ell]

    def x_pow_2j(j):  # x^(2^j) mod f by repeated squaring in the field
        r = 2  # the element x
        for _ in range(j):
            r = F_.mul(r, r)
        return r

    assert x_pow_2j(k) == 2
    for p in {2, 3} & {q for q in (2, 3) if k % q == 0}:
        assert _polygcd(f, x_pow_2j(k // p) ^ 2) == 1


@pytest.mark.parametrize("ell", [0, 1, 3, 5, 6])
def test_T20_field_axioms_and_interpolation(ell):
    F_ = GF2k(ell)
    rnd = random.Random(ell)
    for _ in range(20):
        a, b, c = (rnd.getrandbits(F_.k) for _ in range(3))
        assert clmul(a, b) == _clmul_loop(a, b)
        assert F_.mul(a, b) == F_.mul(b, a)
        assert F_.mul(a, F_.mul(b, c)) == F_.mul(F_.mul(a, b), c)
        assert F_.mul(a, b ^ c) == F_.mul(a, b) ^ F_.mul(a, c)
        assert F_.mul(a, 1) == a and a < F_.size
        if a:
            assert F_.mul(a, F_.inv(a)) == 1
    m = min(F_.size, 9)
    xs = rnd.sample(range(min(F_.size, 10 ** 9)), m)
    ys = [rnd.getrandbits(F_.k) for _ in xs]
    co = F_.interpolate(xs, ys)
    assert len(co) == m and [F_.evaluate(co, x) for x in xs] == ys
    nz = [rnd.getrandbits(F_.k) | 1 for _ in range(5)]
    assert [F_.mul(a, b) for a, b in zip(nz, F_.batch_inv(nz))] == [1] * 5


def test_T21_block_map():
    b = BlockMap(5000, 250)
    assert (b.finv(1), b.finv(149), b.finv(250)) == (20, 2980, 5000)
    b = BlockMap(5000, 247)
    assert (b.q, b.r) == (20, 60)
    assert (b.finv(1), b.finv(60), b.finv(61), b.finv(247)) == (21, 1260, 1280, 5000)
    for d0, d in ((5000, 247), (64, 5), (4096, 45), (100, 100)):
        bm = BlockMap(d0, d)
        assert all(bm.f(bm.finv(u)) == u for u in range(1, d + 1))
        sizes = [bm.finv(u) - bm.finv(u - 1) for u in range(1, d + 1)]
        assert set(sizes) <= {bm.q, bm.q + 1} and sum(sizes) == d0
        assert [bm.f(u0) for u0 in range(1, d0 + 1)] == sorted(bm.f(u0) for u0 in range(1, d0 + 1))


@pytest.mark.parametrize("sampler,d0", [(GeoSample(1, 1), 64), (GeoSample(3, 1), 4096)])
def test_T22_m0_preimages_partition(sampler, d0):
    bm = BlockMap(d0, sampler.d)
    Fz = [0] + [sampler.cdf(0, z) for z in range(sampler.n + 1)]
    seen = []
    for v in range(sampler.n + 1):
        lo, hi = bm.finv(Fz[v]), bm.finv(Fz[v + 1])
        assert hi > lo
        assert all(sampler.sample_u(0, bm.f(u0)) == v for u0 in range(lo + 1, hi + 1))
        seen.extend(range(lo + 1, hi + 1))
    assert seen == list(range(1, d0 + 1))


def _compact_law(s, x, X, ell):
    """Exact output law of compact_histogram on the one-row dataset (x) by enumerating its randomness."""
    F_ = GF2k(ell)
    bm = BlockMap(F_.size, s.d)
    law = {}
    for u in range(s.d):
        v = s.sample_u(1, u + 1)
        lo, hi = bm.finv(s.cdf(0, v - 1)), bm.finv(s.cdf(0, v))
        for j in range(hi - lo):
            for w in range(F_.size):
                h = compact_histogram(s, {x: 1}, X, FixedRandom([u, j, w]), ell=ell)
                p = F(1, s.d * (hi - lo) * F_.size)
                law[h.coeffs] = law.get(h.coeffs, 0) + p
    return law, h


def test_T23_toy_exact_law_and_privacy():
    s = GeoSample(1, 1)
    laws = {}
    for x in range(3):
        laws[x], h = _compact_law(s, x, 3, 1)
        assert len(laws[x]) == 64 ** 2 and sum(laws[x].values()) == 1
    assert (h.block_map.q, h.block_map.r) == (12, 4)
    r2, r3 = h.mismatch_ratios()
    assert (r2, r3) == (F(65, 64), F(128, 125))
    best = max(laws[a][p] / laws[b][p] for a in range(3) for b in range(3) if a != b for p in laws[a])
    assert best == F(9, 4) * r2 * r3 == F(234, 100)
    # formula of spec §5.12 and the marginals
    p0, pm1 = h.m0_pmf(), s.pmf(1)
    for x in range(3):
        marg = {y: {} for y in range(3)}
        for co, p in laws[x].items():
            hh = CompactHistogram(sampler=s, ell=1, coeffs=co, domain_size=3)
            vx = hh.count(x)
            assert p == F(1, 64 ** 2) * pm1[vx] / p0[vx]
            for y in range(3):
                c = hh.count(y)
                marg[y][c] = marg[y].get(c, 0) + p
        for y in range(3):
            want = pm1 if y == x else p0
            assert [marg[y].get(c, 0) for c in range(2)] == want


class _Recording:
    """Proxy sampler recording the noisy counts drawn for occupied bins."""

    def __init__(self, inner):
        self.inner, self.drawn = inner, []

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def sample(self, c, rng=None):
        v = self.inner.sample(c, rng)
        self.drawn.append(v)
        return v


@pytest.mark.parametrize("sampler,X", [(GeoSample(8, 1), 2 ** 64), (FastSample(30, F(1, 2), F(1, 100)), 10 ** 30)])
def test_T24_counts_of_occupied_bins_and_serialisation(sampler, X, rng):
    rec = _Recording(sampler)
    counts = {3: 2, 17: 1, X - 1: 4}
    h = compact_histogram(rec, counts, X, rng)
    h = CompactHistogram(sampler=sampler, ell=h.ell, coeffs=h.coeffs, domain_size=X)
    assert [h.count(x) for x in sorted(counts)] == rec.drawn
    assert h.count(12345) == h.count(12345)  # deterministic
    h2 = CompactHistogram.from_dict(h.to_dict())
    assert h2 == h and [h2.count(x) for x in (0, 3, 99)] == [h.count(x) for x in (0, 3, 99)]
    assert h.d0 >= max(X, 20 * sampler.params.k * sampler.d)
    r2, r3 = h.mismatch_ratios()
    q = h.block_map.q
    assert r2 <= F(q + 1, q) and r3 <= F(q + 1, q)
    with pytest.raises(InputDataError):
        h.count(X)


def test_choose_ell():
    assert choose_ell(3, 5, 12, 1) == 1 and choose_ell(2 ** 64, 5, 1, 3) == 4 and choose_ell(2, 2, 1, 1) == 0


def test_compact_accuracy_matches_corollary(rng):
    """Cor 7.3 parameters: the exact per-query bound is no worse than the printed ⌈(5/ε)ln(2/β)⌉."""
    X, beta = 2 ** 32, F(1, 20)
    k1 = 2  # eps' = 1/ceil(10/9) for eps = 1
    s = GeoSample(40, F(1, k1))
    h = compact_histogram(s, {1: 40}, X, rng, q_min=20)
    a = compact_accuracy(h, beta)
    pq, sim = corollary73(1, X, 0.05)
    assert a.per_query <= pq and a.simultaneous <= sim
    p0 = h.m0_pmf()
    assert sum(p0[a.per_query + 1:]) <= beta
