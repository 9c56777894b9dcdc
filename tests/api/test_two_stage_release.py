"""``mechanism=sd.TwoStage(...)``: select keys with a small bound (stage 1), count them as a public list (stage 2).

Checked on the real secure path with fixed seeds: the release probability of stage 1 and the count noise of stage 2
against their accountants' laws, one ledger charge for the whole (ε, δ), only stage 2's counts published, and
every bad request refused before anything is charged or drawn (docs/proofs/two-stage.md).
"""

from __future__ import annotations

import re

import numpy as np
import polars as pl
import pytest
from scipy import stats

import sparsedp as sd
from sparsedp.accounting import calibrate
from sparsedp.accounting.discrete import dgauss_pmf, dgauss_sf
from sparsedp.accounting.public_keys import calibrate_correlated_public
from sparsedp.errors import InputDataError, InvalidParameterError, InvalidTypeError
from sparsedp.noise.source import InsecureSeededRandom

EPS, DELTA = 1.0, 1e-6


class Tripwire:
    """A random source that fails the test if anything draws from it."""

    def uint64(self, size):
        raise AssertionError("randomness drawn before validation finished")

    random_bytes = getrandbits = randbelow = uint64


def _flat(n_keys: int, count: int) -> pl.DataFrame:
    """``n_keys`` keys with exactly ``count`` units each, every unit in one key (no bounding loss at l0 = 1)."""
    units = np.arange(n_keys * count)
    return pl.DataFrame({"user": units, "key": [f"k{u // count:04d}" for u in units]})


def _mixed(seed: int = 0) -> pl.DataFrame:
    """Heavy units touching many keys: the unbounded count differs from the bounded one."""
    rng = np.random.default_rng(seed)
    rows = []
    for u in range(3000):
        m = 30 if u % 10 == 0 else int(rng.integers(1, 4))
        for k in rng.choice(60, size=m, replace=False):
            rows.append((u, f"k{int(k):03d}"))
    return pl.DataFrame(rows, schema=["user", "key"], orient="row")


@pytest.fixture(scope="module")
def mixed():
    return _mixed()


def _truth(df: pl.DataFrame) -> dict:
    c = df.unique().group_by("key").len()
    return dict(zip(c["key"].to_list(), c["len"].to_list()))


def test_release_probability_follows_stage_one_law():
    """Stage 1 (GSHM at split·ε, delta_split·δ, l0 = 1) releases a key of count c with probability
    P[N_Z(0, s) >= pre + margin − c]: a binomial test over 3 seeded releases of 300 equal keys, which the law at
    the full ε (the wrong split) fails."""
    ts = sd.TwoStage(select="gshm", split=0.5)
    cal1 = calibrate("gshm", epsilon=EPS * 0.5, delta=DELTA * 0.5, l0=1, discrete=True)
    pre, margin = 1, int(cal1.tau)
    c = pre + margin - 1  # P ≈ one half
    df = _flat(300, c)
    released = sum(sd.release(df, "user", "key", EPS, DELTA, max_groups_per_unit=1, mechanism=ts,
                              rng=InsecureSeededRandom(seed)).table.height for seed in (1, 2, 3))
    p = dgauss_sf(pre + margin - c, cal1.noise.sigma2)
    assert stats.binomtest(released, 900, p).pvalue > 1e-4
    full = calibrate("gshm", epsilon=EPS, delta=DELTA * 0.5, l0=1, discrete=True)
    p_wrong = dgauss_sf(pre + int(full.tau) - c, full.noise.sigma2)
    assert stats.binomtest(released, 900, p_wrong).pvalue < 1e-6


def _stage2_noise(res, df):
    """Z_j (exact integers) of the stage-2 embedding from the released counts: 2(f̃_j − f_j) = Z_j + Z_{d+1}/C,
    with Z_{d+1} = y_{d+1} − C·n read from the report's note (n = the units of the input)."""
    note = next(n for n in res.report.notes if "y_(d+1)" in n)
    y_last, cc = (int(x) for x in re.search(r"y_\(d\+1\) = (-?\d+) with C = (\d+)", note).groups())
    n = df["user"].n_unique()
    truth = _truth(df)
    t = res.table
    f = np.array([truth[k] for k in t["key"].to_list()], dtype=np.float64)
    z = 2 * (t["count"].to_numpy() - f) - (y_last - cc * n) / cc
    assert np.allclose(z, np.round(z), atol=1e-6)  # integer noise, one shared term
    return np.round(z).astype(np.int64), cc


