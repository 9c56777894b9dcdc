"""Audit target of the private vector sum (``vector-sum``: :func:`sparsedp.vector_sum`, the elliptical Gaussian of
Lebeda (2023) PhD thesis Ch. 4, Algorithm 15, with exact discrete Gaussian noise on a public grid, accounted as
ρ-zCDP by Canonne, Kamath & Steinke (2020, arXiv 2004.00010) Thm 14 / Cor. 13).

Not a registered mechanism (no key set: a fixed list of coordinates): each release is the whole public
function ``vector_sum(rows, "uid", columns=…, lower=0, upper=1, rho=…, delta=…, rng=…)`` on a tiny table, so the
reading, the clipping, the grid and the exact sampler are the code a user runs. One release per run (the noise of the ``d``
coordinates is calibrated together, so releases cannot be tiled).

Worst case (replace-one, the thesis's relation, per-coordinate sensitivity ``Δ_i = upper_i − lower_i = 1``):
``shift`` — D has ``units`` units at the vector 0; D′ replaces one of them by the vector 1 (every coordinate moves
by Δ_i). Statistic: the likelihood-ratio projection ``⟨w, y⟩``, ``w_i = Δ_i/σ_i²`` (σ_i the calibrated noise std
of coordinate i). Conformance: the noise of each coordinate in grid units, ``(y_i − sum_i)/γ_i``, an integer of
law ``N_Z(0, s²)`` under the reference's grid, by the exact-law scale test of :mod:`.scale_test`
(:class:`.runner.VarianceCheck`). Mutant: ``sigma_scale = s`` runs at ``ρ/s²`` (the Gaussian's σ times s) while
the claim stays (ε, δ).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from ..vectors.queries import vector_sum
from .scenarios import Scenario

if TYPE_CHECKING:  # pragma: no cover
    from .targets import Target

__all__ = ["VECTOR_SUM", "VectorSumRelease", "VectorFigures", "vector_scenarios", "release_vectors"]

VECTOR_SUM = "vector-sum"
#: units of the audit's table (public under replace-one; any number gives a valid pair)
_UNITS = 4


@dataclass(frozen=True)
class VectorSumRelease:
    """The audited release: :func:`sparsedp.vector_sum` on ``d`` coordinates in the box [0, 1] (the target's
    ``mechanism``). :meth:`calibrate` is one release's public noise figures at the claim (data independent:
    ``noise_std`` per coordinate and the ρ of the claim)."""

    d: int = 2
    name = VECTOR_SUM

    @property
    def columns(self) -> list[str]:
        return [f"c{i}" for i in range(self.d)]

    def table(self, vectors: np.ndarray) -> pa.Table:
        """The rows: unit ``u`` holds ``vectors[u]``."""
        cols = {"uid": pa.array(np.arange(vectors.shape[0], dtype=np.int64))}
        cols.update({c: pa.array(vectors[:, i].astype(np.float64)) for i, c in enumerate(self.columns)})
        return pa.table(cols)

    def release(self, vectors: np.ndarray, rho: float, delta: float, rng) -> np.ndarray:
        r = vector_sum(self.table(vectors), "uid", columns=self.columns, lower=0.0, upper=1.0, rho=rho,
                       delta=delta, rng=rng)
        return np.asarray(r.estimate, np.float64)

    def calibrate(self, epsilon: float, delta: float, rng) -> "VectorCalibration":
        r = vector_sum(self.table(np.zeros((1, self.d))), "uid", columns=self.columns, lower=0.0, upper=1.0,
                       epsilon=epsilon, delta=delta, rng=rng)
        return VectorCalibration(rho=float(r.guarantee.rho), delta=float(delta),
                                 noise_std=tuple(float(x) for x in r.noise_std),
                                 sensitivity=tuple(float(x) for x in r.sensitivity),
                                 spacing=tuple(float(x) for x in r.grid.spacing), noise_param=r.grid.noise_param,
                                 unit_high=tuple(int(x) for x in r.grid.r_hi))


class VectorFigures:
    """The report's figures of a vector calibration (a mixin of the frozen calibrations that hold ``noise_std``):
    ``sigma`` the largest per-coordinate noise std; no threshold (``tau`` NaN: no margin printed)."""

    noise_std: tuple[float, ...]

    @property
    def sigma(self) -> float:
        return max(self.noise_std)

    @property
    def tau(self) -> float:
        return math.nan


@dataclass(frozen=True)
class VectorCalibration(VectorFigures):
    """What a vector-sum release runs with: ``rho`` (zCDP of the noise), ``delta``, and the public per-coordinate
    ``noise_std`` and ``sensitivity`` of the claim's release (``sigma``: the largest noise std, for the report),
    its grid ``spacing`` γ_i, the exact noise parameter ``noise_param`` = s² of ``N_Z(0, s²)`` in grid units and
    ``unit_high``, the grid integer of a unit at the box's upper corner (offset 0: the box [0, 1] under
    replace-one; :class:`~sparsedp.mechanisms.vector_grid.VectorGrid`)."""

    rho: float
    delta: float
    noise_std: tuple[float, ...]
    sensitivity: tuple[float, ...]
    spacing: tuple[float, ...] = ()
    noise_param: Fraction | None = None
    unit_high: tuple[int, ...] = ()


def vector_scenarios(target: "Target") -> list[Scenario]:
    """The replace-one ``shift`` pair of the module docstring, with the reference's weights ``w_i = Δ_i/σ_i²``
    scaled so that ``Var ⟨w, y⟩ = Σ w_i² σ_i²`` is the variance the conformance check compares against."""
    ref = target.reference
    sd = np.asarray(ref.noise_std, np.float64)
    delta = np.asarray(ref.sensitivity, np.float64)
    w = delta / (sd * sd)
    d = sd.size
    return [Scenario("shift", np.zeros(d), np.ones(d), "projection",
                     f"{_UNITS} units at the vector 0 in D; D' replaces one by the vector 1 (every coordinate moves by "
                     f"its sensitivity)", units0=_UNITS, units1=_UNITS, direction=w, embed=None)]


def release_vectors(target: "Target", sums, runs: int, rng) -> np.ndarray:
    """``(runs, d)`` released sums of ``runs`` vector sums of a table of :data:`_UNITS` units whose vectors add up
    to ``sums`` (entries in {0, 1}: one unit holds ``sums``, the others the vector 0)."""
    s = np.asarray(sums, np.float64)
    vectors = np.zeros((_UNITS, s.size))
    vectors[0] = s
    cal = target.calibration
    return np.stack([target.mechanism.release(vectors, cal.rho, cal.delta, rng) for _ in range(int(runs))]) \
        if runs else np.zeros((0, s.size))
