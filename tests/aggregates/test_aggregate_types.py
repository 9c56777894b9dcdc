"""Aggregate types: validation, default names, grid and sensitivities (sparsedp.aggregates)."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

from sparsedp.aggregates import (Count, Mean, Sum, column_sensitivities, default_granularity, grid_index, noise_columns,
                                 output_names)
from sparsedp.engines.aggregate_exprs import check_value_columns, key_grid_sums, unit_key_contributions
from sparsedp.errors import InputDataError, InvalidParameterError, InvalidTypeError


def test_default_names():
    assert Count().output_name == "count"
    assert Sum("dwell", 0, 600).output_name == "sum_dwell"
    assert Mean("dwell", 0, 600).output_name == "mean_dwell"
    assert Sum("dwell", 0, 600, name="total").output_name == "total"
    assert output_names([Count(), Sum("a", 0, 1), Mean("a", 0, 1)]) == ["count", "sum_a", "mean_a"]
    with pytest.raises(InvalidParameterError, match="duplicate"):
        output_names([Sum("a", 0, 1), Sum("a", 0, 2)])
    with pytest.raises(InvalidTypeError):
        output_names([Count(), "sum"])


@pytest.mark.parametrize("lo,hi", [(1.0, 0.0), (5, -5)])
def test_lower_above_upper_raises(lo, hi):
    with pytest.raises(InvalidParameterError, match="lower must be <= upper"):
        Sum("x", lo, hi)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_bounds_raise(bad):
    with pytest.raises(InvalidParameterError, match="finite"):
        Sum("x", bad, 1.0)
    with pytest.raises(InvalidParameterError, match="finite"):
        Mean("x", 0.0, bad)


@pytest.mark.parametrize("bad", ["1", None, True])
def test_non_numeric_bounds_raise(bad):
    with pytest.raises(InvalidTypeError):
        Sum("x", bad, 1.0)


@pytest.mark.parametrize("g", [0, -1.0, math.nan, math.inf])
def test_bad_granularity_raises(g):
    with pytest.raises(InvalidParameterError):
        Sum("x", 0, 1, granularity=g)


@pytest.mark.parametrize("name", ["", " a", "a\n", 3])
def test_bad_names_raise(name):
    with pytest.raises((InvalidParameterError, InvalidTypeError)):
        Sum("x", 0, 1, name=name)
    with pytest.raises((InvalidParameterError, InvalidTypeError)):
        Count(name=name)


def test_too_coarse_grid_raises():
    with pytest.raises(InvalidParameterError, match="too coarse"):
        Sum("x", 0.0, 0.1, granularity=8.0)


def test_default_granularity_is_power_of_two_with_2_11_to_2_12_steps():
    for lo, hi in [(0, 600), (0, 1), (-3.5, 7.25), (100, 200), (0, 4096), (1e-3, 2e-3), (5, 5)]:
        g = default_granularity(float(lo), float(hi))
        assert math.frexp(g)[0] == 0.5  # a power of two
        span = (hi - lo) or max(abs(lo), abs(hi))
        assert 2**11 < span / g <= 2**12


def test_grid_and_sensitivity():
    s = Sum("x", 0, 600, recentre=False)
    g = s.granularity
    assert s.grid_bounds == (0, grid_index(600, g))
    assert s.sensitivity == grid_index(600, g)
    r = Sum("x", 0, 600)  # recentred: half
    assert r.centre == s.sensitivity // 2
    assert r.sensitivity == math.ceil(s.sensitivity / 2)
    a = Sum("x", 100, 200, granularity=1.0)
    assert a.centre == 150 and a.sensitivity == 50                      # the paper's example (seed 000 §6)
    assert Sum("x", 100, 200, granularity=1.0, recentre=False).sensitivity == 200
    assert Sum("x", -3, 2, granularity=1.0, recentre=False).sensitivity == 3
    assert a.sensitivity_value_units == 50.0


def _rows():
    return pl.DataFrame({
        "u": [1, 1, 1, 2, 2, 3, 3],
        "k": ["a", "a", "b", "a", "b", "a", "a"],
        "x": [300.0, 400.0, -5.0, 0.3, 20.0, 1e9, 2.0],
        "y": [1, 2, 3, 4, 5, 6, 7],
    })


def test_contributions_are_clipped_per_unit_and_key_then_gridded():
    aggs = [Sum("x", 0, 600, granularity=1.0, recentre=False), Sum("x", 0, 600, granularity=0.5, name="x2"),
            Mean("y", 0, 3, granularity=1.0, recentre=False)]
    c = unit_key_contributions(_rows(), "u", ["k"], aggs).collect().sort("u", "k")
    # (unit, key) sums: (1,a)=700->600, (1,b)=-5->0, (2,a)=0.3->0, (2,b)=20, (3,a)=1e9+2->600
    assert c["__sparsedp_agg_0"].to_list() == [600, 0, 0, 20, 600]
    # granularity 0.5, recentred: q in [0, 1200], centre 600
    assert c["__sparsedp_agg_1"].to_list() == [600, -600, -599, -560, 600]
    assert c["__sparsedp_agg_2"].to_list() == [3, 3, 3, 3, 3]
    for i, a in enumerate(aggs):
        assert c[f"__sparsedp_agg_{i}"].abs().max() <= a.sensitivity
    ks = key_grid_sums(_rows(), "u", ["k"], aggs).collect().sort("k")
    assert ks["__sparsedp_agg_0"].to_list() == [1200, 20]
    assert ks["__sparsedp_agg_0"].dtype == pl.Int64


def test_kept_pairs_restrict_contributions():
    aggs = [Sum("x", 0, 600, granularity=1.0, recentre=False)]
    kept = pl.DataFrame({"u": [1, 2], "k": ["b", "a"]})
    ks = key_grid_sums(_rows(), "u", ["k"], aggs, kept_pairs=kept).collect().sort("k")
    assert ks.rows() == [("a", 0), ("b", 0)]


def test_bad_value_columns_raise():
    aggs = [Sum("x", 0, 1)]
    check_value_columns(_rows(), aggs)
    with pytest.raises(InputDataError, match="null"):
        check_value_columns(_rows().with_columns(pl.when(pl.col("u") == 2).then(None).otherwise(pl.col("x"))
                                                 .alias("x")), aggs)
    for bad in (np.nan, np.inf):
        with pytest.raises(InputDataError, match="NaN or infinite"):
            check_value_columns(_rows().with_columns(pl.lit(bad).alias("x")), aggs)
    with pytest.raises(InvalidTypeError, match="numeric"):
        check_value_columns(_rows().with_columns(pl.col("x").cast(pl.String)), aggs)
    with pytest.raises(InputDataError, match="not in the data"):
        check_value_columns(_rows(), [Sum("zz", 0, 1)])


def test_sum_and_mean_of_same_column_share_one_noisy_column():
    aggs = [Count(), Sum("x", 0, 600), Mean("x", 0, 600), Sum("x", 0, 100, name="x100"),
            Mean("y", -1, 1, name="my")]
    cols, where = noise_columns(aggs)
    assert where == [None, 0, 0, 1, 2]
    assert [c.column for c in cols] == ["x", "x", "y"]
    assert column_sensitivities(aggs) == [aggs[1].sensitivity, aggs[3].sensitivity, aggs[4].sensitivity]
    ks = key_grid_sums(_rows(), "u", ["k"], aggs).collect()
    assert ks.columns == ["k", "__sparsedp_agg_0", "__sparsedp_agg_1", "__sparsedp_agg_2"]
