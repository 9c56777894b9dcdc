"""Released tables for fixed seeds against those captured before the Polars-path speed-up (c516e8d).

The ℓ0 choice (the secret-keyed per-unit rank), the per-key counts and grid sums, the noise and the threshold
must not change when the engines' hot path is rewritten: the tables of ``release_tables_c516e8d.json`` were
written by this module (``python tests/golden/test_release_tables_golden.py --write``) at commit c516e8d,
before any change, and every case is re-released here on the Polars engine (frame and Parquet file), and on
the DuckDB, Arrow and pandas engines. Polars' ``hash`` (the fingerprints) is stable within one Polars version:
the file records the version it was written with, and the test is skipped under another one.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest

import sparsedp as sd
from sparsedp.engines import get_engine
from sparsedp.noise import InsecureSeededRandom

GOLDEN = Path(__file__).parent / "release_tables_c516e8d.json"


def _data(n_rows: int = 60_000, n_units: int = 3000, n_keys: int = 400, seed: int = 5) -> pl.DataFrame:
    """Pareto-tailed units (many over l0), Zipf-like string keys, repeated rows, two value columns."""
    g = np.random.default_rng(seed)
    w = g.pareto(1.0, n_units) + 1
    units = g.choice(n_units, size=n_rows, p=w / w.sum())
    ranks = np.minimum(g.zipf(1.3, n_rows), n_keys) - 1
    words = np.array([f"page/{i:04d}" for i in range(n_keys - 1)] + ["café ☕"])
    return pl.DataFrame({"uid": (units * 7 + 3).astype(np.int64), "url": words[ranks],
                         "lang": np.where(units % 3 == 0, "de", "en"),
                         "dwell": g.uniform(0, 900, n_rows), "clicks": g.integers(0, 20, n_rows)})


KW = dict(privacy_unit="uid", epsilon=1.0, delta=1e-6)
CASES = {
    "count": dict(by="url", max_groups_per_unit=5),
    "count_two_keys": dict(by=["url", "lang"], max_groups_per_unit=3),
    "laplace": dict(by="url", max_groups_per_unit=2, mechanism="laplace"),
    "count_two_sums": dict(by="url", max_groups_per_unit=5,
                           aggregates=[sd.Count(), sd.Sum("dwell", 0, 600), sd.Sum("clicks", 0, 10)]),
    "count_mean": dict(by="url", max_groups_per_unit=4, aggregates=[sd.Count(), sd.Mean("dwell", 0, 600)]),
    # top-k CSH bounds nothing (l0 None: de-duplication only)
    "top_k": dict(by="url", top_k=25),
    "top_k_sums": dict(by="url", top_k=25, aggregates=[sd.Count(), sd.Sum("dwell", 0, 600), sd.Mean("clicks", 0, 10)]),
}


def _release(name: str, data, engine: str | None = None) -> dict:
    t = sd.release(data, **KW, **CASES[name], engine=engine, rng=InsecureSeededRandom(sum(map(ord, name)))).table
    t = t if isinstance(t, pl.DataFrame) else pl.DataFrame(t)  # Arrow / pandas inputs give their own kind
    return {c: t[c].to_list() for c in t.columns}


HIST_CASES = {  # the bounded histogram itself (every key's count and grid sums, before noise and threshold)
    "count": (["url"], 5, ()),
    "count_two_keys": (["url", "lang"], 3, ()),
    "count_two_sums": (["url"], 5, CASES["count_two_sums"]["aggregates"]),
    "count_mean": (["url"], 4, CASES["count_mean"]["aggregates"]),
    "sums_l0_none": (["url"], None, CASES["top_k_sums"]["aggregates"]),
}


def _histogram(name: str, data, engine: str = "polars") -> dict:
    by, l0, aggs = HIST_CASES[name]
    h = get_engine(engine).histogram(data, "uid", by, l0, InsecureSeededRandom(7), aggregates=aggs)
    out = {c: h.keys.column(c).to_pylist() for c in by}
    out["count"] = [int(x) for x in h.counts]
    for i, col in enumerate(h.columns):
        out[f"grid{i}"] = [int(x) for x in col]
    out["stats"] = h.stats.to_dict()
    return out


def _same(got: dict, want: dict) -> None:
    assert list(got) == list(want)
    for c in want:
        g, w = got[c], want[c]
        assert len(g) == len(w), c
        if w and isinstance(w[0], float):
            assert all(a == b or (math.isnan(a) and math.isnan(b)) for a, b in zip(g, w)), c
        else:
            assert g == w, c


@pytest.fixture(scope="module")
def golden():
    d = json.loads(GOLDEN.read_text())
    if d["polars"] != pl.__version__:
        pytest.skip(f"golden tables written with Polars {d['polars']} (fingerprints are per Polars version)")
    return d


@pytest.fixture(scope="module")
def frame():
    return _data()


@pytest.fixture(scope="module")
def parquet(frame, tmp_path_factory):
    p = tmp_path_factory.mktemp("golden") / "log.parquet"
    frame.write_parquet(p)
    return str(p)


def test_cases_release_keys_and_drop_pairs(golden):
    assert set(golden["tables"]) == set(CASES) and set(golden["histograms"]) == set(HIST_CASES)
    assert all(len(next(iter(t.values()))) >= 10 for t in golden["tables"].values())  # every case releases keys
    assert all(h["stats"]["pairs_dropped_l0"] > 1000 for n, h in golden["histograms"].items() if HIST_CASES[n][1])


@pytest.mark.parametrize("name", list(HIST_CASES))
@pytest.mark.parametrize("engine", ["polars", "duckdb"])
def test_bounded_histograms(golden, frame, parquet, name, engine):
    want = golden["histograms"][name]
    assert _histogram(name, frame, engine) == want
    assert _histogram(name, parquet, engine) == want


@pytest.mark.parametrize("name", list(CASES))
def test_polars_engine_frame_and_file(golden, frame, parquet, name):
    _same(_release(name, frame, "polars"), golden["tables"][name])
    _same(_release(name, parquet, "polars"), golden["tables"][name])


@pytest.mark.parametrize("name", ["count", "count_two_sums", "count_mean", "top_k_sums"])
@pytest.mark.parametrize("engine", ["duckdb", "arrow", "pandas"])
def test_other_engines(golden, frame, name, engine):
    data = frame.to_arrow() if engine == "arrow" else frame.to_pandas() if engine == "pandas" else frame
    _same(_release(name, data, engine), golden["tables"][name])


if __name__ == "__main__" and "--write" in sys.argv:
    df = _data()
    GOLDEN.write_text(json.dumps({"polars": pl.__version__, "tables": {n: _release(n, df, "polars") for n in CASES},
                                 "histograms": {n: _histogram(n, df) for n in HIST_CASES}},
                                 indent=0) + "\n")
    print(f"wrote {GOLDEN}")
