"""The rank error published with a quantile (``accounting.quantile_rank``): the worst-case formula against the exact
permute-and-flip law (on the worst-case utilities it is equality, on random utilities an upper bound), the
minimality of ``rank_error``, and its coverage on the real secure release path: keys whose data make every
non-best cell sit one step past the bound (near the worst case), released by ``sd.release`` with ``sd.Median``,
the fraction of keys whose released cell's gap exceeds the bound against the exact law of each key."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import polars as pl
import pytest
from scipy import stats

import sparsedp as sd
from sparsedp.accounting.quantile_rank import rank_error, worst_case_miss
from sparsedp.accounting.quantiles import em_scale, permute_and_flip_law, quantile_utilities, split_budget
from sparsedp.noise import InsecureSeededRandom


@pytest.mark.parametrize("eps, cells, gap", [(0.5, 8, 3), (1.5, 64, 8), (0.1, 30, 40), (2.0, 2, 0)])
def test_worst_case_is_the_law_of_one_best_cell_and_the_rest_one_step_past(eps, cells, gap):
    u = np.full(cells, -(gap + 1))
    u[cells // 2] = 0
    law = permute_and_flip_law(u, eps, 1)
    assert worst_case_miss(em_scale(eps, 1), cells, gap) == pytest.approx(1.0 - law[cells // 2], rel=1e-9, abs=1e-14)


def test_worst_case_bounds_every_utility_vector():
    g = np.random.default_rng(3)
    for _ in range(300):
        cells = int(g.integers(2, 40))
        u = -g.integers(0, 30, cells)
        u[g.integers(cells)] = 0
        eps, gap = float(g.uniform(0.05, 3)), int(g.integers(0, 20))
        law = permute_and_flip_law(u, eps, 1)
        miss = float(law[(u.max() - u) > gap].sum())
        assert miss <= worst_case_miss(em_scale(eps, 1), cells, gap) + 1e-12


@pytest.mark.parametrize("level", [0.9, 0.95, 0.99])
def test_rank_error_is_the_smallest_gap_at_the_level(level):
    for eps, delta_, cells, q in [(0.75, 1, 1024, Fraction(1, 2)), (0.2, 3, 64, Fraction(9, 10)),
                                  (3.0, 2, 16, Fraction(1, 4))]:
        r = rank_error(eps, delta_, cells, level, q)
        t = em_scale(eps, delta_)
        assert r.miss == worst_case_miss(t, cells, r.gap) <= 1 - level
        assert r.gap == 0 or worst_case_miss(t, cells, r.gap - 1) > 1 - level
        assert r.values == r.gap / q.denominator
        # never looser than the union bound it replaces: P[gap > g] <= (B − 1)·exp(−t(g + 1))
        assert r.gap <= max(0, math.ceil(math.log((cells - 1) / (1 - level)) / float(t)))


def test_rank_error_coverage_on_the_secure_release_path():
    """800 keys, each with N units in the middle cell and X units in each end cell of a 64-cell grid: every
    non-best cell's gap is N or N + X, with N = gap + 1 (one past the bound), so the miss rate is near the worst
    case. Each key's released cell gives its gap; the number of misses is checked against the exact laws of the
    keys (a binomial-sum test: the mean of the per-key miss probabilities) and is at most the level's 5 %."""
    keys, cells, eps, delta = 800, 64, 2.0, 1e-6
    med = sd.Median("x", 0.0, 64.0, cells=cells)
    split = split_budget(eps, delta, 1, [None])
    ek = split.key_epsilons[0]
    r = rank_error(ek, med.sensitivity, cells, 0.95, med.level)
    n_mid, n_end = r.gap + 1, 30  # median: the middle cell's gap is 0, the others N (and N + X at the ends)
    per_key = np.array([0.5] * n_end + [32.5] * n_mid + [63.5] * n_end)
    units = per_key.size
    u = np.arange(keys * units)
    df = pl.DataFrame({"u": u, "k": u // units, "x": np.tile(per_key, keys)})
    res = sd.release(df, "u", "k", eps, delta, max_groups_per_unit=1, aggregates=[sd.Count(), med],
                     rng=InsecureSeededRandom(34))
    t = res.table
    assert t.height >= 0.95 * keys
    assert t.columns[-2:] == ["median_x", "median_x_rank_error"] and (t["median_x_rank_error"] == r.values).all()
    h = np.zeros(cells, dtype=np.int64)
    h[0], h[32], h[63] = n_end, n_mid, n_end
    util = quantile_utilities(h, med.level)
    gaps = util.max() - util
    law = permute_and_flip_law(util, ek, med.sensitivity)
    p_miss = float(law[gaps > r.gap].sum())
    assert 0.6 * r.miss < p_miss <= r.miss <= 0.05  # near the worst case, and within it
    cell = np.floor(t["median_x"].to_numpy()).astype(int)
    misses = int((gaps[cell] > r.gap).sum())
    assert stats.binomtest(misses, t.height, p_miss).pvalue > 1e-3, (misses, t.height, p_miss)
    assert misses / t.height <= 0.05 + 4 * math.sqrt(0.05 * 0.95 / t.height)
    note = next(n for n in res.report.notes if n.startswith("median_x_rank_error = "))
    assert "not a value interval" in note


def test_rank_error_only_with_intervals():
    df = pl.DataFrame({"u": np.arange(600), "k": np.arange(600) % 2, "x": np.arange(600) % 50 * 1.0})
    res = sd.release(df, "u", "k", 2.0, 1e-6, max_groups_per_unit=1, interval=None,
                     aggregates=[sd.Count(), sd.Median("x", 0, 50, cells=32)], rng=InsecureSeededRandom(1))
    assert res.table.columns == ["k", "count", "median_x"]
    assert not any("rank_error" in n for n in res.report.notes)
