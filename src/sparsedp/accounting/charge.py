"""What one release costs: :class:`Charge`, the value a mechanism builds and the ledger composes.

A charge carries the release's (ε, δ) guarantee, the neighbouring relation it holds for and, when the
accountant gives one, its typed privacy event (:mod:`sparsedp.accounting.events`) and privacy profile
(:mod:`sparsedp.accounting.profiles`); the ledger (:mod:`sparsedp.ledger`) composes charges across releases.
It sits in accounting, below the mechanisms, so a mechanism builds its charge without importing the ledger.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .. import _validate as v
from ..errors import InvalidParameterError
from . import events as _events
from .calibration import Neighbours
from .events import PrivacyEvent, event_from_profile
from .profiles import PrivacyProfile, profile_of

__all__ = ["Charge", "charge_of"]


@dataclass(frozen=True)
class Charge:
    """What one release costs: its (ε, δ) guarantee, the relation it holds for, and optionally its profile.

    ``event`` (a typed :class:`~sparsedp.accounting.events.PrivacyEvent`) is what the ledger composes by
    privacy-loss distributions; without one the charge is the :class:`~sparsedp.accounting.events.ApproxDPEvent`
    of its (ε, δ) (or the event of its ``profile``). ``profile`` (a
    :class:`~sparsedp.accounting.profiles.PrivacyProfile`; :meth:`of_event` fills it from the event) also feeds
    the dominating-pair accounting and the release's report; it must imply the stated (ε, δ), i.e. ``profile.delta(epsilon) <= delta``
    (checked). ``rho``/``rho_delta``: an optional (approximate) zCDP guarantee of the whole release.
    Build one from a calibration with :meth:`from_calibration`, or from an event with :meth:`of_event`.
    """

    epsilon: float
    delta: float
    neighbours: Neighbours
    mechanism: str
    profile: PrivacyProfile | None = None
    rho: float | None = None
    rho_delta: float = 0.0
    event: PrivacyEvent | None = None

    def __post_init__(self) -> None:
        if self.event is not None:
            if not isinstance(self.event, PrivacyEvent):
                raise v.InvalidTypeError(f"event must be a PrivacyEvent or None, got {type(self.event).__name__}")
            if self.event.neighbours is not self.neighbours:
                raise InvalidParameterError(f"the charge's event holds for {self.event.neighbours.value!r}, the "
                                            f"charge for {self.neighbours.value!r}")
            if (self.event.epsilon, self.event.delta) != (float(self.epsilon), float(self.delta)):
                raise InvalidParameterError(
                    f"the charge's event is charged (epsilon={self.event.epsilon:g}, delta={self.event.delta:g}), the "
                    f"charge (epsilon={self.epsilon:g}, delta={self.delta:g}); build it with Charge.of_event")
        object.__setattr__(self, "epsilon", v.epsilon(self.epsilon))
        object.__setattr__(self, "delta", v.real("delta", self.delta, lo=0.0, hi=1.0, hi_open=True))
        if not isinstance(self.neighbours, Neighbours):
            raise v.InvalidTypeError(f"neighbours must be a Neighbours member, got {self.neighbours!r}")
        if not isinstance(self.mechanism, str):
            raise v.InvalidTypeError(f"mechanism must be a string, got {type(self.mechanism).__name__}")
        if self.rho is not None:
            object.__setattr__(self, "rho", v.positive("rho", self.rho))
        object.__setattr__(self, "rho_delta", v.real("rho_delta", self.rho_delta, lo=0.0, hi=1.0, hi_open=True))
        if self.profile is not None:
            if not isinstance(self.profile, PrivacyProfile):
                raise v.InvalidTypeError(f"profile must be a PrivacyProfile or None, got "
                                         f"{type(self.profile).__name__}")
            d = float(self.profile.delta(self.epsilon))
            if not d <= self.delta * (1.0 + 1e-9):
                raise InvalidParameterError(
                    f"the charge's profile ({self.profile.family}) gives delta={d:.6g} at epsilon={self.epsilon:g}, "
                    f"above the charged delta={self.delta:g}: the profile does not imply the charge")
        if self.event is None:  # the event of the profile, or of the basic (ε, δ)
            object.__setattr__(self, "event", event_from_profile(self.profile, self.epsilon, self.delta,
                                                                 self.neighbours, self.mechanism))

    @classmethod
    def from_calibration(cls, calibration: Any, neighbours: Neighbours = Neighbours.ADD_REMOVE) -> "Charge":
        """The charge of a release made with ``calibration`` (its profile from :func:`profile_of`)."""
        c = charge_of(calibration)
        return cls(epsilon=c["epsilon"], delta=c["delta"], neighbours=neighbours,
                   mechanism=str(calibration.mechanism), profile=profile_of(calibration), rho=c["rho"],
                   rho_delta=c["rho_delta"], event=_events.event_of(calibration, neighbours))

    @classmethod
    def of_event(cls, event: PrivacyEvent, mechanism: str = "") -> "Charge":
        """The charge of ``event``: its (ε, δ), relation and profile."""
        if not isinstance(event, PrivacyEvent):
            raise v.InvalidTypeError(f"event must be a PrivacyEvent, got {type(event).__name__}")
        prof = None if isinstance(event, _events.ApproxDPEvent) else event.profile()
        return cls(epsilon=event.epsilon, delta=event.delta, neighbours=event.neighbours,
                   mechanism=mechanism or event.kind, event=event, profile=prof)


def charge_of(calibration: Any) -> dict[str, Any]:
    """What a release made with ``calibration`` charges: ``{"epsilon", "delta", "rho", "rho_delta"}``.

    Always the calibrated (ε, δ) target (basic composition). ``rho`` is filled only when the calibration
    states a zCDP guarantee of the whole release (a ``zcdp_rho`` attribute, with an optional
    ``zcdp_delta`` for approximate zCDP; :class:`~sparsedp.accounting.calibration.Calibration` has neither). The thresholded sparse histograms (GSHM, Laplace, CSH,
    top-k CSH) do not: their guarantees are (ε, δ)-DP statements (Karrer's decomposition; for discrete CSH,
    Lebeda & Retschmeier (2024) Thm 7.7 proves (ε, δ_gauss + δ_inf)-DP directly rather than approximate zCDP), so they are
    charged under basic composition only, which is always sound.
    """
    rho = getattr(calibration, "zcdp_rho", None)
    return {"epsilon": float(calibration.epsilon), "delta": float(calibration.delta),
            "rho": None if rho is None else float(rho),
            "rho_delta": float(getattr(calibration, "zcdp_delta", None) or 0.0) if rho is not None else 0.0}
