"""Thesis ch. 3 (private Misra–Gries) thresholds against spec seed-004b §4's derived example numbers."""

from __future__ import annotations

import pytest

from sparsedp import reproduce as rp


def test_mg_thresholds(tmp_path):
    res = rp.run("thesis-mg", tmp_path, fast=True)
    spots = {(float(r["epsilon"]), float(r["delta"])): r for r in rp.read_csv(res.csv_path) if r["kind"] == "spot"}
    for (e, d), (lap, geo) in {(1.0, 1e-6): (30.8282, 33), (0.1, 1e-6): (299.2825, 301),
                               (1.0, 1e-9): (44.6438, 47), (0.5, 1e-5): (51.4462, 53)}.items():
        assert float(spots[e, d]["pmg_laplace"]) == pytest.approx(lap, abs=1e-4)
        assert float(spots[e, d]["pmg_discrete"]) == geo
    r = spots[1.0, 1e-6]
    assert float(r["standard_mg_k100"]) == pytest.approx(36.4750, abs=1e-4)
    assert float(r["pure_variant"]) == pytest.approx(31.6310, abs=1e-4)
    h = {x.name: x.ours for x in res.headlines}
    assert h["Thm 3.1 upper slack k=100 beta=0.05"] == pytest.approx(15.2216, abs=1e-3)
    assert h["Thm 3.1 lower slack (n=0)"] == pytest.approx(46.0498, abs=1e-3)
    # the discrete threshold is the continuous one rounded up to an odd integer (spec N11)
    for row in rp.read_csv(res.csv_path):
        geo, lap = float(row["pmg_discrete"]), float(row["pmg_laplace"])
        assert geo >= lap - 1e-9 and geo % 2 == 1
