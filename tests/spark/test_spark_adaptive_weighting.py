"""``mad`` and ``mad2r`` on Spark (Engine.round_histogram in the executors): the same released table as Polars for
the same seeded source (the same keyed ℓ0 choices, the same per-unit code, the same per-key noise), with l0
binding for most units and a second round that excludes round 1's keys."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

import sparsedp as sd
from sparsedp.noise import InsecureSeededRandom

pytestmark = pytest.mark.xdist_group("spark")  # one JVM when run with --dist loadgroup


def _rows(seed: int = 3, n: int = 6000, units: int = 400, keys: int = 120) -> pl.DataFrame:
    r = np.random.default_rng(seed)
    k = r.zipf(1.4, n) % keys
    return pl.DataFrame({"uid": r.integers(0, units, n), "url": [f"site{x}.example" for x in k],
                         "cc": (k % 3).astype(np.int32)})


@pytest.mark.slow  # two Spark releases of two rounds each: 20-100 s on the shared two-core machine
@pytest.mark.parametrize("name", ["mad", "mad2r"])
def test_spark_releases_the_polars_table(spark, name):
    frame = _rows()
    kw = dict(epsilon=3.0, delta=1e-6, max_groups_per_unit=2, mechanism=name)
    local = sd.release(frame, "uid", ["url", "cc"], rng=InsecureSeededRandom(4), **kw)
    assert local.table.height > 5
    remote = sd.release(spark.createDataFrame(frame.to_arrow()), "uid", ["url", "cc"], rng=InsecureSeededRandom(4),
                        **kw)
    got = pl.from_arrow(remote.table.toArrow()) if hasattr(remote.table, "toArrow") else pl.from_pandas(
        remote.table.toPandas())
    cols = ["url", "cc", "weight"]
    a = local.table.select(cols).sort(["url", "cc"])
    b = got.select(cols).with_columns(pl.col("cc").cast(a.schema["cc"])).sort(["url", "cc"])
    assert a.equals(b)
