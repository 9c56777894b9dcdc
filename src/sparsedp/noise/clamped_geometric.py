"""Exact clamped two-sided geometric noise for one count (Balcer & Vadhan, ITCS 2018, §4).

Both samplers are *counting-query algorithms* ``M : [n] × [d]₊ → [n]`` (Balcer & Vadhan (2019), Defs 4.1–4.3): given the
true count ``c ∈ {0..n}`` and a uniform integer ``u ∈ {1..d}`` they return the least ``z`` with
``cdf(c, z) >= u`` (inverse transform, Lemma 2.7). Every quantity is an integer; no float enters a decision.

ε handling (after Balcer & Vadhan (2019) §3 P3, erratum E6): the requested ε ∈ (0, 1] is rounded down to ``1/k``,
``k = ⌈1/ε⌉``; ``K = ⌈log₂(2k)⌉`` (base-2 log, E6), ``a = 2^K``, ``b = 2^K + 1`` and the *realised*
per-count parameter is ``ε̃/2 = ln(b/a)``, i.e. ``ε̃ = 2·ln(1 + 2^{−K}) ∈ (4ε/9, ε]`` (Thm 4.5).

* :class:`GeoSample` (Thm 4.5, construction spec §5.3): exactly the geometric mechanism with
  ``e^{1/s} = b/a`` clamped to ``[0, n]``; ``(ε̃/2, 0)``-DP for counting queries, and the likelihood
  ratio of neighbouring counts is exactly ``b/a``. ``d = (2a+1)·b^{n−1}`` has about ``n·K`` bits.
* :class:`FastSample` (Thm 4.6, construction spec §5.4): the geometric noise truncated at ``±t`` (tail mass
  moved onto noise 0), mixed with the uniform law on ``[n]`` with weight ``γ`` (Lemma 3.1); ``(ε/2, 0)``-DP
  when ``t`` satisfies (FS-t). ``t`` is **never capped at n** (erratum E2: capping breaks privacy); when the
  required ``t >= n``, :func:`counting_sampler` returns a :class:`GeoSample` instead, which is then cheaper
  and at least as private and accurate.

Randomness: ``u = 1 + rng.randbelow(d)`` from a :mod:`sparsedp.noise` source (``rng=None`` → the secure
default source). The number of rejection rounds inside ``randbelow`` depends on ``d`` only, never on the data.
"""

from __future__ import annotations

import math
from fractions import Fraction

from .. import _validate as v
from ..errors import InvalidParameterError
from .source import default_source

__all__ = [
    "EpsilonParams",
    "epsilon_params",
    "unit_fraction",
    "GeoSample",
    "FastSample",
    "counting_sampler",
    "fast_sample_t_min",
    "fast_sample_t_ref",
]


def ceil_log2(x: int | Fraction) -> int:
    """⌈log₂ x⌉ for a positive integer or rational, exactly."""
    x = Fraction(x)
    if x <= 0:
        raise InvalidParameterError(f"ceil_log2 needs a positive number, got {x}")
    num, den = x.numerator, x.denominator

    def ok(p: int) -> bool:  # 2^p >= x
        return num <= (den << p) if p >= 0 else (num << -p) <= den

    p = num.bit_length() - den.bit_length()
    while not ok(p):
        p += 1
    while ok(p - 1):
        p -= 1
    return p


