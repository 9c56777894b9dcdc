"""Spark engine: the whole release (bounding, counting, noise, thresholding) runs in the executors.

``sparsedp.release(spark_df, …)`` (or ``sparsedp release INPUT --engine spark``) builds one Spark plan:

1. **Bounding** (``max_groups_per_unit = l0``), by the ONE definition every engine uses,
   :func:`sparsedp.engines.bounding.select_pairs` (its docstring gives the choice — a keyed AES PRF rank per
   distinct ``(unit, key)`` pair, the ``l0`` smallest per unit — and why it is private, uniform and
   unpredictable). The plan is ``select(unit, keys) → repartition(unit) → mapInArrow(bound) →
   groupBy(keys).sum()``: the hash repartitioning puts every row of a unit in one partition; each task
   concatenates its partition's Arrow batches into one Polars frame, runs ``select_pairs`` on it (de-duplication
   and the choice, per unit) and emits partial counts ``group_by(keys).len()``, which the final aggregation sums.
   ``select_pairs`` is per-unit local and canonicalises dtypes itself (Spark's int32/large-string/timestamp
   batches rank like the user's Polars frame), so the bounded histogram equals the embedded engines' for the
   same secret, and a recomputed or retried task makes the same choice.

   - *Secret.* ``K_bound`` (32 bytes, :func:`~sparsedp.engines.bounding.draw_bounding_secret`) is drawn on the
     driver from the release's source, before the noise key — the order of the embedded engines, so a seeded
     source gives the same ``K_bound`` (and the same kept pairs) on Spark and Polars. It reaches the executors
     only inside the pickled task closure (query plans show the ``_BoundTask`` callable by its class name, and
     its ``repr`` omits the secret; a test checks the plan string); it is never a plan literal, never released
     (enable Spark's RPC/IO encryption on a shared cluster, as for ``K_noise``). Executors and driver must run the
     same Polars version (``select_pairs`` fingerprints with Polars' hash).

   *Partitions.* ``repartition(unit)`` is left without a partition count so that adaptive query execution
   (on by default) coalesces the shuffle into partitions of ``spark.sql.adaptive.advisoryPartitionSizeInBytes``:
   each task pays a Python worker round trip, and 200 small partitions measured 3.5x slower than coalesced
   ones at 10⁷ rows on ``local[2]``. Coalescing merges whole hash partitions, so a unit never straddles two.
   With AQE disabled, ``spark.sql.shuffle.partitions`` sets the number of bounding tasks.

2. **Counting.** With ``l0``: ``groupBy(keys).sum()`` of the partial counts (Spark pre-aggregates them per
   task before the shuffle). Without (``top_k`` only): ``countDistinct(unit)`` per key.

3. **Noise and threshold** in ``mapInArrow``, calling the same kernel as the embedded engines
   (:func:`sparsedp.mechanisms.kernel.noise_and_filter`). Keys are split into ``C`` chunks by a public hash of
   the key (``xxhash64 mod C``, ``C`` fixed at release time), each chunk is one Spark partition
   (``repartition(C, chunk)``), and the keys of a chunk are sorted canonically before the kernel runs with the
   noise source ``SecretKeyedStream(K_noise, chunk)`` (:class:`sparsedp.noise.source.SecretKeyedStream`,
   AES-CTR keyed by HMAC of a second per-release secret). So every key's noise is a deterministic function of
   ``(K_noise, the bounded histogram)``: **one release, one draw** — a retried or speculative task, a second
   action on the returned lazy frame, or a recomputation after cache eviction all yield identical rows and
   values, and the failed attempt's partial output is discarded by Spark, never merged. Distinct chunks use
   streams of distinct labels (independent by the PRF property), so the noise has the law of the embedded
   engines' noise. ``K_noise`` travels only inside the pickled task closure (enable Spark's RPC/IO encryption
   on a shared cluster); it is never in a plan string and never released.

   The shared term of CSH / top-k CSH is drawn once on the driver (:func:`draw_shared_noise`) and shipped as a
   constant (rounded CSH: a :class:`~sparsedp.noise.rounded.SharedGaussianTerm`, i.e. a per-release secret
   whose keyed stream gives every executor the same bits of the shared term when it refines it). The top-k cut-off ``t`` (the exact (k+1)-th largest count) is ``orderBy(count desc).limit(k+1)``
   on the histogram: Spark keeps k+1 counts per partition and merges them, so only k+1 integers (no key)
   reach the driver.

Only the released rows (when the user acts on the returned frame) and the report's numbers reach the driver.
:func:`release_spark` persists the released rows and counts them once (for the report); the persisted frame
is a cache, the PRF design is the guarantee.
"""

