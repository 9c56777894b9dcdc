"""The deliberately wrong mechanisms an audit must catch: a calibration with its noise scaled or its threshold moved.

Each takes the accountant's calibration and returns the one a broken release would run with; the audit keeps the
accountant's as its reference (:func:`.targets.build_target`). Discrete scales stay exact rationals.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from ..errors import InvalidParameterError
from ..mechanisms.thresholded import Laplace

__all__ = ["scaled_calibration", "scaled_law", "scaled_public", "shifted_calibration", "ScaledCount"]


def scaled_calibration(cal, factor: float):
    """``cal`` with its noise scale multiplied by ``factor`` (threshold unchanged): a deliberately wrong
    mechanism for the audit to catch. Discrete scales stay exact rationals (σ² scales by factor²)."""
    if factor == 1.0:
        return cal
    return dataclasses.replace(cal, sigma=cal.sigma * factor, noise_std=cal.noise_std * factor,
                               noise=scaled_law(cal.noise, factor))


#: how each noise-law field scales when the noise is multiplied by ``factor`` (its power of factor);
#: fields not listed (the embedding weight c, the divisor) are kept
_SCALE_POWER = {"sigma2": 2, "shared_sigma2": 2, "scale": 1, "shared_scale": 1, "sigma": 1, "shared_sigma": 1}


def scaled_law(law, factor: float):
    """``law`` with its noise multiplied by ``factor``: variance parameters by factor², scales by factor;
    exact rationals stay exact (``Fraction(factor)``)."""
    f = Fraction(factor)
    changes = {}
    for fl in dataclasses.fields(law):
        power = _SCALE_POWER.get(fl.name)
        if power is None:
            continue
        x = getattr(law, fl.name)
        changes[fl.name] = x * f ** power if isinstance(x, Fraction) else float(x) * factor ** power
    return dataclasses.replace(law, **changes)


def scaled_public(cal, factor: float):
    """A public-key calibration (:class:`~sparsedp.accounting.public_keys.PublicKeysCalibration`) with its noise
    multiplied by ``factor``: the sampled scale (secure Gaussian: the exact rational ``s = σ²`` by factor²; Laplace
    and float Gaussian: by factor) and the stated stds."""
    if factor == 1.0:
        return cal
    f = Fraction(factor)
    power = 2 if (cal.secure and cal.family != Laplace.name) else 1
    scale = cal.scale * f ** power if isinstance(cal.scale, Fraction) else float(cal.scale) * factor ** power
    return dataclasses.replace(
        cal, scale=scale, noise_std=cal.noise_std * factor, shared_std=cal.shared_std * factor,
        independent_std=cal.independent_std * factor,
        n_noise_std=None if cal.n_noise_std is None else cal.n_noise_std * factor)


def shifted_calibration(cal, shift: int):
    """``cal`` with its integer margin moved by ``shift`` (release rule ``c + X >= pre + margin + shift``):
    a threshold error for the audit to catch. The margin must stay >= 0."""
    if shift == 0:
        return cal
    tau = cal.tau + shift
    if tau < 0:
        raise InvalidParameterError(f"⟨margin_shift={shift}⟩ would make the margin {tau:g} negative "
                                    f"(calibrated margin {cal.tau:g})", param="margin_shift")
    return dataclasses.replace(cal, tau=float(tau) if isinstance(cal.tau, float) else tau)


@dataclass(frozen=True)
class ScaledCount:
    """A public-key stage (two-stage's stage 2, calibrated inside its ``run`` once the key count is known) whose
    calibration has its noise multiplied by ``factor`` (:func:`scaled_public`): ``resolve`` is the inner
    mechanism's with the calibration scaled; the mechanism it returns is the real one."""

    inner: Any
    factor: float

    @property
    def name(self) -> str:
        return self.inner.name

    def resolve(self, request):
        mech, cal, reason, extra = self.inner.resolve(request)
        return mech, scaled_public(cal, self.factor), reason, extra