def test_count_noise_follows_stage_two_law():
    """Stage 2's independent terms are N_Z(0, s) with s the correlated Gaussian's calibration at
    ((1 − split)·ε, (1 − delta_split)·δ, d = |K|): chi-square over the pooled terms of 3 seeded releases."""
    df = _flat(400, 150)  # far above the threshold: every key selected, d = 400
    ts = sd.TwoStage(select="gshm", split=0.4, delta_split=0.3)
    cal2 = calibrate_correlated_public(EPS * 0.6, DELTA * 0.7, 400)
    zs = []
    for seed in (1, 2, 3):
        res = sd.release(df, "user", "key", EPS, DELTA, max_groups_per_unit=1, mechanism=ts,
                         rng=InsecureSeededRandom(seed))
        assert res.table.height == 400
        z, cc = _stage2_noise(res, df)
        assert cc == cal2.c
        zs.append(z)
    z = np.concatenate(zs)
    s = cal2.scale
    sd_ = float(s) ** 0.5
    edges = np.arange(-3 * sd_, 3 * sd_ + 1, sd_ / 2).round().astype(int)
    obs = np.histogram(z, bins=np.concatenate(([-10 ** 9], edges, [10 ** 9])))[0]
    grid = np.arange(-int(12 * sd_), int(12 * sd_) + 1)
    pmf = dgauss_pmf(grid, s)
    exp = np.histogram(grid, bins=np.concatenate(([-10 ** 9], edges, [10 ** 9])), weights=pmf)[0] * z.size
    assert stats.chisquare(obs, exp * obs.sum() / exp.sum()).pvalue > 1e-4
    # the law of the wrong budget (stage 2 at the full epsilon) is rejected
    wrong = calibrate_correlated_public(EPS, DELTA * 0.7, 400).scale
    pw = dgauss_pmf(grid, wrong)
    expw = np.histogram(grid, bins=np.concatenate(([-10 ** 9], edges, [10 ** 9])), weights=pw)[0] * z.size
    assert stats.chisquare(obs, expw * obs.sum() / expw.sum()).pvalue < 1e-6


def test_table_and_report(mixed):
    """One table: the selected keys with stage 2's (unbounded) counts; the report states both stages, the whole
    (ε, δ) and the δ achieved (stage 1's noise sampled + stage 2's bound over d, its value at d in a note)."""
    res = sd.release(mixed, "user", "key", EPS, DELTA, max_groups_per_unit=2, mechanism=sd.TwoStage(select="gshm"),
                     rng=InsecureSeededRandom(7))
    t, r = res.table, res.report
    assert t.columns == ["key", "count", "count_lo", "count_hi"] and t.height > 0
    assert r.mechanism == "two-stage" and r.epsilon == EPS and r.delta == DELTA
    cal1 = calibrate("gshm", epsilon=EPS / 2, delta=DELTA / 2, l0=2, discrete=True)
    cal2 = calibrate_correlated_public(EPS / 2, DELTA / 2, t.height)
    assert r.delta_parts == pytest.approx({"select": cal1.delta_achieved, "count": DELTA / 2})
    assert r.delta_achieved == pytest.approx(cal1.delta_achieved + DELTA / 2) and r.delta_achieved <= DELTA
    assert any(f"{cal2.delta_achieved:.4g} at d = {t.height}" in n for n in r.notes)
    assert r.noise_std == pytest.approx(cal2.noise_std)
    assert any("counts are not published" in n for n in r.notes)
    # stage 2 counts every unit (no bound): the heavy units' keys are counted; GSHM at l0 = 2 loses them
    truth = _truth(mixed)
    err2 = np.median(np.abs(t["count"].to_numpy() - np.array([truth[k] for k in t["key"].to_list()])))
    g = sd.release(mixed, "user", "key", EPS, DELTA, max_groups_per_unit=2, mechanism="gshm",
                   rng=InsecureSeededRandom(7)).table
    errg = np.median(np.abs(g["count"].to_numpy() - np.array([truth[k] for k in g["key"].to_list()])))
    assert err2 < errg / 2
    # same seed, same table, on another engine too
    again = sd.release(mixed.to_pandas(), "user", "key", EPS, DELTA, max_groups_per_unit=2,
                       mechanism=sd.TwoStage(select="gshm"), rng=InsecureSeededRandom(7)).table
    assert pl.from_pandas(again).equals(t)


