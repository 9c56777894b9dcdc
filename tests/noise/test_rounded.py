"""The exact law X = round(G + A) of rounded CSH (sparsedp.noise.rounded): proved bounds, exact sampling,
the shared term's law and its reproducibility across processes (pickling, keyed stream)."""

from __future__ import annotations

import math
import pickle

import mpmath
import numpy as np
import pytest
from mpmath import mpf
from scipy import stats

from sparsedp.errors import InvalidParameterError
from sparsedp.noise import InsecureSeededRandom
from sparsedp.noise.inversion import release_by_inversion, sample_by_inversion
from sparsedp.noise.rounded import RoundedShiftedGaussianLaw, SharedGaussianTerm, phi_bar_bounds
from sparsedp.noise.source import SecretKeyedStream


class _FixedShift:
    """A known, exact shift A (a test double of SharedGaussianTerm)."""

    def __init__(self, a):
        self.a = mpf(a)
        self._memo = {}

    def bounds(self, width=None):
        return self.a, self.a

    def memo(self, sigma, prec):
        return self._memo.setdefault((sigma, prec), {})


def _true_sf(j, a, s, dps=50):
    """Independent evaluation: P[round(G + a) >= j] = 1 − Φ((j − ½ − a)/s) with mpmath's ncdf at 50 digits."""
    with mpmath.workdps(dps):
        return 1 - mpmath.ncdf((mpf(j) - mpf(1) / 2 - mpf(a)) / mpf(s))


@pytest.mark.parametrize("a,s", [(0.0, 1.0), (0.3712, 2.5), (-7.25, 13.0), (41.0625, 68.0)])
def test_survival_bounds_contain_50_digit_values_and_are_tight(a, s):
    law = RoundedShiftedGaussianLaw(s, _FixedShift(a))
    j_lo, j_hi = law.window()
    js = sorted({j_lo - 3, j_lo, j_hi, j_hi + 3, *np.linspace(j_lo, j_hi, 41).astype(int).tolist()})
    for prec in (64, 100, 160):
        for j in js:
            lo, hi = law.survival_bounds(j, j, prec)
            with mpmath.workdps(60):  # mpmath arithmetic rounds to the context precision
                true = _true_sf(j, a, s) * mpf(2) ** prec
                assert lo[0] <= true <= hi[0], (a, s, j, prec)
            assert hi[0] - lo[0] <= 3, (a, s, j, prec, hi[0] - lo[0])


def test_window_claims_hold():
    for a, s in [(0.5, 1.0), (-3.0, 40.0)]:
        law = RoundedShiftedGaussianLaw(s, _FixedShift(a))
        j_lo, j_hi = law.window()
        with mpmath.workdps(60):
            assert _true_sf(j_lo - 1, a, s) >= 1 - mpf(2) ** -70
            assert _true_sf(j_hi + 1, a, s) <= mpf(2) ** -70
        assert j_hi - j_lo <= 20 * s + 6  # not needlessly wide


def test_phi_bar_bounds_deep_tail_relative_accuracy():
    for x in (-40, -3.5, 0, 0.25, 9.0, 37.5):
        lo, hi = phi_bar_bounds(mpf(x), 128)
        with mpmath.workdps(60):
            true = mpmath.ncdf(-mpf(x))
        assert lo <= true <= hi
        assert (hi - lo) / true < mpf(2) ** -120


