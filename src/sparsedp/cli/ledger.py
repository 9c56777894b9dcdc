"""``sparsedp ledger``: create budgets, show what is spent and left, plan how many more releases fit.

Spent and remaining budgets are shown as ε at the budget's δ, the smallest ε certified by the ledger's
accountings (basic, zCDP, composed privacy profiles; see :mod:`sparsedp.ledger`).
"""

from __future__ import annotations

import datetime as _dt
from pathlib import Path

import typer

from .. import accounting
from ..accounting.calibration import Neighbours
from ..errors import SparsedpError
from ..ledger import Charge, Ledger
from ..mechanisms.thresholded import GSHM, Laplace, TopKCSH
from . import app
from ._errors import LEDGER_FLAGS, Commands, fail, interruptible

ledger_app = Commands(help="Privacy-budget ledger: set budgets, list releases, plan more.", no_args_is_help=True)

_RELATIONS = {"add-remove": "ADD_REMOVE", "replace-one": "REPLACE_ONE"}
app.add_typer(ledger_app, name="ledger")


@ledger_app.command("init")
@interruptible
def init(
    path: Path = typer.Argument(..., help="Ledger file (SQLite); created if missing."),
    dataset: str = typer.Option(..., "--dataset", help="Name of the dataset the budget protects."),
    epsilon: float = typer.Option(..., "--epsilon", help="Total epsilon budget."),
    delta: float = typer.Option(..., "--delta", help="Total delta budget."),
    neighbours: str = typer.Option("add-remove", "--neighbours",
                                   help="Neighbouring relation of the budget: add-remove or replace-one."),
) -> None:
    """Set the total (epsilon, delta) budget of a dataset (lowering allowed, raising refused)."""
    if neighbours not in _RELATIONS:
        fail(f"--neighbours must be one of {', '.join(_RELATIONS)}, got {neighbours!r}")
    try:
        with Ledger(path) as led:
            led.set_budget(dataset, epsilon=epsilon, delta=delta, neighbours=Neighbours[_RELATIONS[neighbours]])
    except SparsedpError as e:
        fail(e, LEDGER_FLAGS)
    typer.echo(f"dataset {dataset!r}: budget epsilon={epsilon:g}, delta={delta:g} in {path}")


@ledger_app.command("show")
@interruptible
def show(
    path: Path = typer.Argument(..., help="Ledger file."),
    dataset: str | None = typer.Option(None, "--dataset", help="Only this dataset."),
) -> None:
    """Budgets, spent and remaining epsilon at the budget's delta, and every charge."""
    from rich.console import Console

    if not path.exists():
        fail(f"no ledger at {path}")
    console = Console()
    try:
        with Ledger(path) as led:
            names = [dataset] if dataset else led.datasets()
            for name in names:
                b_eps, b_dlt = led.budget(name)
                s = led.spent(name)
                spent = s.epsilon_at_budget_delta
                rel = led.budget_neighbours(name)
                history = led.history(name)
                for line in summary_lines(name, rel.value, (b_eps, b_dlt), s):
                    console.print(line, markup=False, highlight=False)
                console.print(charges_table(name, history, rel))
                for line in charge_details(history, rel):
                    console.print(line, markup=False, highlight=False)
    except SparsedpError as e:
        fail(e, LEDGER_FLAGS)


def summary_lines(name: str, relation: str, budget: tuple[float, float], s) -> list[str]:
    """A dataset's budget, spent and remaining, each on a line shorter than 80 columns (the dataset's name
    aside)."""
    b_eps, b_dlt = budget
    spent = s.epsilon_at_budget_delta
    basic = f"epsilon {s.epsilon:.4g}, delta {s.delta:.2g}" + (f", rho {s.rho:.4g}" if s.rho is not None else "")
    return [f"dataset {name!r}: budget epsilon {b_eps:g} at delta {b_dlt:g}",
            f"  neighbours: {relation}",
            f"  spent:      epsilon {spent:.4g} at delta {b_dlt:g} ({s.n_charges} charges)",
            f"              (plain sums: {basic})",
            f"  remaining:  epsilon {max(0.0, b_eps - spent):.4g} at delta {b_dlt:g}"]


