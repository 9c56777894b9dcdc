"""One local Spark session for every Spark test (``local[2,2]``: 2 threads, each task may be retried once); the
tests build their DataFrames from Arrow (spark_frames.py)."""

from __future__ import annotations

import pytest


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook, which turns the group into the node id's suffix
def pytest_collection_modifyitems(config, items):
    """Every test that uses the ``spark`` fixture runs in the "spark" xdist group (``--dist loadgroup``): one
    worker, one JVM. A test outside the group would start a second Spark session in another worker (about 15 s
    of JVM start-up on 2 cores) just for itself."""
    for item in items:
        if "spark" in getattr(item, "fixturenames", ()) and item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group("spark"))


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
               # the JVM's client compiler only and one GC thread: the tests' jobs are small and short, and the
               # optimising compiler's and the parallel collector's threads cost more CPU than they save (the
               # Spark tests' CPU on two cores 141 -> 80 s); the code run is the same
               .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
               .config("spark.sql.warehouse.dir", str(tmp_path_factory.mktemp("spark-warehouse")))
               .getOrCreate())
    session.sparkContext.setLogLevel("FATAL")
    yield session
    session.stop()
