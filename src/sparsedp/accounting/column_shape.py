"""A general (correlated) column noise covariance for the SECURE joint release: unimodular integer noise.

Karrer et al. (2022, Algorithm 1, Karrer et al. (2022) §1.3) add ``m ~ N(0, Σ)`` to the
aggregate columns for any positive definite Σ, with the Mahalanobis sensitivity μ_o² of Eq. 5.1. The secure
release samples exact integer noise instead; a correlated discrete Gaussian has no exact sampler, but this
does (``docs/proofs/aggregates.md`` §7, beyond the paper):

    Y = L z,   z_k ~ N_Z(0, s_k) independent (exact CKS20 samplers),   L integer, unit lower-triangular.

``L`` is unimodular (``det L = 1``, ``L⁻¹`` integer), so ``y ↦ A + L y`` is a bijection of ℤ^J and the outputs
``A + Lz`` and ``A + Δ + Lz`` are the images of ``z`` and ``z + L⁻¹Δ`` under the same bijection: the pair has
exactly the divergence of independent discrete Gaussians shifted by the INTEGER vector ``w = L⁻¹Δ``. The joint
accountant's Theorem 2 depends on the shifts only through ``Σ_k w_k²/s_k`` and ``Σ_k w_k²/s_k²`` (Lemma 3:
non-decreasing in both), both convex in Δ, so over the box ``|Δ_k| <= D_k`` each is maximised at a vertex
(:func:`unimodular_shift_bounds`: exact integer arithmetic over the ``2^{J−1}`` sign patterns for
``J <= 12``, the bounding box of ``L⁻¹B`` beyond). The first is Eq. 5.1's μ_o² of the covariance
``L diag(s) Lᵀ`` (``ΔᵀΣ⁻¹Δ = ‖diag(s)^{-1/2} L⁻¹Δ‖²``).

Fitting a requested shape (:func:`fit_column_shape`): the user gives ``S`` (value units², J × J over the
distinct noisy columns, the columns' noise covariance per unit of the count's noise variance: the release
uses ≈ ``σ²·S``, σ² calibrated; diagonal ``S = diag((D_k g_k)²/w_k)`` is the default allocation with weights
``w_k``). In grid units ``S_g = G⁻¹SG⁻¹`` has the exact (rational) factorisation ``L₀ D₀ L₀ᵀ``; ``L`` is
``L₀`` rounded to integers. Rounding ``L₀[k, l]`` moves row ``k`` of the noise by at most ``½·z_l``, which is
small against row ``k``'s own noise when column ``k``'s noise grid is fine against column ``l``'s: the noise of
column ``k`` is added on a grid ``F_k`` times finer than its aggregate's (``F_k`` a power of two; the grid
sum ``A_k`` becomes ``F_k A_k``, sensitivity ``F_k D_k``), which multiplies ``L₀[k, l]`` by ``F_k/F_l``.
``F_k`` is the smallest power of two for which every entry of row ``k`` of the used covariance is within
``tolerance·√(T_kk T_ll)`` of the target ``T = S_g``; the report states the covariance actually used
(:meth:`ColumnShapeFit.noise_covariance`) and this deviation. Finer grids cost no privacy (μ_o² in value units
is unchanged up to the lattice effects the accountant measures); they only make the integers larger
(``F_k D_k <= 2^40``, scales ``<= 2^80``).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Iterable, Literal, Sequence, overload

import numpy as np
import numpy.typing as npt

from .. import _validate as v
from ..errors import InfeasibleError, InvalidParameterError
from ._types import FloatArray, Scale
from .aggregates import (JointDeltaParts, JointDiscreteCalibration, _calibrate, _hs_rows, _joint_delta,
                         calibrate_joint_gshm, joint_count_args)
from .discrete import dgauss_variance
from .discrete_histograms import rational_up

__all__ = ["SHAPE_TOLERANCE", "ColumnShapeFit", "fit_column_shape", "unimodular_shift_bounds",
           "joint_hockey_stick_unimodular", "joint_gshm_delta_unimodular", "calibrate_joint_gshm_shaped"]

#: the largest normalised deviation |C_used − T|_kl / √(T_kk T_ll) a fitted shape may have
SHAPE_TOLERANCE = 1e-3
#: columns up to which the vertices of the box are enumerated exactly (beyond: the bounding box of L⁻¹B)
_VERTEX_COLUMNS = 12
#: the largest noise-grid sensitivity F_k·D_k (as the aggregates' own grid limit)
_MAX_FINE = 2 ** 40
#: the exact sampler's largest scale
_MAX_SCALE = 2 ** 80
#: relative inflation covering the float evaluation of the per-row shift bounds (positive sums of J terms)
_FLOAT_SLACK = 1e-12


@dataclass(frozen=True)
class ColumnShapeFit:
    """A requested column shape fitted to unimodular integer noise (module docstring).

    ``requested``: S (value units², symmetrised); ``steps``: the aggregates' grid steps g_k; ``sensitivities``:
    D_k in those grids; ``lower``: the integer unit lower-triangular L (noise grids); ``refine``: F_k (the noise
    grid of column k is g_k/F_k); ``innovations``: D₀_k in noise-grid units² per unit count variance (the
    ``s_k`` are ≈ s·D₀_k); ``deviation``: the largest normalised deviation of ``L diag(D₀) Lᵀ`` from the
    target.
    """

    requested: tuple[tuple[float, ...], ...]
    steps: tuple[float, ...]
    sensitivities: tuple[int, ...]
    lower: tuple[tuple[int, ...], ...]
    refine: tuple[int, ...]
    innovations: tuple[Fraction, ...]
    deviation: float
    tolerance: float

    @property
    def diagonal(self) -> bool:
        """L is the identity and no grid is refined: the independent-columns release."""
        j = len(self.refine)
        return all(f == 1 for f in self.refine) and all(self.lower[k][m] == 0 for k in range(j) for m in range(k))

    @property
    def fine_sensitivities(self) -> tuple[int, ...]:
        """F_k·D_k: each column's sensitivity in its noise grid."""
        return tuple(f * d for f, d in zip(self.refine, self.sensitivities))

    @property
    def weights(self) -> tuple[float, ...]:
        """The allocation weights ``w_k = (F_k D_k)²/D₀_k`` (per-row μ_k² ≈ w_k/s for the z_k)."""
        return tuple(float(Fraction(d * d) / d0) for d, d0 in zip(self.fine_sensitivities, self.innovations))

    def noise_covariance(self, column_sigma2s: Sequence[Scale]) -> FloatArray:
        """The covariance of the column noise actually sampled, in value units: ``Φ L diag(Var z) Lᵀ Φ``,
        ``Φ = diag(g_k/F_k)``, ``Var z_k = Var N_Z(0, s_k)`` (exact law of the sampled noise)."""
        lo = np.array(self.lower, dtype=float)
        var = np.array([dgauss_variance(s) for s in column_sigma2s])
        phi = np.array([g / f for g, f in zip(self.steps, self.refine)])
        cov: FloatArray = (lo * var) @ lo.T * np.outer(phi, phi)
        return cov


