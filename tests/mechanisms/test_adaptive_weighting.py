"""Adaptive-weighting set union (``mad``, ``mad2r``; after Chen, Cohen-Addad, Epasto & Zadimoghaddam, ICML 2025)
with exact discrete noise: the composed accountant (sparsedp.accounting.adaptive_weighting) against brute-force
enumeration of the two rounds' outputs of tiny neighbouring inputs, and the real secure path's release law at a
fixed seed against the exact law of the rounds (docs/proofs/mad.md).

The enumeration uses only the discrete Gaussian pmf, the release rule ``S + Z >= T`` and the rounds' re-weighting
rule; it does not use the composition the accountant rests on.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import polars as pl
import pyarrow as pa
import pytest

import sparsedp as sd
from sparsedp.accounting.adaptive_weighting import (MAX_L0, calibrate_rounds, last_threshold_floor, new_key_shares,
                                                    new_key_threshold, rounds_event)
from sparsedp.accounting.discrete import dgauss_pmf, dgauss_sf
from sparsedp.accounting.events import SequenceEvent, SetUnionEvent
from sparsedp.accounting.set_union import calibrate_weighted_gaussian, grid_weights, weighted_gaussian_delta
from sparsedp.errors import InvalidParameterError
from sparsedp.engines.bounding import COUNT
from sparsedp.engines.pairs import round_key_sums
from sparsedp.mechanisms.base import ReleaseRequest
from sparsedp.noise import InsecureSeededRandom

GRID = 2          # W_1 = 2, W_2 = 1
WIDTH = 16        # noise support enumerated: |z| <= 16 (mass outside < 1e-13 at s <= 4)


# ------------------------------------------------------------------ brute force of two rounds


def _key_law(weight: int, s: Fraction, thr: int) -> tuple[float, dict[int, float]]:
    """(P[not released], {released value: probability}) of a key of integer weight sum ``weight`` (0: absent)."""
    if weight == 0:
        return 1.0, {}
    z = np.arange(-WIDTH, WIDTH + 1)
    pz = dgauss_pmf(z, s)
    vals = weight + z
    rel = vals >= thr
    return float(pz[~rel].sum()), {int(x): float(p) for x, p in zip(vals[rel], pz[rel])}


def _sums(units: list[tuple[int, ...]], alive: set[int], n_keys: int) -> list[int]:
    """Each key's weight sum when every unit gives each of its alive keys W_t (t = its alive keys; l0 >= t)."""
    out = [0] * n_keys
    for keys in units:
        ks = [k for k in keys if k in alive]
        if ks:
            w = int(grid_weights(len(ks), GRID)[len(ks) - 1])
            for k in ks:
                out[k] += w
    return out


def _output_law(units: list[tuple[int, ...]], n_keys: int, rounds: list[tuple[Fraction, int]]) -> dict:
    """The exact law of the two rounds' output: {((key, round, value), ...): probability}."""
    (s1, t1), (s2, t2) = rounds
    law: dict = {}
    first = _sums(units, set(range(n_keys)), n_keys)
    per_key = [_key_law(w, s1, t1) for w in first]
    options = [[(None, no)] + list(rel.items()) for no, rel in per_key]
    for combo in itertools.product(*options):
        p1 = math.prod(p for _, p in combo)
        released = {k for k, (val, _) in enumerate(combo) if val is not None}
        out1 = tuple((k, 1, val) for k, (val, _) in enumerate(combo) if val is not None)
        alive = set(range(n_keys)) - released
        second = _sums(units, alive, n_keys)
        opts2 = [[(None, 1.0)] if k not in alive else
                 [(None, _key_law(second[k], s2, t2)[0])] + list(_key_law(second[k], s2, t2)[1].items())
                 for k in range(n_keys)]
        for combo2 in itertools.product(*opts2):
            p = p1 * math.prod(q for _, q in combo2)
            key = out1 + tuple((k, 2, val) for k, (val, _) in enumerate(combo2) if val is not None)
            law[key] = law.get(key, 0.0) + p
    return law


