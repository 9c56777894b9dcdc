"""``optimal-partition`` on Spark: the keys-only release runs in the executors through the same per-key task
(``PartitionSelectionTask`` from the keyed chunk streams), so the same seeded source gives the same key set as
Polars, and the published frame has the ``by`` columns only."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

import sparsedp as sd
from sparsedp.engines import spark_engine as se
from sparsedp.noise import InsecureSeededRandom

from spark_frames import from_polars

#: one JVM when run with --dist loadgroup; slow (two Spark jobs, about 100 s on a loaded machine): -m slow
pytestmark = [pytest.mark.xdist_group("spark"), pytest.mark.slow]


def test_optimal_partition_on_spark_like_polars(spark):
    r = np.random.default_rng(5)
    n = 4000
    frame = pl.DataFrame({"uid": np.arange(n), "url": [f"s{x}" for x in r.zipf(1.3, n) % 300]})
    sdf = from_polars(spark, frame, "uid long, url string")
    kw = dict(privacy_unit="uid", by="url", epsilon=1.0, delta=1e-6, mechanism="optimal-partition")
    rs = sd.release(sdf, rng=InsecureSeededRandom(4), **kw)
    rp = sd.release(frame, rng=InsecureSeededRandom(4), **kw)
    spark_table = pl.from_arrow(se.to_arrow(rs.table))
    assert rs.curator.engine == "spark" and spark_table.columns == ["url"] == rp.table.columns
    assert sorted(spark_table["url"].to_list()) == sorted(rp.table["url"].to_list()) and rp.table.height > 0
