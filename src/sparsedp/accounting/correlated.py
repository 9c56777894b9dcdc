"""Calibration of the correlated Gaussian mechanism for d known counting queries (Lebeda).

Source: C. J. Lebeda, "Better Gaussian Mechanism using Correlated Noise" (arXiv 2408.06853), specified in
Lebeda (2024) (cited "spec S…").

Everything in that paper is "a Gaussian mechanism with unit sensitivity" (spec S3.8, the paper's §2 Remark):
let σ₁ be the smallest σ for which adding N(0, σ²) to a sensitivity-1 scalar is (ε, δ)-DP (Balle–Wang,
:func:`gaussian_sigma`). Then, for d sums of data points in [0,1]^d under add/remove neighbours:

* Algorithm 1 / Theorem 3.1 (spec S2.1, S3.5): one shared η ~ N(0, σ₁²(√d+1)/4), independent
  z_i ~ N(0, σ₁²(d+√d)/4), release f + η·1 + z and ñ = n + 2η. Per-query error std σ₁(√d+1)/2, against
  σ₁√d for the standard Gaussian mechanism (ℓ2 sensitivity √d).
* Embedding form (Lemma 3.3/3.4/3.5, spec S2.3, recommended for production): add i.i.d.
  N(0, (d + C²)σ₁²) to g = (2f − n·1, C·n) ∈ ℝ^{d+1}; C = d^{1/4} reproduces Algorithm 1. With
  A = (d/C² + 1)σ₁² and B = (d + C²)σ₁²: per-query variance (A+B)/4, Var ñ = A.
* Algorithm 2 (grouped queries, spec S4.1): add/remove = Algorithm 1 per row; replacement uses C = √d,
  shared variance σ₁² (the spec's correction of the printed 4σ₁²; the printed value is also private but
  looser), independent variance dσ₁², per-query variance (d+1)σ₁², row-count variance 4σ₁²; the
  standard baseline is 2dσ₁² (Lemma 4.1).
* Bounded density ‖x_i‖₀ <= k (spec S4.2): the standard mechanism needs kσ₁², Algorithm 1 (√d+1)²σ₁²/4, and
  the optimal symmetric ellipse "independent α + shared (β−α)/d" reaches OPT(d, k) (spec S4.2 [DERIVED]
  closed form, the general case solved as a two-variable convex program).

These mechanisms are dense (they release every one of the d queries); they have no threshold.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .. import _validate as v
from .gaussian import gaussian_sigma

__all__ = [
    "CorrelatedGaussianNoise", "correlated_gaussian_sigma1", "correlated_gaussian_calibrate",
    "correlated_gaussian_error_ratio", "grouped_correlated_gaussian_calibrate", "bounded_density_noise",
]


@dataclass(frozen=True)
class CorrelatedGaussianNoise:
    """Noise of one correlated-Gaussian release (all standard deviations; σ₁ is the unit-sensitivity σ).

    Attributes:
        sigma1: std that makes one sensitivity-1 scalar (ε, δ)-DP.
        shared_std: std of the shared term η added to every query of the row/release.
        independent_std: std of each independent term z_i.
        per_query_std: std of each query's total error, √(shared² + independent²).
        standard_std: per-query std of the standard Gaussian mechanism on the same queries.
        count_std: std of the released size estimate (ñ = n + 2η, or the row count ỹ_j); nan if none.
        embedding_c: the weight C of the size coordinate in the embedding form (nan if not applicable).
        embedding_std: std of the i.i.d. noise on each embedded coordinate, √(d + C²)·σ₁ (or nan).
    """

    sigma1: float
    shared_std: float
    independent_std: float
    per_query_std: float
    standard_std: float
    count_std: float = float("nan")
    embedding_c: float = float("nan")
    embedding_std: float = float("nan")

    @property
    def error_ratio(self) -> float:
        """per_query_std / standard_std (< 1 means the correlated mechanism is more accurate)."""
        return self.per_query_std / self.standard_std


def correlated_gaussian_sigma1(epsilon: float, delta: float) -> float:
    """σ₁: the analytic-Gaussian σ for unit sensitivity at (ε, δ) (spec S3.8; Balle–Wang 2018, Thm 8)."""
    return gaussian_sigma(v.epsilon(epsilon), v.delta(delta), 1.0)


def correlated_gaussian_error_ratio(d: int) -> float:
    """Per-query error std of Algorithm 1 over the standard mechanism's: (√d + 1)/(2√d) (spec S5, N1/N9)."""
    d = v.integer("d", d, lo=1)
    return (math.sqrt(d) + 1.0) / (2.0 * math.sqrt(d))


