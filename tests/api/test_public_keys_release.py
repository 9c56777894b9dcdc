"""``sd.release(..., keys=…)``: public key domain (seed 002 correlated Gaussian, independent Gaussian, Laplace).

The output law is checked against the accountant's noise (the real secure path, fixed seeds), the ledger charge
and relation, identical tables on every embedded engine, and the refusals (nothing drawn, nothing charged).
"""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest
from scipy import stats

import sparsedp as sd
from sparsedp.accounting.discrete import dgauss_pmf, dlaplace_pmf
from sparsedp.errors import InputDataError, InvalidParameterError
from sparsedp.mechanisms.public_keys import CorrelatedGaussian
from sparsedp.noise.source import InsecureSeededRandom


class Tripwire:
    """A random source that fails the test if anything draws from it."""

    def uint64(self, size):
        raise AssertionError("randomness drawn before validation finished")

    random_bytes = getrandbits = randbelow = uint64


def _data(n_units=300, n_keys=40, seed=0):
    rng = np.random.default_rng(seed)
    rows = []
    for u in range(n_units):
        for k in rng.choice(n_keys, size=rng.integers(1, 6), replace=False):
            rows.append((u, f"k{k:03d}"))
    return pl.DataFrame(rows, schema=["user", "key"], orient="row")


@pytest.fixture(scope="module")
def df():
    return _data()


def _true(df, keys):
    c = df.unique().group_by("key").len()
    m = dict(zip(c["key"].to_list(), c["len"].to_list()))
    return np.array([m.get(k, 0) for k in keys], dtype=np.int64)


KEYS = [f"k{i:03d}" for i in range(0, 60)]  # k040..k059 are absent from the data


def _noise(res, df, keys=KEYS):
    t = res.table.sort("key")
    assert t["key"].to_list() == sorted(keys)
    return t["count"].to_numpy() - _true(df, sorted(keys))


def test_every_listed_key_released_absent_keys_noised_unlisted_dropped(df):
    res = sd.release(df, "user", "key", 1.0, 1e-6, keys=KEYS[5:], rng=InsecureSeededRandom(1))
    t = res.table
    assert t.height == len(KEYS) - 5 and set(t["key"]) == set(KEYS[5:])
    assert res.report.threshold is None and res.report.released_keys == len(KEYS) - 5
    assert "public key list" in str(res.report)


def test_public_gaussian_noise_law_chi_square(df):
    """Independent N_Z(0, s) per key: pooled over releases, the noise matches the exact pmf (chi-square)."""
    zs, cal = [], None
    for seed in range(40):
        res = sd.release(df, "user", "key", 1.0, 1e-6, keys=KEYS, mechanism="public-gaussian",
                         rng=InsecureSeededRandom(seed))
        zs.append(_noise(res, df))
    z = np.concatenate(zs)
    from sparsedp.accounting.public_keys import calibrate_public_gaussian

    cal = calibrate_public_gaussian(1.0, 1e-6, len(KEYS))
    assert res.report.noise_std == pytest.approx(cal.noise_std)
    edges = np.arange(-60, 61, 6)
    obs = np.histogram(z, bins=np.r_[-np.inf, edges, np.inf])[0]
    grid = np.arange(-2000, 2001)
    p = dgauss_pmf(grid, cal.scale)
    cdf = np.r_[0.0, np.cumsum(p)]
    idx = np.searchsorted(grid, edges)  # P[Z < edge]
    probs = np.diff(np.r_[0.0, cdf[idx], 1.0])
    exp = probs * z.size
    assert stats.chisquare(obs, exp).pvalue > 1e-3
    # the test can fail: a 20% wider law is rejected
    wide = dgauss_pmf(grid, cal.scale * 1.44)
    cw = np.r_[0.0, np.cumsum(wide)]
    pw = np.diff(np.r_[0.0, cw[idx], 1.0])
    assert stats.chisquare(obs, pw * z.size).pvalue < 1e-3


def test_public_laplace_noise_law_ks(df):
    zs = [_noise(sd.release(df, "user", "key", 1.0, 0.0, keys=KEYS, mechanism="public-laplace",
                            max_groups_per_unit=5, rng=InsecureSeededRandom(s)), df) for s in range(30)]
    z = np.concatenate(zs)
    from sparsedp.accounting.public_keys import calibrate_public_laplace

    cal = calibrate_public_laplace(1.0, 0.0, len(KEYS), 5)  # units have at most 5 keys: nothing is cut
    assert float(cal.scale) == pytest.approx(5.0, rel=1e-6)
    grid = np.arange(-200, 201)
    cdf = np.cumsum(dlaplace_pmf(grid, cal.scale))
    # discrete KS: compare the empirical and exact CDFs on the integers
    emp = np.searchsorted(np.sort(z), grid, side="right") / z.size
    assert np.max(np.abs(emp - cdf)) < 1.63 / math.sqrt(z.size)  # ≈ 1% level
    wide = np.cumsum(dlaplace_pmf(grid, cal.scale * 1.3))  # the test can fail: a 30% wider law is rejected
    assert np.max(np.abs(emp - wide)) > 1.63 / math.sqrt(z.size)


