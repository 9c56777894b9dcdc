"""Privacy accounting: pure math, no data, no randomness.

Each function cites its source (paper and theorem) in its docstring. The public names are listed in the API
reference (``docs/reference.md``).

Start-up cost (issues 19 and 31): the names below load on first use (module ``__getattr__``), so importing any
accounting module imports only what that module needs: a default release whose calibrations come from the
calibration cache imports none of the calibrators. ``scipy.special`` is imported on first use
(:mod:`._special`); ``scipy.optimize`` only by the continuous accountants that minimise (``gshm``, ``csh``),
never by a default release (Brent's root finder comes from :mod:`._brentq`); ``scipy.stats`` never on the
release path (:func:`.discrete_histograms.binom_logsf`).

``calibrate`` is both a function exported here and the submodule that defines it: the package keeps the
function under that name whichever is imported first (:class:`_Package`), as it did when this module imported
everything eagerly.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .gaussian import gaussian_delta, gaussian_sigma
    from .gshm import (gshm_calibrate, gshm_delta, gshm_delta_parts, gshm_epsilon, gshm_sigma,
                       gshm_tau)
    from .zcdp import gaussian_rho, zcdp_to_dp_delta, zcdp_to_dp_epsilon

    from .csh import (csh_calibrate, csh_delta, csh_delta_parts, csh_discrete_calibrate, csh_discrete_delta,
                      csh_discrete_delta_parts, csh_discrete_scales, csh_discrete_tau, csh_epsilon, csh_noise_std,
                      csh_sigma, csh_sigma_star, csh_tau)
    from .laplace import laplace_calibrate, laplace_delta, laplace_noise_std, laplace_scale, laplace_tau
    from .correlated import (CorrelatedGaussianNoise, bounded_density_noise, correlated_gaussian_calibrate,
                             correlated_gaussian_error_ratio, correlated_gaussian_sigma1,
                             grouped_correlated_gaussian_calibrate)
    from .calibration import Calibration
    from .calibrate import MECHANISMS, best, calibrate, compare

#: public name -> the submodule that defines it (imported on first access)
_API: dict[str, str] = {}
_API.update(dict.fromkeys(["gaussian_delta", "gaussian_sigma"], ".gaussian"))
_API.update(dict.fromkeys(["gshm_calibrate", "gshm_delta", "gshm_delta_parts", "gshm_epsilon", "gshm_sigma",
                           "gshm_tau"], ".gshm"))
_API.update(dict.fromkeys(["gaussian_rho", "zcdp_to_dp_delta", "zcdp_to_dp_epsilon"], ".zcdp"))
_API.update(dict.fromkeys(["csh_calibrate", "csh_delta", "csh_delta_parts", "csh_discrete_calibrate",
                           "csh_discrete_delta", "csh_discrete_delta_parts", "csh_discrete_scales",
                           "csh_discrete_tau", "csh_epsilon", "csh_noise_std", "csh_sigma", "csh_sigma_star",
                           "csh_tau"], ".csh"))
_API.update(dict.fromkeys(["laplace_calibrate", "laplace_delta", "laplace_noise_std", "laplace_scale",
                           "laplace_tau"], ".laplace"))
_API.update(dict.fromkeys(["CorrelatedGaussianNoise", "bounded_density_noise", "correlated_gaussian_calibrate",
                           "correlated_gaussian_error_ratio", "correlated_gaussian_sigma1",
                           "grouped_correlated_gaussian_calibrate"], ".correlated"))
_API["Calibration"] = ".calibration"
_API.update(dict.fromkeys(["MECHANISMS", "best", "calibrate", "compare"], ".calibrate"))

__all__ = ["gaussian_delta", "gaussian_sigma"]
__all__ += ["gshm_calibrate", "gshm_delta", "gshm_delta_parts", "gshm_epsilon", "gshm_sigma", "gshm_tau",
            "gaussian_rho", "zcdp_to_dp_delta", "zcdp_to_dp_epsilon"]
__all__ += ["csh_calibrate", "csh_delta", "csh_delta_parts", "csh_discrete_calibrate", "csh_discrete_delta",
            "csh_discrete_delta_parts", "csh_discrete_scales", "csh_discrete_tau", "csh_epsilon", "csh_noise_std",
            "csh_sigma", "csh_sigma_star", "csh_tau",
            "laplace_calibrate", "laplace_delta", "laplace_noise_std", "laplace_scale", "laplace_tau",
            "CorrelatedGaussianNoise", "bounded_density_noise", "correlated_gaussian_calibrate",
            "correlated_gaussian_error_ratio", "correlated_gaussian_sigma1", "grouped_correlated_gaussian_calibrate",
            "Calibration", "MECHANISMS", "best", "calibrate", "compare"]


def __getattr__(name: str) -> Any:
    if name in _API:
        value = getattr(importlib.import_module(_API[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_API))


class _Package(types.ModuleType):
    """This package's module type: importing the submodule :mod:`.calibrate` sets the package attribute
    ``calibrate`` to that module; the package keeps the function of that name instead (the public
    ``sparsedp.accounting.calibrate``)."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "calibrate" and isinstance(value, types.ModuleType):
            value = value.calibrate
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
