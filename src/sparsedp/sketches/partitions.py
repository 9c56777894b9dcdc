"""Misra–Gries sketches built from data, one partition at a time, in O(k) memory per partition.

A *partition* is a fixed, data-independent piece of the input in a fixed order: each file of a glob (sorted
names), each Spark partition (by index), the whole of an in-memory frame. Each partition is read as a sequence
of Arrow record batches of the key columns only (``batch_rows`` rows at a time: Parquet row-group batches,
the CSV streaming reader, DuckDB's record-batch reader), so nothing but one batch and the sketch is ever held.

**Stream.** The stream of a partition is its rows in file order, one item per row: the value of the key
column (integer keys as they are), or of the tuple of key columns, pre-hashed to the public 64-bit code of
:func:`sparsedp.sketches.misra_gries.key_code`. Each batch is coded vectorised (one dictionary-encoding per
batch, so the Python-level hashing touches only the batch's distinct values) and then fed, in row order,
through the Algorithm-12 kernel (:meth:`MisraGries.update`); the kernel's state persists between batches, so
**a partition's sketch is exactly the sequential Algorithm-12 sketch of that partition's stream, whatever the
batch size** (chunking is exact; tested against :func:`~sparsedp.sketches.misra_gries.reference_algorithm12`).

**Stream order.** The guarantees of Lemma 3.1 / Corollary 3.2 compare a stream with the same stream minus one
element, the other elements in the same order. Files, frames and Arrow tables are read in their row order
(adding or removing a row leaves the order of the others unchanged; partitions = files are fixed by the input's
layout). A DuckDB relation, SQL query or Polars LazyFrame is sorted by the key columns first (out of core),
because a query's row order may depend on its execution; a Spark DataFrame is hash-partitioned by key and sorted within
partitions (:mod:`sparsedp.sketches.spark_sketch`).

**Combining partitions** (:class:`Combine`):

* ``MERGE`` — one Algorithm-12 sketch per partition, combined by the [ACH+13] merge (thesis §3.7) as a left
  fold in partition order. The result is identical to ``MisraGries.merge_all([sequential sketch of
  partition i for i in order])`` (deterministic: no dependence on batch sizes, on the number of batches, or on
  which worker built which partition). A merged sketch is a k-sparse monotonic histogram (Corollary 3.2, Lebeda & Retschmeier (2024)
  Def. 3.1): release it with CSH or the merged-sketch Laplace, never with Algorithm 13. The per-partition sketches
  are also kept (k counters and γ each) for the §3.6 post-processing of several streams (option A).
* ``SEQUENTIAL`` — one sketch fed every partition in order: *identical to the sequential Algorithm-12 sketch
  of the concatenated stream* (same k slots, counters, γ, n). Every release (Algorithm 13 included) applies.
  In-process only (a distributed engine cannot feed one kernel).

Memory: one batch plus O(k) per partition (``SEQUENTIAL``: O(k) in all; ``MERGE``: O(k) per partition kept,
O(k) transient for the merge). Nothing here is private: :class:`SketchSummary` is the curator-side input of a
release and never leaves the mechanism.
"""

from __future__ import annotations

import contextlib
import contextvars
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from .. import _validate as v
from ..core import sources
from ..core.bounded import BoundingStats
from ..core.checks import check_columns, engine_errors_as_input_errors
from ..errors import InputDataError, InvalidParameterError, InvalidTypeError
from .misra_gries import MisraGries, key_code

__all__ = ["Combine", "SketchSummary", "SketchStats", "sketch_data", "partition_progress", "batch_codes",
           "BATCH_ROWS"]

BATCH_ROWS = 1 << 20

_PROGRESS: contextvars.ContextVar[Callable[[int, int], None] | None] = contextvars.ContextVar(
    "sparsedp_sketch_progress", default=None)


