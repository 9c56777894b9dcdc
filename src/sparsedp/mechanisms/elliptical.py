"""Vector sums whose coordinates have different sensitivities: elliptical Gaussian and parallelotope Laplace.

Source: Lebeda (2023) PhD thesis, Chapter 4 (Lebeda (2023) L1595–1856; implementation spec
Lebeda (2023) §2). Replacement neighbours, n public.

Setting. Each of n rows lies in a public box ``[lower_i, upper_i]``; the sum f(x) = Σ_j x_j then has
per-coordinate sensitivity Δ⃗_i = upper_i − lower_i, and because a replaced row can move every
coordinate at once, Δ₂ = ‖Δ⃗‖₂ and Δ₁ = ‖Δ⃗‖₁. Rows are *clipped* into the box (an unenforced bound
voids the guarantee). The error measure is the p-th moment E‖η‖_p^p.

Mechanisms (all add independent noise per coordinate; ``shape`` picks the vector b):

* Algorithm 14, ``shape="spherical"``: N(0, σ²) on every coordinate with σ = σ_opt·‖Δ⃗‖₂.
* Algorithm 15, elliptical Gaussian: σ_i = σ_opt·Δ⃗_i / b_i with ‖b‖₂ = 1 (Lemma 4.6: on the data
  rescaled by b_i/Δ⃗_i the ℓ₂ sensitivity is ‖b‖₂ = 1, so this is the spherical mechanism followed by a
  post-processing rescale). Lemma 4.8 / Theorem 4.1: the optimal shape for the p-th moment is
  b_i ∝ Δ⃗_i^{p/(p+2)}, i.e.

      σ_i = σ_opt · Δ⃗_i^{2/(p+2)} · (Σ_j Δ⃗_j^{2p/(p+2)})^{1/2},
      E‖η‖_p^p = m_p · σ_opt^p · ‖Δ⃗‖_{2p/(p+2)}^p,     m_p = 2^{p/2} Γ((p+1)/2)/√π  (Lemma 4.3).

  ``shape="proportional"`` is b_i = 1/√d (noise ∝ sensitivity, [Mar20]/[NTZ16]'s MVE).
* Algorithm 16, parallelotope Laplace (pure ε-DP): s_i = Δ⃗_i/(b_i ε) with ‖b‖₁ = 1 (Lemma 4.9);
  optimal b_i ∝ Δ⃗_i^{p/(p+1)} (Lemma 4.11), i.e. s_i = Δ⃗_i^{1/(p+1)} (Σ_j Δ⃗_j^{p/(p+1)})/ε and
  E‖η‖_p^p = Γ(p+1)·‖Δ⃗‖_{p/(p+1)}^p/ε^p (Theorem 4.2). ``"spherical"`` is the standard Laplace
  mechanism s_i = ‖Δ⃗‖₁/ε; ``"proportional"`` is b_i = 1/d.

σ_opt is the noise the spherical mechanism needs for ℓ₂ sensitivity 1 (Lemma 4.2: every Gaussian result
carries over by replacing 1/√(2ρ) with σ_opt). For ρ-zCDP, σ_opt = 1/√(2ρ) (Lemma 4.1). For (ε, δ):

* secure (default) noise is the discrete Gaussian, whose exact (ε, δ) profile is not the analytic
  Gaussian one, so we use its zCDP guarantee (Canonne–Kamath–Steinke 2020, Thm 14: the same
  Δ²/(2σ²) as the continuous Gaussian) and the accounting layer's zCDP → (ε, δ) conversion
  (:func:`sparsedp.accounting.zcdp.zcdp_to_dp_delta`): ρ is the largest value whose conversion meets δ;
* ``insecure_float=True`` uses the exact analytic-Gaussian σ_opt (Balle–Wang 2018, via
  :func:`sparsedp.accounting.gaussian_sigma` with sensitivity 1).

Secure noise on real data (grid scheme). All coordinates share one public integer noise parameter
S = 2^k (grid units). Coordinate i (Δ⃗_i > 0) gets the grid spacing γ_i = scale_i/S, every clipped row
is rounded to r_{j,i} = round((x_{j,i} − lower_i)/γ_i) clipped to {0, …, K_i} with K_i = ⌈Δ⃗_i/γ_i⌉,
so the integer sum Σ_j r_{j,i} has sensitivity K_i. One batch of exact integer noise then covers all
coordinates (:mod:`sparsedp.noise`):

* Gaussian: Z_i ~ N_ℤ(0, S_eff²) with S_eff² = Σ_i K_i²/(2ρ) (an exact rational), which is
  Σ_i K_i²/(2S_eff²) = ρ-zCDP (Canonne–Kamath–Steinke 2020, Thm 14: the multivariate discrete Gaussian
  with ℓ₂ sensitivity Δ is Δ²/(2σ²)-zCDP). Since K_i >= Δ⃗_i S/σ_i, S_eff >= S.
* Laplace: Z_i ~ discrete Laplace with scale T_eff = Σ_i K_i/ε, which is ε-DP (the privacy loss of
  coordinate i is at most K_i/T_eff).

The release is n·lower_i + γ_i·(Σ_j r_{j,i} + Z_i), a post-processing; its per-coordinate noise is
γ_i·S_eff (resp. γ_i·T_eff), reported as ``noise_scales`` (at most a relative 1/1000 above the
calibration's σ_i / s_i in normal regimes, because S is chosen so that every K_i >= 1000). S depends
only on public quantities (n, Δ⃗, the scales) and also keeps the deterministic rounding error, at most
n·γ_i/2, below 1/1000 of the noise (reported as ``rounding_bound``) unless int64 limits force a coarser
grid (then only utility suffers). Expected errors are the continuous formulas (the discrete Gaussian's
variance is at most its parameter; the discrete Laplace's is within a relative 1/(12 t²) of 2t²).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import numpy.typing as npt
from scipy import special

from .. import _validate as v, noise
from ..accounting import gaussian_sigma
from ..accounting.zcdp import zcdp_to_dp_delta
from ..errors import InfeasibleError, InputDataError, InvalidParameterError
from ..noise.source import SecureRandom

__all__ = [
    "VectorCalibration",
    "VectorRelease",
    "calibrate_gaussian",
    "calibrate_laplace",
    "gaussian_moment",
    "gaussian_shape",
    "gaussian_sum",
    "laplace_moment",
    "laplace_shape",
    "laplace_sum",
    "unit_sigma",
]

#: a float vector (sensitivities, shapes, noise scales)
FloatArray = npt.NDArray[np.float64]

SHAPES = ("optimal", "spherical", "proportional")

# Largest integer total we allow in grid units (sums and noise stay exact in int64).
_INT_BUDGET = 2**60
# Rounding error target: n·γ/2 <= noise scale / _ROUNDING_RATIO.
_ROUNDING_RATIO = 1000.0


def gaussian_moment(p: float) -> float:
    """m_p = E|N(0,1)|^p = 2^{p/2} Γ((p+1)/2)/√π (thesis Lemma 4.3, [Win12] eq. 18)."""
    p = v.positive("p", p)
    return math.exp(0.5 * p * math.log(2.0) + special.gammaln((p + 1) / 2) - 0.5 * math.log(math.pi))


def laplace_moment(p: float) -> float:
    """E|Lap(1)|^p = Γ(p+1) (thesis Lemma 4.5)."""
    p = v.positive("p", p)
    return math.exp(special.gammaln(p + 1))


def _sensitivities(sensitivities: npt.ArrayLike) -> np.ndarray:
    d = np.asarray(sensitivities, dtype=float)
    if d.ndim != 1 or d.size == 0:
        raise InvalidParameterError(f"sensitivities must be a non-empty 1-D vector, got shape {d.shape}")
    if not np.all(np.isfinite(d)) or np.any(d < 0):
        raise InvalidParameterError("sensitivities must be finite and >= 0 (a coordinate with sensitivity 0 "
                                    "is released without noise)")
    if not np.any(d > 0):
        raise InvalidParameterError("at least one sensitivity must be > 0")
    return d


def gaussian_shape(sensitivities: npt.ArrayLike, p: float = 2.0, shape: str = "optimal") -> np.ndarray:
    """The vector b of Algorithm 15 (‖b‖₂ = 1 over the coordinates with Δ⃗_i > 0; 0 elsewhere).

    ``"optimal"``: b_i = Δ⃗_i^{p/(p+2)}/√(Σ_j Δ⃗_j^{2p/(p+2)}) (Lemma 4.8); ``"spherical"``: b_i = Δ⃗_i/‖Δ⃗‖₂
    (Algorithm 14); ``"proportional"``: b_i = 1/√d (noise ∝ sensitivity).
    """
    p = v.positive("p", p)
    d, pos, w = _shape_weights(sensitivities, p / (p + 2), shape)
    b: FloatArray = np.zeros_like(d)
    b[pos] = w / math.sqrt(float(np.sum(w * w)))
    return b


def laplace_shape(sensitivities: npt.ArrayLike, p: float = 1.0, shape: str = "optimal") -> np.ndarray:
    """The vector b of Algorithm 16 (‖b‖₁ = 1 over the coordinates with Δ⃗_i > 0).

    ``"optimal"``: b_i = Δ⃗_i^{p/(p+1)}/Σ_j Δ⃗_j^{p/(p+1)} (Lemma 4.11); ``"spherical"``: b_i = Δ⃗_i/‖Δ⃗‖₁
    (standard Laplace mechanism); ``"proportional"``: b_i = 1/d.
    """
    p = v.positive("p", p)
    d, pos, w = _shape_weights(sensitivities, p / (p + 1), shape)
    b: FloatArray = np.zeros_like(d)
    b[pos] = w / float(np.sum(w))
    return b


def _shape_weights(sensitivities: npt.ArrayLike, exponent: float,
                   shape: str) -> tuple[FloatArray, npt.NDArray[np.bool_], FloatArray]:
    """Unnormalised weights of the noise shape on the coordinates with Δ⃗_i > 0.

    ``"optimal"``: (Δ⃗_i/max Δ⃗)^exponent; ``"spherical"``: Δ⃗_i/max Δ⃗; ``"proportional"``: 1. Working
    relative to the largest Δ keeps very large or small magnitudes from overflowing.
    Returns (Δ⃗, mask of positive coordinates, weights on that mask).
    """
    d = _sensitivities(sensitivities)
    v.choice("shape", shape, SHAPES)
    pos = d > 0
    if shape == "optimal":
        w = (d[pos] / d[pos].max()) ** exponent
    elif shape == "spherical":
        w = d[pos] / d[pos].max()
    else:
        w = np.ones(int(pos.sum()))
    return d, pos, w


def _largest_rho_for(epsilon: float, delta: float) -> float:
    """Largest ρ whose zCDP → (ε, δ) conversion (accounting layer) gives δ' <= δ (bisection on log ρ)."""
    lo, hi = 1e-12, 1.0
    while zcdp_to_dp_delta(hi, epsilon) <= delta:
        lo, hi = hi, hi * 2.0
        if hi > 1e12:
            raise InfeasibleError(f"no finite rho needed for epsilon={epsilon}, delta={delta}")
    if zcdp_to_dp_delta(lo, epsilon) > delta:
        raise InfeasibleError(f"(epsilon={epsilon}, delta={delta}) needs rho < 1e-12; raise epsilon or delta")
    for _ in range(200):
        mid = math.sqrt(lo * hi)
        if zcdp_to_dp_delta(mid, epsilon) <= delta:
            lo = mid
        else:
            hi = mid
        if hi / lo - 1.0 < 1e-13:
            break
    return lo  # lo always satisfies the predicate: conservative


