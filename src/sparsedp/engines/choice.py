"""Which embedded engine computes the bounded histogram fastest for a given input (the default engine choice).

Every engine makes the same ℓ0 choice (:mod:`sparsedp.engines.bounding`), so the choice of engine changes only
speed and memory, never the release. Measured by ``benchmarks/release.py --choice --runs 3`` on the development
machine (2 cores, 24 GiB; 10^7 rows of (user_id, url), 10^6 users, 85 367 urls, l0 = 10; the bounded
histogram alone, input already loaded; medians of 3 fresh processes; machine otherwise idle, load average
1.7–2.2 (the benchmark's own threads), on 2026-11-24 after session 5 of issue 19; CPU seconds count all threads):

=================  =========================  =========================  ==========================================
input              Polars engine wall / CPU   DuckDB engine wall / CPU   chosen
=================  =========================  =========================  ==========================================
Parquet file       0.90 s / 2.48 s            0.96 s / 2.51 s            ``polars`` (lazy scan, projected columns)
Polars frame       0.77 s / 2.43 s            1.02 s / 2.99 s            ``polars`` (in place)
pyarrow Table      0.87 s / 2.77 s            1.02 s / 3.26 s            ``polars`` (``pl.from_arrow``)
pandas DataFrame   0.87 s / 3.14 s            1.13 s / 3.93 s            ``polars`` (``pl.from_pandas``)
SQL text           —                          only engine                ``duckdb`` (runs where the data are)
DuckDB relation    —                          in place                   ``duckdb`` (no export of the rows)
Spark DataFrame    —                          —                          ``spark`` (runs in the executors)
=================  =========================  =========================  ==========================================

At 5·10^7 rows from the Parquet file the two engines tie: whole process, medians of 3, 5.07 s / 8.75 CPU s
(Polars) against 5.00 s / 8.61 CPU s (DuckDB), both about 0.6× plain DuckDB's ``COUNT(DISTINCT)``
(``docs/engines_speed.md``, session 5). Files stay with the Polars engine.

Files larger than memory: the Polars engine holds the input's columns and its group-by in memory (peak RSS
about :data:`POLARS_MEMORY_FACTOR` × the file's uncompressed Parquet size), so a file whose estimate passes half
the machine's RAM goes to the DuckDB engine instead, whose operators spill to disk (10^9 rows within 6 GiB:
``docs/engines_speed.md``; settings in :mod:`sparsedp.engines.duckdb_settings`).

Why they are close: since session 5 of issue 19 both engines run the same per-unit code on integer pair ids
(:mod:`sparsedp.engines.pair_ids`). In memory, DuckDB only reads the input and maps each row's key to its
index, and the process de-duplicates and bounds the rows. The Polars engine's single pass hashes the key into a
Categorical instead of joining a key table. Numeric Arrow/pandas buffers reach Polars without a copy; strings
are converted once to Polars' string views (included above).

With SUM/MEAN aggregates the choice is the same: in memory both engines sum the values per pair with the same
code. ``benchmarks/release_aggregates.py --aggregates --source file --runs 3 --engines polars,duckdb`` (10^7 rows,
count + two sums, after session 5) measured the Polars engine at 1.76 s / 3.12 CPU s and the DuckDB engine at
1.86 s / 3.27 CPU s (plain Polars group-by 1.13 s / 2.02 CPU s, plain DuckDB 1.49 s / 2.85 CPU s).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import cast

from ..core import sources
from ..core.sources import InputData

#: input kind → (engine, why), from the measurements in the module docstring
_FASTEST = {
    "file": ("polars", "Parquet/CSV files"),  # CSV: same lazy scan path, not measured separately
    "polars": ("polars", "Polars frames"),
    "polars-lazy": ("polars", "Polars LazyFrames"),
    "arrow": ("polars", "pyarrow Tables"),
    "pandas": ("polars", "pandas DataFrames"),
    "sql": ("duckdb", "SQL text: the only engine that runs it"),
    "duckdb": ("duckdb", "DuckDB relations: no export of the rows"),
    "spark": ("spark", "Spark DataFrames: everything runs in the executors"),
}


@dataclass(frozen=True)
class EngineChoice:
    """The default engine for an input and why (for the report: ``engine chosen: polars (fastest for …)``)."""

    engine: str
    input_kind: str
    reason: str

    def describe(self) -> str:
        return f"engine chosen: {self.engine} ({self.reason})"


#: peak RSS of a whole Polars-engine release ÷ the file's uncompressed Parquet size: 0.68 GiB for 0.105 GiB at
#: 10^7 rows of (user_id, url), ``benchmarks/billion.py --rows 1e7 --modes sparsedp-polars``
#: (``docs/engines_speed.md``, "Session 3 -- 10^9 rows"); a file whose estimate passes half the machine's RAM
#: goes to DuckDB, which spills to disk
POLARS_MEMORY_FACTOR = 6.5


def physical_memory() -> int:
    """The machine's RAM in bytes (0 where the platform does not say)."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return 0


def in_memory_bytes(path: str | os.PathLike[str]) -> int:
    """The input's size once decoded, in bytes, from metadata only: the uncompressed size of every column chunk
    of a Parquet file (or of every file of a glob), the size on disk of a CSV file."""
    total = 0
    for f in sources.expand(path):
        if sources.file_format(f) == "parquet":
            import pyarrow.parquet as pq

            md = pq.ParquetFile(f).metadata
            total += sum(md.row_group(i).total_byte_size for i in range(md.num_row_groups))
        else:
            total += os.path.getsize(f)
    return total


def choose_engine(data: InputData) -> EngineChoice:
    """The measured-fastest engine for ``data`` (module docstring), with its reason; a Parquet/CSV input whose
    in-memory estimate (:func:`in_memory_bytes` × :data:`POLARS_MEMORY_FACTOR`) passes half the machine's RAM
    goes to DuckDB, whose operators spill to disk (the Polars engine holds the input in memory)."""
    k = sources.kind(data)
    engine, fastest_for = _FASTEST[k]
    reason = f"fastest for {fastest_for}"
    if k == "file":
        ram = physical_memory()
        try:
            need = in_memory_bytes(cast("str | os.PathLike[str]", data)) * POLARS_MEMORY_FACTOR
        except Exception:  # unreadable metadata: the engine reports it, in the user's terms
            need = 0
        if ram and need > ram / 2:
            engine, reason = "duckdb", (f"files larger than memory: about {need / 2**30:.0f} GiB in memory "
                                        f"against {ram / 2**30:.0f} GiB of RAM, and DuckDB spills to disk")
    return EngineChoice(engine=engine, input_kind=k, reason=reason)


def fastest_engine(data: InputData) -> str:
    """Name of the fastest engine for ``data`` ("polars", "duckdb" or "spark"; see the module docstring)."""
    return choose_engine(data).engine
