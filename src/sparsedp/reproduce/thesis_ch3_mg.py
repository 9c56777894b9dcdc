"""Lebeda's thesis, Chapter 3 (private Misra–Gries): the release thresholds and error slack it prints.

After Lebeda (2023) §4 (N3, N10, N11, N14, N7 and the derived example
numbers below the table). Chapter 3 has no figure; this target plots the thresholds of the variants against
ε at δ = 1e−6 and prints the spec's spot values next to sparsedp's:

* PMG (Alg. 13, continuous Laplace, thesis constant): τ = 1 + 2 ln(3/δ)/ε
  (:func:`~sparsedp.sketches.private_mg.pmg_threshold` ``noise="laplace"``);
* PMG with the discrete Laplace sparsedp samples (§3.5.2): τ_geo = 1 + 2⌈ln(6e^ε/((e^ε+1)δ))/ε⌉
  (``noise="discrete"``);
* standard MG, zero counters deleted (§3.5.1, k = 100): 1 + 2 ln((k+1)/(2δ))/ε — the thesis' formula, shown
  for comparison only (sparsedp keeps the zero counters and uses PMG);
* the §3.6 (ε, δ) threshold of the pure-DP variant: 4 + 2 ln(1/δ)/ε (thesis formula, for comparison);
* merged sketches (Cor. 3.2, k = 100): :func:`~sparsedp.sketches.private_mg.merged_threshold`;
* Theorem 3.1's slack at k = 100, β = 0.05, n = 0 (:func:`~sparsedp.sketches.private_mg.theorem_3_1_slack`).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from ..sketches.private_mg import merged_threshold, pmg_threshold, theorem_3_1_slack
from ._registry import Headline, Kind, Paper, ReproResult, new_figure, save_figure, steps, target, write_csv

K = 100
# after Lebeda (2023) §4, "Derived example numbers": (ε, δ) -> (τ_PMG, τ_geo)
SPOTS = {(1.0, 1e-6): (30.8282, 33.0), (0.1, 1e-6): (299.2825, 301.0), (1.0, 1e-9): (44.6438, 47.0),
         (0.5, 1e-5): (51.4462, 53.0)}


def _standard_mg(eps: float, delta: float, k: int) -> float:
    return 1.0 + 2.0 * math.log((k + 1) / (2.0 * delta)) / eps  # thesis §3.5.1, L1549


def _pure_variant(eps: float, delta: float) -> float:
    return 4.0 + 2.0 * math.log(1.0 / delta) / eps  # thesis §3.6, L1573


@target("thesis-mg", "Thesis ch. 3: private Misra-Gries thresholds vs epsilon (tau_PMG 30.83 at eps=1, delta=1e-6)")
def thresholds(out_dir: Path, fast: bool) -> ReproResult:
    delta = 1e-6
    grid = np.union1d(np.geomspace(0.1, 4.0, 12 if fast else 80), [0.1, 0.5, 1.0])
    rows = []
    for eps in steps(grid, "epsilon grid"):
        e = float(eps)
        rows.append(("curve", e, delta, pmg_threshold(e, delta, noise="laplace"), pmg_threshold(e, delta),
                     _standard_mg(e, delta, K), _pure_variant(e, delta), merged_threshold(e, delta, K)))
    for (e, d) in SPOTS:
        rows.append(("spot", e, d, pmg_threshold(e, d, noise="laplace"), pmg_threshold(e, d),
                     _standard_mg(e, d, K), _pure_variant(e, d), merged_threshold(e, d, K)))
    csv_path = write_csv(out_dir / "thesis-mg.csv", ("kind", "epsilon", "delta", "pmg_laplace", "pmg_discrete",
                                                    "standard_mg_k100", "pure_variant", "merged_k100"), rows)
    heads = []
    for (e, d), (t_lap, t_geo) in SPOTS.items():
        r = next(r for r in rows if r[0] == "spot" and r[1] == e and r[2] == d)
        heads += [Headline.of(f"tau_PMG eps={e:g} delta={d:g}", r[3],
                              Paper.abs(t_lap, "thesis Theorem 3.1 threshold", 1e-3, kind=Kind.FORMULA)),
                  Headline.of(f"tau_geo eps={e:g} delta={d:g}", r[4],
                              Paper.abs(t_geo, "thesis §3.5.2 (geometric noise)", 1e-3, kind=Kind.FORMULA))]
    r1 = next(r for r in rows if r[0] == "spot" and r[1] == 1.0 and r[2] == 1e-6)
    heads += [Headline.of("standard MG k=100 eps=1 delta=1e-6", r1[5],
                          Paper.abs(36.4750, "thesis §3.5.1 threshold", 1e-3, kind=Kind.FORMULA)),
              Headline.of("sec 3.6 threshold eps=1 delta=1e-6", r1[6],
                          Paper.abs(31.6310, "thesis §3.6 threshold", 1e-3, kind=Kind.FORMULA))]
    lower, upper = theorem_3_1_slack(K, 0, 1.0, 1e-6, 0.05, noise="laplace")
    heads += [Headline.of("Thm 3.1 upper slack k=100 beta=0.05", upper,
                          Paper.abs(15.2216, "thesis Theorem 3.1 interval", 1e-3, kind=Kind.FORMULA)),
              Headline.of("Thm 3.1 lower slack (n=0)", lower,
                          Paper.abs(46.0498, "thesis Theorem 3.1 interval", 1e-3, kind=Kind.FORMULA))]
    fig, axes = new_figure(1, 1, (6.5, 4.2))
    ax = axes[0][0]
    arr = [r for r in rows if r[0] == "curve"]
    x = [r[1] for r in arr]
    for j, label in ((3, "PMG (Alg. 13, Laplace)"), (4, "PMG, discrete Laplace (sparsedp)"),
                     (5, "standard MG, k = 100"), (6, "§3.6 (ε, δ) variant"), (7, "merged sketches, k = 100")):
        ax.plot(x, [r[j] for r in arr], label=label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("ε")
    ax.set_ylabel("release threshold")
    ax.set_title("δ = 1e-6")
    ax.legend(fontsize=8)
    png = save_figure(fig, out_dir / "thesis-mg.png")
    return ReproResult("thesis-mg", csv_path, png, tuple(heads), (csv_path, png))