def test_count_bound_and_other_stage_mechanisms(mixed):
    res = sd.release(mixed, "user", "key", EPS, DELTA, max_groups_per_unit=2, rng=InsecureSeededRandom(3),
                     mechanism=sd.TwoStage(select=sd.Laplace(), count="public-gaussian", count_bound=5, split=0.6))
    assert "at most 5 keys per unit" in res.report.contribution
    assert res.report.options["count_bound"] == 5 and res.table.height > 0
    a = sd.release(mixed, "user", "key", EPS, DELTA, max_groups_per_unit=2, rng=InsecureSeededRandom(3),
                   mechanism=sd.TwoStage(count="auto"))
    assert any("lowest expected error" in n for n in a.report.notes)


def test_nothing_selected_releases_an_empty_table():
    df = _flat(5, 1)
    res = sd.release(df, "user", "key", 0.1, DELTA, max_groups_per_unit=1, mechanism=sd.TwoStage(),
                     rng=InsecureSeededRandom(1))
    assert res.table.height == 0 and res.table.columns == ["key", "count"]
    assert any("selected no key" in n for n in res.report.notes)


def test_ledger_charged_once_for_the_whole_release(mixed, tmp_path):
    from sparsedp.accounting.calibration import Neighbours
    from sparsedp.ledger import Ledger

    path = tmp_path / "l.db"
    with Ledger(path) as led:
        led.set_budget("d", epsilon=3.0, delta=1e-5)
    sd.release(mixed, "user", "key", EPS, DELTA, max_groups_per_unit=2, mechanism=sd.TwoStage(split=0.3),
               ledger=str(path), dataset="d", rng=InsecureSeededRandom(1))
    with Ledger(path) as led:
        h = led.history("d")
    assert [(c.mechanism, c.epsilon, c.delta, c.neighbours, c.status) for c in h] == [
        ("two-stage", EPS, DELTA, Neighbours.ADD_REMOVE, "published")]
    # charged as the sequence of its stages: stage 1's own event, stage 2 by its (ε₂, δ₂)
    from sparsedp.accounting.events import ApproxDPEvent, SequenceEvent

    ev = h[0].event
    assert isinstance(ev, SequenceEvent) and (ev.epsilon, ev.delta) == (EPS, DELTA)
    first, second = ev.events
    assert first.kind != "approx-dp" and isinstance(second, ApproxDPEvent)
    assert first.epsilon + second.epsilon <= EPS and first.delta + second.delta <= DELTA


@pytest.mark.parametrize("kw,exc,msg", [
    (dict(mechanism="two-stage"), InvalidParameterError, "needs max_groups_per_unit"),
    (dict(max_groups_per_unit=2, keys=["k001"]), InvalidParameterError, "keys="),
    (dict(max_groups_per_unit=2, aggregates=[sd.Count(), sd.Sum("v", 0, 1)]), InvalidParameterError,
     "SUM/MEAN"),
    (dict(max_groups_per_unit=2, privacy_unit="nope"), InputDataError, "nope"),
    (dict(max_groups_per_unit=2, delta=0.0), InvalidParameterError, "delta"),
])
def test_bad_requests_refused_before_any_charge_or_draw(mixed, tmp_path, kw, exc, msg):
    from sparsedp.ledger import Ledger

    path = tmp_path / "l.db"
    with Ledger(path) as led:
        led.set_budget("d", epsilon=3.0, delta=1e-5)
    kw = {"mechanism": sd.TwoStage(), "privacy_unit": "user", "delta": DELTA, **kw}
    data = mixed.with_columns(v=pl.lit(0.5))
    with pytest.raises(exc, match=msg):
        sd.release(data, by="key", epsilon=EPS, ledger=str(path), dataset="d", rng=Tripwire(), **kw)
    with Ledger(path) as led:
        assert led.history("d") == []


@pytest.mark.parametrize("kw,exc,msg", [
    (dict(split=1.0), InvalidParameterError, "split"),
    (dict(delta_split=0), InvalidParameterError, "delta_split"),
    (dict(count_bound=0), InvalidParameterError, "count_bound"),
    (dict(select="correlated-gaussian"), InvalidParameterError, "stage 1"),
    (dict(count="gshm"), InvalidParameterError, "stage 2"),
    (dict(select=3), InvalidTypeError, "select"),
])
def test_bad_options(kw, exc, msg):
    with pytest.raises(exc, match=msg):
        sd.TwoStage(**kw)


