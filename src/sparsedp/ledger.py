"""A privacy-budget ledger: every release is charged against a named dataset's total budget.

Storage is one SQLite file in WAL mode. A charge is admitted optimistically: the charges and the budget are
read in one snapshot, the composition "does this charge fit the budget?" (which can take seconds) runs
without any lock, and then one ``BEGIN IMMEDIATE`` transaction (SQLite's write lock) re-reads what the
decision depended on — the budget row and the count and largest id of the dataset's charges, which are only
ever appended — and inserts the charge only if nothing changed; otherwise the composition is redone with the
new state. So every admitted charge was checked against exactly the charges recorded before it, and
concurrent processes cannot together overspend, lose a charge or count one twice, while each holds the
write lock only for a few reads and one insert (a process that holds it for long makes the others wait, and
past the busy timeout they fail with "database is locked"). A refusal needs no lock: adding charges or
lowering the budget never makes a refused charge fit, and refusing is always safe. After
:data:`_OPTIMISTIC_TRIES` rounds that each lost the race, the composition runs under the lock (progress).

Order of operations for a release (see :func:`sparsedp.api.release`):

1. validate and calibrate (no data, no noise); :meth:`Ledger.check` refuses early, before any data are
   read, a release that cannot fit (advisory: nothing is recorded);
2. bound and count the data (so that bad input fails without spending budget);
3. :meth:`Ledger.charge` — the atomic check and insert, committed to disk (``synchronous=FULL``) or refused
   with :class:`~sparsedp.errors.BudgetExceededError` — before any noise is drawn;
4. draw the noise, write the output atomically (temporary file, ``os.replace``);
5. :meth:`Ledger.mark_published`.

A crash between 3 and 5 leaves a *charged, unpublished* release (the budget is spent, which is the safe
direction); no output can exist without its charge (``tests/ledger/test_ledger_release.py`` kills releases
with SIGKILL at random points to check it). A SIGKILL during step 4 can leave a hidden ``.<name>.*.tmp``
file next to the output, never a partial output.

Composition (what "spent" means). Every charge records its (ε, δ), optionally a zCDP ρ, its typed privacy
event (:mod:`sparsedp.accounting.events`, stored as JSON: kind + parameters, with its profile samples once
computed), its privacy profile where it has one (:mod:`sparsedp.accounting.profiles`, stored as JSON: family +
parameters) and its neighbouring relation. Four sound accountings of the whole sequence are kept, and a charge is
admitted iff *one* of them puts all charges so far plus this one within the budget (each is an upper bound of the
same composition, so certifying the tightest is sound: ``docs/proofs/ledger-composition.md`` §4):

- **basic composition** (Dwork–Roth 2014, Thm 3.16): (Σεᵢ, Σδᵢ);
- **zCDP**, when *every* charge on the dataset carries a zCDP guarantee ρᵢ (with an optional failure
  probability δ'ᵢ for approximate zCDP, Bun–Steinke 2016 Def 8.1 / Lemma 8.3, which composes additively in both):
  ρ = Σρᵢ, δ' = Σδ'ᵢ, converted to (ε, δ' + δ_conv) with the Canonne–Kamath–Steinke conversion
  (:func:`sparsedp.accounting.zcdp.zcdp_to_dp_epsilon`);
- **composed profiles** (``docs/proofs/composition.md``): the dominating pairs of the charges that have one
  (thresholded mechanisms: Gaussian parts composed tightly, threshold events as infinite-loss mass) are
  composed into one pair with profile δ_P(ε); the charges without one are added basically into (ε_o, δ_o);
  the total is (ε_o + ε_P, δ_o + δ_P(ε_P)) (the Theorem of its §3: every (ε, δ) charge is dominated by its
  randomised-response pair, and the product of that with the composed pair is so bounded). This is valid
  when each release's parameters (hence its pair) do not depend on the *outputs* of earlier releases
  (e.g. a schedule of daily releases; what data or query a release uses may be adaptive). Choosing privacy
  parameters from earlier outputs is the "privacy filter" setting, in which only the basic and zCDP
  accountings are known to stay valid (Rogers et al. 2016; Feldman–Zrnic 2021);
- **composed privacy-loss distributions** of *every* charge (``docs/proofs/ledger-composition.md``): each
  event's pair is the lower convex hull of its sampled profile and of its charge's randomised-response curve
  (so per charge never looser than either), the pairs' loss distributions are convolved with pessimistic
  rounding (:func:`sparsedp.accounting.pld.compose_all`); same validity condition as the previous item.

``remaining``/``spent_epsilon`` report the budget as ε at the budget's δ (the smallest ε any of the four
accountings certifies). Sums use ``math.fsum``; a relative slack of 1e-12 absorbs float representation of
budgets split into equal parts (e.g. five charges of 0.2 against 1.0).

Neighbouring relations (:class:`~sparsedp.accounting.calibration.Neighbours`). A dataset's budget is stated
for one relation (``set_budget(..., neighbours=Neighbours.ADD_REMOVE)`` by default; files written before
relations were recorded are read as add/remove), and every charge records its own:

- on an **add/remove** budget, a **replace-one** charge is refused (InvalidParameterError, nothing
  recorded): replace-one guarantees, e.g. pure-DP releases without ``max_units``, reveal the number of
  units and imply no add/remove guarantee;
- on a **replace-one** budget, an **add/remove** (ε, δ) charge counts as its replace-one implication
  (2ε, (1 + e^ε)δ) (group privacy over a removal and an addition: chaining the two (ε, δ)
  inequalities), as a basic charge (its profile and ρ are not used); replace-one charges count as basic (ε, δ) charges
  (and by ρ when all charges are replace-one zCDP). Profiles are add/remove analyses and are used only on
  add/remove budgets.
"""

