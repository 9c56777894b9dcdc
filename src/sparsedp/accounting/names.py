"""The accountants' names: one constant per accounted mechanism family, the one place these strings are written.

A calibration records which accountant made it (``Calibration.mechanism``), the ledger and the privacy profiles
dispatch on it, and the registered mechanism classes take it as their registry name (``GSHM.name``), so a
mechanism's identity is this constant, never a string retyped elsewhere. Code above the accounting layer refers
to the registered class (``GSHM.name``) or to its declared capabilities, not to these.
"""

from __future__ import annotations

__all__ = ["GSHM", "LAPLACE", "CSH", "TOPK_CSH", "CORRELATED_GAUSSIAN"]

#: Gaussian sparse histogram mechanism (Karrer et al.)
GSHM = "gshm"
#: Laplace (geometric) stability histogram
LAPLACE = "laplace"
#: correlated-noise sparse histogram on a k-sparse monotonic histogram (Lebeda & Retschmeier)
CSH = "csh"
#: top-k CSH (truncate at the (k+1)-th count, then CSH)
TOPK_CSH = "topk-csh"
#: Lebeda (2024)'s correlated Gaussian on a public key list
CORRELATED_GAUSSIAN = "correlated-gaussian"
