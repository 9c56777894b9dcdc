"""Top-k CSH (seed 000 Algorithm 3): the truncation's structure (Lemma 4.1) and the release."""

from __future__ import annotations

import numpy as np
import pytest

from sparsedp.accounting import calibrate
from sparsedp.accounting.discrete_histograms import calibrate_topk_debias_discrete
from sparsedp.mechanisms import SparseHistogram, release_histogram
from sparsedp.mechanisms.topk import topk_csh, truncate_top_k
from sparsedp.noise import InsecureSeededRandom


def test_truncation_basics():
    t, h = truncate_top_k(np.array([5, 3, 3, 9, 1]), 2)
    assert t == 3 and h.tolist() == [2, 0, 0, 6, 0]  # ties at t all drop
    t, h = truncate_top_k(np.array([4, 2]), 3)        # fewer than k+1 entries: t = 0
    assert t == 0 and h.tolist() == [4, 2]


def test_lemma_4_1_on_random_neighbouring_pairs():
    """1e4 random small pairs (X, X + one unit), brute force: H̃(X') − H̃(X) ∈ {0,1}^d ∪ {0,−1}^d, ‖H̃‖₀ <= k."""
    gen = np.random.default_rng(41)
    d = 6
    violations = 0
    for _ in range(10_000):
        k = int(gen.integers(1, 5))
        n = int(gen.integers(0, 9))
        units = gen.random((n, d)) < gen.uniform(0.1, 0.9)
        unit = gen.random(d) < gen.uniform(0.1, 0.9)      # one contribution per key per unit
        h = units.sum(axis=0).astype(np.int64)
        h2 = h + unit
        _, a = truncate_top_k(h, k)
        _, b = truncate_top_k(h2, k)
        diff = b - a
        ok = (np.all((diff == 0) | (diff == 1)) or np.all((diff == 0) | (diff == -1)))
        ok &= int((a > 0).sum()) <= k and int((b > 0).sum()) <= k
        violations += not ok
    assert violations == 0


def test_topk_release_keeps_at_most_k_keys_above_t():
    rng = InsecureSeededRandom(7)
    counts = np.array([1000, 900, 800, 50, 40, 30, 3, 2, 1], dtype=np.int64)
    hist = SparseHistogram(np.array(list("abcdefghi")), counts)
    rel = release_histogram(hist, epsilon=1.0, delta=1e-6, top_k=3, mechanism="topk-csh", rng=rng)
    assert rel.n_keys_out <= 3
    assert set(rel.keys.tolist()) <= {"a", "b", "c"}  # only keys strictly above t = 50 can appear
    assert np.all(rel.counts > 1 + rel.calibration.tau)
    assert "bias" in rel.extra


def test_topk_bias_and_debias():
    """Released values estimate H − t; the de-biased variant adds the released t̃ ≈ t back."""
    rng = InsecureSeededRandom(8)
    k = 20
    counts = np.concatenate([np.full(k, 100_000), np.full(50, 5_000)]).astype(np.int64)
    hist = SparseHistogram(np.arange(counts.size), counts, distinct=True)
    cal = calibrate("topk-csh", epsilon=1.0, delta=1e-6, top_k=k)
    rel = topk_csh(hist, cal, rng=rng)
    assert rel.n_keys_out == k
    assert abs(float(np.mean(rel.counts)) - (100_000 - 5_000)) < 6 * cal.noise_std
    cal_d = calibrate_topk_debias_discrete(1.0, 1e-6, k)
    assert cal_d.debias and cal_d.delta_achieved <= 1e-6
    assert cal_d.sigma > cal.sigma  # the extra release of t̃ costs noise
    rel_d = topk_csh(hist, cal_d, rng=rng)
    assert abs(rel_d.extra["t_tilde"] - 5_000) < 8 * cal_d.noise_std
    assert abs(float(np.mean(rel_d.counts)) - 100_000) < 10 * cal_d.noise_std
    with pytest.raises(ValueError, match="debias"):
        topk_csh(hist, cal, rng=rng, debias=True)


def test_topk_debias_float():
    rng = InsecureSeededRandom(9)
    hist = SparseHistogram(np.arange(5), np.array([900, 800, 700, 10, 5]), distinct=True)
    cal = calibrate("topk-csh", epsilon=1.0, delta=1e-6, top_k=2, discrete=False, debias=True)
    rel = topk_csh(hist, cal, rng=rng, insecure_float=True)
    assert "t_tilde" in rel.extra and rel.n_keys_out <= 2
