"""Privacy accounting of the sparse histograms with the integer noise actually sampled.

The secure mechanisms add *discrete* noise to integer counts: the discrete Gaussian ``N_Z(0, s)``
(GSHM, dense correlated Gaussian) or the discrete Laplace / two-sided geometric distribution (stability
histogram). The continuous analyses (Karrer et al., Karrer et al. (2022) Thm 5.4;
Balle–Wang) do not transfer verbatim (Karrer et al. (2022) §8 item 5), so this module accounts the discrete noise
directly. The argument is written out in ``docs/proofs/discrete-histograms.md``; in short:

1. **Karrer's decomposition holds for any noise law** (Karrer et al. (2022) §4.1–4.6, Lemmas 5.1–5.3, Thm 5.4).
   Its proof only uses that rows are independent, that rows with count below the pre-threshold are never
   released, and that thresholding is post-processing. With ``p = P[a row at the pre-threshold is
   released]`` and ``b = 1 - p``, ``β(a) = b^a``::

       δ(ε) = max( T1, max_{a=0..l0-1} T2(a), max_{a=0..l0-1} T3(a) )
       T1    = 1 - b^{l0}
       T2(a) = 1 - β(a) + β(a) · H(l0 - a, ε - a ln b)
       T3(a) = H(l0 - a, ε + a ln b)

   where ``H(j, ε)`` is the hockey-stick divergence ``H_{e^ε}`` between ``j`` independent noisy
   coordinates shifted by one and unshifted (symmetric for both laws here, so one function serves both
   directions). This is the exact (tight) profile, as in Karrer et al. Thm 5.4, with ``Φ(x)`` replaced by
   the exact discrete release probability and ``f(μ, ε)`` by the exact discrete ``H``.

2. **The release event is ``count + Z >= pre_threshold + margin``** with an integer ``margin``, so
   ``p = P[Z >= margin]`` exactly (``dgauss_sf`` / ``dlaplace_sf``). The mechanisms compare with ``>=``.

3. **Discrete Gaussian H.** For ``j`` coordinates the privacy loss is ``L = (2 S + j) / (2 s)`` with
   ``S`` the sum of ``j`` i.i.d. ``N_Z(0, s)``, so ``H(j, ε) = P[S >= sε - j/2] - e^ε P[S >= sε + j/2]``.
   The law of ``S`` is within a pointwise ratio ``R_j`` of ``N_Z(0, j s)`` (Poisson summation, proof
   doc §3; the same fact as Canonne–Kamath–Steinke 2020's bound on sums of discrete Gaussians), with
   ``log R_j <= (j - 1) log((1 + ω)/(1 - ω))``, ``ω = 2 Σ_{k>=1} exp(-π² s k²)`` (< 1e-16 for s >= 4).
   We use the upper bound ``R_j P[W >= sε - j/2] - e^ε P[W >= sε + j/2] / R_j``, ``W ~ N_Z(0, j s)``.

4. **Discrete Laplace H.** With scale ``t`` each coordinate's privacy loss is ``±1/t``: ``L = (2K - j)/t``
   with ``K ~ Bin(j, 1/(1+q))`` under the shifted law and ``Bin(j, q/(1+q))`` under the other,
   ``q = e^{-1/t}``. ``H`` is a binomial tail difference, computed exactly.

5. For large ``l0`` the maxima over ``a`` are bounded blockwise (``H`` is non-decreasing in ``j`` and
   non-increasing in ε, ``β`` is decreasing in ``a``), which keeps the bound rigorous with ~700
   evaluations; below 400 every ``a`` is evaluated.

All rounding is conservative: the returned δ is an upper bound of the true δ of the noise sampled.
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import lru_cache
from typing import TYPE_CHECKING, Callable, Iterable, Literal, overload

import numpy as np
import numpy.typing as npt
from ._special import special

from .. import _validate as v
from ..errors import InfeasibleError, InvalidParameterError
from .calibration import Calibration, Comparison
from .laws import DiscreteCorrelatedGaussian, DiscreteDenseCorrelatedGaussian, DiscreteGaussian, DiscreteLaplace
from .discrete import _dgauss_logsf_float, dgauss_sf, dgauss_variance, dlaplace_sf, dlaplace_variance
from .names import CORRELATED_GAUSSIAN, GSHM, LAPLACE, TOPK_CSH
from ._invert import smallest_ok
from ._types import FloatArray, IntArray, RealOrArray, Scale
from ..core.lazy import lazy_module

# the calibrators' search starts and the top-k CSH parts: on first use (issue 31; a default release's charge
# evaluates the GSHM/Laplace δ only)
if TYPE_CHECKING:
    from . import csh as _csh, gaussian as _gaussian, zcdp as _zcdp
else:
    _csh, _gaussian = lazy_module(f"{__package__}.csh"), lazy_module(f"{__package__}.gaussian")
    _zcdp = lazy_module(f"{__package__}.zcdp")

__all__ = [
    "dgauss_shift_hockey_stick", "dlaplace_shift_hockey_stick",
    "gshm_discrete_delta", "laplace_discrete_delta", "correlated_discrete_delta",
    "calibrate_gshm_discrete", "calibrate_laplace_discrete", "calibrate_correlated_discrete",
    "rational_up", "best_integer_c", "topk_debias_discrete_delta_parts", "calibrate_topk_debias_discrete",
]

# Relative accuracy of dgauss_logsf (module docstring of accounting.discrete: ~1e-13); folded into R.
_SF_REL_ERR = 1e-12
_EXACT_BELOW = 400       # evaluate every a when l0 is below this
_GRID_POINTS = 300       # otherwise about 2 x this many blocks (plus 128 single points)


def rational_up(x: float, denominator_bits: int = 20) -> Fraction:
    """Smallest multiple of ``2^-denominator_bits`` that is >= x (a short exact rational for samplers)."""
    scale = 1 << denominator_bits
    f = Fraction(x)
    n = math.ceil(f * scale)
    return Fraction(n, scale)


# ------------------------------------------------------------------ discrete Gaussian: H(j, ε)


@lru_cache(maxsize=1 << 12)  # a pure function of vv, asked for the same vv many times by the searches
def _omega(vv: float) -> float:
    """ω(v) = 2 Σ_{k>=1} exp(-2π² v k²): Poisson-summation error of a discrete Gaussian sum of scale v."""
    k = np.arange(1, 6, dtype=float)
    return float(2.0 * np.sum(np.exp(-2.0 * math.pi**2 * vv * k * k)))


def _log_ratio_step(step_scales: Iterable[float]) -> float:
    """Σ log((1+ω)/(1-ω)) over the convolution steps with completed-square scales ``step_scales``."""
    total = 0.0
    for s3 in step_scales:
        w = _omega(s3)
        if w >= 0.5:
            raise InfeasibleError(f"discrete Gaussian scale too small for the sum bound (step scale {s3:g}); "
                                  "use sigma^2 >= 1")
        total += math.log1p(w) - math.log1p(-w)
    return total


def _log_ratio_iid(j: int, s: float) -> float:
    """log R_j for the sum of j i.i.d. N_Z(0, s): steps i = 2..j have scale s (i-1)/i >= s/2."""
    if j <= 1:
        return 0.0
    w = _omega(s / 2.0)
    if w >= 0.5:
        raise InfeasibleError(f"discrete Gaussian scale s={s:g} too small for the sum bound; use s >= 1")
    return (j - 1) * (math.log1p(w) - math.log1p(-w))


def _dgauss_hs_from_law(eps: float, s: float, shift2: float, var_sum: float, log_r: float) -> float:
    """Upper bound of H_{e^ε} for privacy loss L = (2T ± shift2)/(2s), T within ratio e^{log_r} of N_Z(0, var_sum)."""
    log_r = log_r + _SF_REL_ERR
    l1 = _dgauss_logsf_float(s * eps - shift2 / 2.0, float(var_sum))
    l2 = _dgauss_logsf_float(s * eps + shift2 / 2.0, float(var_sum))
    a = l1 + log_r
    b = eps + l2 - log_r
    if a == -math.inf:
        val = 0.0
    elif b >= a:
        val = 0.0
    else:
        val = math.exp(a) * (-math.expm1(b - a))
    floor = max(0.0, -math.expm1(eps)) if eps < 0 else 0.0
    return min(1.0, max(val, floor))


def dgauss_shift_hockey_stick(j: int, epsilon: float, sigma2: Scale) -> float:
    """Upper bound (tight to ~1e-12 relative for s >= 4) of H_{e^ε}(N_Z(1, s)^j || N_Z(0, s)^j).

    Any real ε. ``j = 0`` gives ``max(0, 1 - e^ε)``. See the module docstring, item 3, and
    ``docs/proofs/discrete-histograms.md`` §3. The divergence is symmetric in its two arguments
    (the map z -> 1 - z swaps the two laws), so this also bounds the reverse direction.
    """
    j = int(j)
    eps = float(epsilon)
    if j <= 0:
        return max(0.0, -math.expm1(eps))
    s = float(sigma2)
    return _dgauss_hs_from_law(eps, s, float(j), j * s, _log_ratio_iid(j, s))


# ------------------------------------------------------------------ discrete Laplace: H(j, ε)


def binom_logsf(k: npt.ArrayLike, n: npt.ArrayLike, p: float) -> FloatArray:
    """``log P[K > k]`` for ``K ~ Bin(n, p)`` (integer-valued float arrays ``k >= -1``, ``n >= 0``): 0 for
    ``k < 0``, ``-inf`` for ``k >= n``, else ``log I_p(k + 1, n − k)`` (the regularized incomplete beta
    function, ``scipy.special.betainc``; the identity ``P[K >= k+1] = I_p(k+1, n−k)`` is standard, e.g.
    Abramowitz–Stegun 26.5.24). It equals ``scipy.stats.binom.logsf`` bit for bit on SciPy's Boost-based
    implementations (tested), without importing ``scipy.stats`` (about 0.4 s of CPU at start-up). Where every
    term needed is ``I_p(1, 1) = p`` (one coordinate, as at ``l0 = 1``) or none is, ``scipy.special`` is not
    imported either: scipy returns ``p`` itself for ``I_p(1, 1)`` (tested)."""
    k = np.asarray(k, dtype=float)
    n = np.asarray(n, dtype=float)
    k, n = np.broadcast_arrays(k, n)
    inside = (k >= 0) & (k < n)
    a, b = np.where(inside, k + 1.0, 1.0), np.where(inside, n - k, 1.0)
    with np.errstate(divide="ignore"):
        sf = special.betainc(a, b, p) if ((a != 1.0) | (b != 1.0)).any() else np.full(a.shape, float(p))
        out: FloatArray = np.where(k < 0, 0.0, np.where(inside, np.log(sf), -np.inf))
        return out


@overload
def dlaplace_shift_hockey_stick(j: float, epsilon: float, scale: Scale) -> float: ...
@overload
def dlaplace_shift_hockey_stick(j: FloatArray, epsilon: RealOrArray, scale: Scale) -> FloatArray: ...
@overload
def dlaplace_shift_hockey_stick(j: float, epsilon: FloatArray, scale: Scale) -> FloatArray: ...
def dlaplace_shift_hockey_stick(j: RealOrArray, epsilon: RealOrArray, scale: Scale) -> RealOrArray:
    """Exact H_{e^ε} between j discrete-Laplace(scale t) coordinates shifted by one and unshifted.

    Privacy loss per coordinate is +1/t when the output is >= the shifted centre, −1/t otherwise, so
    ``L = (2K − j)/t`` with ``K ~ Bin(j, 1/(1+q))`` under the shifted law and ``Bin(j, q/(1+q))`` under
    the other (q = e^{−1/t}); ``H = P[K >= k0] − e^ε P[K' >= k0]``, ``k0 = ceil((εt + j)/2)``.
    Vectorised over ``j`` and ``epsilon``. Symmetric in the two laws (z -> 1 − z).
    """
    t = float(scale)
    jj = np.asarray(j, dtype=float)
    ee = np.asarray(epsilon, dtype=float)
    jj, ee = np.broadcast_arrays(jj, ee)
    q = math.exp(-1.0 / t)
    p_hi = 1.0 / (1.0 + q)
    p_lo = q / (1.0 + q)
    k0 = np.ceil((ee * t + jj) / 2.0 - 1e-12)  # L >= ε  <=>  K >= (εt + j)/2; guard exact ties (conservative)
    k0 = np.maximum(k0, 0.0)
    with np.errstate(divide="ignore"):
        l1 = binom_logsf(k0 - 1, jj, p_hi)
        l2 = binom_logsf(k0 - 1, jj, p_lo)
    b = ee + l2
    with np.errstate(invalid="ignore", over="ignore"):
        val = np.where(np.isneginf(l1) | (b >= l1), 0.0, np.exp(l1) * -np.expm1(np.minimum(b - l1, 0.0)))
    val = np.where(jj <= 0, np.maximum(0.0, -np.expm1(ee)), val)
    floor = np.maximum(0.0, -np.expm1(ee))
    val = np.minimum(1.0, np.maximum(val, floor))
    # binom.logsf is accurate to ~1e-14 relative; add a matching absolute slack (conservative).
    val = np.minimum(1.0, np.where(val > 0, val * (1 + 1e-11), val))
    return float(val) if val.ndim == 0 else val


# ------------------------------------------------------------------ Karrer's decomposition


def _blocks(l0: int) -> tuple[IntArray, IntArray]:
    """Blocks [lo, hi] of a = a_= in 0..l0-1 covering every value (single points when l0 is small).

    Every a <= 64 and every a_+ = l0 - a <= 64 is its own block; in between the block ends are geometric
    both in a (fine where H is largest, near a = 0) and in a_+ (fine near a = l0), so each block spans at
    most ~1.5% of either coordinate.
    """
    if l0 <= _EXACT_BELOW:
        a = np.arange(l0)
        return a, a
    pts = set(range(0, 65)) | set(range(l0 - 64, l0))
    pts |= set(np.round(np.geomspace(64, l0, _GRID_POINTS)).astype(int).tolist())
    pts |= set((l0 - np.round(np.geomspace(64, l0, _GRID_POINTS))).astype(int).tolist())
    lo = np.array(sorted(x for x in pts if 0 <= x <= l0 - 1))
    hi = np.append(lo[1:] - 1, l0 - 1)
    return lo, hi


def _karrer_max(l0: int, log_b: float, eps: float, hs: Callable[[int, float], float],
                blocks: tuple[IntArray, IntArray] | None = None) -> tuple[float, dict[str, float]]:
    """max(T1, T2, T3) of the module docstring for a per-coordinate divergence function ``hs(j, ε)``
    (``blocks``: ``(lo, hi)`` arrays covering a = 0..l0−1, default :func:`_blocks`; any cover is an upper bound,
    ``docs/proofs/discrete-histograms.md`` §5)."""
    t1 = -math.expm1(l0 * log_b)
    lo, hi = _blocks(l0) if blocks is None else blocks
    best2, arg2, best3, arg3 = 0.0, 0, 0.0, 0
    for a_lo, a_hi in zip(lo.tolist(), hi.tolist()):
        j = l0 - a_lo
        lbeta_hi = a_hi * log_b
        h2 = hs(j, eps - a_lo * log_b)
        t2 = -math.expm1(lbeta_hi) + math.exp(lbeta_hi) * h2
        h3 = hs(j, eps + a_hi * log_b)
        if t2 > best2:
            best2, arg2 = t2, a_lo
        if h3 > best3:
            best3, arg3 = h3, a_lo
    total = max(t1, best2, best3)
    return total, {"infinite": t1, "forward": best2, "reverse": best3,
                   "argmax_forward_a_eq": arg2, "argmax_reverse_a_eq": arg3}


@overload
def gshm_discrete_delta(epsilon: float, sigma2: Scale, margin: int, l0: int, *,
                        parts: Literal[False] = False) -> float: ...
@overload
def gshm_discrete_delta(epsilon: float, sigma2: Scale, margin: int, l0: int, *,
                        parts: Literal[True]) -> tuple[float, dict[str, float]]: ...
def gshm_discrete_delta(epsilon: float, sigma2: Scale, margin: int, l0: int, *,
                        parts: bool = False) -> float | tuple[float, dict[str, float]]:
    """δ(ε) of GSHM with discrete Gaussian noise ``N_Z(0, sigma2)`` and integer ``margin``.

    The mechanism (``sparsedp.mechanisms.gshm``) releases a key iff ``count >= pre_threshold`` and
    ``count + Z >= pre_threshold + margin``. Discrete analogue of Karrer et al. Thm 5.4 / Eq. 5.8
    (Karrer et al. (2022) §4.6): the module docstring gives the terms, and
    ``docs/proofs/discrete-histograms.md`` the proof. Upper bound, tight to ~1e-12 relative for
    sigma2 >= 4. With ``parts=True`` returns ``(delta, parts_dict)``.
    """
    eps = v.epsilon_any(epsilon)
    s = float(v.rational("sigma2", sigma2))
    if s < 1:
        raise InvalidParameterError(f"sigma2 must be >= 1 for the discrete GSHM accountant, got {sigma2!r}")
    m = v.integer("margin", margin, lo=0)
    k = v.integer("l0", l0, lo=1)
    p = dgauss_sf(m, s)
    log_b = math.log1p(-p)
    delta, info = _karrer_max(k, log_b, eps, lambda j, e: dgauss_shift_hockey_stick(j, e, s))
    info["release_probability_at_pre_threshold"] = p
    return (delta, info) if parts else delta


@overload
def laplace_discrete_delta(epsilon: float, scale: Scale, margin: int, l0: int, *,
                           parts: Literal[False] = False) -> float: ...
@overload
def laplace_discrete_delta(epsilon: float, scale: Scale, margin: int, l0: int, *,
                           parts: Literal[True]) -> tuple[float, dict[str, float]]: ...
def laplace_discrete_delta(epsilon: float, scale: Scale, margin: int, l0: int, *,
                           parts: bool = False) -> float | tuple[float, dict[str, float]]:
    """δ(ε) of the geometric (discrete Laplace) stability histogram with integer ``margin``.

    Releases a key iff ``count >= pre_threshold`` and ``count + Z >= pre_threshold + margin``,
    ``Z ~`` discrete Laplace(scale). Same decomposition as :func:`gshm_discrete_delta` (Karrer et al.
    Thm 5.4 structure, Karrer et al. (2022) §4.1–4.6) with the exact binomial divergence of
    :func:`dlaplace_shift_hockey_stick`; exact up to ~1e-11 relative rounding (upward).
    """
    eps = v.epsilon_any(epsilon)
    t = float(v.rational("scale", scale))
    m = v.integer("margin", margin, lo=0)
    k = v.integer("l0", l0, lo=1)
    p = dlaplace_sf(m, t)
    log_b = math.log1p(-p)
    if k <= 200_000:  # exact over every a, vectorised
        a = np.arange(k, dtype=float)
        j = k - a
        h2 = dlaplace_shift_hockey_stick(j, eps - a * log_b, t)
        t2 = -np.expm1(a * log_b) + np.exp(a * log_b) * h2
        t3 = dlaplace_shift_hockey_stick(j, eps + a * log_b, t)
        t1 = -math.expm1(k * log_b)
        info = {"infinite": t1, "forward": float(np.max(t2)), "reverse": float(np.max(t3)),
                "argmax_forward_a_eq": int(np.argmax(t2)), "argmax_reverse_a_eq": int(np.argmax(t3))}
        delta = max(t1, info["forward"], info["reverse"])
    else:
        delta, info = _karrer_max(k, log_b, eps, lambda jj, e: float(dlaplace_shift_hockey_stick(jj, e, t)))
    info["release_probability_at_pre_threshold"] = p
    return (delta, info) if parts else delta


# ------------------------------------------------------------------ dense correlated Gaussian (Lebeda (2024))


def correlated_discrete_delta(epsilon: float, sigma2: Scale, d: int, c: int) -> float:
    """δ(ε) of Lebeda (2024)'s embedding form (Lemma 3.3) with i.i.d. ``N_Z(0, sigma2)`` on the d+1 coordinates.

    ``g = (2f − n·1, c·n)`` with integer ``c``; a unit changes g by ``v = (±1,…,±1, c)``, so the privacy
    loss is ``(2<v, Z> ± |v|²)/(2 s)`` and ``<v, Z>`` has the law of ``Z_1+…+Z_d + c Z_{d+1}``
    (Z symmetric). That sum is within a pointwise ratio R of ``N_Z(0, s(d + c²))`` (proof doc §3, the
    same convolution step with multiplier c), giving the same H bound as for GSHM with ``j = |v|² = d + c²``.
    Lebeda (2024) S2.3/S4.4 (discrete variant, [DERIVED] there); this is the exact profile, not the zCDP bound.
    """
    eps = v.epsilon_any(epsilon)
    s = float(v.rational("sigma2", sigma2))
    dd = v.integer("d", d, lo=1)
    cc = v.integer("c", c, lo=1)
    # Steps: coordinates 2..d (scale s(i-1)/i >= s/2), then the c-coordinate: A = d s, scale A s/(A + c² s).
    log_r = _log_ratio_iid(dd, s) + _log_ratio_step([dd * s / (dd + cc * cc)])
    shift2 = float(dd + cc * cc)
    return _dgauss_hs_from_law(eps, s, shift2, shift2 * s, log_r)


# ------------------------------------------------------------------ calibration


def _smallest_margin(delta_of_margin: Callable[[int], float], target: float, start: int) -> int:
    """Smallest integer margin >= 1 with delta_of_margin(m) <= target (non-increasing in m)."""
    lo = max(1, start)
    if delta_of_margin(lo) <= target:
        # walk down in case the start overshoots
        hi = lo
        lo = 0
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if mid >= 1 and delta_of_margin(mid) <= target:
                hi = mid
            else:
                lo = mid
        return hi
    hi = lo * 2 + 1
    while delta_of_margin(hi) > target:
        lo = hi
        hi = hi * 2 + 1
        if hi > 1 << 62:
            raise InfeasibleError("no threshold satisfies the privacy constraint")
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if delta_of_margin(mid) <= target:
            hi = mid
        else:
            lo = mid
    return hi


def _t1_margin(sf: Callable[[int], float], l0: int, delta: float) -> int:
    """Smallest integer m with 1 − (1 − sf(m))^{l0} <= δ (the T1 constraint alone)."""
    q = -math.expm1(math.log1p(-delta) / l0)  # per-row leak budget
    lo, hi = 0, 1
    while sf(hi) > q:
        lo, hi = hi, hi * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if sf(mid) <= q:
            hi = mid
        else:
            lo = mid
    return hi


def calibrate_gshm_discrete(epsilon: float, delta: float, l0: int) -> Calibration:
    """Discrete-Gaussian GSHM at (ε, δ): smallest sampled scale (rational) and smallest integer margin.

    The scale ``s`` (parameter of ``N_Z(0, s)``) starts at the continuous optimum of Karrer et al. (2022) §5.3(2)
    (σ_G with ``f(√l0/σ, ε) = δ``), rounded up to a short rational and raised by 0.01% steps until the
    discrete Gaussian part ``H(l0, ε) <= δ``; the margin is then the smallest integer with
    :func:`gshm_discrete_delta` ``<= δ``. ``noise`` is :class:`~.laws.DiscreteGaussian` with the exact
    ``sigma2`` (a ``Fraction``) the sampler must use; the release rule is ``>=`` (``comparison``).
    """
    eps = v.epsilon(epsilon)
    dlt = v.delta(delta)
    k = v.integer("l0", l0, lo=1)
    sigma_c = _gaussian.gaussian_sigma(eps, dlt, sensitivity=math.sqrt(k))
    s = rational_up(max(1.0, sigma_c * sigma_c))
    for _ in range(2000):
        if dgauss_shift_hockey_stick(k, eps, s) <= dlt * (1 - 1e-9):
            break
        s = rational_up(float(s) * 1.0001)
    else:  # pragma: no cover - the continuous σ_G plus 20% always suffices
        raise InfeasibleError(f"no discrete Gaussian scale found for epsilon={eps}, delta={dlt}, l0={k}")
    sf = lambda m: dgauss_sf(m, s)  # noqa: E731
    start = _t1_margin(sf, k, dlt)
    margin = _smallest_margin(lambda m: gshm_discrete_delta(eps, s, m, k), dlt, start)
    achieved, info = gshm_discrete_delta(eps, s, margin, k, parts=True)
    return Calibration(
        mechanism=GSHM, analysis="discrete-exact", epsilon=eps, delta=dlt,
        sigma=math.sqrt(float(s)), tau=float(margin), noise_std=math.sqrt(dgauss_variance(s)),
        delta_parts={"infinite": info["infinite"], "forward": info["forward"], "reverse": info["reverse"]},
        delta_achieved=achieved,
        noise=DiscreteGaussian(s), comparison=Comparison.GE, l0=k, mu_o2=0.0,
    )


def calibrate_laplace_discrete(epsilon: float, delta: float, l0: int) -> Calibration:
    """Geometric stability histogram at (ε, δ): scale ``t = l0/ε`` (rounded up), smallest integer margin.

    With ``t >= l0/ε`` the noise part is pure (``H(j, ε) = 0`` for ``j <= l0``), the peers' default
    (Korolova et al. 2009; Wilson et al. 2020); the margin comes from the exact
    :func:`laplace_discrete_delta`, which also charges the reverse-direction term T3 exactly.
    """
    eps = v.epsilon(epsilon)
    dlt = v.delta(delta)
    k = v.integer("l0", l0, lo=1)
    t = rational_up(k / eps)
    while float(t) * eps < k:  # float guard: the rational is exact, the comparison must be too
        t += Fraction(1, 1 << 20)
    sf = lambda m: dlaplace_sf(m, t)  # noqa: E731
    start = _t1_margin(sf, k, dlt)
    margin = _smallest_margin(lambda m: laplace_discrete_delta(eps, t, m, k), dlt, start)
    achieved, info = laplace_discrete_delta(eps, t, margin, k, parts=True)
    return Calibration(
        mechanism=LAPLACE, analysis="discrete-exact", epsilon=eps, delta=dlt,
        sigma=float(t), tau=float(margin), noise_std=math.sqrt(dlaplace_variance(t)),
        delta_parts={"infinite": info["infinite"], "forward": info["forward"], "reverse": info["reverse"]},
        delta_achieved=achieved,
        noise=DiscreteLaplace(t), comparison=Comparison.GE, l0=k,
    )


def best_integer_c(d: int) -> int:
    """Integer C minimising C² + d/C² (Lebeda (2024) S4.4)."""
    r: float = d ** 0.25  # typeshed types a real power as Any (it may be complex)
    cands = {max(1, math.floor(r)), max(1, math.ceil(r))}
    return min(cands, key=lambda c: (c * c + d / (c * c), c))


def calibrate_correlated_discrete(epsilon: float, delta: float, d: int, c: int | None = None) -> Calibration:
    """Smallest rational ``sigma2`` of the discrete embedded correlated Gaussian (Lebeda (2024) S4.4) at (ε, δ).

    Starts from the continuous scale ``σ₁²(d + c²)`` (σ₁ = Balle–Wang σ at sensitivity 1) and raises it by
    0.01% steps until :func:`correlated_discrete_delta` ``<= δ``.
    """
    eps = v.epsilon(epsilon)
    dlt = v.delta(delta)
    dd = v.integer("d", d, lo=1)
    cc = best_integer_c(dd) if c is None else v.integer("c", c, lo=1)
    sig1 = _gaussian.gaussian_sigma(eps, dlt)
    s = rational_up(max(1.0, sig1 * sig1 * (dd + cc * cc)))
    for _ in range(5000):
        if correlated_discrete_delta(eps, s, dd, cc) <= dlt:
            break
        s = rational_up(float(s) * 1.0001)
    else:  # pragma: no cover
        raise InfeasibleError(f"no discrete scale found for epsilon={eps}, delta={dlt}, d={dd}")
    var = dgauss_variance(s)
    per_query = var / 4.0 + var / (4.0 * cc * cc)
    achieved = correlated_discrete_delta(eps, s, dd, cc)
    return Calibration(
        mechanism=CORRELATED_GAUSSIAN, analysis="discrete-exact", epsilon=eps, delta=dlt,
        sigma=math.sqrt(float(s)), tau=0.0, noise_std=math.sqrt(per_query),
        delta_parts={"gaussian": achieved}, delta_achieved=achieved,
        noise=DiscreteDenseCorrelatedGaussian(s, cc), comparison=Comparison.NONE, d=dd,
    )


# ------------------------------------------------------------------ de-biased top-k CSH (discrete)


def topk_debias_discrete_delta_parts(eps: float, sigma: float, tau: float, k: int,
                                     conversion: str) -> dict[str, float]:
    """``{"gaussian", "threshold"}`` δ parts of discrete de-biased top-k CSH (see the calibration below)."""
    s_ind, s_corr = (float(x) for x in _csh.csh_discrete_scales(sigma, k))
    rho = 0.5 * (k / s_ind + 5.0 / s_corr)
    gauss = float(_zcdp.zcdp_to_dp_delta(rho, eps, conversion=conversion))
    thr = _csh.csh_discrete_delta_parts(eps, sigma, tau, k, conversion=conversion)["threshold"]
    return {"gaussian": gauss, "threshold": thr}


def calibrate_topk_debias_discrete(epsilon: float, delta: float, k: int, conversion: str = "cks") -> Calibration:
    """Discrete de-biased top-k CSH (Lebeda & Retschmeier (2024) Alg. 3 + Alg. 4, also releasing t̃ = t + Z_t/2).

    ``Z_t ~ N_Z(0, 4σ²/√k)`` (the shared scale). t moves by at most 1 between neighbours, i.e. by 2 in the
    doubled units of Algorithm 4, so zCDP composition over the same neighbouring pair adds
    ``2²/(2·4σ²/√k)`` to Lemma 7.5's ρ: ``ρ = k/(2 s_ind) + 5/(2 s_corr) = (k + 5√k)/(8σ²)`` (the discrete
    counterpart of the spec's ½√(k + 5√k), Lebeda & Retschmeier (2024) §3.3). δ_inf is Thm 7.7's (unchanged: t̃ is not
    thresholded). The margin is minimised over σ on a log grid above the smallest feasible σ.
    """
    if conversion not in ("cks", "bs"):
        raise InvalidParameterError(f"conversion must be 'cks' or 'bs', got {conversion!r}")
    return _calibrate_topk_debias_discrete(v.epsilon(epsilon), v.delta(delta), v.integer("k", k, lo=1), conversion)


@lru_cache(maxsize=256)  # a pure function of validated arguments (repeated releases at one point search once)
def _calibrate_topk_debias_discrete(eps: float, dlt: float, k: int, conversion: str) -> Calibration:
    def gauss(s: float) -> float:
        s_ind, s_corr = (float(x) for x in _csh.csh_discrete_scales(s, k))
        return float(_zcdp.zcdp_to_dp_delta(0.5 * (k / s_ind + 5.0 / s_corr), eps, conversion=conversion))

    s_star = smallest_ok(lambda s: gauss(s) < dlt, 1e-3, 1.0, what="sigma")

    def tau_at(s: float) -> float:
        g = gauss(s)
        if g >= dlt:
            return math.inf
        return smallest_ok(lambda t: sum(topk_debias_discrete_delta_parts(eps, s, t, k, conversion).values()) <= dlt,
                           1e-3, 4.0 * s * math.sqrt(math.log(2.0 / (dlt - g)) + 1.0),
                           rel_tol=1e-9, what="threshold margin tau")

    grid = s_star * (1.0 + np.geomspace(1e-4, 1.0, 40))
    taus = [tau_at(float(s)) for s in grid]
    i = int(np.argmin(taus))
    if not math.isfinite(taus[i]):
        raise InfeasibleError("no sigma gives a finite threshold for de-biased discrete top-k CSH")
    sigma, tau = float(grid[i]), float(taus[i])
    s_ind, s_corr = _csh.csh_discrete_scales(sigma, k)
    parts = topk_debias_discrete_delta_parts(eps, sigma, tau, k, conversion)
    return Calibration(
        mechanism=TOPK_CSH, analysis=f"discrete-zcdp-{conversion}", epsilon=eps, delta=dlt, sigma=sigma,
        tau=tau, noise_std=_csh.csh_discrete_noise_std(sigma, k), delta_parts=parts,
        delta_achieved=min(1.0, sum(parts.values())),
        noise=DiscreteCorrelatedGaussian(s_ind, s_corr), comparison=Comparison.GT, k=k, top_k=k, debias=True,
        conversion=conversion)
