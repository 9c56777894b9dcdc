"""The optimal l0 = 1 partition selection (Desfontaines, Voss, Gipson and Mandayam, PoPETs 2022) in exact arithmetic.

* the curve actually sampled, π̂, meets the (ε, δ) constraints between every pair of neighbouring counts, in both
  directions and for both events, checked exactly (Fractions) against an enclosure of e^ε made by an independent
  interval library (mpmath's ``iv``), at tiny (ε, δ) where every count is enumerated up to the sure release;
* a curve rounded UP (the mutant) is caught by the same check;
* π̂ is within 1e-12 of the paper's float recursion (the rounding costs nothing visible) and at least the Laplace
  stability histogram's release probability at every count (optimality);
* the released law of the real release path (``Mechanism.run`` on the Arrow engine, the exact dyadic Bernoulli
  from keyed secure streams) matches π̂ (chi-square at fixed seeds), and the sampler's rare tie branch is exact;
* the mechanism's API: keys-only table, one key per unit, ``auto(discover=True)``, ``plan``'s keys-only row.
"""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from scipy import stats

import sparsedp as sd
from sparsedp.accounting.discrete import dlaplace_sf
from sparsedp.accounting.discrete_histograms import calibrate_laplace_discrete
from sparsedp.accounting.laws import ReleaseCurve
from sparsedp.accounting.partition_selection import (achieved_delta, calibrate_partition_selection, grid_bits,
                                                     release_curve)
from sparsedp.audit.targets import build_target, release_many
from sparsedp.errors import InvalidParameterError
from sparsedp.noise import InsecureSeededRandom
from sparsedp.noise.dyadic import dyadic_bernoulli

GRID = [(0.1, 0.2), (0.5, 0.05), (1.0, 1e-3), (2.0, 0.01), (0.25, 1e-4), (3.0, 1e-6)]


def _exp_eps_lower(eps: float) -> Fraction:
    """A rational lower bound of e^ε from mpmath's interval arithmetic at 400 bits (independent of sparsedp's
    exp_bounds)."""
    ctx = mpmath.iv
    old = ctx.prec
    ctx.prec = 400
    try:
        q = Fraction(eps)
        sign, man, exp, _ = ctx.exp(ctx.mpf(q.numerator) / q.denominator)._mpi_[0]  # the exact lower endpoint
    finally:
        ctx.prec = old
    assert sign == 0
    return Fraction(int(man)) * (Fraction(2) ** int(exp))


def _violations(curve: ReleaseCurve, eps: float, delta: float) -> list[tuple[int, str]]:
    """Every (n, constraint) where the curve's exact values break (ε, δ)-DP between counts n − 1 and n (n = 1 …
    two beyond the sure count), with e^ε replaced by a lower bound (each constraint is decreasing in e^ε)."""
    e = _exp_eps_lower(eps)
    d = Fraction(delta)
    bad = []
    for n in range(1, len(curve.numerators) + 3):
        p, q = curve.probability(n - 1), curve.probability(n)
        for name, lhs, rhs in (("release, n vs n-1", q, p), ("release, n-1 vs n", p, q),
                               ("no release, n-1 vs n", 1 - p, 1 - q), ("no release, n vs n-1", 1 - q, 1 - p)):
            if lhs > e * rhs + d:
                bad.append((n, name))
    return bad


def _float_recursion(eps: float, delta: float, n_max: int) -> list[float]:
    out, p = [], 0.0
    for _ in range(n_max):
        p = min(math.exp(eps) * p + delta, 1 - math.exp(-eps) * (1 - p - delta), 1.0)
        out.append(p)
    return out


@pytest.mark.parametrize("eps,delta", GRID)
def test_curve_meets_every_constraint_exactly(eps, delta):
    cal = calibrate_partition_selection(eps, delta)
    curve = cal.curve
    assert curve.numerators[-1] == 1 << curve.bits and curve.bits == grid_bits(Fraction(delta))
    assert list(curve.numerators) == sorted(curve.numerators)
    assert curve.probability(0) == 0 and curve.probability(1) <= Fraction(delta)
    assert _violations(curve, eps, delta) == []
    # the achieved δ is the largest constraint gap and never above the target
    assert 0 < cal.delta_achieved <= delta
    assert achieved_delta(curve, Fraction(eps)) <= Fraction(delta)