from __future__ import annotations

import difflib
import functools
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence, TypeVar, cast

import numpy as np

from ..aggregates import Aggregate, Quantile, Sum, noise_columns
from ..core import sources
from ..core.bounded import BoundingStats, RoundsInput
from ..core.checks import check_columns
from ..core.engine import Capability, Engine, HistogramHandle, NoiseTask
from ..core.histogram import SparseHistogram
from ..core.key_order import canonical_order, canonical_rows
from ..core.noise_chunks import CHUNK, chunk_expr, n_chunks
from ..core.sources import InputData
from ..errors import InputDataError, InvalidParameterError, InvalidTypeError
from ..progress import listening, polling
from .aggregate_exprs import bad_values, bounded_key_sums, grid_column_name, per_key_contributions
from .bounding import COUNT  # the same internal count column as the embedded engines
from .bounding import bounded_key_counts, draw_bounding_secret
from .pairs import round_key_sums
from .input_checks import check_nulls_and_rows, nan_key_error
from .quantile_cells import CELL, KEY, QUANTILE, cells_from_partials, indexed_keys, partial_cells
from .quantile_cells import COUNT as CELL_COUNT

if TYPE_CHECKING:  # pyspark, Polars and pyarrow are imported when Spark runs (``import sparsedp`` stays light)
    import polars as pl
    import pyarrow as pa
    from pyspark.sql import DataFrame as SparkDataFrame
    from pyspark.sql import SparkSession

    from ..core.engine import RandomSource
    from ..core.quantile_cells import KeyCells


_F = TypeVar("_F", bound=Callable[..., Any])

VALUE = "__sparsedp_v"  # released value column inside Spark (renamed on output)


def spark_task_progress(method: _F) -> _F:
    """Decorator: while ``method`` runs, report completed/total tasks of the active Spark stages (the status
    tracker) to the display (:mod:`sparsedp.progress`); nothing when no display listens."""
    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        session = None
        if listening():
            from pyspark.sql import SparkSession

            session = SparkSession.getActiveSession()
        if session is None:
            return method(self, *args, **kwargs)
        tracker = session.sparkContext.statusTracker()

        def sample() -> tuple[float, float, str] | None:
            done = total = 0
            for sid in tracker.getActiveStageIds():
                info = tracker.getStageInfo(sid)
                if info is not None:
                    done, total = done + info.numCompletedTasks, total + info.numTasks
            return (done, total, "Spark tasks") if total else None

        with polling(sample):
            return method(self, *args, **kwargs)

    return cast(_F, wrapper)


#: local property a test sets to make the first attempt of every bounding and noise task emit output and fail
FAULT_PROPERTY = "sparsedp.test.failFirstAttempt"


def is_spark_frame(data: object) -> bool:
    """True for a (classic or Connect) PySpark DataFrame; never imports pyspark."""
    t = type(data)
    return t.__module__.startswith("pyspark.") and t.__name__ == "DataFrame"


def _require_pyspark() -> None:
    try:
        import pyspark  # noqa: F401
    except ImportError:  # pragma: no cover - depends on the environment
        raise InvalidParameterError("the spark engine needs pyspark: pip install 'sparsedp[spark]'") from None


def get_session(master: str | None = None) -> SparkSession:
    """The active Spark session, or a new one: the configured cluster (``spark-defaults.conf``,
    ``PYSPARK_SUBMIT_ARGS``, ``SPARK_MASTER``) or, when none is configured, local mode on every core."""
    _require_pyspark()
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None and master is None:
        return active
    b = SparkSession.builder.appName("sparsedp")
    master = master or os.environ.get("SPARK_MASTER")
    if master:
        b = b.master(master)
    elif "--master" not in os.environ.get("PYSPARK_SUBMIT_ARGS", "") and not _spark_defaults_master():
        b = b.master("local[*]")
    return b.getOrCreate()


def _spark_defaults_master() -> bool:
    conf_dir = os.environ.get("SPARK_CONF_DIR") or (os.path.join(os.environ["SPARK_HOME"], "conf")
                                                    if "SPARK_HOME" in os.environ else None)
    path = os.path.join(conf_dir, "spark-defaults.conf") if conf_dir else None
    if not path or not os.path.isfile(path):
        return False
    with open(path) as fh:
        return any(line.split() and line.split()[0] == "spark.master" for line in fh)


