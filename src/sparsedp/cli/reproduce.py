"""``sparsedp reproduce``: regenerate a paper's figure or table (CSV + PNG + headline numbers)."""

from __future__ import annotations

from pathlib import Path

import typer

from . import app


@app.command()
def reproduce(
    name: str = typer.Argument(None, help="Target to run (see --list)."),
    out: Path = typer.Option(Path("reproduce-out"), "--out", help="Directory for the CSV and PNG files."),
    fast: bool = typer.Option(False, "--fast", help="Fewer Monte-Carlo runs (seconds instead of minutes)."),
    list_: bool = typer.Option(False, "--list", help="List the available targets and exit."),
) -> None:
    """Reproduce a figure or table of the seed papers and print our numbers next to the paper's."""
    from .. import reproduce as rp

    if list_ or name is None:
        for t in rp.list_targets():
            typer.echo(f"{t.name:<24} {t.description}")
        if name is None and not list_:
            raise typer.Exit(code=2)
        return
    if name not in rp.TARGETS:
        typer.echo(f"unknown target {name!r}; run 'sparsedp reproduce --list'", err=True)
        raise typer.Exit(code=2)
    result = rp.run(name, out, fast=fast)
    typer.echo(result.format())
