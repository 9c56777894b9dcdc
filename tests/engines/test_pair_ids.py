"""The integer-pair-id fast path (engines/pair_ids.py) against the per-key-list path it replaces on the Polars
engine (bounding.choose_from_per_key / aggregate_exprs.bounded_key_sums, still Spark's): the same counts,
grid sums and statistics for the same secret, for every kind of unit id (narrow integers, wide integers,
unsigned, negative, strings) and key (one String column: Categorical ids; other keys: grouped ids)."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

import sparsedp as sd
from sparsedp.engines import pair_ids, sorted_runs
from sparsedp.engines.aggregate_exprs import bounded_key_sums, per_key_contributions
from sparsedp.engines.bounding import COUNT, choose_from_per_key, per_key_units
from sparsedp.noise import InsecureSeededRandom

AGGS = [sd.Count(), sd.Sum("v", 0, 50), sd.Mean("w", -3, 3), sd.Sum("v", -10, 10, name="v2")]


def _rows(unit_kind: str, n_rows=20_000, n_units=900, n_keys=150, seed=3) -> pl.DataFrame:
    g = np.random.default_rng(seed)
    w = g.pareto(1.0, n_units) + 1
    u = g.choice(n_units, size=n_rows, p=w / w.sum())
    k = np.minimum(g.zipf(1.3, n_rows), n_keys) - 1
    units = {"narrow": u.astype(np.int32) * 3 - 700,
             "wide": u.astype(np.int64) * (1 << 50) - (1 << 62),
             "unsigned": (u.astype(np.uint64) * np.uint64(1 << 53)) + np.uint64(7),
             "string": np.array([f"user-{i}" for i in range(n_units)])[u]}[unit_kind]
    return pl.DataFrame({"uid": units, "url": np.array([f"k{i:03d}" for i in range(n_keys)])[k],
                         "n": (k % 7).astype(np.int16), "v": g.uniform(-20, 80, n_rows).round(1),
                         "w": g.integers(-5, 6, n_rows)})


def _old(df: pl.DataFrame, by: list[str], l0, aggs) -> tuple[pl.DataFrame, tuple]:
    secret = pair_ids.draw_bounding_secret(InsecureSeededRandom(4)) if l0 is not None else None
    if aggs:
        pk = per_key_contributions(df.lazy(), "uid", by, aggs)
        kc, ch = bounded_key_sums(pk, "uid", by, l0, secret, 3)
    else:
        ch = choose_from_per_key(per_key_units(df.lazy(), "uid", by).collect(), "uid", by, l0, secret)
        kc = ch.keys.with_columns(pl.Series(COUNT, ch.units_per_key - ch.dropped_per_key, dtype=pl.Int64))
    return kc, (ch.units_in, ch.pairs_in, ch.units_over_l0, int(ch.dropped_per_key.sum()))


@pytest.mark.parametrize("unit_kind", ["narrow", "wide", "unsigned", "string"])
@pytest.mark.parametrize("by", [["url"], ["url", "n"], ["n"]])
@pytest.mark.parametrize("l0", [2, None])
@pytest.mark.parametrize("with_sums", [False, True])
def test_same_counts_sums_and_stats_as_the_per_key_lists(unit_kind, by, l0, with_sums):
    df = _rows(unit_kind)
    aggs = AGGS if with_sums else ()
    want, stats = _old(df, by, l0, aggs)
    got = pair_ids.bounded_raw_counts(df.lazy(), "uid", by, l0, InsecureSeededRandom(4), aggs)
    assert got.key_counts.equals(want)  # every key, canonical order, counts and Int64 grid sums
    assert (got.units_in, got.pairs_in, got.units_over_l0, got.pairs_dropped_l0) == stats
    assert got.rows_in == df.height
    if l0 is not None:
        assert got.pairs_dropped_l0 > 100  # the bound binds


def test_sequential_segment_sums_add_in_order():
    g = np.random.default_rng(1)
    lens = g.permutation(np.concatenate([g.integers(1, 12, 500), [300, 1, 1000]]))
    starts = np.concatenate([[0], np.cumsum(lens)[:-1]])
    x = g.normal(size=int(lens.sum())) * 10.0 ** g.integers(-5, 17, int(lens.sum()))
    want = []
    for s, n in zip(starts, lens):
        acc = x[s]
        for i in range(1, n):
            acc = acc + x[s + i]
        want.append(acc)
    got = pair_ids.sequential_segment_sums(pair_ids._run_numbers(starts, x.size), pl.Series(x), starts.size)
    assert np.array_equal(got, np.array(want))
    assert not np.array_equal(np.add.reduceat(x, starts), got)  # pairwise summation would differ here


@pytest.mark.parametrize("agg", [sd.Sum("v", -4, 4), sd.Sum("v", 0, 600), sd.Mean("v", -1e12, 1e12),
                                 sd.Variance("v", -3, 5)])
def test_gridded_array_is_the_polars_grid_expression(agg):
    from sparsedp.aggregates import noise_columns
    from sparsedp.engines.aggregate_exprs import gridded, gridded_array

    g = np.random.default_rng(2)
    for a in noise_columns([agg])[0]:
        lo, hi, step = a.lower, a.upper, a.granularity
        # every rounding boundary of the grid inside the bounds and its neighbouring floats, the bounds, ±0,
        # values outside the bounds, infinities (an overflowing pair sum), random values
        ks = np.arange(-40, 41) if (hi - lo) / step > 200 else np.arange(round(lo / step) - 2, round(hi / step) + 3)
        edges = np.concatenate([(ks + 0.5) * step, ks * step, np.sqrt(np.abs(ks * step + 0.5 * step))])
        x = np.concatenate([edges, np.nextafter(edges, np.inf), np.nextafter(edges, -np.inf),
                            [lo, hi, 0.0, -0.0, lo - 1, hi + 1, np.inf, -np.inf, 1e300, -1e300],
                            g.uniform(lo - 1, hi + 1, 2000)])
        want = pl.DataFrame({"t": x}).select(gridded(pl.col("t"), a)).to_series().to_numpy()
        assert np.array_equal(gridded_array(x, a), want)


def test_order_of_additions_is_the_input_order():
    # one pair's values: sequential (1e16 + 1) + 1 - 1e16 = 0, a pairwise or partial-sum order gives 2
    df = pl.DataFrame({"uid": [1, 2, 1, 1, 1], "url": ["a", "a", "a", "a", "a"],
                       "v": [1e16, 0.0, 1.0, 1.0, -1e16]})
    agg = sd.Sum("v", -4, 4)  # grid step 2^-9: a sum of 0 and a sum of 2 are far apart on the grid
    got = pair_ids.bounded_raw_counts(df.lazy(), "uid", ["url"], None, InsecureSeededRandom(1), [sd.Count(), agg])
    assert got.key_counts["__sparsedp_agg_0"].to_list() == [0 - agg.centre + 0]  # uid 2 adds 0, uid 1 adds 0


@pytest.mark.parametrize("by", [["url"], ["url", "n"]])
def test_rank_ties_break_by_canonical_key_order_like_the_per_key_lists(monkeypatch, by):
    from sparsedp.engines import bounding

    def zeros(hu, hk, s, iu, ik):
        return np.zeros(iu.size, dtype=np.uint64)

    monkeypatch.setattr(bounding, "prf_ranks", zeros)
    monkeypatch.setattr(pair_ids, "prf_ranks", zeros)
    df = _rows("narrow")
    want, stats = _old(df, by, 2, AGGS)
    got = pair_ids.bounded_raw_counts(df.lazy(), "uid", by, 2, InsecureSeededRandom(4), AGGS)
    assert got.key_counts.equals(want) and got.pairs_dropped_l0 == stats[3] > 100
    # every unit keeps its l0 smallest keys in canonical order: the first keys of the order are never dropped
    deg = df.select("uid", *by).unique().group_by(by).len().sort(by)
    assert got.key_counts.sort(by)[COUNT][0] == deg["len"][0]


def _shape(kind: str, seed=5) -> pl.DataFrame:
    """Rows whose units are all over l0 = 1 and 3, none of them, exactly one, or a mix with one huge unit."""
    g = np.random.default_rng(seed)
    if kind == "all-heavy":
        u = np.repeat(np.arange(200), 12)
    elif kind == "no-heavy":  # one row per unit
        u = np.arange(1200)
    elif kind == "one-heavy":
        u = np.concatenate([np.arange(600), np.full(80, 1000)])
    else:  # mixed, one unit with most of the keys
        u = np.concatenate([g.integers(0, 500, 3000), np.full(2000, 77)])
    k = g.integers(0, 120, u.size)
    return pl.DataFrame({"uid": g.permutation(u) * 7 + 11, "url": [f"k{i:03d}" for i in g.permutation(k)],
                         "v": g.uniform(-20, 80, u.size).round(1), "w": g.integers(-5, 6, u.size),
                         "n": (g.permutation(k) % 5).astype(np.int16)})


@pytest.mark.parametrize("kind", ["all-heavy", "no-heavy", "one-heavy", "mixed"])
@pytest.mark.parametrize("l0", [1, 3])
@pytest.mark.parametrize("chunks", [1, 2, 7, 64])
@pytest.mark.parametrize("with_sums", [False, True])
def test_parts_in_threads_give_the_per_key_lists_result(kind, l0, chunks, with_sums):
    """The pairs split into parts of whole units (in a thread pool): the same counts, grid sums and statistics
    as the per-key-list path, whatever the number of parts (more parts than units included)."""
    df = _shape(kind)
    aggs = AGGS if with_sums else ()
    want, stats = _old(df, ["url"], l0, aggs)
    got = pair_ids.bounded_raw_counts(df.lazy(), "uid", ["url"], l0, InsecureSeededRandom(4), aggs, chunks=chunks)
    assert got.key_counts.equals(want)
    assert (got.units_in, got.pairs_in, got.units_over_l0, got.pairs_dropped_l0) == stats
    heavy = {"all-heavy": 200, "no-heavy": 0, "one-heavy": 1}.get(kind)
    if heavy is not None:
        assert got.units_over_l0 == heavy


@pytest.mark.parametrize("kind", ["all-heavy", "no-heavy", "one-heavy", "mixed"])
@pytest.mark.parametrize("chunks", [1, 7, 64])
def test_sorted_runs_in_threads_give_the_per_key_lists_result(monkeypatch, kind, chunks):
    """The count-only path with the pair ids sorted in three runs (as on a 3-core machine with a large input),
    each bucket merged from its segments of the runs: the same counts and statistics as the per-key lists."""
    monkeypatch.setattr(sorted_runs, "_MIN_PARALLEL", 1)
    monkeypatch.setattr(pair_ids, "thread_count", lambda: 3)
    df = _shape(kind)
    want, stats = _old(df, ["url"], 2, ())
    got = pair_ids.bounded_raw_counts(df.lazy(), "uid", ["url"], 2, InsecureSeededRandom(4), chunks=chunks)
    assert got.key_counts.equals(want)
    assert (got.units_in, got.pairs_in, got.units_over_l0, got.pairs_dropped_l0) == stats


@pytest.mark.parametrize("unit_kind", ["narrow", "unsigned", "string"])
@pytest.mark.parametrize("by", [["url"], ["url", "n"]])
@pytest.mark.parametrize("block", [1, 5, 64, 4096])
def test_small_parts_and_blocks(monkeypatch, unit_kind, by, block):
    """With tiny slices (many, shared out between threads; units longer than a slice): the same result as the
    per-key lists. Slices of 1 and 5 rows run on 4000 rows (still ~800 to 4000 slices; the Python work per slice
    made 20 000 rows cost ~2 s of CPU per case), the larger ones on 20 000."""
    monkeypatch.setattr(pair_ids, "_block_size", lambda n_keys: block)
    df = _rows(unit_kind, n_rows=4_000, n_units=300) if block <= 5 else _rows(unit_kind)
    assert block == 4096 or df.group_by("uid").len()["len"].max() > block  # some unit spans several slices
    want, stats = _old(df, by, 2, AGGS)
    got = pair_ids.bounded_raw_counts(df.lazy(), "uid", by, 2, InsecureSeededRandom(4), AGGS)
    assert got.key_counts.equals(want)
    assert (got.units_in, got.pairs_in, got.units_over_l0, got.pairs_dropped_l0) == stats
    count_only = pair_ids.bounded_raw_counts(df.lazy(), "uid", by, 2, InsecureSeededRandom(4))
    assert count_only.key_counts[COUNT].equals(want[COUNT])


def test_run_index_is_the_concatenated_runs():
    g = np.random.default_rng(3)
    lengths = g.integers(1, 9, 300)
    starts = np.cumsum(lengths + g.integers(0, 5, 300)) - lengths
    index, run = pair_ids._run_index(starts, lengths)
    assert np.array_equal(index, np.concatenate([np.arange(s, s + n) for s, n in zip(starts, lengths)]))
    assert np.array_equal(run, np.repeat(np.arange(300), lengths))


def test_keep_smallest_with_ties_in_the_packed_words_only():
    """Ranks that differ only in their low bits tie once packed beside the group: the exact path decides."""
    from sparsedp.engines.bounding import keep_smallest

    g = np.random.default_rng(4)
    n_groups = 3000  # 12 bits of group, so the packed words drop the 12 low bits of the ranks
    group = g.permutation(np.repeat(np.arange(n_groups), g.integers(1, 9, n_groups)))
    rank = (g.integers(0, 4, group.size).astype(np.uint64) << np.uint64(40)) | g.integers(0, 2**12, group.size
                                                                                           ).astype(np.uint64)
    tiebreak = g.permutation(group.size)
    for l0 in (1, 2, 5):
        keep = keep_smallest(group, rank, tiebreak, l0, n_groups)
        order = np.lexsort((tiebreak, rank, group))
        first = np.r_[0, np.flatnonzero(np.diff(group[order])) + 1]
        pos = np.arange(group.size) - np.repeat(first, np.diff(np.r_[first, group.size]))
        want = np.zeros(group.size, dtype=bool)
        want[order[pos < l0]] = True
        assert np.array_equal(keep, want)


def _without_cat_to(monkeypatch) -> None:
    """As on a Polars without the (unstable) ``Series.cat.to``: the method removed from the Series' ``cat``
    namespace class, wherever this Polars defines it (nothing to remove where it has none)."""
    monkeypatch.delattr(type(pl.Series([], dtype=pl.Categorical).cat), "to", raising=False)


@pytest.mark.parametrize("loop", [False, True])
@pytest.mark.parametrize("unit_kind", ["narrow", "string"])
@pytest.mark.parametrize("with_sums", [False, True])
def test_key_strings_by_polars_or_by_the_loop_give_the_same_result(monkeypatch, loop, unit_kind, with_sums):
    """The distinct key strings of the Categorical ids (:func:`pair_ids._category_strings`), read by Polars
    (``Series.cat.to``) or, where that API is missing, by the Python loop over the namespace: the same counts,
    sums and statistics as the per-key lists either way."""
    if loop:  # as on a Polars without the (unstable) Series.cat.to
        _without_cat_to(monkeypatch)
    df = _rows(unit_kind)
    aggs = AGGS if with_sums else ()
    want, stats = _old(df, ["url"], 2, aggs)
    got = pair_ids.bounded_raw_counts(df.lazy(), "uid", ["url"], 2, InsecureSeededRandom(4), aggs)
    assert got.key_counts.equals(want)
    assert (got.units_in, got.pairs_in, got.units_over_l0, got.pairs_dropped_l0) == stats


def test_key_strings_are_the_loops_frame_in_one_chunk_in_id_order(monkeypatch):
    """Polars' way of reading the key strings gives the loop's frame (row i: the string of physical id i), in one
    chunk (a frame of one chunk per thread made each later gather by key id about 20 times slower)."""
    cats = pl.Categories.random()
    g = np.random.default_rng(1)
    col = pl.concat([pl.Series(pair_ids._KEY, [f"k{int(x)}" for x in g.integers(0, 30_000, 50_000)]).cast(pl.Categorical(cats))
                     for _ in range(4)], rechunk=False)
    ids = col.to_physical()
    n = int(ids.max()) + 1
    fast = pair_ids._category_strings(cats, "url", n)
    assert fast["url"].n_chunks() == 1 and fast.height == n > 25_000
    assert fast["url"].gather(ids).equals(col.cast(pl.String).rename("url"))
    _without_cat_to(monkeypatch)
    assert fast.equals(pair_ids._category_strings(cats, "url", n))


@pytest.mark.parametrize("unit_kind", ["narrow", "string"])
def test_mad_later_round_reads_round_ones_choice_back_and_ranks_nothing(monkeypatch, unit_kind):
    """``mad``'s later round (``choose_first``) reads the pairs round 1's choice dropped (recorded per slice) instead
    of ranking them again: the same per-key kept pairs and weight sums as the round that ranks them (a slicing
    round 1 did not record, or a record thrown away), at several slicings and with nothing excluded; with a record
    it calls no AES ranking at all; a fresh choice (``mad2r``) forgets the record."""
    import pyarrow as pa

    from sparsedp.accounting.set_union import grid_weights

    df = _rows(unit_kind, n_rows=6000, n_units=300, n_keys=60)
    l0 = 2
    ws = grid_weights(l0, 4096).tolist()

    def pairs(chunks=None):
        wp = pair_ids.weighted_pairs(df.lazy().select("uid", "url"), "uid", ["url"], l0, ws, InsecureSeededRandom(4))
        first = pair_ids.weighted_round(wp, ["url"], chunks=chunks)
        return wp, first.key_counts

    def table(raw):
        return raw.key_counts.select("url", COUNT, pair_ids.WEIGHT_SUM).sort("url")

    wp, first = pairs()
    assert wp.first_choice and sum(g.size for g in wp.first_choice.values()) == int(
        df.select("uid", "url").unique().height - first[COUNT].sum())  # every dropped pair recorded
    top = first.sort(pair_ids.WEIGHT_SUM, descending=True).head(5).select("url").to_arrow()
    ranked = {}
    for ex in (top, pa.table({"url": pa.array([], pa.string())})):
        cold, _ = pairs()
        cold.first_choice.clear()  # no record: round 1's choice ranked again
        ranked[ex.num_rows] = table(pair_ids.weighted_round(cold, ["url"], ex, choose_first=True))
    assert ranked[0].equals(first.select("url", COUNT, pair_ids.WEIGHT_SUM).sort("url"))
    calls = []
    real = pair_ids.prf_ranks
    monkeypatch.setattr(pair_ids, "prf_ranks", lambda *a: calls.append(1) or real(*a))
    for chunks in (None, 1, 3, 7):
        warm, _ = pairs(chunks)
        calls.clear()
        for ex in (top, pa.table({"url": pa.array([], pa.string())})):
            got = table(pair_ids.weighted_round(warm, ["url"], ex, choose_first=True, chunks=chunks))
            assert got.equals(ranked[ex.num_rows]), chunks
        assert calls == []  # read back, not ranked
        other = table(pair_ids.weighted_round(warm, ["url"], top, choose_first=True, chunks=5 if chunks != 5 else 2))
        assert other.equals(ranked[top.num_rows]) and calls  # another slicing: ranked, the same result
    warm, _ = pairs()
    cold, _ = pairs()
    cold.first_choice.clear()
    calls.clear()  # round 1's choice under another secret is ranked, never read back
    other_secret = pair_ids.weighted_round(warm, ["url"], top, choose_first=True, secret=b"s" * 32)
    assert calls and table(other_secret).equals(
        table(pair_ids.weighted_round(cold, ["url"], top, choose_first=True, secret=b"s" * 32)))
    assert not table(other_secret).equals(ranked[top.num_rows])
    fresh = pair_ids.weighted_round(warm, ["url"], top, choose_first=False, secret=b"s" * 32)
    assert not warm.first_choice and fresh.key_counts.height


@pytest.mark.parametrize("dtype", ["Int8", "Int16", "Int32", "Int64", "UInt8", "UInt16", "UInt32", "UInt64",
                                   "Int128", "String"])
def test_pack_pairs_is_the_formula_on_chunked_columns_of_every_unit_type(monkeypatch, dtype):
    """``p = unit id · 2^b + key id`` row by row, with the units' and keys' Polars chunks cut at different
    rows (each piece is read where it lies), in several threads; ``value_of`` maps the ids back."""
    monkeypatch.setattr(pair_ids, "thread_count", lambda: 3)
    g = np.random.default_rng(7)
    n, bk = 1000, 6
    raw = g.integers(-50, 50, n) if dtype.startswith("Int") else g.integers(0, 100, n)
    if dtype == "UInt64":
        raw = raw.astype(np.uint64) + np.uint64(2**64 - 200)  # near the top: the offset wraps mod 2^64
    col = pl.Series("u", raw).cast(getattr(pl, dtype)) if dtype != "String" else pl.Series("u", [f"x{v}" for v in raw])
    units = pl.concat([col[:300], col[300:301], col[301:]], rechunk=False)
    kid_np = g.integers(0, 1 << bk, n).astype(np.uint32)
    kid = pl.concat([pl.Series(kid_np[:10]), pl.Series(kid_np[10:777]), pl.Series(kid_np[777:])], rechunk=False)
    assert units.n_chunks() == 3 and kid.n_chunks() == 3
    p, value_of = pair_ids.pack_pairs(units, kid, bk)
    assert p.dtype == np.uint64 and p.flags.writeable
    assert np.array_equal(p & np.uint64((1 << bk) - 1), kid_np)
    uid = p >> np.uint64(bk)
    assert value_of(uid).equals(col, check_names=False)
    if dtype != "String":  # integers: offsets from the minimum, in row order
        lo = min(int(v) for v in col.to_list())
        assert [int(x) for x in uid] == [int(v) - lo for v in col.to_list()]
    else:  # dense ids: one per distinct unit
        assert np.unique(uid).size == col.n_unique() and int(uid.max()) == col.n_unique() - 1


def test_rank_order_is_the_three_key_lexsort():
    """:func:`sparsedp.engines.pair_ids._rank_order` (packed-word sort, exact re-sort of groups with a tie on the
    rank's high bits) equals ``np.lexsort((tiebreak, rank, group))``: random ranks, ranks tied on their high bits,
    ranks tied outright (the tie-break decides), single-element groups."""
    from sparsedp.engines.pair_ids import _rank_order

    g = np.random.default_rng(1)
    for trial in range(300):
        n_groups = int(g.integers(1, 200))
        group = np.repeat(np.arange(n_groups), g.integers(1, 20, n_groups))
        n = group.size
        rank = g.integers(0, 2**63, n, dtype=np.uint64) * np.uint64(2) + g.integers(0, 2, n, dtype=np.uint64)
        if trial % 3 == 0:
            rank = (rank >> np.uint64(58)) << np.uint64(58)
        if trial % 5 == 0:
            rank = g.integers(0, 3, n, dtype=np.uint64)
        tiebreak = g.permutation(n).astype(np.int64)
        assert np.array_equal(_rank_order(group, rank, tiebreak, n_groups), np.lexsort((tiebreak, rank, group)))
