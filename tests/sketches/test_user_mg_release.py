"""The user-level Misra–Gries release from data: ``sd.MisraGries`` with a ``privacy_unit`` runs CSH (or the
merged-sketch Laplace release) on the PAMG sketch at the full (ε, δ), with no group privacy."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

import sparsedp as sd
from sparsedp.errors import InputDataError, InvalidParameterError
from sparsedp.mechanisms.base import ReleaseRequest
from sparsedp.noise import InsecureSeededRandom
from sparsedp.sketches.user_mg import pamg_reference


def _frame(units=400, seed=0):
    rng = np.random.default_rng(seed)
    per = rng.integers(1, 9, units)
    u = np.repeat(rng.permutation(units) * 7 + 3, per)  # unit ids not in row order
    q = np.minimum(rng.zipf(1.4, u.size), 40)
    return pl.DataFrame({"user": u, "query": [f"q{x}" for x in q]})


def _sets(df):
    sets: dict[int, set] = {}
    for u, q in zip(df["user"].to_list(), df["query"].to_list()):
        sets.setdefault(u, set()).add(q)
    return [sets[u] for u in sorted(sets)]


def test_calibration_is_the_row_level_one_whatever_the_unit_holds():
    row = sd.MisraGries(sketch_size=100).calibrate(ReleaseRequest(epsilon=1.0, delta=1e-6))
    group = sd.MisraGries(sketch_size=100, unit_sketch="group-privacy").calibrate(
        ReleaseRequest(epsilon=1.0, delta=1e-6, max_groups_per_unit=10))
    assert row.group == 1 and row.epsilon_e == 1.0 and row.delta_e == 1e-6
    assert group.group == 10 and group.epsilon_e == pytest.approx(0.1)
    assert float(row.csh.tau) < float(group.csh.tau) / 5  # 132 against 1417 at k = 100


@pytest.mark.parametrize("release", ["csh", "merged-laplace"])
def test_release_is_the_noisy_pamg_sketch(release):
    """Every released count is the PAMG counter of its key (units added as sets in increasing id order) plus
    noise of the law the report states; no key outside the sketch is released."""
    k = 12
    df = _frame()
    exact = pamg_reference(_sets(df), k)
    mech = sd.MisraGries(sketch_size=k, release=release)
    noise = []
    for seed in range(30):
        res = sd.release(df, "user", "query", 4.0, 1e-6, mechanism=mech, rng=InsecureSeededRandom(seed))
        got = dict(zip(res.table["query"].to_list(), res.table["count"].to_list()))
        assert set(got) <= set(exact)
        assert all(c >= res.report.threshold for c in got.values())
        noise += [got[x] - exact[x] for x in got]
    assert "PAMG" in res.report.contribution
    noise = np.asarray(noise, float)
    std = res.report.noise_std
    assert len(noise) > 100
    assert abs(noise.mean()) < 4 * std / math.sqrt(30)
    assert 0.8 < noise.std() / std < 1.2


def test_engines_agree():
    df = _frame(seed=2)
    mech = sd.MisraGries(sketch_size=10)
    tables = []
    for engine, data in (("polars", df), ("duckdb", df.to_arrow()), ("pandas", df.to_pandas())):
        res = sd.release(data, "user", "query", 2.0, 1e-6, mechanism=mech, engine=engine,
                         rng=InsecureSeededRandom(5))
        t = pl.from_pandas(res.table) if engine == "pandas" else pl.DataFrame(res.table)
        tables.append(sorted(zip(t["query"].to_list(), t["count"].to_list())))
    assert tables[0] == tables[1] == tables[2] and tables[0]


def test_bad_input_fails_before_any_draw():
    class Tripwire:
        def uint64(self, *a, **k):
            raise AssertionError("noise drawn")

        random_bytes = uint64

    mech = sd.MisraGries(sketch_size=4)
    with pytest.raises(InvalidParameterError, match="unit_sketch='group-privacy'"):
        sd.release(_frame(), "user", "query", 1.0, 1e-6, max_groups_per_unit=3, rng=Tripwire(),
                   mechanism=sd.MisraGries(sketch_size=4, unit_sketch="pamg"))
    with pytest.raises(InputDataError, match="null"):
        sd.release(pl.DataFrame({"user": [1, None], "query": ["a", "b"]}), "user", "query", 1.0, 1e-6,
                   mechanism=mech, rng=Tripwire())
    with pytest.raises(InputDataError, match="qury"):
        sd.release(_frame(), "user", "qury", 1.0, 1e-6, mechanism=mech, rng=Tripwire())
    with pytest.raises(InvalidParameterError, match="group-privacy"):
        sd.MisraGries(sketch_size=4, release="pmg", unit_sketch="pamg")
    with pytest.raises(InvalidParameterError, match="unit_sketch"):
        sd.MisraGries(sketch_size=4, unit_sketch="per-user")


def test_group_privacy_path_is_kept():
    """An explicit l0 bound (or unit_sketch='group-privacy', or a release other than csh/merged-laplace) keeps the
    bounded route released by group privacy."""
    for mech in (sd.MisraGries(sketch_size=10), sd.MisraGries(sketch_size=10, unit_sketch="group-privacy")):
        res = sd.release(_frame(), "user", "query", 1.0, 1e-6, max_groups_per_unit=2, rng=InsecureSeededRandom(0),
                         mechanism=mech)
        assert "at most 2 key(s) per unit" in res.report.contribution
        assert "group privacy over 2 elements" in str(res.report)
    req = ReleaseRequest(epsilon=1.0, delta=1e-6)
    assert sd.MisraGries(sketch_size=10, release="pmg").unit_mode(req).value == "group-privacy"
    assert sd.MisraGries(sketch_size=10).unit_mode(req).value == "pamg"