from __future__ import annotations

import json
import math
import os
import sqlite3
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any, Literal
from pathlib import Path

from . import _validate as v
from .accounting import events as _events
from .accounting.calibration import Neighbours
from .accounting.charge import Charge
from .accounting.composition import compose
from .accounting.conversions import epsilon_from_delta
from .accounting.events import PrivacyEvent, event_from_dict, event_from_profile
from .accounting.pld import compose_all
from .accounting.profiles import PrivacyProfile, profile_from_dict
from .accounting.zcdp import zcdp_to_dp_delta, zcdp_to_dp_epsilon
from .errors import BudgetExceededError, InfeasibleError, InvalidParameterError, InvalidTypeError

_SLACK = 1e-12
#: optimistic rounds of :meth:`Ledger.charge` (compose outside the write lock, then commit if nothing changed)
#: before it composes under the lock
_OPTIMISTIC_TRIES = 8

_SCHEMA = """
CREATE TABLE IF NOT EXISTS datasets (
    name TEXT PRIMARY KEY,
    epsilon REAL NOT NULL,
    delta REAL NOT NULL,
    created REAL NOT NULL,
    neighbours TEXT NOT NULL DEFAULT 'ADD_REMOVE'
);
CREATE TABLE IF NOT EXISTS charges (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    dataset TEXT NOT NULL REFERENCES datasets(name),
    epsilon REAL NOT NULL,
    delta REAL NOT NULL,
    rho REAL,
    rho_delta REAL,
    mechanism TEXT NOT NULL,
    note TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('charged', 'published')),
    output TEXT,
    created REAL NOT NULL,
    published REAL,
    pid INTEGER NOT NULL,
    profile TEXT,
    neighbours TEXT NOT NULL DEFAULT 'ADD_REMOVE',
    event TEXT,
    samples TEXT
);
"""

#: columns added after the first release of the ledger format: (table, column, declaration); files that
#: lack them are migrated on open (rows without a profile or event are basic (ε, δ) charges, composed as their
#: randomised-response pair; rows with a profile but no event get the event of that profile; relation add/remove)
_MIGRATIONS = (("datasets", "neighbours", "TEXT NOT NULL DEFAULT 'ADD_REMOVE'"),
               ("charges", "profile", "TEXT"),
               ("charges", "neighbours", "TEXT NOT NULL DEFAULT 'ADD_REMOVE'"),
               ("charges", "event", "TEXT"),
               ("charges", "samples", "TEXT"))


