"""``sd.AutoBound(objective="keys")``: choose l0 by the expected number of released keys (beyond the papers).

The quantile objective of :mod:`sparsedp.auto_bound` targets "a fraction q of units keep all their keys"; this
objective instead maximises what the release is for, the number of keys it publishes. Proof:
``docs/proofs/auto-bound.md`` §"Keys objective"; tests: ``tests/api/test_auto_keys.py``.

**Candidates** (public): the AutoBound bounds c_1 < … < c_m, each with the calibration the requested mechanism
(``gshm``, ``laplace`` or ``auto``) resolves to at (ε₂, δ) and l0 = c_i, computed before any data is read.
For candidate i the release publishes a key of bounded count n with probability

    p_i(n) = P[X ≥ j_i(n)]  (n ≥ pre),   p_i(n) = 0  (n < pre),

X the calibrated exact integer noise (``N_Z(0, s)`` or discrete Laplace), j_i(n) the kernel's release floor
(:meth:`sparsedp.mechanisms.kernel.NoisePlan.release_floor`: ``thr − n``), pre the pre-threshold.

**Integer utility.** With the public integer M = :data:`SCALE` (2^16), the public table
q_i(n) = ⌊M·p_i(n)⌋ for n ≤ n_i* and q_i(n) = q_i(n_i*) above (n_i* = pre + ⌈thr⌉ + ⌈12·std⌉, where p_i is 1 to
double precision), and the utility u_i(D) = Σ_k q_i(n_k^(c_i)(D)) — an integer, M times the expected number of
released keys up to 1/M per key. The counts n_k^(c) of every candidate come from ONE secret ranking
(:func:`candidate_counts`): every distinct (unit, key) pair gets the keyed AES rank of
:func:`sparsedp.engines.bounding.prf_ranks` under a fresh secret, each unit orders its pairs by (rank,
canonical key), and bound c keeps the pairs of per-unit position < c.

**Sensitivity.** A unit's positions depend on its own keys and the secret only, so adding a unit v raises
n_k^(c_i) by 1 on the min(d_v, c_i) keys v keeps and changes nothing else. q_i is non-decreasing (p_i is), so
u_i(D + v) − u_i(D) ∈ [0, Δ_i], Δ_i = c_i · max_n (q_i(n+1) − q_i(n)) (exact, integers). Δ = max_i Δ_i.

**Weighted Gaussian** (``mechanism="weighted-gaussian"`` requested by name; ``mechanisms/set_union.py``): the
statistic is the key's weight sum S_k^(c) = Σ over the kept pairs of W_{min(d_u, c)} (grid units, the same
ranking), the table is over S with the kernel's rule ``S >= 1`` and ``S + Z >= T``, and a unit keeping t keys
adds W_t to each: Δ_i = max_{t ≤ c_i} t · max_S (q_i(S + W_t) − q_i(S)). ``auto`` routes that would switch
between counts and key weights with the bound (``sd.Auto(discover=True)``) are refused.

**Selection.** :func:`sparsedp.auto_bound.report_noisy_max` with discrete Laplace noise of scale s = Δ/ε₁ (no
factor 2: the utilities are monotone in the data, so their differences move by at most Δ). Pure ε₁-DP; with the
release at (ε₂, δ), (ε, δ)-DP by basic composition, charged once.

What is published about the choice: the candidates, each one's mechanism and threshold (public calibrations),
Δ, M, s, ε₁, ε₂ and the chosen bound — never the utilities (only the index is private).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Sequence

import numpy as np

from .accounting import laws
from .accounting.discrete import dgauss_logpmf, dlaplace_logpmf
from .auto_bound import report_noisy_max
from .errors import InvalidParameterError
from .mechanisms.kernel import NoisePlan

__all__ = ["SCALE", "KeysTable", "KeysPlan", "CandidateCounts", "KeysChoice", "release_table", "keys_plan",
           "candidate_counts", "key_utilities", "read_candidate_counts", "select_by_keys"]

#: the Weighted Gaussian (mechanisms/set_union.py): its statistic is the key's weight sum in grid units
WEIGHTED = "weighted-gaussian"
#: M: the public integer scale of the utilities (one key released with certainty is worth M)
SCALE = 1 << 16


@dataclass(frozen=True)
class KeysTable:
    """q(n) = ⌊M·p(n)⌋ for n = 0 … len(q) − 1, constant above, of a key whose bounded statistic is n (its count,
    or for the Weighted Gaussian its weight sum in grid units). ``weights[t − 1]`` = W_t, what each kept key of
    a unit keeping t keys adds to n (1 for counts); ``step`` = max_t t·max_n (q(n + W_t) − q(n)): the most one
    unit moves the utility (module docstring)."""

    q: np.ndarray
    weights: np.ndarray
    step: int

    def __call__(self, n: np.ndarray) -> np.ndarray:
        return self.q[np.minimum(np.asarray(n, dtype=np.int64), self.q.size - 1)]


def _sensitivity(q: np.ndarray, weights: np.ndarray) -> int:
    """max_t t·max_n (q(n + W_t) − q(n)) with q constant beyond its table (exact integers)."""
    big = int(weights.max())
    ext = np.concatenate([q, np.full(big, q[-1], dtype=np.int64)])
    best = 0
    for t, w in enumerate(weights.tolist(), start=1):
        best = max(best, t * int((ext[w:w + q.size] - q).max(initial=0)))
    return best


def release_table(calibration: Any, pre_threshold: int, scale: int = SCALE,
                  weights: np.ndarray | None = None) -> KeysTable:
    """The table of q(n) = ⌊scale·P[release | bounded statistic n]⌋ of a per-key thresholded calibration
    (discrete Gaussian or discrete Laplace noise, rule ``n + X >= thr`` or ``>``; module docstring) and its
    sensitivity for units adding ``weights[t − 1]`` to each of their t kept keys (None: 1, counts, l0 =
    ``calibration.l0``)."""
    law = calibration.noise
    if not isinstance(law, (laws.DiscreteGaussian, laws.DiscreteLaplace)):
        raise InvalidParameterError(f"AutoBound(objective='keys') needs exact integer per-key noise (discrete "
                                    f"GSHM or Laplace), not {type(law).__name__}")
    plan = NoisePlan(calibration)
    thr = Fraction(pre_threshold) + Fraction(calibration.tau)
    std = float(calibration.noise_std)
    top = pre_threshold + math.ceil(thr) + math.ceil(12 * std) + 2
    n = np.arange(top + 1, dtype=np.int64)
    j = np.asarray(plan.release_floor(n, thr), dtype=np.int64)  # type: ignore[arg-type]  # exact Fraction, as the kernel
    # P[X >= j] by a reverse cumulative sum of the pmf over a window holding all but e^-40 of the mass
    half = math.ceil(60 * std) + 2
    lo, hi = int(j.min()) - 1, max(int(j.max()), half) + half
    z = np.arange(min(lo, -half), hi + 1)
    logp = dgauss_logpmf(z, law.sigma2) if isinstance(law, laws.DiscreteGaussian) else dlaplace_logpmf(z, law.scale)
    sf = np.cumsum(np.exp(logp)[::-1])[::-1]
    p = np.where(n >= pre_threshold, np.clip(sf[j - z[0]], 0.0, 1.0), 0.0)
    q = np.floor(p * scale).astype(np.int64)
    q = np.maximum.accumulate(q)  # p is non-decreasing; this only removes float wobble, keeping q monotone
    w = np.ones(int(calibration.l0), dtype=np.int64) if weights is None else np.asarray(weights, dtype=np.int64)
    return KeysTable(q=q, weights=w, step=_sensitivity(q, w))


@dataclass(frozen=True)
class KeysPlan:
    """The public part of the choice, fixed before any data is read: per candidate, the resolved mechanism, its
    calibration and table; Δ and the selection's noise scale s = Δ/ε₁."""

    candidates: tuple[int, ...]
    mechanisms: tuple[Any, ...]
    calibrations: tuple[Any, ...]
    reasons: tuple[str, ...]
    tables: tuple[KeysTable, ...]
    sensitivity: int
    scale: Fraction
    epsilon_selection: float
    epsilon_release: float
    utility_scale: int = SCALE

    @property
    def statistic_weights(self) -> tuple[Any, ...]:
        """Per candidate: None (the statistic is the bounded count) or the Weighted Gaussian's W_t table."""
        return tuple(t.weights if m.name == WEIGHTED else None for m, t in zip(self.mechanisms, self.tables))


