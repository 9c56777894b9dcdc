"""Adversarial review tests of the inversion sampler (sparsedp.noise.inversion) and its kernel wiring.

* Deterministic branch coverage: a scripted source hands out chosen 64-bit words ``U`` (at every table
  boundary ``lo − 1, lo, hi − 1, hi``, 0, 2^64 − 1) and chosen refinement words (around ``2^p S(j)``), and each
  outcome is checked against an exact oracle: with ``P`` the prefix of V actually drawn (``n`` bits), the
  decision / value must hold for *every* V in ``[P/2^n, (P+1)/2^n)``. Release and sample on the same stream
  must agree (same V for the decision and the value).
* Laws whose ``window()`` lies (too narrow / far away): correctness must not depend on it.
* Thresholds at the int64 limits (the table index must not wrap) and unsigned thresholds >= 2^63.
* Joint law of ``(released, value)`` against the exact pmf (chi-square) with a 2- and 4-bit table.
* Kernel: ``release_floor`` against the exact rational rule (``>=``, ``>``, the CSH ½-lattice with a
  non-integer margin), and the per-count release frequencies through ``noise_and_filter``.
"""

from __future__ import annotations

import math
import random
from fractions import Fraction
from types import SimpleNamespace

import mpmath as mp
import numpy as np
import pytest
from scipy import stats

from sparsedp.accounting import discrete as D
from sparsedp.errors import InvalidParameterError
from sparsedp.mechanisms import kernel
from sparsedp.noise import InsecureSeededRandom
from sparsedp.noise import inversion as inv
from sparsedp.noise.inversion import DiscreteGaussianLaw, DiscreteLaplaceLaw, release_by_inversion, sample_by_inversion

I64 = np.iinfo(np.int64)


class _Exact:
    """Finite-support law with exact rational S (bounds floor/ceil of 2^prec S)."""

    def __init__(self, pmf: dict[int, Fraction], window=None):
        self.pmf, self._window, self._memo = pmf, window, {}

    def __hash__(self):                 # identity equality, but hashable: the sampler caches its table
        return id(self)

    def window(self):
        return self._window or (min(self.pmf), max(self.pmf))

    def sf(self, j: int) -> Fraction:
        if j not in self._memo:
            self._memo[j] = sum((p for x, p in self.pmf.items() if x >= j), Fraction(0))
        return self._memo[j]

    def survival_bounds(self, j_lo, j_hi, prec):
        vals = [self.sf(j) * (1 << prec) for j in range(j_lo, j_hi + 1)]
        return [math.floor(v) for v in vals], [math.ceil(v) for v in vals]


_ODD = {-3: Fraction(1, 3), -1: Fraction(1, 7), 0: Fraction(1, 5), 2: Fraction(1, 11)}
_ODD[5] = 1 - sum(_ODD.values())
ODD = _Exact(_ODD)                                              # non-dyadic: 2^64 S never an integer
DYADIC = _Exact({0: Fraction(1, 2), 3: Fraction(1, 4), 4: Fraction(1, 4)})   # 2^64 S exact, S(1)=S(2)=S(3)


class _Ragged(_Exact):
    """Valid but ragged (non-monotone) bounds at precision 64 on a plateau of S: the table's monotone
    envelope and the search must cope. Exact bounds above precision 64 (so the slow path terminates)."""

    def survival_bounds(self, j_lo, j_hi, prec):
        lo, hi = super().survival_bounds(j_lo, j_hi, prec)
        if prec != 64:
            return lo, hi
        out_lo, out_hi = [], []
        for j, a, b in zip(range(j_lo, j_hi + 1), lo, hi):
            if j % 3 == 1:                  # the trivial bounds [0, 1]
                a, b = 0, 1 << 64
            elif j % 3 == 2:
                a, b = max(0, a - (j * 2654435761) % (1 << 40)), min(1 << 64, b + (j * 40503) % (1 << 40))
            out_lo.append(a)
            out_hi.append(b)
        return out_lo, out_hi


RAGGED = _Ragged({-2: Fraction(1, 3), 4: Fraction(1, 3), 5: Fraction(1, 3)})   # S(-1) = … = S(4) = 2/3


