"""A privacy-budget ledger: every release is charged against a named dataset's total budget.

Storage is one SQLite file in WAL mode. The check "does this charge fit the budget?" and the insert of
the charge happen in one ``BEGIN IMMEDIATE`` transaction, which takes SQLite's write lock before reading,
so concurrent processes are serialised and cannot together overspend.

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

Composition (what "spent" means):

- **basic composition** (Dwork–Roth 2014, Thm 3.16): (Σεᵢ, Σδᵢ);
- **zCDP**, when *every* charge on the dataset carries a zCDP guarantee ρᵢ (with an optional failure
  probability δ'ᵢ for approximate zCDP, Bun–Steinke 2016 Def 8.1 / Lemma 8.3, which composes additively in both):
  ρ = Σρᵢ, δ' = Σδ'ᵢ, converted to (ε, δ' + δ_conv) with the Canonne–Kamath–Steinke conversion
  (:func:`sparsedp.accounting.zcdp.zcdp_to_dp_epsilon`).

A charge is admitted if the basic sum fits the budget, or, where every part is zCDP, the converted zCDP
total fits. Sums use ``math.fsum``; a relative slack of 1e-12 absorbs float representation of budgets split
into equal parts (e.g. five charges of 0.2 against 1.0).
"""

from __future__ import annotations

import math
import os
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

from . import _validate as v
from .errors import BudgetExceededError, InvalidParameterError

_SLACK = 1e-12

_SCHEMA = """
CREATE TABLE IF NOT EXISTS datasets (
    name TEXT PRIMARY KEY,
    epsilon REAL NOT NULL,
    delta REAL NOT NULL,
    created REAL NOT NULL
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
    pid INTEGER NOT NULL
);
"""


@dataclass(frozen=True)
class Spent:
    """Budget spent on a dataset: basic composition, and the zCDP total when every part is zCDP."""

    epsilon: float
    delta: float
    n_charges: int
    rho: float | None = None
    rho_delta: float | None = None


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


