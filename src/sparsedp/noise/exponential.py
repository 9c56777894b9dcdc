"""Exact sampling of permute-and-flip, the exponential-mechanism-family selection sparsedp's quantiles use.

Permute-and-flip (McKenna & Sheldon, "Permute-and-Flip: A new mechanism for differentially private selection",
NeurIPS 2020, arXiv:2010.12603, Algorithm 1) over cells with integer utilities ``U_k``, gaps
``g_k = max U − U_k >= 0`` and a rational ``t = ε/(2Δ)``: visit the cells in a uniformly random order (a lazy
Fisher–Yates shuffle, ``randbelow``) and stop at the first cell ``k`` whose coin ``Bernoulli(exp(−t·g_k))`` comes
up 1. A best cell (``g = 0``) always accepts, so one pass suffices. Every random decision is exact: uniform
integers by rejection in the source, and ``Bernoulli(exp(−x))`` for rational ``x`` by Canonne, Kamath & Steinke
(2020), Algorithm 1 (:func:`~sparsedp.noise.exact.bernoulli_exp`). Its law is
``P[k] = p_k ∫_0^1 Π_{j≠k}(1 − τ p_j) dτ`` with ``p_j = exp(−t·g_j)``
(:func:`sparsedp.accounting.quantiles.permute_and_flip_law`); it is ε-DP for utilities of sensitivity Δ
(McKenna & Sheldon 2020, Thm 1) and its expected utility is never below the exponential mechanism's (Thm 2).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Sequence

from ..errors import InvalidParameterError
from .discrete import checked_source
from .exact import bernoulli_exp
from .source import SecureRandom

__all__ = ["sample_permute_and_flip"]


def sample_permute_and_flip(gaps: Sequence[int], t: Fraction, rng: SecureRandom | None = None) -> int:
    """Index ``k`` drawn by permute-and-flip over cells with integer gaps ``g_k = max U − U_k >= 0`` (one zero)
    and rational ``t > 0``: every coin exact (module docstring)."""
    gs = [int(g) for g in gaps]
    if not gs or min(gs) != 0 or any(g < 0 for g in gs):
        raise InvalidParameterError("gaps must be non-empty, >= 0, with a zero gap (the best cell)")
    t = Fraction(t)
    if t <= 0:
        raise InvalidParameterError(f"t must be > 0, got {t}")
    src = checked_source(rng)
    order = list(range(len(gs)))
    for i in range(len(gs)):
        j = i + src.randbelow(len(gs) - i) if i < len(gs) - 1 else i
        order[i], order[j] = order[j], order[i]
        k = order[i]
        if gs[k] == 0 or bernoulli_exp(t * gs[k], src):
            return k
    raise AssertionError("unreachable: a best cell always accepts")  # pragma: no cover
