"""The engine interface and the shared driver of contribution bounding.

An engine turns user rows ``(privacy unit, key columns…)`` into a :class:`~sparsedp.core.histogram.SparseHistogram`
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

The engine protocol itself (:class:`~sparsedp.core.engine.Engine`) and the values it returns live in
:mod:`sparsedp.core`. The bounding statistics (:class:`~sparsedp.core.bounded.BoundingStats`) are for the curator and are never part of a release.
"""

from __future__ import annotations

from abc import abstractmethod
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Iterator, Sequence

import numpy as np
import numpy.typing as npt

from ..aggregates import Aggregate, Quantile, noise_columns
from ..core.bounded import (BoundingStats, KeptPairs, LocalHistogram, LocalRelease, OneGroupRows, PairIds, RoundsInput,
                            UnitPairs)
from ..core.arrow_arrays import numpy_to_arrow, take_rows
from ..core.checks import check_columns, engine_errors_as_input_errors
from ..core.engine import Capability, Engine, NoiseTask
from ..core.histogram import SparseHistogram
from ..core.noise_chunks import key_chunks, n_chunks
from ..core.sources import InputData, to_lazy
from ..core.unit_keys import UnitKeyCounts
from ..progress import report
from .aggregate_exprs import check_value_columns, grid_column_name, value_columns
from .bounding import bound, draw_bounding_secret
from .input_checks import (check_key_values, check_mixed_types, check_nan_keys,
                           check_pandas_nan_keys, check_unique_names)
from .pair_ids import ReadPairs, bounded_raw_counts_with_sums, read_pairs
from .raw_counts import RawCounts
from ..core.lazy import lazy_module

if TYPE_CHECKING:
    import polars as pl
    import pyarrow as pa

    from ..core.engine import RandomSource
    from ..core.quantile_cells import KeyCells
    from . import pairs, quantile_cells as _quantile_cells
else:  # the pair primitives and the quantiles' cells: on first use (issue 31; a count release needs neither)
    pairs, _quantile_cells = lazy_module("sparsedp.engines.pairs"), lazy_module("sparsedp.engines.quantile_cells")


__all__ = ["EmbeddedEngine", "RawCounts"]




