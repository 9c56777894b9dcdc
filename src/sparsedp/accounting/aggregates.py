"""Accounting of the joint release "noisy count + noisy aggregate columns" per key (GSHM with aggregates).

The release (Karrer et al. (2022) Algorithm 1 with aggregates, Karrer et al. (2022) §1.3): for every
key with count ``c >= pre`` and ``c + Z >= pre + margin`` release ``(c + Z, A_1 + Y_1, …, A_J + Y_J)``; the
count decides release, the columns ride along. ``A_j`` is the key's grid sum (integers,
:mod:`sparsedp.aggregates`), each unit moves it by an integer of absolute value at most ``D_j`` (the column's
sensitivity in grid units) on at most ``l0`` keys, together with +1 on the count.

Continuous noise (reference)
    ``Z ~ N(0, σ²)``, ``Y_j ~ N(0, σ_j²)``: Karrer et al. Theorem 5.4 / Eq. 5.8 with the Mahalanobis
    sensitivity ``μ_o² = Σ_j D_j²/σ_j²`` (Eq. 5.1, diagonal Σ), through :mod:`.gshm` (``mu_o2``).

Discrete noise (what is sampled): ``Z ~ N_Z(0, s)``, ``Y_j ~ N_Z(0, s_j)`` (exact rationals ``s``, ``s_j``)
    Karrer's decomposition (Karrer et al. (2022) §4.1–4.6) holds for any noise law (``docs/proofs/discrete-histograms.md``
    Theorem 1); only the divergence ``H(j, ε)`` of the ``j`` above-threshold rows changes. Here each row is
    shifted by the vector ``(1, Δ_1, …, Δ_J)`` with ``|Δ_k| <= D_k``, and ``H`` is bounded by
    :func:`joint_hockey_stick` (``docs/proofs/aggregates.md`` Theorem 2):

        H(j, ε) <= R · Σ_x N_Z(0, j s)(x) · h(x),
        h(x) = E[(exp(x/s − μ₁²/2 + G) − e^ε)_+],  G ~ N(0, ν²),
        μ₁² = j/s + j Σ_k D_k²/s_k,   ν² = j Σ_k D_k² (s_k + c)/s_k²,
        R = R_count(j, s) · Π_k (1 + ω(s_k c/(s_k + c)))^j,

    where ``R_count`` is the Poisson-summation ratio of :mod:`.discrete_histograms` (sum of j count noises vs
    ``N_Z(0, js)``), ``ω(r) = 2 Σ_{m>=1} exp(−2π² r m²)`` and ``c > 0`` a free smoothing variance (the
    minimum over a few values of ``c`` is taken). The bound comes from the convex-order comparison
    ``N_Z(0, s_k) <=_cx N_Z(0, s_k) + N(0, c)``, whose density is within ``1 + ω`` of ``N(0, s_k + c)`` (proof
    doc, Lemma 1), and is non-decreasing in every ``|Δ_k|``, so ``Δ_k = D_k`` is the worst case (Lemma 3).
    When the count scale is large (``2/s <= 4e-4``) or the lattice too long, the count coordinates are
    smoothed in the same way (closed form ``R e^κ f(ν_tot, ε − κ)``), both being rigorous upper bounds.

    The δ reported by :func:`joint_gshm_delta` is then Karrer's ``max(T1, T2, T3)`` with this ``H``; it is an
    upper bound of the δ of the noise actually sampled; the calibrated σ is within 0.01% of the continuous
    reference's at the default allocation, and the exact-enumeration test checks the bound on tiny inputs.

Allocation: :func:`calibrate_joint_gshm` gives column ``k`` the scale ``s_k = D_k² s / w_k`` (rounded up to a
short rational), i.e. every column has the same per-row μ_k² = D_k²/s_k ≈ w_k/s as the count times its
weight (default ``w_k = 1``: σ_k proportional to the sensitivity). Independent columns give a diagonal Σ; a
correlated discrete Gaussian has no exact sampler, so a general Σ for the discrete release is sampled as
``L z`` with an integer unit lower-triangular ``L`` (:mod:`.column_shape`, ``docs/proofs/aggregates.md`` §7,
``release(..., column_shape=…)``), accounted by the same bound with the shifts ``L⁻¹Δ``. The continuous
reference also takes a general Σ: :func:`mahalanobis_sensitivity` computes Eq. 5.1's μ_o² for any positive
definite column covariance (``joint_gshm_delta_continuous(..., column_covariance=)``,
``calibrate_joint_gshm_continuous(..., column_shape=)``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Callable, Literal, Protocol, Sequence, overload

import numpy as np
import numpy.typing as npt
from ._special import special

from .. import _validate as v
from ..errors import InfeasibleError, InvalidParameterError
from ._types import Scale
from .discrete import dgauss_logpmf, dgauss_sf, dgauss_variance
from .discrete_histograms import (_log_ratio_iid, _omega, _smallest_margin, _t1_margin, calibrate_gshm_discrete,
                                  dgauss_shift_hockey_stick, rational_up)
from .gaussian import _delta_core, _gaussian_mu
from .gshm import _minimise_over_sigma, _smallest_tau, _x_for_inf, gshm_delta

__all__ = [
    "JointDeltaParts", "JointDiscreteCalibration", "JointContinuousCalibration", "AggregateImpact",
    "joint_hockey_stick", "joint_gshm_delta", "column_scales", "calibrate_joint_gshm",
    "joint_gshm_delta_continuous", "calibrate_joint_gshm_continuous", "aggregate_impact", "mahalanobis_sensitivity",
]

#: above this many lattice points in the count sum, the count coordinates are smoothed too (closed form)
_SUM_POINTS = 400_000
#: smoothing is "free" when it inflates a coordinate's μ² by at most this relative amount (then only c = 2)
_TIGHT = 4e-4
#: smoothing variances tried (the bound holds for every c > 0; the smallest result is used)
_SMOOTHING = (2.0, 1.0, 0.5, 0.25)
#: relative accuracy slack of log_ndtr / logsumexp, folded into R (conservative)
_REL_SLACK = 1e-12


class ColumnNoiseShape(Protocol):
    """What the joint calibration reads of a fitted column shape (:class:`.column_shape.ColumnShapeFit`, which
    sits above this module): ``diagonal`` (independent columns), the integer unit lower-triangular ``lower`` (L)
    and the grid refinements ``refine`` (F_k)."""

    @property
    def diagonal(self) -> bool: ...
    @property
    def lower(self) -> tuple[tuple[int, ...], ...]: ...
    @property
    def refine(self) -> tuple[int, ...]: ...


@dataclass(frozen=True)
class JointDeltaParts:
    """δ of the joint release and its parts (Karrer Eq. 5.8 terms, discrete analogue).

    ``infinite`` = T1 = 1 − b^{l0}; ``forward`` = max_a T2(a); ``reverse`` = max_a T3(a);
    ``release_probability_at_pre_threshold`` = p = P[Z >= margin]; ``total`` = max of the three.
    """

    total: float
    infinite: float
    forward: float
    reverse: float
    release_probability_at_pre_threshold: float


@dataclass(frozen=True)
class JointDiscreteCalibration:
    """The exact noise recipe of a discrete joint release at (ε, δ).

    ``count_sigma2`` and ``column_sigma2s`` are the exact rationals the samplers use (``N_Z(0, ·)``);
    ``margin`` the integer release margin (release iff ``count + Z >= pre_threshold + margin``);
    ``column_sensitivities`` the grid-unit sensitivities accounted for; ``weights`` the μ² allocation;
    ``parts`` the δ actually achieved (``parts.total <= delta``).
    """

    epsilon: float
    delta: float
    l0: int
    count_sigma2: Fraction
    margin: int
    column_sigma2s: tuple[Fraction, ...]
    column_sensitivities: tuple[int, ...]
    weights: tuple[float, ...]
    parts: JointDeltaParts
    #: a general column shape (``release(..., column_shape=…)``): its :class:`~.column_shape.ColumnShapeFit`
    #: (integer unit lower-triangular ``L``, refinements ``F_k``); ``None``: independent columns. With a fit
    #: whose ``L`` is not the identity, ``column_sigma2s`` are the scales of the independent ``z_k`` and the
    #: column noise is ``L z`` on grids ``F_k`` times finer (``docs/proofs/aggregates.md`` §7).
    shape: ColumnNoiseShape | None = None

    @property
    def count_noise_std(self) -> float:
        return math.sqrt(dgauss_variance(self.count_sigma2))

    @property
    def column_variances(self) -> tuple[float, ...]:
        """Variance of each column's noise in (the aggregate's own) grid units: ``Var N_Z(0, s_k)``, or with a
        general shape ``Σ_l L_kl² Var z_l / F_k²``."""
        var = [dgauss_variance(s) for s in self.column_sigma2s]
        if self.shape is None or self.shape.diagonal:
            return tuple(var)
        lo, f = self.shape.lower, self.shape.refine
        return tuple(sum(lo[k][m] ** 2 * var[m] for m in range(k + 1)) / f[k] ** 2 for k in range(len(var)))

    @property
    def column_noise_stds(self) -> tuple[float, ...]:
        """Standard deviation of each column's noise, in grid units (multiply by the granularity)."""
        return tuple(math.sqrt(x) for x in self.column_variances)


