"""The public integer grid and exact noise of a secure vector sum (elliptical / spherical Gaussian, parallelotope
Laplace), for both neighbouring relations.

Source: Lebeda (2023) thesis Ch. 4 (L1595–1856; After Lebeda (2023)
§2): Algorithm 15 (elliptical Gaussian), 14 (spherical), 16 (parallelotope Laplace). The thesis analyses
continuous noise under replace-one neighbours; the discrete-noise argument and the add/remove variant are in
``docs/proofs/vector-sums.md`` (summarised here).

Every unit contributes one vector v ∈ R^d, already clipped by the caller (box: v_i ∈ [lower_i, upper_i]; ℓ2
ball: ‖v‖₂ <= C). Coordinate i has a public grid spacing γ_i and a public offset o_i; the unit's integer
contribution is r_i = clip(round((v_i − o_i)/γ_i), r_lo_i, r_hi_i) (the integer clip makes the range exact
whatever the float rounding did). The release is

    o_i·n + γ_i·(Σ_units r_i + Z_i),

with o_i = lower_i under replace-one (n public; this centres the box so the range is {0, …, K_i}) and o_i = 0
under add/remove (n is private, so nothing may be multiplied by it).

Grid sensitivity (integers): box, replace-one: K_i = r_hi_i − r_lo_i (two units' contributions differ by at most
that); box, add/remove: K_i = max(|r_lo_i|, |r_hi_i|) (a removed unit takes its own r away). ℓ2, with
K = C/γ a power of two: ‖r‖₂ <= K + √d/2 + 1 (rounding moves each coordinate by at most 1/2; the +1 absorbs the
float error of the clipping, relative 2^-40 at most), so the grid ℓ2 sensitivity is Δ_g = 2K + ⌈√d⌉ + 2
(replace-one) or K + ⌈√d/2⌉ + 1 (add/remove).

Noise. Gaussian: Z_i iid N_ℤ(0, s²) with s² = (Σ_i K_i²)/(2ρ) (box) or Δ_g²/(2ρ) (ℓ2), an exact rational:
the multivariate discrete Gaussian with ℓ2 sensitivity Δ is Δ²/(2s²)-zCDP (Canonne–Kamath–Steinke 2020,
Thm 14), so the integer sums are ρ-zCDP, and rescaling coordinate i by γ_i (and adding o_i·n, public under
replace-one) is post-processing — the thesis's Lemma 4.6 argument with the grid in place of the rescaled data.
Laplace (box only): Z_i iid discrete Laplace with scale t = Σ_i K_i/ε, ε-DP (ℓ1 sensitivity Σ K_i).

Grid choice (public quantities only: the bounds, the calibrated scales σ_i, ρ; never n): γ_i = σ_i/S with
S = 2^k the largest power of two such that every K_i <= 2^31 (so sums over up to 2^31 units stay exact in int64)
and s² <= 2^78 (the sampler's range). Since K_i ≈ S·extent_i/σ_i and Σ(extent_i/σ_i)² = 2ρ for the calibrated
shape, s ≈ S and the noise actually added, γ_i·s, is the calibrated σ_i up to a relative ~2^-20.
"""

from __future__ import annotations

from typing import Any

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from .. import noise
from ..accounting.calibration import Neighbours
from ..errors import InfeasibleError, InputDataError
from ..noise.source import SecureRandom

__all__ = ["VectorGrid", "box_grid", "l2_grid"]

_K_MAX = 2.0 ** 31          # |r| per unit and coordinate
_S2_MAX = 2.0 ** 78         # discrete Gaussian parameter (sampler range 2^80)
_T_MAX = 2.0 ** 38          # discrete Laplace scale (sampler range 2^40)
_SUM_MAX = 2 ** 62          # |Σ r| must stay below this (int64)


def _frozen(a: npt.ArrayLike, dtype: npt.DTypeLike = float) -> npt.NDArray[Any]:
    out: npt.NDArray[Any] = np.array(a, dtype=dtype)
    out.setflags(write=False)
    return out