def _enumerated_delta(eps: float, others: list[tuple[int, ...]], added: tuple[int, ...], n_keys: int,
                      rounds: list[tuple[Fraction, int]]) -> float:
    p = _output_law(others, n_keys, rounds)
    q = _output_law(others + [added], n_keys, rounds)
    e = math.exp(eps)
    outs = set(p) | set(q)
    fwd = sum(max(q.get(o, 0.0) - e * p.get(o, 0.0), 0.0) for o in outs)
    rev = sum(max(p.get(o, 0.0) - e * q.get(o, 0.0), 0.0) for o in outs)
    return max(fwd, rev)


@pytest.mark.parametrize("eps", [0.5, 1.5])
def test_composed_accountant_bounds_the_enumerated_two_round_delta(eps):
    """Every small configuration of two keys (new or shared with other units, some of which hold both keys, so
    the added unit moves the other units' round-2 weights through round 1's output): the enumerated δ of the
    two rounds never exceeds the composed accountant's, which is not loose by more than a factor 3 at the worst
    configuration (the profile is sampled on a grid, so the composition is an upper bound, not an equality)."""
    rounds = [(Fraction(4), 7), (Fraction(3), 6)]
    ev = SequenceEvent([SetUnionEvent(epsilon=eps, delta=weighted_gaussian_delta(eps, s, t, 2, GRID), sigma2=s,
                                      threshold=t, l0=2, grid=GRID) for s, t in rounds], epsilon=eps, delta=1.0)
    acc = float(ev.delta_at(eps))
    configs = [
        ([], (0,)), ([], (0, 1)), ([(0,)], (0,)), ([(0,), (0,), (0,)], (0, 1)), ([(0, 1)], (0,)),
        ([(0, 1), (0,), (0,)], (0,)), ([(0, 1), (0,), (0,), (0,)], (0, 1)), ([(0,)] * 3 + [(0, 1)], (1,)),
    ]
    worst = 0.0
    for others, added in configs:
        d = _enumerated_delta(eps, others, added, 2, rounds)
        assert d <= acc * (1 + 1e-9) + 1e-12, (others, added, d, acc)
        worst = max(worst, d)
    assert acc > 1e-3 and worst > acc / 3   # a regime where the comparison means something


def test_each_rounds_event_is_the_weighted_gaussian_profile():
    """A round's event is the Weighted Gaussian's exact profile at its scale and threshold; the charged sequence
    composes them and meets (ε, δ) at the calibration."""
    c = calibrate_rounds("mad", 1.0, 1e-6, 3, (0.15, 0.85))
    ev = c.event()
    assert ev.epsilon == 1.0 and ev.delta == 1e-6
    assert float(ev.delta_at(1.0)) <= 1e-6
    assert c.delta_achieved == pytest.approx(float(ev.delta_at(1.0)))
    for r, part in zip(c.rounds, ev.events):
        assert isinstance(part, SetUnionEvent)
        assert part.sigma2 == r.grid_sigma2 and part.threshold == r.threshold_int
        assert float(part.delta_at(1.0)) == pytest.approx(
            weighted_gaussian_delta(1.0, r.grid_sigma2, r.threshold_int, 3, r.grid))
    # the rounds' Gaussian parts compose like one Weighted Gaussian at s*: Σ 1/s_r = 1/s*
    inv = sum(1 / r.grid_sigma2 for r in c.rounds)
    assert all(r.grid_sigma2 >= 1 for r in c.rounds) and float(inv) > 0
    # the round-2 threshold is above the one-round Weighted Gaussian's (its budget is a share of the whole)
    wg = calibrate_weighted_gaussian(1.0, 1e-6, 3)
    assert c.rounds[-1].threshold_int > wg.threshold_int


