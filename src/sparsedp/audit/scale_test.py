"""A test of a released noise's scale whose p-value is a bound from the exact law: no approximation, no seed-picking.

The conformance check of the public-key, two-stage, vector and blanket targets asks whether the integer noise a
release added is the calibrated law. Earlier it compared the mean of ``z²`` with 1 using the sample's own standard
error: a normal approximation of a studentised mean of a skewed variable, whose tails are far off at a few hundred
runs (a calibrated release gave p = 2.6e-6 once). This module replaces it by a one-dimensional statistic with an
exact tail bound:

* the noise values ``X_1 … X_N`` (independent; each group of them has one of the laws below) are read back exactly
  (integers in the sampler's units; a value off the lattice is impossible under the calibrated law, p = 0);
* the statistic is ``S = Σ g(X_j)`` with ``g(x) = x²`` for the discrete Gaussian (its log-likelihood in the scale is
  linear in x²) and ``g(x) = |x|`` for the two-sided geometric / discrete Laplace (linear in |x|);
* the p-value is the **Chernoff bound** of the tail ``S`` fell in, from the exact moment generating function of
  ``g(X)`` under the calibrated law: ``P[S >= s] <= exp(inf_{λ>0} (Σ_j log M_j(λ) − λ s))`` and the same with λ < 0
  for ``P[S <= s]`` (Chernoff 1952; e.g. Boucheron, Lugosi & Massart 2013, §2.2); two-sided, doubled. A bound on
  the true tail probability, so under the calibrated mechanism ``P[p <= a] <= a`` for every level a (the test is
  conservative, never anti-conservative), at any N.

Exact MGFs (closed forms, no truncation):

* discrete Gaussian ``N_Z(0, s)`` (Canonne, Kamath & Steinke 2020, Def. 1): ``E e^{λX²} = Z(s')/Z(s)`` with
  ``1/s' = 1/s − 2λ`` (λ < 1/(2s)) and ``Z(s) = Σ_{x∈ℤ} e^{−x²/(2s)}`` (:func:`~sparsedp.accounting.discrete.dgauss_log_normaliser`,
  an exact series); ``E X² =`` :func:`~sparsedp.accounting.discrete.dgauss_variance`.
* two-sided geometric of base a (pmf ∝ a^{|x|}, the discrete Laplace of scale b = −1/ln a), optionally conditioned
  on ``X >= L`` for an integer L <= 0 (the blanket histogram's released keys: ``c + Z >= τ``): with
  ``F(β) = Σ_{x>=L} β^{|x|} = (1 + β − β^{K+1})/(1 − β)``, K = −L (K = ∞: ``(1 + β)/(1 − β)``),
  ``E e^{λ|X|} = F(a e^λ)/F(a)`` for a e^λ < 1, and ``E|X| = a F'(a)/F(a)``.

``ratio`` reports ``S / E S``: the observed mean square (Gaussian) or mean absolute value (geometric) over the
calibrated one (0.25 / 0.5 for a noise at half its scale).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Sequence

import numpy as np
from scipy import optimize

from ..accounting.discrete import dgauss_log_normaliser, dgauss_variance

__all__ = ["NoiseLaw", "discrete_gaussian", "normal", "two_sided_geometric", "ScaleTest", "scale_test", "integer_noise"]


@dataclass(frozen=True)
class NoiseLaw:
    """A noise law of the calibrated mechanism: ``family`` "gaussian" (``param`` = s of ``N_Z(0, s)``), "geometric"
    (``param`` = the base a; ``lower`` = L, the law conditioned on X >= L, None: not conditioned) or "normal" (the
    float ``N(0, param)`` of ``insecure_float`` releases: ``E e^{λX²} = (1 − 2λ·param)^{−1/2}``, no lattice)."""

    family: str
    param: Fraction | float
    lower: int | None = None

    @property
    def statistic(self) -> str:
        return "mean absolute value" if self.family == "geometric" else "mean square"

    @property
    def lattice(self) -> bool:
        """Whether the values are integers (every family but the float Gaussian of ``insecure_float``)."""
        return self.family != "normal"

    def g(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, np.float64)
        return np.abs(x) if self.family == "geometric" else x * x

    def mean(self) -> float:
        """``E g(X)``."""
        if self.family == "gaussian":
            return dgauss_variance(self.param)
        if self.family == "normal":
            return float(self.param)
        a = float(self.param)
        return a * self._dlog_f(a)

    def lam_range(self) -> tuple[float, float]:
        """The open interval of λ where ``E e^{λ g(X)}`` is finite (the upper end)."""
        if self.family in ("gaussian", "normal"):
            return -math.inf, 1.0 / (2.0 * float(self.param))
        return -math.inf, -math.log(float(self.param))

    def log_mgf(self, lam: float) -> float:
        """``log E e^{λ g(X)}`` (module docstring)."""
        if self.family == "gaussian":
            s = float(self.param)
            return dgauss_log_normaliser(s / (1.0 - 2.0 * lam * s)) - dgauss_log_normaliser(s)
        if self.family == "normal":
            return -0.5 * math.log1p(-2.0 * lam * float(self.param))
        a = float(self.param)
        return self._log_f(a * math.exp(lam)) - self._log_f(a)

    def _log_f(self, b: float) -> float:
        k = self.lower
        if k is None:
            return math.log1p(b) - math.log1p(-b)
        kk = -int(k)
        return math.log(1.0 + b - b ** (kk + 1)) - math.log1p(-b)

    def _dlog_f(self, b: float) -> float:
        """d/dβ log F(β)."""
        if self.lower is None:
            return 1.0 / (1.0 + b) + 1.0 / (1.0 - b)
        kk = -int(self.lower)
        num = 1.0 - (kk + 1) * b ** kk
        return num / (1.0 + b - b ** (kk + 1)) + 1.0 / (1.0 - b)


def discrete_gaussian(sigma2: Fraction | float) -> NoiseLaw:
    """``N_Z(0, sigma2)``."""
    return NoiseLaw("gaussian", sigma2)


def normal(variance: float) -> NoiseLaw:
    """The float Gaussian ``N(0, variance)`` (``insecure_float`` releases)."""
    return NoiseLaw("normal", float(variance))


def two_sided_geometric(base: Fraction | float, lower: int | None = None) -> NoiseLaw:
    """pmf ∝ base^{|x|} (the discrete Laplace of scale −1/ln base), conditioned on X >= ``lower`` if given."""
    if lower is not None and lower > 0:
        raise ValueError("lower must be <= 0 (the law must contain 0)")
    return NoiseLaw("geometric", base, lower)


@dataclass(frozen=True)
class ScaleTest:
    """Outcome of :func:`scale_test`: ``values`` noise values, ``ratio`` = S/E S, ``p_value`` (a bound, see the
    module docstring; 0 when a value is off the law's integer lattice), ``statistic`` (what S averages)."""

    values: int
    ratio: float
    p_value: float
    statistic: str
    off_lattice: int = 0


def integer_noise(x: np.ndarray, tolerance: float = 0.25) -> tuple[np.ndarray, int]:
    """``(rint(x), number of entries farther than tolerance from an integer)``: the noise of an exact integer
    sampler read back from float outputs (a float error is far below 1/4 of a lattice step)."""
    x = np.asarray(x, np.float64)
    z = np.rint(x)
    return z, int(np.count_nonzero(np.abs(x - z) > tolerance))


def _chernoff(groups: Sequence[tuple[NoiseLaw, int]], s: float, upper: bool) -> float:
    """log of the Chernoff bound of ``P[S >= s]`` (``upper``) or ``P[S <= s]``."""
    hi = min(law.lam_range()[1] for law, _ in groups)

    def f(lam: float) -> float:
        return sum(n * law.log_mgf(lam) for law, n in groups) - lam * s

    if upper:
        lo_l, hi_l = 0.0, hi * (1.0 - 1e-9)
    else:  # the minimiser of the convex f on λ < 0, bracketed by doubling from −hi
        lo_l = -hi
        for _ in range(400):
            if f(2.0 * lo_l) >= f(lo_l):
                break
            lo_l *= 2.0
        lo_l, hi_l = 2.0 * lo_l, 0.0
    r = optimize.minimize_scalar(f, bounds=(lo_l, hi_l), method="bounded",
                                 options={"xatol": 1e-12 * max(abs(lo_l), abs(hi_l))})
    return min(0.0, float(r.fun), f(0.0))


def scale_test(groups: Sequence[tuple[NoiseLaw, np.ndarray]]) -> ScaleTest:
    """The two-sided scale test of the module docstring on noise values ``groups`` = ``[(law, values), …]``."""
    laws, off, total, mean, count = [], 0, 0.0, 0.0, 0
    for law, values in groups:
        z, bad = integer_noise(values) if law.lattice else (np.asarray(values, np.float64), 0)
        off += bad
        total += float(np.sum(law.g(z)))
        mean += z.size * law.mean()
        count += int(z.size)
        laws.append((law, int(z.size)))
    what = " / ".join(sorted({law.statistic for law, _ in groups}))
    if count == 0:
        raise ValueError("no noise values to test")
    ratio = total / mean if mean > 0 else math.inf
    if off:
        return ScaleTest(values=count, ratio=ratio, p_value=0.0, statistic=what, off_lattice=off)
    log_p = _chernoff(laws, total, upper=total >= mean)
    p = min(1.0, 2.0 * math.exp(log_p))
    return ScaleTest(values=count, ratio=ratio, p_value=p, statistic=what)
