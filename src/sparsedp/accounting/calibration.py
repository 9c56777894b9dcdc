"""The result of calibrating a mechanism to a target (ε, δ).

:func:`sparsedp.accounting.calibrate` and :func:`sparsedp.accounting.compare` produce it; mechanisms take
it as their noise/threshold recipe. Mechanism-specific recipe details (exact rational noise scales, the
release comparison ``>`` or ``>=``, l0/k/top_k, …) live in ``params``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from types import MappingProxyType
from typing import Any, Mapping


class Comparison(str, Enum):
    """The release test of a thresholded mechanism: ``noisy count >= threshold`` or ``> threshold``.

    Every accountant states which one its release probability is computed for (e.g. the discrete GSHM
    accountant takes ``P[Z >= margin]``), and the kernel applies exactly that one.
    """

    GE = ">="
    GT = ">"


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
    """Noise scale and release margin of one mechanism at a target (ε, δ).

    Attributes:
        mechanism: "gshm", "csh", "topk-csh", "laplace", "correlated-gaussian", … .
        analysis: which accountant calibrated it ("exact", "add", "fdp", "tight", "discrete", …).
        epsilon, delta: the target guarantee.
        sigma: noise scale of the mechanism (Gaussian σ of each component; Laplace scale b).
        tau: margin = absolute release threshold − pre-threshold (what the analyses depend on).
        noise_std: standard deviation of each released noisy count.
        delta_parts: δ split into its named parts (e.g. {"gaussian": …, "threshold": …}).
        delta_achieved: δ re-evaluated at (σ, τ) with the full accountant; always <= delta.
        params: the contribution model and options (l0, k, mu_o2, discrete, …).
    """

    mechanism: str
    analysis: str
    epsilon: float
    delta: float
    sigma: float
    tau: float
    noise_std: float
    delta_parts: Mapping[str, float] = field(default_factory=dict)
    delta_achieved: float = float("nan")
    params: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "delta_parts", MappingProxyType(dict(self.delta_parts)))
        object.__setattr__(self, "params", MappingProxyType(dict(self.params)))

    def threshold(self, pre_threshold: float = 1.0) -> float:
        """Absolute release threshold for a given pre-threshold."""
        return pre_threshold + self.tau

    def as_dict(self) -> dict[str, Any]:
        """Plain-dict view (for reports and JSON; ``params`` values are kept as they are)."""
        return {"mechanism": self.mechanism, "analysis": self.analysis, "epsilon": self.epsilon,
                "delta": self.delta, "sigma": self.sigma, "tau": self.tau, "noise_std": self.noise_std,
                "delta_parts": dict(self.delta_parts), "delta_achieved": self.delta_achieved,
                "params": dict(self.params)}