@contextlib.contextmanager
def partition_progress(callback: Callable[[int, int], None]) -> Iterator[None]:
    """Within the block, :func:`sketch_data` calls ``callback(partitions_done, partitions_total)`` after each
    partition (the CLI's ``files done/total`` display)."""
    token = _PROGRESS.set(callback)
    try:
        yield
    finally:
        _PROGRESS.reset(token)


class Combine(str, Enum):
    """How the sketches of the partitions are combined (module docstring)."""

    MERGE = "merge"
    SEQUENTIAL = "sequential"


@dataclass(frozen=True)
class SketchStats:
    """What sketching read (curator only, never released): rows = stream items, partitions, batches, k."""

    rows_in: int
    partitions: int
    batches: int
    sketch_size: int
    combine: str

    def to_dict(self) -> dict:
        return {"rows_in": self.rows_in, "partitions": self.partitions, "batches": self.batches,
                "sketch_size": self.sketch_size, "combine": self.combine}


@dataclass(frozen=True)
class SketchSummary:
    """The sketch of the data (``sketch``: merged for ``MERGE``, Algorithm-12 for ``SEQUENTIAL`` or one
    partition), the per-partition Algorithm-12 sketches (``parts``, ``MERGE`` only), the key columns and their
    Arrow types (to rebuild released keys), and the curator statistics. Never released."""

    sketch: MisraGries
    parts: tuple
    by: tuple
    key_types: tuple
    info: SketchStats = field(repr=False)

    @property
    def stats(self):
        """The pipeline's curator statistics (:class:`~sparsedp.core.bounded.BoundingStats`): every row is a unit,
        nothing is bounded; keys_out = the sketch's positive counters."""
        kept = len(self.sketch.standard())
        return BoundingStats(rows_in=self.info.rows_in, units_in=self.info.rows_in, pairs_in=self.info.rows_in,
                             units_over_l0=0, pairs_dropped_l0=0, keys_in=None, keys_bounded=kept, keys_out=kept,
                             l0=None)


# ---------------------------------------------------------------------------------------------- coding


def _check_column(name: str, arr: Any) -> None:
    import pyarrow as pa
    import pyarrow.compute as pc

    t = arr.type
    if arr.null_count:
        raise InputDataError(f"null values in key column {name!r}; drop or fill them before releasing (a null "
                             f"key is ambiguous)")
    if not (pa.types.is_integer(t) or pa.types.is_string(t) or pa.types.is_large_string(t)
            or pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_floating(t)
            or pa.types.is_boolean(t) or pa.types.is_dictionary(t) or pa.types.is_string_view(t)):
        raise InputDataError(f"key column {name!r} has type {t}; Misra-Gries keys must be integers, strings, "
                             f"bytes, floats or booleans: cast it (e.g. dates to strings) before releasing")
    if pa.types.is_floating(t) and len(arr) and pc.any(pc.is_nan(arr)).as_py():
        raise InputDataError(f"key column {name!r} contains NaN; replace NaN before releasing")


def batch_codes(batch: Any, by: Sequence[str], int_keys: bool) -> tuple[np.ndarray, np.ndarray, list | None]:
    """``(codes, distinct_codes, distinct_keys)`` of one Arrow batch of the key columns, in row order.

    ``int_keys`` (one integer key column): the codes are the values (``distinct_*`` empty / None). Otherwise
    each distinct key of the batch (a scalar, or a tuple for several columns) is coded once with
    :func:`key_code` and the codes are gathered by the dictionary indices (vectorised per batch)."""
    import pyarrow as pa

    cols = [batch.column(c) for c in by]
    cols = [c.combine_chunks() if isinstance(c, pa.ChunkedArray) else c for c in cols]
    for name, c in zip(by, cols):
        _check_column(name, c)
    if int_keys:
        a = cols[0].to_numpy(zero_copy_only=False)
        if a.dtype == np.uint64 and a.size and int(a.max()) >= 2 ** 63:
            raise InputDataError(f"key column {by[0]!r} has values >= 2^63; cast it to string")
        return np.ascontiguousarray(a, dtype=np.int64), np.zeros(0, np.int64), None
    if len(cols) == 1:
        enc = cols[0] if pa.types.is_dictionary(cols[0].type) else cols[0].dictionary_encode()
        idx = enc.indices.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
        keys = enc.dictionary.to_pylist()
    else:
        import polars as pl

        frame = pl.from_arrow(pa.table(dict(zip(by, cols))))
        ids = frame.select(pl.struct(list(by)).rank("dense").cast(pl.Int64) - 1).to_series().to_numpy()
        uniq = frame.with_columns(pl.Series("__id", ids)).unique("__id").sort("__id")
        keys = [tuple(r) for r in uniq.select(list(by)).rows()]
        idx = ids
    dcodes = np.fromiter((key_code(x) for x in keys), dtype=np.int64, count=len(keys))
    return dcodes[idx], dcodes, keys


