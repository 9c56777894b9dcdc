"""``sparsedp plan``: calibration table of every applicable mechanism, no data touched.

Calls :func:`sparsedp.accounting.compare` and prints one row per (mechanism, analysis): σ, per-count noise
std, threshold margin τ (absolute threshold = pre-threshold + τ) and the δ re-evaluated at that calibration.
"""

from __future__ import annotations

from typing import Optional

import typer

from . import app
from ._errors import PLAN_FLAGS, fail, interruptible
from ..mechanisms.thresholded import Laplace, TopKCSH

_NOISE = {"discrete": True, "continuous": False, "both": None}


def _fmt(x: float) -> str:
    return f"{x:,.4f}" if abs(x) < 1e6 else f"{x:.6g}"


def render_table(cals, *, title: str) -> None:
    """Print calibrations as a rich table (also used by other commands that show plans)."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    for col, justify in (("mechanism", "left"), ("analysis", "left"), ("noise", "left"), ("sigma", "right"),
                         ("noise std", "right"), ("threshold margin tau", "right"), ("delta achieved", "right")):
        table.add_column(col, justify=justify)
    for c in cals:
        name = c.mechanism + ((" (de-biased counts)" if c.debias else " (shifted: count - cutoff)")
                              if c.mechanism == TopKCSH.name else "")
        table.add_row(name, c.analysis, "discrete" if c.discrete else "continuous",
                      _fmt(c.sigma), _fmt(c.noise_std), _fmt(c.tau), f"{c.delta_achieved:.4g}")
    Console(width=max(100, Console().width)).print(table)


def render_pure_table(epsilon: float, delta: float, max_units: int) -> None:
    """Print the pure-DP mechanisms (``sparsedp.plan(..., max_units=…)``) with their exact error bounds."""
    from rich.console import Console
    from rich.table import Table

    from ..pipeline import plan

    cals = [c for c in plan(epsilon, delta, max_units=max_units) if hasattr(c, "accuracy")]
    beta = cals[0].beta if cals else 0.05
    table = Table(title=f"pure DP (one key per unit), n={max_units} units, epsilon rounded down to "
                        f"{cals[0].epsilon:g}" if cals else "pure DP", caption=(
        f"error bounds hold with probability {1 - beta:g}; per-count error applies to counts above the "
        f"threshold; keys are strings of <= 64 bytes"))
    for col in ("mechanism", "delta", "per-count error", "threshold", "all-counts error"):
        table.add_column(col, justify="left" if col == "mechanism" else "right")
    for c in cals:
        a = c.accuracy
        table.add_row(c.mechanism, f"{c.delta:g}", f"{a.per_query:,}", f"{a.threshold:,}",
                      f"{a.simultaneous:,}")
    Console(width=max(100, Console().width)).print(table)


def summary_line(cals) -> str:
    """'best: …' sentence: the smallest margin overall, the best with discrete noise if both are listed,
    and the gain over the Laplace stability histogram (the peers' default) when it is listed."""
    from ..accounting import best

    def name(c) -> str:
        return f"{c.mechanism} ({c.analysis}, {'discrete' if c.discrete else 'continuous'} noise)"

    top = best(cals)
    line = f"best: {name(top)} with threshold margin {top.tau:,.2f} and noise std {top.noise_std:,.2f}"
    discrete = [c for c in cals if c.discrete]
    if discrete and len(discrete) < len(cals) and not top.discrete:
        d = best(discrete)
        line += f"; with secure discrete noise: {name(d)}, margin {d.tau:,.2f}"
    lap = [c for c in cals if c.mechanism == Laplace.name]
    if lap and top.mechanism != Laplace.name and min(c.tau for c in lap) > 0:
        ref = min(lap, key=lambda c: c.tau)
        line += f"; {100 * (1 - top.tau / ref.tau):.1f}% below the Laplace baseline ({ref.tau:,.2f})"
    return line


def _print_profile(p) -> None:
    """δ(ε) at a few ε and the trade-off curve β(α) of the plan's best mechanism (more than one (ε, δ) point)."""
    import numpy as np

    prof = p.profile()
    name = p.mechanisms[0].describe()
    if prof is None:
        typer.echo(f"{name}: no privacy profile (composed by basic composition)")
        return
    typer.echo(f"privacy profile of {name} (the noise actually sampled):")
    for e, d in p.profile_table():
        typer.echo(f"  epsilon {e:8.4g}  ->  delta {d:.4g}")
    alphas = np.array([1e-6, 1e-4, 1e-2, 0.1, 0.5])
    betas = prof.tradeoff_curve(alphas)
    typer.echo("f-DP trade-off curve (type II error beta at type I error alpha; 1 - alpha is perfect privacy):")
    for a, b in zip(alphas, betas):
        typer.echo(f"  alpha {a:8.2g}  ->  beta {float(b):.6g}")


def _calibrations(epsilon: float, delta: float, l0: Optional[int], top_k: Optional[int], k: Optional[int],
                  noise: str) -> list:
    """The secure rows are the registered mechanisms (:func:`sparsedp.plan`); the paper analyses are listed for
    research (:func:`sparsedp.accounting.compare`)."""
    from ..accounting import compare
    from ..pipeline import plan

    cals = list(plan(epsilon, delta, max_groups_per_unit=l0, top_k=top_k)) if noise != "continuous" and (
        l0 is not None or top_k is not None) else []
    if noise != "discrete" or k is not None:
        cals += compare(epsilon, delta, l0=l0, top_k=top_k, k=k,
                        discrete=False if noise != "discrete" else True) if noise != "discrete" else \
            compare(epsilon, delta, k=k, discrete=True)
    return cals


@app.command()
@interruptible
def plan(
    epsilon: float = typer.Option(..., "--epsilon", help="Privacy parameter epsilon (> 0)."),
    delta: float = typer.Option(..., "--delta", help="Privacy parameter delta (0 < delta < 1; 0 with "
                                                      "--max-units lists the pure-DP mechanisms only)."),
    l0: Optional[int] = typer.Option(None, "--l0", "--max-groups",
                                     help="Max distinct keys per privacy unit (GSHM, Laplace)."),
    top_k: Optional[int] = typer.Option(None, "--top-k", help="Release only the top k keys (top-k CSH)."),
    k: Optional[int] = typer.Option(None, "--k-sparse",
                                    help="Histogram has at most k non-zero counts, monotone neighbours "
                                         "(e.g. a Misra-Gries sketch of size k): CSH."),
    noise: str = typer.Option("both", "--noise", help="discrete (what a secure release samples), "
                                                      "continuous (paper analyses) or both."),
    max_units: Optional[int] = typer.Option(None, "--max-units", help="Also list the pure-DP mechanisms "
                                            "(one key per unit) for this many units, with their error "
                                            "bounds."),
    plot: Optional[str] = typer.Option(None, "--plot", help="Also save a figure of the release threshold "
                                       "against the contribution bound, your bound marked and the mechanism "
                                       "auto uses highlighted (.png/.pdf/.svg)."),
    profile: bool = typer.Option(False, "--profile", help="Also print the best secure mechanism's privacy "
                                 "profile delta(epsilon) and its f-DP trade-off curve."),
) -> None:
    """Print the calibration (sigma, threshold) of every applicable mechanism and say which is best."""
    from ..errors import SparsedpError
    from ..pipeline import plan

    if noise not in _NOISE:
        raise typer.BadParameter(f"must be one of {', '.join(_NOISE)}; got {noise!r}", param_hint="--noise")
    if plot:  # a bad plot path fails before anything is printed
        from ..plotting import check_plot_path

        try:
            check_plot_path(plot)
        except SparsedpError as e:
            fail(e, PLAN_FLAGS)
    if max_units is not None:
        try:
            render_pure_table(epsilon, delta, max_units)
        except SparsedpError as e:
            fail(e, PLAN_FLAGS)
        if delta == 0:
            return
    if l0 is None and top_k is None and k is None:
        l0 = 1
    try:
        cals = _calibrations(epsilon, delta, l0, top_k, k, noise)
    except SparsedpError as e:
        fail(e, PLAN_FLAGS)
    model = ", ".join(f"{n}={x}" for n, x in (("l0", l0), ("top_k", top_k), ("k", k)) if x is not None)
    render_table(cals, title=f"sparsedp plan: epsilon={epsilon:g}, delta={delta:g}, {model}")
    typer.echo(summary_line(cals))
    if profile and (l0 is not None or top_k is not None):
        _print_profile(plan(epsilon, delta, max_groups_per_unit=l0, top_k=top_k))
    if plot:
        from rich.console import Console

        from ..plotting import plot_plan

        try:
            with Console(stderr=True).status("plotting the threshold against the contribution bound"):
                path = plot_plan(epsilon, delta, plot, max_groups_per_unit=None if top_k is not None else l0,
                                 top_k=top_k)
        except SparsedpError as e:
            fail(e, PLAN_FLAGS)
        typer.echo(f"plot written to {path}")
