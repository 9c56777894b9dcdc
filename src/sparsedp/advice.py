"""Advice on a release's parameters: warnings (never refusals) when a choice is legal but risky.

δ is the probability mass on which the (ε, δ) guarantee may fail outright; a mechanism that publishes each
unit's data with probability δ satisfies (0, δ)-DP, and over n units it exposes about δ·n of them. The usual
rule is therefore δ ≪ 1/n (Dwork & Roth, *The Algorithmic Foundations of Differential Privacy*, §2.3: "values
of δ on the order of 1/‖x‖₁ are very dangerous"). Our rule, applied by :func:`sparsedp.release`:

* δ > :data:`DELTA_CAP` (10⁻⁴): warned before any data is read; the warning is public (it depends on δ only)
  and is also a note of the :class:`~sparsedp.report.Report`;
* else, once the histogram is built and the number of units n is known, δ > 1/(10·n): warned, and kept in the
  :class:`~sparsedp.report.Curator` only, because it depends on the exact n, which is not private.

δ = 0 (pure DP) is never warned.
"""

from __future__ import annotations

from .errors import ParamText

__all__ = ["DELTA_CAP", "DeltaWarning", "delta_note", "delta_units_note"]

#: δ above this is warned whatever the data (10⁻⁴)
DELTA_CAP = 1e-4


class DeltaWarning(UserWarning):
    """δ is legal but larger than a release should use (see :mod:`sparsedp.advice`)."""


def delta_note(delta: float) -> str | None:
    """The data-independent warning for ``delta`` (δ > :data:`DELTA_CAP`), or None."""
    if delta > DELTA_CAP:
        return ParamText(f"⟨delta={delta:g}⟩ is above 1e-4: delta is the probability that the guarantee fails, "
                         f"and it should be far below 1/(number of privacy units); 1e-6 or smaller is usual")
    return None


def delta_units_note(delta: float, units: int | None) -> str | None:
    """The warning for ``delta`` given the number of privacy units (δ > 1/(10·units)), or None. Depends on the
    exact unit count: for the curator only, never published."""
    if units is None or units <= 0 or delta <= 0 or delta_note(delta) is not None:
        return None
    if delta > 1.0 / (10 * units):
        return ParamText(f"⟨delta={delta:g}⟩ is not much smaller than 1/(number of privacy units) = 1/{units}: about "
                         f"delta x units = {delta * units:.2g} units could be exposed; use ⟨delta⟩ <= "
                         f"{1 / (10 * units):.2g} (1/(10 x units)) or smaller. (This warning holds the exact unit "
                         f"count: not private, do not publish it.)")
    return None
