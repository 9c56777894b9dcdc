"""``sparsedp ledger show`` / ``sparsedp ledger plan`` with composed accounting."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from sparsedp.accounting import calibrate
from sparsedp.cli import app
from sparsedp.ledger import Charge, Ledger

runner = CliRunner()


@pytest.fixture(scope="module")
def gshm_charge():
    return Charge.from_calibration(calibrate("gshm", epsilon=0.5, delta=1e-7, l0=10))


def test_plan_and_show(tmp_path, gshm_charge):
    path = tmp_path / "l.db"
    r = runner.invoke(app, ["ledger", "init", str(path), "--dataset", "logs", "--epsilon", "3", "--delta", "1e-5"])
    assert r.exit_code == 0, r.output
    plan = ["ledger", "plan", str(path), "--dataset", "logs", "--epsilon", "0.5", "--delta", "1e-7",
            "--max-groups", "10"]
    r = runner.invoke(app, plan)
    assert r.exit_code == 0, r.output
    n_total = int(re.search(r"^(\d+) more gshm releases", r.output).group(1))
    assert "basic composition alone: 6" in r.output and n_total >= 24
    with Ledger(path) as led:
        for _ in range(10):
            led.charge("logs", gshm_charge, note="daily")
        spent = led.spent_epsilon("logs")
    r = runner.invoke(app, plan)
    assert r.exit_code == 0 and r.output.startswith(f"{n_total - 10} more gshm releases")
    r = runner.invoke(app, ["ledger", "show", str(path), "--dataset", "logs"])
    assert r.exit_code == 0, r.output
    assert f"spent:      epsilon {spent:.4g} at delta 1e-05 (10 charges)" in r.output
    assert "(plain sums: epsilon 5, delta" in r.output
    assert f"remaining:  epsilon {3 - spent:.4g} at delta 1e-05" in r.output
    assert spent < 3.0


def test_ledger_show_fits_80_columns(tmp_path, monkeypatch, gshm_charge):
    """Issue 30 item 6: no header or number wraps at 80 columns (delta was cut as "1e-0" / "6")."""
    path = tmp_path / "l.db"
    with Ledger(path) as led:
        led.set_budget("logs", epsilon=3, delta=1e-5)
        for i in range(3):
            led.charge("logs", gshm_charge, note=f"daily run {i} of a long descriptive note about the release")
        led.charge("logs", epsilon=0.25, delta=1e-7, mechanism="gshm+auto-bound")
    monkeypatch.setenv("COLUMNS", "80")
    r = runner.invoke(app, ["ledger", "show", str(path)], env={"COLUMNS": "80"})
    assert r.exit_code == 0, r.output
    print(r.output)
    lines = r.output.splitlines()
    assert max(map(len, lines)) <= 80
    header = next(ln for ln in lines if "time (UTC)" in ln)
    assert all(w in header for w in ("id", "epsilon", "delta", "mechanism", "status"))
    rows = [ln.split() for ln in lines if re.match(r"^\s*\d+\s+20\d\d-", ln)]
    assert [r[0] for r in rows] == ["1", "2", "3", "4"]
    assert rows[3][3:7] == ["0.25", "1e-07", "gshm+auto-bound", "charged"]  # whole numbers, one line per charge
    assert "  #1: note: daily run 0 of a long descriptive note about the release" in r.output.replace("\n", " ")


def test_init_replace_one_and_plan_errors(tmp_path):
    path = tmp_path / "l.db"
    r = runner.invoke(app, ["ledger", "init", str(path), "--dataset", "d", "--epsilon", "1", "--delta", "1e-6",
                            "--neighbours", "replace-one"])
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["ledger", "show", str(path)])
    assert "replace one privacy unit" in r.output
    r = runner.invoke(app, ["ledger", "plan", str(path), "--dataset", "d", "--epsilon", "0.1", "--delta", "1e-8",
                            "--mechanism", "gshm"])
    assert r.exit_code == 2 and "--max-groups is required" in r.output  # flag terms (issue 20)
    r = runner.invoke(app, ["ledger", "plan", str(path), "--dataset", "d", "--epsilon", "0.1", "--delta", "1e-8",
                            "--max-groups", "2"])
    # replace-one budget: each add/remove (0.1, 1e-8) release counts as (0.2, (1+e^0.1)1e-8): 5 fit
    assert r.exit_code == 0 and r.output.startswith("5 more gshm releases"), r.output
    assert "basic composition alone: 5" in r.output
