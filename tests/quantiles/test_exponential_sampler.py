"""The exact permute-and-flip sampler (noise/exponential.py) against its law: the law's formula against exact
enumeration of every visiting order, and the real sampler against the law by chi-square at fixed seeds, with a
mutant law it must reject."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from sparsedp.accounting.quantiles import exponential_law, permute_and_flip_law, quantile_utilities
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


@pytest.mark.parametrize("u,eps", [([-3, -1, 0, -2, -5], 1.3), ([0, 0, -4, -1, 0, -2], 0.4), ([-7, 0], 2.0)])
def test_law_formula_is_the_enumeration_of_every_order(u, eps):
    """P[k] summed over all visiting orders (each 1/n!) of p_k·Π(1 − p_j) over the cells visited before k."""
    u = np.array(u)
    p = np.exp(-eps / 2 * (u.max() - u))
    law = np.zeros(u.size)
    perms = list(itertools.permutations(range(u.size)))
    for perm in perms:
        rejected = 1.0
        for k in perm:
            law[k] += rejected * p[k] / len(perms)
            rejected *= 1 - p[k]
    assert np.allclose(permute_and_flip_law(u, eps, 1), law, rtol=1e-12, atol=1e-15)
    assert law.sum() == pytest.approx(1.0)


CASES = [  # (cell counts, level, epsilon, sensitivity)
    (np.array([0, 3, 5, 2, 0, 0, 1, 4, 0, 0]), Fraction(1, 2), 1.0, 1),
    (np.array([2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7, 1]), Fraction(9, 10), 3.0, 9),
    (np.zeros(6, dtype=int), Fraction(1, 2), 0.5, 1),                       # no data: uniform
    (np.array([40, 0, 0, 1, 0, 60]), Fraction(1, 2), 0.2, 2),
]


@pytest.mark.parametrize("case", [0, pytest.param(1, marks=pytest.mark.slow), 2, 3])
def test_sampler_has_the_permute_and_flip_law(case):
    h, level, eps, d = CASES[case]
    u = quantile_utilities(h, level)
    law = permute_and_flip_law(u, eps, d)
    gaps = (u.max() - u).tolist()
    rng = InsecureSeededRandom(1000 + case)
    draws = np.array([ex.sample_permute_and_flip(gaps, Fraction(eps) / (2 * d), rng) for _ in range(3000)])
    assert _chi2_p(draws, law) > 1e-3
    if u.max() != u.min():  # the test can fail: the law at twice the ε differs
        assert _chi2_p(draws, permute_and_flip_law(u, 2 * eps, d)) < 1e-4


def test_permute_and_flip_is_never_less_concentrated_than_the_exponential_mechanism():
    """McKenna & Sheldon (2020) Thm 2 on an example: the expected gap is not larger than the exponential
    mechanism's at the same ε."""
    h = np.array([5, 0, 3, 8, 2, 0, 0, 6, 1, 4])
    u = quantile_utilities(h, Fraction(1, 2))
    for eps in (0.1, 0.5, 2.0):
        gap = u.max() - u
        assert permute_and_flip_law(u, eps, 1) @ gap <= exponential_law(u, eps, 1) @ gap + 1e-12


def test_refusals():
    rng = InsecureSeededRandom(3)
    assert ex.sample_permute_and_flip([0], Fraction(1, 2), rng) == 0
    for bad in ([], [1, 2], [0, -1]):
        with pytest.raises(InvalidParameterError):
            ex.sample_permute_and_flip(bad, Fraction(1, 2), rng)
    with pytest.raises(InvalidParameterError):
        ex.sample_permute_and_flip([0, 1], Fraction(0), rng)
