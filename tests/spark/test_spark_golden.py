"""The Spark engine's seeded releases captured before the query-model refactor (issue 29) must not change.

``tests/golden/releases_spark_bd27e4f.json`` was written by ``tests/golden/capture.py --spark`` from the code of
commit bd27e4f: every case of the embedded engines' golden releases (counts, SUM/MEAN, top-k, public keys, the
automatic bound, two-stage, …) on a Spark frame of the same rows, with the released table, every public report
field and the deterministic curator figures (or that it was refused, for a request Spark does not serve: the
automatic bound, set union, two-stage and public keys at bd27e4f). Each is
re-released here and compared exactly (``tests/golden/test_query_model_golden.py`` has the comparison).
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import polars as pl
import pytest

pytestmark = pytest.mark.xdist_group("spark")  # one JVM when run with --dist loadgroup

_GOLDEN = Path(__file__).parents[1] / "golden"
_spec = importlib.util.spec_from_file_location("golden_capture", _GOLDEN / "capture.py")
capture = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("golden_capture", capture)
_spec.loader.exec_module(capture)

GOLDEN = json.loads(capture.SPARK_FILE.read_text())


@pytest.fixture(scope="module")
def spark_log(spark):
    if GOLDEN["versions"]["polars"] != pl.__version__:
        pytest.skip(f"golden releases written with Polars {GOLDEN['versions']['polars']}")
    return capture.spark_frame(spark, capture.log())


def test_spark_goldens_cover_the_embedded_cases():
    assert set(GOLDEN["releases"]) == set(capture._log_cases())
    assert sum("refused" not in r for r in GOLDEN["releases"].values()) >= 10


#: run by default (each Spark release takes seconds); the other cases are marked slow
FAST = ("count gshm l0=5", "count two keys l0=3", "sum+mean gshm l0=4", "top_k sums", "auto bound", "two-stage",
        "public keys auto")


@pytest.mark.parametrize("name", [n if n in FAST else pytest.param(n, marks=pytest.mark.slow)
                                  for n in capture._log_cases()])
def test_spark_release(spark_log, name):
    capture.compare_release(capture.log_release(name, spark_log, "spark"), GOLDEN["releases"][name], name)