@dataclass(frozen=True)
class Spent:
    """Budget spent on a dataset: basic composition, and the zCDP total when every part is zCDP.

    ``epsilon``/``delta`` are the basic sums of the charges as counted against the budget's relation
    (add/remove charges on a replace-one budget converted); ``epsilon_at_budget_delta`` is the smallest ε
    at the budget's δ certified by any of the ledger's accountings (basic, zCDP, composed profiles).
    """

    epsilon: float
    delta: float
    n_charges: int
    rho: float | None = None
    rho_delta: float | None = None
    epsilon_at_budget_delta: float = math.nan


@dataclass(frozen=True)
class ChargeRecord:
    id: int
    dataset: str
    epsilon: float
    delta: float
    rho: float | None
    mechanism: str
    note: str
    status: str
    output: str | None
    created: float
    neighbours: Neighbours = Neighbours.ADD_REMOVE
    profile: PrivacyProfile | None = None
    event: PrivacyEvent | None = None


class Ledger:
    """Budget ledger in the SQLite file at ``path`` (created if missing; older files are migrated)."""

    def __init__(self, path: str | os.PathLike[str], *, timeout: float = 60.0):
        self.path = Path(path)
        if self.path.exists() and self.path.is_dir():
            raise InvalidParameterError(f"ledger path {str(self.path)!r} is a directory; give a file name")
        try:
            self._con = sqlite3.connect(str(self.path), timeout=timeout, isolation_level=None)
            self._con.execute("PRAGMA journal_mode=WAL")
            self._con.execute("PRAGMA synchronous=FULL")
            self._con.execute(f"PRAGMA busy_timeout={int(timeout * 1000)}")
            self._con.executescript(_SCHEMA)
            if self._missing_columns():
                with self._immediate():  # re-checked under the write lock: concurrent openers migrate once
                    for table, col, decl in self._missing_columns():
                        self._con.execute(f"ALTER TABLE {table} ADD COLUMN {col} {decl}")
        except sqlite3.DatabaseError as e:
            raise InvalidParameterError(f"cannot open ledger {str(self.path)!r}: {e}") from None

    def _missing_columns(self) -> list[tuple[str, str, str]]:
        have = {t: {r[1] for r in self._con.execute(f"PRAGMA table_info({t})")} for t in ("datasets", "charges")}
        return [m for m in _MIGRATIONS if m[1] not in have[m[0]]]

    def close(self) -> None:
        self._con.close()

    def __enter__(self) -> "Ledger":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- budgets -------------------------------------------------------------------------------------
    def set_budget(self, dataset: str, *, epsilon: float, delta: float,
                   neighbours: Neighbours = Neighbours.ADD_REMOVE) -> None:
        """Create ``dataset`` with a total (ε, δ) budget for the relation ``neighbours``.

        A budget, once set, can only be lowered, and its relation cannot change.
        """
        name = _dataset_name(dataset)
        eps = v.epsilon(epsilon)
        dlt = v.real("delta", delta, lo=0.0, hi=1.0, hi_open=True)
        if not isinstance(neighbours, Neighbours):
            raise InvalidTypeError(f"neighbours must be a Neighbours member, got {neighbours!r}")
        with self._immediate():
            row = self._con.execute("SELECT epsilon, delta, neighbours FROM datasets WHERE name=?",
                                    (name,)).fetchone()
            if row is None:
                self._con.execute("INSERT INTO datasets (name, epsilon, delta, created, neighbours) "
                                  "VALUES (?, ?, ?, ?, ?)", (name, eps, dlt, time.time(), neighbours.name))
            elif row[2] != neighbours.name:
                raise InvalidParameterError(
                    f"dataset {name!r} has a budget for the {Neighbours[row[2]].value!r} relation; it cannot be "
                    f"changed to {neighbours.value!r}")
            elif eps > row[0] or dlt > row[1]:
                raise InvalidParameterError(
                    f"dataset {name!r} already has budget (epsilon={row[0]:g}, delta={row[1]:g}); "
                    "a ledger budget can be lowered but never raised")
            else:
                self._con.execute("UPDATE datasets SET epsilon=?, delta=? WHERE name=?", (eps, dlt, name))

    def budget(self, dataset: str) -> tuple[float, float]:
        b_eps, b_dlt, _ = self._budget(_dataset_name(dataset))
        return b_eps, b_dlt

    def budget_neighbours(self, dataset: str) -> Neighbours:
        """The neighbouring relation the dataset's budget is stated for."""
        return self._budget(_dataset_name(dataset))[2]

    def _budget(self, name: str) -> tuple[float, float, Neighbours]:
        row = self._con.execute("SELECT epsilon, delta, neighbours FROM datasets WHERE name=?",
                                (name,)).fetchone()
        if row is None:
            raise InvalidParameterError(f"dataset {name!r} has no budget in ledger {str(self.path)!r}; "
                                        "set one first (sparsedp ledger init / Ledger.set_budget)")
        return float(row[0]), float(row[1]), Neighbours[row[2]]

    def spent(self, dataset: str) -> Spent:
        name = _dataset_name(dataset)
        b_eps, b_dlt, rel = self._budget(name)
        acc = _Accounts(_effective(self._rows(name), rel))
        return Spent(epsilon=acc.eps, delta=acc.dlt, n_charges=acc.n, rho=acc.rho,
                     rho_delta=acc.rho_delta if acc.rho is not None else None,
                     epsilon_at_budget_delta=acc.epsilon_at(b_dlt))

    def spent_epsilon(self, dataset: str) -> float:
        """Spent budget as ε at the budget's δ (smallest ε certified by any accounting; inf if none)."""
        return self.spent(dataset).epsilon_at_budget_delta

    def remaining(self, dataset: str) -> float:
        """Remaining budget as ε at the budget's δ: ``max(0, ε_budget − spent_epsilon)``."""
        b_eps, _ = self.budget(dataset)
        return max(0.0, b_eps - self.spent_epsilon(dataset))

    # -- charges -------------------------------------------------------------------------------------
    def charge(self, dataset: str, charge: "Charge | None" = None, *, epsilon: float | None = None,
               delta: float | None = None, rho: float | None = None, rho_delta: float = 0.0,
               mechanism: str = "", note: str = "") -> int:
        """Atomically check that a charge fits the remaining budget and record it.

        Either a :class:`Charge` (positional) or the keyword form ``epsilon=, delta=[, rho=, rho_delta=,
        mechanism=]`` (a basic add/remove charge). Returns the charge id. Raises
        :class:`BudgetExceededError` (nothing recorded) if it does not fit.
        """
        name = _dataset_name(dataset)
        c = _as_charge(charge, epsilon, delta, rho, rho_delta, mechanism)
        prof = None if c.profile is None else json.dumps(c.profile.to_dict(), sort_keys=True)
        for _ in range(_OPTIMISTIC_TRIES):
            with self._snapshot():
                seen = self._version(name)
                b_eps, b_dlt, rel = self._budget(name)
                rows = self._rows(name)
            self._refuse_unless_fits(name, c, rows, b_eps, b_dlt, rel)  # the composition, without the lock
            with self._immediate():
                if self._version(name) == seen:  # nothing charged and the budget unchanged since the snapshot
                    return self._insert(name, c, prof, note)
            # another charge (or a lowered budget) came in between: compose again with it
        with self._immediate():  # still contended: compose under the lock (always makes progress)
            b_eps, b_dlt, rel = self._budget(name)
            self._refuse_unless_fits(name, c, self._rows(name), b_eps, b_dlt, rel)
            return self._insert(name, c, prof, note)

    def _insert(self, name: str, c: Charge, prof: str | None, note: str) -> int:
        """Record the charge ``c`` (inside a write transaction whose check admitted it); its id."""
        ev, smp = _stored_event(c)
        cur = self._con.execute(
            "INSERT INTO charges (dataset, epsilon, delta, rho, rho_delta, mechanism, note, status, "
            "created, pid, profile, neighbours, event, samples) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, 'charged', ?, ?, ?, ?, ?, ?)",
            (name, c.epsilon, c.delta, c.rho, c.rho_delta if c.rho is not None else None, c.mechanism,
             str(note), time.time(), os.getpid(), prof, c.neighbours.name, ev, smp))
        if smp is not None:  # earlier rows of the same event, charged before its samples were needed
            self._con.execute("UPDATE charges SET samples=? WHERE dataset=? AND event=? AND samples IS NULL",
                              (smp, name, ev))
        assert cur.lastrowid is not None  # an INSERT always sets it
        return int(cur.lastrowid)

    def _version(self, name: str) -> tuple[Any, ...]:
        """What the admission of a charge on ``name`` depends on: the budget row and which charges exist
        (charges are only ever appended, with increasing ids, so their count and largest id identify the set)."""
        budget = self._con.execute("SELECT epsilon, delta, neighbours FROM datasets WHERE name=?", (name,)).fetchone()
        n, last = self._con.execute("SELECT COUNT(*), MAX(id) FROM charges WHERE dataset=?", (name,)).fetchone()
        return (budget, n, last)

    def check(self, dataset: str, charge: "Charge | None" = None, *, epsilon: float | None = None,
              delta: float | None = None, rho: float | None = None, rho_delta: float = 0.0) -> None:
        """Raise :class:`BudgetExceededError` if the charge would not fit now.

        Records nothing and is advisory only (another process may charge in between): it lets a release
        fail before reading any data; :meth:`charge` repeats the check atomically.
        """
        name = _dataset_name(dataset)
        self._check_fits(name, _as_charge(charge, epsilon, delta, rho, rho_delta, ""))

    def fits(self, dataset: str, charges: "list[Charge]") -> bool:
        """Would all of ``charges``, added to those recorded, fit the budget? (Advisory; records nothing.)"""
        name = _dataset_name(dataset)
        b_eps, b_dlt, rel = self._budget(name)
        for c in charges:
            _check_relation(name, c, rel)
        acc = _Accounts(_effective(self._rows(name) + [_Row.of(c) for c in charges], rel))
        return acc.fits(b_eps, b_dlt)

    def how_many(self, dataset: str, charge: "Charge", *, cap: int = 1_000_000) -> int:
        """How many more copies of ``charge`` fit the budget now (at most ``cap``; advisory, records nothing).

        Every accounting's total is non-decreasing in the number of copies, so ``fits`` is monotone in it:
        exponential then binary search.
        """
        cap = v.integer("cap", cap, lo=1)
        if not self.fits(dataset, [charge]):
            return 0
        lo, hi = 1, 2
        while hi <= cap and self.fits(dataset, [charge] * hi):
            lo, hi = hi, hi * 2
        hi = min(hi, cap + 1)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if self.fits(dataset, [charge] * mid):
                lo = mid
            else:
                hi = mid
        return lo

    def _check_fits(self, name: str, c: "Charge") -> None:
        b_eps, b_dlt, rel = self._budget(name)
        self._refuse_unless_fits(name, c, self._rows(name), b_eps, b_dlt, rel)

    @staticmethod
    def _refuse_unless_fits(name: str, c: "Charge", rows: list["_Row"], b_eps: float, b_dlt: float,
                            rel: Neighbours) -> None:
        """Raise unless ``c`` added to the charges ``rows`` fits the budget (b_eps, b_dlt) of relation ``rel``."""
        _check_relation(name, c, rel)
        acc = _Accounts(_effective(rows + [_Row.of(c)], rel))
        if not acc.fits(b_eps, b_dlt):
            s = _Accounts(_effective(rows, rel))
            raise BudgetExceededError(_refusal(name, b_eps, b_dlt, s, c), dataset=name, budget=(b_eps, b_dlt),
                                      spent=s.epsilon_at(b_dlt), remaining=max(0.0, b_eps - s.epsilon_at(b_dlt)),
                                      needed=(c.epsilon, c.delta))

    def _rows(self, name: str) -> list["_Row"]:
        q = ("SELECT epsilon, delta, rho, rho_delta, profile, neighbours, event, samples, mechanism FROM charges "
             "WHERE dataset=? ORDER BY id")
        out = []
        for r in self._con.execute(q, (name,)):
            prof, rel = _load_profile(r[4]), Neighbours[r[5]]
            out.append(_Row(float(r[0]), float(r[1]), r[2], r[3], prof, rel,
                            _load_event(r[6], r[7], prof, float(r[0]), float(r[1]), rel, r[8])))
        return out

    def mark_published(self, charge_id: int, output: str | None = None) -> None:
        """Record that the release charged as ``charge_id`` was published (to ``output``, if a file)."""
        cid = v.integer("charge_id", charge_id, lo=1, hi=2**63 - 1)
        if output is not None and not isinstance(output, str):
            raise InvalidTypeError(f"output must be a path string or None, got {type(output).__name__}")
        with self._immediate():
            n = self._con.execute(
                "UPDATE charges SET status='published', output=?, published=? WHERE id=?",
                (output, time.time(), cid)).rowcount
            if n != 1:
                raise InvalidParameterError(f"no charge with id {charge_id} in ledger {str(self.path)!r}")

    def history(self, dataset: str | None = None) -> list[ChargeRecord]:
        q = ("SELECT id, dataset, epsilon, delta, rho, mechanism, note, status, output, created, neighbours, "
             "profile, event, samples FROM charges")
        args: tuple[Any, ...] = ()
        if dataset is not None:
            q += " WHERE dataset=?"
            args = (_dataset_name(dataset),)
        out = []
        for row in self._con.execute(q + " ORDER BY id", args):
            prof, rel = _load_profile(row[11]), Neighbours[row[10]]
            out.append(ChargeRecord(*row[:10], neighbours=rel, profile=prof,  # type: ignore[misc]  # 10 fields first
                                    event=_load_event(row[12], row[13], prof, float(row[2]), float(row[3]), rel,
                                                      row[5])))
        return out

    def datasets(self) -> list[str]:
        return [r[0] for r in self._con.execute("SELECT name FROM datasets ORDER BY name")]

    def _immediate(self) -> "_Immediate":
        return _Immediate(self._con)

    def _snapshot(self) -> "_Immediate":
        """A read transaction: the reads inside it see one committed state (WAL: writers are not blocked)."""
        return _Immediate(self._con, "BEGIN DEFERRED")


