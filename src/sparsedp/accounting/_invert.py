"""Conservative inversion of monotone privacy profiles.

Calibration asks for the smallest σ (or margin τ, or ε) at which a δ(·) profile drops to the target.
All such profiles are monotone in the searched variable, so we search on a *predicate* ``ok(x)``
(``δ(x) <= target``) that is False below the answer and True above. The returned x always satisfies
``ok(x)`` as evaluated in floating point: rounding errs toward more privacy, never less.
"""

from __future__ import annotations

import math
from typing import Callable

from ..errors import InfeasibleError


def smallest_ok(ok: Callable[[float], bool], lo: float, hi: float, *, rel_tol: float = 1e-12,
                grow: float = 2.0, max_hi: float = 1e300, what: str = "value") -> float:
    """Smallest x in [lo, ∞) (to relative precision ``rel_tol``) with ``ok(x)`` True, for monotone ``ok``.

    ``lo`` > 0 and ``hi`` > ``lo`` are an initial bracket; ``hi`` grows geometrically by ``grow`` until
    ``ok(hi)`` holds or ``max_hi`` is passed (then :class:`InfeasibleError` naming ``what``). Bisection
    is geometric (on log x) when lo > 0, so it works across many orders of magnitude.
    """
    if not (lo > 0 and hi > lo):
        raise ValueError(f"need 0 < lo < hi, got lo={lo}, hi={hi}")
    if ok(lo):
        return lo
    while not ok(hi):
        lo = hi
        hi *= grow
        if hi > max_hi:
            raise InfeasibleError(f"no {what} up to {max_hi:g} satisfies the privacy constraint")
    while hi - lo > rel_tol * hi:
        mid = math.sqrt(lo * hi) if hi / lo > 4 else 0.5 * (lo + hi)
        if mid <= lo or mid >= hi:
            break
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return hi
