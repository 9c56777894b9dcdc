"""``max_groups_per_unit="auto"``: choose the contribution bound l0 privately from the data.

A share ε₁ = share·ε of the budget buys a private quantile of the number of distinct keys per unit; the release
then runs with ε₂ = ε − ε₁ and the same δ through the normal pipeline. Basic composition: the whole is (ε, δ)-DP
(add/remove one unit), charged once. Proof: ``docs/proofs/auto-bound.md`` (beyond the papers).

Selection (Report Noisy Max with exact discrete Laplace noise; Dwork–Roth 2014, Claim 3.9, adapted to integer
noise and a fixed tie order). For the public candidates c_1 < … < c_m and each unit's number n_u of distinct keys,
A_c = #{u : n_u ≤ c} and N = #units (computed by the engine, :meth:`Engine.keys_per_unit_counts`). With the
quantile q = a/b (a, b coprime integers), candidate c_i covers the ranks (A_{c_{i−1}}, A_{c_i}] of the units
sorted by n_u (A_{c_0} = 0), and its integer utility is minus the distance of the target rank a·N/b to that
interval, in units of 1/b:

    u(c_i) = −max(0, b·A_{c_{i−1}} − a·N, a·N − b·A_{c_i}),

0 exactly for the smallest candidate c with A_c ≥ q·N. A candidate
above the largest keys-per-unit covers an empty interval at rank N and scores −(b − a)·N: candidates that keep
every key no longer tie with the smallest one that does (issue 33: the old utility −|b·A_c − a·N| tied all of
them, and the noise then chose among them at random, up to 256 on data whose units hold at most 3 keys).
Adding or removing one unit changes each x_i = b·A_{c_i} − a·N (and x_0 = −a·N) by b − a (if n_u ≤ c_i) or −a
(otherwise), and u(c_i) = −max(0, x_{i−1}, −x_i) is 1-Lipschitz in them, so each u(c) moves by at most
Δ = max(a, b − a). The mechanism outputs the index maximising u(c_i) + Z_i, Z_i iid discrete Laplace
(P[Z = z] ∝ exp(−|z|/s)) with s = 2Δ/ε₁, drawn by :func:`sparsedp.noise.sample_discrete_laplace` from the
release's source; ties go to the smallest candidate. That is pure ε₁-DP (proof file, exact test in
``tests/api/test_auto_bound.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Sequence

from . import _validate as v
from .core.unit_keys import UnitKeyCounts
from .errors import InvalidParameterError, InvalidTypeError
from .noise import sample_discrete_laplace

__all__ = ["AutoBound", "BoundChoice", "parse_auto", "utilities",
           "noise_scale", "select_bound", "report_noisy_max", "OBJECTIVES"]

DEFAULT_CANDIDATES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
_MAX_DENOMINATOR = 1000
#: ``quantile``: the q-quantile of keys per unit (this module); ``keys``: the expected number of released keys
#: (:mod:`sparsedp.auto_keys`)
OBJECTIVES = ("quantile", "keys")
#: the default share of ε per objective (docs/proofs/auto-bound.md, utility notes)
DEFAULT_SHARE = {"quantile": 0.05, "keys": 0.1}


@dataclass(frozen=True)
class AutoBound:
    """Options of ``max_groups_per_unit=sd.AutoBound(...)`` (``"auto"`` = the defaults).

    Attributes:
        share: the fraction of ε spent on choosing l0 (0 < share < 1; default 0.05 for the quantile objective,
            0.1 for the keys objective, whose selection noise is larger: measured in the proof file).
        candidates: the public, strictly increasing bounds to choose from (default 1, 2, 4, …, 256).
        quantile: the target fraction q of units whose distinct-key count is at most the chosen bound (rational,
            denominator ≤ 1000; default 0.5: the smallest candidate at or above the median keys per unit, which
            released within 8 % of the best fixed bound's keys on the benchmark corpora where 0.9 lost up to half
            of them: ``docs/proofs/auto-bound.md``, utility notes).
        objective: ``"quantile"`` (default: the rule above) or ``"keys"``: the bound whose release has the
            largest expected number of released keys (:mod:`sparsedp.auto_keys`; embedded engines only).
    """

    share: float | None = None
    candidates: tuple[int, ...] = DEFAULT_CANDIDATES
    quantile: float = 0.5
    objective: str = "quantile"

    def __post_init__(self) -> None:
        if self.objective not in OBJECTIVES:
            raise InvalidParameterError(f"⟨auto_objective|AutoBound objective⟩ must be one of {OBJECTIVES}, got "
                                        f"{self.objective!r}", param="auto_objective")
        share = DEFAULT_SHARE[self.objective] if self.share is None else v.real(
            "auto_share|AutoBound share", self.share, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
        if not isinstance(self.candidates, (tuple, list)) or not self.candidates:
            raise InvalidTypeError(f"AutoBound candidates must be a non-empty tuple of integers, got "
                                   f"{self.candidates!r}")
        cands = tuple(v.integer("AutoBound candidates", c, lo=1) for c in self.candidates)
        if any(b <= a for a, b in zip(cands, cands[1:])):
            raise InvalidParameterError(f"AutoBound candidates must be strictly increasing, got {cands}")
        q = v.real("auto_quantile|AutoBound quantile", self.quantile, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
        object.__setattr__(self, "share", float(share))
        object.__setattr__(self, "candidates", cands)
        object.__setattr__(self, "quantile", float(q))
        frac = self.quantile_fraction
        if abs(float(frac) - self.quantile) > 1e-12:
            raise InvalidParameterError(f"⟨auto_quantile|AutoBound quantile⟩ must be a fraction with denominator at most "
                                        f"{_MAX_DENOMINATOR} (e.g. 0.9, 0.95, 0.99), got {self.quantile!r}")

    @property
    def quantile_fraction(self) -> Fraction:
        """q = a/b as an exact fraction (from its shortest decimal form)."""
        return Fraction(repr(self.quantile)).limit_denominator(_MAX_DENOMINATOR)

    @property
    def sensitivity(self) -> int:
        """Δ = max(a, b − a): the most one unit moves any utility u(c)."""
        q = self.quantile_fraction
        return max(q.numerator, q.denominator - q.numerator)

    def describe(self) -> str:
        obj = "" if self.objective == "quantile" else f", objective={self.objective!r}"
        return f"AutoBound(share={self.share:g}, candidates={self.candidates}, quantile={self.quantile:g}{obj})"


@dataclass(frozen=True)
class BoundChoice:
    """The private choice (public once the release is published): the chosen bound and how it was chosen."""

    bound: int
    options: AutoBound
    epsilon_selection: float
    epsilon_release: float

    def describe(self) -> str:
        """The report's note on the choice."""
        return (f"max_groups_per_unit={self.bound} chosen privately with {self.options.share:.3g} of epsilon "
                f"(epsilon {self.epsilon_selection:.4g}, report noisy max over {list(self.options.candidates)} for "
                f"the {self.options.quantile:g}-quantile of keys per unit); the release used epsilon "
                f"{self.epsilon_release:.4g}")

    def to_dict(self) -> dict[str, Any]:
        return {"bound": self.bound, "objective": "quantile", "share": self.options.share, "candidates": list(self.options.candidates),
                "quantile": self.options.quantile, "epsilon_selection": self.epsilon_selection,
                "epsilon_release": self.epsilon_release, "mechanism": "report-noisy-max (discrete Laplace)",
                "noise_scale": float(noise_scale(self.options, self.epsilon_selection))}


