"""Thesis Chapter 4/5 reproduction targets in fast mode, checked against spec seed-004b's numbers."""

from __future__ import annotations

import math

import pytest

from sparsedp import reproduce as rp


def test_figure_4_1(tmp_path):
    res = rp.run("thesis-fig4.1", tmp_path, fast=True)
    rows = rp.read_csv(res.csv_path)
    spec = {("gaussian", "spherical"): 17.0, ("gaussian", "proportional"): 17.0, ("gaussian", "optimal"): 12.5,
            ("laplace", "spherical"): 10.0, ("laplace", "proportional"): 10.0, ("laplace", "optimal"): 9.0}
    assert len(rows) == 6
    for row in rows:
        want = spec[row["family"], row["shape"]]
        assert float(row["expected_error"]) == pytest.approx(want, rel=1e-12)
        assert float(row["monte_carlo_error"]) == pytest.approx(want, rel=0.03)
    assert res.png_path.exists()


def test_table_5_1(tmp_path):
    # spec §3.9 Table 5.1 (20 numbers). The thesis's numbers are errors of the run-averaged estimate
    # (see thesis_ch5 docstring), so ours must agree within 3 Monte-Carlo standard errors of our
    # 10-run average, plus 0.02 for the thesis's own 100-run noise and its different quantile.
    res = rp.run("thesis-table5.1", tmp_path, fast=True)
    rows = rp.read_csv(res.csv_path)
    assert len(rows) == 20
    for row in rows:
        ours, paper, se = float(row["error_of_average"]), float(row["paper"]), float(row["standard_error"])
        assert abs(ours - paper) <= 3 * se + 0.02, row
    # the biased direct methods sit at |z_q − 1| (spec §3.9): z_.75 = 0.674, z_.9 = 1.2816
    for row in rows:
        if row["method"] == "direct-0.75":
            assert float(row["error_of_average"]) == pytest.approx(1 - 0.6745, abs=0.05)


def test_plan_skew(tmp_path):
    res = rp.run("thesis-plan-skew", tmp_path, fast=True)
    rows = {float(r["alpha"]): r for r in rp.read_csv(res.csv_path)}
    # predicted √d‖σ‖₂/‖σ‖₁: spec §5.0 / §5.3(d): 1.00, 1.30, 3.35
    for alpha, want in ((0.0, 1.00), (1.0, 1.30), (2.0, 3.35)):
        assert float(rows[alpha]["predicted_gain"]) == pytest.approx(want, abs=0.005)
    # measured (spec: ×1.03, ×1.46, ×3.94): at least 0.8 × predicted, at most 1.25 × observed
    for alpha in (0.0, 1.0, 2.0):
        gain = float(rows[alpha]["gain"])
        assert 0.8 * float(rows[alpha]["spec_predicted_gain"]) <= gain <= 1.25 * float(
            rows[alpha]["spec_observed_gain"])
    assert not math.isnan(float(rows[2.0]["plan_l2_error"]))