def test_thresholds_follow_the_recorded_new_key_targets_and_the_composition_meets_delta():
    """Each round's threshold is the smallest meeting its recorded new-key target; the targets give the last round
    at least 90 % of the new-key budget (1 − a)·δ (plus the slack step) and the earlier rounds 10 %; the composed
    δ(ε) of the thresholds actually used meets δ; the last threshold is below the equal-split calibration's."""
    c = calibrate_rounds("mad", 1.0, 1e-6, 3, (0.15, 0.85))
    a, budget = c.gauss_fraction, (1 - c.gauss_fraction) * 1e-6
    assert new_key_shares(2) == (0.1, 0.9) and new_key_shares(1) == (1.0,)
    assert c.new_key_targets[0] == pytest.approx(0.1 * budget)
    assert c.new_key_targets[1] >= 0.9 * budget * (1 - 1e-12)
    for r, target in zip(c.rounds, c.new_key_targets):
        assert r.threshold_int == new_key_threshold(r.grid_sigma2, 3, r.grid, target)
    assert float(rounds_event(c.rounds, 1.0, 1e-6).delta_at(1.0)) <= 1e-6
    assert 0 < a <= 0.6
    # the equal split of (1 − a)·δ between the rounds (the first calibration) gives a higher last threshold
    equal = new_key_threshold(c.rounds[-1].grid_sigma2, 3, c.grid, budget / 2)
    assert c.rounds[-1].threshold_int < equal


@pytest.mark.parametrize("eps,shares", [(1.0, (0.15, 0.85)), (0.3, (0.5, 0.5))])
def test_last_threshold_floor_is_below_the_calibrated_threshold(eps, shares):
    """The floor auto uses to skip the rounds' calibration is a lower bound of the calibrated last threshold, and
    within 10 % of it (so that it decides something)."""
    c = calibrate_rounds("mad", eps, 1e-6, 3, shares)
    floor = last_threshold_floor(eps, 1e-6, 3, shares)
    assert floor <= c.rounds[-1].threshold_int
    assert floor >= 0.9 * c.rounds[-1].threshold_int


def test_auto_keys_skips_the_rounds_when_their_floor_is_above_the_weighted_gaussian():
    """sd.Auto(objective="keys") ranks selections by the count-equivalent threshold: at the default shares the
    rounds' last threshold is provably above the Weighted Gaussian's, so they are not calibrated (not among the
    candidates) and the Weighted Gaussian is chosen; by name they still run."""
    df = pl.DataFrame({"unit": [1, 1, 2, 3], "key": ["a", "b", "a", "c"]})
    floor = last_threshold_floor(1.0, 1e-6, 3, (0.15, 0.85))
    assert floor >= calibrate_weighted_gaussian(1.0, 1e-6, 3).threshold_int
    res = sd.release(df, "unit", "key", 1.0, 1e-6, max_groups_per_unit=3, mechanism=sd.Auto(objective="keys"),
                     rng=InsecureSeededRandom(1), interval=None)
    names = {c["mechanism"] for c in res.report.candidates}
    assert "weighted-gaussian" in names and not names & {"mad", "mad2r"}
    assert sd.MAD.auto_offer(_request(1.0, 3), None) is None


def _request(eps: float, l0: int) -> ReleaseRequest:
    return ReleaseRequest(epsilon=eps, delta=1e-6, max_groups_per_unit=l0)


def test_new_key_threshold_is_the_smallest_meeting_the_target():
    s, l0, g, target = Fraction(4096 * 4096 * 18), 5, 4096, 1e-7
    thr = new_key_threshold(s, l0, g, target)
    ws = grid_weights(l0, g)

    def term(t_: int) -> float:
        return max(1 - (1 - dgauss_sf(t_ - int(ws[t - 1]), float(s))) ** t for t in range(1, l0 + 1))

    assert term(thr) <= target < term(thr - 1)


# ------------------------------------------------------------------ the weights each round gives


def _round_sums(frame: pl.DataFrame, l0: int, exclude=None, choose_first=False, secret=b"k" * 32) -> dict[str, int]:
    out = round_key_sums(frame, "unit", ["key"], l0, grid_weights(l0, 4096), secret,
                         None if exclude is None else pa.table({"key": exclude}), choose_first)
    return dict(zip(out["key"].to_list(), out[COUNT].to_list()))


