"""Exact scalar primitives: every decision in integer or rational arithmetic.

These are the reference algorithms of Canonne, Kamath and Steinke, "The Discrete Gaussian for
Differential Privacy" (NeurIPS 2020; CKS20 below), one Python call per draw, plus the exact
interval arithmetic for ``exp(-x)`` that the vectorised samplers in :mod:`sparsedp.noise.discrete`
fall back on when their fast path cannot decide.

* :func:`bernoulli` — Bernoulli(p) for rational p: ``randbelow(den) < num``.
* :func:`bernoulli_exp` — Bernoulli(exp(-γ)) for rational γ >= 0 (CKS20 Algorithm 1): for γ <= 1,
  draw A_K ~ Bernoulli(γ/K) for K = 1, 2, … until the first failure; output 1 iff that K is odd.
  P[stop at K] = γ^{K-1}/(K-1)! − γ^K/K!, so P[output 1] = Σ_j (−γ)^j / j! = exp(−γ). For γ > 1,
  exp(−γ) = exp(−1)^⌊γ⌋ · exp(−(γ−⌊γ⌋)): ⌊γ⌋ draws of Bernoulli(exp(−1)) and one of the rest.
* :func:`discrete_laplace` — P[X = x] ∝ exp(−|x|/b) for rational b = t/s (CKS20 Algorithm 2).
* :func:`discrete_gaussian` — P[X = x] ∝ exp(−x²/(2σ²)) for rational σ² (CKS20 Algorithm 3:
  propose Y ~ DLap(t), t = ⌊σ⌋ + 1, accept with probability exp(−(|Y| − σ²/t)²/(2σ²))).
* :func:`exp_neg_bounds` — integers lo <= 2^prec · exp(−x) <= hi for rational x >= 0 (hi − lo of a
  few units), by the alternating Taylor series in fixed point with directed rounding; pure arithmetic, so it
  lives in :mod:`sparsedp.accounting.exp_bounds` (the blanket accountant needs it too) and is re-exported here.
* :class:`LazyUniform` — a uniform real V in [0, 1) of which only a prefix of bits has been drawn;
  ``V < exp(−x)`` is decided exactly by drawing more bits until the interval of V and the bounds of
  exp(−x) separate (which happens with probability 1, since exp(−x) is irrational for rational x > 0).

Parameters are converted with :func:`sparsedp._validate.rational` (int, Fraction, decimal string,
or float taken at its exact binary value).
"""

from __future__ import annotations

import math
from fractions import Fraction

from .. import _validate as v
from ..accounting.exp_bounds import exp_neg_bounds
from .source import SecureRandom, default_source

__all__ = [
    "bernoulli", "bernoulli_exp", "discrete_laplace", "discrete_gaussian", "exp_neg_bounds",
    "LazyUniform", "geometric_exp_neg", "randbelow",
]


def _src(rng):
    return default_source() if rng is None else rng


def randbelow(n: int, rng: SecureRandom | None = None) -> int:
    """Uniform integer on {0, …, n−1} without modulo bias (rejection sampling in the source)."""
    return _src(rng).randbelow(v.integer("n", n, lo=1))


def bernoulli(p, rng: SecureRandom | None = None) -> int:
    """Bernoulli(p) for a rational p in [0, 1]: 1 iff a uniform integer below den is < num."""
    p = v.rational("p", p, allow_zero=True)
    if p > 1:
        raise v.InvalidParameterError(f"p must be <= 1, got {p}")
    return int(_src(rng).randbelow(p.denominator) < p.numerator)


def _bernoulli_exp_at_most_one(gamma: Fraction, rng) -> int:
    # CKS20 Algorithm 1, 0 <= gamma <= 1. Bernoulli(gamma/K) = [randbelow(den*K) < num].
    num, den = gamma.numerator, gamma.denominator
    k = 1
    while rng.randbelow(den * k) < num:
        k += 1
    return k % 2


def bernoulli_exp(gamma, rng: SecureRandom | None = None) -> int:
    """Bernoulli(exp(−γ)) for rational γ >= 0 (CKS20 Algorithm 1, with the split γ = ⌊γ⌋ + rest)."""
    gamma = v.rational("gamma", gamma, allow_zero=True)
    rng = _src(rng)
    whole = gamma.numerator // gamma.denominator
    for _ in range(whole):
        if not _bernoulli_exp_at_most_one(Fraction(1), rng):
            return 0
    return _bernoulli_exp_at_most_one(gamma - whole, rng)


