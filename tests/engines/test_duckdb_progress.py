"""The DuckDB engine's progress advances through the counting stage (issue 30 item 9): the stage's queries and
its in-process bounding each own a share of the bar, so it no longer stays at 0 % until the stage ends."""

from __future__ import annotations

import contextlib

import numpy as np
import polars as pl
import pytest

import sparsedp as sd
from sparsedp.engines.duckdb_engine import DuckDBEngine


@pytest.mark.parametrize("passes", [1, 2])
def test_counting_stage_reports_rising_percentages(tmp_path, passes):
    g = np.random.default_rng(6)
    src = tmp_path / "log.parquet"
    pl.DataFrame({"u": g.integers(0, 2000, 20000), "k": g.integers(0, 500, 20000).astype(str)}).write_parquet(src)
    seen: dict[str, list] = {}

    @contextlib.contextmanager
    def progress(stage):
        yield lambda done, total, unit: seen.setdefault(stage, []).append((done, total, unit))

    sd.release(str(src), "u", "k", 1.0, 1e-7, max_groups_per_unit=3, engine=DuckDBEngine(passes=passes),
               progress=progress)
    (stage,) = [s for s in seen if s.startswith("bounding")]
    pct = [d for d, total, unit in seen[stage] if unit == "%" and total == 100.0]
    assert pct == sorted(pct), pct  # never goes back
    assert pct[0] == 0.0 and max(pct) >= 70.0 and len({p for p in pct if 0 < p < 100}) >= 3, pct
