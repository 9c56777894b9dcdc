"""VARIANCE/STD intervals (``accounting.intervals.variance_interval``): the interval arithmetic contains the clamped
variance of every point of the box (checked on random points and on the box's corners), its ends are attained
(tightness of each bound over the box, up to the separate bounding of m₁ and m₂), the union-bound coverage of
``VarianceLaw.box`` from the three exact half-widths, and the fallback for an empty box."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest

from sparsedp.accounting.intervals import LinearNoise, VarianceBox, VarianceLaw, VarianceRanges, variance_interval
from sparsedp.accounting.laws import DiscreteGaussian

RANGES = VarianceRanges(mean_range=(0.0, 10.0), square_range=(0.0, 100.0), clamp_upper=25.0, count_floor=5)
BOX = VarianceBox(total=40.0, squares=900.0, count=6.0, ranges=RANGES, coverage=0.95)


def _theta(n, s1, s2, c=25.0):
    return np.clip(s2 / n - (s1 / n) ** 2, 0.0, c)


@pytest.mark.parametrize("std", [False, True])
def test_every_point_of_the_box_is_inside(std):
    box = VarianceBox(total=40.0, squares=900.0, count=6.0, ranges=VarianceRanges(**{**RANGES.__dict__, "std": std}),
                      coverage=0.95)
    g = np.random.default_rng(7)
    for _ in range(200):
        n_hat = float(g.integers(3, 60))
        n_true = float(g.integers(max(5, int(n_hat - 6)), int(n_hat + 6) + 1))
        m = g.uniform(0, 10)
        s1_true = m * n_true
        s2_true = g.uniform(m * m, min(100.0, m * m + 25.0)) * n_true  # a feasible mean of squares
        # released statistics whose errors lie within the half-widths
        s1_hat = s1_true + g.uniform(-40, 40)
        s2_hat = s2_true + g.uniform(-900, 900)
        n_hat = n_true + float(g.integers(-6, 7))
        lo, hi = variance_interval([n_hat], [s1_hat], [s2_hat], box)
        t = _theta(n_true, s1_true, s2_true)
        t = np.sqrt(t) if std else t
        assert lo[0] - 1e-9 <= t <= hi[0] + 1e-9, (n_hat, s1_hat, s2_hat, n_true, s1_true, s2_true, lo, hi)


def test_the_ends_are_attained_on_the_box():
    """Without the range clips binding, the lower end is attained at a corner (n, S₁, S₂) and the upper end too
    when the m₁ range excludes 0 (m₂ and m₁² move with n in opposite directions, so a corner of the box attains
    each end of the interval-arithmetic bound only where one factor dominates: checked within 15 %)."""
    box = VarianceBox(total=20.0, squares=200.0, count=3.0, coverage=0.95,
                      ranges=VarianceRanges(mean_range=(-1e9, 1e9), square_range=(-1e9, 1e9), clamp_upper=1e9))
    n_hat, s1, s2 = 200.0, 1000.0, 6000.0
    lo, hi = variance_interval([n_hat], [s1], [s2], box)
    vals = [s2_ / n - (s1_ / n) ** 2 for n, s1_, s2_ in itertools.product(
        np.linspace(n_hat - 3, n_hat + 3, 7), np.linspace(s1 - 20, s1 + 20, 41), np.linspace(s2 - 200, s2 + 200, 3))]
    assert 0.0 < min(vals) and lo[0] <= min(vals) + 1e-12 and max(vals) <= hi[0] + 1e-12
    assert min(vals) - lo[0] <= 0.15 * (hi[0] - lo[0]) and hi[0] - max(vals) <= 0.15 * (hi[0] - lo[0])


def test_union_bound_coverage_of_the_box():
    z = DiscreteGaussian(Fraction(50))
    law = VarianceLaw(total=LinearNoise(((1, DiscreteGaussian(Fraction(400))), (3, z)), Fraction(32)),
                      squares=LinearNoise(((1, DiscreteGaussian(Fraction(900))),), Fraction(1, 4)),
                      count=LinearNoise(((1, z),)), ranges=VarianceRanges((0.0, 10.0), (0.0, 100.0), 25.0))
    for level in (0.9, 0.95):
        box = law.box(level)
        side = 1 - (1 - level) / 3
        h1, h2, hz = (x.halfwidth(side) for x in (law.total, law.squares, law.count))
        assert (box.total, box.squares, box.count) == (h1.width, h2.width, hz.width)
        assert box.coverage == pytest.approx(1 - (3 - h1.coverage - h2.coverage - hz.coverage), abs=1e-15)
        assert level <= box.coverage < 1.0
        # each half-width is the exact one at its side level: one lattice step less falls below it
        assert 2 * law.count.cdf(hz.lattice - 1) - 1 < side <= hz.coverage


def test_an_empty_box_gives_the_whole_range():
    # a noisy mean far outside [0, 10] even at the box's widest: the box missed the truth; the interval is [0, C]
    lo, hi = variance_interval([50.0], [5000.0], [100.0], BOX)
    assert (lo[0], hi[0]) == (0.0, 25.0)
    lo, hi = variance_interval([-20.0], [10.0], [100.0], BOX)  # n̂ + h below the least released count
    assert (lo[0], hi[0]) == (0.0, 25.0)