def correlated_gaussian_calibrate(epsilon: float, delta: float, d: int, *,
                                  c: float | None = None) -> CorrelatedGaussianNoise:
    """Noise of Algorithm 1 in its embedding form with weight C (default d^{1/4}) for d queries at (ε, δ).

    Lemma 3.5 of Lebeda (2024) (spec S2.2/S3.6): with A = (d/C² + 1)σ₁², B = (d + C²)σ₁², the shared η has
    variance A/4, each z_i B/4, each query (A+B)/4, ñ has variance A, and the embedded coordinates get
    i.i.d. N(0, B). At C = d^{1/4} this is Theorem 3.1: η ~ N(0, σ₁²(√d+1)/4), z_i ~ N(0, σ₁²(d+√d)/4).
    Privacy is exactly that of a unit-sensitivity Gaussian with std σ₁ for every C > 0.
    """
    s1 = correlated_gaussian_sigma1(epsilon, delta)
    d = v.integer("d", d, lo=1)
    c = d ** 0.25 if c is None else v.positive("c", c)
    a = (d / (c * c) + 1.0) * s1 * s1
    b = (d + c * c) * s1 * s1
    return CorrelatedGaussianNoise(
        sigma1=s1, shared_std=math.sqrt(a / 4.0), independent_std=math.sqrt(b / 4.0),
        per_query_std=math.sqrt((a + b) / 4.0), standard_std=math.sqrt(d) * s1, count_std=math.sqrt(a),
        embedding_c=c, embedding_std=math.sqrt(b))


def grouped_correlated_gaussian_calibrate(epsilon: float, delta: float, d: int, *, neighbours: str = "add-remove",
                                          paper_literal: bool = False) -> CorrelatedGaussianNoise:
    """Noise of Algorithm 2 (m disjoint groups of d queries, each unit in at most one group), Lebeda (2024) §4.

    ``neighbours="add-remove"``: Algorithm 1 independently per row (Lemma 4.2), standard baseline dσ₁²
    (Lemma 4.1). ``neighbours="replacement"``: embedding with C = √d and noise N(0, 4dσ₁²) per embedded
    entry (Lemma 4.2's proof), so η_j has variance σ₁² — the spec's correction (S4.1 ERRATUM) of the
    printed 4σ₁², which ``paper_literal=True`` reproduces (private but looser: per-query (d+4)σ₁²);
    z_j ~ N(0, dσ₁²), row count ỹ_j = count + 2η_j; standard baseline 2dσ₁² (Lemma 4.1).
    """
    s1 = correlated_gaussian_sigma1(epsilon, delta)
    d = v.integer("d", d, lo=1)
    neighbours = v.choice("neighbours", neighbours, ("add-remove", "replacement"))
    if neighbours == "add-remove":
        return correlated_gaussian_calibrate(epsilon, delta, d)
    shared_var = (4.0 if paper_literal else 1.0) * s1 * s1
    ind_var = d * s1 * s1
    return CorrelatedGaussianNoise(
        sigma1=s1, shared_std=math.sqrt(shared_var), independent_std=math.sqrt(ind_var),
        per_query_std=math.sqrt(shared_var + ind_var), standard_std=math.sqrt(2.0 * d) * s1,
        count_std=2.0 * math.sqrt(shared_var), embedding_c=math.sqrt(d),
        embedding_std=2.0 * math.sqrt(d) * s1)


