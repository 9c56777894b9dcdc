"""Ledger wiring of ``sparsedp.release`` / ``sparsedp release --ledger``: charge before noise, publish after
the output, refuse without drawing or writing, and stay consistent when a release is SIGKILLed."""

from __future__ import annotations

import json
import math
import os
import random
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time

import polars as pl
import pytest
from typer.testing import CliRunner

import sparsedp as sd
from sparsedp.cli import app
from sparsedp.errors import BudgetExceededError, InvalidParameterError, InvalidTypeError
from sparsedp.ledger import Ledger
from sparsedp.noise import InsecureSeededRandom

DATA = pl.DataFrame({"u": [1, 2, 3, 1, 4, 5], "k": ["a", "a", "a", "b", "a", "a"]})
KW = dict(privacy_unit="u", by="k", epsilon=0.5, delta=1e-6, max_groups_per_unit=1, mechanism="laplace")


class CountingSource:
    """A seeded source that counts draws (the refusal tests require zero)."""

    def __init__(self):
        self.inner = InsecureSeededRandom(7)
        self.calls = 0

    def uint64(self, size):
        self.calls += 1
        return self.inner.uint64(size)

    def random_bytes(self, n):
        self.calls += 1
        return self.inner.random_bytes(n)

    def getrandbits(self, k):
        self.calls += 1
        return self.inner.getrandbits(k)

    def randbelow(self, n):
        self.calls += 1
        return self.inner.randbelow(n)


@pytest.fixture
def led_path(tmp_path):
    path = tmp_path / "budget.db"
    with Ledger(path) as led:
        led.set_budget("logs", epsilon=1.0, delta=2e-6)
    return path


def test_release_charges_then_publishes(led_path, tmp_path, rng):
    out = tmp_path / "r.csv"
    res = sd.release(DATA, **KW, rng=rng, ledger=led_path, dataset="logs", out=out)
    with Ledger(led_path) as led:
        (rec,) = led.history("logs")
        assert (rec.status, rec.output, rec.mechanism) == ("published", str(out), "laplace")
        assert (rec.epsilon, rec.delta) == (0.5, 1e-6)
    assert out.exists() and res.curator.output == str(out)


def test_ledger_object_in_memory_release(led_path, rng):
    with Ledger(led_path) as led:
        sd.release(DATA, **KW, rng=rng, ledger=led, dataset="logs")
        sd.release(DATA, **KW, rng=rng, ledger=led, dataset="logs")
        assert [r.status for r in led.history("logs")] == ["published", "published"]
        assert math.isclose(led.spent("logs").epsilon, 1.0)
        src = CountingSource()
        with pytest.raises(BudgetExceededError, match="Nothing was released"):
            sd.release(DATA, **KW, rng=src, ledger=led, dataset="logs")
        assert src.calls == 0  # refused before reading data or drawing anything
        assert len(led.history("logs")) == 2


def test_refusal_at_commit_draws_no_noise(led_path, tmp_path, monkeypatch):
    """If another process spends the budget between the advisory check and the charge, the atomic charge
    refuses: no noise is drawn and no output is written."""
    from sparsedp.engines.base import EmbeddedEngine

    drawn = []
    monkeypatch.setattr(EmbeddedEngine, "noise_keys", lambda *a, **k: drawn.append(1))
    orig = Ledger.check

    def check_then_race(self, dataset, *a, **kw):
        orig(self, dataset, *a, **kw)
        with Ledger(led_path) as other:
            other.charge("logs", epsilon=0.9, delta=1e-7)

    monkeypatch.setattr(Ledger, "check", check_then_race)
    out = tmp_path / "r.parquet"
    with pytest.raises(BudgetExceededError):
        sd.release(DATA, **KW, rng=InsecureSeededRandom(1), ledger=led_path, dataset="logs", out=out)
    assert drawn == [] and not out.exists()
    assert not [f for f in os.listdir(tmp_path) if f.startswith(".r.parquet")]
    with Ledger(led_path) as led:
        assert len(led.history("logs")) == 1