def _engine_round_sums(frame: pl.DataFrame, l0: int, exclude=None, choose_first=False) -> dict[str, int]:
    """The engines' rounds (Engine.round_histogram, then Engine.next_round when ``exclude`` is given): the path a
    release runs, on the pairs read once."""
    from sparsedp.engines.polars_engine import PolarsEngine

    eng, rng, ws = PolarsEngine(), InsecureSeededRandom(0), grid_weights(l0, 4096).tolist()
    h, rounds = eng.round_histogram(frame, "unit", ["key"], l0, ws, rng)
    if exclude is not None:
        h = eng.next_round(rounds, pa.table({"key": exclude}), choose_first, rng)
    return dict(zip(h.keys.column("key").to_pylist(), h.counts.tolist()))


def test_round_weights_are_the_largest_integers_of_unit_norm():
    """A unit that kept t pairs gives each W_t = floor(G/√t) exactly, in round 1 and after a key is released (its
    adaptive degree drops); each unit's squared weights sum to at most G² (rounding down: a re-weighted unit
    never exceeds its ℓ2 budget)."""
    rows = [(1, "a"), (2, "a"), (2, "b"), (3, "a"), (3, "b"), (3, "c"), (3, "d"), (4, "d")]
    df = pl.DataFrame({"unit": [r[0] for r in rows], "key": [r[1] for r in rows]})
    ws = grid_weights(4, 4096)
    for sums in (_round_sums, _engine_round_sums):  # the definition and the engines' path
        assert sums(df, 4) == {"a": ws[0] + ws[1] + ws[3], "b": ws[1] + ws[3], "c": ws[3], "d": ws[3] + ws[0]}
        # key a released: units 2 and 3 re-weight their other keys (adaptive degrees 1 and 3)
        for first in (True, False):
            assert sums(df, 4, exclude=["a"], choose_first=first) == {"b": ws[0] + ws[2], "c": ws[2],
                                                                      "d": ws[2] + ws[0]}
    for t in range(1, 5):
        assert t * int(ws[t - 1]) ** 2 <= 4096 ** 2 < t * (int(ws[t - 1]) + 1) ** 2


def test_mad_keeps_round_ones_choice_and_mad2r_chooses_again():
    """l0 = 2 binds for a unit with 4 keys: ``mad`` (choose_first) keeps round 1's two keys and drops the released
    one (one key left, weight W_1); ``mad2r`` chooses 2 of the 3 keys not released (each W_2)."""
    df = pl.DataFrame({"unit": [1, 1, 1, 1], "key": ["a", "b", "c", "d"]})
    ws = grid_weights(2, 4096)
    for sums in (_round_sums, _engine_round_sums):  # the definition and the engines' path
        first = sums(df, 2)
        assert len(first) == 2 and set(first.values()) == {int(ws[1])}
        gone = sorted(first)[0]
        mad = sums(df, 2, exclude=[gone], choose_first=True)
        assert mad == {sorted(first)[1]: int(ws[0])}
        mad2r = sums(df, 2, exclude=[gone], choose_first=False)
        assert len(mad2r) == 2 and gone not in mad2r and set(mad2r.values()) == {int(ws[1])}


