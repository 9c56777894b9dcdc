"""Vectorised exact samplers: discrete Laplace (= two-sided geometric) and discrete Gaussian.

The laws are those of :mod:`sparsedp.accounting.discrete` (CKS20 Definitions 1 and 28)::

    sample_discrete_laplace(b):   P[X = x] ∝ exp(−|x| / b)
    sample_discrete_gaussian(s):  P[X = x] ∝ exp(−x² / (2 s))

Algorithms (all in batches over numpy arrays; one 64-bit word per uniform)
-------------------------------------------------------------------------
*Discrete Laplace.* |X| is drawn as the geometric variate M = max{k : V < exp(−k/b)} of a uniform V
(so P[M >= k] = e^{−k/b}), and a sign bit B; (B = 1, M = 0) is rejected and redrawn, which makes
P[X = x] ∝ e^{−|x|/b} exactly (CKS20 Algorithm 2's last step). A float logarithm only *guesses*
k; the guess is then *verified* by the two exact comparisons V < e^{−k/b} and V >= e^{−(k+1)/b}.

*Discrete Gaussian* (CKS20 Algorithm 3): propose Y from the discrete Laplace with integer scale
t = ⌊σ⌋ + 1 and accept with probability exp(−(|Y| − σ²/t)²/(2σ²)); then
P[Y = y | accept] ∝ e^{−|y|/t − (|y| − σ²/t)²/(2σ²)} ∝ e^{−y²/(2σ²)}.

How a comparison "V < exp(−x)" is decided exactly
--------------------------------------------------
V = (U + W)/2^53 where U is the top 53 bits of a random word and W ∈ [0, 1) the not-yet-drawn rest.
We compute floats p_lo <= exp(−x) <= p_hi that are *proved* bounds (below) and decide by exact
integer comparisons (U < 2^53, so U and U + 1 are exact in float64):

    U + 1 <= 2^53 p_lo  ⇒  V < exp(−x)          U >= 2^53 p_hi  ⇒  V >= exp(−x)

Otherwise (probability ≈ 2^-45 per comparison) the element goes to the exact slow path
(:class:`~sparsedp.noise.exact.LazyUniform`), which keeps U as V's prefix, draws more bits and
compares against big-integer bounds of exp(−x) until decided. So every outcome has exactly the
probability of the ideal algorithm; floats only speed up the decisions that are already certain.

Why the float bounds are proved. Only IEEE-754 basic operations (+, −, ×, correctly rounded, unit
roundoff u = 2^-53) and conversions of exact rationals to the nearest float are used; ``np.exp`` and
``np.log`` are never trusted (log only produces the guess of k, which is verified).

1. The argument x is computed in float as x_f with a proved error |x_f − x| <= e (the two formulas
   below); we use E = 2^-47·x_f resp. 2^-45·κ w², more than 4 e (the rounding of E itself is
   absorbed by that factor 4). Where E would exceed 2^-10 (only for proposals beyond 2^18 σ) the
   decision is left to the exact path.
   - Laplace: x = k λ, λ = 1/b; λ_f = fl(λ) so |x_f − x| <= 2.01 u x.
   - Gaussian: x = κ (y − c)², c = σ²/t, κ = 1/(2σ²), w = y + c: with c_f, κ_f correctly rounded,
     z_f = fl(y − c_f), x_f = fl(fl(z_f²) κ_f): |x_f − x| <= 7.5 u κ w².
2. With x_c = min(x_f, 40): exp(−x_c) = exp(−j/64) · exp(−r), j = ⌊64 x_c⌋, r = x_c − j/64 ∈ [0, 1/64)
   computed exactly (Sterbenz).
   exp(−j/64) ∈ [T_lo[j], T_hi[j]]: a table for j <= 64·40 computed once in exact big-integer
   interval arithmetic and rounded outward to floats. exp(−r) ∈ [S_5(r), S_5(r) + r^6/6!], S_5 the
   Taylor partial sum (alternating series), evaluated in Horner form with absolute error < 15u and
   widened by 2^-48 below and 2^-44 above. The argument error enters as e^{−E} >= 1 − E and
   e^{E} <= 1 + 2E. Each product of factors is rounded (<= 5 roundings, 5u < 2^-50) and then
   scaled by (1 ∓ 2^-49), which dominates them. For x_f >= 40, p_lo = 0 (and p_hi uses x_c = 40).

Ranges: σ² and the Laplace scale must lie in [1e-9, 2^80] resp. [1e-9, 2^40] so that every integer
stays below 2^53 (no int64 or float64 overflow; |X| <= ~2^47).
"""

