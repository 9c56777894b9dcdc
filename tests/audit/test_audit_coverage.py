"""Audit coverage: every registered mechanism has an audit target (or is named as lacking one), the report names
each mechanism's noise scale, and the defaults fit each mechanism's model."""

from __future__ import annotations

import math

import pytest

from sparsedp.audit.runner import AuditResult, noise_figures
from sparsedp.audit.targets import AUDITABLE, auditable, build_target, default_bound
from sparsedp.errors import InvalidParameterError
from sparsedp.mechanisms import registry


@pytest.mark.xdist_group("topk-csh")  # builds top-k CSH: with the other top-k tests, one calibration
def test_every_registered_mechanism_has_an_audit_target():
    """Every registered mechanism is a built-in audit target (a newly registered built-in without one fails here)
    and auditable() lists them all."""
    names = registry.names()
    missing = [n for n in names if n not in AUDITABLE]
    assert not missing, f"registered mechanisms without an audit target: {missing} (add one in sparsedp.audit)"
    assert set(names) <= set(auditable())
    for n in names:
        if n in AUDITABLE:  # every target builds with its default bound, at δ > 0 or (pure DP) δ = 0
            try:
                t = build_target(n, epsilon=1.0, delta=1e-3)
            except InvalidParameterError:
                t = build_target(n, epsilon=1.0, delta=0.0)
            assert t.bound == default_bound(n)


@pytest.mark.parametrize("name", ["pure-sparse", "compact", "keep-heavy"])
def test_pure_mechanisms_default_to_one_key_per_unit(name):
    assert default_bound(name) == 1
    assert build_target(name, epsilon=1.0, delta=0.0).bound == 1


def test_misra_gries_reports_its_csh_noise_scale_and_takes_the_sigma_mutant():
    t = build_target("misra-gries", epsilon=1.0, delta=1e-3)
    sigma, margin = noise_figures(t.calibration)
    assert sigma == t.calibration.csh.sigma and margin == t.calibration.csh.tau and math.isfinite(sigma)
    half = build_target("misra-gries", epsilon=1.0, delta=1e-3, sigma_scale=0.5)
    assert half.calibration.csh.sigma == pytest.approx(sigma / 2)
    assert float(half.calibration.csh.noise.sigma) == pytest.approx(sigma / 2)
    assert half.reference == t.reference  # the accountant's calibration is unchanged
    res = AuditResult(mechanism="misra-gries", picked="misra-gries", epsilon=1.0, delta=1e-3, bound=2, runs=100,
                      confidence=0.95, sigma_scale=1.0, margin_shift=0, sigma=sigma, threshold_margin=margin,
                      bounds={})
    assert "nan" not in str(res) and f"{sigma:.6g}" in str(res)
    pure = build_target("pure-sparse", epsilon=1.0, delta=0.0)
    assert math.isnan(noise_figures(pure.calibration)[0])
    res = AuditResult(mechanism="pure-sparse", picked="pure-sparse", epsilon=1.0, delta=0.0, bound=1, runs=100,
                      confidence=0.95, sigma_scale=1.0, margin_shift=0, sigma=float("nan"),
                      threshold_margin=float("nan"), bounds={})
    assert "nan" not in str(res)