@dataclass(frozen=True)
class _Row:
    """A charge as the accountings see it."""

    epsilon: float
    delta: float
    rho: float | None
    rho_delta: float | None
    profile: PrivacyProfile | None
    neighbours: Neighbours
    event: PrivacyEvent

    @staticmethod
    def of(c: Charge) -> "_Row":
        assert c.event is not None  # Charge.__post_init__ fills it
        return _Row(c.epsilon, c.delta, c.rho, c.rho_delta if c.rho is not None else None, c.profile,
                    c.neighbours, c.event)


def _refusal(name: str, b_eps: float, b_dlt: float, spent: "_Accounts", c: Charge) -> str:
    """The budget refusal in plain numbers: the budget, what the recorded releases spent (ε at the budget's δ,
    and their plain ε sum when composition certifies less), what is left, and what the refused release needs."""
    used = spent.epsilon_at(b_dlt)
    left = max(0.0, b_eps - used) if math.isfinite(used) else 0.0
    n = spent.n
    if n == 0:
        history = "nothing spent yet"
    else:
        plural = "release" if n == 1 else "releases"
        shown = f"epsilon {used:.4g}" if math.isfinite(used) else "more than the budget's delta allows"
        composed = f"; their epsilons add up to {spent.eps:.4g}" if math.isfinite(used) and \
            f"{spent.eps:.4g}" != f"{used:.4g}" else ""
        history = f"{n} {plural} spent {shown} at delta {b_dlt:g} (delta used: {spent.dlt:.3g}{composed})"
    return (f"release refused: dataset {name!r} has a budget of epsilon {b_eps:g} at delta {b_dlt:g}; {history}; "
            f"epsilon {left:.4g} is left; this release needs epsilon {c.epsilon:.4g} at delta {c.delta:.3g}. "
            f"Nothing was released or charged.")


