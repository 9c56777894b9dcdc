"""Correlated Gaussian Figures 2 and 3 (fast mode) against spec seed-002 S5's reconstructed figure data."""

from __future__ import annotations

import math

import pytest

from sparsedp import reproduce as rp


def test_figure_2(tmp_path):
    res = rp.run("correlated-fig2", tmp_path, fast=True)
    rows = {round(float(r["C"]), 6): r for r in rp.read_csv(res.csv_path)}
    # spec S5 "Reconstructed Figure 2 data" (d = 10^4, μ = 1)
    for c, a, b, v in ((1, 10001, 10001, 5000.5), (2, 2501, 10004, 3126.25), (5, 401, 10025, 2606.5),
                       (8, 157.25, 10064, 2555.3125), (10, 101, 10100, 2550.25), (12, 70.4444, 10144, 2553.6111),
                       (20, 26, 10400, 2606.5), (50, 5, 12500, 3126.25), (100, 2, 20000, 5000.5),
                       (150, 1.4444, 32500, 8125.3611), (200, 1.25, 50000, 12500.3125)):
        r = rows[c]
        assert float(r["A"]) == pytest.approx(a, abs=1e-4)
        assert float(r["B"]) == pytest.approx(b, rel=1e-9)
        assert float(r["per_query_var"]) == pytest.approx(v, abs=1e-4)
        assert float(r["standard_var"]) == pytest.approx(10000.0, rel=1e-9)
    # the standard mechanism's variance is reached at C = √3·100 (spec: "173.20 … ≈10000")
    assert float(rows[round(math.sqrt(3) * 100, 6)]["per_query_var"]) == pytest.approx(10000.0, rel=1e-3)
    h = {x.name: x for x in res.headlines}
    assert h["min per-query variance (C = d^1/4)"].ours == pytest.approx(2550.25, rel=1e-12)
    assert h["argmin C (grid)"].ours == pytest.approx(10.0)
    assert res.png_path.stat().st_size > 1000


def test_figure_3(tmp_path):
    res = rp.run("correlated-fig3", tmp_path, fast=True)
    rows = {int(r["k"]): r for r in rp.read_csv(res.csv_path)}
    # spec S5 "Reconstructed Figure 3 data" (d = 1000): k -> JY24 per-query variance
    for k, jy in ((1, 1.0), (10, 9.9531), (50, 48.1439), (100, 91.8164), (200, 164.9371), (266, 202.5494),
                  (267, 203.0533), (300, 218.5705), (400, 252.3073), (500, 265.8035)):
        assert float(rows[k]["jy24"]) == pytest.approx(jy, abs=1e-4)
        assert float(rows[k]["standard"]) == pytest.approx(k, rel=1e-12)
    for k in (600, 700, 800, 900, 1000):
        assert math.isnan(float(rows[k]["jy24"]))  # JY24 is defined for k <= d/2 only
        assert float(rows[k]["algorithm1"]) == pytest.approx(266.061388, abs=1e-6)
    h = {x.name: x.ours for x in res.headlines}
    assert h["smallest k where Algorithm 1 beats standard"] == 267  # spec S6 check 21
    assert h["JY24 at k = d/2"] == pytest.approx(265.803481, abs=1e-6)  # spec S6 check 18