def read_file(path: str, spark: SparkSession | None = None) -> SparkDataFrame:
    """A Spark DataFrame over a Parquet or CSV file (or glob), read lazily by Spark."""
    fmt = sources.file_format(path)
    spark = spark or get_session()
    p = os.fspath(path)
    if fmt == "parquet":
        return spark.read.parquet(p)
    return spark.read.option("header", True).option("inferSchema", True).csv(p)


# ---------------------------------------------------------------------------------------------- bounding


@dataclass(frozen=True)
class _BoundTask:
    """The ℓ0 bounding of one partition (all rows of each of its units): kept pairs -> partial key counts.

    Pickled into the task closure with the bounding secret (``repr`` hides it; it is never a plan literal).
    """

    unit: str
    by: tuple[str, ...]
    l0: int
    secret: bytes = field(repr=False)
    #: SUM/MEAN aggregates: the task then also emits each key's partial grid sums of the kept pairs
    aggregates: tuple[Aggregate, ...] = ()

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import polars as pl

        table = _partition_table(batches)
        if table is None:
            return
        grid: list[str] = []
        if self.aggregates:
            # the same choice (choose_from_per_key, same secret) with the per-pair contributions carried along
            n = len(noise_columns(self.aggregates)[0])
            grid = [grid_column_name(i) for i in range(n)]
            pk = per_key_contributions(_polars(table), self.unit, list(self.by), self.aggregates)
            kc, _ = bounded_key_sums(pk, self.unit, list(self.by), self.l0, self.secret, n)
            counts = kc.filter(pl.col(COUNT) > 0).to_arrow()
        else:
            # select_pairs' choice, counted per key without materialising the kept pairs; it canonicalises
            # dtypes itself (Int32 -> Int64, large strings -> String, time zones…)
            pairs = _polars(table.select([self.unit, *self.by]))
            counts = bounded_key_counts(pairs, self.unit, list(self.by), self.l0, self.secret).to_arrow()
        yield from _partial_batches(counts, table, self.by, [COUNT, *grid])
        if _first_attempt_fault():
            raise RuntimeError("sparsedp test fault: first attempt of a bounding task fails after output")


@dataclass(frozen=True)
class _QuantileTask:
    """The quantile contribution model on one partition (all rows of each of its units): the embedded engines'
    :func:`sparsedp.engines.quantile_cells.partial_cells` -> partial (quantile, key index, cell) counts.
    Pickled into the task closure with the secret (``repr`` hides it) and the released keys (public)."""

    unit: str
    by: tuple[str, ...]
    keys: Any  # pa.Table of the released keys with their index column (indexed_keys)
    quantiles: tuple[Quantile, ...]
    l0: int
    secret: bytes = field(repr=False)

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        table = _partition_table(batches)
        if table is None:
            return
        part = partial_cells(_polars(table), self.unit, self.by, _polars(self.keys), self.quantiles, self.l0,
                             self.secret)
        yield from part.to_arrow().to_batches()


def checked_source(frame: SparkDataFrame, unit: str, by: list[str]) -> tuple[SparkDataFrame, int]:
    """``frame``'s unit and key columns after every input check (columns, nested keys, nulls, no rows, NaN keys),
    and the number of input rows."""
    check_columns(frame.columns, unit, by)
    src = frame.select(unit, *by)
    nested = [c for c in by if type(src.schema[c].dataType).__name__ in ("ArrayType", "MapType", "StructType")]
    if nested:
        raise InputDataError(f"key column {nested[0]!r} has type {src.schema[nested[0]].dataType.simpleString()}; "
                             f"keys must be scalar values (strings, numbers, dates, booleans)")
    rows_in = check_input(src, unit, by)
    check_no_nan(src, unit, by)
    return src, rows_in


@dataclass(frozen=True)
class _RoundTask:
    """One round of the adaptive-weighting set union on one partition (all rows of each of its units): the same
    code as the embedded engines (:func:`sparsedp.engines.pairs.round_key_sums`) -> partial per-key weight sums.
    Pickled into the task closure with the bounding secret (``repr`` hides it) and the excluded keys (released
    by earlier rounds: public)."""

    unit: str
    by: tuple[str, ...]
    l0: int
    weights: tuple[int, ...]
    secret: bytes = field(repr=False)
    exclude: Any = None
    choose_first: bool = False

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        table = _partition_table(batches)
        if table is None:
            return
        sums = round_key_sums(_polars(table.select([self.unit, *self.by])), self.unit, list(self.by), self.l0,
                              self.weights, self.secret, self.exclude, self.choose_first).to_arrow()
        yield from _partial_batches(sums, table, self.by, [COUNT])


