"""Per-key quantiles on the Spark engine (issue 34): the quantile contribution model runs in the executors
(``repartition(unit) → mapInArrow(partial_cells)``) with the secret drawn on the driver at the embedded engines'
point, so for one seeded source Spark's cells, and therefore its released table, equal the Polars engine's;
bad value columns are refused before any draw."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

import sparsedp as sd
from sparsedp.engines import spark_engine as se
from sparsedp.engines.polars_engine import PolarsEngine
from sparsedp.errors import InputDataError
from sparsedp.noise import InsecureSeededRandom

from spark_frames import from_polars

pytestmark = pytest.mark.xdist_group("spark")

SCHEMA = "uid long, url string, cc long, dwell double"


def _rows(seed=7, n=6000, units=1500, keys=40):
    r = np.random.default_rng(seed)
    u = r.integers(0, units, n)
    k = r.zipf(1.4, n) % keys
    return pl.DataFrame({"uid": u, "url": [f"site{x}.example" for x in k], "cc": (k % 3).astype(np.int64),
                         "dwell": np.round(r.lognormal(3.0, 1.0, n), 1)})


@pytest.mark.slow  # ~1 min on 2 loaded cores; the release test below checks the same path end to end
def test_quantile_cells_like_polars(spark):
    """The engines' cells for the same released keys and seed: equal (Spark sums per-partition partial counts of
    the same per-unit choice), with units over l0 and pairs over max_rows present so the choice matters."""
    frame = _rows()
    sdf = from_polars(spark, frame, SCHEMA).repartition(3)
    keys = frame.select("url", "cc").unique().head(25).to_arrow()
    qs = [sd.Median("dwell", 0, 300, cells=64), sd.Quantile("dwell", 0.9, 0, 300, cells=32, max_rows=2)]
    want = PolarsEngine().quantile_cells(frame, "uid", ["url", "cc"], keys, qs, 2, InsecureSeededRandom(3))
    got = se.SparkEngine().quantile_cells(sdf, "uid", ["url", "cc"], keys, qs, 2, InsecureSeededRandom(3))
    other = PolarsEngine().quantile_cells(frame, "uid", ["url", "cc"], keys, qs, 2, InsecureSeededRandom(4))
    for w, g, o in zip(want, got, other):
        assert w.n_keys == g.n_keys == 25 and w.rows > 100
        assert np.array_equal(w.key, g.key) and np.array_equal(w.cell, g.cell) and np.array_equal(w.count, g.count)
    assert any(not np.array_equal(w.count, o.count) or not np.array_equal(w.cell, o.cell)
               for w, o in zip(want, other))  # the seed matters: the comparison can fail


@pytest.mark.slow  # ~1-2 min on 2 loaded cores (a Spark release); the per-unit locality Spark relies on is checked
# in the default run by tests/quantiles/test_quantile_cells.py
def test_release_with_quantiles_like_polars(spark):
    frame = _rows(n=2500, units=700, keys=25)
    sdf = from_polars(spark, frame, SCHEMA)
    kw = dict(privacy_unit="uid", by=["url", "cc"], epsilon=2.0, delta=1e-6, max_groups_per_unit=2,
              aggregates=[sd.Count(), sd.Median("dwell", 0, 300, cells=128),
                          sd.Quantile("dwell", 0.9, 0, 300, cells=64, max_rows=2)])
    rs = sd.release(sdf, rng=InsecureSeededRandom(2), **kw)
    rp = sd.release(frame, rng=InsecureSeededRandom(2), **kw)
    cols = ["url", "cc", "count", "median_dwell", "q90_dwell"]
    ps = pl.from_arrow(se.to_arrow(rs.table)).select(cols)
    assert rs.curator.engine == "spark" and ps.height >= 3
    assert ps.equals(rp.table.select(cols))
    assert [n for n in rs.report.notes if "dwell" in n] == [n for n in rp.report.notes if "dwell" in n]


def test_bad_quantile_column_refused_before_any_draw(spark):
    class Tripwire:
        def uint64(self, size):
            raise AssertionError("randomness drawn before validation finished")

        random_bytes = getrandbits = randbelow = uint64

    frame = _rows(n=200).with_columns(pl.when(pl.col("uid") == pl.col("uid").first()).then(float("nan"))
                                      .otherwise(pl.col("dwell")).alias("dwell"))
    sdf = from_polars(spark, frame, SCHEMA)
    with pytest.raises(InputDataError, match="NaN or infinite"):
        sd.release(sdf, "uid", "url", 1.0, 1e-6, max_groups_per_unit=2, aggregates=[sd.Median("dwell", 0, 300)],
                   rng=Tripwire())
