"""Exact integer laws with a rational base: the noise of the pure blanket histogram, as its accountant needs it.

* :class:`TwoSidedGeometricLaw` — ``P[X = x] = (1 − α)/(1 + α) · α^{|x|}`` with a *rational* ``α = a/b`` in
  (0, 1) (the discrete Laplace law of Canonne, Kamath and Steinke, "The Discrete Gaussian for Differential
  Privacy", 2020, arXiv 2004.00010, Definition 28, with ``e^{−1/t}`` replaced by a rational). Survival function
  ``S(j) = P[X >= j] = α^j/(1 + α)`` for ``j >= 1`` and ``S(j) = 1 − S(1 − j)`` for ``j <= 0``.
* :class:`GeometricLaw` — ``P[G = g] = (1 − α) α^g`` on ``g >= 0``; ``S(j) = α^j`` for ``j >= 0``, 1 below.
  If X is two-sided geometric and ``τ >= 0``, then ``X | X >= τ`` has the law of ``τ + G`` (memorylessness:
  ``P[X = τ + g | X >= τ] = α^{τ+g}(1−α)/(1+α) / (α^τ/(1+α))``).

Both are pure math (rational pmf and survival function, no randomness): the blanket accountant
(:mod:`.blanket`) reads the survival function, and both implement the
:class:`~sparsedp.noise.inversion.IntegerLaw` protocol with *exact* survival bounds (the survival function is
rational, so ``⌊2^p S(j)⌋ <= 2^p S(j) <= ⌈2^p S(j)⌉`` are computed in integers), so that
:func:`~sparsedp.noise.inversion.release_by_inversion` / ``sample_by_inversion`` sample exactly their law
(:mod:`sparsedp.noise.rational_geometric` re-exports them beside its samplers). A rational base makes every
probability of the mechanism that uses them a rational number, so its privacy can be checked by exact
enumeration (``tests/pure/test_pure_blanket.py``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from .. import _validate as v
from ..errors import InvalidParameterError

__all__ = ["TwoSidedGeometricLaw", "GeometricLaw"]

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