def _matrix(shape: npt.ArrayLike, j: int, names: Sequence[str] | None) -> list[list[Fraction]]:
    try:
        a = np.asarray(shape, dtype=float)
    except (TypeError, ValueError):
        raise InvalidParameterError("⟨column_shape⟩ must be a square matrix of numbers (a list of rows)") from None
    cols = f" ({', '.join(names)})" if names else ""
    if a.shape != (j, j):
        raise InvalidParameterError(f"⟨column_shape⟩ must be {j} x {j}, one row and column per noisy SUM/MEAN "
                                    f"column{cols} (a Sum and a Mean of the same column and bounds share one), "
                                    f"got shape {a.shape}")
    if not np.all(np.isfinite(a)):
        raise InvalidParameterError("⟨column_shape⟩ must hold finite numbers")
    if not np.allclose(a, a.T, rtol=1e-12, atol=0.0):
        raise InvalidParameterError("⟨column_shape⟩ must be symmetric (a covariance matrix)")
    try:
        np.linalg.cholesky(a)
    except np.linalg.LinAlgError:
        raise InvalidParameterError("⟨column_shape⟩ must be positive definite (a covariance matrix of full "
                                    "rank)") from None
    return [[(Fraction(float(a[k, m])) + Fraction(float(a[m, k]))) / 2 for m in range(j)] for k in range(j)]


