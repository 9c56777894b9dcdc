"""``sparsedp reproduce``: regenerate a paper's figure or table (CSV + PNG + headline numbers)."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, Iterator

import typer

from . import app
from ._errors import REPRODUCE_FLAGS, cli_errors, fail, interruptible


@contextlib.contextmanager
def reproduce_progress(name: str, console: Any) -> Iterator[Any]:
    """A rich progress bar for ``reproduce.run(..., progress=…)``: the target's step with done/total and a
    percentage where the target reports its main loop (:func:`sparsedp.reproduce.steps`), else a spinner with
    the elapsed time. ``None`` (silent) when ``console`` is not a terminal."""
    if not console.is_terminal:
        yield None
        return
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TaskProgressColumn,
                               TextColumn, TimeElapsedColumn)

    with Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TaskProgressColumn(), TimeElapsedColumn(), console=console, transient=True) as bar:
        task = bar.add_task(f"reproducing {name}", total=None)

        def report(description: str, done: int, total: int) -> None:
            bar.update(task, description=f"{name}: {description}", completed=done, total=total)

        yield report


@app.command()
@interruptible
def reproduce(
    name: str = typer.Argument(None, help="Target to run (see --list)."),
    out: Path = typer.Option(Path("reproduce-out"), "--out", help="Directory for the CSV and PNG files."),
    fast: bool = typer.Option(False, "--fast", help="Fewer Monte-Carlo runs (seconds instead of minutes)."),
    list_: bool = typer.Option(False, "--list", help="List the available targets and exit."),
    all_: bool = typer.Option(False, "--all", help="Run every target (instead of NAME)."),
    check: bool = typer.Option(False, "--check", help="Print each paper number's source, accepted range and "
                               "status; exit 1 if one is missed without a documented reason "
                               "(docs/reproduce.md)."),
) -> None:
    """Reproduce a figure or table of the papers and print our numbers next to the paper's."""
    from rich.console import Console

    from .. import reproduce as rp  # imports every target (scipy, matplotlib helpers): not at start-up

    if all_:
        if name is not None:
            fail("give a target NAME or --all, not both")
        names = [t.name for t in rp.list_targets()]
    elif name is not None:
        names = [name]
    if list_ or (name is None and not all_):
        for t in rp.list_targets():
            typer.echo(f"{t.name:<24} {t.description}")
        if name is None and not list_:
            raise typer.Exit(code=2)
        return
    for n in names:
        if n not in rp.TARGETS:
            fail(f"unknown target {n!r}; run 'sparsedp reproduce --list'")
    missed = []
    for n in names:
        with cli_errors(REPRODUCE_FLAGS, interrupt_note=""), reproduce_progress(n, Console(stderr=True)) as progress:
            result = rp.run(n, out, fast=fast, progress=progress)
        typer.echo(result.format(check=check))
        missed += [f"{n}: {h.name}" for h in result.mismatches()]
    if check:
        typer.echo(rp.check_summary(missed))
        if missed:
            raise typer.Exit(code=1)
