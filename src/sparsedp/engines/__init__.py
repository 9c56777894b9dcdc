"""Engines: turn user rows into a bounded :class:`~sparsedp.mechanisms.SparseHistogram` where the data live.

Every engine implements :class:`Engine` (``columns`` and ``raw_counts``); the shared
:meth:`Engine.bounded_histogram` applies the secure random ℓ0 choice, so all engines bound identically
(see :mod:`sparsedp.engines.bounding` for the method and why it is private, uniform and unpredictable).

============  ====================================================================================
``polars``    default: lazy scans, streaming de-duplication; Polars frames, files, anything
``duckdb``    DuckDB relations, SQL text, files, frames DuckDB can scan
``pandas``    pandas DataFrames (``drop_duplicates``/``groupby``)
``arrow``     pyarrow Tables (Arrow compute kernels)
``spark``     Spark DataFrames (and files read by Spark): bounding, counting *and* noise in the executors
============  ====================================================================================
"""

from __future__ import annotations

from typing import Any

from ..errors import InvalidParameterError
from .base import BoundedHistogram, BoundingStats, Engine, RawCounts, check_columns
from .bounding import bound, draw_bounding_secret, select_pairs
from .output import release_table, to_output_frame

ENGINES = ("polars", "duckdb", "pandas", "arrow")  # embedded: bounded histogram on the driver
#: engines that run the whole release where the data live (no driver-side histogram; see spark_engine)
DISTRIBUTED_ENGINES = ("spark",)


def get_engine(name: str | None, data: Any = None, connection: Any = None) -> Engine:
    """The engine called ``name``; ``None`` picks one for ``data`` (DuckDB for SQL and relations, else Polars)."""
    from . import sources

    if name is None:
        k = sources.kind(data) if data is not None else None
        name = "duckdb" if k in ("sql", "duckdb") else "spark" if k == "spark" else "polars"
    if name not in ENGINES + DISTRIBUTED_ENGINES:
        raise InvalidParameterError(f"engine must be one of {', '.join(map(repr, ENGINES + DISTRIBUTED_ENGINES))}; "
                                    f"got {name!r}")
    if name == "polars":
        from .polars_engine import PolarsEngine
        return PolarsEngine()
    if name == "duckdb":
        from .duckdb_engine import DuckDBEngine
        return DuckDBEngine(connection)
    if name == "pandas":
        from .pandas_engine import PandasEngine
        return PandasEngine()
    if name == "spark":
        from .spark_engine import SparkEngine
        return SparkEngine()
    from .arrow_engine import ArrowEngine
    return ArrowEngine()


__all__ = ["ENGINES", "DISTRIBUTED_ENGINES", "BoundedHistogram", "BoundingStats", "Engine", "RawCounts", "bound", "check_columns",
           "draw_bounding_secret", "get_engine", "release_table", "select_pairs", "to_output_frame"]