def _load_profile(text: str | None) -> PrivacyProfile | None:
    """The stored profile, or ``None`` (a basic (ε, δ) charge, always sound) if absent or not readable by
    this version (e.g. a family added later)."""
    if text is None:
        return None
    try:
        return profile_from_dict(json.loads(text))
    except (ValueError, TypeError):
        return None


def _load_event(text: str | None, samples: str | None, profile: PrivacyProfile | None, epsilon: float,
                delta: float, rel: Neighbours, mechanism: str) -> PrivacyEvent:
    """The stored event (with its stored profile samples, if any); for rows written before events, or with an
    event this version cannot read, the event of the stored profile, else the row's basic (ε, δ)."""
    if text is not None:
        try:
            ev = event_from_dict(json.loads(text))
            if ev.epsilon == epsilon and ev.delta == delta and ev.neighbours is rel:
                if samples is not None:
                    eps, dlt = json.loads(samples)
                    _events.remember_samples(ev, eps, dlt)
                return ev
        except (ValueError, TypeError, KeyError):
            pass
    return event_from_profile(profile, epsilon, delta, rel, mechanism)


def _stored_event(c: Charge) -> tuple[str | None, str | None]:
    """The JSON of the charge's event and of its profile samples when this process has computed them."""
    if c.event is None:
        return None, None
    smp = _events.known_samples(c.event)
    return (json.dumps(c.event.to_dict(), sort_keys=True),
            None if smp is None else json.dumps([smp[0].tolist(), smp[1].tolist()]))