def _unit(rho: float | None, epsilon: float | None, delta: float | None,
          insecure_float: bool) -> tuple[float, float | None]:
    """(σ_opt, the zCDP ρ it provides, or None for the analytic-Gaussian (ε, δ) float calibration)."""
    if rho is not None:
        if epsilon is not None or delta is not None:
            raise InvalidParameterError("give either rho (zCDP) or epsilon and delta, not both")
        r = v.positive("rho", rho)
        return 1.0 / math.sqrt(2.0 * r), r
    if epsilon is None or delta is None:
        raise InvalidParameterError("give rho (zCDP) or both epsilon and delta")
    eps = v.epsilon(epsilon)
    dlt = v.delta(delta)
    if insecure_float:
        return gaussian_sigma(eps, dlt, 1.0), None
    r = _largest_rho_for(eps, dlt)
    return 1.0 / math.sqrt(2.0 * r), r


def unit_sigma(*, rho: float | None = None, epsilon: float | None = None, delta: float | None = None,
               insecure_float: bool = False) -> float:
    """σ_opt: the spherical Gaussian noise std for ℓ₂ sensitivity 1 (thesis Lemma 4.2).

    Exactly one of ``rho`` (ρ-zCDP: σ_opt = 1/√(2ρ), Lemma 4.1) or ``epsilon`` and ``delta``.
    For (ε, δ) with secure discrete noise, σ_opt = 1/√(2ρ) for the largest ρ that the accounting layer's
    zCDP → (ε, δ) conversion accepts; with ``insecure_float=True`` it is the exact analytic-Gaussian value
    :func:`sparsedp.accounting.gaussian_sigma` (ε, δ, 1) (e.g. 3.7306 at ε = 1, δ = 1e−5).
    """
    return _unit(rho, epsilon, delta, insecure_float)[0]