def keys_plan(mechanism: Any, make_request: Any, candidates: Sequence[int], epsilon_selection: float,
              epsilon_release: float, utility_scale: int = SCALE) -> KeysPlan:
    """Resolve ``mechanism`` at every candidate bound (``make_request(c)`` → the ReleaseRequest at l0 = c) and
    build the public tables (M = ``utility_scale``), Δ = max_i c_i·step_i and s = Δ/ε₁. Math only (no data, no
    randomness)."""
    mechs, cals, reasons, tables = [], [], [], []
    for c in candidates:
        mech, cal, reason, _ = mechanism.resolve(make_request(c))
        if mech.name == WEIGHTED and mechanism.name == WEIGHTED:  # requested by name: its weight sums in grid units
            table = release_table(cal.kernel(), 1, utility_scale, cal.weights)
        elif mech.bounded and "keys" in mech.auto_bound_objectives:  # a thresholded count (what the tables model)
            table = release_table(cal, mech.count_floor(), utility_scale)
        else:  # the tables model a thresholded count or a requested weighted-gaussian, nothing else
            raise InvalidParameterError(f"AutoBound(objective='keys') chooses l0 for gshm, laplace or "
                                        f"weighted-gaussian (by name); at max_groups_per_unit={c} "
                                        f"{mechanism.describe()} resolves to {mech.name!r}: request the mechanism "
                                        f"by name, or use objective='quantile' or a fixed bound")
        mechs.append(mech)
        cals.append(cal)
        reasons.append(reason)
        tables.append(table)
    sens = max(max(t.step for t in tables), 1)
    return KeysPlan(candidates=tuple(candidates), mechanisms=tuple(mechs), calibrations=tuple(cals),
                    reasons=tuple(reasons), tables=tuple(tables), sensitivity=sens,
                    scale=Fraction(sens) / Fraction(epsilon_selection), epsilon_selection=epsilon_selection,
                    epsilon_release=epsilon_release, utility_scale=utility_scale)


