"""Privacy-loss distributions of composed cores, with pessimistic discretisation (docs/proofs/composition.md §4).

Used by :class:`.composition.DominatingPair` when its core mixes kinds of parts (e.g. Gaussian and
discrete-Gaussian coordinates, or two discrete scales); a core of one kind is evaluated in closed form.

For a symmetric core pair (C1, C0) with privacy loss L = ln(dC1/dC0) under C1,

    H_{e^ε}(C1‖C0) = E_{C1}[ (1 − e^{ε − L})_+ ]                        (Balle et al. 2018, Eq. (2)),

and the integrand is non-decreasing in L. So replacing L by any L' >= L (pointwise, under a coupling), or
the law of L by a measure that dominates it pointwise, gives an upper bound. Each part's loss law is put on
the grid ``h·ℤ`` by rounding every loss *up* (index ⌊l/h⌋ + 1), mass beyond the upper end of the table goes
to +∞ and mass below the lower end to the lowest grid point (both pessimistic); grids of independent parts
are convolved (FFT; the losses add, and a sum of rounded-up losses is >= the rounded sum). The part laws:

* Gaussian μ²: L ~ N(μ²/2, μ²) (exact law of the Gaussian shift pair);
* discrete Gaussian (s, j): L = (2S + j)/(2s) with S the sum of j i.i.d. N_Z(0, s); S's pmf is at most
  R_j times the N_Z(0, js) pmf (Poisson summation, docs/proofs/discrete-histograms.md §3), so that bound
  (with the normaliser summed over the table only, which is smaller than the true one) is used;
* discrete Laplace (t, j): L = (2K − j)/t with K ~ Bin(j, 1/(1 + e^{−1/t})) (exact).

The FFT's rounding error (about 1e-16 of the largest entry per coefficient) is covered by adding
``table size × 1e-15`` to every H (absolute; conservative). Tables larger than :data:`MAX_POINTS` raise
:class:`~sparsedp.errors.InfeasibleError` (callers fall back to basic composition).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt
from ._special import special

from ..errors import InfeasibleError
from ._types import FloatArray
from .discrete_histograms import _SF_REL_ERR, _log_ratio_iid

__all__ = ["GridPLD", "core_distribution", "DEFAULT_STEP", "MAX_POINTS"]

DEFAULT_STEP = 1e-4
MAX_POINTS = 1 << 23
_TAIL_SDS = 14.0  # table half-width in standard deviations of the loss (tail beyond: < 1e-44)


class CorePair(Protocol):
    """The core of a composable pair (:class:`.composition.DominatingPair`, which sits above this module): μ² of
    its continuous-Gaussian part and its discrete-Gaussian / discrete-Laplace coordinates ``((scale, count), …)``."""

    @property
    def gaussian_mu2(self) -> float: ...
    @property
    def dgauss(self) -> tuple[tuple[Fraction, int], ...]: ...
    @property
    def dlaplace(self) -> tuple[tuple[Fraction, int], ...]: ...


@dataclass(frozen=True)
class GridPLD:
    """Loss law on ``(offset + i)·step`` (pmf ``mass[i]``) plus ``infinity`` mass at +∞."""

    offset: int
    mass: FloatArray
    infinity: float
    step: float

    def convolve(self, other: "GridPLD") -> "GridPLD":
        assert self.step == other.step
        m = fft_convolve(self.mass, other.mass)
        np.maximum(m, 0.0, out=m)
        keep_a, keep_b = 1.0 - self.infinity, 1.0 - other.infinity
        return GridPLD(self.offset + other.offset, m, 1.0 - keep_a * keep_b, self.step)

    def hockey_stick(self, epsilon: npt.ArrayLike) -> FloatArray:
        eps = np.atleast_1d(np.asarray(epsilon, dtype=float))
        losses = (self.offset + np.arange(self.mass.size)) * self.step
        slack = self.mass.size * 1e-15
        out = np.empty_like(eps)
        for i, e in enumerate(eps):
            w = -np.expm1(np.minimum(e - losses, 0.0))  # (1 − e^{ε − l})_+
            out[i] = float(np.dot(self.mass, w)) + self.infinity + slack
        capped: FloatArray = np.minimum(out, 1.0)
        return capped


def fft_convolve(a: FloatArray, b: FloatArray) -> FloatArray:
    """The full linear convolution of two 1-D float arrays: ``scipy.signal.fftconvolve(a, b)`` to the last bit
    (its steps for real 1-D inputs: a product when either has one point, else ``scipy.fft``'s ``rfftn`` of both
    padded to ``next_fast_len``, their product, ``irfftn``, cut to ``len(a) + len(b) − 1``), without importing
    :mod:`scipy.signal` (imported on use: scipy.signal costs 0.3–1 s of start-up idle, over 10 s on a loaded
    machine; :mod:`scipy.fft` a fraction of that)."""
    from scipy import fft

    if a.size == 0 or b.size == 0:
        return np.zeros(0)
    if a.size == 1 or b.size == 1:
        out: FloatArray = a * b
        return out
    n = a.size + b.size - 1
    f = fft.next_fast_len(n, True)
    full: FloatArray = fft.irfftn(fft.rfftn(a, [f], axes=[0]) * fft.rfftn(b, [f], axes=[0]), [f], axes=[0])
    return full[:n].copy()


def _on_grid(losses: npt.NDArray[np.floating[Any]], mass: FloatArray, infinity: float, step: float) -> GridPLD:
    idx = np.floor(losses / step).astype(np.int64) + 1  # rounded up (strictly), pessimistic
    lo = int(idx.min())
    size = int(idx.max()) - lo + 1
    if size > MAX_POINTS:
        raise InfeasibleError(f"privacy-loss table of {size} points exceeds {MAX_POINTS}")
    out = np.bincount(idx - lo, weights=mass, minlength=size).astype(float)
    return GridPLD(lo, out, float(infinity), step)


def gaussian_part(mu2: float, step: float = DEFAULT_STEP) -> GridPLD:
    """L ~ N(μ²/2, μ²): mass of each cell ((i−1)h, ih] put at ih."""
    mu = math.sqrt(mu2)
    mean = mu2 / 2.0
    lo_i = math.floor((mean - _TAIL_SDS * mu) / step)
    hi_i = math.ceil((mean + _TAIL_SDS * mu) / step)
    if hi_i - lo_i > MAX_POINTS:
        raise InfeasibleError("Gaussian privacy-loss table too large")
    edges = (np.arange(lo_i, hi_i + 1) * step - mean) / mu  # standardised cell upper ends
    cdf = special.ndtr(edges)
    sf = special.ndtr(-edges)  # accurate in the upper tail, where the differences of cdf are not
    sf_hi = float(sf[-1])
    mass = np.where(edges[1:] > 0, sf[:-1] - sf[1:], np.diff(cdf))
    mass = np.concatenate([[cdf[0]], np.maximum(mass, 0.0)])  # lower tail to the lowest point (rounded up)
    losses = np.arange(lo_i, hi_i + 1) * step - 0.5 * step  # inside each cell; _on_grid rounds up to ih
    return _on_grid(losses, mass, sf_hi, step)


def dgauss_part(s: float, j: int, step: float = DEFAULT_STEP) -> GridPLD:
    """L = (2S + j)/(2s), S's pmf bounded by R_j · N_Z(0, js) (see the module docstring)."""
    var = j * s
    half = int(math.ceil(_TAIL_SDS * math.sqrt(var))) + 2
    if 2 * half + 1 > MAX_POINTS:
        raise InfeasibleError("discrete-Gaussian privacy-loss table too large")
    x = np.arange(-half, half + 1, dtype=float)
    logw = -x * x / (2.0 * var)
    w = np.exp(logw - logw.max())
    pmf = w / w.sum() * math.exp(_log_ratio_iid(j, s) + _SF_REL_ERR)
    # mass of |x| > half under N_Z(0, js) is < 2 e^{-half²/(2js)} / (normaliser) < 1e-40: put it at +∞
    tail = 2.0 * math.exp(-half * half / (2.0 * var))
    losses = (2.0 * x + j) / (2.0 * s)
    return _on_grid(losses, pmf, min(1.0, tail), step)