def _partition_table(batches: Iterator[pa.RecordBatch]) -> pa.Table | None:
    """A bounding task's non-empty input batches as one Arrow table (None: an empty partition)."""
    import pyarrow as pa

    parts = [b for b in batches if b.num_rows]
    return pa.Table.from_batches(parts) if parts else None


def _partial_batches(counts: pa.Table, table: pa.Table, by: Sequence[str], cols: list[str]) -> list[pa.RecordBatch]:
    """A task's partial per-key results: the key columns cast back to the partition's Spark types, ``cols`` as
    Int64."""
    import pyarrow as pa

    out = pa.Table.from_arrays([counts.column(c).cast(table.schema.field(c).type) for c in by] +
                               [counts.column(c).cast(pa.int64()) for c in cols], names=[*by, *cols])
    batches: list[pa.RecordBatch] = out.combine_chunks().to_batches()
    return batches


def _polars(table: pa.Table) -> pl.DataFrame:
    """An Arrow table as a Polars frame (no copy)."""
    import polars as pl

    frame = pl.from_arrow(table)
    assert isinstance(frame, pl.DataFrame)  # a table gives a frame
    return frame


def bounded_partial_counts(src: SparkDataFrame, unit: str, by: list[str], l0: int, secret: bytes, *,
                           partitions: int | None = None,
                           aggregates: Sequence[Aggregate] = ()) -> SparkDataFrame:
    """Per-partition key counts of the pairs kept by the ℓ0 choice (module docstring, step 1). Lazy.

    ``repartition(unit)`` puts every row of a unit in one partition (``partitions``: a fixed count instead of
    the AQE-coalesced default); each partition runs
    :func:`sparsedp.engines.bounding.select_pairs` (de-duplication and the choice, per unit) and emits
    ``(by…, COUNT)`` partial counts, whose sums over partitions are the bounded histogram.
    """
    from pyspark.sql import types as T

    vcols = list(dict.fromkeys(a.column for a in noise_columns(aggregates)[0]))
    grid = [grid_column_name(i) for i in range(len(noise_columns(aggregates)[0]))] if aggregates else []
    part = src.select(unit, *by, *vcols)
    part = part.repartition(partitions, unit) if partitions else part.repartition(unit)
    schema = T.StructType([T.StructField(c, src.schema[c].dataType, True) for c in by] +
                          [T.StructField(c, T.LongType(), False) for c in [COUNT, *grid]])
    return part.mapInArrow(_BoundTask(unit=unit, by=tuple(by), l0=int(l0), secret=secret,
                                      aggregates=tuple(aggregates)), schema)


def histogram_frame(src: SparkDataFrame, unit: str, by: list[str], l0: int | None, secret: bytes | None, *,
                    partitions: int | None = None, aggregates: Sequence[Aggregate] = ()) -> SparkDataFrame:
    """Bounded counts per key as a lazy Spark frame ``(by…, COUNT)``; ``l0=None``: distinct units per key.
    With SUM/MEAN ``aggregates`` (``l0`` required) also the Int64 grid sums of the kept pairs, in columns
    :func:`~sparsedp.engines.aggregate_exprs.grid_column_name` ``(i)``."""
    from pyspark.sql import functions as F

    if l0 is None and aggregates:
        # no ℓ0 bound (top-k): the bounding task with a bound no unit reaches keeps every distinct pair (no
        # secret is used: no unit is over the bound), and computes the grid sums of the same code as with l0
        l0, secret = 2**62, bytes(32)
    if l0 is None:
        return src.groupBy(*by).agg(F.countDistinct(unit).cast("long").alias(COUNT))
    assert secret is not None
    grid = [grid_column_name(i) for i in range(len(noise_columns(aggregates)[0]))] if aggregates else []
    partial = bounded_partial_counts(src, unit, by, l0, secret, partitions=partitions, aggregates=aggregates)
    return partial.groupBy(*by).agg(*[F.sum(c).cast("long").alias(c) for c in [COUNT, *grid]])


# ---------------------------------------------------------------------------------------------- noise


@dataclass(frozen=True)
class _ChunkTask:
    """Adds each key's noise chunk (:func:`sparsedp.core.noise_chunks.chunk_expr`, computed with Polars
    exactly as on the embedded engines)."""

    by: tuple[str, ...]
    chunks: int

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import polars as pl
        import pyarrow as pa

        for b in batches:
            if not b.num_rows:
                continue
            frame = _polars(pa.Table.from_batches([b]))
            ids = frame.select(chunk_expr(frame.schema, self.by, self.chunks).cast(pl.Int32))[CHUNK]
            yield from pa.Table.from_batches([b]).append_column(CHUNK, ids.to_arrow()).to_batches()


