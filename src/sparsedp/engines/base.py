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

import contextlib
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field
from typing import Any, Iterator, Mapping, Sequence

import numpy as np

from ..errors import ColumnNotFoundError, ColumnTypeError, InputDataError, SparsedpError
from ..mechanisms.histogram import SparseHistogram


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
    """

    rows_in: int
    units_in: int
    pairs_in: int
    units_over_l0: int
    pairs_dropped_l0: int
    keys_in: int
    keys_bounded: int
    keys_out: int
    l0: int | None

    @property
    def duplicate_rows_removed(self) -> int:
        return self.rows_in - self.pairs_in

    def to_dict(self) -> dict:
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
    (:func:`~sparsedp.engines.aggregate_exprs.bounded_raw_counts_with_sums`); empty otherwise. Never released.
    """

    keys: Any
    counts: Any
    stats: BoundingStats
    columns: tuple = ()

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


class Engine(ABC):
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
    """

    #: engine name as accepted by ``sparsedp.release(engine=…)``
    name: str = ""
    #: the capability "holds its rows in this process as a Polars LazyFrame" (:meth:`EmbeddedEngine.rows_lazy`),
    #: which the set-union mechanisms and the keys objective of the automatic bound need
    embedded: bool = False

    @abstractmethod
    def columns(self, data: Any) -> list[str]:
        """Column names of ``data`` (no data read)."""

    @abstractmethod
    def histogram(self, data: Any, privacy_unit: str, by: Sequence[str], l0: int | None, rng: Any,
                  pre_threshold: int = 1, aggregates: Sequence[Any] = ()) -> Any:
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
    def kth_largest(self, hist: Any, k: int) -> int:
        """The k-th largest bounded count of ``hist`` (0 if it has fewer than k keys)."""

    @abstractmethod
    def noise_keys(self, hist: Any, task: Any) -> Any:
        """Apply ``task`` (a :class:`~sparsedp.mechanisms.key_noise.KeyNoise`) to every chunk of keys."""

    @abstractmethod
    def collect(self, hist: Any) -> SparseHistogram:
        """``hist`` as an in-process :class:`~sparsedp.mechanisms.SparseHistogram` (keys: ``pyarrow.Table``)."""

    @abstractmethod
    def to_arrow(self, released: Any, by: Sequence[str], value_column: str) -> Any:
        """A release of :meth:`noise_keys` as a ``pyarrow.Table`` of the key columns and ``value_column``."""

    def keys_per_unit_counts(self, data: Any, privacy_unit: str, by: Sequence[str], candidates: Sequence[int]) -> Any:
        """For ``max_groups_per_unit="auto"`` (:mod:`sparsedp.auto_bound`): a
        :class:`~sparsedp.auto_bound.UnitKeyCounts` with N (units) and, for each candidate c, the number of units
        with at most c distinct keys. Validates the input like :meth:`histogram` (columns, nulls, no rows, key
        values) so a bad input is refused before the ledger charge. Not private; never released."""
        from ..errors import InvalidParameterError

        raise InvalidParameterError(f"max_groups_per_unit='auto' is not available on the {self.name} engine; "
                                    f"pass an integer max_groups_per_unit or use engine='polars' or 'duckdb'")

    def stats(self, hist: Any) -> BoundingStats:
        """What bounding did (curator only)."""
        return hist.stats

    def release_resources(self, hist: Any) -> None:
        """Free what :meth:`histogram` holds (Spark: the persisted histogram). Embedded engines: nothing."""


class EmbeddedEngine(Engine):
    """An engine whose bounded histogram is held in this process (Polars, DuckDB, pandas, Arrow).

    Subclasses implement :meth:`columns` and :meth:`raw_counts` (or :meth:`bounded_raw_counts`); this class
    applies the random ℓ0 choice (:func:`~sparsedp.engines.bounding.bound`), so every embedded engine bounds
    identically, and implements the primitives on numpy arrays.
    """

    embedded = True

    @abstractmethod
    def raw_counts(self, data: Any, privacy_unit: str, by: list[str], l0: int | None) -> RawCounts:
        """De-duplicate, count keys and units, and return the heavy units' pairs (see :class:`RawCounts`).

        Must raise :class:`~sparsedp.errors.InputDataError` on empty input or nulls in the unit/key columns.
        """

    def bounded_raw_counts(self, data: Any, privacy_unit: str, by: list[str], l0: int | None,
                           rng: Any) -> RawCounts:
        """:meth:`raw_counts`, or (engines that can) the counts with the ℓ0 choice already applied, i.e.
        :func:`~sparsedp.engines.bounding.select_pairs` with the secret ``draw_bounding_secret(rng)``, drawn
        only after the data passed validation and only when ``l0`` is set (``RawCounts.pairs_dropped_l0``
        set)."""
        return self.raw_counts(data, privacy_unit, by, l0)

    def rows_lazy(self, data: Any) -> Any:
        """The input rows as a Polars LazyFrame (the SUM/MEAN path, shared by every embedded engine)."""
        from .polars_engine import to_lazy

        return to_lazy(data)

    def bounded_raw_counts_with_sums(self, data: Any, privacy_unit: str, by: list[str], l0: int | None, rng: Any,
                                     aggregates: Sequence[Any]) -> RawCounts:
        """:meth:`bounded_raw_counts` plus the per-key grid sums of the SUM/MEAN ``aggregates`` over the kept
        pairs (columns :func:`~sparsedp.engines.aggregate_exprs.grid_column_name`). Default: the shared Polars
        path (:func:`~sparsedp.engines.aggregate_exprs.bounded_raw_counts_with_sums`: the same ℓ0 choice as
        the count-only path, same secret drawn at the same point, the grid sums carried along); an engine may
        compute the same table itself (DuckDB: in SQL)."""
        from .aggregate_exprs import bounded_raw_counts_with_sums

        return bounded_raw_counts_with_sums(self.rows_lazy(data), privacy_unit, by, l0, rng, aggregates)

    def histogram(self, data: Any, privacy_unit: str, by: Sequence[str], l0: int | None, rng: Any,
                  pre_threshold: int = 1, aggregates: Sequence[Any] = ()) -> LocalHistogram:
        from .bounding import bound, draw_bounding_secret

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
        columns: tuple = ()
        if aggregates:
            from ..aggregates import noise_columns
            from .aggregate_exprs import grid_column_name

            sel = info["selected"]
            columns = tuple(raw.key_counts[grid_column_name(i)].to_numpy().astype(np.int64)[sel]
                            for i in range(len(noise_columns(aggregates)[0])))
        return LocalHistogram(keys=hist.keys, counts=hist.counts, stats=stats, columns=columns)

    def keys_per_unit_counts(self, data: Any, privacy_unit: str, by: Sequence[str], candidates: Sequence[int]) -> Any:
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
            c, bad, hist = pl.collect_all([check, nan.head(1), deg])
        c = c.row(0, named=True)
        check_nulls_and_rows(int(c.pop("__rows")), {k: int(x) for k, x in c.items()})
        check_key_values(bad.to_arrow(), by)
        return UnitKeyCounts.from_degrees(candidates, hist["__d"].to_numpy(), hist["__n"].to_numpy())

    def kth_largest(self, hist: LocalHistogram, k: int) -> int:
        c = hist.counts
        if c.size < k:
            return 0
        return int(np.partition(c, c.size - k)[c.size - k])

    def noise_keys(self, hist: LocalHistogram, task: Any) -> LocalRelease:
        from ..progress import report
        from .noise_chunks import key_chunks, n_chunks

        by = hist.keys.column_names
        names = task.column_names
        if len(hist.columns) != task.n_grid_columns:
            raise ValueError("the histogram's grid sums do not match the release's aggregates")
        parts_pos, parts_val = [], []
        parts_cols: dict[str, list] = {n: [] for n in names}
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

    def to_arrow(self, released: LocalRelease, by: Sequence[str], value_column: str) -> Any:
        out = released.keys.append_column(value_column, numpy_to_arrow(released.values))
        for name, col in released.columns.items():
            out = out.append_column(name, numpy_to_arrow(col, np.float64))
        return out


def nan_key_error(column: str) -> InputDataError:
    """The one error for a NaN key, on every engine (Spark included)."""
    return InputDataError(f"key column {column!r} contains NaN; replace NaN (e.g. by null and then drop, or by a "
                          f"sentinel value) before releasing")


def check_nan_keys(keys: Any, by: Sequence[str]) -> None:
    """The NaN-key rule: a float key column holding NaN is refused (:func:`nan_key_error`), before bounding,
    the ledger charge or any randomness. NaN never equals itself, so "the units with key NaN" is ill-defined
    (engines group it differently), and it is not null either (pandas' missing value is checked separately,
    :func:`check_pandas_nan_keys`, so a pandas frame gets the same error). ``keys``: every distinct input key
    (``pyarrow.Table`` or Polars DataFrame: :attr:`RawCounts.key_counts`)."""
    polars_frame = type(keys).__module__.split(".")[0] == "polars"  # no pyarrow import for a Polars frame
    for c in by:
        if polars_frame:
            if keys[c].dtype.is_float() and keys[c].is_nan().any():
                raise nan_key_error(c)
            continue
        import pyarrow as pa

        col = keys.column(c)
        if pa.types.is_floating(col.type) and len(col) and _any_nan(col):
            raise nan_key_error(c)


def check_pandas_nan_keys(data: Any, by: Sequence[str]) -> None:
    """:func:`check_nan_keys` on a pandas frame's float key columns, before any engine converts NaN to null."""
    if type(data).__module__.split(".")[0] != "pandas":
        return
    for c in by:
        col = data[c]
        if getattr(col.dtype, "kind", "") == "f" and bool(col.isna().any()):
            raise nan_key_error(c)


