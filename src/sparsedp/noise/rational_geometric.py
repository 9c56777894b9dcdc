"""The small samplers of the pure blanket histogram, and the rational-base laws they use.

* :class:`TwoSidedGeometricLaw`, :class:`GeometricLaw` — the rational-base two-sided and one-sided geometric laws
  with exact survival bounds, sampled by :func:`~sparsedp.noise.inversion.release_by_inversion` /
  ``sample_by_inversion``; pure math, so they live with their accountant in
  :mod:`sparsedp.accounting.geometric_laws` (re-exported here).

* :func:`truncated_poisson` — ``P[M = m] ∝ λ^m/m!`` on ``{0, …, cap}`` for a rational ``λ`` in (0, 1), exactly:
  propose ``m`` with ``P = (1 − λ) λ^m`` (count Bernoulli(λ) successes before the first failure), accept with
  probability ``1/m!`` and ``m <= cap``, else start again. Accepted draws have law ∝ ``(1 − λ) λ^m / m!`` on
  ``{0 … cap}``, i.e. the truncated Poisson law; a round accepts with probability at least ``(1 − λ)``·P[Poisson
  <= cap], so the expected number of rounds is below ``1/((1 − λ) P[M <= cap])``.
* :func:`blanket_size` — ``P[M = m] ∝ C(f, m)(λ/d)^m`` on ``{0 … cap}``: a truncated-Poisson proposal thinned
  with probability ``Π_{i<m}(f − i)/d`` (a truncated binomial law, exactly, without a binomial sampler).
* :func:`subset_outside` — a uniform m-subset of ``[0, d) \\ S`` with **no rejection at the subset level**: Floyd's
  algorithm (Bentley and Floyd, "Programming pearls: a sample of brilliance", CACM 30(9), 1987) picks a uniform
  m-subset of the indices ``[0, d − |S|)`` with exactly m uniform draws, and each index i is mapped to the i-th
  smallest element of the complement by rank and shift over the sorted support (``x = i + j`` with ``j`` the
  number of support elements ``s_(j')`` with ``s_(j') − j' <= i``, one binary search). Its work is fixed given m
  and |S|: one sort of S, m draws, m binary searches; only each single uniform draw on a range that is not a power
  of two is a (bit-level) rejection sampler, accepting with probability above 1/2 per round.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from typing import Collection

from .. import _validate as v
from ..accounting.geometric_laws import GeometricLaw, TwoSidedGeometricLaw
from ..errors import InvalidParameterError
from .source import default_source

__all__ = ["TwoSidedGeometricLaw", "GeometricLaw", "truncated_poisson", "blanket_size", "subset_outside"]


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


def subset_outside(m: int, d: int, support: Collection[int], rng=None) -> list[int]:
    """A uniform m-subset of ``[0, d) \\ support`` (``support`` a set of distinct integers in ``[0, d)``), as a list.

    Floyd's algorithm on the N = d − |support| complement indices: for j = N − m, …, N − 1 draw t uniform on
    ``[0, j]`` and take t, or j if t is already taken. By induction on j every m-subset of ``[0, N)`` has probability
    ``1/C(N, m)`` (each subset of size i of ``[0, j)`` has probability 1/C(j, i); a given (i+1)-subset A of
    ``[0, j+1)`` arises from A \\ {t} for the t ∈ A below j with draw t, or from A \\ {j} with a draw in A — (i+1)
    outcomes of j + 1, so probability (i+1)/((j+1)·C(j, i)) = 1/C(j+1, i+1)). The i-th smallest complement
    element is ``i + bisect_right(g, i)`` with ``g_(j') = s_(j') − j'`` over the sorted support (non-decreasing: the
    number of complement elements below each support element), a bijection ``[0, N) → [0, d) \\ support`` that is
    increasing. So the image is a uniform m-subset of the complement, in exactly m draws (module docstring)."""
    m, d = v.integer("m", m, lo=0), v.integer("d", d, lo=1)
    free = d - len(support)
    if m > free:
        raise InvalidParameterError(f"m={m} exceeds the {free} integers of [0, {d}) outside the support")
    if not m:
        return []
    s = sorted(support)
    if s and (s[0] < 0 or s[-1] >= d or (not isinstance(support, (set, frozenset, dict)) and len(set(s)) < len(s))):
        raise InvalidParameterError(f"support must hold distinct integers in [0, {d})")
    rng = default_source() if rng is None else rng
    chosen: set[int] = set()
    for j in range(free - m, free):
        t = rng.randbelow(j + 1)
        chosen.add(j if t in chosen else t)
    # g_j = s_(j) − j is non-decreasing; the number of g_j <= i is the number of support keys below the image
    ranks = range(len(s))
    return [i + bisect_right(ranks, i, key=lambda j: s[j] - j) for i in sorted(chosen)]
