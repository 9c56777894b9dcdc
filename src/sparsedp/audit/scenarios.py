"""Worst-case neighbouring inputs for the sparse-histogram mechanisms, read off their accountants.

A scenario is a pair of bounded histograms over the same keys, ``counts0`` (dataset D) and ``counts1``
(D' = D plus one privacy unit, except where noted), with the statistic of the output whose threshold events
are most revealing. Every accountant of :mod:`sparsedp.accounting` bounds δ(ε) by a maximum over exactly
these shapes, so a mechanism that leaks more than it claims leaks it here.

=============  ==================================================================================
``shared``     The unit adds 1 to ``l0`` (GSHM, Laplace) or all ``k`` (CSH) keys whose counts are far
               above the threshold, so they are released with probability ≈ 1: what is left is the noise
               part of the accountant (Karrer et al., seed 001 Thm 5.4 term a = 0 in the reverse
               direction; discrete: ``H(l0, ε)`` of :mod:`sparsedp.accounting.discrete_histograms`;
               CSH: the Gaussian part δ_gauss of seed 000 Thm 7.7 / Thm 3.5 term T2). The statistic is
               the likelihood-ratio statistic of the noise: the sum of the noisy counts (Gaussian, also
               correlated: 𝟏 is an eigenvector of the CSH covariance ``s_ind·I + s_corr·𝟏𝟏ᵀ``), or for
               the discrete Laplace the number of keys at or above their D' count (the per-key privacy
               loss is ±1/scale by that indicator).
``new``        The unit's ``l0`` / ``k`` keys are new with count 1 (the pre-threshold): D never shows them,
               D' shows one with the accountant's "infinite" probability ``1 − (1 − p)^{l0}`` (seed 001
               Thm 5.4 term T1; seed 000 Lemma 7.6 δ_inf). Event: "any of them is released".
``topk-shift`` Top-k CSH only (seed 000 Alg. 3, Cor. 4.2): D has ``k`` large counts and a (k+1)-th count
               m; the unit adds 1 to the (k+1)-th key only, so the truncation level rises and every one
               of the k truncated counts drops by 1 (a monotonic neighbour of the truncated histograms).
=============  ==================================================================================
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["Scenario", "scenarios_for"]


@dataclass(frozen=True)
class Scenario:
    """Neighbouring bounded histograms (same key order) and the statistic to threshold.

    ``statistic``: "sum" (sum of released noisy counts, unreleased keys count as 0), "above" (number of
    keys whose released noisy count is >= their count in D', unreleased = below), or "any" (whether any key
    is released).
    """

    name: str
    counts0: np.ndarray
    counts1: np.ndarray
    statistic: str
    description: str


def _high(calibration, pre: int) -> int:
    """A count so far above the threshold that it is released with probability 1 − ~1e-30."""
    return int(pre + math.ceil(calibration.tau) + math.ceil(25 * calibration.noise_std) + 2)


def scenarios_for(mechanism: str, calibration, bound: int, pre: int = 1) -> list[Scenario]:
    """The worst-case scenarios of ``mechanism`` ("gshm", "laplace", "csh", "topk-csh") with its bound
    (l0, or k / top_k) and the calibration the mechanism is built with."""
    c = _high(calibration, pre)
    n = int(bound)
    shared_stat = "above" if mechanism == "laplace" else "sum"
    out = [
        Scenario("shared", np.full(n, c, np.int64), np.full(n, c + 1, np.int64), shared_stat,
                 f"{n} keys at count {c} in D, {c + 1} in D' (noise part of the accountant)"),
        Scenario("new", np.zeros(n, np.int64), np.full(n, pre, np.int64), "any",
                 f"{n} new keys at the pre-threshold {pre} in D' only (threshold part)"),
    ]
    if mechanism == "topk-csh":
        m = 3
        out.append(Scenario(
            "topk-shift", np.append(np.full(n, c + m, np.int64), m), np.append(np.full(n, c + m, np.int64), m + 1),
            "sum", f"{n} keys at {c + m} plus a (k+1)-th key at {m} in D, {m + 1} in D' (truncation level moves)"))
    return out
