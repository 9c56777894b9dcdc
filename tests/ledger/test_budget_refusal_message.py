"""The budget refusal says, in plain numbers, what was spent, what is left and what the refused release needed
(issue 30, item 5); nothing is charged or written, exit code 2 on the CLI."""

from __future__ import annotations

import os
import re

import numpy as np
import polars as pl
import pytest
from typer.testing import CliRunner

import sparsedp as sd
from sparsedp.cli import app
from sparsedp.errors import BudgetExceededError
from sparsedp.ledger import Charge, Ledger


def test_refusal_states_budget_spent_left_and_needed(tmp_path):
    with Ledger(tmp_path / "l.db") as led:
        led.set_budget("logs", epsilon=2, delta=1e-5)
        gshm = sd.plan(1.0, 1e-6, max_groups_per_unit=3).best
        charge = Charge.from_calibration(gshm)
        n = led.how_many("logs", charge)
        for _ in range(n):
            led.charge("logs", charge)
        spent = led.spent("logs")
        with pytest.raises(BudgetExceededError) as e:
            led.charge("logs", charge)
        msg = str(e.value)
        print(msg)
        assert msg.startswith("release refused: dataset 'logs' has a budget of epsilon 2 at delta 1e-05; ")
        assert f"{n} releases spent epsilon {spent.epsilon_at_budget_delta:.4g} at delta 1e-05" in msg
        assert f"their epsilons add up to {spent.epsilon:.4g}" in msg  # composition certified less than the sum
        assert f"epsilon {2 - spent.epsilon_at_budget_delta:.4g} is left" in msg
        assert "this release needs epsilon 1 at delta 1e-06" in msg and msg.endswith("Nothing was released or charged.")
        assert e.value.budget == (2.0, 1e-5) and e.value.needed == (1.0, 1e-6)
        assert e.value.spent == pytest.approx(spent.epsilon_at_budget_delta)
        assert e.value.remaining == pytest.approx(2 - spent.epsilon_at_budget_delta)
        assert len(led.history("logs")) == n  # nothing recorded


def test_refusal_on_the_cli_one_line_exit_2_nothing_written(tmp_path):
    g = np.random.default_rng(4)
    src = tmp_path / "log.parquet"
    pl.DataFrame({"u": g.integers(0, 300, 3000), "k": g.integers(0, 20, 3000).astype(str)}).write_parquet(src)
    led = tmp_path / "l.db"
    with Ledger(led) as lg:
        lg.set_budget("logs", epsilon=1.5, delta=1e-5)
    args = ["release", str(src), "--unit", "u", "--by", "k", "--epsilon", "1", "--delta", "1e-6", "--max-groups",
            "2", "--ledger", str(led), "--dataset", "logs"]
    assert CliRunner().invoke(app, args).exit_code == 0
    r = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "second.csv")])
    print(r.stderr)
    assert r.exit_code == 2
    (line,) = r.stderr.strip().splitlines()
    assert re.fullmatch(r"error: release refused: dataset 'logs' has a budget of epsilon 1\.5 at delta 1e-05; "
                        r"1 release spent epsilon 1 at delta 1e-05 \(delta used: 1e-06\); epsilon 0\.5 is left; "
                        r"this release needs epsilon 1 at delta 1e-06\. Nothing was released or charged\.", line), line
    assert sorted(os.listdir(tmp_path)) == ["l.db", "log.parquet"]
    with Ledger(led) as lg:
        assert len(lg.history("logs")) == 1
