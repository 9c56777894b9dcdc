"""Spark engine: bounding, counting, noise and thresholding in the executors (local[2,2], one shared session).

What is checked against what (never against the engine's own output):
- de-duplication and counting: the Polars engine's bounded histogram on the same rows;
- the ℓ0 choice: the Polars engine's bounded histogram with the same seeded source while l0 binds for
  almost every unit (so the Spark executors and the embedded engines keep exactly the same pairs), the
  secret the release draws, per-unit sizes, and a chi-square test that each unit's kept subset is uniform;
- the top-k cut-off: ``truncate_top_k`` (numpy) on the same counts, ties included;
- the release law: the exact discrete-Gaussian tail of :mod:`sparsedp.accounting.discrete`;
- one release, one draw: two actions on the lazy result, retried bounding and noise tasks (first attempts
  fail after emitting output), a failing upstream stage.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from itertools import combinations

import numpy as np
import polars as pl
import pytest

import sparsedp as sd
from sparsedp.accounting import calibrate
from sparsedp.accounting.discrete import dgauss_sf
from sparsedp.engines import spark_engine as se
from sparsedp.engines.polars_engine import PolarsEngine
from sparsedp.mechanisms.topk import truncate_top_k
from sparsedp.noise import InsecureSeededRandom

from spark_frames import from_polars

pytestmark = pytest.mark.xdist_group("spark")  # one JVM when run with --dist loadgroup


def _rows(seed=3, n=6000, units=800, keys=120):
    r = np.random.default_rng(seed)
    u = r.integers(0, units, n)
    k = r.zipf(1.4, n) % keys
    return pl.DataFrame({"uid": u, "url": [f"site{x}.example" for x in k], "cc": (k % 3).astype(np.int64)})


def _spark_frame(spark, frame: pl.DataFrame):
    return from_polars(spark, frame, "uid long, url string, cc long")


def _as_dict(rows, by, count="__sparsedp_n"):
    return {tuple(r[c] for c in by): r[count] for r in rows}


def _polars_hist(frame, by, l0, seed=1):
    bh = PolarsEngine().histogram(frame, "uid", by, l0, InsecureSeededRandom(seed))
    keys = bh.keys.to_pylist()
    return {tuple(k[c] for c in by): int(n) for k, n in zip(keys, bh.counts)}


def test_histogram_matches_polars_when_l0_does_not_bind(spark):
    frame = _rows()
    frame = pl.concat([frame, frame.head(500)])  # duplicate (unit, key) rows must count once
    by = ["url", "cc"]
    l0 = int(frame.unique(["uid"] + by).group_by("uid").len()["len"].max())
    sdf = _spark_frame(spark, frame)
    for bound in (None, l0):
        hist = se.histogram_frame(sdf, "uid", by, bound, b"k" * 32).collect()
        assert _as_dict(hist, by) == _polars_hist(frame, by, bound)


def _binding_rows(seed=5, n=20000, units=600, keys=300):
    """Most units have far more than a few distinct keys: l0 in 1..4 binds for almost every unit."""
    r = np.random.default_rng(seed)
    u = r.integers(0, units, n)
    k = r.zipf(1.3, n) % keys
    return pl.DataFrame({"uid": u, "url": [f"site{x}.example" for x in k], "cc": (k % 3).astype(np.int32)})


def test_binding_l0_matches_polars_with_the_same_source(spark):
    from sparsedp.engines.bounding import draw_bounding_secret

    frame = _binding_rows()
    by = ["url", "cc"]
    deg = frame.unique(["uid"] + by).group_by("uid").len()["len"]
    # Spark's "int" column reaches the executors as int32 batches; Polars sees Int32 too (both canonicalised)
    sdf = from_polars(spark, frame, "uid long, url string, cc int")
    for l0, seed in ((1, 3), (3, 4)):
        assert (deg > l0).mean() > 0.9  # the bound really binds
        want = _polars_hist(frame, by, l0, seed=seed)
        got = _as_dict(se.histogram_frame(sdf, "uid", by, l0, draw_bounding_secret(InsecureSeededRandom(seed)),
                                          partitions=3).collect(), by)
        assert got == want
        assert sum(got.values()) == int(deg.clip(upper_bound=l0).sum())
    # another secret keeps other pairs (same totals)
    other = _as_dict(se.histogram_frame(sdf, "uid", by, 1, bytes(32)).collect(), by)
    assert other != _polars_hist(frame, by, 1, seed=3) and sum(other.values()) == len(deg)


def test_release_draws_the_secret_like_polars(spark, monkeypatch):
    """sparsedp.release on Spark and on Polars, same seeded source: the same bounding secret, hence the same
    bounded histogram (checked above), and the same released schema."""
    from sparsedp.engines import pair_ids

    frame = _binding_rows(seed=8, n=12000, units=400, keys=80)
    sdf = from_polars(spark, frame, "uid long, url string, cc int")
    seen = {}
    real_hist, real_draw = se.histogram_frame, pair_ids.draw_bounding_secret

    def spy_hist(src, unit, by, l0, secret, **kw):
        seen["spark"] = secret
        return real_hist(src, unit, by, l0, secret, **kw)

    def spy_draw(rng):  # the Polars engine draws its secret itself (engines/pair_ids.py applies the choice)
        seen["polars"] = real_draw(rng)
        return seen["polars"]

    monkeypatch.setattr(se, "histogram_frame", spy_hist)
    monkeypatch.setattr(pair_ids, "draw_bounding_secret", spy_draw)
    kw = dict(privacy_unit="uid", by=["url", "cc"], epsilon=4.0, delta=1e-6, max_groups_per_unit=2,
              mechanism="gshm")
    rs = sd.release(sdf, rng=InsecureSeededRandom(21), **kw)
    rp = sd.release(frame, rng=InsecureSeededRandom(21), **kw)
    assert seen["spark"] == seen["polars"] and len(seen["spark"]) == 32
    ps = pl.from_arrow(se.to_arrow(rs.table))
    assert ps.schema == rp.table.schema and ps.height > 0
    assert rs.report.threshold == rp.report.threshold


def test_l0_choice_is_uniform_per_unit(spark):
    from sparsedp.engines.bounding import draw_bounding_secret

    n_units, keys = 3000, ["a", "b", "c", "d"]
    # the unit is also a key column, so the bounded histogram lists each unit's kept keys
    units = np.repeat(np.arange(n_units), len(keys))
    frame = pl.DataFrame({"uid": units, "u2": units, "k": keys * n_units})
    sdf = from_polars(spark, frame, "uid long, u2 long, k string")
    hist = se.histogram_frame(sdf, "uid", ["u2", "k"], 2, draw_bounding_secret(InsecureSeededRandom(7))).collect()
    kept = defaultdict(list)
    for r in hist:
        assert r[se.COUNT] == 1
        kept[r["u2"]].append(r["k"])
    assert len(kept) == n_units and all(len(v) == 2 for v in kept.values())
    subsets = Counter(tuple(sorted(v)) for v in kept.values())
    from scipy.stats import chisquare

    obs = [subsets[c] for c in combinations(keys, 2)]
    assert chisquare(obs).pvalue > 1e-4, obs


def test_bounding_secret_is_not_in_query_plans(spark):
    frame = _binding_rows(seed=9, n=2000)
    sdf = from_polars(spark, frame, "uid long, url string, cc int")
    secret = bytes(range(100, 132))
    hist = se.histogram_frame(sdf, "uid", ["url"], 2, secret)
    plans = hist._jdf.queryExecution().toString() + repr(se._BoundTask("uid", ("url",), 2, secret))
    for form in (secret.hex(), repr(secret), secret.decode("latin-1"), str(list(secret))[1:40]):
        assert form not in plans


def _noise(hist, by, cal, pre, secret):
    """The engine's per-key noise step (KeyNoise by chunks) on a Spark histogram frame, value column "count"."""
    from sparsedp.mechanisms.kernel import noise_plan
    from sparsedp.mechanisms.key_noise import KeyNoise

    task = KeyNoise(plan=noise_plan(cal), pre=pre, secret=secret)
    rel = se.SparkEngine().noise_keys(se.SparkHistogram(frame=hist, by=tuple(by), stats=None), task)
    return rel.withColumnRenamed(se.VALUE, "count")