def discrete_laplace(scale, rng: SecureRandom | None = None) -> int:
    """One draw of the discrete Laplace, P[X = x] ∝ exp(−|x|/scale), rational scale (CKS20 Alg. 2)."""
    b = v.rational("scale", scale)
    return _discrete_laplace(b.numerator, b.denominator, _src(rng))


def _discrete_laplace(t: int, s: int, rng) -> int:
    # CKS20 Algorithm 2 with scale t/s: X = U + t V is geometric with ratio e^{-1/t}; Y = floor(X/s).
    inv_t = Fraction(1, t)
    while True:
        u = rng.randbelow(t)
        if not bernoulli_exp(u * inv_t, rng):
            continue
        vv = 0
        while bernoulli_exp(1, rng):
            vv += 1
        y = (u + t * vv) // s
        neg = rng.randbelow(2)
        if neg and y == 0:
            continue
        return -y if neg else y


def discrete_gaussian(sigma2, rng: SecureRandom | None = None) -> int:
    """One draw of N_Z(0, σ²), P[X = x] ∝ exp(−x²/(2σ²)), rational σ² (CKS20 Algorithm 3)."""
    s2 = v.rational("sigma2", sigma2)
    rng = _src(rng)
    t = math.isqrt(s2.numerator // s2.denominator) + 1  # floor(sigma) + 1
    c = s2 / t
    while True:
        y = _discrete_laplace(t, 1, rng)
        if bernoulli_exp((abs(y) - c) ** 2 / (2 * s2), rng):
            return y


class LazyUniform:
    """A uniform real V in [0, 1) known through its first ``nbits`` bits ``prefix``:
    V ∈ [prefix / 2^nbits, (prefix + 1) / 2^nbits). Further bits are drawn from ``rng`` only when
    a comparison needs them, and kept, so several comparisons see the same V."""

    __slots__ = ("prefix", "nbits", "rng")

    def __init__(self, prefix: int, nbits: int, rng: SecureRandom) -> None:
        self.prefix, self.nbits, self.rng = int(prefix), int(nbits), rng

    def _refine(self) -> None:
        self.prefix = (self.prefix << 64) | self.rng.getrandbits(64)
        self.nbits += 64

    def below_exp_neg(self, x) -> bool:
        """Exactly decide V < exp(−x) for rational x >= 0."""
        x = Fraction(x)
        if x == 0:
            return True
        while True:
            lo, hi = exp_neg_bounds(x, self.nbits)
            if self.prefix + 1 <= lo:   # V < (prefix+1)/2^n <= lo/2^n <= exp(-x)
                return True
            if self.prefix >= hi:       # V >= prefix/2^n >= hi/2^n >= exp(-x)
                return False
            self._refine()

    def below(self, p: Fraction) -> bool:
        """Exactly decide V < p for rational p."""
        p = Fraction(p)
        while True:
            scaled = p * (1 << self.nbits)
            if self.prefix + 1 <= scaled:
                return True
            if self.prefix >= scaled:
                return False
            self._refine()


def geometric_exp_neg(u: LazyUniform, lam: Fraction) -> int:
    """The exact geometric variate M = max{k >= 0 : V < exp(−k·λ)} of the lazy uniform V.

    P[M >= k] = P[V < e^{−kλ}] = e^{−kλ}: a geometric law with ratio q = e^{−λ}. Found by a float
    guess refined with exact comparisons (galloping, then bisection), so any scale terminates fast.
    """
    lam = Fraction(lam)
    log_v = math.log(2 * u.prefix + 1) - (u.nbits + 1) * math.log(2.0)  # log of V's midpoint
    k = max(0, int(-log_v / float(lam)))
    if u.below_exp_neg(k * lam):
        lo, step = k, 1
        while u.below_exp_neg((lo + step) * lam):
            lo += step
            step *= 2
        hi = lo + step                      # invariant: V < e^{-lo λ}, V >= e^{-hi λ}
    else:
        hi, step = k, 1
        while True:
            cand = max(hi - step, 0)
            if u.below_exp_neg(cand * lam):
                lo = cand
                break
            hi = cand
            step *= 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if u.below_exp_neg(mid * lam):
            lo = mid
        else:
            hi = mid
    return lo
