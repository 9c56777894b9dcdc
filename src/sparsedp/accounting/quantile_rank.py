"""The error bound published with a per-key quantile: a worst-case rank error, exact for permute-and-flip.

A released quantile (``sd.Quantile``/``sd.Median``, :mod:`sparsedp.mechanisms.quantiles`) is the midpoint of one
public grid cell drawn by permute-and-flip (McKenna & Sheldon, "Permute-and-Flip: A new mechanism for
differentially private selection", NeurIPS 2020, arXiv:2010.12603) at ``t = ε_key/(2Δ)`` over ``B`` cells with
integer utilities ``U_k = −|D_k|``, ``D_k = (b − a)·L_k − a·G_k`` (:mod:`sparsedp.accounting.quantiles`, ``q = a/b``).
Its error is a statement about *ranks*: the gap ``U_max − U_out`` (an integer). A value interval for the key's true
quantile would need the key's private cell counts; this bound needs none.

**Worst case, exactly** (``docs/proofs/intervals.md`` §6). For every input, and every integer ``g >= 0``,

    P[U_max − U_out > g] <= 1 − ∫_0^1 (1 − τ·p)^{B−1} dτ = 1 − (1 − (1 − p)^B)/(B·p),   p = exp(−t·(g + 1)).

Why: permute-and-flip gives every cell an independent coin ``Bernoulli(exp(−t·gap_k))`` and outputs the first
accepted cell in a uniformly random order; the event "the output's gap is <= g" can only lose probability when a
cell of gap <= g other than a best one becomes a cell of gap g + 1 (its coin only falls, and it is no longer
good), and when a cell of gap > g gets the largest coin ``p`` such a cell can have (gaps are integers, so
``exp(−t(g + 1))``): the first accepted cell can then only move earlier and be bad. So the worst case is one best
cell (coin 1) and ``B − 1`` cells at gap exactly ``g + 1``, whose law is the integral (a best cell at arrival
time τ is output iff none of the others came earlier and accepted). It is attained by data (a key whose values all
fall in one cell, ``g + 1 = `` their number, for the median), so the bound cannot be lowered without looking at
the data. :func:`rank_error` is the smallest such ``g`` at a level ``L`` (``P[gap > g] <= 1 − L``), reported in
values as ``g/b`` (the rank score ``|D_k|/b = |#below − q·#outside|`` moves by about one per value the cell moves
past). Public: a function of (ε_key, Δ, B, q, L) only, so publishing it costs no privacy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from .. import _validate as v
from .quantiles import em_scale

__all__ = ["RankError", "worst_case_miss", "rank_error"]


@dataclass(frozen=True)
class RankError:
    """The rank error of a released quantile at ``level``: ``gap`` (integer utility units: with probability at
    least ``1 − miss >= level`` the released cell's utility is within ``gap`` of the best cell's, for every input),
    ``values`` = ``gap/b`` (the same in values of the key, ``b`` the denominator of ``q``), and ``miss``, the exact
    worst-case probability of a larger gap (:func:`worst_case_miss`)."""

    level: float
    gap: int
    values: float
    miss: float


def worst_case_miss(t: Fraction | float, cells: int, gap: int) -> float:
    """``max over inputs of P[U_max − U_out > gap]`` for permute-and-flip at scale ``t`` over ``cells`` cells
    with integer utilities: ``1 − (1 − (1 − p)^B)/(B·p)``, ``p = exp(−t·(gap + 1))`` (module docstring)."""
    b = v.integer("cells", cells, lo=1)
    g = v.integer("gap", gap, lo=0)
    if b == 1:
        return 0.0
    p = math.exp(-float(t) * (g + 1))
    if p == 0.0:
        return 0.0
    inside = -math.expm1(b * math.log1p(-p)) / (b * p) if p < 1.0 else 1.0 / b  # ∫_0^1 (1 − τp)^{B−1} dτ
    return max(0.0, 1.0 - inside)


def rank_error(epsilon_key: float, sensitivity: int, cells: int, level: float, q: Fraction) -> RankError:
    """The smallest integer ``g`` with :func:`worst_case_miss` ``(t, cells, g) <= 1 − level`` for permute-and-flip
    at ``t = ε_key/(2Δ)`` (:func:`~sparsedp.accounting.quantiles.em_scale`, the sampler's exact rational scale)."""
    t = em_scale(epsilon_key, sensitivity)
    lv = v.real("level", level, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
    alpha = 1.0 - lv
    b = v.integer("cells", cells, lo=1)
    # the union bound (B − 1)·p <= alpha holds at this gap, and the exact miss is below it
    hi = max(0, math.ceil(math.log(max(b - 1, 1) / alpha) / float(t)))
    while worst_case_miss(t, b, hi) > alpha:  # float safety only
        hi += 1
    lo = -1  # gap −1: the miss is 1 (every output has gap >= 0 > −1)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if worst_case_miss(t, b, mid) <= alpha:
            hi = mid
        else:
            lo = mid
    den = Fraction(q).denominator
    return RankError(level=lv, gap=hi, values=hi / den, miss=worst_case_miss(t, b, hi))