@pytest.mark.parametrize("engine", ["polars", "duckdb", "pandas", "arrow"])
def test_engine_rounds_are_the_round_key_sums_definition(engine, tmp_path):
    """The engines' rounds (the count path's integer pair ids read once: Engine.round_histogram, then
    Engine.next_round on the same pairs) equal the per-unit definition Spark runs (round_key_sums on the
    distinct pairs) with the same secrets (round 1's: the source's first draw; mad2r's round 2: its next), on
    data with duplicate rows, string units over and under the bound, two key columns (one Int32) and a second
    round excluding the six heaviest keys; from a Parquet file too."""
    from sparsedp.engines import draw_bounding_secret, get_engine

    g = np.random.default_rng(8)
    n = 2500
    df = pl.DataFrame({"unit": [f"u{x}" for x in g.integers(0, 250, n)], "k1": g.zipf(1.4, n) % 60,
                       "k2": (g.integers(0, 3, n)).astype(np.int32)})
    path = tmp_path / "rows.parquet"
    df.write_parquet(path)
    by = ["k1", "k2"]
    pairs = df.unique()

    def as_dict(frame, col):
        return {tuple(r[:2]): r[2] for r in frame.select(*by, col).iter_rows()}

    def got(h):
        return dict(zip(zip(*[h.keys.column(c).to_pylist() for c in by]), h.counts.tolist()))

    for l0 in (1, 3):
        ws = grid_weights(l0, 4096).tolist()
        src = InsecureSeededRandom(3)
        s1, s2 = draw_bounding_secret(src), draw_bounding_secret(src)
        first = as_dict(round_key_sums(pairs, "unit", by, l0, ws, s1), COUNT)
        top = sorted(first, key=lambda k: -first[k])[:6]
        exclude = pa.table({"k1": [k[0] for k in top], "k2": pa.array([k[1] for k in top], pa.int32())})
        want = {True: as_dict(round_key_sums(pairs, "unit", by, l0, ws, s1, exclude, True), COUNT),
                False: as_dict(round_key_sums(pairs, "unit", by, l0, ws, s2, exclude, False), COUNT)}
        assert want[True] != want[False]  # the two rules differ on this data
        for data in (df.to_pandas() if engine == "pandas" else df, str(path)):
            for choose_first in (True, False):
                eng, rng = get_engine(engine), InsecureSeededRandom(3)
                h, rounds = eng.round_histogram(data, "unit", by, l0, ws, rng)
                assert got(h) == first, (engine, l0)
                assert h.stats.rows_in == n and h.stats.keys_out == len(first)
                h2 = eng.next_round(rounds, exclude, choose_first, rng)
                assert got(h2) == want[choose_first], (engine, l0, choose_first)
                assert not set(got(h2)) & set(top)


# ------------------------------------------------------------------ the real secure path


def _gadgets(n: int, m_a: int, n_ab: int, m_b: int) -> pl.DataFrame:
    """n independent copies of: key A held by m_a one-key units and n_ab units holding {A, B}; key B also held
    by m_b one-key units."""
    units, keys, u = [], [], 0
    for i in range(n):
        for _ in range(m_a):
            units.append(u), keys.append(f"A{i}")
            u += 1
        for _ in range(n_ab):
            units += [u, u]
            keys += [f"A{i}", f"B{i}"]
            u += 1
        for _ in range(m_b):
            units.append(u), keys.append(f"B{i}")
            u += 1
    return pl.DataFrame({"unit": units, "key": keys})


def _exact_gadget_law(cal, m_a: int, n_ab: int, m_b: int) -> dict[str, float]:
    """P[A released], P[B released] and P[both] under the rounds' law (l0 = 2: no unit is truncated)."""
    g = cal.grid
    w1, w2 = int(grid_weights(2, g)[0]), int(grid_weights(2, g)[1])
    (c1, c2) = cal.rounds

    def p(c, s):
        return float(dgauss_sf(c.threshold_int - s, float(c.grid_sigma2))) if s > 0 else 0.0

    a1, b1 = p(c1, m_a * w1 + n_ab * w2), p(c1, m_b * w1 + n_ab * w2)
    out = {"A": 0.0, "B": 0.0, "AB": 0.0}
    for ra, rb in itertools.product([True, False], repeat=2):
        pr = (a1 if ra else 1 - a1) * (b1 if rb else 1 - b1)
        if ra and rb:
            pa, pb = 1.0, 1.0
        elif ra:   # the {A, B} units re-weight B alone (adaptive degree 1)
            pa, pb = 1.0, p(c2, m_b * w1 + n_ab * w1)
        elif rb:
            pa, pb = p(c2, m_a * w1 + n_ab * w1), 1.0
        else:
            pa, pb = p(c2, m_a * w1 + n_ab * w2), p(c2, m_b * w1 + n_ab * w2)
        out["A"] += pr * pa
        out["B"] += pr * pb
        out["AB"] += pr * pa * pb
    return out


