"""The automatic contribution bound as a mechanism: ``max_groups_per_unit="auto"`` wraps the requested one.

``release(..., max_groups_per_unit=sd.AutoBound(...), mechanism=m)`` runs :class:`AutoBounded` ``(inner=m)``
through the same pipeline stages as any mechanism:

1. **plan** — ε splits into ε₁ = share·ε (the choice) and ε₂ (the release, :func:`~sparsedp.accounting.split.split_epsilon`);
   the inner mechanism is resolved and calibrated at ``(ε₂, δ)`` and the largest candidate (feasibility before any
   data is read); with ``objective="keys"`` every candidate's public table too (:func:`sparsedp.auto_keys.keys_plan`).
   The charge is the whole ``(ε, δ)``, once (basic composition; ``docs/proofs/auto-bound.md``);
2. **read** (before the charge) — the engine's per-unit key counts for the candidates (no noise);
3. **draw** (after the charge) — Report Noisy Max picks l0 (:func:`~sparsedp.auto_bound.select_bound` or
   :func:`~sparsedp.auto_keys.select_by_keys`), the inner mechanism is resolved again at that l0, and its own read
   and draw run. The report states the choice (``report.auto_bound``); the curator gets the per-candidate counts.

Secrets drawn from the release's source, in order: the keys objective's ranking secret, the selection's noise,
then the inner mechanism's (bounding secret, ``K_noise`` …).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .accounting.charge import Charge
from .accounting.split import split_epsilon
from .auto_bound import AutoBound, select_bound
from .core.engine import Capability
from .errors import InvalidParameterError
from .mechanisms.base import Mechanism, Planned, Read, Released, ReleaseRequest
from .core.lazy import lazy_module

if TYPE_CHECKING:
    from . import auto_keys as _auto_keys
else:  # the bound chosen for the released keys (objective="keys"): on first use (issue 31)
    _auto_keys = lazy_module("sparsedp.auto_keys")

__all__ = ["AutoBounded"]


@dataclass(frozen=True)
class _Split:
    """What the plan keeps for the draw: ε₁, ε₂, the inner request at ε₂ and the keys objective's public plan."""

    epsilon_selection: float
    epsilon_release: float
    request: ReleaseRequest
    keys_plan: Any


@dataclass(frozen=True)
class _Counted:
    """What the read keeps for the draw: the candidates' counts and the rows the engine read for them
    (:meth:`~sparsedp.core.engine.Engine.read_unit_key_counts`: the input itself, or its rows kept)."""

    counts: Any
    rows: Any

    def rows_for(self, mech: Mechanism, data: Any) -> Any:
        """What the inner mechanism ``mech`` reads: the rows kept when its read is the engine's histogram alone
        (:meth:`Mechanism.histogram` not overridden), else the input ``data`` again (the rows kept are freed
        first)."""
        if self.rows is data or type(mech).histogram is Mechanism.histogram:
            return self.rows
        self.rows.drop()
        return data


class Wrapper(Mechanism):
    """What a mechanism wrapping ``inner`` (the automatic bound, the other row) answers outside its own
    ``plan_release``/``read``/``draw`` stages: the inner mechanism's calibration and disclosure."""

    inner: Mechanism

    def calibrate(self, request: ReleaseRequest) -> Any:
        return self.plan_release(request, "count").calibration

    def disclosure(self, request: ReleaseRequest, calibration: Any, value_column: str) -> Any:
        return self.inner.disclosure(request, calibration, value_column)

    def run(self, engine: Any, hist: Any, calibration: Any, disclosure: Any, rng: Any,
            request: ReleaseRequest) -> Released:  # pragma: no cover - the wrapper's draw runs the inner one
        raise NotImplementedError(f"{type(self).__name__} runs through plan_release/read/draw")


