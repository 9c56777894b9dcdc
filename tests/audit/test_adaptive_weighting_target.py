"""The audit targets of ``mad`` and ``mad2r`` (sparsedp.audit.adaptive_weighting): scenario rows encode units, the
real release path runs on them, the law check accepts the calibrated mechanism and refutes σ/2 and a threshold
three steps low."""

from __future__ import annotations

import numpy as np
import pytest

from sparsedp.audit import audit
from sparsedp.audit.adaptive_weighting import rounds_rows
from sparsedp.audit.targets import build_target
from sparsedp.noise import InsecureSeededRandom


def test_scenario_rows_encode_one_key_units_and_the_added_unit():
    rows = rounds_rows(np.array([4, 5, 1]), copies=2)   # key 0: 2 units; key 1: 2 units + added; key 2: added
    per_copy = rows.filter(rows["key"] < 3)
    assert sorted(per_copy.group_by("key").len().rows()) == [(0, 2), (1, 3), (2, 1)]
    per_unit = per_copy.group_by("unit").len()
    added = per_unit.filter(per_unit["len"] > 1)
    assert added.height == 1 and added["len"][0] == 2
    assert rows["unit"].n_unique() == 2 * (2 + 2 + 1)   # copies share no unit
    assert set(rows.filter(rows["key"] >= 3)["key"].to_list()) == {3, 4, 5}


@pytest.mark.parametrize("name", ["mad2r"])  # mad runs the same rounds code (mad's target: sparsedp audit mad)
def test_law_check_accepts_the_mechanism_and_refutes_the_broken_ones(name):
    kw = dict(epsilon=1.0, delta=1e-3, scenarios=(), law_runs=1500)
    ok = audit(name, rng=InsecureSeededRandom(3), **kw)
    assert not ok.contradicts
    assert audit(name, sigma_scale=0.5, rng=InsecureSeededRandom(4), **kw).contradicts
    assert audit(name, margin_shift=-3, rng=InsecureSeededRandom(5), **kw).contradicts
    t = build_target(name, epsilon=1.0, delta=1e-3, sigma_scale=0.5)
    assert t.reference != t.calibration and len(t.calibration.rounds) == 2