@dataclass(frozen=True)
class _NoiseTask:
    """The per-key step on one Spark partition: the partition's chunks, each in canonical key order, go through
    :meth:`sparsedp.mechanisms.key_noise.KeyNoise.apply` (the same code as the embedded engines)."""

    task: NoiseTask  # KeyNoise (holds the secret noise key; its repr hides it)
    by: tuple[str, ...]

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import polars as pl
        import pyarrow as pa

        tables = [pa.Table.from_batches([b]) for b in batches if b.num_rows]
        if not tables:
            return
        frame = _polars(pa.concat_tables(tables))
        frame = frame.sort([pl.col(CHUNK)] + canonical_order(frame.schema, list(self.by)))
        chunk = frame[CHUNK].to_numpy()
        counts = frame[COUNT].to_numpy().astype(np.int64)
        grid = [frame[grid_column_name(i)].to_numpy().astype(np.int64) for i in range(self.task.n_grid_columns)]
        names = self.task.column_names
        keys = frame.select(list(self.by)).to_arrow()
        starts = np.flatnonzero(np.r_[True, chunk[1:] != chunk[:-1]])
        ends = np.r_[starts[1:], chunk.size]
        fault = _first_attempt_fault()
        for s, e in zip(starts.tolist(), ends.tolist()):
            cols: dict[str, np.ndarray] = {}
            if names:  # the joint release: the same code as the embedded engines (KeyNoise.apply_joint)
                pos, values, cols = self.task.apply_joint(counts[s:e], [g[s:e] for g in grid], int(chunk[s]))
            else:
                pos, values = self.task.apply(counts[s:e], int(chunk[s]))
            out = keys.slice(s, e - s).take(pa.array(pos, type=pa.int64())).append_column(VALUE, pa.array(values))
            for n in names:
                out = out.append_column(n, pa.array(cols[n], type=pa.float64()))
            yield from out.combine_chunks().to_batches()
            if fault:
                raise RuntimeError("sparsedp test fault: first attempt of a noise task fails after output")


def _first_attempt_fault() -> bool:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    return bool(ctx is not None and ctx.getLocalProperty(FAULT_PROPERTY) == "1" and ctx.attemptNumber() == 0)


# ---------------------------------------------------------------------------------------------- engine


@dataclass(frozen=True)
class SparkHistogram:
    """The bounded histogram as a persisted Spark frame ``(by…, COUNT)`` (keys with count >= the pre-threshold)."""

    frame: SparkDataFrame
    by: tuple[str, ...]
    stats: SparkBoundingStats

    def __len__(self) -> int:
        return int(self.stats.keys_out)


