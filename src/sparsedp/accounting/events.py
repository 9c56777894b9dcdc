"""Typed privacy events: what one release costs, as a value the ledger can compose.

One small frozen dataclass per mechanism family (in the manner of the ``DpEvent`` classes of Google's
dp_accounting library, written afresh here): the fields its accountant needs, the theorem in its docstring.
Every event

* states the (ε, δ) the release is **charged** (``epsilon``, ``delta``: its calibrated target, what basic
  composition adds) and the **neighbouring relation** it holds for (``neighbours``);
* knows its **privacy profile** ``delta_at(ε)`` (vectorised over ε): the δ(ε) of every ordered neighbouring
  pair, from the mechanism's own (tight where available) accountant; at the charged ε it is ≤ the charged δ;
* builds its **privacy-loss distribution** ``pld()`` for composition: the pair whose hockey-stick curve is the
  lower convex hull of the profile, sampled on an ε grid, and of the charged (ε, δ)'s randomised-response
  curve (:func:`.pld.hull_pair`; docs/proofs/ledger-composition.md) — so composing it is never looser, per
  release, than either its profile or its basic charge;
* has a **public description** ``describe()`` and a JSON form ``to_dict()`` / :func:`event_from_dict` (the
  parameters, never a pickled object), which is what the ledger stores so that a later process can
  recompute the composition.

:func:`event_of` is the one bridge from a :class:`~.calibration.Calibration` (``event_of(cal)``: the events sit
above the calibrations in the accounting layer, so a calibration does not build its own event);
:func:`event_from_profile` reads the privacy profiles stored by ledgers written before events existed.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, fields
from fractions import Fraction
from typing import TYPE_CHECKING, Any, ClassVar, Iterable, Mapping, Protocol, overload

import numpy as np
import numpy.typing as npt

from .. import _validate as v
from ..errors import InvalidParameterError, InvalidTypeError
from . import laws
from ._types import FloatArray, RealOrArray
from .calibration import Calibration, Neighbours
from ..core.lazy import imported, lazy_module
from .profiles import (ApproxDPProfile, CSHProfile, GaussianProfile, GSHMDiscreteProfile, GSHMProfile,
                       LaplaceDiscreteProfile, PrivacyProfile, PureProfile, RoundedCSHProfile, profile_of)

# the ledger's composition (privacy-loss distributions, conversions) and the events of the set-union, SUM/MEAN and
# quantile releases: on first use (issue 31; a default release builds a DiscreteGSHMEvent and composes nothing)
if TYPE_CHECKING:
    from . import aggregates as _aggregates, conversions as _conversions, pld as _pld, quantiles as _quantiles
    from . import set_union as _set_union
else:
    _aggregates, _conversions = lazy_module(f"{__package__}.aggregates"), lazy_module(f"{__package__}.conversions")
    _pld, _quantiles = lazy_module(f"{__package__}.pld"), lazy_module(f"{__package__}.quantiles")
    _set_union = lazy_module(f"{__package__}.set_union")

__all__ = ["PrivacyEvent", "GSHMEvent", "DiscreteGSHMEvent", "LaplaceThresholdEvent", "CSHEvent",
           "GaussianEvent", "SetUnionEvent", "AggregateGSHMEvent", "PureEvent", "ApproxDPEvent", "SequenceEvent",
           "ComposedPureEvent",
           "event_of", "Charged", "event_from_dict", "event_from_profile", "remember_samples", "known_samples"]

#: the profile is sampled up to the ε where it stops falling (δ(2ε) >= (1 − _FLAT)·δ(ε)) or drops below _TINY
_FLAT = 1e-6
_TINY = 1e-18
_EPS_TOP_MAX = 64.0


def _rr_delta(eps: FloatArray, e0: float, d0: float) -> FloatArray:
    """The randomised-response curve of an (e0, d0) guarantee at ε >= 0 (:class:`.profiles.ApproxDPProfile`)."""
    return np.asarray(ApproxDPProfile(e0, min(d0, 1.0)).delta(np.asarray(eps, dtype=float)), dtype=float)


@dataclass(frozen=True, kw_only=True)
class PrivacyEvent:
    """Common interface (module docstring). Subclasses are frozen dataclasses named by ``kind``.

    Attributes:
        epsilon, delta: the (ε, δ) the release is charged (basic composition).
        neighbours: the neighbouring relation of the guarantee.
    """

    epsilon: float
    delta: float
    neighbours: Neighbours = Neighbours.ADD_REMOVE

    kind: ClassVar[str] = ""
    #: ε grid points at which the profile is sampled for :meth:`pld` (fewer for costly accountants)
    profile_points: ClassVar[int] = 161

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", v.nonnegative("epsilon", self.epsilon))
        object.__setattr__(self, "delta", v.real("delta", self.delta, lo=0.0, hi=1.0))
        if not isinstance(self.neighbours, Neighbours):
            object.__setattr__(self, "neighbours", _neighbours(self.neighbours))

    # -- the math -----------------------------------------------------------------------------------
    def profile(self) -> PrivacyProfile | None:
        """The single-release profile object (:mod:`.profiles`), where the family has one."""
        return None

    @overload
    def delta_at(self, epsilon: float) -> float: ...
    @overload
    def delta_at(self, epsilon: FloatArray) -> FloatArray: ...
    def delta_at(self, epsilon: RealOrArray) -> RealOrArray:
        """δ(ε) of one release (vectorised; float for a scalar ε)."""
        prof = self.profile()
        assert prof is not None, f"{type(self).__name__} must define delta_at or profile"
        return prof.delta(epsilon)

    def epsilon_at(self, delta: float) -> float:
        """Smallest ε >= 0 with ``delta_at(ε) <= delta`` (inf if none)."""
        return _conversions.epsilon_from_delta(self.delta_at, delta)

    def pld(self) -> _pld.GridPLD:
        """The pessimistic privacy-loss distribution used to compose this release (module docstring)."""
        return _event_pld(self)

    def profile_samples(self) -> tuple[FloatArray, FloatArray]:
        """``(ε_i, δ_i)``: the profile on a uniform grid from 0 to where it stops falling, plus the charged ε,
        each δ_i the smaller of the profile and the charge's randomised-response curve (both are valid)."""
        cached = _SAMPLES.get(self)
        if cached is not None:
            return cached
        e_top = max(self.epsilon, 1.0 / 16.0)
        d_top = float(self.delta_at(e_top))
        while e_top < _EPS_TOP_MAX and d_top > _TINY:
            d2 = float(self.delta_at(2.0 * e_top))
            if d2 >= (1.0 - _FLAT) * d_top:
                break
            e_top, d_top = 2.0 * e_top, d2
        grid = _pld.snap_grid(np.concatenate([np.linspace(0.0, e_top, self.profile_points), [self.epsilon]]))
        prof = np.atleast_1d(np.asarray(self.delta_at(grid), dtype=float))
        out = (grid, np.minimum(prof, _rr_delta(grid, self.epsilon, self.delta)))
        remember_samples(self, *out)
        return out

    # -- description and storage --------------------------------------------------------------------
    def describe(self) -> str:
        """Public one-line description (parameters of the noise and the charge; nothing about the data)."""
        params = ", ".join(f"{f.name}={_fmt(getattr(self, f.name))}" for f in fields(self)
                           if f.name not in ("epsilon", "delta", "neighbours"))
        return (f"{self.kind}({params}); charged epsilon={self.epsilon:.6g}, delta={self.delta:.3g} "
                f"({'replace-one' if self.neighbours is Neighbours.REPLACE_ONE else 'add/remove'} neighbours)")

    def to_dict(self) -> dict[str, Any]:
        """JSON-able parameters (``{"event": kind, field: value, …}``; Fractions as strings)."""
        out: dict[str, Any] = {"event": self.kind}
        for f in fields(self):
            out[f.name] = _jsonable(getattr(self, f.name))
        return out