def test_top_k_cutoff_is_exact(spark):
    counts = [9, 7, 7, 7, 5, 3, 3, 1]
    hist = spark.createDataFrame([(f"k{i}", c) for i, c in enumerate(counts)], "key string, __sparsedp_n long")
    h = se.SparkHistogram(frame=hist, by=("key",), stats=None)
    for k in range(0, 10):
        assert se.SparkEngine().kth_largest(h, k + 1) == truncate_top_k(np.array(counts), k)[0], k


def test_release_schema_and_values_like_polars(spark):
    frame = _rows(seed=11, n=8000, units=2000, keys=60)
    sdf = _spark_frame(spark, frame)
    kw = dict(privacy_unit="uid", by=["url", "cc"], epsilon=2.0, delta=1e-6)
    for extra in (dict(max_groups_per_unit=3, mechanism="gshm"), dict(top_k=10)):
        rs = sd.release(sdf, rng=InsecureSeededRandom(2), **kw, **extra)
        rp = sd.release(frame, rng=InsecureSeededRandom(2), **kw, **extra)
        assert rs.curator.engine == "spark" and rs.report.mechanism == rp.report.mechanism
        assert rs.report.threshold == rp.report.threshold
        ps = pl.from_arrow(se.to_arrow(rs.table))
        assert ps.schema == rp.table.schema
        # the same seeded source: the same secrets, the same keyed per-chunk noise streams, the same table
        assert ps.equals(rp.table), extra
        assert rs.report.released_keys == ps.height > 0
        assert ps["count"].to_list() == sorted(ps["count"].to_list(), reverse=True)
        # released keys are real keys and values lie at or above the threshold
        assert set(ps.select("url", "cc").rows()) <= set(frame.select("url", "cc").unique().rows())
        if "top_k" in extra:
            assert ps.height <= 10 and (ps["count"] > rs.report.threshold - 1e-9).all()
        else:
            assert (ps["count"] >= rs.report.threshold).all()


