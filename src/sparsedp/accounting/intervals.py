"""Exact per-row confidence intervals of released values, from the noise law actually sampled.

A released count, sum or mean is a true (bounded, gridded) statistic plus noise whose law is public and exact:
the discrete Gaussian ``N_Z(0, s)``, the discrete Laplace, the rounding of a Gaussian (rounded CSH), or an
integer combination of independent draws of these (the re-centred SUM ``Y + c·Z``, Lebeda (2024)'s embedding
``(C·z_j + p·Z_{d+1})/(q·C)``, de-biased top-k's ``X_i + (t̃ − t)``). :class:`LinearNoise` is that law,
``E = (Σ_i a_i X_i)/divisor`` with integer ``a_i`` and independent symmetric integer ``X_i``; its exact cdf is

    P[Σ a_i X_i <= t] = Σ_r P[R = r] · F_0(⌊(t − r)/|a_0|⌋),

``X_0`` the term of largest spread (exact cdf ``F_0``: :func:`~.discrete.dgauss_cdf`, :func:`~.discrete.
dlaplace_cdf`, ``Φ((x + ½)/σ)`` for a rounded Gaussian) and ``R`` the others, whose pmf is convolved exactly
on its integer lattice over windows leaving out less than ``1e-30`` of the mass (bounded, not estimated:
``docs/proofs/intervals.md``). Every law here is symmetric, so ``P[|W| <= h] = 2 F(h) − 1``.

:meth:`LinearNoise.halfwidth` is the smallest integer ``h`` with ``P[|W| <= h] >= level``: the interval
``value ± h/divisor`` (times the grid step for sums) covers the true value with probability exactly
``coverage = P[|W| <= h] >= level`` over the noise (at least ``level``: the lattice makes ``coverage`` jump, and
the report gives it). For a MEAN (noisy sum / noisy count), :func:`ratio_interval` inverts the two independent
intervals at level ``√level`` each (coverage ``>= level`` by independence). All of it is post-processing of
released values with public parameters: it costs no privacy. Construction and guarantees:
``docs/proofs/intervals.md``.

Cost: the bisection evaluates the cdf formula above at about 20 points ``t``, each a sum over up to
``_MAX_POINTS`` support points ``r``. The exact ``F_0`` is evaluated once per distinct argument ``⌊(t − r)/|a_0|⌋``
(consecutive ``r`` share it when ``|a_0|`` is large) and once per law (:class:`CdfMemo`: the steps' arguments
overlap); the convolution and each ``(law, level)`` half-width are memoised. Every float is the one the formula
gives evaluated point by point (the products and their sum are unchanged, ``F_0`` is elementwise), so the
intervals and coverages are those of the plain computation, bit for bit (tested).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache
from typing import Callable, Mapping

import numpy as np
import numpy.typing as npt

from .. import _validate as v
from ..errors import InvalidParameterError
from ._special import special
from .discrete import dgauss_cdf, dgauss_logpmf, dgauss_sf, dgauss_variance, dlaplace_cdf, dlaplace_logpmf, \
    dlaplace_sf, dlaplace_variance
from .laws import DiscreteGaussian, DiscreteLaplace

__all__ = ["RoundedGaussian", "LinearNoise", "Halfwidth", "MeanLaw", "RowLaws", "ReleaseRule", "ratio_interval",
           "check_level", "DEFAULT_LEVEL", "VarianceRanges", "VarianceLaw", "VarianceBox", "variance_interval"]

#: the interval level of ``release(..., interval=True)``
DEFAULT_LEVEL = 0.95
#: each term's window leaves out less than this much mass (both tails together)
_TAIL = 1e-30
#: at most this many lattice points in the convolved pmf of the smaller terms
_MAX_POINTS = 4_000_000


@dataclass(frozen=True)
class RoundedGaussian:
    """``round(G)``, ``G ~ N(0, sigma²)``: ``P[X <= x] = Φ((x + ½)/σ)`` for integers x (ties have probability
    0). The marginal law of one rounded-CSH noise ``round(G_i + A)`` (``sigma² = σ² + σ_A²``) and of de-biased
    top-k's ``t̃`` noise (docs/proofs/rounded-csh.md)."""

    sigma: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "sigma", v.positive("sigma", self.sigma))


Base = DiscreteGaussian | DiscreteLaplace | RoundedGaussian


