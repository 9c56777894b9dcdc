"""Lebeda (2023) thesis, Chapter 5 (PLAN): Table 5.1 and the skew benefit of PLAN.

After Lebeda (2023) §3.9 (Table 5.1, target N40) and §5.0/§5.3(d).

* ``thesis-table5.1``: variance estimation on n = 4000 samples of N(10, σ²), ρ ∈ {0.001, 0.01},
  σ² ∈ {0.001, 1}, 100 runs (10 with ``fast``), for the direct estimates σ̃ = Q_q − μ̃
  (q = 0.75, 0.841, 0.9; error measured on σ: the thesis's direct entries sit at |z_q − 1|, z_.75 = 0.674,
  z_.9 = 1.28, which is the error on σ, not on σ²) and Algorithm 18 with k = 1 and 4 (error on σ², after the
  χ² median-to-mean factor (1 − 2/(9k))³). **This table is not reproduced** (``docs/reproduce.md#table-51``):
  the thesis ran it with the exponential-mechanism quantile of Kaplan, Schnapp & Stemmer (ICML 2022) without
  stating its ε ↔ ρ conversion, budget split or domain, and its "average relative error" is ambiguous. We
  run the binary-search PRIVQUANTILE the thesis analyses (24 steps on [−M, M], M = 100; the direct methods
  split ρ evenly between the median and the q-quantile, Algorithm 18 uses all of ρ) and report the relative
  error of the run-averaged estimate |mean(σ̂)/σ − 1| (the headline; the average of per-run errors cannot go
  below the sampling error, ≈ 0.019 for direct-0.841 at n = 4000, yet the table prints 0.0076), with the
  average per-run error and the Monte-Carlo standard error in the CSV. What agrees: the direct-0.75/0.9
  entries (their bias |z_q − 1|) and the order of magnitude of the ρ = 0.01 rows. What does not: at
  ρ = 0.001 a binary search at ρ/2 over 24 steps has count-noise std √(24/ρ) ≈ 155 per step, so a rare wrong
  branch (about 1 run in 100) dominates a 100-run average (e.g. direct-0.9 at σ² = 0.001); Algorithm 18 at
  k = 4 has only n' = 500 groups against that noise. The check accepts an entry within a factor 2 of the
  table (the thesis's own remark that the table depends on its quantile routine).
* ``thesis-plan-skew``: Gaussian-C-like data (n = 10⁴, d = 256, μ = 10·1, σ_i² = (d/i)^α,
  M = 100·d·max σ, ρ = 1, ρ_center = ρ_clip = ρ_noise = ρ/3 as in the spec's prototype run), PLAN
  with the true variances (regularised) against the unscaled baseline σ̂ ≡ 1; ℓ₂ error against the
  empirical mean. The thesis prints no number for this experiment; its headline (§5.1: PLAN's ℓ₂ error scales
  with ‖σ‖₁ where earlier methods scale with √d‖σ‖₂) predicts the gain √d‖σ‖₂/‖σ‖₁ = 1.00, 1.30, 3.35 for
  α = 0, 1, 2, which is the paper's number we check (±25 %: the prediction ignores constants such as the
  clipping quantile's). The ×1.03, ×1.46, ×3.94 of a prototype run made while preparing this reproduction
  (8–10 runs; not in the thesis) are shown as context only (``docs/reproduce.md#plan-skew``).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from ..mechanisms import mean as pm
from ..noise import InsecureSeededRandom
from ._registry import Headline, Kind, Paper, ReproResult, new_figure, save_figure, steps, target, write_csv

# Table 5.1 as printed (rho, sigma2) -> (direct-0.75, direct-0.841, direct-0.9, general k=1, general k=4)
TABLE_5_1 = {
    (0.001, 0.001): (0.350444, 0.038144, 0.240120, 0.035163, 0.019068),
    (0.001, 1.0): (0.330807, 0.031329, 0.296298, 0.022601, 0.010411),
    (0.01, 0.001): (0.319298, 0.007646, 0.276414, 0.023152, 0.008120),
    (0.01, 1.0): (0.319716, 0.010308, 0.284934, 0.019798, 0.006361),
}
METHODS = ("direct-0.75", "direct-0.841", "direct-0.9", "general-k1", "general-k4")
TABLE_M = 100.0
TABLE_N = 4000
TABLE_SEED = 5_1


def _table_run(rho: float, sigma2: float, rng) -> list[float]:
    """One run of every method on a fresh sample; returns the estimates relative to the truth, in METHODS
    order: σ̃/σ for the direct methods, σ̂²/σ² for Algorithm 18."""
    sigma = math.sqrt(sigma2)
    x = 10.0 + sigma * _std_normal(TABLE_N, rng)
    rel = []
    # T = 24 steps: final interval 200/2^24 ≈ 1.2e−5, far below σ = 0.0316
    med = pm.private_quantile(x, 0.5, rho=rho / 2, lower=-TABLE_M, upper=TABLE_M, steps=24, rng=rng)[0]
    for q in (0.75, 0.841, 0.9):
        qq = pm.private_quantile(x, q, rho=rho / 2, lower=-TABLE_M, upper=TABLE_M, steps=24, rng=rng)[0]
        rel.append((qq - med) / sigma)
    for k in (1, 4):
        est = pm.estimate_variance(x, rho=rho, bound=TABLE_M, pairs=k, min_variance=1e-6, rng=rng)[0]
        rel.append(est / sigma2)
    return rel


def _std_normal(n: int, rng) -> np.ndarray:
    """Standard normal data from the (seeded) source: data generation, not privacy noise."""
    u = rng.uint64(2 * n)
    gen = np.random.Generator(np.random.PCG64(int(u[0]) ^ (int(u[1]) << 64)))
    return gen.standard_normal(n)


@target("thesis-table5.1", "Lebeda thesis Table 5.1: private variance estimation on N(10, σ²), n=4000")
def table_5_1(out_dir: Path, fast: bool) -> ReproResult:
    rng = InsecureSeededRandom(TABLE_SEED)
    runs = 10 if fast else 100
    rows, heads = [], []
    for (rho, sigma2), paper in steps(TABLE_5_1.items(), "table rows"):
        rel = np.array([_table_run(rho, sigma2, rng) for _ in range(runs)])
        avg_err = np.abs(rel.mean(axis=0) - 1.0)          # relative error of the averaged estimate
        mean_err = np.abs(rel - 1.0).mean(axis=0)          # average of the per-run relative errors
        stderr = rel.std(axis=0, ddof=1) / math.sqrt(runs)  # Monte-Carlo standard error of the average
        for j, method in enumerate(METHODS):
            rows.append((rho, sigma2, method, float(avg_err[j]), float(mean_err[j]), float(stderr[j]),
                         paper[j], runs))
            heads.append(Headline.of(f"rho={rho:g} sigma2={sigma2:g} {method}", float(avg_err[j]),
                                     Paper(paper[j], "thesis Table 5.1 (App. 5.C.2)", paper[j] / 2, paper[j] * 2,
                                           why="within a factor 2: the table depends on its quantile routine",
                                           mismatch="table-51")))
    csv_path = write_csv(out_dir / "thesis-table5.1.csv",
                         ("rho", "sigma2", "method", "error_of_average", "average_error", "standard_error",
                          "paper", "runs"), rows)
    fig, axes = new_figure(1, 1, (8.0, 4.0))
    ax = axes[0][0]
    labels = [f"ρ={r:g}\nσ²={s:g}" for r, s in TABLE_5_1]
    xs = np.arange(len(labels))
    for j, method in enumerate(METHODS):
        ours = [row[3] for row in rows if row[2] == method]
        paper = [row[6] for row in rows if row[2] == method]
        ax.scatter(xs + 0.12 * (j - 2), ours, marker="o", label=f"{method} (sparsedp)", color=f"C{j}")
        ax.scatter(xs + 0.12 * (j - 2), paper, marker="x", color=f"C{j}")
    ax.set_yscale("log")
    ax.set_xticks(xs, labels)
    ax.set_ylabel("relative error of the run average (o: sparsedp, x: thesis)")
    ax.legend(fontsize=7)
    png = save_figure(fig, out_dir / "thesis-table5.1.png")
    return ReproResult("thesis-table5.1", csv_path, png, tuple(heads), (csv_path, png))


SKEW_N, SKEW_D, SKEW_RHO = 10_000, 256, 1.0
SKEW_OBSERVED = {0.0: 1.03, 1.0: 1.46, 2.0: 3.94}  # a prototype run, not the thesis's (module docstring)
SKEW_PREDICTED = {0.0: 1.00, 1.0: 1.30, 2.0: 3.35}
SKEW_SEED = 5_7
THIRDS = {"center": 1 / 3, "clip": 1 / 3, "noise": 1 / 3}


def skew_sigma(d: int, alpha: float) -> np.ndarray:
    """Table 5.2 Gaussian B/C standard deviations: σ_i² = (d/(d − i + 1))^α, i = 1..d."""
    return (d / np.arange(d, 0, -1)) ** (alpha / 2.0)


def predicted_gain(sigma: np.ndarray) -> float:
    """√d‖σ‖₂/‖σ‖₁: the ℓ₂ noise ratio unscaled/PLAN for p = 2 (thesis §5.1 headline)."""
    return math.sqrt(sigma.size) * float(np.linalg.norm(sigma)) / float(np.sum(sigma))


def plan_skew_errors(alpha: float, runs: int, rng, *, n: int = SKEW_N, d: int = SKEW_D,
                     rho: float = SKEW_RHO, insecure_float: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """ℓ₂ errors (vs the empirical mean) of PLAN with known variances and of the unscaled baseline."""
    sig = skew_sigma(d, alpha)
    m = 100.0 * d * float(sig.max())
    plan_err, base_err = [], []
    for _ in range(runs):
        x = 10.0 + _std_normal(n * d, rng).reshape(n, d) * sig
        emp = x.mean(axis=0)
        a = pm.plan_mean(x, rho=rho, bound=m, variances=sig ** 2, budget=THIRDS, rng=rng,
                         insecure_float=insecure_float)
        b = pm.plan_mean(x, rho=rho, bound=m, variances="none", budget=THIRDS, rng=rng,
                         insecure_float=insecure_float)
        plan_err.append(float(np.linalg.norm(a.mean - emp)))
        base_err.append(float(np.linalg.norm(b.mean - emp)))
    return np.array(plan_err), np.array(base_err)


@target("thesis-plan-skew", "Lebeda thesis Ch. 5: PLAN vs unscaled noise on skewed Gaussian data (d=256)")
def plan_skew(out_dir: Path, fast: bool) -> ReproResult:
    rng = InsecureSeededRandom(SKEW_SEED)
    runs = 2 if fast else 10
    rows, heads = [], []
    for alpha in steps((0.0, 1.0, 2.0), "skew levels"):
        pe, be = plan_skew_errors(alpha, runs, rng)
        gain = float(be.mean() / pe.mean())
        pred = predicted_gain(skew_sigma(SKEW_D, alpha))
        rows.append((alpha, SKEW_N, SKEW_D, SKEW_RHO, runs, float(pe.mean()), float(be.mean()), gain, pred,
                     SKEW_OBSERVED[alpha], SKEW_PREDICTED[alpha]))
        formula = "thesis §5.1: ℓ₂ error ∝ ‖σ‖₁ vs √d‖σ‖₂"
        heads.append(Headline.of(f"alpha={alpha:g} gain (measured) vs the thesis's prediction", gain,
                                 Paper.rel(SKEW_PREDICTED[alpha], formula, 0.25, kind=Kind.FORMULA,
                                           why="±25 %: the prediction has no constants", mismatch="plan-skew")))
        heads.append(Headline.of(f"alpha={alpha:g} gain (predicted)", pred,
                                 Paper.abs(SKEW_PREDICTED[alpha], formula, 0.005, kind=Kind.FORMULA,
                                           why="√d‖σ‖₂/‖σ‖₁ to 2 decimals")))
        heads.append(Headline.of(f"alpha={alpha:g} gain (measured) vs the prototype run", gain,
                                 Paper.rel(SKEW_OBSERVED[alpha], "prototype run, 8-10 runs (not in the thesis)", 0.25,
                                           kind=Kind.RECOMPUTED)))
    csv_path = write_csv(out_dir / "thesis-plan-skew.csv",
                         ("alpha", "n", "d", "rho", "runs", "plan_l2_error", "unscaled_l2_error", "gain",
                          "predicted_gain", "prototype_observed_gain", "thesis_predicted_gain"), rows)
    fig, axes = new_figure(1, 1, (6.0, 4.0))
    ax = axes[0][0]
    al = [r[0] for r in rows]
    ax.plot(al, [r[5] for r in rows], "o-", label="PLAN (σ̂ = σ)")
    ax.plot(al, [r[6] for r in rows], "s-", label="unscaled (σ̂ ≡ 1)")
    ax.set_xlabel("skew α (σ_i² = (d/i)^α)")
    ax.set_ylabel("ℓ₂ error vs empirical mean")
    ax.set_yscale("log")
    ax.set_title(f"n={SKEW_N}, d={SKEW_D}, ρ={SKEW_RHO:g}")
    ax.legend()
    png = save_figure(fig, out_dir / "thesis-plan-skew.png")
    return ReproResult("thesis-plan-skew", csv_path, png, tuple(heads), (csv_path, png))