def _fmt(x: object) -> str:
    if isinstance(x, float):
        return f"{x:.6g}"
    if isinstance(x, tuple):
        return "[" + "; ".join(e.describe() if isinstance(e, PrivacyEvent) else _fmt(e) for e in x) + "]"
    return str(x)


def _jsonable(x: object) -> Any:  # a JSON value: any of str, number, list, None
    if isinstance(x, Neighbours):
        return x.name
    if isinstance(x, Fraction):
        return str(x)
    if isinstance(x, PrivacyEvent):
        return x.to_dict()
    if isinstance(x, tuple):
        return [_jsonable(e) for e in x]
    return x


def _neighbours(x: object) -> Neighbours:
    if isinstance(x, Neighbours):
        return x
    if isinstance(x, str) and x in Neighbours.__members__:
        return Neighbours[x]
    raise InvalidTypeError(f"neighbours must be a Neighbours member, got {x!r}")


# ------------------------------------------------------------------ thresholded sparse histograms


@dataclass(frozen=True, kw_only=True)
class GSHMEvent(PrivacyEvent):
    """Gaussian sparse histogram mechanism, continuous N(0, σ²) noise, margin τ, ``l0`` keys per unit,
    aggregate columns of Mahalanobis sensitivity ``mu_o2``.

    Profile: Karrer, Kifer, Wilkins & Zhang, "Exact privacy analysis of the Gaussian sparse histogram
    mechanism" (2022, arXiv:2202.01100), Thm 5.4 (``analysis="exact"``; "add"/"fdp" as in
    :func:`.gshm.gshm_delta`), via :class:`.profiles.GSHMProfile`.
    """

    sigma: float
    tau: float
    l0: int
    mu_o2: float = 0.0
    analysis: str = "exact"
    kind: ClassVar[str] = "gshm"

    def profile(self) -> GSHMProfile:
        return GSHMProfile(self.sigma, self.tau, self.l0, self.mu_o2, self.analysis)


