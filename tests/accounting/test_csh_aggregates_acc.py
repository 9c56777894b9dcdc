"""Top-k CSH with aggregate columns (accounting.csh_aggregates; seed 000 §6, docs/proofs/aggregates.md §5)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from sparsedp.accounting.aggregates import _log_h
from sparsedp.accounting.csh import csh_delta_parts, csh_discrete_delta_parts, csh_rounded_calibrate
from sparsedp.accounting.csh_aggregates import (
    calibrate_csh_joint_rounded, csh_column_scales, csh_discrete_joint_delta_parts, csh_joint_delta_parts,
)
from sparsedp.accounting.discrete import dgauss_logpmf
from sparsedp.accounting.gaussian import gaussian_delta


def test_without_columns_is_theorem_3_3():
    p = csh_joint_delta_parts(1.0, 3.0, 9.0, 10, [], [])
    ref = csh_delta_parts(1.0, 3.0, 9.0, 10, "add")
    assert p.gaussian == pytest.approx(ref["gaussian"], rel=1e-14)
    assert p.threshold == pytest.approx(ref["threshold"], rel=1e-14)
    pd = csh_discrete_joint_delta_parts(1.0, 3.0, 9.0, 10, [], [])
    refd = csh_discrete_delta_parts(1.0, 3.0, 9.0, 10)
    assert pd.gaussian == pytest.approx(refd["gaussian"], rel=1e-14)
    assert pd.threshold == refd["threshold"]


@pytest.mark.parametrize("eps,mu_cnt,s1,D", [(1.0, 0.8, 30.0, 3), (0.3, 0.5, 12.0, 2), (2.0, 1.5, 200.0, 10)])
def test_gaussian_part_bounds_exact_mixed_divergence(eps, mu_cnt, s1, D):
    """Exact H for a continuous-Gaussian count part (loss N(−μ²/2, μ²) under P₀) plus one discrete column
    shifted by D: a lattice sum over the column noise of the Black–Scholes form. The bound is above, and close."""
    y = np.arange(-int(40 * math.sqrt(s1)) - 2, int(40 * math.sqrt(s1)) + 3, dtype=float)
    u = D * y / s1 - D * D / (2 * s1) - mu_cnt ** 2 / 2
    exact = float(np.sum(np.exp(dgauss_logpmf(y, s1) + _log_h(u, mu_cnt, eps))))
    from sparsedp.accounting.csh_aggregates import _gauss_with_columns
    b = _gauss_with_columns(eps, mu_cnt ** 2, 1, [s1], [D])
    assert b >= exact * (1 - 1e-12)
    assert b <= exact * 1.05
    assert exact > gaussian_delta(mu_cnt, eps) * 1.05   # the column matters


def test_columns_add_in_quadrature_at_large_scales():
    k, sigma = 50, 4.0
    sks = csh_column_scales(sigma, k, [4096, 100])
    p = csh_joint_delta_parts(1.0, sigma, 10.0, k, sks, [4096, 100])
    mu2 = (k + math.sqrt(k)) / (4 * sigma ** 2) * 3     # two columns with the count's μ² each
    f = gaussian_delta(math.sqrt(mu2), 1.0)
    assert f * (1 - 1e-6) <= p.gaussian <= f * (1 + 1e-4)


@pytest.mark.parametrize("debias", [False, True])
def test_rounded_calibration_meets_delta(debias):
    cal = calibrate_csh_joint_rounded(1.0, 1e-6, 20, [2048, 60], debias=debias)
    assert cal.parts.total <= 1e-6
    p = csh_joint_delta_parts(1.0, cal.sigma, cal.margin - 0.5, 20, cal.column_sigma2s, [2048, 60], debias=debias)
    assert p.total <= 1e-6
    worse = csh_joint_delta_parts(1.0, cal.sigma, cal.margin - 1.5, 20, cal.column_sigma2s, [2048, 60],
                                  debias=debias)
    assert worse.total > 1e-6
    s0, m0 = csh_rounded_calibrate(1.0, 1e-6, 20, "add", debias=debias)
    assert cal.sigma > s0 * 1.5 and cal.margin > m0


def test_discrete_columns_add_rho():
    sks = [Fraction(10_000)]
    base = csh_discrete_joint_delta_parts(1.0, 3.0, 9.0, 10, [], []).gaussian
    with_col = csh_discrete_joint_delta_parts(1.0, 3.0, 9.0, 10, sks, [100]).gaussian
    assert with_col > base
    from sparsedp.accounting.discrete_histograms import topk_debias_discrete_delta_parts
    deb = csh_discrete_joint_delta_parts(1.0, 3.0, 9.0, 10, [], [], debias=True)
    ref = topk_debias_discrete_delta_parts(1.0, 3.0, 9.0, 10, "cks")
    assert deb.gaussian == pytest.approx(ref["gaussian"], rel=1e-14)