def dlaplace_part(t: float, j: int, step: float = DEFAULT_STEP) -> GridPLD:
    """L = (2K − j)/t, K ~ Bin(j, 1/(1+q)), q = e^{−1/t} (exact law; module docstring)."""
    q = math.exp(-1.0 / t)
    k = np.arange(j + 1, dtype=float)
    from scipy import stats  # imported on use: scipy.stats costs 0.3–1 s of start-up
    pmf = stats.binom.pmf(k, j, 1.0 / (1.0 + q)) * (1.0 + 1e-12)
    losses = (2.0 * k - j) / t
    return _on_grid(losses, pmf, 0.0, step)


def core_distribution(pair: CorePair, step: float = DEFAULT_STEP) -> GridPLD:
    """The discretised loss law of ``pair``'s core (a :class:`.composition.DominatingPair`)."""
    parts: list[GridPLD] = []
    if pair.gaussian_mu2 > 0:
        parts.append(gaussian_part(pair.gaussian_mu2, step))
    for s, j in pair.dgauss:
        parts.append(dgauss_part(float(s), int(j), step))
    for t, j in pair.dlaplace:
        parts.append(dlaplace_part(float(t), int(j), step))
    if not parts:
        return GridPLD(0, np.array([1.0]), 0.0, step)
    out = parts[0]
    for p in parts[1:]:
        out = out.convolve(p)
        if out.mass.size > MAX_POINTS:
            raise InfeasibleError("composed privacy-loss table too large")
    return out


