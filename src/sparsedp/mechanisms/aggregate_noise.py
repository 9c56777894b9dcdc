"""Secure noise for the aggregate columns of released keys, and the error of SUM and MEAN columns.

The joint release (``docs/proofs/aggregates.md`` §0): a key is released iff ``count >= pre`` and
``count + Z >= pre + margin`` (``Z ~ N_Z(0, s)``); for the released keys only, each column gets independent
exact ``Y_k ~ N_Z(0, s_k)`` (:func:`sparsedp.noise.sample_discrete_gaussian`, the CKS20 sampler; any rational
scale up to 2^80) on its integer grid sum. Values go back to value units as ``g·(A' + Y) + g·c·(count + Z)``
(``c`` the re-centring centre, :mod:`sparsedp.aggregates`): exact in float64 because ``g`` is a power of two by
default and the integers stay below 2^53. The calibration is
:class:`sparsedp.accounting.aggregates.JointDiscreteCalibration`.

MEAN = noisy sum / noisy count (post-processing; no privacy cost). With re-centring, for a key with true count
``n``, per-unit average re-centred contribution ``a`` (grid units, ``|a| <= D``) and released noisy count
``n + Z >= T`` (``T = pre + margin >= 1``, so the division is always defined):

    mean_hat − mean = g·(Y − a·Z)/(n + Z)

* bias ``= −g·a·E[Z/(n + Z) | n + Z >= T]`` (Y has mean 0 and is independent of Z): of order ``g·a·Var Z/n²``
  for large n, but for keys near the threshold the conditioning makes ``E[Z | release] > 0`` and the bias is of
  order ``g·a·E[Z | release]/T`` — keys released only thanks to positive count noise have their mean pulled
  toward the centre;
* mean squared error ``= g²·(Var Y·E[1/(n+Z)²] + a²·E[Z²/(n+Z)²])`` (conditional on release);
* delta method (large n): ``std ≈ g·√(Var Y + a² Var Z)/n``.

:func:`mean_error` computes these exactly from the discrete-Gaussian pmf (the conditional expectations are
finite sums over ``z >= T − n``); with ``a=None`` it reports the worst case ``|a| = D``. A SUM column's error is
unbiased with std ``g·√(Var Y + c² Var Z)`` (:func:`sum_error_std`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Sequence

import numpy as np
import numpy.typing as npt

from .. import _validate as v, noise
from ..accounting.aggregates import JointDiscreteCalibration
from ..accounting.csh_aggregates import CshJointCalibration
from ..accounting.discrete import dgauss_logpmf, dgauss_variance
from ..aggregates import Aggregate, Mean, Std, Sum, Variance, noise_columns, square_columns
from ..errors import InputDataError, InvalidParameterError
from ..noise.discrete import checked_source
from ..noise.source import SecureRandom

__all__ = ["JointRelease", "column_indices", "grid_step",
           "noisy_grid_sums", "noise_map", "to_value_units", "variance_values", "variance_error", "release_joint", "column_values",
           "sum_error_std", "MeanError", "mean_error", "expected_errors", "topk_expected_errors"]

#: an integer array (counts, grid sums, noise draws; int64, or Python integers where int64 could overflow)
IntArray = npt.NDArray[Any]
#: an exact discrete-Gaussian scale σ² (rational)
Sigma2 = Fraction | float


def column_indices(aggregates: Sequence[Sum]) -> list[int]:
    """Per SUM/MEAN aggregate, the index of its distinct noisy grid column (:func:`sparsedp.aggregates.noise_columns`
    order); a Count (which has none) is refused."""
    where = noise_columns(aggregates)[1]
    out = [i for i in where if i is not None]
    if len(out) != len(where):
        raise InvalidParameterError("only SUM/MEAN aggregates have noisy grid columns; the count is released "
                                    "next to them")
    return out


@dataclass(frozen=True)
class JointRelease:
    """Released keys of a joint release: ``positions`` into the input arrays, the noisy counts, and per column
    the noisy re-centred grid sums (int64, before conversion to value units)."""

    positions: npt.NDArray[np.intp]
    noisy_counts: IntArray
    noisy_grid_sums: tuple[IntArray, ...]
    #: a general column shape's noise-grid refinements F_k (the sums are on grids F_k times finer), else None
    refine: tuple[int, ...] | None = None


def noisy_grid_sums(grid_sums: Sequence[IntArray], column_sigma2s: Sequence[Sigma2], rng: SecureRandom | None = None,
                    *, lower: Sequence[Sequence[int]] | None = None,
                    refine: Sequence[int] | None = None) -> tuple[IntArray, ...]:
    """``A_k + Y_k``, ``Y_k ~ N_Z(0, column_sigma2s[k])`` i.i.d. exact (one draw per element), int64.

    ``grid_sums``: one int64 array per column, the released keys' grid sums (same length). ``rng=None``: the
    secure default source. With a general column shape (``lower`` = the integer unit lower-triangular ``L``,
    ``refine`` = the ``F_k``; :mod:`sparsedp.accounting.column_shape`): the same draws ``z_k`` (column by column,
    the same words as the diagonal release) become ``Y = L z`` and the result is ``F_k A_k + Y_k`` on the
    noise grids (int64, or exact Python integers where int64 could overflow).
    """

    if len(grid_sums) != len(column_sigma2s):
        raise InvalidParameterError(f"{len(grid_sums)} grid-sum columns but {len(column_sigma2s)} noise scales")
    rng = checked_source(rng)
    arrs: list[IntArray] = []
    zs: list[IntArray] = []
    for a, s in zip(grid_sums, column_sigma2s):
        arr = np.asarray(a)
        if arr.dtype.kind not in "iu":
            raise InputDataError(f"grid sums must be integers, got dtype {arr.dtype}")
        arrs.append(arr.astype(np.int64, copy=False))
        zs.append(noise.sample_discrete_gaussian(s, arr.size, rng))
    if lower is None:
        return tuple(a + z for a, z in zip(arrs, zs))
    assert refine is not None  # a general column shape gives both L and F (noise_map)
    return tuple(_unimodular_row(k, arrs[k], zs, lower, refine) for k in range(len(arrs)))


def _unimodular_row(k: int, arr: IntArray, zs: list[IntArray], lower: Sequence[Sequence[int]],
                    refine: Sequence[int]) -> IntArray:
    """``F_k A_k + Σ_{m<=k} L_km z_m`` exactly: int64 when the bound of its magnitude is below 2^62, else Python
    integers (object array)."""
    f = int(refine[k])
    coef = [int(lower[k][m]) for m in range(k + 1)]
    def top(x: IntArray) -> int:
        return int(np.max(np.abs(x))) if x.size else 0

    bound = f * top(arr) + sum(abs(c) * top(zs[m]) for m, c in enumerate(coef))
    if bound < 2 ** 62:
        out = arr * f
        for m, c in enumerate(coef):
            if c:
                out = out + zs[m] * c
        return out
    out = arr.astype(object) * f
    for m, c in enumerate(coef):
        if c:
            out = out + zs[m].astype(object) * c
    return out


def noise_map(calibration: JointDiscreteCalibration) -> dict[str, Any]:
    """The keyword arguments of :func:`noisy_grid_sums` for a joint calibration: ``{}`` for independent columns,
    ``{"lower": L, "refine": F}`` for a general column shape (``calibration.shape``, not diagonal)."""
    fit = getattr(calibration, "shape", None)
    if fit is None or fit.diagonal:
        return {}
    return {"lower": fit.lower, "refine": fit.refine}


def to_value_units(noisy_grid_sum: IntArray, noisy_counts: IntArray, aggregate: Sum, refine: int = 1
                   ) -> npt.NDArray[np.float64]:
    """The released SUM (or MEAN) column in value units: ``g·(A' + Y) + g·c·(count + Z)`` (divided by the
    noisy count for a :class:`~sparsedp.aggregates.Mean`). ``refine`` = F (a general column shape): the noisy
    value is on the noise grid of step ``g/F`` (``(g/F)·(F A' + Y) + g·c·(count + Z)``)."""
    g = grid_step(aggregate)
    cnt = np.asarray(noisy_counts, dtype=np.float64)
    total: npt.NDArray[np.float64] = ((g / refine) * np.asarray(noisy_grid_sum, dtype=np.float64)
                                      + (g * aggregate.centre) * cnt)
    if isinstance(aggregate, Mean):
        if np.any(cnt <= 0):
            raise InvalidParameterError("a MEAN needs positive noisy counts (release threshold >= 1)")
        return total / cnt
    return total


def variance_values(noisy_sum: IntArray, noisy_squares: IntArray, noisy_counts: IntArray, aggregate: Variance,
                    sum_column: Sum, squares_column: Sum, refine: tuple[int, int] = (1, 1)
                    ) -> npt.NDArray[np.float64]:
    """The released VARIANCE (or STD) column: ``clamp(Ŝ₂/n̂ − (Ŝ₁/n̂)², 0, ((upper − lower)/2)²)`` (its square
    root for :class:`~sparsedp.aggregates.Std`), with ``Ŝ₁``, ``Ŝ₂`` the noisy sum and sum of squares in value
    units (:func:`to_value_units` of the two grid columns) and ``n̂`` the noisy count, floored at 1 (the
    division is post-processing; GSHM's released counts are >= 1 anyway). Post-processing of released values."""
    cnt = np.maximum(np.asarray(noisy_counts, dtype=np.float64), 1.0)
    s1 = to_value_units(noisy_sum, noisy_counts, sum_column, refine[0]) / cnt
    s2 = to_value_units(noisy_squares, noisy_counts, squares_column, refine[1]) / cnt
    var = np.clip(s2 - s1 * s1, 0.0, aggregate.clamp_upper)
    out: npt.NDArray[np.float64] = np.sqrt(var) if isinstance(aggregate, Std) else var
    return out


def release_joint(counts: IntArray, grid_sums: Sequence[IntArray], calibration: JointDiscreteCalibration,
                  pre_threshold: int = 1, rng: SecureRandom | None = None) -> JointRelease:
    """Reference kernel of the joint release (``docs/proofs/aggregates.md`` §0): keys with
    ``count >= pre_threshold`` and ``count + Z >= pre_threshold + margin`` (decided by exact inversion,
    :func:`sparsedp.noise.release_by_inversion`, ``Z ~ N_Z(0, count_sigma2)``), then the column noise for the
    released keys only. ``calibration``: a :class:`~sparsedp.accounting.aggregates.JointDiscreteCalibration`.
    """

    pre = v.integer("pre_threshold", pre_threshold, lo=1)
    c = np.asarray(counts)
    if c.dtype.kind not in "iu":
        raise InputDataError(f"counts must be integers, got dtype {c.dtype}")
    c = c.astype(np.int64, copy=False)
    rng = checked_source(rng)
    elig = np.flatnonzero(c >= pre)
    need = pre + calibration.margin - c[elig]                  # release iff Z >= need
    pos, z = noise.release_by_inversion(noise.DiscreteGaussianLaw(calibration.count_sigma2), need, rng)
    keys = elig[pos]
    cols = noisy_grid_sums([np.asarray(a)[keys] for a in grid_sums], calibration.column_sigma2s, rng,
                           **noise_map(calibration))
    return JointRelease(positions=keys, noisy_counts=c[keys] + z, noisy_grid_sums=cols,
                        refine=noise_map(calibration).get("refine"))


def column_values(release: JointRelease, aggregates: Sequence[Aggregate]) -> dict[str, npt.NDArray[Any]]:
    """Output columns in value units, named after the aggregates; ``release.noisy_grid_sums`` holds the
    distinct grid columns of :func:`sparsedp.aggregates.noise_columns` (shared by a Sum and a Mean of the same
    column and bounds). The count column is the noisy count."""
    cols, where = noise_columns(aggregates)
    squares = square_columns(aggregates)
    if len(cols) != len(release.noisy_grid_sums):
        raise InvalidParameterError(f"{len(cols)} grid columns but {len(release.noisy_grid_sums)} noisy columns")
    refine = release.refine or (1,) * len(cols)
    out: dict[str, npt.NDArray[Any]] = {}
    for a, i, sq in zip(aggregates, where, squares):
        if i is None or not isinstance(a, Sum):  # the count (a Count is no Sum: it has no grid column)
            out[a.output_name] = np.asarray(release.noisy_counts)
        elif isinstance(a, Variance):
            assert sq is not None
            g = release.noisy_grid_sums
            out[a.output_name] = variance_values(g[i], g[sq], release.noisy_counts, a, cols[i], cols[sq],
                                                 (refine[i], refine[sq]))
        else:
            out[a.output_name] = to_value_units(release.noisy_grid_sums[i], release.noisy_counts, a, refine[i])
    return out


# ------------------------------------------------------------------ expected errors (for the report)


def sum_error_std(aggregate: Sum, column_sigma2: Sigma2, count_sigma2: Sigma2) -> float:
    """Std of a released SUM in value units: ``g·√(Var Y + c² Var Z)`` (unbiased; ``c`` the centre)."""
    return _sum_std(aggregate, dgauss_variance(column_sigma2), count_sigma2)


def grid_step(aggregate: Sum) -> float:
    """The aggregate's grid step ``g`` (set by its ``__post_init__``: never None once built)."""
    assert aggregate.granularity is not None
    return aggregate.granularity


def _sum_std(aggregate: Sum, var_y: float, count_sigma2: Sigma2) -> float:
    g = grid_step(aggregate)
    return g * math.sqrt(var_y + aggregate.centre ** 2 * dgauss_variance(count_sigma2))


@dataclass(frozen=True)
class MeanError:
    """Error of a released MEAN for a key of true count ``n`` (value units), conditional on its release.

    ``bias`` (signed, for the given ``a``; for the worst case ``a = ±D`` it is ``±``this), ``std``, ``rmse``
    exact; ``delta_method_std`` the large-n approximation ``g·√(Var Y + a² Var Z)/n``;
    ``release_probability`` = P[n + Z >= T].
    """

    n: int
    bias: float
    std: float
    rmse: float
    delta_method_std: float
    release_probability: float


def mean_error(aggregate: Sum, column_sigma2: Sigma2, count_sigma2: Sigma2, n: int, threshold: int,
               a: float | None = None
               ) -> MeanError:
    """Exact bias/std of ``mean_hat − mean = g (Y − a Z)/(n + Z)`` given ``n + Z >= threshold`` (module
    docstring). ``a``: per-unit average re-centred contribution in grid units (default: the worst case, the
    sensitivity D). ``threshold`` = pre_threshold + margin (>= 1)."""
    return _mean_error(aggregate, dgauss_variance(column_sigma2), count_sigma2, n, threshold, a)


def _mean_error(aggregate: Sum, var_y: float, count_sigma2: Sigma2, n: int, threshold: int, a: float | None = None
                ) -> MeanError:
    """:func:`mean_error` with the column noise given by its variance ``var_y`` (grid units)."""
    n = v.integer("n", n, lo=1)
    t = v.integer("threshold", threshold, lo=1)
    s = float(v.rational("count_sigma2", count_sigma2))
    aa = float(aggregate.sensitivity if a is None else v.real("a", a))
    g = grid_step(aggregate)
    w = int(40.0 * math.sqrt(s)) + 2
    lo = max(t - n, -w)
    if lo > w:  # release probability below e^-800
        return MeanError(n, 0.0, 0.0, 0.0, 0.0, 0.0)
    z = np.arange(lo, w + 1, dtype=float)
    lp = dgauss_logpmf(z, s)
    top = float(np.max(lp))
    wts = np.exp(lp - top)
    p_rel = float(np.sum(np.exp(lp)))
    wts /= wts.sum()
    inv = 1.0 / (n + z)
    e_z_ratio = float(np.sum(wts * z * inv))
    e_inv2 = float(np.sum(wts * inv * inv))
    e_z2_ratio = float(np.sum(wts * (z * inv) ** 2))
    bias = -g * aa * e_z_ratio
    mse = g * g * (var_y * e_inv2 + aa * aa * e_z2_ratio)
    std = math.sqrt(max(mse - bias * bias, 0.0))
    dm = g * math.sqrt(var_y + aa * aa * dgauss_variance(s)) / n
    return MeanError(n=n, bias=bias, std=std, rmse=math.sqrt(mse), delta_method_std=dm,
                     release_probability=min(1.0, p_rel))


def expected_errors(aggregates: Sequence[Aggregate], calibration: JointDiscreteCalibration, n: int | None = None,
                    pre_threshold: int = 1) -> dict[str, float]:
    """Per output column, the expected error (std, value units) for the report: SUM columns
    :func:`sum_error_std`; MEAN columns the exact worst-case RMSE of :func:`mean_error` at count ``n``
    (default: the release threshold ``pre_threshold + margin``, the least accurate released keys); the count
    column the std of its noise."""
    out: dict[str, float] = {}
    t = v.integer("pre_threshold", pre_threshold, lo=1) + calibration.margin
    nn = t if n is None else v.integer("n", n, lo=1)
    cols, where = noise_columns(aggregates)
    var = calibration.column_variances
    for a, i, sq in zip(aggregates, where, square_columns(aggregates)):
        if i is None or not isinstance(a, Sum):  # the count (a Count is no Sum: it has no grid column)
            out[a.output_name] = calibration.count_noise_std
        elif isinstance(a, Variance):
            assert sq is not None
            out[a.output_name] = variance_error(a, cols[i], cols[sq], var[i], var[sq],
                                                dgauss_variance(calibration.count_sigma2), nn)
        elif isinstance(a, Mean):
            out[a.output_name] = _mean_error(a, calibration.column_variances[i], calibration.count_sigma2, nn,
                                             t).rmse
        else:
            out[a.output_name] = _sum_std(a, calibration.column_variances[i], calibration.count_sigma2)
    return out


def variance_error(aggregate: Variance, sum_column: Sum, squares_column: Sum, var_y1: float, var_y2: float,
                   var_z: float, n: float) -> float:
    """Delta-method error (value units²; for a :class:`~sparsedp.aggregates.Std` its square root, since
    ``|√a − √b| <= √|a − b|``) of a released VARIANCE at count ``n``, worst case over the key's mean ``m`` and
    mean of squares ``q`` in their ranges: with ``E₁ = g₁(Y₁ + c₁Z)``, ``E₂ = g₂(Y₂ + c₂Z)`` the errors of the
    noisy sum and sum of squares, ``var̂ − var ≈ (E₂ − 2mE₁ − (q − 2m²)Z)/n``, whose std is
    ``√(g₂²Var Y₂ + 4m²g₁²Var Y₁ + (g₂c₂ − 2m g₁c₁ − q + 2m²)² Var Z)/n`` (independent Y₁, Y₂, Z). Large-n
    approximation (the plug-in's bias is ``docs/proofs/aggregates.md`` §8); for the report."""
    g1, g2 = grid_step(sum_column), grid_step(squares_column)
    c1, c2 = g1 * sum_column.centre, g2 * squares_column.centre
    lo, hi = aggregate.lower, aggregate.upper
    ms = {lo, hi, 0.5 * (lo + hi)} | ({0.0} if lo <= 0.0 <= hi else set())
    q_hi = max(lo * lo, hi * hi)
    worst = 0.0
    for m in ms:
        for q in (m * m, q_hi):
            k = c2 - 2.0 * m * c1 - q + 2.0 * m * m
            worst = max(worst, g2 * g2 * var_y2 + 4.0 * m * m * g1 * g1 * var_y1 + k * k * var_z)
    err = math.sqrt(worst) / max(float(n), 1.0)
    return math.sqrt(err) if isinstance(aggregate, Std) else err


def topk_expected_errors(aggregates: Sequence[Sum], calibration: CshJointCalibration, count_std: float,
                         threshold: float) -> dict[str, float]:
    """Per SUM/MEAN output column of a de-biased top-k CSH release with columns
    (:class:`sparsedp.accounting.csh_aggregates.CshJointCalibration`), its expected error in value units:
    SUM ``g·√(Var Y + c²·count_std²)`` (``count_std``: std of the de-biased count estimate, which the re-centred
    sum multiplies by the centre c); MEAN the delta-method std ``g·√(Var Y + D²·count_std²)/n`` at the
    threshold count ``n = threshold`` (worst case |a| = D; an approximation, unlike GSHM's exact
    :func:`mean_error`)."""
    out: dict[str, float] = {}
    n = max(float(threshold), 1.0)
    cols = noise_columns(aggregates)[0]
    for a, i, sq in zip(aggregates, column_indices(aggregates), square_columns(aggregates)):
        var_y = dgauss_variance(calibration.column_sigma2s[i])
        g = grid_step(a)
        if isinstance(a, Variance):
            assert sq is not None
            out[a.output_name] = variance_error(a, cols[i], cols[sq], var_y,
                                                dgauss_variance(calibration.column_sigma2s[sq]), count_std ** 2, n)
        elif isinstance(a, Mean):
            out[a.output_name] = g * math.sqrt(var_y + a.sensitivity ** 2 * count_std ** 2) / n
        else:
            out[a.output_name] = g * math.sqrt(var_y + a.centre ** 2 * count_std ** 2)
    return out
