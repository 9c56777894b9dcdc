"""What every registered mechanism is: typed options, a calibration (math only), and a run on engine primitives.

A mechanism is a frozen dataclass whose fields are its options (``sd.TopKCSH(k=1000, debias=True)``,
``sd.GSHM(pre_threshold=5)``), so an option can never reach a mechanism that ignores it. The release pipeline
(:mod:`sparsedp.pipeline`) calls, in this order and never by name:

1. :meth:`Mechanism.check` — is the request (ε, δ, contribution bound) valid for this mechanism? (no data)
2. :meth:`Mechanism.calibrate` — σ, threshold, the δ of the noise actually sampled (no data, no noise);
3. :meth:`Mechanism.disclosure` — the public description of the release (what the report shows);
4. the engine's bounded histogram with :meth:`Mechanism.engine_bound` keys per unit
   and :meth:`Mechanism.count_floor`, the ledger charge of :meth:`Disclosure.guarantee`;
5. :meth:`Mechanism.run` — the private release on engine primitives (:class:`~sparsedp.core.engine.Engine`),
   returning the released table and the public notes made while releasing (e.g. de-biased top-k's ``t̃``).

Adding a mechanism = its accountant (``sparsedp.accounting``, with its theorem cited) + a subclass registered
with :func:`sparsedp.mechanisms.registry.register` + its tests; ``release``, ``plan``, ``auto``, the CLI and the
audit read the registry.
"""

from __future__ import annotations

import dataclasses
import enum
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, ContextManager, Mapping, Protocol, Sequence

from .. import _validate as v
from ..accounting.calibration import Neighbours
from ..accounting.charge import Charge
from ..accounting.intervals import RowLaws
from ..aggregates import Sum
from ..core.engine import Capability
from ..errors import InfeasibleError, InvalidParameterError, InvalidTypeError
from ..noise.source import SecureRandom
from .catalog import auto_candidates, classes, instantiate, pure_names

if TYPE_CHECKING:
    from ..core.engine import Engine
    from .public_keys import PublicKeys

__all__ = ["Mechanism", "ReleaseRequest", "Disclosure", "Released", "Planned", "Read", "AutoRole", "Resolved",
           "StageContext", "UserRequest", "PlanQuery"]


#: what :meth:`Mechanism.resolve` returns: the mechanism that runs, its calibration, why it was chosen, and the
#: candidates ``auto`` tried (empty when the mechanism was named)
Resolved = tuple["Mechanism", Any, str, tuple[dict[str, Any], ...]]


class StageContext(Protocol):
    """What :meth:`Mechanism.read` and :meth:`Mechanism.draw` run on (the pipeline's
    :class:`sparsedp.execution.ReleaseContext`): the engine, the input, the privacy unit and key columns, the
    release's random source, the stage display (``stage(label, timing)``), ``track`` (engine results the
    pipeline releases at the end) and ``reading`` (the stages inside read other rows than the input's)."""

    engine: Engine
    data: Any
    unit: str | None
    by: Sequence[str]
    source: SecureRandom

    def stage(self, label: str | None, timing: str) -> ContextManager[None]: ...

    def track(self, hist: Any) -> Any: ...

    def reading(self, data: Any) -> ContextManager[None]: ...


class UserRequest(Protocol):
    """What :meth:`Mechanism.validate` reads of the user's request (the pipeline's
    :class:`sparsedp.request.Request`): the privacy unit column, the public key list, the SUM/MEAN aggregates, the
    declared bound (``max_groups_per_unit``) or its automatic choice, and δ."""

    @property
    def unit(self) -> str | None: ...
    @property
    def keys(self) -> Any: ...
    @property
    def sums(self) -> tuple[Any, ...]: ...
    @property
    def bound(self) -> int | None: ...
    @property
    def auto_bound(self) -> Any: ...
    @property
    def delta(self) -> float: ...