@dataclass(frozen=True)
class JointContinuousCalibration:
    """Continuous reference: count σ, margin τ, column σ_j and μ_o² = Σ D_j²/σ_j² (Karrer et al. (2022) Thm 5.4)."""

    epsilon: float
    delta: float
    l0: int
    sigma: float
    tau: float
    column_sigmas: tuple[float, ...]
    mu_o2: float
    delta_achieved: float
    analysis: str
    #: the columns' noise covariance when it is not diagonal (``column_shape``), else None
    column_covariance: tuple[tuple[float, ...], ...] | None = None


@dataclass(frozen=True)
class AggregateImpact:
    """What the aggregate columns cost: the count's noise and margin without and with them (for ``plan``)."""

    count_sigma_without: float
    margin_without: int
    count_sigma_with: float
    margin_with: int
    column_noise_stds: tuple[float, ...]   # grid units
    calibration_with: JointDiscreteCalibration


# ------------------------------------------------------------------ validation


def _columns(column_sigma2s: Sequence[Scale], column_sensitivities: Sequence[int]) -> tuple[list[float], list[int]]:
    if len(column_sigma2s) != len(column_sensitivities):
        raise InvalidParameterError(f"column_sigma2s ({len(column_sigma2s)}) and column_sensitivities "
                                    f"({len(column_sensitivities)}) must have the same length")
    ss = [float(v.rational(f"column_sigma2s[{i}]", x)) for i, x in enumerate(column_sigma2s)]
    ds = [v.integer(f"column_sensitivities[{i}]", d, lo=0) for i, d in enumerate(column_sensitivities)]
    return ss, ds


