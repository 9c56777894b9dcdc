"""pyarrow engine: bounding and counting with Arrow compute kernels (``Table.group_by``, ``is_in``).

The bounded histogram (:meth:`ArrowEngine.bounded_raw_counts`) is computed by the fastest engine for the input
(:func:`sparsedp.engines.choice.fastest_engine`), which reads the Arrow buffers in place; the Arrow-compute
path below is the generic :meth:`~sparsedp.engines.base.EmbeddedEngine.raw_counts`.

Files are read with only the unit and key columns (``pyarrow.parquet.read_table(columns=…)``,
``pyarrow.csv.read_csv(include_columns=…)``), straight into Arrow memory.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, cast

from ..core import sources
from ..errors import InputDataError
from . import fastest_embedded_engine
from .base import EmbeddedEngine, RawCounts
from .bounding import COUNT
from .input_checks import check_nulls_and_rows
from .duckdb_engine import to_arrow_table
from ..core.sources import InputData

if TYPE_CHECKING:  # pyarrow is imported when the engine runs (``import sparsedp`` stays light)
    import polars as pl
    import pyarrow as pa
    from duckdb import DuckDBPyRelation

    from ..core.engine import RandomSource


def to_arrow(data: InputData, columns: list[str] | None = None) -> pa.Table:
    """A ``pyarrow.Table`` over ``data``."""
    import pyarrow as pa

    k = sources.kind(data)
    if k == "arrow":
        return pa.Table.from_batches([data]) if isinstance(data, pa.RecordBatch) else data
    if k == "polars":
        return cast("pl.DataFrame", data).to_arrow()
    if k == "polars-lazy":
        return cast("pl.LazyFrame", data).collect().to_arrow()
    if k == "pandas":
        return pa.Table.from_pandas(data, preserve_index=False)
    if k == "duckdb":
        return to_arrow_table(cast("DuckDBPyRelation", data))
    if k == "file":
        import pyarrow.csv as pacsv
        import pyarrow.parquet as pq

        path = sources.as_path(data)
        try:
            fmt = sources.file_format(path)
            parts = [pq.read_table(f, columns=columns) if fmt == "parquet" else
                     pacsv.read_csv(f, convert_options=pacsv.ConvertOptions(include_columns=columns))
                     for f in sources.expand(path)]
            return parts[0] if len(parts) == 1 else pa.concat_tables(parts)
        except (pa.ArrowInvalid, OSError) as e:
            raise InputDataError(f"pyarrow could not read {path!r}: {e}") from None
    raise InputDataError("SQL text needs the DuckDB engine (engine='duckdb' or engine=None)")


class ArrowEngine(EmbeddedEngine):
    """Bounded histograms computed with pyarrow compute."""

    name = "arrow"

    def columns(self, data: InputData) -> list[str]:
        if sources.kind(data) == "file":
            return sources.file_columns(sources.as_path(data))
        return list(to_arrow(data).column_names)

    def bounded_raw_counts(self, data: InputData, privacy_unit: str, by: list[str], l0: int | None,
                           rng: RandomSource) -> RawCounts:
        """The bounded counts from the fastest engine for this input (:mod:`sparsedp.engines.choice`), which
        takes it without a round trip through pyarrow compute (same choice, same counts, same statistics);
        :meth:`raw_counts` is this engine's own generic path."""
        return fastest_embedded_engine(data).bounded_raw_counts(data, privacy_unit, by, l0, rng)

    def raw_counts(self, data: InputData, privacy_unit: str, by: list[str], l0: int | None) -> RawCounts:
        import pyarrow as pa
        import pyarrow.compute as pc

        cols = [privacy_unit] + by
        t = to_arrow(data, cols).select(cols)
        ut = t.schema.field(privacy_unit).type
        if pa.types.is_dictionary(ut):  # is_in needs plain values (the choice canonicalises them anyway)
            t = t.set_column(0, privacy_unit, pc.cast(t.column(0), ut.value_type))
        check_nulls_and_rows(t.num_rows, {c: t.column(c).null_count for c in cols})
        pairs = t.group_by(cols, use_threads=True).aggregate([])
        deg = pairs.group_by([privacy_unit]).aggregate([([], "count_all")])
        lim = l0 if l0 is not None else 2**62
        over = pc.greater(deg.column("count_all"), pa.scalar(lim, pa.int64()))
        kc = pairs.group_by(by).aggregate([([], "count_all")])
        key_counts = kc.select(by).append_column(COUNT, pc.cast(kc.column("count_all"), pa.int64()))
        heavy = None
        if l0 is not None:
            heavy_units = deg.column(privacy_unit).filter(over)
            heavy = pairs.filter(pc.is_in(pairs.column(privacy_unit), value_set=heavy_units.combine_chunks()))
        return RawCounts(rows_in=t.num_rows, units_in=deg.num_rows, pairs_in=pairs.num_rows,
                         units_over_l0=int(pc.sum(over).as_py() or 0) if l0 is not None else 0,
                         key_counts=key_counts, heavy_pairs=heavy)