def _check_relation(name: str, c: Charge, rel: Neighbours) -> None:
    if rel is Neighbours.ADD_REMOVE and c.neighbours is Neighbours.REPLACE_ONE:
        raise InvalidParameterError(
            f"release refused: dataset {name!r} has an add/remove budget, and this release "
            f"({c.mechanism or 'unnamed mechanism'}) is private only for replace-one neighbours (it reveals the "
            "number of units); pass max_units=... to make the release add/remove private. Nothing was released.")


def _effective(rows: list[_Row], rel: Neighbours) -> list[_Row]:
    """The charges as counted against a budget of relation ``rel`` (module docstring, "Neighbouring relations")."""
    if rel is Neighbours.ADD_REMOVE:
        return rows
    out = []
    for r in rows:
        if r.neighbours is Neighbours.ADD_REMOVE:  # group privacy: (2ε, (1 + e^ε)δ), basic only
            e2, d2 = 2.0 * r.epsilon, min(1.0, (1.0 + math.exp(r.epsilon)) * r.delta)
            out.append(_Row(e2, d2, None, None, None, Neighbours.REPLACE_ONE,
                            _events.ApproxDPEvent(epsilon=e2, delta=d2, neighbours=Neighbours.REPLACE_ONE)))
        else:
            out.append(_Row(r.epsilon, r.delta, r.rho, r.rho_delta, None, r.neighbours, r.event))
    return out