def _weights(weights: Sequence[float] | None, n: int) -> list[float]:
    if weights is None:
        return [1.0] * n
    w = [v.positive(f"weights[{i}]", x) for i, x in enumerate(weights)]
    if len(w) != n:
        raise InvalidParameterError(f"weights must have one entry per column ({n}), got {len(w)}")
    return w


# ------------------------------------------------------------------ the divergence bound H(j, ε)


def _log_h(u: np.ndarray, nu: float, eps: float) -> np.ndarray:
    """log E[(exp(u + G) − e^ε)_+], G ~ N(0, ν²), ν > 0 (Black–Scholes form), vectorised over u."""
    d2 = (u - eps) / nu
    t1 = u + 0.5 * nu * nu + special.log_ndtr(d2 + nu)
    t2 = eps + special.log_ndtr(d2)
    with np.errstate(divide="ignore", invalid="ignore"):
        diff = np.minimum(t2 - t1, 0.0)
        out = t1 + np.log(-np.expm1(diff))
    return np.where(np.isfinite(out), out, -np.inf)


def _bound_smooth_count(j: int, eps: float, s: float, m_c: float, extra_c: float, log_r_cols: float,
                        c0: float) -> float:
    """Everything smoothed (count too, with variance c0): R e^κ f(ν_tot, ε − κ)."""
    mu1 = j / s + m_c
    nu2 = j * (s + c0) / (s * s) + m_c + extra_c
    kappa = 0.5 * (nu2 - mu1)
    log_r = log_r_cols + j * math.log1p(_omega(s * c0 / (s + c0)))
    nu = math.sqrt(nu2)
    f = float(_delta_core(np.array([nu]), np.array([eps - kappa]))[0])
    return math.exp(log_r + kappa + _REL_SLACK) * f


def _bound_exact_count(j: int, eps: float, s: float, m_c: float, extra_c: float, log_r_cols: float) -> float:
    """Count sum kept discrete (law within R_count of N_Z(0, js)), columns smoothed: a lattice sum.

    Window ``|x − j| <= W``, ``W = 14√(js) + 2``; the neglected terms are bounded rigorously: ``h(x) <=
    e^{x/s − μ₁²/2 + ν²/2}`` and ``N_Z(0, js)(x) e^{x/s} = e^{j/(2s)} N_Z(0, js)(x − j)`` (j an integer), so
    they sum to at most ``e^{e_c/2} P[|N_Z(0, js)| > W]`` (times R).
    """
    js = j * s
    w = math.ceil(14.0 * math.sqrt(js)) + 2   # neglected tail < e^-98 (bounded below, not dropped)
    x = np.arange(j - w, j + w + 1, dtype=float)
    mu1 = j / s + m_c
    nu = math.sqrt(m_c + extra_c)
    terms = dgauss_logpmf(x, js) + _log_h(x / s - 0.5 * mu1, nu, eps)
    top = float(np.max(terms))
    total = 0.0 if top == -math.inf else math.exp(top + math.log(float(np.sum(np.exp(terms - top)))))
    total += math.exp(0.5 * extra_c) * 2.0 * dgauss_sf(w + 1, js)
    log_r = log_r_cols + _log_ratio_iid(j, s) + _REL_SLACK
    return math.exp(log_r) * total