@pytest.mark.parametrize("eps,delta", GRID)
def test_rounded_up_mutant_is_caught(eps, delta):
    """The same recursion rounded UP (ceil instead of floor, one grid step) breaks a constraint: the check can fail."""
    curve = release_curve(Fraction(eps), Fraction(delta))
    one = 1 << curve.bits
    up = ReleaseCurve(bits=curve.bits, numerators=tuple(min(a + 1, one) for a in curve.numerators))
    bad = _violations(up, eps, delta)
    assert bad and bad[0][0] == 1 and bad[0][1] == "release, n vs n-1"  # π(1) > δ: the first constraint


@pytest.mark.parametrize("eps,delta", GRID)
def test_curve_is_the_papers_within_rounding(eps, delta):
    cal = calibrate_partition_selection(eps, delta)
    ref = _float_recursion(eps, delta, cal.sure + 5)
    got = [float(cal.curve.probability(n)) for n in range(1, cal.sure + 6)]
    assert np.max(np.abs(np.array(got) - np.array(ref))) < 1e-12
    assert cal.n50 == next(i + 1 for i, p in enumerate(got) if p >= 0.5) and cal.tau == cal.n50 - 1


@pytest.mark.parametrize("eps,delta", [(0.3, 1e-6), (1.0, 1e-6), (3.0, 1e-6), (1.0, 1e-9)])
def test_dominates_laplace_at_every_count(eps, delta):
    """Optimality (the paper's Theorem 1): at l0 = 1 no per-count rule at (ε, δ) keeps a key more often, so π̂(n) >=
    the discrete Laplace stability histogram's P[n + Z >= 1 + τ] at every n, and its 50% point is not later."""
    lap = calibrate_laplace_discrete(eps, delta, 1)
    cal = calibrate_partition_selection(eps, delta)
    n = np.arange(1, cal.sure + 40)
    p_lap = dlaplace_sf(1 + lap.tau - n.astype(float), lap.noise.scale)
    assert np.all(cal.probabilities(n) >= p_lap - 1e-15)
    assert cal.tau <= lap.tau


def test_one_step_figures_at_eps_1():
    """ε = 1, δ = 1e-6: kept with probability >= 1/2 from 14 units (the Laplace rule's threshold is 15), surely
    from 28."""
    cal = calibrate_partition_selection(1.0, 1e-6)
    assert (cal.n50, cal.sure) == (14, 28)
    assert calibrate_laplace_discrete(1.0, 1e-6, 1).tau + 1 == 15


def test_release_law_on_the_real_path():
    """Keys at counts 1 … sure released through ``Mechanism.run`` (Arrow engine, keyed secure streams) at fixed
    seeds: the number released at each count is Binomial(runs, π̂(n)) (chi-square over the counts)."""
    target = build_target("optimal-partition", epsilon=1.0, delta=0.01)
    cal = target.calibration
    counts = np.arange(1, cal.sure + 2)
    runs = 4000
    out = release_many(target, counts, runs, InsecureSeededRandom(20250))
    released = (~np.isnan(out)).sum(axis=0)
    p = cal.probabilities(counts)
    assert np.all(released[p == 1.0] == runs)
    live = (p > 0) & (p < 1)
    chi2 = float(np.sum((released[live] - runs * p[live]) ** 2 / (runs * p[live] * (1 - p[live]))))
    assert stats.chi2.sf(chi2, int(live.sum())) > 1e-3


class _TieSource:
    """Every 64-bit word equals the numerators' top word (the tie branch), then the seeded source's randbelow."""

    def __init__(self, word: int, seed: int) -> None:
        self.word, self.inner = word, InsecureSeededRandom(seed)

    def uint64(self, n: int) -> np.ndarray:
        return np.full(n, self.word, dtype=np.uint64)

    def randbelow(self, n: int) -> int:
        return self.inner.randbelow(n)