@dataclass(frozen=True, eq=False)
class VectorCalibration:
    """Per-coordinate noise of a vector mechanism and the error it expects.

    ``scales`` holds σ_i (Gaussian std) or s_i (Laplace scale), 0 where Δ⃗_i = 0. ``expected_error`` is
    E‖η‖_p^p of this mechanism and ``spherical_error`` that of the standard mechanism at the same
    privacy (Algorithm 14, or the Laplace mechanism with s = ‖Δ⃗‖₁/ε); ``improvement`` is their ratio,
    d‖Δ⃗‖₂^p/‖Δ⃗‖_{2p/(p+2)}^p for the optimal Gaussian shape (thesis §4.1).
    """

    mechanism: str            # "gaussian" | "laplace"
    shape: str                # "optimal" | "spherical" | "proportional"
    p: float
    sensitivities: np.ndarray
    b: np.ndarray
    scales: np.ndarray
    privacy: str              # "zcdp" | "approx" | "pure"
    rho: float | None
    epsilon: float | None
    delta: float | None
    unit_sigma: float | None  # σ_opt (Gaussian only)
    zcdp_rho: float | None    # the ρ-zCDP the Gaussian noise gives (None: analytic-Gaussian float (ε, δ))
    insecure_float: bool
    expected_error: float
    spherical_error: float

    @property
    def improvement(self) -> float:
        return self.spherical_error / self.expected_error

    def expected_mean_error(self, n: int) -> float:
        """E‖η/n‖_p^p: the error of the mean (sum divided by the public n)."""
        return float(self.expected_error / float(n) ** self.p)


