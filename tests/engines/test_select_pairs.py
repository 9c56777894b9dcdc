"""select_pairs: the one definition of the l0 choice (embedded engines and Spark executors).

Checked against an independent per-unit oracle written from the module docstring; invariance under row
order, chunking, partitioning by unit and equivalent dtypes; agreement with every embedded engine."""

from __future__ import annotations

import hashlib
import struct

import numpy as np
import polars as pl
import pyarrow as pa
import pytest
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from sparsedp.engines import ENGINES, draw_bounding_secret, get_engine, select_pairs
from sparsedp.engines import bounding
from sparsedp.engines.bounding import COUNT, keep_smallest
from sparsedp.noise import InsecureSeededRandom

SEED = 20261123


def _log(n_rows=5000, n_units=250, n_keys=120, seed=7) -> pl.DataFrame:
    """Heavy-tailed units (many over l0), Zipf-like keys, duplicate rows."""
    g = np.random.default_rng(seed)
    w = g.pareto(1.0, n_units) + 1
    units = g.choice(n_units, size=n_rows, p=w / w.sum())
    ranks = np.minimum(g.zipf(1.2, n_rows), n_keys) - 1
    words = np.array([f"q{i:03d}" for i in range(n_keys - 1)] + ["café ☕"])
    return pl.DataFrame({"uid": (units * 13 + 5).astype(np.int64), "query": words[ranks],
                         "country": np.where(units % 4 == 0, "DE", "US")})


def _sorted(df: pl.DataFrame) -> pl.DataFrame:
    return df.sort(pl.all())


def _oracle(df: pl.DataFrame, unit: str, by: list[str], l0: int, secret: bytes) -> pl.DataFrame:
    """The docstring's definition, one unit at a time, one AES block at a time (no shared code path)."""
    key = hashlib.sha256(b"sparsedp select_pairs v1 AES-256 rank key" + secret).digest()
    enc = Cipher(algorithms.AES(key), modes.ECB()).encryptor()
    out = []
    for (u,), g in df.select([unit] + by).unique().group_by([unit]):
        hu = pl.Series([u], dtype=pl.Int64).hash(bounding.SEED_UNIT)[0]
        hk = (g[by[0]].hash(bounding.SEED_KEY) if len(by) == 1
              else g.select(pl.struct(by).hash(bounding.SEED_KEY)).to_series())
        r = [int.from_bytes(enc.update(struct.pack("<QQ", hu, h))[:8], "big") for h in hk.to_list()]
        g = g.with_columns(pl.Series("r", r, dtype=pl.UInt64)).sort(["r", *by]).head(l0)
        out.append(g.drop("r"))
    return pl.concat(out)


@pytest.fixture(scope="module")
def log():
    return _log()


@pytest.fixture(scope="module")
def secret():
    return draw_bounding_secret(InsecureSeededRandom(SEED))


@pytest.mark.parametrize("by", [["query"], ["query", "country"]])
@pytest.mark.parametrize("l0", [1, 4])
def test_matches_the_per_unit_oracle(log, secret, by, l0):
    got = select_pairs(log, "uid", by, l0, secret)
    deg = log.select("uid", *by).unique().group_by("uid").len()
    assert (deg["len"] > l0).sum() > 50  # the bound binds for many units
    assert _sorted(got).equals(_sorted(_oracle(log, "uid", by, l0, secret)))
    assert got.columns == ["uid", *by] and got.schema == log.select("uid", *by).schema


def test_invariants(log, secret):
    l0 = 3
    got = select_pairs(log, "uid", ["query"], l0, secret)
    assert got.height == got.unique().height  # distinct pairs: at most 1 per (unit, key)
    per_unit = got.group_by("uid").len()
    deg = log.select("uid", "query").unique().group_by("uid").len().rename({"len": "d"})
    j = deg.join(per_unit, on="uid", how="left").fill_null(0)
    assert (j["len"].to_numpy() == np.minimum(j["d"].to_numpy(), l0)).all()
    assert got.join(log, on=["uid", "query"], how="anti").height == 0  # only pairs present in the input


def test_row_order_chunking_and_lazy_input(log, secret):
    ref = _sorted(select_pairs(log, "uid", ["query", "country"], 2, secret))
    shuffled = log.sample(fraction=1.0, shuffle=True, seed=11)
    chunked = pl.concat([shuffled[i:i + 700] for i in range(0, shuffled.height, 700)], rechunk=False)
    assert chunked.n_chunks() > 1
    doubled = pl.concat([log, log.reverse()])  # duplicate rows do not matter
    for df in (shuffled, chunked, doubled, log.lazy(), chunked.lazy()):
        assert _sorted(select_pairs(df, "uid", ["query", "country"], 2, secret)).equals(ref)


