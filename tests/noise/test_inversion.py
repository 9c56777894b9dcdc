"""The exact inversion sampler (sparsedp.noise.inversion): proved survival bounds against mpmath, the sampled
law (chi-square against the pmfs of sparsedp.accounting.discrete), release frequencies P[X >= j], the exact
slow path forced by a coarse table (and by deliberately coarse bounds, so that V's bits are refined several
times), a law with bounded support (S exactly 0 and 1), and the wiring into the per-key kernel.

Fixed seeds; tolerances: chi-square p > 1e-4, frequencies within 4 standard errors."""

from __future__ import annotations

import math
from fractions import Fraction
from functools import lru_cache

import mpmath as mp
import numpy as np
import pytest
from scipy import stats

from sparsedp.accounting import calibrate
from sparsedp.accounting import discrete as D
from sparsedp.errors import InvalidParameterError
from sparsedp.mechanisms import kernel
from sparsedp.audit.stats import pooled_chisquare
from sparsedp.noise import InsecureSeededRandom
from sparsedp.noise import inversion as inv
from sparsedp.noise.inversion import (
    DiscreteGaussianLaw, DiscreteLaplaceLaw, IntegerLaw, inversion_fits, release_by_inversion,
    sample_by_inversion,
)

GAUSS = [Fraction(1, 3), Fraction(7, 2), Fraction(93583817, 524288)]   # the last: GSHM at ε=1, δ=1e-6, l0=10
LAPLACE = [Fraction(1, 2), Fraction(3), Fraction(10, 3)]


# ------------------------------------------------------------------------------- reference values (mpmath)


@lru_cache(maxsize=None)
def _mp_gauss_tails(s: Fraction) -> tuple[int, list]:
    """(n, T) with T[k] = Σ_{x >= k − n, |x| <= n} w_x / Z for N_Z(0, s) at 110 digits (direct summation;
    terms beyond n are < e^-300 relative)."""
    with mp.workdps(110):
        sm = mp.mpf(s.numerator) / s.denominator
        n = int(math.sqrt(2 * float(s) * 300)) + 10
        w = [mp.exp(-mp.mpf(x) ** 2 / (2 * sm)) for x in range(-n, n + 1)]
        z = mp.fsum(w)
        tails = [mp.mpf(0)] * (2 * n + 2)
        for k in range(2 * n, -1, -1):
            tails[k] = tails[k + 1] + w[k]
        return n, [t / z for t in tails]


def _mp_gauss_sf(s: Fraction, j: int) -> mp.mpf:
    """S(j) of N_Z(0, s)."""
    n, tails = _mp_gauss_tails(s)
    return tails[min(max(j, -n), n + 1) + n]


def _mp_laplace_sf(b: Fraction, j: int) -> mp.mpf:
    """S(j) = q^j/(1+q) for j >= 1, 1 − S(1 − j) for j <= 0 (closed form of the geometric series)."""
    q = mp.exp(-mp.mpf(b.denominator) / b.numerator)
    return q ** j / (1 + q) if j >= 1 else 1 - q ** (1 - j) / (1 + q)


def _check_bounds(law, ref, j_from, j_to, prec):
    """lo <= 2^prec S(j) <= hi for j in [j_from, j_to] (mpmath reference); returns the widths hi − lo."""
    lo, hi = law.survival_bounds(j_from, j_to, prec)
    assert len(lo) == len(hi) == j_to - j_from + 1
    scale = mp.mpf(2) ** prec
    for j, a, b in zip(range(j_from, j_to + 1), lo, hi):
        t = ref(j) * scale
        assert a <= t <= b, (j, prec, a, t, b)
    return [b - a for a, b in zip(lo, hi)]


def _check_law(law, ref):
    j_lo, j_hi = law.window()
    with mp.workdps(110):
        for prec in (64, 128, 256):
            widths = _check_bounds(law, ref, j_lo - 3, j_hi + 3, prec)
            for far in (-(10**6), 10**6, 10**12):
                widths += _check_bounds(law, ref, far, far, prec)
            assert max(widths) <= inv._MAX_WIDTH and np.median(widths) <= 2
        # the window's claim: S within 2^-70 of 0 resp. 1 outside it
        assert ref(j_hi + 1) <= mp.mpf(2) ** -70
        assert ref(j_lo - 1) >= 1 - mp.mpf(2) ** -70


