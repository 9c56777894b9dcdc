"""Ledger composing charges with privacy profiles, and neighbouring relations (tracker issues 18 and 15)."""

from __future__ import annotations

import math
import sqlite3
import subprocess
import sys
import textwrap
from fractions import Fraction

import pytest

from sparsedp.accounting import calibrate
from sparsedp.accounting.calibration import Neighbours
from sparsedp.accounting.events import ApproxDPEvent
from sparsedp.accounting.profiles import GSHMDiscreteProfile, PureProfile
from sparsedp.errors import BudgetExceededError, InvalidParameterError
from sparsedp.ledger import Charge, Ledger

BUDGET = dict(epsilon=3.0, delta=1e-5)


@pytest.fixture(scope="module")
def gshm_charge():
    return Charge.from_calibration(calibrate("gshm", epsilon=0.5, delta=1e-7, l0=10))


def test_acceptance_composed_admits_4x_basic(tmp_path, gshm_charge, fill):
    with Ledger(tmp_path / "l.db") as led:
        led.set_budget("basic", **BUDGET)
        led.set_budget("composed", **BUDGET)
        n_basic = fill(led, "basic", lambda: led.charge("basic", epsilon=0.5, delta=1e-7, mechanism="gshm"))
        assert led.how_many("composed", gshm_charge) >= 24
        planned = led.how_many("composed", gshm_charge)
        n_comp = fill(led, "composed", lambda: led.charge("composed", gshm_charge, note="daily"))
        assert n_comp == planned and led.how_many("composed", gshm_charge) == 0
        assert n_basic == 6
        assert n_comp >= 4 * n_basic
        # the refusal is exactly where the composed pair crosses the budget
        pair = gshm_charge.profile.pair()
        assert pair.repeat(n_comp).delta(3.0) <= 1e-5 < pair.repeat(n_comp + 1).delta(3.0)
        assert led.spent("composed").n_charges == n_comp
        with pytest.raises(BudgetExceededError, match="Nothing was released"):
            led.check("composed", gshm_charge)
        # spent/remaining as ε at the budget's δ
        spent = led.spent_epsilon("composed")  # the tightest accounting: here the pair's or the PLD's
        assert spent <= pair.repeat(n_comp).epsilon(1e-5) * (1 + 1e-12)
        assert spent <= 3.0 and led.remaining("composed") == pytest.approx(3.0 - spent)
        # six basic (0.5, 1e-7) charges: basic composition says 3.0; their randomised-response pairs composed
        # (the optimal composition of (ε, δ) guarantees) certify slightly less
        assert 2.99 < led.spent_epsilon("basic") <= 3.0
        (rec, *_) = led.history("composed")
        assert rec.profile == gshm_charge.profile and rec.neighbours is Neighbours.ADD_REMOVE


def test_profiles_and_basic_charges_combine(tmp_path, gshm_charge, fill):
    """Theorem (composition.md §3): pure / profile-less charges add (ε_o, δ_o), the rest is composed."""
    with Ledger(tmp_path / "l.db") as led:
        led.set_budget("d", **BUDGET)
        led.charge("d", Charge(1.0, 0.0, Neighbours.ADD_REMOVE, "pure-hist", PureProfile(1.0)))
        led.charge("d", epsilon=0.2, delta=1e-6)
        n = fill(led, "d", lambda: led.charge("d", gshm_charge))
        pair = gshm_charge.profile.pair()
        n_pair = max(m for m in range(1, 80) if pair.repeat(m).delta(3.0 - 1.2) + 1e-6 <= 1e-5)
        # the pair accounting alone admits n_pair; the PLD accounting composes the pure and basic charges too
        assert n >= n_pair > int((3.0 - 1.2) / 0.5)


def test_profile_must_imply_the_charge():
    prof = GSHMDiscreteProfile(Fraction(809), 161, 10)
    with pytest.raises(InvalidParameterError, match="does not imply"):
        Charge(0.1, 1e-7, Neighbours.ADD_REMOVE, "gshm", prof)


def test_keyword_and_object_forms_are_exclusive(tmp_path, gshm_charge):
    with Ledger(tmp_path / "l.db") as led:
        led.set_budget("d", **BUDGET)
        with pytest.raises(InvalidParameterError, match="not both"):
            led.charge("d", gshm_charge, epsilon=0.1)
        with pytest.raises(InvalidParameterError, match="epsilon= and delta="):
            led.charge("d", epsilon=0.1)


# ------------------------------------------------------------------ neighbouring relations


