"""The Polars engine's bounded counts (and SUM/MEAN grid sums) on integer pair ids: the fast path.

Computes what :func:`~sparsedp.engines.bounding.choose_from_per_key` computes on
:func:`~sparsedp.engines.bounding.per_key_units` (count only) or on
:func:`~sparsedp.engines.aggregate_exprs.per_key_contributions` (with SUM/MEAN): the same ℓ0 choice for the
same secret (the keyed rank of :mod:`sparsedp.engines.bounding` decides which pairs are kept), the same
per-key counts and Int64 grid sums, the same curator statistics, the keys in canonical order. Only the way
there differs:

1. **one pass over the rows, hashing the key once** — the one string hash the plain
   ``group_by(key).agg(n_unique(unit))`` also pays. One String key column is cast to a Categorical of a
   private namespace (``pl.Categories.random()``): the physical id is a dense *key id* ``0 … keys−1`` and the
   namespace's strings are the distinct keys. Other keys: ``group_by(by).agg(unit, values…)``, a row's key id
   being its group's position;
2. **unit ids**: an integer unit column whose range fits beside the key bits in 64 bits is its offset
   ``unit − min`` (no hashing); any other unit column (strings, dates, integers spread too widely…) gets a
   dense id from one hash aggregation on the units;
3. **pair ids** ``p = unit id · 2^b + key id`` (one ``u64`` per row), computed by numpy in threads into one
   new array, reading the columns' Polars chunks where they lie (:func:`pack_pairs`), then sorted: count
   only, in place in one run per thread (:mod:`sparsedp.engines.sorted_runs`: no step on one core, no
   second array); with SUM/MEAN, the rows sorted by ``p`` by Polars (stable: a pair's rows stay in input
   order);
4. **numpy on buckets of whole units** of the sorted runs (about :data:`_BLOCK` rows each, shared out
   between the threads of a pool: numpy, Polars and the AES release the GIL), each bucket's segments of the
   runs merged and the bucket done in one go by one thread (:func:`_map_parts`, :func:`_bound_slice`): the
   distinct pairs are the run starts; with SUM/MEAN each pair's Float64 sum of values added in input row
   order (:func:`sequential_segment_sums`) and its clipped, gridded, re-centred contribution
   (:func:`~sparsedp.engines.aggregate_exprs.gridded_array`, the numpy twin of
   :func:`~sparsedp.engines.aggregate_exprs.gridded`); each unit's pairs are one run, so keys per
   unit and the units over ``l0`` are run lengths; distinct units per key is a ``bincount``; only the pairs
   of units over ``l0`` are ranked (fingerprints of those units and of the distinct keys, AES ranks of those
   pairs, :func:`~sparsedp.engines.bounding.keep_smallest` with the canonical key position as tie-break),
   and the per-key counts and grid sums are those of all pairs minus the dropped ones, added up over the
   buckets (integer additions: the split cannot change them). Besides the pair ids themselves, no numpy
   array is as large as the input: on the machines this was measured on, touching fresh memory (page
   faults) cost more than the arithmetic (``docs/engines_speed.md``, sessions 4 and 10).

**Weighted rounds** (the Weighted Gaussian and the adaptive-weighting set unions ``mad``/``mad2r``):
:func:`weighted_pairs` reads the rows once (steps 1–3, :func:`sorted_pairs`) and draws round 1's secret;
:func:`weighted_round` then runs step 4 on the kept sorted pair ids, each kept pair weighted ``W_t`` (``t`` = its
unit's kept pairs) and summed per key — round 1, and each later round with the keys released so far excluded
(a boolean mask over the key ids), before a fresh choice or after round 1's — without reading the input again;
round 1 records the pairs its choice drops, so a later round that keeps that choice (``mad``) ranks nothing.

A pair's Float64 sum is the sequential sum in input row order, a function of the input only (not of threads
or chunking). Polars' group-by sum of the per-key-list path combines per-thread partial sums, so for a pair of
three rows or more the last bit may differ; that moves a contribution by one grid step only when the sum lies
within an ulp of a rounding boundary of the grid (privacy is unaffected: each contribution is still clipped).

The choice is a function of the distinct pairs' values and the secret only (module docstring of
:mod:`sparsedp.engines.bounding`), so the ids — an internal numbering — cannot change it: a heavy unit's
fingerprint is computed from its value (canonical dtype), a key's from its canonicalised values, and ties
break by the canonical key order. ``tests/golden/test_release_tables_golden.py`` compares released tables and
bounded histograms with those of the previous implementation, and ``tests/engines`` with the per-unit oracle.
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
import itertools
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Sequence, cast

import numpy as np

from ..aggregates import Aggregate, Sum
from ..core.key_order import canonical_rows
from .aggregate_exprs import (_sums, grid_column_name, gridded_array, raise_bad_values, value_check_exprs,
                             value_columns)
from .bounding import COUNT, draw_bounding_secret, keep_smallest, key_fingerprints, prf_ranks, unit_fingerprints
from .buffers import fresh_uint64
from .input_checks import check_key_values, check_nan_keys, check_nulls_and_rows
from .raw_counts import RawCounts
from .sorted_runs import Bucket, SortedRuns
from .threads import in_threads, thread_count

if TYPE_CHECKING:  # Polars is imported when the pairs are bounded (``import sparsedp`` stays light)
    import polars as pl

    from ..core.engine import RandomSource


#: unit ids (uint64) → the units' values, a Polars Series (:func:`pack_pairs`, :func:`offset_values`)
UnitValues = Callable[[np.ndarray], "pl.Series"]

__all__ = ["WEIGHT_SUM", "PairContext", "PairCounts", "SortedPairs", "WeightedPairs", "bound_pair_ids",
           "bounded_raw_counts", "bounded_raw_counts_with_sums", "key_context", "key_mask", "pack_pairs",
           "ReadPairs", "RowChecks", "read_pairs", "sorted_pairs", "weighted_pairs", "weighted_round"]

_PAIR = "__sparsedp_p"
#: the key-counts column of :func:`weighted_round`'s per-key weight sums
WEIGHT_SUM = "__sparsedp_wsum"
_ROW = "__sparsedp_i"
_KEY = "__sparsedp_k"
_BLOCK = 1 << 20  # rows per slice of the numpy work (small temporaries, reused memory)


def bits_for(n: int) -> int:
    """Bits to hold the values ``0 … n`` (at least 1)."""
    return max(1, int(n).bit_length())


def pack_pairs(units: pl.Series, kid: pl.Series | np.ndarray, key_bits: int) -> tuple[np.ndarray, UnitValues]:
    """``(p, value_of)``: the pair id ``p = unit id · 2^key_bits + key id`` of every row (a new, writable
    ``uint64`` array; ``unit id · 2^key_bits`` fits in 64 bits), and a function mapping an array of unit ids to
    a Polars Series of those units' values (the column's dtype).

    Integer units whose range fits are offsets from the minimum (no hashing); anything else (strings, dates,
    integers spread too widely…) gets dense ids from one hash aggregation on the units. The ids are computed
    by numpy in place, block by block in threads, reading the columns' chunks where they lie (no copy)."""
    import polars as pl

    dt = units.dtype
    n = units.len()
    lo = 0
    value_of: UnitValues | None = None
    p = fresh_uint64(n)  # ordinary pages: numpy's huge-page advice slows the first write (engines/buffers.py)
    source = _Chunked(p)  # the unit ids are computed in place (dense ids) …
    t = thread_count()
    keys = _Chunked(kid)
    if dt.is_integer() and n:
        native = dt in (pl.Int8, pl.Int16, pl.Int32, pl.Int64, pl.UInt8, pl.UInt16, pl.UInt32, pl.UInt64)
        chunked = _Chunked(units) if native else None
        lo_, hi = (_min_max(chunked, n, t) if chunked is not None
                   else (cast(int, units.min()), cast(int, units.max())))
        if bits_for(hi - lo_) + key_bits <= 64:  # exact: 0 <= unit - lo < 2^bits
            lo, value_of = lo_, offset_values(units.name, lo_, dt)
            source = chunked if chunked is not None else _Chunked(units.cast(pl.Int64))  # … or offsets from lo
    if value_of is None:
        groups = (pl.DataFrame({units.name: units}).lazy().with_row_index(_ROW).group_by(units.name)
                  .agg(pl.col(_ROW)).collect())
        values = groups[units.name]
        if bits_for(groups.height) + key_bits > 64:
            raise ValueError("too many keys and units for 64-bit pair ids")  # > 2^64 pairs: not reachable in memory
        p[groups[_ROW].explode().to_numpy()] = np.repeat(np.arange(groups.height, dtype=np.uint64),
                                                         groups[_ROW].list.len().to_numpy())

        def gathered(i: np.ndarray) -> pl.Series:
            return values.gather(i.astype(np.int64))
        value_of = gathered
    shift, offset = np.uint64(key_bits), np.uint64(lo % (1 << 64))

    def pack_block(pieces: list[tuple[int, int]]) -> None:
        for x, y in pieces:
            out = p[x:y]
            u = source.piece(x, y)
            if u.dtype == np.int64:
                u = u.view(np.uint64)
            elif u.dtype != np.uint64:
                np.copyto(out, u, casting="unsafe")  # smaller integers, sign-extended: mod 2^64 as below
                u = out
            np.subtract(u, offset, out=out)  # mod 2^64: exact, as 0 <= unit - lo < 2^64
            np.left_shift(out, shift, out=out)
            k = keys.piece(x, y)
            np.bitwise_or(out, k.view(k.dtype.str.replace("i", "u")), out=out)  # key ids: non-negative

    in_threads(pack_block, _blocks_of_pieces(n, t, source, keys), t)
    return p, value_of