def test_public_laplace_bound_is_enforced_by_the_engine(df):
    """With max_groups_per_unit=3 units with more keys are cut to 3: the noiseless part is the bounded count."""
    res = sd.release(df, "user", "key", 1.0, 0.0, keys=KEYS, mechanism="public-laplace", max_groups_per_unit=3,
                     rng=InsecureSeededRandom(3))
    assert res.curator.bounding.units_over_l0 > 0
    assert "at most 3 of the 60 listed keys per unit" in res.report.contribution


def test_correlated_gaussian_covariance_matches_accountant(df):
    """Seed 002 Cor. 3.1 with the discrete scale: per-key variance Var(Z)(1 + 1/C²)/4, covariance between keys
    Var(Z)/(4C²) (the shared term), and within one release the keys' noises minus their mean have variance
    ≈ Var(Z)/4 (the independent terms)."""
    from sparsedp.accounting.discrete import dgauss_variance

    c = 3
    mech = CorrelatedGaussian(c=c)
    zs = np.array([_noise(sd.release(df, "user", "key", 1.0, 1e-6, keys=KEYS, mechanism=mech,
                                     rng=InsecureSeededRandom(100 + s)), df) for s in range(400)])
    res = sd.release(df, "user", "key", 1.0, 1e-6, keys=KEYS, mechanism=mech, rng=InsecureSeededRandom(1))
    from sparsedp.accounting.public_keys import calibrate_correlated_public

    cal = calibrate_correlated_public(1.0, 1e-6, len(KEYS), c=c)
    var_z = dgauss_variance(cal.scale)
    assert res.report.noise_std == pytest.approx(math.sqrt(var_z / 4 + var_z / (4 * c * c)))
    cov = np.cov(zs, rowvar=False)
    per_key = float(np.mean(np.diag(cov)))
    off = float((cov.sum() - np.trace(cov)) / (cov.size - len(cov)))
    assert per_key == pytest.approx(var_z / 4 + var_z / (4 * c * c), rel=0.05)
    assert off == pytest.approx(var_z / (4 * c * c), rel=0.25)
    within = float(np.mean(np.var(zs - zs.mean(axis=1, keepdims=True), axis=1, ddof=1)))
    assert within == pytest.approx(var_z / 4, rel=0.05)
    # the released values are on the 1/(2C) lattice: y_j/2 + y_{d+1}/(2C) with integers y
    assert np.allclose((res.table["count"].to_numpy() * 2 * c) % 1, 0)


def test_correlated_gaussian_size_estimate_is_released(df):
    res = sd.release(df, "user", "key", 1.0, 1e-6, keys=KEYS, mechanism="correlated-gaussian",
                     rng=InsecureSeededRandom(5))
    note = [n for n in res.report.notes if n.startswith("released size estimate")]
    assert len(note) == 1
    n_tilde = float(note[0].split("=")[1].split()[0])
    assert abs(n_tilde - df["user"].n_unique()) < 6 * 40  # std ≈ 23 here


def test_known_n_variant_noise(df):
    n = df["user"].n_unique()
    mech = CorrelatedGaussian(known_n=float(n))  # the exact n: the error is the fresh noise Z/2 only
    zs = np.concatenate([_noise(sd.release(df, "user", "key", 1.0, 1e-6, keys=KEYS, mechanism=mech,
                                           rng=InsecureSeededRandom(s)), df) for s in range(30)])
    from sparsedp.accounting.discrete import dgauss_variance
    from sparsedp.accounting.public_keys import calibrate_correlated_public

    cal = calibrate_correlated_public(1.0, 1e-6, len(KEYS), known_n=n)
    assert np.var(zs) == pytest.approx(dgauss_variance(cal.scale) / 4, rel=0.08)
    assert np.allclose((zs * 2) % 1, 0)


