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


# Thesis Table 5.1 as printed (App. 5.C.2): (rho, sigma2) -> direct-0.75, direct-0.841, direct-0.9, k=1, k=4
TABLE_5_1 = {(0.001, 0.001): (0.350444, 0.038144, 0.240120, 0.035163, 0.019068),
             (0.001, 1.0): (0.330807, 0.031329, 0.296298, 0.022601, 0.010411),
             (0.01, 0.001): (0.319298, 0.007646, 0.276414, 0.023152, 0.008120),
             (0.01, 1.0): (0.319716, 0.010308, 0.284934, 0.019798, 0.006361)}
METHODS = ("direct-0.75", "direct-0.841", "direct-0.9", "general-k1", "general-k4")


def _table_headlines(res):
    return {(float(h.name.split()[0][4:]), float(h.name.split()[1][7:]), h.name.split()[2]): h
            for h in res.headlines}


def test_table_5_1(tmp_path):
    """Against the thesis's printed numbers (docs/reproduce.md#table-51): the check accepts a factor 2. The
    direct-0.75 and direct-0.9 entries (bias |z_q − 1| on σ) match at every (ρ, σ²) except direct-0.9 at
    ρ = σ² = 0.001 (a rare wrong branch of the binary search), also in the 10-run fast mode; the rest are
    reported, match or documented mismatch, never an undocumented one."""
    res = rp.run("thesis-table5.1", tmp_path, fast=True)
    heads = _table_headlines(res)
    assert len(heads) == 20
    for (rho, s2), row in TABLE_5_1.items():
        for method, paper in zip(METHODS, row):
            h = heads[rho, s2, method]
            assert h.paper == paper and h.ref.cite == "thesis Table 5.1 (App. 5.C.2)"
            assert (h.ref.lo, h.ref.hi) == pytest.approx((paper / 2, paper * 2))
            assert h.status in ("match", "documented mismatch (docs/reproduce.md#table-51)")
            if method in ("direct-0.75", "direct-0.9") and not (rho == s2 == 0.001 and method == "direct-0.9"):
                assert h.status == "match", h
    # the direct-0.75 bias: |z_.75 − 1| = 0.326 on σ (the thesis: 0.32–0.35)
    for (rho, s2) in TABLE_5_1:
        assert heads[rho, s2, "direct-0.75"].ours == pytest.approx(1 - 0.6745, abs=0.05)


@pytest.mark.slow
def test_table_5_1_full(tmp_path):
    """The full 100-run table: the 14 entries docs/reproduce.md lists as within a factor 2 match, the 6 others
    are documented mismatches."""
    res = rp.run("thesis-table5.1", tmp_path, fast=False)
    heads = _table_headlines(res)
    off = {(0.001, 0.001, "direct-0.841"), (0.001, 0.001, "direct-0.9"), (0.001, 0.001, "general-k4"),
           (0.001, 1.0, "direct-0.841"), (0.01, 0.001, "direct-0.841"), (0.01, 1.0, "direct-0.841")}
    for key, h in heads.items():
        assert (h.status == "match") == (key not in off), (key, h)


def test_plan_skew(tmp_path):
    res = rp.run("thesis-plan-skew", tmp_path, fast=True)
    rows = {float(r["alpha"]): r for r in rp.read_csv(res.csv_path)}
    # the thesis's prediction √d‖σ‖₂/‖σ‖₁ (§5.1): 1.00, 1.30, 3.35
    for alpha, want in ((0.0, 1.00), (1.0, 1.30), (2.0, 3.35)):
        assert float(rows[alpha]["predicted_gain"]) == pytest.approx(want, abs=0.005)
    h = {x.name: x for x in res.headlines}
    for alpha in (0.0, 1.0, 2.0):
        measured = h[f"alpha={alpha:g} gain (measured) vs the thesis's prediction"]
        assert measured.ref.kind is rp.Kind.FORMULA and measured.status == "match", measured
        assert h[f"alpha={alpha:g} gain (measured) vs the prototype run"].status == "context (not the paper's)"
    assert not math.isnan(float(rows[2.0]["plan_l2_error"]))