@dataclass(frozen=True)
class AutoBounded(Wrapper):
    """``inner`` with its ``max_groups_per_unit`` chosen privately from the data by ``bound`` (module docstring).
    Not registered: :func:`sparsedp.request.build_request` builds it from ``max_groups_per_unit="auto"`` or an
    :class:`~sparsedp.auto_bound.AutoBound`."""

    inner: Mechanism
    bound: AutoBound
    name = "auto-bound"

    def validate(self, request: Any) -> None:
        """Refused with ``top_k`` or ``keys``, and for an inner mechanism whose class does not list the
        objective in ``auto_bound_objectives``; then the inner mechanism's own rules."""
        if request.top_k is not None:
            raise InvalidParameterError("pass either max_groups_per_unit='auto' (choose l0 from the data: gshm, "
                                        "laplace) or top_k (release the top-k keys: topk-csh), not both")
        if request.keys is not None:
            raise InvalidParameterError("max_groups_per_unit='auto' chooses the bound of a thresholded release; "
                                        "with keys=… give max_groups_per_unit as a number (or leave it out)")
        if self.bound.objective not in self.inner.auto_bound_objectives:
            raise InvalidParameterError(f"max_groups_per_unit='auto' chooses l0 for mechanism 'auto', 'gshm' or "
                                        f"'laplace', not {self.inner.describe()}")
        self.inner.validate(request)

    def needs(self, request: Any) -> frozenset[Capability]:
        """The keys per unit of every candidate; the keys objective ranks the (unit, key) pairs in this process."""
        own = {Capability.UNIT_KEY_COUNTS} | ({Capability.PAIRS} if self.bound.objective == "keys" else set())
        return self.inner.needs(request) | own

    def check_engine(self, engine: Any) -> None:
        self.inner.check_engine(engine)

    def plan_release(self, request: ReleaseRequest, count_name: str) -> Planned:
        eps_sel, eps_rel = split_epsilon(request.epsilon, self.bound.share)
        inner_request = dataclasses.replace(request, epsilon=eps_rel,
                                            max_groups_per_unit=self.bound.candidates[-1])
        planned = self.inner.plan_release(inner_request, count_name)
        plan = None
        if self.bound.objective == "keys":  # public: every candidate calibrated (auto_keys.py)
            plan = _auto_keys.keys_plan(self.inner,
                                        lambda c: dataclasses.replace(inner_request, max_groups_per_unit=c),
                                        self.bound.candidates, eps_sel, eps_rel)
        # basic composition: ε₁ (pure) + the release's (ε₂, δ) = the user's (ε, δ), charged once
        charge = Charge(epsilon=request.epsilon, delta=request.delta, neighbours=planned.disclosure.neighbours,
                        mechanism=f"{planned.mechanism.name}+auto-bound")
        return dataclasses.replace(planned, charge=charge, detail=_Split(eps_sel, eps_rel, inner_request, plan))

    def read(self, ctx: Any, planned: Planned) -> Read:
        """Keys per unit for every candidate (input checked here, no noise)."""
        split: _Split = planned.detail
        cands = self.bound.candidates
        with ctx.stage("choosing max_groups_per_unit", "choose l0"):
            aggregates = split.request.aggregates
            if split.keys_plan is not None:
                counts, rows = _auto_keys.read_candidate_counts(ctx.engine, ctx.data, ctx.unit, list(ctx.by), cands,
                                                                ctx.source, split.keys_plan.statistic_weights,
                                                                aggregates)
            else:
                counts, rows = ctx.engine.read_unit_key_counts(ctx.data, ctx.unit, list(ctx.by), cands, aggregates)
        return Read(hist=None, prepared=_Counted(counts, rows), units=None)

    def draw(self, ctx: Any, planned: Planned, read: Read) -> Released:
        """The private choice of l0, then the inner mechanism at that bound (its read and its draw)."""
        split: _Split = planned.detail
        counted: _Counted = read.prepared
        with ctx.stage(None, "choose l0"):
            if split.keys_plan is not None:
                choice, counts = _auto_keys.select_by_keys(counted.counts, split.keys_plan, self.bound, ctx.source)
            else:
                choice = select_bound(counted.counts, self.bound, split.epsilon_selection, split.epsilon_release,
                                      ctx.source)
                counts = counted.counts
            request = dataclasses.replace(split.request, max_groups_per_unit=choice.bound)
            mech, cal, reason, candidates = self.inner.resolve(request)
            disclosure = mech.disclosure(request, cal, planned.value_column)
        inner = Planned(mechanism=mech, request=request, calibration=cal, reason=reason, candidates=candidates,
                        disclosure=disclosure, charge=planned.charge, value_column=planned.value_column)
        with ctx.reading(counted.rows_for(mech, ctx.data)):
            inner_read = self.inner.read(ctx, inner)
        ctx.warn_units(inner_read.units)
        released = self.inner.draw(ctx, inner, inner_read)
        shown = dataclasses.replace(released.disclosure, epsilon=planned.charge.epsilon).with_notes(choice.describe())
        return dataclasses.replace(released, disclosure=shown, planned=inner,
                                   report_fields={"auto_bound": choice.to_dict()},
                                   curator_fields={"auto_bound": counts})

    # the wrapper is planned and run through the stages above; these are the inner mechanism's
    calibrate = Wrapper.calibrate
    disclosure = Wrapper.disclosure
    run = Wrapper.run
