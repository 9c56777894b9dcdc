"""``sparsedp reproduce --check``: paper numbers with citations and accepted ranges, statuses, exit code."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sparsedp import reproduce as rp
from sparsedp.cli import app

ROOT = Path(__file__).resolve().parents[2]


def test_paper_ranges_and_statuses():
    p = rp.Paper.rel(10.0, "Table 1", 0.1)
    assert (p.lo, p.hi) == pytest.approx((9.0, 11.0))
    assert rp.Headline.of("x", 10.5, p).status == "match"
    assert rp.Headline.of("x", 12.0, p).status == "MISMATCH"
    assert rp.Headline.of("x", math.nan, p).status == "MISMATCH"
    doc = rp.Paper.abs(0.7, "§2.9", 0.05, kind=rp.Kind.CLAIM, mismatch="fig-25")
    assert rp.Headline.of("x", 0.72, doc).status == "match"
    assert rp.Headline.of("x", 0.5, doc).status == "documented mismatch (docs/reproduce.md#fig-25)"
    ctx = rp.Paper.rel(3.94, "prototype", 0.01, kind=rp.Kind.RECOMPUTED)
    assert rp.Headline.of("x", 1.0, ctx).status == "context (not the paper's)"
    assert rp.Headline("x", 1.0, None).status == "no paper number"
    assert rp.Headline("x", 1.0, 2.0).status == "paper value without citation"


def test_every_documented_mismatch_has_its_section():
    anchors = set(re.findall(r"\{#([a-z0-9-]+)\}", (ROOT / "docs" / "reproduce.md").read_text()))
    used = set()
    for f in (ROOT / "src" / "sparsedp" / "reproduce").glob("*.py"):
        used |= set(re.findall(r'mismatch="([a-z0-9-]+)"', f.read_text()))
    assert used and used <= anchors, used - anchors


@pytest.fixture
def fake_targets(monkeypatch, tmp_path):
    def make(ref):
        def run(out_dir, fast):
            return rp.ReproResult("fake", out_dir / "fake.csv", None, (rp.Headline.of("q", 5.0, ref),))
        return run

    targets = {"fake-ok": rp.Target("fake-ok", "", make(rp.Paper.rel(5.0, "Table 1", 0.01))),
               "fake-doc": rp.Target("fake-doc", "", make(rp.Paper.rel(9.0, "Table 2", 0.01, mismatch="table-51"))),
               "fake-bad": rp.Target("fake-bad", "", make(rp.Paper.rel(9.0, "Table 3", 0.01)))}
    monkeypatch.setattr(rp._registry, "TARGETS", targets)
    monkeypatch.setattr(rp, "TARGETS", targets)
    return tmp_path


def test_cli_check_exit_codes(fake_targets):
    runner = CliRunner()
    out = str(fake_targets)
    res = runner.invoke(app, ["reproduce", "fake-ok", "--check", "--out", out])
    assert res.exit_code == 0 and "match" in res.output and "Table 1 (printed)" in res.output
    res = runner.invoke(app, ["reproduce", "fake-doc", "--check", "--out", out])
    assert res.exit_code == 0 and "documented mismatch (docs/reproduce.md#table-51)" in res.output
    res = runner.invoke(app, ["reproduce", "--all", "--check", "--out", out])
    assert res.exit_code == 1, res.output
    assert "fake-bad: q" in res.output and "MISMATCH" in res.output
    assert runner.invoke(app, ["reproduce", "fake-ok", "--all", "--out", out]).exit_code != 0


@pytest.mark.slow
def test_all_targets_fast_check_passes(tmp_path):
    """Every registered target at --fast: every paper number matched or its mismatch documented."""
    res = CliRunner().invoke(app, ["reproduce", "--all", "--check", "--fast", "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output[-3000:]
    assert "paper value without citation" not in res.output