def _freeze(a: np.ndarray) -> np.ndarray:
    a = np.array(a, dtype=float)
    a.setflags(write=False)
    return a


def calibrate_gaussian(sensitivities: npt.ArrayLike, *, rho: float | None = None, epsilon: float | None = None,
                       delta: float | None = None, p: float = 2.0, shape: str = "optimal",
                       insecure_float: bool = False) -> VectorCalibration:
    """Per-coordinate σ_i of Algorithm 15 (or 14) for ρ-zCDP or (ε, δ)-DP; see the module docstring.

    σ_i = σ_opt·Δ⃗_i/b_i; the optimal shape gives E‖η‖_p^p = m_p σ_opt^p ‖Δ⃗‖_{2p/(p+2)}^p (Theorem 4.1).
    """
    d = _sensitivities(sensitivities)
    p = v.positive("p", p)
    s_opt, zrho = _unit(rho, epsilon, delta, bool(insecure_float))
    b = gaussian_shape(d, p, shape)
    pos = d > 0
    sig = np.zeros_like(d)
    sig[pos] = s_opt * d[pos] / b[pos]
    mp = gaussian_moment(p)
    dpos = d[pos]
    spherical = mp * dpos.size * (s_opt * float(np.linalg.norm(dpos))) ** p
    return VectorCalibration(
        mechanism="gaussian", shape=shape, p=p, sensitivities=_freeze(d), b=_freeze(b), scales=_freeze(sig),
        privacy="zcdp" if rho is not None else "approx",
        rho=float(rho) if rho is not None else None,
        epsilon=float(epsilon) if epsilon is not None else None,
        delta=float(delta) if delta is not None else None,
        unit_sigma=s_opt, zcdp_rho=zrho, insecure_float=bool(insecure_float),
        expected_error=mp * float(np.sum(sig[pos] ** p)), spherical_error=spherical)


