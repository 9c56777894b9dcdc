"""sparsedp.plan() after the pipeline refactor against the calibrations captured before it (c337870).

GSHM/Laplace rows must be unchanged (the set-union row plan appends after them since issue 22 is not golden); top-k rows change only through the de-biased default: ``plan(top_k=k)``
lists the de-biased calibration (the "debiased" golden rows, captured with ``calibrate(..., debias=True)``)
first and the shifted variant (the old ``plan`` rows) after it; since issue 22 both are calibrated by the
certified CSH profile, with margins no larger than the golden ones (tests/golden/test_plan_golden.py checks
that the old accountants still give the golden numbers)."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest

import sparsedp as sd
from sparsedp.mechanisms.base import AutoRole

GOLDEN = json.loads((Path(__file__).parent / "plan_c337870.json").read_text())["rows"]


def _groups():
    g = defaultdict(list)
    for r in GOLDEN:
        g[(r["epsilon"], r["delta"], r["l0"], r["top_k"])].append(r)
    return sorted(g.items(), key=lambda kv: str(kv[0]))


def _same(cal, row):
    assert cal.mechanism == row["mechanism"] and cal.analysis == row["analysis"]
    for f in ("sigma", "tau", "noise_std", "delta_achieved"):
        assert getattr(cal, f) == pytest.approx(row[f], rel=1e-12, abs=0), f


@pytest.mark.parametrize("key,rows", _groups(), ids=lambda x: str(x) if isinstance(x, tuple) else "")
def test_plan_matches_the_golden_calibrations(key, rows):
    eps, dlt, l0, k = key
    plan = sd.plan(eps, dlt, max_groups_per_unit=l0, top_k=k)
    if l0 is not None:
        # since issue 22 plan lists the key-discovery mechanism (weighted-gaussian) after the count mechanisms; since
        # issue 33 every key-selection mechanism (AutoRole.DISCOVERY: optimal-partition at l0 = 1, …) is such a
        # keys-only row, after every count row
        names = [m.name for m in plan.mechanisms]
        assert all(m.auto_role is AutoRole.DISCOVERY for m in plan.mechanisms[len(rows):])
        assert ("weighted-gaussian" in names[len(rows):]) == (l0 <= 100)
        assert len(plan) >= len(rows)
        for cal, row in zip(plan, rows):
            _same(cal, row)
        assert names[:len(rows)] == [r["mechanism"] for r in rows]
    else:
        debiased = [r for r in rows if r["variant"] == "debiased"]
        shifted = [r for r in rows if r["variant"] == "shifted"]
        assert len(debiased) + len(shifted) == 2
        # since issue 32 plan also lists Algorithm 4's noise for both outputs, after the rounded rows
        assert len(plan) == 4 and [m.noise for m in plan.mechanisms] == ["rounded", "rounded", "alg4", "alg4"]
        # the certified profile (issue 22) replaced Thm 3.3/3.5 as the default: never a larger margin
        for cal, row in ((plan[0], debiased[0]), (plan[1], shifted[0])):
            assert cal.analysis == "rounded-exact" and cal.delta_achieved <= dlt
            assert cal.tau <= row["tau"]
        assert plan.mechanisms[0].debias is True and plan.mechanisms[1].debias is False
