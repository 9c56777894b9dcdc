"""Every ``plan()`` row and every seeded release captured before the query-model refactor (issue 29) is
recomputed with the current code and must be identical: released keys and values (bit for bit, types and
column dtypes included), every public :class:`~sparsedp.report.Report` field, the deterministic curator figures,
the CLI's written file and its metadata.

The goldens (``plan_grid_bd27e4f.json``, ``releases_bd27e4f.json``) were written by ``tests/golden/capture.py``
from the code of commit bd27e4f; the cases, the data and the serialisation live there. The Spark engine's goldens
are checked in ``tests/spark/test_spark_golden.py``. The cases that take seconds each (small-ε top-k, large k or
n, pure mechanisms over a domain, the full case list on the non-Polars engines) are marked ``slow``.
Polars' ``hash`` (the key fingerprints of the ℓ0 choice) is stable within one Polars version: the release tests
skip under another Polars than the one the file records.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import polars as pl
import pytest

_spec = importlib.util.spec_from_file_location("golden_capture", Path(__file__).parent / "capture.py")
capture = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("golden_capture", capture)
_spec.loader.exec_module(capture)

PLANS = json.loads(capture.PLAN_FILE.read_text())["cases"]
RELEASES = json.loads(capture.RELEASE_FILE.read_text())

#: cases run on every engine by default (the full list on the other engines is slow)
CORE = ("count gshm l0=5", "count two keys l0=3", "count laplace l0=2", "sum+mean gshm l0=4", "sum signed + named",
        "top_k sums", "auto bound", "public keys auto", "two-stage")
#: other releases that take seconds (enumerations over a domain, the Misra–Gries stream)
SLOW_OTHER = ("keep-heavy", "kh-double-prime", "misra-gries", "misra-gries pure", "misra-gries no unit", "pure-sparse")
#: embedded-engine cases that take seconds (float policy descent)
SLOW_LOG = ("policy-gaussian float",)


same, json_same, compare_release = capture.same, capture.json_same, capture.compare_release


@pytest.fixture(scope="module")
def polars_version():
    if RELEASES["versions"]["polars"] != pl.__version__:
        pytest.skip(f"golden releases written with Polars {RELEASES['versions']['polars']} (key fingerprints are "
                    f"per Polars version)")


def test_goldens_cover_the_cases():
    assert set(PLANS) == set(capture.plan_cases())
    assert all("error" not in c["golden"] for c in PLANS.values())
    assert set(RELEASES["releases"]) == set(capture.EMBEDDED)
    assert all(set(r) == set(capture._log_cases()) for r in RELEASES["releases"].values())
    assert set(RELEASES["other_releases"]) == set(capture._other_cases())
    # every registered mechanism is released at least once
    from sparsedp.mechanisms import registry

    used = {r["report"]["mechanism"] for e in RELEASES["releases"].values() for r in e.values() if "report" in r}
    used |= {r["report"]["mechanism"] for r in RELEASES["other_releases"].values()}
    # "auto" releases as the mechanism it picks; "pure-blanket" was registered after bd27e4f (issue 32): its releases
    # are tested in tests/pure/test_pure_blanket_registered.py; "optimal-partition" after it too (issue 33): its
    # releases are tested in tests/mechanisms/test_optimal_partition.py; "mad"/"mad2r" (issue 33) in
    # tests/mechanisms/test_adaptive_weighting.py
    assert set(registry.names()) - used <= {"auto", "pure-blanket", "optimal-partition", "mad", "mad2r"}
    polars = RELEASES["releases"]["polars"]
    assert not any("refused" in r for e in RELEASES["releases"].values() for r in e.values())
    assert sum(len(next(iter(r["table"]["values"].values()))) > 0 for r in polars.values()) >= len(polars) - 1


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if c[1] else n
                                  for n, c in capture.plan_cases().items()])
def test_plan(name):
    case = PLANS[name]
    json_same(capture.plan_golden(case["args"]), case["golden"], name)


@pytest.fixture(scope="module")
def log_frame():
    return capture.log()


@pytest.fixture(scope="module")
def log_parquet(log_frame, tmp_path_factory):
    p = tmp_path_factory.mktemp("golden") / "log.parquet"
    log_frame.write_parquet(p)
    return str(p)


def _release_params():
    for engine in capture.EMBEDDED:
        for name in capture._log_cases():
            fast = (engine == "polars" or name in CORE) and name not in SLOW_LOG
            yield pytest.param(engine, name, marks=() if fast else pytest.mark.slow, id=f"{engine}-{name}")


@pytest.mark.parametrize("engine,name", list(_release_params()))
def test_release(polars_version, log_frame, log_parquet, engine, name):
    got = capture.log_release(name, *capture.engine_input(engine, log_frame, log_parquet))
    compare_release(got, RELEASES["releases"][engine][name], f"{engine}/{name}")


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW_OTHER else n
                                  for n in capture._other_cases()])
def test_other_release(polars_version, name):
    json_same(capture.other_release(name), RELEASES["other_releases"][name], name)


def test_vectors(polars_version):
    json_same(capture.vectors_golden(), RELEASES["vectors"], "vectors")


def test_alp(polars_version):
    json_same(capture.alp_golden(), RELEASES["alp"], "alp")


def test_sketches():
    json_same(capture.sketches_golden(), RELEASES["sketches"], "sketches")


def test_release_histogram():
    json_same(capture.histogram_golden(), RELEASES["release_histogram"], "release_histogram")


def test_cli_release_file(polars_version, tmp_path):
    json_same(capture.cli_golden(tmp_path), RELEASES["cli"], "cli")