class EmbeddedEngine(Engine[LocalHistogram, LocalRelease]):
    """An engine whose bounded histogram is held in this process (Polars, DuckDB, pandas, Arrow).

    Subclasses implement :meth:`columns` and :meth:`raw_counts` (or :meth:`bounded_raw_counts`); this class
    applies the random ℓ0 choice (:func:`~sparsedp.engines.bounding.bound`), so every embedded engine bounds
    identically, and implements the primitives on numpy arrays.
    """

    capabilities = frozenset({Capability.PAIRS, Capability.UNIT_KEY_COUNTS, Capability.ROUNDS})

    @abstractmethod
    def raw_counts(self, data: InputData, privacy_unit: str, by: list[str], l0: int | None) -> RawCounts:
        """De-duplicate, count keys and units, and return the heavy units' pairs (see :class:`RawCounts`).

        Must raise :class:`~sparsedp.errors.InputDataError` on empty input or nulls in the unit/key columns.
        """

    def bounded_raw_counts(self, data: InputData, privacy_unit: str, by: list[str], l0: int | None,
                           rng: RandomSource) -> RawCounts:
        """:meth:`raw_counts`, or (engines that can) the counts with the ℓ0 choice already applied, i.e.
        :func:`~sparsedp.engines.bounding.select_pairs` with the secret ``draw_bounding_secret(rng)``, drawn
        only after the data passed validation and only when ``l0`` is set (``RawCounts.pairs_dropped_l0``
        set)."""
        return self.raw_counts(data, privacy_unit, by, l0)

    def rows_lazy(self, data: InputData) -> pl.LazyFrame:
        """The input rows as a Polars LazyFrame (the SUM/MEAN path, shared by every embedded engine)."""
        return to_lazy(data)

    def check_quantile_columns(self, data: InputData, quantiles: Sequence[Quantile]) -> None:
        """:meth:`Engine.check_quantile_columns` on the rows' Polars path (one scan)."""
        _quantile_cells.check_quantile_columns(self.rows_lazy(data), quantiles)

    def quantile_cells(self, data: InputData, privacy_unit: str, by: Sequence[str], keys: pa.Table,
                       quantiles: Sequence[Quantile], l0: int, rng: RandomSource) -> list[KeyCells]:
        """:meth:`Engine.quantile_cells`: the whole input as one part of
        :func:`~sparsedp.engines.quantile_cells.partial_cells` (the released keys' rows only are collected)."""
        return _quantile_cells.bounded_cells(self.rows_lazy(data), privacy_unit, by, keys, quantiles, l0, rng)

    def bounded_raw_counts_with_sums(self, data: InputData, privacy_unit: str, by: list[str], l0: int | None,
                                     rng: RandomSource, aggregates: Sequence[Aggregate]) -> RawCounts:
        """:meth:`bounded_raw_counts` plus the per-key grid sums of the SUM/MEAN ``aggregates`` over the kept
        pairs (columns :func:`~sparsedp.engines.aggregate_exprs.grid_column_name`). Default: the shared Polars
        path (:func:`~sparsedp.engines.pair_ids.bounded_raw_counts_with_sums`: the same ℓ0 choice as
        the count-only path, same secret drawn at the same point, the grid sums carried along); an engine may
        compute the same table itself (DuckDB: in SQL)."""
        return bounded_raw_counts_with_sums(self.rows_lazy(data), privacy_unit, by, l0, rng, aggregates)

    def histogram(self, data: InputData, privacy_unit: str, by: Sequence[str], l0: int | None, rng: RandomSource,
                  pre_threshold: int = 1, aggregates: Sequence[Aggregate] = ()) -> LocalHistogram:
        by = list(by)
        if isinstance(data, ReadPairs):  # rows the automatic bound read and checked (Engine.read_unit_key_counts)
            raw = data.bounded_raw_counts(privacy_unit, by, l0, rng, aggregates)
        else:
            raw = self._bounded_raw_counts(data, privacy_unit, by, l0, rng, aggregates)
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

    def _bounded_raw_counts(self, data: InputData, privacy_unit: str, by: list[str], l0: int | None,
                            rng: RandomSource, aggregates: Sequence[Aggregate]) -> RawCounts:
        """The input checks, then :meth:`bounded_raw_counts` (or with SUM/MEAN its ``_with_sums`` twin)."""
        with self._checked(data, privacy_unit, by):
            if aggregates:
                return self.bounded_raw_counts_with_sums(data, privacy_unit, by, l0, rng, aggregates)
            return self.bounded_raw_counts(data, privacy_unit, by, l0, rng)

    @contextmanager
    def _checked(self, data: InputData, privacy_unit: str, by: list[str]) -> Iterator[None]:
        """The input checks before a read (names, types, columns, a pandas frame's NaN keys), then the read
        inside, its engine errors as input errors."""
        check_unique_names(data)
        check_mixed_types(data, privacy_unit, by)
        with engine_errors_as_input_errors(self.name, data):
            check_columns(self.columns(data), privacy_unit, by)
            check_pandas_nan_keys(data, by)  # before pandas' NaN turns into a null on the way to Polars
            yield

    def keys_per_unit_counts(self, data: InputData, privacy_unit: str, by: Sequence[str],
                             candidates: Sequence[int]) -> UnitKeyCounts:
        """Shared Polars path (every embedded engine's rows as a LazyFrame): the histogram of distinct keys per
        unit from the count path's pair ids (:meth:`~sparsedp.engines.pair_ids.ReadPairs.degrees`,
        :meth:`Engine.keys_per_unit_counts`)."""
        return UnitKeyCounts.from_degrees(candidates, *self.read_pairs(data, privacy_unit, by).degrees())

    def read_pairs(self, data: InputData, privacy_unit: str, by: Sequence[str],
                   aggregates: Sequence[Aggregate] = ()) -> ReadPairs:
        """The input checks of :meth:`histogram`, then the rows read once into sorted pair ids (and the values
        of the SUM/MEAN ``aggregates``, checked: :func:`~sparsedp.engines.pair_ids.read_pairs`), curator only."""
        by = list(by)
        with self._checked(data, privacy_unit, by):
            return read_pairs(self.rows_lazy(data), privacy_unit, by, data, aggregates)

    def read_candidate_counts(self, data: InputData, privacy_unit: str, by: Sequence[str], candidates: Sequence[int],
                              rng: RandomSource, weights: Sequence[Any] | None = None,
                              aggregates: Sequence[Aggregate] = ()
                              ) -> tuple[tuple[npt.NDArray[np.int64], ...], int, InputData]:
        """:meth:`Engine.read_candidate_counts` from the sorted pair ids of one read
        (:meth:`~sparsedp.engines.pair_ids.ReadPairs.candidate_counts`)."""
        rows = self.read_pairs(data, privacy_unit, by, aggregates)
        counts, units = rows.candidate_counts(candidates, rng, weights)
        return counts, units, self.release_rows(rows, data)

    def release_rows(self, rows: ReadPairs, data: InputData) -> InputData:
        """What the release at the chosen bound reads after the automatic bound's read ``rows`` of ``data``:
        ``data`` again, through this engine's own path (the rows are freed). The Polars engine keeps the rows."""
        rows.drop()
        return data

    def check_value_columns(self, data: InputData, privacy_unit: str, by: Sequence[str],
                            aggregates: Sequence[Aggregate]) -> None:
        """:meth:`Engine.check_value_columns` on the rows' Polars path (one scan of the value columns)."""
        value_columns(aggregates, [privacy_unit, *by])
        with engine_errors_as_input_errors(self.name, data):
            check_value_columns(self.rows_lazy(data), aggregates)

    # the pair primitives (Capability.PAIRS): the shared Polars path over the engine's rows (engines/pairs.py)

    def distinct_pairs(self, data: Any, privacy_unit: str, by: Sequence[str]) -> UnitPairs:
        return pairs.distinct_pairs(self, data, privacy_unit, by)

    def weighted_histogram(self, data: Any, privacy_unit: str, by: Sequence[str], l0: int, weights: Any,
                           rng: Any) -> LocalHistogram:
        return pairs.weighted_histogram(self, data, privacy_unit, by, l0, weights, rng)

    def round_histogram(self, data: Any, privacy_unit: str, by: Sequence[str], l0: int, weights: Any,
                        rng: Any) -> tuple[LocalHistogram, RoundsInput]:
        return pairs.round_histogram(self, data, privacy_unit, by, l0, weights, rng)

    def next_round(self, rounds: RoundsInput, exclude: Any, choose_first: bool, rng: Any) -> LocalHistogram:
        return pairs.next_round(self, rounds, exclude, choose_first, rng)

    def kept_pairs(self, data: Any, privacy_unit: str, by: Sequence[str], l0: int, rng: Any) -> KeptPairs:
        return pairs.kept_pairs(self, data, privacy_unit, by, l0, rng)

    def pair_ids(self, data: Any, privacy_unit: str, by: Sequence[str]) -> PairIds:
        return pairs.pair_ids(self, data, privacy_unit, by)

    def one_group_per_unit(self, data: Any, privacy_unit: str, by: Sequence[str], group: str, groups: Any,
                           from_text: bool, rng: Any) -> OneGroupRows:
        return pairs.one_group_per_unit(self, data, privacy_unit, by, group, groups, from_text, rng)

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
        return LocalRelease(keys=take_rows(hist.keys, pos), values=values.astype(dtype),
                            columns=cols)

    def collect(self, hist: LocalHistogram) -> SparseHistogram:
        return SparseHistogram(keys=hist.keys, counts=hist.counts, distinct=True)

    def to_arrow(self, released: LocalRelease, by: Sequence[str], value_column: str) -> pa.Table:
        out = released.keys.append_column(value_column, numpy_to_arrow(released.values))
        for name, col in released.columns.items():
            out = out.append_column(name, numpy_to_arrow(col, np.float64))
        return out
