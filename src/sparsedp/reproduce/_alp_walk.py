"""Exact fast simulation of the ALP1-Estimator's error (Alg. 3) for any ε: the random-walk view.

Used by the thesis Figure 2.5 target (``alp-fig2.5`` in :mod:`.thesis_ch2_alp`). Spec
Lebeda (2023) §6.1 (model), §6.4 (Fig. 2.5), §9 A11 (collision probability).

Model (spec §6.1, A11). An entry with true unary value y ∈ {0..m} is read from m noisy bits. The bits
b ≤ y were 1 before randomized response, so each reads 1 with probability 1 − p₁ (p₁ = RR probability:
1/(α+2) for Alg. 4, 1/(e^ε+1) for Alg. 10). A bit b > y reads 1 with probability
p₀ = q(1 − p₁) + (1 − q)p₁, q being the per-bit collision probability. All bits are independent. Alg. 3
returns ỹ = the mean of all global maximisers n ∈ {0..m} of f(n) = Σ_{a≤n}(2 bit_a − 1).

Random-walk form [DERIVED; the decomposition the thesis uses in the proofs of Lemmas 2.9/2.10]. Seen
from position y, f splits into two independent simple random walks started at 0:
  R(j) = f(y + j) − f(y), j = 0..m − y, step +1 with probability p₀ (bit y + j read as 1);
  L(j) = f(y − j) − f(y), j = 0..y,     step +1 with probability p₁ (bit y − j + 1 read as 0).
If max R > max L, ỹ − y is the mean of the j with R(j) = max R; if max L > max R, minus the mean of the
j with L(j) = max L; on a tie M = max R = max L both argmax sets count, position y (j = 0, in both sets
only when M = 0) once: ỹ − y = (S_R − S_L)/(C_R + C_L − [M = 0]), with S the sum and C the number of
argmax positions j of a side.

Each side is sampled *exactly* by jumping from one visit of its running maximum to the next instead of
drawing all m bits. From a point on the running maximum at time t with H steps left, the walk (up
probability p < ½)
  * steps up to a new maximum at t + 1 with probability p (needs H ≥ 1);
  * first returns to the same level at t + 2(n + 1) with probability C_n (p(1 − p))^{n+1}, C_n the n-th
    Catalan number (step down, then the first-passage time 2n + 1 of +1, [Feller I, XI.3]; needs
    2(n + 1) ≤ H);
  * otherwise stays below the maximum until the horizon (probability 1 − 2p on an infinite horizon).
These events are disjoint and exhaust the possibilities, so the (max, argmax sum, argmax count) of each
side has exactly the law of the bit-by-bit walk (up to double rounding of the cumulative table, the same
precision as comparing a uniform with a float probability bit by bit); the loop runs ~1/(1 − 2p) rounds
per entry, not m.
``tests/reproduce/test_alp_fig25.py`` checks the law against exhaustive enumeration of all 2^m bit
strings and against the real :class:`sparsedp.sketches.alp.ALP` structure (chi-square at fixed seeds).

This is a simulation for figures, not a release: it draws from a numpy ``Generator``.
"""

from __future__ import annotations

import numpy as np


def return_table(p: float, max_horizon: int) -> np.ndarray:
    """cum[j] = p + Σ_{n<j} C_n (p(1 − p))^{n+1} for j = 0..⌊max_horizon/2⌋: the cumulative law of the next
    event from a running-maximum point (u < cum[0]: step up; cum[j−1] ≤ u < cum[j]: first return after
    2j steps)."""
    jmax = max(int(max_horizon) // 2, 0)
    pq = p * (1.0 - p)
    k = np.arange(jmax, dtype=np.float64)
    # C_{n+1} / C_n = 2(2n + 1)/(n + 2); term_n = C_n (pq)^{n+1}
    ratios = 2.0 * (2.0 * k + 1.0) / (k + 2.0) * pq
    terms = pq * np.cumprod(np.concatenate(([1.0], ratios[:-1]))) if jmax else np.zeros(0)
    return p + np.concatenate(([0.0], np.cumsum(terms)))


def walk_argmax(gen: np.random.Generator, p: float, horizon: np.ndarray) -> tuple[np.ndarray, ...]:
    """For walks W(0) = 0, W(j + 1) = W(j) ± 1 (+1 with probability p < ½), j < horizon[r], one per entry
    r: the maximum M, the sum S and the number C of the positions j ∈ {0..horizon[r]} with W(j) = M."""
    if not 0.0 <= p < 0.5:
        raise ValueError(f"walk_argmax needs an up-probability in [0, 1/2), got {p!r}")
    horizon = np.asarray(horizon, dtype=np.int64)
    n = horizon.size
    t = np.zeros(n, dtype=np.int64)
    top = np.zeros(n, dtype=np.int64)
    s = np.zeros(n, dtype=np.int64)
    c = np.ones(n, dtype=np.int64)
    idx = np.flatnonzero(horizon > 0)
    cum = return_table(p, int(horizon.max()) if n else 0)
    while idx.size:
        u = gen.random(idx.size)
        left = horizon[idx] - t[idx]
        j = np.searchsorted(cum, u, side="right")  # 0: up-step; j ≥ 1: first return after 2j steps
        up = j == 0
        tie = ~up & (2 * j <= left)
        iu, it = idx[up], idx[tie]
        t[iu] += 1
        top[iu] += 1
        s[iu] = t[iu]
        c[iu] = 1
        t[it] += 2 * j[tie]
        s[it] += t[it]
        c[it] += 1
        idx = idx[(up | tie) & (horizon[idx] - t[idx] > 0)]
    return top, s, c


def estimator_offsets(gen: np.random.Generator, y: np.ndarray, m: int, p1: float, p0: float) -> np.ndarray:
    """ỹ − y of Alg. 3 for true unary values y (0 ≤ y ≤ m) when bits b ≤ y read 1 with probability 1 − p1
    and bits b > y read 1 with probability p0 (module docstring)."""
    y = np.asarray(y, dtype=np.int64)
    if y.size and (y.min() < 0 or y.max() > m):
        raise ValueError("true unary values must lie in 0..m")
    ml, sl, cl = walk_argmax(gen, p1, y)
    mr, sr, cr = walk_argmax(gen, p0, m - y)
    tie = (sr - sl) / (cl + cr - (mr == 0))
    return np.where(ml > mr, -sl / cl, np.where(mr > ml, sr / cr, tie))


def collision_one_probability(p: float, q: float) -> float:
    """P[a bit above the true value reads 1] = q(1 − p) + (1 − q)p for RR probability p and per-bit
    collision probability q (spec §6.1, A11)."""
    return q * (1.0 - p) + (1.0 - q) * p