def numpy_to_arrow(a: Any, dtype: Any = None) -> Any:
    """A 1-d numeric numpy array as a ``pyarrow`` array over the same buffer (``dtype``: cast first). Unlike
    ``pa.array(a)`` it never imports pandas (pyarrow checks every ``pa.array`` input for pandas objects: about
    0.4 s of CPU at start-up)."""
    import pyarrow as pa

    a = np.ascontiguousarray(a if dtype is None else np.asarray(a, dtype=dtype))
    if a.ndim != 1 or a.dtype.kind not in "iuf" or a.dtype.byteorder == ">":
        return pa.array(a)
    return pa.Array.from_buffers(pa.from_numpy_dtype(a.dtype), a.size, [None, pa.py_buffer(a)])


def check_key_values(keys: Any, by: Sequence[str]) -> None:
    """The one rule for key values on every engine (checked on the bounded histogram's keys, before any
    charge or noise): nested values (lists, structs, maps) are refused, and so is NaN in a float key column
    (NaN never equals itself, so its "count" is ill-defined and engines disagree on it; :func:`check_nan_keys`
    already refused it on every input key)."""
    import pyarrow as pa

    for c in by:
        t = keys.schema.field(c).type
        if pa.types.is_nested(t) or pa.types.is_null(t) or pa.types.is_dictionary(t) and pa.types.is_nested(
                t.value_type):
            raise InputDataError(f"key column {c!r} has type {t}; keys must be scalar values (strings, numbers, "
                                 f"dates, booleans): flatten or cast it before releasing")
        if pa.types.is_floating(t) and len(keys) and _any_nan(keys.column(c)):
            raise nan_key_error(c)


