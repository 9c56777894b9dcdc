"""``sd.Auto(objective="keys" | "counts")`` (issue 33): the keys objective chooses among every key-selection
mechanism (AutoRole.DISCOVERY) and the count mechanisms by the count-equivalent release threshold keep50; plan
lists the selection mechanisms as keys-only rows."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl
import pytest

import sparsedp as sd
from sparsedp.auto_keys import release_table
from sparsedp.errors import InvalidParameterError
from sparsedp.mechanisms import catalog
from sparsedp.mechanisms.base import AutoRole, ReleaseRequest
from sparsedp.mechanisms.set_union import WeightedGaussian
from sparsedp.noise import InsecureSeededRandom


def _req(l0: int) -> ReleaseRequest:
    return ReleaseRequest(epsilon=1.0, delta=1e-6, max_groups_per_unit=l0)


def test_keys_objective_picks_the_lowest_keep50_among_all_selection_mechanisms():
    discovery = {cls.name for cls in catalog.with_auto_role(AutoRole.DISCOVERY)}
    for l0 in (1, 5):
        mech, cal, reason, cands = sd.Auto(objective="keys").resolve(_req(l0))
        names = [c["mechanism"] for c in cands]
        offered = {c.name for c in catalog.with_auto_role(AutoRole.DISCOVERY) if c.auto_offer(_req(l0), None)}
        assert set(names) == {"gshm", "laplace"} | offered and offered <= discovery
        keep = [c["keep50"] for c in cands if "keep50" in c]
        assert keep == sorted(keep) and names[0] == mech.name, l0
        # the count mechanisms are beaten or tied by a selection mechanism (the Weighted Gaussian at l0 = 5: 48.9
        # against GSHM's 50; at l0 = 1 the Laplace threshold 15, or the optimal l0 = 1 rule's 14 where registered)
        assert keep[0] <= min(c["keep50"] for c in cands if c["mechanism"] in ("gshm", "laplace"))
        assert {c["mechanism"]: c["publishes"] for c in cands}["weighted-gaussian"] == "key weights"
        assert "objective 'keys'" in reason and "no budget spent" in reason and f"publishes {cands[0]['publishes']}" in reason
    # the counts objective (default) keeps choosing among the count mechanisms by their margin
    assert sd.Auto().resolve(_req(5))[0].name == sd.Auto(objective="counts").resolve(_req(5))[0].name == "gshm"
    assert sd.Auto(discover=True).resolve(_req(5))[0].name == "weighted-gaussian"  # the older spelling


@pytest.mark.parametrize("name", ["gshm", "laplace"])
def test_keep50_is_where_the_exact_release_probability_reaches_one_half(name):
    """keep50 = pre-threshold + margin of a count mechanism is the smallest count released with probability
    >= 1/2, by the exact release law of its integer noise (auto_keys.release_table, M = 2^30)."""
    _, _, _, cands = sd.Auto(objective="keys").resolve(_req(2))
    keep = {c["mechanism"]: c["keep50"] for c in cands}[name]
    mech = sd.GSHM() if name == "gshm" else sd.Laplace()
    cal = mech.calibrate(_req(2))
    q = release_table(cal, mech.count_floor(), scale=1 << 30).q / (1 << 30)
    k = int(keep)
    assert q[k] >= 0.5 - 1e-9 and q[k - 1] < 0.5


def test_a_registered_selection_mechanism_joins_the_keys_objective_and_plan_as_keys_only():
    @dataclass(frozen=True)
    class Coarse(WeightedGaussian):  # a second selection mechanism registered in the discovery role
        name = "test-selection"
        plan_group = 0  # even when it asks to be ranked with the count rows, plan lists it as keys only
        auto_role = AutoRole.DISCOVERY

        @classmethod
        def auto_offer(cls, request, group):
            return cls(grid=64)

        @classmethod
        def plan_rows(cls, query):  # its own planner, asking for the count group (0)
            m = cls(grid=64)
            return [(m, m.calibrate(query.request()), 0)]

    catalog.register(Coarse)
    try:
        _, _, _, cands = sd.Auto(objective="keys").resolve(_req(4))
        assert "test-selection" in [c["mechanism"] for c in cands]
        p = sd.plan(1.0, 1e-6, max_groups_per_unit=4)
        names = [m.name for m in p.mechanisms]
        counts = [i for i, m in enumerate(p.mechanisms) if m.auto_role is not AutoRole.DISCOVERY]
        assert max(counts) < names.index("test-selection") and names[0] == "gshm"
    finally:
        catalog.unregister("test-selection")


def test_plan_cli_shows_selection_mechanisms_as_keys_only_rows():
    from typer.testing import CliRunner

    from sparsedp.cli import app
    from sparsedp.cli.plan import row_use

    assert row_use(WeightedGaussian(), True) == "keys only (key weights, not counts)"
    assert row_use(sd.GSHM(), True) == "release uses this"
    r = CliRunner().invoke(app, ["plan", "--epsilon", "1", "--delta", "1e-6", "--l0", "5", "--noise", "discrete"],
                           env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    row = next(line for line in r.output.splitlines() if "weighted-gaussian" in line)
    assert "keys only" in row and "release uses this" not in row


def test_release_and_cli_with_the_keys_objective(tmp_path):
    g = np.random.default_rng(2)
    n = 4000
    df = pl.DataFrame({"unit": g.integers(0, 1500, n), "key": [f"q{x}" for x in g.zipf(1.5, n) % 300]})
    res = sd.release(df, "unit", "key", 1.0, 1e-6, max_groups_per_unit=1, mechanism=sd.Auto(objective="keys"),
                     rng=InsecureSeededRandom(3))
    want = sd.Auto(objective="keys").resolve(_req(1))[0]
    assert res.report.mechanism == want.name and "objective 'keys'" in res.report.reason
    assert [c for c in res.table.columns if not c.endswith(("_lo", "_hi"))] == (
        ["key", "count"] if want.value_column("count") == "count" else ["key"])
    from typer.testing import CliRunner

    from sparsedp.cli import app

    path = tmp_path / "in.parquet"
    df.write_parquet(path)
    base = ["release", str(path), "--unit", "unit", "--by", "key", "--epsilon", "1", "--delta", "1e-6",
            "--max-groups", "5"]
    r = CliRunner().invoke(app, base + ["--objective", "keys"], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    assert "weighted-gaussian" in r.output
    bad = CliRunner().invoke(app, base + ["--objective", "rows"])
    assert bad.exit_code != 0 and "--objective" in bad.output
    with pytest.raises(InvalidParameterError, match="objective"):
        sd.Auto(objective="most")


def test_two_stage_select_auto_chooses_stage_one_by_the_keys_objective_and_says_so():
    g = np.random.default_rng(4)
    n = 6000
    df = pl.DataFrame({"unit": g.integers(0, 3000, n), "key": [f"q{x}" for x in g.zipf(1.5, n) % 200]})
    for l0 in (1, 5):
        res = sd.release(df, "unit", "key", 1.0, 1e-6, max_groups_per_unit=l0, mechanism=sd.TwoStage(select="auto"),
                         rng=InsecureSeededRandom(1))
        r1 = ReleaseRequest(epsilon=0.5, delta=5e-7, max_groups_per_unit=l0)
        want = sd.Auto(objective="keys").resolve(r1)[0].name  # public parameters only
        notes = [x for x in res.report.notes if x.startswith("stage 1 chosen by select='auto'")]
        assert len(notes) == 1 and notes[0].split(": ", 1)[1].startswith(want), notes
        assert f"stage 1 {want}" in " ".join(res.report.notes)
        assert res.table.columns == ["key", "count", "count_lo", "count_hi"]
    # the bound too, privately (quantile rule), with the mechanism chosen at that bound
    opts = sd.AutoBound(candidates=(1, 2, 4))
    res = sd.release(df, "unit", "key", 1.0, 1e-6, max_groups_per_unit=opts, mechanism=sd.TwoStage(select="auto"),
                     rng=InsecureSeededRandom(2))
    assert res.report.auto_bound["bound"] in opts.candidates
    assert any(x.startswith("stage 1 chosen by select='auto'") for x in res.report.notes)
    with pytest.raises(InvalidParameterError, match="group"):
        sd.TwoStage(select=sd.Auto(group="key"))
