"""Splitting one (ε, δ) budget between two stages composed by basic composition.

A two-stage release (the private choice of a bound, then the release; or a discovery stage, then a count)
spends ε₁ + ε₂ ≤ ε: basic composition (Dwork & Roth, "The Algorithmic Foundations of Differential Privacy",
2014, Theorem 3.16) makes the whole (ε, δ)-DP. The split is done in floats so that the stated ε is never
exceeded by rounding.
"""

from __future__ import annotations

import math
from fractions import Fraction

from ..errors import InvalidParameterError

__all__ = ["split_epsilon"]


def split_epsilon(epsilon: float, share: float) -> tuple[float, float]:
    """(ε₁, ε₂) with ε₁ = share·ε (float) and ε₂ the largest float with ε₁ + ε₂ ≤ ε exactly (basic composition
    never exceeds the stated ε by rounding)."""
    e1 = float(epsilon) * share
    e2 = float(epsilon) - e1
    while Fraction(e1) + Fraction(e2) > Fraction(epsilon):
        e2 = math.nextafter(e2, 0.0)
    if e1 <= 0 or e2 <= 0:
        raise InvalidParameterError(f"AutoBound share={share} leaves no epsilon for one of the two stages")
    return e1, e2