@pytest.mark.parametrize("name", ["mad", "mad2r"])
def test_release_law_at_fixed_seed_matches_the_rounds(name):
    """300 independent gadgets in one release (the secure path with a seeded source): the frequencies of A, B
    and both released match the exact law of the rounds (5 binomial standard deviations), B's law includes the
    re-weighting after A is released (without it, P[B] is lower by more than the tolerance), the released values
    lie on the grid at or above the round's threshold, and the same seed gives the same table."""
    cal = calibrate_rounds(name, 1.0, 1e-6, 2, (0.15, 0.85))
    m_a, n_ab, m_b = 45, 30, 0
    law = _exact_gadget_law(cal, m_a, n_ab, m_b)
    n = 300
    df = _gadgets(n, m_a, n_ab, m_b)
    res = sd.release(df, "unit", "key", 1.0, 1e-6, max_groups_per_unit=2, mechanism=name,
                     rng=InsecureSeededRandom(11))
    t = res.table
    assert t.columns == ["key", "weight"]
    got = set(t["key"].to_list())
    freq = {"A": sum(f"A{i}" in got for i in range(n)) / n, "B": sum(f"B{i}" in got for i in range(n)) / n,
            "AB": sum(f"A{i}" in got and f"B{i}" in got for i in range(n)) / n}
    for k, pk in law.items():
        assert abs(freq[k] - pk) < 5 * math.sqrt(pk * (1 - pk) / n) + 1e-9, (k, freq[k], pk)
    # the re-weighting is visible: B's law without it (round-2 weight always the round-1 weight) is far off
    g = cal.grid
    w1, w2 = int(grid_weights(2, g)[0]), int(grid_weights(2, g)[1])
    b1 = float(dgauss_sf(cal.rounds[0].threshold_int - (m_b * w1 + n_ab * w2), float(cal.rounds[0].grid_sigma2)))
    b2 = float(dgauss_sf(cal.rounds[1].threshold_int - (m_b * w1 + n_ab * w2), float(cal.rounds[1].grid_sigma2)))
    no_reweight = b1 + (1 - b1) * b2
    assert law["B"] - no_reweight > 8 * math.sqrt(law["B"] * (1 - law["B"]) / n)
    vals = t["weight"].to_numpy() * g
    assert np.all(vals == np.round(vals))
    assert np.all(vals >= min(c.threshold_int for c in cal.rounds))
    again = sd.release(df, "unit", "key", 1.0, 1e-6, max_groups_per_unit=2, mechanism=name,
                       rng=InsecureSeededRandom(11)).table
    assert again.equals(t)


def test_refusals_before_any_charge():
    df = pl.DataFrame({"unit": [1], "key": ["a"]})
    with pytest.raises(InvalidParameterError, match="max_groups_per_unit"):
        sd.release(df, "unit", "key", 1.0, 1e-6, mechanism="mad")
    with pytest.raises(InvalidParameterError, match="insecure_float"):
        sd.release(df, "unit", "key", 1.0, 1e-6, max_groups_per_unit=2, mechanism="mad2r", insecure_float=True)
    with pytest.raises(InvalidParameterError, match="max_groups_per_unit"):
        sd.release(df, "unit", "key", 1.0, 1e-6, max_groups_per_unit=MAX_L0 + 1, mechanism="mad")
    with pytest.raises(InvalidParameterError, match="shares"):
        sd.MAD(shares=(0.5, 0.6))
    with pytest.raises(InvalidParameterError, match="grid"):
        sd.release(df, "unit", "key", 1.0, 1e-6, max_groups_per_unit=10, mechanism=sd.MAD2R(grid=3))
    with pytest.raises(InvalidParameterError, match="SUM/MEAN"):
        sd.release(df.with_columns(pl.lit(1.0).alias("x")), "unit", "key", 1.0, 1e-6, max_groups_per_unit=2,
                   mechanism="mad", aggregates=[sd.Sum("x", 0, 1)])


