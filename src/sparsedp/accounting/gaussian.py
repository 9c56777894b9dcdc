"""The Gaussian mechanism's exact privacy profile and its inverse.

Balle & Wang (2018), Theorem 8 (restated as Lemma 2.5 in Lebeda & Retschmeier (2024) §2.1 and as
Theorem 2.2 / Eq. 2.3 of Karrer et al. (2022)): a mechanism adding N(0, σ²) to a query of ℓ2 sensitivity Δ satisfies
(ε, δ)-DP, for every real ε (Karrer et al. (2022), Observation 2.1), iff

    δ ≥ f(μ, ε) = Φ(μ/2 − ε/μ) − e^ε Φ(−μ/2 − ε/μ),      μ = Δ/σ,

and this δ is tight. The μ → 0 limit is max(0, 1 − e^ε).

Numerics. With a = μ/2 − ε/μ and b = −μ/2 − ε/μ one has ε − b²/2 = −a²/2 identically, so writing
Φ(x) = ½ erfcx(−x/√2) e^{−x²/2} cancels the factor e^ε exactly:

    a ≤ 0:        f = ½ e^{−a²/2} [erfcx(−a/√2) − erfcx(−b/√2)]
    b ≤ 0 < a:    f = ½ [erf(a/√2) + erf(−b/√2)] − (e^ε − 1) Φ(b)   (e^εΦ(b) = ½ e^{−a²/2} erfcx(−b/√2))
    b > 0:        f = −expm1(ε) + ½ e^{−a²/2} [erfcx(b/√2) − erfcx(a/√2)]

Every bracketed difference is of a monotone function at two distinct points, so it is positive and no
term e^ε ever overflows (Karrer et al. (2022) §5.1 items 2 and 4). In the first branch the relative error is about
1e-16·ε/μ², far better than subtracting the two Φ terms (1e-16·ε²/μ²); the logarithm of that branch is
formed without exponentiating, so δ far below the double range keeps full relative precision in
:func:`_log_delta_core`. (:func:`_delta_core` floors the exponent at −700: values below ~1e-304 are
returned as that tiny upper bound rather than their true, smaller value.)

The inverse (:func:`gaussian_sigma`) finds μ with Brent's method, ``scipy.optimize.brentq`` bit for bit
through :mod:`._brentq`, which does not import ``scipy.optimize`` (0.1–0.2 s of every process's start-up).
"""

from __future__ import annotations

import math
from typing import overload

import numpy as np
import numpy.typing as npt
from ._special import special

from .. import _validate as v
from ..errors import InfeasibleError, InvalidParameterError, InvalidTypeError
from ._brentq import brentq
from ._types import FloatArray, RealOrArray

_SQRT1_2 = math.sqrt(0.5)
#: floor on the exponent −a²/2 in :func:`_delta_core`: f is then overestimated by at most ~1e-304
#: (absolute, i.e. conservatively) where it is below that anyway; avoids numpy's slow underflow path
_EXP_FLOOR = -700.0


def _delta_core(mu: FloatArray, eps: FloatArray, inv_mu: FloatArray | None = None) -> FloatArray:
    """f(μ, ε) for float arrays of equal shape with μ > 0 (no validation; the O(l0) loops call this).

    ``inv_mu`` = 1/μ may be passed when the caller evaluates several ε at the same μ.
    """
    if inv_mu is None:
        inv_mu = 1.0 / mu
    a = eps * inv_mu
    np.subtract(0.5 * mu, a, out=a)  # a = μ/2 − ε/μ
    neg = a <= 0.0
    if neg.all():  # the usual case for ε > μ²/2: one branch, no fancy indexing
        u = a * -_SQRT1_2  # −a/√2 >= 0;  −b/√2 = u + μ/√2
        w = special.erfcx(u)
        w -= special.erfcx(u + _SQRT1_2 * mu)
        np.square(u, out=u)
        np.negative(u, out=u)
        np.maximum(u, _EXP_FLOOR, out=u)
        np.exp(u, out=u)
        u *= w
        u *= 0.5
        return np.maximum(u, 0.0, out=u)  # a rounding-level negative difference means f ≈ 0
    b = a - mu
    out = np.empty_like(a)
    an, bn = a[neg], b[neg]
    out[neg] = _half_gauss(an) * (special.erfcx(-_SQRT1_2 * an) - special.erfcx(-_SQRT1_2 * bn))
    mid = ~neg & (b <= 0.0)
    if mid.any():
        am, bm, em = a[mid], b[mid], eps[mid]
        # (e^ε − 1)Φ(b): expm1 form for moderate ε; for large ε use e^εΦ(b) = ½e^{−a²/2}erfcx(−b/√2)
        excess = np.where(em <= 1.0, np.expm1(np.minimum(em, 1.0)) * special.ndtr(bm),
                          _half_gauss(am) * special.erfcx(-_SQRT1_2 * bm) - special.ndtr(bm))
        out[mid] = 0.5 * (special.erf(_SQRT1_2 * am) + special.erf(-_SQRT1_2 * bm)) - excess
    pos = b > 0.0
    if pos.any():
        ap, bp, ep = a[pos], b[pos], eps[pos]
        out[pos] = -np.expm1(ep) + _half_gauss(ap) * (special.erfcx(_SQRT1_2 * bp) - special.erfcx(_SQRT1_2 * ap))
    return np.clip(out, 0.0, 1.0)


def _half_gauss(a: FloatArray) -> FloatArray:
    """½ e^{−a²/2}, exponent floored at ``_EXP_FLOOR``."""
    return 0.5 * np.exp(np.maximum(-0.5 * a * a, _EXP_FLOOR))