@dataclass(frozen=True, kw_only=True)
class DiscreteGSHMEvent(PrivacyEvent):
    """GSHM with exact discrete Gaussian noise N_Z(0, sigma2), integer margin, release iff ``c + Z >= pre + margin``.

    Profile: the discrete analogue of Karrer et al. (arXiv:2202.01100) Thm 5.4, docs/proofs/discrete-histograms.md
    (:func:`.discrete_histograms.gshm_discrete_delta`)."""

    sigma2: Fraction
    margin: int
    l0: int
    kind: ClassVar[str] = "gshm-discrete"

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "sigma2", v.rational("sigma2", self.sigma2))

    def profile(self) -> GSHMDiscreteProfile:
        return GSHMDiscreteProfile(self.sigma2, self.margin, self.l0)


@dataclass(frozen=True, kw_only=True)
class LaplaceThresholdEvent(PrivacyEvent):
    """Laplace stability histogram with exact discrete Laplace(scale) noise and integer margin.

    Profile: exact, docs/proofs/laplace-stability-histogram.md (:func:`.discrete_histograms.laplace_discrete_delta`;
    the continuous mechanism is Korolova, Kenthapadi, Mishra & Ntoulas 2009 / Bun, Nissim & Stemmer 2016)."""

    scale: Fraction
    margin: int
    l0: int
    kind: ClassVar[str] = "laplace-threshold"

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "scale", v.rational("scale", self.scale))

    def profile(self) -> LaplaceDiscreteProfile:
        return LaplaceDiscreteProfile(self.scale, self.margin, self.l0)


@dataclass(frozen=True, kw_only=True)
class CSHEvent(PrivacyEvent):
    """Correlated Gaussian sparse histogram (CSH) and its top-k variant: σ, margin, sparsity ``k``.

    Lebeda & Retschmeier, "The correlated Gaussian sparse histogram mechanism" (2024, arXiv:2412.10357),
    Algorithms 2/3. ``rounded``: the secure rounded sampler with integer ``margin`` (accounted at
    τ = margin − ½, docs/proofs/rounded-csh.md), else continuous τ = ``margin``. ``debias``: de-biased top-k
    (also releases t̃). Profile by ``analysis``: "exact" = the certified profile of docs/proofs/csh-exact.md
    (:func:`.csh_exact.csh_exact_delta`), "tight"/"add" = the paper's Thm 3.5 / Thm 3.3.
    """

    sigma: float
    margin: float
    k: int
    analysis: str = "exact"
    debias: bool = False
    rounded: bool = True
    kind: ClassVar[str] = "csh"

    @property
    def profile_points(self) -> int:  # type: ignore[override]  # the certified profile costs ~0.05–0.4 s a point
        return 25 if self.analysis == "exact" else 161

    def profile(self) -> CSHProfile | RoundedCSHProfile:
        if self.rounded:
            return RoundedCSHProfile(self.sigma, int(self.margin), self.k, self.analysis, self.debias)
        return CSHProfile(self.sigma, self.margin, self.k, self.analysis, self.debias)