def test_more_keys_than_the_weighted_gaussian_on_the_demo_log():
    """On the demo search log (50 000 rows) at ε = 1, Δ0 = 10, two seeds: both release at least the Weighted
    Gaussian's keys (the measured ratios are in docs/mechanisms.md; not a theorem: the rounds split the budget)."""
    from sparsedp.demo_data import search_log

    df = search_log(50_000, seed=0)
    kw = dict(epsilon=1.0, delta=1e-6, max_groups_per_unit=10)
    n = {m: sum(sd.release(df, "user_id", ["query"], mechanism=m, rng=InsecureSeededRandom(s), **kw).table.height
                for s in (1, 2)) for m in ("weighted-gaussian", "mad", "mad2r")}
    assert n["mad"] >= n["weighted-gaussian"] and n["mad2r"] >= n["weighted-gaussian"], n


# ------------------------------------------------------------------ domination at equal calibration (§8)


def test_one_round_is_the_weighted_gaussians_calibration_and_charge():
    """One share: exactly the Weighted Gaussian's scale, threshold, grid and exact event (no δ split, nothing to
    compose); Lemma 3's floor still bounds its threshold from below."""
    for eps, l0 in ((1.0, 1), (0.3, 5)):
        wg = calibrate_weighted_gaussian(eps, 1e-6, l0)
        c = calibrate_rounds("mad", eps, 1e-6, l0, (1.0,))
        (r,) = c.rounds
        assert (r.grid_sigma2, r.threshold_int, r.grid, r.l0) == (wg.grid_sigma2, wg.threshold_int, wg.grid, l0)
        ev = c.event()
        assert isinstance(ev, SetUnionEvent)
        assert (ev.sigma2, ev.threshold, ev.l0, ev.grid, ev.epsilon, ev.delta) == (
            wg.grid_sigma2, wg.threshold_int, l0, wg.grid, eps, 1e-6)
        assert c.delta_achieved == wg.delta_achieved <= 1e-6
        assert last_threshold_floor(eps, 1e-6, l0, (1.0,)) <= wg.threshold_int