def unit_fraction(name: str, x: object) -> int:
    """Round a rational in (0, 1] *down* to ``1/k`` and return ``k = ⌈1/x⌉`` (spec §1.5: parameters in N⁻¹)."""
    q = v.rational(name, x)
    if q > 1:
        raise InvalidParameterError(f"{name} must be in (0, 1], got {x!r}")
    return -((-q.denominator) // q.numerator)  # ⌈1/q⌉


class EpsilonParams:
    """ε rounded to ``1/k`` and the GeoSample constants of spec §3 P3.

    Attributes: ``k`` (ε = 1/k), ``K = ⌈log₂(2k)⌉``, ``a = 2^K``, ``b = 2^K + 1``;
    ``exp_half_eps_tilde = b/a`` (exact ``e^{ε̃/2}``); ``epsilon`` (Fraction 1/k);
    ``epsilon_tilde`` (float, reporting only).
    """

    __slots__ = ("k", "K", "a", "b")

    def __init__(self, k: int):
        self.k = v.integer("k", k, lo=1)
        self.K = (2 * self.k - 1).bit_length()  # ⌈log₂(2k)⌉ (E6: base 2)
        self.a = 1 << self.K
        self.b = self.a + 1

    @property
    def epsilon(self) -> Fraction:
        return Fraction(1, self.k)

    @property
    def exp_half_eps_tilde(self) -> Fraction:
        return Fraction(self.b, self.a)

    @property
    def epsilon_tilde(self) -> float:
        return 2.0 * math.log1p(2.0 ** -self.K)

    def __repr__(self) -> str:
        return f"EpsilonParams(k={self.k}, K={self.K}, epsilon_tilde={self.epsilon_tilde:.6g})"


def epsilon_params(epsilon: object) -> EpsilonParams:
    """Derive ``EpsilonParams`` from ε ∈ (0, 1] (int, Fraction, decimal string or float, converted exactly)."""
    return EpsilonParams(unit_fraction("epsilon", epsilon))


def _source(rng):
    return default_source() if rng is None else rng


class _CountingSampler:
    """Shared inverse-transform machinery; subclasses define ``d`` and ``cdf(c, z)``."""

    n: int
    d: int

    def _key(self) -> tuple:  # public parameters that determine the sampler completely
        return (type(self).__name__, self.n, self.params.k, getattr(self, "g", None), getattr(self, "t", None))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _CountingSampler) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def cdf(self, c: int, z: int) -> int:  # pragma: no cover - abstract
        raise NotImplementedError

    def sample_u(self, c: int, u: int) -> int:
        """Least ``z ∈ [0, n]`` with ``cdf(c, z) >= u`` (P2) for ``u ∈ [1, d]``.

        The search always makes exactly ``⌈log₂(n+1)⌉`` CDF evaluations (data-independent loop count).
        """
        n = self.n
        z = -1  # invariant: cdf(c, z) < u  (cdf(c, -1) = 0)
        step = 1 << max(0, (n + 1 - 1).bit_length())
        while step > 1:
            step >>= 1
            probe = z + step
            if probe <= n - 1:  # cdf(c, n) = d >= u, so never step onto n
                if self.cdf(c, probe) < u:
                    z = probe
            else:
                self.cdf(c, n - 1 if n >= 1 else 0)  # keep the evaluation count fixed
        return z + 1

    def sample(self, c: int, rng=None) -> int:
        """One noisy count for true count ``c`` (``rng=None`` → secure default source)."""
        return self.sample_u(c, 1 + _source(rng).randbelow(self.d))

    def pmf(self, c: int) -> list[Fraction]:
        """Exact output law ``[P(z) for z in 0..n]`` (tests and accuracy reports)."""
        prev, out = 0, []
        for z in range(self.n + 1):
            cur = self.cdf(c, z)
            out.append(Fraction(cur - prev, self.d))
            prev = cur
        return out

    def tail_above(self, c: int, z: int) -> Fraction:
        """``P(M(c, U) > z)`` exactly."""
        return Fraction(self.d - self.cdf(c, z), self.d)


class GeoSample(_CountingSampler):
    """GeoSample_{n,ε} (Balcer & Vadhan (2019), Thm 4.5; construction spec §5.3).

    ``d = (2a+1)·b^{n−1}`` and for ``0 <= z < n``::

        cdf(c, z) = a^{c−z} · b^{n−(c−z)}                 if z < c
                  = d − a^{z−c+1} · b^{n−1−(z−c)}         if z >= c

    The output law is the two-sided geometric with ``α = a/b`` centred at ``c``, clamped to ``[0, n]``.
    Privacy for counting queries: ``max_{c,z} p_c(z)/p_{c±1}(z) = b/a = e^{ε̃/2}`` exactly.
    """

    def __init__(self, n: int, epsilon: object):
        self.n = v.integer("n", n, lo=1)
        self.params = epsilon_params(epsilon)
        a, b = self.params.a, self.params.b
        self.d = (2 * a + 1) * b ** (self.n - 1)

    @property
    def ratio_bound(self) -> Fraction:
        """Exact upper bound on ``P(M(c)=z)/P(M(c±1)=z)``: ``b/a = e^{ε̃/2}``."""
        return self.params.exp_half_eps_tilde

    @property
    def epsilon_count(self) -> float:
        """Per-count privacy ``ε̃/2`` (reporting)."""
        return self.params.epsilon_tilde / 2

    def cdf(self, c: int, z: int) -> int:
        n, K, b = self.n, self.params.K, self.params.b
        if z < 0:
            return 0
        if z >= n:
            return self.d
        if z < c:
            j = c - z
            return (b ** (n - j)) << (K * j)
        j = z - c
        return self.d - ((b ** (n - 1 - j)) << (K * (j + 1)))

    def accuracy(self, beta: object) -> int:
        """Least ``A >= 0`` with ``P(|geometric noise| > A) <= β`` (spec §7.5), exact, capped at ``n``.

        Clamping to ``[0, n]`` never increases the error, so ``P(|M(c,U) − c| > A) <= β`` for every c.
        """
        return geometric_accuracy(self.params, v.rational("beta", beta), self.n)

    def __repr__(self) -> str:
        return f"GeoSample(n={self.n}, epsilon=1/{self.params.k})"


