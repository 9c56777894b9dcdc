"""Tumult Analytics peer (pyspark 3.5, local mode).

Tumult does not expose a threshold for its private key selection, so this peer only releases. The query is
the one Tumult's documentation recommends for counts over unknown keys: ``get_groups`` (private key
selection) on half the budget, then a ``count_distinct("unit")`` grouped by the selected keys on the other
half, under ``AddRowsWithID("unit")`` (add/remove one unit) with ``MaxGroupsPerID("key", l0)`` and
``MaxRowsPerGroupPerID("key", 1)`` enforced by Tumult itself.
"""

from __future__ import annotations

import os

from _protocol import main


def thresholds(eps, delta, l0):
    return []


def release(table, eps, delta, l0, noise):
    os.environ.setdefault("PYSPARK_PYTHON", os.sys.executable)
    from pyspark.sql import SparkSession
    import tmlt.analytics as ta
    spark = (SparkSession.builder.master("local[2]").config("spark.driver.memory", "4g")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "4").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    sdf = spark.createDataFrame(table.to_pandas())
    budget = ta.ApproxDPBudget(eps, delta)
    sess = ta.Session.from_dataframe(privacy_budget=budget, source_id="t", dataframe=sdf,
                                     protected_change=ta.AddRowsWithID("unit"))
    bounded = (ta.QueryBuilder("t").enforce(ta.MaxGroupsPerID("key", l0))
               .enforce(ta.MaxRowsPerGroupPerID("key", 1)))
    groups = sess.evaluate(bounded.get_groups(["key"]), ta.ApproxDPBudget(eps / 2, delta))
    keys = ta.KeySet.from_dataframe(groups)
    mech = ta.CountDistinctMechanism.LAPLACE if noise == "laplace" else ta.CountDistinctMechanism.GAUSSIAN
    q = (ta.QueryBuilder("t").enforce(ta.MaxGroupsPerID("key", l0)).enforce(ta.MaxRowsPerGroupPerID("key", 1))
         .groupby(keys).count_distinct(["unit"], name="count", mechanism=mech))
    rest = ta.PureDPBudget(eps / 2) if noise == "laplace" else ta.ApproxDPBudget(eps / 2, 0.0)
    out = sess.evaluate(q, rest).toPandas()
    spark.stop()
    from importlib.metadata import version
    return out["key"].astype(str).tolist(), out["count"].astype(float).tolist(), {
        "version": f"tmlt.analytics {version('tmlt.analytics')}, pyspark {version('pyspark')}",
        "mechanism": f"get_groups (ε/2, δ) + count_distinct {noise} (ε/2)"}


if __name__ == "__main__":
    main(thresholds, release)