def _cdf(law: Base, t: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """``P[X <= t]`` at integer ``t`` (array)."""
    if isinstance(law, DiscreteGaussian):
        return np.asarray(dgauss_cdf(t, law.sigma2), dtype=float)
    if isinstance(law, DiscreteLaplace):
        return np.asarray(dlaplace_cdf(t, law.scale), dtype=float)
    return np.asarray(special.ndtr((t + 0.5) / law.sigma), dtype=float)


def _spread(law: Base) -> float:
    if isinstance(law, DiscreteGaussian):
        return math.sqrt(dgauss_variance(law.sigma2))
    if isinstance(law, DiscreteLaplace):
        return math.sqrt(dlaplace_variance(law.scale))
    return law.sigma


def _window(law: Base) -> int:
    """``w`` with ``P[|X| > w] < _TAIL`` (checked with the exact tail)."""
    s = max(_spread(law), 1.0)
    w = int(math.ceil(12.0 * s)) + 2
    while 2.0 * _sf(law, w + 1) >= _TAIL:
        w = 2 * w
    return w


def _sf(law: Base, t: int) -> float:
    if isinstance(law, DiscreteGaussian):
        return float(dgauss_sf(float(t), law.sigma2))
    if isinstance(law, DiscreteLaplace):
        return float(dlaplace_sf(float(t), law.scale))
    return float(special.ndtr(-(t - 0.5) / law.sigma))


def _pmf(law: Base, w: int) -> npt.NDArray[np.float64]:
    """``P[X = x]`` for ``x = −w … w``."""
    x = np.arange(-w, w + 1, dtype=float)
    if isinstance(law, DiscreteGaussian):
        return np.exp(dgauss_logpmf(x, law.sigma2))
    if isinstance(law, DiscreteLaplace):
        return np.exp(dlaplace_logpmf(x, law.scale))
    return np.asarray(special.ndtr((x + 0.5) / law.sigma) - special.ndtr((x - 0.5) / law.sigma), dtype=float)


@dataclass(frozen=True)
class Halfwidth:
    """The interval ``value ± lattice/divisor`` (in the law's units): ``lattice`` the integer half-width on the
    noise lattice, ``width`` = ``lattice/divisor``, ``coverage`` = ``P[|E| <= width]`` exactly (>= the level)."""

    lattice: int
    width: float
    coverage: float


@dataclass(frozen=True)
class LinearNoise:
    """The error of a released value: ``E = (Σ_i a_i X_i)/divisor``, independent symmetric integer ``X_i``
    (:class:`~.laws.DiscreteGaussian`, :class:`~.laws.DiscreteLaplace`, :class:`RoundedGaussian`), integer
    ``a_i != 0``. The value is ``truth + E``."""

    terms: tuple[tuple[int, Base], ...]
    divisor: Fraction = Fraction(1)

    def __post_init__(self) -> None:
        if not self.terms or any(not isinstance(a, int) or a == 0 for a, _ in self.terms):
            raise InvalidParameterError("a LinearNoise needs terms (a, law) with non-zero integer a")
        object.__setattr__(self, "divisor", Fraction(self.divisor))
        if self.divisor <= 0:
            raise InvalidParameterError(f"divisor must be > 0, got {self.divisor}")

    @property
    def std(self) -> float:
        """Standard deviation of ``E``."""
        return math.sqrt(sum(a * a * _spread(x) ** 2 for a, x in self.terms)) / float(self.divisor)

    def _split(self) -> Split:
        """The widest term and the exact pmf of the sum of the others (:class:`Split`), computed once per law
        (memoised: :func:`_split_of`)."""
        return _split_of(self)

    def cdf(self, t: int) -> float:
        """``P[Σ a_i X_i <= t]`` (on the noise lattice: ``E <= t/divisor``)."""
        return self._split().cdf(t)

    def halfwidth(self, level: float) -> Halfwidth:
        """The smallest integer ``h >= 0`` with ``P[|Σ a_i X_i| <= h] = 2F(h) − 1 >= level``, with that
        probability (the exact coverage of ``value ± h/divisor``). Memoised per ``(law, level)``
        (:func:`_halfwidth_of`): a release asks for the same half-width from several places."""
        return _halfwidth_of(self, check_level(level))


class CdfMemo:
    """The exact cdf ``F_0`` of one law at the integer arguments evaluated so far (ascending ``keys``, their
    ``values``): each value is the one :func:`_cdf` gives at that point (it is elementwise), computed once and
    reused by every later cdf of the law (the bisection's steps overlap, and so do the levels). The state is
    replaced as one tuple, so a concurrent reader sees a consistent (if older) table."""

    def __init__(self, law: Base) -> None:
        self.law = law
        self._state: tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]] = (np.empty(0), np.empty(0))

    def __call__(self, k: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        """``F_0(k)`` for integer-valued ``k`` (any order, repeats allowed)."""
        keys, values = self._state
        at = np.minimum(np.searchsorted(keys, k), max(keys.size - 1, 0))
        hit = keys[at] == k if keys.size else np.zeros(k.shape, dtype=bool)
        out = np.empty(k.shape)
        out[hit] = values[at[hit]]
        miss = ~hit
        if miss.any():
            new = np.unique(k[miss])
            keys = np.concatenate((keys, new))
            order = np.argsort(keys, kind="stable")
            keys, values = keys[order], np.concatenate((values, _cdf(self.law, new)))[order]
            self._state = (keys, values)
            out[miss] = values[np.searchsorted(keys, k[miss])]
        return out


@dataclass(frozen=True, eq=False)
class Split:
    """``E``'s lattice law split for its cdf: ``a0 = |a_0|`` and ``x0 = X_0`` the widest term, ``support`` the
    points ``r`` (ascending) and ``prob`` the exact pmf ``P[R = r]`` of the sum of the others (by symmetry every
    ``a_i`` is taken positive); ``known`` the values of ``F_0`` computed so far. Shared by every cdf and half-width
    of the law."""

    a0: int
    x0: Base
    support: npt.NDArray[np.int64]
    prob: npt.NDArray[np.float64]
    known: CdfMemo = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "known", CdfMemo(self.x0))

    def cdf(self, t: int) -> float:
        """``P[Σ a_i X_i <= t] = Σ_r P[R = r] · F_0(⌊(t − r)/a0⌋)``: the products and their sum are those of the
        plain formula, element for element; ``F_0`` is evaluated once per distinct argument and law
        (:func:`_runs`, :class:`CdfMemo`)."""
        return float(np.sum(self.prob * _runs(self.known, np.floor((t - self.support) / self.a0))))


