"""Which DP quantile algorithm per key: the exponential mechanism or permute-and-flip over grid cells, or a noisy
binary search.

    python benchmarks/quantile_algorithms.py [--trials 300] [--seed 0]

Both run on the same public grid (``cells`` cells over [lower, upper]) with the same per-key pure ε and the same
contribution model (each unit one value per key: utility / count sensitivity 1):

* **EM** — sparsedp's mechanism (:mod:`sparsedp.mechanisms.quantiles`): one draw from ``P[k] ∝ exp(ε·U_k/2)``,
  ``U_k = −|(1 − q)·L_k − q·G_k|·b``; simulated here from its exact law (:func:`sparsedp.accounting.quantiles.
  exponential_law`), which is the law the exact sampler draws from.
* **PF** — permute-and-flip (McKenna & Sheldon 2020, arXiv:2010.12603) with the same utility and the same
  ``t = ε/2``: cells in a random order, the first whose coin ``exp(t·(U_k − max U))`` comes up is released
  (sparsedp's mechanism; simulated here literally with numpy coins).
* **NBS** — noisy binary search: ``log2(cells)`` rounds, each spending ε/(rounds + 1) on the count of values in
  cells ``<= mid`` with discrete Laplace noise of scale (rounds + 1)/ε, compared with ``q`` times a noisy total
  (the remaining ε/(rounds + 1)); go left or right; release the final cell's midpoint. Pure ε-DP by basic
  composition of the rounds.

Data per key: ``n`` values log-normal(3.5, 1.2) (dwell seconds) on [0, 600], numpy PCG64 seed ``--seed``. Printed:
the median and 90th percentile of the absolute error of the released median (value units) against the key's true
median, per (n, ε), and the ratios PF / EM and NBS / EM. Simulation only (numpy noise): accuracy, not security, is compared.
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from sparsedp.accounting.quantiles import exponential_law, quantile_utilities
from sparsedp.aggregates import Median


def em_release(h: np.ndarray, q: Median, eps: float, g: np.random.Generator) -> float:
    p = exponential_law(quantile_utilities(h, q.level), eps, q.sensitivity)
    return float(q.cell_value(g.choice(h.size, p=p)))


def pf_release(h: np.ndarray, q: Median, eps: float, g: np.random.Generator) -> float:
    u = quantile_utilities(h, q.level)
    p = np.exp(-eps / (2 * q.sensitivity) * (u.max() - u))
    order = g.permutation(h.size)
    accepted = order[g.random(h.size) < p[order]]     # the best cell has p = 1: never empty
    return float(q.cell_value(accepted[0]))


def _dlap(scale: float, g: np.random.Generator) -> int:
    p = math.exp(-1.0 / scale)
    return int(g.geometric(1 - p) - g.geometric(1 - p))


def nbs_release(h: np.ndarray, q: Median, eps: float, g: np.random.Generator) -> float:
    rounds = int(math.ceil(math.log2(h.size)))
    scale = (rounds + 1) / eps
    total = int(h.sum()) + _dlap(scale, g)
    cum = np.cumsum(h)
    lo, hi = 0, h.size - 1
    while lo < hi:
        mid = (lo + hi) // 2
        if cum[mid] + _dlap(scale, g) >= float(q.level) * total:
            hi = mid
        else:
            lo = mid + 1
    return float(q.cell_value(lo))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cells", type=int, default=1024)
    a = ap.parse_args(argv)
    q = Median("dwell", 0.0, 600.0, cells=a.cells)
    g = np.random.Generator(np.random.PCG64(a.seed))
    print(f"cells={a.cells} on [0, 600], log-normal(3.5, 1.2) values, {a.trials} keys per row, seed {a.seed}")
    print("| n values | ε per key | EM median abs. error | EM p90 | PF median abs. error | PF p90 | NBS median abs. error "
          "| NBS p90 | PF / EM (median) | NBS / EM (median) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for n in (30, 100, 300, 1000, 3000):
        for eps in (0.1, 0.5, 1.0):
            err = {"em": [], "pf": [], "nbs": []}
            for _ in range(a.trials):
                x = np.clip(g.lognormal(3.5, 1.2, n), 0, 600)
                truth = float(np.median(x))
                h = np.bincount(np.minimum((x / q.width).astype(int), a.cells - 1), minlength=a.cells)
                err["em"].append(abs(em_release(h, q, eps, g) - truth))
                err["pf"].append(abs(pf_release(h, q, eps, g) - truth))
                err["nbs"].append(abs(nbs_release(h, q, eps, g) - truth))
            em50, em90 = np.quantile(err["em"], [0.5, 0.9])
            pf50, pf90 = np.quantile(err["pf"], [0.5, 0.9])
            nb50, nb90 = np.quantile(err["nbs"], [0.5, 0.9])
            print(f"| {n} | {eps:g} | {em50:.3g} | {em90:.3g} | {pf50:.3g} | {pf90:.3g} | {nb50:.3g} | {nb90:.3g} "
                  f"| {pf50 / em50:.2f} | {nb50 / em50:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