@dataclass(frozen=True, eq=False)
class VectorGrid:
    """The public grid of one secure vector sum (see the module docstring).

    ``spacing``/``offset``: γ_i, o_i (γ_i = 0 marks a coordinate released without noise: zero sensitivity).
    ``r_lo``/``r_hi``: the integer range of one unit's contribution per coordinate (box); for the ℓ2 ball
    ``radius_units`` = K = C/γ instead. ``sensitivity2``: Σ K_i² (box) or Δ_g² (ℓ2), an integer;
    ``sensitivity1``: Σ K_i (Laplace). ``law``: "discrete-gaussian" (``noise_param`` = s²) or
    "discrete-laplace" (``noise_param`` = t).
    """

    spacing: np.ndarray
    offset: np.ndarray
    r_lo: np.ndarray
    r_hi: np.ndarray
    radius_units: int | None
    sensitivity2: int
    sensitivity1: int
    law: str
    noise_param: Fraction
    neighbours: Neighbours

    @property
    def d(self) -> int:
        return int(self.spacing.size)

    @property
    def noise_std(self) -> np.ndarray:
        """Std of the noise on each released coordinate, in value units (Gaussian: γ_i·s, an upper bound: the
        discrete Gaussian's variance is at most s²; Laplace: γ_i·√2·t, exact up to 1/(12t²) relative)."""
        p = float(self.noise_param)
        per = math.sqrt(p) if self.law == "discrete-gaussian" else math.sqrt(2.0) * p
        return _frozen(self.spacing * per)

    def sample(self, rng: SecureRandom | None) -> np.ndarray:
        """One draw of Z (int64, 0 on the noiseless coordinates) from the exact samplers of :mod:`sparsedp.noise`."""
        pos = self.spacing > 0
        z = np.zeros(self.d, dtype=np.int64)
        m = int(pos.sum())
        if m:
            if self.law == "discrete-gaussian":
                z[pos] = noise.sample_discrete_gaussian(self.noise_param, m, rng=rng)
            else:
                z[pos] = noise.sample_discrete_laplace(self.noise_param, m, rng=rng)
        return z

    def release(self, sums: np.ndarray, n_units: int, z: np.ndarray) -> np.ndarray:
        """o_i·n + γ_i·(Σ r_i + Z_i) in value units (``sums``: the exact integer grid sums; n only multiplies o_i,
        which is 0 under add/remove)."""
        s = np.asarray(sums, dtype=np.int64)
        if np.any(np.abs(s) >= _SUM_MAX):
            raise InputDataError("the grid sums overflow 62 bits (more than 2^31 units?); split the data")
        tot = s + np.asarray(z, dtype=np.int64)
        values: npt.NDArray[np.float64] = self.offset * float(n_units) + self.spacing * tot.astype(float)
        return values

    def rounding_bound(self, n_units: int) -> np.ndarray:
        """Deterministic grid-rounding error per coordinate: at most n·γ_i/2 (curator information under
        add/remove, where n is private)."""
        return _frozen(n_units * self.spacing / 2.0)

    def check_units(self, n_units: int) -> None:
        kmax = max(int(np.max(np.maximum(np.abs(self.r_lo), np.abs(self.r_hi)), initial=0)),
                   int(self.radius_units or 0) + 1)
        if n_units * kmax >= _SUM_MAX:
            raise InputDataError(f"{n_units} units is too many for the exact 62-bit grid of this release "
                                 f"(each unit contributes up to {kmax} grid units); split the data")


def _power_of_two_below(x: float) -> int:
    if not x >= 1.0:
        raise InfeasibleError("the noise is too small relative to the bounds for exact integer noise on a 62-bit "
                              "grid; lower epsilon (or rho) or narrow the bounds")
    return int(2 ** int(math.floor(math.log2(x))))