def _runs(f: Callable[[npt.NDArray[np.float64]], npt.NDArray[np.float64]], k: npt.NDArray[np.float64]
          ) -> npt.NDArray[np.float64]:
    """``f`` (elementwise) at every point of ``k``, called once per run of equal consecutive arguments and
    repeated. ``k = ⌊(t − r)/a0⌋`` over the ascending support ``r`` is non-increasing, so its runs are its
    distinct values: about ``(span of r)/a0`` of them instead of one per support point (when the widest term
    carries a large coefficient, e.g. the re-centring ``c·Z`` of a sum of squares: 541 over 864 183 points)."""
    if k.size <= 1:
        return f(k)
    change = k[1:] != k[:-1]
    starts = np.flatnonzero(np.concatenate(([True], change)))
    if starts.size == k.size:
        return f(k)
    return np.repeat(f(k[starts]), np.diff(np.append(starts, k.size)))


@lru_cache(maxsize=4)  # a split holds up to _MAX_POINTS points (64 MB): a few laws, those of the current release
def _split_of(noise: LinearNoise) -> Split:
    """:class:`Split` of ``noise`` (the exact convolution of every term but the widest), memoised: the half-widths
    at several levels and the release rule's probabilities of one law share it."""
    terms = sorted(((abs(a), x) for a, x in noise.terms), key=lambda t: -t[0] * _spread(t[1]))
    a0, x0 = terms[0]
    support = np.zeros(1, dtype=np.int64)
    prob = np.ones(1)
    for a, x in terms[1:]:
        w = _window(x)
        if support.size * (2 * w + 1) > _MAX_POINTS:  # checked before the (then costly) pmf is computed
            raise InvalidParameterError(f"its noise law is too wide to compute an exact interval (more than "
                                        f"{_MAX_POINTS:,} lattice points in the convolution)")
        p = _pmf(x, w)
        vals = a * np.arange(-w, w + 1, dtype=np.int64)
        s = (support[:, None] + vals[None, :]).ravel()
        q = (prob[:, None] * p[None, :]).ravel()
        if s.size < 2 or bool(np.all(s[1:] > s[:-1])):  # already distinct and ascending (one point convolved):
            support, prob = s, q + 0.0                     # what unique + bincount give (0.0 + q), without the sort
            continue
        support, inv = np.unique(s, return_inverse=True)
        prob = np.bincount(inv.ravel(), weights=q).astype(np.float64)
    support.setflags(write=False)
    prob.setflags(write=False)
    return Split(a0=a0, x0=x0, support=support, prob=prob)


