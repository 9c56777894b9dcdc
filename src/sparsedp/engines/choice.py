"""Which embedded engine computes the bounded histogram fastest for a given input (the default engine choice).

Every engine makes the same ℓ0 choice (:mod:`sparsedp.engines.bounding`), so the choice of engine changes only
speed and memory, never the release. The table below is what ``benchmarks/release.py --choice`` measured on the
development machine (2 shared cores, 24 GiB; 10^7 rows of (user_id, url), 10^6 units, l0 = 10; bounded
histogram only, input already loaded, CPU seconds because the machine was shared; see ``docs/benchmarks.md``):

=================  ==================  ==================  =========================================
input              Polars engine       DuckDB engine       chosen
=================  ==================  ==================  =========================================
Parquet/CSV file   fastest             about 2× the CPU    ``polars`` (lazy scan, projected columns)
Polars frame       fastest             about 2× the CPU    ``polars`` (in place)
pyarrow Table      fastest             about 2× the CPU    ``polars`` (numeric buffers zero-copy)
pandas DataFrame   fastest             about 2× the CPU    ``polars`` (via Arrow)
SQL text           —                   only engine         ``duckdb`` (runs where the data are)
DuckDB relation    —                   in place            ``duckdb`` (no export of the rows)
Spark DataFrame    —                   —                   ``spark`` (runs in the executors)
=================  ==================  ==================  =========================================

(The DuckDB engine's per-pair keyed rank runs as a Python UDF on 2 048-row batches under the GIL; the Polars
engine ranks the heavy units' pairs in large NumPy batches. DuckDB's own ``COUNT(DISTINCT)`` is faster than
Polars' ``n_unique``; its bounding is not, on this machine.)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import sources

#: input kind → (engine, why), from the measurements in the module docstring
_FASTEST = {
    "file": ("polars", "Parquet/CSV files"),
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
        return f"engine chosen: {self.engine} (fastest for {self.reason})"


def choose_engine(data: Any) -> EngineChoice:
    """The measured-fastest engine for ``data`` (module docstring), with its reason."""
    k = sources.kind(data)
    engine, reason = _FASTEST[k]
    return EngineChoice(engine=engine, input_kind=k, reason=reason)


def fastest_engine(data: Any) -> str:
    """Name of the fastest engine for ``data`` ("polars", "duckdb" or "spark"; see the module docstring)."""
    return choose_engine(data).engine


def fastest_embedded_engine(data: Any):
    """An instance of the fastest engine for ``data`` among the embedded ones that apply the ℓ0 choice
    themselves (Polars, DuckDB): where the Arrow and pandas engines send their inputs."""
    name = fastest_engine(data)
    if name == "duckdb":
        from .duckdb_engine import DuckDBEngine

        return DuckDBEngine()
    from .polars_engine import PolarsEngine

    return PolarsEngine()
