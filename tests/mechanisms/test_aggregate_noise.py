"""Sampling laws of the joint release (count decides, columns ride along) against the accountant.

Fixed seeds (InsecureSeededRandom), chi-square / 4-standard-error checks against the discrete-Gaussian pmf of
sparsedp.accounting.discrete, as in test_mech_release_law.py.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from sparsedp.accounting.aggregates import calibrate_joint_gshm, joint_gshm_delta
from sparsedp.accounting.discrete import dgauss_pmf, dgauss_sf, dgauss_variance
from sparsedp.aggregates import Count, Mean, Sum
from sparsedp.errors import InputDataError, InvalidParameterError
from sparsedp.mechanisms.aggregate_noise import (
    column_values, expected_errors, mean_error, noisy_grid_sums, release_joint, sum_error_std,
)
from sparsedp.noise import InsecureSeededRandom

N = 200_000


def _within(hits, n, p, z=4.0):
    return abs(hits / n - p) <= z * math.sqrt(max(p * (1 - p), 1e-300) / n)


def _chi2_pvalue(x: np.ndarray, s: float) -> float:
    """Chi-square goodness of fit of integer draws to N_Z(0, s), bins with expected count >= 20 (tails pooled)."""
    n = x.size
    w = int(math.sqrt(s) * 4)
    edges = np.arange(-w, w + 1)
    exp = n * dgauss_pmf(edges, s)
    keep = exp >= 20
    vals = edges[keep]
    lo, hi = vals[0], vals[-1]
    obs = np.array([np.sum(x <= lo)] + [np.sum(x == k) for k in vals[1:-1]] + [np.sum(x >= hi)], dtype=float)
    e = np.concatenate([[n * (1 - dgauss_sf(lo + 1, s))], exp[keep][1:-1], [n * dgauss_sf(hi, s)]])
    return float(stats.chisquare(obs, e * n / e.sum()).pvalue)


@pytest.fixture(scope="module")
def cal():
    return calibrate_joint_gshm(1.0, 0.02, 2, [3, 50])


def test_release_probability_and_column_laws_match_accountant(cal):
    rng = InsecureSeededRandom(7)
    pre = 3
    offsets = [0, 1, 3, -1]
    counts = np.concatenate([np.full(N, pre + o) for o in offsets])
    a1 = np.tile(np.array([5, -2, 0, 1]), counts.size // 4)
    a2 = np.arange(counts.size, dtype=np.int64) % 17 - 8
    rel = release_joint(counts, [a1, a2], cal, pre_threshold=pre, rng=rng)
    s = cal.count_sigma2
    p_acc = joint_gshm_delta(1.0, s, cal.margin, 2, cal.column_sigma2s, [3, 50], parts=True)
    assert p_acc.release_probability_at_pre_threshold == pytest.approx(dgauss_sf(cal.margin, s), rel=1e-12)
    for g, off in enumerate(offsets):
        hits = int(np.sum((rel.positions >= g * N) & (rel.positions < (g + 1) * N)))
        p = 0.0 if off < 0 else dgauss_sf(cal.margin - off, s)
        assert _within(hits, N, p), (off, hits / N, p)
    # released counts: noisy count law given release, for the at-threshold group (Z >= margin)
    at = rel.positions < N
    z = rel.noisy_counts[at] - pre
    assert z.min() >= cal.margin
    # column noise: exact N_Z(0, s_k), independent of the count noise
    y1 = rel.noisy_grid_sums[0] - a1[rel.positions]
    y2 = rel.noisy_grid_sums[1] - a2[rel.positions]
    assert _chi2_pvalue(y1, float(cal.column_sigma2s[0])) > 1e-4
    assert _chi2_pvalue(y2, float(cal.column_sigma2s[1])) > 1e-4
    assert abs(np.corrcoef(y1, rel.noisy_counts - counts[rel.positions])[0, 1]) < 4 / math.sqrt(y1.size)
    assert np.var(y2) == pytest.approx(dgauss_variance(cal.column_sigma2s[1]), rel=4 * math.sqrt(2 / y2.size))


def test_column_law_fails_on_wrong_scale():
    """The chi-square check can fail: draws at scale s tested against 1.1 s."""
    rng = InsecureSeededRandom(3)
    y = noisy_grid_sums([np.zeros(N, dtype=np.int64)], [Fraction(400)], rng)[0]
    assert _chi2_pvalue(y, 400.0) > 1e-4
    assert _chi2_pvalue(y, 440.0) < 1e-6


def test_value_units_and_recentring_are_exact(cal):
    aggs = [Count(), Sum("x", 0, 600), Mean("x", 0, 600, name="avg")]
    a = aggs[1]
    # deterministic check without noise: value = g*(A' + Y) + g*c*count
    from sparsedp.mechanisms.aggregate_noise import JointRelease
    r = JointRelease(positions=np.array([0, 1]), noisy_counts=np.array([4, 10]),
                     noisy_grid_sums=(np.array([-3, 7]),))     # the Sum and the Mean share one noisy column
    out = column_values(r, aggs)
    assert out["count"].tolist() == [4, 10]
    g, c = a.granularity, a.centre
    assert out["sum_x"].tolist() == [g * (-3 + 4 * c), g * (7 + 10 * c)]
    assert out["avg"].tolist() == [g * (-3 + 4 * c) / 4, g * (7 + 10 * c) / 10]


def test_mean_error_exact_against_simulation():
    agg = Mean("x", 0, 100, granularity=1.0)
    s, s1 = Fraction(9), Fraction(900)
    n, t, a = 6, 5, 30.0
    me = mean_error(agg, s1, s, n, t, a=a)
    rng = InsecureSeededRandom(11)
    from sparsedp.noise import sample_discrete_gaussian
    z = sample_discrete_gaussian(s, 400_000, rng)
    y = sample_discrete_gaussian(s1, 400_000, rng)
    keep = n + z >= t
    err = (y[keep] - a * z[keep]) / (n + z[keep])
    assert keep.mean() == pytest.approx(me.release_probability, abs=4 * math.sqrt(0.25 / z.size))
    se = err.std() / math.sqrt(err.size)
    assert abs(err.mean() - me.bias) < 4 * se
    assert err.std() == pytest.approx(me.std, rel=0.01)
    assert me.bias < 0   # near the threshold, released keys have Z > 0 on average: mean pulled to the centre
    big = mean_error(agg, s1, s, 10_000, t, a=a)
    assert big.std == pytest.approx(big.delta_method_std, rel=1e-3)


def test_expected_errors_report(cal):
    aggs = [Count(), Sum("x", 0, 600), Mean("y", -5, 5)]
    c2 = calibrate_joint_gshm(1.0, 1e-6, 2, [aggs[1].sensitivity, aggs[2].sensitivity])
    e = expected_errors(aggs, c2)
    assert set(e) == {"count", "sum_x", "mean_y"}
    assert e["sum_x"] == pytest.approx(sum_error_std(aggs[1], c2.column_sigma2s[0], c2.count_sigma2))
    assert e["mean_y"] > expected_errors(aggs, c2, n=10 * (c2.margin + 1))["mean_y"]


def test_bad_inputs():
    cal = calibrate_joint_gshm(1.0, 0.02, 1, [3])
    with pytest.raises(InputDataError):
        release_joint(np.array([1.5, 2.0]), [np.array([1, 2])], cal, rng=InsecureSeededRandom(1))
    with pytest.raises(InputDataError):
        noisy_grid_sums([np.array([0.5])], [Fraction(4)], InsecureSeededRandom(1))
    with pytest.raises(InvalidParameterError):
        noisy_grid_sums([np.array([1])], [], InsecureSeededRandom(1))
