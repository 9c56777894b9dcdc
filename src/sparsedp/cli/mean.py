"""``sparsedp sum`` and ``sparsedp mean``: private vector sums (elliptical Gaussian, Lebeda (2023)
Ch. 4) and means (PLAN, Ch. 5) of a Parquet/CSV file, with per-coordinate bounds enforced by the library."""

from __future__ import annotations

from types import ModuleType
from typing import Optional

import typer

from ..engines.output import write_atomic
from ..errors import InvalidParameterError, SparsedpError
from ..pipeline import check_out_path
from . import app
from ._errors import VECTOR_FLAGS, fail, interrupted, interruptible, sigterm_as_interrupt
from .release import progress_stages

def _vectors() -> ModuleType:
    """:mod:`sparsedp.vectors`, imported when a vector command runs: it imports Polars and scipy, which
    ``sparsedp --help`` and the other commands' start-up do not load."""
    from .. import vectors

    return vectors


_COMMON_HELP = {
    "unit": "Privacy unit column (whom the guarantee protects); a unit's rows are summed per coordinate.",
    "columns": "Wide layout: the coordinate columns, comma-separated.",
    "coordinate": "Long layout: the column naming each row's coordinate (with --value).",
    "value": "Long layout: the value column (with --coordinate).",
    "coordinates": "Long layout: the public list of coordinates, comma-separated (or give --bounds).",
    "lower": "Lower bound: one number for every coordinate or one per coordinate, comma-separated.",
    "upper": "Upper bound: one number for every coordinate or one per coordinate, comma-separated.",
    "bounds": "CSV file with columns coordinate,lower,upper (the coordinates and their bounds).",
}


def _numbers(flag: str, text: Optional[str]):
    if text is None:
        return None
    try:
        vals = [float(x) for x in text.split(",")]
    except ValueError:
        raise InvalidParameterError(f"{flag} takes a number or comma-separated numbers, got {text!r}") from None
    return vals[0] if len(vals) == 1 else vals


def _layout(columns, coordinate, value, coordinates, lower, upper, bounds):
    """Keyword arguments for sd.vector_sum/vector_mean from the CLI flags (errors in flag terms)."""
    kw: dict = {}
    if columns is not None:
        if coordinate is not None or value is not None:
            raise InvalidParameterError("give --columns (wide) or --coordinate and --value (long), not both")
        kw["columns"] = [c.strip() for c in columns.split(",") if c.strip()]
    elif coordinate is not None and value is not None:
        kw.update(coordinate=coordinate, value=value)
    else:
        raise InvalidParameterError("give --columns a,b,c (one column per coordinate) or --coordinate COL and "
                                    "--value COL (one row per unit and coordinate)")
    if bounds is not None:
        if lower is not None or upper is not None or coordinates is not None:
            raise InvalidParameterError("--bounds gives the coordinates and their bounds; drop --lower/--upper/"
                                        "--coordinates")
        import polars as pl

        try:
            b = pl.read_csv(bounds)
        except Exception as e:  # noqa: BLE001 - any read error, reported in flag terms
            raise InvalidParameterError(f"--bounds {bounds!r}: could not read the CSV: {e}") from None
        if set(b.columns) < {"coordinate", "lower", "upper"}:
            raise InvalidParameterError(f"--bounds {bounds!r} must have the columns coordinate,lower,upper; it has "
                                        f"{b.columns}")
        names = [str(c) for c in b["coordinate"].to_list()]
        if "columns" in kw and kw["columns"] != names:
            raise InvalidParameterError("--bounds lists other coordinates than --columns")
        kw["lower"] = dict(zip(names, b["lower"].cast(float).to_list()))
        kw["upper"] = dict(zip(names, b["upper"].cast(float).to_list()))
        if "columns" not in kw:
            kw["coordinates"] = names
        return kw
    if coordinates is None and "columns" not in kw:
        raise InvalidParameterError("the long layout needs the public list of coordinates: --coordinates a,b,c or "
                                    "--bounds FILE (never read from the data)")
    if coordinates is not None:
        if "columns" in kw:
            raise InvalidParameterError("--coordinates is for the long layout (--coordinate/--value)")
        kw["coordinates"] = [c.strip() for c in coordinates.split(",") if c.strip()]
    kw["lower"] = _numbers("--lower", lower)
    kw["upper"] = _numbers("--upper", upper)
    return kw