def joint_hockey_stick(j: int, epsilon: float, count_sigma2: Scale, column_sigma2s: Sequence[Scale],
                       column_sensitivities: Sequence[int]) -> float:
    """Upper bound of H_{e^ε} between ``j`` rows of the joint release shifted by a unit and unshifted.

    Each row: count noise ``N_Z(0, count_sigma2)`` shifted by 1, column ``k`` noise ``N_Z(0, column_sigma2s[k])``
    shifted by any integer of absolute value at most ``column_sensitivities[k]``; the bound holds for every such
    shift pattern and both directions (``docs/proofs/aggregates.md`` Theorem 2; module docstring). Any real ε;
    ``j = 0`` gives ``max(0, 1 − e^ε)``. Without columns (or all sensitivities 0) it is
    :func:`~.discrete_histograms.dgauss_shift_hockey_stick`.
    """
    j = v.integer("j", j, lo=0)
    eps = v.epsilon_any(epsilon)
    s = float(v.rational("count_sigma2", count_sigma2))
    ss, ds = _columns(column_sigma2s, column_sensitivities)
    return _hs(j, eps, s, ss, ds)


def _hs(j: int, eps: float, s: float, ss: list[float], ds: list[int]) -> float:
    """Diagonal Σ: the per-row shift bounds are ``μ² = Σ D_k²/s_k`` and ``η = Σ D_k²/s_k²`` (Lemma 3:
    every column at its sensitivity) over the columns that can move."""
    cols = [(sk, dk) for sk, dk in zip(ss, ds) if dk > 0]
    if not cols:
        return _hs_rows(j, eps, s, [], 0.0, 0.0)
    return _hs_rows(j, eps, s, [sk for sk, _ in cols], sum(dk * dk / sk for sk, dk in cols),
                    sum(dk * dk / (sk * sk) for sk, dk in cols))


def _hs_rows(j: int, eps: float, s: float, scales: list[float], mu2: float, eta: float) -> float:
    """Theorem 2's bound for ``j`` rows whose column coordinates (independent ``N_Z(0, scales[i])``, only those
    that can move) are shifted by integer vectors ``w`` with ``Σ_i w_i²/s_i <= mu2`` and ``Σ_i w_i²/s_i² <= eta``
    (per row); then ``m_c <= j·mu2``, ``e_c <= j·c·eta`` and the bound is non-decreasing in both (Lemma 3).
    ``docs/proofs/aggregates.md`` §2 (diagonal Σ) and §7 (unimodular general Σ)."""
    floor = max(0.0, -math.expm1(eps))
    if j <= 0:
        return floor
    if not scales or mu2 <= 0.0:
        return dgauss_shift_hockey_stick(j, eps, s)
    m_c = j * mu2
    best = math.inf
    s_min = min(scales)
    # c = 2 costs a relative 2/s_k of the column μ²; smaller c only help (and are only tried) for small s_k
    cands = _SMOOTHING[:1] if 2.0 / s_min <= _TIGHT else _SMOOTHING
    for c in cands:
        w_max = max(_omega(sk * c / (sk + c)) for sk in scales)
        if w_max >= 0.5:
            continue
        extra_c = j * c * eta
        log_r_cols = j * sum(math.log1p(_omega(sk * c / (sk + c))) for sk in scales)
        if 2.0 / s <= _TIGHT or 40.0 * math.sqrt(j * s) > _SUM_POINTS:
            # count smoothed too (relative cost c0/s of the count μ²): closed form
            val = min(_bound_smooth_count(j, eps, s, m_c, extra_c, log_r_cols, c0) for c0 in _SMOOTHING
                      if _omega(s * c0 / (s + c0)) < 0.5)
        else:
            val = _bound_exact_count(j, eps, s, m_c, extra_c, log_r_cols)
        best = min(best, val)
    if best == math.inf:
        raise InfeasibleError("column noise scales too small for the joint bound; use column scales >= 1")
    return min(1.0, max(best, floor))


# ------------------------------------------------------------------ Karrer's decomposition with columns


def _coarse_blocks(l0: int) -> tuple[list[int], list[int]]:
    """Blocks [lo, hi] covering a = 0..l0−1: single points for a <= 8 and a_+ = l0 − a <= 8, geometric
    (about 2 x 32 blocks) in between (the rigorous block bound of ``discrete-histograms.md`` §5)."""
    if l0 <= 32:
        a = list(range(l0))
        return a, a
    pts = set(range(0, 9)) | set(range(l0 - 8, l0))
    pts |= {int(round(x)) for x in np.geomspace(8, l0, 32)}
    pts |= {l0 - int(round(x)) for x in np.geomspace(8, l0, 32)}
    lo = sorted(x for x in pts if 0 <= x <= l0 - 1)
    hi = [x - 1 for x in lo[1:]] + [l0 - 1]
    return lo, hi


