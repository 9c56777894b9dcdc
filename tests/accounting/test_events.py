"""Typed privacy events (accounting/events.py) and the profile-derived pair (pld.hull_pair)."""

from __future__ import annotations

import json
import math
from fractions import Fraction

import numpy as np
import pytest

from sparsedp.accounting import calibrate
from sparsedp.accounting.calibration import Neighbours
from sparsedp.accounting.events import (ApproxDPEvent, CSHEvent, DiscreteGSHMEvent, GaussianEvent, GSHMEvent,
                                        LaplaceThresholdEvent, PureEvent, SequenceEvent, event_from_dict,
                                        event_of)
from sparsedp.accounting.gaussian import gaussian_delta
from sparsedp.accounting.pld import from_profile, hull_pair
from sparsedp.errors import InvalidParameterError


def _hs(losses, mass, inf, eps):
    """H_{e^ε} of a pair given by its loss law under P (independent of GridPLD)."""
    return float(np.sum(mass * np.maximum(0.0, -np.expm1(eps - losses)))) + inf


@pytest.mark.parametrize("mech, kw, cls", [
    ("gshm", dict(l0=10), DiscreteGSHMEvent),
    ("gshm", dict(l0=10, discrete=False), GSHMEvent),
    ("laplace", dict(l0=3), LaplaceThresholdEvent),
    ("csh", dict(k=10), CSHEvent),
])
def test_calibration_event_profile_is_the_accountants(mech, kw, cls):
    cal = calibrate(mech, epsilon=0.5, delta=1e-7, **kw)
    ev = event_of(cal)
    assert type(ev) is cls and ev.epsilon == cal.epsilon and ev.delta == cal.delta
    assert ev.neighbours is Neighbours.ADD_REMOVE
    # the same number the calibration reports (numbers identical to the accountant's)
    assert ev.delta_at(cal.epsilon) == pytest.approx(cal.delta_achieved, rel=1e-12)
    assert ev.delta_at(cal.epsilon) <= cal.delta
    # vectorised
    d = ev.delta_at(np.array([0.1, 0.5, 1.0]))
    assert d.shape == (3,) and np.all(np.diff(d) <= 0)
    # JSON round trip of the parameters (what the ledger stores)
    back = event_from_dict(json.loads(json.dumps(ev.to_dict())))
    assert back == ev and back.describe() == ev.describe()
    assert "epsilon=0.5" in ev.describe()


def test_events_without_a_profile_family_are_their_basic_charge():
    cal = calibrate("correlated-gaussian", epsilon=0.5, delta=1e-7, d=100)
    ev = event_of(cal)
    assert isinstance(ev, (ApproxDPEvent, GaussianEvent))
    assert ev.delta_at(0.5) <= 1e-7 * (1 + 1e-12)


def test_pure_and_sequence_events():
    p = PureEvent(epsilon=0.3, delta=0.0)
    with pytest.raises(InvalidParameterError, match="delta=0"):
        PureEvent(epsilon=0.3, delta=1e-9)
    g = GaussianEvent(mu=0.5, epsilon=2.0, delta=float(gaussian_delta(0.5, 2.0)))
    s = SequenceEvent([p, g])
    assert s.epsilon == pytest.approx(2.3) and s.delta == g.delta
    # the composed profile: at ε = 0.3 + e it is at most the Gaussian's δ(e) (pure part shifts ε), and at
    # least the exact composition's (the Gaussian alone)
    for e in (0.2, 0.6, 1.2):
        d = s.delta_at(0.3 + e)
        assert float(gaussian_delta(0.5, 0.3 + e)) - 1e-12 <= d <= float(gaussian_delta(0.5, e)) + 1e-9
    back = event_from_dict(json.loads(json.dumps(s.to_dict())))
    assert back == s
    with pytest.raises(InvalidParameterError, match="one neighbouring relation"):
        SequenceEvent([p, PureEvent(epsilon=0.1, delta=0.0, neighbours=Neighbours.REPLACE_ONE)])


