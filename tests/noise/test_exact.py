"""Exactness of the primitives: the random choices are ENUMERATED (scripted sources), and the
float fast path of the vectorised samplers is checked against big-integer bounds of exp(−x)."""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath as mp
import numpy as np
import pytest

from sparsedp.errors import SparsedpError
from sparsedp.noise import InsecureSeededRandom, bernoulli, bernoulli_exp
from sparsedp.noise import discrete as vec
from sparsedp.noise.exact import LazyUniform, discrete_gaussian, discrete_laplace, exp_neg_bounds, geometric_exp_neg


class _NeedChoice(Exception):
    def __init__(self, n):
        self.n = n


class _Scripted:
    """A source whose randbelow(n) answers come from a script; asks for a choice when it runs out."""

    def __init__(self, script):
        self.script = list(script)
        self.sizes = []

    def randbelow(self, n):
        i = len(self.sizes)
        self.sizes.append(n)
        if i >= len(self.script):
            raise _NeedChoice(n)
        assert 0 <= self.script[i] < n
        return self.script[i]


def _enumerate(fn, max_calls):
    """Run fn(source) over every sequence of randbelow answers with at most max_calls calls.

    Returns {outcome: exact probability} and the exact probability mass cut off by the depth limit.
    """
    outcomes, cut = {}, Fraction(0)
    stack = [()]
    while stack:
        script = stack.pop()
        src = _Scripted(script)
        try:
            out = fn(src)
        except _NeedChoice as need:
            prob = Fraction(1)
            for n in src.sizes[:-1]:
                prob /= n
            if len(script) >= max_calls:
                cut += prob
            else:
                stack.extend(script + (v,) for v in range(need.n))
            continue
        prob = Fraction(1)
        for n in src.sizes:
            prob /= n
        outcomes[out] = outcomes.get(out, Fraction(0)) + prob
    return outcomes, cut


@pytest.mark.parametrize("gamma", [Fraction(0), Fraction(1, 3), Fraction(1, 2), Fraction(2, 3), Fraction(1)])
def test_bernoulli_exp_enumerated_equals_exact_series(gamma):
    depth = 6
    outcomes, cut = _enumerate(lambda src: bernoulli_exp(gamma, src), depth)
    # CKS20 Alg. 1 stops at the first failure K; P[stop at K] = γ^{K-1}/(K-1)! − γ^K/K!.
    expected_one = sum((gamma ** (k - 1) / math.factorial(k - 1) - gamma**k / math.factorial(k)
                        for k in range(1, depth + 1) if k % 2), Fraction(0))
    assert outcomes.get(1, 0) == expected_one
    assert cut == gamma**depth / math.factorial(depth)
    assert sum(outcomes.values()) + cut == 1
    # and the series tends to exp(−γ): |P[1] − e^{−γ}| <= cut
    assert abs(float(outcomes.get(1, 0)) - math.exp(-gamma)) <= float(cut) + 1e-15


@pytest.mark.parametrize("gamma", [Fraction(3, 2), Fraction(7, 3), Fraction(3)])
def test_bernoulli_exp_above_one_enumerated(gamma):
    outcomes, cut = _enumerate(lambda src: bernoulli_exp(gamma, src), 13)
    p1 = outcomes.get(1, Fraction(0))
    assert float(p1) <= math.exp(-gamma) <= float(p1 + cut)
    assert cut < Fraction(3, 1000)


def test_bernoulli_rational_enumerated():
    for p in [Fraction(0), Fraction(1, 7), Fraction(5, 12), Fraction(1)]:
        outcomes, cut = _enumerate(lambda src: bernoulli(p, src), 1)
        assert cut == 0 and outcomes.get(1, 0) == p


def test_discrete_laplace_enumerated_acceptance():
    # CKS20 Alg. 2 with scale 1 (t = s = 1): one round = U = 0, D ~ Bern(e^0), then V, then sign.
    outcomes, cut = _enumerate(lambda src: discrete_laplace(1, src), 16)
    q = mp.exp(-1)
    for x in (-1, 0, 1):
        exact = (1 - q) / (1 + q) * q ** abs(x)
        assert float(outcomes.get(x, 0)) <= float(exact) <= float(outcomes.get(x, 0) + cut)
    assert cut < Fraction(1, 5)