def _karrer_max_coarse(l0: int, log_b: float, eps: float,
                       hs: Callable[[int, float], float]) -> tuple[float, dict[str, float]]:
    """max(T1, T2, T3) (Karrer Eq. 5.8 structure; ``discrete-histograms.md`` Theorem 1) bounded blockwise:
    for a in [a_lo, a_hi], T2(a) <= 1 − β(a_hi)(1 − H(l0 − a_lo, ε − a_lo ln b)) and
    T3(a) <= H(l0 − a_lo, ε + a_hi ln b) (H non-decreasing in j, non-increasing in ε; −ln b >= 0)."""
    t1 = -math.expm1(l0 * log_b)
    lo, hi = _coarse_blocks(l0)
    best2 = best3 = 0.0
    for a_lo, a_hi in zip(lo, hi):
        j = l0 - a_lo
        lbeta = a_hi * log_b
        t2 = -math.expm1(lbeta) + math.exp(lbeta) * hs(j, eps - a_lo * log_b)
        t3 = hs(j, eps + a_hi * log_b)
        best2, best3 = max(best2, t2), max(best3, t3)
    return max(t1, best2, best3), {"infinite": t1, "forward": best2, "reverse": best3}


@overload
def joint_gshm_delta(epsilon: float, count_sigma2: Scale, margin: int, l0: int, column_sigma2s: Sequence[Scale],
                     column_sensitivities: Sequence[int], *, parts: Literal[False] = False) -> float: ...
@overload
def joint_gshm_delta(epsilon: float, count_sigma2: Scale, margin: int, l0: int, column_sigma2s: Sequence[Scale],
                     column_sensitivities: Sequence[int], *, parts: Literal[True]) -> JointDeltaParts: ...
def joint_gshm_delta(epsilon: float, count_sigma2: Scale, margin: int, l0: int, column_sigma2s: Sequence[Scale],
                     column_sensitivities: Sequence[int], *, parts: bool = False) -> float | JointDeltaParts:
    """δ(ε) of the joint discrete release: count ``N_Z(0, count_sigma2)``, integer ``margin``, columns
    ``N_Z(0, column_sigma2s[k])`` of sensitivity ``column_sensitivities[k]`` (grid units), ``l0`` keys per unit.

    Discrete analogue of Karrer et al. Thm 5.4 / Eq. 5.8 with aggregate columns (Karrer et al. (2022) §4.6, Eq. 5.1):
    ``max(T1, max_a T2(a), max_a T3(a))`` with ``p = P[Z >= margin]`` and ``H`` of :func:`joint_hockey_stick`
    (``docs/proofs/aggregates.md``). An upper bound of the δ of exactly this sampled noise. ``parts=True``
    returns a :class:`JointDeltaParts`.
    """
    eps, s, m, k = joint_count_args(epsilon, count_sigma2, margin, l0)
    ss, ds = _columns(column_sigma2s, column_sensitivities)
    return _joint_delta(eps, s, m, k, lambda jj, e: _hs(int(jj), e, s, ss, ds), parts)


def joint_count_args(epsilon: float, count_sigma2: Scale, margin: int, l0: int) -> tuple[float, float, int, int]:
    """The validated ``(ε, count σ², margin, l0)`` of a joint discrete δ (both accountants' common arguments)."""
    eps = v.epsilon_any(epsilon)
    s = float(v.rational("count_sigma2", count_sigma2))
    if s < 1:
        raise InvalidParameterError(f"count_sigma2 must be >= 1 for the discrete accountant, got {count_sigma2!r}")
    return eps, s, v.integer("margin", margin, lo=0), v.integer("l0", l0, lo=1)


@overload
def _joint_delta(eps: float, s: float, m: int, k: int, hs: Callable[[int, float], float],
                 parts: Literal[False]) -> float: ...
@overload
def _joint_delta(eps: float, s: float, m: int, k: int, hs: Callable[[int, float], float],
                 parts: Literal[True]) -> JointDeltaParts: ...
@overload
def _joint_delta(eps: float, s: float, m: int, k: int, hs: Callable[[int, float], float],
                 parts: bool) -> float | JointDeltaParts: ...
def _joint_delta(eps: float, s: float, m: int, k: int, hs: Callable[[int, float], float],
                 parts: bool) -> float | JointDeltaParts:
    """Karrer's ``max(T1, T2, T3)`` with the divergence bound ``hs(j, ε)`` (shared by the diagonal and the
    unimodular general-Σ accountants)."""
    p = dgauss_sf(m, s)
    log_b = math.log1p(-p)
    total, info = _karrer_max_coarse(k, log_b, eps, hs)
    if not parts:
        return total
    return JointDeltaParts(total=total, infinite=info["infinite"], forward=info["forward"],
                           reverse=info["reverse"], release_probability_at_pre_threshold=p)


