"""Sampling laws: every mechanism releases a key with exactly the probability its accountant assumes.

Fixed test seeds, >= 1e5 repetitions (for the independent-noise mechanisms, one release of 2e5 keys is 2e5
independent repetitions), tolerance 4 standard errors. The expected probabilities are computed from the
probability mass functions of ``sparsedp.accounting.discrete``, independently of the samplers.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import sparsedp.noise.inversion as inversion_mod
from sparsedp.accounting import calibrate
from sparsedp.accounting.discrete import dgauss_pmf, dgauss_sf, dgauss_variance, dlaplace_sf
from sparsedp.accounting.discrete_histograms import gshm_discrete_delta, laplace_discrete_delta
from sparsedp.mechanisms import SparseHistogram, noise_and_filter
from sparsedp.mechanisms.csh import csh
from sparsedp.mechanisms.gshm import gshm
from sparsedp.mechanisms.kernel import _sample, _sample_shared, correlated_rule, noise_plan
from sparsedp.mechanisms.laplace import laplace_histogram
from sparsedp.noise import InsecureSeededRandom

N = 200_000


def _within(hits: int, n: int, p: float, z: float = 4.0) -> bool:
    se = math.sqrt(max(p * (1 - p), 1e-300) / n)
    return abs(hits / n - p) <= z * se


def _groups(pre: int, offsets, n_each: int):
    """Histogram with n_each keys at each count pre + offset (keys 0..), plus zero-count keys."""
    counts = np.concatenate([np.full(n_each, pre + o, dtype=np.int64) for o in offsets])
    return SparseHistogram(np.arange(counts.size), counts, distinct=True), counts


@pytest.mark.parametrize("mech", ["gshm", "laplace"])
def test_independent_release_probability_matches_accountant(mech):
    rng = InsecureSeededRandom(101)
    pre = 4
    cal = calibrate(mech, epsilon=1.0, delta=0.02, l0=2)
    m = int(cal.tau)
    offsets = [0, 2, 5, -1, -3, -pre]  # at, above and below the pre-threshold (count 0 = absent key)
    hist, counts = _groups(pre, offsets, N)
    release = (gshm if mech == "gshm" else laplace_histogram)(hist, cal, pre_threshold=pre, rng=rng)
    keys = np.asarray(release.keys)
    if mech == "gshm":
        s = cal.noise.sigma2
        sf = lambda t: dgauss_sf(t, s)  # noqa: E731
        p_acc = gshm_discrete_delta(1.0, s, m, 2, parts=True)[1]["release_probability_at_pre_threshold"]
    else:
        t_ = cal.noise.scale
        sf = lambda t: dlaplace_sf(t, t_)  # noqa: E731
        p_acc = laplace_discrete_delta(1.0, t_, m, 2, parts=True)[1]["release_probability_at_pre_threshold"]
    assert p_acc == pytest.approx(sf(m), rel=1e-12)
    for g, off in enumerate(offsets):
        hits = int(np.sum((keys >= g * N) & (keys < (g + 1) * N)))
        if off < 0:
            assert hits == 0, f"a key below the pre-threshold (count {pre + off}) was released"
        else:
            assert _within(hits, N, sf(m - off)), (off, hits / N, sf(m - off))
    # released values are at least the absolute threshold, integers, and belong to their own keys
    assert release.counts.dtype == np.int64
    assert np.all(release.counts >= pre + m)
    assert np.all(np.diff(keys) > 0)
    assert release.extra["threshold"] == pre + m


def _fixed_noise(monkeypatch, z):
    """Make the kernel's exact release step see the per-key noises ``z`` (it decides ``X_i >= j_i``)."""
    z = np.array(z, dtype=np.int64)

    def fake(law, j, rng=None):
        sel = np.flatnonzero(z[:len(j)] >= j)
        return sel, z[sel]
    monkeypatch.setattr(inversion_mod, "release_by_inversion", fake)


def test_ge_comparison_is_what_the_accountant_charges(monkeypatch):
    """Deterministic noise m-1, m, m+1 on three keys at the pre-threshold: exactly the last two are released."""
    cal = calibrate("gshm", epsilon=1.0, delta=1e-6, l0=3)
    m = int(cal.tau)
    _fixed_noise(monkeypatch, [m - 1, m, m + 1])
    pos, vals = noise_and_filter(np.array([5, 5, 5]), cal, 5, None)
    assert pos.tolist() == [1, 2] and vals.tolist() == [5 + m, 6 + m]


def test_csh_uses_strict_comparison(monkeypatch):
    """Algorithm 4 (csh_noise="alg4"); the rounded default is tested in tests/mechanisms/test_mech_csh_rounded.py."""
    cal = calibrate("csh", epsilon=1.0, delta=1e-3, k=4, csh_noise="alg4")
    thr2 = 2 * (1 + cal.tau)
    base = math.floor(thr2) - 2  # 2*1 + z + 0 == floor(thr2) for z = base
    _fixed_noise(monkeypatch, [base, base + 1, base + 2])
    pos, vals = noise_and_filter(np.array([1, 1, 1]), cal, 1, None, shared_noise=0)
    exp = [i for i, z in enumerate([base, base + 1, base + 2]) if 2 + z > thr2]
    assert pos.tolist() == exp
    assert np.all(vals > 1 + cal.tau)