from __future__ import annotations

import math
import threading
from fractions import Fraction

import numpy as np

from .. import _validate as v
from ..errors import InvalidParameterError, InvalidTypeError
from .exact import LazyUniform, exp_neg_bounds, geometric_exp_neg
from .source import SecureRandom, default_source

__all__ = ["sample_discrete_gaussian", "sample_discrete_laplace", "sample_two_sided_geometric"]

_BITS = 53
_TWO53 = float(2**53)
_X_MAX = 40                    # exp(-40) < 2^-57: beyond, only U = 0 can be ambiguous
_TABLE_STEP = 64               # table of exp(-j/64)
_CHUNK = 1 << 16               # proposals per batch (cache-sized arrays)
_LAPLACE_RANGE = (Fraction(1, 10**9), Fraction(2**40))
_SIGMA2_RANGE = (Fraction(1, 10**9), Fraction(2**80))

_table: tuple[np.ndarray, np.ndarray] | None = None
_table_lock = threading.Lock()


def _exp_table() -> tuple[np.ndarray, np.ndarray]:
    """Outward-rounded float bounds of exp(−j/64), j = 0 … 64·40 (exact integer arithmetic)."""
    global _table
    if _table is None:
        with _table_lock:
            if _table is None:
                p = 200
                step_lo, step_hi = exp_neg_bounds(Fraction(1, _TABLE_STEP), p)
                n = _X_MAX * _TABLE_STEP + 1
                lo = np.empty(n)
                hi = np.empty(n)
                a = b = 1 << p
                for j in range(n):
                    lo[j] = _float_down(a, p)
                    hi[j] = _float_up(b, p)
                    a = (a * step_lo) >> p
                    b = -((-b * step_hi) >> p)
                _table = (lo, hi)
    return _table


def _float_down(num: int, p: int) -> float:
    """The largest float <= num / 2^p (exact integer comparison)."""
    f = num / (1 << p)  # correctly rounded
    n, d = f.as_integer_ratio()
    if n << p > num * d:
        f = math.nextafter(f, 0.0)
    return f


def _float_up(num: int, p: int) -> float:
    """The smallest float >= num / 2^p."""
    f = num / (1 << p)
    n, d = f.as_integer_ratio()
    if n << p < num * d:
        f = math.nextafter(f, math.inf)
    return f


def _taylor5(r: np.ndarray) -> np.ndarray:
    """S_5(r) = sum_{k<=5} (−r)^k/k! in Horner form 1 − r(1 − r/2(1 − r/3(1 − r/4(1 − r/5)))).

    For 0 <= r < 1/64 every intermediate lies in [0, 1], so the float result is within 15u of S_5.
    """
    acc = 1.0 - r / 5.0
    for k in (4.0, 3.0, 2.0, 1.0):
        acc = 1.0 - (r / k) * acc
    return acc