# ------------------------------------------------------------------ profile-derived pairs (any mechanism)

#: tail mass moved to the table's ends after each composition (lower tail up to the lowest kept loss,
#: upper tail to +∞: both pessimistic, docs/proofs/ledger-composition.md §3)
TRUNCATION = 1e-14


def hull_pair(epsilons: npt.ArrayLike, deltas: npt.ArrayLike) -> tuple[FloatArray, FloatArray, float]:
    """The discrete pair whose hockey-stick curve is the lower convex hull of a sampled privacy profile.

    ``deltas[i]`` must bound ``H_{e^ε}(M(D)‖M(D'))`` at ``epsilons[i] >= 0`` for every *ordered* neighbouring
    pair (a profile of an (ε, δ(ε))-DP statement). With ``g(x) = sup_{D,D'} H_x(M(D)‖M(D'))`` (x = e^ε), g is
    convex and non-increasing, g(0) = 1, and ``g(x) = 1 − x + x·g(1/x)`` (swap of the pair); so g lies below the
    lower convex hull G of the points ``(0, 1)``, ``(e^{ε_i}, δ_i)``, ``(e^{−ε_i}, 1 − e^{−ε_i} + e^{−ε_i}δ_i)``,
    extended flat beyond the last point (docs/proofs/ledger-composition.md, Lemma 1). G is the hockey-stick
    curve of the pair with likelihood ratios at the hull's vertices b_j: ``Q(ratio = b_j) = s_j − s_{j−1}``
    (slope increase), ``P(ratio = b_j) = b_j·Q(ratio = b_j)``, ``P(+∞) = G(last vertex)``.

    Returns ``(losses, masses, infinity)``: the privacy loss ln b_j under P with its masses, and P(+∞).
    """
    eps = np.asarray(epsilons, dtype=float)
    dl = np.minimum.accumulate(np.clip(np.asarray(deltas, dtype=float), 0.0, 1.0)[np.argsort(eps)])
    eps = np.sort(eps)
    if eps.size == 0 or eps[0] < 0 or not np.all(np.isfinite(eps)):
        raise ValueError("hull_pair needs finite epsilons >= 0")
    x_hi = np.exp(eps)
    x_lo = np.exp(-eps)
    xs = np.concatenate([[0.0], x_lo[::-1], x_hi])
    ys = np.concatenate([[1.0], (1.0 - x_lo + x_lo * dl)[::-1], dl])
    order = np.argsort(xs, kind="stable")
    xs, ys = xs[order], ys[order]
    hull: list[int] = []  # lower convex hull (Andrew's monotone chain), points sorted by x
    for i in range(xs.size):
        while len(hull) >= 2:
            ia, ib = hull[-2], hull[-1]
            # drop ib if it lies on or above the chord ia → i, or below it by float rounding only (dropping a
            # vertex only raises the curve: still an upper bound)
            lhs, rhs = (ys[ib] - ys[ia]) * (xs[i] - xs[ia]), (ys[i] - ys[ia]) * (xs[ib] - xs[ia])
            if lhs >= rhs - 1e-12 * (abs(lhs) + abs(rhs)):
                hull.pop()
            else:
                break
        if hull and xs[i] == xs[hull[-1]]:  # same abscissa: keep the lower point
            if ys[i] < ys[hull[-1]]:
                hull[-1] = i
            continue
        hull.append(i)
    hx, hy = xs[hull], ys[hull]
    slopes = np.append(np.diff(hy) / np.diff(hx), 0.0)  # s_j: the slope right of vertex j (0 after the last)
    q = np.maximum(np.diff(slopes), 0.0)  # Q-mass at vertices 1.. (vertex 0 is x = 0: P never there)
    b = hx[1:]
    p = b * q
    keep = p > 0
    return np.log(b[keep]), p[keep], float(hy[-1])