class SparkEngine(Engine[SparkHistogram, "SparkDataFrame"]):
    """The whole release in the executors (module docstring): only k+1 counts (top-k), the released rows and the
    report's numbers reach the driver, unless a mechanism asks for the whole histogram (:meth:`collect`:
    the pure-DP and Misra–Gries mechanisms, whose algorithms need it in one place)."""

    name = "spark"
    capabilities = frozenset({Capability.ROUNDS})

    def columns(self, data: InputData) -> list[str]:
        return list(as_spark_frame(data).columns)

    @spark_task_progress
    def histogram(self, data: InputData, privacy_unit: str, by: Sequence[str], l0: int | None, rng: RandomSource,
                  pre_threshold: int = 1, aggregates: Sequence[Aggregate] = ()) -> SparkHistogram:
        from pyspark import StorageLevel
        from pyspark.sql import functions as F

        by = list(by)
        frame = as_spark_frame(data)
        src, rows_in = checked_source(frame, privacy_unit, by)
        if aggregates:  # value columns checked before anything is drawn (one more scan)
            check_value_columns(frame, aggregates)
            src = frame.select(privacy_unit, *by, *dict.fromkeys(a.column for a in aggregates if isinstance(a, Sum)))
        secret = draw_bounding_secret(rng) if l0 is not None else None
        hist = histogram_frame(src, privacy_unit, by, l0, secret, aggregates=tuple(aggregates))
        hist = hist.persist(StorageLevel.MEMORY_AND_DISK)
        s = hist.agg(F.count(F.lit(1)).alias("b"),
                     F.sum((F.col(COUNT) >= pre_threshold).cast("long")).alias("o")).first()
        assert s is not None  # an aggregate has one row
        if pre_threshold > 1:
            hist = hist.where(F.col(COUNT) >= pre_threshold)
        stats = SparkBoundingStats(rows_in=rows_in, units_in=None, pairs_in=None, units_over_l0=None,
                                   pairs_dropped_l0=None, keys_in=None, keys_bounded=int(s["b"]),
                                   keys_out=int(s["o"] or 0), l0=l0)
        return SparkHistogram(frame=hist, by=tuple(by), stats=stats)

    @spark_task_progress
    def round_histogram(self, data: InputData, privacy_unit: str, by: Sequence[str], l0: int, weights: Any,
                        rng: RandomSource) -> tuple[SparkHistogram, RoundsInput]:
        """Round 1 of the adaptive-weighting set union in the executors (:meth:`Engine.round_histogram`):
        ``repartition(unit) → mapInArrow(round) → groupBy(keys).sum()``, each task running the embedded engines'
        per-unit definition (:class:`_RoundTask`) with the secret drawn on the driver after the input checks.
        The later rounds (:meth:`next_round`) read the checked frame again."""
        by = list(by)
        src, rows_in = checked_source(as_spark_frame(data), privacy_unit, by)
        secret = draw_bounding_secret(rng)
        rounds = RoundsInput(pairs=(src, rows_in), secret=secret, unit=privacy_unit, by=tuple(by), l0=int(l0),
                             weights=tuple(int(w) for w in weights))
        return self._round(rounds, secret, None, False), rounds

    @spark_task_progress
    def next_round(self, rounds: RoundsInput, exclude: Any, choose_first: bool, rng: RandomSource) -> SparkHistogram:
        """A later round (:meth:`Engine.next_round`): round 1's secret (``choose_first``) or a fresh one drawn on
        the driver, the released keys shipped to the tasks."""
        secret = rounds.secret if choose_first else draw_bounding_secret(rng)
        return self._round(rounds, secret, exclude, choose_first)

    def _round(self, rounds: RoundsInput, secret: bytes, exclude: Any, choose_first: bool) -> SparkHistogram:
        from pyspark import StorageLevel
        from pyspark.sql import functions as F
        from pyspark.sql import types as T

        src, rows_in = rounds.pairs
        by = list(rounds.by)
        ex = exclude.select(by) if exclude is not None and exclude.num_rows else None
        schema = T.StructType([T.StructField(c, src.schema[c].dataType, True) for c in by] +
                              [T.StructField(COUNT, T.LongType(), False)])
        task = _RoundTask(unit=rounds.unit, by=tuple(by), l0=rounds.l0, weights=rounds.weights, secret=secret,
                          exclude=ex, choose_first=bool(choose_first))
        partial = src.repartition(rounds.unit).mapInArrow(task, schema)
        hist = partial.groupBy(*by).agg(F.sum(COUNT).cast("long").alias(COUNT))
        hist = hist.persist(StorageLevel.MEMORY_AND_DISK)
        n = int(hist.count())
        stats = SparkBoundingStats(rows_in=rows_in, units_in=None, pairs_in=None, units_over_l0=None,
                                   pairs_dropped_l0=None, keys_in=None, keys_bounded=n, keys_out=n, l0=rounds.l0)
        return SparkHistogram(frame=hist, by=tuple(by), stats=stats)

    @spark_task_progress
    def kth_largest(self, hist: SparkHistogram, k: int) -> int:
        from pyspark.sql import functions as F

        top = [r[0] for r in hist.frame.select(COUNT).orderBy(F.col(COUNT).desc()).limit(k).collect()]
        return int(top[k - 1]) if len(top) == k else 0

    def noise_keys(self, hist: SparkHistogram, task: NoiseTask) -> SparkDataFrame:
        from pyspark.sql import types as T

        by = list(hist.by)
        src = hist.frame
        fields = [src.schema[c] for c in by]
        # the same number of chunks as the embedded engines: it depends on the number of keys only
        chunks = n_chunks(hist.stats.keys_out if hist.stats is not None else src.count())
        if chunks == 1:  # every key in chunk 0: no fingerprint pass needed
            from pyspark.sql import functions as F

            chunked = src.withColumn(CHUNK, F.lit(0).cast("int"))
        else:
            chunked_schema = T.StructType(list(src.schema.fields) + [T.StructField(CHUNK, T.IntegerType(), False)])
            chunked = src.mapInArrow(_ChunkTask(by=tuple(by), chunks=chunks), chunked_schema)
        # at most one noise task per chunk and per core: a chunk is a unit of noise derivation
        tasks = max(min(int(src.sparkSession.sparkContext.defaultParallelism), chunks), 1)
        schema = T.StructType([T.StructField(f.name, f.dataType, True) for f in fields] +
                              [T.StructField(VALUE, T.DoubleType() if task.float_output else T.LongType(), False)] +
                              [T.StructField(n, T.DoubleType(), False) for n in task.column_names])
        return chunked.repartition(tasks, CHUNK).mapInArrow(_NoiseTask(task=task, by=tuple(by)), schema)

    @spark_task_progress
    def collect(self, hist: SparkHistogram) -> SparseHistogram:
        frame = _polars(to_arrow(hist.frame))
        frame = frame[canonical_rows(frame, list(hist.by))]
        return SparseHistogram(keys=frame.select(list(hist.by)).to_arrow(),
                               counts=frame[COUNT].to_numpy().astype(np.int64), distinct=True)

    def to_arrow(self, released: SparkDataFrame, by: Sequence[str], value_column: str) -> pa.Table:
        return to_arrow(released.withColumnRenamed(VALUE, value_column))

    @spark_task_progress
    def native(self, released: SparkDataFrame, by: Sequence[str], value_column: str) -> tuple[SparkDataFrame, int]:
        """The released rows as a lazy Spark frame (one draw: recomputing it gives the same rows), largest
        value first, persisted; and their number."""
        from pyspark import StorageLevel
        from pyspark.sql import functions as F

        table = released.withColumnRenamed(VALUE, value_column).persist(StorageLevel.MEMORY_AND_DISK)
        n = table.count()
        # released rows are few: one partition sorted locally (no range-partitioning sample job, no shuffle)
        return table.coalesce(1).sortWithinPartitions(F.col(value_column).desc(), *[F.col(c) for c in by]), n

    @spark_task_progress
    def check_quantile_columns(self, data: InputData, quantiles: Sequence[Quantile]) -> None:
        """The quantiles' value columns: present, numeric, no null, NaN or ±inf (one Spark job)."""
        check_value_columns(as_spark_frame(data), quantiles)

    @spark_task_progress
    def quantile_cells(self, data: InputData, privacy_unit: str, by: Sequence[str], keys: pa.Table,
                       quantiles: Sequence[Quantile], l0: int, rng: RandomSource) -> list[KeyCells]:
        """:meth:`Engine.quantile_cells` in the executors: ``repartition(unit) → mapInArrow(partial_cells) →
        groupBy(quantile, key, cell).sum()``; the secret is drawn on the driver (the embedded engines' point, so a
        seeded source gives their cells) and the summed counts (at most keys × cells per quantile) are collected."""
        from pyspark.sql import functions as F
        from pyspark.sql import types as T

        by = list(by)
        kf = indexed_keys(keys, by)
        secret = draw_bounding_secret(rng)
        vcols = list(dict.fromkeys(q.column for q in quantiles))
        src = as_spark_frame(data).select(privacy_unit, *by, *vcols)
        schema = T.StructType([T.StructField(QUANTILE, T.IntegerType(), False),
                               T.StructField(KEY, T.LongType(), False), T.StructField(CELL, T.LongType(), False),
                               T.StructField(CELL_COUNT, T.LongType(), False)])
        task = _QuantileTask(unit=privacy_unit, by=tuple(by), keys=kf.to_arrow(), quantiles=tuple(quantiles),
                             l0=int(l0), secret=secret)
        summed = (src.repartition(privacy_unit).mapInArrow(task, schema).groupBy(QUANTILE, KEY, CELL)
                  .agg(F.sum(CELL_COUNT).cast("long").alias(CELL_COUNT)))
        return cells_from_partials(_polars(to_arrow(summed)), kf.height, len(quantiles))

    def from_arrow(self, table: pa.Table) -> SparkDataFrame:
        """Released rows computed in this process (pure DP, Misra–Gries) as a Spark DataFrame."""
        spark = get_session()
        try:
            return spark.createDataFrame(table)  # pyspark >= 4 takes a pyarrow Table
        except TypeError:  # pragma: no cover - pyspark 3.5
            return spark.createDataFrame(table.to_pylist())

    def release_resources(self, hist: HistogramHandle) -> None:
        if isinstance(hist, SparkHistogram):  # a Misra-Gries sketch summary holds nothing persisted
            hist.frame.unpersist()


