"""Progress reports (issue 20): the stage's reporter hears how far the engine is, where it can tell."""

from __future__ import annotations

import contextlib

import numpy as np
import polars as pl
import pytest

import sparsedp as sd
from sparsedp.progress import polling, report, reporting


def _recording():
    seen: list[tuple[str, float, float | None, str]] = []

    def progress(stage):
        @contextlib.contextmanager
        def cm():
            yield lambda done, total, unit: seen.append((stage, done, total, unit))
        return cm()

    return progress, seen


@pytest.mark.parametrize("engine", ["polars", "duckdb", "pandas", "arrow"])
def test_noise_stage_reports_key_chunks(engine):
    g = np.random.default_rng(0)
    df = pl.DataFrame({"u": g.integers(0, 500, 3000), "k": g.integers(0, 50, 3000)})
    progress, seen = _recording()
    sd.release(df.to_pandas() if engine == "pandas" else df, "u", "k", 1.0, 1e-6, max_groups_per_unit=2,
               engine=engine, progress=progress)
    chunks = [(d, t) for s, d, t, u in seen if s.startswith("adding noise") and u == "key chunks"]
    assert chunks == [(0, 1), (1, 1)]  # one chunk (< 2^24 keys): started, done


def test_duckdb_reports_its_query_progress_in_percent():
    """The bounding stage reports percentages of 100 (0 % when the statement starts, then DuckDB's own estimates
    while it runs, where DuckDB can estimate the plan)."""
    progress, seen = _recording()
    sql = "SELECT i % 400000 AS u, (i * 7) % 900000 AS k FROM range(12000000) t(i)"
    sd.release(sql, "u", "k", 1.0, 1e-8, max_groups_per_unit=2, progress=progress)
    pct = [d for s, d, t, u in seen if s.startswith("bounding") and u == "%"]
    assert pct and all(0 <= d <= 100 for d in pct) and all(t == 100 for s, d, t, u in seen if u == "%")


def test_no_display_no_thread_and_a_failing_display_is_ignored():
    import threading

    n = threading.active_count()
    with polling(lambda: (1, 2, "x")):
        assert threading.active_count() == n  # nobody listens: no polling thread
    with reporting(lambda *a: 1 / 0):
        report(1, 2, "x")  # a broken display never breaks a release
    progress, seen = _recording()
    with progress("s") as r, reporting(r), polling(lambda: (1, 2, "t"), interval=0.01):
        import time

        time.sleep(0.2)
    assert ("s", 1, 2, "t") in seen