class _Accounts:
    """The four accountings of a list of charges (module docstring)."""

    def __init__(self, rows: list[_Row]):
        self.n = len(rows)
        self.events = Counter(r.event for r in rows)
        self._pld: Any = None
        self.eps = math.fsum(r.epsilon for r in rows)
        self.dlt = math.fsum(r.delta for r in rows)
        all_zcdp = bool(rows) and all(r.rho is not None for r in rows)
        self.rho = math.fsum(r.rho or 0.0 for r in rows) if all_zcdp else None
        # 0.0 when not every charge is zCDP: only read together with rho (which is None then)
        self.rho_delta = math.fsum(r.rho_delta or 0.0 for r in rows) if all_zcdp else 0.0
        pairs = [p for p in (r.profile.pair() for r in rows if r.profile is not None) if p is not None]
        self.pair: Any = None
        if pairs:
            self.pair = compose(pairs)
            rest = [r for r in rows if r.profile is None or r.profile.pair() is None]
            self.eps_o = math.fsum(r.epsilon for r in rest)
            self.dlt_o = math.fsum(r.delta for r in rest)

    def _basic_ok(self, b_eps: float, b_dlt: float) -> bool:
        return self.eps <= b_eps * (1 + _SLACK) and self.dlt <= b_dlt * (1 + _SLACK)

    def _composed_delta(self, eps_p: float) -> float:
        try:
            return float(self.pair.delta(eps_p))
        except InfeasibleError:  # numeric table too large: this accounting is unavailable
            return math.inf

    @property
    def pld(self) -> Any:
        """The privacy-loss distribution of all the charges composed (every charge by its event's PLD), or
        ``None`` when its table would be too large (then this accounting is unavailable)."""
        if self._pld is None:
            try:
                self._pld = compose_all([(ev.pld(), n) for ev, n in self.events.items()])
            except InfeasibleError:
                self._pld = False
        return self._pld or None

    def pld_delta(self, eps: float) -> float:
        """δ at ``eps`` of the composed privacy-loss distributions (1 if unavailable)."""
        if self.n == 0:
            return 0.0
        p = self.pld
        return 1.0 if p is None else float(p.hockey_stick(eps)[0])

    def fits(self, b_eps: float, b_dlt: float) -> bool:
        if self._basic_ok(b_eps, b_dlt):
            return True
        if self.rho is not None and _zcdp_fits(self.rho, self.rho_delta, b_eps, b_dlt):
            return True
        if self.pair is not None and self.eps_o <= b_eps and self.dlt_o < b_dlt:
            if self._composed_delta(b_eps - self.eps_o) + self.dlt_o <= b_dlt:
                return True
        return self.pld_delta(b_eps) <= b_dlt

    def epsilon_at(self, b_dlt: float) -> float:
        """Smallest ε at δ = b_dlt certified by any accounting (0 with no charges, inf if none applies)."""
        if self.n == 0:
            return 0.0
        best = self.eps if self.dlt <= b_dlt * (1 + _SLACK) else math.inf
        if self.rho is not None and self.rho_delta < b_dlt:
            best = min(best, float(zcdp_to_dp_epsilon(self.rho, b_dlt - self.rho_delta)))
        if self.pair is not None and self.dlt_o < b_dlt:
            try:
                best = min(best, self.eps_o + self.pair.epsilon(b_dlt - self.dlt_o))
            except InfeasibleError:
                pass
        if self.pld is not None:
            best = min(best, epsilon_from_delta(self.pld_delta, b_dlt))
        return best