@pytest.mark.parametrize("s", GAUSS[:2] + [Fraction(50)])
def test_gaussian_survival_bounds_contain_the_true_value(s):
    _check_law(DiscreteGaussianLaw(s), lambda j: _mp_gauss_sf(s, j))


@pytest.mark.parametrize("b", LAPLACE)
def test_laplace_survival_bounds_contain_the_true_value(b):
    _check_law(DiscreteLaplaceLaw(b), lambda j: _mp_laplace_sf(b, j))


def test_bounds_tighten_with_precision_and_reject_low_precision():
    law = DiscreteGaussianLaw(Fraction(7, 2))
    lo64, hi64 = law.survival_bounds(2, 2, 64)
    lo128, hi128 = law.survival_bounds(2, 2, 128)
    assert lo64[0] << 64 <= lo128[0] <= hi128[0] <= hi64[0] << 64
    with pytest.raises(InvalidParameterError):
        law.survival_bounds(0, 1, 32)


# ------------------------------------------------------------------------------- the sampled law


def _chi2_pvalue(xs: np.ndarray, pmf, lo: int, hi: int) -> float:
    """Chi-square of xs against pmf on [lo, hi] (tails lumped into the end bins, bins of >= 5 expected)."""
    support = np.arange(lo, hi + 1)
    p = np.array([pmf(int(x)) for x in support])
    p[0] += max(0.0, 1.0 - p.sum())          # mass outside the range goes to the end bins (symmetric laws)
    obs = np.bincount(np.clip(xs, lo, hi) - lo, minlength=support.size).astype(float)
    return pooled_chisquare(obs, p, min_expected=5)


def _gauss_range(s):
    w = int(6 * math.sqrt(float(s))) + 3
    return -w, w


@pytest.mark.parametrize("s", GAUSS)
def test_gaussian_draws_match_the_pmf(s):
    xs = sample_by_inversion(DiscreteGaussianLaw(s), 200_000, InsecureSeededRandom(11))
    assert xs.dtype == np.int64
    assert _chi2_pvalue(xs, lambda x: D.dgauss_pmf(x, float(s)), *_gauss_range(s)) > 1e-4
    assert abs(xs.mean()) < 4 * math.sqrt(D.dgauss_variance(float(s)) / xs.size)


@pytest.mark.parametrize("b", LAPLACE)
def test_laplace_draws_match_the_pmf(b):
    xs = sample_by_inversion(DiscreteLaplaceLaw(b), 200_000, InsecureSeededRandom(12))
    w = int(12 * float(b)) + 3
    assert _chi2_pvalue(xs, lambda x: D.dlaplace_pmf(x, float(b)), -w, w) > 1e-4


def _freq_ok(hits: int, n: int, p: float) -> bool:
    return abs(hits / n - p) <= 4 * math.sqrt(max(p * (1 - p), 1e-12) / n) + 1e-12


