"""Misra–Gries sketches of a Spark DataFrame: one Algorithm-12 sketch per Spark partition, built in the executors
(``mapInArrow``, O(k) memory per task, the same batch coding and kernel as in-process), serialised
(:meth:`MisraGries.to_bytes`: k counters, never rows) and merged on the driver in partition-index order with the
[ACH+13] merge (:mod:`sparsedp.sketches.partitions`, ``Combine.MERGE``).

Why the rows are first hash-partitioned by key and sorted within each partition: Spark's input partitions are
byte ranges of files (adding one row can move rows across splits) and a shuffle delivers rows in an arbitrary
order, while Corollary 3.2 needs neighbouring inputs to differ by one element *in one stream, the other elements
in the same order*. With ``repartition(P, *by)`` (P = the session's ``defaultParallelism``, a public setting) a
row's partition is a function of its own key, and ``sortWithinPartitions(*by)`` makes each partition's stream the
sorted multiset of its keys: removing a row removes one element from exactly one stream and keeps the order of
the rest. The shuffle and sort are Spark's (spilling to disk); each sketching task still holds O(k + batch).
A retried task rebuilds the same sketch (the kernel is deterministic)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..core.checks import check_columns
from ..errors import InputDataError
from .misra_gries import MisraGries
from .partitions import _feed, summary_from_sketches

__all__ = ["sketch_spark"]


@dataclass(frozen=True)
class _SketchTask:
    by: tuple
    k: int

    def __call__(self, batches):
        import pyarrow as pa
        from pyspark import TaskContext

        sk = MisraGries(self.k)
        rows, nb, int_keys, types = _feed(sk, iter(batches), list(self.by), None, None)
        yield pa.RecordBatch.from_pydict({
            "part": [TaskContext.get().partitionId()], "rows": [rows], "batches": [nb],
            "types": [repr([str(t) for t in types]) if types else ""],
            "int_keys": [bool(int_keys) if types else None],
            "sketch": [sk.to_bytes()]})


def stream_frame(frame: Any, by: list[str]):
    """The partitioned, ordered streams (module docstring): key columns, hash-partitioned by key into the
    session's ``defaultParallelism`` partitions, sorted within each partition."""
    parts = max(1, int(frame.sparkSession.sparkContext.defaultParallelism))
    return frame.select(*by).repartition(parts, *by).sortWithinPartitions(*by)


def sketch_spark(frame: Any, by: list[str], k: int):
    """The ``MERGE`` :class:`~sparsedp.sketches.partitions.SketchSummary` of a Spark DataFrame's key columns."""
    import pyarrow as pa
    from pyspark.sql import types as T

    check_columns(list(frame.columns) + ["\0"], "\0", by)
    schema = T.StructType([T.StructField("part", T.LongType()), T.StructField("rows", T.LongType()),
                           T.StructField("batches", T.LongType()), T.StructField("types", T.StringType()),
                           T.StructField("int_keys", T.BooleanType()), T.StructField("sketch", T.BinaryType())])
    try:
        rows = stream_frame(frame, by).mapInArrow(_SketchTask(by=tuple(by), k=int(k)), schema).collect()
    except Exception as e:  # executor-side InputDataError arrives wrapped by Py4J / PySpark
        msg = str(e)
        for line in msg.splitlines():
            if "InputDataError" in line:
                raise InputDataError(line.split("InputDataError:", 1)[-1].strip()) from None
        raise
    rows = sorted(rows, key=lambda r: r["part"])
    modes = {r["int_keys"] for r in rows if r["int_keys"] is not None}
    if len(modes) > 1:
        raise InputDataError("key column types differ between Spark partitions; cast them to one type")
    sketches = [MisraGries.from_bytes(bytes(r["sketch"])) for r in rows]
    # the Arrow types of the key columns, for the released table: read from the frame's schema
    sample = frame.select(*by).limit(0).toArrow() if hasattr(frame, "toArrow") else None
    types = [sample.schema.field(c).type for c in by] if sample is not None else \
        [pa.int64() if modes == {True} else pa.string()] * len(by)
    return summary_from_sketches(sketches, by, types, sum(r["rows"] for r in rows),
                                 sum(r["batches"] for r in rows))