def test_two_actions_and_recomputation_give_one_draw(spark):
    frame = _rows(seed=13, n=8000, units=2000, keys=60)
    sdf = _spark_frame(spark, frame)
    res = sd.release(sdf, "uid", "url", epsilon=1.0, delta=1e-6, max_groups_per_unit=2, mechanism="gshm")
    assert res.table.collect() == res.table.collect()
    assert res.table.count() == res.report.released_keys
    # without any cache: the lazy frame recomputed from scratch draws identical noise
    cal = calibrate("laplace", epsilon=0.5, delta=1e-6, l0=2)
    hist = se.histogram_frame(sdf, "uid", ["url"], 2, b"b" * 32)
    lazy = _noise(hist, ["url"], cal, 1, b"n" * 32)
    first = sorted(lazy.collect())
    assert first == sorted(lazy.collect()) and len(first) > 0
    # the noise depends on the secret: another key, other values
    assert sorted(_noise(hist, ["url"], cal, 1, b"m" * 32).collect()) != first


def test_retried_task_changes_nothing(spark):
    frame = _rows(seed=17, n=8000, units=2000, keys=100)
    sdf = _spark_frame(spark, frame)
    kw = dict(privacy_unit="uid", by="url", epsilon=1.0, delta=1e-6, max_groups_per_unit=2, mechanism="gshm")
    clean = sd.release(sdf, rng=InsecureSeededRandom(4), **kw).table.collect()
    sc = spark.sparkContext
    sc.setLocalProperty(se.FAULT_PROPERTY, "1")  # every bounding/noise task: emit, then fail; retried once
    try:
        faulty = sd.release(sdf, rng=InsecureSeededRandom(4), **kw).table.collect()
    finally:
        sc.setLocalProperty(se.FAULT_PROPERTY, None)
    assert faulty == clean
    keys = [r["url"] for r in faulty]
    assert len(keys) == len(set(keys)) > 0

    def fail_first_attempt(batches):  # an upstream (input) stage whose first attempts fail
        from pyspark import TaskContext

        if TaskContext.get().attemptNumber() == 0:
            raise RuntimeError("injected input fault")
        yield from batches

    flaky = sdf.mapInArrow(fail_first_attempt, sdf.schema)
    assert sd.release(flaky, rng=InsecureSeededRandom(4), **kw).table.collect() == clean


def test_gshm_release_probability_on_spark(spark):
    """The release law of tests/mechanisms/test_mech_release_law.py, run through the Spark noise step."""
    from pyspark.sql import functions as F

    n, pre = 40_000, 4
    offsets = [0, 2, 5, -1]
    cal = calibrate("gshm", epsilon=1.0, delta=0.02, l0=2)
    m, s2 = int(cal.tau), cal.noise.sigma2
    ids = spark.range(n * len(offsets))
    off = F.element_at(F.array(*[F.lit(o) for o in offsets]), (F.col("id") / n).cast("int") + 1)
    hist = ids.select(F.col("id").alias("key"), (F.lit(pre) + off).cast("long").alias(se.COUNT))
    rel = _noise(hist, ["key"], cal, pre, InsecureSeededRandom(101).random_bytes(32))
    rows = rel.select((F.col("key") / n).cast("int").alias("g"), F.col("count")).collect()
    by_group = Counter(r["g"] for r in rows)
    assert min(r["count"] for r in rows) >= pre + m
    for g, o in enumerate(offsets):
        if o < 0:
            assert by_group[g] == 0
            continue
        p = dgauss_sf(m - o, s2)
        se_ = math.sqrt(p * (1 - p) / n)
        assert abs(by_group[g] / n - p) <= 4 * se_, (o, by_group[g] / n, p)


