"""Empirical privacy: the hockey-stick divergence of the released output on tiny neighbouring inputs.

For each neighbouring pair (one unit with up to 3 keys added) the mechanism runs R times on both inputs
(vectorised: independent runs are independent blocks of keys, or independent shared terms for CSH). The
output is mapped to a coarse partition (which keys were released × bin of the sum of released values).
With sample splitting, the first half picks the event A = {p̂ > e^ε q̂} and the second half estimates
P(A) − e^ε Q(A), an unbiased estimate of a lower bound of the true divergence, with its standard error.
The check passes at the calibrated noise and must fail when σ (or the Laplace scale) is halved: so it can
catch a broken mechanism.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from sparsedp.accounting import calibrate, laws
from sparsedp.mechanisms import noise_and_filter
from sparsedp.mechanisms.kernel import _sample, _sample_shared, correlated_rule, noise_plan
from sparsedp.noise import InsecureSeededRandom

EPS, DELTA = 1.0, 0.01
KEYS = 3
# (counts without the unit, counts with it): Gaussian part, infinite-loss part, and both at once
PAIRS = [([20, 20, 20], [21, 21, 21]), ([0, 0, 0], [1, 1, 1]), ([20, 0, 20], [21, 1, 21])]
N_BINS = 30


def _outputs_independent(cal, counts, runs, rng):
    """(pattern, sum of released values) per run, for GSHM / Laplace through the public kernel."""
    tiled = np.tile(np.asarray(counts, dtype=np.int64), runs)
    pos, vals = noise_and_filter(tiled, cal, 1, rng)
    run, key = np.divmod(pos, KEYS)
    pattern = np.bincount(run, weights=(1 << key), minlength=runs).astype(np.int64)
    total = np.bincount(run, weights=vals.astype(float), minlength=runs)
    return pattern, total


def _outputs_csh(cal, counts, runs, rng):
    """Same for CSH: one shared term per run (the kernel's own samplers and release rule)."""
    plan = noise_plan(cal)
    c = np.tile(np.asarray(counts, dtype=np.int64), (runs, 1))
    zi = _sample(plan, runs * KEYS, rng, False).reshape(runs, KEYS)
    zc = _sample_shared(plan, runs, rng)[:, None]
    keep, noisy = correlated_rule(plan, c, zi, zc, 1 + cal.tau)
    keep &= c >= 1
    pattern = (keep * (1 << np.arange(KEYS))).sum(axis=1)
    total = np.where(keep, noisy, 0.0).sum(axis=1)
    return pattern, total


def _cells(pattern, total, edges):
    return pattern * (N_BINS + 2) + np.searchsorted(edges, total)


def _divergence(out_p, out_q, eps):
    """Split-sample estimate of max over A of P(A) − e^ε Q(A), and its standard error."""
    (pp, tp), (pq, tq) = out_p, out_q
    h = pp.size // 2
    pool = np.concatenate([tp[:h][pp[:h] > 0], tq[:h][pq[:h] > 0]])
    edges = np.quantile(pool, np.linspace(0, 1, N_BINS + 1)[1:-1]) if pool.size else np.array([])
    cp, cq = _cells(pp, tp, edges), _cells(pq, tq, edges)
    size = int(max(cp.max(), cq.max())) + 1
    fp1 = np.bincount(cp[:h], minlength=size) / h
    fq1 = np.bincount(cq[:h], minlength=size) / h
    sel = fp1 > math.exp(eps) * fq1
    n2 = pp.size - h
    p2 = float(np.isin(cp[h:], np.flatnonzero(sel)).mean())
    q2 = float(np.isin(cq[h:], np.flatnonzero(sel)).mean())
    est = p2 - math.exp(eps) * q2
    se = math.sqrt(p2 * (1 - p2) / n2 + math.exp(2 * eps) * q2 * (1 - q2) / n2) + 1.0 / n2
    return est, se


def _worst(cal, runs, seed, csh=False):
    rng = InsecureSeededRandom(seed)
    run = _outputs_csh if csh else _outputs_independent
    worst = (-1.0, 0.0)
    for small, big in PAIRS:
        out_big = run(cal, big, runs, rng)
        out_small = run(cal, small, runs, rng)
        for a, b in ((out_big, out_small), (out_small, out_big)):
            est, se = _divergence(a, b, EPS)
            if est - 4 * se > worst[0] - 4 * worst[1]:
                worst = (est, se)
    return worst


def _halved(cal):
    """The noise law with every scale halved (variances / 4; rounded CSH: its continuous scales, which the
    many-release simulation rounds from float draws)."""
    law = cal.noise
    if isinstance(law, (laws.DiscreteGaussian,)):
        law = dataclasses.replace(law, sigma2=law.sigma2 / 4)
    elif isinstance(law, laws.DiscreteCorrelatedGaussian):
        law = dataclasses.replace(law, sigma2=law.sigma2 / 4, shared_sigma2=law.shared_sigma2 / 4)
    elif isinstance(law, (laws.DiscreteLaplace, laws.Laplace)):
        law = dataclasses.replace(law, scale=law.scale / 2)
    elif isinstance(law, (laws.RoundedCorrelatedGaussian, laws.CorrelatedGaussian)):
        law = dataclasses.replace(law, sigma=law.sigma / 2, shared_sigma=law.shared_sigma / 2)
    else:
        law = dataclasses.replace(law, sigma=law.sigma / 2)
    return dataclasses.replace(cal, sigma=cal.sigma / 2, noise=law)


CASES = [("gshm", {"l0": KEYS}, False), ("laplace", {"l0": KEYS}, False), ("csh", {"k": KEYS}, True)]


@pytest.mark.parametrize("mech,model,is_csh", CASES)
def test_hockey_stick_within_delta_and_detects_halved_noise(mech, model, is_csh):
    cal = calibrate(mech, epsilon=EPS, delta=DELTA, **model)
    est, se = _worst(cal, 100_000, 7, is_csh)
    assert est <= DELTA + 4 * se, (mech, est, se)
    est_h, se_h = _worst(_halved(cal), 100_000, 8, is_csh)
    assert est_h - 4 * se_h > DELTA, (mech, "halved", est_h, se_h)


@pytest.mark.slow
@pytest.mark.parametrize("mech,model,is_csh", CASES)
def test_hockey_stick_within_delta_1e6_runs(mech, model, is_csh):
    cal = calibrate(mech, epsilon=EPS, delta=DELTA, **model)
    est, se = _worst(cal, 1_000_000, 9, is_csh)
    assert est <= DELTA + 4 * se, (mech, est, se)
    est_h, se_h = _worst(_halved(cal), 1_000_000, 10, is_csh)
    assert est_h - 4 * se_h > DELTA
