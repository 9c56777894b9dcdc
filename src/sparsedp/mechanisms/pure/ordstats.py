"""Top order statistics of ``m`` iid copies of a counting sampler's noise at count 0 (after Balcer & Vadhan (2019) §5.8).

KH′/KH″ (Balcer & Vadhan (2019), Algs 5 and 7) need the joint law of the ``n+1`` largest of ``m`` iid values
``Z_i ~ M(0, U)`` without drawing ``m ≈ |X|`` values. The paper's OrdSample (Alg 6, Lemma 2.9) is **wrong**
for integer-valued Z (ties; erratum E1, see docs/proofs/balcer-vadhan-errata.md). This module implements
the corrected *level-wise binomial* sampler: going down from the top value ``v = n``, given how many of
the variables were already placed above ``v``, the remaining ``M`` variables are iid conditioned on
``Z <= v`` and the number equal to ``v`` is ``Binomial(M, f(v)/F(v))``; only ``min(slots, ·)`` of them
matter. With the exact truncated binomial the law is exact; with :func:`approx_trunc_binomial` (dyadic
round-down arithmetic, spec P5) the statistical distance is at most ``(n+1)(16m + 9(n+1))·2^{−P}``.
"""

from __future__ import annotations

from fractions import Fraction
from math import comb
from typing import Callable, Iterator

from ...noise.clamped_geometric import ceil_log2
from ...noise.source import SecureRandom, default_source
from . import dyadic as dy

__all__ = [
    "exact_trunc_binomial",
    "exact_trunc_binomial_dist",
    "approx_trunc_binomial",
    "approx_trunc_binomial_dist",
    "top_order_stats",
    "top_order_stats_dist",
    "approx_precision",
]


def _exact_weights(M: int, pn: int, pd: int, T: int) -> list[int]:
    """Integer weights (denominator ``pd^M``) of ``min(T, Binomial(M, pn/pd))``."""
    qn = pd - pn
    w = [comb(M, j) * pn ** j * qn ** (M - j) for j in range(T)]
    w.append(pd ** M - sum(w))
    return w


def exact_trunc_binomial(M: int, pn: int, pd: int, T: int, rng: SecureRandom | None = None) -> int:
    """Sample ``min(T, Binomial(M, pn/pd))`` exactly by inverse transform on ``[1, pd^M]`` (spec P5).

    Cost is exponential in ``log M`` (the denominator has ``M·log pd`` bits): the reference KH′ only.
    """
    rng = default_source() if rng is None else rng
    u = 1 + rng.randbelow(pd ** M)
    acc = 0
    for j, w in enumerate(_exact_weights(M, pn, pd, T)):
        acc += w
        if u <= acc:
            return j
    raise AssertionError("unreachable: weights sum to pd^M")  # pragma: no cover


def exact_trunc_binomial_dist(M: int, pn: int, pd: int, T: int) -> list[Fraction]:
    """Exact law ``[P(N = j) for j in 0..T]`` of ``N = min(T, Binomial(M, pn/pd))``."""
    den = pd ** M
    return [Fraction(w, den) for w in _exact_weights(M, pn, pd, T)]


def _approx_thresholds(M: int, pn: int, pd: int, T: int, P: int) -> Iterator[int]:
    """Yield the cumulative scaled thresholds ``C_0 <= C_1 <= … <= C_{T−1}`` of the approximate walk."""
    qn = pd - pn
    x = dy.power(dy.frac(qn, pd, P), M, P)  # ≈ q^M = P(N = 0), from below
    C = 0
    for j in range(T):
        C += dy.scaled_floor(x, P)
        yield C
        x = dy.mulfrac(x, (M - j) * pn, (j + 1) * qn, P)  # P_{j+1} = P_j·(M−j)p/((j+1)q)


def _certified_zero(M: int, pn: int, pd: int, P: int, u: int) -> bool:
    """Cheap sufficient test for ``u <= C_0`` (the walk's first threshold at precision ``P``).

    ``C_0 = ⌊x̂·2^P⌋`` with ``x̂ >= q^M·e^{−λ}``, ``λ <= (2M−1)·2^{3−P}`` (spec P4); a round-down value
    ``ŷ <= q^M`` at a low precision ``P_low`` then gives ``C_0 >= ⌊ŷ·2^P·(1 − λ′)⌋`` with the doubled
    ``λ′ = (2M+1)·2^{4−P} >= λ``. If ``u`` is below that bound the full-precision walk would return 0 too,
    so the output is *identical* to the ``P``-bit algorithm; only the running time changes (the fast path
    is taken unless ``u`` lands within ``≈ 1 − q^M + 2^{−90}`` of the top, i.e. essentially when N > 0).
    """
    P_low = M.bit_length() + 96
    if P_low >= P:
        return False
    m, e = dy.power(dy.frac(pd - pn, pd, P_low), M, P_low)
    # bound = ⌊m·2^e·(2^P − 16·(2M+1))⌋ = ⌊ŷ·2^P·(1 − λ′)⌋
    N = int(m) * ((1 << P) - 16 * (2 * M + 1))
    if N <= 0:
        return False
    return u <= (N << e if e >= 0 else N >> -e)