#: a loss within this many grid steps above a grid point is put on that point (exact ε samples are multiples of
#: the step, so their losses ±m·step come back from exp/log a few ulps off); the shift is covered by _SNAP_MASS
_SNAP = 1e-9
_SNAP_MASS = 1e-13


def snap_grid(epsilons: npt.ArrayLike, step: float = DEFAULT_STEP) -> FloatArray:
    """ε sample points moved *up* to multiples of ``step`` (a profile is non-increasing, so the δ sampled there is
    still a valid bound at the moved point; the hull pair's losses then fall on the grid)."""
    return np.unique(np.ceil(np.asarray(epsilons, dtype=float) / step - _SNAP) * step)


def from_profile(epsilons: npt.ArrayLike, deltas: npt.ArrayLike, step: float = DEFAULT_STEP) -> GridPLD:
    """The pessimistically discretised privacy-loss law of :func:`hull_pair`: each loss goes to the grid point
    at or above it (a loss at most ``_SNAP·step`` above a grid point goes to that point, a shift of the hockey
    stick by at most ``_SNAP·step`` < ``_SNAP_MASS``, which is added to the mass at +∞)."""
    losses, mass, inf = hull_pair(epsilons, deltas)
    idx = np.ceil(losses / step - _SNAP).astype(np.int64)
    lo = int(idx.min())
    size = int(idx.max()) - lo + 1
    if size > MAX_POINTS:
        raise InfeasibleError(f"privacy-loss table of {size} points exceeds {MAX_POINTS}")
    out = np.bincount(idx - lo, weights=mass, minlength=size).astype(float)
    return GridPLD(lo, out, min(1.0, inf + _SNAP_MASS), step)


def truncate(pld: GridPLD, tail: float = TRUNCATION) -> GridPLD:
    """Move the lowest losses' mass (≤ ``tail`` in all) up to the lowest kept loss and the highest losses'
    mass (≤ ``tail``) to +∞: both only raise losses, so every hockey-stick value can only grow."""
    m = pld.mass
    if m.size <= 2:
        return pld
    c = np.cumsum(m)
    lo = int(np.searchsorted(c, tail, side="right"))  # indices < lo carry <= tail in all
    rc = np.cumsum(m[::-1])
    hi = m.size - int(np.searchsorted(rc, tail, side="right"))  # indices >= hi carry <= tail in all
    lo = min(lo, m.size - 1)
    hi = max(hi, lo + 1)
    if lo == 0 and hi == m.size:
        return pld
    kept = m[lo:hi].copy()
    kept[0] += float(c[lo - 1]) if lo > 0 else 0.0
    up = float(m[hi:].sum())
    inf = min(1.0, pld.infinity + up)
    return GridPLD(pld.offset + lo, kept, inf, pld.step)


def compose_all(parts: list[tuple[GridPLD, int]]) -> GridPLD:
    """Loss law of the composition of ``count`` copies of each ``pld`` (FFT convolutions, binary powering,
    truncated after each step); raises :class:`~sparsedp.errors.InfeasibleError` if a table grows past
    :data:`MAX_POINTS`."""
    out: GridPLD | None = None
    for pld, count in parts:
        if count <= 0:
            continue
        base, n = pld, int(count)
        while n:
            if n & 1:
                out = base if out is None else truncate(out.convolve(base))
                _check_size(out)
            n >>= 1
            if n:
                base = truncate(base.convolve(base))
                _check_size(base)
    if out is None:
        return GridPLD(0, np.array([1.0]), 0.0, DEFAULT_STEP)
    return out


def _check_size(pld: GridPLD) -> None:
    if pld.mass.size > MAX_POINTS:
        raise InfeasibleError(f"composed privacy-loss table of {pld.mass.size} points exceeds {MAX_POINTS}")
