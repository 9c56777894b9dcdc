"""``release(..., other=True)``: one more row with the private total of every key not released.

On the real secure path with fixed seeds: the row's noise (the released value minus the exact total of the keys not
released, for the data-dependent released set of GSHM) follows the discrete Laplace law of the accountant's scale
``t >= l0/ε_o`` (and not the law at the full ε), the row is marked (null keys, ``other = true``, last), the
ledger is charged once with the sequence of the release's event and the pure ε_o event, and bad requests are
refused before anything is charged or drawn (docs/proofs/other-row.md).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import polars as pl
import pytest
from scipy import stats

import sparsedp as sd
from sparsedp.accounting.discrete import dlaplace_pmf
from sparsedp.accounting.other_total import calibrate_other_total
from sparsedp.accounting.split import split_epsilon
from sparsedp.errors import InvalidParameterError, InvalidTypeError
from sparsedp.noise.source import InsecureSeededRandom

EPS, DELTA = 2.0, 1e-6


class Tripwire:
    """A random source that fails the test if anything draws from it."""

    def uint64(self, size):
        raise AssertionError("randomness drawn before validation finished")

    random_bytes = getrandbits = randbelow = uint64


def _one_key_each() -> pl.DataFrame:
    """Units with one key each (no bounding loss at l0 = 1): 20 keys of 1 … 60 units, around GSHM's threshold."""
    sizes = np.linspace(1, 60, 20).astype(int)
    users = np.arange(sizes.sum())
    keys = np.repeat([f"k{i:02d}" for i in range(20)], sizes)
    return pl.DataFrame({"user": users, "key": keys})


def _noise(df: pl.DataFrame, res) -> int:
    """The other row's value minus the exact total of the keys not released."""
    t = res.table
    other = t.filter(pl.col("other"))
    assert other.height == 1 and other["key"].is_null().all()
    truth = df.group_by("key").len()
    released = set(t.filter(~pl.col("other"))["key"].to_list())
    complement = int(truth.filter(~pl.col("key").is_in(released))["len"].sum())
    return int(other["count"][0]) - complement


def _zs(n: int, share: float) -> np.ndarray:
    df = _one_key_each()
    return np.array([_noise(df, sd.release(df, "user", "key", EPS, DELTA, max_groups_per_unit=1, other=share,
                                            rng=InsecureSeededRandom(seed))) for seed in range(n)])


def _pmf_at(values: np.ndarray, scale) -> np.ndarray:
    return np.asarray(dlaplace_pmf(values.astype(float), scale), dtype=float)


def test_other_noise_is_the_accountants_discrete_laplace():
    """ε_o = share·ε = 1, l0 = 1: Z ~ discrete Laplace(t = 1), P[Z = 0] = (1 − e⁻¹)/(1 + e⁻¹) ≈ 0.46 (binomial
    test over 40 seeded releases, the released set varying with the seed); the law at the full ε (t = 1/2,
    P[Z = 0] ≈ 0.76) is rejected."""
    z = _zs(40, 0.5)
    eps_o, _ = split_epsilon(EPS, 0.5)
    cal = calibrate_other_total(eps_o, 1)
    assert cal.scale == 1
    zeros = int((z == 0).sum())
    assert stats.binomtest(zeros, z.size, float(_pmf_at(np.array([0]), cal.scale)[0])).pvalue > 1e-4
    wrong = calibrate_other_total(EPS, 1).scale
    assert stats.binomtest(zeros, z.size, float(_pmf_at(np.array([0]), wrong)[0])).pvalue < 1e-3


@pytest.mark.slow
def test_other_noise_law_chi_square():
    """The same over 400 releases: chi-square of Z against the exact pmf of t = 1 (tails pooled)."""
    z = _zs(400, 0.5)
    edges = np.arange(-4, 5)
    obs = np.array([(z < -3).sum(), *[(z == k).sum() for k in range(-3, 4)], (z > 3).sum()])
    p_mid = _pmf_at(np.arange(-3, 4), 1)
    tail = (1 - p_mid.sum()) / 2
    exp = np.array([tail, *p_mid, tail]) * z.size
    assert edges.size == 9 and stats.chisquare(obs, exp).pvalue > 1e-4


