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
* :func:`distinct_uniform` — ``m`` distinct integers, uniform among the m-subsets of ``[0, d) \\ excluded``
  (rejection: each draw uniform on ``[0, d)``, redrawn while excluded or already taken; expected draws per value
  ``d / (d − |excluded| − m)``).
"""

from __future__ import annotations

import math
from typing import Container

from .. import _validate as v
from ..accounting.geometric_laws import GeometricLaw, TwoSidedGeometricLaw
from ..errors import InvalidParameterError
from .source import default_source

__all__ = ["TwoSidedGeometricLaw", "GeometricLaw", "truncated_poisson", "blanket_size", "distinct_uniform"]


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
