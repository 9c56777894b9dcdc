"""Private vector sums and means in one call — :func:`vector_sum` and :func:`vector_mean` — as query kinds of the
one pipeline (:func:`sparsedp.query.run_query`: calibrate → ledger pre-check → read → charge → noise → result).

Source: Lebeda (2023) PhD thesis, Ch. 4 (elliptical Gaussian / parallelotope Laplace sums with per-coordinate
sensitivities) and Ch. 5 (PLAN mean estimation). The mechanisms' math lives in
:mod:`sparsedp.mechanisms.elliptical`, :mod:`sparsedp.mechanisms.vector_grid` (secure grid of the sums) and
:mod:`sparsedp.mechanisms.mean` (PLAN); the arguments in :mod:`.arguments`, the sums' calibration in
:mod:`.calibration`, the reading and clipping in :mod:`.reading`, the results in :mod:`.results`.

Input, in one of two layouts: wide (``columns=[…]``, one column per coordinate, one or more rows per unit) or long
(``coordinate=`` and ``value=`` columns, one row per (unit, coordinate[, repeated]); the coordinates are the public
list ``coordinates=`` or the keys of ``lower``/``upper`` given as dicts; rows whose coordinate is not listed are
ignored, the curator is told how many).

Neighbouring relations. The thesis analyses replace-one (n public; per-coordinate sensitivity Δ_i =
upper_i − lower_i, or 2C for the ℓ2 ball), which is the default and how the ledger is charged
(:class:`~sparsedp.accounting.calibration.Neighbours`). :func:`vector_sum` also offers add/remove
(``neighbours="add-remove"``: Δ_i = max(|lower_i|, |upper_i|), or C; n stays private) —
``docs/proofs/vector-sums.md``. PLAN (:func:`vector_mean`) is replace-one, as in the thesis; its
``method="sum-count"`` (noisy add/remove sum / noisy count) is the add/remove alternative.

Noise and accounting: exact discrete Gaussian (or discrete Laplace) noise per coordinate on a public integer
grid, accounted as ρ-zCDP (Canonne, Kamath & Steinke (2020), Thm 14) and converted to (ε, δ) with their
Corollary 13 (:mod:`sparsedp.accounting.zcdp`); the ledger gets one charge carrying (ε, δ) and ρ.
``insecure_float=True`` uses float noise (warned; research only).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Callable, ContextManager, Generic, Sequence, TypeVar

import numpy as np

from .. import _validate as v
from .. import noise
from ..accounting.calibration import Neighbours
from ..core import sources
from ..errors import InputDataError, InvalidParameterError
from ..execution import LedgerSession
from ..accounting.charge import Charge
from ..mechanisms import elliptical as ell
from ..mechanisms.mean import MeanEstimate, plan_mean
from ..mechanisms.vector_grid import box_grid
from ..progress import Stages
from ..query import QueryKind, run_query
from ..report import warn_insecure
from ..request import source as release_source
from .arguments import Privacy, VectorInput, bound_vector, box, privacy, relation, secure_flag, vector_input
from .calibration import BOX_CONTRIBUTION, SumPlan, grid_expected_error, plan_sum
from .reading import MAX_DENSE, PerUnit, clipped_sums, dense, per_unit
from .results import VectorCurator, VectorGuarantee, VectorMean, VectorSum, vector_table

__all__ = ["vector_sum", "vector_mean", "VectorSumQuery", "PlanMeanQuery", "SumCountMeanQuery"]


# ---------------------------------------------------------------- the stages every vector query shares


@dataclass(frozen=True, eq=False)
class ClippedSums:
    """What reading a vector sum's input gives: the per-unit read and the clipped (gridded) sums per coordinate,
    with how many values and units the clipping changed (curator only)."""

    read: PerUnit
    sums: np.ndarray
    values_clipped: int
    units_clipped: int


@dataclass(frozen=True, eq=False)
class Noisy:
    """A vector query's private draw: the released estimate and its noise std per coordinate, with the read it
    came from (for the curator's figures)."""

    read: ClippedSums
    estimate: np.ndarray
    noise_std: np.ndarray


PlanT = TypeVar("PlanT", "SumPlan", "MeanPlan", "SumCountPlan")
ReadT = TypeVar("ReadT")
DrawnT = TypeVar("DrawnT")
ResultT = TypeVar("ResultT")


class _VectorQuery(QueryKind[PlanT, ReadT, DrawnT, ResultT], Generic[PlanT, ReadT, DrawnT, ResultT]):
    """The stages every vector release shares: the insecure-noise warning, the relation check against the
    budget's, the stage display and timings, the release's source, and the curator's figures."""

    #: the release's name in the replace-one refusal; ``None``: add/remove, always admitted
    refusal: str | None = None
    #: the release's name in the ledger's note (with the number of coordinates)
    label = "vector release"

    def __init__(self, spec: VectorInput, plan: PlanT, *, rng: Any, insecure_float: bool,
                 progress: Callable[[str], ContextManager[Any]] | None, t_start: float) -> None:
        self.spec, self.data, self.insecure_float = spec, spec.data, insecure_float
        self.planned: PlanT = plan
        self.what = f"{self.label} ({spec.d} coordinates)"
        self.source = release_source(rng)
        self.stages = Stages(progress, t_start)

    def plan(self) -> PlanT:
        """The plan fixed when the query was built; float noise is warned here, before anything is read."""
        if self.insecure_float:
            warn_insecure()
        return self.planned

    def pre_check(self, ledger: LedgerSession, planned: PlanT) -> None:
        if self.refusal is not None:
            _check_relation(ledger, planned.charge, self.refusal)
        ledger.check(planned.charge)

    def read_sums(self, lo: Any, hi: Any, max_norm: float | None, grid: Any) -> ClippedSums:
        """The clipped (with a grid: gridded) per-coordinate sums; every input check happens first, and the grid
        refuses a number of units its integers cannot hold."""
        self.stages.mark("validate")
        with self.stages.stage("reading and clipping each unit's vector", "read+clip"):
            read = per_unit(self.spec)
            if grid is not None:
                grid.check_units(read.n_units)
            sums, values, units = clipped_sums(read.frame, self.spec.long, self.spec.d, read.n_units, lo, hi,
                                               max_norm, grid)
        return ClippedSums(read, sums, values, units)

    def curator(self, read: PerUnit, values_clipped: int, units_clipped: int,
                rounding_bound: np.ndarray | None) -> VectorCurator:
        self.stages.mark("total")
        return VectorCurator(source=sources.display(self.data), rows_in=read.rows, units_in=read.n_units,
                             rows_ignored=read.ignored, values_clipped=values_clipped, units_clipped=units_clipped,
                             rounding_bound=rounding_bound, timings=dict(self.stages.timings))


def _check_relation(ledger: LedgerSession, charge: Charge, what: str) -> None:
    """A replace-one release (n public) is refused by an add/remove budget, naming the fix."""
    led, dataset = ledger.ledger, ledger.dataset
    if led is not None and dataset is not None and charge.neighbours is Neighbours.REPLACE_ONE and \
            led.budget_neighbours(dataset) is Neighbours.ADD_REMOVE:
        raise InvalidParameterError(
            f"release refused: dataset {dataset!r} has an add/remove budget and {what} is private for replace-one "
            f"neighbours (the number of units is public). " + (
                "Pass neighbours='add-remove' (sensitivity max(|lower|, |upper|) per coordinate), or give the "
                "dataset a replace-one budget." if what.startswith("this vector sum") else
                "Use method='sum-count' (CLI: --method sum-count; add/remove), or give the dataset a replace-one "
                "budget (Ledger.set_budget(..., neighbours=Neighbours.REPLACE_ONE) or `sparsedp ledger init "
                "--neighbours replace-one`).") + " Nothing was charged.")


def _frozen(a: Any) -> np.ndarray:
    out = np.asarray(a, dtype=float)
    out.setflags(write=False)
    return out


# ---------------------------------------------------------------- vector sum


class VectorSumQuery(_VectorQuery[SumPlan, ClippedSums, Noisy, VectorSum]):
    """:func:`vector_sum`'s query kind: the clipped per-coordinate sums plus exact noise on the public grid (float
    noise with ``insecure_float``)."""

    refusal = "this vector sum"

    label = "vector sum"

    def read(self, planned: SumPlan) -> ClippedSums:
        return self.read_sums(planned.lo, planned.hi, planned.max_norm, planned.grid)

    def draw(self, planned: SumPlan, read: ClippedSums) -> Noisy:
        """The grid's exact noise, or float Laplace/Gaussian at the scales."""
        with self.stages.stage(f"adding noise ({planned.noise_name})", "noise"):
            grid = planned.grid
            if grid is not None:
                est = grid.release(read.sums, read.read.n_units, grid.sample(self.source))
                return Noisy(read, est, np.array(grid.noise_std))
            draw = noise.sample_laplace if planned.pure else noise.sample_gaussian
            eta = np.asarray(draw(1.0, self.spec.d, rng=self.source, insecure_float=True), dtype=float)
            est = np.asarray(read.sums, dtype=float) + eta * planned.scales
            return Noisy(read, est, planned.scales * (math.sqrt(2.0) if planned.pure else 1.0))

    def publish(self, planned: SumPlan, drawn: Noisy, ledger: LedgerSession) -> VectorSum:
        ledger.published(None)
        grid, read, n = planned.grid, drawn.read, drawn.read.read.n_units
        expected = planned.expected if grid is None else grid_expected_error(grid, planned.pure, planned.p)
        est, noise_std = drawn.estimate, _frozen(drawn.noise_std)
        est.setflags(write=False)
        curator = self.curator(read.read, read.values_clipped, read.units_clipped,
                               None if grid is None else grid.rounding_bound(n))
        return VectorSum(table=vector_table(self.spec.coords, est, noise_std), report=planned.guarantee,
                         curator=curator, coordinates=self.spec.coords, estimate=est, noise_std=noise_std,
                         expected_error=float(expected), spherical_error=float(planned.spherical), p=planned.p,
                         sensitivity=planned.sens, n_units=n if planned.rel is Neighbours.REPLACE_ONE else None,
                         grid=grid)


def vector_sum(data: Any, privacy_unit: str, *, columns: Sequence[str] | None = None, coordinate: str | None = None,
               value: str | None = None, coordinates: Sequence[Any] | None = None, lower: Any = None,
               upper: Any = None, max_norm: float | None = None, epsilon: float | None = None,
               delta: float | None = None, rho: float | None = None, mechanism: str = "gaussian",
               neighbours: Any = "replace-one", p: float = 2.0, shape: str = "optimal", ledger: Any = None,
               dataset: str | None = None, connection: Any = None, insecure_float: bool = False, rng: Any = None,
               progress: Callable[[str], ContextManager[Any]] | None = None) -> VectorSum:
    """Private sum of the units' vectors: the elliptical Gaussian (thesis Algorithm 15) with per-coordinate bounds.

    Args:
        data: Polars/pandas frame, Polars LazyFrame, pyarrow Table, DuckDB relation, SQL text (run by DuckDB on
            ``connection``, default its in-memory one), or a Parquet/CSV path (glob). Spark: write it to Parquet.
        privacy_unit: the column identifying whom the guarantee protects.
        columns: wide layout — the coordinate columns. Or ``coordinate`` and ``value`` (long layout) with the
            public ``coordinates`` list (or dict bounds keyed by coordinate).
        lower, upper: the box, per coordinate (a number, a sequence in coordinate order, or a dict). Contribution
            model: a unit's vector is the per-coordinate sum of its rows' values, each coordinate clipped to
            [lower_i, upper_i] (enforced). Sensitivity Δ_i = upper_i − lower_i (replace-one, the thesis's
            relation; n is then public and reported) or max(|lower_i|, |upper_i|) (``neighbours="add-remove"``).
        max_norm: instead of the box, scale each unit's vector into the ℓ2 ball of radius C (Δ₂ = 2C replace-one,
            C add/remove) with isotropic noise (Algorithm 14).
        epsilon, delta / rho, delta: the guarantee (ρ-zCDP of the noise, converted to (ε, δ) by
            Canonne–Kamath–Steinke Cor. 13). ``mechanism="laplace"``: pure ε-DP parallelotope Laplace
            (Algorithm 16), ``epsilon`` only, box only.
        p, shape: the error exponent the noise shape minimises (E‖η‖_p^p; 2 = squared ℓ2) and the shape
            ("optimal" b_i ∝ Δ_i^{p/(p+2)}, Lemma 4.8; "spherical"; "proportional").
        ledger, dataset: charge the release (one charge: (ε, δ), ρ, the relation) — checked before reading, committed
            after the data are read and checked, before any noise.
        insecure_float: float noise instead of exact discrete noise (research only; warned).
        rng: a :mod:`sparsedp.noise` source (tests); None = the secure default.
        progress: ``progress(stage)`` → context manager around each stage (the CLI's display).

    Returns:
        :class:`~sparsedp.vectors.VectorSum`, a :class:`~sparsedp.report.Result`: ``table`` (coordinate,
        estimate, noise_std), ``report`` (the public guarantee), ``curator`` (not private), and the same public
        numbers as arrays (estimate, noise std per coordinate, expected error).
    """
    t0 = time.perf_counter()
    rel = relation(neighbours)
    pure = v.choice("mechanism", mechanism, ("gaussian", "laplace")) == "laplace"
    insecure = secure_flag(insecure_float)
    spec = vector_input(data, privacy_unit, columns, coordinate, value, coordinates, lower, upper, connection)
    priv = privacy(epsilon, delta, rho, pure=pure, insecure_float=insecure)
    plan = plan_sum(spec.coords, lower, upper, max_norm, priv, rel, pure, v.positive("p", p), shape, insecure)
    query = VectorSumQuery(spec, plan, rng=rng, insecure_float=insecure, progress=progress, t_start=t0)
    return run_query(query, ledger, dataset)


# ---------------------------------------------------------------- vector mean (PLAN)


@dataclass(frozen=True, eq=False)
class MeanPlan:
    """What a PLAN mean fixes before reading any data: the box's public midpoint ``mid`` (PLAN runs on the box
    re-centred there), PLAN's arguments but its source (``kw``), the public description and the ledger charge."""

    lo: np.ndarray
    hi: np.ndarray
    mid: np.ndarray
    kw: dict[str, Any]
    p: float
    guarantee: VectorGuarantee
    charge: Charge


@dataclass(frozen=True, eq=False)
class Centred:
    """A PLAN mean's read: the clipped units × coordinates matrix re-centred at the box's midpoint."""

    read: PerUnit
    x: np.ndarray
    values_clipped: int
    units_clipped: int


class PlanMeanQuery(_VectorQuery["MeanPlan", "Centred", "PlanDrawn", VectorMean]):
    """:func:`vector_mean`'s query kind with ``method="plan"``: PLAN (thesis Algorithm 17) on the dense clipped
    matrix, replace-one."""

    refusal = "PLAN (Lebeda (2023) Ch. 5)"

    label = "vector mean PLAN"

    def read(self, planned: MeanPlan) -> Centred:
        """The matrix, and PLAN's input checks (sample size, binary data) run dry before the charge."""
        self.stages.mark("validate")
        d = self.spec.d
        with self.stages.stage("reading and clipping each unit's vector", "read+clip"):
            read = per_unit(self.spec, index_units=True)
            if read.n_units * d > MAX_DENSE:
                raise InputDataError(f"PLAN holds the units x coordinates matrix in memory: {read.n_units} x {d} is "
                                     f"too large (limit {MAX_DENSE:,} values)")
            x = dense(read.frame, self.spec.long, read.n_units, d)
            xc = np.clip(x, planned.lo, planned.hi)
            changed = xc != x
            values_clipped, units_clipped = int(changed.sum()), int(np.any(changed, axis=1).sum())
            del x
            xc -= planned.mid
            _plan_checks(xc, planned.kw)
        return Centred(read, xc, values_clipped, units_clipped)

    def draw(self, planned: MeanPlan, read: Centred) -> PlanDrawn:
        with self.stages.stage("PLAN: private centre, variances, clip radius, noise", "plan"):
            est = plan_mean(read.x, **planned.kw, rng=self.source, insecure_float=self.insecure_float)
        return PlanDrawn(read, est)

    def publish(self, planned: MeanPlan, drawn: PlanDrawn, ledger: LedgerSession) -> VectorMean:
        ledger.published(None)
        read, est = drawn.read, drawn.estimate
        mean = _frozen(np.asarray(est.mean, dtype=float) + planned.mid)
        nstd = _frozen(est.noise_std)
        curator = self.curator(read.read, read.values_clipped, read.units_clipped, None)
        return VectorMean(table=vector_table(self.spec.coords, mean, nstd), report=planned.guarantee,
                          curator=curator, coordinates=self.spec.coords, estimate=mean, noise_std=nstd,
                          expected_error=float(est.expected_error), p=planned.p, n_units=read.read.n_units,
                          plan=est)


@dataclass(frozen=True, eq=False)
class PlanDrawn:
    """PLAN's private output with the read it came from (for the curator's figures)."""

    read: Centred
    estimate: MeanEstimate


def _plan_checks(x: np.ndarray, kw: dict[str, Any]) -> None:
    """PLAN's input checks (sample size, binary data, variances) without drawing noise: a dry run of the
    argument validation of :func:`~sparsedp.mechanisms.mean.plan_mean` on a source that refuses to be used."""
    try:
        plan_mean(x, **{**kw, "rng": _NoDraw(), "insecure_float": False})
    except _Checked:
        return


class _Checked(Exception):
    pass


class _NoDraw:
    """A source whose first use ends the dry run, before a word of randomness is produced."""

    def uint64(self, *a: Any, **k: Any) -> Any:
        raise _Checked

    def random_bytes(self, *a: Any, **k: Any) -> Any:
        raise _Checked

    def __getattr__(self, name: str) -> Any:
        raise _Checked


# ---------------------------------------------------------------- vector mean (noisy sum / noisy count)


@dataclass(frozen=True, eq=False)
class SumCountPlan:
    """A sum/count mean fixed before reading: the box, the elliptical sum's grid at ρ(1 − share), the count's
    discrete Gaussian variance 1/(2ρ·share), the public description and the ledger charge (add/remove)."""

    lo: np.ndarray
    hi: np.ndarray
    grid: Any
    count_variance: Fraction
    p: float
    guarantee: VectorGuarantee
    charge: Charge


class SumCountMeanQuery(_VectorQuery["SumCountPlan", ClippedSums, "SumCountDrawn", VectorMean]):
    """:func:`vector_mean`'s query kind with ``method="sum-count"``: the add/remove elliptical Gaussian sum over a
    noisy unit count (zCDP composition of the two)."""

    label = "vector mean sum/count"

    def read(self, planned: SumCountPlan) -> ClippedSums:
        return self.read_sums(planned.lo, planned.hi, None, planned.grid)

    def draw(self, planned: SumCountPlan, read: ClippedSums) -> SumCountDrawn:
        with self.stages.stage("adding noise (discrete Gaussian)", "noise"):
            total = planned.grid.release(read.sums, read.read.n_units, planned.grid.sample(self.source))
            z = int(noise.sample_discrete_gaussian(planned.count_variance, 1, rng=self.source)[0])
        return SumCountDrawn(read, total, read.read.n_units + z)

    def publish(self, planned: SumCountPlan, drawn: SumCountDrawn, ledger: LedgerSession) -> VectorMean:
        ledger.published(None)
        read = drawn.read
        den = float(max(drawn.count, 1))
        mean = drawn.total / den
        sig = np.asarray(planned.grid.noise_std, dtype=float)
        nstd = _frozen(np.sqrt(sig ** 2 + mean ** 2 * float(planned.count_variance)) / den)
        mean = _frozen(mean)
        curator = self.curator(read.read, read.values_clipped, read.units_clipped,
                               planned.grid.rounding_bound(read.read.n_units) / den)
        return VectorMean(table=vector_table(self.spec.coords, mean, nstd), report=planned.guarantee,
                          curator=curator, coordinates=self.spec.coords, estimate=mean, noise_std=nstd,
                          expected_error=ell.gaussian_moment(planned.p) * float(np.sum(nstd ** planned.p)),
                          p=planned.p, n_units=None, plan=None, noisy_count=float(drawn.count))


@dataclass(frozen=True, eq=False)
class SumCountDrawn:
    """The noisy sum of every coordinate and the noisy unit count, with the read they came from."""

    read: ClippedSums
    total: np.ndarray
    count: int


def _plan_mean_plan(lo: np.ndarray, hi: np.ndarray, priv: Privacy, p: float, variances: Any, budget: Any,
                    beta: Any, coords: tuple[str, ...], insecure_float: bool) -> MeanPlan:
    """PLAN on the box re-centred at its public midpoint, M = max_i (upper_i − lower_i)/2 (a public shift: pre- and
    post-processing); replace-one, charged (ε, δ) with ρ."""
    var = variances if isinstance(variances, str) else bound_vector("variances", variances, coords)
    noise_name = "float Gaussian (INSECURE)" if insecure_float else "discrete Gaussian per coordinate"
    rel = Neighbours.REPLACE_ONE
    guarantee = VectorGuarantee(
        epsilon=priv.epsilon, delta=priv.delta, rho=priv.rho, neighbours=rel,
        mechanism=f"PLAN (p={p:g}, variances={variances if isinstance(variances, str) else 'public'})",
        noise=noise_name, contribution=BOX_CONTRIBUTION)
    kw = dict(rho=priv.rho, bound=float(np.max((hi - lo) / 2.0)), p=p, variances=var, beta=beta, budget=budget)
    return MeanPlan(lo=lo, hi=hi, mid=(lo + hi) / 2.0, kw=kw, p=p, guarantee=guarantee,
                    charge=Charge(epsilon=priv.epsilon, delta=priv.delta, neighbours=rel, mechanism="plan",
                                  rho=priv.rho))


def _sum_count_plan(lo: np.ndarray, hi: np.ndarray, priv: Privacy, p: float, share: float,
                    insecure_float: bool) -> SumCountPlan:
    """The elliptical sum at ρ(1 − share) with add/remove sensitivities max(|lower_i|, |upper_i|), the count at
    ρ·share (sensitivity 1)."""
    if insecure_float:
        raise InvalidParameterError("method='sum-count' uses exact discrete noise only; drop insecure_float=True")
    assert priv.rho is not None  # a Gaussian guarantee
    rel = Neighbours.ADD_REMOVE
    rho_c = priv.rho * share
    rho_s = priv.rho - rho_c
    sens = np.maximum(np.abs(lo), np.abs(hi))
    if not np.any(sens > 0):
        raise InvalidParameterError("every coordinate has lower == upper == 0: nothing to release")
    cal = ell.calibrate_gaussian(sens, rho=rho_s, p=p)
    guarantee = VectorGuarantee(epsilon=priv.epsilon, delta=priv.delta, rho=priv.rho, neighbours=rel,
                                mechanism=f"noisy elliptical sum / noisy count (count share {share:g} of rho)",
                                noise="discrete Gaussian per coordinate and on the count",
                                contribution=BOX_CONTRIBUTION + "; the unit counts once")
    return SumCountPlan(lo=lo, hi=hi, grid=box_grid(lo, hi, np.array(cal.scales), rel, rho=rho_s),
                        count_variance=1 / (2 * Fraction(rho_c)), p=p, guarantee=guarantee,
                        charge=Charge(epsilon=priv.epsilon, delta=priv.delta, neighbours=rel,
                                      mechanism="vector-mean-sum-count", rho=priv.rho))


def vector_mean(data: Any, privacy_unit: str, *, columns: Sequence[str] | None = None, coordinate: str | None = None,
                value: str | None = None, coordinates: Sequence[Any] | None = None, lower: Any = None,
                upper: Any = None, epsilon: float | None = None, delta: float | None = None,
                rho: float | None = None, variances: Any = "estimate", p: float = 2.0, budget: dict[str, float] | None = None,
                beta: float = 0.05, method: str = "plan", count_share: float = 0.1, ledger: Any = None,
                dataset: str | None = None, connection: Any = None, insecure_float: bool = False, rng: Any = None,
                progress: Callable[[str], ContextManager[Any]] | None = None) -> VectorMean:
    """Private mean of the units' vectors by PLAN (thesis Algorithm 17, variance-aware; ρ-zCDP), replace-one.

    ``method="sum-count"`` is the add/remove alternative (for add/remove budgets; n stays private): the elliptical
    Gaussian sum of :func:`vector_sum` with ``neighbours="add-remove"`` at ρ(1 − ``count_share``) divided by a
    noisy unit count N_ℤ(0, 1/(2ρ·count_share)) (sensitivity 1); zCDP composition gives ρ. ``noise_std`` is then
    the delta-method std √(σ_i² + m_i² σ_c²)/ñ from released values (m: the estimate, ñ: the noisy count); the
    variance-aware steps of PLAN (``variances``, ``budget``, ``beta``) do not apply.

    Same input layouts and contribution model as :func:`vector_sum`: a unit's vector is the per-coordinate sum of
    its rows, clipped to the box [lower_i, upper_i] (enforced). PLAN then runs on the box re-centred at its
    public midpoint with M = max_i (upper_i − lower_i)/2 (a public shift: pre- and post-processing):
    private coordinate-wise median, private variances σ̂ (``variances="estimate"``, Algorithm 18 with the χ²
    correction; ``"binary"`` for 0/1 data; ``"none"`` for σ̂ ≡ 1, Theorem 5.4; or a list of public
    variance guesses, no budget), scaling by σ̂^{−2/(p+2)}, a private clip radius C, and exact discrete Gaussian
    noise N_ℤ on a grid (:func:`sparsedp.mechanisms.mean.plan_mean`). ``budget``: the ρ split (default: thesis
    §5.7.2). The guarantee is replace-one (n public) as in the thesis; (ε, δ) from ρ by CKS Cor. 13.

    Returns:
        :class:`~sparsedp.vectors.VectorMean`, a :class:`~sparsedp.report.Result` (estimate, per-coordinate noise
        std, expected error E‖η‖_p^p, guarantee, PLAN details).
    """
    t0 = time.perf_counter()
    insecure = secure_flag(insecure_float)
    spec = vector_input(data, privacy_unit, columns, coordinate, value, coordinates, lower, upper, connection)
    lo, hi = box(lower, upper, spec.coords)
    if not np.all(hi > lo):
        i = int(np.argmax(~(hi > lo)))
        raise InvalidParameterError(f"PLAN needs lower < upper for every coordinate; coordinate {spec.coords[i]!r} "
                                    f"has lower = upper = {lo[i]!r}")
    priv = privacy(epsilon, delta, rho, pure=False, insecure_float=False)
    pp = v.positive("p", p)
    rest: dict[str, Any] = dict(rng=rng, insecure_float=insecure, progress=progress, t_start=t0)
    query: PlanMeanQuery | SumCountMeanQuery
    if v.choice("method", method, ("plan", "sum-count")) == "sum-count":
        share = v.real("count_share", count_share, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
        query = SumCountMeanQuery(spec, _sum_count_plan(lo, hi, priv, pp, share, insecure), **rest)
    else:
        query = PlanMeanQuery(spec, _plan_mean_plan(lo, hi, priv, pp, variances, budget, beta, spec.coords, insecure),
                              **rest)
    return run_query(query, ledger, dataset)
