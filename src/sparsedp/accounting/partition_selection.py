"""The optimal l0 = 1 partition selection, in exact arithmetic: its release-probability curve and calibration.

Desfontaines, Voss, Gipson and Mandayam, "Differentially private partition selection" (PoPETs 2022, arXiv
2006.03684): when every privacy unit contributes to ONE key, the keys are independent one-bit releases, and the
(ε, δ)-DP mechanism that keeps a key of ``n`` units with the largest probability, for every ``n`` at once, is
(their Definition 5 and Theorem 1)

    π(0) = 0,   π(n) = min(e^ε π(n−1) + δ,  1 − e^{−ε} (1 − π(n−1) − δ),  1)      (n >= 1).

The two terms are the two (ε, δ) constraints between neighbours with counts ``n − 1`` and ``n`` (the event
"released" and the event "not released"); the other two directions hold because π is non-decreasing.

What is sampled here is π̂, the same recursion rounded DOWN to the grid ``2^-b`` at every step, from the
previous ROUNDED value, with a certified enclosure ``[lo, hi]·2^-Q`` of ``e^{−ε}``
(:func:`~.exp_bounds.exp_neg_bounds`) and the exact rational value of δ (the float the user gave, taken at its
binary value)::

    A = ⌊S·(2^Q/hi)·π̂(n−1) + S·δ⌋,   B = S − ⌈S·(hi/2^Q)·(1 − π̂(n−1) − δ)⌉ (B = S when that is <= 0),
    S·π̂(n) = min(A, B, S),          S = 2^b.

Since ``2^Q/hi <= e^ε`` and ``hi/2^Q >= e^{−ε}``, both constraints hold for the values actually sampled
(``docs/proofs/optimal-partition-selection.md``); π̂ <= π at every n and π̂ is non-decreasing. The grid has
``b = 64·⌈(65 + ⌈log2(1/δ)⌉)/64⌉`` bits, so every rounding costs at most ``2^-65·δ``. The curve ends at the
first n with π̂(n) = 1 (every larger count is released surely).

The public figures of the curve, comparable with a threshold mechanism's: ``n50`` (the smallest count kept
with probability >= 1/2; a "noise then threshold T" rule with symmetric noise has ``n50 = T``) and the
count-equivalent margin ``tau = n50 − 1`` above the pre-threshold 1, which is what ``sd.plan`` and
``sd.Auto(discover=True)`` compare (data-independent). ``expected_keys`` gives Σ π̂(c) for a histogram's counts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from .. import _validate as v
from ..errors import InfeasibleError, InvalidParameterError
from .calibration import Calibration, Comparison
from .exp_bounds import exp_neg_bounds
from .laws import ReleaseCurve

__all__ = ["OPTIMAL_PARTITION", "PartitionCalibration", "grid_bits", "release_curve", "achieved_delta",
           "calibrate_partition_selection", "MAX_STEPS"]

#: the accountant's (and the registered mechanism's) name
OPTIMAL_PARTITION = "optimal-partition"
#: counts at which the curve must reach 1 (ε near 0 needs about 2·ln(ε/δ)/ε steps): refused beyond
MAX_STEPS = 1_000_000
#: ε below this is refused (the enclosure of e^{−ε} must stay below 1: ``hi < 2^Q``)
MIN_EPSILON = 2.0 ** -40


def grid_bits(delta: Fraction) -> int:
    """``b``: a multiple of 64 with ``2^-b <= 2^-65·δ`` (each rounding costs at most ``2^-65·δ``)."""
    need = 64 + math.ceil(math.log2(1 / float(delta))) + 1 if delta > 0 else 128
    return 64 * max(1, -(-need // 64))


def _exp_neg_enclosure(eps: Fraction, q: int) -> tuple[int, int]:
    lo, hi = exp_neg_bounds(eps, q)
    if not 0 < hi < (1 << q):
        raise InvalidParameterError(f"epsilon={float(eps):g} is out of the range of the exact partition selection "
                                    f"(needs {MIN_EPSILON:g} <= epsilon <= 40)", param="epsilon")
    return lo, hi


def release_curve(epsilon: Fraction, delta: Fraction, bits: int | None = None) -> ReleaseCurve:
    """π̂ on the grid ``2^-bits`` (module docstring): ``numerators[n − 1] = 2^bits·π̂(n)`` for ``n = 1 …`` the first
    count at which π̂ = 1. Exact integer arithmetic; ``epsilon`` and ``delta`` are exact rationals."""
    eps, dlt = Fraction(epsilon), Fraction(delta)
    if not 0 < dlt < 1:
        raise InvalidParameterError(f"delta must be in (0, 1), got {float(dlt)}", param="delta")
    if not MIN_EPSILON <= eps <= 40:
        raise InvalidParameterError(f"epsilon={float(eps):g} is out of the range of the exact partition selection "
                                    f"(needs {MIN_EPSILON:g} <= epsilon <= 40)", param="epsilon")
    b = grid_bits(dlt) if bits is None else int(bits)
    q = b + 64
    _, hi = _exp_neg_enclosure(eps, q)
    one, two_q = 1 << b, 1 << q
    dn, dd = dlt.numerator, dlt.denominator
    nums: list[int] = []
    a = 0
    while a < one:
        if len(nums) >= MAX_STEPS:
            raise InfeasibleError(f"the optimal partition selection at epsilon={float(eps):g}, delta={float(dlt):g} "
                                  f"needs more than {MAX_STEPS} units per key to release surely; raise epsilon")
        # A = ⌊a·2^Q/hi + δ·S⌋ (2^Q/hi <= e^ε)
        up = (a * two_q * dd + dn * one * hi) // (hi * dd)
        # B = S − ⌈hi·(S − a − δS)/2^Q⌉ when S − a − δS > 0 (hi/2^Q >= e^{−ε}), else no constraint below 1
        r = (one - a) * dd - dn * one  # (S − a − δS)·dd
        down = one - (-(-hi * r // (dd * two_q))) if r > 0 else one
        nxt = min(up, down, one)
        if nxt < a:  # pragma: no cover - impossible (docs/proofs/optimal-partition-selection.md §2)
            raise AssertionError("the rounded partition-selection curve decreased")
        a = nxt
        nums.append(a)
    return ReleaseCurve(bits=b, numerators=tuple(nums))


def achieved_delta(curve: ReleaseCurve, epsilon: Fraction) -> Fraction:
    """A certified upper bound of the smallest δ for which the curve is (ε, δ)-DP between counts ``n − 1`` and
    ``n`` in both directions and both events, the maximum over n of ``π̂(n) − e^ε π̂(n−1)``,
    ``(1 − π̂(n−1)) − e^ε (1 − π̂(n))``, ``π̂(n−1) − e^ε π̂(n)`` and ``(1 − π̂(n)) − e^ε (1 − π̂(n−1))`` (each
    decreasing in e^ε, so bounded above with a lower bound of e^ε)."""
    q = curve.bits + 64
    _, hi = _exp_neg_enclosure(Fraction(epsilon), q)
    e_lo = Fraction(1 << q, hi)  # <= e^ε
    one = 1 << curve.bits
    worst = Fraction(0)
    prev = 0
    for a in curve.numerators:
        p, r = Fraction(prev, one), Fraction(a, one)
        worst = max(worst, r - e_lo * p, (1 - p) - e_lo * (1 - r), p - e_lo * r, (1 - r) - e_lo * (1 - p))
        prev = a
    return worst


@dataclass(frozen=True)
class PartitionCalibration(Calibration):
    """The optimal l0 = 1 partition selection at (ε, δ) (module docstring). ``noise`` is the exact
    :class:`~.laws.ReleaseCurve`; no count is released, so ``sigma`` and ``noise_std`` are NaN. ``tau`` is the
    count-equivalent margin ``n50 − 1`` (``n50``: the smallest count kept with probability >= 1/2), what ``plan``
    and ``auto`` compare with a threshold mechanism's margin; ``delta_achieved`` is :func:`achieved_delta`."""

    n50: int = 0

    @property
    def curve(self) -> ReleaseCurve:
        if not isinstance(self.noise, ReleaseCurve):  # pragma: no cover - built by calibrate_partition_selection
            raise TypeError(f"a partition-selection calibration samples a ReleaseCurve, got {self.noise!r}")
        return self.noise

    @property
    def sure(self) -> int:
        """The smallest count released with probability 1."""
        return len(self.curve.numerators)

    def probabilities(self, counts: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """π̂(c) for each count (as floats, for expectations; the release samples the exact values)."""
        c = np.asarray(counts, dtype=np.int64)
        table = np.array([0.0] + [math.ldexp(x, -self.curve.bits) for x in self.curve.numerators])
        return table[np.clip(c, 0, self.sure)]

    def expected_keys(self, counts: npt.ArrayLike) -> float:
        """Σ π̂(c) over a histogram's counts: the expected number of released keys (data-dependent: curator only)."""
        return float(self.probabilities(counts).sum())


def calibrate_partition_selection(epsilon: float, delta: float) -> PartitionCalibration:
    """π̂ at the request's (ε, δ) (each float taken at its exact binary value), its n50, margin and achieved δ."""
    eps = Fraction(v.epsilon(epsilon))
    dlt = Fraction(v.delta(delta))
    curve = release_curve(eps, dlt)
    half = 1 << (curve.bits - 1)
    n50 = next(i + 1 for i, a in enumerate(curve.numerators) if a >= half)
    da = achieved_delta(curve, eps)
    da_f = float(da)
    if Fraction(da_f) < da:
        da_f = math.nextafter(da_f, math.inf)
    return PartitionCalibration(
        mechanism=OPTIMAL_PARTITION, analysis="optimal-l0-1", epsilon=float(epsilon), delta=float(delta),
        sigma=math.nan, tau=float(n50 - 1), noise_std=math.nan, noise=curve, comparison=Comparison.NONE,
        delta_parts={"selection": da_f}, delta_achieved=da_f, l0=1, n50=n50)
