"""``sparsedp plan``: calibration table of every applicable mechanism, no data touched.

Calls :func:`sparsedp.accounting.compare` and prints one row per (mechanism, analysis): σ, per-count noise
std, threshold margin τ (absolute threshold = pre-threshold + τ) and the δ re-evaluated at that calibration.
"""

from __future__ import annotations

from typing import List, Optional

import typer

from ..accounting import best, compare
from ..errors import InvalidParameterError, SparsedpError
from ..mechanisms.base import AutoRole
from ..mechanisms.thresholded import Laplace, TopKCSH
from .. import pipeline
from ..plotting import check_plot_path, plot_plan
from . import app
from ._errors import PLAN_FLAGS, fail, interruptible
from .keys_file import read_partial_keys
from .release import parse_quantile

_NOISE = {"discrete": True, "continuous": False, "both": None}


def _fmt(x: float) -> str:
    if x != x:  # NaN: no noise scale (a keys-only selection releases no counts)
        return "-"
    return f"{x:,.4f}" if abs(x) < 1e6 else f"{x:.6g}"


def row_use(mech, chosen: bool) -> str:
    """What a secure plan row is to a release: the one ``auto`` uses, another count mechanism (blank), a key
    selection mechanism (keys only: ``sd.Auto(objective="keys")`` and ``sd.TwoStage(select=…)`` choose among
    them; never a count row), or one that publishes something else than counts (its output column)."""
    column = mech.value_column("count")
    if is_selection(mech):
        return "keys only (key weights, not counts)" if column == "weight" else "keys only (no counts)"
    if chosen:
        return "release uses this"
    if column == "weight":
        return "publishes key weights, not counts"
    if column != "count":
        return f"publishes {column.replace('_', ' ')}"
    return ""


def is_selection(mech) -> bool:
    """A key-selection mechanism (registered in ``AutoRole.DISCOVERY``): it publishes keys (and perhaps key
    weights), never counts."""
    return mech.auto_role is AutoRole.DISCOVERY


def render_table(cals, *, title: str, uses=None) -> None:
    """Print calibrations as a rich table (also used by other commands that show plans). ``uses``: the text of
    the "use" column for each row (:func:`row_use`; paper analyses say so)."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    for col, justify in (("mechanism", "left"), ("analysis", "left"), ("noise", "left"), ("sigma", "right"),
                         ("noise std", "right"), ("threshold margin tau", "right"), ("delta achieved", "right")):
        table.add_column(col, justify=justify)
    if uses is not None:
        table.add_column("use", justify="left")
    for i, c in enumerate(cals):
        name = c.mechanism + ((" (de-biased counts)" if c.debias else " (shifted: count - cutoff)")
                              if c.mechanism == TopKCSH.name else "")
        discrete = getattr(c, "discrete", True)  # public-key calibrations: exact noise unless insecure_float
        if c.mechanism in (TopKCSH.name, "csh") and str(c.analysis).startswith("discrete-"):
            name += ", Algorithm 4 noise"
        cells = [name, c.analysis, "discrete" if discrete else "continuous",
                 _fmt(c.sigma), _fmt(c.noise_std), _fmt(c.tau), f"{c.delta_achieved:.4g}"]
        if uses is not None:
            cells.append(uses[i])
        table.add_row(*cells, style="bold" if uses is not None and uses[i] == "release uses this" else None)
    Console(width=max(100 if uses is None else 135, Console().width)).print(table)


def render_pure_table(epsilon: float, delta: float, max_units: int) -> None:
    """Print the pure-DP mechanisms (``sparsedp.plan(..., max_units=…)``) with their exact error bounds."""
    from rich.console import Console
    from rich.table import Table

    cals = [c for c in pipeline.plan(epsilon, delta, max_units=max_units) if hasattr(c, "accuracy")]
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


def _name(c) -> str:
    return f"{c.mechanism} ({c.analysis}, {'discrete' if c.discrete else 'continuous'} noise)"


def _vs_laplace(top, cals) -> str:
    lap = [c for c in cals if c.mechanism == Laplace.name]
    if lap and top.mechanism != Laplace.name and min(c.tau for c in lap) > 0:
        ref = min(lap, key=lambda c: c.tau)
        return f"; {100 * (1 - top.tau / ref.tau):.1f}% below the Laplace baseline ({ref.tau:,.2f})"
    return ""


def release_line(chosen, secure) -> str:
    """What a release with the same arguments does: the mechanism ``auto`` picks (the first row of
    :func:`sparsedp.plan`), with its margin and noise, compared with Laplace among the secure rows."""
    return (f"a release with these arguments uses: {_name(chosen)}, threshold margin {chosen.tau:,.2f}, noise "
            f"std {chosen.noise_std:,.2f} (auto: the lowest margin among the mechanisms that publish counts)"
            + _vs_laplace(chosen, secure))


def plan_use(mech, cal, chosen: bool) -> str:
    """The "use" text of a row of :func:`sparsedp.plan`: :func:`row_use`, a quantile's cost and rank error, or a
    partial key set's stage (and whether the release uses it)."""
    if hasattr(cal, "plan_fields"):  # a quantile's row
        return cal.use()
    if hasattr(mech, "stage"):  # a stage of a partial key set's release
        return f"stage {mech.stage}: {mech.what}" + ("; release uses this" if mech.chosen else "")
    return row_use(mech, chosen)