def test_auto_picks_lowest_error_and_says_why(df):
    many = [f"k{i:03d}" for i in range(2000)]
    res = sd.release(df, "user", "key", 1.0, 1e-6, keys=many, rng=InsecureSeededRandom(1))
    assert res.report.mechanism == "correlated-gaussian"
    assert "lowest expected error per key" in res.report.reason
    few = sd.release(df, "user", "key", 1.0, 1e-6, keys=KEYS, max_groups_per_unit=2, rng=InsecureSeededRandom(1))
    assert few.report.mechanism == "public-laplace"  # k = 2: Laplace's √2·k/ε beats the Gaussians
    stds = {c["mechanism"]: c["noise_std"] for c in few.report.candidates}
    assert stds["public-laplace"] == min(stds.values()) and len(stds) == 4
    mid = sd.release(df, "user", "key", 1.0, 1e-6, keys=KEYS, max_groups_per_unit=15, rng=InsecureSeededRandom(1))
    assert mid.report.mechanism == "bounded-density"  # seed 002 §4.1: 1 < k < d
    stds = {c["mechanism"]: c["noise_std"] for c in mid.report.candidates}
    assert stds["bounded-density"] < min(stds["public-gaussian"], stds["correlated-gaussian"])
    pure = sd.release(df, "user", "key", 1.0, 0.0, keys=KEYS, rng=InsecureSeededRandom(1))
    assert pure.report.mechanism == "public-laplace" and pure.report.delta == 0.0


def test_plan_with_keys_halves_the_gaussian_error_for_many_keys():
    p = sd.plan(1.0, 1e-6, keys=10_000)
    assert p.mechanisms[0].name == "correlated-gaussian"
    ratio = p[0].noise_std / p[1].noise_std
    assert 0.49 < ratio < 0.52  # seed 002: (√d + 1)/(2√d) → 1/2
    assert sd.plan(1.0, 1e-6, keys=1000, max_groups_per_unit=10).mechanisms[0].name == "public-gaussian"


@pytest.mark.parametrize("mechanism", ["auto", "correlated-gaussian", "public-gaussian", "public-laplace"])
def test_every_embedded_engine_gives_the_same_table(df, mechanism):
    keys = KEYS + ["zz"]
    out = {}
    for eng, data in (("polars", df), ("duckdb", df), ("pandas", df.to_pandas()), ("arrow", df.to_arrow())):
        t = sd.release(data, "user", "key", 1.0, 1e-6, keys=keys, mechanism=mechanism, max_groups_per_unit=3,
                       engine=eng, rng=InsecureSeededRandom(7)).table
        t = t if isinstance(t, pl.DataFrame) else pl.from_pandas(t) if hasattr(t, "iloc") else pl.from_arrow(t)
        out[eng] = t.sort("key")
    for eng, t in out.items():
        assert t.equals(out["polars"]), eng
    other = sd.release(df, "user", "key", 1.0, 1e-6, keys=keys, mechanism=mechanism, max_groups_per_unit=3,
                       rng=InsecureSeededRandom(8)).table.sort("key")
    assert not other.equals(out["polars"])


def test_multi_column_keys_and_frames(df):
    d2 = df.with_columns(pl.col("key").str.slice(0, 2).alias("a"), pl.col("key").str.slice(2).alias("b"))
    d2 = d2.select("user", "a", "b")
    keys = pl.DataFrame({"a": ["k0"] * 3, "b": ["00", "01", "99"], "extra": [1, 2, 3]})
    r1 = sd.release(d2, "user", ["a", "b"], 1.0, 1e-6, keys=keys, rng=InsecureSeededRandom(1)).table
    r2 = sd.release(d2, "user", ["a", "b"], 1.0, 1e-6, keys=[("k0", "99"), ("k0", "00"), ("k0", "01")],
                    rng=InsecureSeededRandom(1)).table
    assert [c for c in r1.columns if not c.endswith(("_lo", "_hi"))] == ["a", "b", "count"] and r1.sort("b").equals(r2.sort("b"))
    r3 = sd.release(df, "user", "key", 1.0, 1e-6, keys=pl.Series(KEYS), rng=InsecureSeededRandom(1)).table
    r4 = sd.release(df, "user", "key", 1.0, 1e-6, keys=pl.DataFrame({"key": KEYS}).to_pandas()["key"],
                    rng=InsecureSeededRandom(1)).table
    assert r3.sort("key").equals(r4.sort("key"))


