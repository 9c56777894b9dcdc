"""The exceptions sparsedp raises on purpose.

Every error a user can cause is a subclass of :class:`SparsedpError`. Parameter errors also subclass
``ValueError`` (or ``TypeError``) so generic handlers keep working.
"""

from __future__ import annotations


class SparsedpError(Exception):
    """Base class of every error sparsedp raises deliberately."""


class InvalidParameterError(SparsedpError, ValueError):
    """A parameter is out of range or of the wrong kind; the message names it and the fix."""


class InvalidTypeError(SparsedpError, TypeError):
    """A parameter has the wrong type."""


class InfeasibleError(SparsedpError, ValueError):
    """A calibration request cannot be met; the message says which constraint fails."""


class InputDataError(SparsedpError, ValueError):
    """The data violate a requirement (missing column, nulls, negative counts, ...). Nothing was released."""


class BudgetExceededError(SparsedpError):
    """A release would exceed the privacy budget recorded in a ledger. Nothing was released."""
