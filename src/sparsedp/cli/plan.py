"""``sparsedp plan``: calibration table for every applicable mechanism, no data touched.

PROVISIONAL: the accounting issue replaces this body with ``accounting.compare`` output.
"""

from __future__ import annotations

import typer

from . import app


@app.command()
def plan(
    epsilon: float = typer.Option(..., "--epsilon", help="Privacy parameter epsilon (> 0)."),
    delta: float = typer.Option(..., "--delta", help="Privacy parameter delta (0 < delta < 1)."),
    l0: int = typer.Option(1, "--l0", "--max-groups", help="Max distinct keys per privacy unit."),
) -> None:
    """Print the calibration (sigma, threshold) of every applicable mechanism."""
    from ..accounting import gaussian_sigma

    typer.echo(f"gaussian sigma (l2 sensitivity sqrt(l0)) = {gaussian_sigma(epsilon, delta, l0 ** 0.5):.4f}")
