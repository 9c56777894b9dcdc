"""CSH Figure 3a/3b reproduction (fast mode) against spec seed-000 §5.3."""

from __future__ import annotations

import math

import pytest

from sparsedp import reproduce as rp


def _rows(res):
    return {round(float(r["total_noise"]), 6): r for r in rp.read_csv(res.csv_path)}


def test_figure_3a(tmp_path):
    res = rp.run("csh-fig3a", tmp_path, fast=True)
    h = {x.name: x.ours for x in res.headlines}
    assert h["min tau gshm exact"] == pytest.approx(13950.05, abs=0.01)
    assert h["min tau csh add"] == pytest.approx(7860.54, abs=0.01)
    assert h["min tau csh tight"] == pytest.approx(7453.42, abs=0.01)
    assert h["min tau gshm add"] == pytest.approx(14712.04, abs=0.01)
    assert h["min tau csh add / gshm exact"] == pytest.approx(0.5635, abs=1e-4)  # "≈43 %" lower
    rows = _rows(res)
    # spec §5.3 curve values (ε = 0.349 columns)
    assert float(rows[1140]["tau_csh_add"]) == pytest.approx(7861.39, abs=0.01)
    assert float(rows[1140]["tau_csh_tight"]) == pytest.approx(7592.40, abs=0.01)
    assert math.isnan(float(rows[1140]["tau_gshm_exact"]))
    assert float(rows[2250]["tau_gshm_add"]) == pytest.approx(14785.50, abs=0.01)
    assert float(rows[2250]["tau_gshm_exact"]) == pytest.approx(14084.75, abs=0.01)
    assert float(rows[3000]["tau_csh_tight"]) == pytest.approx(19980.01, abs=0.01)


def test_figure_3b(tmp_path):
    res = rp.run("csh-fig3b", tmp_path, fast=True)
    h = {x.name: x.ours for x in res.headlines}
    for name, want in (("gshm add", 158.008), ("gshm exact", 147.019), ("csh add", 142.139),
                       ("csh tight", 132.293)):
        assert h[f"min tau {name}"] == pytest.approx(want, abs=1e-3)
    rows = _rows(res)
    assert float(rows[21]["tau_csh_tight"]) == pytest.approx(136.486, abs=1e-3)
    assert float(rows[31]["tau_gshm_exact"]) == pytest.approx(147.356, abs=1e-3)
    assert float(rows[50]["tau_csh_tight"]) == pytest.approx(324.967, abs=1e-3)
