"""``audit``: run a mechanism many times on worst-case neighbours and bound its ε from below.

For each scenario of :mod:`.scenarios` the mechanism's own per-key kernel
(:mod:`sparsedp.mechanisms.kernel`, the code every release runs) is run ``runs`` times on D and on D',
vectorised: the keys of independent-noise mechanisms (GSHM, Laplace) are tiled across runs and noised in
one call of :func:`~sparsedp.mechanisms.kernel.noise_and_filter`; for CSH / top-k CSH each run gets its own
shared term ``Z_corr`` and the release rule :func:`~sparsedp.mechanisms.kernel.correlated_rule` is applied
to all runs at once. Candidate events are threshold events of the scenario's statistic in both directions
(D' against D and D against D'); :func:`.stats.best_event_bound` picks the best on half of the runs and
bounds it with Clopper–Pearson on the other half.

The confidence statement is simultaneous: each of the S scenarios is bounded at level 1 − (1 − c)/S
(Bonferroni), so with probability ≥ c *every* reported lower bound holds, and a contradiction is a
refutation of the (ε, δ) claim at confidence c.

``sigma_scale`` multiplies the noise scale the mechanism samples with (σ of GSHM / CSH, the scale of the
discrete Laplace) while keeping the calibrated threshold: ``0.5`` builds the broken mechanism the audit must
catch.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from .. import _validate as v
from ..errors import InvalidParameterError
from .scenarios import Scenario, scenarios_for
from .stats import EpsilonBound, best_event_bound

__all__ = ["AuditResult", "audit", "AUDITABLE"]

AUDITABLE = ("gshm", "laplace", "csh", "topk-csh")
#: tail probabilities at which threshold events of continuous statistics are placed
_LEVELS = np.geomspace(1e-5, 0.5, 40)
_CHUNK = 1 << 20  # noisy counts per vectorised block (bounds memory for large --runs or bounds)


@dataclass(frozen=True)
class AuditResult:
    """Outcome of :func:`audit`: one :class:`EpsilonBound` per scenario and the verdict."""

    mechanism: str
    epsilon: float
    delta: float
    bound: int
    runs: int
    confidence: float
    sigma_scale: float
    sigma: float
    threshold_margin: float
    bounds: dict[str, EpsilonBound]

    @property
    def epsilon_lower(self) -> float:
        """The largest lower bound on ε over the scenarios (simultaneous confidence ``confidence``)."""
        return max(b.epsilon_lower for b in self.bounds.values())

    @property
    def contradicts(self) -> bool:
        """True if the runs refute the (ε, δ) claim at the stated confidence."""
        return any(b.contradicts(self.epsilon) for b in self.bounds.values())

    def __str__(self) -> str:
        name = {"gshm": "l0", "laplace": "l0", "csh": "k", "topk-csh": "top_k"}[self.mechanism]
        lines = [
            f"sparsedp audit: {self.mechanism} claimed ({self.epsilon:g}, {self.delta:g})-DP, {name}={self.bound}",
            f"  mechanism built with noise scale {self.sigma:.6g}"
            + (f" (= {self.sigma_scale:g} x calibrated)" if self.sigma_scale != 1 else " (calibrated)")
            + f", threshold margin {self.threshold_margin:g}",
            f"  {self.runs} runs on each neighbour per scenario; confidence {self.confidence:.4g} "
            f"(simultaneous over {len(self.bounds)} scenarios, Clopper-Pearson)",
        ]
        for sname, b in self.bounds.items():
            lo = b.epsilon_lower
            lines.append(
                f"  {sname:<11} event {b.event}: P1 >= {b.p1_lower:.4g} ({b.k1}/{b.n1}), "
                f"P0 <= {b.p0_upper:.4g} ({b.k0}/{b.n0}); epsilon >= {_fmt(lo)} (point estimate "
                f"{_fmt(b.epsilon_point)})")
        verdict = ("CONTRADICTION: the runs refute the claim" if self.contradicts
                   else "no contradiction: consistent with the claim")
        lines.append(f"  empirical lower bound on epsilon at delta={self.delta:g}: {_fmt(self.epsilon_lower)} "
                     f"(claimed {self.epsilon:g}) at confidence {self.confidence:.4g}")
        lines.append(f"  verdict      {verdict}")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {"mechanism": self.mechanism, "epsilon": self.epsilon, "delta": self.delta, "bound": self.bound,
                "runs": self.runs, "confidence": self.confidence, "sigma_scale": self.sigma_scale,
                "sigma": self.sigma, "threshold_margin": self.threshold_margin,
                "epsilon_lower": self.epsilon_lower, "contradicts": self.contradicts,
                "scenarios": {k: dataclasses.asdict(b) for k, b in self.bounds.items()}}


def _fmt(x: float) -> str:
    return f"{x:.4g}" if math.isfinite(x) else ("+inf" if x > 0 else "-inf")


def scaled_calibration(cal, factor: float):
    """``cal`` with its noise scale multiplied by ``factor`` (threshold unchanged): a deliberately wrong
    mechanism for the audit to catch. Discrete scales stay exact rationals (σ² scales by factor²)."""
    if factor == 1.0:
        return cal
    return dataclasses.replace(cal, sigma=cal.sigma * factor, noise_std=cal.noise_std * factor,
                               noise=scaled_law(cal.noise, factor))


#: how each noise-law field scales when the noise is multiplied by ``factor`` (its power of factor);
#: fields not listed (the embedding weight c, the divisor) are kept
_SCALE_POWER = {"sigma2": 2, "shared_sigma2": 2, "scale": 1, "shared_scale": 1, "sigma": 1, "shared_sigma": 1}


def scaled_law(law, factor: float):
    """``law`` with its noise multiplied by ``factor``: variance parameters by factor², scales by factor;
    exact rationals stay exact (``Fraction(factor)``)."""
    f = Fraction(factor)
    changes = {}
    for fl in dataclasses.fields(law):
        power = _SCALE_POWER.get(fl.name)
        if power is None:
            continue
        x = getattr(law, fl.name)
        changes[fl.name] = x * f ** power if isinstance(x, Fraction) else float(x) * factor ** power
    return dataclasses.replace(law, **changes)


def _simulate(mechanism: str, cal, counts: np.ndarray, runs: int, pre: int, rng) -> np.ndarray:
    """``(runs, n)`` noisy released counts of ``runs`` independent releases of ``counts`` (NaN: not
    released), by the mechanism's own kernel."""
    from ..mechanisms import kernel

    n = counts.size
    out = np.full((runs, n), np.nan)
    if mechanism in ("gshm", "laplace"):
        pos, noisy = kernel.noise_and_filter(np.tile(counts, runs), cal, pre, rng)
        out.reshape(-1)[pos] = noisy
        return out
    plan = kernel.noise_plan(cal)
    if mechanism == "topk-csh":
        from ..mechanisms.topk import truncate_top_k

        counts = truncate_top_k(counts, int(cal.k))[1]
        pre = 1
    live = counts >= pre  # counts below the pre-threshold are never noised or released
    m = int(live.sum())
    if m == 0:
        return out
    z = kernel._sample(plan, runs * m, rng, False).reshape(runs, m)
    shared = kernel._sample_shared(plan, runs, rng)[:, None]
    keep, vals = kernel.correlated_rule(plan, counts[live][None, :], z, shared, pre + plan.tau)
    out[:, live] = np.where(keep, vals, np.nan)
    return out


