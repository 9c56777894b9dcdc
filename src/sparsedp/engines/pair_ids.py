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
3. **pair ids** ``p = unit id · 2^b + key id`` (one ``u64`` per row). Count only: ``Series.sort`` and a run
   mask give the distinct pairs. With SUM/MEAN: the rows sorted by ``p`` (stable), each pair's Float64 sum
   of values added in input row order (:func:`sequential_segment_sums`), then the clipped, gridded,
   re-centred contribution (:func:`~sparsedp.engines.aggregate_exprs.gridded`, the expressions of
   :func:`~sparsedp.engines.aggregate_exprs.contribution_exprs`);
4. **numpy on the distinct pairs**, sorted by (unit id, key id): each unit's pairs are one run, so keys per
   unit, the units over ``l0`` and their index are run lengths; distinct units per key is a ``bincount``;
   only the pairs of units over ``l0`` are ranked (fingerprints of the distinct heavy units and of the
   distinct keys, AES ranks of those pairs, :func:`~sparsedp.engines.bounding.keep_smallest` with the
   canonical key position as tie-break), and the per-key counts and grid sums are those of all pairs minus
   the dropped ones.

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

from typing import Any, Sequence

import numpy as np

from .bounding import (COUNT, SEED_UNIT, canonical_expr, canonical_exprs, canonical_order, draw_bounding_secret,
                       fingerprint_exprs, keep_smallest, prf_ranks)

__all__ = ["bounded_raw_counts"]

_PAIR = "__sparsedp_p"
_ROW = "__sparsedp_i"
_KEY = "__sparsedp_k"


def _bits(n: int) -> int:
    """Bits to hold the values ``0 … n`` (at least 1)."""
    return max(1, int(n).bit_length())


def _unit_ids(units: Any, key_bits: int) -> tuple[np.ndarray, int, Any]:
    """``(ids, bits, value_of)``: a ``u64`` id per row's unit below ``2^bits`` (``bits + key_bits <= 64``),
    and a function mapping an array of ids to a Polars Series of those units' values (the column's dtype).

    Integer units whose range fits are offsets from the minimum (no hashing); anything else (strings, dates,
    integers spread too widely…) gets dense ids from one hash aggregation on the units."""
    import polars as pl

    dt = units.dtype
    n = units.len()
    if dt.is_integer() and n:
        lo, hi = units.min(), units.max()
        bits = _bits(int(hi) - int(lo))
        if bits + key_bits <= 64:
            a = units.to_numpy()
            if a.dtype == np.uint64:
                ids = a - np.uint64(lo)
            else:  # exact: 0 <= a - lo < 2^bits
                ids = (a.astype(np.int64, copy=False) - np.int64(lo)).view(np.uint64)

            def value_of(i: np.ndarray) -> Any:
                v = i + np.uint64(lo) if dt == pl.UInt64 else i.view(np.int64) + np.int64(lo)
                return pl.Series(units.name, v).cast(dt)

            return ids, bits, value_of
    groups = (pl.DataFrame({units.name: units}).lazy().with_row_index(_ROW).group_by(units.name)
              .agg(pl.col(_ROW)).collect())
    values = groups[units.name]
    ids = np.empty(n, dtype=np.uint64)
    ids[groups[_ROW].explode().to_numpy()] = np.repeat(np.arange(groups.height, dtype=np.uint64),
                                                        groups[_ROW].list.len().to_numpy())
    if _bits(groups.height) + key_bits > 64:
        raise ValueError("too many keys and units for 64-bit pair ids")  # > 2^64 pairs: not reachable in memory
    return ids, _bits(groups.height), lambda i: values.gather(i.astype(np.int64))