def calibrate_laplace(sensitivities: npt.ArrayLike, *, epsilon: float, p: float = 1.0, shape: str = "optimal",
                      insecure_float: bool = False) -> VectorCalibration:
    """Per-coordinate Laplace scales s_i = Δ⃗_i/(b_i ε) of Algorithm 16 (pure ε-DP, Lemma 4.9).

    The optimal shape gives E‖η‖_p^p = Γ(p+1)‖Δ⃗‖_{p/(p+1)}^p/ε^p (Theorem 4.2).
    """
    d = _sensitivities(sensitivities)
    p = v.positive("p", p)
    eps = v.epsilon(epsilon)
    b = laplace_shape(d, p, shape)
    pos = d > 0
    s = np.zeros_like(d)
    s[pos] = d[pos] / (b[pos] * eps)
    lp = laplace_moment(p)
    dpos = d[pos]
    spherical = lp * dpos.size * (float(np.sum(dpos)) / eps) ** p
    return VectorCalibration(
        mechanism="laplace", shape=shape, p=p, sensitivities=_freeze(d), b=_freeze(b), scales=_freeze(s),
        privacy="pure", rho=None, epsilon=eps, delta=None, unit_sigma=None, zcdp_rho=None,
        insecure_float=bool(insecure_float),
        expected_error=lp * float(np.sum(s[pos] ** p)), spherical_error=spherical)


@dataclass(frozen=True, eq=False)
class VectorRelease:
    """A noisy vector sum. ``values`` is the released sum; ``mean`` divides by the public n.

    ``n_clipped`` counts rows that had at least one coordinate outside the box (they were clipped).
    ``noise_scales[i]`` is the noise actually added to coordinate i (Gaussian std or Laplace scale; the
    calibration's value, inflated by at most ~1/1000 by the grid). ``rounding_bound[i]`` bounds the
    deterministic grid-rounding error of coordinate i; ``grid_spacing`` (γ_i) and ``grid_sensitivity``
    (K_i) describe the secure path's grid (all 0 with float noise).
    """

    values: np.ndarray
    n: int
    calibration: VectorCalibration
    n_clipped: int
    noise_scales: np.ndarray
    rounding_bound: np.ndarray
    grid_spacing: np.ndarray
    grid_sensitivity: np.ndarray

    @property
    def mean(self) -> np.ndarray:
        return self.values / self.n