def _statistic(sc: Scenario, noisy: np.ndarray) -> np.ndarray:
    released = ~np.isnan(noisy)
    if sc.statistic == "sum":
        return np.where(released, noisy, 0.0).sum(axis=1)
    if sc.statistic == "above":
        return (released & (np.nan_to_num(noisy, nan=-np.inf) >= sc.counts1[None, :])).sum(axis=1)
    if sc.statistic == "any":
        return released.any(axis=1).astype(np.float64)
    raise InvalidParameterError(f"unknown statistic {sc.statistic!r}")  # pragma: no cover


def _events(t1: np.ndarray, t0: np.ndarray, sc: Scenario):
    """Threshold events ``{stat >= c}`` and ``{stat < c}`` of the statistic, each in both directions
    (P[M(D') ∈ S] against P[M(D) ∈ S] and the reverse): columns for the "numerator" side (e1), the
    "denominator" side (e0), and names."""
    half = t1.size // 2
    pooled = np.concatenate([t1[:half], t0[:half]])  # thresholds from the selection half only
    if sc.statistic == "any":  # D never releases a new key: only "some key released", D' against D
        up1, up0 = t1[:, None] >= 1.0, t0[:, None] >= 1.0
        return up1, up0, ["some new key released [D' vs D]"]
    values = np.unique(pooled)
    if values.size <= 64:
        cuts = values
    else:
        cuts = np.unique(np.concatenate([np.quantile(pooled, _LEVELS), np.quantile(pooled, 1 - _LEVELS)]))
    up1 = t1[:, None] >= cuts[None, :]
    up0 = t0[:, None] >= cuts[None, :]
    cols1, cols0, names = [], [], []
    for a1, a0, rel in ((up1, up0, ">="), (~up1, ~up0, "<")):
        cols1 += [a1, a0]
        cols0 += [a0, a1]
        names += [f"{sc.statistic} {rel} {c:g} [D' vs D]" for c in cuts]
        names += [f"{sc.statistic} {rel} {c:g} [D vs D']" for c in cuts]
    return np.concatenate(cols1, axis=1), np.concatenate(cols0, axis=1), names