def _opt_ellipse(d: int, k: int) -> tuple[float, float]:
    """(α, β) of the optimal symmetric ellipse Σ = α(I − P) + βP, P = 11ᵀ/d, in units of σ₁² (spec S4.2).

    Constraint (μ-GDP): h(s) = s(d−s)/d·u + s²/d·w <= 1 for s = 1..k with u = 1/α, w = 1/β; minimise
    ((d−1)α + β)/d, a convex program in (u, w). Its optimum is either tangent to one constraint line or a
    vertex of two adjacent ones; all candidates are enumerated and the best feasible one returned.
    """
    if d == 1:
        return 1.0, 1.0
    s = np.arange(1, k + 1, dtype=float)
    p, q = s * (d - s) / d, s * s / d

    def feasible(u: float, w: float) -> bool:
        # h is quadratic in s: s·u + s²(w − u)/d; check the vertices' neighbourhood of its stationary point.
        cand = {1.0, float(k)}
        if u > w:
            s0 = u * d / (2.0 * (u - w))
            cand |= {float(min(max(math.floor(s0), 1), k)), float(min(max(math.ceil(s0), 1), k))}
        return max(c * (d - c) / d * u + c * c / d * w for c in cand) <= 1.0 + 1e-12

    best = (math.inf, 1.0, 1.0)
    ss = np.sqrt((d - 1) * p) + np.sqrt(q)  # tangent solutions, one per s
    us, ws = np.sqrt((d - 1) / np.where(p > 0, p, np.inf)) / ss, 1.0 / (np.sqrt(q) * ss)
    for i in range(k):
        u, w = float(us[i]), float(ws[i])
        if u > 0 and w > 0 and feasible(u, w):
            obj = ((d - 1) / u + 1.0 / w) / d
            if obj < best[0]:
                best = (obj, 1.0 / u, 1.0 / w)
    for i in range(k - 1):  # vertices where s and s+1 are both active
        det = p[i] * q[i + 1] - p[i + 1] * q[i]
        if det == 0:
            continue
        u = (q[i + 1] - q[i]) / det
        w = (p[i] - p[i + 1]) / det
        if u > 0 and w > 0 and feasible(u, w):
            obj = ((d - 1) / u + 1.0 / w) / d
            if obj < best[0]:
                best = (obj, 1.0 / u, 1.0 / w)
    return best[1], best[2]


def bounded_density_noise(epsilon: float, delta: float, d: int, k: int) -> dict[str, CorrelatedGaussianNoise]:
    """The three Gaussian options when each unit has at most k non-zero entries of d (Lebeda (2024) §4.1).

    Returns ``{"standard": …, "correlated": …, "ellipse": …}``: the standard mechanism (ℓ2 sensitivity √k,
    variance kσ₁²), Algorithm 1 (variance (√d+1)²σ₁²/4, independent of k; Lemma 4.4 bounds its gap to the
    optimum by 2√3/4 σ₁²) and the optimal symmetric ellipse (spec S4.2 [DERIVED]: independent variance α,
    shared variance (β − α)/d, per-query variance ((d−1)α + β)/d = OPT(d, k); k <= d/2 is the JY24
    ellipse, Lemma 4.3). All three are (ε, δ)-DP at σ₁; pick the smallest ``per_query_std``.
    """
    s1 = correlated_gaussian_sigma1(epsilon, delta)
    d = v.integer("d", d, lo=1)
    k = v.integer("k", k, lo=1, hi=d)
    std = math.sqrt(k) * s1
    alg1 = correlated_gaussian_calibrate(epsilon, delta, d)
    alpha, beta = _opt_ellipse(d, k)
    shared_var = max(0.0, (beta - alpha) / d)
    return {
        "standard": CorrelatedGaussianNoise(s1, 0.0, std, std, std),
        "correlated": CorrelatedGaussianNoise(s1, alg1.shared_std, alg1.independent_std, alg1.per_query_std,
                                              std, alg1.count_std, alg1.embedding_c, alg1.embedding_std),
        "ellipse": CorrelatedGaussianNoise(s1, math.sqrt(shared_var) * s1, math.sqrt(alpha) * s1,
                                           math.sqrt(((d - 1) * alpha + beta) / d) * s1, std),
    }
