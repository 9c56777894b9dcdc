"""Worst-case neighbouring inputs for the sparse-histogram mechanisms, read off their accountants.

A scenario is a pair of bounded histograms over the same keys, ``counts0`` (dataset D) and ``counts1``
(D' = D plus one privacy unit, except where noted), with the statistic of the output whose threshold events
are most revealing. Every accountant of :mod:`sparsedp.accounting` bounds δ(ε) by a maximum over exactly
these shapes, so a mechanism that leaks more than it claims leaks it here.

=============  ==================================================================================
``shared``     The unit adds 1 to ``l0`` (GSHM, Laplace) or all ``k`` (CSH) keys whose counts are far
               above the threshold, so they are released with probability ≈ 1: what is left is the noise
               part of the accountant (Karrer et al., Karrer et al. (2022) Thm 5.4 term a = 0 in the reverse
               direction; discrete: ``H(l0, ε)`` of :mod:`sparsedp.accounting.discrete_histograms`;
               CSH: the Gaussian part of Lebeda & Retschmeier (2024) Thm 3.5 term T2). The statistic is the likelihood-ratio
               statistic of the noise: the sum of the noisy counts (Gaussian, also correlated: 𝟏 is an
               eigenvector of the CSH covariance ``s_ind·I + s_corr·𝟏𝟏ᵀ``), or for the discrete Laplace the
               number of keys at or above their D' count (the per-key privacy loss is ±1/scale by that
               indicator).
``new``        The unit's ``l0`` / ``k`` keys are new with count 1 (the pre-threshold): D never shows them,
               D' shows one with the accountant's "infinite" probability ``1 − (1 − p)^{l0}`` (Karrer et al. (2022)
               Thm 5.4 term T1; Lebeda & Retschmeier (2024) Thm 3.5 T1). Event: "any of them is released".
``mixed``      New and shifted keys together (Lebeda & Retschmeier (2024) Thm 3.5 T3/T4; Karrer's a₌ > 0 terms): the unit adds 1
               to ``⌈b/2⌉`` keys far above the threshold and brings ``⌊b/2⌋`` new keys at count 1. Statistic:
               "a new key is released" (an infinite value) or else the sum of the shifted keys' values, so
               its threshold events are the union events the mixed terms bound.
``topk-shift`` Top-k CSH only (Lebeda & Retschmeier (2024) Alg. 3, Cor. 4.2): D has ``k`` large counts and a (k+1)-th count
               m; the unit adds 1 to the (k+1)-th key only, so the truncation level rises and every one
               of the k truncated counts drops by 1 (a monotonic neighbour of the truncated histograms).
=============  ==================================================================================

Public-key mechanisms (:func:`public_scenarios`; no threshold, so only the noise part): ``shift`` — D has every
listed key at count 2 and 4 units, D' adds one unit touching ``a`` listed keys, the ``a`` maximising the
Mahalanobis norm of the shift under the calibrated covariance. The statistic is the likelihood-ratio statistic
``⟨v, y⟩`` ("projection"): ``y`` the released noisy vector in the coordinates where the noise is i.i.d. and ``v``
the shift. Independent noise (public-gaussian): ``y`` = the counts, ``v`` = 1 on the ``a = k = min(l0, d)``
touched keys. Embedding (correlated-gaussian, bounded-density; Lebeda (2024) Alg. 1 / §4.1): ``y = (q·f̃ − p·ñ, c·ñ)``
(the released counts and size estimate ñ mapped back to ``(q·f − p·n·1, c·n) + Z``), ``v = (q·x − p·1, c)`` with
``|v|² = a(q − p)² + (d − a)p² + c²``, maximised at ``a = k`` or ``a = 0`` (a unit with no listed key still
moves n), as in :mod:`sparsedp.accounting.public_keys`. Discrete Laplace (public-laplace): "above" on the k
touched keys (d = k by default), its per-key privacy loss being ±1/t by that indicator.

The conformance histogram of :mod:`.laws` (``law``) is not a pair: ``b`` keys at one count near the threshold.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from ..mechanisms.public_keys import CorrelatedGaussian
from ..mechanisms.thresholded import Laplace, TopKCSH

__all__ = ["Scenario", "scenarios_for", "public_scenarios", "MIXED_SENTINEL"]

#: the "mixed" statistic's value when a new key is released (above every sum of noisy counts)
MIXED_SENTINEL = 1e15


@dataclass(frozen=True)
class Scenario:
    """Neighbouring bounded histograms (same key order) and the statistic to threshold.

    ``statistic``: "sum" (sum of released noisy counts, unreleased keys count as 0), "above" (number of
    keys whose released noisy count is >= their count in D', unreleased = below), "any" (whether any key
    new in D' is released), "diff" (key 0's value minus key 1's, unreleased = 0) or "mixed" (:data:`MIXED_SENTINEL` if a key new in D' is released, else "sum" over the others).
    Public-key scenarios also give the units of D and D' (``units0``, ``units1``) and, for "projection"
    (``⟨direction, y⟩``), the shift ``direction`` and the embedding ``(p, q, c)`` (``None``: independent noise).
    """

    name: str
    counts0: np.ndarray
    counts1: np.ndarray
    statistic: str
    description: str
    units0: int | None = None
    units1: int | None = None
    direction: np.ndarray | None = None
    embed: tuple[int, int, int] | None = None

    def projection(self, noisy: np.ndarray) -> np.ndarray:
        """``⟨direction, y⟩`` of each run (row of ``noisy``: the released counts, then ñ for an embedding)."""
        if self.embed is None:
            return noisy @ self.direction
        p, q, c = self.embed
        n_t = noisy[:, -1:]
        y = np.concatenate([q * noisy[:, :-1] - p * n_t, c * n_t], axis=1)
        return y @ self.direction

    def mean_projection(self, counts: np.ndarray, units: int) -> float:
        """``⟨direction, E y⟩`` on the histogram ``counts`` with ``units`` units (the noise is centred)."""
        if self.embed is None:
            return float(np.asarray(counts, np.float64) @ self.direction)
        p, q, c = self.embed
        ey = np.append(q * np.asarray(counts, np.float64) - p * units, c * units)
        return float(ey @ self.direction)

    @property
    def new(self) -> np.ndarray:
        """Mask of the keys absent from D and present in D'."""
        return (self.counts0 == 0) & (self.counts1 > 0)