class Ledger:
    """Budget ledger in the SQLite file at ``path`` (created if missing)."""

    def __init__(self, path: str | os.PathLike, *, timeout: float = 60.0):
        self.path = Path(path)
        if self.path.exists() and self.path.is_dir():
            raise InvalidParameterError(f"ledger path {str(self.path)!r} is a directory; give a file name")
        try:
            self._con = sqlite3.connect(str(self.path), timeout=timeout, isolation_level=None)
            self._con.execute("PRAGMA journal_mode=WAL")
            self._con.execute("PRAGMA synchronous=FULL")
            self._con.execute(f"PRAGMA busy_timeout={int(timeout * 1000)}")
            self._con.executescript(_SCHEMA)
        except sqlite3.DatabaseError as e:
            raise InvalidParameterError(f"cannot open ledger {str(self.path)!r}: {e}") from None

    def close(self) -> None:
        self._con.close()

    def __enter__(self) -> "Ledger":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- budgets -------------------------------------------------------------------------------------
    def set_budget(self, dataset: str, *, epsilon: float, delta: float) -> None:
        """Create ``dataset`` with a total (ε, δ) budget. A budget, once set, can only be lowered."""
        name = _dataset_name(dataset)
        eps = v.epsilon(epsilon)
        dlt = v.real("delta", delta, lo=0.0, hi=1.0, hi_open=True)
        with self._immediate():
            row = self._con.execute("SELECT epsilon, delta FROM datasets WHERE name=?", (name,)).fetchone()
            if row is None:
                self._con.execute("INSERT INTO datasets VALUES (?, ?, ?, ?)", (name, eps, dlt, time.time()))
            elif eps > row[0] or dlt > row[1]:
                raise InvalidParameterError(
                    f"dataset {name!r} already has budget (epsilon={row[0]:g}, delta={row[1]:g}); "
                    "a ledger budget can be lowered but never raised")
            else:
                self._con.execute("UPDATE datasets SET epsilon=?, delta=? WHERE name=?", (eps, dlt, name))

    def budget(self, dataset: str) -> tuple[float, float]:
        row = self._con.execute("SELECT epsilon, delta FROM datasets WHERE name=?",
                                (_dataset_name(dataset),)).fetchone()
        if row is None:
            raise InvalidParameterError(f"dataset {dataset!r} has no budget in ledger {str(self.path)!r}; "
                                        "set one first (sparsedp ledger init / Ledger.set_budget)")
        return float(row[0]), float(row[1])

    def spent(self, dataset: str) -> Spent:
        return _spent(self._con, _dataset_name(dataset))

    # -- charges -------------------------------------------------------------------------------------
    def charge(self, dataset: str, *, epsilon: float, delta: float, rho: float | None = None,
               rho_delta: float = 0.0, mechanism: str = "", note: str = "") -> int:
        """Atomically check that (ε, δ) [and ρ] fit the remaining budget and record the charge.

        Returns the charge id. Raises :class:`BudgetExceededError` (nothing recorded) if it does not fit.
        """
        name, eps, dlt, r, rd = _charge_args(dataset, epsilon, delta, rho, rho_delta)
        with self._immediate():
            self._check_fits(name, eps, dlt, r, rd)
            cur = self._con.execute(
                "INSERT INTO charges (dataset, epsilon, delta, rho, rho_delta, mechanism, note, status, "
                "created, pid) VALUES (?, ?, ?, ?, ?, ?, ?, 'charged', ?, ?)",
                (name, eps, dlt, r, rd if r is not None else None, str(mechanism), str(note), time.time(),
                 os.getpid()))
            return int(cur.lastrowid)

    def check(self, dataset: str, *, epsilon: float, delta: float, rho: float | None = None,
              rho_delta: float = 0.0) -> None:
        """Raise :class:`BudgetExceededError` if a charge of (ε, δ) [and ρ] would not fit now.

        Records nothing and is advisory only (another process may charge in between): it lets a release
        fail before reading any data; :meth:`charge` repeats the check atomically.
        """
        name, eps, dlt, r, rd = _charge_args(dataset, epsilon, delta, rho, rho_delta)
        self._check_fits(name, eps, dlt, r, rd)

    def _check_fits(self, name: str, eps: float, dlt: float, r: float | None, rd: float) -> None:
        b_eps, b_dlt = self.budget(name)
        s = _spent(self._con, name)
        basic_ok = (math.fsum([s.epsilon, eps]) <= b_eps * (1 + _SLACK)
                    and math.fsum([s.delta, dlt]) <= b_dlt * (1 + _SLACK))
        zcdp_ok = False
        if not basic_ok and r is not None and (s.n_charges == 0 or s.rho is not None):
            zcdp_ok = _zcdp_fits(math.fsum([s.rho or 0.0, r]), math.fsum([s.rho_delta or 0.0, rd]),
                                 b_eps, b_dlt)
        if not (basic_ok or zcdp_ok):
            raise BudgetExceededError(
                f"release refused: dataset {name!r} has spent epsilon={s.epsilon:g}, delta={s.delta:g} "
                f"of its budget (epsilon={b_eps:g}, delta={b_dlt:g}); this release needs "
                f"epsilon={eps:g}, delta={dlt:g}. Nothing was released.")

    def mark_published(self, charge_id: int, output: str | None = None) -> None:
        """Record that the release charged as ``charge_id`` was published (to ``output``, if a file)."""
        cid = v.integer("charge_id", charge_id, lo=1, hi=2**63 - 1)
        if output is not None and not isinstance(output, str):
            raise v.InvalidTypeError(f"output must be a path string or None, got {type(output).__name__}")
        with self._immediate():
            n = self._con.execute(
                "UPDATE charges SET status='published', output=?, published=? WHERE id=?",
                (output, time.time(), cid)).rowcount
            if n != 1:
                raise InvalidParameterError(f"no charge with id {charge_id} in ledger {str(self.path)!r}")

    def history(self, dataset: str | None = None) -> list[ChargeRecord]:
        q = "SELECT id, dataset, epsilon, delta, rho, mechanism, note, status, output, created FROM charges"
        args: tuple = ()
        if dataset is not None:
            q += " WHERE dataset=?"
            args = (_dataset_name(dataset),)
        return [ChargeRecord(*row) for row in self._con.execute(q + " ORDER BY id", args)]

    def datasets(self) -> list[str]:
        return [r[0] for r in self._con.execute("SELECT name FROM datasets ORDER BY name")]

    def _immediate(self):
        return _Immediate(self._con)


