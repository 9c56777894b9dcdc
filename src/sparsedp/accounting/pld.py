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

import numpy as np
from ._special import special

from ..errors import InfeasibleError

__all__ = ["GridPLD", "core_distribution", "DEFAULT_STEP", "MAX_POINTS"]

DEFAULT_STEP = 1e-4
MAX_POINTS = 1 << 23
_TAIL_SDS = 14.0  # table half-width in standard deviations of the loss (tail beyond: < 1e-44)


@dataclass(frozen=True)
class GridPLD:
    """Loss law on ``(offset + i)·step`` (pmf ``mass[i]``) plus ``infinity`` mass at +∞."""

    offset: int
    mass: np.ndarray
    infinity: float
    step: float

    def convolve(self, other: "GridPLD") -> "GridPLD":
        assert self.step == other.step
        from scipy import signal  # imported on use: scipy.signal costs 0.3–1 s of start-up
        m = signal.fftconvolve(self.mass, other.mass)
        np.maximum(m, 0.0, out=m)
        keep_a, keep_b = 1.0 - self.infinity, 1.0 - other.infinity
        return GridPLD(self.offset + other.offset, m, 1.0 - keep_a * keep_b, self.step)

    def hockey_stick(self, epsilon) -> np.ndarray:
        eps = np.atleast_1d(np.asarray(epsilon, dtype=float))
        losses = (self.offset + np.arange(self.mass.size)) * self.step
        slack = self.mass.size * 1e-15
        out = np.empty_like(eps)
        for i, e in enumerate(eps):
            w = -np.expm1(np.minimum(e - losses, 0.0))  # (1 − e^{ε − l})_+
            out[i] = float(np.dot(self.mass, w)) + self.infinity + slack
        return np.minimum(out, 1.0)


def _on_grid(losses: np.ndarray, mass: np.ndarray, infinity: float, step: float) -> GridPLD:
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
    from .discrete_histograms import _SF_REL_ERR, _log_ratio_iid

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


def core_distribution(pair, step: float = DEFAULT_STEP) -> GridPLD:
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