def _any_nan(column: Any) -> bool:
    """Whether a float Arrow column holds NaN (``pyarrow.compute`` imported only here: ~0.2 s at start-up)."""
    import pyarrow.compute as pc

    return bool(pc.any(pc.is_nan(column)).as_py())


def check_unique_names(data: Any) -> None:
    """Frames with a repeated column name are ambiguous (which "user_id"?): refuse them by name."""
    from collections import Counter

    names = getattr(data, "column_names", None)  # pyarrow
    if names is None and type(data).__module__.split(".")[0] == "pandas":
        names = [str(c) if not isinstance(c, str) else c for c in data.columns]
    if names is None:
        return
    dup = sorted({repr(n) for n, c in Counter(names).items() if c > 1})
    if dup:
        raise InputDataError(f"the input has duplicate column names ({', '.join(dup)}); rename them so "
                             f"each column is unambiguous")


@contextlib.contextmanager
def engine_errors_as_input_errors(engine: str, data: Any = None) -> Iterator[None]:
    """Errors the data libraries raise on inputs they cannot process (unsupported column types, values out
    of range, unreadable files) become :class:`InputDataError`, so no library traceback reaches the user.
    Our own errors pass through unchanged, and so does an interrupt (DuckDB's ``InterruptException`` becomes
    :class:`KeyboardInterrupt` again). With ``data`` (the input), a CSV that is not UTF-8 or is ragged is
    explained with its line and how to read it (:func:`~sparsedp.engines.sources.explain_read_error`)."""
    from .sources import explain_read_error

    try:
        yield
    except InputDataError as e:
        better = explain_read_error(data, e) if data is not None else e
        if better is e:
            raise
        raise better from None
    except SparsedpError:
        raise
    except (ValueError, TypeError, OverflowError, KeyError, IndexError, NotImplementedError, OSError) as e:
        err = InputDataError(f"the {engine} engine could not process the input: {type(e).__name__}: {e}")
        raise (explain_read_error(data, err) if data is not None else err) from e
    except Exception as e:
        if type(e).__name__ == "InterruptException":  # DuckDB's Ctrl-C: still an interrupt (CLI exit 130)
            raise KeyboardInterrupt from None
        # library base classes outside the builtin hierarchy (polars/pyarrow/duckdb errors)
        if type(e).__module__.split(".")[0] in ("polars", "pyarrow", "duckdb", "pandas", "numpy", "_duckdb"):
            err = InputDataError(f"the {engine} engine could not process the input: {type(e).__name__}: {e}")
            raise (explain_read_error(data, err) if data is not None else err) from e
        raise