def _as_charge(charge: Any, epsilon: float | None, delta: float | None, rho: float | None, rho_delta: float,
               mechanism: Any) -> Charge:
    if charge is not None:
        if not isinstance(charge, Charge):
            raise InvalidTypeError(f"charge must be a sparsedp.ledger.Charge, got {type(charge).__name__}")
        if epsilon is not None or delta is not None or rho is not None:
            raise InvalidParameterError("pass either a Charge or epsilon=/delta=/rho=, not both")
        return charge
    if epsilon is None or delta is None:
        raise InvalidParameterError("a charge needs epsilon= and delta= (or a Charge object)")
    return Charge(epsilon=epsilon, delta=delta, neighbours=Neighbours.ADD_REMOVE, mechanism=str(mechanism),
                  rho=rho, rho_delta=rho_delta)


class _Immediate:
    """``BEGIN IMMEDIATE`` … ``COMMIT`` (``ROLLBACK`` on error): the write lock is held while we read.
    (With ``begin="BEGIN DEFERRED"``, a read transaction: one snapshot, no lock.)"""

    def __init__(self, con: sqlite3.Connection, begin: str = "BEGIN IMMEDIATE"):
        self.con = con
        self.begin = begin

    def __enter__(self) -> sqlite3.Connection:
        self.con.execute(self.begin)
        return self.con

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> Literal[False]:
        self.con.execute("ROLLBACK" if exc_type else "COMMIT")
        return False


def open_ledger(ledger: object) -> tuple["Ledger", bool]:
    """``(Ledger, owned)`` for a :class:`Ledger` or the path of an existing ledger file (opened here:
    ``owned`` means the caller closes it). A release never creates a ledger: a missing file is an error."""
    if isinstance(ledger, Ledger):
        return ledger, False
    if isinstance(ledger, (str, os.PathLike)) and os.fspath(ledger):
        if not os.path.isfile(ledger):
            raise InvalidParameterError(f"no ledger file at {os.fspath(ledger)!r}; create it and set the "
                                        f"dataset's budget first (sparsedp ledger init FILE --dataset NAME …)")
        return Ledger(ledger), True
    raise InvalidTypeError(f"ledger must be a sparsedp.Ledger or the path of a ledger file, got "
                             f"{type(ledger).__name__}")


def _dataset_name(name: object) -> str:
    if not isinstance(name, str) or not name.strip():
        raise InvalidParameterError(f"dataset must be a non-empty string, got {name!r}")
    return name


def _zcdp_fits(rho: float, rho_delta: float, b_eps: float, b_dlt: float) -> bool:
    """Does (ρ, δ')-approximate zCDP imply (b_eps, b_dlt)-DP? (CKS conversion with δ_conv = b_dlt − δ')."""
    if rho_delta >= b_dlt:
        return False
    return zcdp_to_dp_delta(rho, b_eps) <= (b_dlt - rho_delta)