def test_the_row_is_marked_last_and_not_a_released_key():
    df = _one_key_each()
    res = sd.release(df, "user", "key", EPS, DELTA, max_groups_per_unit=1, other=True,
                     rng=InsecureSeededRandom(3))
    t = res.table
    assert t.columns == ["key", "count", "count_lo", "count_hi", "other"]
    assert t["other"].to_list() == [False] * (t.height - 1) + [True]
    assert t["key"].null_count() == 1 and t["key"][-1] is None
    assert res.report.released_keys == t.height - 1
    note = next(n for n in res.report.notes if n.startswith("other row:"))
    eps_o, eps_r = split_epsilon(EPS, 0.1)
    cal = calibrate_other_total(eps_o, 1)
    assert f"std {cal.noise_std:.4g}" in note and f"epsilon {eps_r:.4g}" in note
    assert res.report.epsilon == EPS
    # the same seed, the same table on another engine
    again = sd.release(df.to_pandas(), "user", "key", EPS, DELTA, max_groups_per_unit=1, other=True,
                       rng=InsecureSeededRandom(3)).table
    assert pl.from_pandas(again).equals(t)


def test_with_a_public_list_a_mixed_key_set_and_sums():
    df = _one_key_each().with_columns(country=pl.lit("FR"), v=pl.lit(0.5))
    pub = sd.release(df, "user", "key", EPS, DELTA, max_groups_per_unit=1, keys=["k00", "k19", "zz"], other=True,
                     rng=InsecureSeededRandom(1)).table
    assert pub.height == 4 and pub["other"].sum() == 1
    mixed = sd.release(df, "user", ["country", "key"], EPS, DELTA, max_groups_per_unit=1,
                       keys={"country": ["FR", "DE"]}, other=True, rng=InsecureSeededRandom(1))
    t = mixed.table
    assert t.filter(pl.col("other"))[["country", "key"]].null_count().row(0) == (1, 1)
    assert (t.height - 1) % 2 == 0
    sums = sd.release(df, "user", "key", EPS, DELTA, max_groups_per_unit=1, other=True,
                      aggregates=[sd.Count(), sd.Sum("v", 0, 1)], rng=InsecureSeededRandom(1))
    last = sums.table.row(-1, named=True)
    assert last["other"] and last["sum_v"] is None and last["count"] is not None
    assert any("SUM/MEAN columns are null" in n for n in sums.report.notes)


def test_ledger_charged_once_with_the_other_rows_pure_event(tmp_path):
    from sparsedp.accounting.events import PureEvent, SequenceEvent
    from sparsedp.ledger import Ledger

    path = tmp_path / "l.db"
    with Ledger(path) as led:
        led.set_budget("d", epsilon=5.0, delta=1e-5)
    sd.release(_one_key_each(), "user", "key", EPS, DELTA, max_groups_per_unit=1, other=0.25, mechanism="gshm", ledger=str(path),
               dataset="d", rng=InsecureSeededRandom(1))
    with Ledger(path) as led:
        h = led.history("d")
    assert [(c.mechanism, c.epsilon, c.delta, c.status) for c in h] == [("gshm+other", EPS, DELTA, "published")]
    ev = h[0].event
    assert isinstance(ev, SequenceEvent) and (ev.epsilon, ev.delta) == (EPS, DELTA)
    first, second = ev.events
    eps_o, eps_r = split_epsilon(EPS, 0.25)
    assert isinstance(second, PureEvent) and second.epsilon == eps_o and first.epsilon == eps_r
    assert first.epsilon + second.epsilon <= EPS


