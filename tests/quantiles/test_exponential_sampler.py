"""The exact exponential-mechanism sampler (noise/exponential.py) against its law: chi-square at fixed seeds on the
real sampler, including its refinement path (forced by widened bounds), and a mutant law it must reject."""

from __future__ import annotations

import functools
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from sparsedp.accounting.quantiles import exponential_law, quantile_utilities
from sparsedp.errors import InvalidParameterError
from sparsedp.noise import InsecureSeededRandom
from sparsedp.noise import exponential as ex


def _chi2_p(draws: np.ndarray, law: np.ndarray) -> float:
    obs = np.bincount(draws, minlength=law.size).astype(float)
    exp = law * draws.size
    big = exp >= 5
    o = np.append(obs[big], obs[~big].sum())
    e = np.append(exp[big], exp[~big].sum())
    if e[-1] < 5:          # merge a small tail into the last big cell
        o[-2] += o[-1]
        e[-2] += e[-1]
        o, e = o[:-1], e[:-1]
    return float(stats.chisquare(o, e).pvalue)


CASES = [  # (cell counts, level, epsilon, sensitivity)
    (np.array([0, 3, 5, 2, 0, 0, 1, 4, 0, 0]), Fraction(1, 2), 1.0, 1),
    (np.array([2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7, 1]), Fraction(9, 10), 3.0, 9),
    (np.zeros(6, dtype=int), Fraction(1, 2), 0.5, 1),                       # no data: uniform
    (np.array([40, 0, 0, 1, 0, 60]), Fraction(1, 2), 0.2, 2),
]


@pytest.mark.parametrize("case", [0, pytest.param(1, marks=pytest.mark.slow), 2, 3])
def test_sampler_has_the_exponential_law(case):
    h, level, eps, d = CASES[case]
    u = quantile_utilities(h, level)
    law = exponential_law(u, eps, d)
    t = Fraction(eps) / (2 * d)
    rng = InsecureSeededRandom(1000 + case)
    draws = np.array([ex.sample_runs(u.tolist(), t, rng) for _ in range(3000)])
    assert _chi2_p(draws, law) > 1e-3
    # the test can fail: the law at twice the epsilon is rejected (except for the flat, data-free case)
    if u.max() != u.min():
        assert _chi2_p(draws, exponential_law(u, 2 * eps, d)) < 1e-4


def test_refinement_path_keeps_the_law(monkeypatch):
    """Bounds widened by 2^60 units at precision 64 make most first comparisons undecided, so the lazy uniform
    is refined (more bits, precision 128+): the draws must still have the exact law."""
    real = ex._exp_bounds.__wrapped__
    calls = {"refined": 0}

    @functools.lru_cache(maxsize=None)
    def coarse(x, prec):
        lo, hi = real(x, prec)
        if prec == 64:
            return max(0, lo - (1 << 60)), hi + (1 << 60)
        calls["refined"] += 1
        return lo, hi

    monkeypatch.setattr(ex, "_exp_bounds", coarse)
    h, level, eps, d = CASES[0]
    u = quantile_utilities(h, level)
    rng = InsecureSeededRandom(7)
    draws = np.array([ex.sample_runs(u.tolist(), Fraction(eps) / (2 * d), rng) for _ in range(2000)])
    assert calls["refined"] > 0
    assert _chi2_p(draws, exponential_law(u, eps, d)) > 1e-3


def test_weighted_groups_and_refusals():
    rng = InsecureSeededRandom(3)
    sizes, gaps, t = [1, 5, 2], [0, 1, 4], Fraction(1, 2)
    w = np.array([n * np.exp(-float(t) * g) for n, g in zip(sizes, gaps)])
    draws = np.array([ex.sample_weighted_exp(sizes, gaps, t, rng) for _ in range(3000)])
    assert _chi2_p(draws, w / w.sum()) > 1e-3
    assert ex.sample_weighted_exp([3], [0], t, rng) == 0
    for bad in (([1, 2], [0]), ([0, 1], [0, 1]), ([1, 1], [1, 2]), ([1, 1], [0, -1])):
        with pytest.raises(InvalidParameterError):
            ex.sample_weighted_exp(*bad, t, rng)
    with pytest.raises(InvalidParameterError):
        ex.sample_weighted_exp([1, 1], [0, 1], Fraction(0), rng)