def high_count(calibration, pre: int) -> int:
    """A count so far above the threshold that it is released with probability 1 − ~1e-30 (mechanisms without a
    noise std in their calibration, the pure and Misra–Gries ones: 400, above their thresholds at ε >= 0.1)."""
    tau = float(getattr(calibration, "tau", 0.0) or 0.0)
    std = float(getattr(calibration, "noise_std", 0.0) or 0.0)
    if not (math.isfinite(tau) and math.isfinite(std)):  # pragma: no cover - every thresholded calibration is
        tau = std = 0.0
    return int(pre + math.ceil(tau) + math.ceil(25 * std) + 2) if std else 400


def scenarios_for(mechanism: str, calibration, bound: int, pre: int = 1, *,
                  replace_one: bool = False, high: int | None = None) -> list[Scenario]:
    """The worst-case scenarios of ``mechanism`` (an audit name of :data:`.targets.AUDITABLE`, or the name
    ``auto`` picked) with its bound (l0, or k / top_k) and the calibration the mechanism is built with.

    ``replace_one``: the guarantee is for replacing one unit, the number of units public (the Balcer–Vadhan
    mechanisms without ``max_units``; one key per unit): D and D' then have the same total, one unit moving from
    key 1 to key 0 — ``shared`` (key 0 at c → c + 1, key 1 at c → c − 1) and ``new`` (key 0 new at 1, key 1 at
    c → c − 1), with the statistic "diff" (key 0's value minus key 1's, unreleased = 0), the likelihood-ratio
    statistic of two independent noises. ``high``: the "far above" count (default :func:`high_count`)."""
    c = high_count(calibration, pre) if high is None else int(high)
    n = int(bound)
    if replace_one:
        return [
            Scenario("shared", np.array([c, c], np.int64), np.array([c + 1, c - 1], np.int64), "diff",
                     f"one unit moves from key 1 to key 0, both at {c} (replace-one, noise part)"),
            Scenario("new", np.array([0, c], np.int64), np.array([pre, c - pre], np.int64), "diff",
                     f"one unit moves from key 1 (count {c}) to a new key 0 (replace-one, threshold part)"),
        ]
    shared_stat = "above" if mechanism == Laplace.name else "sum"
    dense = mechanism in ("compact", "basic")  # every queried key has a value: "any" says nothing, the sum does
    out = [
        Scenario("shared", np.full(n, c, np.int64), np.full(n, c + 1, np.int64), shared_stat,
                 f"{n} keys at count {c} in D, {c + 1} in D' (noise part of the accountant)"),
        Scenario("new", np.zeros(n, np.int64), np.full(n, pre, np.int64), "sum" if dense else "any",
                 f"{n} new keys at the pre-threshold {pre} in D' only (threshold part)"),
    ]
    if n >= 2:
        j = (n + 1) // 2
        c0 = np.concatenate([np.full(j, c, np.int64), np.zeros(n - j, np.int64)])
        c1 = np.concatenate([np.full(j, c + 1, np.int64), np.full(n - j, pre, np.int64)])
        out.append(Scenario("mixed", c0, c1, "mixed",
                            f"{j} keys at {c} -> {c + 1} and {n - j} new keys at {pre} (mixed terms)"))
    if mechanism in (TopKCSH.name, "topk-csh-shifted"):
        m = 3
        out.append(Scenario(
            "topk-shift", np.append(np.full(n, c + m, np.int64), m), np.append(np.full(n, c + m, np.int64), m + 1),
            "sum", f"{n} keys at {c + m} plus a (k+1)-th key at {m} in D, {m + 1} in D' (truncation level moves)"))
    return out


def public_scenarios(mechanism: str, calibration) -> list[Scenario]:
    """The worst-case add/remove pair of a public-key mechanism (module docstring) for its calibration
    (:class:`~sparsedp.accounting.public_keys.PublicKeysCalibration`: ``d`` keys, ``k`` per unit, embedding
    ``(p, q, c)``)."""
    d, k = int(calibration.d), int(calibration.k)
    c0 = np.full(d, 2, np.int64)
    if mechanism in (CorrelatedGaussian.name, "bounded-density", "grouped-correlated-gaussian"):
        p, q, c = int(calibration.p), int(calibration.q), int(calibration.c)
        a = max((0, k), key=lambda a: (a * (q - p) ** 2 + (d - a) * p * p, a))
        x = (np.arange(d) < a).astype(np.int64)
        v = np.append(q * x - p, c).astype(np.float64)
        return [Scenario("shift", c0, c0 + x, "projection",
                         f"{d} listed keys at 2 and 4 units in D; D' adds a unit on {a} of them (|v|^2 = "
                         f"{int(v @ v)}, embedding p/q = {p}/{q}, c = {c})", units0=4, units1=5, direction=v,
                         embed=(p, q, c))]
    x = (np.arange(d) < k).astype(np.int64)
    stat = "above" if mechanism == "public-laplace" else "projection"
    return [Scenario("shift", c0, c0 + x, stat, f"{d} listed keys at 2 in D; D' adds a unit on {k} of them",
                     units0=4, units1=5, direction=x.astype(np.float64))]
