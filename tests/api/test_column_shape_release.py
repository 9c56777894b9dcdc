"""sparsedp.release / plan with a general column noise shape (``column_shape=``, issue 16's general Σ):
the secure joint GSHM release with noise L z (docs/proofs/aggregates.md §7), end to end.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import polars as pl
import pytest

import sparsedp as sd
from sparsedp.errors import InvalidParameterError
from sparsedp.noise import InsecureSeededRandom

from test_aggregates_release import KW, Tripwire, _data

AGGS = [sd.Count(), sd.Sum("dwell", lower=0, upper=600), sd.Mean("dwell", lower=0, upper=600),
        sd.Sum("clicks", lower=0, upper=20)]
DW, CL = AGGS[1], AGGS[3]
SD, SC = DW.sensitivity * DW.granularity, CL.sensitivity * CL.granularity   # the default allocation's stds


def _shape(rho: float) -> list[list[float]]:
    return [[SD * SD, rho * SD * SC], [rho * SD * SC, SC * SC]]


@pytest.fixture(scope="module")
def df():
    d = _data()
    g = np.random.default_rng(4)
    return d.with_columns(clicks=pl.Series(g.integers(0, 8, d.height)).cast(pl.Float64))


def test_diagonal_shape_is_the_independent_release(df):
    a = sd.release(df, **KW, aggregates=AGGS, rng=InsecureSeededRandom(21))
    b = sd.release(df, **KW, aggregates=AGGS, column_shape=_shape(0.0), rng=InsecureSeededRandom(21))
    assert a.table.equals(b.table) and a.table.height > 0
    assert a.report.column_errors == b.report.column_errors and a.report.sigma == b.report.sigma


def test_correlated_release_reports_the_covariance_used_and_matches_plan(df):
    res = sd.release(df, **KW, aggregates=AGGS, column_shape=_shape(0.6), rng=InsecureSeededRandom(22))
    rep = res.report
    text = str(rep)
    assert "column noise covariance used" in text and "mu_o^2" in text and "correlated (L z" in text
    assert rep.delta_achieved <= rep.delta
    assert set(rep.column_errors) == {"sum_dwell", "mean_dwell", "sum_clicks"}
    pl_ = sd.plan(1.0, 1e-6, 2, aggregates=AGGS, column_shape=_shape(0.6))
    row = pl_.rows()[0]
    assert row["sigma"] == pytest.approx(rep.sigma) and row["tau"] == rep.margin
    assert row["err_sum_dwell"] == pytest.approx(rep.column_errors["sum_dwell"])
    # the correlation against the box model costs privacy: σ and the margin rise
    base = sd.plan(1.0, 1e-6, 2, aggregates=AGGS).rows()[0]
    assert row["sigma"] > base["sigma"] and row["tau"] > base["tau"]


def test_correlated_sums_estimate_the_clipped_truth():
    """One key per unit (l0 = 1 binds nothing): the released SUM/MEAN columns, on grids refined for the
    correlation, estimate the clipped truth within 5 expected errors (+ the grid rounding)."""
    g = np.random.default_rng(0)
    n = 20_000
    frame = pl.DataFrame({"user": np.arange(n), "url": g.choice(["a", "b"], n), "dwell": g.uniform(0, 800, n),
                          "clicks": g.integers(0, 30, n).astype(float)})
    res = sd.release(frame, "user", "url", 1.0, 1e-6, max_groups_per_unit=1, aggregates=AGGS,
                     column_shape=_shape(0.6), rng=InsecureSeededRandom(2))
    truth = frame.with_columns(pl.col("dwell").clip(0, 600), pl.col("clicks").clip(0, 20)).group_by("url").agg(
        pl.len().alias("n"), pl.col("dwell").sum().alias("s"), pl.col("dwell").mean().alias("m"),
        pl.col("clicks").sum().alias("c"))
    j = res.table.join(truth, on="url")
    assert j.height == 2
    err = res.report.column_errors
    assert ((j["sum_dwell"] - j["s"]).abs() < 5 * err["sum_dwell"] + j["n"] * 600 / 2**13).all()
    assert ((j["sum_clicks"] - j["c"]).abs() < 5 * err["sum_clicks"] + j["n"] * 20 / 2**13).all()
    assert ((j["mean_dwell"] - j["m"]).abs() < 1.0).all()
    # the grid of the second column really is refined (values off the aggregate's own grid occur)
    step = CL.granularity
    assert any(float(x) / step != round(float(x) / step) for x in j["sum_clicks"])


def test_every_embedded_engine_gives_the_same_table(df):
    ref = sd.release(df, **KW, aggregates=AGGS, column_shape=_shape(-0.4), rng=InsecureSeededRandom(23)).table
    for data, eng in ((df.to_pandas(), "pandas"), (df.to_arrow(), "arrow"), (df, "duckdb")):
        t = sd.release(data, **KW, aggregates=AGGS, column_shape=_shape(-0.4), engine=eng,
                       rng=InsecureSeededRandom(23)).table
        t = pl.from_pandas(t) if isinstance(t, pd.DataFrame) else pl.from_arrow(t) if eng == "arrow" else t
        assert t.sort("url").equals(ref.sort("url")), eng


@pytest.mark.parametrize("kw,msg", [
    (dict(column_shape=[[1.0, 0.5], [0.4, 1.0]]), "symmetric"),
    (dict(column_shape=[[1.0, 2.0], [2.0, 1.0]]), "positive definite"),
    (dict(column_shape=[[1.0]]), "2 x 2"),
    (dict(column_shape=[[1.0, 0.0], [0.0, 1.0]], aggregates=[sd.Count()]), "SUM/MEAN"),
    (dict(column_shape=[[1.0, 0.0], [0.0, 1.0]], max_groups_per_unit=None, top_k=3), "GSHM"),
])
def test_bad_shapes_are_refused_before_any_charge_or_draw(df, tmp_path, kw, msg):
    from sparsedp.ledger import Ledger

    path = tmp_path / "l.db"
    with Ledger(path) as led:
        led.set_budget("d", epsilon=2.0, delta=1e-5)
    args = {**KW, "aggregates": AGGS, **kw}
    with pytest.raises(InvalidParameterError, match=msg):
        sd.release(df, **args, ledger=str(path), dataset="d", rng=Tripwire())
    with Ledger(path) as led:
        assert led.history("d") == []


def test_cli_column_shape(df, tmp_path):
    from typer.testing import CliRunner

    from sparsedp.cli import app

    path = tmp_path / "d.parquet"
    df.write_parquet(path)
    out = tmp_path / "o.csv"
    shape = ";".join(",".join(repr(x) for x in row) for row in _shape(0.5))
    base = ["release", str(path), "--unit", "user", "--by", "url", "--epsilon", "1", "--delta", "1e-6",
            "--max-groups", "2", "--sum", "dwell:0:600", "--sum", "clicks:0:20"]
    res = CliRunner().invoke(app, base + ["--column-shape", shape, "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "column noise covariance used" in res.output
    meta = json.loads((tmp_path / "o.csv.json").read_text())
    assert set(meta["column_errors"]) == {"sum_dwell", "sum_clicks"}
    bad = CliRunner().invoke(app, base + ["--column-shape", "1,0;0,x"])
    assert bad.exit_code == 2 and "--column-shape takes rows" in bad.output
    bad = CliRunner().invoke(app, base + ["--column-shape", "1,2;2,1"])
    assert bad.exit_code == 2 and "--column-shape must be positive definite" in bad.output
