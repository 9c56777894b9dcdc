"""VARIANCE/STD intervals on the real release path (issue 34): one release of 600 keys far above the threshold
(each key's noise independent, so the rows are 600 independent trials), every row's interval against the exact
clamped variance of its units' gridded values (computed here from the data with the release's grids), at the
default level 95 %. The interval is conservative by construction (union bound): coverage must be at least the
level; it must also be informative (much narrower than the possible range), so that a trivially wide interval
fails. Measured at this seed: docs/proofs/intervals.md §5."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

import sparsedp as sd
from sparsedp.aggregates import Squares, Sum, grid_index
from sparsedp.noise import InsecureSeededRandom

KEYS, UNITS, LO, HI = 600, 150, 0.0, 100.0


def _frame() -> pl.DataFrame:
    u = np.arange(KEYS * UNITS)
    k = u // UNITS
    g = np.random.default_rng(1)
    # per key a different spread: a centre and a half-range drawn per key, values uniform in it
    centre, half = g.uniform(20, 80, KEYS), g.uniform(0, 20, KEYS)
    x = centre[k] + half[k] * g.uniform(-1, 1, u.size)
    return pl.DataFrame({"u": u, "k": k, "x": x})


def _truth(df: pl.DataFrame) -> pl.DataFrame:
    """Per key ``clamp(S₂/n − (S₁/n)², 0, C)`` with ``S₁``, ``S₂`` the sums of the gridded values and squares."""
    s1, s2 = Sum("x", LO, HI), Squares("x", LO, HI)
    x = np.clip(df["x"].to_numpy(), LO, HI)
    q1 = np.floor(x / s1.step + 0.5) * s1.step  # aggregates.grid_index, vectorised (the steps are powers of 2)
    q2 = np.floor(x * x / s2.step + 0.5) * s2.step
    assert q1[0] == grid_index(x[0], s1.step) * s1.step and q2[0] == grid_index(x[0] * x[0], s2.step) * s2.step
    t = pl.DataFrame({"k": df["k"], "q1": q1, "q2": q2}).group_by("k").agg(
        pl.len().alias("n"), pl.col("q1").sum(), pl.col("q2").sum())
    var = np.clip(t["q2"].to_numpy() / t["n"].to_numpy() - (t["q1"].to_numpy() / t["n"].to_numpy()) ** 2, 0.0,
                  ((HI - LO) / 2) ** 2)
    return pl.DataFrame({"k": t["k"], "var_true": var, "std_true": np.sqrt(var)})


@pytest.fixture(scope="module")
def released():
    df = _frame()
    res = sd.release(df, "u", "k", 4.0, 1e-7, max_groups_per_unit=1,
                     aggregates=[sd.Count(), sd.Variance("x", LO, HI), sd.Std("x", LO, HI)],
                     rng=InsecureSeededRandom(2024))
    return res, res.table.join(_truth(df), on="k")


@pytest.mark.parametrize("col, truth", [("variance_x", "var_true"), ("std_x", "std_true")])
def test_variance_and_std_intervals_cover_at_least_the_level(released, col, truth):
    res, t = released
    assert t.height >= 0.99 * KEYS  # every key is far above the threshold
    hits = ((t[f"{col}_lo"] <= t[truth]) & (t[truth] <= t[f"{col}_hi"])).to_numpy()
    assert hits.mean() >= 0.95, hits.mean()
    assert (t[f"{col}_lo"] <= t[col]).all() and (t[col] <= t[f"{col}_hi"]).all()
    # informative: narrower than the possible range [0, 2500] (variance) / [0, 50] (std) (measured: 32 % / 57 %)
    width = (t[f"{col}_hi"] - t[f"{col}_lo"]).median()
    assert width < (0.4 * 2500 if col == "variance_x" else 0.7 * 50), width
    line = next(n for n in res.report.notes if n.startswith("intervals at 0.95"))
    stated = float(line.split(f"{col}: from the row's noisy count, sum and sum of squares (coverage >= ")[1]
                   .split("%")[0]) / 100
    assert 0.95 <= stated < 1.0 and hits.mean() >= stated


def test_columns_and_notes(released):
    res, _ = released
    assert res.table.columns == ["k", "count", "count_lo", "count_hi", "variance_x", "variance_x_lo",
                                 "variance_x_hi", "std_x", "std_x_lo", "std_x_hi"]
    assert any("VARIANCE/STD intervals are conservative" in n for n in res.report.notes)
    assert any("conditionally on its release" in n for n in res.report.notes)
