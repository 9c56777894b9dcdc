"""Audit target of the private vector sum: ``sparsedp.vector_sum`` itself per release on replace-one neighbours
(one unit's vector moves from 0 to 1 in every coordinate), the variance of the likelihood-ratio projection
against the calibrated one, and its σ/2 mutant (run at ρ/4) refuted."""

from __future__ import annotations

import numpy as np

from sparsedp.audit import audit, build_target
from sparsedp.audit.vectors import vector_scenarios
from sparsedp.noise import InsecureSeededRandom


def test_vector_target_pair_and_mutant():
    t = build_target("vector-sum", epsilon=1.0, delta=1e-5)
    (sc,) = vector_scenarios(t)
    assert sc.units0 == sc.units1 and (sc.counts1 - sc.counts0).tolist() == list(t.reference.sensitivity)
    assert np.allclose(sc.direction, np.asarray(t.reference.sensitivity) / np.asarray(t.reference.noise_std) ** 2)
    half = build_target("vector-sum", epsilon=1.0, delta=1e-5, sigma_scale=0.5)
    assert half.calibration.rho == 4 * half.reference.rho and half.reference == t.reference


def test_vector_sum_passes_when_calibrated_and_half_sigma_is_refuted():
    ok = audit("vector-sum", epsilon=1.0, delta=1e-5, runs=150, law_runs=150, rng=InsecureSeededRandom(3))
    assert not ok.contradicts, str(ok)
    bad = audit("vector-sum", epsilon=1.0, delta=1e-5, sigma_scale=0.5, scenarios=(), law_runs=150,
                rng=InsecureSeededRandom(4))
    assert bad.refutes_calibration and bad.law.ratio < 0.5, str(bad)