@pytest.mark.parametrize("kw,exc,msg", [
    (dict(other=True, max_groups_per_unit=None, top_k=5), InvalidParameterError, "max_groups_per_unit"),
    (dict(other=True, max_groups_per_unit="auto"), InvalidParameterError, "max_groups_per_unit"),
    (dict(other=1.5), InvalidParameterError, "other"),
    (dict(other="yes"), InvalidTypeError, "other"),
    (dict(other=True, by="other"), InvalidParameterError, "'other'"),
    (dict(other=True, aggregates=[sd.Count(name="other")]), InvalidParameterError, "'other'"),
    (dict(other=True, mechanism="optimal-partition"), InvalidParameterError, "keys only"),
])
def test_bad_requests_refused_before_any_charge_or_draw(tmp_path, kw, exc, msg):
    from sparsedp.ledger import Ledger

    path = tmp_path / "l.db"
    with Ledger(path) as led:
        led.set_budget("d", epsilon=5.0, delta=1e-5)
    df = _one_key_each().with_columns(other=pl.col("key"))
    kw = {"privacy_unit": "user", "by": "key", "max_groups_per_unit": 1, **kw}
    with pytest.raises(exc, match=msg):
        sd.release(df, epsilon=EPS, delta=DELTA, ledger=str(path), dataset="d", rng=Tripwire(), **kw)
    with Ledger(path) as led:
        assert led.history("d") == []


def test_cli_other(tmp_path):
    from typer.testing import CliRunner

    from sparsedp.cli import app

    path, out = tmp_path / "in.parquet", tmp_path / "out.csv"
    _one_key_each().write_parquet(path)
    base = ["release", str(path), "--unit", "user", "--by", "key", "--epsilon", "2", "--delta", "1e-6"]
    r = CliRunner().invoke(app, [*base, "--max-groups", "1", "--other", "--out", str(out)])
    assert r.exit_code == 0, r.output
    t = pl.read_csv(out)
    assert t.columns == ["key", "count", "count_lo", "count_hi", "other"] and t["other"].to_list()[-1] is True
    assert "other row:" in r.output
    bad = CliRunner().invoke(app, [*base, "--top-k", "3", "--other"])
    assert bad.exit_code == 2 and "--other needs --max-groups" in bad.output


@pytest.mark.parametrize("scale", [Fraction(1, 3), 1, Fraction(7, 2), 40, Fraction(301, 3)])
def test_other_halfwidth_is_the_first_h_of_the_upward_scan(scale):
    """The closed-form start gives exactly the h (and coverage) of scanning up from h = 0 with the same test."""
    from sparsedp.accounting.discrete import dlaplace_sf
    from sparsedp.other_row import other_halfwidth

    for level in (0.01, 0.5, 0.9, 0.95, 0.999, 1 - 1e-12):
        h = 0
        while 1.0 - 2.0 * float(dlaplace_sf(h + 1, scale)) < level:
            h += 1
        assert other_halfwidth(scale, level) == (h, 1.0 - 2.0 * float(dlaplace_sf(h + 1, scale)))


def test_interval_of_the_other_row_is_its_own_noise():
    """With ``interval=0.9`` the other row's interval is ±h of its discrete Laplace (h the smallest integer whose
    exact P[|Z| <= h] reaches 0.9, checked by summing the pmf), not the release's law; SUM intervals null there."""
    from sparsedp.other_row import other_halfwidth

    df = _one_key_each().with_columns(v=pl.lit(0.5))
    res = sd.release(df, "user", "key", EPS, DELTA, max_groups_per_unit=1, other=0.5, interval=0.9,
                     aggregates=[sd.Count(), sd.Sum("v", 0, 1)], rng=InsecureSeededRandom(2))
    last = res.table.row(-1, named=True)
    h, coverage = other_halfwidth(1, 0.9)
    grid = np.arange(-h, h + 1)
    assert coverage == pytest.approx(float(_pmf_at(grid, 1).sum()), rel=1e-12) and coverage >= 0.9
    assert float(_pmf_at(np.arange(-h + 1, h), 1).sum()) < 0.9  # the smallest such h
    assert last["count_hi"] == last["count"] + h and last["count_lo"] == max(last["count"] - h, 0)
    assert last["sum_v_lo"] is None and last["sum_v_hi"] is None
    first = res.table.row(0, named=True)
    assert first["count_hi"] - first["count"] != h  # the released keys keep the release's law
    assert any(n.startswith("other row: its interval") for n in res.report.notes)