def test_equivalent_dtypes_choose_the_same_pairs(log, secret):
    """A Spark -> Arrow -> Polars batch (Int32 unit, large_string key) and a Categorical/Enum key rank like
    the user's Int64/String frame."""
    ref = _sorted(select_pairs(log, "uid", ["query"], 3, secret))
    arrow = pa.table({"uid": pa.array(log["uid"].to_numpy().astype(np.int32)),
                      "query": pa.array(log["query"].to_list(), pa.large_string())})
    variants = [
        pl.from_arrow(arrow),
        log.with_columns(pl.col("query").cast(pl.Categorical)),
        log.with_columns(pl.col("query").cast(pl.Enum(sorted(log["query"].unique().to_list(), reverse=True)))),
        log.with_columns(pl.col("uid").cast(pl.UInt32)),
    ]
    for v in variants:
        got = select_pairs(v, "uid", ["query"], 3, secret)
        got = got.with_columns(pl.col("uid").cast(pl.Int64), pl.col("query").cast(pl.String))
        assert _sorted(got).equals(ref)


def test_time_zones_are_canonical(secret):
    g = np.random.default_rng(2)
    t = pl.Series((g.integers(0, 40, 600) * 3_600_000_000).astype("datetime64[us]"))
    df = pl.DataFrame({"u": g.integers(0, 20, 600), "t": t.dt.replace_time_zone("UTC")})
    ref = _sorted(select_pairs(df, "u", ["t"], 2, secret))
    berlin = df.with_columns(pl.col("t").dt.convert_time_zone("Europe/Berlin").dt.cast_time_unit("ns"))
    got = select_pairs(berlin, "u", ["t"], 2, secret).with_columns(
        pl.col("t").dt.convert_time_zone("UTC").dt.cast_time_unit("us"))
    assert _sorted(got).equals(ref)


def test_partition_of_units_equals_the_restriction(log, secret):
    """What Spark relies on: any partition holding all rows of its units gets exactly its units' choice."""
    whole = select_pairs(log, "uid", ["query"], 2, secret)
    parts = []
    for p in range(3):
        part = log.filter(pl.col("uid").hash(99) % 3 == p)
        got = select_pairs(part, "uid", ["query"], 2, secret)
        assert _sorted(got).equals(_sorted(whole.join(part.select("uid").unique(), on="uid")))
        parts.append(got)
    assert _sorted(pl.concat(parts)).equals(_sorted(whole))


def test_deterministic_given_the_secret_and_fresh_per_secret(log, secret):
    a = select_pairs(log, "uid", ["query"], 2, secret)
    assert _sorted(select_pairs(log, "uid", ["query"], 2, bytes(secret))).equals(_sorted(a))
    b = select_pairs(log, "uid", ["query"], 2, draw_bounding_secret(InsecureSeededRandom(SEED + 1)))
    assert not _sorted(b).equals(_sorted(a)) and b.height == a.height


def test_ties_break_by_canonical_key_order(log, secret, monkeypatch):
    """With every rank equal, each unit keeps its l0 smallest keys in canonical (string) order, also for a
    Categorical whose physical order differs."""
    monkeypatch.setattr(bounding, "prf_ranks", lambda hu, hk, s, iu, ik: np.zeros(iu.size, dtype=np.uint64))
    df = log.with_columns(pl.col("query").cast(pl.Enum(sorted(log["query"].unique().to_list(), reverse=True))))
    got = select_pairs(df, "uid", ["query"], 2, secret).with_columns(pl.col("query").cast(pl.String))
    expect = log.select("uid", "query").unique().sort("query").group_by("uid", maintain_order=True).head(2)
    assert _sorted(got).equals(_sorted(expect))