class PlanQuery(Protocol):
    """What :meth:`Mechanism.plan_rows` reads of a ``plan`` query (the pipeline's
    :class:`sparsedp.request.PlanRequest`), and ``request(**changes)``: the data-independent
    :class:`ReleaseRequest` of the query."""

    @property
    def epsilon(self) -> float: ...
    @property
    def delta(self) -> float: ...
    @property
    def l0(self) -> int | None: ...
    @property
    def top_k(self) -> int | None: ...
    @property
    def max_units(self) -> int | None: ...
    @property
    def beta(self) -> Any: ...
    @property
    def sums(self) -> tuple[Any, ...]: ...
    @property
    def insecure_float(self) -> bool: ...
    @property
    def keys(self) -> Any: ...
    @property
    def d(self) -> int | None: ...
    @property
    def group(self) -> str | None: ...

    def request(self, **changes: Any) -> ReleaseRequest: ...


class AutoRole(enum.Enum):
    """The requests a mechanism is offered for by ``mechanism="auto"`` besides its count candidates
    (``auto_candidate``): ``PUBLIC_KEYS`` (a public key list, ``keys=…``), ``PURE`` (δ = 0) and ``DISCOVERY``
    (``sd.Auto(discover=True)``). :meth:`Mechanism.auto_offer` makes the candidate for a request."""

    PUBLIC_KEYS = "public-keys"
    PURE = "pure"
    DISCOVERY = "discovery"


@dataclass(frozen=True)
class ReleaseRequest:
    """The data-independent part of a release request: the target guarantee and the contribution bound.

    ``max_groups_per_unit``: the l0 bound the engine enforces (None: the mechanism's own model, e.g. top-k);
    ``insecure_float``: float noise was asked for by name (research reproduction only);
    ``aggregates``: the SUM/MEAN aggregates released next to the count (:class:`~sparsedp.aggregates.Sum` /
    :class:`~sparsedp.aggregates.Mean`, in the user's order; empty for a count-only release). Only mechanisms
    with ``supports_aggregates`` accept them (the joint accountant, :mod:`sparsedp.accounting.aggregates`).
    ``keys``: the public key list of ``release(..., keys=…)`` (:class:`~sparsedp.mechanisms.public_keys.PublicKeys`);
    only mechanisms with ``public_keys`` accept it, and they need it.
    ``column_shape``: the SUM/MEAN columns' noise covariance shape (``release(..., column_shape=…)``, a J × J
    tuple of tuples in value units², :mod:`sparsedp.accounting.column_shape`); ``None``: independent columns.
    """

    epsilon: float
    delta: float
    max_groups_per_unit: int | None = None
    insecure_float: bool = False
    aggregates: tuple[Sum, ...] = ()
    keys: PublicKeys | None = None
    column_shape: Any = None  # a J × J matrix as the user gave it (fitted by accounting.column_shape)
    #: ``release(..., interval=…)``'s level (None: no intervals); a mechanism whose interval needs values it does
    #: not publish (VARIANCE/STD's noisy sums) adds those interval columns in its run
    interval: float | None = None


@dataclass(frozen=True)
class Disclosure:
    """The public description of a release, known before any data is read (plus notes added by the run).

    Everything here may be published with the table: it depends on the request and the calibration only
    (or, for ``notes`` added by :meth:`Mechanism.run`, on released values such as de-biased top-k's ``t̃``).
    """

    mechanism: str
    analysis: str
    epsilon: float
    delta: float
    delta_achieved: float
    neighbours: Neighbours
    contribution: str
    value_column: str
    delta_parts: Mapping[str, float] = field(default_factory=dict)
    sigma: float | None = None
    noise_std: float | None = None
    threshold: float | None = None
    margin: float | None = None
    pre_threshold: int | None = None
    comparison: str = ">="
    notes: tuple[str, ...] = ()
    #: zCDP ρ of the whole release when its guarantee is a zCDP statement (ledger composition), else None
    rho: float | None = None
    #: per released aggregate column (SUM/MEAN output name): its expected error std in value units
    #: (:func:`sparsedp.mechanisms.aggregate_noise.expected_errors`; MEAN: worst-case RMSE at the threshold)
    column_errors: Mapping[str, float] = field(default_factory=dict)

    def with_notes(self, *notes: str) -> "Disclosure":
        return dataclasses.replace(self, notes=self.notes + tuple(notes))