def box_grid(lower: np.ndarray, upper: np.ndarray, scales: np.ndarray, neighbours: Neighbours, *,
             rho: float | None = None, epsilon: float | None = None) -> VectorGrid:
    """The grid for a box-clipped sum with calibrated per-coordinate scales σ_i (Gaussian, give the zCDP ``rho``)
    or s_i (Laplace, give ``epsilon``). Coordinates with scale 0 (zero sensitivity) get γ_i = 0 and no noise."""
    lo = np.asarray(lower, dtype=float)
    hi = np.asarray(upper, dtype=float)
    sc = np.asarray(scales, dtype=float)
    replace = neighbours is Neighbours.REPLACE_ONE
    offset = lo.copy() if replace else np.zeros_like(lo)
    extent = (hi - lo) if replace else np.maximum(np.abs(lo), np.abs(hi))
    pos = sc > 0
    ratio = np.zeros_like(sc)
    ratio[pos] = extent[pos] / sc[pos]
    cap = _K_MAX / (float(ratio.max()) * 1.001 + 1e-300)
    if rho is not None:
        cap = min(cap, math.sqrt(_S2_MAX * 2.0 * rho / float(np.sum(ratio ** 2))))
    else:
        assert epsilon is not None  # a Laplace grid is calibrated in epsilon
        cap = min(cap, _T_MAX * epsilon / (float(np.sum(ratio)) * 1.001))
    big_s = _power_of_two_below(cap)
    gamma = np.zeros_like(sc)
    gamma[pos] = sc[pos] / big_s
    r_lo = np.zeros(lo.size, dtype=np.int64)
    r_hi = np.zeros(lo.size, dtype=np.int64)
    if replace:
        r_hi[pos] = np.ceil((hi[pos] - lo[pos]) / gamma[pos]).astype(np.int64)
        k = r_hi - r_lo
    else:
        r_lo[pos] = np.rint(lo[pos] / gamma[pos]).astype(np.int64)
        r_hi[pos] = np.rint(hi[pos] / gamma[pos]).astype(np.int64)
        k = np.maximum(np.abs(r_lo), np.abs(r_hi))
    # a coordinate with no noise must carry no information (Δ_i = 0): its contribution is the constant o_i
    r_lo[~pos] = 0
    r_hi[~pos] = 0
    k[~pos] = 0
    s2 = sum(int(x) ** 2 for x in k)
    s1 = int(sum(int(x) for x in k))
    if rho is not None:
        law, param = "discrete-gaussian", Fraction(s2) / (2 * Fraction(rho))
    else:
        assert epsilon is not None
        law, param = "discrete-laplace", Fraction(s1) / Fraction(epsilon)
    return VectorGrid(spacing=_frozen(gamma), offset=_frozen(offset), r_lo=_frozen(r_lo, np.int64),
                      r_hi=_frozen(r_hi, np.int64), radius_units=None, sensitivity2=s2, sensitivity1=s1, law=law,
                      noise_param=param, neighbours=neighbours)


def l2_grid(radius: float, d: int, rho: float, neighbours: Neighbours) -> VectorGrid:
    """The grid for an ℓ2-ball-clipped sum (‖v‖₂ <= ``radius``), spherical discrete Gaussian, ρ-zCDP."""
    replace = neighbours is Neighbours.REPLACE_ONE
    mult = 2 if replace else 1
    root = math.isqrt(d - 1) + 1                      # integer >= √d
    # K = C/γ: Δ_g ≈ mult·K must keep s² = Δ_g²/(2ρ) <= 2^78, and K + 1 <= 2^31
    cap = min(_K_MAX / 2.0, math.sqrt(_S2_MAX * 2.0 * rho) / mult / 1.01 - root)
    k = _power_of_two_below(cap)
    sens = 2 * k + root + 2 if replace else k + (root + 1) // 2 + 1
    gamma = float(radius) / k
    return VectorGrid(spacing=_frozen(np.full(d, gamma)), offset=_frozen(np.zeros(d)),
                      r_lo=_frozen(np.full(d, -(k + 1)), np.int64), r_hi=_frozen(np.full(d, k + 1), np.int64),
                      radius_units=k, sensitivity2=sens * sens, sensitivity1=0, law="discrete-gaussian",
                      noise_param=Fraction(sens * sens) / (2 * Fraction(rho)), neighbours=neighbours)
