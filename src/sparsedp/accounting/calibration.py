"""The result of calibrating a mechanism to a target (ε, δ).

:func:`sparsedp.accounting.calibrate` and :func:`sparsedp.accounting.compare` produce it; mechanisms take
it as their noise/threshold recipe: the noise law with its exact scales (:mod:`.laws`), the release
comparison (:class:`Comparison`), the contribution model (l0 / k / top_k / d) and options, all typed.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from enum import Enum
from types import MappingProxyType
from typing import Any, Mapping

from .laws import LAWS, NoiseLaw, law_as_dict


class Comparison(str, Enum):
    """The release test of a thresholded mechanism: ``noisy count >= threshold`` or ``> threshold``.

    Every accountant states which one its release probability is computed for (e.g. the discrete GSHM
    accountant takes ``P[Z >= margin]``), and the kernel applies exactly that one.
    """

    GE = ">="
    GT = ">"
    #: no threshold test: dense releases of a public domain and top-k selections (pure Misra–Gries)
    NONE = "none"


class Neighbours(str, Enum):
    """The neighbouring relation a guarantee is stated for.

    ``ADD_REMOVE``: adding or removing one privacy unit with all of its rows (the default of every mechanism).
    ``REPLACE_ONE``: replacing one unit's data with another's, the number of units being public (the bounded
    DP of the Balcer–Vadhan pure mechanisms without ``max_units``). An add/remove (ε, δ) guarantee implies a
    replace-one (2ε, (1 + e^ε)δ) guarantee (group privacy over the removal and the addition); the converse
    does not hold, so a ledger never adds replace-one charges to add/remove ones as if they were the same.
    """

    ADD_REMOVE = "add/remove one privacy unit"
    REPLACE_ONE = "replace one privacy unit (the number of units is public)"


@dataclass(frozen=True)
class Calibration:
    """Noise law, noise scale and release margin of one mechanism at a target (ε, δ).

    Attributes:
        mechanism: "gshm", "csh", "topk-csh", "laplace", "correlated-gaussian", "misra-gries", … .
        analysis: which accountant calibrated it ("exact", "add", "tight", "discrete-exact", "rounded-tight", …).
        epsilon, delta: the target guarantee.
        sigma: noise scale of the mechanism (Gaussian σ of each component; Laplace scale b).
        tau: margin = absolute release threshold − pre-threshold (what the analyses depend on); an integer
            (as a float) for the integer-noise rules (discrete GSHM / Laplace, rounded CSH).
        noise_std: standard deviation of each released noisy count.
        noise: the law the release samples (:mod:`sparsedp.accounting.laws`), with the exact scales the
            accountant evaluated.
        comparison: the release test ``noisy >= pre + tau`` (GE) or ``> pre + tau`` (GT) the accountant
            analysed; NONE for releases without a threshold test.
        delta_parts: δ split into its named parts (e.g. {"gaussian": …, "threshold": …}).
        delta_achieved: δ re-evaluated at (σ, τ) with the full accountant; always <= delta.
        neighbours: the neighbouring relation of the guarantee.
        l0: max distinct keys per privacy unit (GSHM, Laplace).
        k: sparsity bound of CSH (= top_k for top-k CSH), or the Misra–Gries sketch size.
        top_k: number of keys kept by top-k CSH.
        d: number of public keys of a dense release (the universe size for pure Misra–Gries).
        debias: top-k CSH also releases the estimate t̃ of the (k+1)-th count (Lebeda & Retschmeier (2024) §4).
        mu_o2: extra μ² allowed for released aggregate columns (GSHM, Karrer et al. (2022) Thm 5.4).
        fallback: why the calibration is not the requested default (e.g. rounded CSH beyond its sampler).
        tau_continuous: rounded CSH: the τ = margin − ½ its continuous accountant was evaluated at.
        conversion: zCDP → DP conversion of Algorithm 4 CSH ("cks" or "bs").
    """

    mechanism: str
    analysis: str
    epsilon: float
    delta: float
    sigma: float
    tau: float
    noise_std: float
    noise: NoiseLaw
    comparison: Comparison
    delta_parts: Mapping[str, float] = field(default_factory=dict)
    delta_achieved: float = float("nan")
    neighbours: Neighbours = Neighbours.ADD_REMOVE
    l0: int | None = None
    k: int | None = None
    top_k: int | None = None
    d: int | None = None
    debias: bool = False
    mu_o2: float = 0.0
    fallback: str | None = None
    tau_continuous: float | None = None
    conversion: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.noise, LAWS):
            raise TypeError(f"Calibration.noise must be a sparsedp.accounting.laws law, got {self.noise!r}")
        object.__setattr__(self, "comparison", Comparison(self.comparison))
        object.__setattr__(self, "neighbours", Neighbours(self.neighbours))
        object.__setattr__(self, "delta_parts", MappingProxyType(dict(self.delta_parts)))

    @property
    def discrete(self) -> bool:
        """True when the release samples exact integer noise from the CSPRNG (``noise.secure``)."""
        return self.noise.secure

    def threshold(self, pre_threshold: float = 1.0) -> float:
        """Absolute release threshold for a given pre-threshold."""
        return pre_threshold + self.tau

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly view: the noise law as ``{"law": class name, fields…}`` (Fractions as strings), the
        enums as their values."""
        out: dict[str, Any] = {f.name: getattr(self, f.name) for f in fields(self)}
        out["noise"] = law_as_dict(self.noise)
        out["comparison"] = self.comparison.value
        out["neighbours"] = self.neighbours.value
        out["delta_parts"] = dict(self.delta_parts)
        out["discrete"] = self.discrete
        return out
