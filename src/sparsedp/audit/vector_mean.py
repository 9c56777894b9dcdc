"""Audit target of the private vector mean (``vector-mean``: :func:`sparsedp.vector_mean`, PLAN of Lebeda (2023)
PhD thesis Ch. 5, Algorithm 17 = Aumüller, Lebeda, Nelson & Pagh, "PLAN: variance-aware private mean estimation"
(2023, arXiv 2306.08745); ρ-zCDP, replace-one, exact discrete Gaussian noise on a grid).

Not a registered mechanism: each release is the whole public function ``vector_mean(rows, "uid", columns=…,
lower=0, upper=1, rho=…, delta=…, rng=…)`` on a table of :data:`_UNITS` units (PLAN's sample-size check needs a
few thousand at ε = 1: its private median's rank error must be below n/6), so the reading, the private median,
the private variances, the private clip radius, the grid and the exact sampler are the code a user runs.

Worst case (replace-one): D has the units' vectors ``x_j`` with coordinates in {0, ½, 1}; D′ replaces unit 0's
vector by ``1 − x_0``. Statistic: the sum of the released coordinates (PLAN's noise is independent per
coordinate given its private centre and clip radius).

Conformance: the final noise. Given the released centre μ̃, spreads σ̂, clip radius C and grid spacing γ (all
public outputs of PLAN's private steps, in ``VectorMean.plan``), the release is
``mid + μ̃ + γ(Σ_j rint(y_j^clip/γ) + Z)/(n·s)`` with ``s_i = σ̂_i^{−2/(p+2)}`` and ``Z ~ N_Z(0, Δ_g²/(2ρ_noise))``
i.i.d. per coordinate, ``Δ_g = 2K + ⌈√d⌉`` (K = C/γ; :func:`sparsedp.mechanisms.mean.plan_mean`, thesis L2040 and
Canonne, Kamath & Steinke (2020) Thm 14). The audit knows the data, so it recomputes the clipped, rounded sum
from those public values exactly as the release does and reads ``Z`` back as an integer; the scale test of
:mod:`.scale_test` compares it with ``N_Z(0, Δ_g²/(2ρ_noise))`` at the *reference's* ρ_noise (the claim's budget
split). The private steps before it (median, variances, clip radius: discrete Gaussian counts) are not read back.
Mutant: ``sigma_scale = s`` runs at ``ρ/s²`` while the claim stays (ε, δ).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from ..vectors.queries import vector_mean
from .scenarios import Scenario
from .vectors import VectorFigures

if TYPE_CHECKING:  # pragma: no cover
    from .targets import Target

__all__ = ["VECTOR_MEAN", "VectorMeanRelease", "MeanCalibration", "mean_scenarios", "release_means", "plan_noise"]

VECTOR_MEAN = "vector-mean"
#: units of the audit's table (PLAN's sample-size check at ε = 1, δ = 1e-5, d = 2 needs n > ~1 800)
_UNITS = 3000


@dataclass(frozen=True)
class MeanCalibration(VectorFigures):
    """What a vector-mean release runs with: ``rho`` (zCDP of the whole release), ``delta``, ``rho_noise`` (the
    final noise's share, thesis §5.7.1 split) and the public per-coordinate ``noise_std`` of the claim's release."""

    rho: float
    delta: float
    rho_noise: float
    noise_std: tuple[float, ...]


@dataclass(frozen=True)
class VectorMeanRelease:
    """The audited release: :func:`sparsedp.vector_mean` (PLAN) on ``d`` coordinates in the box [0, 1]."""

    d: int = 2
    name = VECTOR_MEAN

    @property
    def columns(self) -> list[str]:
        return [f"c{i}" for i in range(self.d)]

    def vectors(self, moved: bool) -> np.ndarray:
        """D's vectors (``moved``: D′, unit 0 replaced by its complement)."""
        j = np.arange(_UNITS)[:, None]
        x = ((j * (np.arange(self.d)[None, :] + 1)) % 3) / 2.0
        if moved:
            x[0] = 1.0 - x[0]
        return x

    def _call(self, x: np.ndarray, rng: Any, **privacy: Any) -> Any:
        cols = {"uid": pa.array(np.arange(x.shape[0], dtype=np.int64))}
        cols.update({c: pa.array(x[:, i]) for i, c in enumerate(self.columns)})
        return vector_mean(pa.table(cols), "uid", columns=self.columns, lower=0.0, upper=1.0, rng=rng, **privacy)

    def calibrate(self, epsilon: float, delta: float, rng: Any) -> MeanCalibration:
        r = self._call(self.vectors(False), rng, epsilon=epsilon, delta=delta)
        return MeanCalibration(rho=float(r.guarantee.rho), delta=float(delta),
                               rho_noise=float(r.plan.rho_parts["noise"]),
                               noise_std=tuple(float(x) for x in r.noise_std))

    def release(self, x: np.ndarray, rho: float, delta: float, rng: Any) -> Any:
        return self._call(x, rng, rho=rho, delta=delta)


def plan_noise(x: np.ndarray, result: Any) -> tuple[np.ndarray, int]:
    """``(Z, K)``: the final noise of a PLAN release of the vectors ``x`` (box [0, 1], midpoint ½) read back from
    its public outputs (module docstring), in grid units, and the grid's K = C/γ."""
    plan = result.plan
    n, d = x.shape
    xc = np.clip(x - 0.5, -0.5, 0.5)
    center = np.asarray(plan.center, np.float64)
    scale = np.asarray(plan.sigma_hat, np.float64) ** (-2.0 / (float(plan.p) + 2.0))
    y = (xc - center) * scale
    norms = np.sqrt(np.einsum("ij,ij->i", y, y))
    c = float(plan.clip_radius)
    factor = np.ones(n)
    over = norms > c
    factor[over] = c / norms[over]
    gamma = float(plan.grid_spacing)
    ints = np.rint(y * factor[:, None] / gamma).astype(np.int64)
    z = (np.asarray(result.estimate, np.float64) - 0.5 - center) * (n * scale) / gamma - ints.sum(axis=0)
    return z, int(round(c / gamma))


def noise_law_param(k: int, d: int, rho_noise: float) -> Fraction:
    """``Δ_g²/(2ρ_noise)`` with ``Δ_g = 2K + ⌈√d⌉`` (an integer ≥ 2K + √d), ρ_noise as the float the split gives."""
    sens = 2 * k + math.isqrt(d - 1) + 1
    return Fraction(sens) ** 2 / (2 * Fraction(rho_noise))


def mean_scenarios(target: "Target") -> list[Scenario]:
    """The replace-one pair of the module docstring (``counts`` 0 = D, 1 = D′; statistic: the released sum)."""
    d = target.mechanism.d
    return [Scenario("shift", np.array([0]), np.array([1]), "projection",
                     f"{_UNITS} units with coordinates in {{0, 1/2, 1}}; D' replaces unit 0's vector by its "
                     f"complement", units0=_UNITS, units1=_UNITS,
                     direction=np.concatenate([np.ones(d), np.zeros(d + 1)]))]


def release_means(target: "Target", which, runs: int, rng) -> np.ndarray:
    """``(runs, 2d + 1)``: each release's estimate (d), its final noise read back in grid units (d) and its K, on D
    (``which[0] == 0``) or D′."""
    m = target.mechanism
    x = m.vectors(bool(np.asarray(which).reshape(-1)[0]))
    cal = target.calibration
    out = np.zeros((int(runs), 2 * m.d + 1))
    for i in range(int(runs)):
        r = m.release(x, cal.rho, cal.delta, rng)
        z, k = plan_noise(x, r)
        out[i] = np.concatenate([np.asarray(r.estimate, np.float64), z, [k]])
    return out
