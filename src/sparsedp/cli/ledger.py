"""``sparsedp ledger``: create budgets and list the release history of a ledger file."""

from __future__ import annotations

import datetime as _dt
from pathlib import Path

import typer

from . import app

ledger_app = typer.Typer(help="Privacy-budget ledger: set budgets, list releases.", no_args_is_help=True)
app.add_typer(ledger_app, name="ledger")


@ledger_app.command("init")
def init(
    path: Path = typer.Argument(..., help="Ledger file (SQLite); created if missing."),
    dataset: str = typer.Option(..., "--dataset", help="Name of the dataset the budget protects."),
    epsilon: float = typer.Option(..., "--epsilon", help="Total epsilon budget."),
    delta: float = typer.Option(..., "--delta", help="Total delta budget."),
) -> None:
    """Set the total (epsilon, delta) budget of a dataset (lowering allowed, raising refused)."""
    from ..errors import SparsedpError
    from ..ledger import Ledger

    try:
        with Ledger(path) as led:
            led.set_budget(dataset, epsilon=epsilon, delta=delta)
    except SparsedpError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2)
    typer.echo(f"dataset {dataset!r}: budget epsilon={epsilon:g}, delta={delta:g} in {path}")


@ledger_app.command("show")
def show(
    path: Path = typer.Argument(..., help="Ledger file."),
    dataset: str | None = typer.Option(None, "--dataset", help="Only this dataset."),
) -> None:
    """List budgets, amounts spent and every charge."""
    from rich.console import Console
    from rich.table import Table

    from ..errors import SparsedpError
    from ..ledger import Ledger

    if not path.exists():
        typer.echo(f"error: no ledger at {path}", err=True)
        raise typer.Exit(2)
    console = Console()
    try:
        with Ledger(path) as led:
            names = [dataset] if dataset else led.datasets()
            for name in names:
                b_eps, b_dlt = led.budget(name)
                s = led.spent(name)
                t = Table(title=f"{name}: spent epsilon={s.epsilon:.6g}/{b_eps:g}, delta={s.delta:.3g}/{b_dlt:g}"
                          + (f", rho={s.rho:.6g}" if s.rho is not None else ""))
                for col in ("id", "time (UTC)", "epsilon", "delta", "rho", "mechanism", "status", "output", "note"):
                    t.add_column(col, overflow="fold")
                for c in led.history(name):
                    when = _dt.datetime.fromtimestamp(c.created, _dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
                    t.add_row(str(c.id), when, f"{c.epsilon:.6g}", f"{c.delta:.3g}",
                              "" if c.rho is None else f"{c.rho:.6g}", c.mechanism, c.status, c.output or "", c.note)
                console.print(t)
    except SparsedpError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2)