def charges_table(name: str, history: list, budget_relation):
    """The charges of a dataset as a table that fits 80 columns: id, time, epsilon, delta, mechanism, status
    (the numbers never wrap; the other details follow the table, :func:`charge_details`)."""
    from rich import box
    from rich.table import Table

    t = Table(title=f"{name}: charges", box=box.SIMPLE_HEAD, pad_edge=False, title_justify="left")
    for col, kw in (("id", {"justify": "right"}), ("time (UTC)", {}), ("epsilon", {"justify": "right"}),
                    ("delta", {"justify": "right"})):
        t.add_column(col, no_wrap=True, **kw)
    t.add_column("mechanism", overflow="fold", min_width=10)
    t.add_column("status", no_wrap=True)
    for c in history:
        when = _dt.datetime.fromtimestamp(c.created, _dt.timezone.utc).strftime("%Y-%m-%d %H:%M")
        t.add_row(str(c.id), when, f"{c.epsilon:.4g}", f"{c.delta:.2g}", c.mechanism, c.status)
    return t


def charge_details(history: list, budget_relation) -> list[str]:
    """One line per charge with more to say than the table: its output file, note, privacy profile, zCDP rho,
    and its neighbouring relation when it differs from the budget's."""
    lines = []
    for c in history:
        parts = []
        if c.output:
            parts.append(f"output {c.output}")
        if c.note:
            parts.append(f"note: {c.note}")
        if c.event is not None:
            parts.append(f"event {c.event.kind}")
        if c.rho is not None:
            parts.append(f"rho {c.rho:.4g}")
        if c.neighbours != budget_relation:
            parts.append(f"relation {c.neighbours.name.lower().replace('_', '-')}")
        if parts:
            lines.append(f"  #{c.id}: " + "; ".join(parts))
    return lines


@ledger_app.command("plan")
@interruptible
def plan(
    path: Path = typer.Argument(..., help="Ledger file."),
    dataset: str = typer.Option(..., "--dataset", help="Dataset whose budget to plan against."),
    epsilon: float = typer.Option(..., "--epsilon", help="Epsilon of each planned release."),
    delta: float = typer.Option(..., "--delta", help="Delta of each planned release."),
    max_groups: int | None = typer.Option(None, "--max-groups", help="Max groups per privacy unit (l0)."),
    mechanism: str = typer.Option(GSHM.name, "--mechanism", help="gshm, laplace or topk-csh."),
    top_k: int | None = typer.Option(None, "--top-k", help="k of topk-csh."),
) -> None:
    """How many more releases of one kind fit the remaining budget (composed vs basic composition)."""
    import math

    if not path.exists():
        fail(f"no ledger at {path}")
    if mechanism not in (GSHM.name, Laplace.name, TopKCSH.name):
        fail(f"--mechanism must be gshm, laplace or topk-csh, got {mechanism!r}")
    try:
        kw = {"top_k": top_k} if mechanism == TopKCSH.name else {"l0": max_groups}
        cal = accounting.calibrate(mechanism, epsilon=epsilon, delta=delta, **kw)
        charge = Charge.from_calibration(cal)
        with Ledger(path) as led:
            b_eps, b_dlt = led.budget(dataset)
            s = led.spent(dataset)
            n = led.how_many(dataset, charge)
            room_e, room_d = b_eps * (1 + 1e-12) - s.epsilon, b_dlt * (1 + 1e-12) - s.delta
            c_eps, c_dlt = charge.epsilon, charge.delta
            if led.budget_neighbours(dataset) is Neighbours.REPLACE_ONE:  # group privacy (sparsedp.ledger)
                c_eps, c_dlt = 2.0 * c_eps, (1.0 + math.exp(c_eps)) * c_dlt
            n_basic = max(0, min(math.floor(room_e / c_eps) if c_eps > 0 else 10**6,
                                 math.floor(room_d / c_dlt) if c_dlt > 0 else 10**6))
    except SparsedpError as e:
        fail(e, LEDGER_FLAGS)
    prof = charge.profile
    typer.echo(f"{n} more {mechanism} releases at (epsilon={epsilon:g}, delta={delta:g}) fit dataset {dataset!r} "
               f"(budget epsilon={b_eps:g}, delta={b_dlt:g}; basic composition alone: {n_basic})")
    if prof is not None:
        eps_pts = [0.5 * epsilon, epsilon, 2 * epsilon]
        typer.echo(f"  per-release profile ({prof.family}): " + ", ".join(
            f"delta({e:g})={float(prof.delta(e)):.3g}" for e in eps_pts))
