"""The public error laws of released rows, per mechanism (what ``release(..., interval=…)`` turns into intervals).

Each function reads a calibration (public) and states, exactly, the law of ``released value − true value`` for
every output column the mechanism releases (:class:`~sparsedp.accounting.intervals.RowLaws`); the intervals
themselves are computed from the released values by :mod:`sparsedp.mechanisms.intervals`. The laws:

* GSHM / Laplace stability histogram: the count's own noise ``N_Z(0, s)`` / discrete Laplace; a key is released
  iff ``n >= pre`` and ``n + Z >= pre + margin`` (:class:`~sparsedp.accounting.intervals.ReleaseRule`).
* joint GSHM with SUM/MEAN: a SUM is ``g·(A + Y + c·Z)`` on the grid (``Y = Σ_m L_km z_m`` with a column shape,
  on a grid ``F_k`` times finer), so its error is ``(g/F)(Y + F·c·Z)``; a MEAN uses ``Y`` and ``Z`` separately
  (:func:`~sparsedp.accounting.intervals.ratio_interval`). A VARIANCE/STD reads the noisy count, sum and sum of
  squares (:class:`~sparsedp.accounting.intervals.VarianceLaw`): a conservative union-bound interval
  (:func:`~sparsedp.accounting.intervals.variance_interval`), computed next to the values by the per-key step.
* de-biased top-k CSH: ``max(0, n − t) + X_i + t̃`` with ``t̃ = t + D``: for a key above the cut-off the error is
  ``X_i + D``, ``X_i`` marginally ``round(N(0, σ² + σ_A²))`` (rounded) or ``(Z_i + Z_c + Z_t)/2`` (Algorithm 4);
  it covers ``max(n, t)``. Counts only.
* public keys: independent ``N_Z(0, s)`` / discrete Laplace, or Lebeda (2024)'s embedding, whose per-key error is
  ``(C·z_j + p·Z_{d+1})/(q·C)`` (:class:`~sparsedp.mechanisms.public_keys.CorrelatedGaussian`'s run).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any, Sequence

from ..accounting import laws
from ..accounting.intervals import Base, LinearNoise, MeanLaw, ReleaseRule, RoundedGaussian, RowLaws, VarianceBox, \
    VarianceLaw, VarianceRanges
from ..aggregates import Mean, Std, Sum, Variance, noise_columns, square_columns
from ..errors import InvalidParameterError

__all__ = ["thresholded_laws", "topk_laws", "public_laws", "variance_boxes"]


def _count_law(noise: Any) -> Base | None:
    if isinstance(noise, (laws.DiscreteGaussian, laws.DiscreteLaplace)):
        return noise
    return None


def thresholded_laws(count_name: str, calibration: Any, pre: int) -> RowLaws | None:
    """GSHM / Laplace (count-only or joint with SUM/MEAN columns): ``None`` for float noise."""
    law = _count_law(calibration.noise)
    if law is None:
        return None
    count = LinearNoise(((1, law),))
    rule = ReleaseRule(noise=count, pre_threshold=pre, margin=int(round(float(calibration.tau))))
    joint = getattr(calibration, "joint", None)
    if joint is None:
        return RowLaws(additive={count_name: count}, release=rule)
    aggs: Sequence[Sum] = calibration.aggregates
    cols, where = noise_columns(aggs)
    z = laws.DiscreteGaussian(joint.count_sigma2)
    shape = joint.shape
    lower = None if shape is None or shape.diagonal else shape.lower
    refine = (1,) * len(cols) if lower is None else tuple(shape.refine)
    additive: dict[str, LinearNoise] = {count_name: count}
    means: dict[str, MeanLaw] = {}
    variances: dict[str, VarianceLaw] = {}

    def column_noise(i: int) -> list[tuple[int, Base]]:  # Y_i on column i's noise lattice
        if lower is None:
            return [(1, laws.DiscreteGaussian(joint.column_sigma2s[i]))]
        return [(int(lower[i][m]), laws.DiscreteGaussian(joint.column_sigma2s[m])) for m in range(i + 1) if lower[i][m]]

    def total_noise(i: int) -> LinearNoise:  # E = (g/F)(Y + F·c·Z): a released SUM's error, value units
        col, f = cols[i], int(refine[i])
        terms = column_noise(i) + ([(f * col.centre, z)] if col.centre else [])
        return LinearNoise(tuple(terms), Fraction(f) / Fraction(col.step))

    for a, i, sq in zip(aggs, where, square_columns(aggs)):
        assert i is not None
        col = cols[i]
        if isinstance(a, Variance):
            assert sq is not None
            g1, g2 = col.step, cols[sq].step
            variances[a.output_name] = VarianceLaw(
                total=total_noise(i), squares=total_noise(sq), count=count, ranges=VarianceRanges(
                    mean_range=(g1 * col.grid_bounds[0], g1 * col.grid_bounds[1]),
                    square_range=(g2 * cols[sq].grid_bounds[0], g2 * cols[sq].grid_bounds[1]),
                    clamp_upper=a.clamp_upper, count_floor=pre, std=isinstance(a, Std)))
        elif isinstance(a, Mean):
            means[a.output_name] = MeanLaw(column=LinearNoise(tuple(column_noise(i))), count=count,
                                           step=float(Fraction(col.step)), centre=col.centre, grid=col.grid_bounds,
                                           count_floor=pre, refine=int(refine[i]))
        else:
            additive[a.output_name] = total_noise(i)
    return RowLaws(additive=additive, means=means, variances=variances, release=rule)


def variance_boxes(laws: RowLaws | None, level: float | None) -> tuple[tuple[str, VarianceBox], ...]:
    """The :class:`~sparsedp.accounting.intervals.VarianceBox` of every VARIANCE/STD column of ``laws`` at
    ``level`` (empty without a level or without such columns): what the per-key step needs to add their
    ``_lo``/``_hi`` columns next to the values (:meth:`~sparsedp.mechanisms.key_noise.KeyNoise.apply_joint`)."""
    if laws is None or level is None:
        return ()
    out = []
    for name, law in laws.variances.items():
        try:
            out.append((name, law.box(level)))
        except InvalidParameterError:  # a law too wide for an exact half-width: no interval (the report says why)
            continue
    return tuple(out)


def topk_laws(count_name: str, calibration: Any, debias: bool, aggregates: Sequence[Sum]) -> RowLaws | None:
    """De-biased top-k CSH counts (rounded or Algorithm 4); ``None`` for the shifted values or float noise."""
    noise = calibration.noise
    missing = {a.output_name: "top-k CSH: intervals for counts only (a key's sum has no exact law when its "
                              "count is below the cut-off)" for a in aggregates}
    if not debias:
        return None
    if isinstance(noise, laws.RoundedCorrelatedGaussian):
        x = RoundedGaussian(math.hypot(noise.sigma, noise.shared_sigma))
        count = LinearNoise(((1, x), (1, RoundedGaussian(noise.shared_sigma))))
    elif isinstance(noise, laws.DiscreteCorrelatedGaussian):
        count = LinearNoise(((1, laws.DiscreteGaussian(noise.sigma2)), (1, laws.DiscreteGaussian(noise.shared_sigma2)),
                             (1, laws.DiscreteGaussian(noise.shared_sigma2))), Fraction(2))
    else:
        return None
    return RowLaws(additive={count_name: count}, missing=missing,
                   covers="max(true count, t) with t the (k+1)-th largest bounded count (the true count for "
                          "every key above the cut-off)")


def public_laws(count_name: str, calibration: Any) -> RowLaws | None:
    """Public key lists: independent discrete Gaussian / Laplace, or the integer embedding of Lebeda (2024)
    (correlated Gaussian, bounded density); ``None`` for float noise and for the known-n variant (its shared
    error ``(ñ − n)/2`` is not a noise of known law)."""
    cal = calibration
    if not getattr(cal, "secure", False) or cal.family == "known-n":
        return None
    base: Base = (laws.DiscreteLaplace(Fraction(cal.scale)) if cal.family == "laplace"
                  else laws.DiscreteGaussian(Fraction(cal.scale)))
    if cal.family in ("laplace", "gaussian"):
        count = LinearNoise(((1, base),))
    elif cal.family != "embedding":
        return None
    else:
        c, p, q = int(cal.c), int(cal.p), int(cal.q)
        terms = ((c, base),) + (((p, base),) if p else ())
        count = LinearNoise(terms, Fraction(q * c))
    return RowLaws(additive={count_name: count}, every_key=True,
                   covers="the true bounded count of every listed key")