def _log_delta_core(mu: FloatArray, eps: FloatArray) -> FloatArray:
    """log f(μ, ε) for float arrays with μ > 0; finite even where f underflows (branch a ≤ 0)."""
    a = 0.5 * mu - eps / mu
    b = -0.5 * mu - eps / mu
    out = np.empty_like(a)
    neg = a <= 0.0
    if neg.any():
        an, bn = a[neg], b[neg]
        diff = special.erfcx(-_SQRT1_2 * an) - special.erfcx(-_SQRT1_2 * bn)
        with np.errstate(divide="ignore"):
            out[neg] = -0.5 * an * an + np.log(0.5 * diff)
    rest = ~neg
    if rest.any():  # here f >= min(f(μ, μ²/2), 1 − e^{−μ²/2}) > 0 is never tiny
        with np.errstate(divide="ignore"):
            out[rest] = np.log(_delta_core(mu[rest], eps[rest]))
    return out


def _as_float_array(name: str, x: npt.ArrayLike, *, lo: float | None = None) -> FloatArray:
    """Validate a scalar (through :mod:`sparsedp._validate`) or an array of finite reals >= lo."""
    if np.ndim(x) == 0:
        val = v.real(name, x.item() if isinstance(x, (np.generic, np.ndarray)) else x, lo=lo)
        return np.asarray(val, dtype=float)
    try:
        arr = np.asarray(x, dtype=float)
    except (TypeError, ValueError):
        raise InvalidTypeError(f"{name} must be real numbers, got {x!r}") from None
    if not np.all(np.isfinite(arr)):
        raise InvalidParameterError(f"{name} must be finite, got {x!r}")
    if lo is not None and np.any(arr < lo):
        raise InvalidParameterError(f"{name} must be >= {lo:g}, got minimum {arr.min()!r}")
    return arr


@overload
def gaussian_delta(mu: float, epsilon: float) -> float: ...
@overload
def gaussian_delta(mu: FloatArray, epsilon: RealOrArray) -> FloatArray: ...
@overload
def gaussian_delta(mu: float, epsilon: FloatArray) -> FloatArray: ...
def gaussian_delta(mu: RealOrArray, epsilon: RealOrArray) -> RealOrArray:
    """Tight δ(ε) of the Gaussian mechanism with μ = sensitivity/σ (Balle–Wang 2018, Thm 8).

    Source: Karrer et al. (2022) Theorem 2.2 / Eq. 2.3 and Observation 2.1; Lebeda & Retschmeier (2024) Lemma 2.5.
    Vectorised over ``mu`` and ``epsilon`` (numpy broadcasting); any real ε is allowed. ``mu`` must be
    >= 0; μ = 0 gives the limit max(0, 1 − e^ε). Returns a float for scalar inputs.
    """
    mu_a = _as_float_array("mu", mu, lo=0.0)
    eps_a = _as_float_array("epsilon", epsilon)
    mu_b, eps_b = np.broadcast_arrays(mu_a, eps_a)
    out = np.empty(mu_b.shape, dtype=float)
    zero = mu_b == 0
    out[zero] = np.maximum(0.0, -np.expm1(eps_b[zero]))
    pos = ~zero
    out[pos] = _delta_core(mu_b[pos], eps_b[pos])
    return float(out) if out.ndim == 0 else out


def _gaussian_mu(eps: float, dlt: float) -> float:
    """Largest μ with f(μ, ε) ≤ δ (validated ε ≥ 0, 0 < δ < 1), found on log μ in log δ space.

    The result satisfies f(μ, ε) ≤ δ in floating point (nudged down if needed).
    """
    log_target = math.log(dlt)

    def g(log_mu: float) -> float:  # increasing in μ (∂f/∂μ = φ(μ/2 − ε/μ) > 0, Karrer et al. (2022) A.9)
        return float(_log_delta_core(np.array([math.exp(log_mu)]), np.array([eps]))[0]) - log_target

    lo, hi = -30.0, 1.0
    while g(lo) > 0:
        lo -= 30.0
        if lo < -700:
            raise InfeasibleError(f"delta={dlt} is below f(mu, epsilon={eps}) for every representable mu")
    while g(hi) < 0:
        lo = hi
        hi += 1.0
        if hi > 700:
            raise InfeasibleError(f"no sigma reaches delta={dlt} at epsilon={eps}")
    log_mu = brentq(g, lo, hi, xtol=1e-15, rtol=4 * np.finfo(float).eps, maxiter=500)  # no scipy.optimize
    mu = math.exp(log_mu)
    while float(_delta_core(np.array([mu]), np.array([eps]))[0]) > dlt:
        mu = math.nextafter(mu, 0.0)
    return mu


def gaussian_sigma(epsilon: float, delta: float, sensitivity: float = 1.0) -> float:
    """Smallest σ such that the Gaussian mechanism with ℓ2 sensitivity ``sensitivity`` is (ε, δ)-DP.

    Analytic Gaussian calibration (Balle–Wang 2018, Thm 8; Karrer et al. (2022) §5.3 item 2). Inverts
    :func:`gaussian_delta`, which is strictly increasing in μ = Δ/σ, by root finding on log μ in log δ
    space; the result is nudged upward so that ``gaussian_delta(sensitivity/σ, ε) <= δ`` holds in
    floating point (conservative rounding). ``epsilon`` may be 0.
    """
    eps = v.nonnegative("epsilon", epsilon)
    dlt = v.delta(delta)
    sens = v.positive("sensitivity", sensitivity)
    mu = _gaussian_mu(eps, dlt)
    sigma = sens / mu
    while gaussian_delta(sens / sigma, eps) > dlt:
        sigma = math.nextafter(sigma, math.inf)
    return sigma