@dataclass(frozen=True)
class Released:
    """What :meth:`Mechanism.run` returns: the released rows (an engine release handle from
    :meth:`Engine.noise_keys`, or a ``pyarrow.Table`` for mechanisms that release in this process) and the
    disclosure with the run's public notes. ``query`` is a public query object for releases that are not a
    table of keys (the compact histogram)."""

    rows: Any
    disclosure: Disclosure
    in_process: bool = False
    query: Any = None
    #: the plan the rows were released under when the run re-planned (the automatic bound chooses l0 from the
    #: data, then resolves the inner mechanism again); ``None``: the plan the pipeline made
    planned: Any = None
    #: extra public fields of the :class:`~sparsedp.report.Report` (e.g. ``auto_bound``) and curator-only fields
    #: of the :class:`~sparsedp.report.Curator` set by the run
    report_fields: Mapping[str, Any] = field(default_factory=dict)
    curator_fields: Mapping[str, Any] = field(default_factory=dict)
    #: the rows' public error laws when only the run knows them (two-stage: stage 2's calibration depends on how
    #: many keys stage 1 selected); ``None``: :meth:`Mechanism.row_laws` of the plan's calibration
    row_laws: Any = None


@dataclass(frozen=True)
class Planned:
    """Stage 1 of the pipeline for one request (no data read, no noise drawn): the concrete mechanism the
    request resolved to (``auto`` picks one), its calibration, why it was chosen and the other candidates, the
    public disclosure, the ledger charge, and the released value column's name."""

    mechanism: "Mechanism"
    request: ReleaseRequest
    calibration: Any
    reason: str
    candidates: tuple[dict[str, Any], ...]
    disclosure: Disclosure
    charge: Any
    value_column: str
    #: what a wrapping mechanism keeps between its stages (e.g. the automatic bound's split of ε); else None
    detail: Any = None


@dataclass(frozen=True, eq=False)
class Read:
    """Stage 3 (the engine's pass over the data, before the ledger charge): ``hist`` is the engine's result
    (its resources are released by the pipeline), ``prepared`` what :meth:`Mechanism.run` gets, ``units`` the
    number of privacy units in the input (curator only)."""

    hist: Any
    prepared: Any
    units: int | None