def column_scales(count_sigma2: Scale, column_sensitivities: Sequence[int],
                  weights: Sequence[float] | None = None) -> tuple[Fraction, ...]:
    """The default allocation: ``s_k = D_k² · s / w_k`` rounded up to a multiple of 2^-20 (so each column's
    per-row μ_k² = D_k²/s_k is at most w_k/s; w_k = 1: σ_k ∝ sensitivity, every column as private as the
    count)."""
    s = v.rational("count_sigma2", count_sigma2)
    ds = [v.integer(f"column_sensitivities[{i}]", d, lo=1) for i, d in enumerate(column_sensitivities)]
    w = _weights(weights, len(ds))
    out = []
    for d, wk in zip(ds, w):
        sk = rational_up(float(s) * d * d / wk)
        while sk * Fraction(wk) < s * d * d:  # float guard: μ_k² <= w_k/s exactly
            sk += Fraction(1, 1 << 20)
        out.append(sk)
    return tuple(out)


def calibrate_joint_gshm(epsilon: float, delta: float, l0: int, column_sensitivities: Sequence[int],
                         weights: Sequence[float] | None = None) -> JointDiscreteCalibration:
    """Discrete joint release at (ε, δ): smallest count scale ``s`` (short rational) and integer margin.

    Columns get :func:`column_scales` (``s_k = D_k² s / w_k``). ``s`` starts at the continuous analytic
    optimum for per-row μ² = (1 + Σ w_k)/s (Karrer et al. (2022) §5.3 item 2 with μ_o² = Σ w_k / s), rounded up, and is
    raised by 0.01% steps until the all-above-threshold divergence ``H(l0, ε) <= δ``; the margin is then the
    smallest integer with :func:`joint_gshm_delta` ``<= δ`` (δ is non-increasing in the margin).
    """
    eps = v.epsilon(epsilon)
    dlt = v.delta(delta)
    k = v.integer("l0", l0, lo=1)
    ds = [v.integer(f"column_sensitivities[{i}]", d, lo=1) for i, d in enumerate(column_sensitivities)]
    w = _weights(weights, len(ds))
    s, sks, margin, parts = _calibrate(
        eps, dlt, k, sum(w), lambda s_: column_scales(s_, ds, w),
        lambda jj, e, s_, sks_: _hs(int(jj), e, float(s_), [float(x) for x in sks_], ds))
    return JointDiscreteCalibration(epsilon=eps, delta=dlt, l0=k, count_sigma2=s, margin=margin,
                                    column_sigma2s=tuple(sks), column_sensitivities=tuple(ds),
                                    weights=tuple(w), parts=parts)


#: the column scales at a count scale s (a column allocation)
ScalesOf = Callable[[Fraction], tuple[Fraction, ...]]
#: the divergence bound H(j, ε) of j rows at count scale s and column scales
HsOf = Callable[[int, float, Fraction, tuple[Fraction, ...]], float]


def _calibrate(eps: float, dlt: float, k: int, lam: float, scales_of: ScalesOf,
               hs_of: HsOf) -> tuple[Fraction, tuple[Fraction, ...], int, JointDeltaParts]:
    """The discrete joint calibration loop, for any column allocation: ``scales_of(s)`` gives the column scales
    at count scale ``s``; ``hs_of(j, ε, s, scales)`` the divergence bound. ``s`` starts at the continuous
    analytic optimum for per-row μ² = (1 + λ)/s (Karrer et al. (2022) §5.3 item 2 with μ_o² = λ/s), rounded up, and is
    raised by 0.01% steps until ``H(l0, ε) <= δ``; the margin is the smallest integer with δ <= target.
    Returns ``(s, scales, margin, parts)``."""
    mu_star = _gaussian_mu(eps, dlt)
    s = rational_up(max(1.0, k * (1.0 + lam) / (mu_star * mu_star)))
    for _ in range(3000):
        sks = scales_of(s)
        if hs_of(k, eps, s, sks) <= dlt * (1 - 1e-9):
            break
        s = rational_up(float(s) * 1.0001)
    else:  # pragma: no cover
        raise InfeasibleError(f"no discrete scale found for epsilon={eps}, delta={dlt}, l0={k}")

    def hs(jj: int, e: float) -> float:
        return hs_of(jj, e, s, sks)

    start = _t1_margin(lambda m: dgauss_sf(m, s), k, dlt)
    margin = _smallest_margin(lambda m: _joint_delta(eps, float(s), m, k, hs, False), dlt, start)
    return s, sks, margin, _joint_delta(eps, float(s), margin, k, hs, True)