# ---------------------------------------------------------------------------------------------- sources


def _file_partitions(path: Any, by: list[str], batch_rows: int) -> tuple[list, Any]:
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq


    fmt = sources.file_format(path)
    files = sources.expand(path)

    def one(f: str) -> Iterator[Any]:
        if fmt == "parquet":
            yield from pq.ParquetFile(f).iter_batches(batch_size=batch_rows, columns=by)
        else:
            with pacsv.open_csv(f, read_options=pacsv.ReadOptions(block_size=max(1 << 20, batch_rows * 16)),
                                convert_options=pacsv.ConvertOptions(include_columns=by)) as r:
                yield from r

    return [(lambda f=f: one(f)) for f in files], sources.file_columns(path)


def _partitions(data: Any, by: list[str], batch_rows: int, connection: Any = None) -> tuple[list, list[str]]:
    """``([callable returning an iterator of Arrow batches], column names)``, partitions in public order."""
    import pyarrow as pa


    kind = sources.kind(data)
    if kind == "file":
        return _file_partitions(data, by, batch_rows)
    if kind == "polars":
        cols = list(data.columns)
        return [lambda: iter(data.select(by).to_arrow().to_batches(batch_rows))], cols
    if kind == "polars-lazy":
        cols = list(data.collect_schema().names())
        # a lazy query's row order may depend on its execution (e.g. group_by): sort by key, as for SQL
        return [lambda: (b.to_arrow() for b in data.select(by).sort(by).collect_batches(chunk_size=batch_rows))], cols
    if kind == "pandas":
        cols = [str(c) for c in data.columns]
        return [lambda: iter(pa.Table.from_pandas(data[by], preserve_index=False).to_batches(batch_rows))], cols
    if kind == "arrow":
        cols = list(data.column_names)
        t = data if isinstance(data, pa.Table) else pa.Table.from_batches([data])
        return [lambda: iter(t.select(by).to_batches(batch_rows))], cols
    if kind in ("duckdb", "sql"):
        if kind == "sql":
            import duckdb

            rel = (connection or duckdb).sql(data)
        else:
            rel = data
        cols = list(rel.columns)
        # a query's row order can depend on the scheduler (joins, aggregations, parallel scans): sort by the key
        # so the stream is a function of the multiset of rows (module docstring, "Stream order")
        quoted = [f'"{c}"' for c in by]
        return [lambda: iter(rel.select(*quoted).order(", ".join(quoted)).fetch_record_batch(batch_rows))], cols
    raise InvalidTypeError(f"cannot sketch {sources.display(data)} in this process")


def _int_keys(schema_types: list) -> bool:
    import pyarrow as pa

    return len(schema_types) == 1 and pa.types.is_integer(schema_types[0])