# ------------------------------------------------------------------ dense and other releases


@dataclass(frozen=True, kw_only=True)
class GaussianEvent(PrivacyEvent):
    """Gaussian mechanism with μ = ℓ2 sensitivity / σ (the correlated Gaussian of Lebeda, "Better Gaussian
    mechanism using correlated noise", 2024, arXiv:2408.06853, has this profile with μ = 1/σ₁).

    Profile: Balle & Wang, "Improving the Gaussian mechanism for differential privacy: analytical calibration
    and optimal denoising" (ICML 2018, arXiv:1805.06530), Thm 8 (exact)."""

    mu: float
    kind: ClassVar[str] = "gaussian"

    def profile(self) -> GaussianProfile:
        return GaussianProfile(self.mu)


@dataclass(frozen=True, kw_only=True)
class SetUnionEvent(PrivacyEvent):
    """Weighted Gaussian set union with exact discrete Gaussian noise ``N_Z(0, sigma2)`` in grid units, integer
    ``threshold`` and ``l0`` keys per unit on a weight grid ``grid`` (Gopi, Gulhane, Kulkarni, Shen,
    Shokouhi & Yekhanin, "Differentially private set union", ICML 2020, arXiv:2002.09745).

    Profile: the exact discrete profile of docs/proofs/set-union.md §2
    (:func:`.set_union.weighted_gaussian_delta`)."""

    sigma2: Fraction
    threshold: int
    l0: int
    grid: int
    kind: ClassVar[str] = "set-union"
    profile_points: ClassVar[int] = 41

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "sigma2", v.rational("sigma2", self.sigma2))

    @overload
    def delta_at(self, epsilon: float) -> float: ...
    @overload
    def delta_at(self, epsilon: FloatArray) -> FloatArray: ...
    def delta_at(self, epsilon: RealOrArray) -> RealOrArray:
        eps = np.atleast_1d(np.asarray(epsilon, dtype=float))
        out = np.array([float(_set_union.weighted_gaussian_delta(max(0.0, float(e)), self.sigma2, self.threshold,
                                                                 self.l0, self.grid)) if e >= 0 else 1.0
                        for e in eps])
        return float(out[0]) if np.ndim(epsilon) == 0 else out


@dataclass(frozen=True, kw_only=True)
class AggregateGSHMEvent(PrivacyEvent):
    """Discrete GSHM releasing a count with SUM/MEAN columns (the joint release of docs/proofs/aggregates.md):
    count noise ``N_Z(0, count_sigma2)``, integer margin, column noises ``N_Z(0, s_j)`` with grid sensitivities.

    Profile: :func:`.aggregates.joint_gshm_delta` (Karrer et al. arXiv:2202.01100 Eq. 5.8 with the joint
    hockey-stick of the count and its columns). Only for independent columns (no ``column_shape`` fit)."""

    count_sigma2: Fraction
    margin: int
    l0: int
    column_sigma2s: tuple[Fraction, ...]
    column_sensitivities: tuple[int, ...]
    kind: ClassVar[str] = "gshm-aggregates"
    profile_points: ClassVar[int] = 41

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "count_sigma2", v.rational("count_sigma2", self.count_sigma2))
        object.__setattr__(self, "column_sigma2s", tuple(v.rational("column_sigma2s", s)
                                                         for s in self.column_sigma2s))
        object.__setattr__(self, "column_sensitivities", tuple(int(d) for d in self.column_sensitivities))

    @overload
    def delta_at(self, epsilon: float) -> float: ...
    @overload
    def delta_at(self, epsilon: FloatArray) -> FloatArray: ...
    def delta_at(self, epsilon: RealOrArray) -> RealOrArray:
        eps = np.atleast_1d(np.asarray(epsilon, dtype=float))
        out = np.array([float(_aggregates.joint_gshm_delta(max(0.0, float(e)), self.count_sigma2, self.margin,
                                                           self.l0, self.column_sigma2s,
                                                           self.column_sensitivities))
                        if e >= 0 else 1.0 for e in eps])
        return float(out[0]) if np.ndim(epsilon) == 0 else out


