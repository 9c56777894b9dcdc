"""Lebeda (2023) thesis, Chapter 4: Figure 4.1 (After Lebeda (2023) §2.5, target N26).

Δ⃗ = (4, 1), d = 2. (a) Gaussian, p = 2: spherical and noise-proportional-to-sensitivity give
E‖η‖₂² = 17/ρ, the optimal shape (b ∝ √Δ⃗) 12.5/ρ. (b) Laplace, p = 1: standard and proportional give
E‖η‖₁ = 10/ε, the optimal shape 9/ε. We compute the closed forms (at ρ = 1, ε = 1) and check them by
Monte Carlo with the mechanisms' noise (seeded, float noise: a research reproduction).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .. import noise
from ..mechanisms import elliptical as ell
from ..noise import InsecureSeededRandom
from ._registry import Headline, Kind, Paper, ReproResult, new_figure, save_figure, target, write_csv

SENSITIVITIES = (4.0, 1.0)
PAPER = {("gaussian", "spherical"): 17.0, ("gaussian", "proportional"): 17.0, ("gaussian", "optimal"): 12.5,
         ("laplace", "spherical"): 10.0, ("laplace", "proportional"): 10.0, ("laplace", "optimal"): 9.0}
SEED = 4_1


def _monte_carlo(cal: ell.VectorCalibration, draws: int, rng) -> float:
    d = cal.scales.size
    if cal.mechanism == "gaussian":
        z = noise.sample_gaussian(1.0, draws * d, rng=rng, insecure_float=True)
    else:
        z = noise.sample_laplace(1.0, draws * d, rng=rng, insecure_float=True)
    eta = np.asarray(z, dtype=float).reshape(draws, d) * cal.scales
    return float(np.mean(np.sum(np.abs(eta) ** cal.p, axis=1)))


@target("thesis-fig4.1", "Lebeda thesis Fig. 4.1: elliptical Gaussian / parallelotope Laplace, Δ=(4,1)")
def figure_4_1(out_dir: Path, fast: bool) -> ReproResult:
    rng = InsecureSeededRandom(SEED)
    draws = 20_000 if fast else 200_000
    rows, heads, cals = [], [], {}
    for family, p in (("gaussian", 2.0), ("laplace", 1.0)):
        for shape in ("spherical", "proportional", "optimal"):
            if family == "gaussian":
                cal = ell.calibrate_gaussian(SENSITIVITIES, rho=1.0, p=p, shape=shape)
            else:
                cal = ell.calibrate_laplace(SENSITIVITIES, epsilon=1.0, p=p, shape=shape)
            cals[family, shape] = cal
            mc = _monte_carlo(cal, draws, rng)
            paper = PAPER[family, shape]
            rows.append((family, p, shape, float(cal.b[0]), float(cal.b[1]), float(cal.scales[0]),
                         float(cal.scales[1]), cal.expected_error, mc, draws, paper))
            unit = "rho" if family == "gaussian" else "eps"
            heads.append(Headline.of(f"{family} p={p:g} {shape} (x 1/{unit})", cal.expected_error,
                                     Paper.rel(paper, "thesis Fig. 4.1 caption", 1e-9)))
            heads.append(Headline.of(f"{family} p={p:g} {shape} Monte Carlo", mc,
                                     Paper.rel(paper, "thesis Fig. 4.1 caption", 0.03,
                                               why="Monte Carlo: 3 % at 2·10^4 draws")))
    csv_path = write_csv(out_dir / "thesis-fig4.1.csv",
                         ("family", "p", "shape", "b1", "b2", "scale1", "scale2", "expected_error",
                          "monte_carlo_error", "draws", "paper"), rows)
    png = save_figure(_plot(cals), out_dir / "thesis-fig4.1.png")
    return ReproResult("thesis-fig4.1", csv_path, png, tuple(heads), (csv_path, png))


def _plot(cals):
    fig, axes = new_figure(2, 1, (10.0, 4.2))
    colors = {"spherical": "tab:blue", "proportional": "tab:orange", "optimal": "tab:green"}
    d1, d2 = SENSITIVITIES
    t = np.linspace(0.0, 2.0 * np.pi, 400)
    for ax, family in zip(axes[0], ("gaussian", "laplace")):
        ax.plot([-d1, d1, d1, -d1, -d1], [-d2, -d2, d2, d2, -d2], color="black", lw=1)
        for shape, color in colors.items():
            cal = cals[family, shape]
            a1, a2 = d1 / cal.b[0], d2 / cal.b[1]
            if family == "gaussian":  # {z : Σ (z_i b_i/Δ_i)² <= 1}: semi-axes Δ_i/b_i
                ax.plot(a1 * np.cos(t), a2 * np.sin(t), color=color,
                        label=f"{shape}: E={cal.expected_error:g}/ρ")
            else:  # {z : Σ |z_i| b_i/Δ_i <= 1}: vertices at ±Δ_i/b_i
                ax.plot([a1, 0, -a1, 0, a1], [0, a2, 0, -a2, 0], color=color,
                        label=f"{shape}: E={cal.expected_error:g}/ε")
        ax.set_aspect("equal")
        ax.set_title("(a) Gaussian, p = 2" if family == "gaussian" else "(b) Laplace, p = 1")
        ax.legend(fontsize=8, loc="upper right")
    return fig
