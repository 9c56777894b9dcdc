"""Engines: turn user rows into a bounded :class:`~sparsedp.mechanisms.SparseHistogram` where the data live.

Every engine implements :class:`Engine` (``columns`` and ``raw_counts``); the shared
:meth:`Engine.bounded_histogram` applies the secure random ℓ0 choice, so all engines bound identically
(see :mod:`sparsedp.engines.bounding` for the method and why it is private, uniform and unpredictable).

============  ====================================================================================
``polars``    default: lazy scans, streaming de-duplication; Polars frames, files, anything
``duckdb``    DuckDB relations, SQL text, files, frames DuckDB can scan
``pandas``    pandas DataFrames (``drop_duplicates``/``groupby``)
``arrow``     pyarrow Tables (Arrow compute kernels)
============  ====================================================================================
"""

from __future__ import annotations

from typing import Any

from ..errors import InvalidParameterError
from .base import BoundedHistogram, BoundingStats, Engine, RawCounts, check_columns
from .bounding import bound, keep_smallest
from .output import release_table, to_output_frame

ENGINES = ("polars", "duckdb", "pandas", "arrow")


def get_engine(name: str | None, data: Any = None, connection: Any = None) -> Engine:
    """The engine called ``name``; ``None`` picks one for ``data`` (DuckDB for SQL and relations, else Polars)."""
    from . import sources

    if name is None:
        name = "duckdb" if data is not None and sources.kind(data) in ("sql", "duckdb") else "polars"
    if name not in ENGINES:
        raise InvalidParameterError(f"engine must be one of {', '.join(map(repr, ENGINES))}; got {name!r}")
    if name == "polars":
        from .polars_engine import PolarsEngine
        return PolarsEngine()
    if name == "duckdb":
        from .duckdb_engine import DuckDBEngine
        return DuckDBEngine(connection)
    if name == "pandas":
        from .pandas_engine import PandasEngine
        return PandasEngine()
    from .arrow_engine import ArrowEngine
    return ArrowEngine()


__all__ = ["ENGINES", "BoundedHistogram", "BoundingStats", "Engine", "RawCounts", "bound", "check_columns",
           "get_engine", "keep_smallest", "release_table", "to_output_frame"]
