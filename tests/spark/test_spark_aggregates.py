"""Spark engine with SUM/MEAN aggregates: the same table as the Polars engine for the same seeded source (the
same kept pairs, grid sums and per-chunk noise words), bad value columns refused before any draw."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

import sparsedp as sd
from sparsedp.engines import spark_engine as se
from sparsedp.errors import InputDataError
from sparsedp.noise import InsecureSeededRandom

from spark_frames import from_polars

pytestmark = pytest.mark.xdist_group("spark")

AGGS = [sd.Count(), sd.Sum("dwell", lower=0, upper=600), sd.Mean("dwell", lower=0, upper=600),
        sd.Sum("likes", lower=-2, upper=10, name="likes_total")]


def _rows(seed=11, n=8000, units=2000, keys=60):
    r = np.random.default_rng(seed)
    u = r.integers(0, units, n)
    k = r.zipf(1.4, n) % keys
    return pl.DataFrame({"uid": u, "url": [f"site{x}.example" for x in k], "cc": (k % 3).astype(np.int64),
                         "dwell": r.uniform(0, 400, n), "likes": r.integers(-3, 8, n)})


def test_release_with_aggregates_like_polars(spark):
    frame = _rows()
    sdf = from_polars(spark, frame, "uid long, url string, cc long, dwell double, likes long")
    kw = dict(privacy_unit="uid", by=["url", "cc"], epsilon=2.0, delta=1e-6, max_groups_per_unit=2,
              aggregates=AGGS)
    for extra in ({}, dict(max_groups_per_unit=None, top_k=4)):
        rs = sd.release(sdf, rng=InsecureSeededRandom(2), **{**kw, **extra})
        rp = sd.release(frame, rng=InsecureSeededRandom(2), **{**kw, **extra})
        assert rs.curator.engine == "spark" and rs.report.threshold == rp.report.threshold
        assert rs.report.column_errors == rp.report.column_errors
        ps = pl.from_arrow(se.to_arrow(rs.table))
        assert [c for c in ps.columns if not c.endswith(("_lo", "_hi"))] == ["url", "cc", "count", "sum_dwell", "mean_dwell",
                                                                            "likes_total"]
        assert {"count_lo", "count_hi"} <= set(ps.columns)  # the default 95 % intervals, on Spark too
        assert ps.schema == rp.table.schema
        assert ps.height >= 3 and ps.equals(rp.table), extra
    other = pl.from_arrow(se.to_arrow(sd.release(sdf, rng=InsecureSeededRandom(3), **kw).table))
    assert not other.equals(ps)


def test_bad_value_column_refused_before_any_draw(spark):
    class Tripwire:
        def uint64(self, size):
            raise AssertionError("randomness drawn before validation finished")

        random_bytes = uint64

    frame = _rows(n=200).with_columns(pl.when(pl.col("uid") == pl.col("uid").first()).then(float("nan"))
                                      .otherwise(pl.col("dwell")).alias("dwell"))
    sdf = from_polars(spark, frame, "uid long, url string, cc long, dwell double, likes long")
    with pytest.raises(InputDataError, match="NaN or infinite"):
        sd.release(sdf, "uid", "url", 1.0, 1e-6, max_groups_per_unit=2, aggregates=AGGS, rng=Tripwire())


def test_release_with_a_column_shape_like_polars(spark):
    """A correlated column shape (noise L z on refined grids, docs/proofs/aggregates.md §7): Spark's tasks run
    the same KeyNoise.apply_joint, so the table equals the Polars engine's for the same seeded source."""
    frame = _rows()
    sdf = from_polars(spark, frame, "uid long, url string, cc long, dwell double, likes long")
    a, b = AGGS[1], AGGS[3]
    sa, sb = a.sensitivity * a.granularity, b.sensitivity * b.granularity
    shape = [[sa * sa, -0.4 * sa * sb], [-0.4 * sa * sb, sb * sb]]
    kw = dict(privacy_unit="uid", by=["url", "cc"], epsilon=2.0, delta=1e-6, max_groups_per_unit=2,
              aggregates=AGGS, column_shape=shape)
    rs = sd.release(sdf, rng=InsecureSeededRandom(5), **kw)
    rp = sd.release(frame, rng=InsecureSeededRandom(5), **kw)
    assert rs.curator.engine == "spark" and rs.report.column_errors == rp.report.column_errors
    ps = pl.from_arrow(se.to_arrow(rs.table))
    assert ps.height >= 3 and ps.equals(rp.table)


def test_variance_and_intervals_like_polars(spark):
    """sd.Variance/sd.Std (the squares column computed per partition) and release(..., interval=…) on a Spark
    frame: the same table, intervals included, as the Polars engine for the same seeded source."""
    frame = _rows()
    sdf = from_polars(spark, frame, "uid long, url string, cc long, dwell double, likes long")
    aggs = [sd.Count(), sd.Mean("dwell", lower=0, upper=600), sd.Variance("dwell", 0, 600), sd.Std("likes", -2, 10)]
    kw = dict(privacy_unit="uid", by=["url", "cc"], epsilon=2.0, delta=1e-6, max_groups_per_unit=2,
              aggregates=aggs, interval=0.9)
    rs = sd.release(sdf, rng=InsecureSeededRandom(2), **kw)
    rp = sd.release(frame, rng=InsecureSeededRandom(2), **kw)
    ps = pl.from_arrow(se.to_arrow(rs.table))
    assert {"count_lo", "mean_dwell_hi", "variance_dwell", "std_likes"} <= set(ps.columns)
    assert ps.height >= 3 and ps.equals(rp.table)
    assert rs.report.notes == rp.report.notes