def test_exp_neg_bounds_contain_exp():
    mp.mp.dps = 250
    xs = [Fraction(0), Fraction(1, 3), Fraction(1), Fraction(7, 2), Fraction(100, 3), Fraction(1000),
          Fraction(0.1), Fraction(10**20 + 1, 10**18), Fraction(2**-40)]
    for x in xs:
        for prec in (53, 117, 300):
            lo, hi = exp_neg_bounds(x, prec)
            exact = mp.exp(-mp.mpf(x.numerator) / x.denominator) * mp.mpf(2) ** prec
            assert lo <= exact <= hi
            assert hi - lo <= 2
    assert exp_neg_bounds(Fraction(0), 60) == (2**60, 2**60)
    with pytest.raises(SparsedpError):
        exp_neg_bounds(Fraction(-1), 10)


class _Bits:
    def __init__(self, words):
        self.words = list(words)

    def getrandbits(self, k):
        assert k == 64
        return self.words.pop(0)


def test_lazy_uniform_decides_by_prefix_and_refines_only_when_straddling():
    x = Fraction(1, 3)
    target = math.exp(-1 / 3)
    nbits = 8
    for prefix in range(2**nbits):
        lo_v, hi_v = prefix / 2**nbits, (prefix + 1) / 2**nbits
        src = _Bits([0, 2**64 - 1])
        u = LazyUniform(prefix, nbits, src)
        if hi_v <= target:
            assert u.below_exp_neg(x) is True and len(src.words) == 2
        elif lo_v >= target:
            assert u.below_exp_neg(x) is False and len(src.words) == 2
        else:  # the one straddling prefix: next 64 bits decide (all-zero bits: below; all-ones: above)
            assert LazyUniform(prefix, nbits, _Bits([0])).below_exp_neg(x) is True
            assert LazyUniform(prefix, nbits, _Bits([2**64 - 1])).below_exp_neg(x) is False


def test_geometric_exact_matches_definition():
    rng = InsecureSeededRandom(7)
    lam = Fraction(1, 3)
    for _ in range(200):
        prefix = rng.getrandbits(53)
        u = LazyUniform(prefix, 53, rng)
        m = geometric_exp_neg(u, lam)
        assert u.below_exp_neg(m * lam) and not u.below_exp_neg((m + 1) * lam)
    # V in the first 2^-53 bucket: a very large M, still exact
    u = LazyUniform(0, 53, rng)
    m = geometric_exp_neg(u, Fraction(1, 10**6))
    assert u.below_exp_neg(m * Fraction(1, 10**6)) and not u.below_exp_neg((m + 1) * Fraction(1, 10**6))
    assert m > 36 * 10**6


def _check_decisions(u_vals, x_exact, x_f, err):
    """Every sure decision of the float fast path is right (checked with 200-bit integer bounds)."""
    acc, rej = vec._decide(u_vals, x_f, err)
    n_undecided = 0
    for u, a, r, x in zip(u_vals, acc, rej, x_exact):
        lo, hi = exp_neg_bounds(x, 200)      # 2^200 e^{-x} in [lo, hi]
        v_lo, v_hi = int(u) << 147, (int(u) + 1) << 147
        assert not (a and r)
        if a:
            assert v_hi <= lo                # V < e^{-x} for every continuation of the prefix
        if r:
            assert v_lo >= hi
        n_undecided += not (a or r)
    return n_undecided


def test_fast_path_is_sound_near_the_threshold_laplace_arguments():
    rng = np.random.default_rng(3)
    for lam in [Fraction(1, 1001), Fraction(3, 7), Fraction(10**5 + 1, 10**5), Fraction(1, 10**7 + 1)]:
        k = rng.integers(0, int(40 / lam), size=200).astype(float)
        x_exact = [int(kk) * lam for kk in k]
        thr = np.array([float(exp_neg_bounds(x, 53)[0]) for x in x_exact])
        for d in (-3000.0, -64.0, -1.0, 0.0, 1.0, 64.0, 3000.0):
            u = np.clip(thr + d, 0, 2.0**53 - 1)
            undecided = _check_decisions(u, x_exact, *vec._laplace_arg(k, float(lam)))
            if abs(d) >= 3000:
                assert undecided <= int(np.sum(thr < 3000))  # only where e^{-x} is within 3000 ulp of 0