@pytest.mark.parametrize("engine", ENGINES)
def test_every_engine_keeps_what_select_pairs_keeps(log, tmp_path, engine):
    """The engine's bounded histogram is the key histogram of select_pairs with the same secret."""
    l0 = 2
    sp = select_pairs(log, "uid", ["query", "country"], l0, draw_bounding_secret(InsecureSeededRandom(SEED)))
    expect = sp.group_by("query", "country").len().sort("query", "country")
    path = tmp_path / "log.parquet"
    log.write_parquet(path)
    shuffled = log.sample(fraction=1.0, shuffle=True, seed=5)
    chunked = pl.concat([shuffled[i:i + 900] for i in range(0, shuffled.height, 900)], rechunk=False)
    for data in (log, str(path), chunked):
        bh = get_engine(engine).histogram(data, "uid", ["query", "country"], l0,
                                                  InsecureSeededRandom(SEED))
        got = pl.from_arrow(bh.keys).with_columns(len=pl.Series(bh.counts, dtype=pl.UInt32))
        assert got.equals(expect), engine  # also in canonical key order
        assert bh.stats.pairs_dropped_l0 == log.select("uid", "query", "country").unique().height - sp.height
        assert bh.stats.units_over_l0 == int((log.select("uid", "query", "country").unique()
                                              .group_by("uid").len()["len"] > l0).sum())


@pytest.mark.parametrize("by", [["query"], ["query", "country"]])
def test_bounded_key_counts_is_the_histogram_of_select_pairs(log, secret, by):
    expect = select_pairs(log, "uid", by, 3, secret).group_by(by).agg(pl.len().cast(pl.Int64).alias(COUNT))
    got = bounding.bounded_key_counts(log.sample(fraction=1.0, shuffle=True, seed=4), "uid", by, 3, secret)
    assert got.equals(got.sort(by)) and _sorted(got).equals(_sorted(expect))


def test_empty_and_light_inputs(secret):
    empty = pl.DataFrame({"u": pl.Series([], dtype=pl.Int64), "k": pl.Series([], dtype=pl.String)})
    assert select_pairs(empty, "u", ["k"], 3, secret).height == 0
    light = pl.DataFrame({"u": [1, 1, 2, 1], "k": ["a", "b", "a", "a"]})
    assert _sorted(select_pairs(light, "u", ["k"], 3, secret)).equals(_sorted(light.unique()))


def test_prf_ranks_are_aes_of_the_fingerprint_blocks():
    """Known answer: AES-256 (FIPS-197 appendix C.3 vector) of one block, through the derived-key path."""
    key = bytes(range(32))
    pt = bytes.fromhex("00112233445566778899aabbccddeeff")
    ct = Cipher(algorithms.AES(key), modes.ECB()).encryptor().update(pt)
    assert ct.hex() == "8ea2b7ca516745bfeafc49904b496089"
    secret = b"\x07" * 32
    dk = hashlib.sha256(b"sparsedp select_pairs v1 AES-256 rank key" + secret).digest()
    hu, hk = np.array([1, 2**64 - 1], dtype=np.uint64), np.array([3, 0], dtype=np.uint64)
    r = bounding.prf_ranks(hu, hk, secret)
    gathered = bounding.prf_ranks(hu, hk, secret, np.array([1, 0, 1]), np.array([1, 0, 0]))
    assert gathered[:2].tolist() == r[[1, 0]].tolist()
    mixed = Cipher(algorithms.AES(dk), modes.ECB()).encryptor().update(struct.pack("<QQ", 2**64 - 1, 3))
    assert int(gathered[2]) == int.from_bytes(mixed[:8], "big")
    for i in range(2):
        blk = Cipher(algorithms.AES(dk), modes.ECB()).encryptor().update(struct.pack("<QQ", int(hu[i]), int(hk[i])))
        assert int(r[i]) == int.from_bytes(blk[:8], "big")


def test_prf_ranks_equal_one_call_aes_across_buffer_steps():
    """The ranks of more pairs than one streamed step (2^16 blocks), gathered and not, equal the first word of
    AES-256-ECB of each block encrypted in one call (the streaming, the gathers and the step boundary change
    nothing)."""
    g = np.random.default_rng(5)
    n = (1 << 16) + 4321
    hu = g.integers(0, 2**64, 5000, dtype=np.uint64)
    hk = g.integers(0, 2**64, 3000, dtype=np.uint64)
    iu, ik = g.integers(0, hu.size, n), g.integers(0, hk.size, n)
    secret = bytes(g.integers(0, 256, 32, dtype=np.uint8))
    dk = hashlib.sha256(b"sparsedp select_pairs v1 AES-256 rank key" + secret).digest()
    blocks = np.empty((n, 2), dtype="<u8")
    blocks[:, 0], blocks[:, 1] = hu[iu], hk[ik]
    ct = Cipher(algorithms.AES(dk), modes.ECB()).encryptor().update(blocks.tobytes())
    want = np.frombuffer(ct, dtype=">u8")[::2].astype(np.uint64)
    assert np.array_equal(bounding.prf_ranks(hu, hk, secret, iu, ik), want)
    assert np.array_equal(bounding.prf_ranks(hu[iu], hk[ik], secret), want)


