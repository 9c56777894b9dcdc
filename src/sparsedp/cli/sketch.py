"""``sparsedp sketch``: a private Misra–Gries release built from files in O(k) memory (one sketch per file).

Every row is one stream element and one privacy unit (``privacy_unit=None`` of :func:`sparsedp.release` with
:class:`~sparsedp.mechanisms.misra_gries.MisraGries`); for unit-level privacy use
``sparsedp release --unit COL --mechanism misra-gries --sketch-size K`` (the user-level PAMG sketch:
each unit's distinct keys are added as one set).
"""

from __future__ import annotations

from typing import List, Optional

import typer

from .. import pipeline
from ..errors import SparsedpError
from ..mechanisms import registry
from ..sketches.partitions import partition_progress
from . import app
from ._errors import SKETCH_FLAGS, fail, interrupted, interruptible, sigterm_as_interrupt
from .release import key_columns, print_result


@app.command()
@interruptible
def sketch(
    input: str = typer.Argument(..., help="Parquet/CSV file or glob (one sketch per file), or SQL text run by "
                                          "DuckDB. Every row is one stream element (one privacy unit)."),
    by: List[str] = typer.Option(..., "--by", metavar="<str>", help="Key column(s): a,b or repeated."),
    sketch_size: int = typer.Option(..., "--sketch-size", help="Number of counters k (memory O(k) per file)."),
    epsilon: float = typer.Option(..., "--epsilon", help="Privacy parameter epsilon (> 0)."),
    delta: float = typer.Option(0.0, "--delta", help="Privacy parameter delta (0 < delta < 1; 0 with "
                                                      "--release pure)."),
    release: str = typer.Option("csh", "--release", help="csh (default; Lebeda & Retschmeier (2024) CSH on the "
                                "merged sketch), pmg (Lebeda (2023) Algorithm 13; one sequential sketch), pure "
                                "(Lebeda (2023) §3.6, needs --universe-size), threshold2 (the (eps, delta) §3.6 "
                                "variant), merged-laplace."),
    combine: Optional[str] = typer.Option(None, "--combine", help="merge (one sketch per file, merged; default) or "
                                          "sequential (one sketch over the files in order; default for pmg)."),
    universe_size: Optional[int] = typer.Option(None, "--universe-size", help="--release pure: integer keys "
                                                "0..universe-size-1."),
    out: Optional[str] = typer.Option(None, "--out", help="Write the table to this .parquet/.csv file."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing --out file."),
    head: int = typer.Option(10, "--head", min=0, metavar="<int>", help="Rows of the table to print."),
    ledger: Optional[str] = typer.Option(None, "--ledger", help="Charge the release against a budget in this "
                                                                 "ledger file."),
    dataset: Optional[str] = typer.Option(None, "--dataset", help="Dataset name whose budget --ledger charges."),
) -> None:
    """Sketch the key column(s) of every file with Misra–Gries (k counters, O(k) memory per file), merge the
    sketches and release them privately; shows files done/total while sketching."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    err = Console(stderr=True)
    console = Console()
    try:
        # the Misra-Gries module loads on use, after the mechanisms registered before it (registration order)
        mech = registry.builtin_module("misra_gries").MisraGries(sketch_size=sketch_size, release=release, combine=combine, universe_size=universe_size)
        with Progress(TextColumn("sketching"), BarColumn(), MofNCompleteColumn(), TextColumn("partitions"),
                      TimeElapsedColumn(), console=err, transient=False) as bar:
            task = bar.add_task("sketch", total=None)

            def tick(done: int, total: int) -> None:
                bar.update(task, completed=done, total=total)

            with sigterm_as_interrupt(), partition_progress(tick):
                res = pipeline.release(input, None, key_columns(by), epsilon, delta,
                          mechanism=mech, out=out, overwrite=overwrite, ledger=ledger,
                          dataset=dataset)
    except SparsedpError as e:
        fail(e, SKETCH_FLAGS)
    except KeyboardInterrupt:
        interrupted()
    print_result(res, console, head)
    if res.curator.output:
        console.print(f"output written to {res.curator.output}", markup=False, highlight=False, soft_wrap=True)
