"""Two-stage release (issue 22, "truer counts"): select keys with a small contribution bound, then count the
selected keys as a public key list with a larger bound (or none).

    sd.release(data, "user", "url", epsilon=1, delta=1e-6, max_groups_per_unit=5,
               mechanism=sd.TwoStage(count_bound=None, split=0.5))

Stage 1 (selection) is ANY registered release of the data's keys (``select``, default ``"auto"``: below; also
``gshm``, ``laplace``, ``weighted-gaussian``, ``optimal-partition``, ``mad``, ``mad2r``, top-k CSH, or a plug-in)
at ``(split·ε, delta_split·δ)`` of the histogram bounded to the selecting mechanism's own bound:
``max_groups_per_unit`` keys per unit, or the bound the mechanism fixes itself (``optimal-partition``: one key per
unit, ``max_groups_per_unit`` omitted or 1). Only its **key set** K is used (its values, counts or key weights, are neither published nor combined).

    sd.release(data, "user", "url", epsilon=1, delta=1e-6,
               mechanism=sd.TwoStage(select="optimal-partition"))   # the most keys at one key per unit Stage 2 (counting) is a public-key mechanism (``count``, default Lebeda (2024)'s
correlated Gaussian, :class:`~sparsedp.mechanisms.public_keys.CorrelatedGaussian`) at the rest of (ε, δ) on
the histogram bounded to ``count_bound`` keys per unit (``None``: no ℓ0 bound, every (unit, key) pair counts
once: the correlated Gaussian's embedding shift ``(±1, …, ±1, C)`` has ``|v|² = d + C²`` whatever the number of
listed keys a unit touches, Lebeda (2024) §3, so it needs no bound), with K as the list. The table is K with the
stage-2 counts.

Privacy (``docs/proofs/two-stage.md``): for every fixed list K, stage 2 is ``(ε₂, δ₂)``-DP under add/remove one
unit (its own accountant, δ of the integer noise actually sampled, calibrated after stage 1 at ``d = |K|``);
stage 1 is ``(ε₁, δ₁)``-DP, whichever mechanism it is, and K is a post-processing of its output; the pair is therefore ``(ε₁ + ε₂, δ₁ + δ₂)``
-DP by adaptive basic composition (Dwork–Roth 2014 Thm 3.16, which holds for adaptively chosen mechanisms,
Dwork–Rothblum–Vadhan 2010). The ledger is charged once, ``(ε, δ)`` with ``ε₁ + ε₂ = ε`` and ``δ₁ + δ₂ = δ``,
before any noise is drawn. The reported ``delta_achieved`` is ``δ̂₁ + δ₂``: the δ of stage 1's noise actually
sampled plus stage 2's target, which bounds the δ of stage 2's integer noise at every d (d is chosen by stage 1,
so the guarantee takes the bound over d; the value at the released d is in the notes).
[Beyond the papers: the composition of a DP key selection (by default the one ``sd.Auto(objective="keys")``
chooses: Desfontaines et al. (2022)'s l0 = 1 rule or Laplace at one key per unit, Gopi et al. (2020)'s Weighted
Gaussian above; or Karrer et al. (2022)'s GSHM, …) with Lebeda (2024)'s mechanism on the selected list.]

``select="auto"`` (issue 33; the default since it releases the most keys at every bound measured,
``docs/benchmarks_utility.md``): stage 1's mechanism is chosen by ``sd.Auto(objective="keys")`` at stage 1's
``(ε₁, δ₁, l0)`` — the lowest count-equivalent release threshold among every key-selection mechanism and the
count mechanisms (``optimal-partition`` at l0 = 1, the Weighted Gaussian or GSHM above), without the data, so the
composition above is unchanged (the choice is a function of public parameters, :meth:`TwoStage.stage_one`). Its
bound is ``max_groups_per_unit``, or with ``max_groups_per_unit="auto"`` chosen privately from the data by the
quantile rule (:class:`~sparsedp.bound_choice.AutoBounded` wrapping the two-stage release: a share of ε, basic
composition, ``docs/proofs/auto-bound.md``). The report's notes say which mechanism stage 1 used and why.

Secrets, in order, from the release's source: stage 1's bounding secret, stage 2's bounding secret (with a
``count_bound``), stage 1's noise (``K_noise`` …), stage 2's noise (``K_noise``, the shared coordinate).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .. import _validate as v
from ..accounting.calibration import Calibration, Neighbours
from ..accounting.charge import Charge
from ..accounting.events import ApproxDPEvent, SequenceEvent, event_of
from ..accounting.intervals import RowLaws
from ..accounting.split import split_epsilon
from ..errors import InfeasibleError, InvalidParameterError, InvalidTypeError
from ..noise.source import SecureRandom
from . import registry
from ..core.engine import Capability
from .auto import Auto
from .base import AutoRole, Disclosure, Mechanism, Released, ReleaseRequest, UserRequest
from .catalog import with_auto_role
from .public_keys import CorrelatedGaussian, PublicKeys, align, public_keys
from .registry import register

if TYPE_CHECKING:
    from ..core.engine import Engine

__all__ = ["TwoStage", "TwoStageCalibration", "TwoStageHistogram"]

#: column name of stage 1's value in its (never published) table
_SELECT_VALUE = "__sparsedp_stage1"


@dataclass(frozen=True)
class TwoStageCalibration:
    """The data-independent part of a two-stage release (math only: no data, no noise).

    ``select``/``select_request``/``select_cal``: stage 1's resolved mechanism, its request at
    ``(ε₁, δ₁, max_groups_per_unit)`` and calibration; ``count``: stage 2's mechanism (a public-key mechanism or
    ``auto``), calibrated in :meth:`TwoStage.run` once ``d = |K|`` is known; ``count_request``: its request at
    ``(ε₂, δ₂, count_bound)`` without the list; ``count_probe``: its calibration at ``d = 1`` (feasibility checked
    before any data is read). ``epsilon``/``delta``: the whole release (charged once)."""

    select: Mechanism
    select_request: ReleaseRequest
    select_cal: Any
    count: Mechanism
    count_request: ReleaseRequest
    count_probe: Any
    epsilon: float
    delta: float
    analysis: str
    select_reason: str = ""

    @property
    def tau(self) -> float:
        return float(getattr(self.select_cal, "tau", 0.0))

    @property
    def noise_std(self) -> float:
        return float(self.select_cal.noise_std)


@dataclass(frozen=True, eq=False)
class TwoStageHistogram:
    """Both bounded histograms of one input (curator only, never released): ``select`` (bounded to
    ``max_groups_per_unit``, what stage 1 releases keys from) and ``count`` (bounded to ``count_bound``, what stage
    2 counts); ``by`` the key columns; ``stats``: stage 1's bounding statistics (the curator's view)."""

    select: Any
    count: Any
    by: tuple[str, ...]
    stats: Any


def _select_names() -> str:
    """The registered mechanisms stage 1 can be (releases of the data's keys), quoted."""
    names = [c.name for c in registry.classes() if not (c.public_keys or c.row_units or c.pure_dp)
             and c.name not in ("auto", "two-stage") and c.neighbours is Neighbours.ADD_REMOVE]
    return ", ".join(repr(n) for n in names)


def _bound_text(l0: int | None) -> str:
    return "no keys-per-unit bound" if l0 is None else f"{l0} key{'s' if l0 != 1 else ''} per unit"


def _mechanism(spec: Any, what: str) -> Mechanism:
    if isinstance(spec, type) and issubclass(spec, Mechanism):
        spec = spec()
    if not isinstance(spec, (str, Mechanism)):
        raise InvalidTypeError(f"TwoStage {what} must be a mechanism name or object, got {type(spec).__name__}")
    return registry.create(spec)


@register
@dataclass(frozen=True)
class TwoStage(Mechanism):
    """Select keys with a small contribution bound, count them as a public key list with a larger one.

    Needs ``max_groups_per_unit`` (stage 1's bound). Options:
        select: stage 1, any registered mechanism that releases keys from the data (name or object; default
            ``"auto"``: the selection mechanism with the lowest count-equivalent release threshold at stage 1's
            (ε₁, δ₁, bound), chosen without the data — ``"optimal-partition"`` or ``"laplace"`` at one key per
            unit, the Weighted Gaussian above; also ``"gshm"``, ``"laplace"``, ``"weighted-gaussian"``,
            ``"optimal-partition"`` (one key per unit), ``"mad"``, ``"mad2r"``, ``sd.GSHM(pre_threshold=…)``,
            ``sd.TopKCSH(k=…)``); its key set only is used. On an engine without the pair primitives (Spark) pass
            ``select="gshm"`` (or ``"mad"``/``"mad2r"``) where auto would choose the Weighted Gaussian. Stage 1
            is bounded to ``max_groups_per_unit``, or to the mechanism's own bound (``optimal-partition``: 1).
        count: stage 2, a public-key mechanism (default ``"correlated-gaussian"``; also ``"public-gaussian"``,
            ``"public-laplace"``, ``"bounded-density"`` with a ``count_bound``, or ``"auto"``: the lowest
            per-key error at ``d = |K|``).
        count_bound: keys per unit counted in stage 2 (``None``: no bound, each unit counts once in every selected
            key it has; the correlated Gaussian's noise does not depend on it). An integer bounds a unit's keys
            among *all* its keys (as ``release(..., keys=…)`` does), before the selected list is applied.
        split: share of ε spent on stage 1 (0 < split < 1); stage 2 gets the rest.
        delta_split: share of δ spent on stage 1 (0 < delta_split < 1).

    The published table holds the selected keys and their stage-2 counts only (stage 1's counts are not
    published). Privacy: adaptive basic composition (module docstring, ``docs/proofs/two-stage.md``).
    """

    select: Any = Auto.name
    count: Any = CorrelatedGaussian.name
    count_bound: int | None = None
    split: float = 0.5
    delta_split: float = 0.5
    name = "two-stage"
    #: ``max_groups_per_unit="auto"`` chooses stage 1's bound by the quantile rule (its keys objective models a
    #: one-stage thresholded release, not this one)
    auto_bound_objectives = ("quantile",)
    lacks_hint = "sd.TwoStage(select='gshm') (a stage 1 that needs no pair primitives)"

    def __post_init__(self) -> None:
        # select="auto": the most keys (objective "keys"); an sd.Auto(...) object is used as given
        sel = Auto(objective="keys") if self.select == Auto.name else _mechanism(self.select, "select")
        cnt = _mechanism(self.count, "count")
        if isinstance(sel, Auto) and (sel.group is not None):
            raise InvalidParameterError("TwoStage select=sd.Auto(group=…): stage 1 selects keys from the data; "
                                        "group= belongs to a public key list")
        if not isinstance(sel, Auto) and (isinstance(sel, TwoStage) or sel.public_keys or sel.row_units or sel.pure_dp \
                or sel.neighbours is not Neighbours.ADD_REMOVE):
            raise InvalidParameterError(
                f"TwoStage select={sel.describe()}: stage 1 must release keys from the data under add/remove one "
                f"unit with delta > 0 ({_select_names()})")
        if not (cnt.public_keys or cnt.name == "auto"):
            raise InvalidParameterError(
                f"TwoStage count={cnt.describe()}: stage 2 counts a public key list; use 'correlated-gaussian', "
                f"'public-gaussian', 'public-laplace', 'bounded-density' or 'auto'")
        object.__setattr__(self, "select", sel)
        object.__setattr__(self, "count", cnt)
        if self.count_bound is not None:
            object.__setattr__(self, "count_bound", v.integer("count_bound", self.count_bound, lo=1))
        for name in ("split", "delta_split"):
            x = v.real(name, getattr(self, name), lo=0.0, hi=1.0, lo_open=True, hi_open=True)
            object.__setattr__(self, name, x)

    def options(self) -> dict[str, Any]:
        return {"select": self.select.describe(), "count": self.count.describe(), "count_bound": self.count_bound,
                "split": self.split, "delta_split": self.delta_split}

    # ---------------------------------------------------------------- calibration (no data, no noise)

    def select_bound(self, request: ReleaseRequest) -> int | None:
        """Stage 1's keys per unit: ``max_groups_per_unit``, or the bound the selecting mechanism fixes itself
        when it is omitted (its ``engine_bound`` without a declared bound: 1 for ``optimal-partition``)."""
        if request.max_groups_per_unit is not None:
            return request.max_groups_per_unit
        sel: Mechanism = self.select
        return sel.engine_bound(ReleaseRequest(request.epsilon, request.delta, None))

    def stage_one(self, request: ReleaseRequest) -> tuple[Mechanism, ReleaseRequest]:
        """The seam where stage 1's mechanism and request are fixed (data-independent): the named ``select`` at
        ``(ε₁, δ₁, select_bound)``, or for ``select="auto"`` the mechanism ``auto`` resolves to there (public
        parameters only: module docstring)."""
        r1 = self._requests(request)[0]
        sel: Mechanism = self.select
        if isinstance(sel, Auto):
            return sel.resolve(r1)[0], r1
        return sel, r1

    def _requests(self, request: ReleaseRequest) -> tuple[ReleaseRequest, ReleaseRequest]:
        """Stage 1's and stage 2's requests: ε₁ + ε₂ <= ε and δ₁ + δ₂ <= δ exactly (no rounding above the
        charge; :func:`~sparsedp.accounting.split.split_epsilon`); stage 1 at :meth:`select_bound`."""
        try:
            eps1, eps2 = split_epsilon(request.epsilon, self.split)
            d1, d2 = split_epsilon(request.delta, self.delta_split)
        except InvalidParameterError:
            raise InvalidParameterError(f"TwoStage split={self.split}, delta_split={self.delta_split} leave nothing "
                                        f"for one of the two stages at epsilon={request.epsilon:g}, "
                                        f"delta={request.delta:g}") from None
        r1 = ReleaseRequest(epsilon=eps1, delta=d1, max_groups_per_unit=self.select_bound(request),
                            insecure_float=request.insecure_float)
        r2 = ReleaseRequest(epsilon=eps2, delta=d2, max_groups_per_unit=self.count_bound,
                            insecure_float=request.insecure_float)
        return r1, r2

    def check(self, request: ReleaseRequest) -> None:
        self.check_delta(request)
        if request.aggregates:
            raise InvalidParameterError("mechanism='two-stage' releases counts only; SUM/MEAN aggregates need "
                                        "mechanism='gshm' or 'auto'")
        if request.keys is not None:
            raise InvalidParameterError("mechanism='two-stage' selects its keys from the data; with a public key "
                                        "list (keys=…) use mechanism='correlated-gaussian' or 'auto'")
        if self.select_bound(request) is None and self.select.engine_bound(
                ReleaseRequest(request.epsilon, request.delta, 1)) is not None:
            raise InvalidParameterError("⟨mechanism='two-stage'⟩ needs ⟨max_groups_per_unit=…⟩ (stage 1's keys "
                                        "per unit, e.g. 5; small bounds select the most keys)",
                                        param="max_groups_per_unit")

    def needs(self, request: UserRequest) -> frozenset[Capability]:
        """What stage 1's mechanism needs of the engine (the Weighted Gaussian: the pair primitives); for
        ``select="auto"``, what any selection mechanism it may choose needs (known before the bound is)."""
        sel: Mechanism = self.select
        if isinstance(sel, Auto) and isinstance(request.bound, int) and request.auto_bound is None \
                and isinstance(getattr(request, "epsilon", None), (int, float)) and request.delta > 0:
            try:  # a fixed bound: what the mechanism auto resolves to needs (data-independent, as in calibrate)
                chosen, r1 = self.stage_one(ReleaseRequest(float(getattr(request, "epsilon")), request.delta,
                                                           request.bound))
                return chosen.needs(request)
            except (InvalidParameterError, InfeasibleError):
                pass  # refused or infeasible: calibrate says why, with the argument to fix
        if isinstance(sel, Auto):
            out: frozenset[Capability] = frozenset()
            for cls in with_auto_role(AutoRole.DISCOVERY):
                out |= cls.needs(cls.default(), request)
            return out
        return sel.needs(request)

    def calibrate(self, request: ReleaseRequest) -> TwoStageCalibration:
        self.check(request)
        select, r1 = self.stage_one(request)
        _, r2 = self._requests(request)
        sel, cal1, reason1, _ = (self.select if isinstance(self.select, Auto) else select).resolve(r1)
        probe_req = dataclasses.replace(r2, keys=PublicKeys(table=None, d=1, columns=()))
        _, probe, _, _ = self.count.resolve(probe_req)
        analysis = (f"adaptive basic composition: {sel.name} ({cal1.analysis}) at epsilon {r1.epsilon:.4g}, delta "
                    f"{r1.delta:.3g} + {self.count.name} at epsilon {r2.epsilon:.4g}, delta {r2.delta:.3g}")
        return TwoStageCalibration(select=sel, select_request=r1, select_cal=cal1, count=self.count,
                                   count_request=r2, count_probe=probe, epsilon=request.epsilon,
                                   delta=request.delta, analysis=analysis,
                                   select_reason=reason1 if isinstance(self.select, Auto) else "")

    def disclosure(self, request: ReleaseRequest, calibration: Any, value_column: str) -> Disclosure:
        cal: TwoStageCalibration = calibration
        d1 = cal.select.disclosure(cal.select_request, cal.select_cal, value_column)
        r2 = cal.count_request
        bound = "no bound" if self.count_bound is None else f"at most {self.count_bound} keys per unit"
        contribution = (f"stage 1 (selection): {d1.contribution}; stage 2 (counts of the selected keys): {bound}, "
                        f"1 per key per unit")
        rule = f"threshold {d1.threshold:.6g}" if d1.threshold is not None else d1.analysis
        notes = (f"two-stage release: stage 1 {cal.select.describe()} at epsilon {cal.select_request.epsilon:.4g}, "
                 f"delta {cal.select_request.delta:.3g} selects the keys ({rule}; "
                 f"{_bound_text(cal.select_request.max_groups_per_unit)}); only its key set is used, its counts "
                 f"are not published",
                 f"stage 2 {self.count.describe()} at epsilon {r2.epsilon:.4g}, delta {r2.delta:.3g} counts the "
                 f"selected keys as a public list ({bound}): the released counts are stage 2's",) + (
            (f"stage 1 chosen by select='auto': {cal.select_reason}",) if cal.select_reason else ())
        return Disclosure(
            mechanism=self.name, analysis=cal.analysis, epsilon=cal.epsilon, delta=cal.delta,
            delta_achieved=float(d1.delta_achieved) + float(r2.delta), neighbours=Neighbours.ADD_REMOVE,
            contribution=contribution, value_column=value_column,
            delta_parts={"select": float(d1.delta_achieved), "count": float(r2.delta)}, sigma=d1.sigma,
            noise_std=None, threshold=d1.threshold, margin=d1.margin, pre_threshold=d1.pre_threshold,
            comparison=d1.comparison, notes=notes)

    def charge(self, calibration: Any, disclosure: Disclosure) -> Any:
        """One charge of the whole (ε, δ), as the sequence of its two stages' events
        (:class:`~sparsedp.accounting.events.SequenceEvent`): stage 1's own event (its parameters are fixed
        before any output), stage 2 by its (ε₂, δ₂) guarantee only (its calibration depends on stage 1's key
        count d, and (ε₂, δ₂) holds at every d), so the ledger composes it as a fixed randomised-response pair
        (docs/proofs/ledger-composition.md §0)."""

        cal: TwoStageCalibration = calibration
        rel = disclosure.neighbours
        r1, r2 = cal.select_request, cal.count_request
        first = (event_of(cal.select_cal, rel) if isinstance(cal.select_cal, Calibration)
                 else ApproxDPEvent(epsilon=r1.epsilon, delta=r1.delta, neighbours=rel, mechanism=cal.select.name))
        second = ApproxDPEvent(epsilon=r2.epsilon, delta=r2.delta, neighbours=rel, mechanism=self.count.name)
        seq = SequenceEvent([first, second], epsilon=disclosure.epsilon, delta=disclosure.delta)
        return Charge.of_event(seq, self.name)

    # ---------------------------------------------------------------- data

    def histogram(self, engine: Engine, data: Any, privacy_unit: str | None, by: list[str], request: ReleaseRequest,
                  rng: SecureRandom, **extra: Any) -> TwoStageHistogram:
        """Both bounded histograms (every input check happens in the first, before anything is drawn)."""
        sel, r1 = self.stage_one(request)
        h1 = sel.histogram(engine, data, privacy_unit, by, r1, rng)
        assert privacy_unit is not None  # no row units: refused by validate() (and stage 1's mechanism needs one)
        h2 = engine.histogram(data, privacy_unit, by, self.count_bound, rng, 1)
        return TwoStageHistogram(select=h1, count=h2, by=tuple(by), stats=engine.stats(h1))

    def prepare(self, engine: Engine, hist: Any, request: ReleaseRequest) -> TwoStageHistogram:
        """Stage 1's own preparation, and the refusal (before the charge) of an engine that does not count the
        units (stage 2's embedding needs n)."""
        h: TwoStageHistogram = hist
        if getattr(engine.stats(h.count), "units_in", None) is None:
            engine.release_resources(h.select)  # the pipeline releases what it holds; these two are ours
            engine.release_resources(h.count)
            raise InvalidParameterError(f"engine {engine.name!r} does not count the privacy units, which stage 2 "
                                        f"(a public-key count) needs; use an embedded engine (polars, duckdb, "
                                        f"pandas, arrow)")
        sel, r1 = self.stage_one(request)
        return dataclasses.replace(h, select=sel.prepare(engine, h.select, r1))

    def select_columns(self, hist: TwoStageHistogram) -> list[str]:
        """The key columns stage 1 selects (every ``by`` column; a mixed key set selects its private ones)."""
        return list(hist.by)

    def count_list(self, selected: Any, hist: TwoStageHistogram) -> Any:
        """Stage 2's key list (Arrow, the ``by`` columns) from stage 1's selected keys: those keys themselves
        (a mixed key set: their product with the public values, :mod:`.mixed_keys`)."""
        return selected

    def run(self, engine: Engine, hist: Any, calibration: Any, disclosure: Disclosure, rng: SecureRandom,
            request: ReleaseRequest) -> Released:
        import numpy as np
        import pyarrow as pa

        h: TwoStageHistogram = hist
        cal: TwoStageCalibration = calibration
        by, sel_by = list(h.by), self.select_columns(h)
        sel = cal.select
        d1 = sel.disclosure(cal.select_request, cal.select_cal, _SELECT_VALUE)
        rel1 = sel.run(engine, h.select, cal.select_cal, d1, rng, cal.select_request)
        table1 = rel1.rows if rel1.in_process else engine.to_arrow(rel1.rows, sel_by, _SELECT_VALUE)
        selected = self.count_list(table1.select(sel_by), h)  # stage 1's key set only: its counts go no further
        if selected.num_rows == 0:
            out = selected.append_column(disclosure.value_column, pa.array(np.empty(0, np.float64)))
            note = "stage 1 selected no key: stage 2 released nothing (no noise drawn)"
            return Released(rows=out, disclosure=disclosure.with_notes(note), in_process=True)
        keys = public_keys(selected, by)
        r2 = dataclasses.replace(cal.count_request, keys=keys)
        m2, cal2, reason2, _ = cal.count.resolve(r2)
        pc = align(engine, h.count, keys)
        d2 = m2.disclosure(r2, cal2, disclosure.value_column)
        rel2 = m2.run(engine, pc, cal2, d2, rng, r2)
        d2 = rel2.disclosure
        notes = (f"stage 2: {m2.name} ({cal2.analysis}) on the {keys.d} selected keys: per-key noise std "
                 f"{cal2.noise_std:.4g}, delta {cal2.delta_achieved:.3g}"
                 + (f" ({reason2})" if cal.count.name == "auto" else ""),) + tuple(
            n for n in d2.notes if not n.startswith("public key list of"))  # K is a DP output, not a fixed list
        notes += (f"delta achieved = stage 1's {d1.delta_achieved:.4g} (noise sampled) + stage 2's target "
                  f"{cal.count_request.delta:.4g}, which bounds stage 2's delta at every number of selected keys "
                  f"(here {cal2.delta_achieved:.4g} at d = {keys.d}; d is chosen by stage 1, so the guarantee "
                  f"takes the bound over d)",)
        return Released(rows=rel2.rows, disclosure=dataclasses.replace(
            disclosure, noise_std=float(cal2.noise_std)).with_notes(*notes), in_process=True,
            row_laws=self._stage_two_laws(m2.row_laws(r2, cal2, disclosure.value_column)))

    def _stage_two_laws(self, laws: RowLaws | None) -> RowLaws | None:
        """Stage 2's exact per-row laws: a selected key's count is its count under ``count_bound`` plus stage 2's
        noise, drawn after and independently of stage 1's selection, so an interval covers it at its stated level
        also given the key was selected. Not a release rule: a key's selection is stage 1's, at its own bound."""
        if laws is None:
            return None
        bound = "no bound" if self.count_bound is None else f"at most {self.count_bound} keys per unit"
        return dataclasses.replace(laws, every_key=False, release=None, independent_of_release=True,
                                   covers=f"the true count of each selected key under stage 2's contribution "
                                          f"bound ({bound})")
