"""Privacy accounting: pure math, no data, no randomness.

Each function cites its source (seed spec and theorem) in its docstring. Stable public names are listed
in ``shared/DESIGN.md``.

Start-up cost (issue 19): ``scipy.special`` is the one heavy import here (the default release needs its
``erfcx``/``ndtr``/``betainc``); ``scipy.optimize`` is imported only by the continuous accountants that
minimise (``gshm``, ``csh``), never by a default release (Brent's root finder comes from :mod:`._brentq`);
``scipy.stats`` never on the release path (:func:`.discrete_histograms.binom_logsf`).
"""

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