def test_cli_two_stage(mixed, tmp_path):
    from typer.testing import CliRunner

    from sparsedp.cli import app

    path = tmp_path / "in.parquet"
    mixed.write_parquet(path)
    out = tmp_path / "out.parquet"
    r = CliRunner().invoke(app, ["release", str(path), "--unit", "user", "--by", "key", "--epsilon", "1",
                                 "--delta", "1e-6", "--max-groups", "2", "--mechanism", "two-stage", "--split",
                                 "0.6", "--count-bound", "10", "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert "two-stage" in r.output and pl.read_parquet(out).columns == ["key", "count", "count_lo", "count_hi"]
    bad = CliRunner().invoke(app, ["release", str(path), "--unit", "user", "--by", "key", "--epsilon", "1",
                                   "--delta", "1e-6", "--max-groups", "2", "--split", "0.6"])
    assert bad.exit_code == 2 and "--split" in bad.output


def test_count_bound_bounds_stage_two_only():
    """1000 units, each with keys A and B: stage 1 (l0 = 2) selects both; stage 2 counts each about 1000 with no
    bound, about 500 with count_bound = 1 (each unit kept in one of its two keys)."""
    df = pl.DataFrame({"user": np.repeat(np.arange(1000), 2), "key": ["A", "B"] * 1000})
    for bound, lo, hi in ((None, 900, 1100), (1, 380, 620)):
        res = sd.release(df, "user", "key", EPS, DELTA, max_groups_per_unit=2, rng=InsecureSeededRandom(5),
                         mechanism=sd.TwoStage(count_bound=bound))
        counts = res.table.sort("key")["count"].to_numpy()
        assert res.table["key"].sort().to_list() == ["A", "B"]
        assert ((counts > lo) & (counts < hi)).all(), (bound, counts)


def test_optimal_partition_selects_at_one_key_per_unit():
    """select="optimal-partition": stage 1 bounded to one key per unit with max_groups_per_unit omitted; a key of
    count c is selected with probability π̂(c) of the curve at (split·ε, delta_split·δ) (binomial test over 3 seeded
    releases of 300 equal keys, which the curve at the full ε fails); max_groups_per_unit=3 is refused."""
    from sparsedp.accounting.partition_selection import calibrate_partition_selection

    half = calibrate_partition_selection(EPS * 0.5, DELTA * 0.5)
    c = half.n50
    df = _flat(300, c)
    ts = sd.TwoStage(select="optimal-partition")
    res = [sd.release(df, "user", "key", EPS, DELTA, mechanism=ts, rng=InsecureSeededRandom(seed))
           for seed in (1, 2, 3)]
    released = sum(r.table.height for r in res)
    assert res[0].table.columns == ["key", "count", "count_lo", "count_hi"]
    assert stats.binomtest(released, 900, float(half.probabilities([c])[0])).pvalue > 1e-4
    full = calibrate_partition_selection(EPS, DELTA * 0.5)
    assert stats.binomtest(released, 900, float(full.probabilities([c])[0])).pvalue < 1e-6
    assert any("1 key per unit" in n for n in res[0].report.notes)
    with pytest.raises(InvalidParameterError, match="ONE key per unit"):
        sd.release(df, "user", "key", EPS, DELTA, max_groups_per_unit=3, mechanism=ts, rng=Tripwire())


@pytest.mark.parametrize("select", ["weighted-gaussian", "laplace", sd.GSHM(pre_threshold=2)])
def test_any_selection_mechanism(mixed, select):
    """Stage 1 may be any registered release of the data's keys (the Weighted Gaussian releases key weights: its
    key set only is used); the published table is the selected keys with stage 2's counts."""
    res = sd.release(mixed, "user", "key", EPS, DELTA, max_groups_per_unit=2, rng=InsecureSeededRandom(4),
                     mechanism=sd.TwoStage(select=select))
    assert res.table.columns == ["key", "count", "count_lo", "count_hi"] and res.table.height > 0
    name = select if isinstance(select, str) else select.name
    assert res.report.options["select"].startswith(name)


def test_cli_two_stage_select_optimal_partition(mixed, tmp_path):
    from typer.testing import CliRunner

    from sparsedp.cli import app

    path = tmp_path / "in.parquet"
    mixed.write_parquet(path)
    r = CliRunner().invoke(app, ["release", str(path), "--unit", "user", "--by", "key", "--epsilon", "1",
                                 "--delta", "1e-6", "--mechanism", "two-stage", "--select", "optimal-partition"])
    assert r.exit_code == 0, r.output
    assert "optimal-partition" in r.output


def test_default_select_is_auto_and_releases_what_the_chosen_mechanism_releases(mixed):
    """``sd.TwoStage()`` selects with the mechanism ``sd.Auto(objective="keys")`` picks at stage 1's public
    (ε₁, δ₁, l0) (the l0 = 1 rule / Laplace at l0 = 1, the Weighted Gaussian above): the same table, report
    guarantee and charge as naming that mechanism, at the same seed (no data or budget spent on the choice)."""
    from sparsedp.mechanisms.base import ReleaseRequest

    assert sd.TwoStage().select == sd.Auto(objective="keys")
    for l0 in (1, 5):
        want = sd.Auto(objective="keys").resolve(ReleaseRequest(EPS / 2, DELTA / 2, l0))[0]
        a = sd.release(mixed, "user", "key", EPS, DELTA, max_groups_per_unit=l0, mechanism=sd.TwoStage(),
                       rng=InsecureSeededRandom(9))
        b = sd.release(mixed, "user", "key", EPS, DELTA, max_groups_per_unit=l0,
                       mechanism=sd.TwoStage(select=want), rng=InsecureSeededRandom(9))
        assert a.table.select("key", "count").equals(b.table.select("key", "count")) and a.table.height > 0
        assert a.report.delta_parts == b.report.delta_parts and a.report.epsilon == b.report.epsilon == EPS
        assert any(n.startswith(f"stage 1 chosen by select='auto': {want.name}") for n in a.report.notes)
    assert want.name == "weighted-gaussian"
    gshm = sd.release(mixed, "user", "key", EPS, DELTA, max_groups_per_unit=5, mechanism=sd.TwoStage(select="gshm"),
                      rng=InsecureSeededRandom(9))
    assert a.table.height >= gshm.table.height  # the Weighted Gaussian's 1/√t weights: at least GSHM's keys here


def test_default_select_needs_what_its_choice_needs():
    """With a fixed bound the engine must offer what the chosen stage 1 needs (the Weighted Gaussian: the pair
    primitives), and nothing more (the l0 = 1 rule: none); the refusal names select='gshm' as the fix."""
    from types import SimpleNamespace

    from sparsedp.core.engine import Capability

    req = SimpleNamespace(bound=5, auto_bound=None, epsilon=EPS, delta=DELTA, unit="user", keys=None, sums=())
    assert sd.TwoStage().needs(req) == frozenset({Capability.PAIRS})
    assert sd.TwoStage().needs(SimpleNamespace(**{**vars(req), "bound": 1})) == frozenset()
    assert "select='gshm'" in sd.TwoStage.lacks_hint


def test_stage_two_intervals_cover_at_their_level():
    """Stage 2's counts get exact intervals (on by default): with independent public-key noise
    (``count="public-gaussian"``) the 400 keys' intervals are 400 independent trials of the 95 % event, on the real
    secure path; the report says the coverage holds given selection (stage 2's noise is drawn after it)."""
    df = _flat(400, 150)  # every key selected; true count 150 under stage 2's (absent) bound
    res = sd.release(df, "user", "key", EPS, DELTA, max_groups_per_unit=1, rng=InsecureSeededRandom(11),
                     mechanism=sd.TwoStage(select="gshm", count="public-gaussian"))
    t = res.table
    assert t.height == 400 and {"count_lo", "count_hi"} <= set(t.columns)
    assert (t["count_lo"] <= t["count_hi"]).all() and (t["count_lo"] >= 0).all()  # clamped to counts' range
    hits = int(((t["count_lo"] <= 150) & (150 <= t["count_hi"])).sum())
    line = next(n for n in res.report.notes if n.startswith("intervals at 0.95"))
    cover = float(re.search(r"exact coverage ([0-9.]+)%", line).group(1)) / 100
    assert 0.95 <= cover < 0.97
    assert stats.binomtest(hits, 400, cover).pvalue > 1e-4
    assert any("no selection bias" in n for n in res.report.notes)
    assert not any("conditionally on its release" in n for n in res.report.notes)
    with pytest.raises(InvalidParameterError, match="not a function of its count alone"):
        res.release_probability(150)
    # the default stage 2 (correlated Gaussian) states its intervals too; interval=None turns them off
    res = sd.release(df, "user", "key", EPS, DELTA, max_groups_per_unit=1, rng=InsecureSeededRandom(11),
                     mechanism=sd.TwoStage(select="gshm"))
    assert {"count_lo", "count_hi"} <= set(res.table.columns)
    off = sd.release(df, "user", "key", EPS, DELTA, max_groups_per_unit=1, rng=InsecureSeededRandom(11),
                     mechanism=sd.TwoStage(select="gshm"), interval=None)
    assert "count_lo" not in off.table.columns