@pytest.mark.parametrize("law,sf", [
    (DiscreteGaussianLaw(Fraction(7, 2)), lambda j: D.dgauss_sf(j, 3.5)),
    (DiscreteGaussianLaw(GAUSS[2]), lambda j: D.dgauss_sf(j, float(GAUSS[2]))),
    (DiscreteLaplaceLaw(Fraction(10, 3)), lambda j: D.dlaplace_sf(j, 10 / 3)),
])
def test_release_frequency_and_values(law, sf):
    n = 100_000
    j_lo, j_hi = law.window()
    for k, jj in enumerate(sorted({-3, 0, 1, 2, 5, j_hi // 4, j_hi // 2})):
        pos, x = release_by_inversion(law, np.full(n, jj, dtype=np.int64), InsecureSeededRandom(100 + k))
        assert _freq_ok(pos.size, n, sf(jj)), (jj, pos.size / n, sf(jj))
        assert np.all(np.diff(pos) > 0) and np.all(x >= jj) and x.dtype == np.int64
    # mixed thresholds, incl. far outside the window: released values respect their own threshold, and the
    # values are the law conditioned on X >= j (here j = 0 for all: half-line chi-square)
    js = np.array([-(10**12), 10**12, 0, j_lo - 5, j_hi + 5] * 20_000, dtype=np.int64)
    pos, x = release_by_inversion(law, js, InsecureSeededRandom(7))
    assert np.all(x >= js[pos])
    assert np.all(np.isin(np.arange(0, js.size, 5), pos))          # j = -1e12: always released
    assert not np.any(np.isin(np.arange(1, js.size, 5), pos))      # j = +1e12: never


def test_release_values_have_the_conditional_law():
    s = Fraction(7, 2)
    law = DiscreteGaussianLaw(s)
    pos, x = release_by_inversion(law, np.full(200_000, 1, dtype=np.int64), InsecureSeededRandom(5))
    tail = D.dgauss_sf(1, 3.5)
    assert _chi2_pvalue(x, lambda v: D.dgauss_pmf(v, 3.5) / tail if v >= 1 else 0.0, 1, 14) > 1e-4


# ------------------------------------------------------------------------------- the exact slow path


class _Counting:
    """Wraps a law, counting the bound requests above the table's precision (= slow-path comparisons).
    With ``coarse=True`` the bounds at precision p > 64 are rounded outward to ``8 + 2(p − 8)/64`` bits
    (still valid, and still converging as p grows): each 64-bit refinement of V gains only 2 bits of
    bound, so decisions need several refinements."""

    def __init__(self, law, coarse: bool = False):
        self.law, self.coarse, self.calls, self.max_prec = law, coarse, 0, 0

    def window(self):
        return self.law.window()

    def survival_bounds(self, j_lo, j_hi, prec):
        lo, hi = self.law.survival_bounds(j_lo, j_hi, prec)
        if prec <= 64:
            return lo, hi
        self.calls += 1
        self.max_prec = max(self.max_prec, prec)
        if not self.coarse:
            return lo, hi
        c = prec - (8 + 2 * ((prec - 8) // 64))
        return [(a >> c) << c for a in lo], [-((-b) >> c) << c for b in hi]


@pytest.fixture
def coarse_table(monkeypatch):
    monkeypatch.setattr(inv, "_TABLE_BITS", 8)


@pytest.mark.parametrize("law,pmf,rng_,n", [
    (DiscreteGaussianLaw(Fraction(7, 2)), lambda x: D.dgauss_pmf(x, 3.5), (-14, 14), 100_000),
    (DiscreteLaplaceLaw(Fraction(3)), lambda x: D.dlaplace_pmf(x, 3.0), (-40, 40), 30_000),
])
def test_slow_path_is_exact(coarse_table, law, pmf, rng_, n):
    wrapped = _Counting(law)
    xs = sample_by_inversion(wrapped, n, InsecureSeededRandom(21))
    assert wrapped.calls > n // 20                 # the 8-bit table leaves many draws to the slow path
    assert _chi2_pvalue(xs, pmf, *rng_) > 1e-4


def test_slow_path_release_decisions_are_exact(coarse_table):
    law = _Counting(DiscreteGaussianLaw(Fraction(7, 2)))
    n = 100_000
    for k, jj in enumerate((0, 2, 4)):
        pos, x = release_by_inversion(law, np.full(n, jj, dtype=np.int64), InsecureSeededRandom(30 + k))
        assert _freq_ok(pos.size, n, D.dgauss_sf(jj, 3.5))
        assert np.all(x >= jj)
    assert law.calls > 1_000


def test_repeated_refinement_is_exact(coarse_table):
    """Coarsened bounds: slow-path comparisons need several 64-bit refinements of V."""
    law = _Counting(DiscreteGaussianLaw(Fraction(7, 2)), coarse=True)
    xs = sample_by_inversion(law, 40_000, InsecureSeededRandom(22))
    assert law.max_prec >= 8 + 4 * 64
    assert _chi2_pvalue(xs, lambda x: D.dgauss_pmf(x, 3.5), -14, 14) > 1e-4
    pos, x = release_by_inversion(law, np.full(40_000, 3, dtype=np.int64), InsecureSeededRandom(23))
    assert _freq_ok(pos.size, 40_000, D.dgauss_sf(3, 3.5))


def test_fast_and_slow_paths_agree_in_law_for_the_gshm_scale(coarse_table):
    s = GAUSS[2]
    xs = sample_by_inversion(DiscreteGaussianLaw(s), 100_000, InsecureSeededRandom(24))
    assert _chi2_pvalue(xs, lambda x: D.dgauss_pmf(x, float(s)), *_gauss_range(s)) > 1e-4


# ------------------------------------------------------------------------------- generic protocol


class _FiniteLaw:
    """P[X = x] = p_x on a finite support, S given exactly (2^prec S may be an integer; S is 0 and 1 at
    the ends): the generic machinery with exact, not merely bracketing, bounds."""

    def __init__(self, pmf: dict[int, Fraction]):
        self.pmf = pmf

    def window(self):
        return min(self.pmf), max(self.pmf)

    def _sf(self, j):
        return sum((p for x, p in self.pmf.items() if x >= j), Fraction(0))

    def survival_bounds(self, j_lo, j_hi, prec):
        vals = [self._sf(j) * (1 << prec) for j in range(j_lo, j_hi + 1)]
        return [math.floor(v) for v in vals], [math.ceil(v) for v in vals]


@pytest.mark.parametrize("bits", [64, 8])
def test_a_law_with_bounded_support(monkeypatch, bits):
    monkeypatch.setattr(inv, "_TABLE_BITS", bits)
    law = _FiniteLaw({-1: Fraction(1, 2), 0: Fraction(1, 3), 4: Fraction(1, 6)})
    assert isinstance(law, IntegerLaw)
    xs = sample_by_inversion(law, 60_000, InsecureSeededRandom(40))
    assert set(np.unique(xs).tolist()) == {-1, 0, 4}
    obs = [np.count_nonzero(xs == v) for v in (-1, 0, 4)]
    assert stats.chisquare(obs, [30_000, 20_000, 10_000]).pvalue > 1e-4
    pos, x = release_by_inversion(law, np.array([-1, 0, 1, 5, -7] * 10_000), InsecureSeededRandom(41))
    j = np.array([-1, 0, 1, 5, -7] * 10_000)[pos]
    assert np.all(x >= j) and not np.any(j == 5) and np.count_nonzero(j == -1) == 10_000


def test_validation():
    law = DiscreteGaussianLaw(Fraction(2))
    pos, x = release_by_inversion(law, np.empty(0, np.int64), InsecureSeededRandom(1))
    assert pos.size == 0 and x.size == 0 and pos.dtype == np.int64
    assert sample_by_inversion(law, 0, InsecureSeededRandom(1)).size == 0
    with pytest.raises(InvalidParameterError):
        release_by_inversion(law, np.array([0.5, 1.0]))
    with pytest.raises(InvalidParameterError):
        DiscreteGaussianLaw(Fraction(-1))
    huge = DiscreteGaussianLaw(Fraction(10**12))
    assert not inversion_fits(huge) and inversion_fits(law)
    with pytest.raises(InvalidParameterError):
        sample_by_inversion(huge, 3)
    # laws are values: equal parameters give equal (and equally hashed) laws, so tables are shared
    assert DiscreteLaplaceLaw("0.5") == DiscreteLaplaceLaw(Fraction(1, 2))
    assert hash(DiscreteGaussianLaw(2)) == hash(law)


# ------------------------------------------------------------------------------- kernel wiring


@pytest.mark.parametrize("mech,kw", [("gshm", dict(l0=3)), ("laplace", dict(l0=3)),
                                     ("csh", dict(k=4, csh_noise="alg4"))])
def test_kernel_takes_the_rejection_path_for_wide_laws(monkeypatch, mech, kw):
    """With tables forbidden (``_MAX_TABLE`` tiny) the kernel falls back to the rejection samplers; both
    paths release a count at the threshold with the same frequency."""
    cal = calibrate(mech, epsilon=1.0, delta=1e-5, **kw)
    plan = kernel.noise_plan(cal)
    c = int(math.ceil(1 + cal.tau)) - 1
    counts = np.full(60_000, c, dtype=np.int64)
    rates = []
    for max_table in (inv._MAX_TABLE, 3):
        monkeypatch.setattr(inv, "_MAX_TABLE", max_table)
        assert inversion_fits(plan.law(0)) == (max_table > 3)
        pos, vals = kernel.noise_and_filter(counts, cal, 1, InsecureSeededRandom(50), shared_noise=(
            0 if plan.family == "correlated" else None))
        assert np.all(vals > 1 + cal.tau) if plan.strict else np.all(vals >= 1 + cal.tau)
        rates.append(pos.size)
    p = rates[0] / counts.size
    assert abs(rates[0] - rates[1]) <= 6 * math.sqrt(2 * counts.size * max(p * (1 - p), 1e-9)) + 1