def test_shared_term_bounds_contain_the_inverse_cdf_of_its_bits():
    secret = bytes(range(32))
    term = SharedGaussianTerm(2.75, secret)
    for width in (1e-3, 1e-25, 1e-60):
        a_lo, a_hi = term.bounds(width)
        assert a_hi - a_lo <= width
        n = term.nbits
        words = SecretKeyedStream(secret, b"sparsedp rounded-csh shared term").random_bytes(n // 8)
        p = int.from_bytes(words, "big")
        with mpmath.workdps(120):  # independent: erfinv on V0's interval [p/2^n, (p+1)/2^n)
            lo_true = 2.75 * mpmath.sqrt(2) * mpmath.erfinv(2 * mpf(p) / mpf(2) ** n - 1)
            hi_true = 2.75 * mpmath.sqrt(2) * mpmath.erfinv(2 * mpf(p + 1) / mpf(2) ** n - 1)
            assert a_lo <= lo_true and hi_true <= a_hi
            assert (lo_true - a_lo) + (a_hi - hi_true) <= (hi_true - lo_true) * mpf(2) ** -20


def test_shared_term_is_reproducible_after_pickling_and_hidden():
    t1 = SharedGaussianTerm(3.0, b"s" * 32)
    t2 = pickle.loads(pickle.dumps(t1))
    t1.bounds(1e-12)
    assert t2.nbits == 0  # the pickle carries no drawn state, only the secret
    assert t2.bounds(1e-40) == pickle.loads(pickle.dumps(t1)).bounds(1e-40)
    a1 = t1.bounds(1e-40)
    assert a1[0] <= t2.bounds()[1] and t2.bounds()[0] <= a1[1]  # the same A, refined in either order
    other = SharedGaussianTerm(3.0, b"t" * 32).bounds(1e-12)
    assert other[1] < a1[0] or other[0] > a1[1]
    assert "secret" in repr(t1) and "s" * 32 not in repr(t1)
    with pytest.raises(InvalidParameterError):
        SharedGaussianTerm(3.0, b"short")
    with pytest.raises(InvalidParameterError):
        RoundedShiftedGaussianLaw(0.0)


def test_shared_term_law_is_gaussian():
    """A = s_c Φ⁻¹(V₀): KS test against N(0, s_c²) over 3000 terms drawn from a seeded source."""
    rng = InsecureSeededRandom(71)
    s_c = 4.0
    mids = []
    for _ in range(3000):
        lo, hi = SharedGaussianTerm.draw(s_c, rng).bounds()
        mids.append(float((lo + hi) / 2))
    assert stats.kstest(np.array(mids) / s_c, "norm").pvalue > 1e-3


def _chi_square_p(x: np.ndarray, a: float, s: float) -> float:
    """p-value of a chi-square test of draws x against P[X = j] = S(j) − S(j + 1) (exact, 30 digits)."""
    lo, hi = int(x.min()), int(x.max())
    js = np.arange(lo, hi + 1)
    sf = np.array([float(_true_sf(j, a, s, 30)) for j in range(lo, hi + 2)])
    pmf = sf[:-1] - sf[1:]
    pmf[0] += 1 - sf[0]            # everything below lo into the first cell
    pmf[-1] += sf[-1]              # everything above hi into the last cell
    obs = np.bincount(x - lo, minlength=js.size).astype(float)
    exp = pmf * x.size
    keep = exp >= 20               # pool the sparse tails
    o = np.r_[obs[keep], obs[~keep].sum()]
    e = np.r_[exp[keep], exp[~keep].sum()]
    if e[-1] < 5:
        o, e = o[:-1], e[:-1]
        o[-1] += obs[~keep].sum()
        e[-1] += exp[~keep].sum()
    return float(stats.chisquare(o, e * o.sum() / e.sum()).pvalue)


@pytest.mark.parametrize("a,s,seed", [(0.3712, 2.5, 1), (-1.875, 0.6, 2), (11.5, 9.0, 3)])
def test_exact_sampler_matches_the_law_given_a(a, s, seed):
    law = RoundedShiftedGaussianLaw(s, _FixedShift(a))
    x = sample_by_inversion(law, 200_000, InsecureSeededRandom(seed))
    assert _chi_square_p(x, a, s) > 1e-4


def test_release_given_a_shared_term_matches_the_law():
    """release_by_inversion with a real SharedGaussianTerm: frequency of X >= j and the law of released X."""
    term = SharedGaussianTerm(2.0, b"r" * 32)
    law = RoundedShiftedGaussianLaw(3.0, term)
    a = float(sum(term.bounds(1e-30)) / 2)
    n = 200_000
    j = np.full(n, 2, dtype=np.int64)
    pos, x = release_by_inversion(law, j, InsecureSeededRandom(9))
    p = float(_true_sf(2, a, 3.0))
    assert abs(pos.size / n - p) <= 4 * math.sqrt(p * (1 - p) / n)
    assert np.all(x >= 2)
    full = sample_by_inversion(law, n, InsecureSeededRandom(10))
    assert _chi_square_p(full, a, 3.0) > 1e-4


def test_rejects_low_precision():
    law = RoundedShiftedGaussianLaw(1.0, _FixedShift(0))
    with pytest.raises(InvalidParameterError):
        law.survival_bounds(0, 1, 32)


def test_rounded_sigma_max_fits_the_inversion_table_and_calibration_falls_back_above_it():
    """calibrate's ROUNDED_SIGMA_MAX (accounting cannot import noise) must stay within the sampler's range:
    at that sigma, with the widest shared term, the law's window still fits an inversion table; above it,
    calibration uses Algorithm 4 and says why."""
    from sparsedp.accounting import calibrate
    from sparsedp.accounting.calibrate import ROUNDED_SIGMA_MAX
    from sparsedp.noise.inversion import inversion_fits

    shift = SharedGaussianTerm.draw(ROUNDED_SIGMA_MAX, InsecureSeededRandom(3))
    assert inversion_fits(RoundedShiftedGaussianLaw(ROUNDED_SIGMA_MAX, shift))
    assert not inversion_fits(RoundedShiftedGaussianLaw(4 * ROUNDED_SIGMA_MAX, shift))
    cal = calibrate("topk-csh", epsilon=0.05, delta=1e-6, top_k=51914)  # rounded sigma would be ~7900
    assert cal.analysis.startswith("discrete-") and "Algorithm 4" in cal.fallback
    assert calibrate("topk-csh", epsilon=1.0, delta=1e-6, top_k=1000).fallback is None


def test_release_report_says_when_rounded_csh_falls_back():
    import polars as pl

    import sparsedp as sd

    df = pl.DataFrame({"u": list(range(30)), "q": ["a", "b", "c"] * 10})
    for debias in (True, False):
        res = sd.release(df, privacy_unit="u", by=["q"], epsilon=0.05, delta=1e-6,
                         mechanism=sd.TopKCSH(k=51914, debias=debias), rng=InsecureSeededRandom(5))
        assert res.report.analysis.startswith("discrete-")
        assert "beyond its exact sampler's table" in str(res.report) and "Algorithm 4" in str(res.report)
        assert res.table.height == 0  # counts of 10 are far below a threshold in the tens of thousands