def geometric_accuracy(params: EpsilonParams, beta: Fraction, cap: int | None = None) -> int:
    """Least integer ``A >= 0`` with ``(2^{K+1}+1)(2^K+1)^A β >= 2^{K+1}·2^{KA}`` (spec §7.5).

    That is ``P(|Y| > A) = 2α^{A+1}/(1+α) <= β`` for the two-sided geometric ``Y`` with ``α = a/b``.
    With ``cap`` the answer is at most ``cap`` (a count clamped to ``[0, cap]`` is never off by more).
    """
    if beta <= 0:
        raise InvalidParameterError(f"beta must be > 0, got {beta}")
    a, b = params.a, params.b
    num, den = beta.numerator, beta.denominator

    def ok(A: int) -> bool:
        return (2 * a + 1) * b ** A * num >= 2 * a * (a ** A) * den

    hi = 1
    while not ok(hi):
        if cap is not None and hi >= cap:
            return cap
        hi *= 2
    lo = 0
    while lo < hi:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo if cap is None else min(lo, cap)


def _fs_t_ok(t: int, params: EpsilonParams, n: int, g: int) -> bool:
    """Condition (FS-t) of spec §5.4: ``16·a^{t+1}·(n+1)·(g−1)·k <= b^t·(2a+1)``."""
    a, b = params.a, params.b
    return 16 * a ** (t + 1) * (n + 1) * (g - 1) * params.k <= b ** t * (2 * a + 1)


def fast_sample_t_min(n: int, epsilon: object, gamma: object) -> int:
    """Least ``t >= 0`` satisfying (FS-t) (spec §5.4 item 4): the tail mass ``P(|Y| > t)`` of the
    geometric is within the Lemma 3.1 budget ``(ε/8)·γ/((1−γ)(n+1))``."""
    params = epsilon_params(epsilon)
    g = unit_fraction("gamma", gamma)
    if g < 2:
        raise InvalidParameterError(f"gamma must be <= 1/2, got {gamma!r}")
    hi = 1
    while not _fs_t_ok(hi, params, n, g):
        hi *= 2
    lo = 0
    while lo < hi:
        mid = (lo + hi) // 2
        if _fs_t_ok(mid, params, n, g):
            hi = mid
        else:
            lo = mid + 1
    return lo


