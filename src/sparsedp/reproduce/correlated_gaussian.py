"""Lebeda, "Better Gaussian Mechanism using Correlated Noise": Figures 2 and 3.

After Lebeda (2024) S5 (reconstructed figure data there). No data, no
randomness: everything is in units of σ₁² (the variance of the unit-sensitivity Gaussian, μ = 1), so each
variance from :mod:`sparsedp.accounting.correlated` is divided by σ₁² of the (ε, δ) it was computed at.

* ``correlated-fig2``: d = 10⁴, per-query variance (A + B)/4 of the embedding form against the size
  weight C (Lemma 3.5), A = (d/C² + 1), B = (d + C²); minimum 2550.25 at C = d^{1/4} = 10; at C = 100 it
  is 5000.5, "roughly half" the standard mechanism's 10⁴ (spec S5 N15/N16).
* ``correlated-fig3``: the bounded-count problem, d = 1000, each unit with at most k non-zero entries:
  standard mechanism k, the JY24 optimal ellipse OPT(d, k) (defined for k <= d/2), Algorithm 1
  (√d + 1)²/4 = 266.0614 for every k; Algorithm 1 beats the standard mechanism iff k >= 267 (spec S5 N21,
  S6 check 21).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from ..accounting import bounded_density_noise, correlated_gaussian_calibrate, correlated_gaussian_sigma1
from ._registry import Headline, Kind, Paper, ReproResult, new_figure, save_figure, steps, target, write_csv

EPS, DELTA = 1.0, 1e-5  # any (ε, δ): results are reported in units of σ₁²


def _unit() -> float:
    return correlated_gaussian_sigma1(EPS, DELTA) ** 2


@target("correlated-fig2", "Correlated Gaussian Fig. 2: per-query variance vs size weight C, d=10^4 (min 2550.25 at C=10)")
def figure_2(out_dir: Path, fast: bool) -> ReproResult:
    d, s2 = 10_000, _unit()
    grid = np.geomspace(1.0, 200.0, 60 if fast else 400)
    grid = np.union1d(grid, [1, 2, 5, 8, 10, 12, 20, 50, 100, 150, math.sqrt(3) * 100, 200])
    rows = []
    for c in steps(grid, "size-weight grid"):
        n = correlated_gaussian_calibrate(EPS, DELTA, d, c=float(c))
        a = n.count_std ** 2 / s2
        b = n.embedding_std ** 2 / s2
        rows.append((float(c), a, b, n.per_query_std ** 2 / s2, n.standard_std ** 2 / s2))
    csv_path = write_csv(out_dir / "correlated-fig2.csv", ("C", "A", "B", "per_query_var", "standard_var"), rows)
    arr = np.array(rows)
    i = int(np.argmin(arr[:, 3]))
    at100 = correlated_gaussian_calibrate(EPS, DELTA, d, c=100.0).per_query_std ** 2 / s2
    opt = correlated_gaussian_calibrate(EPS, DELTA, d)
    cite = "Lebeda 2024, §3 text on Fig. 2"
    lemma = "Lebeda 2024, Lemma 3.5 at d = 10^4"
    heads = (Headline.of("argmin C (grid)", arr[i, 0], Paper.abs(10.0, cite, 0.5, why="C = d^1/4 = 10; grid step")),
             Headline.of("min per-query variance (C = d^1/4)", opt.per_query_std ** 2 / s2,
                         Paper.rel(2550.25, lemma, 1e-6, kind=Kind.FORMULA)),
             Headline.of("per-query variance at C = 100", at100, Paper.rel(5000.5, cite, 1e-6)),
             Headline.of("standard mechanism variance", opt.standard_std ** 2 / s2,
                         Paper.rel(10000.0, lemma, 1e-6, kind=Kind.FORMULA)))
    fig, axes = new_figure(1, 1, (6.0, 4.2))
    ax = axes[0][0]
    ax.plot(arr[:, 0], arr[:, 3], label="Algorithm 1, embedding weight C")
    ax.plot(arr[:, 0], arr[:, 4], "--", color="grey", label="standard Gaussian mechanism")
    ax.plot([opt.embedding_c], [opt.per_query_std ** 2 / s2], "o", color="tab:blue")
    ax.set_xscale("log")
    ax.set_xlabel("C")
    ax.set_ylabel("per-query variance (units of σ₁²)")
    ax.set_title("d = 10⁴")
    ax.legend()
    png = save_figure(fig, out_dir / "correlated-fig2.png")
    return ReproResult("correlated-fig2", csv_path, png, heads, (csv_path, png))


@target("correlated-fig3", "Correlated Gaussian Fig. 3: bounded count d=1000, standard vs JY24 vs Algorithm 1")
def figure_3(out_dir: Path, fast: bool) -> ReproResult:
    d, s2 = 1000, _unit()
    ks = (np.unique(np.r_[1, 10, 50, 100, 200, 266, 267, 300, 400, 500, np.arange(25, 1001, 25)]) if fast
          else np.arange(1, d + 1))
    rows = []
    for k in steps(ks, "k grid"):
        k = int(k)
        opts = bounded_density_noise(EPS, DELTA, d, k)
        jy = opts["ellipse"].per_query_std ** 2 / s2 if 2 * k <= d else math.nan
        rows.append((k, opts["standard"].per_query_std ** 2 / s2, jy, opts["correlated"].per_query_std ** 2 / s2))
    csv_path = write_csv(out_dir / "correlated-fig3.csv", ("k", "standard", "jy24", "algorithm1"), rows)
    arr = np.array(rows, dtype=float)
    cross = int(min(k for k, std, _, alg in rows if alg < std))
    cite = "Lebeda 2024, Fig. 3 (closed forms at d = 1000)"
    heads = (Headline.of("Algorithm 1 per-query variance", float(arr[0, 3]),
                         Paper.rel((math.sqrt(d) + 1) ** 2 / 4, cite, 1e-6, kind=Kind.FORMULA)),
             Headline.of("JY24 at k = d/2", float(arr[arr[:, 0] == 500, 2][0]),
                         Paper.rel(265.803481, cite, 1e-6, kind=Kind.FORMULA)),
             Headline.of("smallest k where Algorithm 1 beats standard", cross,
                         Paper.abs(267.0, cite, 0.0, kind=Kind.FORMULA)))
    fig, axes = new_figure(2, 1, (10.0, 4.0))
    for ax, norm in zip(axes[0], (True, False)):
        den = arr[:, 1] if norm else 1.0
        ax.plot(arr[:, 0], arr[:, 1] / den, label="standard (ℓ2 ball)")
        ax.plot(arr[:, 0], arr[:, 2] / den, label="JY24 (k <= d/2)")
        ax.plot(arr[:, 0], arr[:, 3] / den, label="Algorithm 1")
        ax.set_xlabel("k (non-zero entries per unit)")
        ax.set_ylabel("variance / standard" if norm else "per-query variance (σ₁²)")
        ax.set_title("d = 1000")
        if norm:
            ax.set_yscale("log")
        ax.legend()
    png = save_figure(fig, out_dir / "correlated-fig3.png")
    return ReproResult("correlated-fig3", csv_path, png, heads, (csv_path, png))