def bounded_raw_counts(lf: Any, unit: str, by: Sequence[str], l0: int | None, rng: Any,
                       aggregates: Sequence[Any] = (), checks: Any = None) -> Any:
    """The bounded counts (and grid sums) of the rows ``lf`` as a
    :class:`~sparsedp.engines.base.RawCounts` with the ℓ0 choice applied (``pairs_dropped_l0`` set): every
    input key in canonical order with its bounded count and (``aggregates``) the Int64 grid sums of its kept
    pairs in columns :func:`~sparsedp.engines.aggregate_exprs.grid_column_name`.

    ``lf``: LazyFrame with the unit, key and value columns (value columns already checked). ``checks``:
    ``None``, or ``(queries, callback)``: LazyFrames collected in the same ``collect_all`` as the pass over the
    rows (e.g. a file's row and null counts, so it is read once), whose results ``callback`` checks before
    anything else happens. The bounding secret is drawn from ``rng`` after the NaN-key check on every distinct
    key, only when ``l0`` is set, as in :func:`~sparsedp.engines.aggregate_exprs.bounded_raw_counts_with_sums`.
    """
    import polars as pl

    from .aggregate_exprs import _sums, gridded, grid_column_name
    from .base import RawCounts, check_nan_keys

    by = list(by)
    sums = _sums(aggregates)
    vcols = list(dict.fromkeys(a.column for a in sums))
    names = [grid_column_name(i) for i in range(len(sums))]
    # 1. the one pass over the rows, hashing the key once: a dense key id per row and the distinct keys
    schema = lf.collect_schema()
    cats = None
    if len(by) == 1 and schema[by[0]] == pl.String:  # ids from a private Categorical namespace
        cats = pl.Categories.random()
        query = lf.select(pl.col(by[0]).cast(pl.Categorical(cats)).to_physical().alias(_KEY), unit, *vcols)
    else:  # grouped by key: a row's key id is its group's position
        query = lf.group_by(by).agg(pl.col(unit), *[pl.col(v) for v in vcols])
    if checks is not None:
        queries, on_results = checks
        out = pl.collect_all([query, *queries])
        g = out[0]
        on_results(out[1:])
    else:
        g = query.collect()
    if cats is not None:
        keys = cats.to_series().alias(by[0]).to_frame()  # category i has physical id i
        kid = g[_KEY].to_numpy().astype(np.uint64)
        units = g[unit]
        values = {v: g[v] for v in vcols}
    else:
        keys = g.select(by)
        kid = np.repeat(np.arange(keys.height, dtype=np.uint64), g[unit].list.len().to_numpy())
        units = g[unit].explode()
        values = {v: g[v].explode() for v in vcols}
    del g
    check_nan_keys(keys, by)  # every distinct key, before the secret
    secret = draw_bounding_secret(rng) if l0 is not None else None
    n_keys = keys.height
    bk = _bits(n_keys - 1)
    n_rows = units.len()
    # 2.-3. unit ids in the high bits, key ids in the low bits of one u64 pair id
    p, bu, value_of = _unit_ids(units, bk)
    del units
    p = p << np.uint64(bk)  # a new array: the unit column's buffer is not modified
    p |= kid
    del kid
    if sums:  # rows sorted by pair id (stable), each pair's values summed in row order; the contributions
        rows = pl.DataFrame({_PAIR: p, **values}).lazy().sort(_PAIR, maintain_order=True).collect()
        srt = rows[_PAIR].to_numpy()
        starts = _run_starts(srt)
        pid = srt[starts]
        raw = {v: f"__sparsedp_s{j}" for j, v in enumerate(vcols)}
        totals_per_pair = pl.DataFrame({raw[v]: _pair_sums(rows[v], starts) for v in vcols})
        del rows, srt
        contrib = [c.to_numpy() for c in totals_per_pair.select(
            [gridded(pl.col(raw[a.column]), a).alias(n) for a, n in zip(sums, names)]).get_columns()]
    else:  # the distinct pairs, sorted
        srt = pl.Series(_PAIR, p).sort().to_numpy()
        pid = srt[_run_starts(srt)]
        del srt
        contrib = []
    del p, values
    # 4. numpy on the distinct pairs, sorted by (unit id, key id): each unit's pairs are one run
    pk = (pid & np.uint64((1 << bk) - 1)).astype(np.int64)
    pu = pid >> np.uint64(bk)
    del pid
    pairs_in = int(pk.size)
    starts = _run_starts(pu)
    deg = np.diff(starts, append=pairs_in)
    units_in = int(starts.size)
    upk = np.bincount(pk, minlength=n_keys).astype(np.int64)
    dropped = np.zeros(n_keys, dtype=np.int64)
    totals = [_key_sums(pk, c, n_keys) for c in contrib]
    heavy_n = 0
    order = keys.with_row_index(_ROW).sort(canonical_order(keys.schema, by))[_ROW].to_numpy()
    if l0 is not None:
        heavy = deg > l0
        heavy_n = int(heavy.sum())
        if heavy_n:
            if secret is None:
                raise ValueError("bounding needs the per-release secret")
            hidx = np.flatnonzero(np.repeat(heavy, deg))  # the heavy units' pairs (each unit's pairs in a run)
            seg = np.repeat(np.arange(heavy_n, dtype=np.int64), deg[heavy])  # heavy unit index of each
            hvals = value_of(pu[starts[heavy]])
            hu = pl.DataFrame({unit: hvals}).select(canonical_expr(unit, hvals.dtype).hash(SEED_UNIT))[unit]
            hk = keys.select(canonical_exprs(keys.schema, by)).select(fingerprint_exprs(unit, by)[1])["__hk"]
            pos = np.empty(n_keys, dtype=np.int64)
            pos[order] = np.arange(n_keys, dtype=np.int64)
            k = pk[hidx]
            rank = prf_ranks(hu.to_numpy(), hk.to_numpy(), secret, seg, k)
            keep = keep_smallest(seg, rank, pos[k], l0, heavy_n)
            gone = hidx[~keep]
            dropped = np.bincount(pk[gone], minlength=n_keys).astype(np.int64)
            for t, c in zip(totals, contrib):
                t -= _key_sums(pk[gone], c[gone], n_keys)
    kc = keys[order] if n_keys else keys
    kc = kc.with_columns(pl.Series(COUNT, (upk - dropped)[order], dtype=pl.Int64),
                         *[pl.Series(n, t[order], dtype=pl.Int64) for n, t in zip(names, totals)])
    return RawCounts(rows_in=n_rows, units_in=units_in, pairs_in=pairs_in,
                     units_over_l0=heavy_n if l0 is not None else 0, key_counts=kc, heavy_pairs=None,
                     pairs_dropped_l0=int(dropped.sum()))


