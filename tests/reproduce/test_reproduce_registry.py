"""The reproduce registry and the ``sparsedp reproduce`` command."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from sparsedp import reproduce as rp
from sparsedp.cli import app
from sparsedp.errors import InvalidParameterError


def test_thesis_targets_registered():
    names = [t.name for t in rp.list_targets()]
    assert names == sorted(names)
    for n in ("thesis-fig4.1", "thesis-table5.1", "thesis-plan-skew"):
        assert n in rp.TARGETS
        assert rp.TARGETS[n].description


def test_decorator_registers_and_refuses_duplicates(tmp_path, monkeypatch):
    monkeypatch.setattr(rp._registry, "TARGETS", dict(rp.TARGETS))
    reg = rp._registry

    @reg.target("dummy-test", "a test target")
    def dummy(out_dir, fast):
        path = reg.write_csv(out_dir / "d.csv", ("x", "y"), [(1, 0.5), (2, 1 / 3)])
        return reg.ReproResult("dummy-test", path, None, (reg.Headline("y", 1 / 3, 0.3333),))

    with pytest.raises(InvalidParameterError, match="twice"):
        reg.target("dummy-test", "again")(dummy)
    res = reg.run("dummy-test", tmp_path / "sub", fast=True)
    rows = reg.read_csv(res.csv_path)
    assert float(rows[1]["y"]) == 1 / 3  # full precision
    assert "0.333333" in res.format() and "0.3333" in res.format()
    with pytest.raises(InvalidParameterError, match="unknown reproduce target"):
        reg.run("nope", tmp_path)


def test_cli_list_and_run(tmp_path):
    runner = CliRunner()
    r = runner.invoke(app, ["reproduce", "--list"])
    assert r.exit_code == 0, r.output
    assert "thesis-fig4.1" in r.output and "thesis-table5.1" in r.output
    r = runner.invoke(app, ["reproduce", "thesis-fig4.1", "--fast", "--out", str(tmp_path)])
    assert r.exit_code == 0, r.output
    assert "12.5" in r.output and (tmp_path / "thesis-fig4.1.csv").exists()
    assert (tmp_path / "thesis-fig4.1.png").stat().st_size > 1000
    r = runner.invoke(app, ["reproduce", "no-such-target"])
    assert r.exit_code == 2