def test_cli_release_with_spark_engine(spark, tmp_path):
    from typer.testing import CliRunner

    from sparsedp.cli import app

    path = tmp_path / "shares.parquet"
    _rows(seed=19, n=8000, units=2000, keys=40).write_parquet(path)
    out = tmp_path / "released.parquet"
    r = CliRunner().invoke(app, ["release", str(path), "--unit", "uid", "--by", "url", "--epsilon", "1",
                                 "--delta", "1e-6", "--max-groups", "2", "--engine", "spark", "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert "spark engine" in r.output
    released = pl.read_parquet(out)
    assert released.columns == ["url", "count", "count_lo", "count_hi"] and released.height > 0


def test_bad_input_fails_before_release(spark):
    sdf = spark.createDataFrame([(1, "a"), (None, "b")], "uid long, url string")
    with pytest.raises(sd.errors.InputDataError, match="null"):
        sd.release(sdf, "uid", "url", epsilon=1.0, delta=1e-6, max_groups_per_unit=2)
    with pytest.raises(sd.errors.InputDataError, match="usr"):
        sd.release(sdf, "usr", "url", epsilon=1.0, delta=1e-6, max_groups_per_unit=2)
    nan = spark.createDataFrame([(1, 0.5), (2, float("nan"))], "uid long, x double")
    with pytest.raises(sd.errors.InputDataError, match="NaN"):
        sd.release(nan, "uid", "x", epsilon=1.0, delta=1e-6, max_groups_per_unit=2)
    with pytest.raises(sd.errors.InvalidParameterError, match="spark"):
        sd.release(sdf, "uid", "url", epsilon=1.0, delta=1e-6, max_groups_per_unit=2, engine="polars")


def test_pure_and_misra_gries_run_on_spark_like_polars(spark):
    """The mechanisms that need the whole histogram (pure DP, Misra–Gries) run on Spark through
    Engine.collect (bounded per-key counts, never rows, reach the driver): same table as Polars."""
    frame = pl.DataFrame({"uid": list(range(600)), "url": ["a"] * 300 + ["b"] * 200 + ["c"] * 100})
    sdf = from_polars(spark, frame, "uid long, url string")
    with pytest.raises(sd.errors.InvalidParameterError, match="unit_sketch='group-privacy'"):
        sd.release(sdf, "uid", "url", epsilon=1.0, delta=1e-6, mechanism=sd.MisraGries(sketch_size=4),
                   rng=InsecureSeededRandom(3))  # the user-level PAMG sketch reads the pairs in this process
    for mech, delta in ((sd.MisraGries(sketch_size=4, unit_sketch="group-privacy"), 1e-6),
                        (sd.PureSparse(max_units=1000, max_key_bytes=4), 0)):
        rs = sd.release(sdf, "uid", "url", epsilon=1.0, delta=delta, mechanism=mech, rng=InsecureSeededRandom(3))
        rp = sd.release(frame, "uid", "url", epsilon=1.0, delta=delta, mechanism=mech, rng=InsecureSeededRandom(3))
        assert rs.curator.engine == "spark" and rs.report.mechanism == mech.name
        assert pl.from_arrow(se.to_arrow(rs.table)).equals(rp.table) if not isinstance(rs.table, pl.DataFrame) \
            else rs.table.equals(rp.table)
        assert rp.table.height > 0


def test_several_noise_chunks_same_table_as_polars(spark, monkeypatch):
    """With several noise chunks (forced small here), Spark and Polars still derive every key's noise from the
    same (chunk, position) stream words: identical tables for the same seeded source."""
    from sparsedp.core import noise_chunks

    monkeypatch.setattr(noise_chunks, "KEYS_PER_CHUNK", 7)
    frame = _rows(seed=11, n=8000, units=2000, keys=60)
    sdf = _spark_frame(spark, frame)
    kw = dict(privacy_unit="uid", by=["url", "cc"], epsilon=2.0, delta=1e-6, max_groups_per_unit=3, mechanism="gshm")
    rs = sd.release(sdf, rng=InsecureSeededRandom(2), **kw)
    rp = sd.release(frame, rng=InsecureSeededRandom(2), **kw)
    assert pl.from_arrow(se.to_arrow(rs.table)).equals(rp.table) and rp.table.height > 0
