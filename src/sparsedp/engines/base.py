"""The engine interface and the shared driver of contribution bounding.

An engine turns user rows ``(privacy unit, key columns…)`` into a :class:`~sparsedp.mechanisms.SparseHistogram`
of *bounded* counts: after bounding, every privacy unit adds at most 1 to each key and touches at most ``l0``
keys. That is the contribution model every sparse-histogram accountant assumes (ℓ∞ = 1, ℓ0 = ``l0``; Karrer et al. (2022)
spec §1, ``C_u``; Lebeda & Retschmeier (2024) spec §1.1); an unenforced bound voids the guarantee.

Each engine implements :meth:`Engine.raw_counts` natively: de-duplicate ``(unit, key)`` pairs, count distinct
units per key, find the units with more than ``l0`` keys and return their pairs. The shared
:meth:`EmbeddedEngine.histogram` then runs :func:`sparsedp.engines.bounding.bound`, the secure uniform choice of
``l0`` keys per heavy unit (its docstring gives the method and why it is private, uniform and unpredictable),
so all engines bound identically. The Polars engine applies the same choice itself
(:meth:`Engine.bounded_raw_counts`), in one pass over the rows; Spark calls the same
:func:`~sparsedp.engines.bounding.select_pairs` in its executors.

The bounding statistics (:class:`BoundingStats`) are for the curator and are never part of a release.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Mapping, Protocol, Sequence, TypeVar

import numpy as np
import numpy.typing as npt

from ..aggregates import Aggregate, noise_columns
from ..errors import InvalidParameterError
from ..mechanisms.histogram import SparseHistogram
from ..progress import report
from .aggregate_exprs import grid_column_name
from .bounding import bound, draw_bounding_secret
from .checks import (check_columns, check_key_values, check_mixed_types, check_nan_keys, check_nulls_and_rows,
                     check_pandas_nan_keys, check_unique_names, engine_errors_as_input_errors, nan_key_error)
from .noise_chunks import key_chunks, n_chunks
from .pair_ids import bounded_raw_counts_with_sums
from .sources import InputData, to_lazy

if TYPE_CHECKING:
    import polars as pl
    import pyarrow as pa

    from ..auto_bound import UnitKeyCounts
    from ..noise.source import SecureRandom

__all__ = ["BoundingStats", "EmbeddedEngine", "Engine", "HistogramHandle", "LocalHistogram", "LocalRelease",
           "NoiseTask", "RawCounts",
           "check_columns", "check_key_values", "check_mixed_types", "check_nan_keys", "check_nulls_and_rows",
           "check_pandas_nan_keys", "check_unique_names", "engine_errors_as_input_errors", "nan_key_error",
           "numpy_to_arrow"]


@dataclass(frozen=True)
class BoundingStats:
    """What contribution bounding did (curator-facing; NOT differentially private, never released).

    Attributes:
        rows_in: input rows.
        units_in: distinct privacy units.
        pairs_in: distinct (unit, key) pairs, i.e. rows after de-duplication.
        duplicate_rows_removed: ``rows_in - pairs_in`` (repeat contributions of a unit to a key).
        units_over_l0: units that had more than ``l0`` distinct keys and were truncated.
        pairs_dropped_l0: (unit, key) pairs removed by the ``l0`` bound.
        keys_in: distinct keys in the input.
        keys_bounded: keys with a non-zero count after bounding.
        keys_out: keys handed to the mechanism (count >= ``pre_threshold``).
        l0: the bound applied (``None``: no ℓ0 bound, de-duplication only).

    ``None`` for a unit- or pair-level number the engine does not compute (Spark: each would cost another
    shuffle of the input; :class:`~sparsedp.engines.spark_engine.SparkBoundingStats`).
    """

    rows_in: int
    units_in: int | None
    pairs_in: int | None
    units_over_l0: int | None
    pairs_dropped_l0: int | None
    keys_in: int | None
    keys_bounded: int
    keys_out: int
    l0: int | None

    @property
    def duplicate_rows_removed(self) -> int | None:
        return None if self.pairs_in is None else self.rows_in - self.pairs_in

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["duplicate_rows_removed"] = self.duplicate_rows_removed
        return d


@dataclass(frozen=True)
class LocalHistogram:
    """A bounded histogram held in this process (the embedded engines' :meth:`Engine.histogram`).

    ``keys``: ``pyarrow.Table`` of the key columns, one row per key with a bounded count >= the pre-threshold,
    in canonical key order (:func:`~sparsedp.engines.bounding.canonical_order`); ``counts``: their bounded
    distinct-unit counts (int64); ``stats``: what bounding did (curator only); ``columns``: for a release with
    SUM/MEAN aggregates, one int64 array per distinct noisy grid column (:func:`sparsedp.aggregates.noise_columns`
    order) aligned with ``counts``: each key's grid sum over exactly the (unit, key) pairs its count keeps
    (:func:`~sparsedp.engines.pair_ids.bounded_raw_counts_with_sums`); empty otherwise. Never released.
    """

    keys: Any
    counts: Any
    stats: BoundingStats
    columns: tuple[np.ndarray, ...] = ()

    def __len__(self) -> int:
        return int(len(self.counts))


@dataclass(frozen=True)
class LocalRelease:
    """Released keys (``pyarrow.Table``) and their noisy values, as an embedded engine returns them;
    ``columns``: the released SUM/MEAN columns (output name → float64 values in value units), aligned."""

    keys: Any
    values: Any
    columns: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RawCounts:
    """What an engine computes natively (step 1–2 of the module docstring); :func:`finish` does the rest.

    Attributes:
        rows_in, units_in, pairs_in: see :class:`BoundingStats`.
        units_over_l0: units with more than ``l0`` keys (0 when ``l0`` is None).
        key_counts: ``pyarrow.Table`` (or Polars DataFrame) of the key columns plus :data:`COUNT` (distinct units
            per key, before the ℓ0 bound).
        heavy_pairs: ``pyarrow.Table`` (or Polars DataFrame) with the unit column and the key columns: every
            distinct pair of every unit with more than ``l0`` keys, in any order. ``None`` when ``l0`` is None.
        pairs_dropped_l0: see the attribute comment (``None``: the choice is left to :func:`bound`).
    """

    rows_in: int
    units_in: int
    pairs_in: int
    units_over_l0: int
    key_counts: Any
    heavy_pairs: Any
    #: set by engines that apply the ℓ0 choice themselves (:meth:`Engine.bounded_raw_counts`): ``key_counts``
    #: then holds the *bounded* counts of every input key and ``heavy_pairs`` is None
    pairs_dropped_l0: int | None = None


class HistogramHandle(Protocol):
    """What every engine's bounded histogram offers the pipeline: its curator statistics and its number of keys
    (:class:`LocalHistogram` in this process, :class:`~sparsedp.engines.spark_engine.SparkHistogram` in Spark)."""

    @property
    def stats(self) -> BoundingStats: ...

    def __len__(self) -> int: ...


class NoiseTask(Protocol):
    """The per-key noise step an engine applies chunk by chunk (:class:`~sparsedp.mechanisms.key_noise.KeyNoise`:
    the engines see only these members, so they never import the mechanisms)."""

    @property
    def column_names(self) -> tuple[str, ...]: ...

    @property
    def n_grid_columns(self) -> int: ...

    @property
    def float_output(self) -> bool: ...

    def apply(self, counts: np.ndarray, chunk: int) -> tuple[np.ndarray, np.ndarray]: ...

    def apply_joint(self, counts: np.ndarray, grid_sums: list[np.ndarray],
                    chunk: int) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]: ...


if TYPE_CHECKING:  # parameter defaults (PEP 696) are for the type checker: Python 3.11's TypeVar has none
    from typing_extensions import TypeVar as _DefaultTypeVar

    H = _DefaultTypeVar("H", bound=HistogramHandle, default=HistogramHandle)
    R = _DefaultTypeVar("R", default=Any)
else:
    H = TypeVar("H", bound=HistogramHandle)
    R = TypeVar("R")


class Engine(ABC, Generic[H, R]):
    """Where a release's data work happens: the bounded histogram, and the primitives mechanisms run on.

    The release pipeline (:mod:`sparsedp.pipeline`) and the mechanisms use only these methods, so a mechanism
    written once runs on every engine:

    * :meth:`histogram` — validate the input, enforce the contribution bound, count (curator stats included);
    * :meth:`kth_largest` — the exact k-th largest bounded count (top-k's cut-off);
    * :meth:`noise_keys` — the per-key noise step (:class:`~sparsedp.mechanisms.key_noise.KeyNoise`) applied
      chunk by chunk with the per-release keyed streams (:mod:`sparsedp.engines.noise_chunks`);
    * :meth:`collect` — the whole histogram as a :class:`~sparsedp.mechanisms.SparseHistogram` in this
      process, for mechanisms that need it (pure DP, Misra–Gries);
    * :meth:`to_arrow` — a released table as ``pyarrow.Table`` (released rows only).

    Type parameters: ``H``, the engine's bounded histogram (a :class:`HistogramHandle`); ``R``, what its noise
    step returns (:class:`LocalRelease` in this process, a lazy Spark frame on Spark).
    """

    #: engine name as accepted by ``sparsedp.release(engine=…)``
    name: str = ""
    #: the capability "holds its rows in this process as a Polars LazyFrame" (:meth:`EmbeddedEngine.rows_lazy`),
    #: which the set-union mechanisms and the keys objective of the automatic bound need
    embedded: bool = False

    @abstractmethod
    def columns(self, data: InputData) -> list[str]:
        """Column names of ``data`` (no data read)."""

    @abstractmethod
    def histogram(self, data: InputData, privacy_unit: str, by: Sequence[str], l0: int | None, rng: SecureRandom,
                  pre_threshold: int = 1, aggregates: Sequence[Aggregate] = ()) -> H:
        """The bounded histogram of ``data`` (an engine-specific handle), checked and counted.

        ``aggregates``: the SUM/MEAN aggregates of the release (:mod:`sparsedp.aggregates`): the handle then
        also holds each key's grid sums over the kept pairs, and the value columns are checked (missing,
        non-numeric, null, NaN/inf) before anything is drawn.

        Every unit adds at most 1 to each key and, with ``l0``, touches at most ``l0`` keys (uniform keyed choice,
        :mod:`sparsedp.engines.bounding`, secret drawn from ``rng`` only after the input passed validation).
        Keys below ``pre_threshold`` are left out. Raises :class:`~sparsedp.errors.InputDataError` on bad input
        (missing columns, nulls, NaN or nested key values, no rows) before anything is drawn.
        """

    @abstractmethod
    def kth_largest(self, hist: H, k: int) -> int:
        """The k-th largest bounded count of ``hist`` (0 if it has fewer than k keys)."""

    @abstractmethod
    def noise_keys(self, hist: H, task: NoiseTask) -> R:
        """Apply ``task`` (a :class:`~sparsedp.mechanisms.key_noise.KeyNoise`) to every chunk of keys."""

    @abstractmethod
    def collect(self, hist: H) -> SparseHistogram:
        """``hist`` as an in-process :class:`~sparsedp.mechanisms.SparseHistogram` (keys: ``pyarrow.Table``)."""

    @abstractmethod
    def to_arrow(self, released: R, by: Sequence[str], value_column: str) -> pa.Table:
        """A release of :meth:`noise_keys` as a ``pyarrow.Table`` of the key columns and ``value_column``."""

    def keys_per_unit_counts(self, data: InputData, privacy_unit: str, by: Sequence[str],
                             candidates: Sequence[int]) -> UnitKeyCounts:
        """For ``max_groups_per_unit="auto"`` (:mod:`sparsedp.auto_bound`): a
        :class:`~sparsedp.auto_bound.UnitKeyCounts` with N (units) and, for each candidate c, the number of units
        with at most c distinct keys. Validates the input like :meth:`histogram` (columns, nulls, no rows, key
        values) so a bad input is refused before the ledger charge. Not private; never released."""
        raise InvalidParameterError(f"max_groups_per_unit='auto' is not available on the {self.name} engine; "
                                    f"pass an integer max_groups_per_unit or use engine='polars' or 'duckdb'")

    def stats(self, hist: H) -> BoundingStats:
        """What bounding did (curator only)."""
        return hist.stats

    def release_resources(self, hist: H) -> None:
        """Free what :meth:`histogram` holds (Spark: the persisted histogram). Embedded engines: nothing."""


class EmbeddedEngine(Engine[LocalHistogram, LocalRelease]):
    """An engine whose bounded histogram is held in this process (Polars, DuckDB, pandas, Arrow).

    Subclasses implement :meth:`columns` and :meth:`raw_counts` (or :meth:`bounded_raw_counts`); this class
    applies the random ℓ0 choice (:func:`~sparsedp.engines.bounding.bound`), so every embedded engine bounds
    identically, and implements the primitives on numpy arrays.
    """

    embedded = True

    @abstractmethod
    def raw_counts(self, data: InputData, privacy_unit: str, by: list[str], l0: int | None) -> RawCounts:
        """De-duplicate, count keys and units, and return the heavy units' pairs (see :class:`RawCounts`).

        Must raise :class:`~sparsedp.errors.InputDataError` on empty input or nulls in the unit/key columns.
        """

    def bounded_raw_counts(self, data: InputData, privacy_unit: str, by: list[str], l0: int | None,
                           rng: SecureRandom) -> RawCounts:
        """:meth:`raw_counts`, or (engines that can) the counts with the ℓ0 choice already applied, i.e.
        :func:`~sparsedp.engines.bounding.select_pairs` with the secret ``draw_bounding_secret(rng)``, drawn
        only after the data passed validation and only when ``l0`` is set (``RawCounts.pairs_dropped_l0``
        set)."""
        return self.raw_counts(data, privacy_unit, by, l0)

    def rows_lazy(self, data: InputData) -> pl.LazyFrame:
        """The input rows as a Polars LazyFrame (the SUM/MEAN path, shared by every embedded engine)."""
        return to_lazy(data)

    def bounded_raw_counts_with_sums(self, data: InputData, privacy_unit: str, by: list[str], l0: int | None,
                                     rng: SecureRandom, aggregates: Sequence[Aggregate]) -> RawCounts:
        """:meth:`bounded_raw_counts` plus the per-key grid sums of the SUM/MEAN ``aggregates`` over the kept
        pairs (columns :func:`~sparsedp.engines.aggregate_exprs.grid_column_name`). Default: the shared Polars
        path (:func:`~sparsedp.engines.pair_ids.bounded_raw_counts_with_sums`: the same ℓ0 choice as
        the count-only path, same secret drawn at the same point, the grid sums carried along); an engine may
        compute the same table itself (DuckDB: in SQL)."""
        return bounded_raw_counts_with_sums(self.rows_lazy(data), privacy_unit, by, l0, rng, aggregates)

    def histogram(self, data: InputData, privacy_unit: str, by: Sequence[str], l0: int | None, rng: SecureRandom,
                  pre_threshold: int = 1, aggregates: Sequence[Aggregate] = ()) -> LocalHistogram:
        by = list(by)
        check_unique_names(data)
        check_mixed_types(data, privacy_unit, by)
        with engine_errors_as_input_errors(self.name, data):
            check_columns(self.columns(data), privacy_unit, by)
            check_pandas_nan_keys(data, by)  # before pandas' NaN turns into a null on the way to Polars
            if aggregates:
                raw = self.bounded_raw_counts_with_sums(data, privacy_unit, by, l0, rng, aggregates)
            else:
                raw = self.bounded_raw_counts(data, privacy_unit, by, l0, rng)
        check_nan_keys(raw.key_counts, by)  # every input key, before bounding and the pre-threshold
        # The secret is drawn only after the data passed validation (drawn even if no unit is over l0), by the
        # engine itself when it applied the choice (pairs_dropped_l0 set), else here for bound().
        secret = draw_bounding_secret(rng) if l0 is not None and raw.pairs_dropped_l0 is None else None
        hist, info = bound(raw.key_counts, raw.heavy_pairs, privacy_unit, by, l0, secret, pre_threshold,
                           pairs_dropped_l0=raw.pairs_dropped_l0)
        check_key_values(hist.keys, by)
        stats = BoundingStats(rows_in=raw.rows_in, units_in=raw.units_in, pairs_in=raw.pairs_in,
                              units_over_l0=raw.units_over_l0, pairs_dropped_l0=info["pairs_dropped_l0"],
                              keys_in=info["keys_in"], keys_bounded=info["keys_bounded"], keys_out=len(hist), l0=l0)
        columns: tuple[np.ndarray, ...] = ()
        if aggregates:
            sel = info["selected"]
            columns = tuple(raw.key_counts[grid_column_name(i)].to_numpy().astype(np.int64)[sel]
                            for i in range(len(noise_columns(aggregates)[0])))
        return LocalHistogram(keys=hist.keys, counts=hist.counts, stats=stats, columns=columns)

    def keys_per_unit_counts(self, data: InputData, privacy_unit: str, by: Sequence[str],
                             candidates: Sequence[int]) -> UnitKeyCounts:
        """Shared Polars path (every embedded engine's rows as a LazyFrame): distinct (unit, key) pairs, keys per
        unit, then the histogram of those degrees (:meth:`Engine.keys_per_unit_counts`)."""
        import polars as pl

        from ..auto_bound import UnitKeyCounts

        by = list(by)
        check_unique_names(data)
        cols = [privacy_unit] + by
        check_mixed_types(data, privacy_unit, by)
        with engine_errors_as_input_errors(self.name, data):
            check_columns(self.columns(data), privacy_unit, by)
            lf = self.rows_lazy(data).select(cols)
            floats = [c for c, t in lf.collect_schema().items() if c in by and t.is_float()]
            nan = lf.select(by).filter(pl.any_horizontal([pl.col(c).is_nan() for c in floats])) if floats \
                else lf.select(by).head(0)
            check = lf.select(pl.len().alias("__rows"), *[pl.col(c).null_count().alias(c) for c in cols])
            deg = (lf.unique().group_by(privacy_unit).agg(pl.len().alias("__d"))
                   .group_by("__d").agg(pl.len().alias("__n")))
            counts, bad, hist = pl.collect_all([check, nan.head(1), deg])
        c = counts.row(0, named=True)
        check_nulls_and_rows(int(c.pop("__rows")), {k: int(x) for k, x in c.items()})
        check_key_values(bad.to_arrow(), by)
        return UnitKeyCounts.from_degrees(candidates, hist["__d"].to_numpy(), hist["__n"].to_numpy())

    def kth_largest(self, hist: LocalHistogram, k: int) -> int:
        c = hist.counts
        if c.size < k:
            return 0
        return int(np.partition(c, c.size - k)[c.size - k])

    def noise_keys(self, hist: LocalHistogram, task: NoiseTask) -> LocalRelease:
        by = hist.keys.column_names
        names = task.column_names
        if len(hist.columns) != task.n_grid_columns:
            raise ValueError("the histogram's grid sums do not match the release's aggregates")
        parts_pos: list[np.ndarray] = []
        parts_val: list[np.ndarray] = []
        parts_cols: dict[str, list[np.ndarray]] = {n: [] for n in names}
        total = n_chunks(len(hist.counts))
        for done, (chunk, idx) in enumerate(key_chunks(hist.keys, by)):
            report(done, total, "key chunks")
            counts = hist.counts if idx is None else hist.counts[idx]
            if names:
                grid = list(hist.columns) if idx is None else [c[idx] for c in hist.columns]
                pos, values, cols = task.apply_joint(counts, grid, chunk)
                for n in names:
                    parts_cols[n].append(cols[n])
            else:
                pos, values = task.apply(counts, chunk)
            parts_pos.append(pos if idx is None else idx[pos])
            parts_val.append(values)
        report(total, total, "key chunks")
        dtype = np.float64 if task.float_output else np.int64
        pos = np.concatenate(parts_pos) if parts_pos else np.empty(0, np.int64)
        values = np.concatenate(parts_val) if parts_val else np.empty(0, dtype)
        order = np.argsort(pos, kind="stable")  # back to canonical key order (ties in the output sort by key)
        pos, values = pos[order], values[order]
        cols = {n: (np.concatenate(p) if p else np.empty(0, np.float64))[order] for n, p in parts_cols.items()}
        return LocalRelease(keys=hist.keys.take(numpy_to_arrow(pos, np.int64)), values=values.astype(dtype),
                            columns=cols)

    def collect(self, hist: LocalHistogram) -> SparseHistogram:
        return SparseHistogram(keys=hist.keys, counts=hist.counts, distinct=True)

    def to_arrow(self, released: LocalRelease, by: Sequence[str], value_column: str) -> pa.Table:
        out = released.keys.append_column(value_column, numpy_to_arrow(released.values))
        for name, col in released.columns.items():
            out = out.append_column(name, numpy_to_arrow(col, np.float64))
        return out


def numpy_to_arrow(a: np.ndarray, dtype: npt.DTypeLike | None = None) -> pa.Array:
    """A 1-d numeric numpy array as a ``pyarrow`` array over the same buffer (``dtype``: cast first). Unlike
    ``pa.array(a)`` it never imports pandas (pyarrow checks every ``pa.array`` input for pandas objects: about
    0.4 s of CPU at start-up)."""
    import pyarrow as pa

    a = np.ascontiguousarray(a if dtype is None else np.asarray(a, dtype=dtype))
    if a.ndim != 1 or a.dtype.kind not in "iuf" or a.dtype.byteorder == ">":
        return pa.array(a)
    return pa.Array.from_buffers(pa.from_numpy_dtype(a.dtype), a.size, [None, pa.py_buffer(a)])