def test_dyadic_bernoulli_law_and_tie_branch():
    bits = 128
    nums = [0, (1 << bits) // 3, (5 << bits) // 7, 1 << bits]
    idx = np.repeat(np.arange(4), 20000)
    bits_out = dyadic_bernoulli(nums, bits, idx, InsecureSeededRandom(11))
    means = [bits_out[idx == i].mean() for i in range(4)]
    assert means[0] == 0 and means[3] == 1
    for i, p in ((1, 1 / 3), (2, 5 / 7)):
        assert stats.binomtest(int(bits_out[idx == i].sum()), 20000, p).pvalue > 1e-3
    # the tie branch: the top word equals a_H, so the bit is [L < a_L] with L uniform on [0, 2^64)
    a = (123 << 64) + (1 << 62)  # a_L / 2^64 = 1/4
    tie = dyadic_bernoulli([a], bits, np.zeros(20000, np.int64), _TieSource(123, 5))
    assert stats.binomtest(int(tie.sum()), 20000, 0.25).pvalue > 1e-3
    with pytest.raises(InvalidParameterError, match="multiple of 64"):
        dyadic_bernoulli([1], 100, [0])


def test_keys_only_release_one_key_per_unit():
    import polars as pl

    # 40 units on key "a" (surely released), 1 unit on "b" (released with probability 1e-6)
    df = pl.DataFrame({"u": list(range(41)) + [0], "k": ["a"] * 40 + ["b", "c"], "x": [1.0] * 42})
    res = sd.release(df, "u", "k", epsilon=1.0, delta=1e-6, mechanism="optimal-partition",
                     rng=InsecureSeededRandom(3))
    assert res.table.columns == ["k"] and "a" in res.table["k"].to_list()
    assert res.report.mechanism == "optimal-partition" and res.report.noise_std is None
    assert res.report.value_column == "" and res.report.delta_achieved <= 1e-6
    with pytest.raises(InvalidParameterError, match="ONE key per unit") as e:
        sd.release(df, "u", "k", epsilon=1.0, delta=1e-6, max_groups_per_unit=3, mechanism="optimal-partition")
    assert e.value.param == "max_groups_per_unit"
    with pytest.raises(InvalidParameterError, match="keys only"):
        sd.release(df, "u", "k", epsilon=1.0, delta=1e-6, mechanism="optimal-partition",
                   aggregates=[sd.Count(), sd.Sum("x", 0, 10)])


def test_auto_discover_and_plan_at_l0_1():
    plan = sd.plan(1.0, 1e-6, max_groups_per_unit=1)
    rows = {r["mechanism"]: r for r in plan.rows()}
    assert rows["optimal-partition"]["releases"] == "keys only" and "noise_std" not in rows["optimal-partition"]
    assert plan.mechanisms[0].name != "optimal-partition"  # never ranked with the count mechanisms
    assert "optimal-partition" not in {m.name for m in sd.plan(1.0, 1e-6, max_groups_per_unit=2).mechanisms}
    from sparsedp.mechanisms.base import ReleaseRequest

    mech, cal, reason, _ = sd.Auto(discover=True).resolve(ReleaseRequest(1.0, 1e-6, 1))
    assert mech.name == "optimal-partition" and "keys only" in reason
    mech2, _, _, cands = sd.Auto(discover=True).resolve(ReleaseRequest(1.0, 1e-6, 2))
    assert "optimal-partition" not in {c["mechanism"] for c in cands}


class _Tripwire:
    """A random source that fails the test if anything draws from it."""

    def uint64(self, size):
        raise AssertionError("randomness drawn before validation finished")

    random_bytes = getrandbits = randbelow = uint64


def test_ledger_charge_and_refusal_before_any_charge_or_draw(tmp_path):
    """One (ε, δ) charge (an (ε, δ) event: the curve has no profile to compose tighter); a refused bound charges
    and draws nothing."""
    import polars as pl

    from sparsedp.accounting.events import ApproxDPEvent
    from sparsedp.ledger import Ledger

    path = str(tmp_path / "l.db")
    with Ledger(path) as led:
        led.set_budget("d", epsilon=3.0, delta=1e-5)
    df = pl.DataFrame({"u": list(range(41)), "k": ["a"] * 40 + ["b"]})
    with pytest.raises(InvalidParameterError, match="ONE key per unit"):
        sd.release(df, "u", "k", epsilon=1.0, delta=1e-6, max_groups_per_unit=2, mechanism="optimal-partition",
                   ledger=path, dataset="d", rng=_Tripwire())
    sd.release(df, "u", "k", epsilon=1.0, delta=1e-6, mechanism="optimal-partition", ledger=path, dataset="d",
               rng=InsecureSeededRandom(1))
    with Ledger(path) as led:
        h = led.history("d")
    assert [(c.mechanism, c.epsilon, c.delta, c.status) for c in h] == [("optimal-partition", 1.0, 1e-6, "published")]
    assert isinstance(h[0].event, ApproxDPEvent)