def _ldl(t: list[list[Fraction]]) -> tuple[list[list[Fraction]], list[Fraction]]:
    """Exact T = L₀ D₀ L₀ᵀ (L₀ unit lower-triangular), rationals."""
    j = len(t)
    lo = [[Fraction(int(k == m)) for m in range(j)] for k in range(j)]
    d: list[Fraction] = []
    for k in range(j):
        dk = t[k][k] - sum(lo[k][m] ** 2 * d[m] for m in range(k))
        if dk <= 0:
            raise InvalidParameterError("⟨column_shape⟩ must be positive definite (a covariance matrix of full rank)")
        d.append(dk)
        for i in range(k + 1, j):
            lo[i][k] = (t[i][k] - sum(lo[i][m] * lo[k][m] * d[m] for m in range(k))) / dk
    return lo, d


def _round(x: Fraction) -> int:
    return math.floor(x + Fraction(1, 2))


def fit_column_shape(shape: npt.ArrayLike, steps: Sequence[float], sensitivities: Sequence[int],
                     tolerance: float = SHAPE_TOLERANCE, names: Sequence[str] | None = None) -> ColumnShapeFit:
    """Fit the requested shape ``S`` (value units²) of the noisy columns with grid steps ``steps`` and grid
    sensitivities ``sensitivities`` (module docstring). Refused (:class:`InvalidParameterError`, in the user's
    terms, before anything is read or charged): not a J × J matrix, not finite, not symmetric, not positive
    definite, or a correlation that would need a noise grid beyond ``F_k D_k <= 2^40``."""
    g = [v.positive(f"steps[{i}]", x) for i, x in enumerate(steps)]
    ds = [v.integer(f"sensitivities[{i}]", d, lo=1) for i, d in enumerate(sensitivities)]
    if len(g) != len(ds):
        raise InvalidParameterError("steps and sensitivities must have the same length")
    tol = v.positive("tolerance", tolerance)
    j = len(g)
    s_val = _matrix(shape, j, names)
    gf = [Fraction(x) for x in g]
    t1 = [[s_val[k][m] / (gf[k] * gf[m]) for m in range(j)] for k in range(j)]   # grid units, F = 1
    l1, d1 = _ldl(t1)
    refine = [1] * j
    lower = [[int(k == m) for m in range(j)] for k in range(j)]
    innov = list(d1)
    worst = 0.0
    for k in range(j):
        while True:
            f = refine[k]
            innov[k] = d1[k] * f * f
            for m in range(k):
                lower[k][m] = _round(l1[k][m] * f / refine[m])
            # row k of C_used = L diag(D₀) Lᵀ against the target T (both in noise-grid units)
            dev = 0.0
            tkk = float(t1[k][k]) * f * f
            for m in range(k + 1):
                used = sum(Fraction(lower[k][i] * lower[m][i]) * innov[i] for i in range(m + 1))
                target = t1[k][m] * f * refine[m]
                tmm = float(t1[m][m]) * refine[m] ** 2
                dev = max(dev, abs(float(used - target)) / math.sqrt(tkk * tmm))
            if dev <= tol:
                worst = max(worst, dev)
                break
            if 2 * f * ds[k] > _MAX_FINE:
                col = names[k] if names else f"column {k}"
                raise InvalidParameterError(
                    f"column_shape: the correlation of {col} with the earlier columns cannot be matched within "
                    f"{tol:g} on a noise grid of at most 2^40 steps per unit contribution (reached {f}x finer "
                    f"than its granularity, deviation {dev:.3g}); list the columns in another order, use a "
                    f"coarser granularity for the earlier columns, or a shape closer to diagonal")
            refine[k] = 2 * f
    return ColumnShapeFit(requested=tuple(tuple(float(x) for x in row) for row in s_val), steps=tuple(g),
                          sensitivities=tuple(ds), lower=tuple(tuple(r) for r in lower), refine=tuple(refine),
                          innovations=tuple(innov), deviation=worst, tolerance=tol)


# ------------------------------------------------------------------ the accountant


def _inverse_lower(lower: Sequence[Sequence[int]]) -> list[list[int]]:
    """L⁻¹ of an integer unit lower-triangular L (exact, integer: forward substitution)."""
    j = len(lower)
    inv = [[int(k == m) for m in range(j)] for k in range(j)]
    for col in range(j):
        for k in range(col + 1, j):
            inv[k][col] = -sum(int(lower[k][m]) * inv[m][col] for m in range(col, k))
    return inv