@dataclass(frozen=True, kw_only=True)
class PureEvent(PrivacyEvent):
    """A pure ε-DP release (δ = 0): Laplace / geometric noise on a public domain, pure Misra–Gries, the
    private choice of the automatic bound. Profile: the randomised-response curve of (ε, 0) (Kairouz, Oh &
    Viswanath 2015, arXiv:1311.0776), :class:`.profiles.PureProfile`."""

    kind: ClassVar[str] = "pure"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.delta != 0:
            raise InvalidParameterError(f"a PureEvent has delta=0, got delta={self.delta!r}; use ApproxDPEvent")

    def profile(self) -> PureProfile:
        return PureProfile(self.epsilon)


@dataclass(frozen=True, kw_only=True)
class ComposedPureEvent(PrivacyEvent):
    """``k`` mechanisms, each ε0-DP, composed (the per-key quantiles of a release: a unit touches at most
    ``k = l0`` keys; :mod:`.quantiles`). Charged ``(k·ε0, 0)``; profile: the exact δ(ε) of ``k`` randomised
    responses (Kairouz, Oh & Viswanath 2015, arXiv:1311.0776, Thm 3.3), :func:`.quantiles.pure_composition_delta`."""

    epsilon0: float
    k: int
    kind: ClassVar[str] = "pure-composed"

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "epsilon0", v.nonnegative("epsilon0", self.epsilon0))
        object.__setattr__(self, "k", v.integer("k", self.k, lo=1))
        if self.delta != 0 or not self.epsilon >= self.k * self.epsilon0 * (1 - 1e-12):
            raise InvalidParameterError(f"a ComposedPureEvent is charged (k*epsilon0, 0), got epsilon={self.epsilon!r}, "
                                        f"delta={self.delta!r}")

    @overload
    def delta_at(self, epsilon: float) -> float: ...
    @overload
    def delta_at(self, epsilon: FloatArray) -> FloatArray: ...
    def delta_at(self, epsilon: RealOrArray) -> RealOrArray:
        return _quantiles.pure_composition_delta(self.epsilon0, self.k, epsilon)


@dataclass(frozen=True, kw_only=True)
class ApproxDPEvent(PrivacyEvent):
    """A release known only by its (ε, δ) guarantee (public-key releases, vector sums, sketches, Algorithm-4
    CSH, float Laplace, …): ``mechanism`` names it. Profile: the randomised-response curve of (ε, δ), which
    dominates every (ε, δ)-DP mechanism (Kairouz, Oh & Viswanath 2015, arXiv:1311.0776), so its composition
    is the optimal composition of (ε, δ) guarantees, never looser than basic composition."""

    mechanism: str = ""
    kind: ClassVar[str] = "approx-dp"
    profile_points: ClassVar[int] = 2

    def profile(self) -> ApproxDPProfile:
        return ApproxDPProfile(self.epsilon, self.delta)


@dataclass(frozen=True, kw_only=True)
class SequenceEvent(PrivacyEvent):
    """Releases run one after the other and charged as one (the automatic bound's private choice and the
    release; a two-stage release's stages). ``epsilon``/``delta`` default to the basic sums of the parts.

    Profile: the composition of the parts' privacy-loss distributions (Dong, Roth & Su, "Gaussian
    differential privacy", JRSS-B 2022, arXiv:1905.02383, Thm 3.2; docs/proofs/ledger-composition.md), valid
    when each part's parameters are fixed before the earlier parts' outputs are seen."""

    events: tuple[PrivacyEvent, ...]
    kind: ClassVar[str] = "sequence"

    def __init__(self, events: Iterable[PrivacyEvent], *, epsilon: float | None = None, delta: float | None = None,
                 neighbours: Neighbours | None = None):
        evs = tuple(events)
        if not evs or not all(isinstance(e, PrivacyEvent) for e in evs):
            raise InvalidTypeError("SequenceEvent needs a non-empty sequence of PrivacyEvent values")
        rel = {e.neighbours for e in evs}
        if len(rel) != 1:
            raise InvalidParameterError("the parts of a SequenceEvent must hold for one neighbouring relation")
        object.__setattr__(self, "events", evs)
        object.__setattr__(self, "epsilon", math.fsum(e.epsilon for e in evs) if epsilon is None else epsilon)
        object.__setattr__(self, "delta", math.fsum(e.delta for e in evs) if delta is None else delta)
        object.__setattr__(self, "neighbours", rel.pop() if neighbours is None else neighbours)
        self.__post_init__()

    @overload
    def delta_at(self, epsilon: float) -> float: ...
    @overload
    def delta_at(self, epsilon: FloatArray) -> FloatArray: ...
    def delta_at(self, epsilon: RealOrArray) -> RealOrArray:
        h = self.pld().hockey_stick(epsilon)
        return float(h[0]) if np.ndim(epsilon) == 0 else h