def _feed(sketch: MisraGries, batches: Iterator[Any], by: list[str], int_keys: bool | None,
          types: list | None) -> tuple[int, int, bool, list]:
    rows = nb = 0
    for batch in batches:
        if batch.num_rows == 0:
            continue
        bt = [batch.schema.field(c).type for c in by]
        if types is None:
            types = bt
            int_keys = _int_keys(bt)
        elif _int_keys(bt) != int_keys:
            raise InputDataError(f"key column types differ between parts of the input ({types} vs {bt}); cast "
                                 f"them to one type")
        codes, dcodes, dkeys = batch_codes(batch, by, bool(int_keys))
        sketch.update_codes(codes, dcodes, dkeys)
        rows += batch.num_rows
        nb += 1
    return rows, nb, bool(int_keys), types


def sketch_data(data: Any, by: str | Sequence[str], sketch_size: int, *, combine: Combine | str = Combine.MERGE,
                batch_rows: int = BATCH_ROWS, connection: Any = None) -> SketchSummary:
    """The Misra–Gries sketch(es) of ``data``'s key column(s) ``by`` (module docstring), k = ``sketch_size``.

    Every input check (missing columns, nulls, NaN, unsupported types, no rows) raises
    :class:`~sparsedp.errors.InputDataError` before anything is returned; nothing random happens here."""
    k = v.integer("sketch_size", sketch_size, lo=1)
    combine = Combine(v.choice("combine", combine.value if isinstance(combine, Combine) else combine,
                               tuple(c.value for c in Combine)))
    batch_rows = v.integer("batch_rows", batch_rows, lo=1)
    by = [by] if isinstance(by, str) else list(by)
    if sources.kind(data) == "spark":
        from .spark_sketch import sketch_spark

        if combine is Combine.SEQUENTIAL:
            raise InvalidParameterError("combine='sequential' feeds one sketch in order and runs in this process; "
                                        "on Spark use combine='merge' (one sketch per partition, then merged)")
        return sketch_spark(data, by, k)
    with engine_errors_as_input_errors("sketch"):
        parts, columns = _partitions(data, by, batch_rows, connection)
        check_columns(list(columns) + ["\0"], "\0", by)  # names a missing key column and its closest match
        progress = _PROGRESS.get()
        total = len(parts)
        rows = batches = 0
        int_keys: bool | None = None
        types: list | None = None
        sketches: list[MisraGries] = []
        seq = MisraGries(k) if combine is Combine.SEQUENTIAL else None
        for i, part in enumerate(parts):
            sk = seq if seq is not None else MisraGries(k)
            r, b, ik, types = _feed(sk, part(), by, int_keys, types)
            if types is not None:
                int_keys = ik
            rows += r
            batches += b
            if seq is None:
                sketches.append(sk)
            if progress is not None:
                progress(i + 1, total)
    if rows == 0:
        raise InputDataError("the input has no rows; nothing to release (check the filter or the file)")
    key_type = "int" if int_keys else "hashed"
    for sk in ([seq] if seq is not None else sketches):
        sk._key_type = sk._key_type or key_type  # an empty partition has not seen a key yet
    sketch = seq if seq is not None else MisraGries.merge_all(sketches)
    stats = SketchStats(rows_in=rows, partitions=total, batches=batches, sketch_size=k, combine=combine.value)
    return SketchSummary(sketch=sketch, parts=tuple(sketches), by=tuple(by), key_types=tuple(types or ()),
                         info=stats)


def summary_from_sketches(sketches: list[MisraGries], by: list[str], types: list, rows: int,
                          batches: int) -> SketchSummary:
    """A ``MERGE`` summary from per-partition sketches built elsewhere (Spark executors), merged in order."""
    if rows == 0:
        raise InputDataError("the input has no rows; nothing to release (check the filter or the file)")
    key_type = "int" if _int_keys(types) else "hashed"
    for sk in sketches:
        sk._key_type = sk._key_type or key_type
    k = sketches[0].k
    stats = SketchStats(rows_in=rows, partitions=len(sketches), batches=batches, sketch_size=k,
                        combine=Combine.MERGE.value)
    return SketchSummary(sketch=MisraGries.merge_all(sketches), parts=tuple(sketches), by=tuple(by),
                         key_types=tuple(types), info=stats)