def test_keep_smallest_is_exact_with_ties():
    """Forced rank ties exercise the exact fallback: per group, the l0 smallest (rank, tiebreak)."""
    g0 = np.random.default_rng(1)
    group = np.repeat(np.arange(50), g0.integers(4, 12, 50))
    perm = g0.permutation(group.size)
    group = group[perm]
    rank = g0.integers(0, 3, group.size).astype(np.uint64)  # many ties
    tiebreak = g0.permutation(group.size)
    keep = keep_smallest(group, rank, tiebreak, 3, 50)
    for gi in range(50):
        idx = np.flatnonzero(group == gi)
        best = idx[np.lexsort((tiebreak[idx], rank[idx]))][:3]
        assert set(np.flatnonzero(keep & (group == gi))) == set(best)
    # and the fast path agrees with the exact path on distinct ranks
    rank = g0.integers(0, 2**63, group.size).astype(np.uint64)
    keep = keep_smallest(group, rank, tiebreak, 3, 50)
    for gi in range(50):
        idx = np.flatnonzero(group == gi)
        assert set(np.flatnonzero(keep & (group == gi))) == set(idx[np.argsort(rank[idx])][:3])


def test_keep_smallest_small_groups_keep_everything():
    group = np.array([0, 1, 1, 1, 2, 2])
    rank = np.array([5, 3, 1, 2, 9, 9], dtype=np.uint64)
    keep = keep_smallest(group, rank, np.arange(6), 2, 3)
    assert keep.tolist() == [True, False, True, True, True, True]




@pytest.mark.parametrize("unit", ["u", "uc"])
def test_engines_agree_on_other_dtypes(unit):
    """Int32 and Categorical units, a Categorical and a time-zone-aware datetime key: same bounded histogram,
    in the same (canonical) key order, from every engine (DuckDB returns the instants in UTC)."""
    g = np.random.default_rng(3)
    n = 3000
    t = pl.Series((g.integers(0, 30, n) * 86_400_000_000).astype("datetime64[us]"))
    df = pl.DataFrame({"u": g.integers(0, 150, n).astype(np.int32), "c": g.choice(["DE", "US", "FR"], n),
                       "t": t.dt.replace_time_zone("Europe/Paris"), "b": g.integers(0, 20, n)})
    df = df.with_columns(pl.col("c").cast(pl.Categorical), pl.col("u").cast(pl.String).cast(pl.Categorical).alias("uc"))
    out = {}
    for e in ENGINES:
        bh = get_engine(e).histogram(df, unit, ["c", "t", "b"], 3, InsecureSeededRandom(SEED))
        assert bh.stats.units_over_l0 > 100
        out[e] = pl.from_arrow(bh.keys).with_columns(
            pl.col("c").cast(pl.String), pl.col("t").dt.convert_time_zone("UTC"), n=pl.Series(bh.counts))
    for e, h in out.items():
        assert h.equals(out["polars"]), e
    sp = select_pairs(df, unit, ["c", "t", "b"], 3, draw_bounding_secret(InsecureSeededRandom(SEED)))
    assert sp.height == int(out["polars"]["n"].sum())


def test_polars_raw_counts_then_bound_equals_its_fast_path(log):
    """The Polars engine's generic path (raw_counts + bound) and its own fast path make the same choice."""
    from sparsedp.engines.bounding import bound

    eng = get_engine("polars")
    fast = eng.histogram(log, "uid", ["query"], 2, InsecureSeededRandom(SEED))
    raw = eng.raw_counts(log, "uid", ["query"], 2)
    hist, info = bound(raw.key_counts, raw.heavy_pairs, "uid", ["query"], 2,
                       draw_bounding_secret(InsecureSeededRandom(SEED)))
    assert pl.from_arrow(hist.keys).equals(pl.from_arrow(fast.keys))
    assert hist.counts.tolist() == fast.counts.tolist()
    assert info["pairs_dropped_l0"] == fast.stats.pairs_dropped_l0 and raw.units_over_l0 == fast.stats.units_over_l0