def _csh_release_probability(plan, c: int, thr: float) -> float:
    """P[2c + Z_i + Z_corr > 2 thr] exactly: sum over Z_corr of its pmf times the tail of Z_i."""
    sc, si = float(plan.shared_scale), float(plan.scale)
    w = int(40 * math.sqrt(sc)) + 2
    zc = np.arange(-w, w + 1)
    need = np.floor(2 * thr - 2 * c - zc) + 1  # Z_i >= need
    tails = np.array([dgauss_sf(float(x), si) for x in need])
    return float(np.sum(dgauss_pmf(zc, sc) * tails))


def test_csh_release_probability_and_noise_moments():
    """Discrete CSH (Alg. 4): per-key release law at count 1 and 3, variance and covariance of the noise."""
    rng = InsecureSeededRandom(202)
    k = 4
    cal = calibrate("csh", epsilon=1.0, delta=0.05, k=k, csh_noise="alg4")
    plan = noise_plan(cal)
    thr = 1 + cal.tau
    zc = _sample_shared(plan, N, rng)
    zi = _sample(plan, 2 * N, rng, False).reshape(N, 2)
    counts = np.tile(np.array([1, 3], dtype=np.int64), (N, 1))
    keep, noisy = correlated_rule(plan, counts, zi, zc[:, None], thr)
    for col, c in enumerate((1, 3)):
        p = _csh_release_probability(plan, c, thr)
        assert _within(int(keep[:, col].sum()), N, p), (c, keep[:, col].mean(), p)
    p1 = _csh_release_probability(plan, 1, thr)
    assert 1 - (1 - p1) ** (k + 1) <= cal.delta_parts["threshold"] * (1 + 1e-9)  # Lemma 7.6 bounds it
    assert np.all(noisy[keep] > thr)
    err = noisy - counts
    var_ind, var_corr = dgauss_variance(plan.scale) / 4, dgauss_variance(plan.shared_scale) / 4
    v_tot = var_ind + var_corr
    assert err[:, 0].var() == pytest.approx(v_tot, rel=4 * math.sqrt(2 / N))
    cov = float(np.mean((err[:, 0] - err[:, 0].mean()) * (err[:, 1] - err[:, 1].mean())))
    assert cov == pytest.approx(var_corr, abs=4 * v_tot / math.sqrt(N))
    # ... which are σ²(1 + 1/√k) and σ²/√k up to the discrete Gaussian's variance deficit (< 1e-6 here)
    s = cal.sigma
    assert v_tot == pytest.approx(s * s * (1 + 1 / math.sqrt(k)), rel=1e-6)
    assert var_corr == pytest.approx(s * s / math.sqrt(k), rel=1e-6)


def test_csh_float_noise_moments():
    """Continuous CSH (Alg. 2, insecure_float): per-key variance σ²(1 + 1/√k), pairwise covariance σ²/√k."""
    rng = InsecureSeededRandom(303)
    k = 9
    cal = calibrate("csh", epsilon=1.0, delta=1e-5, k=k, discrete=False)
    plan = noise_plan(cal)
    zc = _sample_shared(plan, N, rng)
    zi = _sample(plan, 2 * N, rng, True).reshape(N, 2)
    counts = np.full((N, 2), 10_000, dtype=np.int64)
    _, noisy = correlated_rule(plan, counts, zi, zc[:, None], 1 + cal.tau)
    err = noisy - counts
    s2 = cal.sigma ** 2
    v_tot = s2 * (1 + 1 / math.sqrt(k))
    assert err[:, 1].var() == pytest.approx(v_tot, rel=4 * math.sqrt(2 / N))
    cov = float(np.cov(err[:, 0], err[:, 1])[0, 1])
    assert cov == pytest.approx(s2 / math.sqrt(k), abs=4 * v_tot / math.sqrt(N))


def test_csh_kernel_draws_one_shared_term_per_release():
    """Through the public path: within a release all keys share Z_corr (release means vary by Var Z_corr)."""
    rng = InsecureSeededRandom(404)
    k, n_keys, reps = 64, 64, 300
    cal = calibrate("csh", epsilon=1.0, delta=1e-5, k=k, csh_noise="alg4")
    hist = SparseHistogram(np.arange(n_keys), np.full(n_keys, 100_000, dtype=np.int64), distinct=True)
    means = np.empty(reps)
    for r in range(reps):
        rel = csh(hist, cal, rng=rng)
        assert rel.n_keys_out == n_keys
        means[r] = float(np.mean(rel.counts - 100_000))
    plan = noise_plan(cal)
    expect = dgauss_variance(plan.shared_scale) / 4 + dgauss_variance(plan.scale) / 4 / n_keys
    # the variance of a mean of 300 draws: 5 standard errors of a chi-square estimate
    assert means.var() == pytest.approx(expect, rel=5 * math.sqrt(2 / reps))
    assert expect > 5 * dgauss_variance(plan.scale) / 4 / n_keys  # the shared term dominates: not vacuous


@pytest.mark.slow
@pytest.mark.parametrize("mech", ["gshm", "laplace"])
def test_independent_release_probability_large(mech):
    rng = InsecureSeededRandom(505)
    n = 2_000_000
    cal = calibrate(mech, epsilon=0.5, delta=1e-3, l0=3)
    m = int(cal.tau)
    hist, _ = _groups(1, [0], n)
    rel = (gshm if mech == "gshm" else laplace_histogram)(hist, cal, rng=rng)
    sf = (lambda t: dgauss_sf(t, cal.noise.sigma2)) if mech == "gshm" else (
        lambda t: dlaplace_sf(t, cal.noise.scale))
    assert _within(rel.n_keys_out, n, sf(m))