def check_columns(available: Sequence[str], privacy_unit: str | None, by: Sequence[str]) -> None:
    """Raise :class:`~sparsedp.errors.ColumnNotFoundError` naming any missing column (its ``param``: the argument
    that named it) and its closest match."""
    available = list(available)
    roles = ([("privacy_unit", privacy_unit)] if privacy_unit is not None else []) + [("by", c) for c in by]
    for role, col in roles:
        if col not in available:
            import difflib  # only for the error message (not on the path of a release that succeeds)

            close = ([a for a in available if a.lower() == col.lower()]
                     or difflib.get_close_matches(col, available, n=1))
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ColumnNotFoundError(f"⟨{role}⟩ column {col!r} is not in the data (columns: "
                                      f"{', '.join(map(repr, available[:20]))}{'…' if len(available) > 20 else ''})"
                                      f"{hint}", param=role)


#: pandas' names (``pandas.api.types.infer_dtype``) of object columns mixing values of different kinds
_MIXED = ("mixed", "mixed-integer")


def check_mixed_types(data: Any, privacy_unit: str | None, by: Sequence[str]) -> None:
    """The one rule on every engine for a unit or key column holding values of different kinds (a pandas
    object column with ``1`` and ``"1"``): refused with :class:`~sparsedp.errors.ColumnTypeError` naming the
    column, before any budget is charged. Engines would otherwise disagree: Polars and pandas fail on it, and
    DuckDB casts it to VARCHAR, where ``1`` and ``"1"`` become one unit (removing one person would then not
    remove one unit: the guarantee would not hold as stated) or one key. Only pandas frames can hold such a
    column (Polars, Arrow, DuckDB, Spark and files are typed per column). Called before the engine converts or
    scans the frame; a missing column is left to :func:`check_columns`."""
    if type(data).__module__.split(".")[0] != "pandas":
        return
    from pandas.api.types import infer_dtype

    for role, col in ([("privacy_unit", privacy_unit)] if privacy_unit is not None else []) + [("by", c)
                                                                                               for c in by]:
        if col not in data.columns:
            continue
        series = data[col]
        if getattr(series.dtype, "kind", "") != "O":
            continue
        kind = infer_dtype(series, skipna=True)
        if kind in _MIXED:
            kinds = sorted({type(x).__name__ for x in series.dropna().head(10_000)})
            raise ColumnTypeError(
                f"⟨{role}⟩ column {col!r} mixes values of different types ({', '.join(kinds)}): 1 and '1' would be "
                f"one {'unit' if role == 'privacy_unit' else 'key'} on some engines and two on others",
                column=col, param=role, fix=f"cast the column to one type first (e.g. "
                f"df[{col!r}] = df[{col!r}].astype(str))")


def check_nulls_and_rows(rows: int, null_counts: dict[str, int]) -> None:
    """Shared data checks: non-empty input, no null unit or key (nulls are not silently dropped)."""
    if rows == 0:
        raise InputDataError("the input has no rows; nothing to release (check the filter or the file)")
    bad = {c: n for c, n in null_counts.items() if n}
    if bad:
        desc = ", ".join(f"{c!r} ({n} nulls)" for c, n in bad.items())
        raise InputDataError(f"null values in {desc}; drop or fill them before releasing "
                             f"(a null unit would merge unrelated people, a null key is ambiguous)")