def as_spark_frame(data: InputData) -> SparkDataFrame:
    """``data`` as a Spark DataFrame: Spark frames as they are, Parquet/CSV paths read by Spark."""
    if is_spark_frame(data):
        return cast("SparkDataFrame", data)
    if isinstance(data, (str, os.PathLike)):
        return read_file(os.fspath(data))
    raise InvalidParameterError(f"the spark engine takes a Spark DataFrame or a Parquet/CSV path, got "
                                f"{type(data).__name__}")


def check_value_columns(frame: SparkDataFrame, aggregates: Sequence[Aggregate | Quantile]) -> None:
    """SUM/MEAN (and quantile) value columns on Spark: present, numeric (not boolean), no null, NaN or ±inf (one job); the
    errors of :func:`sparsedp.engines.aggregate_exprs.check_value_columns`."""
    from pyspark.sql import functions as F

    cols = list(dict.fromkeys(a.column for a in aggregates if isinstance(a, (Sum, Quantile))))
    exprs = []
    for c in cols:
        if c not in frame.columns:
            close = difflib.get_close_matches(c, list(frame.columns), n=1)
            raise InputDataError(f"value column {c!r} is not in the data (columns: {list(frame.columns)})"
                                 + (f"; did you mean {close[0]!r}?" if close else ""))
        t = type(frame.schema[c].dataType).__name__
        if t not in ("ByteType", "ShortType", "IntegerType", "LongType", "FloatType", "DoubleType", "DecimalType"):
            raise InvalidTypeError(f"value column {c!r} must be numeric, got {frame.schema[c].dataType.simpleString()}")
        exprs.append(F.sum(F.col(c).isNull().cast("long")).alias(f"null|{c}"))
        if t in ("FloatType", "DoubleType"):
            bad = F.isnan(F.col(c)) | (F.abs(F.col(c)) == float("inf"))
            exprs.append(F.sum(bad.cast("long")).alias(f"nonfinite|{c}"))
    first = frame.agg(*exprs).first()
    assert first is not None  # an aggregate has one row
    found = [(k.split("|", 1)[1], k.split("|", 1)[0], int(n)) for k, n in first.asDict().items() if n]
    if found:
        raise bad_values(found)