@lru_cache(maxsize=256)
def _halfwidth_of(noise: LinearNoise, lv: float) -> Halfwidth:
    """:meth:`LinearNoise.halfwidth` at the checked level ``lv``: bisection on ``cov(h) = 2F(h) − 1``."""
    split = _split_of(noise)

    def cov(h: int) -> float:
        return 2.0 * split.cdf(h) - 1.0

    hi = max(1, int(math.ceil(3.0 * noise.std * float(noise.divisor))))
    while cov(hi) < lv:
        hi *= 2
    lo = -1  # cov(-1) = -1 < level
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if cov(mid) >= lv:
            hi = mid
        else:
            lo = mid
    return Halfwidth(lattice=hi, width=float(Fraction(hi) / noise.divisor), coverage=min(1.0, cov(hi)))


def check_level(level: object, name: str = "interval") -> float:
    """An interval level in (0, 1), refused otherwise naming ``name``."""
    if isinstance(level, bool) or not isinstance(level, (int, float)) or not 0.0 < float(level) < 1.0:
        raise InvalidParameterError(f"⟨{name}⟩ must be a level in (0, 1) such as 0.95, True (0.95) or None/False "
                                    f"(no intervals), got {level!r}", param=name)
    return float(level)


@dataclass(frozen=True)
class MeanLaw:
    """A released MEAN ``g·c + g·(S' + Y)/(n + Z)`` (docs/proofs/aggregates.md): ``column`` the law of ``Y`` on
    the column's noise lattice (``refine`` points per grid step), ``count`` that of the count noise ``Z``,
    ``step`` = g, ``centre`` = c, ``grid`` = ``(q(lower), q(upper))`` (the true mean's range in grid units),
    ``count_floor`` the least true count of a released key (public)."""

    column: LinearNoise
    count: LinearNoise
    step: float
    centre: int
    grid: tuple[int, int]
    count_floor: int = 1
    refine: int = 1


def ratio_interval(mean: npt.ArrayLike, count: npt.ArrayLike, law: MeanLaw, level: float
                   ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], float]:
    """``(lo, hi, coverage)`` of released MEAN values and their noisy counts: the re-centred noisy sum
    ``T = (mean/g − c)·n̂`` (on the column's noise lattice) and ``n̂`` give the rectangle
    ``S' ∈ T ± h_Y``, ``n ∈ [max(n̂ − h_Z, count_floor), n̂ + h_Z]`` at level ``√level`` each; the interval is the
    range of ``g·(c + S'/n)`` over it, clipped to ``[g·q(lower), g·q(upper)]`` (where the true mean lies).
    Coverage ``P[|Y| <= h_Y]·P[|Z| <= h_Z] >= level`` (independent noises; docs/proofs/intervals.md §3)."""
    lv = check_level(level)
    side = math.sqrt(lv)
    hy, hz = law.column.halfwidth(side), law.count.halfwidth(side)
    g, c, f = law.step, law.centre, law.refine
    n_hat = np.asarray(count, dtype=float)
    t_hat = np.round((np.asarray(mean, dtype=float) / g - c) * n_hat * f)  # F·(S' + Y): an integer
    s_lo, s_hi = (t_hat - hy.lattice) / f, (t_hat + hy.lattice) / f
    n_lo = np.maximum(n_hat - hz.width, float(law.count_floor))
    n_hi = n_hat + hz.width
    a_lo, a_hi = float(law.grid[0] - c), float(law.grid[1] - c)
    ok = n_hi >= n_lo
    with np.errstate(divide="ignore", invalid="ignore"):
        lo = np.minimum(s_lo / n_lo, s_lo / n_hi)
        hi = np.maximum(s_hi / n_lo, s_hi / n_hi)
    lo = np.where(ok, np.clip(lo, a_lo, a_hi), a_lo)
    hi = np.where(ok, np.clip(hi, a_lo, a_hi), a_hi)
    return g * (c + lo), g * (c + hi), hy.coverage * hz.coverage


