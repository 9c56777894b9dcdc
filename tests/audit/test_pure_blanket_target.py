"""Audit target of the linear-time pure-DP blanket histogram: replace-one pairs through its real ``run``, the law
of its released noise, and the ε × 2 mutant (``sigma_scale=0.5``: the mechanism run at 2ε, its geometric noise's
variance about a quarter of the claimed one) refuted."""

from __future__ import annotations

import pytest

from sparsedp.audit import audit, build_target
from sparsedp.errors import InvalidParameterError
from sparsedp.noise import InsecureSeededRandom


def test_blanket_target_runs_the_mutant_at_a_larger_epsilon():
    t = build_target("pure-blanket", epsilon=1.0, delta=0.0, sigma_scale=0.5)
    assert t.request.epsilon == 1.0 and t.runs_with.epsilon == 2.0 and t.bound == 1
    with pytest.raises(InvalidParameterError, match="margin_shift"):
        build_target("pure-blanket", epsilon=1.0, delta=0.0, margin_shift=-1)


def test_blanket_passes_when_calibrated():
    res = audit("pure-blanket", epsilon=1.0, delta=0.0, runs=200, law_runs=200, rng=InsecureSeededRandom(1))
    assert not res.contradicts and set(res.bounds) == {"shared", "new"}, str(res)


def test_blanket_at_twice_epsilon_is_refuted():
    res = audit("pure-blanket", epsilon=1.0, delta=0.0, sigma_scale=0.5, scenarios=(), law_runs=200,
                rng=InsecureSeededRandom(2))
    assert res.refutes_calibration and res.law.ratio < 0.5, str(res)