def check_no_nan(src: SparkDataFrame, unit: str, by: list[str]) -> None:
    """Refuse NaN in a float unit or key column (one Spark job): NaN is not a value one can count units for, and
    would not match itself; a key gets the same error as on every embedded engine."""
    from pyspark.sql import functions as F

    floats = [c for c in [unit] + by if type(src.schema[c].dataType).__name__ in ("FloatType", "DoubleType")]
    if not floats:
        return
    found = src.select(*[F.max(F.isnan(F.col(c)).cast("int")).alias(f"__nan{i}")
                         for i, c in enumerate(floats)]).first()
    assert found is not None  # an aggregate has one row
    for i, c in enumerate(floats):
        if found[f"__nan{i}"]:
            if c in by:
                raise nan_key_error(c)  # the same error as every embedded engine
            raise InputDataError(f"privacy_unit column {c!r} contains NaN; replace NaN before releasing")


def check_input(src: SparkDataFrame, unit: str, by: list[str]) -> int:
    """Column, emptiness and null checks in one Spark job (a scan); returns the number of rows."""
    from pyspark.sql import functions as F

    check_columns(src.columns, unit, by)
    cols = [unit] + by
    row = src.agg(F.count(F.lit(1)).alias("__rows"),
                  *[F.sum(F.col(c).isNull().cast("long")).alias(f"__null{i}") for i, c in enumerate(cols)]).first()
    assert row is not None  # an aggregate has one row
    rows = int(row["__rows"])
    check_nulls_and_rows(rows, {c: int(row[f"__null{i}"] or 0) for i, c in enumerate(cols)})
    return rows


@dataclass(frozen=True)
class SparkBoundingStats(BoundingStats):
    """:class:`BoundingStats` as far as Spark computes them without extra passes over the data: unit- and
    pair-level numbers (``units_in``, ``pairs_in``, ``units_over_l0``, ``pairs_dropped_l0``, ``keys_in``) are
    ``None`` (each would cost another shuffle of the input)."""


def to_arrow(df: SparkDataFrame) -> pa.Table:
    """Collect a (small: released rows only) Spark frame as a ``pyarrow.Table``."""
    if hasattr(df, "toArrow"):  # pyspark >= 4
        return df.toArrow()
    import pyarrow as pa  # pragma: no cover - pyspark 3.5

    from pyspark.sql.pandas.types import to_arrow_schema

    collect = getattr(df, "_collect_as_arrow")  # pyspark 3.5's collector (not in pyspark 4's types)
    return pa.Table.from_batches(collect(), schema=to_arrow_schema(df.schema))