def audit(mechanism: str, *, epsilon, delta, bound: int = 2, runs: int = 200_000, sigma_scale: float = 1.0,
          confidence: float = 0.95, rng=None) -> AuditResult:
    """Audit ``mechanism`` (calibrated by :func:`sparsedp.accounting.calibrate` at (ε, δ), secure discrete
    noise) on its worst-case neighbours; see the module docstring.

    Args:
        mechanism: "gshm", "laplace", "csh" or "topk-csh".
        epsilon, delta: the claim to test.
        bound: l0 (gshm, laplace), k (csh) or top_k (topk-csh). Small values give the most power.
        runs: releases simulated on each neighbour in each scenario (half select the event, half bound it).
        sigma_scale: multiply the sampled noise scale (0.5 = the broken mechanism of the acceptance test).
        confidence: simultaneous confidence of the reported bounds.
        rng: a :mod:`sparsedp.noise` source (``None``: the secure default; tests pass a seeded one).
    """
    from ..accounting import calibrate

    mech = v.choice("mechanism", mechanism, AUDITABLE)
    eps = v.epsilon(epsilon)
    dlt = v.delta(delta)
    b = v.integer("bound", bound, lo=1, hi=10_000)
    n_runs = v.integer("runs", runs, lo=100, hi=100_000_000)
    scale = v.real("sigma_scale", sigma_scale, lo=0.0, hi=100.0, lo_open=True)
    conf = v.real("confidence", confidence, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
    key = {"gshm": "l0", "laplace": "l0", "csh": "k", "topk-csh": "top_k"}[mech]
    cal = scaled_calibration(calibrate(mech, epsilon=eps, delta=dlt, **{key: b}), scale)
    if rng is None:
        from ..noise import default_source

        rng = default_source()
    scs = scenarios_for(mech, cal, b)
    conf_each = 1.0 - (1.0 - conf) / len(scs)
    bounds: dict[str, EpsilonBound] = {}
    for sc in scs:
        per_block = max(1, _CHUNK // sc.counts1.size)
        t1 = np.concatenate([_statistic(sc, _simulate(mech, cal, sc.counts1, r, 1, rng))
                             for r in _blocks(n_runs, per_block)])
        t0 = np.concatenate([_statistic(sc, _simulate(mech, cal, sc.counts0, r, 1, rng))
                             for r in _blocks(n_runs, per_block)])
        e1, e0, names = _events(t1, t0, sc)
        bounds[sc.name] = best_event_bound(e1, e0, names, dlt, confidence=conf_each)
    return AuditResult(mechanism=mech, epsilon=eps, delta=dlt, bound=b, runs=n_runs, confidence=conf,
                       sigma_scale=scale, sigma=float(cal.sigma), threshold_margin=float(cal.tau),
                       bounds=bounds)


def _blocks(n: int, per_block: int):
    while n > 0:
        r = min(n, per_block)
        yield r
        n -= r
