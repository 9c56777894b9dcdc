"""Misra–Gries from a Spark DataFrame: one sketch per Spark partition (executors), merged in partition order."""

import numpy as np
import polars as pl

import sparsedp as sd
from sparsedp.noise import InsecureSeededRandom
from sparsedp.sketches import MisraGries as Sketch
from sparsedp.sketches.partitions import sketch_data

from spark_frames import from_polars


def test_spark_partitions_sketched_in_executors_and_merged_in_order(spark):
    items = (np.random.default_rng(3).zipf(1.3, 40_000) % 700).astype(np.int64)
    sdf = from_polars(spark, pl.DataFrame({"item": items, "label": [f"s{x}" for x in items]}),
                      "item long, label string").repartition(3)
    from sparsedp.sketches.spark_sketch import stream_frame

    parts = stream_frame(sdf, ["item"]).rdd.glom().collect()  # the partitions' streams, in partition order
    summary = sketch_data(sdf, "item", 30)
    assert summary.info.partitions == spark.sparkContext.defaultParallelism and summary.info.rows_in == items.size
    # each stream is sorted and a key lives in one partition only: removing a row changes one stream by one element
    assert all([r[0] for r in p] == sorted(r[0] for r in p) for p in parts)
    homes = [{r[0] for r in p} for p in parts]
    assert sum(len(h) for h in homes) == len(set().union(*homes))
    want = [Sketch(30).update(np.asarray([r[0] for r in p], np.int64)) for p in parts]
    assert list(summary.parts) == want and summary.sketch == Sketch.merge_all(want)
    res = sd.release(sdf, None, "label", 1.0, 1e-6, mechanism=sd.MisraGries(sketch_size=30),
                     rng=InsecureSeededRandom(4))
    table = res.table if isinstance(res.table, pl.DataFrame) else pl.from_arrow(res.table.toArrow())
    stored = set(sketch_data(sdf, "label", 30).sketch.counters())
    assert table.height > 0 and set(table["label"].to_list()) <= stored
    assert res.curator.engine == "spark"
