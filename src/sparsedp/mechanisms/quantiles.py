"""The per-key quantile mechanism: permute-and-flip over a public grid with the quantile's rank utility, sampled
exactly.

For every released key, the engine's bounded cell counts (:class:`~sparsedp.core.quantile_cells.KeyCells`) give
the integer utilities ``U_k = −|(b − a)·L_k − a·G_k|`` of the ``cells`` grid cells
(:func:`sparsedp.accounting.quantiles.quantile_utilities`, ``q = a/b``); one cell is drawn by permute-and-flip
at ``t = ε_key/(2Δ)`` (``Δ`` = :attr:`Quantile.sensitivity <sparsedp.aggregates.Quantile.sensitivity>``; McKenna
& Sheldon 2020, arXiv:2010.12603: ε_key-DP like the exponential mechanism ``∝ exp(t·U_k)``, and never less
accurate in expectation) by the exact sampler :func:`sparsedp.noise.exponential.sample_permute_and_flip`, and the
cell's midpoint is released. A key with
no bounded value gets the uniform law (all utilities 0). Privacy: ``docs/proofs/quantiles.md``; why this algorithm
rather than a noisy binary search: ``docs/quantiles.md``.

Intervals (:func:`quantile_interval`): the tail bound ``P[k] <= exp(−t·(max U − U_k))`` (both permute-and-flip and
the exponential mechanism satisfy it) gives, with no data, the public rank
statement "with probability >= 1 − α the released cell's utility is within ``utility_gap`` of the best cell's";
:func:`quantile_interval` turns it into grid cells for one key, which needs the key's cell counts and is
therefore curator-only unless its inputs are private themselves.
"""

from __future__ import annotations

import numpy as np

from ..accounting.quantiles import em_scale, permute_and_flip_law, quantile_utilities, utility_gap
from ..aggregates import Quantile
from ..core.quantile_cells import KeyCells
from ..noise.exponential import sample_permute_and_flip
from ..noise.source import SecureRandom

__all__ = ["release_quantiles", "key_law", "quantile_interval"]


def release_quantiles(cells: KeyCells, quantile: Quantile, epsilon_key: float, rng: SecureRandom) -> np.ndarray:
    """The released value (cell midpoint) of every key ``0 … cells.n_keys − 1`` (float64), each drawn exactly by
    permute-and-flip at ``epsilon_key`` with its own utilities."""
    t = em_scale(epsilon_key, quantile.sensitivity)
    level = quantile.level
    out = np.empty(cells.n_keys, dtype=np.float64)
    zero = [0] * quantile.cells
    for key in range(cells.n_keys):
        h = cells.dense(key, quantile.cells)
        if h.any():
            u = quantile_utilities(h, level)
            gaps = (u.max() - u).tolist()
        else:
            gaps = zero
        out[key] = quantile.cell_value(sample_permute_and_flip(gaps, t, rng))
    return out


def key_law(cell_counts: np.ndarray, quantile: Quantile, epsilon_key: float) -> np.ndarray:
    """The output law over the cells of one key with these cell counts (float64; for tests and small grids)."""
    u = quantile_utilities(cell_counts, quantile.level)
    return permute_and_flip_law(u, epsilon_key, quantile.sensitivity)


def quantile_interval(cell_counts: np.ndarray, quantile: Quantile, epsilon_key: float,
                      alpha: float) -> tuple[float, float]:
    """``(lo, hi)``: the value range of the cells whose utility is within :func:`~sparsedp.accounting.quantiles.
    utility_gap` ``(ε_key, Δ, cells, α)`` of the best cell. With probability >= 1 − α (over the mechanism) the
    released cell lies in it (the tail bound above, for every input). It is a function of the key's
    cell counts: curator-only (not private) as it stands."""
    u = quantile_utilities(cell_counts, quantile.level)
    gap = utility_gap(epsilon_key, quantile.sensitivity, quantile.cells, alpha)
    inside = np.flatnonzero(u >= u.max() - gap)
    w = quantile.width
    return quantile.lower + float(inside[0]) * w, quantile.lower + float(inside[-1] + 1) * w
