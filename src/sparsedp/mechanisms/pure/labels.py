"""Uniform labels of the public domain ``X = {0, …, |X|−1}`` (after Balcer & Vadhan (2019) §5.9 step 1, P7).

Empty bins of KH′/KH″ get their labels here; the labels never depend on the data beyond the exclusion
of the occupied set ``A`` (and, for :func:`coupon_labels`, not even the number of draws does).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Iterable

from ...noise.source import SecureRandom, default_source

__all__ = ["distinct_labels", "coupon_labels", "coupon_draws", "coupon_failure_probability"]


def distinct_labels(domain_size: int, exclude: Iterable[int], r: int, rng: SecureRandom | None = None) -> list[int]:
    """A uniformly random *sequence* of ``r`` distinct labels of ``X \\ exclude`` (spec P7, exact, β₁ = 0).

    Each step draws a rank ``z`` uniformly among the labels still free and maps it to the ``z``-th free
    label by walking the sorted excluded set (``O(|E|)`` per draw, ``O(r·(|E| + r))`` in total).
    """
    rng = default_source() if rng is None else rng
    excl = sorted(set(exclude))
    if domain_size - len(excl) < r:
        raise ValueError(f"only {domain_size - len(excl)} free labels, {r} requested")
    out = []
    for _ in range(r):
        y = rng.randbelow(domain_size - len(excl))
        for e in excl:  # z-th free label: skip every excluded label at or below the running candidate
            if e <= y:
                y += 1
            else:
                break
        out.append(y)
        # insert keeping order
        lo, hi = 0, len(excl)
        while lo < hi:
            mid = (lo + hi) // 2
            if excl[mid] < y:
                lo = mid + 1
            else:
                hi = mid
        excl.insert(lo, y)
    return out


def coupon_draws(n: int, g1: int) -> int:
    """Number of iid labels drawn by KH″ step 1: ``⌈(4n+2)/β₁⌉ = (4n+2)·g₁`` for ``β₁ = 1/g₁``."""
    return (4 * n + 2) * g1


def coupon_labels(domain_size: int, occupied: set[int], n: int, g1: int,
                  rng: SecureRandom | None = None) -> list[int] | None:
    """KH″ steps 1 and 4 (Balcer & Vadhan (2019), Alg 7): draw up to ``(4n+2)·g₁`` iid uniform labels; if fewer than
    ``2n+1`` distinct labels appear return ``None`` (release the empty histogram), else return the first
    ``n+1`` distinct labels not in ``occupied``, in order of appearance.

    Drawing stops as soon as ``2n+1`` distinct labels are seen: later draws cannot change the output, and
    the number of draws made depends on the random labels only, never on the data.
    """
    rng = default_source() if rng is None else rng
    need = 2 * n + 1
    seen: set[int] = set()
    order: list[int] = []
    for _ in range(coupon_draws(n, g1)):
        x = rng.randbelow(domain_size)
        if x not in seen:
            seen.add(x)
            order.append(x)
            if len(order) == need:
                break
    if len(order) < need:
        return None
    free = [x for x in order if x not in occupied]  # >= n+1 because |occupied| <= n
    return free[: n + 1]


def coupon_failure_probability(domain_size: int, n: int, g1: int) -> Fraction:
    """Exact ``P(fewer than 2n+1 distinct labels in (4n+2)·g₁ iid uniform draws)`` (Markov chain on the
    number of distinct labels seen; spec §5.9, T15). Independent of the data; at most ``β₁ = 1/g₁``."""
    need = 2 * n + 1
    N = domain_size
    probs = [Fraction(0)] * (need + 1)
    probs[0] = Fraction(1)
    for _ in range(coupon_draws(n, g1)):
        nxt = [Fraction(0)] * (need + 1)
        nxt[need] = probs[need]
        for j in range(need):
            if probs[j]:
                nxt[j] += probs[j] * Fraction(j, N)
                nxt[j + 1] += probs[j] * Fraction(N - j, N)
        probs = nxt
    return 1 - probs[need]