def _check_lower(lower: Iterable[Iterable[int]], j: int) -> list[list[int]]:
    rows = [list(r) for r in lower]
    if len(rows) != j or any(len(r) != j for r in rows):
        raise InvalidParameterError(f"lower must be {j} x {j}")
    out = [[v.integer(f"lower[{k}][{m}]", x, lo=None) for m, x in enumerate(r)] for k, r in enumerate(rows)]
    if any(out[k][k] != 1 for k in range(j)) or any(out[k][m] != 0 for k in range(j) for m in range(k + 1, j)):
        raise InvalidParameterError("lower must be unit lower-triangular (ones on the diagonal, zeros above)")
    return out


class _Shifts:
    """The squared shifts ``w_k²`` (w = L⁻¹Δ) at every vertex Δ of the box (one sign fixed: ±Δ give the same
    squares), exact integers converted to floats rounded up; for J > 12 one row of per-coordinate maxima."""

    def __init__(self, lower: Sequence[Sequence[int]], sens: Sequence[int]):
        inv = _inverse_lower(lower)
        j = len(sens)
        if j <= _VERTEX_COLUMNS:
            rows = []
            for mask in range(1 << max(j - 1, 0)):
                delta = [sens[0]] + [sens[b + 1] * (1 - 2 * ((mask >> b) & 1)) for b in range(j - 1)]
                rows.append([sum(inv[k][m] * delta[m] for m in range(k + 1)) ** 2 for k in range(j)])
        else:
            rows = [[sum(abs(inv[k][m]) * sens[m] for m in range(k + 1)) ** 2 for k in range(j)]]
        self.w2 = np.array([[_float_up(x) for x in r] for r in rows])

    def bounds(self, scales: Sequence[float]) -> tuple[float, float]:
        """Per-row ``(max Σ w_k²/s_k, max Σ w_k²/s_k²)`` over the box (conservative floats)."""
        inv = 1.0 / np.asarray(scales, dtype=float)
        mu2 = float(np.max(self.w2 @ inv)) * (1.0 + _FLOAT_SLACK)
        eta = float(np.max(self.w2 @ (inv * inv))) * (1.0 + _FLOAT_SLACK)
        return mu2, eta


def _float_up(x: int) -> float:
    f = float(x)
    return f if f >= x else math.nextafter(f, math.inf)


def unimodular_shift_bounds(lower: Sequence[Sequence[int]], sensitivities: Sequence[int],
                            column_sigma2s: Sequence[Scale]) -> tuple[float, float]:
    """``(μ², η)``: the maxima over ``|Δ_k| <= D_k`` of ``Σ_k w_k²/s_k`` (Eq. 5.1's μ_o² of ``L diag(s) Lᵀ``)
    and ``Σ_k w_k²/s_k²``, ``w = L⁻¹Δ`` (``docs/proofs/aggregates.md`` §7, Lemma 7.2), rounded up."""
    ss = [float(v.rational(f"column_sigma2s[{i}]", x)) for i, x in enumerate(column_sigma2s)]
    ds = [v.integer(f"sensitivities[{i}]", d, lo=0) for i, d in enumerate(sensitivities)]
    if len(ss) != len(ds):
        raise InvalidParameterError("column_sigma2s and sensitivities must have the same length")
    return _Shifts(_check_lower(lower, len(ds)), ds).bounds(ss)


def joint_hockey_stick_unimodular(j: int, epsilon: float, count_sigma2: Scale, column_sigma2s: Sequence[Scale],
                                  lower: Sequence[Sequence[int]], sensitivities: Sequence[int]) -> float:
    """Upper bound of H_{e^ε} between ``j`` rows of the joint release with column noise ``L z``
    (``z_k ~ N_Z(0, column_sigma2s[k])``), each row's count shifted by 1 and its columns by any integer
    ``|Δ_k| <= sensitivities[k]`` (``docs/proofs/aggregates.md`` Theorem 7.3). ``L`` = identity gives
    :func:`~.aggregates.joint_hockey_stick`'s bound."""
    jj = v.integer("j", j, lo=0)
    eps = v.epsilon_any(epsilon)
    s = float(v.rational("count_sigma2", count_sigma2))
    ss = [float(v.rational(f"column_sigma2s[{i}]", x)) for i, x in enumerate(column_sigma2s)]
    mu2, eta = unimodular_shift_bounds(lower, sensitivities, column_sigma2s)
    return _hs_rows(jj, eps, s, ss, mu2, eta)