def test_add_remove_budget_refuses_replace_one(tmp_path):
    with Ledger(tmp_path / "l.db") as led:
        led.set_budget("d", epsilon=1.0, delta=1e-6)
        assert led.budget_neighbours("d") is Neighbours.ADD_REMOVE
        c = Charge(0.1, 0.0, Neighbours.REPLACE_ONE, "balcer-vadhan")
        with pytest.raises(InvalidParameterError, match="max_units="):
            led.charge("d", c)
        with pytest.raises(InvalidParameterError, match="max_units="):
            led.check("d", c)
        assert led.history("d") == []


def test_replace_one_budget_converts_add_remove_charges(tmp_path, gshm_charge):
    with Ledger(tmp_path / "l.db") as led:
        led.set_budget("r", epsilon=2.0, delta=1e-5, neighbours=Neighbours.REPLACE_ONE)
        with pytest.raises(InvalidParameterError, match="cannot be changed"):
            led.set_budget("r", epsilon=1.0, delta=1e-6)
        led.charge("r", epsilon=0.5, delta=1e-6)  # counts as (1.0, (1 + e^0.5)·1e-6)
        s = led.spent("r")
        assert s.epsilon == pytest.approx(1.0) and s.delta == pytest.approx((1 + math.exp(0.5)) * 1e-6)
        led.charge("r", Charge(0.9, 0.0, Neighbours.REPLACE_ONE, "balcer-vadhan"))
        assert led.spent("r").epsilon == pytest.approx(1.9)
        with pytest.raises(BudgetExceededError):  # 0.1 add/remove = 0.2 replace-one: over 2.0
            led.charge("r", epsilon=0.1, delta=0.0)
        led.charge("r", Charge(0.1, 0.0, Neighbours.REPLACE_ONE, "balcer-vadhan"))
        # profiles are not used on replace-one budgets: a GSHM charge counts as (1.0, (1+e^0.5)1e-7) basic
        with pytest.raises(BudgetExceededError):
            led.charge("r", gshm_charge)


def test_replace_one_budget_never_composes_profiles(tmp_path, gshm_charge, fill):
    with Ledger(tmp_path / "l.db") as led:
        led.set_budget("r", epsilon=6.0, delta=1e-5, neighbours=Neighbours.REPLACE_ONE)
        n = fill(led, "r", lambda: led.charge("r", gshm_charge))
        assert n == 6  # 6 x 2*0.5 = 6.0; the composed accounting would have admitted far more


# ------------------------------------------------------------------ migration of old ledger files


_OLD_SCHEMA = """
CREATE TABLE datasets (name TEXT PRIMARY KEY, epsilon REAL NOT NULL, delta REAL NOT NULL, created REAL NOT NULL);
CREATE TABLE charges (id INTEGER PRIMARY KEY AUTOINCREMENT, dataset TEXT NOT NULL REFERENCES datasets(name),
    epsilon REAL NOT NULL, delta REAL NOT NULL, rho REAL, rho_delta REAL, mechanism TEXT NOT NULL,
    note TEXT NOT NULL, status TEXT NOT NULL CHECK (status IN ('charged', 'published')), output TEXT,
    created REAL NOT NULL, published REAL, pid INTEGER NOT NULL);
INSERT INTO datasets VALUES ('logs', 3.0, 1e-5, 0.0);
INSERT INTO charges (dataset, epsilon, delta, mechanism, note, status, created, pid)
    VALUES ('logs', 1.0, 2e-6, 'gshm', 'old', 'published', 0.0, 1);
"""


def test_old_ledger_file_is_migrated(tmp_path, gshm_charge, fill):
    path = tmp_path / "old.db"
    con = sqlite3.connect(str(path))
    con.executescript(_OLD_SCHEMA)
    con.commit()
    con.close()
    with Ledger(path) as led:
        assert led.budget_neighbours("logs") is Neighbours.ADD_REMOVE
        (rec,) = led.history("logs")
        assert rec.profile is None and rec.neighbours is Neighbours.ADD_REMOVE and rec.note == "old"
        # the old row is read as its basic (1.0, 2e-6) charge: its randomised-response pair, which at the
        # budget's δ = 1e-5 > 2e-6 certifies a hair below ε = 1
        assert rec.event == ApproxDPEvent(epsilon=1.0, delta=2e-6, mechanism="gshm")
        assert 1.0 - 1e-4 < led.spent_epsilon("logs") <= 1.0
        n = fill(led, "logs", lambda: led.charge("logs", gshm_charge))
        pair = gshm_charge.profile.pair()
        assert n >= max(m for m in range(1, 80) if pair.repeat(m).delta(2.0) + 2e-6 <= 1e-5)
    cols = {r[1] for r in sqlite3.connect(str(path)).execute("PRAGMA table_info(charges)")}
    assert {"profile", "neighbours"} <= cols
    with Ledger(path) as led:  # a second open finds nothing to migrate
        assert led.history("logs")[0].note == "old"