def approx_trunc_binomial(M: int, pn: int, pd: int, T: int, P: int, rng: SecureRandom | None = None) -> int:
    """Sample ``min(T, Binomial(M, pn/pd))`` to within TV ``(16M + 9T)·2^{−P}`` (spec P5).

    Uses ``O(log M)`` ``P``-bit multiplications and at most ``T+1`` walk steps (the walk length is the
    returned value + 1, so it reveals only the output). ``u`` is drawn as ``P`` exact random bits.
    A low-precision pre-check (:func:`_certified_zero`) returns 0 early when the ``P``-bit walk would
    certainly return 0 as well: same output for every ``u``, far less work on the empty top levels.
    """
    if pn == pd:
        return T
    rng = default_source() if rng is None else rng
    u = 1 + rng.getrandbits(P)
    if _certified_zero(M, pn, pd, P, u):
        return 0
    for j, C in enumerate(_approx_thresholds(M, pn, pd, T, P)):
        if u <= C:
            return j
    return T


def approx_trunc_binomial_dist(M: int, pn: int, pd: int, T: int, P: int) -> list[Fraction]:
    """Exact law of :func:`approx_trunc_binomial`'s output (for the TV tests T17/T18)."""
    if pn == pd:
        return [Fraction(0)] * T + [Fraction(1)]
    scale = 1 << P
    out, prev = [], 0
    for C in _approx_thresholds(M, pn, pd, T, P):
        C = min(C, scale)
        out.append(Fraction(C - prev, scale))
        prev = C
    out.append(Fraction(scale - prev, scale))
    return out


Binom = Callable[[int, int, int, int], int]


def top_order_stats(F: Callable[[int], int], n: int, m: int, binom: Binom) -> tuple[int, ...]:
    """``(Z_(m) >= Z_(m−1) >= … >= Z_(m−n))``: the top ``n+1`` of ``m`` iid values with scaled CDF ``F``.

    ``F(z) = d·P(Z <= z)`` (integers, ``F(n) = d``, ``F(−1) = 0``); ``binom(M, pn, pd, T)`` samples
    ``min(T, Binomial(M, pn/pd))``. Requires ``m >= n+1``. At most ``n`` levels (spec §5.8).
    """
    if m < n + 1:
        raise ValueError(f"need at least n+1={n + 1} variables, got m={m}")
    slots, M, out = n + 1, m, []
    for val in range(n, 0, -1):
        if slots == 0:
            break
        Fv = F(val)
        if Fv == 0:
            continue
        N = binom(M, Fv - F(val - 1), Fv, slots)
        out += [val] * N
        slots -= N
        M -= N
    out += [0] * slots
    return tuple(out)


def top_order_stats_dist(F: Callable[[int], int], n: int, m: int,
                         binom_dist: Callable[[int, int, int, int], list[Fraction]]) -> dict[tuple[int, ...], Fraction]:
    """Exact law of :func:`top_order_stats` with ``binom`` replaced by its law ``binom_dist``."""
    states: dict[tuple[int, ...], Fraction] = {(): Fraction(1)}  # prefix -> probability, prefixes still open
    done: dict[tuple[int, ...], Fraction] = {}
    for val in range(n, 0, -1):
        nxt: dict[tuple[int, ...], Fraction] = {}
        Fv, Fv1 = F(val), F(val - 1)
        for prefix, pr in states.items():
            slots = n + 1 - len(prefix)
            if slots == 0:
                done[prefix] = done.get(prefix, 0) + pr
                continue
            if Fv == 0:
                nxt[prefix] = nxt.get(prefix, 0) + pr
                continue
            M = m - len(prefix)
            for N, q in enumerate(binom_dist(M, Fv - Fv1, Fv, slots)):
                if q:
                    key = prefix + (val,) * N
                    nxt[key] = nxt.get(key, 0) + pr * q
        states = nxt
    for prefix, pr in states.items():
        key = prefix + (0,) * (n + 1 - len(prefix))
        done[key] = done.get(key, 0) + pr
    return done


def approx_precision(n: int, m_bound: int, delta: Fraction) -> int:
    """``P = max(4, ⌈log₂((n+1)(16m + 9n + 9)/δ)⌉)`` so that ApproxTopOrderStats is within TV ``δ``
    (spec §5.8/§5.10). Pass ``m_bound = |X|`` (not the data-dependent ``m``) so P, and timing, do not
    depend on the data."""
    return max(4, ceil_log2(Fraction((n + 1) * (16 * m_bound + 9 * n + 9)) / Fraction(delta)))