def test_ledger_argument_errors(led_path, tmp_path, rng):
    with pytest.raises(InvalidParameterError, match="pass ledger"):
        sd.release(DATA, **KW, rng=rng, dataset="logs")
    with pytest.raises(InvalidParameterError, match="dataset"):
        sd.release(DATA, **KW, rng=rng, ledger=led_path)
    with pytest.raises(InvalidParameterError, match="no budget"):
        sd.release(DATA, **KW, rng=rng, ledger=led_path, dataset="other")
    missing = tmp_path / "nope.db"
    with pytest.raises(InvalidParameterError, match="no ledger file"):
        sd.release(DATA, **KW, rng=rng, ledger=missing, dataset="logs")
    assert not missing.exists()  # a release never creates a ledger
    with pytest.raises(InvalidTypeError, match="ledger must be"):
        sd.release(DATA, **KW, rng=rng, ledger=3.5, dataset="logs")
    not_sqlite = tmp_path / "junk.db"
    not_sqlite.write_bytes(b"this is not a database" * 100)
    with pytest.raises(InvalidParameterError, match="cannot open ledger"):
        sd.release(DATA, **KW, rng=rng, ledger=not_sqlite, dataset="logs")


def test_cli_release_with_ledger(led_path, tmp_path):
    src = tmp_path / "in.csv"
    DATA.write_csv(src)
    runner = CliRunner()
    args = ["release", str(src), "--unit", "u", "--by", "k", "--epsilon", "0.5", "--delta", "1e-6", "--max-groups",
            "1", "--mechanism", "laplace", "--ledger", str(led_path), "--dataset", "logs"]
    for i in range(2):
        r = runner.invoke(app, args + ["--out", str(tmp_path / f"o{i}.csv")])
        assert r.exit_code == 0, r.output
    r = runner.invoke(app, args + ["--out", str(tmp_path / "o2.csv")])
    assert r.exit_code == 2 and "Nothing was released" in r.output
    assert not (tmp_path / "o2.csv").exists()
    r = runner.invoke(app, ["ledger", "show", str(led_path)])
    assert r.exit_code == 0 and "spent:      epsilon 1 at delta" in r.output


# ------------------------------------------------------------------------------------------------ SIGKILL

# A zygote: imports sparsedp once, then forks one child per request that runs the real CLI command
# (`sparsedp release … --ledger …`), so each trial costs a fork, not a Python start-up. It reports
# "start <id> <pid>" and "exit <id> <status>" lines.
_ZYGOTE = textwrap.dedent("""
    import json, os, sys, threading, warnings
    warnings.simplefilter("ignore")
    import pyarrow.csv, pyarrow.parquet, rich.progress  # noqa: F401  (warm imports shared by the children)
    from sparsedp.cli import app
    from sparsedp.accounting import calibrate
    calibrate("laplace", epsilon=0.5, delta=1e-6, l0=1)
    lock = threading.Lock()

    def say(*parts):
        with lock:
            sys.stdout.write(" ".join(map(str, parts)) + "\\n")
            sys.stdout.flush()

    def reap(tid, pid):
        _, status = os.waitpid(pid, 0)
        say("exit", tid, status)

    say("ready")
    for line in sys.stdin:
        req = json.loads(line)
        pid = os.fork()
        if pid == 0:
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, 1)
            os.dup2(null, 2)
            os.environ["SPARSEDP_TEST_PAUSE_BEFORE_RENAME"] = str(req["pause"])
            code = 1
            try:
                app(req["args"], prog_name="sparsedp")
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else 1
            os._exit(code)
        say("start", req["id"], pid)
        threading.Thread(target=reap, args=(req["id"], pid), daemon=True).start()
""")


def _check_trial(led_path, out) -> str:
    """The crash invariants; returns the trial's state for the coverage assertions."""
    con = sqlite3.connect(str(led_path), timeout=5)
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    con.close()
    with Ledger(led_path, timeout=5) as led:
        hist = led.history("logs")
        s = led.spent("logs")
        assert s.n_charges == len(hist) <= 1 and math.isclose(s.epsilon, 0.5 * len(hist))
        if out.exists():  # no output without its charge, and never a partial file
            assert len(hist) == 1
            frame = pl.read_csv(out)
            assert frame.columns == ["k", "count", "count_lo", "count_hi"]
        if hist and hist[0].status == "published":
            assert out.exists() and hist[0].output == str(out)
        # the killed process left no lock behind: the ledger still takes a charge at once
        led.charge("logs", epsilon=0.5, delta=1e-9, note="after crash")
    leftovers = [f for f in os.listdir(out.parent) if f.startswith(f".{out.name}.")]
    if not hist:
        return "killed before charge"
    if hist[0].status == "published":
        return "published"
    return "charged, output present" if out.exists() else ("charged, temp left" if leftovers
                                                            else "charged, no output")