class _Immediate:
    """``BEGIN IMMEDIATE`` … ``COMMIT`` (``ROLLBACK`` on error): the write lock is held while we read."""

    def __init__(self, con: sqlite3.Connection):
        self.con = con

    def __enter__(self):
        self.con.execute("BEGIN IMMEDIATE")
        return self.con

    def __exit__(self, exc_type, exc, tb):
        self.con.execute("ROLLBACK" if exc_type else "COMMIT")
        return False


def _charge_args(dataset, epsilon, delta, rho, rho_delta):
    name = _dataset_name(dataset)
    eps = v.epsilon(epsilon)
    dlt = v.real("delta", delta, lo=0.0, hi=1.0, hi_open=True)
    r = None if rho is None else v.positive("rho", rho)
    rd = v.real("rho_delta", rho_delta, lo=0.0, hi=1.0, hi_open=True)
    return name, eps, dlt, r, rd


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
    raise v.InvalidTypeError(f"ledger must be a sparsedp.Ledger or the path of a ledger file, got "
                             f"{type(ledger).__name__}")


def _dataset_name(name: object) -> str:
    if not isinstance(name, str) or not name.strip():
        raise InvalidParameterError(f"dataset must be a non-empty string, got {name!r}")
    return name


def _spent(con: sqlite3.Connection, name: str) -> Spent:
    rows = con.execute("SELECT epsilon, delta, rho, rho_delta FROM charges WHERE dataset=?", (name,)).fetchall()
    eps = math.fsum(r[0] for r in rows)
    dlt = math.fsum(r[1] for r in rows)
    all_zcdp = bool(rows) and all(r[2] is not None for r in rows)
    rho = math.fsum(r[2] for r in rows) if all_zcdp else None
    rho_delta = math.fsum(r[3] or 0.0 for r in rows) if all_zcdp else None
    return Spent(epsilon=eps, delta=dlt, n_charges=len(rows), rho=rho, rho_delta=rho_delta)


def charge_of(calibration) -> dict:
    """What a release made with ``calibration`` charges: ``{"epsilon", "delta", "rho", "rho_delta"}``.

    Always the calibrated (ε, δ) target (basic composition). ``rho`` is filled only when the calibration
    states a zCDP guarantee of the whole release (a ``zcdp_rho`` attribute, with an optional
    ``zcdp_delta`` for approximate zCDP; :class:`~sparsedp.accounting.calibration.Calibration` has neither). The thresholded sparse histograms (GSHM, Laplace, CSH,
    top-k CSH) do not: their guarantees are (ε, δ)-DP statements (Karrer's decomposition; for discrete CSH,
    seed 000 Thm 7.7 proves (ε, δ_gauss + δ_inf)-DP directly rather than approximate zCDP), so they are
    charged under basic composition only, which is always sound.
    """
    rho = getattr(calibration, "zcdp_rho", None)
    return {"epsilon": float(calibration.epsilon), "delta": float(calibration.delta),
            "rho": None if rho is None else float(rho),
            "rho_delta": float(getattr(calibration, "zcdp_delta", None) or 0.0) if rho is not None else 0.0}


def _zcdp_fits(rho: float, rho_delta: float, b_eps: float, b_dlt: float) -> bool:
    """Does (ρ, δ')-approximate zCDP imply (b_eps, b_dlt)-DP? (CKS conversion with δ_conv = b_dlt − δ')."""
    from .accounting.zcdp import zcdp_to_dp_delta

    if rho_delta >= b_dlt:
        return False
    return zcdp_to_dp_delta(rho, b_eps) <= (b_dlt - rho_delta)