class _Scripted:
    """A source handing out scripted words: ``uint64`` from ``words``, ``getrandbits(64)`` from ``extra`` and
    then a seeded stream. Records the refinement words actually drawn."""

    def __init__(self, words, extra=(), seed=0):
        self.words, self.extra, self.drawn = list(words), list(extra), []
        self.fb = random.Random(seed)

    def uint64(self, size):
        out, self.words = self.words[:size], self.words[size:]
        assert len(out) == size, "the sampler drew more words than scripted"
        return np.array(out, dtype=np.uint64)

    def getrandbits(self, k):
        assert k == 64
        w = self.extra.pop(0) if self.extra else self.fb.getrandbits(64)
        self.drawn.append(w)
        return w


def _prefix(u64: int, drawn, bits: int) -> tuple[int, int]:
    p = u64 >> (64 - bits)
    for w in drawn:
        p = (p << 64) | w
    return p, bits + 64 * len(drawn)


def _check_exact(sf, j, u64, extra, bits, release, sample, seed=0):
    """Run release/sample on the scripted V and check both against the oracle sf (exact comparisons)."""
    src = _Scripted([u64], extra, seed)
    pos, x = release(np.array([j], dtype=np.int64), src)
    p, n = _prefix(u64, src.drawn, bits)
    v_lo, v_hi = Fraction(p, 1 << n), Fraction(p + 1, 1 << n)
    if pos.size:
        xv = int(x[0])
        assert pos.tolist() == [0] and xv >= j
        assert v_hi <= sf(xv) and v_lo >= sf(xv + 1), (j, u64, xv)
    else:
        assert v_lo >= sf(j), (j, u64)
    src2 = _Scripted([u64], extra, seed)
    xs = sample(src2)
    p2, n2 = _prefix(u64, src2.drawn, bits)
    xs0 = int(xs[0])
    assert Fraction(p2 + 1, 1 << n2) <= sf(xs0) and Fraction(p2, 1 << n2) >= sf(xs0 + 1), (u64, xs0)
    # the same V: the release decision is X >= j and the released value is X
    assert (pos.size == 1) == (xs0 >= j)
    if pos.size:
        assert int(x[0]) == xs0


def _boundary_words(law, bits):
    """64-bit words whose top ``bits`` bits sit at every table boundary (and 0, 2^64 − 1)."""
    tab = inv._Table(law, bits)
    top = (1 << bits) - 1
    us = {0, 1, top, top - 1}
    for a in tab.lo.tolist() + [h + 1 for h in tab.hm1.tolist()]:
        us.update(u for u in (a - 1, a, a + 1) if 0 <= u <= top)
    shift = 64 - bits
    return sorted({(u << shift) | low for u in us for low in (0, (1 << shift) - 1)})


def _critical_extras(sf, js, u64, bits):
    """First refinement words putting V's 64+bits-bit prefix at ⌊2^n S(j')⌋ − 1, ⌊·⌋, ⌊·⌋ + 1."""
    n = bits + 64
    base = (u64 >> (64 - bits)) << 64
    out = {0, (1 << 64) - 1}
    for jj in js:
        c = math.floor(sf(jj) * (1 << n)) - base
        out.update(w for w in (c - 1, c, c + 1) if 0 <= w < 1 << 64)
    return sorted(out)