# ------------------------------------------------------------------ continuous reference (Thm 5.4, μ_o²)


#: above this many columns the vertex enumeration of :func:`mahalanobis_sensitivity` gives way to a bound
_VERTEX_COLUMNS = 20


def mahalanobis_sensitivity(column_covariance: npt.ArrayLike, column_sensitivities: Sequence[float]) -> float:
    """μ_o² = max over |Δ_k| <= D_k of Δᵀ Σ⁻¹ Δ (Karrer et al. (2022) Eq. 5.1) for a general (non-diagonal) column noise
    covariance Σ (symmetric positive definite, J × J) and per-column sensitivities D (value units).

    A unit changes column k of a key by some Δ_k with |Δ_k| <= D_k, independently per column, so the neighbours'
    difference vectors fill the box B = Π[−D_k, D_k]. q(Δ) = ΔᵀPΔ (P = Σ⁻¹ positive definite) is convex, so its
    maximum over the polytope B is attained at a vertex Δ = (±D_k) (a convex function on a polytope is maximised
    at an extreme point), and q(−Δ) = q(Δ) leaves 2^{J−1} sign patterns, enumerated exactly for J <= 20. For more
    columns the bound Σ_{k,l} D_k D_l |P_kl| >= q(Δ) on B is used (conservative; exact when P is diagonal). Diagonal
    Σ gives Σ_k D_k²/σ_k². P is computed by a Cholesky solve; the result is raised by a relative 1e-9 to cover
    floating-point error (conservative). ``docs/proofs/aggregates.md`` §6.
    """
    cov = np.asarray(column_covariance, dtype=float)
    d = np.array([v.nonnegative(f"column_sensitivities[{i}]", x) for i, x in enumerate(column_sensitivities)])
    j = d.size
    if cov.shape != (j, j):
        raise InvalidParameterError(f"column_covariance must be {j} x {j} (one row and column per aggregate column), "
                                    f"got shape {cov.shape}")
    if not np.all(np.isfinite(cov)) or not np.allclose(cov, cov.T, rtol=1e-12, atol=0.0):
        raise InvalidParameterError("column_covariance must be a finite symmetric matrix")
    try:
        chol = np.linalg.cholesky(cov)
    except np.linalg.LinAlgError:
        raise InvalidParameterError("column_covariance must be positive definite") from None
    if j == 0:
        return 0.0
    inv_l = np.linalg.solve(chol, np.eye(j))
    prec = inv_l.T @ inv_l                                   # Σ⁻¹ = L⁻ᵀ L⁻¹
    if j <= _VERTEX_COLUMNS:
        signs = np.array([[1.0] + [1.0 - 2.0 * ((m >> b) & 1) for b in range(j - 1)]
                          for m in range(1 << (j - 1))])
        verts = signs * d
        # ‖L⁻¹Δ‖² for every vertex (equal to ΔᵀΣ⁻¹Δ, and non-negative by construction)
        val = float(np.max(np.sum((verts @ inv_l.T) ** 2, axis=1)))
    else:
        val = float(d @ np.abs(prec) @ d)
    return val * (1.0 + 1e-9)


def joint_gshm_delta_continuous(epsilon: float, sigma: float, tau: float, l0: int,
                                column_sigmas: Sequence[float] | None,
                                column_sensitivities: Sequence[float], analysis: str = "exact", *,
                                column_covariance: npt.ArrayLike | None = None) -> float:
    """Karrer et al. Thm 5.4 / Eq. 5.8 with μ_o² from Eq. 5.1; continuous noise.

    Diagonal Σ (``column_sigmas``): μ_o² = Σ_j D_j²/σ_j². General Σ (``column_covariance``, a J × J covariance of
    the columns' joint Gaussian noise, independent of the count's; give ``column_sigmas=None``): μ_o² =
    :func:`mahalanobis_sensitivity`.
    """
    if column_covariance is not None:
        if column_sigmas is not None:
            raise InvalidParameterError("give column_sigmas (diagonal) or column_covariance (general), not both")
        mu_o2 = mahalanobis_sensitivity(column_covariance, column_sensitivities)
        return gshm_delta(epsilon, sigma, tau, l0, analysis=analysis, mu_o2=mu_o2)
    if column_sigmas is None:
        raise InvalidParameterError("give column_sigmas (diagonal) or column_covariance (general)")
    sig = [v.positive(f"column_sigmas[{i}]", x) for i, x in enumerate(column_sigmas)]
    ds = [v.nonnegative(f"column_sensitivities[{i}]", d) for i, d in enumerate(column_sensitivities)]
    if len(sig) != len(ds):
        raise InvalidParameterError("column_sigmas and column_sensitivities must have the same length")
    mu_o2 = sum((d / s) ** 2 for d, s in zip(ds, sig))
    return gshm_delta(epsilon, sigma, tau, l0, analysis=analysis, mu_o2=mu_o2)


