"""``sd.release(..., keys=…, mechanism=sd.GroupedCorrelatedGaussian(group=…))``: seed 002 Algorithm 2 (grouped
queries, add/remove = Algorithm 1 per group with the group's unit count) through the pipeline.

Checked: one group per unit enforced by the engine path (keyed, row-order independent), the output law against
the calibration (shared term within a group, independence across groups, KS on the independent terms), the
ledger charge and relation, refusals before anything is drawn or charged, identical tables on every embedded
engine.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from scipy import stats

import sparsedp as sd
from sparsedp.accounting.discrete import dgauss_variance
from sparsedp.accounting.public_keys import calibrate_correlated_public
from sparsedp.errors import InvalidParameterError
from sparsedp.engines.bounding import key_fingerprints, prf_ranks, unit_fingerprints
from sparsedp.engines.pairs import select_one_group as one_group_per_unit
from sparsedp.mechanisms.grouped_keys import group_sizes
from sparsedp.noise.source import InsecureSeededRandom

GROUPS = ["east", "north", "south", "west"]
PAGES = [f"p{i}" for i in range(6)]
KEYS = [(g, p) for g in GROUPS for p in PAGES]  # 4 groups of 6 keys
MECH = sd.GroupedCorrelatedGaussian(group="region")


class Tripwire:
    def uint64(self, size):
        raise AssertionError("randomness drawn before validation finished")

    random_bytes = getrandbits = randbelow = uint64


def _data(n_units=200, seed=0):
    """Units with one group (most) or rows in 2-3 groups (every 5th unit)."""
    rng = np.random.default_rng(seed)
    rows = []
    for u in range(n_units):
        gs = rng.choice(GROUPS, size=1 + (u % 5 == 0) * int(rng.integers(1, 3)), replace=False)
        for g in gs:
            for p in rng.choice(PAGES, size=int(rng.integers(1, 4)), replace=False):
                rows.append((u, str(g), str(p)))
    return pl.DataFrame(rows, schema=["user", "region", "page"], orient="row")


@pytest.fixture(scope="module")
def df():
    return _data()


def _truth(df, secret):
    """The bounded counts of the kept rows, computed by hand from the documented choice."""
    groups, _, _ = group_sizes(sd.mechanisms.public_keys.public_keys(KEYS, ["region", "page"]), "region")
    rows, kept = one_group_per_unit(df.lazy(), "user", "region", groups, secret)
    c = rows.unique().group_by("region", "page").len()
    m = {(r, p): n for r, p, n in c.iter_rows()}
    nj = dict(kept.group_by("region").len().iter_rows())
    return np.array([m.get(k, 0) for k in KEYS]), np.array([nj.get(g, 0) for g in GROUPS])


def test_one_group_per_unit_keyed_and_row_order_independent(df):
    groups = pl.DataFrame({"region": GROUPS})
    secret = bytes(range(32))
    rows, kept = one_group_per_unit(df.lazy(), "user", "region", groups, secret)
    assert rows.group_by("user").agg(pl.col("region").n_unique())["region"].max() == 1
    assert kept["user"].n_unique() == df["user"].n_unique() == kept.height
    # every row of the unit's chosen group is kept, nothing else
    assert rows.height == df.join(kept, on=["user", "region"], how="semi").height
    shuffled = df.sample(fraction=1.0, shuffle=True, seed=3)
    rows2, kept2 = one_group_per_unit(shuffled.lazy(), "user", "region", groups, secret)
    assert kept2.sort("user").equals(kept.sort("user"))
    assert rows2.sort(rows2.columns).equals(rows.sort(rows.columns))
    # the choice depends on the secret (units with several groups do not always keep the same one)
    _, kept3 = one_group_per_unit(df.lazy(), "user", "region", groups, bytes(32))
    multi = df.group_by("user").agg(pl.col("region").n_unique()).filter(pl.col("region") > 1)["user"]
    a = kept.filter(pl.col("user").is_in(multi.implode())).sort("user")["region"]
    b = kept3.filter(pl.col("user").is_in(multi.implode())).sort("user")["region"]
    assert not a.equals(b)
    # unlisted groups are dropped before the choice
    rows4, kept4 = one_group_per_unit(df.lazy(), "user", "region", pl.DataFrame({"region": ["east"]}), secret)
    assert set(rows4["region"].to_list()) == {"east"} and set(kept4["region"]) == {"east"}


def test_release_keeps_one_group_per_unit(df):
    """The release's per-group size estimates add up to the units (each unit counted in one group only) and
    the released noise is centred on the one-group counts, not on the raw counts."""
    res = sd.release(df, "user", ["region", "page"], 1.0, 1e-6, keys=KEYS, mechanism=MECH,
                     rng=InsecureSeededRandom(5))
    assert res.curator.bounding.units_in == df["user"].n_unique()
    assert res.curator.bounding.rows_in == df.height
    # the (unit, key) pairs of the other groups were dropped before counting
    assert res.curator.bounding.pairs_in < df.unique().height
    assert res.table.height == len(KEYS) and res.report.mechanism == "grouped-correlated-gaussian"
    assert any("size estimates per 'region' group" in n for n in res.report.notes)


class _ByHandTruth:
    """:func:`_truth` for many secrets: the documented choice (each unit keeps its group of smallest AES rank
    ``prf_ranks(h_u, h_group)``, ties by the group's canonical order) in numpy on fingerprints computed once, so
    each secret costs one AES pass instead of two Polars bounding runs. :func:`_noises` checks it against
    :func:`_truth` on its first secrets."""

    def __init__(self, df):
        rows = df.unique()
        self.users = np.unique(rows["user"].to_numpy())
        self.groups = sorted(GROUPS)  # the canonical order of string keys
        pairs = rows.select("user", "region").unique()
        self.pu = np.searchsorted(self.users, pairs["user"].to_numpy())
        self.pg = np.array([self.groups.index(g) for g in pairs["region"].to_list()])
        self.hu = unit_fingerprints(pl.Series("user", self.users))
        self.hg = key_fingerprints(pl.DataFrame({"region": self.groups}), ["region"])
        self.ru = np.searchsorted(self.users, rows["user"].to_numpy())
        self.rg = np.array([self.groups.index(g) for g in rows["region"].to_list()])
        self.rkey = np.array([KEYS.index(k) for k in zip(rows["region"].to_list(), rows["page"].to_list())])

    def __call__(self, secret):
        rank = prf_ranks(self.hu, self.hg, secret, self.pu, self.pg)
        order = np.lexsort((self.pg, rank, self.pu))  # by unit, then rank, then the group's canonical position
        first = order[np.r_[True, self.pu[order][1:] != self.pu[order][:-1]]]
        kept = np.full(self.users.size, -1)
        kept[self.pu[first]] = self.pg[first]
        f = np.bincount(self.rkey[kept[self.ru] == self.rg], minlength=len(KEYS))
        n = np.bincount(kept, minlength=len(self.groups))
        return f, np.array([n[self.groups.index(g)] for g in GROUPS])


def _noises(df, seeds, mech=MECH, l0=None):
    """Released minus true counts, with the truth recomputed from each release's own bounding secret (the first
    32 bytes the seeded source gives)."""
    import re

    by_hand = _ByHandTruth(df)
    out, sizes = [], []
    for i, s in enumerate(seeds):
        secret = bytes(InsecureSeededRandom(s).random_bytes(32))
        f, nj = by_hand(secret)
        if i < 3:
            f_ref, nj_ref = _truth(df, secret)
            assert (f == f_ref).all() and (nj == nj_ref).all()
        res = sd.release(df, "user", ["region", "page"], 1.0, 1e-6, keys=KEYS, mechanism=mech,
                         max_groups_per_unit=l0, rng=InsecureSeededRandom(s))
        m = {(r, p): c for r, p, c in res.table.select("region", "page", "count").iter_rows()}
        out.append(np.array([m[k] for k in KEYS]) - f)
        sizes_note = next(n for n in res.report.notes if n.startswith("released size estimates per"))
        est = dict(re.findall(r"'(\w+)': ([-+.\de]+)", sizes_note))
        sizes.append(np.array([float(est[g]) for g in GROUPS]) - nj)
    return np.array(out), np.array(sizes)


def test_output_law_matches_calibration(df):
    cal = calibrate_correlated_public(1.0, 1e-6, len(PAGES))
    var_z = dgauss_variance(cal.scale)
    c = cal.c
    zs, sizes = _noises(df, range(300, 600))
    # the released group sizes: n_j + Z_{j,D+1}/C, independent across groups
    assert np.all(np.abs(sizes.mean(axis=0)) < 5 * np.sqrt(var_z / c ** 2 / len(sizes)))
    assert float(np.mean(np.var(sizes, axis=0, ddof=1))) == pytest.approx(var_z / c ** 2, rel=0.12)
    # lattice: released values are y/2 + y_last/(2C) with integer y
    assert np.allclose((zs * 2 * c) % 1, 0)
    # centred on the one-group counts with each group's own unit count n_j (a wrong n_j or a wrong choice of
    # group biases whole groups by tens of units)
    se = np.sqrt((var_z / 4 + var_z / (4 * c * c)) / len(zs))
    assert np.all(np.abs(zs.mean(axis=0)) < 5 * se)
    cov = np.cov(zs, rowvar=False)
    d = len(PAGES)
    assert float(np.mean(np.diag(cov))) == pytest.approx(var_z / 4 + var_z / (4 * c * c), rel=0.08)
    block = np.kron(np.eye(len(GROUPS)), np.ones((d, d))) - np.eye(len(KEYS))
    within = float(cov[block == 1].mean())
    across = cov[np.kron(np.eye(len(GROUPS)), np.ones((d, d))) == 0]
    assert within == pytest.approx(var_z / (4 * c * c), rel=0.3)
    assert abs(float(across.mean())) < 0.1 * var_z / (4 * c * c) + 3 * var_z / 4 / np.sqrt(300)
    # the group means are the shared terms: per-group-centred noise is 2·(independent N_Z(0, s)) / 2
    centred = zs.reshape(len(zs), len(GROUPS), d)
    centred = centred - centred.mean(axis=2, keepdims=True)
    w = float(np.mean(np.var(centred, axis=2, ddof=1)))
    assert w == pytest.approx(var_z / 4, rel=0.08)
    # KS: 2·(noise − group shared term) is an integer N_Z(0, s); compare its within-group differences'
    # law: the difference of two independent N_Z(0, s) draws, against the normal of variance 2 Var(Z)
    diff = 2 * (zs.reshape(len(zs), len(GROUPS), d)[:, :, 0] - zs.reshape(len(zs), len(GROUPS), d)[:, :, 1])
    assert np.allclose(diff, np.round(diff))
    p = stats.kstest(diff.ravel() / np.sqrt(2 * var_z), "norm").pvalue
    assert p > 1e-3


def test_report_and_ledger_charge(df, tmp_path):
    from sparsedp.accounting.calibration import Neighbours
    from sparsedp.ledger import Ledger

    path = tmp_path / "l.db"
    with Ledger(path) as led:
        led.set_budget("d", epsilon=3.0, delta=1e-5)
    res = sd.release(df, "user", ["region", "page"], 1.0, 1e-6, keys=KEYS, mechanism=MECH, ledger=str(path),
                     dataset="d", rng=InsecureSeededRandom(1))
    cal = calibrate_correlated_public(1.0, 1e-6, len(PAGES))
    assert res.report.noise_std == pytest.approx(cal.noise_std)
    assert res.report.delta_achieved == pytest.approx(cal.delta_achieved) and cal.delta_achieved <= 1e-6
    with Ledger(path) as led:
        h = led.history("d")
    assert [(c.mechanism, c.epsilon, c.delta, c.neighbours) for c in h] == [
        ("grouped-correlated-gaussian", 1.0, 1e-6, Neighbours.ADD_REMOVE)]


@pytest.mark.parametrize("kw,msg", [
    (dict(by=["region", "page"], mechanism=sd.GroupedCorrelatedGaussian(group="city")), "not one of the by"),
    (dict(by=["region", "page"], mechanism=sd.GroupedCorrelatedGaussian()), "needs group="),
    (dict(by=["region", "page"], mechanism="grouped-correlated-gaussian"), "needs group="),
    (dict(by="page", keys=PAGES), "not one of the by"),
    (dict(by=["region", "page"], keys=PAGES), "tuple of 2 values"),
    (dict(by=["region", "page"], insecure_float=True), "exact integer noise only"),
    (dict(by=["region", "page"], keys=None), "public key list"),
])
def test_bad_input_refused_nothing_charged(df, tmp_path, kw, msg):
    from sparsedp.ledger import Ledger

    path = tmp_path / "l.db"
    with Ledger(path) as led:
        led.set_budget("d", epsilon=3.0, delta=1e-5)
    args = dict(keys=KEYS, mechanism=MECH) | kw
    by = args.pop("by")
    with pytest.raises((InvalidParameterError, TypeError), match=msg):
        sd.release(df, "user", by, 1.0, 1e-6, ledger=str(path), dataset="d", rng=Tripwire(), **args)
    with Ledger(path) as led:
        assert led.history("d") == []


def test_missing_column_refused_before_the_secret(df, tmp_path):
    from sparsedp.errors import InputDataError

    with pytest.raises(InputDataError, match="region"):
        sd.release(df.drop("region"), "user", ["region", "page"], 1.0, 1e-6, keys=KEYS, mechanism=MECH,
                   rng=Tripwire())


def test_every_embedded_engine_gives_the_same_table(df):
    out = {}
    for eng, data in (("polars", df), ("duckdb", df), ("pandas", df.to_pandas()), ("arrow", df.to_arrow())):
        t = sd.release(data, "user", ["region", "page"], 1.0, 1e-6, keys=KEYS + [("zz", "p0")], mechanism=MECH,
                       max_groups_per_unit=2, engine=eng, rng=InsecureSeededRandom(7)).table
        t = t if isinstance(t, pl.DataFrame) else pl.from_pandas(t) if hasattr(t, "iloc") else pl.from_arrow(t)
        out[eng] = t.sort("region", "page")
    for eng, t in out.items():
        assert t.equals(out["polars"]), eng
    other = sd.release(df, "user", ["region", "page"], 1.0, 1e-6, keys=KEYS, mechanism=MECH,
                       rng=InsecureSeededRandom(8)).table
    assert out["polars"].height == len(KEYS) + 1 and not other.equals(out["polars"].head(len(KEYS)))


def test_integer_groups_of_another_width_and_no_unit_in_a_listed_group(df):
    d2 = df.with_columns(pl.col("region").replace_strict({g: i for i, g in enumerate(GROUPS)},
                                                         return_dtype=pl.Int32))
    keys = [(GROUPS.index(g), p) for g, p in KEYS]
    t = sd.release(d2, "user", ["region", "page"], 1.0, 1e-6, keys=keys, mechanism=MECH,
                   rng=InsecureSeededRandom(5)).table
    assert t.height == len(KEYS)
    with pytest.raises(sd.errors.InputDataError, match="give the keys with the data's type"):
        sd.release(d2, "user", ["region", "page"], 1.0, 1e-6, keys=KEYS, mechanism=MECH, rng=Tripwire())
    # no unit in the listed groups: every key still released (noise only), size estimates around 0
    res = sd.release(df, "user", ["region", "page"], 1.0, 1e-6, keys=[("mars", "p0"), ("mars", "p1")],
                     mechanism=MECH, rng=InsecureSeededRandom(5))
    assert res.table.height == 2 and res.curator.bounding.units_in == 0


def test_auto_with_a_group_compares_grouped_and_independent(df):
    res = sd.release(df, "user", ["region", "page"], 1.0, 1e-6, keys=KEYS, mechanism=sd.Auto(group="region"),
                     rng=InsecureSeededRandom(2))
    names = [c["mechanism"] for c in res.report.candidates]
    assert "grouped-correlated-gaussian" in names and "public-gaussian" in names
    ok = [c for c in res.report.candidates if "noise_std" in c]
    assert res.report.mechanism == min(ok, key=lambda c: c["noise_std"])["mechanism"]
    # 24 keys, units in one group of 6: the grouped noise (calibrated at D = 6) beats every 24-key candidate
    assert res.report.mechanism == "grouped-correlated-gaussian"
    plain = sd.release(df, "user", ["region", "page"], 1.0, 1e-6, keys=KEYS, mechanism="auto",
                       rng=InsecureSeededRandom(2))
    assert "grouped-correlated-gaussian" not in [c["mechanism"] for c in plain.report.candidates]
    with pytest.raises(InvalidParameterError, match="pass keys"):
        sd.release(df, "user", ["region", "page"], 1.0, 1e-6, mechanism=sd.Auto(group="region"),
                   max_groups_per_unit=2, rng=Tripwire())


def test_plan_with_a_group_column():
    frame = pl.DataFrame(KEYS, schema=["region", "page"], orient="row")
    p = sd.plan(1.0, 1e-6, keys=frame, group="region")
    assert p.mechanisms[0].name == "grouped-correlated-gaussian"
    assert p.best.noise_std == pytest.approx(calibrate_correlated_public(1.0, 1e-6, len(PAGES)).noise_std)
    assert "grouped-correlated-gaussian" not in [m.name for m in sd.plan(1.0, 1e-6, keys=len(KEYS)).mechanisms]
    assert [m.name for m in sd.plan(1.0, 1e-6, keys=frame.to_pandas(), group="region").mechanisms] == \
        [m.name for m in p.mechanisms]
    for kw, msg in ((dict(keys=KEYS, group="region"), "as a frame"), (dict(keys=frame, group="city"), "no column"),
                    (dict(group="region", max_groups_per_unit=2), "pass keys")):
        with pytest.raises(InvalidParameterError, match=msg):
            sd.plan(1.0, 1e-6, **kw)
