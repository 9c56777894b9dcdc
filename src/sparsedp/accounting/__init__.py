"""Privacy accounting: pure math, no data, no randomness.

Each function cites its source (seed spec and theorem) in its docstring. Stable public names are listed
in ``shared/DESIGN.md``.
"""

from .gaussian import gaussian_delta, gaussian_sigma

__all__ = ["gaussian_delta", "gaussian_sigma"]