class Mechanism(ABC):
    """Base class of the registered mechanisms (subclasses are frozen dataclasses; see the module docstring)."""

    #: registry name (``mechanism="gshm"``)
    name: ClassVar[str] = ""
    #: considered by ``mechanism="auto"`` when the request declares ``max_groups_per_unit``
    auto_candidate: ClassVar[bool] = False
    #: the relation the guarantee is stated for
    neighbours: ClassVar[Neighbours] = Neighbours.ADD_REMOVE
    #: releases SUM/MEAN columns next to the count (``ReleaseRequest.aggregates``); the others are refused
    #: by the pipeline before any data is read
    supports_aggregates: ClassVar[bool] = False
    #: accepts ``privacy_unit=None`` (every row is its own privacy unit; see :meth:`histogram`)
    row_units: ClassVar[bool] = False
    #: releases every key of a public list (``release(..., keys=…)``, no threshold); the others are refused
    #: with ``keys=`` and these without it
    public_keys: ClassVar[bool] = False
    #: accepts δ = 0 (a pure ε-DP mechanism); the others refuse it naming these (:meth:`check_delta`)
    pure_dp: ClassVar[bool] = False
    #: takes ``max_groups_per_unit`` (l0) as its contribution bound; ``top_k`` is then refused as a second one
    bounded: ClassVar[bool] = False
    #: the :class:`~sparsedp.auto_bound.AutoBound` objectives that may choose this mechanism's l0 from the data
    #: (``max_groups_per_unit="auto"``); empty: the automatic bound is refused
    auto_bound_objectives: ClassVar[tuple[str, ...]] = ()
    #: a mechanism ``auto`` may resolve to on a public key list (``release(..., keys=…)``) although it is not one
    resolves_public_keys: ClassVar[bool] = False
    #: the requests ``auto`` offers this class for besides its count candidates (:class:`AutoRole`; None: none),
    #: and its place among the classes of that role (lower first; ties: registration order)
    auto_role: ClassVar[AutoRole | None] = None
    auto_order: ClassVar[int] = 0
    #: options a release needs although their field has a default (the CLI asks for them by flag)
    needs_options: ClassVar[tuple[str, ...]] = ()
    #: how :meth:`plan` rows of this class are listed: 0 ranked with the other count mechanisms (by margin),
    #: larger numbers after them, in this order (key discovery, shifted top-k, pure DP)
    plan_group: ClassVar[int] = 0

    def options(self) -> dict[str, Any]:
        """The mechanism's options (its dataclass fields) and their values."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}  # type: ignore[arg-type]

    def describe(self) -> str:
        """``name(option=value, …)`` for reports."""
        opts = ", ".join(f"{k}={v!r}" for k, v in self.options().items())
        return f"{self.name}({opts})" if opts else self.name

    def check_delta(self, request: ReleaseRequest) -> None:
        """0 < δ < 1; δ = 0 asked of an (ε, δ) mechanism is refused naming the registered pure-DP ones."""
        if request.delta == 0 and not self.pure_dp:
            listed = ", ".join(repr(n) for n, keys in pure_names() if not keys)
            with_keys = ", ".join(repr(n) for n, keys in pure_names() if keys)
            raise InvalidParameterError(
                f"⟨delta=0⟩ (pure DP) is not offered by ⟨mechanism={self.name!r}⟩, an (epsilon, delta) mechanism",
                param="delta", fix=f"give ⟨delta⟩ > 0 (e.g. 1e-6), or choose a pure-DP ⟨mechanism⟩: {listed} (one "
                f"key per unit; see ⟨max_units⟩)" + (f", or {with_keys} with a public key list (⟨keys⟩)"
                                                    if with_keys else ""))
        v.delta(request.delta)

    # ------------------------------------------------------------ the user's request (no data read)

    @classmethod
    def with_top_k(cls, spec: "Mechanism | None", k: int, bound_given: bool) -> "Mechanism":
        """The mechanism for ``release(..., top_k=k, mechanism=spec)`` (``spec``: this class's object, or
        ``None`` for its registered name). Default: refused (``top_k`` is an option of a top-k mechanism only)."""
        if bound_given and cls.bounded:
            raise InvalidParameterError(
                "pass either ⟨max_groups_per_unit⟩ (bound each unit to l0 keys: gshm, laplace) or ⟨top_k⟩ (release "
                "the top-k keys: topk-csh), not both", param="top_k")
        raise InvalidParameterError(f"⟨top_k⟩ selects ⟨mechanism='topk-csh'⟩; it is not an option of "
                                    f"⟨mechanism={cls.name!r}⟩", param="top_k")

    @classmethod
    def default(cls) -> "Mechanism":
        """The object for ``mechanism="<name>"`` with no options (refused when an option has no default)."""
        return instantiate(cls, {})

    @classmethod
    def auto_offer(cls, request: ReleaseRequest, group: str | None) -> "Mechanism | None":
        """The candidate ``auto`` calibrates for ``request`` in this class's ``auto_role`` (``group``: ``sd.Auto``'s
        grouping column of a public key list), or None when this class is not offered for it. Default: the
        object with default options."""
        return cls()

    @classmethod
    def auto_refusal(cls, request: ReleaseRequest) -> str | None:
        """Why ``auto`` does not try this class's candidate for ``request`` (listed with the candidates), or
        None (default: it is tried)."""
        return None

    def validate(self, request: UserRequest) -> None:
        """Refuse a user request (:class:`sparsedp.request.Request`) this mechanism cannot serve, before any
        data is read, from the class's declared capabilities (``row_units``, ``public_keys``,
        ``supports_aggregates``, ``auto_bound_objectives``). Subclasses add their own rules."""
        if request.unit is None and not self.row_units:
            raise InvalidTypeError(f"privacy_unit must be a column name (str); privacy_unit=None (every row is its "
                                   f"own unit) is accepted by mechanism={_names_with('row_units', ' or ')} only, not "
                                   f"{self.describe()}")
        if request.keys is not None and not (self.public_keys or self.resolves_public_keys):
            raise InvalidParameterError(
                f"keys=… releases every listed key without a threshold; mechanism={self.describe()} selects keys "
                f"by a threshold. Use mechanism='auto', {_names_with('public_keys', ' or ')}, or drop keys= "
                f"(CLI: --keys)")
        if request.keys is None and self.public_keys:
            raise InvalidParameterError(f"mechanism={self.describe()} releases counts for a public key list: pass "
                                        f"keys=[…] (CLI: --keys FILE; the keys to release, fixed without looking "
                                        f"at the data)")
        if request.sums and not self.supports_aggregates:
            raise InvalidParameterError(
                f"mechanism={self.describe()} releases counts only; SUM/MEAN aggregates are released by the joint "
                f"GSHM: mechanism='gshm' or 'auto' with max_groups_per_unit=…")

    #: the request's other way out when the engine lacks what :meth:`needs` asks (appended to the refusal)
    lacks_hint: ClassVar[str] = ""

    def needs(self, request: UserRequest) -> frozenset[Capability]:
        """The engine capabilities (beyond the core methods) this release needs. The pipeline refuses an engine
        that does not declare one of them when it opens it, before the ledger is touched, with one message
        (:func:`sparsedp.core.engine.lacks_error`). Default: none."""
        return frozenset()

    def check_engine(self, engine: Engine) -> None:
        """Refuse an engine that lacks a primitive this mechanism needs (before the ledger is touched).
        Default: every engine serves it."""

    @classmethod
    def plan_rows(cls, query: PlanQuery) -> list[tuple["Mechanism", Any, int]]:
        """``sd.plan``'s rows of this class's family (``query``: :class:`sparsedp.request.PlanRequest`), as
        ``(mechanism, calibration, plan_group)``. ``plan`` calls each distinct implementation once, so a family
        sharing one (a base class's) lists itself once. This default is the count mechanisms ``auto`` chooses
        among, at the declared ``max_groups_per_unit`` (infeasible ones left out)."""
        if query.d is not None or query.delta == 0 or query.l0 is None:
            return []
        request, rows = query.request(), []
        for c in auto_candidates():
            if query.sums and not c.supports_aggregates:
                continue
            try:
                rows.append((c(), c().calibrate(request), c.plan_group))
            except InfeasibleError:
                continue
        return rows

    # ------------------------------------------------------------ the stages the pipeline runs

    def plan_release(self, request: ReleaseRequest, count_name: str) -> Planned:
        """Stage 1: resolve (``auto`` chooses), calibrate, describe, and price the release (no data)."""
        mech, cal, reason, candidates = self.resolve(request)
        value_column = mech.value_column(count_name)
        disclosure = mech.disclosure(request, cal, value_column)
        return Planned(mechanism=mech, request=request, calibration=cal, reason=reason, candidates=candidates,
                       disclosure=disclosure, charge=mech.charge(cal, disclosure), value_column=value_column)

    def read(self, ctx: StageContext, planned: Planned) -> Read:
        """Stage 3 (before the charge): the resolved mechanism's bounded histogram on ``ctx.engine``
        (:meth:`histogram`) and :meth:`prepare`'s data-dependent checks. ``ctx``:
        :class:`sparsedp.execution.ReleaseContext`."""
        mech, request = planned.mechanism, planned.request
        with ctx.stage("bounding contributions and counting", "bound+count"):
            extra = {"aggregates": request.aggregates} if request.aggregates else {}
            hist = ctx.track(mech.histogram(ctx.engine, ctx.data, ctx.unit, list(ctx.by), request, ctx.source,
                                            **extra))
            prepared = mech.prepare(ctx.engine, hist, request)
        return Read(hist=hist, prepared=prepared, units=ctx.engine.stats(hist).units_in)

    def draw(self, ctx: StageContext, planned: Planned, read: Read) -> Released:
        """Stage 5 (after the charge): the resolved mechanism's private :meth:`run`."""
        mech = planned.mechanism
        with ctx.stage(f"adding noise ({mech.name})", "noise"):
            return mech.run(ctx.engine, read.prepared, planned.calibration, planned.disclosure, ctx.source,
                            planned.request)

    # ------------------------------------------------------------ the mechanism's math and run

    def check(self, request: ReleaseRequest) -> None:
        """Refuse a request this mechanism cannot serve (no data read). Default: 0 < δ < 1 and
        ``max_groups_per_unit``."""
        self.check_delta(request)
        if request.max_groups_per_unit is None:
            raise InvalidParameterError(f"⟨mechanism={self.name!r}⟩ needs ⟨max_groups_per_unit=…⟩ (the number of "
                                        f"keys kept per unit, e.g. 10)", param="max_groups_per_unit")

    def engine_bound(self, request: ReleaseRequest) -> int | None:
        """Keys per unit the engine keeps (None: no ℓ0 bound, de-duplication only)."""
        return request.max_groups_per_unit

    def histogram(self, engine: Engine, data: Any, privacy_unit: str | None, by: list[str], request: ReleaseRequest,
                  rng: SecureRandom, **extra: Any) -> Any:
        """Stage 3 of the pipeline: what :meth:`run` releases. Default: the engine's bounded histogram
        (:meth:`~sparsedp.core.engine.Engine.histogram` with :meth:`engine_bound` and :meth:`count_floor`).
        Mechanisms with ``row_units`` override it for ``privacy_unit=None`` (e.g. Misra–Gries sketches built
        from the rows in O(k) memory); the result must carry ``.stats`` (curator statistics)."""
        assert privacy_unit is not None  # refused by validate() unless the class has row_units (and overrides this)
        return engine.histogram(data, privacy_unit, by, self.engine_bound(request), rng, self.count_floor(),
                                **extra)
    def prepare(self, engine: Engine, hist: Any, request: ReleaseRequest) -> Any:
        """What :meth:`run` gets as ``hist``, computed from the engine's histogram after its input checks and
        before the ledger charge (so a data-dependent refusal charges nothing). Default: ``hist`` itself."""
        return hist

    def count_floor(self) -> int:
        """Keys whose bounded count is below this never reach the mechanism (the pre-threshold)."""
        return 1

    def resolve(self, request: ReleaseRequest) -> Resolved:
        """``(mechanism, calibration, reason, candidates)``: itself, calibrated, "requested explicitly".
        ``auto`` overrides it to choose among the registered candidates."""
        self.check(request)
        return self, self.calibrate(request), "requested explicitly", ()

    @abstractmethod
    def calibrate(self, request: ReleaseRequest) -> Any:
        """The calibration at the request's (ε, δ) (accounting only: no data, no noise)."""

    @abstractmethod
    def disclosure(self, request: ReleaseRequest, calibration: Any, value_column: str) -> Disclosure:
        """The public description of the release (data-independent)."""

    @abstractmethod
    def run(self, engine: Engine, hist: Any, calibration: Any, disclosure: Disclosure, rng: SecureRandom,
            request: ReleaseRequest) -> Released:
        """The private release of the bounded histogram ``hist`` on ``engine``'s primitives, drawing every
        secret and noise word from ``rng`` (the release's secure source)."""

    def row_laws(self, request: ReleaseRequest, calibration: Any, value_column: str) -> RowLaws | None:
        """The public error laws of the released rows (:class:`~sparsedp.accounting.intervals.RowLaws`: per output
        column the exact law of ``value − truth``, and the release rule of a key given its count), which
        ``release(..., interval=…)`` turns into per-row intervals (:mod:`sparsedp.mechanisms.intervals`).
        Default ``None``: this mechanism's values have no exact per-row law (the report says so)."""
        return None

    def charge(self, calibration: Any, disclosure: Disclosure) -> Any:
        """The ledger charge of a release (:class:`~sparsedp.accounting.charge.Charge`): by default its (ε, δ) under basic
        composition for the disclosed relation; mechanisms with a privacy profile override it so the ledger can
        compose them tightly."""
        return Charge(epsilon=disclosure.epsilon, delta=disclosure.delta, neighbours=disclosure.neighbours,
                      mechanism=self.name)

    def value_column(self, default: str) -> str:
        """Name of the released value column (the count aggregate's name unless the mechanism releases
        something else, e.g. shifted top-k's ``count − cut-off``)."""
        return default


def _names_with(capability: str, last: str = ", ") -> str:
    """The registered names of the mechanisms with ``capability`` (quoted, in registration order)."""
    names = [repr(c.name) for c in classes() if getattr(c, capability)]
    return ", ".join(names[:-1]) + last + names[-1] if len(names) > 1 else "".join(names)