@dataclass(frozen=True)
class CandidateCounts:
    """What the data give the choice (never released): the bounded count n_k^(c) of every key (canonical key
    order) at every candidate c, from one ranking. Curator only."""

    candidates: tuple[int, ...]
    counts: tuple[np.ndarray, ...]
    units: int
    expected_keys: tuple[float, ...] = field(default=())

    def curator_line(self) -> str:
        e = ", ".join(f"{c}: {x:.1f}" for c, x in zip(self.candidates, self.expected_keys))
        return f"  keys (auto)   expected released keys per candidate l0 (true values, not private): {e}"


def candidate_counts(engine: Any, data: Any, unit: str, by: list[str], candidates: Sequence[int],
                     rng: Any, weights: Sequence[Any] | None = None) -> CandidateCounts:
    """n_k^(c) for every candidate c from one pass and one secret ranking (module docstring):
    :func:`read_candidate_counts` without the rows read."""
    return read_candidate_counts(engine, data, unit, by, candidates, rng, weights)[0]


def read_candidate_counts(engine: Any, data: Any, unit: str, by: list[str], candidates: Sequence[int], rng: Any,
                          weights: Sequence[Any] | None = None, aggregates: Sequence[Any] = ()
                          ) -> tuple[CandidateCounts, Any]:
    """n_k^(c) for every candidate c (``weights[i]``: the W_t table of candidate i, the statistic then
    Σ W_{min(d_u, c)}) from one read of the input and one secret ranking
    (:meth:`~sparsedp.core.engine.Engine.read_candidate_counts`: every input check first, the SUM/MEAN value
    columns of ``aggregates`` included; the ranking secret drawn from ``rng`` after them), and what the release at
    the chosen bound reads in place of ``data``. Embedded engines only: the pipeline refuses an engine without the
    pair primitives when it opens it (``Mechanism.needs``)."""
    counts, units, rows = engine.read_candidate_counts(data, unit, list(by), tuple(candidates), rng, weights,
                                                       aggregates)
    return CandidateCounts(candidates=tuple(candidates), counts=tuple(counts), units=units), rows


def key_utilities(counts: CandidateCounts, plan: KeysPlan) -> list[int]:
    """u_i = Σ_k q_i(n_k^(c_i)) (exact integers; module docstring)."""
    if counts.candidates != plan.candidates:
        raise ValueError("the counts do not match the plan's candidates")
    return [int(t(n).sum(dtype=np.int64)) for t, n in zip(plan.tables, counts.counts)]


@dataclass(frozen=True)
class KeysChoice:
    """The private choice by the keys objective (public once published): the chosen bound and the public
    quantities of how it was chosen."""

    bound: int
    index: int
    options: Any
    plan: KeysPlan

    @property
    def epsilon_selection(self) -> float:
        return self.plan.epsilon_selection

    @property
    def epsilon_release(self) -> float:
        return self.plan.epsilon_release

    def describe(self) -> str:
        return (f"max_groups_per_unit={self.bound} chosen privately with {self.options.share:.3g} of epsilon "
                f"(epsilon {self.epsilon_selection:.4g}, report noisy max over {list(self.plan.candidates)} of "
                f"the expected number of released keys, sensitivity {self.plan.sensitivity}/{self.plan.utility_scale} "
                f"keys, noise scale {float(self.plan.scale) / self.plan.utility_scale:.4g} keys); the release used epsilon "
                f"{self.epsilon_release:.4g}")

    def to_dict(self) -> dict[str, Any]:
        return {"bound": self.bound, "objective": "keys", "share": self.options.share,
                "candidates": list(self.plan.candidates), "epsilon_selection": self.epsilon_selection,
                "epsilon_release": self.epsilon_release,
                "mechanism": "report-noisy-max (discrete Laplace) of the expected number of released keys",
                "utility_scale": self.plan.utility_scale, "sensitivity": self.plan.sensitivity,
                "noise_scale": float(self.plan.scale),
                "routes": [{"l0": c, "mechanism": m.name, "threshold": float(m.count_floor() + cal.tau),
                            "noise_std": float(cal.noise_std)}
                           for c, m, cal in zip(self.plan.candidates, self.plan.mechanisms, self.plan.calibrations)]}


def select_by_keys(counts: CandidateCounts, plan: KeysPlan, options: Any, rng: Any) -> tuple[KeysChoice,
                                                                                              CandidateCounts]:
    """Report Noisy Max of the key utilities (pure ε₁-DP); also returns ``counts`` with the true expected key
    numbers filled in for the curator."""
    u = key_utilities(counts, plan)
    i = report_noisy_max(u, plan.scale, rng)
    curator = CandidateCounts(candidates=counts.candidates, counts=(), units=counts.units,
                              expected_keys=tuple(x / plan.utility_scale for x in u))
    return KeysChoice(bound=plan.candidates[i], index=i, options=options, plan=plan), curator