@pytest.mark.parametrize("law", [ODD, DYADIC, RAGGED], ids=["odd", "dyadic", "ragged"])
@pytest.mark.parametrize("bits", [64, 8, 3])
def test_every_boundary_word_is_decided_exactly(monkeypatch, law, bits):
    monkeypatch.setattr(inv, "_TABLE_BITS", bits)
    js = list(range(min(law.pmf) - 2, max(law.pmf) + 3))
    thresholds = list(range(min(law.pmf) - 1, max(law.pmf) + 2)) + [I64.min, 10**12, I64.max - 1]
    rel = lambda j, src: release_by_inversion(law, j, src)          # noqa: E731
    smp = lambda src: sample_by_inversion(law, 1, src)             # noqa: E731
    for u64 in _boundary_words(law, bits):
        extras = _critical_extras(law.sf, js, u64, bits)
        for j in thresholds:
            for w in extras[:: max(1, len(extras) // 6)] + [extras[-1]]:
                _check_exact(law.sf, j, u64, [w], bits, rel, smp, seed=j & 0xFFFF)


@pytest.mark.parametrize("bits", [64, 8])
def test_gaussian_boundary_words_against_mpmath(monkeypatch, bits):
    """The real law: every table boundary word, decisions checked against a 90-digit S."""
    monkeypatch.setattr(inv, "_TABLE_BITS", bits)
    s = Fraction(7, 2)
    law = DiscreteGaussianLaw(s)
    with mp.workdps(90):
        n = 60
        w = {x: mp.exp(-mp.mpf(x) ** 2 / (2 * mp.mpf(7) / 2)) for x in range(-n, n + 1)}
        z = mp.fsum(w.values())
        cache: dict[int, Fraction] = {}

        def sf(j):          # exact enough: the prefixes have <= 8 + 64·3 bits, the error is ~2^-290
            if j not in cache:
                jj = min(max(j, -n), n + 1)
                v = mp.fsum(w[x] for x in range(jj, n + 1)) / z
                cache[j] = Fraction(int(mp.floor(v * mp.mpf(2) ** 290)), 1 << 290)
            return cache[j]

        js = [-9, -1, 0, 1, 2, 7]
        rel = lambda j, src: release_by_inversion(law, j, src)      # noqa: E731
        smp = lambda src: sample_by_inversion(law, 1, src)          # noqa: E731
        words = _boundary_words(law, bits)
        for u64 in words[:: max(1, len(words) // 40)] + [words[-1]]:
            extras = _critical_extras(sf, range(-12, 14), u64, bits)
            for j in js:
                for wd in (extras[0], extras[len(extras) // 2], extras[-1]):
                    _check_exact(sf, j, u64, [wd], bits, rel, smp, seed=5)


def test_windows_that_lie_do_not_change_the_law(monkeypatch):
    """Correctness must not depend on window(): a too-narrow and a far-away window (every decision near the
    true support then goes through the clipped table ends / the slow path)."""
    for win in [(1, 1), (1000, 1004), (-1000, -996)]:
        law = _Exact(_ODD, window=win)
        for bits in (64, 6):
            monkeypatch.setattr(inv, "_TABLE_BITS", bits)
            js = np.array([-4, -3, -1, 0, 1, 3, 5, 6] * 500, dtype=np.int64)
            pos, x = release_by_inversion(law, js, InsecureSeededRandom(hash(win) & 0xFFFF))
            for jj in np.unique(js).tolist():
                m = js == jj
                hits = np.count_nonzero(m[pos])
                p = float(law.sf(jj))
                assert abs(hits - p * m.sum()) <= 5 * math.sqrt(p * (1 - p) * m.sum()) + 1e-9, (win, bits, jj)
            assert np.all(x >= js[pos]) and set(np.unique(x).tolist()) <= set(_ODD)
            xs = sample_by_inversion(law, 3_000, InsecureSeededRandom(3))
            obs = [np.count_nonzero(xs == v) for v in _ODD]
            assert stats.chisquare(obs, [float(p) * xs.size for p in _ODD.values()]).pvalue > 1e-4


@pytest.mark.parametrize("law", [DiscreteGaussianLaw(Fraction(7, 2)), DiscreteLaplaceLaw(Fraction(3)), ODD],
                         ids=["gauss", "laplace", "odd"])
def test_thresholds_at_the_int64_limits(law):
    n = 4_000
    near_max = np.array([I64.max, I64.max - 1, I64.max - 7, I64.max - 10**6], dtype=np.int64)
    pos, x = release_by_inversion(law, np.repeat(near_max, n), InsecureSeededRandom(9))
    assert pos.size == 0                                         # S(j) < 2^-1000: never released
    near_min = np.array([I64.min, I64.min + 1, -(10**15)], dtype=np.int64)
    pos, x = release_by_inversion(law, np.repeat(near_min, n), InsecureSeededRandom(9))
    assert pos.size == near_min.size * n and np.all(np.abs(x) < 10**4)
    with pytest.raises(InvalidParameterError):
        release_by_inversion(law, np.array([2**63, 0], dtype=np.uint64), InsecureSeededRandom(1))
    pos, _ = release_by_inversion(law, np.array([2**63 - 1, 0], dtype=np.uint64), InsecureSeededRandom(1))
    assert 0 not in pos.tolist()
    for dt in (np.int8, np.int32):                              # small integer dtypes are fine
        pos, x = release_by_inversion(law, np.array([-100, 100], dtype=dt), InsecureSeededRandom(2))
        assert pos.tolist() == [0] and x.dtype == np.int64
    pos, x = release_by_inversion(law, np.array([60_000, 100], dtype=np.uint16), InsecureSeededRandom(2))
    assert pos.size == 0


def _joint_pvalue(law_pmf, js, pos, x):
    """Chi-square of the (threshold, released?, value) cells against the exact joint pmf."""
    obs, exp_ = [], []
    rel = np.zeros(js.size, bool)
    rel[pos] = True
    vals = np.full(js.size, np.iinfo(np.int64).min)
    vals[pos] = x
    for jj in np.unique(js).tolist():
        m = js == jj
        cnt = m.sum()
        p_rel = {v: p for v, p in law_pmf.items() if v >= jj}
        cells = [(~rel & m, 1 - sum(p_rel.values()))] + [(rel & m & (vals == v), p) for v, p in p_rel.items()]
        assert np.count_nonzero(rel & m & ~np.isin(vals, list(p_rel))) == 0
        for mask, p in cells:
            obs.append(np.count_nonzero(mask))
            exp_.append(float(p) * cnt)
    obs, exp_ = np.array(obs, float), np.array(exp_)
    keep = exp_ >= 5
    obs_k, exp_k = list(obs[keep]), list(exp_[keep])
    obs_k.append(obs[~keep].sum())
    exp_k.append(exp_[~keep].sum())
    if exp_k[-1] < 5:
        obs_k[-2] += obs_k.pop()
        exp_k[-2] += exp_k.pop()
    return stats.chisquare(obs_k, np.array(exp_k) * sum(obs_k) / sum(exp_k)).pvalue


@pytest.mark.parametrize("bits", [2, 4, 64])
def test_joint_law_of_decision_and_value(monkeypatch, bits):
    monkeypatch.setattr(inv, "_TABLE_BITS", bits)
    js = np.array([-4, -1, 0, 1, 2, 3, 6] * 6_000, dtype=np.int64)
    pos, x = release_by_inversion(ODD, js, InsecureSeededRandom(1234 + bits))
    assert _joint_pvalue(ODD.pmf, js, pos, x) > 1e-4
    s = 3.5
    g_pmf = {v: D.dgauss_pmf(v, s) for v in range(-25, 26)}
    js = np.array([-3, 0, 2, 4] * 10_000, dtype=np.int64)
    pos, x = release_by_inversion(DiscreteGaussianLaw(Fraction(7, 2)), js, InsecureSeededRandom(77 + bits))
    assert _joint_pvalue(g_pmf, js, pos, x) > 1e-4


def test_chunks_draw_independent_words(monkeypatch):
    """Across chunks and calls, each key gets its own word (no reuse): with a 2-key chunk size the
    release pattern of identical thresholds is not periodic, and a second call differs from the first."""
    monkeypatch.setattr(inv, "_CHUNK", 2)
    law = DiscreteGaussianLaw(Fraction(7, 2))
    rng = InsecureSeededRandom(8)
    a = release_by_inversion(law, np.zeros(2_000, np.int64), rng)
    b = release_by_inversion(law, np.zeros(2_000, np.int64), rng)
    assert not np.array_equal(a[0], b[0])
    rel = np.zeros(2_000, bool)
    rel[a[0]] = True
    assert not np.array_equal(rel[0::2], rel[1::2])
    assert abs(rel.mean() - D.dgauss_sf(0, 3.5)) < 5 * math.sqrt(0.25 / 2_000)


# ------------------------------------------------------------------------------- kernel


def _plan(mech, strict, tau, *, comparison, discrete=True, sigma2=None, sigma2_corr=None, scale=None, margin=None,
          k=None):
    """A calibration-like object with the typed noise law (the calibration's tau is its integer margin)."""
    from sparsedp.accounting import laws
    from sparsedp.accounting.calibration import Comparison

    assert discrete
    if sigma2_corr is not None:
        law = laws.DiscreteCorrelatedGaussian(Fraction(sigma2), Fraction(sigma2_corr))
    elif sigma2 is not None:
        law = laws.DiscreteGaussian(Fraction(sigma2))
    else:
        law = laws.DiscreteLaplace(Fraction(scale))
    cal = SimpleNamespace(mechanism=mech, tau=tau if margin is None else float(margin), sigma=2.0, k=k, noise=law,
                          comparison=Comparison(comparison))
    plan = kernel.NoisePlan(cal)
    assert plan.strict == strict
    return plan


@pytest.mark.parametrize("tau", [0.0, 3.0, 2.5, 2.25, 2.75, 7.1, -0.5, 1e-9, 3 - 1e-12])
def test_release_floor_is_the_exact_rule(tau):
    counts = np.arange(1, 40, dtype=np.int64)
    xs = np.arange(-60, 61, dtype=np.int64)
    pre = 2
    thr = Fraction(pre + tau)           # the float threshold the kernel compares against, exactly
    plans = [_plan("gshm", False, tau, discrete=True, sigma2="4", margin=int(tau), comparison=">="),
             _plan("laplace", False, tau, discrete=True, scale="2", margin=int(tau), comparison=">="),
             _plan("laplace", True, tau, discrete=True, scale="2", comparison=">")]
    for plan in plans:
        t = Fraction(pre + plan.tau)
        j = plan.release_floor(counts, pre + plan.tau)
        for c, jj in zip(counts.tolist(), j.tolist()):
            for xv in xs.tolist():
                want = (c + xv > t) if plan.strict else (c + xv >= t)
                assert (xv >= jj) == want, (plan.mechanism, tau, c, xv)
    for strict in (True, False):
        plan = _plan("csh", strict, tau, k=4, discrete=True, sigma2="16", sigma2_corr="8",
                     comparison=">" if strict else ">=")
        for shared in (-5, 0, 3):
            j = plan.release_floor(counts, pre + tau, shared)
            for c, jj in zip(counts.tolist(), j.tolist()):
                for xv in xs.tolist():
                    d = 2 * c + xv + shared
                    want = d > 2 * thr if strict else d >= 2 * thr
                    assert (xv >= jj) == want, (strict, tau, shared, c, xv)
                    # and the value released is (2c + X + Z_corr)/2, on the half lattice
                    assert plan.noisy_values(np.array([c]), np.array([xv]), shared)[0] == d / 2


@pytest.mark.parametrize("mech", ["gshm", "laplace"])
def test_kernel_release_frequencies_per_count(mech):
    """noise_and_filter through inversion: keys below pre are never released, positions increase, and
    each count c >= pre is released with probability P[X >= pre + margin − c] exactly (frequency test)."""
    if mech == "gshm":
        plan = _plan(mech, False, 3.0, discrete=True, sigma2="9", margin=3, comparison=">=")
        sf = lambda j: D.dgauss_sf(j, 9.0)                      # noqa: E731
    else:
        plan = _plan(mech, False, 3.0, discrete=True, scale="2", margin=3, comparison=">=")
        sf = lambda j: D.dlaplace_sf(j, 2.0)                    # noqa: E731
    levels = np.array([0, 1, 2, 3, 4, 5, 7, 10], dtype=np.int64)
    counts = np.tile(levels, 12_000)
    pre = 2
    pos, vals = kernel.noise_and_filter(counts, plan, pre, InsecureSeededRandom(31))
    assert np.all(np.diff(pos) > 0) and np.all(counts[pos] >= pre) and vals.dtype == np.int64
    assert np.all(vals >= pre + 3)
    for c in levels.tolist():
        hits = np.count_nonzero(counts[pos] == c)
        p = sf(pre + 3 - c) if c >= pre else 0.0
        n = 12_000
        assert abs(hits - p * n) <= 5 * math.sqrt(p * (1 - p) * n) + 1e-9, (c, hits, p * n)


def test_huge_pre_threshold_is_exact():
    """pre + margin is computed exactly: as a float, (2^53 + 1) + 2.0 rounds to 2^53 + 2, which would release a
    count at the pre-threshold with P[Z >= margin − 1] instead of P[Z >= margin]."""
    plan = _plan("gshm", False, 2.0, discrete=True, sigma2="1", margin=2, comparison=">=")
    pre = 2**53 + 1
    n = 40_000
    pos, vals = kernel.noise_and_filter(np.full(n, pre, dtype=np.int64), plan, pre, InsecureSeededRandom(4))
    p = D.dgauss_sf(2, 1.0)
    assert abs(pos.size - p * n) <= 5 * math.sqrt(p * (1 - p) * n)
    assert np.all(vals >= pre + 2)
