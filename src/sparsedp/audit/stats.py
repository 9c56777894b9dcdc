"""Statistics of a privacy audit: an empirical lower bound on ε from two samples of an output event.

If a mechanism M is (ε, δ)-DP then for every output event S and neighbours D, D'

    P[M(D') ∈ S] <= e^ε · P[M(D) ∈ S] + δ,        so       ε >= ln((p₁ − δ) / p₀)

with p₁ = P[M(D') ∈ S], p₀ = P[M(D) ∈ S] (Dwork–Roth 2014, Def. 2.4; the hockey-stick form of the
auditing bound of Jagielski et al. 2020 / Nasr et al. 2021). With n runs on each side we replace p₁ by its
lower and p₀ by its upper Clopper–Pearson bound (Clopper & Pearson 1934), each at one-sided level α/2, so
the reported ε lower bound holds with confidence ≥ 1 − α (union bound). An event that never happens on D
still has a positive upper bound (1 − (α/2)^{1/n} for 0 of n), so the bound stays finite and grows like
ln n: a few hundred thousand runs refute any ε up to ~10 once p₁'s lower bound exceeds δ clearly.

Several candidate events may be tried: :func:`best_event_bound` picks the event on one half of the runs
and evaluates it on the other half, so the selection does not bias the confidence statement.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

from .. import _validate as v


def clopper_pearson(k: int, n: int, alpha: float) -> tuple[float, float]:
    """Two one-sided Clopper–Pearson bounds, each at level ``alpha``: (lower, upper) for p given k of n."""
    k = v.integer("k", k, lo=0)
    n = v.integer("n", n, lo=1)
    if k > n:
        raise v.InvalidParameterError(f"k must be <= n, got k={k}, n={n}")
    lo = 0.0 if k == 0 else float(stats.beta.ppf(alpha, k, n - k + 1))
    hi = 1.0 if k == n else float(stats.beta.ppf(1 - alpha, k + 1, n - k))
    return lo, hi


@dataclass(frozen=True)
class EpsilonBound:
    """Audit outcome for one event: counts, probability bounds, and the ε lower bound at δ."""

    event: str
    k1: int  # event count on D' (the neighbour with the extra unit)
    n1: int
    k0: int  # event count on D
    n0: int
    delta: float
    confidence: float
    p1_lower: float
    p0_upper: float
    epsilon_lower: float  # may be -inf (no evidence) or +inf (no epsilon explains it at this delta)
    epsilon_point: float  # plug-in estimate ln((k1/n1 − δ)/(k0/n0)), for information only

    def contradicts(self, epsilon: float) -> bool:
        """Does the audit refute an (epsilon, delta) claim at the stated confidence?"""
        return self.epsilon_lower > epsilon


def epsilon_lower_bound(k1: int, n1: int, k0: int, n0: int, delta: float, *, confidence: float = 0.95,
                        event: str = "S") -> EpsilonBound:
    """Lower bound on ε at ``delta`` from the event counts k1/n1 (on D') and k0/n0 (on D).

    With probability ≥ ``confidence`` over the runs, the true ε of the mechanism (at this δ, for this
    pair of neighbours) is at least ``epsilon_lower``.
    """
    dlt = v.real("delta", delta, lo=0.0, hi=1.0, hi_open=True)
    conf = v.real("confidence", confidence, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
    alpha = (1.0 - conf) / 2.0
    p1_lo, _ = clopper_pearson(k1, n1, alpha)
    _, p0_hi = clopper_pearson(k0, n0, alpha)
    eps_lo = _log_ratio(p1_lo - dlt, p0_hi)
    eps_pt = _log_ratio(k1 / n1 - dlt, k0 / n0)
    return EpsilonBound(event, k1, n1, k0, n0, dlt, conf, p1_lo, p0_hi, eps_lo, eps_pt)


def _log_ratio(num: float, den: float) -> float:
    if num <= 0:
        return -math.inf
    if den <= 0:
        return math.inf
    return math.log(num / den)


def best_event_bound(events1: np.ndarray, events0: np.ndarray, names: list[str], delta: float, *,
                     confidence: float = 0.95) -> EpsilonBound:
    """Choose the most revealing of several events on the first half of the runs, bound on the second.

    ``events1``/``events0`` are boolean arrays of shape (runs, n_events): whether each run's output on
    D' / D fell in each candidate event (both orientations S and its complement, and D/D' swapped, should be
    included by the caller as separate columns if wanted).
    """
    e1 = np.asarray(events1, dtype=bool)
    e0 = np.asarray(events0, dtype=bool)
    if e1.ndim != 2 or e0.ndim != 2 or e1.shape[1] != e0.shape[1] or e1.shape[1] != len(names):
        raise v.InvalidParameterError("events1/events0 must be (runs, n_events) with one name per event")
    h1, h0 = e1.shape[0] // 2, e0.shape[0] // 2
    if h1 < 1 or h0 < 1:
        raise v.InvalidParameterError("need at least 2 runs on each side")
    sel = [epsilon_lower_bound(int(e1[:h1, j].sum()), h1, int(e0[:h0, j].sum()), h0, delta,
                               confidence=confidence).epsilon_lower for j in range(len(names))]
    j = int(np.argmax(sel))
    return epsilon_lower_bound(int(e1[h1:, j].sum()), e1.shape[0] - h1, int(e0[h0:, j].sum()),
                               e0.shape[0] - h0, delta, confidence=confidence, event=names[j])


def pooled_pearson(observed, expected, min_expected: float = 5.0) -> tuple[float, int]:
    """Pearson's statistic and its degrees of freedom of ``observed`` counts against ``expected`` (counts or
    probabilities, rescaled to the observed total), after pooling adjacent cells (in the given order) until each
    pooled cell expects at least ``min_expected`` (a short remainder joins the last pooled cell)."""
    obs_in = np.asarray(observed, dtype=float)
    exp_in = np.asarray(expected, dtype=float)
    if obs_in.shape != exp_in.shape or obs_in.ndim != 1 or obs_in.size == 0:
        raise ValueError("observed and expected must be 1-d arrays of the same, non-zero length")
    exp_in = exp_in * (obs_in.sum() / exp_in.sum())
    obs, exp = [], []
    acc_o = acc_e = 0.0
    for o, e in zip(obs_in, exp_in):
        acc_o += o
        acc_e += e
        if acc_e >= min_expected:
            obs.append(acc_o)
            exp.append(acc_e)
            acc_o = acc_e = 0.0
    if not obs:
        raise ValueError(f"fewer than {min_expected:g} expected in total: nothing to test")
    obs[-1] += acc_o
    exp[-1] += acc_e
    o, e = np.array(obs), np.array(exp)
    return float(np.sum((o - e) ** 2 / e)), len(obs) - 1


def pooled_chisquare(observed, expected, min_expected: float = 5.0) -> float:
    """p-value of Pearson's chi-square test of ``observed`` counts against ``expected`` counts, after pooling
    adjacent cells (:func:`pooled_pearson`; the usual validity condition of the chi-square approximation).
    Expected counts are rescaled to the observed total, so ``expected`` may be a probability vector."""
    stat, df = pooled_pearson(observed, expected, min_expected)
    return float(stats.chi2.sf(stat, df)) if df > 0 else 1.0
