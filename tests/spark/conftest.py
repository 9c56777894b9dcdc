"""One local Spark session for every Spark test (``local[2,2]``: 2 threads, each task may be retried once)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    pytest.importorskip("pyspark", reason="pyspark is not installed (pip install 'sparsedp[spark]')")
    from pyspark.sql import SparkSession

    session = (SparkSession.builder.master("local[2,2]").appName("sparsedp-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "4")
               .config("spark.default.parallelism", "2")
               .config("spark.driver.memory", "1g")
               .config("spark.sql.warehouse.dir", str(tmp_path_factory.mktemp("spark-warehouse")))
               .getOrCreate())
    session.sparkContext.setLogLevel("FATAL")
    yield session
    session.stop()
