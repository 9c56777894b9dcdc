"""sd.plan / ``sparsedp plan`` with quantiles and partial key sets (issue 34): what each part costs and its
expected error, computed from the same split and calibrations a release uses; refusals name the argument."""

from __future__ import annotations

import math

import numpy as np
import pytest
from typer.testing import CliRunner

import sparsedp as sd
from sparsedp.accounting.quantiles import permute_and_flip_law, quantile_utilities, split_budget
from sparsedp.cli import app
from sparsedp.errors import InvalidParameterError


def _rows(p):
    return [(m.describe(), c.tau, c.noise_std) for m, c in zip(p.mechanisms, p)]


def test_plan_with_quantiles_rows_and_split():
    qs = [sd.Median("x", 0, 600), sd.Quantile("x", 0.9, 0, 600, cells=256)]
    p = sd.plan(1.0, 1e-6, 5, aggregates=[sd.Count(), *qs])
    split = split_budget(1.0, 1e-6, 5, [None, None])
    base = sd.plan(split.count_epsilon, 1e-6, 5)
    assert _rows(p)[:len(base)] == _rows(base)  # the count rows: the count's part of epsilon
    qrows = list(p)[len(base):]
    assert [r.quantile for r in qrows] == qs
    for r, e, ek in zip(qrows, split.quantile_epsilons, split.key_epsilons):
        assert r.epsilon == e and r.epsilon_key == ek and r.l0 == 5
    rows = p.rows()[len(base):]
    assert rows[0]["rank_error_95"] == qrows[0].rank_error_95 and rows[0]["epsilon_per_key"] == split.key_epsilons[0]
    assert "median_x" in p.title and "count rows at epsilon=0.2" in p.title


@pytest.mark.parametrize("level, counts", [(0.5, [3, 0, 9, 1, 30, 2, 0, 7]), (0.9, [12, 0, 1, 5, 0, 0, 40, 3])])
def test_quantile_rows_bounds_hold_for_the_mechanisms_law(level, counts):
    """The row's rank statements hold for the exact law of the per-key mechanism on a key: the released cell's
    utility is below the best by more than b * rank_error_95 with probability <= 5 %, and its mean gap is at most
    b * rank_error_mean."""
    q = sd.Quantile("x", level, 0, 8, cells=len(counts))
    (row,) = list(sd.plan(1.0, 1e-6, 2, aggregates=[q]))[-1:]
    u = quantile_utilities(np.array(counts), q.level)
    law = permute_and_flip_law(u, row.epsilon_key, q.sensitivity)
    gap = u.max() - u
    b = q.level.denominator
    assert law[gap > b * row.rank_error_95].sum() <= 0.05
    assert float(law @ gap) <= b * row.rank_error_mean
    assert math.isclose(row.rank_error_95 * b * row.epsilon_key / (2 * q.sensitivity), math.log(len(counts) / 0.05))


@pytest.mark.parametrize("kw, param", [
    (dict(max_groups_per_unit=None, top_k=10), "max_groups_per_unit"),
    (dict(max_groups_per_unit=5, keys=["a", "b"]), "keys"),
    (dict(max_groups_per_unit=5, insecure_float=True), "insecure_float"),
])
def test_plan_with_quantiles_refusals_name_the_argument(kw, param):
    with pytest.raises(InvalidParameterError) as e:
        sd.plan(1.0, 1e-6, aggregates=[sd.Median("x", 0, 1)], **kw)
    assert e.value.param == param


def test_plan_with_a_partial_key_set_shows_both_stages():
    p = sd.plan(1.0, 1e-6, 5, keys={"country": ["de", "fr", "us"]}, selected=40)
    one = sd.plan(0.5, 5e-7, 5)
    two = sd.plan(0.5, 5e-7, None, keys=3 * 40)
    assert [r[1:] for r in _rows(p)] == [r[1:] for r in _rows(one) + _rows(two)]
    stages = [m.stage for m in p.mechanisms]
    assert stages == [1] * len(one) + [2] * len(two)
    chosen = [m for m in p.mechanisms if m.chosen]  # the stages the release uses: one row each
    from sparsedp.mechanisms import registry
    from sparsedp.mechanisms.base import ReleaseRequest

    mixed = registry.builtin_module("mixed_keys")
    cal = mixed.MixedKeys(keys=mixed.key_set({"country": ["de", "fr", "us"]}, ["country", "q"])).calibrate(
        ReleaseRequest(epsilon=1.0, delta=1e-6, max_groups_per_unit=5))
    assert [(m.stage, m.name) for m in chosen] == [(1, cal.select.name), (2, cal.count.name)]
    assert chosen[1].describe() == "stage 2 (counts country x selected: 120 keys): " + cal.count.describe()
    assert "country public (3 listed)" in p.title
    with pytest.raises(InvalidParameterError, match="max_groups_per_unit"):
        sd.plan(1.0, 1e-6, keys={"country": ["de"]})
    with pytest.raises(InvalidParameterError, match="selected"):
        sd.plan(1.0, 1e-6, 5, keys={"country": ["de"]}, selected=0)


def test_cli_plan_quantiles_and_partial_keys(tmp_path):
    runner = CliRunner()
    res = runner.invoke(app, ["plan", "--epsilon", "1", "--delta", "1e-6", "--l0", "5", "--median", "x:0:600"],
                        env={"COLUMNS": "220"})
    assert res.exit_code == 0, res.output
    row = list(sd.plan(1.0, 1e-6, 5, aggregates=[sd.Median("x", 0, 600)]))[-1]
    assert f"median_x: rank error <= {row.rank_error_95:,.1f} values at 95 %" in res.output
    assert "count rows at epsilon=0.2" in res.output
    keys = tmp_path / "countries.txt"
    keys.write_text("de\nfr\nus\n")
    res = runner.invoke(app, ["plan", "--epsilon", "1", "--delta", "1e-6", "--l0", "5", "--keys",
                              f"country={keys}", "--selected", "10"], env={"COLUMNS": "220"})
    assert res.exit_code == 0, res.output
    assert "stage 2: counts country x selected: 30 keys; release uses this" in res.output
    assert "stage 1: selects the private values; release uses this" in res.output
    days = tmp_path / "days.txt"
    days.write_text("mon\ntue\n")
    res = runner.invoke(app, ["plan", "--epsilon", "1", "--delta", "1e-6", "--l0", "5", "--keys", f"country={keys}",
                              "--keys", f"day={days}", "--selected", "10"], env={"COLUMNS": "220"})  # repeatable
    assert res.exit_code == 0, res.output
    assert "stage 2: counts country, day x selected: 60 keys; release uses this" in res.output
    bad = runner.invoke(app, ["plan", "--epsilon", "1", "--delta", "1e-6", "--l0", "5", "--keys", "country"])
    assert bad.exit_code == 2 and "--keys" in bad.output and "COL=FILE" in bad.output
    bad = runner.invoke(app, ["plan", "--epsilon", "1", "--delta", "1e-6", "--median", "x:0"])
    assert bad.exit_code == 2 and "--median takes COLUMN:LOWER:UPPER" in bad.output
