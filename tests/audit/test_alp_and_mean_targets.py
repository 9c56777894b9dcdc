"""Audit targets of the ALP structure (``sparsedp.alp`` per release) and the vector mean (``sparsedp.vector_mean``,
PLAN, per release): the exact laws they compare with, a calibrated audit that passes, and the ε × 2 / σ/2 mutants
refuted."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from sparsedp.audit import audit, build_target, release_many
from sparsedp.audit.alp import _COUNT, key_law
from sparsedp.audit.vector_mean import noise_law_param
from sparsedp.noise import InsecureSeededRandom


def test_alp_key_law_is_the_enumerated_law():
    """P[N_key = n] by enumerating RandRound's two outcomes and every flip pattern of the key's m cells."""
    t = build_target("alp", epsilon=1.0, delta=0.0)
    cal = t.reference
    assert (cal.m, cal.s) == (4, 10) and cal.p == pytest.approx(0.2)
    for count in (0, 1, _COUNT, 30):
        x = count * cal.ratio
        lo = int(np.floor(x))
        want = np.zeros(cal.m + 1)
        for y, w in ((lo, 1 - (x - lo)), (lo + 1, x - lo)):
            pre = [1 if b < y else 0 for b in range(cal.m)]
            for flips in itertools.product((0, 1), repeat=cal.m):
                pr = np.prod([cal.p if f else 1 - cal.p for f in flips])
                want[sum(a ^ f for a, f in zip(pre, flips))] += w * pr
        assert np.allclose(key_law(cal, count), want, atol=1e-12)


def test_alp_release_reads_the_structure_of_sparsedp_alp():
    t = build_target("alp", epsilon=1.0, delta=0.0)
    out = release_many(t, [_COUNT, 0], 20, InsecureSeededRandom(1))
    assert out.shape == (20, 2) and np.all(out[:, 0] <= t.reference.m)
    assert np.all(out[:, 1] <= t.reference.m * (t.reference.s - 1))


def test_alp_passes_when_calibrated_and_twice_epsilon_is_refuted():
    ok = audit("alp", epsilon=1.0, delta=0.0, runs=100, law_runs=100, scenarios=("new",), rng=InsecureSeededRandom(3))
    assert not ok.contradicts and set(ok.bounds) == {"new"}, str(ok)
    bad = audit("alp", epsilon=1.0, delta=0.0, sigma_scale=0.5, scenarios=(), law_runs=60,
                rng=InsecureSeededRandom(4))
    assert bad.refutes_calibration, str(bad)
    mutant = build_target("alp", epsilon=1.0, delta=0.0, sigma_scale=0.5)
    assert mutant.calibration.m == mutant.reference.m and mutant.calibration.epsilon == 2.0


def test_vector_mean_reads_plan_noise_back_as_integers_of_the_calibrated_law():
    t = build_target("vector-mean", epsilon=1.0, delta=1e-5)
    out = release_many(t, [0], 3, InsecureSeededRandom(5))
    z = out[:, 2:4]
    assert np.all(np.abs(z - np.rint(z)) < 1e-3) and len(set(out[:, -1])) == 1
    s2 = float(noise_law_param(int(out[0, -1]), 2, t.reference.rho_noise))
    assert np.all(np.abs(z) < 8 * np.sqrt(s2))  # the noise is on the grid of the calibrated scale


def test_vector_mean_passes_when_calibrated_and_half_sigma_is_refuted():
    ok = audit("vector-mean", epsilon=1.0, delta=1e-5, scenarios=(), law_runs=40, rng=InsecureSeededRandom(6))
    assert not ok.contradicts, str(ok)
    bad = audit("vector-mean", epsilon=1.0, delta=1e-5, sigma_scale=0.5, scenarios=(), law_runs=40,
                rng=InsecureSeededRandom(7))
    assert bad.refutes_calibration and bad.law.ratio < 0.5, str(bad)


@pytest.mark.slow
def test_vector_mean_default_audit_passes():
    res = audit("vector-mean", epsilon=1.0, delta=1e-5, rng=InsecureSeededRandom(8))
    assert not res.contradicts and set(res.bounds) == {"shift"}, str(res)