def _run(fn, input: str, console, err, out: Optional[str], head: int, overwrite: bool = False, **kw):
    try:
        out_path = None
        if out is not None:
            out_path = check_out_path(out, overwrite)
        with sigterm_as_interrupt():
            res = fn(input, progress=progress_stages(err), **kw)
        frame = res.table
        if out_path is not None:
            write_atomic(frame.to_arrow(), *out_path, metadata=res.report.metadata())
    except SparsedpError as e:
        fail(e, VECTOR_FLAGS)
    except KeyboardInterrupt:
        interrupted()
    from rich.table import Table

    table = Table(title=f"{frame.height} coordinates", caption=f"first {head} shown" if frame.height > head else None)
    for c in frame.columns:
        table.add_column(c, justify="left" if c == "coordinate" else "right")
    for row in frame.head(head).iter_rows():
        table.add_row(str(row[0]), f"{row[1]:.6g}", f"{row[2]:.4g}")
    console.print(table)
    console.print(str(res), markup=False, highlight=False, soft_wrap=True)
    if out_path is not None:
        console.print(f"output written to {out_path[0]}", markup=False, highlight=False, soft_wrap=True)
    return res


@app.command("sum")
@interruptible
def sum_(
    input: str = typer.Argument(..., help="Parquet/CSV file (or glob)."),
    unit: str = typer.Option(..., "--unit", "--privacy-unit", help=_COMMON_HELP["unit"]),
    columns: Optional[str] = typer.Option(None, "--columns", help=_COMMON_HELP["columns"]),
    coordinate: Optional[str] = typer.Option(None, "--coordinate", help=_COMMON_HELP["coordinate"]),
    value: Optional[str] = typer.Option(None, "--value", help=_COMMON_HELP["value"]),
    coordinates: Optional[str] = typer.Option(None, "--coordinates", help=_COMMON_HELP["coordinates"]),
    lower: Optional[str] = typer.Option(None, "--lower", help=_COMMON_HELP["lower"]),
    upper: Optional[str] = typer.Option(None, "--upper", help=_COMMON_HELP["upper"]),
    bounds: Optional[str] = typer.Option(None, "--bounds", help=_COMMON_HELP["bounds"]),
    max_norm: Optional[float] = typer.Option(None, "--max-norm", help="Instead of a box: scale each unit's vector "
                                             "into the l2 ball of this radius (isotropic noise)."),
    epsilon: Optional[float] = typer.Option(None, "--epsilon", help="Privacy parameter epsilon (> 0)."),
    delta: Optional[float] = typer.Option(None, "--delta", help="Privacy parameter delta (Gaussian)."),
    rho: Optional[float] = typer.Option(None, "--rho", help="zCDP rho instead of --epsilon (with --delta)."),
    mechanism: str = typer.Option("gaussian", "--mechanism", help="gaussian (elliptical, (epsilon, delta)) or "
                                  "laplace (parallelotope, pure epsilon)."),
    neighbours: str = typer.Option("replace-one", "--neighbours", help="replace-one (as in Lebeda (2023); n public; "
                                   "sensitivity upper-lower) or add-remove (sensitivity max(|lower|,|upper|))."),
    p: float = typer.Option(2.0, "--p", help="Error exponent the noise shape minimises (2 = squared l2)."),
    shape: str = typer.Option("optimal", "--shape", help="optimal, spherical or proportional."),
    out: Optional[str] = typer.Option(None, "--out", help="Write coordinate,estimate,noise_std to this "
                                      ".parquet/.csv file (with the guarantee as metadata)."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing --out file."),
    head: int = typer.Option(10, "--head", min=0, metavar="<int>", help="Coordinates to print."),
    ledger: Optional[str] = typer.Option(None, "--ledger", help="Charge the release against this ledger file."),
    dataset: Optional[str] = typer.Option(None, "--dataset", help="Dataset whose budget --ledger charges."),
) -> None:
    """Private vector sum with per-coordinate bounds (elliptical Gaussian / parallelotope Laplace, exact noise)."""
    from rich.console import Console

    err = Console(stderr=True)
    try:
        kw = _layout(columns, coordinate, value, coordinates, lower, upper, bounds)
    except SparsedpError as e:
        fail(e, VECTOR_FLAGS)
    if max_norm is not None:
        kw.pop("lower", None), kw.pop("upper", None)
    _run(_vectors().vector_sum, input, Console(), err, out, head, overwrite, privacy_unit=unit, max_norm=max_norm, epsilon=epsilon,
         delta=delta, rho=rho, mechanism=mechanism, neighbours=neighbours, p=p, shape=shape, ledger=ledger,
         dataset=dataset, **kw)


@app.command("mean")
@interruptible
def mean(
    input: str = typer.Argument(..., help="Parquet/CSV file (or glob)."),
    unit: str = typer.Option(..., "--unit", "--privacy-unit", help=_COMMON_HELP["unit"]),
    columns: Optional[str] = typer.Option(None, "--columns", help=_COMMON_HELP["columns"]),
    coordinate: Optional[str] = typer.Option(None, "--coordinate", help=_COMMON_HELP["coordinate"]),
    value: Optional[str] = typer.Option(None, "--value", help=_COMMON_HELP["value"]),
    coordinates: Optional[str] = typer.Option(None, "--coordinates", help=_COMMON_HELP["coordinates"]),
    lower: Optional[str] = typer.Option(None, "--lower", help=_COMMON_HELP["lower"]),
    upper: Optional[str] = typer.Option(None, "--upper", help=_COMMON_HELP["upper"]),
    bounds: Optional[str] = typer.Option(None, "--bounds", help=_COMMON_HELP["bounds"]),
    epsilon: Optional[float] = typer.Option(None, "--epsilon", help="Privacy parameter epsilon (> 0)."),
    delta: Optional[float] = typer.Option(None, "--delta", help="Privacy parameter delta (0 < delta < 1)."),
    rho: Optional[float] = typer.Option(None, "--rho", help="zCDP rho instead of --epsilon (with --delta)."),
    variances: str = typer.Option("estimate", "--variances", help="estimate (private, Algorithm 18), binary (0/1 "
                                  "data), none (no skew adaptation), or comma-separated public variance guesses."),
    p: float = typer.Option(2.0, "--p", help="Error exponent PLAN targets (2 = squared l2, 1 = l1)."),
    method: str = typer.Option("plan", "--method", help="plan (Lebeda (2023) Ch. 5; replace-one, n public) or "
                               "sum-count (noisy sum / noisy count; add-remove, for add-remove budgets)."),
    out: Optional[str] = typer.Option(None, "--out", help="Write coordinate,estimate,noise_std to this "
                                      ".parquet/.csv file (with the guarantee as metadata)."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing --out file."),
    head: int = typer.Option(10, "--head", min=0, metavar="<int>", help="Coordinates to print."),
    ledger: Optional[str] = typer.Option(None, "--ledger", help="Charge the release against this ledger file "
                                         "(--method plan needs a replace-one budget)."),
    dataset: Optional[str] = typer.Option(None, "--dataset", help="Dataset whose budget --ledger charges."),
) -> None:
    """Private mean of each unit's vector by PLAN (variance-aware noise, Lebeda (2023) Ch. 5; replace-one
    neighbours), or --method sum-count (add-remove neighbours)."""
    from rich.console import Console

    err = Console(stderr=True)
    try:
        kw = _layout(columns, coordinate, value, coordinates, lower, upper, bounds)
        var = variances if variances in ("estimate", "binary", "none") else _numbers("--variances", variances)
        if not isinstance(var, (str, list)):
            var = [var]
    except SparsedpError as e:
        fail(e, VECTOR_FLAGS)
    _run(_vectors().vector_mean, input, Console(), err, out, head, overwrite, privacy_unit=unit, epsilon=epsilon, delta=delta, rho=rho,
         variances=var, p=p, method=method, ledger=ledger, dataset=dataset, **kw)