def _rows(x: npt.ArrayLike, d_expected: int | None = None) -> np.ndarray:
    """``d_expected`` only disambiguates 1-D input (n values of one column, or one row of d values)."""
    """An (n, d) float array from a numpy array, a list of rows, or a (pandas/polars) DataFrame."""
    if hasattr(x, "to_numpy") and not isinstance(x, np.ndarray):
        x = x.to_numpy()
    try:
        a = np.asarray(x, dtype=float)
    except (TypeError, ValueError) as e:
        raise InputDataError(f"x must be numeric rows (n x d), could not convert: {e}") from None
    if a.ndim == 1:
        a = a.reshape(-1, 1) if d_expected == 1 else a.reshape(1, -1)
    if a.ndim != 2:
        raise InputDataError(f"x must be a 2-D array of rows (n x d), got shape {a.shape}")
    if a.shape[0] == 0:
        raise InputDataError("x has no rows; n must be >= 1")
    if not np.all(np.isfinite(a)):
        raise InputDataError("x contains NaN or infinite values; drop or impute them before releasing")
    return a


def _box(lower: npt.ArrayLike, upper: npt.ArrayLike, dim: int) -> tuple[np.ndarray, np.ndarray]:
    """The box as two length-``dim`` vectors (scalars broadcast)."""
    lo = np.asarray(lower, dtype=float)
    hi = np.asarray(upper, dtype=float)
    if lo.ndim > 1 or hi.ndim > 1:
        raise InvalidParameterError("lower and upper must be scalars or 1-D vectors")
    try:
        lo, hi = np.broadcast_to(lo, (dim,)), np.broadcast_to(hi, (dim,))
    except ValueError:
        raise InputDataError(f"x has {dim} columns but lower/upper have {lo.size}/{hi.size} entries") from None
    if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi))):
        raise InvalidParameterError("lower and upper must be finite")
    if np.any(hi < lo):
        i = int(np.argmax(hi < lo))
        raise InvalidParameterError(f"upper must be >= lower in every coordinate; coordinate {i}: "
                                    f"lower={lo[i]!r} > upper={hi[i]!r}")
    return lo.astype(float), hi.astype(float)


def _grid_units(n: int, width: np.ndarray, scale: np.ndarray) -> int:
    """The public grid-unit noise parameter S = 2^k (see the module docstring).

    Wanted: n·γ_i/2 <= scale_i/_ROUNDING_RATIO (γ_i = scale_i/S) and K_i ≈ width_i·S/scale_i >= 1000.
    Capped so that n·K_i stays below 2^60 and S below 2^36 (the samplers' exact ranges).
    """
    want = max(_ROUNDING_RATIO * n / 2.0, 1000.0 * float(np.max(scale / width)), 1.0)
    cap = min(2.0 ** 36, _INT_BUDGET / (n * float(np.max(width / scale))))
    return int(2 ** max(0, math.floor(math.log2(min(2.0 ** math.ceil(math.log2(want)), cap)))))


