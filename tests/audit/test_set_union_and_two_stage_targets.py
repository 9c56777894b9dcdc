"""Audit targets of the set-union key discoveries and the two-stage release: their scenarios are the mechanisms'
real neighbours (the histogram steps on rows give exactly the audited weights / counts), each passes when
calibrated, and each catches its mutants (σ/2 and a threshold moved down)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from sparsedp.accounting.set_union import grid_weights
from sparsedp.audit import audit, build_target
from sparsedp.audit.runner import law_runs_needed
from sparsedp.audit.set_union import policy_scenarios, weighted_scenarios
from sparsedp.audit.targets import _engine
from sparsedp.audit.two_stage import two_stage_scenarios
from sparsedp.noise import InsecureSeededRandom

EPS, DELTA = 1.0, 1e-3


def _rows(units: list[list[int]]) -> pa.Table:
    uid = [u for u, keys in enumerate(units) for _ in keys]
    key = [k for keys in units for k in keys]
    return pa.table({"uid": pa.array(uid, pa.int64()), "key": pa.array(key, pa.int64())})


def _by_key(keys: pa.Table, values) -> dict[int, float]:
    return dict(zip(keys.column("key").to_pylist(), np.asarray(values).tolist()))


# ------------------------------------------------------------------------------------ Weighted Gaussian


def test_weighted_scenarios_are_what_the_histogram_step_computes():
    """A unit that kept t keys adds W_t to each: the rows of D' of "new" (one unit, l0 keys) and "new-1" (one unit,
    one key) give exactly the audited weight sums through the mechanism's own histogram step (the engine's)."""
    t = build_target("weighted-gaussian", epsilon=EPS, delta=DELTA, bound=3)
    w = grid_weights(3, t.mechanism.grid)
    scs = {s.name: s for s in weighted_scenarios(t.calibration, 3)}
    assert set(scs) == {"shared", "new", "new-1", "mixed"}
    for name, units in (("new", [[0, 1, 2]]), ("new-1", [[0]])):
        h = t.mechanism.histogram(_engine(), _rows(units), "uid", ["key"], t.request, InsecureSeededRandom(1))
        got = _by_key(h.keys, h.counts)
        assert got == {k: int(scs[name].counts1[k]) for k in range(len(units[0]))}
    for sc in scs.values():  # one unit of t keys: +W_t on at most l0 keys, nothing else moves
        diff = sc.counts1 - sc.counts0
        assert np.count_nonzero(diff) <= 3 and len(set(diff[diff != 0].tolist())) == 1
        assert int(diff[diff != 0][0]) in w.tolist()


def test_weighted_gaussian_passes_when_calibrated():
    res = audit("weighted-gaussian", epsilon=EPS, delta=DELTA, runs=20_000, law_runs=20_000,
                rng=InsecureSeededRandom(5))
    assert not res.contradicts, str(res)
    assert set(res.bounds) == {"shared", "new", "new-1", "mixed"}


@pytest.mark.parametrize("kw,check", [({"sigma_scale": 0.5}, "law"), ({"margin_shift": -1}, "law")])
def test_weighted_gaussian_mutants_are_refuted_by_the_law(kw, check):
    res = audit("weighted-gaussian", epsilon=EPS, delta=DELTA, scenarios=(), law_runs=20_000,
                rng=InsecureSeededRandom(6), **kw)
    assert res.refutes_calibration, str(res)


def test_weighted_gaussian_threshold_far_too_low_is_a_privacy_violation():
    """T moved down to the weight of a one-key unit: a new key is released about half the time, which D never
    does — the privacy check alone refutes the claim."""
    t = build_target("weighted-gaussian", epsilon=EPS, delta=DELTA)
    w = t.calibration.weights
    shift = -((int(t.calibration.threshold_int) - int(w[0])) // int(w[-1]))
    res = audit("weighted-gaussian", epsilon=EPS, delta=DELTA, margin_shift=shift, runs=2_000, law_runs=0,
                scenarios=("new-1",), rng=InsecureSeededRandom(7))
    assert res.refutes_claim and res.epsilon_lower > 3, str(res)


# ------------------------------------------------------------------------------------ Policy Gaussian


def test_policy_scenarios_are_what_the_policy_computes():
    """The audited weights are the ℓ2-descent weights the mechanism's own histogram step computes on rows."""
    t = build_target("policy-gaussian", epsilon=EPS, delta=DELTA, bound=2)
    scs = {s.name: s for s in policy_scenarios(t.calibration, 2)}
    shared = scs["shared"]
    h = int(round(shared.counts0[0] * np.sqrt(2)))  # H units with both keys, 1/√2 each
    for counts, n_units in ((shared.counts0, h), (shared.counts1, h + 1)):
        hist = t.mechanism.histogram(_engine(), _rows([[0, 1]] * n_units), "uid", ["key"], t.request,
                                     InsecureSeededRandom(2))
        got = _by_key(hist.keys, hist.weights)
        assert got == pytest.approx({0: counts[0], 1: counts[1]}, rel=1e-12)
    assert shared.counts1[0] <= t.calibration.gamma and shared.counts1[0] - shared.counts0[0] == pytest.approx(
        1 / np.sqrt(2))
    assert scs["new"].counts1.tolist() == pytest.approx([1 / np.sqrt(2)] * 2)