# ------------------------------------------------------------------ concurrency with composed charges

_WORKER = textwrap.dedent("""
    import os, sys, time
    from fractions import Fraction
    from sparsedp.ledger import Charge, Ledger
    from sparsedp.accounting.calibration import Neighbours
    from sparsedp.accounting.profiles import GSHMDiscreteProfile
    from sparsedp.errors import BudgetExceededError
    path, go, sigma2, tries = sys.argv[1], sys.argv[2], Fraction(sys.argv[3]), int(sys.argv[4])
    c = Charge(0.5, 1e-7, Neighbours.ADD_REMOVE, "gshm", GSHMDiscreteProfile(sigma2, 161, 10))
    led = Ledger(path)
    print("READY", flush=True)         # imported and opened: wait for the common start
    while not os.path.exists(go):
        time.sleep(0.001)
    ok = 0
    for _ in range(tries):
        try:
            led.charge("logs", c, note="worker")
            ok += 1
        except BudgetExceededError:
            pass
    print(ok)
""")


def test_concurrent_composed_charges_cannot_overspend(tmp_path, gshm_charge):
    """Four processes race to charge composed (GSHM profile) charges, all starting at once: the ledger admits
    exactly as many as the composed pair allows in total, none lost and none counted twice. Each refusal
    composes the privacy-loss distributions (about a second), so the attempts exceed the budget by a few."""
    path = tmp_path / "budget.db"
    with Ledger(path) as led:
        led.set_budget("logs", **BUDGET)
    sigma2 = gshm_charge.profile.sigma2
    assert gshm_charge.profile.margin == 161
    pair = gshm_charge.profile.pair()
    n_max = max(n for n in range(1, 60) if pair.repeat(n).delta(3.0) <= 1e-5)
    workers, tries = 4, n_max // 4 + 1  # n_max + 1 to 4 attempts in all: at least one refusal
    go = tmp_path / "go"
    procs = [subprocess.Popen([sys.executable, "-c", _WORKER, str(path), str(go), str(sigma2), str(tries)],
                              stdout=subprocess.PIPE, text=True) for _ in range(workers)]
    assert [p.stdout.readline().strip() for p in procs] == ["READY"] * workers
    go.touch()
    outs = [int(p.communicate(timeout=600)[0].strip()) for p in procs]
    assert sum(outs) == n_max < workers * tries
    with Ledger(path) as led:
        assert led.spent("logs").n_charges == n_max
        assert [r.note for r in led.history("logs")] == ["worker"] * n_max


def test_mixed_discrete_and_continuous_charges_use_the_numeric_composition(tmp_path, gshm_charge, fill):
    cont = Charge.from_calibration(calibrate("gshm", epsilon=0.5, delta=1e-7, l0=10, discrete=False))
    with Ledger(tmp_path / "l.db") as led:
        led.set_budget("d", epsilon=1.5, delta=1e-5)
        made = []

        def one():
            c = (gshm_charge, cont)[len(made) % 2]
            led.charge("d", c)
            made.append(c)

        n = fill(led, "d", one)
        assert n > 3  # basic composition: 3
        from sparsedp.accounting.composition import compose

        pairs = [c.profile.pair() for c in made]
        nxt = (gshm_charge, cont)[n % 2].profile.pair()
        assert compose(pairs).delta(1.5) <= 1e-5 < compose(pairs + [nxt]).delta(1.5)
        assert led.spent_epsilon("d") == pytest.approx(compose(pairs).epsilon(1e-5), rel=1e-12)


def test_unreadable_stored_profile_counts_as_basic(tmp_path, gshm_charge):
    path = tmp_path / "l.db"
    with Ledger(path) as led:
        led.set_budget("d", **BUDGET)
        led.charge("d", gshm_charge)
    con = sqlite3.connect(str(path))
    con.execute("UPDATE charges SET profile='{\"family\": \"from-the-future\"}', "
                "event='{\"event\": \"from-the-future\"}'")
    con.commit()
    con.close()
    with Ledger(path) as led:
        (rec,) = led.history("d")
        assert rec.profile is None and isinstance(rec.event, ApproxDPEvent)
        assert 0.5 - 1e-4 < led.spent_epsilon("d") <= 0.5  # its basic (0.5, 1e-7), read at the budget's δ