def parse_auto(value: Any) -> AutoBound | None:
    """``AutoBound`` for ``"auto"`` or an ``AutoBound``; ``None`` for anything else (an integer l0)."""
    if isinstance(value, AutoBound):
        return value
    if isinstance(value, str):
        if value != "auto":
            raise InvalidParameterError(f"max_groups_per_unit must be a positive integer, 'auto' or "
                                        f"sd.AutoBound(...), got {value!r}")
        return AutoBound()
    return None


def utilities(counts: UnitKeyCounts, options: AutoBound) -> list[int]:
    """u(c_i) = −max(0, b·A_{c_{i−1}} − a·N, a·N − b·A_{c_i}) with A_{c_0} = 0 (integers; module docstring)."""
    q = options.quantile_fraction
    a, b = q.numerator, q.denominator
    target = a * counts.units
    below = (0, *counts.at_most[:-1])
    return [-max(0, b * lo - target, target - b * hi) for lo, hi in zip(below, counts.at_most)]


def noise_scale(options: AutoBound, epsilon_selection: float) -> Fraction:
    """s = 2Δ/ε₁ as an exact rational (ε₁ at its exact binary value)."""
    return Fraction(2 * options.sensitivity) / Fraction(epsilon_selection)


def report_noisy_max(utilities: Sequence[int], scale: Fraction, rng: Any) -> int:
    """The index maximising u_i + Z_i, Z_i iid exact discrete Laplace of scale ``scale`` drawn from ``rng``;
    ties go to the smallest index (``docs/proofs/auto-bound.md``: pure ε-DP when ``scale`` = 2Δ/ε, or Δ/ε for
    utilities that all move in the same direction between neighbours)."""
    z = sample_discrete_laplace(scale, len(utilities), rng)
    noisy = [int(a) + int(b) for a, b in zip(utilities, z)]
    return max(range(len(noisy)), key=lambda j: (noisy[j], -j))


def select_bound(counts: UnitKeyCounts, options: AutoBound, epsilon_selection: float, epsilon_release: float,
                 rng: Any) -> BoundChoice:
    """Report Noisy Max over the candidates (module docstring): pure ε₁-DP in the data. The noise is exact
    discrete Laplace from ``rng`` (the release's source); ties go to the smallest candidate (``argmax`` keeps the
    first maximum)."""
    if counts.candidates != options.candidates:
        raise ValueError("the engine's counts do not match the AutoBound candidates")
    i = report_noisy_max(utilities(counts, options), noise_scale(options, epsilon_selection), rng)
    return BoundChoice(bound=options.candidates[i], options=options, epsilon_selection=epsilon_selection,
                       epsilon_release=epsilon_release)