def _add_box_noise(x: np.ndarray, lo: np.ndarray, hi: np.ndarray, cal: VectorCalibration,
                   rng: SecureRandom | None, insecure_float: bool) -> VectorRelease:

    n, dim = x.shape
    xc = np.clip(x, lo, hi)
    n_clipped = int(np.count_nonzero(np.any(xc != x, axis=1)))
    width = hi - lo
    pos = width > 0
    out = n * lo.copy()
    rounding = np.zeros(dim)
    scales = np.array(cal.scales, dtype=float)
    spacing = np.zeros(dim)
    sens = np.zeros(dim, dtype=np.int64)
    if insecure_float:
        out = xc.sum(axis=0)
        if cal.mechanism == "gaussian":
            eta = noise.sample_gaussian(1.0, int(pos.sum()), rng=rng, insecure_float=True)
        else:
            eta = noise.sample_laplace(1.0, int(pos.sum()), rng=rng, insecure_float=True)
        out[pos] += np.asarray(eta, dtype=float) * cal.scales[pos]
    else:
        idx = np.flatnonzero(pos)
        w, sc = width[idx], cal.scales[idx]
        big_s = _grid_units(n, w, sc)
        gamma = sc / big_s
        kf = np.ceil(w / gamma)                                      # integer sensitivity per coordinate
        if float(np.max(kf)) * n >= _INT_BUDGET * 4:
            raise InfeasibleError("the noise is too small relative to the box for exact integer noise "
                                  f"(n={n}, smallest scale/width={float(np.min(sc / w)):.3g}); lower rho/epsilon")
        k = kf.astype(np.int64)
        r = np.clip(np.rint((xc[:, idx] - lo[idx]) / gamma), 0, k).astype(np.int64)
        if cal.mechanism == "gaussian":
            assert cal.zcdp_rho is not None  # secure Gaussian noise is calibrated in zCDP (_unit)
            s_eff2 = sum(Fraction(int(ki)) ** 2 for ki in k) / (2 * Fraction(cal.zcdp_rho))
            z = noise.sample_discrete_gaussian(s_eff2, idx.size, rng=rng)
            grid_noise = math.sqrt(float(s_eff2))
        else:
            assert cal.epsilon is not None  # the Laplace mechanism is calibrated in ε (calibrate_laplace)
            t_eff = Fraction(int(k.sum())) / Fraction(cal.epsilon)
            z = noise.sample_discrete_laplace(t_eff, idx.size, rng=rng)
            grid_noise = float(t_eff)
        out[idx] = n * lo[idx] + gamma * (r.sum(axis=0) + np.asarray(z, dtype=np.int64)).astype(float)
        scales[idx] = gamma * grid_noise
        spacing[idx] = gamma
        sens[idx] = k
        rounding[idx] = n * gamma / 2.0
    return VectorRelease(values=out, n=n, calibration=cal, n_clipped=n_clipped, noise_scales=_freeze(scales),
                         rounding_bound=_freeze(rounding), grid_spacing=_freeze(spacing), grid_sensitivity=sens)


def gaussian_sum(x: npt.ArrayLike, lower: npt.ArrayLike, upper: npt.ArrayLike, *, rho: float | None = None,
                 epsilon: float | None = None, delta: float | None = None, p: float = 2.0, shape: str = "optimal",
                 rng: SecureRandom | None = None, insecure_float: bool = False) -> VectorRelease:
    """Release Σ_j x_j with the elliptical Gaussian mechanism (Algorithm 15; Algorithm 14 for
    ``shape="spherical"``), ρ-zCDP (give ``rho``) or (ε, δ)-DP (give ``epsilon`` and ``delta``).

    ``x``: n×d rows (numpy array or DataFrame); each row is clipped into the public box
    [``lower``, ``upper``] (scalars or d-vectors), which sets Δ⃗ = upper − lower. Replacement
    neighbours; n is treated as public. Noise is exact discrete Gaussian on a fine grid (module
    docstring) unless ``insecure_float=True``. ``rng``: a :mod:`sparsedp.noise` source (tests only).
    """
    a = _rows(x, np.size(lower) if np.ndim(lower) else (1 if np.ndim(x) == 1 else None))
    lo, hi = _box(lower, upper, a.shape[1])
    cal = calibrate_gaussian(hi - lo, rho=rho, epsilon=epsilon, delta=delta, p=p, shape=shape,
                             insecure_float=insecure_float)
    return _add_box_noise(a, lo, hi, cal, rng, bool(insecure_float))


def laplace_sum(x: npt.ArrayLike, lower: npt.ArrayLike, upper: npt.ArrayLike, *, epsilon: float, p: float = 1.0,
                shape: str = "optimal", rng: SecureRandom | None = None, insecure_float: bool = False) -> VectorRelease:
    """Release Σ_j x_j with the parallelotope Laplace mechanism (Algorithm 16), pure ε-DP.

    Same input conventions as :func:`gaussian_sum`; noise is exact discrete Laplace on a fine grid
    unless ``insecure_float=True``.
    """
    a = _rows(x, np.size(lower) if np.ndim(lower) else (1 if np.ndim(x) == 1 else None))
    lo, hi = _box(lower, upper, a.shape[1])
    cal = calibrate_laplace(hi - lo, epsilon=epsilon, p=p, shape=shape, insecure_float=insecure_float)
    return _add_box_noise(a, lo, hi, cal, rng, bool(insecure_float))
