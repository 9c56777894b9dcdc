"""Exact integer laws with a rational base, and the two small samplers of the pure blanket histogram.

* :class:`TwoSidedGeometricLaw` — ``P[X = x] = (1 − α)/(1 + α) · α^{|x|}`` with a *rational* ``α = a/b`` in
  (0, 1) (the discrete Laplace law of Canonne, Kamath and Steinke, "The Discrete Gaussian for Differential
  Privacy", 2020, arXiv 2004.00010, Definition 28, with ``e^{−1/t}`` replaced by a rational). Survival function
  ``S(j) = P[X >= j] = α^j/(1 + α)`` for ``j >= 1`` and ``S(j) = 1 − S(1 − j)`` for ``j <= 0``.
* :class:`GeometricLaw` — ``P[G = g] = (1 − α) α^g`` on ``g >= 0``; ``S(j) = α^j`` for ``j >= 0``, 1 below.
  If X is two-sided geometric and ``τ >= 0``, then ``X | X >= τ`` has the law of ``τ + G`` (memorylessness:
  ``P[X = τ + g | X >= τ] = α^{τ+g}(1−α)/(1+α) / (α^τ/(1+α))``).

Both implement the :class:`~sparsedp.noise.inversion.IntegerLaw` protocol with *exact* survival bounds (the
survival function is rational, so ``⌊2^p S(j)⌋ <= 2^p S(j) <= ⌈2^p S(j)⌉`` are computed in integers): they are
sampled by :func:`~sparsedp.noise.inversion.release_by_inversion` / ``sample_by_inversion`` with exactly their law.
A rational base makes every probability of the mechanism that uses them a rational number, so its privacy can be
checked by exact enumeration (``tests/pure/test_pure_blanket.py``).

* :func:`truncated_poisson` — ``P[M = m] ∝ λ^m/m!`` on ``{0, …, cap}`` for a rational ``λ`` in (0, 1), exactly:
  propose ``m`` with ``P = (1 − λ) λ^m`` (count Bernoulli(λ) successes before the first failure), accept with
  probability ``1/m!`` and ``m <= cap``, else start again. Accepted draws have law ∝ ``(1 − λ) λ^m / m!`` on
  ``{0 … cap}``, i.e. the truncated Poisson law; a round accepts with probability at least ``(1 − λ)``·P[Poisson
  <= cap], so the expected number of rounds is below ``1/((1 − λ) P[M <= cap])``.
* :func:`blanket_size` — ``P[M = m] ∝ C(f, m)(λ/d)^m`` on ``{0 … cap}``: a truncated-Poisson proposal thinned
  with probability ``Π_{i<m}(f − i)/d`` (a truncated binomial law, exactly, without a binomial sampler).
* :func:`distinct_uniform` — ``m`` distinct integers, uniform among the m-subsets of ``[0, d) \\ excluded``
  (rejection: each draw uniform on ``[0, d)``, redrawn while excluded or already taken; expected draws per value
  ``d / (d − |excluded| − m)``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Container

from .. import _validate as v
from ..errors import InvalidParameterError
from .source import default_source

__all__ = ["TwoSidedGeometricLaw", "GeometricLaw", "truncated_poisson", "blanket_size", "distinct_uniform"]

_LN2_70 = 48.53  # > 70 ln 2


def _alpha(alpha: object) -> Fraction:
    a = v.rational("alpha", alpha)
    if not 0 < a < 1:
        raise InvalidParameterError(f"alpha must be a rational in (0, 1), got {alpha!r}")
    return a


def _window_hi(alpha: Fraction) -> int:
    """j with α^j <= 2^-70 (and a little more): 70 ln 2 / ln(1/α)."""
    return math.ceil(_LN2_70 / -math.log(float(alpha))) + 1


class _RationalLaw:
    """Shared part of the rational-base laws: ``alpha`` checked, and exact survival bounds from ``survival(j)``
    (a rational): ``⌊2^prec S(j)⌋ <= 2^prec S(j) <= ⌈2^prec S(j)⌉``."""

    alpha: Fraction

    def __post_init__(self) -> None:
        object.__setattr__(self, "alpha", _alpha(self.alpha))

    def survival(self, j: int) -> Fraction:  # pragma: no cover - defined by each law
        raise NotImplementedError

    def survival_bounds(self, j_lo: int, j_hi: int, prec: int) -> tuple[list[int], list[int]]:
        prec = v.integer("prec", prec, lo=64)
        los, his = [], []
        for j in range(int(j_lo), int(j_hi) + 1):
            s = self.survival(j)
            num = s.numerator << prec
            los.append(num // s.denominator)
            his.append(-((-num) // s.denominator))
        return los, his


@dataclass(frozen=True)
class TwoSidedGeometricLaw(_RationalLaw):
    """``P[X = x] = (1 − α)/(1 + α) α^{|x|}``, α a rational in (0, 1) (exact survival bounds)."""

    alpha: Fraction

    def pmf(self, x: int) -> Fraction:
        a = self.alpha
        return (1 - a) / (1 + a) * a ** abs(int(x))

    def survival(self, j: int) -> Fraction:
        """``P[X >= j]`` exactly."""
        a, j = self.alpha, int(j)
        return a ** j / (1 + a) if j >= 1 else 1 - a ** (1 - j) / (1 + a)

    def window(self) -> tuple[int, int]:
        h = _window_hi(self.alpha)
        return 1 - h, h


@dataclass(frozen=True)
class GeometricLaw(_RationalLaw):
    """``P[G = g] = (1 − α) α^g`` for ``g >= 0``, α a rational in (0, 1) (exact survival bounds)."""

    alpha: Fraction

    def pmf(self, g: int) -> Fraction:
        return (1 - self.alpha) * self.alpha ** int(g) if g >= 0 else Fraction(0)

    def survival(self, j: int) -> Fraction:
        return self.alpha ** int(j) if j >= 0 else Fraction(1)

    def window(self) -> tuple[int, int]:
        return 0, _window_hi(self.alpha)


def truncated_poisson(lam: object, cap: int, rng=None) -> int:
    """One draw of ``P[M = m] ∝ λ^m/m!`` on ``{0, …, cap}`` (λ rational in (0, 1)), exactly (module doc)."""
    lam = v.rational("lam", lam)
    if not 0 < lam < 1:
        raise InvalidParameterError(f"lam must be a rational in (0, 1), got {lam}")
    cap = v.integer("cap", cap, lo=0)
    rng = default_source() if rng is None else rng
    num, den = lam.numerator, lam.denominator
    while True:
        m = 0
        while rng.randbelow(den) < num:  # Bernoulli(λ) successes before the first failure
            m += 1
        if m <= cap and (m < 2 or rng.randbelow(math.factorial(m)) == 0):
            return m


def blanket_size(lam: object, free: int, d: int, cap: int, rng=None) -> int:
    """One draw of ``P[M = m] ∝ C(free, m)·(λ/d)^m`` on ``{0, …, cap}`` (``0 <= free <= d``, λ rational in (0, 1)),
    exactly: propose ``m`` from :func:`truncated_poisson` (``∝ λ^m/m!``) and accept with probability
    ``Π_{i<m} (free − i)/d`` (a rational in [0, 1]), else start again. Accepted draws have law
    ``∝ λ^m/m! · (free)_m/d^m = C(free, m)(λ/d)^m``; ``m > free`` is never accepted. The acceptance probability
    is at least ``Π_{i<m}(1 − (d − free + i)/d)``, near 1 when ``free`` is near d and m small."""
    free, d = v.integer("free", free, lo=0), v.integer("d", d, lo=1)
    if free > d:
        raise InvalidParameterError(f"free={free} exceeds d={d}")
    rng = default_source() if rng is None else rng
    while True:
        m = truncated_poisson(lam, cap, rng)
        if m == 0:
            return 0
        num = 1
        for i in range(m):
            num *= max(free - i, 0)
        if num and rng.randbelow(d ** m) < num:
            return m


def distinct_uniform(m: int, d: int, excluded: Container[int], rng=None) -> list[int]:
    """``m`` distinct integers forming a uniform m-subset of ``[0, d) \\ excluded`` (in draw order).

    The caller guarantees ``d − |excluded| >= m`` (else this would not terminate); the mechanism checks it
    from public bounds."""
    rng = default_source() if rng is None else rng
    out: list[int] = []
    taken: set[int] = set()
    while len(out) < m:
        x = rng.randbelow(d)
        if x in excluded or x in taken:
            continue
        taken.add(x)
        out.append(x)
    return out
