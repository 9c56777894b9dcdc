"""``sparsedp demo``: generate a synthetic search log and release its popular queries, end to end."""

from __future__ import annotations

import math
import os
import time
from typing import Optional

import typer

from .. import demo_data
from . import app
from ._errors import DEMO_FLAGS, cli_errors, interruptible
from .release import progress_stages, run_release


#: the folder the demo writes into by default (created in the current directory)
DEMO_DIR = "sparsedp-demo"


def default_delta(rows: int) -> float:
    """The demo's δ: 1e-6, or the power of ten at most 1/(10 · users) for larger logs (the synthetic log has
    ``rows // 10`` users, a public figure), so the demo never triggers its own δ advice
    (:func:`sparsedp.advice.delta_units_note`)."""
    users = max(1, rows // 10)
    return min(1e-6, 10.0 ** -math.ceil(math.log10(10 * users)))


@app.command()
@interruptible
def demo(
    rows: int = typer.Option(1_000_000, "--rows", help="Rows (searches) to generate."),
    epsilon: float = typer.Option(1.0, "--epsilon", help="Privacy parameter epsilon."),
    delta: Optional[float] = typer.Option(None, "--delta", help="Privacy parameter delta (default: 1e-6, or "
                                          "1/(10 x users) rounded down to a power of ten when that is smaller)."),
    max_groups: int = typer.Option(10, "--max-groups", help="Max distinct queries kept per user."),
    out: Optional[str] = typer.Option(None, "--out", help="Where to write the released table (.csv or .parquet; "
                                      f"default {DEMO_DIR}/release.csv, replaced on each run)."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing --out file."),
    seed: int = typer.Option(0, "--seed", help="Seed of the synthetic *data* (the noise is always secure)."),
    write: str | None = typer.Option(None, "--write", help="Also write the synthetic search log to this file "
                                     "(.parquet or .csv), to try `sparsedp release` or SQL on it."),
) -> None:
    """Synthetic search log (Zipf queries, heavy-tailed users) -> private query counts, with a report."""
    from rich.console import Console

    console, err = Console(), Console(stderr=True)
    if delta is None:
        delta = default_delta(rows)
    if out is None:  # the demo's own folder: its previous output is replaced
        os.makedirs(DEMO_DIR, exist_ok=True)
        out, overwrite = os.path.join(DEMO_DIR, "release.csv"), True
    if write is not None:
        try:
            demo_data.log_format(write)
        except ValueError:
            err.print(f"--write must name a .parquet or .csv file, got {write!r}", markup=False, highlight=False)
            raise typer.Exit(2)
    stage = progress_stages(err)
    t = time.perf_counter()
    with cli_errors(DEMO_FLAGS), stage(f"generating a synthetic search log ({rows:,} rows)"):
        log = demo_data.search_log(rows, seed=seed)
    if write is not None:
        demo_data.write_search_log(log, write)
        console.print(f"synthetic search log written to {write}", markup=False, highlight=False, soft_wrap=True)
    console.print(f"synthetic search log: {log.height:,} rows, {log['user_id'].n_unique():,} users, "
                  f"{log['query'].n_unique():,} distinct queries ({time.perf_counter() - t:.1f}s)",
                  highlight=False, soft_wrap=True)
    console.print(f"releasing: sparsedp.release(log, privacy_unit='user_id', by='query', epsilon={epsilon:g}, "
                  f"delta={delta:g}, max_groups_per_unit={max_groups})", markup=False, highlight=False, soft_wrap=True)
    run_release(log, console=console, err_console=err, flags=DEMO_FLAGS, privacy_unit="user_id", by=["query"], epsilon=epsilon,
                delta=delta, max_groups_per_unit=max_groups, out=out, overwrite=overwrite)
