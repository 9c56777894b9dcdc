"""Accountant of the pure ε-DP blanket histogram (``docs/proofs/pure-blanket.md``, Theorem 1).

The mechanism (:mod:`sparsedp.mechanisms.pure.blanket`) is our reconstruction of the "private item blanket with
target-length padding" of Kerschbaum, Lee and Wu, "Optimal Pure Differentially Private Sparse Histograms in
Deterministic Linear Time" (2025, arXiv 2507.17017), for ``n`` items (one per unit, replace-one neighbours with
``n`` public) over a finite domain of ``d`` keys. With a two-sided geometric noise of rational base α (law
:class:`~.geometric_laws.TwoSidedGeometricLaw`, ``S(j) = P[Z >= j]``), an integer threshold
τ >= 1, ``q = S(τ)``, the blanket rate ``λ = d·q/(1 − q)`` and the target length ``T = n + s``:

1. every key x of the support S (``k = |S| <= n``) gets ``Y_x = c_x + Z_x``; R = {x : Y_x >= τ}, ``r = |R|``;
2. the blanket size m has ``P[m] ∝ C(d − k, m)·(q/(1 − q))^m`` on ``{0, …, T − r}`` (target-length padding: at
   most T keys in all);
3. the blanket is a uniform m-subset of the keys outside S, each with value ``τ + G``, ``P[G = g] = (1−α)α^g``
   (the law of Z given Z >= τ);
4. the output is the *set* of released (key, value) pairs.

Its output law is that of the geometric mechanism on all d keys ("release the keys whose noisy count is >= τ")
conditioned, given r, on at most T − r keys outside S being released: ``P_D(O) = P^full_D(O) / B_k(T − r)`` with
``B_k(j) = P[Binomial(d − k, q) <= j]``. Theorem 1: for replace-one neighbours D, D' and every output O,

    P[M(D) = O] <= ρ · P[M(D') = O],   ρ = α^{−2} / (1 − t),   t = λ^{s+1}/(s+1)!,

since the full-domain ratio is at most α^{−2} (two keys change by one) and ``1 − t <= B_k(j) <= 1`` for
``j >= s``. M is ε-DP with ``ε = ln ρ`` (:attr:`BlanketParams.epsilon_bound`); with ``s = 40`` and ``λ <= 1/2``,
``t < 10^-62``. Add/remove neighbours follow by padding the data to a public bound with a dummy key.

:func:`calibrate_blanket` picks, for a target ε: α (a rational >= e^{−ε_noise/2}), the least τ with blanket rate
``λ <= blanket`` (the expected number of blanket keys is below λ), ``T = n + 40``. Error bounds
(:class:`BlanketAccuracy`) are exact from the geometric tail. Nothing here reads data.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from fractions import Fraction

from .. import _validate as v
from ..errors import InfeasibleError, InvalidParameterError
from .exp_bounds import exp_neg_bounds
from .geometric_laws import TwoSidedGeometricLaw

__all__ = ["BlanketParams", "BlanketAccuracy", "calibrate_blanket", "blanket_accuracy", "TARGET_SLACK"]

#: s = T − n: the padding's normalisation moves by at most t = λ^{s+1}/(s+1)! <= 2^-41/41! < 10^-62 (λ <= 1/2)
TARGET_SLACK = 40
_ALPHA_BITS = 48  # α = ⌈2^48 e^{−ε₀}⌉ / 2^48


@dataclass(frozen=True)
class BlanketParams:
    """Public parameters of one blanket histogram (Theorem 1's notation): ``alpha`` (noise base, rational),
    ``tau`` (threshold, ``>= 1``), ``target`` (T), ``n`` (public bound on the support size), ``domain_size`` (d).
    The blanket rate ``lam = d·S(τ)/(1 − S(τ))`` must be below 1."""

    alpha: Fraction
    tau: int
    target: int
    n: int
    domain_size: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "alpha", Fraction(self.alpha))
        if not 0 < self.alpha < 1:
            raise InvalidParameterError(f"alpha must be in (0, 1), got {self.alpha}")
        v.integer("tau", self.tau, lo=1)
        v.integer("n", self.n, lo=1)
        v.integer("target", self.target, lo=self.n)
        v.integer("domain_size", self.domain_size, lo=1)
        if not self.lam < 1:
            raise InvalidParameterError(f"the blanket rate d*q/(1-q) must be below 1, got {float(self.lam):g}: "
                                        f"raise tau")

    @property
    def law(self) -> TwoSidedGeometricLaw:
        return TwoSidedGeometricLaw(self.alpha)

    @property
    def q_tau(self) -> Fraction:
        """``q = S(τ) = P[Z >= τ]``: the release probability of a key of count 0 in the full-domain mechanism."""
        return self.law.survival(self.tau)

    @property
    def lam(self) -> Fraction:
        """λ = d·q/(1 − q): blanket keys have ``P[m] ∝ C(d − k, m)(λ/d)^m``; their expected number is below λ."""
        q = self.q_tau
        return self.domain_size * q / (1 - q)

    @functools.cached_property
    def tail(self) -> Fraction:
        """``t = λ^{s+1}/(s+1)!``, s = T − n: ``P[Binomial(d − k, q) > T − r] <= t`` (an exact rational of
        thousands of digits: computed once per parameter set)."""
        s = self.target - self.n
        return self.lam ** (s + 1) / math.factorial(s + 1)

    @property
    def ratio_bound(self) -> Fraction:
        """ρ = α^{−2}/(1 − t) of Theorem 1, an exact rational."""
        return 1 / (self.alpha ** 2 * (1 - self.tail))

    @property
    def epsilon_bound(self) -> float:
        """``ln ρ`` (rounded up by a relative 1e-12 for the float logarithm)."""
        t = float(self.tail)
        pad = -math.log1p(-t) if t > 1e-300 else 0.0
        return (2 * -math.log(float(self.alpha)) + pad) * (1 + 1e-12)

    @property
    def noise_std(self) -> float:
        a = float(self.alpha)
        return math.sqrt(2 * a) / (1 - a)


@dataclass(frozen=True)
class BlanketAccuracy:
    """Exact error bounds at failure probability β (from the geometric tail ``P[Z <= −t] = S(t)``).

    ``per_query``: a released real count is within ±per_query w.p. >= 1 − β; ``release_count``: a key with this
    true count or more is released w.p. >= 1 − β; ``simultaneous``/``release_all``: the same for all (<= n) keys at
    once (union bound, β/n each); ``linf``: with probability >= 1 − β every real key's error (0 for the keys not
    released) is at most ``linf = release_all − 1``."""

    beta: float
    per_query: int
    release_count: int
    simultaneous: int
    release_all: int
    linf: int


def _least_t(law: TwoSidedGeometricLaw, bound: Fraction) -> int:
    """Least t >= 1 with S(t) <= bound."""
    a = float(law.alpha)
    t = max(1, int(math.log(float(bound) * (1 + a)) / math.log(a)) - 2) if bound < 1 else 1
    while law.survival(t) > bound:
        t += 1
    while t > 1 and law.survival(t - 1) <= bound:
        t -= 1
    return t


def blanket_accuracy(p: BlanketParams, beta: object) -> BlanketAccuracy:
    beta = v.rational("beta", beta)
    if not 0 < beta < 1:
        raise InvalidParameterError(f"beta must be in (0, 1), got {beta}")
    law = p.law
    e1 = _least_t(law, beta / 2) - 1            # P(|Z| > e) = 2 S(e + 1) <= β
    r1 = p.tau - 1 + _least_t(law, beta)         # P(c + Z < τ) = S(c − τ + 1) <= β
    en = _least_t(law, beta / (2 * p.n)) - 1
    rn = p.tau - 1 + _least_t(law, beta / p.n)
    return BlanketAccuracy(beta=float(beta), per_query=e1, release_count=r1, simultaneous=en, release_all=rn,
                           linf=max(en, rn - 1))


def _tau_for(law: TwoSidedGeometricLaw, d: int, lam_max: Fraction) -> int:
    """Least τ >= 1 with blanket rate d·S(τ)/(1 − S(τ)) <= lam_max."""
    a = law.alpha

    def ok(t: int) -> bool:
        q = law.survival(t)
        return d * q <= lam_max * (1 - q)

    est = math.log(float(lam_max) * (1 + float(a)) / (2 * d)) / math.log(float(a))
    tau = max(1, int(est) - 2)
    while not ok(tau):
        tau += 1
    while tau > 1 and ok(tau - 1):
        tau -= 1
    return tau


def calibrate_blanket(epsilon: object, n: int, domain_size: int, blanket: object = Fraction(1, 2)) -> BlanketParams:
    """Parameters meeting ε (Theorem 1) for ``n`` items over ``domain_size`` keys, with blanket rate
    ``λ <= blanket < 1`` (the expected number of blanket keys is below λ). Raises :class:`InfeasibleError` when ε
    is too small for a rational noise base below 1."""
    eps = v.positive("epsilon", epsilon)
    n = v.integer("n", n, lo=1)
    d = v.integer("domain_size", domain_size, lo=1)
    lam_max = v.rational("blanket", blanket)
    if not 0 < lam_max < 1:
        raise InvalidParameterError(f"blanket (the expected number of blanket keys) must be in (0, 1), got {blanket}")
    T = n + TARGET_SLACK
    pad = float(lam_max) ** (TARGET_SLACK + 1) / math.factorial(TARGET_SLACK + 1) * 2  # >= −ln(1 − t)
    half = Fraction(eps - pad) * (1 - Fraction(1, 10 ** 9)) / 2  # a margin for the float logarithm of α
    alpha = Fraction(exp_neg_bounds(half, _ALPHA_BITS)[1], 1 << _ALPHA_BITS)   # α >= e^{−ε_noise/2}
    if not 0 < alpha < 1:
        raise InfeasibleError(f"epsilon={eps:g} is too small (the noise base rounds to 1)")
    tau = _tau_for(TwoSidedGeometricLaw(alpha), d, lam_max)
    p = BlanketParams(alpha=alpha, tau=tau, target=T, n=n, domain_size=d)
    if p.epsilon_bound > eps * (1 + 1e-9):  # defensive: the choices above guarantee it
        raise AssertionError(f"internal error: blanket epsilon {p.epsilon_bound} exceeds {eps}")
    return p