def _calibrations(epsilon: float, delta: float, l0: Optional[int], top_k: Optional[int], k: Optional[int],
                  noise: str, aggregates=None, keys=None, selected: int = 100) -> tuple:
    """``(secure plan or None, rows, their "use" texts)``: the secure rows are the registered mechanisms, as a
    release samples them (:func:`sparsedp.plan`: the first is auto's choice); the paper analyses (continuous
    noise) are listed for research (:func:`sparsedp.accounting.compare`)."""
    if aggregates or keys:  # quantiles or a partial key set: the secure rows of their release only
        secure = pipeline.plan(epsilon, delta, max_groups_per_unit=l0, top_k=top_k, aggregates=aggregates or None,
                               keys=keys, selected=selected)
        return secure, list(secure), [plan_use(m, c, i == 0) for i, (m, c) in enumerate(zip(secure.mechanisms,
                                                                                             secure))]
    secure = pipeline.plan(epsilon, delta, max_groups_per_unit=l0, top_k=top_k) if noise != "continuous" and (
        l0 is not None or top_k is not None) else None
    cals = list(secure) if secure is not None else []
    uses = [row_use(m, i == 0) for i, m in enumerate(secure.mechanisms)] if secure is not None else []
    if noise != "discrete" or k is not None:
        papers = compare(epsilon, delta, l0=l0, top_k=top_k, k=k,
                         discrete=False if noise != "discrete" else True) if noise != "discrete" else \
            compare(epsilon, delta, k=k, discrete=True)
        cals += papers
        uses += ["paper analysis" if not c.discrete else "k-sparse histogram (analysis)" for c in papers]
    return secure, cals, uses


def summary_line(cals) -> str:
    """'best analysis: …' sentence over every listed row, paper analyses included: the smallest margin
    overall, and the gain over the Laplace stability histogram (the peers' default) when it is listed."""
    top = best(cals)
    label = "best" if all(not c.discrete for c in cals) else "lowest margin of any analysis"
    return (f"{label}: {_name(top)} with threshold margin {top.tau:,.2f} and noise std {top.noise_std:,.2f}"
            + _vs_laplace(top, cals))


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
    quantiles: Optional[List[str]] = typer.Option(None, "--quantile", help="A per-key quantile COL:Q:LO:HI[:NAME] "
                                                  "(or --median COL:LO:HI): the count rows at the count's part of "
                                                  "epsilon, then the quantile's cost and rank error."),
    medians: Optional[List[str]] = typer.Option(None, "--median", hidden=True,
                                                help="A per-key median COL:LO:HI[:NAME] (see --quantile)."),
    keys_spec: Optional[List[str]] = typer.Option(None, "--keys", metavar="<str>",
                                                  help="A partial key set COL=FILE[,COL=FILE…] (repeatable): the "
                                                  "listed columns public, the others selected privately; the rows "
                                                  "of both stages."),
    selected: int = typer.Option(100, "--selected", help="With --keys: private values you expect stage 1 to "
                                 "select (stage 2 counts listed x selected keys)."),
) -> None:
    """Print the calibration (sigma, threshold) of every applicable mechanism and say which is best."""
    if noise not in _NOISE:
        raise typer.BadParameter(f"must be one of {', '.join(_NOISE)}; got {noise!r}", param_hint="--noise")
    if plot:  # a bad plot path fails before anything is printed

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
        aggregates = [parse_quantile(f, x) for f, xs in (("--quantile", quantiles), ("--median", medians))
                      for x in (xs or [])]
        keys = read_partial_keys(keys_spec, None) if keys_spec else None
        secure, cals, uses = _calibrations(epsilon, delta, l0, top_k, k, noise, aggregates, keys, selected)
    except SparsedpError as e:
        fail(e, PLAN_FLAGS)
    model = ", ".join(f"{n}={x}" for n, x in (("l0", l0), ("top_k", top_k), ("k", k)) if x is not None)
    render_table(cals, title=secure.title if aggregates or keys_spec else
                 f"sparsedp plan: epsilon={epsilon:g}, delta={delta:g}, {model}",
                 uses=uses if secure is not None else None)
    if aggregates or keys_spec:
        return
    if secure is not None and len(secure):
        typer.echo(release_line(secure.best, list(secure)))
    if len(cals) > (len(secure) if secure is not None else 0):
        # the lowest margin among the rows that publish counts (keys-only selections are listed, not ranked)
        typer.echo(summary_line([c for c, u in zip(cals, uses) if not u.startswith("keys only")]))
    if profile and (l0 is not None or top_k is not None):
        _print_profile(pipeline.plan(epsilon, delta, max_groups_per_unit=l0, top_k=top_k))
    if plot:
        from rich.console import Console

        try:
            with Console(stderr=True).status("plotting the threshold against the contribution bound"):
                path = plot_plan(epsilon, delta, plot, max_groups_per_unit=None if top_k is not None else l0,
                                 top_k=top_k)
        except SparsedpError as e:
            fail(e, PLAN_FLAGS)
        typer.echo(f"plot written to {path}")
