"""GSHM aggregate columns (seed 001 Algorithm 1 line 6; μ_o² of Eq. 5.1): float path only."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sparsedp.accounting import calibrate
from sparsedp.errors import InvalidParameterError
from sparsedp.mechanisms import SparseHistogram
from sparsedp.mechanisms.gshm import gshm
from sparsedp.noise import InsecureSeededRandom


def test_aggregates_get_their_own_gaussian_noise():
    rng = InsecureSeededRandom(11)
    n = 100_000
    sig = np.array([20.0, 40.0])
    sens = np.array([1.0, 1.0])
    mu_o2 = float(np.sum((sens / sig) ** 2))  # Eq. 5.1 example: 1/σ_l² + 1/σ_s²
    cal = calibrate("gshm", epsilon=1.0, delta=1e-6, l0=2, mu_o2=mu_o2, discrete=False)
    hist = SparseHistogram(np.arange(n), np.full(n, 10_000, dtype=np.int64), distinct=True)
    agg = np.column_stack([np.full(n, 5.0), np.full(n, 7.0)])
    rel = gshm(hist, cal, rng=rng, insecure_float=True, aggregates=agg, aggregate_sigmas=sig,
               aggregate_sensitivities=sens)
    out = rel.extra["aggregates"]
    assert out.shape == (rel.n_keys_out, 2) and rel.n_keys_out == n
    for j in range(2):
        assert out[:, j].mean() == pytest.approx(agg[0, j], abs=4 * sig[j] / math.sqrt(n))
        assert out[:, j].var() == pytest.approx(sig[j] ** 2, rel=4 * math.sqrt(2 / n))
    # the count noise is independent of the aggregate noise
    assert abs(np.corrcoef(rel.counts - 10_000, out[:, 0])[0, 1]) < 4 / math.sqrt(n)


def test_aggregates_must_fit_the_calibration():
    hist = SparseHistogram(np.arange(3), np.array([50, 60, 70]))
    cal = calibrate("gshm", epsilon=1.0, delta=1e-6, l0=2, mu_o2=0.001, discrete=False)
    with pytest.raises(InvalidParameterError, match="mu_o2"):
        gshm(hist, cal, insecure_float=True, aggregates=np.ones(3), aggregate_sigmas=10.0,
             aggregate_sensitivities=1.0)
    cal_d = calibrate("gshm", epsilon=1.0, delta=1e-6, l0=2)
    with pytest.raises(InvalidParameterError, match="continuous"):
        gshm(hist, cal_d, aggregates=np.ones(3), aggregate_sigmas=10.0, aggregate_sensitivities=1.0)
