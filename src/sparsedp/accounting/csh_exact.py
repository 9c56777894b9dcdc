"""Certified privacy profile of CSH and top-k CSH by integration over the shared term (beyond the paper).

Mechanism: Algorithm 2 / 3 of Lebeda & Retschmeier (2024, §3.2–3.3):
one shared ``A ~ N(0, σ_c²)``, ``σ_c = σ k^{-1/4}``, and iid ``G_i ~ N(0, σ²)`` on the non-zero counts of a
k-sparse monotonic histogram (Def. 3.1); key ``i`` is released iff ``H_i + G_i + A > 1 + τ``. The rounded
(secure) variant releases ``round(·)`` of the same outputs with ``τ = margin − ½`` (post-processing,
``docs/proofs/rounded-csh.md``). The de-biased top-k variant also releases ``t̃ = t + W``,
``W ~ N(0, σ_c²)``, where ``t`` moves by at most 1 between neighbours (spec §3.3, Lemma 4.1).

This module replaces Lemma 3.2 / Theorems 3.3 and 3.5 by the argument of ``docs/proofs/csh-exact.md``.
A neighbouring pair (H, H'), H' = H + 1_S, is described by its *shape*: ``m`` new keys (count 1 in H',
absent from H), ``j`` shifted keys and ``u`` unchanged keys (``m + j + u <= k``). With

* ``p_inf(m) = 1 − E_A[Φ((τ − A)/σ)^m]`` (the exact probability that some new key is released), and
* ``μ(K)² = (max_{0<=j<=K} j − j²/(K + √k) + [debias]·√k) / σ²`` (the exact squared Mahalanobis norm of
  the worst shift of the released common keys, spec §4.7, plus the t̃ coordinate),

the accountant reports ``δ(ε) = max(new_only, shifted_only, mixed)`` where

* ``shifted_only = BW(μ(k), ε)`` — exact (a supremum over histograms, attained as counts grow);
* ``new_only`` — exact for the pair H = 0, H' = 1^k: ``p_inf(k)`` (de-biased: ``p + (1−p)·BW(μ_W, ε −
  ln(1−p))`` with ``μ_W = k^{1/4}/σ``);
* ``mixed = max_{1<=m<=k−1} max(add(m), rem(m))`` with the certified bounds (proof §3)::

      add(m) = p_inf(m) + BW(μ(k−m), ε)
      rem(m) = min( BW(μ(k−m), ε) + e^ε p_inf(m),
                    min_{a0} BW(μ(k−m), ε + m ln Φ((τ−a0)/σ)) + e^ε Φ((τ−a0)/σ)^m Φ̄(a0/σ_c) )

  maximised over m by blocks ``[m1, m2]`` (each term is monotone in m, so a block is bounded by its ends),
  blocks refined until they fall below the other parts. For k <= 4 a binding m is re-bounded per shape
  (m, j, u = k − m − j) by a certified integral over the common keys' mean (proof §3.5,
  :func:`_shape_bound`), within 1 % of brute force.

``BW(μ, x) = Φ(μ/2 − x/μ) − e^x Φ(−μ/2 − x/μ)`` (Balle–Wang, for every real x; ``(1 − e^x)_+`` at
μ = 0).

Certified integration (proof §4): ``p_inf`` is ∫ φ(z) q(z) dz with ``q(z) = 1 − Φ((τ − σ_c z)/σ)^m``,
which is increasing and log-concave in z (the survival function of the maximum of m normals). On each
cell the integral is bracketed in closed form: above by the tangent of ln q at the midpoint, below by
the chord of ln q (Gaussian integrals of an exponential), plus the Gaussian tails outside [−14, 14]
(upper: mass × 1). :func:`csh_exact_p_inf` returns (lower, upper); everything else uses the upper end.
All in log space; the result is multiplied by ``1 + 1e-9`` to absorb floating-point rounding (the
bracket's own width is ~1e-6 relative; tests compare with 30-digit mpmath).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Callable

import numpy as np
import numpy.typing as npt
from ._special import special

from .. import _validate as v
from ..errors import InfeasibleError, InvalidParameterError, InvalidTypeError
from ._types import FloatArray
from .gaussian import _delta_core, gaussian_sigma

__all__ = [
    "CshExactParts", "csh_exact_p_inf", "csh_exact_delta_parts", "csh_exact_delta", "csh_exact_tau",
    "csh_exact_calibrate", "csh_exact_sensitivity",
]

#: relative safety factor on every reported δ (floating-point rounding of the certified bracket)
_SAFETY = 1.0 + 1e-9
#: integration range of the standardised shared term, cell width, and the a0 grid (in units of σ_c)
_Z_MAX = 14.0
_H = 0.01
_A0 = np.concatenate([np.arange(-4.0, 12.0, 0.25), np.arange(12.0, 40.0, 1.0)])
_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)
#: up to this k, a mixed bound that exceeds the other parts is replaced by the per-shape integral (§3.5)
_K_EXACT = 4


# ------------------------------------------------------------------ numerics


def _log_diff_ndtr(lo: FloatArray, hi: FloatArray) -> FloatArray:
    """ln(Φ(hi) − Φ(lo)) for lo < hi, stable in both tails (arrays)."""
    lo, hi = np.broadcast_arrays(np.asarray(lo, float), np.asarray(hi, float))
    out = np.empty(lo.shape)
    up = lo >= 0.0
    dn = hi <= 0.0
    mid = ~(up | dn)
    if up.any():  # both in the upper tail: Φ̄(lo) − Φ̄(hi)
        a, b = special.log_ndtr(-lo[up]), special.log_ndtr(-hi[up])
        out[up] = a + np.log(-np.expm1(np.minimum(b - a, -1e-300)))
    if dn.any():
        a, b = special.log_ndtr(hi[dn]), special.log_ndtr(lo[dn])
        out[dn] = a + np.log(-np.expm1(np.minimum(b - a, -1e-300)))
    if mid.any():
        out[mid] = np.log(special.ndtr(hi[mid]) - special.ndtr(lo[mid]))
    return out


def _log_q(x: FloatArray, m: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
    """(ln q_upper, ln q_lower, d ln q / dx) for q = 1 − Φ(x)^m (survival of the max of m normals at x).

    Where m·Φ̄(x) < 1e-8 the bracket mΦ̄(1 − (m−1)Φ̄/2) <= q <= mΦ̄ is used (relative width <= 1e-8).
    """
    lphi = special.log_ndtr(x)  # ln Φ(x)
    lbar = special.log_ndtr(-x)  # ln Φ̄(x)
    lm = np.log(m)
    small = lm + lbar < math.log(1e-8)
    with np.errstate(divide="ignore"):
        direct = np.log(-np.expm1(m * lphi))
    approx = lm + lbar
    lq_hi = np.where(small, approx, direct)
    with np.errstate(invalid="ignore"):
        lq_lo = np.where(small, approx + np.log1p(-0.5 * np.exp(np.minimum(lm + lbar, 0.0))), direct)
    # d/dx ln q = −m Φ^{m−1} φ / q
    log_phi_pdf = -0.5 * x * x - _LOG_SQRT_2PI
    dlq = -np.exp(lm + (m - 1.0) * lphi + log_phi_pdf - lq_hi)
    return lq_hi, lq_lo, dlq


def _q_bracket(x0: FloatArray, r: float, m: FloatArray, h: float = _H,
               z_max: float | None = None) -> tuple[FloatArray, FloatArray]:
    """Certified (lower, upper) of E[1 − Φ(x0 − r Z)^m], Z ~ N(0, 1), row-wise for column arrays x0, m.

    q(z) = 1 − Φ(x0 − r z)^m is increasing and log-concave in z. Cell [z1, z2]:
    upper ∫φ q <= q(zm)·e^{−b zm + b²/2}·(Φ(z2 − b) − Φ(z1 − b)), b = (ln q)'(zm) (tangent);
    lower >= q(z1)·e^{−c z1 + c²/2}·(Φ(z2 − c) − Φ(z1 − c)), c the chord slope of ln q.
    Tails: z < −Z: <= Φ(−Z)·q(−Z); z > Z': <= Φ̄(Z'), Z' = max(Z, z_peak + Z), z_peak = x0·r/(1+r²)
    (``z_max`` fixes Z' instead: an absolute error <= Φ̄(z_max), enough where only 1 − value matters).
    """
    x0, m = np.broadcast_arrays(np.asarray(x0, float), np.asarray(m, float))
    z_top = z_max if z_max is not None else max(_Z_MAX, float(np.max(x0)) * r / (1.0 + r * r) + _Z_MAX)
    edges = np.arange(-_Z_MAX, z_top + 0.5 * h, h)
    z1, z2 = edges[:-1], edges[1:]
    zm = 0.5 * (z1 + z2)
    xe = x0 - r * edges[None, :]  # x at the edges (decreasing in z)
    xm = x0 - r * zm[None, :]
    lqe_hi, lqe_lo, _ = _log_q(xe, m)
    lqm_hi, _, dlq_m = _log_q(xm, m)
    b = -r * dlq_m  # d ln q / dz = −r · d ln q / dx  (>= 0)
    up = lqm_hi - b * zm + 0.5 * b * b + _log_diff_ndtr(z1 - b, z2 - b)
    with np.errstate(invalid="ignore"):
        c = (lqe_lo[:, 1:] - lqe_lo[:, :-1]) / h
    c = np.where(np.isfinite(c), c, 0.0)
    lo_terms = lqe_lo[:, :-1] - c * z1 + 0.5 * c * c + _log_diff_ndtr(z1 - c, z2 - c)
    tail_lo = math.log(special.ndtr(-_Z_MAX)) + lqe_hi[:, 0]
    tail_hi = float(special.ndtr(-edges[-1]))
    hi = np.exp(special.logsumexp(up, axis=1)) + np.exp(tail_lo) + tail_hi
    with np.errstate(divide="ignore"):
        lo = np.exp(special.logsumexp(np.where(np.isfinite(lo_terms), lo_terms, -np.inf), axis=1))
    return np.minimum(lo, 1.0), np.minimum(hi * _SAFETY, 1.0)


#: p_inf brackets already computed, by (σ, τ, k) then m. They do not depend on ε, so a profile evaluated at many
#: ε (a trade-off curve: 401 points; the ledger's samples) computes each once. :func:`_q_bracket` works row by
#: row (its grid depends on x0 = τ/σ only), so a value is the same bits whichever batch computed it. Bounded.
_P_INF: dict[tuple[float, float, int], dict[float, tuple[float, float]]] = {}
_P_INF_KEYS = 256


def _p_inf_bracket(sigma: float, tau: float, k: int, m: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Certified (lower, upper) of p_inf(m) = 1 − E[Φ((τ − A)/σ)^m], A ~ N(0, σ²/√k), for an array m
    (z = A/σ_c, x = τ/σ − k^{-1/4} z; :func:`_q_bracket`); each (σ, τ, k, m) computed once (:data:`_P_INF`)."""
    ms = np.atleast_1d(np.asarray(m, float)).tolist()
    key = (float(sigma), float(tau), int(k))
    known = _P_INF.get(key)
    if known is None:
        if len(_P_INF) >= _P_INF_KEYS:
            _P_INF.pop(next(iter(_P_INF)))
        known = _P_INF[key] = {}
    missing = sorted(set(ms) - known.keys())
    if missing:
        col = np.array(missing)[:, None]
        lo, hi = _q_bracket(np.full(col.shape, tau / sigma), k ** -0.25, col)
        known.update(zip(missing, zip(lo.tolist(), hi.tolist())))
    return np.array([known[x][0] for x in ms]), np.array([known[x][1] for x in ms])


def _bw(mu: npt.ArrayLike, x: npt.ArrayLike) -> FloatArray:
    """BW(μ, x) = sup_E P(E) − e^x Q(E) for N(μ,1) vs N(0,1), any real x; (1 − e^x)_+ at μ = 0."""
    mu_b, x_b = np.broadcast_arrays(np.atleast_1d(np.asarray(mu, float)), np.atleast_1d(np.asarray(x, float)))
    out: FloatArray = np.maximum(-np.expm1(np.minimum(x_b, 700.0)), 0.0)
    pos = mu_b > 0.0
    if pos.any():
        out = out.copy()
        out[pos] = _delta_core(mu_b[pos].copy(), x_b[pos].copy())
    return out


def _mahalanobis2(K: FloatArray, k: int) -> FloatArray:
    """max_{0<=j<=K, j integer} j − j²/(K + √k) (spec §4.7): the worst squared shift, in count units."""
    K = np.asarray(K, float)
    d = K + math.sqrt(k)
    js = np.clip(np.stack([np.floor(d / 2.0), np.ceil(d / 2.0)]), 0.0, K)
    worst: FloatArray = np.max(js - js * js / d, axis=0) * (1.0 + 1e-12)
    return worst


def csh_exact_sensitivity(k: int, *, debias: bool = False) -> float:
    """Δ with μ(k) = Δ/σ: √(max_j j − j²/(k+√k) + [debias]·√k), the exact worst shift
    (<= ½√(k+√k), Thm 3.3's sensitivity; spec §4.7)."""
    k = v.integer("k", k, lo=1)
    return math.sqrt(float(_mahalanobis2(np.array([k]), k)[0]) + (math.sqrt(k) if debias else 0.0))


# ------------------------------------------------------------------ δ


@dataclass(frozen=True)
class CshExactParts:
    """The parts of the certified CSH privacy profile at one (ε, σ, τ, k) (docs/proofs/csh-exact.md).

    ``new_only``: pair H = 0, H' = 1^k (exact). ``shifted_only``: same supports (exact supremum).
    ``mixed``: certified bound over every other pair with new keys (m = 1..k−1 new keys; 0 when k = 1).
    ``worst_m``: the m of the largest mixed block bound (its left end). ``p_inf``: certified (lo, hi) of
    p_inf(k). δ = ``total`` = the maximum of the three.
    """

    new_only: float
    shifted_only: float
    mixed: float
    worst_m: int
    p_inf: tuple[float, float]

    @property
    def total(self) -> float:
        return min(1.0, max(self.new_only, self.shifted_only, self.mixed))


def _block_bounds(eps: float, sigma: float, tau: float, k: int, debias: bool, m1: FloatArray,
                  m2: FloatArray) -> FloatArray:
    """Upper bound of max(add(m), rem(m)) over m ∈ [m1, m2] for arrays of blocks (proof §3.4)."""
    rk = math.sqrt(k)
    mu = np.sqrt(_mahalanobis2(k - m1, k) + (rk if debias else 0.0)) / sigma  # μ(k − m1) >= μ(k − m)
    _, p2 = _p_inf_bracket(sigma, tau, k, m2)  # p_inf(m2) >= p_inf(m)
    bw = _bw(mu, eps)
    add = p2 + bw
    rem_a = bw + math.exp(eps) * p2
    sc: float = sigma * k ** -0.25
    a0 = _A0 * sc
    lphi = special.log_ndtr((tau - a0) / sigma)[None, :]  # ln Φ((τ − a0)/σ)
    ltail = special.log_ndtr(-_A0)[None, :]  # ln Φ̄(a0/σ_c)
    x = eps + m2[:, None] * lphi
    rem_b = _bw(np.repeat(mu[:, None], len(_A0), axis=1), x) + np.exp(eps + m1[:, None] * lphi + ltail)
    rem = np.minimum(rem_a, np.min(rem_b, axis=1))
    bound: FloatArray = np.maximum(add, rem) * _SAFETY
    return bound


def _log_mass(lo: npt.ArrayLike, hi: npt.ArrayLike) -> FloatArray:
    """ln P[lo < Z < hi] for Z ~ N(0, 1), with ±inf ends allowed."""
    lo, hi = np.broadcast_arrays(np.asarray(lo, float), np.asarray(hi, float))
    out = np.empty(lo.shape)
    a, b = np.isneginf(lo), np.isposinf(hi)
    out[a] = special.log_ndtr(hi[a])
    out[b & ~a] = special.log_ndtr(-lo[b & ~a])
    f = ~(a | b)
    out[f] = _log_diff_ndtr(lo[f], hi[f])
    return out


def _shape_bound(eps: float, sigma: float, tau: float, k: int, m: int, j: int, u: int, debias: bool,
                 n_t: int = 1200) -> float:
    """Certified upper bound of max(δ(P‖Q), δ(Q‖P)) for one shape (m >= 1 new, j shifted, u unchanged
    keys, K = j + u >= 1), by integration over the common keys' mean T (proof §3.5).

    T = mean of y_common − H: under Q ~ N(0, σ_T²), σ_T² = σ_c² + σ²/K; under P shifted by s = j/K and
    weighted by g(t) = E_P[w_m(A) | T = t], A | T ~ N(β(t − s), v). The contrast between shifted and
    unchanged keys is an independent Gaussian pair with μ_D² = (ju/K + [debias]√k)/σ². So
    δ(Q‖P) = ∫ q_T(t) BW(μ_D, ε + ℓ(t) + ln g(t)) dt and
    δ(P‖Q) = p_inf(m) + ∫ p_T(t) g(t) BW(μ_D, ε − ℓ(t) − ln g(t)) dt, ℓ(t) = (s t − s²/2)/σ_T².
    ℓ increases and g decreases in t; each integrand is monotone in (ℓ, g), so a cell is bounded by its
    end values; g is bracketed with :func:`_q_bracket`.
    """
    K = j + u
    sc2 = sigma * sigma / math.sqrt(k)
    e2 = sigma * sigma / K
    st2 = sc2 + e2
    st = math.sqrt(st2)
    s = j / K
    beta = sc2 / st2
    sd = math.sqrt(sc2 * e2 / st2)
    mu_d = math.sqrt(j * u / K + (math.sqrt(k) if debias else 0.0)) / sigma
    edges = np.linspace(-12.0 * st, 12.0 * st + s, n_t + 1)
    c = beta * (edges - s)  # posterior mean of A under P at T = t
    eta_lo, eta_hi = _q_bracket(((tau - c) / sigma)[:, None], sd / sigma, np.full((n_t + 1, 1), float(m)),
                                h=0.02, z_max=10.0)  # g = 1 − η is needed to ~1e-23 absolute only
    ln_g_lo = np.log1p(-np.minimum(eta_hi, 1.0 - 1e-300))
    ln_g_hi = np.log1p(-eta_lo)
    ell = (s * edges - 0.5 * s * s) / st2
    zq = edges / st
    zp = (edges - s) / st
    lq_cell = _log_mass(zq[:-1], zq[1:])
    lp_cell = _log_mass(zp[:-1], zp[1:])
    tails_q = math.exp(_log_mass(-np.inf, zq[:1])[0]) + math.exp(_log_mass(zq[-1:], np.inf)[0])
    tails_p = math.exp(_log_mass(-np.inf, zp[:1])[0]) + math.exp(_log_mass(zp[-1:], np.inf)[0])
    rem = float(np.sum(np.exp(lq_cell) * _bw(mu_d, eps + ell[:-1] + ln_g_lo[1:]))) + tails_q
    g_hi = np.exp(ln_g_hi[:-1])
    add_int = float(np.sum(np.exp(lp_cell) * g_hi * _bw(mu_d, eps - ell[1:] - ln_g_hi[:-1]))) + tails_p
    p_hi = float(_p_inf_bracket(sigma, tau, k, np.array([m]))[1][0])
    return min(1.0, max(p_hi + add_int, rem) * _SAFETY)


def _initial_blocks(k: int) -> tuple[FloatArray, FloatArray]:
    """Blocks covering m = 1..k−1: singletons up to 64, then ~300 geometric blocks."""
    head = np.arange(1, min(k - 1, 64) + 1, dtype=float)
    if k - 1 <= 64:
        return head, head.copy()
    edges = np.unique(np.round(np.geomspace(65, k, 300)))
    m1 = np.concatenate([head, edges[:-1]])
    m2 = np.concatenate([head, edges[1:] - 1.0])
    m2[-1] = k - 1
    return m1, m2


def _mixed(eps: float, sigma: float, tau: float, k: int, debias: bool, target: float,
           exact: bool = True) -> tuple[float, int]:
    """Certified max over m ∈ [1, k−1] of the mixed bound (m = k has no common key: it is the new-only
    pair, computed exactly). Blocks whose bound exceeds both ``target`` and 1.001× the best single-m
    bound are halved (<= 40 rounds); the maximum over all blocks is returned. (0, 0) when k = 1."""
    if k == 1:
        return 0.0, 0
    m1, m2 = _initial_blocks(k)
    vals = _block_bounds(eps, sigma, tau, k, debias, m1, m2)
    for _ in range(40):
        single = vals[m1 == m2]
        floor = max(target, float(single.max()) * (1.0 + 1e-3) if single.size else 0.0)
        bad = (vals > floor) & (m2 > m1)  # only blocks that could raise the maximum above `floor`
        if not bad.any():
            break
        mid = np.floor(0.5 * (m1[bad] + m2[bad]))
        n1 = np.concatenate([m1[~bad], m1[bad], mid + 1.0])
        n2 = np.concatenate([m2[~bad], mid, m2[bad]])
        nv = np.concatenate([vals[~bad], _block_bounds(eps, sigma, tau, k, debias, m1[bad], mid),
                             _block_bounds(eps, sigma, tau, k, debias, mid + 1.0, m2[bad])])
        m1, m2, vals = n1, n2, nv
    if exact and k <= _K_EXACT:  # every block is a single m: replace a binding bound by the per-shape integral (§3.5)
        for idx in np.flatnonzero(vals > target):
            m = int(m1[idx])
            shape_max = max(_shape_bound(eps, sigma, tau, k, m, j, k - m - j, debias) for j in range(0, k - m + 1))
            vals[idx] = min(vals[idx], shape_max)
    i = int(np.argmax(vals))
    return float(vals[i]), int(m1[i])


def _parts(eps: float, sigma: float, tau: float, k: int, debias: bool, target: float | None = None,
           exact: bool | None = True) -> CshExactParts:
    rk = math.sqrt(k)
    mu_k = math.sqrt(float(_mahalanobis2(np.array([k]), k)[0]) + (rk if debias else 0.0)) / sigma
    shifted = float(_bw(mu_k, eps)[0]) * _SAFETY
    lo, hi = _p_inf_bracket(sigma, tau, k, np.array([k]))
    p_lo, p_hi = float(lo[0]), float(hi[0])
    if debias:
        mu_w = rk ** 0.5 / sigma
        l1p = math.log1p(-p_hi) if p_hi < 1.0 else -math.inf
        add = p_hi + (1.0 - p_hi) * float(_bw(mu_w, eps - l1p)[0])
        rem = float(_bw(mu_w, eps + l1p)[0])
        new = min(1.0, max(add, rem) * _SAFETY)
    else:  # add: exactly p; remove: (1 − e^ε(1 − p))_+ <= p
        new = p_hi
    if target is None:
        target = max(new, shifted)
    if exact is None:  # pure parts only (a lower bound on the total, used to bracket searches)
        mixed, worst = 0.0, 0
    else:
        mixed, worst = _mixed(eps, sigma, tau, k, debias, target, exact)
    return CshExactParts(new_only=new, shifted_only=shifted, mixed=min(1.0, mixed), worst_m=worst,
                         p_inf=(p_lo, p_hi))


def _check(epsilon: float, sigma: float, margin_or_tau: float, k: int, rounded: bool, topk: bool,
           debias: bool) -> tuple[float, float, float, int]:
    eps = v.nonnegative("epsilon", epsilon)
    sigma = v.positive("sigma", sigma)
    k = v.integer("k", k, lo=1)
    for name, flag in (("rounded", rounded), ("topk", topk), ("debias", debias)):
        if not isinstance(flag, bool):
            raise InvalidTypeError(f"{name} must be a bool, got {type(flag).__name__} {flag!r}")
    if debias and not topk:
        raise InvalidParameterError("debias=True is the de-biased top-k variant: pass topk = True")
    if rounded:
        tau = v.integer("margin", margin_or_tau, lo=1) - 0.5
    else:
        tau = v.positive("tau", margin_or_tau)
    return eps, sigma, tau, k


def csh_exact_delta_parts(epsilon: float, sigma: float, margin_or_tau: float, k: int, *, rounded: bool = True,
                          topk: bool = False,
                          debias: bool = False) -> CshExactParts:
    """Certified parts of δ(ε) of (rounded) CSH / top-k CSH (docs/proofs/csh-exact.md).

    ``rounded=True``: ``margin_or_tau`` is the integer margin m of the rule ``count + X >= pre + m``,
    accounted at τ = m − ½ (post-processing, docs/proofs/rounded-csh.md); else it is the continuous τ of
    Algorithm 2 (release ``> 1 + τ``). ``topk`` selects Algorithm 3 (same profile, Cor. 4.2);
    ``debias`` (top-k only) adds the t̃ release.
    """
    eps, sigma, tau, k = _check(epsilon, sigma, margin_or_tau, k, rounded, topk, debias)
    return _parts_cached(float(eps), float(sigma), float(tau), int(k), debias)


@functools.lru_cache(maxsize=512)
def _parts_cached(eps: float, sigma: float, tau: float, k: int, debias: bool) -> CshExactParts:
    return _parts(eps, sigma, tau, k, debias)


def csh_exact_delta(epsilon: float, sigma: float, margin_or_tau: float, k: int, *, rounded: bool = True,
                    topk: bool = False,
                    debias: bool = False) -> float:
    """Certified upper bound on δ(ε) of (rounded) CSH / top-k CSH: ``csh_exact_delta_parts(...).total``."""
    return csh_exact_delta_parts(epsilon, sigma, margin_or_tau, k, rounded=rounded, topk=topk,
                                 debias=debias).total


def csh_exact_p_inf(sigma: float, tau: float, k: int, m: int | None = None) -> tuple[float, float]:
    """Certified (lower, upper) of p_inf(m) = 1 − E[Φ((τ − Z_c)/σ)^m], Z_c ~ N(0, σ²/√k) (m defaults to k):
    the exact probability that one of m new keys (count 1) passes the margin τ."""
    sigma = v.positive("sigma", sigma)
    tau = v.positive("tau", tau)
    k = v.integer("k", k, lo=1)
    m = k if m is None else v.integer("m", m, lo=1)
    lo, hi = _p_inf_bracket(sigma, tau, k, np.array([m]))
    return float(lo[0]), float(hi[0])


# ------------------------------------------------------------------ calibration


def _tau_min(eps: float, dlt: float, sigma: float, k: int, debias: bool, rounded: bool) -> float:
    """Smallest τ (continuous) or margin (rounded) with certified δ <= dlt at σ; δ is non-increasing in τ.

    Lower bound: the p_inf(k) line (:func:`_p_line`), or the line of the pure parts (de-biased). Upper
    bound: the same search with the fast mixed bound of §3.4 only. If they differ, bisection between them
    with the full profile (per-shape integrals for k <= 4), to 1e-9 relative (continuous) or to the
    integer (rounded).
    """
    t_p = _p_line(dlt, sigma, k)

    def ok(t: float, exact: bool | None) -> bool:
        return _parts(eps, sigma, t, k, debias, target=dlt, exact=exact).total <= dlt

    if debias and not ok(t_p, None):  # the de-biased new-only pair binds above the p_inf line
        t_p = _bisect(lambda t: ok(t, None), *_doubling(lambda t: ok(t, None), t_p), 1e-12)

    if rounded:
        lo_m = max(1, math.ceil(t_p + 0.5))  # no smaller margin passes the new-only pair
        hi_m, step = lo_m, 1
        while not ok(hi_m - 0.5, False):  # the fast bound accepts hi_m, hence so does the full profile
            hi_m, step = hi_m + step, 2 * step
            if hi_m > 1e12:  # pragma: no cover
                raise InfeasibleError("internal: no integer margin satisfies the privacy constraint")
        while lo_m < hi_m:  # smallest margin in [lo_m, hi_m] accepted by the full profile
            mid = (lo_m + hi_m) // 2
            if ok(mid - 0.5, True):
                hi_m = mid
            else:
                lo_m = mid + 1
        return float(hi_m)
    if ok(t_p, True):
        return t_p
    hi = _bisect(lambda t: ok(t, False), *_doubling(lambda t: ok(t, False), t_p), 1e-9)  # the fast bound's line
    return _bisect(lambda t: ok(t, True), t_p, hi, 1e-9)


def _doubling(ok: Callable[[float], bool], t: float) -> tuple[float, float]:
    """``(lo, hi)`` with ``hi = 2^j·t`` the first doubling of ``t`` that ``ok`` accepts and ``lo`` the one before."""
    lo, hi = t, 2.0 * t
    while not ok(hi):
        lo, hi = hi, 2.0 * hi
    return lo, hi


def _bisect(ok: Callable[[float], bool], lo: float, hi: float, rel: float) -> float:
    """The bisection of ``[lo, hi]`` (``ok(hi)`` holds, ``ok`` monotone) down to a relative width ``rel``: the
    accepted end."""
    while hi - lo > rel * hi:
        mid = 0.5 * (lo + hi)
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return hi


def _sigma_star(eps: float, dlt: float, k: int, debias: bool) -> float:
    return gaussian_sigma(eps, dlt, csh_exact_sensitivity(k, debias=debias))


def csh_exact_tau(epsilon: float, delta: float, sigma: float, k: int, *, rounded: bool = True, topk: bool = False,
                  debias: bool = False) -> float:
    """Smallest margin (int, ``rounded``) or τ (float) with certified δ <= ``delta`` at ``sigma``."""
    eps = v.nonnegative("epsilon", epsilon)
    dlt = v.delta(delta)
    _check(eps, sigma, 1 if rounded else 1.0, k, rounded, topk, debias)
    sigma = float(sigma)
    if _bw(csh_exact_sensitivity(k, debias=debias) / sigma, eps)[0] * _SAFETY > dlt:
        raise InfeasibleError(
            f"sigma={sigma:g} is too small for (epsilon={eps:g}, delta={dlt:g}) with k={k}: the same-support "
            f"Gaussian part alone exceeds delta; use sigma >= {_sigma_star(eps, dlt / _SAFETY, k, debias):.6g}")
    t = _tau_min(eps, dlt, sigma, int(k), debias, rounded)
    return int(t) if rounded else t


def csh_exact_calibrate(epsilon: float, delta: float, k: int, *, rounded: bool = True, topk: bool = False,
                        debias: bool = False) -> tuple[float, float]:
    """(σ, margin) (``rounded``; integer margin) or (σ, τ) minimising the threshold under the certified
    profile (docs/proofs/csh-exact.md §5).

    σ starts just above σ*, the smallest σ with the same-support part ``BW(μ(k), ε) <= δ``. There the
    margin is at least the p_inf(k) line, which increases in σ (proof §5); if the full certified δ accepts
    that line at σ* the result is optimal. Otherwise a few larger σ are tried and the smallest margin kept.
    """
    eps = v.epsilon(epsilon)
    dlt = v.delta(delta)
    k = v.integer("k", k, lo=1)
    _check(eps, 1.0, 1 if rounded else 1.0, k, rounded, topk, debias)
    return _calibrate(float(eps), float(dlt), int(k), rounded, debias)


@functools.lru_cache(maxsize=512)
def _calibrate(eps: float, dlt: float, k: int, rounded: bool, debias: bool) -> tuple[float, float]:
    """:func:`csh_exact_calibrate` on validated arguments, cached (plan/auto calibrate the same point often)."""
    s_star = _sigma_star(eps, dlt / _SAFETY, k, debias) * (1.0 + 1e-9)
    best: tuple[float, float] | None = None
    for r in (0.0, 1e-4, 1e-3, 3e-3, 1e-2, 3e-2, 0.1, 0.3):
        s = s_star * (1.0 + r)
        try:
            t = _tau_min(eps, dlt, s, k, debias, rounded)
        except InfeasibleError:  # pragma: no cover
            continue
        if best is None or t < best[1]:
            best = (s, t)
        # optimality certificate: at this σ the answer equals the p_inf(k) line, which only rises with σ
        floor = _p_line(dlt, s, k)
        if t <= (max(1, math.ceil(floor + 0.5)) if rounded else floor * (1 + 1e-9)):
            break
    assert best is not None
    return (best[0], int(best[1])) if rounded else best


def _p_line(dlt: float, sigma: float, k: int) -> float:
    """Smallest τ (to 1e-12 relative) with certified p_inf(k) <= dlt: a lower bound on every margin."""
    lo, hi = 1e-9 * sigma, sigma
    while float(_p_inf_bracket(sigma, hi, k, np.array([k]))[1][0]) > dlt:
        lo, hi = hi, 2.0 * hi
    while hi - lo > 1e-12 * hi:
        mid = 0.5 * (lo + hi)
        if float(_p_inf_bracket(sigma, mid, k, np.array([k]))[1][0]) <= dlt:
            hi = mid
        else:
            lo = mid
    return hi