def calibrate_joint_gshm_continuous(epsilon: float, delta: float, l0: int, column_sensitivities: Sequence[float],
                                    weights: Sequence[float] | None = None, analysis: str = "exact", *,
                                    column_shape: npt.ArrayLike | None = None) -> JointContinuousCalibration:
    """Continuous reference calibration with σ_j = D_j σ / √w_j (so μ_o² = Σ w_j / σ², Karrer et al. (2022) Eq. 5.1).

    General Σ: with ``column_shape`` S (J × J, positive definite; ``weights`` not used) the column noise is
    N(0, σ²·S), μ_o² = λ/σ² with λ = :func:`mahalanobis_sensitivity` (S, D), and the result carries
    ``column_covariance`` = σ²·S (``column_sigmas`` its diagonal's square roots).

    σ_G solves f(√(l0 (1 + Σ w))/σ, ε) = δ (Karrer et al. (2022) §5.3 item 2); the margin is the smallest τ of Eq. 5.8 at
    that σ (:func:`.gshm.gshm_tau` with μ_o² = Σ w/σ²); if that does not reach the δ_inf lower bound
    σ·Q^{-1}(q(δ)), τ(σ) is minimised over σ >= σ_G as in :func:`.gshm.gshm_calibrate`.
    """
    eps = v.epsilon(epsilon)
    dlt = v.delta(delta)
    k = v.integer("l0", l0, lo=1)
    ds = [v.positive(f"column_sensitivities[{i}]", d) for i, d in enumerate(column_sensitivities)]
    an = v.choice("analysis", analysis, ("exact", "add", "fdp"))
    if column_shape is not None:
        if weights is not None:
            raise InvalidParameterError("give weights (diagonal) or column_shape (general), not both")
        shape = np.asarray(column_shape, dtype=float)
        lam = mahalanobis_sensitivity(shape, ds)
    else:
        w = _weights(weights, len(ds))
        lam = sum(w)
    mu_star = _gaussian_mu(eps, dlt)
    sg = math.sqrt(k * (1.0 + lam)) / mu_star
    while float(_delta_core(np.array([math.sqrt(k * (1 + lam)) / sg]), np.array([eps]))[0]) > dlt:
        sg = math.nextafter(sg, math.inf)

    def tau_at(sig: float) -> float:
        try:
            return _smallest_tau(eps, dlt, sig, k, lam / (sig * sig), an)
        except InfeasibleError:
            return math.inf

    sigma, tau = sg, tau_at(sg)
    if an == "add" or not tau <= sg * _x_for_inf(dlt, k) * (1.0 + 1e-9):
        sigma, _ = _minimise_over_sigma(tau_at, sg)
        tau = _smallest_tau(eps, dlt, sigma, k, lam / (sigma * sigma), an)
    if column_shape is not None:
        cov_m = shape * (sigma * sigma)
        cov = tuple(tuple(float(x) for x in row) for row in cov_m)
        col = tuple(float(math.sqrt(x)) for x in np.diag(cov_m))
    else:
        cov = None
        col = tuple(d * sigma / math.sqrt(wk) for d, wk in zip(ds, w))
    mu_o2 = lam / (sigma * sigma)
    return JointContinuousCalibration(epsilon=eps, delta=dlt, l0=k, sigma=float(sigma), tau=float(tau),
                                      column_sigmas=col, mu_o2=mu_o2,
                                      delta_achieved=gshm_delta(eps, sigma, tau, k, an, mu_o2), analysis=an,
                                      column_covariance=cov)


# ------------------------------------------------------------------ plan / auto


def aggregate_impact(epsilon: float, delta: float, l0: int, column_sensitivities: Sequence[int],
                     weights: Sequence[float] | None = None) -> AggregateImpact:
    """The count's σ and margin without the aggregate columns (:func:`.discrete_histograms.
    calibrate_gshm_discrete`) and with them (:func:`calibrate_joint_gshm`), for ``plan``/``auto`` reports."""
    base = calibrate_gshm_discrete(epsilon, delta, l0)
    joint = calibrate_joint_gshm(epsilon, delta, l0, column_sensitivities, weights)
    return AggregateImpact(count_sigma_without=base.sigma, margin_without=int(base.tau),
                           count_sigma_with=math.sqrt(float(joint.count_sigma2)), margin_with=joint.margin,
                           column_noise_stds=joint.column_noise_stds, calibration_with=joint)