@overload
def joint_gshm_delta_unimodular(epsilon: float, count_sigma2: Scale, margin: int, l0: int,
                                column_sigma2s: Sequence[Scale], lower: Sequence[Sequence[int]],
                                sensitivities: Sequence[int], *, parts: Literal[False] = False) -> float: ...
@overload
def joint_gshm_delta_unimodular(epsilon: float, count_sigma2: Scale, margin: int, l0: int,
                                column_sigma2s: Sequence[Scale], lower: Sequence[Sequence[int]],
                                sensitivities: Sequence[int], *, parts: Literal[True]) -> JointDeltaParts: ...
def joint_gshm_delta_unimodular(epsilon: float, count_sigma2: Scale, margin: int, l0: int,
                                column_sigma2s: Sequence[Scale], lower: Sequence[Sequence[int]],
                                sensitivities: Sequence[int], *, parts: bool = False) -> float | JointDeltaParts:
    """δ(ε) of the joint discrete release with column noise ``L z`` (Karrer Thm 5.4 / Eq. 5.8 structure,
    ``docs/proofs/aggregates.md`` §1 and §7): ``max(T1, T2, T3)`` with the divergence of
    :func:`joint_hockey_stick_unimodular`. ``sensitivities``: in the noise grids (``F_k D_k``)."""
    eps, s, m, k = joint_count_args(epsilon, count_sigma2, margin, l0)
    ss = [float(v.rational(f"column_sigma2s[{i}]", x)) for i, x in enumerate(column_sigma2s)]
    mu2, eta = unimodular_shift_bounds(lower, sensitivities, column_sigma2s)
    return _joint_delta(eps, s, m, k, lambda jj, e: _hs_rows(int(jj), e, s, ss, mu2, eta), parts)


def calibrate_joint_gshm_shaped(epsilon: float, delta: float, l0: int, fit: ColumnShapeFit) -> JointDiscreteCalibration:
    """The discrete joint calibration with a fitted column shape: a diagonal fit is the independent-columns
    calibration with weights ``w_k = D_k²/D₀_k`` (:func:`~.aggregates.calibrate_joint_gshm`, the very same
    noise); otherwise scales ``s_k = s·D₀_k`` (rounded up to short rationals) and the unimodular accountant,
    through the same calibration loop (smallest ``s``, then the smallest margin). The result carries the fit
    (``shape``) and the noise-grid sensitivities ``F_k D_k``."""
    if not isinstance(fit, ColumnShapeFit):
        raise InvalidParameterError(f"fit must be a ColumnShapeFit, got {type(fit).__name__}")
    if fit.diagonal:
        cal = calibrate_joint_gshm(epsilon, delta, l0, list(fit.sensitivities), weights=list(fit.weights))
        return dataclasses.replace(cal, shape=fit)
    eps = v.epsilon(epsilon)
    dlt = v.delta(delta)
    k = v.integer("l0", l0, lo=1)
    shifts = _Shifts(fit.lower, fit.fine_sensitivities)
    lam = shifts.bounds([float(x) for x in fit.innovations])[0]
    cache: dict[tuple[Fraction, ...], tuple[float, float]] = {}

    def scales_of(s: Fraction) -> tuple[Fraction, ...]:
        out = tuple(max(rational_up(float(s * d0)), Fraction(1)) for d0 in fit.innovations)
        if max(out) > _MAX_SCALE:
            raise InfeasibleError(f"⟨column_shape⟩ needs a column noise scale {float(max(out)):.3g} > 2^80, beyond "
                                  f"the exact sampler's range; use a coarser granularity or a shape closer to "
                                  f"diagonal")
        return out

    def hs_of(jj: int, e: float, s: Fraction, sks: tuple[Fraction, ...]) -> float:
        if sks not in cache:
            cache[sks] = shifts.bounds([float(x) for x in sks])
        return _hs_rows(int(jj), e, float(s), [float(x) for x in sks], *cache[sks])

    s, sks, margin, parts = _calibrate(eps, dlt, k, lam, scales_of, hs_of)
    return JointDiscreteCalibration(epsilon=eps, delta=dlt, l0=k, count_sigma2=s, margin=margin,
                                    column_sigma2s=tuple(sks), column_sensitivities=fit.fine_sensitivities,
                                    weights=fit.weights, parts=parts, shape=fit)
