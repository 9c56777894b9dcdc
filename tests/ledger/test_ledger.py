"""Ledger: atomic budget checks, concurrency, crash consistency."""

from __future__ import annotations

import math
import sqlite3
import subprocess
import sys
import textwrap

import pytest

from sparsedp.errors import BudgetExceededError, InvalidParameterError
from sparsedp import ledger as ledger_module
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


# ------------------------------------------------------------------ a charge racing another between its check and its insert


def _race(monkeypatch, other, rounds=1):
    """Make ``other()`` run inside the first ``rounds`` budget compositions of a charge: after the ledger read the
    state it composes and before it takes the write lock to record the charge, i.e. the race of two processes.
    ``other`` charges through a second connection with a 1 s busy timeout, so it fails with "database is
    locked" if the first connection held the write lock while composing."""
    real = ledger_module.Ledger._refuse_unless_fits
    left = [rounds]

    def composing(*args, **kwargs):
        if left[0] > 0:
            left[0] -= 1
            other()
        return real(*args, **kwargs)

    monkeypatch.setattr(ledger_module.Ledger, "_refuse_unless_fits", staticmethod(composing))


def test_a_charge_that_no_longer_fits_after_a_racing_charge_is_refused(tmp_path, monkeypatch):
    path = tmp_path / "budget.db"
    with Ledger(path) as a, Ledger(path, timeout=1.0) as b:
        a.set_budget("logs", epsilon=1.0, delta=1e-6)
        _race(monkeypatch, lambda: b.charge("logs", epsilon=0.6, delta=1e-8, note="b"))
        with pytest.raises(BudgetExceededError, match="Nothing was released"):
            a.charge("logs", epsilon=0.6, delta=1e-8, note="a")  # fitted the state it read; not the state after b
        assert [r.note for r in a.history("logs")] == ["b"]
        assert math.isclose(a.spent("logs").epsilon, 0.6)


def test_a_charge_that_still_fits_after_a_racing_charge_is_recorded_once(tmp_path, monkeypatch):
    path = tmp_path / "budget.db"
    with Ledger(path) as a, Ledger(path, timeout=1.0) as b:
        a.set_budget("logs", epsilon=1.0, delta=1e-6)
        _race(monkeypatch, lambda: b.charge("logs", epsilon=0.3, delta=1e-8, note="b"))
        cid = a.charge("logs", epsilon=0.3, delta=1e-8, note="a")
        hist = a.history("logs")
        assert [r.note for r in hist] == ["b", "a"] and hist[1].id == cid
        s = a.spent("logs")
        assert s.n_charges == 2 and math.isclose(s.epsilon, 0.6)


def test_a_budget_lowered_during_the_check_refuses_the_charge(tmp_path, monkeypatch):
    path = tmp_path / "budget.db"
    with Ledger(path) as a, Ledger(path, timeout=1.0) as b:
        a.set_budget("logs", epsilon=1.0, delta=1e-6)
        _race(monkeypatch, lambda: b.set_budget("logs", epsilon=0.5, delta=1e-6))
        with pytest.raises(BudgetExceededError):
            a.charge("logs", epsilon=0.6, delta=1e-8)
        assert a.history("logs") == []


def test_a_charge_that_loses_every_race_is_checked_under_the_lock(tmp_path, monkeypatch):
    """After every optimistic round lost a race, the last check holds the write lock: the charge is recorded
    once, after all the racing charges, and the total is what basic composition admits."""
    path = tmp_path / "budget.db"
    tries = ledger_module._OPTIMISTIC_TRIES
    with Ledger(path) as a, Ledger(path, timeout=1.0) as b:
        a.set_budget("logs", epsilon=1.0, delta=1e-6)
        _race(monkeypatch, lambda: b.charge("logs", epsilon=0.1, delta=1e-9, note="b"), rounds=tries)
        a.charge("logs", epsilon=0.1, delta=1e-9, note="a")
        assert [r.note for r in a.history("logs")] == ["b"] * tries + ["a"]
        with pytest.raises(BudgetExceededError):  # the racing charges were counted: 1.0 - (tries + 1)·0.1 left
            a.charge("logs", epsilon=1.0 - (tries + 1) * 0.1 + 0.01, delta=1e-9)
