"""δ warnings (issue 20): δ > 1e-4 always (public, in the report), δ > 1/(10·units) once n is known (curator)."""

from __future__ import annotations

import warnings

import numpy as np
import polars as pl
import pytest
from typer.testing import CliRunner

import sparsedp as sd
from sparsedp.advice import DeltaWarning, delta_note, delta_units_note
from sparsedp.noise import InsecureSeededRandom

UNITS = 3000


@pytest.fixture(scope="module")
def log():
    g = np.random.default_rng(3)
    return pl.DataFrame({"u": np.arange(UNITS).repeat(2), "k": g.integers(0, 5, 2 * UNITS).astype(str)})


def _release(log, delta):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        # interval=None: the notes checked here are the advice only (the interval notes are tested elsewhere)
        res = sd.release(log, "u", "k", 1.0, delta, max_groups_per_unit=2, interval=None, rng=InsecureSeededRandom(1))
    return res, [str(w.message) for w in caught if issubclass(w.category, DeltaWarning)]


def test_rule():
    assert delta_note(1e-4) is None and "above 1e-4" in delta_note(1.01e-4)
    assert delta_units_note(1e-6, 100_000) is None  # exactly 1/(10 n): fine
    assert "1/100000" in delta_units_note(1.01e-6, 100_000)
    assert delta_units_note(0.5, 10) is None  # already warned by the public rule
    assert delta_units_note(1e-7, None) is None and delta_units_note(0.0, 5) is None


def test_large_delta_warned_and_in_the_report(log):
    res, warned = _release(log, 0.5)
    assert len(warned) == 1 and "delta=0.5 is above 1e-4" in warned[0]
    assert any("above 1e-4" in n for n in res.report.notes) and "above 1e-4" in str(res.report)
    assert res.curator.warnings == ()


def test_delta_against_units_is_curator_only(log):
    res, warned = _release(log, 5e-5)  # 1/(10 * 3000) = 3.3e-5 < 5e-5 <= 1e-4
    assert len(warned) == 1 and f"1/{UNITS}" in warned[0]
    assert warned[0] in res.curator.warnings and f"1/{UNITS}" in str(res.curator)
    assert str(UNITS) not in str(res.report) and not any("units" in n for n in res.report.notes)
    res, warned = _release(log, 1e-6)
    assert warned == [] and res.curator.warnings == () and res.report.notes == ()


def test_cli_prints_the_warning_in_flag_terms(tmp_path, log):
    from sparsedp.cli import app

    log.write_parquet(tmp_path / "log.parquet")
    r = CliRunner().invoke(app, ["release", str(tmp_path / "log.parquet"), "--unit", "u", "--by", "k",
                                 "--epsilon", "1", "--delta", "0.5", "--max-groups", "2"])
    assert r.exit_code == 0, r.stderr
    assert "warning: --delta 0.5 is above 1e-4" in r.stderr


def test_warnings_point_at_the_users_line():
    """The δ advice and the float-noise warning are attributed to the caller's line, not to a pipeline stage."""
    import warnings

    import polars as pl

    import sparsedp as sd

    df = pl.DataFrame({"u": list(range(300)) * 2, "k": [f"k{i % 7}" for i in range(600)]})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sd.release(df, "u", "k", epsilon=1.0, delta=1e-3, max_groups_per_unit=3, insecure_float=True)
    kinds = {type(w.message).__name__ for w in caught}
    assert {"DeltaWarning", "InsecureNoiseWarning"} <= kinds
    assert all(w.filename == __file__ for w in caught), [(w.filename, w.lineno) for w in caught]
