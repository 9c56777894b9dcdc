"""Balcer & Vadhan, "Differential Privacy on Finite Computers": Figures 1 and 2 (tables of error bounds).

After Balcer & Vadhan (2019) §7. The paper's figures are tables of closed forms
⌈(c/ε)·ln(·)⌉; §7.3 evaluates them at (ε = 1, |X| = 2³², β = 0.05) and (ε = 0.1, |X| = 10⁶, β = 0.01),
which are the reproduction targets. Next to the printed formulas (:func:`~sparsedp.mechanisms.pure.accuracy.figure1`,
:func:`~sparsedp.mechanisms.pure.accuracy.figure2`) we plot what sparsedp reports: the exact error of the
GeoSample sampler actually used (``basic_accuracy`` / ``pure_sparse_accuracy``, exact geometric tails,
spec §7.5), which is never larger than the printed bound.

* ``bv-fig1``: BasicHistogram per-query and simultaneous error against ε (|X| = 2³², β = 0.05).
* ``bv-fig2``: PureSparseHistogram_{M,ε,β/6,β/6} per-query error, threshold t and simultaneous error.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import numpy as np

from ..mechanisms.pure.accuracy import basic_accuracy, figure1, figure2, pure_sparse_accuracy
from ..noise.clamped_geometric import GeoSample
from ._registry import Headline, Kind, Paper, ReproResult, new_figure, save_figure, steps, target, write_csv

SPOTS = ((1.0, 2 ** 32, 0.05), (0.1, 10 ** 6, 0.01))
N_DATA = 1000  # dataset size of the GeoSample sampler (the clamp [0, n]; it does not affect these bounds)
# spec §7.3, the evaluated instances of the printed formulas
FIG1_PAPER = {(1.0, "geometric"): (6, 51), (1.0, "geosample"): (14, 114), (1.0, "fastsample"): (17, 117),
              (0.1, "geometric"): (93, 369), (0.1, "geosample"): (208, 829), (0.1, "fastsample"): (239, 861)}
FIG2_PAPER = {(1.0, "geosample"): (20, 240, 234), (1.0, "fastsample"): (23, 246, 240),
              (0.1, "geosample"): (270, 1784, 1722), (0.1, "fastsample"): (301, 1846, 1784)}


def _eps_grid(fast: bool) -> np.ndarray:
    return np.union1d(np.geomspace(0.02, 1.0, 8 if fast else 40), [0.1, 1.0])


@target("bv-fig1", "Balcer-Vadhan Fig. 1: BasicHistogram error bounds (printed vs exact GeoSample)")
def figure_1(out_dir: Path, fast: bool) -> ReproResult:
    rows = []
    for eps, X, beta in SPOTS:
        for mech, (pq, sim) in figure1(eps, X, beta).items():
            rows.append(("spot", eps, X, beta, mech, pq, sim))
    X, beta = 2 ** 32, 0.05
    for eps in steps(_eps_grid(fast), "epsilon grid"):
        for mech, (pq, sim) in figure1(float(eps), X, beta).items():
            rows.append(("curve", float(eps), X, beta, mech, pq, sim))
        acc = basic_accuracy(GeoSample(N_DATA, Fraction(float(eps))), Fraction(beta), X)
        rows.append(("curve", float(eps), X, beta, "geosample-exact", acc.per_query, acc.simultaneous))
    csv_path = write_csv(out_dir / "bv-fig1.csv", ("kind", "epsilon", "domain_size", "beta", "mechanism",
                                                   "per_query", "simultaneous"), rows)
    heads = []
    for (eps, mech), (pq, sim) in FIG1_PAPER.items():
        ours = next(r for r in rows if r[0] == "spot" and r[1] == eps and r[4] == mech)
        cite = "Balcer & Vadhan Fig. 1 (closed forms)"
        heads += [Headline.of(f"eps={eps:g} {mech} per-query", ours[5], Paper.rel(pq, cite, 1e-9, kind=Kind.FORMULA)),
                  Headline.of(f"eps={eps:g} {mech} simultaneous", ours[6],
                              Paper.rel(sim, cite, 1e-9, kind=Kind.FORMULA))]
    fig, axes = new_figure(2, 1, (10.0, 4.0))
    for ax, col, title in zip(axes[0], (5, 6), ("per-query error", "simultaneous error")):
        for mech in ("geometric", "geosample", "fastsample", "geosample-exact"):
            pts = [(r[1], r[col]) for r in rows if r[0] == "curve" and r[4] == mech]
            ax.plot(*zip(*pts), ls="--" if mech.endswith("exact") else "-", label=mech)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("ε")
        ax.set_ylabel("a (error bound)")
        ax.set_title(f"{title}, |X| = 2^32, β = 0.05")
        ax.legend()
    png = save_figure(fig, out_dir / "bv-fig1.png")
    return ReproResult("bv-fig1", csv_path, png, tuple(heads), (csv_path, png))


@target("bv-fig2", "Balcer-Vadhan Fig. 2: PureSparseHistogram error, threshold (printed vs exact GeoSample)")
def figure_2(out_dir: Path, fast: bool) -> ReproResult:
    rows = []
    for eps, X, beta in SPOTS:
        for mech, (a, t, sim) in figure2(eps, X, beta).items():
            rows.append(("spot", eps, X, beta, mech, a, t, sim))
    X, beta = 2 ** 32, 0.05
    for eps in steps(_eps_grid(fast), "epsilon grid"):
        for mech, (a, t, sim) in figure2(float(eps), X, beta).items():
            rows.append(("curve", float(eps), X, beta, mech, a, t, sim))
        b6 = Fraction(beta) / 6
        acc = pure_sparse_accuracy(GeoSample(N_DATA, Fraction(float(eps))), Fraction(beta), X, b6, b6)
        rows.append(("curve", float(eps), X, beta, "geosample-exact", acc.per_query, acc.threshold,
                     acc.simultaneous))
    csv_path = write_csv(out_dir / "bv-fig2.csv", ("kind", "epsilon", "domain_size", "beta", "mechanism",
                                                   "per_query", "threshold", "simultaneous"), rows)
    heads = []
    for (eps, mech), vals in FIG2_PAPER.items():
        ours = next(r for r in rows if r[0] == "spot" and r[1] == eps and r[4] == mech)
        for name, o, p in zip(("a", "t", "simultaneous"), ours[5:8], vals):
            heads.append(Headline.of(f"eps={eps:g} {mech} {name}", o,
                                     Paper.rel(p, "Balcer & Vadhan Fig. 2 (closed forms)", 1e-9, kind=Kind.FORMULA)))
    fig, axes = new_figure(3, 1, (13.0, 4.0))
    for ax, col, title in zip(axes[0], (5, 6, 7), ("per-query error a", "threshold t", "simultaneous error")):
        for mech in ("geosample", "fastsample", "geosample-exact"):
            pts = [(r[1], r[col]) for r in rows if r[0] == "curve" and r[4] == mech]
            ax.plot(*zip(*pts), ls="--" if mech.endswith("exact") else "-", label=mech)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("ε")
        ax.set_title(f"{title}, |X| = 2^32, β = 0.05")
        ax.legend()
    png = save_figure(fig, out_dir / "bv-fig2.png")
    return ReproResult("bv-fig2", csv_path, png, tuple(heads), (csv_path, png))