@dataclass(frozen=True)
class VarianceRanges:
    """The public facts of a released VARIANCE (or STD) besides its noise: the ranges of a unit's gridded value
    and gridded square (``mean_range``, ``square_range``: where ``S₁/n`` and ``S₂/n`` lie), ``C`` =
    ``clamp_upper``, the least true count of a released key (``count_floor``) and ``std`` (a square root is
    released)."""

    mean_range: tuple[float, float]
    square_range: tuple[float, float]
    clamp_upper: float
    count_floor: int = 1
    std: bool = False


@dataclass(frozen=True)
class VarianceLaw:
    """A released VARIANCE (or STD) ``clamp(Ŝ₂/n̂ − (Ŝ₁/n̂)², 0, C)`` (docs/proofs/aggregates.md §8): the error
    laws, in value units, of its three noisy statistics — ``total`` of the noisy sum ``Ŝ₁`` (``E₁ = g₁(Y₁ + c₁Z)``),
    ``squares`` of the noisy sum of squares ``Ŝ₂``, ``count`` of the noisy count ``n̂`` — and its ``ranges``."""

    total: LinearNoise
    squares: LinearNoise
    count: LinearNoise
    ranges: VarianceRanges

    def box(self, level: float) -> "VarianceBox":
        """The three half-widths at level ``1 − (1 − level)/3`` each (:func:`variance_interval`)."""
        lv = check_level(level)
        side = 1.0 - (1.0 - lv) / 3.0
        h1, h2, hz = self.total.halfwidth(side), self.squares.halfwidth(side), self.count.halfwidth(side)
        miss = (1.0 - h1.coverage) + (1.0 - h2.coverage) + (1.0 - hz.coverage)
        return VarianceBox(total=h1.width, squares=h2.width, count=hz.width, ranges=self.ranges,
                           coverage=max(0.0, 1.0 - miss))


@dataclass(frozen=True)
class VarianceBox:
    """What :func:`variance_interval` needs of a :class:`VarianceLaw` at one level (all public numbers, picklable
    for the engines' per-chunk step): the half-widths of ``Ŝ₁``, ``Ŝ₂`` (value units) and ``n̂``, the ``ranges``,
    and ``coverage``, the union-bound lower bound ``1 − Σ(1 − exact coverage of each)`` (>= the level)."""

    total: float
    squares: float
    count: float
    ranges: VarianceRanges
    coverage: float