def test_mad_at_one_key_per_unit_releases_the_weighted_gaussians_table():
    """Δ0 = 1: ``mad``'s later rounds could re-weight nothing, so it runs the Weighted Gaussian itself (Corollary 7):
    with the same seeded source the same keys and the same noisy weights, on keys spread around the threshold;
    ``mad2r`` (it re-chooses) keeps its two rounds; auto does not offer ``mad`` there (a duplicate candidate)."""
    rng = np.random.default_rng(4)
    units, keys = [], []
    for k in range(120):                       # key k held by 8 + k//4 units (weights 8..37: both sides of T)
        for _ in range(8 + k // 4):
            units.append(len(units)), keys.append(f"k{k:03d}")
    extra = rng.integers(0, len(units), 400)   # some units hold a second key (the l0 choice binds)
    units += extra.tolist()
    keys += [f"k{int(x):03d}" for x in rng.integers(0, 120, 400)]
    df = pl.DataFrame({"unit": units, "key": keys}).unique()
    assert sd.MAD().calibrate(_request(1.0, 1)).shares == (1.0,)
    assert sd.MAD2R().rounds_shares(1) == (0.15, 0.85) and sd.MAD().rounds_shares(2) == (0.15, 0.85)
    assert sd.MAD.auto_offer(_request(1.0, 1), None) is None   # auto has the Weighted Gaussian already
    for seed in (1, 2):
        kw = dict(max_groups_per_unit=1, rng=InsecureSeededRandom(seed), interval=None)
        wg = sd.release(df, "unit", "key", 1.0, 1e-6, mechanism="weighted-gaussian", **kw).table.sort("key")
        kw["rng"] = InsecureSeededRandom(seed)
        mad = sd.release(df, "unit", "key", 1.0, 1e-6, mechanism="mad", **kw)
        assert 10 < wg.height < 110
        assert mad.table.sort("key").equals(wg)


def test_mad_contains_the_weighted_gaussians_keys_at_equal_calibration():
    """Proposition 6 as a coupling on the production per-unit code: the Weighted Gaussian's sums (its engine
    histogram) and ``mad``'s round sums (``round_histogram``, then ``next_round`` with round 1's choice kept and the
    released keys excluded)
    with the same ℓ0 secret; round 2 at the Weighted Gaussian's (s, T) and its per-key noise equal to the
    Weighted Gaussian's (exact discrete draws from a seeded source), round 1 at the calibrated first round.
    Every key the Weighted Gaussian releases, ``mad`` releases (in round 1 or 2); every round-2 weight is at least
    the key's Weighted Gaussian weight (Lemma 5); and the re-weighting releases keys the Weighted Gaussian
    does not."""
    from sparsedp.engines import get_engine
    from sparsedp.noise import sample_discrete_gaussian

    units, keys, u = [], [], 0
    for i in range(150):   # A: 60 one-key units; {A, B}: 20 units; B: 7 one-key units; {A, B, C}: 3 units (l0 binds)
        for members, count in (((f"A{i}",), 60), ((f"A{i}", f"B{i}"), 20), ((f"B{i}",), 7),
                               ((f"A{i}", f"B{i}", f"C{i}"), 3)):
            for _ in range(count):
                units += [u] * len(members)
                keys += list(members)
                u += 1
    df = pl.DataFrame({"unit": units, "key": keys})
    l0 = 2
    wg = calibrate_weighted_gaussian(1.0, 1e-6, l0)
    first = calibrate_rounds("mad", 1.0, 1e-6, l0, (0.15, 0.85)).rounds[0]
    ws = grid_weights(l0, wg.grid).tolist()
    eng = get_engine("polars")
    h_wg = eng.weighted_histogram(df, "unit", ["key"], l0, ws, InsecureSeededRandom(3))
    h1, rounds = eng.round_histogram(df, "unit", ["key"], l0, ws, InsecureSeededRandom(3))
    s_wg = dict(zip(h_wg.keys.column("key").to_pylist(), h_wg.counts.tolist()))
    s1 = dict(zip(h1.keys.column("key").to_pylist(), h1.counts.tolist()))
    assert s1 == s_wg                                   # the same secret: the same kept pairs and weights
    names = sorted(s_wg)
    z = dict(zip(names, sample_discrete_gaussian(wg.grid_sigma2, len(names), InsecureSeededRandom(8)).tolist()))
    z1 = dict(zip(names, sample_discrete_gaussian(first.grid_sigma2, len(names), InsecureSeededRandom(9)).tolist()))
    released_wg = {k for k in names if s_wg[k] + z[k] >= wg.threshold_int}
    r1 = {k for k in names if s1[k] + z1[k] >= first.threshold_int}
    h2 = eng.next_round(rounds, pa.table({"key": sorted(r1)}), True, InsecureSeededRandom(5))  # mad: round 1's choice
    s2 = dict(zip(h2.keys.column("key").to_pylist(), h2.counts.tolist()))
    assert not set(s2) & r1 and set(s2) <= set(names) - r1
    assert all(s2[k] >= s_wg[k] for k in s2)            # Lemma 5: mad's remaining weights only grow
    assert sum(s2[k] > s_wg[k] for k in s2) > 100       # ... and grow where a unit's other key was released
    r2 = {k for k in s2 if s2[k] + z[k] >= wg.threshold_int}
    assert released_wg <= r1 | r2                        # Proposition 6
    assert len((r1 | r2) - released_wg) > 20 and 20 < len(released_wg) < len(names) - 20