def test_ledger_charge_and_relation(df, tmp_path):
    from sparsedp.accounting.calibration import Neighbours
    from sparsedp.ledger import Ledger

    path = tmp_path / "l.db"
    with Ledger(path) as led:
        led.set_budget("d", epsilon=3.0, delta=1e-5)
    sd.release(df, "user", "key", 1.0, 1e-6, keys=KEYS, mechanism="correlated-gaussian", ledger=str(path),
               dataset="d", rng=InsecureSeededRandom(1))
    sd.release(df, "user", "key", 0.5, 1e-6, keys=KEYS, mechanism="public-laplace", ledger=str(path),
               dataset="d", rng=InsecureSeededRandom(1))
    with Ledger(path) as led:
        h = led.history("d")
    assert [(c.mechanism, c.epsilon, c.delta, c.neighbours) for c in h] == [
        ("correlated-gaussian", 1.0, 1e-6, Neighbours.ADD_REMOVE), ("public-laplace", 0.5, 0.0, Neighbours.ADD_REMOVE)]


@pytest.mark.parametrize("keys,msg", [
    ([], "keys is empty"),
    (["k001", None], "null"),
    (["k001", "k002", "k001"], "more than once"),
    ([1.0, float("nan")], "NaN"),
    (pl.DataFrame({"other": ["a"]}), "no column 'key'"),
    ("k001", "must be a list"),
])
def test_bad_keys_refused_before_reading_nothing_charged(df, tmp_path, keys, msg):
    from sparsedp.ledger import Ledger

    path = tmp_path / "l.db"
    with Ledger(path) as led:
        led.set_budget("d", epsilon=3.0, delta=1e-5)
    with pytest.raises((InvalidParameterError, TypeError), match=msg):
        sd.release(df, "user", "key", 1.0, 1e-6, keys=keys, ledger=str(path), dataset="d", rng=Tripwire())
    with Ledger(path) as led:
        assert led.history("d") == []


def test_key_type_mismatch_refused_before_the_charge(df, tmp_path):
    from sparsedp.ledger import Ledger

    path = tmp_path / "l.db"
    with Ledger(path) as led:
        led.set_budget("d", epsilon=3.0, delta=1e-5)
    with pytest.raises(InputDataError, match="give the keys with the data's type"):
        sd.release(df, "user", "key", 1.0, 1e-6, keys=[1, 2, 3], ledger=str(path), dataset="d", rng=Tripwire())
    with Ledger(path) as led:
        assert led.history("d") == []


@pytest.mark.parametrize("kw,msg", [
    (dict(mechanism="correlated-gaussian"), "pass keys="),
    (dict(mechanism="public-laplace", delta=0.0), "pass keys="),
    (dict(mechanism="gshm", keys=KEYS, max_groups_per_unit=2), "without a threshold"),
    (dict(top_k=5, keys=KEYS), "top_k selects keys"),
    (dict(keys=KEYS, aggregates=[sd.Count(), sd.Sum("user", 0, 1)]), "aggregates|privacy unit"),
    (dict(mechanism=CorrelatedGaussian(c=2.5), keys=KEYS), "integer"),
])
def test_mechanism_and_keys_mismatch_is_a_clear_error(df, kw, msg):
    args = dict(epsilon=1.0, delta=1e-6)
    args.update(kw)
    with pytest.raises(InvalidParameterError, match=msg):
        sd.release(df, "user", "key", rng=Tripwire(), **args)


def test_float_noise_only_on_request(df):
    with pytest.warns(Warning):
        res = sd.release(df, "user", "key", 1.0, 1e-6, keys=KEYS, mechanism=CorrelatedGaussian(c=2.5),
                         insecure_float=True, rng=InsecureSeededRandom(1))
    assert res.report.insecure_float and res.report.analysis == "continuous"


def test_bounded_density_noise_law(df):
    """The centred embedding (q·x − p, c): per-key variance Var(Z)(1 + p²/c²)/q², covariance Var(Z)p²/(c²q²)."""
    from sparsedp.accounting.discrete import dgauss_variance
    from sparsedp.accounting.public_keys import calibrate_bounded_density

    cal = calibrate_bounded_density(1.0, 1e-6, len(KEYS), 5)
    assert (cal.p, cal.q) != (1, 2)
    zs = np.array([_noise(sd.release(df, "user", "key", 1.0, 1e-6, keys=KEYS, mechanism="bounded-density",
                                     max_groups_per_unit=5, rng=InsecureSeededRandom(300 + s)), df)
                   for s in range(300)])
    var_z = dgauss_variance(cal.scale)
    cov = np.cov(zs, rowvar=False)
    per_key = float(np.mean(np.diag(cov)))
    off = float((cov.sum() - np.trace(cov)) / (cov.size - len(cov)))
    assert per_key == pytest.approx(var_z * (1 + cal.p ** 2 / cal.c ** 2) / cal.q ** 2, rel=0.06)
    assert off == pytest.approx(var_z * cal.p ** 2 / (cal.c ** 2 * cal.q ** 2), rel=0.3)