def _ratio_range(lo: npt.NDArray[np.float64], hi: npt.NDArray[np.float64], n_lo: npt.NDArray[np.float64],
                 n_hi: npt.NDArray[np.float64], bounds: tuple[float, float]
                 ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """The range of ``S/n`` over ``S ∈ [lo, hi]``, ``n ∈ [n_lo, n_hi]`` (``n > 0``: attained at the corners),
    intersected with ``bounds`` (where ``S/n`` lies); an empty intersection gives ``lo > hi``."""
    r_lo = np.minimum(lo / n_lo, lo / n_hi)
    r_hi = np.maximum(hi / n_lo, hi / n_hi)
    return np.maximum(r_lo, bounds[0]), np.minimum(r_hi, bounds[1])


def variance_interval(count: npt.ArrayLike, total: npt.ArrayLike, squares: npt.ArrayLike, box: VarianceBox
                      ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """``(lo, hi)`` of released VARIANCE (STD) rows from their noisy count ``n̂``, noisy sum ``Ŝ₁`` and noisy sum of
    squares ``Ŝ₂`` (value units; none of the three need be published: the interval is a function of them).

    With the half-widths ``w₁``, ``w₂``, ``h`` of :meth:`VarianceLaw.box` the box ``S₁ ∈ Ŝ₁ ± w₁``,
    ``S₂ ∈ Ŝ₂ ± w₂``, ``n ∈ [max(n̂ − h, n_min), n̂ + h]`` holds the truth with probability at least
    ``1 − Σ P[miss_i] >= level`` (union bound: the three errors share the count noise through re-centring, so
    they are not independent). Monotone interval arithmetic over the box: ``m₁ = S₁/n`` and ``m₂ = S₂/n`` range over
    their corner ratios (intersected with the ranges where they lie), ``m₁²`` over ``[0 or min², max²]``, and
    ``θ = m₂ − m₁² ∈ [min m₂ − max m₁², max m₂ − min m₁²]``, clamped to ``[0, C]`` like the release (the square
    root of both ends for STD). It contains ``clamp(θ, 0, C)`` whenever the box holds the truth; it is
    conservative (``m₁`` and ``m₂`` share ``n`` but are bounded separately; each statistic at a level above
    ``level``). A box that misses the ranges altogether (possible only when it missed the truth) gives ``[0, C]``.
    Proof and measured coverage: ``docs/proofs/intervals.md`` §3b."""
    n_hat = np.asarray(count, dtype=np.float64)
    s1, s2 = np.asarray(total, dtype=np.float64), np.asarray(squares, dtype=np.float64)
    rg = box.ranges
    n_lo = np.maximum(n_hat - box.count, float(max(rg.count_floor, 1)))
    n_hi = np.maximum(n_hat + box.count, n_lo)
    m1_lo, m1_hi = _ratio_range(s1 - box.total, s1 + box.total, n_lo, n_hi, rg.mean_range)
    m2_lo, m2_hi = _ratio_range(s2 - box.squares, s2 + box.squares, n_lo, n_hi, rg.square_range)
    sq_hi = np.maximum(m1_lo * m1_lo, m1_hi * m1_hi)
    sq_lo = np.where((m1_lo <= 0.0) & (m1_hi >= 0.0), 0.0, np.minimum(m1_lo * m1_lo, m1_hi * m1_hi))
    empty = (m1_lo > m1_hi) | (m2_lo > m2_hi) | (n_hat + box.count < rg.count_floor)
    c = rg.clamp_upper
    lo = np.where(empty, 0.0, np.clip(m2_lo - sq_hi, 0.0, c))
    hi = np.where(empty, c, np.clip(m2_hi - sq_lo, 0.0, c))
    if rg.std:
        return np.sqrt(lo), np.sqrt(hi)
    return lo, hi


@dataclass(frozen=True)
class ReleaseRule:
    """When a key of true count ``n`` is released: ``n >= pre_threshold`` and ``n + X >= pre_threshold + margin``
    with ``X`` of law ``noise`` (independent per key)."""

    noise: LinearNoise
    pre_threshold: int
    margin: int

    def probability(self, count: int) -> float:
        """``P[release | n = count]`` exactly (0 below the pre-threshold)."""
        n = v.integer("count", count, lo=0)
        if n < self.pre_threshold:
            return 0.0
        need = self.pre_threshold + self.margin - n  # released iff X >= need, i.e. not X <= need − 1
        return max(0.0, min(1.0, 1.0 - self.noise.cdf(need - 1)))


@dataclass(frozen=True)
class RowLaws:
    """The public laws of a release's rows: per output column the error law of its values (``additive``:
    count and SUM columns, ``value ± width``; ``means``: MEAN columns, :func:`ratio_interval`) and the release
    rule of a key given its count (``release``; ``None`` when the release of a key depends on more than its
    count, e.g. top-k's cut-off; ``every_key`` for public key lists). ``covers`` says what the intervals cover; ``missing`` names the columns left
    without an interval and why."""

    additive: Mapping[str, LinearNoise] = field(default_factory=dict)
    means: Mapping[str, MeanLaw] = field(default_factory=dict)
    #: VARIANCE/STD columns: their interval is computed where the noisy sums are (:func:`variance_interval`)
    variances: Mapping[str, VarianceLaw] = field(default_factory=dict)
    release: ReleaseRule | None = None
    #: every key of a public list is released (no threshold): release probability 1
    every_key: bool = False
    covers: str = "the true bounded count (distinct units after contribution bounding) and, for SUM/MEAN, the " \
                  "sum/mean of the units' clipped per-key totals on the grid"
    missing: Mapping[str, str] = field(default_factory=dict)
    #: the values' noise is drawn independently of which keys are released (two-stage: stage 2 counts the keys
    #: stage 1 selected), so each interval keeps its coverage exactly given that its key was released
    independent_of_release: bool = False
