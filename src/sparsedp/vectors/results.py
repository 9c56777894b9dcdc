"""What a vector release returns: :class:`VectorSum` and :class:`VectorMean`, each a :class:`~sparsedp.report.Result`.

Like every release, a vector release is ``table`` (the public Polars frame: coordinate, estimate, noise_std) +
``report`` (the public :class:`VectorGuarantee`) + ``curator`` (:class:`VectorCurator`, NOT private). The typed
fields (``estimate``, ``noise_std``, ``expected_error``, …) are the same public numbers as arrays.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np
import polars as pl

from ..accounting.calibration import Neighbours
from ..report import Result, _lines_table

__all__ = ["VectorGuarantee", "VectorCurator", "VectorSum", "VectorMean", "vector_table"]


@dataclass(frozen=True)
class VectorGuarantee:
    """The public report of a vector release: (ε, δ)-DP for ``neighbours`` (and ρ-zCDP when ``rho`` is set), the
    mechanism, the noise family actually sampled, and the contribution model the library enforced."""

    epsilon: float
    delta: float
    rho: float | None
    neighbours: Neighbours
    mechanism: str
    noise: str
    contribution: str

    def __str__(self) -> str:
        z = f", {self.rho:.6g}-zCDP" if self.rho is not None else ""
        return f"({self.epsilon:g}, {self.delta:g})-DP{z}, {self.neighbours.value}; {self.mechanism}, {self.noise}"

    def metadata(self) -> dict[str, Any]:
        """The guarantee a written file carries (Parquet metadata / CSV sidecar)."""
        return {"epsilon": self.epsilon, "delta": self.delta, "rho": self.rho, "neighbours": self.neighbours.value,
                "mechanism": self.mechanism, "noise": self.noise, "contribution": self.contribution}

    def lines(self) -> list[str]:
        return ["sparsedp vector release", f"  guarantee     {self}", f"  contribution  {self.contribution}"]

    def _repr_html_(self) -> str:
        return _lines_table(self.lines())


@dataclass(frozen=True)
class VectorCurator:
    """For the curator only — NOT private: rows/units read, how much clipping changed, rounding, timings."""

    source: str
    rows_in: int
    units_in: int
    rows_ignored: int
    values_clipped: int
    units_clipped: int
    rounding_bound: np.ndarray | None
    timings: Mapping[str, float] = field(default_factory=dict)

    def lines(self) -> list[str]:
        rb = "" if self.rounding_bound is None or not np.any(self.rounding_bound) else \
            f"; grid rounding error <= {float(np.max(self.rounding_bound)):.3g} per coordinate"
        return ["  -- for the curator only (not private, do not publish) --",
                f"  input         {self.source}: {self.rows_in} rows, {self.units_in} units, {self.rows_ignored} rows "
                f"with an unlisted coordinate ignored",
                f"  clipping      {self.units_clipped} units clipped ({self.values_clipped} coordinate values "
                f"outside the box){rb}",
                "  time          " + ", ".join(f"{k} {t:.2f}s" for k, t in self.timings.items())]

    def __str__(self) -> str:
        return "\n".join(self.lines())


def vector_table(coordinates: tuple[str, ...], estimate: np.ndarray, noise_std: np.ndarray) -> pl.DataFrame:
    """The released table of a vector release: coordinate, estimate, noise_std (public)."""
    return pl.DataFrame({"coordinate": list(coordinates), "estimate": np.asarray(estimate),
                         "noise_std": np.asarray(noise_std)})


def _range(a: np.ndarray) -> str:
    a = np.asarray(a, dtype=float)
    lo, hi = float(a.min()), float(a.max())
    return f"{lo:.4g}" if math.isclose(lo, hi, rel_tol=1e-9) else f"{lo:.4g} .. {hi:.4g}"


@dataclass(frozen=True, eq=False, kw_only=True)
class _VectorResult(Result):
    """The fields every vector release has besides ``table``/``report``/``curator``."""

    report: VectorGuarantee
    curator: VectorCurator = field(repr=False)
    table: Any = field(repr=False)
    coordinates: tuple[str, ...]
    estimate: np.ndarray
    noise_std: np.ndarray
    expected_error: float
    p: float
    n_units: int | None

    @property
    def guarantee(self) -> VectorGuarantee:
        """The public guarantee (the release's report)."""
        return self.report

    def to_frame(self) -> pl.DataFrame:
        """A Polars frame: coordinate, estimate, noise_std (public; the release's ``table``)."""
        return self.table


@dataclass(frozen=True, eq=False, kw_only=True)
class VectorSum(_VectorResult):
    """A private vector sum (:func:`~sparsedp.vectors.vector_sum`).

    ``estimate[i]``: the noisy sum of coordinate ``coordinates[i]``; ``noise_std[i]``: the std of its noise
    (value units; 0 for a coordinate with zero sensitivity); ``expected_error``: E‖η‖_p^p of the whole vector
    (m_p Σ σ_i^p for Gaussian noise, thesis Lemma 4.3/4.7; Γ(p+1) Σ s_i^p for Laplace, Lemma 4.10);
    ``spherical_error``: the same for the standard isotropic mechanism at the same privacy (Alg. 14 / Laplace
    with s = ‖Δ‖₁/ε), so ``improvement`` = spherical/elliptical. ``sensitivity[i]``: Δ_i under the relation;
    ``n_units``: the number of units (public under replace-one only, else None); ``grid``: the public integer
    grid and noise law (:class:`~sparsedp.mechanisms.vector_grid.VectorGrid`; None with float noise). Public,
    except ``curator``.
    """

    spherical_error: float
    sensitivity: np.ndarray
    grid: Any = field(repr=False)

    @property
    def improvement(self) -> float:
        return self.spherical_error / self.expected_error

    def lines(self) -> list[str]:
        return ["sparsedp vector sum",
                f"  guarantee     {self.guarantee}",
                f"  contribution  {self.guarantee.contribution}",
                f"  coordinates   {len(self.coordinates)}" + (f"; {self.n_units} units" if self.n_units else ""),
                f"  noise         std per coordinate {_range(self.noise_std)}; E||eta||_{self.p:g}^{self.p:g} = "
                f"{self.expected_error:.6g} ({self.improvement:.3g}x below isotropic noise)"]

    def __str__(self) -> str:
        return "\n".join(self.lines() + self.curator.lines())


@dataclass(frozen=True, eq=False, kw_only=True)
class VectorMean(_VectorResult):
    """A private mean by PLAN (:func:`~sparsedp.vectors.vector_mean`, thesis Algorithm 17).

    ``estimate[i]``: the private mean of coordinate ``coordinates[i]``; ``noise_std[i]``: the std of the Gaussian
    noise on it (the clipping bias and sampling error come on top); ``expected_error``: E‖noise‖_p^p.
    ``plan``: the :class:`~sparsedp.mechanisms.mean.MeanEstimate` (private centre, σ̂, clip radius C, budget
    split; all outputs of private steps, public). ``n_units`` is public (replace-one). With
    ``method="sum-count"``: ``plan`` is None, ``n_units`` None (private under add/remove) and ``noisy_count`` the
    released noisy number of units.
    """

    plan: Any = field(repr=False)
    noisy_count: float | None = None

    def lines(self) -> list[str]:
        if self.plan is None:
            head = ["sparsedp vector mean (noisy sum / noisy count)", f"  guarantee     {self.guarantee}",
                    f"  contribution  {self.guarantee.contribution}",
                    f"  coordinates   {len(self.coordinates)}; noisy unit count {self.noisy_count:g}"]
        else:
            parts = ", ".join(f"{k} {x:.3g}" for k, x in self.plan.rho_parts.items())
            head = ["sparsedp vector mean (PLAN)", f"  guarantee     {self.guarantee}",
                    f"  contribution  {self.guarantee.contribution}",
                    f"  coordinates   {len(self.coordinates)}; {self.n_units} units",
                    f"  budget (rho)  {parts}; clip radius C = {self.plan.clip_radius:.4g}"]
        return head + [f"  noise         std per coordinate {_range(self.noise_std)}; "
                       f"E||eta||_{self.p:g}^{self.p:g} = {self.expected_error:.6g}"]

    def __str__(self) -> str:
        return "\n".join(self.lines() + self.curator.lines())
