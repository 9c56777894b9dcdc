"""``sparsedp release``: a private GROUP BY count of a Parquet/CSV file or a DuckDB SQL query."""

from __future__ import annotations

import contextlib
import signal
from typing import Iterator, Optional

import typer

from . import app


def progress_stages(console):
    """``stage(name)`` context managers showing a rich spinner with elapsed time for each stage."""
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    @contextlib.contextmanager
    def stage(name: str) -> Iterator[None]:
        with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                      console=console, transient=False) as p:
            task = p.add_task(name, total=1)
            yield
            p.update(task, completed=1)

    return stage


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Turn SIGTERM into KeyboardInterrupt so clean-up (removing a half-written temp file) runs."""
    def handler(signum, frame):
        raise KeyboardInterrupt

    try:
        old = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not in the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def print_result(res, console, head: int = 10) -> None:
    """Table head (rich), then the report and where the output went."""
    from rich.table import Table
    from rich.text import Text

    from ..engines.output import release_table

    import polars as pl

    frame = pl.from_arrow(release_table(res.release))
    table = Table(title=f"{frame.height} released keys, largest first", caption=(
        f"first {head} shown" if frame.height > head else None))
    for c in frame.columns:
        table.add_column(c, justify="right" if frame[c].dtype.is_numeric() else "left")
    for row in frame.head(head).iter_rows():
        table.add_row(*(Text("" if x is None else str(x)) for x in row))
    console.print(table)
    console.print(str(res.report), markup=False, highlight=False, soft_wrap=True)


def run_release(data, *, console, err_console, head: int = 10, **kwargs):
    """Call :func:`sparsedp.release` with progress display and clean error reporting (exit code 2)."""
    from ..api import release
    from ..errors import SparsedpError

    try:
        with sigterm_as_interrupt():
            res = release(data, progress=progress_stages(err_console), **kwargs)
    except SparsedpError as e:
        err_console.print(f"error: {e}", style="bold red", markup=False, highlight=False, soft_wrap=True)
        raise typer.Exit(code=2) from None
    except KeyboardInterrupt:
        err_console.print("interrupted: nothing was written", style="bold red")
        raise typer.Exit(code=130) from None
    print_result(res, console, head)
    if res.report.output:
        console.print(f"output written to {res.report.output}", markup=False, highlight=False, soft_wrap=True)
    return res


@app.command()
def release(
    input: str = typer.Argument(..., help="Parquet/CSV file (or glob), or SQL text run by DuckDB "
                                          "(e.g. \"SELECT user_id, url FROM 'shares.parquet'\")."),
    unit: str = typer.Option(..., "--unit", help="Privacy unit column (whom the guarantee protects)."),
    by: str = typer.Option(..., "--by", help="Key column(s), comma-separated."),
    epsilon: float = typer.Option(..., "--epsilon", help="Privacy parameter epsilon (> 0)."),
    delta: Optional[float] = typer.Option(None, "--delta", help="Privacy parameter delta (0 < delta < 1; "
                                                                 "0 or omitted for the pure mechanisms)."),
    max_groups: Optional[int] = typer.Option(None, "--max-groups", "--l0",
                                             help="Keep at most this many keys per unit (GSHM, Laplace)."),
    top_k: Optional[int] = typer.Option(None, "--top-k", help="Release the top k keys (top-k CSH)."),
    out: Optional[str] = typer.Option(None, "--out", help="Write the table to this .parquet/.csv file "
                                                           "(atomically)."),
    engine: Optional[str] = typer.Option(None, "--engine", help="polars (default), duckdb (default for SQL), "
                                                                 "pandas, arrow or spark (a local Spark session "
                                                                 "unless a cluster is configured)."),
    mechanism: str = typer.Option("auto", "--mechanism", help="auto, gshm, laplace, topk-csh; pure DP "
                                  "(one key per unit): pure-sparse, compact, basic, stability; misra-gries."),
    sketch_size: Optional[int] = typer.Option(None, "--sketch-size", help="misra-gries: number of counters k."),
    max_units: Optional[int] = typer.Option(None, "--max-units", help="Pure mechanisms: public bound on the "
                                            "number of units (add/remove-one neighbours; else n is public)."),
    domain_size: Optional[int] = typer.Option(None, "--domain-size", help="basic: integer keys in "
                                              "[0, domain-size)."),
    max_key_bytes: int = typer.Option(64, "--max-key-bytes", help="Pure mechanisms: keys are strings of at "
                                      "most this many UTF-8 bytes (public domain bound)."),
    query_keys: Optional[str] = typer.Option(None, "--query-keys", help="compact: comma-separated public keys "
                                             "whose noisy counts to print."),
    pre_threshold: int = typer.Option(1, "--pre-threshold", help="Never release keys with fewer units."),
    head: int = typer.Option(10, "--head", help="Rows of the table to print."),
    ledger: Optional[str] = typer.Option(None, "--ledger", help="Charge the release against a budget in "
                                                                 "this ledger file (see `sparsedp ledger`)."),
    dataset: Optional[str] = typer.Option(None, "--dataset", help="Dataset name whose budget --ledger "
                                                                   "charges."),
) -> None:
    """Release noisy distinct-unit counts per key, with contribution bounding and a printed report."""
    from rich.console import Console

    run_release(input, console=Console(), err_console=Console(stderr=True), head=head, privacy_unit=unit,
                by=[c.strip() for c in by.split(",") if c.strip()], epsilon=epsilon, delta=delta,
                max_groups_per_unit=max_groups, top_k=top_k, mechanism=mechanism, pre_threshold=pre_threshold,
                engine=engine, out=out, ledger=ledger, dataset=dataset, sketch_size=sketch_size,
                max_units=max_units, domain_size=domain_size, max_key_bytes=max_key_bytes,
                query_keys=None if query_keys is None else [q for q in query_keys.split(",") if q])
