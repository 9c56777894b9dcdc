"""The laws of the discrete Gaussian and the discrete Laplace: the one module that defines them.

Both the exact samplers in :mod:`sparsedp.noise` and every accountant that needs a discrete-noise tail
use these functions, so the distribution the accounting assumes is the one the samplers are tested
against.

Discrete Gaussian ``N_Z(0, s)`` with scale parameter ``s = sigma2`` (Canonne, Kamath, Steinke 2020,
Definition 1; notation of Lebeda & Retschmeier (2024) §1, "N_Z(0, σ²)")::

    P[X = x] = exp(-x^2 / (2 s)) / Z(s),      Z(s) = sum_{y in Z} exp(-y^2 / (2 s)).

``s`` is a scale, not the variance: Var X < s (CKS20, Cor. 9; computed exactly by
:func:`dgauss_variance`).

Two exact series are used, whichever converges faster (both are identities, checked against each
other in the tests):

* direct summation over ``|y| <= 40 sqrt(s) + 2`` (terms beyond are < e^-800 relative);
* the Poisson-summation (Jacobi theta) dual, used for ``s >= 1``::

      Z(s)          = sqrt(2 pi s) * sum_{k in Z} exp(-2 pi^2 s k^2),
      sum y^2 e^..  = sqrt(2 pi s) * sum_{k in Z} (s - 4 pi^2 s^2 k^2) exp(-2 pi^2 s k^2),

  so ``Var X = s - 4 pi^2 s^2 * (sum k^2 e^{-2pi^2 s k^2}) / (sum e^{-2pi^2 s k^2})`` (< s).

Tails ``P[X >= t]`` are sums over ``x >= ceil(t)`` computed in log space: terms relative to the
first, ``exp(-(2 t j + j^2) / (2 s))``, summed until they fall below e^-45 (at most 2e4 terms);
when more would be needed (only for ``s > 4.4e6`` and ``t < 0.00225 s``, where the summand varies
slowly: each derivative brings a factor <= max(t/s, 1/sqrt(s)) < 0.0023) the sum is evaluated by the
Euler–Maclaurin formula with three Bernoulli corrections, whose neglected remainder is below 1e-24
relative there. ``t <= 0`` uses symmetry,
``P[X >= t] = 1 - P[X >= 1 - t]``.

Memoised (issue 19, calibration time): ``log Z(s)`` and the upper sums are pure functions of their float
arguments, and an accountant's search asks for the same ones many times (the discrete GSHM at l0 = 100 makes
about 4 000 tail evaluations over about 900 distinct ``(ceil(t), s)`` and 100 distinct ``s``). Each is cached
(bounded LRU) keyed by its exact arguments, so a cached value is the value the function returns for those
arguments, bit for bit; nothing else is cached (no calibration, no data).

Discrete Laplace with scale ``b`` (CKS20 Definition 28; also called the two-sided geometric
distribution, Ghosh–Roughgarden–Sundararajan 2009, with ``alpha = exp(-1/b)``)::

    P[X = x] = (1 - q) / (1 + q) * q^{|x|},   q = exp(-1/b),
    P[X >= k] = q^k / (1 + q)  for integers k >= 1,     Var X = 2 q / (1 - q)^2.

Parameters may be int, float, ``Fraction`` or a decimal string; they are used here as floats
(accounting needs ~1e-15 relative accuracy, not exact arithmetic; the samplers are exact).
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import overload

import numpy as np
from ._special import special

from .. import _validate as v
from ._types import FloatArray, RealOrArray, Scale
from ..errors import InvalidParameterError

__all__ = [
    "dgauss_logpmf", "dgauss_pmf", "dgauss_log_normaliser", "dgauss_logsf", "dgauss_sf", "dgauss_cdf",
    "dgauss_variance",
    "dlaplace_logpmf", "dlaplace_pmf", "dlaplace_logsf", "dlaplace_sf", "dlaplace_cdf", "dlaplace_variance",
]

_LOG_2PI = math.log(2.0 * math.pi)
_DIRECT_MAX_TERMS = 20_000
_TAIL_CUT = 45.0  # stop summing once terms are below exp(-45) of the first (< 3e-20 relative)


def _scale(name: str, x: object) -> float:
    """A positive finite scale parameter as float (accepts decimal strings like the samplers)."""
    if isinstance(x, str):
        return float(v.rational(name, x))
    return v.positive(name, x)


# ------------------------------------------------------------------ discrete Gaussian


@lru_cache(maxsize=1 << 12)
def _log_normaliser(s: float) -> float:
    if s >= 1.0:
        # Poisson dual: terms exp(-2 pi^2 s k^2); k <= 3 reaches < e^-170 for s >= 1.
        k = np.arange(1, 4, dtype=float)
        corr = 2.0 * np.sum(np.exp(-2.0 * math.pi**2 * s * k * k))
        return 0.5 * (_LOG_2PI + math.log(s)) + math.log1p(float(corr))
    n = int(40.0 * math.sqrt(s)) + 2
    y = np.arange(1, n + 1, dtype=float)
    return math.log1p(2.0 * float(np.sum(np.exp(-y * y / (2.0 * s)))))


def dgauss_log_normaliser(sigma2: Scale) -> float:
    """log Z(s), ``Z(s) = sum_{y in Z} exp(-y^2/(2 s))`` (CKS20 Def. 1), by the faster exact series."""
    return _log_normaliser(_scale("sigma2", sigma2))


@overload
def dgauss_logpmf(x: float, sigma2: Scale) -> float: ...
@overload
def dgauss_logpmf(x: FloatArray, sigma2: Scale) -> FloatArray: ...
def dgauss_logpmf(x: RealOrArray, sigma2: Scale) -> RealOrArray:
    """log P[X = x] for X ~ N_Z(0, sigma2); ``-inf`` at non-integer x. Vectorised over ``x``."""
    s = _scale("sigma2", sigma2)
    xa = np.asarray(x, dtype=float)
    out = -(xa * xa) / (2.0 * s) - _log_normaliser(s)
    out = np.where(xa == np.floor(xa), out, -np.inf)
    return float(out) if out.ndim == 0 else out


@overload
def dgauss_pmf(x: float, sigma2: Scale) -> float: ...
@overload
def dgauss_pmf(x: FloatArray, sigma2: Scale) -> FloatArray: ...
def dgauss_pmf(x: RealOrArray, sigma2: Scale) -> RealOrArray:
    """P[X = x] for X ~ N_Z(0, sigma2). Vectorised over ``x``."""
    return np.exp(dgauss_logpmf(x, sigma2)) if np.ndim(x) else math.exp(dgauss_logpmf(x, sigma2))


@lru_cache(maxsize=1 << 16)
def _log_upper_sum(t: int, s: float) -> float:
    """log sum_{x >= t} exp(-x^2/(2 s)) for an integer t >= 1 (module docstring: direct or E–M)."""
    tf = float(t)
    log_first = -(tf * tf) / (2.0 * s)
    # Smallest N with (2 t N + N^2) / (2 s) >= _TAIL_CUT.
    n_needed = math.ceil(-tf + math.sqrt(tf * tf + 2.0 * _TAIL_CUT * s)) + 1
    if n_needed <= _DIRECT_MAX_TERMS:
        j = np.arange(n_needed, dtype=float)
        rel = -(2.0 * tf * j + j * j) / (2.0 * s)
        return log_first + math.log(np.sum(np.exp(rel)))
    # Euler–Maclaurin: sum_{x>=t} f(x) = int_t^inf f + f(t)/2 + sum_k B_2k/(2k)! He_{2k-1}(u)/sigma^{2k-1} f(t)
    # with f(x) = exp(-x^2/(2s)), u = t/sigma, f^(n)(t) = (-1/sigma)^n He_n(u) f(t) (probabilists' Hermite).
    sigma = math.sqrt(s)
    u = tf / sigma
    integral_over_f = sigma * math.sqrt(math.pi / 2.0) * float(special.erfcx(u / math.sqrt(2.0)))
    he1 = u
    he3 = u**3 - 3.0 * u
    he5 = u**5 - 10.0 * u**3 + 15.0 * u
    corr = he1 / (12.0 * sigma) - he3 / (720.0 * sigma**3) + he5 / (30240.0 * sigma**5)
    return log_first + math.log(integral_over_f + 0.5 + corr)


def _logsf_scalar(t: float, s: float, log_z: float) -> float:
    if math.isnan(t):
        raise InvalidParameterError("t must not be NaN")
    if t == math.inf:
        return -math.inf
    if t == -math.inf:
        return 0.0
    k = math.ceil(t)
    if k >= 1:
        return _log_upper_sum(k, s) - log_z
    # P[X >= k] = 1 - P[X <= k - 1] = 1 - P[X >= 1 - k], and P[X >= 1 - k] <= 1/2.
    return math.log1p(-math.exp(_log_upper_sum(1 - k, s) - log_z))


@overload
def dgauss_logsf(t: float, sigma2: Scale) -> float: ...
@overload
def dgauss_logsf(t: FloatArray, sigma2: Scale) -> FloatArray: ...
def dgauss_logsf(t: RealOrArray, sigma2: Scale) -> RealOrArray:
    """log P[X >= t] for X ~ N_Z(0, sigma2) and real t (only ceil(t) matters). Vectorised over ``t``.

    Accurate to ~1e-13 relative in the probability for any t and any s (huge t gives a large negative
    log rather than underflowing to -inf).
    """
    s = _scale("sigma2", sigma2)
    log_z = _log_normaliser(s)
    ta = np.asarray(t, dtype=float)
    out = np.array([_logsf_scalar(float(ti), s, log_z) for ti in ta.ravel()], dtype=float).reshape(ta.shape)
    return float(out) if out.ndim == 0 else out


def _dgauss_logsf_float(t: float, s: float) -> float:
    """:func:`dgauss_logsf` for one float ``t`` and a float scale ``s`` (the same value, bit for bit, without
    the array and validation layers: the accountants' inner loops call it thousands of times). A scale that
    is not a positive finite float takes the validating path (and its error)."""
    if not 0.0 < s < math.inf:
        return dgauss_logsf(t, s)
    return _logsf_scalar(float(t), s, _log_normaliser(s))


@overload
def dgauss_sf(t: float, sigma2: Scale) -> float: ...
@overload
def dgauss_sf(t: FloatArray, sigma2: Scale) -> FloatArray: ...
def dgauss_sf(t: RealOrArray, sigma2: Scale) -> RealOrArray:
    """P[X >= t] for X ~ N_Z(0, sigma2) (exact summation in log space). Vectorised over ``t``."""
    r = dgauss_logsf(t, sigma2)
    return math.exp(r) if isinstance(r, float) else np.exp(r)


@overload
def dgauss_cdf(t: float, sigma2: Scale) -> float: ...
@overload
def dgauss_cdf(t: FloatArray, sigma2: Scale) -> FloatArray: ...
def dgauss_cdf(t: RealOrArray, sigma2: Scale) -> RealOrArray:
    """P[X <= t] = P[X >= -t] (symmetry). Vectorised over ``t``."""
    return dgauss_sf(-np.asarray(t, dtype=float) if np.ndim(t) else -float(t), sigma2)


def dgauss_variance(sigma2: Scale) -> float:
    """Var X = E[X^2] for X ~ N_Z(0, sigma2); strictly below sigma2 (CKS20 Cor. 9). Exact series."""
    s = _scale("sigma2", sigma2)
    if s >= 1.0:
        k = np.arange(1, 4, dtype=float)
        w = np.exp(-2.0 * math.pi**2 * s * k * k)
        return float(s - 4.0 * math.pi**2 * s * s * (2.0 * np.sum(k * k * w)) / (1.0 + 2.0 * np.sum(w)))
    n = int(40.0 * math.sqrt(s)) + 2
    y = np.arange(1, n + 1, dtype=float)
    w = np.exp(-y * y / (2.0 * s))
    return float(2.0 * np.sum(y * y * w) / (1.0 + 2.0 * np.sum(w)))


# ------------------------------------------------------------------ discrete Laplace (two-sided geometric)


@overload
def dlaplace_logpmf(x: float, scale: Scale) -> float: ...
@overload
def dlaplace_logpmf(x: FloatArray, scale: Scale) -> FloatArray: ...
def dlaplace_logpmf(x: RealOrArray, scale: Scale) -> RealOrArray:
    """log P[X = x] for the discrete Laplace with scale b: ``log((1-q)/(1+q)) - |x|/b``, q = e^{-1/b}."""
    b = _scale("scale", scale)
    xa = np.asarray(x, dtype=float)
    # (1-q)/(1+q) = tanh(1/(2b)).
    out = math.log(math.tanh(0.5 / b)) - np.abs(xa) / b
    out = np.where(xa == np.floor(xa), out, -np.inf)
    return float(out) if out.ndim == 0 else out


@overload
def dlaplace_pmf(x: float, scale: Scale) -> float: ...
@overload
def dlaplace_pmf(x: FloatArray, scale: Scale) -> FloatArray: ...
def dlaplace_pmf(x: RealOrArray, scale: Scale) -> RealOrArray:
    """P[X = x] for the discrete Laplace (two-sided geometric) with scale b. Vectorised over ``x``."""
    r = dlaplace_logpmf(x, scale)
    return math.exp(r) if isinstance(r, float) else np.exp(r)


@overload
def dlaplace_logsf(t: float, scale: Scale) -> float: ...
@overload
def dlaplace_logsf(t: FloatArray, scale: Scale) -> FloatArray: ...
def dlaplace_logsf(t: RealOrArray, scale: Scale) -> RealOrArray:
    """log P[X >= t]: ``-k/b - log(1+q)`` for k = ceil(t) >= 1, ``log(1 - q^{1-k}/(1+q))`` otherwise."""
    b = _scale("scale", scale)
    ta = np.asarray(t, dtype=float)
    if np.any(np.isnan(ta)):
        raise InvalidParameterError("t must not be NaN")
    k = np.ceil(ta)
    log1pq = math.log1p(math.exp(-1.0 / b))
    with np.errstate(invalid="ignore", over="ignore"):
        upper = -k / b - log1pq
        lower = np.log1p(-np.exp(-(1.0 - k) / b - log1pq))
    out = np.where(k >= 1, upper, lower)
    return float(out) if out.ndim == 0 else out


@overload
def dlaplace_sf(t: float, scale: Scale) -> float: ...
@overload
def dlaplace_sf(t: FloatArray, scale: Scale) -> FloatArray: ...
def dlaplace_sf(t: RealOrArray, scale: Scale) -> RealOrArray:
    """P[X >= t] for the discrete Laplace with scale b. Vectorised over ``t``."""
    r = dlaplace_logsf(t, scale)
    return math.exp(r) if isinstance(r, float) else np.exp(r)


@overload
def dlaplace_cdf(t: float, scale: Scale) -> float: ...
@overload
def dlaplace_cdf(t: FloatArray, scale: Scale) -> FloatArray: ...
def dlaplace_cdf(t: RealOrArray, scale: Scale) -> RealOrArray:
    """P[X <= t] = P[X >= -t] (symmetry)."""
    return dlaplace_sf(-np.asarray(t, dtype=float) if np.ndim(t) else -float(t), scale)


def dlaplace_variance(scale: Scale) -> float:
    """Var X = 2 q / (1 - q)^2, q = e^{-1/b} (written with expm1 for accuracy at large b)."""
    b = _scale("scale", scale)
    q = math.exp(-1.0 / b)
    return 2.0 * q / math.expm1(-1.0 / b) ** 2
