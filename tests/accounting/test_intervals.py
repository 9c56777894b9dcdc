"""The exact laws behind per-row intervals (sparsedp.accounting.intervals): the cdf of an integer combination of
independent discrete noises against brute-force enumeration, the half-width's minimality, the mean's coverage by
exact enumeration on a tiny law, the release probability against the discrete Gaussian's exact tail, and the
fast cdf (one exact cdf evaluation per distinct argument, memoised laws) against the formula evaluated point by
point."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest

from sparsedp.accounting.discrete import dgauss_pmf, dgauss_sf, dlaplace_pmf
from sparsedp.accounting import intervals
from sparsedp.accounting.intervals import (LinearNoise, MeanLaw, ReleaseRule, RoundedGaussian, check_level,
                                           ratio_interval)
from sparsedp.accounting.laws import DiscreteGaussian, DiscreteLaplace
from sparsedp.errors import InvalidParameterError
from scipy import stats

W = 60  # enumeration window: the mass left out is below 1e-40 for these scales


def _pmf(law, x):
    if isinstance(law, DiscreteGaussian):
        return dgauss_pmf(x.astype(float), law.sigma2)
    if isinstance(law, DiscreteLaplace):
        return dlaplace_pmf(x.astype(float), law.scale)
    return stats.norm.cdf((x + 0.5) / law.sigma) - stats.norm.cdf((x - 0.5) / law.sigma)


def _brute(noise: LinearNoise) -> dict[int, float]:
    """The pmf of Σ a_i X_i by enumeration of every combination in the window."""
    xs = np.arange(-W, W + 1)
    out: dict[int, float] = {}
    pmfs = [_pmf(law, xs) for _, law in noise.terms]
    for idx in itertools.product(range(xs.size), repeat=len(noise.terms)):
        p = float(np.prod([pmfs[t][i] for t, i in enumerate(idx)]))
        if p < 1e-30:
            continue
        w = sum(a * int(xs[i]) for (a, _), i in zip(noise.terms, idx))
        out[w] = out.get(w, 0.0) + p
    return out


LAWS = [
    LinearNoise(((1, DiscreteGaussian(Fraction(9))),)),
    LinearNoise(((1, DiscreteLaplace(Fraction(3, 2))),)),
    LinearNoise(((1, DiscreteGaussian(Fraction(16))), (3, DiscreteGaussian(Fraction(2))))),       # Y + c·Z
    LinearNoise(((2, DiscreteGaussian(Fraction(5))), (-1, DiscreteLaplace(Fraction(2)))), Fraction(4)),
    LinearNoise(((1, RoundedGaussian(2.5)), (1, RoundedGaussian(1.2)))),                          # top-k CSH
]


@pytest.mark.parametrize("noise", LAWS, ids=range(len(LAWS)))
def test_cdf_and_halfwidth_match_enumeration(noise):
    pmf = _brute(noise)
    support = np.array(sorted(pmf))
    probs = np.array([pmf[w] for w in support])
    for t in (-7, -1, 0, 2, 5, 11):
        assert noise.cdf(t) == pytest.approx(probs[support <= t].sum(), abs=1e-12)
    for level in (0.5, 0.9, 0.95, 0.99):
        h = noise.halfwidth(level)
        cov = probs[np.abs(support) <= h.lattice].sum()
        below = probs[np.abs(support) <= h.lattice - 1].sum()
        assert h.coverage == pytest.approx(cov, abs=1e-12)
        assert cov >= level > below  # the smallest integer half-width reaching the level
        assert h.width == pytest.approx(h.lattice / float(noise.divisor))


def test_mean_interval_covers_by_exact_enumeration():
    """Every (Y, Z) of a tiny joint law enumerated: the true re-centred mean a lies in the ratio interval with
    total probability >= the level (and the report's coverage is a lower bound of it)."""
    y_law, z_law = DiscreteGaussian(Fraction(30)), DiscreteGaussian(Fraction(4))
    law = MeanLaw(column=LinearNoise(((1, y_law),)), count=LinearNoise(((1, z_law),)), step=0.5, centre=10,
                  grid=(0, 20), count_floor=1)
    ys, zs = np.arange(-40, 41), np.arange(-15, 16)
    py, pz = dgauss_pmf(ys.astype(float), 30), dgauss_pmf(zs.astype(float), 4)
    for n, s_prime in ((12, 30), (40, -300), (25, 0)):
        yy, zz = np.meshgrid(ys, zs, indexing="ij")
        p = np.outer(py, pz)
        n_hat = n + zz
        ok = n_hat >= 1  # a MEAN divides by a count >= 1 (the release threshold); the rest has mass < 1e-5
        mean = law.step * (law.centre + (s_prime + yy[ok]) / n_hat[ok])
        lo, hi, cov = ratio_interval(mean, n_hat[ok], law, 0.9)
        truth = law.step * (law.centre + s_prime / n)
        covered = (lo <= truth + 1e-12) & (truth - 1e-12 <= hi)
        assert float(np.sum(p[ok][covered])) >= cov - 1e-9 >= 0.9 - 1e-9
        assert np.all(lo >= 0.0) and np.all(hi <= law.step * law.grid[1])


def test_release_probability_is_the_exact_tail():
    rule = ReleaseRule(noise=LinearNoise(((1, DiscreteGaussian(Fraction(50))),)), pre_threshold=3, margin=20)
    assert rule.probability(2) == 0.0
    for n in (3, 10, 23, 40):
        assert rule.probability(n) == pytest.approx(dgauss_sf(23 - n, 50), rel=1e-10)


@pytest.mark.parametrize("bad", [0, 1, 1.5, -0.1, "0.9", float("nan")])
def test_levels_outside_the_open_unit_interval_are_refused(bad):
    with pytest.raises(InvalidParameterError, match="interval"):
        check_level(bad)


#: laws whose widest term carries a large coefficient (the re-centring ``c·Z`` of a sum of squares): long runs of
#: equal cdf arguments, the case the fast path shares; and one where every argument is distinct
RUN_LAWS = [
    LinearNoise(((1, DiscreteGaussian(Fraction(400))), (90, DiscreteGaussian(Fraction(3, 2)))), Fraction(8)),
    LinearNoise(((1, DiscreteLaplace(Fraction(20))), (-75, DiscreteLaplace(Fraction(7, 5))))),
    LinearNoise(((2, DiscreteGaussian(Fraction(30))), (60, RoundedGaussian(1.3)), (7, DiscreteGaussian(Fraction(2))))),
    LinearNoise(((1, DiscreteGaussian(Fraction(900))), (2, DiscreteGaussian(Fraction(3))))),
]


def _plain_cdf(split: intervals.Split, t: int) -> float:
    """The cdf formula with the exact cdf evaluated at every support point (no sharing)."""
    return float(np.sum(split.prob * intervals._cdf(split.x0, np.floor((t - split.support) / split.a0))))


def _plain_convolution(noise: LinearNoise) -> tuple[np.ndarray, np.ndarray]:
    """The support and pmf of R (every term but the widest) by unique + bincount at every step."""
    terms = sorted(((abs(a), x) for a, x in noise.terms), key=lambda t: -t[0] * intervals._spread(t[1]))
    support, prob = np.zeros(1, dtype=np.int64), np.ones(1)
    for a, x in terms[1:]:
        w = intervals._window(x)
        s = (support[:, None] + a * np.arange(-w, w + 1, dtype=np.int64)[None, :]).ravel()
        support, inv = np.unique(s, return_inverse=True)
        prob = np.bincount(inv.ravel(), weights=(prob[:, None] * intervals._pmf(x, w)[None, :]).ravel())
    return support, prob


@pytest.mark.parametrize("noise", RUN_LAWS + LAWS, ids=range(len(RUN_LAWS) + len(LAWS)))
def test_fast_cdf_and_halfwidth_equal_the_pointwise_formula(noise):
    """Bit for bit: the convolution, the cdf at many points, and each half-width is the smallest h whose
    point-by-point coverage reaches the level, with that coverage exactly (not approximately)."""
    split = intervals._split_of(noise)
    support, prob = _plain_convolution(noise)
    assert np.array_equal(split.support, support) and np.array_equal(split.prob, prob)
    lattice = [int(t) for t in np.linspace(-4 * noise.std * float(noise.divisor), 4 * noise.std
                                           * float(noise.divisor), 61)]
    for t in lattice + [-10**7, -1, 0, 1, 10**7]:
        assert noise.cdf(t) == _plain_cdf(split, t)
    for level in (0.3, 0.9, 0.95, 0.99, 1 - 1e-9):
        h = noise.halfwidth(level)
        assert h.coverage == min(1.0, 2.0 * _plain_cdf(split, h.lattice) - 1.0) >= level
        assert 2.0 * _plain_cdf(split, h.lattice - 1) - 1.0 < level
        assert h.width == float(Fraction(h.lattice) / noise.divisor)


@pytest.mark.parametrize("law", [DiscreteGaussian(Fraction(7)), DiscreteGaussian(Fraction(2, 7)),
                                 DiscreteLaplace(Fraction(5, 2)), RoundedGaussian(3.3)], ids=range(4))
def test_cdf_by_runs_and_memo_is_the_cdf_at_every_point(law):
    """Any argument array (runs, repeats out of order, one point, none), through one memo that grows from call
    to call: the same float at every position as the cdf evaluated there."""
    g = np.random.default_rng(3)
    memo = intervals.CdfMemo(law)
    for k in (np.repeat(np.arange(30.0, -31.0, -1.0), g.integers(1, 9, 61)), g.integers(-40, 40, 500).astype(float),
              np.full(17, 4.0), np.array([-2.0]), np.array([], dtype=float), np.arange(-60.0, 61.0)[::-1],
              g.integers(-80, 80, 300).astype(float)):
        want = intervals._cdf(law, k)
        for got in (intervals._runs(memo, k), intervals._runs(lambda x: intervals._cdf(law, x), k)):
            assert got.shape == want.shape and np.array_equal(got, want)
    keys, values = memo._state
    assert np.all(np.diff(keys) > 0) and np.array_equal(values, intervals._cdf(law, keys))
