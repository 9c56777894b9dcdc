"""``audit``: run a mechanism many times on worst-case neighbours; bound its ε from below and check its law.

Two checks, each a statistical refutation at the stated confidence:

1. **Privacy** (refutes the (ε, δ) claim). For each scenario of :mod:`.scenarios` the mechanism is released
   ``runs`` times on D and on D' through its own ``Mechanism.run`` (:func:`.targets.release_many`: the
   pipeline's KeyNoise step, exact secure samplers, the rounded CSH shared term). Candidate events are
   threshold events of the scenario's statistic in both directions (D' against D and D against D');
   :func:`.stats.best_event_bound` picks the best on half of the runs and bounds it with Clopper–Pearson on
   the other half: ε >= ln((p₁ − δ)/p₀).
2. **Conformance** (refutes "this is the calibrated mechanism"; thresholded mechanisms). ``law_runs`` releases
   of ``b`` keys at a count one noise std below the threshold; the law of the number released is compared with
   its exact law under the reference calibration (:mod:`.laws`, chi-square). This is what catches threshold
   errors that stay inside a loose accountant's slack (top-k CSH at margin −3 is still (1, 1e-3)-DP by the
   certified profile, so check 1 cannot refute it, but its release law is not the calibrated one).

The confidence statement is simultaneous: each of the S checks is made at level 1 − (1 − c)/S (Bonferroni),
so with probability ≥ c no reported refutation is false.

``sigma_scale`` multiplies the noise scale the mechanism samples with, ``margin_shift`` moves its integer margin
(:func:`.targets.build_target`); the reference calibration stays the accountant's.

Public-key mechanisms (no threshold; :func:`.scenarios.public_scenarios`): the privacy check thresholds the
likelihood-ratio statistic of the worst-case shift, and the conformance check is :class:`VarianceCheck`: the
noise of ``law_runs`` releases of D, read back exactly in the coordinates where it is i.i.d., against the
calibrated law by the exact-law scale test of :mod:`.scale_test` (a Chernoff tail bound from the exact moment
generating function: valid at any number of runs, so no seed has to be picked for a test to pass).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
from scipy import stats as st

from .. import _validate as v
from ..accounting.calibration import Neighbours
from ..errors import InvalidParameterError
from ..noise import default_source
from .laws import law_count, release_count_law
from .scenarios import MIXED_SENTINEL, Scenario, public_scenarios, scenarios_for
from .adaptive_weighting import ROUNDS, rounds_law, rounds_scenarios
from .set_union import POLICY, WEIGHTED, policy_law, policy_scenarios, weighted_law_view, weighted_scenarios
from .stats import EpsilonBound, best_event_bound, epsilon_lower_bound, pooled_chisquare
from .targets import (AUDITABLE, BLANKET, BOUND_NAME, STONES, Target, build_target, release_many,
                      scaled_calibration, scaled_law)
from .two_stage import TWO_STAGE, stage_two, two_stage_scenarios
from .scale_test import NoiseLaw, ScaleTest, discrete_gaussian, normal, scale_test, two_sided_geometric
from .alp import ALP_TARGET, ALPLawCheck, alp_check, alp_scenarios
from .vector_mean import VECTOR_MEAN, mean_scenarios, noise_law_param, release_means
from .vectors import VECTOR_SUM, vector_scenarios

__all__ = ["AuditResult", "LawCheck", "VarianceCheck", "audit", "AUDITABLE", "default_runs", "law_runs_needed",
           "scaled_calibration", "scaled_law"]

#: the stepping stones' count of the two keys of their replace-one pairs: their cut-off is the (n+1)-th largest
#: noisy count over the 512-key domain (≈ 2/ε · ln 256 ≈ 11 at ε = 1) and the exact order statistics of KH′/KH″
#: cost grow fast with n (1.5 s per release at n = 80, ~10 ms at n = 24): 12 keeps n = 24 (the keys are released
#: about half the time, which the "diff" statistic's events see; any neighbouring pair gives a valid lower bound)
_STONE_HIGH = 12
#: pure-sparse's count of the two keys of its replace-one pairs: its release time grows like n² (n = 2·this), and
#: with the target's 4-byte keys (:func:`.targets._mechanism`) its threshold at ε = 1 is below 40, so 64 is far
#: above it (released with probability ≈ 1, as the "shared" scenario wants) at ~0.3 s per release
_PURE_SPARSE_HIGH = 64
#: tail probabilities at which threshold events of continuous statistics are placed
_LEVELS = np.geomspace(1e-5, 0.5, 40)


def separation_runs(epsilon: float, delta: float, checks: int, confidence: float = 0.95, *,
                    margin: float = 0.5, cap: int = 100) -> int:
    """The fewest runs per neighbour (even, at most ``cap``) at which a complete separation of the two sides — an
    event every run on D' shows and no run on D does, what a release with no noise or a threshold at 0
    produces — refutes the claim with ``margin`` to spare: with ``h`` runs per half both
    Clopper–Pearson bounds are ``a^{1/h}`` and ``1 − a^{1/h}``, ``a = (1 − confidence)/(2·checks)``, and the
    bound is ``ln((a^{1/h} − δ)/(1 − a^{1/h})) >= ε + margin``. Runs beyond this buy the privacy scenarios of
    the correlated mechanisms nothing they can see at ~50 ms per release (a noise scale or margin error inside
    the noise is the conformance check's job); ``cap`` where no count up to it suffices."""
    for n in range(4, cap + 1, 2):
        b = epsilon_lower_bound(n // 2, n // 2, 0, n // 2, delta, confidence=1.0 - (1.0 - confidence) / checks)
        if b.epsilon_lower >= epsilon + margin:
            return n
    return cap


def default_runs(target: Target, confidence: float = 0.95) -> tuple[int, int]:
    """``(runs, law_runs)`` by default: tiled mechanisms (GSHM, Laplace, the set-union ones) are cheap per release
    (200 000 each); CSH / top-k CSH cost 20–70 ms per release (the exact shared-term tables; machine load): their
    privacy scenarios run :func:`separation_runs` per neighbour (at most 100; 54 at ε = 1 with the 5 checks of
    top-k CSH: they catch the gross breaks, a noise-free release or a threshold near 0, which is all 100 runs
    could catch), and 300 for the law, so an audit stays within 60 s on a loaded 2-core machine; the law check
    refutes σ/2 (~67 releases for power 0.9 at k = 2, 43 at k = 4) and margin −2 / −3 (~105 / ~41), while σ × 0.8
    or margin −1 need ~550 (:func:`law_runs_needed`: pass ``law_runs=600``); the pure and Misra–Gries mechanisms
    (a sketch or a noisy domain per release) 100; Misra–Gries released by CSH (a sketch and a CSH release per
    run) as CSH: :func:`separation_runs` and 150 law runs (the law of its CSH: σ/2 needs ~42); the blanket histogram (500 privacy runs at ~7 ms each); two-stage 300 and 300."""
    if target.tiled:
        return 200_000, 200_000
    if target.embedding:  # ~0.5 ms per release (d + 1 exact draws)
        return 20_000, 20_000
    if target.correlated:
        checks = len(scenarios_of(target)) + 1
        return separation_runs(float(target.request.epsilon), float(target.request.delta), checks, confidence), 300
    if target.picked == TWO_STAGE:  # a stage-1 release, a join and a stage-2 embedding per release (~30 ms)
        return 300, 300
    if target.picked in ROUNDS:  # copies of the scenario tiled into releases of 65 536 rows (~0.3 s each)
        return 2000, 2000
    if target.picked == VECTOR_SUM:  # one sparsedp.vector_sum call per release (~15 ms)
        return 300, 300
    if target.picked == ALP_TARGET:  # one sparsedp.alp call per release (~20 ms)
        return 300, 300
    if target.picked == VECTOR_MEAN:  # one PLAN release of 3 000 units per run (~40 ms); σ/2 needs a few
        return 150, 100
    if target.picked == BLANKET:  # ~7 ms per release; σ/2 (ε × 2) gives a variance ratio 0.25: 200 are plenty
        return 500, 200
    if target.picked == "misra-gries":  # a sketch and a CSH release per run (~60 ms); σ/2 needs ~42 law runs
        checks = len(scenarios_of(target)) + 1
        if not has_conformance(target):
            return 100, 0
        return separation_runs(float(target.request.epsilon), float(target.request.delta), checks, confidence), 150
    return 100, 0


@dataclass(frozen=True)
class LawCheck:
    """Conformance of the released law: ``m`` keys at count ``c``, the observed numbers released (``observed``,
    index n = 0..m) against the exact law ``expected`` (probabilities) of the reference calibration."""

    m: int
    count: int
    runs: int
    observed: tuple[int, ...]
    expected: tuple[float, ...]
    p_value: float
    level: float  # refute when p_value < level

    @property
    def contradicts(self) -> bool:
        return self.p_value < self.level

    def describe(self) -> str:
        return (f"{self.m} keys at count {self.count}, {self.runs} releases: released-count frequencies "
                f"{list(self.observed)} vs exact {[round(p * self.runs, 1) for p in self.expected]}; chi-square "
                f"p = {self.p_value:.3g}")


@dataclass(frozen=True)
class VarianceCheck:
    """Conformance of a released noise's scale (public-key, two-stage, vector-sum and blanket targets): the scale
    test of :mod:`.scale_test` on the integer noise values read back from ``runs`` releases — ``S = Σ X²``
    (discrete Gaussian) or ``Σ |X|`` (two-sided geometric) against the exact law of the reference calibration,
    two-sided, with ``p_value`` the Chernoff bound of the tail from the exact moment generating function (valid at
    any number of runs; 0 when a value is off the calibrated lattice). ``ratio`` = S / E S (the observed mean
    square / mean absolute value over the calibrated one)."""

    runs: int
    ratio: float
    p_value: float
    level: float
    what: str = "the projection on the shift"
    statistic: str = "mean square"
    values: int = 0
    off_lattice: int = 0

    @property
    def contradicts(self) -> bool:
        return self.p_value < self.level

    def describe(self) -> str:
        off = (f"; {self.off_lattice} values off the calibrated integer lattice (impossible under the calibrated "
               f"law)" if self.off_lattice else "")
        return (f"{self.statistic} of {self.what} over {self.runs} releases ({self.values} values) = "
                f"{self.ratio:.4g} x the calibrated one; exact-law tail bound p <= {self.p_value:.3g}{off}")


@dataclass(frozen=True)
class AuditResult:
    """Outcome of :func:`audit`: one :class:`EpsilonBound` per scenario, the law check, and the verdict."""

    mechanism: str
    picked: str
    epsilon: float
    delta: float
    bound: int
    runs: int
    confidence: float
    sigma_scale: float
    margin_shift: int
    sigma: float
    threshold_margin: float
    bounds: dict[str, EpsilonBound]
    law: LawCheck | VarianceCheck | ALPLawCheck | None = None

    @property
    def epsilon_lower(self) -> float:
        """The largest lower bound on ε over the scenarios (simultaneous confidence ``confidence``)."""
        return max((b.epsilon_lower for b in self.bounds.values()), default=-math.inf)

    @property
    def refutes_claim(self) -> bool:
        """The runs refute the (ε, δ) claim at the stated confidence."""
        return any(b.contradicts(self.epsilon) for b in self.bounds.values())

    @property
    def refutes_calibration(self) -> bool:
        """The released law is not the calibrated mechanism's (at the stated confidence)."""
        return self.law is not None and self.law.contradicts

    @property
    def contradicts(self) -> bool:
        """True if either check refutes (exit code 1 of ``sparsedp audit``)."""
        return self.refutes_claim or self.refutes_calibration

    def __str__(self) -> str:
        name = BOUND_NAME.get(self.mechanism, "bound")
        picked = f" (auto picked {self.picked})" if self.picked != self.mechanism else ""
        lines = [
            f"sparsedp audit: {self.mechanism}{picked} claimed ({self.epsilon:g}, {self.delta:g})-DP, "
            f"{name}={self.bound}",
            (f"  mechanism built with noise scale {self.sigma:.6g}" if math.isfinite(self.sigma) else
             "  mechanism built as calibrated (its noise has no single scale: see its calibration)")
            + (f" (= {self.sigma_scale:g} x calibrated)" if self.sigma_scale != 1 else
               (" (calibrated)" if math.isfinite(self.sigma) else ""))
            + (f", threshold margin {self.threshold_margin:g}" if math.isfinite(self.threshold_margin) else "")
            + (f" (calibrated {self.margin_shift:+d})" if self.margin_shift else ""),
            f"  {self.runs} runs on each neighbour per scenario, real release path (Mechanism.run); confidence "
            f"{self.confidence:.4g} (simultaneous over {len(self.bounds) + (self.law is not None)} checks)",
        ]
        for sname, b in self.bounds.items():
            lines.append(
                f"  {sname:<11} event {b.event}: P1 >= {b.p1_lower:.4g} ({b.k1}/{b.n1}), "
                f"P0 <= {b.p0_upper:.4g} ({b.k0}/{b.n0}); epsilon >= {_fmt(b.epsilon_lower)} (point estimate "
                f"{_fmt(b.epsilon_point)})")
        if self.law is not None:
            lw = self.law
            lines.append(f"  law         {lw.describe()}" + (" (NOT the calibrated mechanism)" if lw.contradicts else ""))
        lines.append(f"  empirical lower bound on epsilon at delta={self.delta:g}: {_fmt(self.epsilon_lower)} "
                     f"(claimed {self.epsilon:g}) at confidence {self.confidence:.4g}")
        if self.refutes_claim:
            verdict = "CONTRADICTION: the runs refute the claim"
        elif self.refutes_calibration:
            verdict = "CONTRADICTION: the released law is not the calibrated mechanism's"
        else:
            verdict = "no contradiction: consistent with the claim"
        lines.append(f"  verdict      {verdict}")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {"mechanism": self.mechanism, "picked": self.picked, "epsilon": self.epsilon, "delta": self.delta,
                "bound": self.bound, "runs": self.runs, "confidence": self.confidence,
                "sigma_scale": self.sigma_scale, "margin_shift": self.margin_shift, "sigma": self.sigma,
                "threshold_margin": self.threshold_margin, "epsilon_lower": self.epsilon_lower,
                "refutes_claim": self.refutes_claim, "refutes_calibration": self.refutes_calibration,
                "contradicts": self.contradicts,
                "scenarios": {k: dataclasses.asdict(b) for k, b in self.bounds.items()},
                "law": None if self.law is None else {**dataclasses.asdict(self.law),
                                                      "contradicts": self.law.contradicts}}


def _fmt(x: float) -> str:
    return f"{x:.4g}" if math.isfinite(x) else ("+inf" if x > 0 else "-inf")


def _statistic(sc: Scenario, noisy: np.ndarray) -> np.ndarray:
    if sc.statistic != "projection":  # an extra last column (a size estimate ñ) is read by projections only
        noisy = noisy[:, : sc.counts0.size]
    released = ~np.isnan(noisy)
    if sc.statistic == "sum":
        return np.where(released, noisy, 0.0).sum(axis=1)
    if sc.statistic == "above":
        return (released & (np.nan_to_num(noisy, nan=-np.inf) >= sc.counts1[None, :])).sum(axis=1)
    if sc.statistic == "any":
        return released[:, sc.new].any(axis=1).astype(np.float64)
    if sc.statistic == "diff":
        v = np.where(released, noisy, 0.0)
        return v[:, 0] - v[:, 1]
    if sc.statistic == "projection":
        return sc.projection(noisy)
    if sc.statistic == "mixed":
        new = sc.new
        total = np.where(released[:, ~new], noisy[:, ~new], 0.0).sum(axis=1)
        return np.where(released[:, new].any(axis=1), MIXED_SENTINEL, total)
    raise InvalidParameterError(f"unknown statistic {sc.statistic!r}")  # pragma: no cover


def _events(t1: np.ndarray, t0: np.ndarray, sc: Scenario):
    """Threshold events ``{stat >= c}`` and ``{stat < c}`` of the statistic, each in both directions
    (P[M(D') ∈ S] against P[M(D) ∈ S] and the reverse): columns for the "numerator" side (e1), the
    "denominator" side (e0), and names."""
    half = t1.size // 2
    if sc.statistic == "any":  # D never releases a new key: only "some key released", D' against D
        return t1[:, None] >= 1.0, t0[:, None] >= 1.0, ["some new key released [D' vs D]"]
    pooled = np.concatenate([t1[:half], t0[:half]])  # thresholds from the selection half only
    values = np.unique(pooled)
    if values.size <= 64:
        cuts = values
    else:
        cuts = np.unique(np.concatenate([np.quantile(pooled, _LEVELS), np.quantile(pooled, 1 - _LEVELS)]))
    if sc.statistic == "mixed":
        cuts = np.unique(np.append(cuts, MIXED_SENTINEL))  # always offer "a new key is released"
    up1 = t1[:, None] >= cuts[None, :]
    up0 = t0[:, None] >= cuts[None, :]
    cols1, cols0, names = [], [], []
    for a1, a0, rel in ((up1, up0, ">="), (~up1, ~up0, "<")):
        cols1 += [a1, a0]
        cols0 += [a0, a1]
        label = [("new key released" if (c == MIXED_SENTINEL and rel == ">=") else f"{sc.statistic} {rel} {c:g}")
                 for c in cuts]
        names += [f"{x} [D' vs D]" for x in label]
        names += [f"{x} [D vs D']" for x in label]
    return np.concatenate(cols1, axis=1), np.concatenate(cols0, axis=1), names


def law_inputs(target: Target, calibration=None) -> tuple[int, float, np.ndarray]:
    """``(m, c, P[N = n])`` of the conformance check: ``m`` keys at count ``c`` (one noise std below the
    threshold) and the exact law of the number released under ``calibration`` (default the reference). Each
    target's own kernel: thresholded ones as they are; Misra–Gries through the CSH that releases its sketch
    (``m`` = the sketch size: a sketch of at most that many keys is exact); the Weighted Gaussian in grid units
    (:func:`.set_union.weighted_law_view`); the Policy Gaussian at weight ``ρ − σ`` (:func:`.set_union.policy_law`)."""
    if target.picked == POLICY:
        return policy_law(target, calibration)
    if target.picked in ROUNDS:
        return rounds_law(target, calibration)
    if target.picked == WEIGHTED:
        view = weighted_law_view(target)
        alt = None if calibration is None else weighted_law_view(target, calibration)
        m = target.bound
    elif target.picked == "misra-gries":
        view = dataclasses.replace(target, reference=target.reference.csh)
        alt = None if calibration is None else dataclasses.replace(target, reference=calibration.csh)
        m = int(target.mechanism.sketch_size)
    else:
        view = target
        alt = None if calibration is None else dataclasses.replace(target, reference=calibration)
        m = target.bound
    c = law_count(view)
    return m, c, release_count_law(view if alt is None else alt, m, c)


def law_check(target: Target, law_runs: int, level: float, rng) -> LawCheck:
    """The conformance check of :mod:`.laws` with ``law_runs`` releases (refute at p < ``level``)."""
    m, c, expected = law_inputs(target)
    counts = np.full(m, c, np.float64 if target.picked == POLICY else np.int64)
    out = release_many(target, counts, law_runs, rng)[:, :m]
    n_rel = (~np.isnan(out)).sum(axis=1)
    observed = np.bincount(n_rel, minlength=m + 1)[: m + 1]
    p = pooled_chisquare(observed, expected)
    return LawCheck(m=m, count=c, runs=int(law_runs), observed=tuple(int(x) for x in observed),
                    expected=tuple(float(x) for x in expected), p_value=p, level=level)


def _checked(test: ScaleTest, runs: int, level: float, what: str) -> VarianceCheck:
    return VarianceCheck(runs=int(runs), ratio=test.ratio, p_value=test.p_value, level=level, what=what,
                         statistic=test.statistic, values=test.values, off_lattice=test.off_lattice)


def _public_law(ref) -> NoiseLaw:
    """The per-coordinate noise law of a public-key calibration (the coordinates where it is i.i.d.: the counts,
    or the embedding's ``d + 1`` coordinates): ``N_Z(0, scale)``, the discrete Laplace of scale ``scale`` (base
    e^{−1/scale}), or the float Gaussian of an ``insecure_float`` release."""
    if ref.family == "laplace":
        return two_sided_geometric(math.exp(-1.0 / float(ref.scale)))
    return discrete_gaussian(ref.scale) if ref.secure else normal(float(ref.scale) ** 2)


def variance_check(target: Target, sc: Scenario, law_runs: int, level: float, rng) -> VarianceCheck:
    """The scale test (:mod:`.scale_test`) of a public-key target (or of two-stage's stage 2) on the D side of its
    scenario ``sc``: the noise ``y − E y`` in the coordinates where it is i.i.d. (the released counts; an
    embedding's ``(q·f̃ − p·ñ, c·ñ)``) against the reference calibration's law (two-stage: stage 2's at the
    scenario's key count, the one ``run`` computes once stage 1 has selected them all)."""
    if target.picked == TWO_STAGE:
        ref = stage_two(target.reference, sc.counts0.size)
        embedded = sc.embed is not None
    else:
        ref, embedded = target.reference, target.embedding
    out = release_many(target, sc.counts0, law_runs, rng, units=sc.units0)
    d = sc.counts0.size
    if embedded:
        p, q, c = sc.embed
        n_t = out[:, -1:]
        y = np.concatenate([q * out[:, :d] - p * n_t, c * n_t], axis=1)
        ey = np.append(q * sc.counts0.astype(np.float64) - p * sc.units0, c * sc.units0)
        noise, what = y - ey[None, :], f"the {d + 1} embedding coordinates"
    else:
        noise, what = out[:, :d] - sc.counts0[None, :], f"the {d} released counts"
    test = scale_test([(_public_law(ref), noise.reshape(-1))])
    return _checked(test, law_runs, level, f"the noise of {what}")


def vector_check(target: Target, law_runs: int, level: float, rng) -> VarianceCheck:
    """The scale test of the vector sum: one unit at the box's upper corner, the others at 0; the noise of each
    coordinate in grid units, ``y_i/γ_i − K_i`` (``K_i`` the corner's grid integer: an integer under the reference's
    grid), against the reference's ``N_Z(0, s²)``."""
    ref = target.reference
    sums = np.ones(target.mechanism.d)
    out = release_many(target, sums, law_runs, rng)
    noise = out / np.asarray(ref.spacing, np.float64)[None, :] - np.asarray(ref.unit_high, np.float64)[None, :]
    test = scale_test([(discrete_gaussian(ref.noise_param), noise.reshape(-1))])
    return _checked(test, law_runs, level, "the noise of each coordinate in grid units")


def mean_check(target: Target, law_runs: int, level: float, rng) -> VarianceCheck:
    """The scale test of PLAN's final noise (:mod:`.vector_mean`): each release's noise read back in grid units
    against ``N_Z(0, Δ_g²/(2ρ_noise))`` at the reference's ρ_noise and the release's grid K."""
    d = target.mechanism.d
    out = release_means(target, [0], law_runs, rng)
    groups = [(discrete_gaussian(noise_law_param(int(k), d, target.reference.rho_noise)),
               out[out[:, -1] == k, d:2 * d].reshape(-1)) for k in np.unique(out[:, -1])]
    return _checked(scale_test(groups), law_runs, level, "PLAN's final noise per coordinate in grid units")


def _blanket_high(target: Target) -> int:
    """A count far above the blanket histogram's threshold τ (25 noise stds; τ and α do not depend on the number
    of units, only the target length does): released with probability 1 − ~1e-60 (the "shared" pair's count)."""
    p = target.mechanism.params(2, target.request.epsilon)
    return int(p.tau) + math.ceil(25 * float(p.noise_std)) + 2


def blanket_check(target: Target, law_runs: int, level: float, rng) -> VarianceCheck:
    """Conformance of the blanket histogram: two keys at count ``c`` far above its threshold τ; a released value
    minus ``c`` is the two-sided geometric noise of base α (the claim's ε, at this number of units) conditioned on
    ``Z >= τ − c`` (the key is released), whose exact law the scale test (:mod:`.scale_test`) compares with (a
    mechanism run at a larger ε, e.g. the ``sigma_scale`` mutant, has a smaller noise). Unreleased keys (probability
    ~1e-60) are left out."""
    counts = np.full(2, _blanket_high(target), np.int64)
    params = target.mechanism.params(int(counts.sum()), target.request.epsilon)
    out = release_many(target, counts, law_runs, rng)
    z = (out - counts[None, :]).reshape(-1)
    law = two_sided_geometric(params.alpha, lower=int(params.tau) - int(counts[0]))
    return _checked(scale_test([(law, z[~np.isnan(z)])]), law_runs, level,
                    "the released noise of 2 keys far above the threshold")


def law_runs_needed(target: Target, alternative: Target, *, confidence: float = 0.95, power: float = 0.9,
                    checks: int = 5) -> int:
    """Releases the conformance check needs to refute ``alternative`` (e.g. the margin shifted by −3) with
    probability ``power`` at level (1 − confidence)/checks: the non-central chi-square power of Pearson's test,
    non-centrality ``n·Σ (p₁ − p₀)²/p₀`` over the cells of the exact laws (cells of expected count < 5 at n
    pooled as the test pools them, approximately: cells with p₀ < 1e-6 are merged into their neighbour)."""
    _, _, p0 = law_inputs(target)
    _, _, p1 = law_inputs(target, alternative.calibration)
    keep0, keep1, a0, a1 = [], [], 0.0, 0.0
    for x0, x1 in zip(p0, p1):
        a0, a1 = a0 + x0, a1 + x1
        if a0 >= 1e-6:
            keep0.append(a0), keep1.append(a1)
            a0 = a1 = 0.0
    if keep0:
        keep0[-1] += a0
        keep1[-1] += a1
    q0, q1 = np.array(keep0), np.array(keep1)
    per = float(np.sum((q1 - q0) ** 2 / q0))
    if per <= 0:
        return 10**12
    df = max(1, q0.size - 1)
    crit = st.chi2.ppf(1 - (1 - confidence) / checks, df)
    lo, hi = 1, 2
    while st.ncx2.sf(crit, df, hi * per) < power:
        lo, hi = hi, 2 * hi
        if hi > 10**12:
            return hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if st.ncx2.sf(crit, df, mid * per) >= power:
            hi = mid
        else:
            lo = mid
    return hi


def has_conformance(target: Target) -> bool:
    """Whether ``target`` has a conformance check (:func:`conformance`)."""
    return (target.thresholded or target.public
            or target.picked in (WEIGHTED, POLICY, TWO_STAGE, BLANKET, VECTOR_SUM, VECTOR_MEAN, ALP_TARGET)
            + ROUNDS
            or (target.picked == "misra-gries" and getattr(target.reference, "csh", None) is not None))


def conformance(target: Target, law_runs: int, level: float, rng) -> LawCheck | VarianceCheck | ALPLawCheck:
    """The conformance check of ``target``: the variance of the likelihood-ratio projection (public-key targets,
    two-stage's stage 2), of the released noise (the blanket histogram), or the exact law of the number released
    (every thresholded kernel: :func:`law_check`)."""
    if target.public:
        return variance_check(target, public_scenarios(target.picked, target.calibration)[0], law_runs, level, rng)
    if target.picked == TWO_STAGE:
        shift = [s for s in two_stage_scenarios(target) if s.name == "shift"][0]
        return variance_check(target, shift, law_runs, level, rng)
    if target.picked == VECTOR_SUM:
        return vector_check(target, law_runs, level, rng)
    if target.picked == BLANKET:
        return blanket_check(target, law_runs, level, rng)
    if target.picked == ALP_TARGET:
        return alp_check(target, law_runs, level, rng)
    if target.picked == VECTOR_MEAN:
        return mean_check(target, law_runs, level, rng)
    return law_check(target, law_runs, level, rng)


def scenarios_of(target: Target) -> list[Scenario]:
    """The privacy scenarios of ``target``: the public-key shift, the set-union and two-stage pairs, or the
    worst-case count pairs of :func:`.scenarios.scenarios_for` (replace-one pairs for a replace-one mechanism)."""
    if target.public:
        return public_scenarios(target.picked, target.calibration)
    if target.picked == WEIGHTED:
        return weighted_scenarios(target.calibration, target.bound)
    if target.picked == POLICY:
        return policy_scenarios(target.calibration, target.bound)
    if target.picked in ROUNDS:
        return rounds_scenarios(target)
    if target.picked == TWO_STAGE:
        return two_stage_scenarios(target)
    if target.picked == VECTOR_SUM:
        return vector_scenarios(target)
    if target.picked == ALP_TARGET:
        return alp_scenarios(target)
    if target.picked == VECTOR_MEAN:
        return mean_scenarios(target)
    replace_one = getattr(target.mechanism, "neighbours", None) is Neighbours.REPLACE_ONE
    high = (_STONE_HIGH if target.picked in STONES else _PURE_SPARSE_HIGH if target.picked == "pure-sparse" else
            _blanket_high(target) if target.picked == BLANKET else None)
    return scenarios_for(target.picked, target.calibration, target.bound, target.pre, replace_one=replace_one,
                         high=high)


def audit(mechanism: str, *, epsilon, delta, bound: int | None = None, runs: int | None = None,
          law_runs: int | None = None, sigma_scale: float = 1.0, margin_shift: int = 0,
          confidence: float = 0.95, scenarios: Sequence[str] | None = None, rng=None, **options) -> AuditResult:
    """Audit ``mechanism`` (calibrated by its registered ``Mechanism.calibrate`` at (ε, δ)) on its worst-case
    neighbours through its real release path; see the module docstring.

    Args:
        mechanism: an audit name of :data:`AUDITABLE` (every registered mechanism, "csh", "topk-csh-shifted").
        epsilon, delta: the claim to test.
        bound: l0 (gshm, laplace, misra-gries; 1 for the pure mechanisms) or k (csh, topk-csh). Small values give
            the most power. Default :func:`.targets.default_bound`: 1 for the pure mechanisms, else 2.
        runs: releases on each neighbour in each scenario (half select the event, half bound it); default
            :func:`default_runs`.
        law_runs: releases for the conformance check (thresholded mechanisms; 0 skips it); default
            :func:`default_runs`.
        sigma_scale: multiply the sampled noise scale (0.5 = the broken mechanism of the acceptance test).
        margin_shift: add this integer to the margin (−3 = the threshold error of the acceptance test).
        confidence: simultaneous confidence of the reported refutations.
        scenarios: names of the privacy scenarios to run (default all; ``()`` runs the law check only).
        rng: a :mod:`sparsedp.noise` source (``None``: the secure default; tests pass a seeded one).
        options: mechanism options (``sketch_size`` for misra-gries, ``domain_size`` for basic).
    """
    target = build_target(mechanism, epsilon=epsilon, delta=delta, bound=bound, sigma_scale=sigma_scale,
                          margin_shift=margin_shift, **options)
    conf = v.real("confidence", confidence, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
    d_runs, d_law = default_runs(target, conf)
    n_runs = d_runs if runs is None else v.integer("runs", runs, lo=100, hi=100_000_000)
    n_law = v.integer("law_runs", d_law if law_runs is None else law_runs, lo=0, hi=100_000_000)
    if not has_conformance(target):
        n_law = 0
    if rng is None:
        rng = default_source()
    scs = scenarios_of(target)
    if scenarios is not None:
        wanted = set(scenarios)
        unknown = wanted - {s.name for s in scs}
        if unknown:
            raise InvalidParameterError(f"unknown scenario(s) {sorted(unknown)}; this mechanism has "
                                        f"{[s.name for s in scs]}")
        scs = [s for s in scs if s.name in wanted]
    n_checks = len(scs) + (n_law > 0)
    if n_checks == 0:
        raise InvalidParameterError("nothing to run: no scenario and law_runs=0")
    conf_each = 1.0 - (1.0 - conf) / n_checks
    dlt = float(target.request.delta)
    bounds: dict[str, EpsilonBound] = {}
    for sc in scs:
        t1 = _statistic(sc, release_many(target, sc.counts1, n_runs, rng, units=sc.units1))
        t0 = _statistic(sc, release_many(target, sc.counts0, n_runs, rng, units=sc.units0))
        e1, e0, names = _events(t1, t0, sc)
        bounds[sc.name] = best_event_bound(e1, e0, names, dlt, confidence=conf_each)
    law = None if n_law == 0 else conformance(target, n_law, 1.0 - conf_each, rng)
    cal = target.calibration
    return AuditResult(mechanism=target.name, picked=target.picked, epsilon=float(target.request.epsilon),
                       delta=dlt, bound=target.bound, runs=n_runs, confidence=conf,
                       sigma_scale=target.sigma_scale, margin_shift=target.margin_shift,
                       sigma=noise_figures(cal)[0], threshold_margin=noise_figures(cal)[1], bounds=bounds, law=law)


def noise_figures(cal) -> tuple[float, float]:
    """``(noise scale, threshold margin)`` of a calibration for the audit's report: its own ``sigma``/``tau``, or
    those of the calibration it wraps (Misra–Gries: the CSH that releases the sketch); NaN where the mechanism has
    none (the pure mechanisms' calibration is their ε; a public-key one has no threshold: margin 0)."""
    inner = getattr(cal, "csh", None) or getattr(cal, "select_cal", None)  # Misra–Gries' CSH, two-stage's stage 1
    src = cal if getattr(cal, "sigma", None) is not None else inner
    if src is None:
        eps_e = getattr(cal, "epsilon_e", None)  # Misra–Gries released without CSH: Laplace-type noise 1/ε'
        return (1.0 / float(eps_e), float("nan")) if eps_e else (float("nan"), float("nan"))
    sigma = float(src.sigma) if src.sigma is not None else float("nan")
    tau = getattr(src, "tau", None)
    return sigma, float(tau) if tau is not None else 0.0
