"""Engines: where a release's data work happens (see :class:`~sparsedp.core.engine.Engine`).

Every engine turns user rows into a bounded histogram where the data live and offers the primitives the
mechanisms run on (k-th largest count, the per-key noise step by chunks with keyed per-release streams, collect);
the embedded engines share one implementation of the primitives (:class:`~sparsedp.engines.base.EmbeddedEngine`)
and the same random ℓ0 choice (:mod:`sparsedp.engines.bounding`), so all engines bound and noise identically.

============  ====================================================================================
``polars``    default: lazy scans, streaming de-duplication; Polars frames, files, anything
``duckdb``    DuckDB relations, SQL text, files, frames DuckDB can scan
``pandas``    pandas DataFrames (``drop_duplicates``/``groupby``)
``arrow``     pyarrow Tables (Arrow compute kernels)
``spark``     Spark DataFrames (and files read by Spark): bounding, counting *and* noise in the executors
============  ====================================================================================

Adding an engine: one module with a subclass of :class:`~sparsedp.core.engine.Engine` (or ``EmbeddedEngine``)
and one :func:`register` line below.
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from ..errors import InvalidParameterError
from ..core import sources
from ..core.bounded import BoundingStats, LocalHistogram
from ..core.checks import check_columns
from ..core.engine import Capability, Engine
from .base import EmbeddedEngine, RawCounts
from .bounding import bound, draw_bounding_secret, select_pairs
from .choice import fastest_engine
from ..core.sources import InputData

if TYPE_CHECKING:
    from duckdb import DuckDBPyConnection


@dataclass(frozen=True)
class EngineEntry:
    """A registered engine: how to build it and which input kinds (:func:`sources.kind`) it reads."""

    name: str
    factory: Callable[[DuckDBPyConnection | None], Engine]
    kinds: frozenset[str]
    #: (module the engine needs, the extra that installs it), or None when the core install has it
    needs: tuple[str, str] | None = None


_ENGINES: dict[str, EngineEntry] = {}


def register(name: str, target: "str | Callable[..., Engine]", kinds: set[str],
             needs: tuple[str, str] | None = None) -> None:
    """Register engine ``name``: ``target`` = "module:Class" (imported on first use) or the class itself, the
    class taking the optional DuckDB ``connection`` when it declares ``takes_connection``; ``kinds`` = the input
    kinds it reads (:func:`sources.kind`); ``needs`` = (module, extra) when the engine needs an optional
    dependency (a missing one is refused naming ``pip install 'sparsedp[extra]'``). Refuses duplicates."""
    if name in _ENGINES:
        raise ValueError(f"engine {name!r} is already registered")

    def factory(connection: DuckDBPyConnection | None) -> Engine:
        klass: Callable[..., Engine]  # an Engine class, taking the connection when it declares takes_connection
        if isinstance(target, str):
            mod, cls = target.split(":")
            klass = getattr(importlib.import_module(mod, __name__), cls)
        else:
            klass = target
        return klass(connection) if getattr(klass, "takes_connection", name == "duckdb") else klass()

    _ENGINES[name] = EngineEntry(name, factory, frozenset(kinds), needs)


def unregister(name: str) -> None:
    """Remove engine ``name`` (one registered by a test or a plug-in)."""
    _ENGINES.pop(name, None)


_FRAMES = {"polars", "polars-lazy", "pandas", "arrow", "file"}
register("polars", ".polars_engine:PolarsEngine", _FRAMES | {"duckdb"})
register("duckdb", ".duckdb_engine:DuckDBEngine", _FRAMES | {"duckdb", "sql"})
register("pandas", ".pandas_engine:PandasEngine", _FRAMES | {"duckdb"}, needs=("pandas", "pandas"))
register("arrow", ".arrow_engine:ArrowEngine", _FRAMES | {"duckdb"})
register("spark", ".spark_engine:SparkEngine", {"spark", "file"}, needs=("pyspark", "spark"))

ENGINES = tuple(n for n in _ENGINES if n != "spark")  # embedded: bounded histogram in this process
DISTRIBUTED_ENGINES = ("spark",)


def names() -> tuple[str, ...]:
    return tuple(_ENGINES)


def default_engine(data: InputData) -> str:
    """The engine used when none is named: the measured-fastest for the input (:mod:`.choice`)."""
    return fastest_engine(data)


def fastest_embedded_engine(data: InputData) -> EmbeddedEngine:
    """An instance of the fastest engine for ``data`` among the embedded ones that apply the ℓ0 choice
    themselves (Polars, DuckDB; :func:`~sparsedp.engines.choice.fastest_engine`): where the Arrow and pandas
    engines send their inputs."""
    engine = get_engine(fastest_engine(data))
    assert isinstance(engine, EmbeddedEngine)
    return engine


def get_engine(name: str | Engine | None, data: InputData | None = None,
               connection: DuckDBPyConnection | None = None) -> Engine:
    """The engine called ``name``; ``None`` picks one for ``data`` (:func:`default_engine`). Refuses an engine
    that cannot read ``data``, naming the ones that can."""
    kind = sources.kind(data) if data is not None else None
    if isinstance(name, Engine):  # an engine object with its options, e.g. DuckDBEngine(memory_limit="6GB")
        return _configured(name, kind, data, connection)
    if name is None:
        name = default_engine(data) if kind is not None else "polars"
    if not isinstance(name, str) or name not in _ENGINES:
        raise InvalidParameterError(f"engine must be one of {', '.join(map(repr, _ENGINES))}; got {name!r}")
    entry = _ENGINES[name]
    if kind is not None and kind not in entry.kinds:
        able = [n for n, e in _ENGINES.items() if kind in e.kinds]
        raise InvalidParameterError(f"the {name} engine cannot read {sources.display(data)}; use "
                                    f"engine={able[0]!r}" + (f" (or {', '.join(map(repr, able[1:]))})" if
                                                             len(able) > 1 else ""))
    if entry.needs is not None and importlib.util.find_spec(entry.needs[0]) is None:
        raise InvalidParameterError(f"the {name} engine needs {entry.needs[0]}, which is not installed: "
                                    f"pip install 'sparsedp[{entry.needs[1]}]'")
    return entry.factory(connection)


def _configured(engine: Engine, kind: str | None, data: InputData | None,
                connection: DuckDBPyConnection | None) -> Engine:
    """An engine object given as ``engine=``: refused if it cannot read ``data`` or if a ``connection`` is given
    as well (the object holds its own)."""
    if connection is not None:
        raise InvalidParameterError("connection= goes with an engine name; an engine object holds its own "
                                    "(DuckDBEngine(connection))")
    entry = _ENGINES.get(engine.name)
    if kind is not None and entry is not None and kind not in entry.kinds:
        raise InvalidParameterError(f"the {engine.name} engine cannot read {sources.display(data)}")
    return engine


__all__ = ["ENGINES", "DISTRIBUTED_ENGINES", "BoundingStats", "Capability", "EmbeddedEngine", "Engine",
           "LocalHistogram", "RawCounts", "bound", "check_columns", "default_engine", "draw_bounding_secret",
           "fastest_embedded_engine", "get_engine", "names",
           "register", "select_pairs", "unregister"]