def _decide(u: np.ndarray, x_f: np.ndarray, err: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For V = (u + W)/2^53 and a true x >= 0 with |x − x_f| <= err:
    returns (surely V < e^{−x}, surely V >= e^{−x}); both False means "ask the exact path".

    Bounds: e^{−x_c} = e^{−j/64} e^{−r} with x_c = min(x_f, 40), j = ⌊64 x_c⌋, r = x_c − j/64 (exact);
    S_5(r) <= e^{−r} <= S_5(r) + r^6/6! <= S_5(r) + 2^-45.4; e^{−err} >= 1 − err and e^{err} <= 1 + 2 err.
    The factors (1 ∓ 2^-49), applied together with the exact scaling by 2^53 as the exact floats
    2^53 ∓ 16, dominate the <= 5 roundings (5u < 2^-50) of each product.
    """
    t_lo, t_hi = _exp_table()
    xc = np.minimum(x_f, float(_X_MAX))
    ji = (xc * _TABLE_STEP).astype(np.intp)      # = floor, xc >= 0
    r = xc - ji / _TABLE_STEP                     # exact (Sterbenz), in [0, 1/64)
    s5 = _taylor5(r)
    # 2^53 (1 ∓ 2^-49) = 2^53 ∓ 16 are exact floats: the slack factor and the scaling in one product.
    lo = t_lo[ji] * (s5 - 2.0**-48) * (1.0 - err) * (_TWO53 - 16.0)
    lo[x_f >= _X_MAX] = 0.0                       # e^{-x} >= 0 is all we claim there
    hi = t_hi[ji] * (s5 + 2.0**-44) * (1.0 + 2.0 * err) * (_TWO53 + 16.0)
    loose = err > 2.0**-10                         # the bounds above need err <= 2^-10: no claim
    if loose.any():
        lo[loose] = 0.0
        hi[loose] = np.inf
    return (u + 1.0) <= lo, u >= hi


def _laplace_arg(k: np.ndarray, lam_f: float) -> tuple[np.ndarray, np.ndarray]:
    """x_f ≈ x = k λ and a proved bound of |x_f − x| (times 4): λ_f = fl(λ), so |x_f − x| <= 2.01 u x."""
    x_f = k * lam_f
    return x_f, x_f * 2.0**-47


def _gauss_arg(ay: np.ndarray, c_f: float, kappa_f: float) -> tuple[np.ndarray, np.ndarray]:
    """x_f ≈ x = κ (y − c)² and a proved bound of |x_f − x| (times 4): <= 7.5 u κ (y + c)²."""
    z = ay - c_f
    w = ay + c_f
    return (z * z) * kappa_f, (w * w) * kappa_f * 2.0**-45


def _uniform53(rng, n: int) -> tuple[np.ndarray, np.ndarray]:
    """n words: their top 53 bits as exact float64 integers, and their lowest bit (a fair coin)."""
    w = rng.uint64(n)
    return (w >> np.uint64(64 - _BITS)).astype(np.float64), (w & np.uint64(1)).astype(bool)


def _dlap_batch(n: int, lam: Fraction, rng) -> np.ndarray:
    """About n draws of the discrete Laplace with scale 1/λ (rejected (−, 0) pairs removed)."""
    lam_f = float(lam)
    u, neg = _uniform53(rng, n)
    m = np.full(n, np.nan)
    with np.errstate(divide="ignore"):
        k_guess = np.floor(-np.log((u + 0.5) / _TWO53) / lam_f)
    k_guess = np.clip(k_guess, 0.0, 2.0**52)
    pending = np.arange(n)
    for _ in range(4):
        if pending.size == 0:
            break
        kp, up = k_guess[pending], u[pending]
        lt1, ge1 = _decide(up, *_laplace_arg(kp, lam_f))
        lt1 |= kp == 0.0                     # V < e^0 = 1 always
        lt2, ge2 = _decide(up, *_laplace_arg(kp + 1.0, lam_f))
        done = lt1 & ge2
        m[pending[done]] = kp[done]
        down = ge1
        upw = lt2 & ~ge1
        k_guess[pending[down]] -= 1.0
        k_guess[pending[upw]] += 1.0
        keep = down | upw
        # ambiguous (neither decided nor moved): exact slow path now
        for i in pending[~done & ~keep]:
            m[i] = geometric_exp_neg(LazyUniform(int(u[i]), _BITS, rng), lam)
        pending = pending[keep]
    for i in pending:  # guess still off after 4 corrections (does not happen in practice): exact
        m[i] = geometric_exp_neg(LazyUniform(int(u[i]), _BITS, rng), lam)
    keep = ~(neg & (m == 0.0))
    m = m[keep]
    return np.where(neg[keep], -m, m)


def _check_size(size) -> int:
    return v.integer("size", size, lo=0)


def _in_range(name: str, x: Fraction, rng_: tuple[Fraction, Fraction]) -> Fraction:
    if not rng_[0] <= x <= rng_[1]:
        try:
            got = f"{float(x):g}"
        except OverflowError:  # e.g. the decimal string "1e400"
            got = "a number beyond the float range"
        raise InvalidParameterError(
            f"{name} must be between {float(rng_[0]):g} and {float(rng_[1]):g} for the exact sampler, got {got}")
    return x


def checked_source(rng: SecureRandom | None) -> SecureRandom:
    """``rng``, or the secure default source for ``None``; anything without ``uint64`` is refused."""
    if rng is None:
        return default_source()
    if not callable(getattr(rng, "uint64", None)):
        raise InvalidTypeError(f"rng must be a sparsedp.noise source (e.g. SecureRandom) or None, got "
                               f"{type(rng).__name__}")
    return rng


def sample_discrete_laplace(scale, size: int, rng: SecureRandom | None = None) -> np.ndarray:
    """``size`` iid draws, P[X = x] ∝ exp(−|x|/scale), as an int64 array (exact; module docstring).

    ``scale`` is an exact rational (int, Fraction, decimal string, or a float taken at its exact
    binary value). ``rng=None`` uses the secure default source. This is also the two-sided geometric
    distribution with α = exp(−1/scale) (:func:`sample_two_sided_geometric`).
    """
    b = _in_range("scale", v.rational("scale", scale), _LAPLACE_RANGE)
    n = _check_size(size)
    rng = checked_source(rng)
    lam = 1 / b
    out = np.empty(n, dtype=np.int64)
    filled = 0
    while filled < n:
        need = n - filled
        batch = _dlap_batch(min(_CHUNK, need + need // 8 + 16), lam, rng)[:need]
        out[filled:filled + batch.size] = batch
        filled += batch.size
    return out


def sample_two_sided_geometric(scale, size: int, rng: SecureRandom | None = None) -> np.ndarray:
    """Alias of :func:`sample_discrete_laplace`: the two-sided geometric law P[X = x] ∝ α^{|x|}
    (Ghosh–Roughgarden–Sundararajan 2009) is the discrete Laplace with α = exp(−1/scale), so it is
    parameterised by the same rational ``scale``. (The *clamped* geometric of Balcer–Vadhan lives in
    :mod:`sparsedp.noise.clamped_geometric`.)"""
    return sample_discrete_laplace(scale, size, rng)


def sample_discrete_gaussian(sigma2, size: int, rng: SecureRandom | None = None) -> np.ndarray:
    """``size`` iid draws of N_Z(0, σ²), P[X = x] ∝ exp(−x²/(2σ²)), as an int64 array (exact).

    ``sigma2`` (σ², not σ) is an exact rational (int, Fraction, decimal string, or a float taken at its
    exact binary value). ``rng=None`` uses the secure default source. CKS20 Algorithm 3, batched.
    """
    s2 = _in_range("sigma2", v.rational("sigma2", sigma2), _SIGMA2_RANGE)
    n = _check_size(size)
    rng = checked_source(rng)
    t = math.isqrt(s2.numerator // s2.denominator) + 1     # floor(sigma) + 1
    lam = Fraction(1, t)
    c = s2 / t
    c_f = float(c)
    kappa = 1 / (2 * s2)
    kappa_f = float(kappa)
    out = np.empty(n, dtype=np.int64)
    filled = 0
    while filled < n:
        need = n - filled
        y = _dlap_batch(min(_CHUNK, need + need // 2 + 16), lam, rng)
        ay = np.abs(y)
        u, _ = _uniform53(rng, y.size)
        acc, rej = _decide(u, *_gauss_arg(ay, c_f, kappa_f))
        for i in np.flatnonzero(~acc & ~rej):   # exact slow path (probability ~2^-45 each)
            x = (Fraction(int(ay[i])) - c) ** 2 * kappa
            acc[i] = LazyUniform(int(u[i]), _BITS, rng).below_exp_neg(x)
        y = y[acc][:need]
        out[filled:filled + y.size] = y
        filled += y.size
    return out
