"""Ledger: atomic budget checks, concurrency, crash consistency."""

from __future__ import annotations

import math
import sqlite3
import subprocess
import sys
import textwrap

import pytest

from sparsedp.errors import BudgetExceededError, InvalidParameterError
from sparsedp.ledger import Ledger


@pytest.fixture
def ledger(tmp_path):
    with Ledger(tmp_path / "budget.db") as led:
        led.set_budget("logs", epsilon=1.0, delta=1e-6)
        yield led


def test_basic_composition_admits_exact_split(ledger):
    for _ in range(5):
        ledger.charge("logs", epsilon=0.2, delta=2e-7)
    with pytest.raises(BudgetExceededError, match="Nothing was released"):
        ledger.charge("logs", epsilon=1e-6, delta=1e-12)
    s = ledger.spent("logs")
    assert s.n_charges == 5 and math.isclose(s.epsilon, 1.0) and math.isclose(s.delta, 1e-6)


def test_delta_budget_is_enforced_separately(ledger):
    ledger.charge("logs", epsilon=0.1, delta=9e-7)
    with pytest.raises(BudgetExceededError):
        ledger.charge("logs", epsilon=0.1, delta=2e-7)
    assert ledger.spent("logs").n_charges == 1


def test_refused_charge_records_nothing(ledger):
    with pytest.raises(BudgetExceededError):
        ledger.charge("logs", epsilon=2.0, delta=1e-7)
    assert ledger.history("logs") == []


def test_zcdp_composition_is_tighter_when_every_part_is_zcdp(ledger):
    # rho = 0.01 each: basic composition of the (eps, delta) each implies would run out long before the
    # zCDP total (CKS conversion of sum rho) does.
    from sparsedp.accounting.zcdp import zcdp_to_dp_epsilon

    rho = 0.005
    eps_each = zcdp_to_dp_epsilon(rho, 1e-7)
    n_basic = int(1.0 // eps_each)
    n = 0
    while True:
        try:
            ledger.charge("logs", epsilon=eps_each, delta=1e-7, rho=rho)
        except BudgetExceededError:
            break
        n += 1
        assert n < 1000
    assert n > n_basic
    s = ledger.spent("logs")
    assert s.rho is not None and math.isclose(s.rho, n * rho)
    assert zcdp_to_dp_epsilon(s.rho, 1e-6) <= 1.0 * (1 + 1e-12)


def test_budget_can_be_lowered_not_raised(ledger):
    ledger.set_budget("logs", epsilon=0.5, delta=1e-6)
    with pytest.raises(InvalidParameterError, match="never raised"):
        ledger.set_budget("logs", epsilon=0.6, delta=1e-6)


def test_unknown_dataset_and_bad_values(ledger):
    with pytest.raises(InvalidParameterError, match="no budget"):
        ledger.charge("other", epsilon=0.1, delta=1e-9)
    with pytest.raises(InvalidParameterError, match="epsilon"):
        ledger.charge("logs", epsilon=-1, delta=1e-9)
    with pytest.raises(InvalidParameterError, match="dataset"):
        ledger.charge("", epsilon=0.1, delta=1e-9)


def test_wal_mode_and_history(ledger):
    cid = ledger.charge("logs", epsilon=0.1, delta=1e-9, mechanism="gshm", note="q1")
    ledger.mark_published(cid, "out.parquet")
    (rec,) = ledger.history("logs")
    assert (rec.status, rec.output, rec.mechanism) == ("published", "out.parquet", "gshm")
    mode = sqlite3.connect(str(ledger.path)).execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"


_WORKER = textwrap.dedent("""
    import os, sys, time
    from sparsedp.ledger import Ledger
    from sparsedp.errors import BudgetExceededError
    path, go = sys.argv[1], sys.argv[2]
    print("READY", flush=True)         # imported: wait for the common start
    while not os.path.exists(go):
        time.sleep(0.001)
    try:
        Ledger(path).charge("logs", epsilon=0.2, delta=1e-8, note="worker")
        print("OK")
    except BudgetExceededError:
        print("REFUSED")
""")


def test_eight_concurrent_processes_cannot_overspend(tmp_path):
    path = tmp_path / "budget.db"
    with Ledger(path) as led:
        led.set_budget("logs", epsilon=1.0, delta=1e-6)
    go = tmp_path / "go"  # all workers start charging at the same instant: once every one has imported
    procs = [subprocess.Popen([sys.executable, "-c", _WORKER, str(path), str(go)],
                              stdout=subprocess.PIPE, text=True) for _ in range(8)]
    assert [p.stdout.readline().strip() for p in procs] == ["READY"] * 8
    go.touch()
    outs = [p.communicate(timeout=120)[0].strip() for p in procs]
    assert sorted(outs) == ["OK"] * 5 + ["REFUSED"] * 3
    with Ledger(path) as led:
        s = led.spent("logs")
        assert s.n_charges == 5 and math.isclose(s.epsilon, 1.0)
