"""The column noise of a general column shape, Y = L z (sparsedp.mechanisms.aggregate_noise, with
sparsedp.accounting.column_shape): its covariance is L diag(Var z) Lᵀ, L⁻¹Y recovers independent exact
discrete Gaussians, the arithmetic is exact (no int64 overflow), and the identity map draws exactly the
independent-columns noise. Fixed seeds (InsecureSeededRandom), the secure sampler's code path.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from sparsedp.accounting import column_shape as cs
from sparsedp.accounting.discrete import dgauss_variance
from sparsedp.aggregates import Sum
from sparsedp.mechanisms.aggregate_noise import noisy_grid_sums, to_value_units
from sparsedp.noise import InsecureSeededRandom

from test_aggregate_noise import _chi2_pvalue

N = 60_000
LOWER = ((1, 0, 0), (3, 1, 0), (-2, 5, 1))
REFINE = (1, 4, 2)
SCALES = (Fraction(50), Fraction(20), Fraction(35, 2))


def _draw(seed: int, lower=LOWER, refine=REFINE, sums=None):
    zeros = [np.zeros(N, dtype=np.int64) for _ in SCALES] if sums is None else sums
    return noisy_grid_sums(zeros, SCALES, InsecureSeededRandom(seed), lower=lower, refine=refine)


def _cov_ok(y: np.ndarray, cov: np.ndarray, z: float = 5.0) -> bool:
    """Every entry of the empirical covariance within z standard errors of ``cov`` (Gaussian-moment SE)."""
    emp = np.cov(y, bias=True)
    d = np.diag(cov)
    se = np.sqrt((np.outer(d, d) + cov ** 2) / y.shape[1])
    return bool(np.all(np.abs(emp - cov) <= z * se))


def test_sampled_covariance_is_l_var_lt():
    y = np.array(_draw(5), dtype=float)
    lo = np.array(LOWER, dtype=float)
    var = np.array([dgauss_variance(s) for s in SCALES])
    cov = (lo * var) @ lo.T
    assert _cov_ok(y, cov)
    # the check can fail: the independent-columns covariance, or another L, is far outside
    assert not _cov_ok(y, np.diag(np.diag(cov)))
    lo2 = np.array([[1, 0, 0], [2, 1, 0], [-2, 5, 1]], dtype=float)
    assert not _cov_ok(y, (lo2 * var) @ lo2.T)


def test_inverse_map_recovers_independent_discrete_gaussians():
    """L⁻¹Y = z: each coordinate passes a chi-square test against N_Z(0, s_k), and they are uncorrelated."""
    y = np.array(_draw(9), dtype=np.int64)
    inv = np.array(cs._inverse_lower(LOWER), dtype=np.int64)
    z = inv @ y
    for k, s in enumerate(SCALES):
        assert _chi2_pvalue(z[k], float(s)) > 1e-3
    c = np.corrcoef(z)
    assert np.all(np.abs(c - np.eye(3)) < 5 / math.sqrt(N))


def test_grid_sums_are_refined_and_the_identity_is_the_diagonal_draw():
    sums = [np.arange(N, dtype=np.int64) % 7 - 3, np.full(N, 11, dtype=np.int64), np.zeros(N, dtype=np.int64)]
    noisy = _draw(3, sums=sums)
    zero = _draw(3)
    for k in range(3):   # same draws: the difference is exactly F_k·A_k
        assert np.array_equal(noisy[k] - zero[k], sums[k] * REFINE[k])
    ident = ((1, 0, 0), (0, 1, 0), (0, 0, 1))
    a = noisy_grid_sums(sums, SCALES, InsecureSeededRandom(4), lower=ident, refine=(1, 1, 1))
    b = noisy_grid_sums(sums, SCALES, InsecureSeededRandom(4))
    assert all(np.array_equal(x, y) for x, y in zip(a, b))


def test_large_values_are_exact_python_integers():
    big = 2 ** 61
    sums = [np.array([big, -big, 5], dtype=np.int64)] * 3
    lower = ((1, 0, 0), (2 ** 20, 1, 0), (0, 0, 1))
    out = noisy_grid_sums(sums, SCALES, InsecureSeededRandom(1), lower=lower, refine=(4, 1, 1))
    z = noisy_grid_sums([np.zeros(3, dtype=np.int64)] * 3, SCALES, InsecureSeededRandom(1))
    want0 = [4 * int(a) + int(b) for a, b in zip(sums[0], z[0])]
    want1 = [int(a) + 2 ** 20 * int(b) + int(c) for a, b, c in zip(sums[1], z[0], z[1])]
    assert [int(x) for x in out[0]] == want0 and out[0].dtype == object
    assert [int(x) for x in out[1]] == want1
    assert out[2].dtype == np.int64   # small enough: int64


def test_value_units_on_the_refined_grid():
    agg = Sum("x", 0, 10)                       # g = 2^-8, centre c
    g, c = agg.granularity, agg.centre
    noisy = np.array([4 * 100 + 3, -8], dtype=np.int64)
    cnt = np.array([5, 7])
    out = to_value_units(noisy, cnt, agg, refine=4)
    assert out.tolist() == [(g / 4) * 403 + g * c * 5, (g / 4) * -8 + g * c * 7]
    assert to_value_units(noisy, cnt, agg).tolist() == to_value_units(noisy, cnt, agg, refine=1).tolist()


@pytest.mark.parametrize("bad", [((1, 0), (1, 1), (0, 0)), ((2, 0), (1, 1))])
def test_lower_must_be_unit_lower_triangular(bad):
    from sparsedp.errors import InvalidParameterError

    with pytest.raises(InvalidParameterError):
        cs.unimodular_shift_bounds(bad, [1, 1], [4, 4])