def test_fast_path_is_sound_near_the_threshold_gaussian_arguments():
    rng = np.random.default_rng(4)
    for s2 in [Fraction(1, 4), Fraction(9, 1), Fraction(10**6), Fraction(1.2345e10), Fraction(10**14)]:
        t = math.isqrt(s2.numerator // s2.denominator) + 1
        c, kappa = s2 / t, 1 / (2 * s2)
        ay = np.abs(rng.integers(0, 10 * t, size=150)).astype(float)
        x_exact = [(int(a) - c) ** 2 * kappa for a in ay]
        thr = np.array([float(exp_neg_bounds(x, 53)[0]) for x in x_exact])
        for d in (-3000.0, -1.0, 0.0, 1.0, 3000.0):
            u = np.clip(thr + d, 0, 2.0**53 - 1)
            undecided = _check_decisions(u, x_exact, *vec._gauss_arg(ay, float(c), float(kappa)))
            if abs(d) >= 3000:
                assert undecided <= int(np.sum(thr < 3000))  # only where e^{-x} is within 3000 ulp of 0


def test_exp_table_is_outward_rounded():
    mp.mp.dps = 60
    lo, hi = vec._exp_table()
    for j in [0, 1, 63, 64, 1000, 2559, 2560]:
        e = mp.exp(-mp.mpf(j) / 64)
        assert mp.mpf(lo[j]) <= e <= mp.mpf(hi[j])
        assert hi[j] - lo[j] <= 4 * np.spacing(hi[j])


def test_scalar_reference_samplers_small_chi_square():
    from scipy import stats

    from sparsedp.accounting.discrete import dgauss_pmf, dlaplace_pmf
    rng = InsecureSeededRandom(11)
    n = 6000
    for draw, pmf in [(lambda: discrete_gaussian(Fraction(9, 4), rng), lambda x: dgauss_pmf(x, 2.25)),
                      (lambda: discrete_laplace(Fraction(3, 2), rng), lambda x: dlaplace_pmf(x, 1.5))]:
        xs = np.array([draw() for _ in range(n)])
        edges = np.arange(-4, 5)
        obs = np.array([np.sum(xs < -4)] + [np.sum(xs == e) for e in edges] + [np.sum(xs > 4)])
        p_mid = pmf(edges)
        p_tail = (1 - p_mid.sum()) / 2
        exp_ = n * np.concatenate([[p_tail], p_mid, [p_tail]])
        assert stats.chisquare(obs, exp_).pvalue > 1e-4


def test_fast_path_far_tail_and_loose_arguments_defer_to_exact_path():
    u = np.array([0.0, 1.0, 2.0**52])
    x_f = np.full(3, 1e6)
    acc, rej = vec._decide(u, x_f, x_f * 2.0**-47)
    # e^{-1e6} < 2^-53: only the bucket U = 0 can hold V < e^{-x}; it is left to the exact path
    assert list(acc) == [False, False, False] and list(rej) == [False, True, True]
    acc, rej = vec._decide(u, np.full(3, 0.5), np.full(3, 0.01))  # error bound too loose to use
    assert not acc.any() and not rej.any()
    # x = 0: V < e^0 = 1 always holds, so the fast path may defer but must never say "surely not"
    acc, rej = vec._decide(np.array([0.0, 2.0**53 - 1]), np.zeros(2), np.zeros(2))
    assert acc[0] and not rej.any()


def test_bad_parameters_of_the_primitives_raise():
    rng = InsecureSeededRandom(1)
    for bad in (-1, float("nan"), "x", None):
        with pytest.raises(SparsedpError):
            bernoulli_exp(bad, rng)
    for bad in (Fraction(3, 2), -0.1, float("inf")):
        with pytest.raises(SparsedpError):
            bernoulli(bad, rng)
    with pytest.raises(SparsedpError):
        discrete_gaussian(0, rng)
    with pytest.raises(SparsedpError):
        discrete_laplace(-2, rng)