# ------------------------------------------------------------------ the PLD of an event

#: profile samples by event, computed here or read back from a ledger (which stores them with the event's
#: parameters, so that a later process need not re-evaluate a costly accountant); bounded FIFO
_SAMPLES: dict[PrivacyEvent, tuple[FloatArray, FloatArray]] = {}
_SAMPLES_MAX = 512


def remember_samples(event: PrivacyEvent, epsilons: npt.ArrayLike, deltas: npt.ArrayLike) -> None:
    """Record ``event``'s profile samples (as :meth:`PrivacyEvent.profile_samples` returns them)."""
    if len(_SAMPLES) >= _SAMPLES_MAX:
        _SAMPLES.pop(next(iter(_SAMPLES)))
    _SAMPLES[event] = (np.asarray(epsilons, dtype=float), np.asarray(deltas, dtype=float))


def known_samples(event: PrivacyEvent) -> tuple[FloatArray, FloatArray] | None:
    """The samples of ``event`` if this process has them (nothing is computed)."""
    return _SAMPLES.get(event)



@functools.lru_cache(maxsize=256)
def _event_pld(event: PrivacyEvent) -> _pld.GridPLD:
    """Hull pair of the sampled profile (cached per process: the certified CSH profile costs seconds)."""
    if isinstance(event, SequenceEvent):
        return _pld.compose_all([(e.pld(), 1) for e in event.events])
    eps, dlt = event.profile_samples()
    return _pld.from_profile(eps, dlt)


# ------------------------------------------------------------------ construction and storage

_KINDS: dict[str, type[PrivacyEvent]] = {c.kind: c for c in (
    GSHMEvent, DiscreteGSHMEvent, LaplaceThresholdEvent, CSHEvent, GaussianEvent, SetUnionEvent,
    AggregateGSHMEvent, PureEvent, ApproxDPEvent, SequenceEvent, ComposedPureEvent)}


def event_from_dict(d: Mapping[str, Any]) -> PrivacyEvent:
    """Inverse of :meth:`PrivacyEvent.to_dict` (the ledger's stored JSON)."""
    if not isinstance(d, Mapping) or d.get("event") not in _KINDS:
        raise InvalidParameterError(f"not a stored privacy event: {d!r}")
    cls = _KINDS[d["event"]]
    kw = {k: val for k, val in d.items() if k != "event"}
    kw["neighbours"] = _neighbours(kw.get("neighbours", "ADD_REMOVE"))
    if cls is SequenceEvent:
        return SequenceEvent([event_from_dict(e) for e in kw.pop("events")], **kw)
    for f in fields(cls):
        if f.name in kw and "Fraction" in str(f.type):
            val = kw[f.name]
            kw[f.name] = tuple(Fraction(x) for x in val) if isinstance(val, list) else Fraction(val)
        elif f.name in kw and isinstance(kw[f.name], list):
            kw[f.name] = tuple(kw[f.name])
    return cls(**kw)