def _key_sums(key: np.ndarray, value: np.ndarray, n_keys: int) -> np.ndarray:
    """Exact Int64 per-key sums of ``value`` (``np.add.at``: integer addition, no float rounding)."""
    out = np.zeros(n_keys, dtype=np.int64)
    np.add.at(out, key, value.astype(np.int64, copy=False))
    return out


def _pair_sums(values: Any, starts: np.ndarray) -> np.ndarray:
    """Each pair's Float64 sum of ``values`` (rows sorted by pair, in input order within a pair; ``starts``:
    each pair's first row): :func:`sequential_segment_sums`, or for integer columns whose every partial sum
    is an exactly representable integer (``max |v| · rows < 2^53``) the same sums by ``np.add.reduceat``,
    since exact sums do not depend on the order of the additions."""
    import polars as pl

    if values.dtype.is_integer() and values.len():
        m = max(abs(int(values.min())), abs(int(values.max())))
        if m * values.len() < 2**53:
            return np.add.reduceat(values.cast(pl.Float64).to_numpy(), starts)
    return sequential_segment_sums(values.cast(pl.Float64).to_numpy(), starts)


def _run_starts(sorted_ids: np.ndarray) -> np.ndarray:
    """Start index of each run of equal values in a sorted array (int64)."""
    first = np.empty(sorted_ids.size, dtype=bool)
    first[:1] = True
    np.not_equal(sorted_ids[1:], sorted_ids[:-1], out=first[1:])
    return np.flatnonzero(first)


def sequential_segment_sums(x: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """The Float64 sum of each run ``x[starts[i]:starts[i+1]]`` (last run to the end), adding its values in
    order: ``((x_0 + x_1) + x_2) + …`` (not numpy's pairwise summation), so a sum depends on the values and
    their input order only, never on chunking or threads. Vectorised position by position: step ``j`` adds
    the ``j``-th value of every run longer than ``j`` (the runs still active shrink, so the work is one
    addition per value)."""
    x = np.asarray(x, dtype=np.float64)
    acc = x[starts]
    lengths = np.diff(starts, append=x.size)
    active = np.flatnonzero(lengths > 1)
    j = 1
    while active.size:
        acc[active] += x[starts[active] + j]
        j += 1
        active = active[lengths[active] > j]
    return acc
