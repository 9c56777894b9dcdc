"""Typed noise laws (sparsedp.accounting.laws) and the typed Calibration that carries them."""

from __future__ import annotations

import dataclasses
import json
import math
from fractions import Fraction

import numpy as np
import pytest

from sparsedp.accounting import calibrate, compare, correlated_gaussian_calibrate, laws
from sparsedp.accounting.calibration import Calibration, Comparison, Neighbours
from sparsedp.audit.runner import scaled_calibration
from sparsedp.errors import InvalidParameterError
from sparsedp.mechanisms import noise_and_filter

SECURE_INTEGER = {
    laws.DiscreteGaussian(Fraction(9, 2)): (True, True),
    laws.DiscreteLaplace(Fraction(3)): (True, True),
    laws.RoundedCorrelatedGaussian(2.0, 1.5): (True, True),
    laws.DiscreteCorrelatedGaussian(Fraction(16), Fraction(8)): (True, False),
    laws.DiscreteCorrelatedLaplace(Fraction(2), Fraction(2)): (True, True),
    laws.ScaledDiscreteLaplace(Fraction(5), 3): (True, False),
    laws.DiscreteDenseCorrelatedGaussian(Fraction(100), 3): (True, False),
    laws.Gaussian(2.0): (False, False),
    laws.Laplace(2.0): (False, False),
    laws.CorrelatedGaussian(2.0, 0.0): (False, False),
    laws.DenseCorrelatedGaussian(4.0, 2.0): (False, False),
    laws.ReleaseCurve(64, (1, 1 << 64)): (True, True),
}


def test_every_law_states_secure_and_integer():
    assert set(map(type, SECURE_INTEGER)) == set(laws.LAWS)
    for law, (secure, integer) in SECURE_INTEGER.items():
        assert (law.secure, law.integer) == (secure, integer), law
        doc = (type(law).__doc__ or "").lower()
        assert "drawn" in doc or "sampled" in doc or "insecure" in doc, type(law)  # names its sampler


def test_laws_are_frozen_and_validated():
    with pytest.raises(dataclasses.FrozenInstanceError):
        laws.DiscreteGaussian(Fraction(2)).sigma2 = Fraction(3)  # type: ignore[misc]
    with pytest.raises(InvalidParameterError):
        laws.DiscreteGaussian(2.5)  # a float is not an exact rational scale
    with pytest.raises(InvalidParameterError):
        laws.DiscreteLaplace(Fraction(0))
    with pytest.raises(InvalidParameterError):
        laws.Gaussian(float("nan"))
    with pytest.raises(InvalidParameterError):
        laws.DiscreteDenseCorrelatedGaussian(Fraction(4), 0)
    assert laws.DiscreteGaussian(4).sigma2 == Fraction(4) and isinstance(laws.DiscreteGaussian(4).sigma2, Fraction)


def test_law_as_dict_is_json_with_exact_fractions():
    d = laws.law_as_dict(laws.DiscreteCorrelatedGaussian(Fraction(1, 3), Fraction(2, 7)))
    assert json.loads(json.dumps(d)) == {"law": "DiscreteCorrelatedGaussian", "sigma2": "1/3", "shared_sigma2": "2/7"}
    assert Fraction(d["sigma2"]) == Fraction(1, 3)


def test_calibration_requires_a_law_and_a_comparison():
    base = dict(mechanism="gshm", analysis="x", epsilon=1.0, delta=1e-6, sigma=1.0, tau=3.0, noise_std=1.0)
    with pytest.raises(TypeError):
        Calibration(**base)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Calibration(**base, noise={"sigma2": 1}, comparison=Comparison.GE)  # type: ignore[arg-type]
    c = Calibration(**base, noise=laws.DiscreteGaussian(Fraction(1)), comparison=">=")  # type: ignore[arg-type]
    assert c.comparison is Comparison.GE and c.neighbours is Neighbours.ADD_REMOVE and c.discrete


@pytest.mark.parametrize("model", [{"l0": 3}, {"top_k": 20}, {"k": 7}, {"d": 50}])
def test_discrete_flag_is_the_law_and_the_comparison_is_explicit(model):
    cals = compare(1.0, 1e-6, discrete=None, **model)
    assert {c.discrete for c in cals} == {True, False}
    for c in cals:
        assert c.discrete is c.noise.secure
        if c.mechanism == "correlated-gaussian":
            assert c.comparison is Comparison.NONE and c.tau == 0.0
        elif c.discrete and not isinstance(c.noise, laws.DiscreteCorrelatedGaussian):
            assert c.comparison is Comparison.GE and c.tau == int(c.tau)  # integer margins, rule >=
        else:
            assert c.comparison is Comparison.GT  # continuous analyses and Algorithm 4 (seed 000): strict


def test_dense_law_matches_the_accountants_noise():
    """The embedding law's implied stds are those of seed 002 Lemma 3.5 (accounting.correlated)."""
    nz = correlated_gaussian_calibrate(1.0, 1e-6, 100)
    cal = calibrate("correlated-gaussian", epsilon=1.0, delta=1e-6, d=100, discrete=False)
    law = cal.noise
    assert isinstance(law, laws.DenseCorrelatedGaussian) and cal.d == 100
    assert law.independent_std == pytest.approx(nz.independent_std, rel=1e-12)
    assert law.shared_std == pytest.approx(nz.shared_std, rel=1e-12)
    assert law.n_estimate_std == pytest.approx(nz.count_std, rel=1e-12)
    assert math.hypot(law.independent_std, law.shared_std) == pytest.approx(cal.noise_std, rel=1e-12)


def test_dense_calibration_has_no_per_key_kernel():
    cal = calibrate("correlated-gaussian", epsilon=1.0, delta=1e-6, d=10)
    with pytest.raises(InvalidParameterError, match="no threshold test"):
        noise_and_filter(np.array([5, 6], np.int64), cal, 1, None)


def test_scaled_calibration_replaces_the_law_exactly():
    for cal in (calibrate("gshm", epsilon=1.0, delta=1e-6, l0=2),
                calibrate("laplace", epsilon=1.0, delta=1e-6, l0=2, discrete=False),
                calibrate("topk-csh", epsilon=1.0, delta=1e-6, top_k=10, csh_noise="alg4")):
        half = scaled_calibration(cal, 0.5)
        assert type(half.noise) is type(cal.noise) and half.comparison is cal.comparison and half.tau == cal.tau
        for f in dataclasses.fields(cal.noise):
            a, b = getattr(cal.noise, f.name), getattr(half.noise, f.name)
            assert b == (a / 4 if "sigma2" in f.name else a / 2)


def test_misra_gries_calibrations_are_typed(rng):
    from sparsedp.sketches.misra_gries import MisraGries
    from sparsedp.sketches.private_mg import merged_private_misra_gries, private_misra_gries

    sk = MisraGries(20).update(np.arange(200) % 30)
    pmg = private_misra_gries(sk, epsilon=1.0, delta=1e-6, rng=rng).calibration
    assert pmg.noise == laws.DiscreteCorrelatedLaplace(Fraction(1), Fraction(1)) and pmg.k == 20
    assert pmg.comparison is Comparison.GE and pmg.discrete
    merged = merged_private_misra_gries(sk, epsilon=1.0, delta=1e-6, rng=rng).calibration
    assert merged.noise == laws.DiscreteLaplace(Fraction(20)) and merged.comparison is Comparison.GE
