"""Exact sampling of the exponential mechanism over integer utilities: ``P[i] ∝ n_i·exp(−t·g_i)``.

:func:`sample_weighted_exp` draws an index ``i`` of ``len(sizes)`` groups with probability

    P[i] = n_i·exp(−t·g_i) / Σ_j n_j·exp(−t·g_j),

for integer sizes ``n_i >= 1``, integer gaps ``g_i >= 0`` and a rational ``t > 0`` — the exponential mechanism
``exp(ε·U/(2Δ))`` over integer utilities ``U`` grouped in runs of equal utility (``g = U_max − U``,
``t = ε/(2Δ)``, :mod:`sparsedp.accounting.quantiles`) — with no rounding anywhere:

Inversion with a lazy uniform (the method of :mod:`sparsedp.noise.inversion`)
    The answer is ``i* = min{i : V < C_i/W}`` for a uniform real ``V`` in [0, 1), ``C_i = Σ_{j<=i} w_j`` and
    ``W = C_{last}`` (so ``P[i* = i] = w_i/W``). ``V`` is a :class:`~sparsedp.noise.exact.LazyUniform` (a prefix
    of 64 random bits, more drawn on demand) and each ``w_j`` is known through integers
    ``lo_j <= 2^p·w_j <= hi_j`` (:func:`~sparsedp.noise.exact.exp_neg_bounds`, proved directed rounding, times
    ``n_j``; for ``t·g_j > p·ln 2`` simply ``[0, n_j]``). Then ``C_i/W`` lies in
    ``[CL_i/WH, CH_i/WL]`` (cumulative lower / upper sums), so ``V < C_i/W`` is certain when
    ``(prefix + 1)·WH <= CL_i·2^nbits`` and impossible when ``prefix·WL >= CH_i·2^nbits``. ``i*`` is decided when
    the smallest ``i`` certain to hold has ``i − 1`` certain to fail; otherwise 64 more bits of ``V`` are drawn and
    the bounds recomputed at precision ``p + 64``, which terminates with probability one (the bounds of
    ``C_i/W`` shrink to the point, and ``P[V = C_i/W] = 0``). The outcome has exactly the ideal law: every
    decision is implied by the true comparison.
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import lru_cache
from itertools import accumulate
from typing import Sequence

from ..errors import InvalidParameterError
from .discrete import checked_source
from .exact import LazyUniform, exp_neg_bounds
from .source import SecureRandom

__all__ = ["sample_weighted_exp", "sample_runs"]

_LN2 = math.log(2.0)


@lru_cache(maxsize=1 << 16)
def _exp_bounds(x: Fraction, prec: int) -> tuple[int, int]:
    """``lo <= 2^prec·exp(−x) <= hi`` (cached: the same gaps recur over the keys of a release)."""
    if x > prec * _LN2 + 1:        # exp(−x) < 2^−prec: [0, 1] is a valid bracket of 2^prec·exp(−x)
        return 0, 1
    lo, hi = exp_neg_bounds(x, prec)
    return int(lo), int(hi)


def _bounds(sizes: Sequence[int], gaps: Sequence[int], t: Fraction, prec: int) -> tuple[list[int], list[int]]:
    lo, hi = [], []
    for n, g in zip(sizes, gaps):
        a, b = _exp_bounds(t * g, prec) if g else (1 << prec, 1 << prec)
        lo.append(n * a)
        hi.append(n * b)
    return list(accumulate(lo)), list(accumulate(hi))


def sample_weighted_exp(sizes: Sequence[int], gaps: Sequence[int], t: Fraction,
                        rng: SecureRandom | None = None) -> int:
    """Index ``i`` with ``P[i] ∝ sizes[i]·exp(−t·gaps[i])``, exactly (module docstring)."""
    if len(sizes) != len(gaps) or not sizes:
        raise InvalidParameterError("sizes and gaps must be non-empty and of the same length")
    if any(n < 1 for n in sizes) or any(g < 0 for g in gaps) or min(gaps) != 0:
        raise InvalidParameterError("sizes must be >= 1 and gaps >= 0 with a zero gap (the best group)")
    t = Fraction(t)
    if t <= 0:
        raise InvalidParameterError(f"t must be > 0, got {t}")
    src = checked_source(rng)
    last = len(sizes) - 1
    if last == 0:
        return 0
    u = LazyUniform(src.getrandbits(64), 64, src)
    prec = 64
    while True:
        cl, ch = _bounds(sizes, gaps, t, prec)
        wl, wh = cl[-1], ch[-1]
        scale = 1 << u.nbits

        def surely_below(i: int) -> bool:   # V < C_i/W certainly
            return i == last or (u.prefix + 1) * wh <= cl[i] * scale

        def surely_not(i: int) -> bool:     # V >= C_i/W certainly
            return i != last and u.prefix * wl >= ch[i] * scale

        lo_i, hi_i = 0, last                 # smallest i with surely_below(i), by bisection (monotone in i)
        while lo_i < hi_i:
            mid = (lo_i + hi_i) // 2
            if surely_below(mid):
                hi_i = mid
            else:
                lo_i = mid + 1
        if lo_i == 0 or surely_not(lo_i - 1):
            return lo_i
        u._refine()
        prec += 64


def sample_runs(utilities: Sequence[int], t: Fraction, rng: SecureRandom | None = None) -> int:
    """Index ``k`` with ``P[k] ∝ exp(t·U_k)`` over integer ``utilities``, exactly: the cells are grouped in runs of
    equal utility, a run is drawn by :func:`sample_weighted_exp` (size = its length, gap = ``max U − U``), then a
    cell uniformly inside it (``randbelow``)."""
    src = checked_source(rng)
    us = [int(x) for x in utilities]
    if not us:
        raise InvalidParameterError("utilities must be non-empty")
    starts, sizes, vals = [0], [1], [us[0]]
    for k in range(1, len(us)):
        if us[k] == vals[-1]:
            sizes[-1] += 1
        else:
            starts.append(k)
            sizes.append(1)
            vals.append(us[k])
    top = max(vals)
    r = sample_weighted_exp(sizes, [top - x for x in vals], t, src)
    return starts[r] + (src.randbelow(sizes[r]) if sizes[r] > 1 else 0)
