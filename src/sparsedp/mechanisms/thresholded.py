"""The thresholded sparse histograms as registered mechanisms: GSHM, the Laplace stability histogram, top-k CSH.

Each is a frozen dataclass of its options; its calibration is :func:`sparsedp.accounting.calibrate` (the
accountants cite their theorems there), and its run is the per-key step :class:`~.key_noise.KeyNoise` applied by
the engine chunk by chunk with keyed per-release streams (:mod:`sparsedp.core.noise_chunks`).

Order of the secrets drawn from the release's source, the same on every engine (so a seeded source gives the
same table everywhere): the engine's bounding secret (when an ℓ0 bound is enforced), then ``K_noise``, then the
shared CSH term, then de-biased top-k's ``t̃`` noise.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping

import numpy as np

from .. import _validate as v
from ..accounting import laws
from ..accounting.calibration import Calibration, Comparison
from ..accounting.calibration_cache import cached_calibrate
from ..accounting.charge import Charge
from ..accounting.discrete import dgauss_variance
from ..accounting.events import event_of
from ..accounting.intervals import RowLaws
from ..accounting.names import GSHM as GSHM_NAME, LAPLACE, TOPK_CSH
from ..aggregates import Mean, Squares, Sum, column_sensitivities, noise_columns
from ..core.histogram import Release, SparseHistogram
from ..errors import InfeasibleError, InvalidParameterError
from ..noise.source import SecureRandom
from . import kernel
from ._common import make_release
from .base import Disclosure, Mechanism, PlanQuery, Released, ReleaseRequest
from .catalog import register
from .kernel import noise_plan
from ..core.lazy import lazy_module
from .key_noise import KeyNoise
from .row_laws import thresholded_laws, topk_laws, variance_boxes

if TYPE_CHECKING:
    from ..core.engine import Engine
    import sparsedp.accounting.calibrate as _calibrate  # (the package attribute "calibrate" is the function)
    from ..accounting import aggregates as _acc_aggregates, column_shape as _column_shape, csh as _csh
    from ..accounting import csh_aggregates as _csh_aggregates
    from . import aggregate_noise as _aggregate_noise
else:  # the SUM/MEAN and top-k calibrations and noise: on first use (issue 31; not a default count release's)
    _calibrate = lazy_module("sparsedp.accounting.calibrate")
    _acc_aggregates = lazy_module("sparsedp.accounting.aggregates")
    _column_shape, _csh = lazy_module("sparsedp.accounting.column_shape"), lazy_module("sparsedp.accounting.csh")
    _csh_aggregates = lazy_module("sparsedp.accounting.csh_aggregates")
    _aggregate_noise = lazy_module("sparsedp.mechanisms.aggregate_noise")

__all__ = ["GSHM", "Laplace", "TopKCSH", "JointCalibration", "joint_calibration"]


@dataclass(frozen=True)
class JointCalibration(Calibration):
    """GSHM with SUM/MEAN columns: the count's law and margin as a :class:`Calibration` (what the per-key kernel
    samples and compares, exactly as for a count-only release) plus the joint accountant's recipe.

    ``joint``: :class:`sparsedp.accounting.aggregates.JointDiscreteCalibration` (count scale ``s``, margin, the
    column scales ``s_j`` and the δ of the whole joint release, Karrer Thm 5.4 discrete analogue,
    ``docs/proofs/aggregates.md``); ``aggregates``: the Sum/Mean aggregates in output order. The count fields
    (``sigma``, ``tau``, ``noise``, ``delta_achieved``, ``delta_parts``) are those of the joint calibration,
    so the δ reported is the joint δ.
    """

    joint: Any = None
    aggregates: tuple[Sum, ...] = ()


def joint_calibration(request: ReleaseRequest) -> JointCalibration:
    """The joint discrete GSHM calibration of ``request`` (its ``aggregates`` non-empty): column sensitivities
    from :func:`sparsedp.aggregates.column_sensitivities` (distinct grid columns), then
    :func:`sparsedp.accounting.aggregates.calibrate_joint_gshm` (default allocation: every column as private
    as the count). Secure noise only: float noise has no aggregate path."""
    if request.insecure_float:
        raise InvalidParameterError("SUM/MEAN aggregates are released with secure discrete noise only; drop "
                                    "insecure_float=True")
    assert request.max_groups_per_unit is not None
    aggs = tuple(request.aggregates)
    if request.column_shape is None:
        j = _acc_aggregates.calibrate_joint_gshm(request.epsilon, request.delta, request.max_groups_per_unit,
                                                 column_sensitivities(aggs))
    else:
        j = _column_shape.calibrate_joint_gshm_shaped(request.epsilon, request.delta, request.max_groups_per_unit,
                                                      fit_shape(aggs, request.column_shape))
    p = j.parts
    return JointCalibration(
        mechanism=GSHM_NAME, analysis="discrete-exact-joint", epsilon=j.epsilon, delta=j.delta,
        sigma=math.sqrt(float(j.count_sigma2)), tau=float(j.margin),
        noise_std=math.sqrt(dgauss_variance(j.count_sigma2)),
        noise=laws.DiscreteGaussian(j.count_sigma2), comparison=Comparison.GE,
        delta_parts={"infinite": p.infinite, "forward": p.forward, "reverse": p.reverse},
        delta_achieved=float(p.total), l0=j.l0, joint=j, aggregates=aggs)


def fit_shape(aggregates: tuple[Sum, ...], column_shape: Any) -> _column_shape.ColumnShapeFit:
    """``column_shape`` fitted to unimodular integer noise over the distinct noisy columns of ``aggregates``
    (:func:`sparsedp.accounting.column_shape.fit_column_shape`; refused before any data is read)."""
    cols = noise_columns(aggregates)[0]
    if not cols:
        raise InvalidParameterError("⟨column_shape⟩ shapes the noise of SUM/MEAN columns: pass aggregates=[…] with "
                                    "sd.Sum/sd.Mean too")
    return _column_shape.fit_column_shape(column_shape, [c.step for c in cols], [c.sensitivity for c in cols],
                                          names=[f"{c.column}[{c.lower:g}, {c.upper:g}]" for c in cols])


def _shape_notes(j: Any) -> tuple[str, ...]:
    """The report's statement of a general column shape: the covariance actually sampled (value units), the
    requested one at the same count variance, the deviation, L, F and the per-row μ_o² (Eq. 5.1)."""
    fit = j.shape
    if fit is None:
        return ()
    s = float(j.count_sigma2)
    used = fit.noise_covariance(j.column_sigma2s)
    mu2, _ = _column_shape.unimodular_shift_bounds(fit.lower, fit.fine_sensitivities, j.column_sigma2s)

    def fmt(m: Any) -> str:
        return "[" + "; ".join(", ".join(f"{x:.6g}" for x in row) for row in np.asarray(m)) + "]"

    return (f"column noise covariance used (value units, exact law of the sampled noise): {fmt(used)}; requested "
            f"count variance x column_shape = {fmt(s * np.asarray(fit.requested))} (largest normalised deviation "
            f"{fit.deviation:.3g}); noise = L z with the integer unit lower-triangular L = {fmt(fit.lower)}, "
            f"independent exact z_k, on grids {list(fit.refine)} times finer than the aggregates' "
            f"(docs/proofs/aggregates.md §7)",
            f"per-key Mahalanobis sensitivity of the columns mu_o^2 = {mu2:.6g} (Karrer et al. (2022) Eq. 5.1, vertex "
            f"maximum over the contribution box), count 1/sigma^2 = {1 / s:.6g}")


def _noise_words(rng: SecureRandom) -> bytes:
    return bytes(rng.random_bytes(32))


def _key_task(cal: Any, pre: int, rng: SecureRandom, insecure_float: bool, *, cutoff: int = 0,
              debias: bool = False) -> KeyNoise:
    """The :class:`KeyNoise` of a release (draws ``K_noise``, the shared term and t̃'s noise, in that order)."""
    plan = noise_plan(cal)
    secret = _noise_words(rng)
    shared = kernel.draw_shared_noise(plan, rng, insecure_float=insecure_float)
    offset: float | None = None
    if debias:
        offset = cutoff + kernel.debias_noise(plan, rng)
    return KeyNoise(plan=plan, pre=pre, secret=secret, cutoff=cutoff, offset=offset, shared=shared,
                    insecure_float=insecure_float)


def topk_joint_calibration(request: ReleaseRequest, k: int) -> JointCalibration:
    """De-biased rounded top-k CSH with SUM/MEAN columns (Lebeda & Retschmeier (2024) §6; ``docs/proofs/aggregates.md`` §5):
    :func:`sparsedp.accounting.csh_aggregates.calibrate_csh_joint_rounded` (Thm 3.3 add-the-deltas with the
    columns' μ² and the de-biasing ½√(k + 5√k)); count noise as the count-only rounded CSH (law
    :class:`~sparsedp.accounting.laws.RoundedCorrelatedGaussian`, rule ``c − t + X >= pre + margin``). Secure noise
    only, rounded CSH only (σ within its exact sampler's range)."""
    if request.insecure_float:
        raise InvalidParameterError("SUM/MEAN aggregates are released with secure discrete noise only; drop "
                                    "insecure_float=True")
    if request.column_shape is not None:
        raise InvalidParameterError("column_shape= (correlated column noise) is released by GSHM "
                                    "(max_groups_per_unit=…), not by top-k CSH")
    aggs = tuple(request.aggregates)
    j = _csh_aggregates.calibrate_csh_joint_rounded(request.epsilon, request.delta, k, column_sensitivities(aggs),
                                                    debias=True)
    if j.sigma > _calibrate.ROUNDED_SIGMA_MAX:
        raise InfeasibleError(f"top-k CSH with SUM/MEAN needs sigma={j.sigma:.6g} > "
                              f"{_calibrate.ROUNDED_SIGMA_MAX:g}, beyond the rounded sampler's range; use "
                              f"max_groups_per_unit (GSHM) instead")
    p = j.parts
    return JointCalibration(
        mechanism=TOPK_CSH, analysis="rounded-add-joint", epsilon=j.epsilon, delta=j.delta, sigma=j.sigma,
        tau=float(j.margin), noise_std=_csh.csh_rounded_noise_std(j.sigma, k),
        noise=laws.RoundedCorrelatedGaussian(j.sigma, j.sigma * k ** -0.25), comparison=Comparison.GE,
        delta_parts={"gaussian": p.gaussian, "threshold": p.threshold}, delta_achieved=float(p.total),
        k=k, top_k=k, debias=True, tau_continuous=j.margin - 0.5, joint=j, aggregates=aggs)


def _column_notes(aggs: tuple[Sum, ...], errors: Mapping[str, float], column_stds: tuple[float, ...], what: str,
                  correlated: bool = False) -> tuple[str, ...]:
    where = _aggregate_noise.column_indices(aggs)
    kind = "correlated (L z, unimodular)" if correlated else "independent"
    notes = (f"joint release ({what}): the count decides release, the SUM/MEAN columns get {kind} exact "
             "discrete Gaussian noise on released keys only; delta is that of the whole joint release",)
    return notes + tuple(
        f"column {a.output_name}: noise std {column_stds[i] * _aggregate_noise.grid_step(a):.4g} (value units) on "
        f"the grid sum; "
        f"expected error {errors[a.output_name]:.4g}"
        + (" (MEAN = noisy sum / noisy count: worst-case error at the threshold count)" if isinstance(a, Mean)
           else "") for a, i in zip(aggs, where))


def _disclosure(self: Mechanism, request: ReleaseRequest, cal: Any, value_column: str, contribution: str, *,
                pre: int, noise_std: float | None = None, notes: tuple[str, ...] = ()) -> Disclosure:
    fb = cal.fallback
    return Disclosure(
        mechanism=self.name, analysis=cal.analysis, epsilon=cal.epsilon, delta=cal.delta,
        delta_achieved=float(cal.delta_achieved), neighbours=self.neighbours, contribution=contribution,
        value_column=value_column, delta_parts=dict(cal.delta_parts), sigma=float(cal.sigma),
        noise_std=float(cal.noise_std if noise_std is None else noise_std), threshold=float(pre + cal.tau),
        margin=float(cal.tau), pre_threshold=pre, comparison=cal.comparison.value,
        notes=notes + ((fb,) if fb else ()))


def _charge(self: Mechanism, calibration: Any, disclosure: Disclosure) -> Any:
    """The charge with the calibration's privacy event (:func:`~sparsedp.accounting.events.event_of`),
    so the ledger composes repeated releases tightly (docs/proofs/ledger-composition.md). A joint release with
    SUM/MEAN columns is charged as its joint event (:class:`~sparsedp.accounting.events.AggregateGSHMEvent`), never
    with the count-only profile (which would under-charge it)."""
    if isinstance(calibration, JointCalibration):
        return Charge.of_event(event_of(calibration, disclosure.neighbours), self.name)
    return Charge.from_calibration(calibration, disclosure.neighbours)


def _clipping(aggs: tuple[Sum, ...]) -> str:
    return "; " + "; ".join(f"{c.column}: each unit's per-key total clipped to [{c.lower:g}, {c.upper:g}]"
                            + (", squared (VARIANCE's sum of squares)" if isinstance(c, Squares) else "")
                            + f" (grid {c.granularity:g})" for c in noise_columns(aggs)[0])


def _secure(request: ReleaseRequest) -> bool:
    return not request.insecure_float


@dataclass(frozen=True)
class _PerKeyThresholded(Mechanism):
    """GSHM and Laplace: independent noise per key, released iff ``count >= pre`` and ``count + Z >= pre + margin``.

    ``pre_threshold``: keys whose bounded count is below it are never released (>= 1)."""

    pre_threshold: int = 1
    bounded = True
    auto_bound_objectives = ("quantile", "keys")

    def __post_init__(self) -> None:
        object.__setattr__(self, "pre_threshold", v.integer("pre_threshold", self.pre_threshold, lo=1))

    def count_floor(self) -> int:
        return self.pre_threshold

    def calibrate(self, request: ReleaseRequest) -> Any:
        assert request.max_groups_per_unit is not None
        if request.aggregates:
            if not self.supports_aggregates:
                raise InvalidParameterError(f"mechanism={self.name!r} releases counts only; SUM/MEAN need "
                                            f"mechanism='gshm' (or 'auto')")
            return joint_calibration(request)
        return cached_calibrate(self.name, epsilon=request.epsilon, delta=request.delta, l0=request.max_groups_per_unit,
                         discrete=_secure(request))

    def disclosure(self, request: ReleaseRequest, calibration: Any, value_column: str) -> Disclosure:
        contribution = f"at most {request.max_groups_per_unit} keys per unit, 1 per key"
        if not isinstance(calibration, JointCalibration):
            return _disclosure(self, request, calibration, value_column, contribution, pre=self.pre_threshold)
        j = calibration.joint
        aggs = calibration.aggregates
        contribution += _clipping(aggs)
        errors = _aggregate_noise.expected_errors(aggs, j, pre_threshold=self.pre_threshold)
        correlated = j.shape is not None and not j.shape.diagonal
        notes = _column_notes(aggs, errors, j.column_noise_stds,
                              "Karrer et al. (2022) Thm 5.4, discrete analogue docs/proofs/aggregates.md", correlated)
        notes += _shape_notes(j)
        d = _disclosure(self, request, calibration, value_column, contribution, pre=self.pre_threshold, notes=notes)
        return dataclasses.replace(d, column_errors={a.output_name: float(errors[a.output_name]) for a in aggs})

    charge = _charge

    def row_laws(self, request: ReleaseRequest, calibration: Any, value_column: str) -> RowLaws | None:
        return thresholded_laws(value_column, calibration, self.pre_threshold)

    def run(self, engine: Engine, hist: Any, calibration: Any, disclosure: Disclosure, rng: SecureRandom,
            request: ReleaseRequest) -> Released:
        task = _key_task(calibration, self.pre_threshold, rng, request.insecure_float)
        if isinstance(calibration, JointCalibration):
            boxes = variance_boxes(thresholded_laws("", calibration, self.pre_threshold), request.interval)
            task = dataclasses.replace(task, aggregates=calibration.aggregates,
                                       column_sigma2s=tuple(calibration.joint.column_sigma2s),
                                       column_noise=tuple(_aggregate_noise.noise_map(calibration.joint).items())
                                       or None,
                                       variance_boxes=boxes)
        return Released(rows=engine.noise_keys(hist, task), disclosure=disclosure)

    def release_counts(self, hist: SparseHistogram, calibration: Calibration, *, rng: Any = None,
                       insecure_float: bool = False) -> Release:
        """This mechanism on an in-memory, already bounded histogram (the function-level form: ``sd.mechanisms.
        gshm``, ``laplace_histogram``, ``release_histogram``): a key is released iff ``count >= pre_threshold`` and
        ``count + Z >= pre_threshold + margin``, with ``Z`` drawn from ``rng`` key by key in the histogram's order
        (a release from data draws from keyed per-chunk streams instead, :meth:`run`)."""
        pos, noisy = self.noise_counts(hist.counts, calibration, rng=rng, insecure_float=insecure_float)
        return make_release(hist, pos, noisy, calibration, self.release_facts(calibration))

    def noise_counts(self, counts: np.ndarray, calibration: Calibration, *, rng: Any = None,
                     insecure_float: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """``(positions, noisy counts)`` of the released keys of ``counts`` (:meth:`release_counts`' rule)."""
        if calibration.mechanism != self.name:
            raise InvalidParameterError(f"calibration is for {calibration.mechanism!r}, not {self.name!r}")
        return kernel.noise_and_filter(counts, calibration, self.pre_threshold, rng, insecure_float=insecure_float)

    def release_facts(self, calibration: Calibration) -> dict[str, Any]:
        """``Release.extra`` of :meth:`release_counts`: the mechanism, pre-threshold and absolute threshold."""
        pre = self.pre_threshold
        return {"mechanism": self.name, "pre_threshold": pre, "threshold": pre + calibration.tau}


@register
@dataclass(frozen=True)
class GSHM(_PerKeyThresholded):
    """The Gaussian sparse histogram mechanism (Karrer et al., Karrer et al. (2022) Alg. 1) with exact discrete-Gaussian
    noise, calibrated by the exact analysis (Karrer et al. (2022) Thm 5.4; discrete analogue in
    ``docs/proofs/discrete-histograms.md``). Needs ``max_groups_per_unit``.

    Option: ``pre_threshold`` (default 1): keys with a smaller bounded count are never released."""

    name = GSHM_NAME
    auto_candidate = True
    supports_aggregates = True


@register
@dataclass(frozen=True)
class Laplace(_PerKeyThresholded):
    """The Laplace (geometric) stability histogram, the peers' default (Korolova et al. 2009; OpenDP, Google),
    with exact discrete-Laplace noise and the exact discrete analysis (``docs/proofs/discrete-histograms.md``
    §4). Needs ``max_groups_per_unit``.

    Option: ``pre_threshold`` (default 1)."""

    name = LAPLACE
    auto_candidate = True


@register
@dataclass(frozen=True)
class TopKCSH(Mechanism):
    """Top-k CSH (Lebeda & Retschmeier, Lebeda & Retschmeier (2024) Alg. 3): truncate the histogram at its (k+1)-th largest count
    ``t`` (``max(0, c − t)``: at most k keys survive), then the correlated-noise CSH (rounded, exact integer
    outputs; Thm 3.5 / 3.3, ``docs/proofs/rounded-csh.md``). No per-unit key bound is needed, only one
    contribution per key per unit (Lemma 4.1, Cor. 4.2): the engine de-duplicates and enforces nothing else.

    Options:
        k: the number of keys kept by the truncation (>= 1).
        debias: ``True`` (default) releases **counts**: Lebeda & Retschmeier (2024)'s de-biasing variant also releases
            ``t̃ = t + noise`` and adds it to every value (accounted by Thm 3.3 with ½√(k + 5√k)); ``False``
            releases the shifted values ``count − t + noise`` in a column named ``count_minus_cutoff`` (a smaller
            threshold, but the values are not counts).
        noise: the exact integer noise. ``"rounded"`` (default): the rounded continuous CSH (Gaussian noise
            rounded to integers, accounted by Thm 3.5 / 3.3 at τ = margin − ½, ``docs/proofs/rounded-csh.md``).
            ``"alg4"``: Algorithm 4 of Lebeda & Retschmeier, "The Correlated Gaussian Sparse Histogram
            Mechanism" (arXiv 2412.10357, 2024): ``Z_i ~ N_Z(0, 4σ²)`` per key plus a
            shared ``Z_c ~ N_Z(0, 4σ²/√k)``, released value ``c + (Z_i + Z_c)/2`` (on the ½-lattice), rule
            ``> pre + τ``, accounted in zCDP (Thm 7.7, Canonne–Kamath–Steinke conversion); de-biased: the zCDP
            account of the released t̃ as well. Looser than ``"rounded"`` (a larger margin at the same (ε, δ)), it
            is the paper's own discrete mechanism. Secure noise only (not with ``insecure_float=True``), counts only.
    """

    k: int
    debias: bool = True
    noise: str = "rounded"
    name = TOPK_CSH
    supports_aggregates = True  # de-biased rounded only (checked in calibrate)

    @classmethod
    def with_top_k(cls, spec: "Mechanism | None", k: int, bound_given: bool) -> "TopKCSH":
        """``top_k=k`` is this mechanism's ``k``: ``TopKCSH(k)``, or ``spec`` when it already says ``k``."""
        if spec is None:
            return cls(k=k)
        assert isinstance(spec, TopKCSH)
        if spec.k != k:
            raise InvalidParameterError(f"⟨top_k={k}⟩ contradicts mechanism={spec.describe()}", param="top_k")
        return spec

    plan_group = 2  # the shifted variant (the de-biased one is ranked with the count mechanisms)

    @classmethod
    def plan_rows(cls, query: PlanQuery) -> list[tuple[Mechanism, Any, int]]:
        """With ``top_k``: the de-biased counts (ranked) and, without SUM/MEAN, the shifted variant after them;
        with secure noise and no SUM/MEAN, both again with Algorithm 4's noise (``noise="alg4"``)."""
        if query.d is not None or query.top_k is None or query.delta == 0:
            return []
        request = query.request(max_groups_per_unit=None)
        variants = [(cls(k=query.top_k), 0)]
        if not query.sums:
            variants.append((cls(k=query.top_k, debias=False), cls.plan_group))
        if not (query.sums or query.insecure_float):  # Algorithm 4's exact discrete noise (the paper's own)
            variants += [(cls(k=query.top_k, noise="alg4"), cls.plan_group),
                         (cls(k=query.top_k, debias=False, noise="alg4"), cls.plan_group)]
        rows: list[tuple[Mechanism, Any, int]] = []
        for m, group in variants:
            try:
                rows.append((m, m.calibrate(request), group))
            except InfeasibleError:
                continue
        return rows

    @classmethod
    def default(cls) -> "TopKCSH":
        raise InvalidParameterError(f"⟨mechanism={cls.name!r}⟩ needs ⟨top_k=…⟩ (number of keys to keep, e.g. 100)",
                                    param="top_k", fix="or pass ⟨mechanism|mechanism=sd.TopKCSH(k=…)⟩")

    def __post_init__(self) -> None:
        object.__setattr__(self, "k", v.integer("k", self.k, lo=1, hi=10**9))
        if not isinstance(self.debias, bool):
            raise v.InvalidTypeError(f"debias must be True or False, got {self.debias!r}")
        object.__setattr__(self, "noise", v.choice("noise", self.noise, ("rounded", "alg4")))

    def options(self) -> dict[str, Any]:
        """The options, without ``noise`` when it is the default (reports and plans stay as before)."""
        out = super().options()
        if out["noise"] == "rounded":
            del out["noise"]
        return out

    def check(self, request: ReleaseRequest) -> None:
        self.check_delta(request)
        if request.max_groups_per_unit is not None:
            raise InvalidParameterError(
                "pass either ⟨max_groups_per_unit⟩ (bound each unit to l0 keys: gshm, laplace) or ⟨top_k⟩ (release "
                "the top-k keys: topk-csh), not both", param="top_k")

    def engine_bound(self, request: ReleaseRequest) -> int | None:
        return None

    def value_column(self, default: str) -> str:
        return default if self.debias else "count_minus_cutoff"

    def calibrate(self, request: ReleaseRequest) -> Any:
        if self.noise == "alg4" and not _secure(request):
            raise InvalidParameterError("noise='alg4' is Algorithm 4's exact integer noise; insecure_float=True asks "
                                        "for float noise: drop one of them")
        if request.aggregates:
            if self.noise == "alg4":
                raise InvalidParameterError("SUM/MEAN with top-k CSH are accounted for the rounded noise only: drop "
                                            "noise='alg4' (or the aggregates)")
            if not self.debias:
                raise InvalidParameterError("SUM/MEAN with top-k CSH need the de-biased counts (debias=True): the "
                                            "re-centred sums add centre × count estimate")
            return topk_joint_calibration(request, self.k)
        return cached_calibrate(TOPK_CSH, epsilon=request.epsilon, delta=request.delta, top_k=self.k,
                         debias=self.debias, discrete=_secure(request), csh_noise=self.noise)

    def disclosure(self, request: ReleaseRequest, calibration: Any, value_column: str) -> Disclosure:
        cal = calibration
        notes: tuple[str, ...]
        if self.debias:
            # each released value is c + X_i + (t̃ − t): the shared variance σ²/√k of t̃'s noise adds to the count noise
            std = math.sqrt(float(cal.noise_std) ** 2 + float(cal.sigma) ** 2 / math.sqrt(self.k))
            notes = ("values are de-biased counts: count − t + noise + t̃, with t the (k+1)-th largest count and "
                     "t̃ = t + noise released with them (Lebeda & Retschmeier (2024) §4)",)
        else:
            std = float(cal.noise_std)
            notes = ("values estimate count minus the (k+1)-th largest count t (not counts: opt-in shifted "
                     "variant); the threshold applies to count − t",)
        contribution = f"top-{self.k} keys, 1 per key per unit (no l0 bound)"
        if not isinstance(cal, JointCalibration):
            return _disclosure(self, request, cal, value_column, contribution, pre=1, noise_std=std, notes=notes)
        j = cal.joint
        aggs = cal.aggregates
        errors = _aggregate_noise.topk_expected_errors(aggs, j, std, 1 + j.margin)
        notes += _column_notes(aggs, errors, tuple(math.sqrt(float(x)) for x in j.column_sigma2s),
                               "Lebeda & Retschmeier (2024) §6 with docs/proofs/aggregates.md §5: Thm 3.3 with the columns' μ²")
        d = _disclosure(self, request, cal, value_column, contribution + _clipping(aggs), pre=1, noise_std=std,
                        notes=notes)
        return dataclasses.replace(d, column_errors={a.output_name: float(errors[a.output_name]) for a in aggs})

    charge = _charge

    def row_laws(self, request: ReleaseRequest, calibration: Any, value_column: str) -> RowLaws | None:
        return topk_laws(value_column, calibration, self.debias, request.aggregates)

    def run(self, engine: Engine, hist: Any, calibration: Any, disclosure: Disclosure, rng: SecureRandom,
            request: ReleaseRequest) -> Released:
        t = engine.kth_largest(hist, self.k + 1)
        task = _key_task(calibration, 1, rng, request.insecure_float, cutoff=t, debias=self.debias)
        if isinstance(calibration, JointCalibration):
            task = dataclasses.replace(task, aggregates=calibration.aggregates,
                                       column_sigma2s=tuple(calibration.joint.column_sigma2s))
        if self.debias:
            disclosure = disclosure.with_notes(f"released noisy cut-off t̃ = {task.offset:g}")
        return Released(rows=engine.noise_keys(hist, task), disclosure=disclosure)

    @classmethod
    def of_calibration(cls, calibration: Calibration, debias: bool | None = None) -> "TopKCSH":
        """The top-k CSH a calibration was made for (its ``k``, ``debias`` and noise); ``debias``, if given, must
        agree with the calibration's."""
        if calibration.mechanism != TOPK_CSH:
            raise InvalidParameterError(f"calibration is for {calibration.mechanism!r}, not {TOPK_CSH!r}")
        if calibration.k is None:
            raise InvalidParameterError("a top-k CSH calibration must carry k (the number of keys kept)")
        cal_debias = bool(calibration.debias)
        if debias is not None and bool(debias) != cal_debias:
            raise InvalidParameterError(f"debias={debias} but the calibration was made with debias={cal_debias}")
        plan = kernel.noise_plan(calibration)
        return cls(k=int(calibration.k), debias=cal_debias,
                   noise="alg4" if plan.discrete and not plan.rounded else "rounded")

    def release_counts(self, hist: SparseHistogram, calibration: Calibration, *, rng: Any = None,
                       insecure_float: bool = False, shared_noise: Any = None) -> Release:
        """Algorithm 3 on an in-memory histogram (the function-level form: ``sd.mechanisms.topk.topk_csh``,
        ``release_histogram(top_k=…)``): truncate at the (k+1)-th largest count ``t``, then CSH with
        pre-threshold 1, every draw from ``rng`` (the shared term unless ``shared_noise`` is given, the keys in
        the histogram's order, then t̃'s noise). Released values are ``count − t + noise``
        (``extra['bias']``) or, de-biased, ``count − t + noise + t̃`` with ``extra['t_tilde']``."""
        made_for = TopKCSH.of_calibration(calibration)
        if self != made_for:
            raise InvalidParameterError(f"the calibration is for {made_for.describe()}, not {self.describe()}")
        plan = kernel.noise_plan(calibration)
        if shared_noise is None:
            shared_noise = kernel.draw_shared_noise(plan, rng, insecure_float=insecure_float)
        t, trunc = kernel.truncate_top_k(hist.counts, self.k)
        pos, noisy = kernel.noise_and_filter(trunc, plan, 1, rng, shared_noise, insecure_float=insecure_float)
        extra: dict[str, Any] = {"mechanism": TOPK_CSH, "pre_threshold": 1, "threshold": 1 + calibration.tau,
                                 "k": self.k}
        if self.debias:
            t_tilde = t + kernel.debias_noise(plan, rng)
            noisy = noisy + t_tilde
            extra["t_tilde"] = t_tilde
        else:
            extra["bias"] = "released values estimate count minus the (k+1)-th largest count"
        return make_release(hist, pos, noisy, calibration, extra)