def test_hull_pair_of_randomised_response_is_exact():
    e0, d0 = 1.0, 0.01
    prof = ApproxDPEvent(epsilon=e0, delta=d0)
    grid = np.linspace(0.0, 3.0, 31)
    losses, mass, inf = hull_pair(grid, prof.delta_at(grid))
    # Kairouz–Oh–Viswanath's pair: losses ±ε0 with P-masses (1−δ)e^ε/(1+e^ε), (1−δ)/(1+e^ε), and δ at +∞
    assert losses == pytest.approx([-e0, e0])
    assert mass == pytest.approx([(1 - d0) / (1 + math.e), (1 - d0) * math.e / (1 + math.e)])
    assert inf == pytest.approx(d0)


@pytest.mark.parametrize("mu", [0.1, 0.5, 2.0])
def test_hull_pair_dominates_the_profile_between_samples_and_in_reverse(mu):
    grid = np.linspace(0.0, 8.0, 41)
    losses, mass, inf = hull_pair(grid, gaussian_delta(mu, grid))
    assert float(np.sum(mass)) + inf == pytest.approx(1.0, abs=1e-12)  # a probability law
    for e in np.linspace(0.0, 9.0, 37):  # off the sample grid too
        assert _hs(losses, mass, inf, e) >= float(gaussian_delta(mu, e)) - 1e-15
        # the swapped order: H_{e^{-ε}}(P‖Q) = 1 − e^{−ε} + e^{−ε}·H_{e^ε}(Q‖P) must dominate as well
        assert _hs(losses, mass, inf, -e) >= 1 - math.exp(-e) + math.exp(-e) * float(gaussian_delta(mu, e)) - 1e-12
    # and it is tight at the samples
    for e in grid[:10]:
        assert _hs(losses, mass, inf, e) == pytest.approx(float(gaussian_delta(mu, e)), rel=1e-9, abs=1e-15)


def test_discretised_pld_is_pessimistic():
    grid = np.linspace(0.0, 6.0, 61)
    losses, mass, inf = hull_pair(grid, gaussian_delta(0.5, grid))
    pld = from_profile(grid, gaussian_delta(0.5, grid))
    for e in (0.0, 0.3, 1.0, 2.5):
        exact = _hs(losses, mass, inf, e)
        assert exact <= pld.hockey_stick(e)[0] <= exact * (1 + 1e-3) + 1e-9


def test_event_pld_never_looser_than_its_charge_nor_its_profile():
    cal = calibrate("gshm", epsilon=0.5, delta=1e-7, l0=10)
    ev = event_of(cal)
    pld = ev.pld()
    for e in (0.25, 0.5, 1.0, 2.0):
        rr = ApproxDPEvent(epsilon=0.5, delta=1e-7).delta_at(e)
        assert ev.delta_at(e) <= pld.hockey_stick(e)[0] <= min(rr, 2 * ev.delta_at(e)) + 1e-10


def test_gshm_event_stores_fractions_exactly():
    ev = DiscreteGSHMEvent(sigma2=Fraction(424308263, 524288), margin=161, l0=10, epsilon=0.5, delta=1e-7)
    d = ev.to_dict()
    assert d["sigma2"] == "424308263/524288" and d["event"] == "gshm-discrete" and d["neighbours"] == "ADD_REMOVE"
    assert event_from_dict(d).sigma2 == Fraction(424308263, 524288)
    with pytest.raises(InvalidParameterError, match="not a stored privacy event"):
        event_from_dict({"event": "nope"})


def test_set_union_and_aggregate_events_carry_their_accountants_profiles():
    from sparsedp.accounting.aggregates import calibrate_joint_gshm
    from sparsedp.accounting.events import AggregateGSHMEvent, SetUnionEvent, event_of
    from sparsedp.accounting.set_union import calibrate_weighted_gaussian

    su = calibrate_weighted_gaussian(0.5, 1e-7, 5)
    ev = event_of(su)
    assert isinstance(ev, SetUnionEvent) and ev.delta_at(0.5) == pytest.approx(su.delta_achieved, rel=1e-12)
    joint = calibrate_joint_gshm(0.5, 1e-7, 5, (1, 2))
    ej = event_of(joint)
    assert isinstance(ej, AggregateGSHMEvent) and ej.delta_at(0.5) == pytest.approx(joint.parts.total, rel=1e-12)
    assert event_from_dict(json.loads(json.dumps(ej.to_dict()))) == ej
    for e in (ev, ej):  # the composed form implies the charge up to the discretisation's slack
        assert e.pld().hockey_stick(0.5 + 1e-4)[0] <= 1e-7 * (1 + 1e-3)