def test_sigkill_at_random_points_keeps_ledger_consistent(tmp_path):
    n_trials = 24
    src = tmp_path / "in.csv"
    DATA.write_csv(src)
    z = subprocess.Popen([sys.executable, "-c", _ZYGOTE], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         text=True, bufsize=1)
    events: dict = {}
    cond = threading.Condition()

    def reader():
        for line in z.stdout:
            parts = line.split()
            with cond:
                events[tuple(parts[:2])] = parts[2:] if len(parts) > 2 else []
                cond.notify_all()

    threading.Thread(target=reader, daemon=True).start()

    def wait_for(key, timeout):
        with cond:
            ok = cond.wait_for(lambda: key in events, timeout=timeout)
        return events[key] if ok else None

    gen = random.Random(20261122)
    try:
        assert wait_for(("ready",), 60) is not None, "zygote did not start"
        trials = []
        for i in range(n_trials + 2):  # the last two are killed at chosen stages
            d = tmp_path / f"t{i}"
            d.mkdir()
            with Ledger(d / "budget.db") as led:
                led.set_budget("logs", epsilon=1.0, delta=2e-6)
            trials.append((d / "budget.db", d / "out.csv"))

        def launch(i, pause):
            led_path, out = trials[i]
            args = ["release", str(src), "--unit", "u", "--by", "k", "--epsilon", "0.5", "--delta", "1e-6",
                    "--max-groups", "1", "--mechanism", "laplace", "--out", str(out), "--ledger", str(led_path),
                    "--dataset", "logs"]
            z.stdin.write(json.dumps({"id": i, "args": args, "pause": pause}) + "\n")
            z.stdin.flush()
            return int(wait_for(("start", str(i)), 30)[0])

        # trial 0 runs to completion: it measures how long a release takes and checks the happy path
        t0 = time.monotonic()
        launch(0, 0)
        assert wait_for(("exit", "0"), 60) == ["0"]
        full = time.monotonic() - t0
        # the others are killed at uniformly random times over the run (a pause before the rename widens
        # the window between the charge and the publication), two at a time
        for batch in range(1, n_trials, 2):
            ids = [i for i in (batch, batch + 1) if i < n_trials]
            pauses = {i: gen.uniform(0.0, 0.3) for i in ids}
            start = time.monotonic()
            pids = {i: launch(i, pauses[i]) for i in ids}
            kills = sorted((gen.uniform(0.0, 1.2 * full + pauses[i]), i) for i in ids)
            for at, i in kills:
                time.sleep(max(0.0, start + at - time.monotonic()))
                try:
                    os.kill(pids[i], signal.SIGKILL)
                except ProcessLookupError:  # already finished (and reaped)
                    pass
            for i in ids:
                assert wait_for(("exit", str(i)), 60) is not None
        # two kills at chosen stages, so that the stages covered do not depend on the machine's load:
        # (a) while the test holds the ledger's write lock (the release cannot have charged), (b) during a long
        # pause before the rename, once the temporary output exists (the release has charged)
        lock_path, _ = trials[n_trials]
        holder = sqlite3.connect(str(lock_path), timeout=5, isolation_level=None)
        holder.execute("BEGIN EXCLUSIVE")
        try:
            pid = launch(n_trials, 0)
            time.sleep(0.5)
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:  # gave up waiting for the lock on its own: still nothing charged
                pass
            assert wait_for(("exit", str(n_trials)), 60) is not None
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        _, paused_out = trials[n_trials + 1]
        pid = launch(n_trials + 1, 60)
        deadline = time.monotonic() + 60
        while not [f for f in os.listdir(paused_out.parent) if f.startswith(f".{paused_out.name}.")]:
            assert time.monotonic() < deadline, "the paused release never wrote its temporary file"
            time.sleep(0.02)
        os.kill(pid, signal.SIGKILL)
        assert wait_for(("exit", str(n_trials + 1)), 60) is not None
        states = [_check_trial(*t) for t in trials]
    finally:
        z.stdin.close()
        z.wait(timeout=30)
    assert states[0] == "published"
    # the kills landed at different stages (the test is not vacuous); the chosen ones at theirs
    assert states[n_trials] == "killed before charge" and states[n_trials + 1] == "charged, temp left", states
    assert len(set(states)) >= 3, states