def event_from_profile(profile: PrivacyProfile | None, epsilon: float, delta: float,
                       neighbours: Neighbours = Neighbours.ADD_REMOVE, mechanism: str = "") -> PrivacyEvent:
    """The event of a charge stored with a privacy profile (or none: its basic (ε, δ)) by an older ledger."""
    common: dict[str, Any] = {"epsilon": epsilon, "delta": delta, "neighbours": neighbours}
    if isinstance(profile, GSHMProfile):
        return GSHMEvent(sigma=profile.sigma, tau=profile.tau, l0=profile.l0, mu_o2=profile.mu_o2,
                         analysis=profile.analysis, **common)
    if isinstance(profile, GSHMDiscreteProfile):
        return DiscreteGSHMEvent(sigma2=profile.sigma2, margin=profile.margin, l0=profile.l0, **common)
    if isinstance(profile, LaplaceDiscreteProfile):
        return LaplaceThresholdEvent(scale=profile.scale, margin=profile.margin, l0=profile.l0, **common)
    if isinstance(profile, RoundedCSHProfile):
        return CSHEvent(sigma=profile.sigma, margin=profile.margin, k=profile.k, analysis=profile.analysis,
                        debias=profile.debias, rounded=True, **common)
    if isinstance(profile, CSHProfile):
        return CSHEvent(sigma=profile.sigma, margin=profile.tau, k=profile.k, analysis=profile.analysis,
                        debias=profile.debias, rounded=False, **common)
    if isinstance(profile, GaussianProfile):
        return GaussianEvent(mu=profile.mu, **common)
    if isinstance(profile, PureProfile) and delta == 0:
        return PureEvent(**common)
    return ApproxDPEvent(mechanism=mechanism, **common)


class Charged(Protocol):
    """Any calibration :func:`event_of` accepts: it reads the charged (ε, δ) of every one (and the typed fields of
    the calibrations it knows)."""

    @property
    def epsilon(self) -> float: ...
    @property
    def delta(self) -> float: ...


def event_of(calibration: Charged, neighbours: Neighbours | None = None) -> PrivacyEvent:
    """The event of a release made with ``calibration`` (a :class:`~.calibration.Calibration` or one of the
    calibrations of :mod:`.set_union` / :mod:`.aggregates`, or any other calibration with an ``epsilon`` and a
    ``delta``: :class:`Charged`), charged at its (ε, δ).

    Families with a profile get their typed event (the noise actually sampled, as :func:`.profiles.profile_of`
    reads it); a calibration of several releases that builds its own event (``calibration.event()``: the rounds
    of :mod:`.adaptive_weighting`) gets that one; any other calibration is charged as an :class:`ApproxDPEvent`
    (its (ε, δ), composed optimally), or a :class:`PureEvent` when δ = 0.
    """
    cal = calibration
    own = getattr(cal, "event", None)
    if callable(own) and not isinstance(cal, Calibration):  # a calibration that composes its own parts
        ev = own()                                            # (adaptive_weighting.RoundsCalibration)
        if isinstance(ev, PrivacyEvent):
            return ev
    rel = neighbours if neighbours is not None else getattr(cal, "neighbours", Neighbours.ADD_REMOVE)
    common: dict[str, Any] = {"epsilon": float(cal.epsilon), "delta": float(cal.delta), "neighbours": rel}
    # (no instance of a class of a module not yet imported: ``imported`` spares the import)
    if imported(_set_union) and isinstance(cal, _set_union.SetUnionCalibration) and \
            isinstance(cal.noise, laws.DiscreteGaussian) and cal.l0:
        return SetUnionEvent(sigma2=cal.noise.sigma2, threshold=int(cal.threshold_int), l0=int(cal.l0),
                             grid=int(cal.grid), **common)
    joint = getattr(cal, "joint", None) if not (imported(_aggregates) and
                                                isinstance(cal, _aggregates.JointDiscreteCalibration)) else cal
    if joint is not None:  # a count with SUM/MEAN columns: never the count-only profile (it would under-charge)
        if isinstance(joint, _aggregates.JointDiscreteCalibration) and (joint.shape is None or
                                                                        joint.shape.diagonal):
            return AggregateGSHMEvent(count_sigma2=joint.count_sigma2, margin=joint.margin, l0=joint.l0,
                                      column_sigma2s=joint.column_sigma2s,
                                      column_sensitivities=joint.column_sensitivities, **common)
        return ApproxDPEvent(mechanism="gshm-aggregates", **common)
    prof = profile_of(cal) if isinstance(cal, Calibration) else None
    return event_from_profile(prof, common["epsilon"], common["delta"], rel,
                              str(getattr(cal, "mechanism", "")))