def fast_sample_t_ref(n: int, epsilon: object, gamma: object) -> int:
    """The closed form ``⌈(9k/2)·⌈log₂(8(n+1)(g−1)k)⌉⌉ − 1`` of the authors' reference code (spec §5.4)."""
    k = unit_fraction("epsilon", epsilon)
    g = unit_fraction("gamma", gamma)
    L = ceil_log2(8 * (n + 1) * (g - 1) * k)
    return -((-9 * k * L) // 2) - 1


class FastSample(_CountingSampler):
    """FastSample_{n,ε,γ} (Balcer & Vadhan (2019), Thm 4.6; construction spec §5.4).

    Truncated noise ``Y_t`` on ``{−t..t}`` with weights ``a^{|y|}·b^{t−|y|}`` (``|y| >= 1``) and
    ``b^t + 2a^{t+1}`` at 0 (total ``d′ = (2a+1)·b^t``); ``M′(c) = clamp(c + Y_t, 0, n)``; the released
    law is ``γ·Unif([n]) + (1−γ)·M′(c)`` with ``d = (n+1)·g·d′`` and
    ``cdf(c, z) = (z+1)·d′ + (g−1)·(n+1)·F′(c, z)``.

    ``t`` must satisfy (FS-t) so that Lemma 3.1 applies; it is **not** capped at ``n`` (erratum E2).
    Privacy: ``(ε/2, 0)`` for counting queries with ``ε = 1/k`` (not ε̃/2: the mixing spends the slack).
    """

    def __init__(self, n: int, epsilon: object, gamma: object, t: int | str = "min"):
        self.n = v.integer("n", n, lo=1)
        self.params = epsilon_params(epsilon)
        self.g = unit_fraction("gamma", gamma)
        if self.g < 2:
            raise InvalidParameterError(f"gamma must be <= 1/2, got {gamma!r}")
        if t == "min":
            t = fast_sample_t_min(self.n, self.params.epsilon, Fraction(1, self.g))
        elif t == "ref":
            t = fast_sample_t_ref(self.n, self.params.epsilon, Fraction(1, self.g))
        t = v.integer("t", t, lo=0)
        if not _fs_t_ok(t, self.params, self.n, self.g):
            raise InvalidParameterError(
                f"t={t} is below the truncation point required for pure DP (condition (FS-t)); "
                f"use t='min' (= {fast_sample_t_min(self.n, self.params.epsilon, Fraction(1, self.g))})")
        self.t = t
        a, b = self.params.a, self.params.b
        self.d_prime = (2 * a + 1) * b ** t
        self._a_t1 = a ** (t + 1)
        self.d = (self.n + 1) * self.g * self.d_prime

    @property
    def gamma(self) -> Fraction:
        return Fraction(1, self.g)

    @property
    def epsilon_count(self) -> float:
        """Per-count privacy ``ε/2`` (reporting)."""
        return 0.5 / self.params.k

    def cdf_truncated(self, c: int, z: int) -> int:
        """``F′(c, z)``: scaled CDF (scale ``d′``) of ``clamp(c + Y_t, 0, n)``."""
        n, t, b, K = self.n, self.t, self.params.b, self.params.K
        if z < 0:
            return 0
        if z >= n or z >= c + t:
            return self.d_prime
        if z < c - t:
            return 0
        if z < c:
            j = c - z
            return ((b ** (t + 1 - j)) << (K * j)) - self._a_t1
        j = z - c
        return self.d_prime - ((b ** (t - j)) << (K * (j + 1))) + self._a_t1

    def cdf(self, c: int, z: int) -> int:
        if z < 0:
            return 0
        if z >= self.n:
            return self.d
        return (z + 1) * self.d_prime + (self.g - 1) * (self.n + 1) * self.cdf_truncated(c, z)

    def accuracy(self, beta: object) -> int:
        """Least ``A`` with ``P(|M(c,U) − c| > A) <= β`` guaranteed by Thm 4.6: the geometric bound of
        spec §7.5 evaluated at ``β − γ`` (requires ``β > γ``)."""
        beta = v.rational("beta", beta)
        if beta <= self.gamma:
            raise InvalidParameterError(f"beta must exceed gamma={self.gamma} for FastSample, got {beta}")
        return geometric_accuracy(self.params, beta - self.gamma, self.n)

    def __repr__(self) -> str:
        return f"FastSample(n={self.n}, epsilon=1/{self.params.k}, gamma=1/{self.g}, t={self.t})"


#: the two exact counting samplers (what :func:`counting_sampler` returns)
CountingSampler = GeoSample | FastSample


def counting_sampler(n: int, epsilon: object, gamma: object | None = None,
                     t: int | str = "min") -> CountingSampler:
    """The recommended exact counting-query sampler.

    ``gamma=None`` → :class:`GeoSample`. Otherwise :class:`FastSample` with truncation ``t``, **unless**
    the required ``t >= n``, in which case :class:`GeoSample` is returned (erratum E2: never cap t at n;
    GeoSample is then cheaper, ``(ε̃/2 <= ε/2)``-DP and more accurate, so every FastSample guarantee holds).
    """
    n = v.integer("n", n, lo=1)
    if gamma is None:
        return GeoSample(n, epsilon)
    k = unit_fraction("epsilon", epsilon)
    g = unit_fraction("gamma", gamma)
    if g < 2:
        raise InvalidParameterError(f"gamma must be <= 1/2, got {gamma!r}")
    if t == "min":
        t = fast_sample_t_min(n, Fraction(1, k), Fraction(1, g))
    elif t == "ref":
        t = fast_sample_t_ref(n, Fraction(1, k), Fraction(1, g))
    t = v.integer("t", t, lo=0)
    if t >= n:
        return GeoSample(n, Fraction(1, k))
    return FastSample(n, Fraction(1, k), Fraction(1, g), t=t)