def _min_max(col: _Chunked, n: int, threads: int) -> tuple[int, int]:
    """The smallest and largest value of an integer column of ``n > 0`` rows, by numpy in threads."""
    def block(pieces: list[tuple[int, int]]) -> list[tuple[int, int]]:
        return [(int(a.min()), int(a.max())) for a in (col.piece(x, y) for x, y in pieces)]

    found = [m for part in in_threads(block, _blocks_of_pieces(n, threads, col), threads) for m in part]
    return min(m[0] for m in found), max(m[1] for m in found)


class _Chunked:
    """A column's Polars chunks as numpy arrays (each without a copy; no nulls) and where each starts."""

    def __init__(self, col: pl.Series | np.ndarray) -> None:
        self.arrays = [col] if isinstance(col, np.ndarray) else [c.to_numpy() for c in col.get_chunks()]
        self.starts = [0, *itertools.accumulate(int(a.size) for a in self.arrays)][:-1]

    def piece(self, x: int, y: int) -> np.ndarray:
        """Rows ``x … y−1``, which lie in one chunk (:func:`_blocks_of_pieces`)."""
        i = bisect.bisect_right(self.starts, x) - 1
        return self.arrays[i][x - self.starts[i]:y - self.starts[i]]


def _blocks_of_pieces(n: int, t: int, *columns: _Chunked) -> list[list[tuple[int, int]]]:
    """Rows ``0 … n−1`` in ``t`` blocks of about equal size, each a list of pieces ``(x, y)`` that lie in one
    chunk of every column (cut wherever a block or a chunk of one of ``columns`` starts)."""
    bounds = [n * i // t for i in range(t + 1)]
    c = sorted({*bounds, *(s for col in columns for s in col.starts if 0 < s < n)})
    blocks: list[list[tuple[int, int]]] = [[] for _ in range(t)]
    for x, y in zip(c[:-1], c[1:]):
        blocks[bisect.bisect_right(bounds, x) - 1].append((x, y))
    return [b for b in blocks if b]


def offset_values(name: str, lo: int, dtype: pl.DataType) -> UnitValues:
    """The ``value_of`` of integer unit ids that are offsets ``unit − lo``: unit ids (uint64) → the units'
    values, a Polars Series ``name`` of ``dtype``."""
    import polars as pl

    def value_of(i: np.ndarray) -> pl.Series:
        v = i + np.uint64(lo) if dtype == pl.UInt64 else i.view(np.int64) + np.int64(lo)
        return pl.Series(name, v).cast(dtype)

    return value_of


def bounded_raw_counts(lf: pl.LazyFrame, unit: str, by: Sequence[str], l0: int | None, rng: RandomSource,
                       aggregates: Sequence[Aggregate] = (), checks: RowChecks | None = None,
                       chunks: int | None = None) -> RawCounts:
    """The bounded counts (and grid sums) of the rows ``lf`` as a
    :class:`~sparsedp.engines.base.RawCounts` with the ℓ0 choice applied (``pairs_dropped_l0`` set): every
    input key in canonical order with its bounded count and (``aggregates``) the Int64 grid sums of its kept
    pairs in columns :func:`~sparsedp.engines.aggregate_exprs.grid_column_name`.

    ``lf``: LazyFrame with the unit, key and value columns (value columns already checked). ``checks``:
    ``None`` (the caller checked), or the :class:`RowChecks` counted on the rows the pass reads, before
    anything else happens. The bounding secret is drawn from ``rng`` after the NaN-key check on every distinct
    key, only when ``l0`` is set, as in :func:`~sparsedp.engines.pair_ids.bounded_raw_counts_with_sums`.
    ``chunks``: the number of slices of whole units the sorted rows are cut into (default: about
    :data:`_BLOCK` rows each); the result does not depend on it (tests vary it).
    """
    return _bounded_counts(sorted_pairs(lf, unit, by, value_columns(aggregates, [unit, *by]), checks),
                           unit, by, l0, rng, aggregates, chunks)


def _bounded_counts(sp: SortedPairs, unit: str, by: Sequence[str], l0: int | None, rng: RandomSource,
                    aggregates: Sequence[Aggregate], chunks: int | None) -> RawCounts:
    """Step 4 of the module docstring on rows read (:func:`sorted_pairs`, with the value columns of
    ``aggregates``): :func:`bounded_raw_counts` after its pass. The caller passes ``sp`` without keeping it, so
    the sorted runs are freed once the buckets are done."""
    by = list(by)
    sums = _sums(aggregates)
    names = [grid_column_name(i) for i in range(len(sums))]
    secret = draw_bounding_secret(rng) if l0 is not None else None
    # 4. numpy on the sorted runs, per bucket of whole units (each unit's pairs are one run), in threads
    ctx = key_context(sp.keys, by, sp.bk, l0, secret, unit, sums, names)
    keys, rows = sp.keys, sp.rows
    res = _map_parts(dataclasses.replace(ctx, value_of=sp.value_of), sp.runs, sp.vals, chunks)
    del sp
    return res.raw_counts(keys, ctx, rows)


@dataclass(frozen=True)
class SortedPairs:
    """The rows of an input read once (steps 1–3 of the module docstring), curator only: ``runs`` their pair ids
    ``unit id · 2^bk + key id`` sorted in runs (read back in buckets of whole units: a unit's rows adjacent,
    repeated pairs adjacent), ``vals`` the value Series in sorted order (SUM/MEAN: one run), ``keys`` the
    distinct keys (row ``i`` is key id ``i``, NaN keys refused), ``value_of`` unit ids → unit values, ``rows``
    the input rows."""

    runs: SortedRuns = field(repr=False)
    vals: dict[str, pl.Series] = field(repr=False)
    keys: pl.DataFrame = field(repr=False)
    bk: int
    value_of: UnitValues = field(repr=False)
    rows: int


@dataclass(frozen=True)
class RowChecks:
    """The input checks of :func:`sorted_pairs`, counted on the rows its one pass has just read (a file is read
    once: a second query for the counts read it again, about a fifth more CPU), before anything else happens:
    first the value columns' counts ``value_exprs`` (aggregations over the value columns:
    :func:`~sparsedp.engines.aggregate_exprs.value_check_exprs`, then
    :func:`~sparsedp.engines.aggregate_exprs.raise_bad_values`), then no rows and no null unit or key
    (:func:`~sparsedp.engines.input_checks.check_nulls_and_rows`)."""

    value_exprs: tuple[pl.Expr, ...] = ()

    def check(self, rows: int, nulls: dict[str, int], values: dict[str, pl.Series]) -> None:
        """Raise on bad values, no rows or nulls: ``rows`` read, ``nulls`` per unit and key column, ``values``
        the value columns' row Series."""
        import polars as pl

        if self.value_exprs:
            raise_bad_values(pl.DataFrame(values).select(self.value_exprs).row(0, named=True))
        check_nulls_and_rows(rows, nulls)


def sorted_pairs(lf: pl.LazyFrame, unit: str, by: Sequence[str], vcols: Sequence[str] = (),
                 checks: RowChecks | None = None) -> SortedPairs:
    """Steps 1–3 of the module docstring on the rows ``lf`` (unit, key and the value columns ``vcols``): the one
    pass over the rows (with ``checks``, as :func:`bounded_raw_counts`), the pair ids, their sort, and the
    NaN-key check on every distinct key. Nothing is drawn: the caller draws the bounding secret after."""
    import polars as pl

    by = list(by)
    vcols = list(vcols)
    # 1. the one pass over the rows, hashing the key once: a dense key id per row and the distinct keys
    schema = lf.collect_schema()
    cats = None
    if len(by) == 1 and schema[by[0]] == pl.String:  # ids from a private Categorical namespace
        cats = pl.Categories.random()
        query = lf.select(pl.col(by[0]).cast(pl.Categorical(cats)).alias(_KEY), unit, *vcols)
    else:  # grouped by key: a row's key id is its group's position
        query = lf.group_by(by).agg(pl.col(unit), *[pl.col(v) for v in vcols])
    g = query.collect()
    kid: pl.Series | np.ndarray
    if cats is not None:
        units = g[unit]
        values = {v: g[v] for v in vcols}
        if checks is not None:  # a null key is a null category
            checks.check(units.len(), {unit: units.null_count(), by[0]: g[_KEY].null_count()}, values)
        kid = g[_KEY].to_physical()  # the same buffer; category i has physical id i
        top = cast("int | None", kid.max())
        keys = _category_strings(cats, by[0], 0 if top is None else top + 1)
        n_ids = keys.height
    else:
        keys = g.select(by)
        n_ids = keys.height
        lengths = g[unit].list.len()  # the rows of each key (a group has at least one)
        units = g[unit].explode()
        values = {v: g[v].explode() for v in vcols}
        if checks is not None:  # the rows of a key with a null in a column are that column's nulls
            nulls = {unit: units.null_count(), **{c: int(lengths.filter(keys[c].is_null()).sum()) for c in by}}
            checks.check(units.len(), nulls, values)
        kid = np.repeat(np.arange(n_ids, dtype=np.uint32 if n_ids < 2**32 else np.uint64), lengths.to_numpy())
    del g
    bk = bits_for(n_ids - 1)
    n_rows = units.len()
    # 2.-3. unit ids in the high bits, key ids in the low bits of one u64 pair id
    p, value_of = pack_pairs(units, kid, bk)
    del units, kid
    runs, vals = _sorted_pairs(p, values)
    del p, values
    check_nan_keys(keys, by)  # every distinct key, before the secret
    return SortedPairs(runs=runs, vals=vals, keys=keys, bk=bk, value_of=value_of, rows=n_rows)


def read_pairs(lf: pl.LazyFrame, unit: str, by: Sequence[str], data: Any,
               aggregates: Sequence[Aggregate] = ()) -> ReadPairs:
    """The rows ``lf`` of the input ``data`` read once for the automatic bound
    (:meth:`~sparsedp.core.engine.Engine.read_unit_key_counts`): the count path's one pass over the unit, key
    and SUM/MEAN value columns of ``aggregates``, pair ids and sort, with every input check of the release
    (:func:`_read_rows`, the NaN-key check, and the key types of
    :func:`~sparsedp.engines.input_checks.check_key_values`, which the release checks on its histogram: here
    before the ledger charge). Nothing is drawn."""
    sp = _read_rows(lf, unit, by, aggregates)
    check_key_values(sp.keys.head(0).to_arrow(), by)  # the types only: NaN keys were refused on every key
    return ReadPairs(sp, data, unit, tuple(by), tuple(value_columns(aggregates, [unit, *by])))


class ReadPairs:
    """An input's rows read once by the automatic bound (:func:`read_pairs`), curator only: the degree histogram
    its choice of ``l0`` needs (:meth:`degrees`), then the release at the chosen ``l0`` from the same sorted pairs
    and values (:meth:`bounded_raw_counts`), so the input is read once, not twice (issue 31). An engine's
    :meth:`~sparsedp.core.engine.Engine.histogram` takes it in place of the input ``data``. One use: the
    release hands the pairs over and forgets them; :meth:`drop` frees them when the release reads ``data``
    instead (a mechanism with its own reading)."""

    __slots__ = ("_pairs", "data", "unit", "by", "value_columns")

    def __init__(self, pairs: SortedPairs, data: Any, unit: str, by: tuple[str, ...],
                 value_columns: tuple[str, ...]) -> None:
        self._pairs: SortedPairs | None = pairs
        self.data, self.unit, self.by, self.value_columns = data, unit, by, value_columns

    def _held(self) -> SortedPairs:
        if self._pairs is None:
            raise RuntimeError("the rows read for the automatic bound were already released from")
        return self._pairs

    def _take(self) -> SortedPairs:
        """The pairs, forgotten here (the caller passes them on without keeping them: freed once bounded)."""
        sp = self._held()
        self._pairs = None
        return sp

    def degrees(self) -> tuple[np.ndarray, np.ndarray]:
        """The numbers of distinct keys a unit holds, ascending (``degrees``), and how many units hold each
        (``units``), both int64: a unit's distinct pairs are one run of the sorted ids, so its degree is that
        run's length. Exact; nothing is drawn. (A hash aggregation of the (unit, key) rows cost several times
        as much: issue 31.)"""
        sp = self._held()

        def unit_degrees(bucket: Bucket) -> np.ndarray:  # as in _bound_slice: a unit's distinct pairs are one run
            return _unit_runs(_distinct_pairs(sp.runs.bucket_values(bucket), False, False)[0], sp.bk)[3]

        total = np.bincount(np.concatenate(in_threads(unit_degrees, _buckets(sp.runs, sp.keys.height, sp.bk),
                                                      thread_count())))
        degrees = np.flatnonzero(total)
        return degrees, total[degrees].astype(np.int64)

    def bounded_raw_counts(self, unit: str, by: Sequence[str], l0: int | None, rng: RandomSource,
                           aggregates: Sequence[Aggregate] = ()) -> RawCounts:
        """:func:`bounded_raw_counts` (with ``aggregates``: :func:`bounded_raw_counts_with_sums`) of the rows
        read, for the same unit, keys and value columns; the bounding secret is drawn from ``rng`` now, as there
        after the pass. Hands the pairs over (one use)."""
        asked = (unit, tuple(by), tuple(value_columns(aggregates, [unit, *by])))
        if asked != (self.unit, self.by, self.value_columns):
            raise ValueError(f"these rows were read for unit {self.unit!r}, keys {list(self.by)} and values "
                             f"{list(self.value_columns)}, not {asked[0]!r}, {list(asked[1])} and {list(asked[2])}")
        return _bounded_counts(self._take(), unit, by, l0, rng, aggregates, None)

    def candidate_counts(self, candidates: Sequence[int], rng: RandomSource,
                         weights: Sequence[Any] | None = None) -> tuple[tuple[np.ndarray, ...], int]:
        """``(counts, units)``: the keys objective's statistic (:func:`sparsedp.auto_keys.candidate_counts`) on
        the rows read: for every candidate ``c``, each key's count (canonical key order) of the pairs kept when
        every unit keeps its ``c`` pairs of smallest keyed rank (:func:`~sparsedp.engines.bounding.prf_ranks`,
        ties by canonical key position), all candidates from one ranking; with ``weights[i]`` (``W_1 … W_c``)
        the kept pairs' sum of ``W_{min(d_u, c)}`` instead (exact integers). Only the units over the smallest
        candidate are ranked. The ranking secret is drawn from ``rng`` now (the rows were checked when read).
        The pairs are kept for the release at the chosen bound."""
        sp = self._held()
        secret = draw_bounding_secret(rng)
        ctx = dataclasses.replace(key_context(sp.keys, self.by, sp.bk, min(candidates), secret, self.unit),
                                  value_of=sp.value_of)
        ws = [None if w is None else np.asarray(w, dtype=np.int64) for w in (weights or [None] * len(candidates))]
        ws = [None if w is not None and bool(np.all(w == 1)) else w for w in ws]

        def bucket_counts(bucket: Bucket) -> tuple[list[np.ndarray], int]:
            return _candidate_slice(ctx, sp.runs.bucket_values(bucket), candidates, ws)

        parts = in_threads(bucket_counts, _buckets(sp.runs, sp.keys.height, sp.bk), thread_count())
        counts = []
        for i in range(len(candidates)):
            by_id = functools.reduce(np.add, (p[0][i] for p in parts), np.zeros(ctx.n_keys, dtype=np.int64))
            canonical = np.empty_like(by_id)
            canonical[ctx.pos] = by_id
            counts.append(canonical)
        return tuple(counts), sum(p[1] for p in parts)

    def drop(self) -> None:
        """Free the sorted pairs (the release reads ``data`` again)."""
        self._pairs = None


def _candidate_slice(ctx: PairContext, srt: np.ndarray, candidates: Sequence[int],
                     weights: Sequence[np.ndarray | None]) -> tuple[list[np.ndarray], int]:
    """:meth:`ReadPairs.candidate_counts` on a bucket of whole units of the sorted pair ids ``srt`` (``ctx.l0``:
    the smallest candidate): per candidate, the per-key-id counts (or weight sums) of the kept pairs, and the
    bucket's number of units. A pair's position in its unit is its place in the unit's order by (keyed rank,
    canonical key position); the units of at most ``ctx.l0`` pairs keep every pair at every candidate."""
    assert ctx.l0 is not None
    pu, pk, starts, deg = _unit_runs(_distinct_pairs(srt, False, False)[0], ctx.bk)
    pos = np.zeros(pk.size, dtype=np.int64)
    heavy = deg > ctx.l0
    if heavy.any():
        hd = deg[heavy]
        hidx, seg, k, rank = _heavy_ranks(ctx, pu, pk, starts[heavy], hd)
        order = _rank_order(seg, rank, ctx.pos[k], int(hd.size))
        within = np.empty(hidx.size, dtype=np.int64)
        within[order] = np.arange(hidx.size, dtype=np.int64) - (np.cumsum(hd) - hd)[seg[order]]
        pos[hidx] = within
    d = np.repeat(deg, deg) if any(w is not None for w in weights) else None
    out = []
    for c, w in zip(candidates, weights):
        kept = pos < c
        if w is None:
            out.append(np.bincount(pk[kept], minlength=ctx.n_keys).astype(np.int64, copy=False))
        else:
            assert d is not None
            out.append(_key_sums(pk[kept], w[np.minimum(d[kept], c) - 1], ctx.n_keys))
    return out, int(starts.size)


@dataclass(frozen=True)
class WeightedPairs:
    """An input's sorted pairs (:class:`SortedPairs`) and the context of its weighted rounds (curator only): the
    Weighted Gaussian's and the adaptive-weighting set union's per-key sums of ``W_t`` (:func:`weighted_round`)
    over the pairs of the engines' one ℓ0 choice keyed by round 1's secret (in ``ctx``), each later round on
    the same pairs without reading the input again. ``first_choice``: the pairs round 1's choice drops, by slice
    (:attr:`PairContext.first_choice`; filled by round 1, read by ``mad``'s later rounds, at most 4 bytes per
    dropped pair)."""

    pairs: SortedPairs
    ctx: PairContext = field(repr=False)
    first_choice: dict[tuple[int, int], np.ndarray] = field(default_factory=dict, repr=False)

    @property
    def secret(self) -> bytes:
        assert self.ctx.secret is not None  # set by weighted_pairs
        return self.ctx.secret


def weighted_pairs(lf: pl.LazyFrame, unit: str, by: Sequence[str], l0: int, weights: Sequence[int],
                   rng: RandomSource, checks: RowChecks | None = None) -> WeightedPairs:
    """The rows ``lf`` read once (:func:`sorted_pairs`, with ``checks``), then round 1's bounding secret drawn
    from ``rng`` (after every check), and the key context with the integer weights ``weights[t − 1] = W_t``."""
    if len(weights) != l0:
        raise ValueError("weights: one integer weight per kept-key count 1..l0")
    by = list(by)
    sp = sorted_pairs(lf, unit, by, (), checks)
    secret = draw_bounding_secret(rng)
    ctx = key_context(sp.keys, by, sp.bk, int(l0), secret, unit)
    ctx = dataclasses.replace(ctx, value_of=sp.value_of, names=(WEIGHT_SUM,),
                              degree_weights=np.asarray([int(w) for w in weights], dtype=np.int64))
    return WeightedPairs(pairs=sp, ctx=ctx)


def weighted_round(wp: WeightedPairs, by: Sequence[str], exclude: Any = None, choose_first: bool = False,
                   secret: bytes | None = None, chunks: int | None = None) -> RawCounts:
    """One weighted round on the pairs ``wp``: a :class:`~sparsedp.engines.base.RawCounts` whose key counts
    (every key, canonical order) hold each key's kept pairs (:data:`~.bounding.COUNT`) and its Int64 weight sum
    ``S_k = Σ W_{t_u}`` over them (:data:`WEIGHT_SUM`), ``t_u`` = the unit's kept pairs.

    No ``exclude``: the ℓ0 choice on all pairs, ``t_u = min(d_u, l0)`` (the Weighted Gaussian, a first round).
    ``exclude`` (``pyarrow.Table`` of the ``by`` columns: keys released by earlier rounds): those keys' pairs
    are dropped, before a fresh choice keyed by ``secret`` among each unit's other keys (``choose_first=False``,
    ``mad2r``) or after round 1's choice (``choose_first=True``, ``mad``: its secret). The same kept pairs and
    sums as :func:`~sparsedp.engines.pairs.round_key_sums` on the distinct pairs (the choice depends on the
    pairs' values and the secret only; ties break by the canonical key order, whose relative order a subset
    keeps). ``chunks`` as :func:`bounded_raw_counts`.

    Round 1 (no ``exclude``, round 1's secret) records the pairs its choice drops in ``wp.first_choice``; a
    ``choose_first`` round with round 1's secret reads them back for every slice of the same bounds instead of
    ranking the pairs again (the choice is a function of the slice's pairs, the secret and the bound: the same
    kept pairs); a fresh choice (``mad2r``) forgets them."""
    ctx = wp.ctx if secret is None else dataclasses.replace(wp.ctx, secret=secret)
    first = secret is None or secret == wp.secret  # round 1's secret: round 1's choice
    released = exclude is not None and bool(exclude.num_rows)
    if not choose_first:
        if not first:
            wp.first_choice.clear()  # a fresh choice (mad2r): round 1's is not read again
        elif not released:
            ctx = dataclasses.replace(ctx, first_choice=wp.first_choice)  # round 1: its choice recorded
    if released or (choose_first and first and wp.first_choice):
        mask = key_mask(wp.pairs.keys, list(by), exclude) if released else np.zeros(ctx.n_keys, dtype=bool)
        ctx = dataclasses.replace(ctx, excluded=mask, choose_first=bool(choose_first),
                                  first_choice=wp.first_choice if choose_first and first else None)
    res = _map_parts(ctx, wp.pairs.runs, {}, chunks)
    return res.raw_counts(wp.pairs.keys, ctx, wp.pairs.rows)


def key_mask(keys: pl.DataFrame, by: list[str], subset: Any) -> np.ndarray:
    """Boolean mask over the key ids of ``keys`` (row ``i`` is key id ``i``): the keys that are in ``subset``
    (``pyarrow.Table`` of the ``by`` columns, cast to ``keys``' dtypes: they come from an earlier release of the
    same input; nulls match nulls)."""
    import polars as pl

    sub = pl.from_arrow(subset.select(by))
    assert isinstance(sub, pl.DataFrame)  # a Table gives a frame
    sub = sub.with_columns([pl.col(c).cast(keys.schema[c]) for c in by])
    ids = keys.with_row_index(_ROW).join(sub, on=by, how="semi", nulls_equal=True)[_ROW].to_numpy()
    mask = np.zeros(keys.height, dtype=bool)
    mask[ids] = True
    return mask


def bounded_raw_counts_with_sums(lf: pl.LazyFrame | pl.DataFrame, unit: str, by: Sequence[str], l0: int | None,
                                 rng: RandomSource, aggregates: Sequence[Aggregate]) -> RawCounts:
    """The bounded counts AND the per-key grid sums of the kept (unit, key) pairs, for every embedded engine.

    ``lf``: Polars LazyFrame of the rows. Order of work (nothing random before every check passed):

    1. checks: no rows, nulls in the unit/key columns (:func:`~sparsedp.engines.input_checks.check_nulls_and_rows`),
       value columns missing, non-numeric, null, NaN or infinite
       (:func:`~sparsedp.engines.aggregate_exprs.check_value_columns`);
    2. the distinct pairs with each Sum column's clipped, gridded, re-centred contribution
       (:func:`~sparsedp.engines.aggregate_exprs.gridded` of the pair's Float64 sum of values, added in input row
       order) and the ONE ℓ0 choice with the bounding secret
       (:func:`~sparsedp.engines.bounding.draw_bounding_secret`), on integer pair ids (:func:`bounded_raw_counts`):
       the same choice and the same per-key values as
       :func:`~sparsedp.engines.aggregate_exprs.per_key_contributions` +
       :func:`~sparsedp.engines.aggregate_exprs.bounded_key_sums` (Spark's path), so each key's grid sum is the
       sum over exactly the pairs the count keeps.

    Returns a :class:`~sparsedp.engines.base.RawCounts` whose ``key_counts`` (Polars, canonical key order,
    ``pairs_dropped_l0`` set) also hold the Int64 grid sums in columns
    :func:`~sparsedp.engines.aggregate_exprs.grid_column_name` ``(i)``, i over
    :func:`sparsedp.aggregates.noise_columns`.
    """
    return _bounded_counts(_read_rows(lf, unit, by, aggregates), unit, by, l0, rng, aggregates, None)


def _read_rows(lf: pl.LazyFrame | pl.DataFrame, unit: str, by: Sequence[str],
               aggregates: Sequence[Aggregate]) -> SortedPairs:
    """:func:`sorted_pairs` of the unit, key and SUM/MEAN value columns of the rows ``lf``, with every input
    check: a value column that is the unit or a key, missing or non-numeric is refused now (schema only); the
    value, row and null counts are counted on the rows the pass reads (a file is read once) and checked before
    anything else: bad values first (naming the column), then no rows / null units or keys."""
    import polars as pl

    by = list(by)
    lf = lf.lazy() if isinstance(lf, pl.DataFrame) else lf
    cols = [unit] + by
    vcols = value_columns(aggregates, cols)
    checks = RowChecks(tuple(value_check_exprs(lf.collect_schema(), aggregates)))
    return sorted_pairs(lf.select(cols + vcols), unit, by, vcols, checks)


def _category_strings(cats: pl.Categories, name: str, n_ids: int) -> pl.DataFrame:
    """The distinct keys of the private Categorical namespace ``cats`` as a one-column frame ``name`` whose row
    ``i`` is the string of physical id ``i`` (``0 … n_ids−1``), one chunk.

    The ids are made Categorical and cast to strings by Polars (``Series.cat.to``: about 25 ms for 8·10^5 keys,
    multi-threaded); where this Polars lacks that API (it is marked unstable), the namespace's strings are read
    one by one in a Python loop (``Categories.to_series``: 0.2 µs per key, holding the GIL). An id reserved but
    never given a string (which no row holds) is null either way."""
    import polars as pl

    ids = pl.int_range(0, n_ids, eager=True).cast(cats.physical()).alias(name)
    strings: pl.Series
    try:
        strings = ids.cat.to(pl.Categorical(cats), strict=False).cast(pl.String)
    except AttributeError:
        strings = cats.to_series().alias(name)
    return strings.to_frame()


def key_context(keys: pl.DataFrame, by: Sequence[str], bk: int, l0: int | None, secret: bytes | None, unit: str,
                sums: Sequence[Sum] = (), names: Sequence[str] = ()) -> PairContext:
    """The :class:`PairContext` of the distinct keys ``keys`` (Polars DataFrame, columns ``by``; row ``i`` is key
    id ``i``): each key id's canonical position (:func:`~sparsedp.core.key_order.canonical_order`) and, when
    ``l0`` is set, its fingerprint ``h_k``; ``bk`` key bits, the bound and secret, the unit's name, the
    SUM/MEAN aggregates and their grid column names."""
    by = list(by)
    n_keys = keys.height
    order = canonical_rows(keys, by)
    pos = np.empty(n_keys, dtype=np.int64)
    pos[order] = np.arange(n_keys, dtype=np.int64)
    return PairContext(bk=bk, n_keys=n_keys, l0=l0, secret=secret, hk=key_fingerprints(keys, by) if l0 is not None
                       else None, pos=pos, unit=unit, sums=tuple(sums), names=tuple(names))


def bound_pair_ids(ctx: PairContext, p: np.ndarray | pl.Series, value_of: UnitValues,
                   values: dict[str, pl.Series] | None = None) -> PairCounts:
    """Steps 3–4 of the module docstring on the pair ids ``p`` of rows or pairs computed elsewhere (the DuckDB
    engine: its rows, or its distinct pairs, or one batch of their units): sorted by Polars, then the slices
    of whole units in threads. Each unit must have all its rows in this call (the ℓ0 choice is per unit).

    Args:
        ctx: key bits, bound, secret, key fingerprints and canonical positions by key id, the SUM/MEAN
            aggregates and grid column names; ``distinct``: the ids are already distinct (no de-duplication);
            ``given``: ``values`` are already each pair's Int64 contribution, by grid column name.
        p: the pair ids ``unit id · 2^ctx.bk + key id`` (``uint64``: :func:`pack_pairs`' array, which is
            sorted in place, or a Polars UInt64 Series, which is not changed).
        value_of: unit ids → unit values (:func:`pack_pairs`, :func:`offset_values`).
        values: with SUM/MEAN, Polars Series aligned with ``p``, each named by its key here: the rows' values
            by value column name, or (``ctx.given``) the pairs' contributions by grid column name.
    Returns:
        per key id: distinct units and dropped pairs (and kept contribution sums); units, pairs, units over l0.
    """
    if not isinstance(p, np.ndarray):
        a = p.to_numpy()  # writable when Polars copied its chunks into a new buffer for it
        p = a if a.flags.writeable else a.copy()
    runs, vals = _sorted_pairs(p, values or {})
    return _map_parts(dataclasses.replace(ctx, value_of=value_of), runs, vals, None)


def _sorted_pairs(p: np.ndarray, values: dict[str, pl.Series]) -> tuple[SortedRuns, dict[str, pl.Series]]:
    """``(runs, vals)``: the pair ids ``p`` sorted. Count only: ``p`` sorted in place in one run per thread
    (:meth:`~sparsedp.engines.sorted_runs.SortedRuns.sort_in_place`; the runs are merged bucket by bucket
    in :func:`_map_parts`). With values: the rows sorted by pair id by Polars (one run), stable, so a pair's
    rows stay in input order, and the value Series in that order."""
    import polars as pl

    if not values:
        return SortedRuns.sort_in_place(p, thread_count()), {}
    rows = pl.DataFrame([pl.Series(_PAIR, p), *values.values()]).lazy().sort(_PAIR, maintain_order=True).collect()
    return SortedRuns((rows[_PAIR].to_numpy(),)), {v: rows[v] for v in values}


@dataclass(frozen=True)
class PairContext:
    """What every slice of the pairs needs: the key bits, the bound, the secret, the key fingerprints ``hk``
    and canonical positions ``pos`` (both indexed by key id), ``value_of`` (unit ids → unit values: set by
    :func:`pack_pairs`), and the Sum/Mean aggregates with their grid column names."""

    bk: int
    n_keys: int
    l0: int | None
    secret: bytes | None
    hk: np.ndarray | None
    pos: np.ndarray
    unit: str
    value_of: UnitValues | None = None
    sums: tuple[Sum, ...] = ()
    names: tuple[str, ...] = ()
    #: the value Series are already each distinct pair's Int64 contribution, by grid column name (the DuckDB
    #: engine's :func:`~sparsedp.engines.duckdb_engine.contribution_sql`), not rows' raw values
    given: bool = False
    #: the pair ids are distinct (no run of repeated ids to collapse)
    distinct: bool = False
    #: ``W_1 … W_l0``: the last of ``names`` (:data:`WEIGHT_SUM`) is each key's sum of ``W_{min(d_u, l0)}`` over
    #: its kept pairs (:func:`weighted_round`; ``W_t``, ``t`` = the unit's kept pairs, when keys are excluded)
    degree_weights: np.ndarray | None = None
    #: per key id: released by an earlier round (:func:`weighted_round`): its pairs are dropped, before the ℓ0
    #: choice (a fresh choice among the unit's other keys) or, ``choose_first``, after it (round 1's choice)
    excluded: np.ndarray | None = None
    choose_first: bool = False
    #: round 1's ℓ0 choice by slice ``(a, b)`` of the sorted pair ids: the positions, among the slice's distinct
    #: pairs, of the pairs it drops (:class:`WeightedPairs`' ``first_choice``). Round 1 of :func:`weighted_round`
    #: fills it; ``mad``'s later rounds (``choose_first``, round 1's secret) read a slice's entry instead of
    #: ranking its pairs again (the same pairs, secret and bound: the same choice), and rank a slice that has none
    first_choice: dict[tuple[int, int], np.ndarray] | None = None


@dataclass
class PairCounts:
    """Per-key counts (``upk``: distinct units per key, ``dropped``: pairs the bound removed), per-key grid sums
    of the kept pairs, and the numbers of units, distinct pairs and units over ``l0`` of some slices."""

    upk: np.ndarray
    dropped: np.ndarray
    totals: list[np.ndarray]
    units: int
    pairs: int
    heavy: int

    def raw_counts(self, keys: pl.DataFrame, ctx: PairContext, rows_in: int) -> RawCounts:
        """These counts as the engines' :class:`~sparsedp.engines.base.RawCounts`: the keys ``keys`` (row ``i``
        is key id ``i``) in canonical order (``ctx.pos``) with their bounded counts and Int64 grid sums."""
        import polars as pl

        order = np.empty_like(ctx.pos)
        order[ctx.pos] = np.arange(ctx.n_keys, dtype=order.dtype)
        kc = (keys[order] if ctx.n_keys else keys).with_columns(
            pl.Series(COUNT, (self.upk - self.dropped)[order], dtype=pl.Int64),
            *[pl.Series(n, t[order], dtype=pl.Int64) for n, t in zip(ctx.names, self.totals)])
        return RawCounts(rows_in=rows_in, units_in=self.units, pairs_in=self.pairs,
                         units_over_l0=self.heavy if ctx.l0 is not None else 0, key_counts=kc, heavy_pairs=None,
                         pairs_dropped_l0=int(self.dropped.sum()))

    def add(self, o: "PairCounts") -> "PairCounts":
        """Add ``o`` in place (integer additions: exact, the order of the slices does not matter)."""
        self.upk += o.upk
        self.dropped += o.dropped
        for t, u in zip(self.totals, o.totals):
            t += u
        self.units, self.pairs, self.heavy = self.units + o.units, self.pairs + o.pairs, self.heavy + o.heavy
        return self


def _map_parts(ctx: PairContext, runs: SortedRuns, vals: dict[str, pl.Series], chunks: int | None) -> PairCounts:
    """:func:`_bound_slice` on buckets of whole units of the sorted runs (about :func:`_block_size` rows each,
    or ``chunks`` buckets: :meth:`~sparsedp.engines.sorted_runs.SortedRuns.buckets`), taken one after the
    other by the threads of a pool (numpy's ufuncs, sorts and gathers on large buffers, Polars and the AES
    release the GIL), each thread merging its bucket's segments of the runs and bounding it, and adding up
    its buckets' results. Every bucket is exact on its own units and the results are integers, so the sum
    does not depend on the split. Buckets keep the temporaries small: on the machine this was measured on,
    fresh memory (first-touch page faults) cost more than the arithmetic on it. ``vals`` (SUM/MEAN): the
    rows' value Series in the order of a single run."""
    assert not vals or len(runs.runs) == 1
    buckets = _buckets(runs, ctx.n_keys, ctx.bk, chunks)
    if not buckets:
        z = np.zeros(ctx.n_keys, dtype=np.int64)
        return PairCounts(upk=z, dropped=z.copy(), totals=[z.copy() for _ in ctx.names], units=0, pairs=0, heavy=0)
    queue = iter(buckets)
    lock = threading.Lock()

    def run(_: int) -> PairCounts | None:  # each thread takes the next bucket until none is left
        acc = None
        while True:
            with lock:
                bucket = next(queue, None)
            if bucket is None:
                return acc
            a, b = bucket.start, bucket.stop
            part = _bound_slice(ctx, runs.bucket_values(bucket), {v: s.slice(a, b - a) for v, s in vals.items()},
                                (a, b))
            acc = part if acc is None else acc.add(part)

    parts = [q for q in in_threads(run, list(range(min(thread_count(), len(buckets))))) if q is not None]
    return functools.reduce(PairCounts.add, parts[1:], parts[0])


def _bound_slice(ctx: PairContext, srt: np.ndarray, vals: dict[str, pl.Series],
                 span: tuple[int, int] = (0, -1)) -> PairCounts:
    """The ℓ0 choice on a slice of whole units of the sorted pair ids ``srt`` (repeated pairs adjacent; with
    sums, ``vals``: the rows' value Series in the same order). The distinct pairs are the run starts; each
    pair's Float64 sums of values in row order (:func:`sequential_segment_sums`) become its Int64 grid
    contributions (:func:`~sparsedp.engines.aggregate_exprs.gridded_array`); each unit's pairs are one run, so
    keys per unit are run lengths; distinct units per key is a ``bincount``; only the pairs of units over
    ``l0`` are ranked: fingerprints of those units, AES ranks (:func:`~sparsedp.engines.bounding.prf_ranks`)
    and :func:`~sparsedp.engines.bounding.keep_smallest` with the canonical key position as tie-break.

    ``ctx.excluded`` (a later weighted round, :func:`weighted_round`): the excluded keys' pairs are dropped
    first (a fresh choice among the unit's other keys), or, ``ctx.choose_first``, after the choice
    (:func:`_kept_weight_sums`). ``span``: the slice's bounds ``(a, b)`` in the sorted pair ids, the key of
    ``ctx.first_choice`` (round 1 records the pairs its choice drops there; ``choose_first`` reads them back)."""
    n_keys = ctx.n_keys
    pid, first = _distinct_pairs(srt, ctx.distinct, bool(ctx.given or ctx.sums))
    low = np.uint64((1 << ctx.bk) - 1)
    late = ctx.excluded is not None and ctx.choose_first  # mad: choose on all pairs, drop the excluded after
    if ctx.excluded is not None and not late:  # mad2r: the excluded keys' pairs dropped before the choice
        assert not ctx.sums and not ctx.given  # weighted rounds only: no per-pair values to keep aligned
        pid = pid[~ctx.excluded[np.bitwise_and(pid, low).view(np.int64)]]
    contrib = []
    if ctx.given:  # each pair's contribution, already gridded
        contrib = [c if first is None else c[first] for c in (vals[n].to_numpy() for n in ctx.names)]
    elif ctx.sums:
        assert first is not None
        pair = _run_numbers(first, srt.size)
        pair_sums = {v: sequential_segment_sums(pair, s, first.size) for v, s in vals.items()}
        contrib = [gridded_array(pair_sums[a.column], a) for a in ctx.sums]
        del pair, pair_sums
    pu, pk, starts, deg = _unit_runs(pid, ctx.bk)
    pairs = int(pk.size)
    heavy_n, gone = 0, None
    recorded = ctx.first_choice.get(span) if late and ctx.first_choice is not None else None
    if ctx.l0 is not None:
        heavy = deg > ctx.l0
        hs = starts[heavy]
        heavy_n = int(hs.size)
        if recorded is not None:  # mad's later round: round 1's choice on these very pairs, not ranked again
            gone = recorded
        elif heavy_n:
            hidx, seg, k, rank = _heavy_ranks(ctx, pu, pk, hs, deg[heavy])
            keep = keep_smallest(seg, rank, ctx.pos[k], ctx.l0, heavy_n)
            gone = hidx[~keep]  # the dropped pairs' positions in the slice
        if ctx.first_choice is not None and ctx.excluded is None:  # round 1: recorded for mad's later rounds
            small = np.int32 if pairs < 2**31 else np.int64  # at most 4 bytes per dropped pair
            ctx.first_choice[span] = np.empty(0, dtype=small) if gone is None else gone.astype(small)
    if late:
        upk, wsum = _kept_weight_sums(ctx, pk, starts, deg, gone)
        return PairCounts(upk=upk, dropped=np.zeros(n_keys, dtype=np.int64), totals=[wsum], units=int(starts.size),
                          pairs=pairs, heavy=heavy_n)
    upk = np.bincount(pk, minlength=n_keys).astype(np.int64, copy=False)
    dropped = np.zeros(n_keys, dtype=np.int64)
    totals = [_key_sums(pk, c, n_keys) for c in contrib]
    if ctx.degree_weights is not None:  # W_{min(d_u, l0)} on each of the unit's pairs (d_u = its run length)
        assert ctx.l0 is not None
        w = np.repeat(ctx.degree_weights[np.minimum(deg, ctx.l0) - 1], deg)
        contrib.append(w)
        totals.append(_weight_sums(pk, w, n_keys))
    if gone is not None:
        dropped = np.bincount(pk[gone], minlength=n_keys).astype(np.int64, copy=False)
        for t, c in zip(totals, contrib):
            t -= _key_sums(pk[gone], c[gone], n_keys)
    return PairCounts(upk=upk, dropped=dropped, totals=totals, units=int(starts.size), pairs=pairs, heavy=heavy_n)


def _kept_weight_sums(ctx: PairContext, pk: np.ndarray, starts: np.ndarray, deg: np.ndarray,
                      gone: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """``mad``'s later round on a slice (:func:`_bound_slice` with ``ctx.choose_first``): the pairs round 1's
    choice keeps (all but ``gone``) whose key is not excluded; each gives ``W_t``, ``t`` = its unit's such pairs
    (``t <= min(d_u, l0)``). Returns each key's kept pairs and Int64 weight sum."""
    assert ctx.excluded is not None and ctx.degree_weights is not None and not ctx.sums
    n_keys = ctx.n_keys
    kept = ~ctx.excluded[pk]
    if gone is not None:
        kept[gone] = False
    if not kept.any():
        z = np.zeros(n_keys, dtype=np.int64)
        return z, z.copy()
    t = np.add.reduceat(kept.view(np.uint8), starts, dtype=np.int64)  # each unit's kept pairs (starts non-empty)
    w = np.repeat(ctx.degree_weights[np.maximum(t, 1) - 1], deg)[kept]  # a unit with t = 0 has no kept pair
    k = pk[kept]
    return np.bincount(k, minlength=n_keys).astype(np.int64, copy=False), _weight_sums(k, w, n_keys)


def _buckets(runs: SortedRuns, n_keys: int, bk: int, chunks: int | None = None) -> list[Bucket]:
    """The buckets of whole units the sorted runs are read back in: ``chunks`` of them, or (default) about
    :func:`_block_size` ids each."""
    return runs.buckets(chunks if chunks is not None else -(-runs.size // _block_size(n_keys)), bk)


def _block_size(n_keys: int) -> int:
    """Rows per slice of :func:`_map_parts`: :data:`_BLOCK`, or more with many keys (each slice adds a
    ``bincount`` of ``n_keys`` entries)."""
    return max(_BLOCK, 2 * n_keys)


def _heavy_ranks(ctx: PairContext, pu: np.ndarray, pk: np.ndarray, starts: np.ndarray,
                 lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(index, unit, key, rank)`` of the pairs of the units whose runs of distinct pairs start at ``starts``
    with ``lengths`` (``pu``/``pk``: every distinct pair's unit and key id): each pair's position among the
    distinct pairs, its unit's number among those units, its key id, and its keyed rank
    (:func:`~sparsedp.engines.bounding.prf_ranks` of the unit's and the key's fingerprints under the release's
    secret): the one ranking the ℓ0 choice (:func:`_bound_slice`) and the keys objective
    (:func:`_candidate_slice`) order a unit's pairs by."""
    if ctx.secret is None or ctx.hk is None:
        raise ValueError("bounding needs the per-release secret")
    assert ctx.value_of is not None  # set by bound_pair_ids, bounded_raw_counts and candidate_counts
    index, unit = _run_index(starts, lengths)
    key = pk[index]
    return index, unit, key, prf_ranks(unit_fingerprints(ctx.value_of(pu[starts])), ctx.hk, ctx.secret, unit, key)


def _unit_runs(pid: np.ndarray, bk: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(unit, key, starts, degrees)`` of sorted distinct pair ids ``pid`` (``bk`` key bits): each pair's unit
    id and key id (int64), and, each unit's pairs being one run, where each unit's run starts and its length
    (the unit's number of distinct keys)."""
    pu = pid >> np.uint64(bk)
    pk = np.bitwise_and(pid, np.uint64((1 << bk) - 1)).view(np.int64)
    starts = _run_starts(pu)
    return pu, pk, starts, np.diff(starts, append=pk.size)


def _rank_order(group: np.ndarray, rank: np.ndarray, tiebreak: np.ndarray, n_groups: int) -> np.ndarray:
    """``np.lexsort((tiebreak, rank, group))`` for ``group`` non-decreasing (``0 … n_groups−1``, as
    :func:`_run_index` numbers runs) and ``rank`` uint64, by one sort of packed words ``(group, the rank's high
    bits, the element's index)``: where two elements of a group tie on those rank bits, that group alone is
    ordered again by the exact ``lexsort`` (with 64-bit keyed ranks a tie is rare). A ``lexsort`` of three keys
    took most of :meth:`ReadPairs.candidate_counts`' CPU."""
    n = group.size
    gb, ib = bits_for(n_groups - 1), bits_for(n - 1)
    rb = 64 - gb - ib
    if n == 0 or rb < 16:
        return np.lexsort((tiebreak, rank, group))
    words = group.astype(np.uint64) << np.uint64(64 - gb)
    words |= (rank >> np.uint64(64 - rb)) << np.uint64(ib)
    words |= np.arange(n, dtype=np.uint64)
    words.sort()
    order = (words & np.uint64((1 << ib) - 1)).astype(np.int64)
    high = words >> np.uint64(ib)
    del words
    tied = np.flatnonzero(high[1:] == high[:-1])
    if tied.size:  # the groups holding a tie, each ordered exactly (a group's elements keep their span)
        redo = np.isin(group, np.unique(group[order[tied]]))
        idx = np.flatnonzero(redo)
        order[np.flatnonzero(redo[order])] = idx[np.lexsort((tiebreak[idx], rank[idx], group[idx]))]
    return order


def _run_index(starts: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(index, run)``: the indices ``starts[i] … starts[i] + lengths[i] − 1`` of every run, concatenated, and
    the run number ``i`` of each (``lengths`` >= 1), by cumulative sums (no ``np.repeat``)."""
    total = int(lengths.sum())
    ends = np.cumsum(lengths)[:-1]  # where runs 1, 2, … begin in the output
    step = np.ones(total, dtype=np.int64)
    step[0] = starts[0]
    step[ends] = starts[1:] - (starts[:-1] + lengths[:-1]) + 1
    index = np.cumsum(step)
    run = np.zeros(total, dtype=np.int64)
    run[ends] = 1
    return index, np.cumsum(run)


def _key_sums(key: np.ndarray, value: np.ndarray, n_keys: int) -> np.ndarray:
    """Exact Int64 per-key sums of ``value`` (``np.add.at``: integer addition, no float rounding)."""
    out = np.zeros(n_keys, dtype=np.int64)
    np.add.at(out, key, value.astype(np.int64, copy=False))
    return out


def _weight_sums(key: np.ndarray, weight: np.ndarray, n_keys: int) -> np.ndarray:
    """Int64 per-key sums of the integer weights ``W_t`` by a float64 ``bincount`` (much faster than
    :func:`_key_sums`' ``np.add.at``): every partial sum is an integer below 2^53, so it is exact."""
    return np.rint(np.bincount(key, weights=weight, minlength=n_keys)).astype(np.int64)


def _distinct_pairs(srt: np.ndarray, distinct: bool, positions: bool) -> tuple[np.ndarray, np.ndarray | None]:
    """The distinct pair ids of the sorted ``srt`` (``srt`` itself when they are already distinct) and, with
    ``positions`` (to align per-row values), where each starts in ``srt`` (else ``None``)."""
    if distinct:
        return srt, None
    new_pair = _run_start_mask(srt)
    return srt[new_pair], (np.flatnonzero(new_pair) if positions else None)


def _run_start_mask(sorted_ids: np.ndarray) -> np.ndarray:
    """Whether each element of a sorted array starts a run of equal values (bool)."""
    first = np.empty(sorted_ids.size, dtype=bool)
    first[:1] = True
    np.not_equal(sorted_ids[1:], sorted_ids[:-1], out=first[1:])
    return first


def _run_starts(sorted_ids: np.ndarray) -> np.ndarray:
    """Start index of each run of equal values in a sorted array (int64)."""
    return np.flatnonzero(_run_start_mask(sorted_ids))


def _run_numbers(starts: np.ndarray, n: int) -> np.ndarray:
    """The run number ``0 … len(starts) − 1`` of each of ``n`` positions, given the runs' start indices
    (``starts[0] == 0``, increasing), as ``intp`` (what ``np.bincount`` takes without a copy)."""
    pair = np.zeros(n, dtype=np.intp)
    pair[starts[1:]] = 1
    return np.cumsum(pair, out=pair)


def sequential_segment_sums(pair: np.ndarray, values: pl.Series, n_pairs: int) -> np.ndarray:
    """Each pair's Float64 sum of ``values`` (a Series of the rows, each pair's rows in input row order),
    its values added one by one in that order (``pair``: each row's pair ``0 … n_pairs − 1``, intp).

    ``np.bincount`` with weights adds ``out[pair[i]] += values[i]`` for ``i = 0, 1, …`` into Float64 zeros: the
    sequential sum ``((0 + x_0) + x_1) + …`` of each pair, a function of the values and their order only (not
    of threads or chunking; not numpy's pairwise summation). It equals ``(x_0 + x_1) + …`` bit for bit, except
    that a sum of zeros is +0 where that one may be −0, which grids alike
    (:func:`~sparsedp.engines.aggregate_exprs.gridded_array`)."""
    import polars as pl

    return np.bincount(pair, weights=values.cast(pl.Float64).to_numpy(), minlength=n_pairs)