def test_policy_gaussian_passes_when_calibrated():
    res = audit("policy-gaussian", epsilon=EPS, delta=DELTA, runs=20_000, law_runs=20_000,
                rng=InsecureSeededRandom(8))
    assert not res.contradicts, str(res)


@pytest.mark.parametrize("kw", [{"sigma_scale": 0.5}, {"margin_shift": -1}])
def test_policy_gaussian_mutants_are_refuted(kw):
    res = audit("policy-gaussian", epsilon=EPS, delta=DELTA, scenarios=(), law_runs=20_000,
                rng=InsecureSeededRandom(9), **kw)
    assert res.refutes_calibration, str(res)


def test_policy_gaussian_half_sigma_is_a_privacy_violation():
    res = audit("policy-gaussian", epsilon=EPS, delta=DELTA, sigma_scale=0.5, runs=100_000, law_runs=0,
                scenarios=("shared",), rng=InsecureSeededRandom(10))
    assert res.refutes_claim, str(res)


# ------------------------------------------------------------------------------------ two-stage


def test_two_stage_scenarios_move_one_unit():
    t = build_target("two-stage", epsilon=EPS, delta=DELTA)
    scs = {s.name: s for s in two_stage_scenarios(t)}
    assert set(scs) == {"new", "shift"}
    for sc in scs.values():
        diff = sc.counts1 - sc.counts0
        assert set(np.unique(diff).tolist()) <= {0, 1} and np.count_nonzero(diff) <= t.bound
        assert sc.units1 == sc.units0 + 1
    p, q, c = scs["shift"].embed  # the stage-2 embedding at d = l0 keys
    assert scs["shift"].direction.tolist() == [q - p] * t.bound + [c]


def test_two_stage_passes_when_calibrated():
    res = audit("two-stage", epsilon=EPS, delta=DELTA, runs=200, law_runs=200, rng=InsecureSeededRandom(11))
    assert not res.contradicts, str(res)


def test_two_stage_half_sigma_is_refuted_by_stage_two_law():
    res = audit("two-stage", epsilon=EPS, delta=DELTA, sigma_scale=0.5, scenarios=(), law_runs=150,
                rng=InsecureSeededRandom(12))
    assert res.refutes_calibration and res.law.ratio < 0.5, str(res)


def test_two_stage_selection_threshold_moved_down_is_a_privacy_violation():
    t = build_target("two-stage", epsilon=EPS, delta=DELTA)
    res = audit("two-stage", epsilon=EPS, delta=DELTA, margin_shift=-int(t.reference.select_cal.tau), runs=200,
                law_runs=0, scenarios=("new",), rng=InsecureSeededRandom(13))
    assert res.refutes_claim, str(res)


# ------------------------------------------------------------------------------------ Misra–Gries


def test_misra_gries_half_sigma_is_refuted_by_the_law_of_its_csh():
    """The sketch of at most k keys is exact, so the number released follows rounded CSH's exact law at the
    sketch's calibration: at one noise std below the threshold σ/2 makes it collapse."""
    ref = build_target("misra-gries", epsilon=EPS, delta=DELTA)
    assert law_runs_needed(ref, build_target("misra-gries", epsilon=EPS, delta=DELTA, sigma_scale=0.5),
                           checks=1) < 60
    ok = audit("misra-gries", epsilon=EPS, delta=DELTA, scenarios=(), law_runs=80, rng=InsecureSeededRandom(14))
    assert not ok.contradicts, str(ok)
    bad = audit("misra-gries", epsilon=EPS, delta=DELTA, sigma_scale=0.5, scenarios=(), law_runs=80,
                rng=InsecureSeededRandom(14))
    assert bad.refutes_calibration, str(bad)


def test_cli_audits_the_new_targets():
    from typer.testing import CliRunner

    from sparsedp.cli import app

    runner = CliRunner()
    ok = runner.invoke(app, ["audit", "weighted-gaussian", "--epsilon", "1", "--delta", "1e-3", "--runs", "20000",
                             "--law-runs", "20000", "--seed", "3"])
    assert ok.exit_code == 0 and "no contradiction" in ok.output, ok.output
    bad = runner.invoke(app, ["audit", "weighted-gaussian", "--epsilon", "1", "--delta", "1e-3", "--runs", "20000",
                              "--law-runs", "20000", "--seed", "3", "--sigma-scale", "0.5"])
    assert bad.exit_code == 1 and "CONTRADICTION" in bad.output, bad.output
    err = runner.invoke(app, ["audit", "vector-sum", "--epsilon", "1", "--delta", "1e-5", "--margin-shift", "-1"])
    assert err.exit_code == 2 and "--margin-shift" in err.output, err.output
