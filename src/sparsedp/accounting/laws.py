"""The noise a release samples, as typed values (what a :class:`~.calibration.Calibration` carries in ``noise``).

Each law is a frozen dataclass naming the distribution of the noise added to the released counts, with the
exact parameters its sampler needs (rational scales for the exact integer samplers of :mod:`sparsedp.noise`,
floats for the insecure float samplers), and two properties:

* ``secure``: True for exact integer noise drawn from the CSPRNG (:mod:`sparsedp.noise.discrete`,
  :mod:`sparsedp.noise.rounded`, :mod:`sparsedp.noise.inversion`); False for floating-point noise, which is
  not secure (Mironov 2012) and is only sampled behind an explicit ``insecure_float=True``.
* ``integer``: True when the released noisy values are integers (count + integer noise); False when they are
  not (Algorithm 4's ½-lattice, the dense embedding's estimates, float noise).

The laws describe *what is sampled*; the accountant that made the calibration (named in
``Calibration.analysis``) states the guarantee. Which mechanism uses which law:

==================================  ====================================================================
law                                 used by
==================================  ====================================================================
:class:`DiscreteGaussian`           discrete GSHM (Karrer et al. (2022), :mod:`.discrete_histograms`)
:class:`DiscreteLaplace`            discrete Laplace stability histogram; merged Misra–Gries (thesis §3.7)
:class:`RoundedCorrelatedGaussian`  rounded CSH / top-k CSH (secure default; docs/proofs/rounded-csh.md)
:class:`DiscreteCorrelatedGaussian` Algorithm 4 CSH / top-k CSH (Lebeda & Retschmeier (2024) §7)
:class:`DiscreteCorrelatedLaplace`  PMG, private Misra–Gries (thesis Alg. 13)
:class:`ScaledDiscreteLaplace`      pure private Misra–Gries (thesis §3.6)
:class:`DiscreteDenseCorrelatedGaussian`  dense correlated Gaussian, integer embedding (Lebeda (2024) S4.4)
:class:`ReleaseCurve`               optimal l0 = 1 partition selection (Desfontaines et al. 2022): no noise,
                                    a key with count n is kept with probability ``numerators[n-1] / 2^bits``
:class:`Gaussian`, :class:`Laplace`, :class:`CorrelatedGaussian`, :class:`DenseCorrelatedGaussian`
                                    the float (insecure) versions
==================================  ====================================================================
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from fractions import Fraction
from typing import ClassVar, Any

from ..errors import InvalidParameterError

__all__ = ["DiscreteGaussian", "DiscreteLaplace", "RoundedCorrelatedGaussian", "DiscreteCorrelatedGaussian",
           "DiscreteCorrelatedLaplace", "ScaledDiscreteLaplace", "DiscreteDenseCorrelatedGaussian",
           "ReleaseCurve", "Gaussian", "Laplace", "CorrelatedGaussian", "DenseCorrelatedGaussian", "NoiseLaw", "LAWS",
           "law_as_dict"]


def _fraction(law: object, name: str, *, zero_ok: bool = False) -> None:
    x = getattr(law, name)
    if isinstance(x, bool) or not isinstance(x, (int, Fraction)):
        raise InvalidParameterError(f"{type(law).__name__}.{name} must be an exact rational (Fraction or int), "
                                    f"got {type(x).__name__} {x!r}")
    x = Fraction(x)
    if x < 0 or (x == 0 and not zero_ok):
        raise InvalidParameterError(f"{type(law).__name__}.{name} must be > 0, got {x}")
    object.__setattr__(law, name, x)


def _real(law: object, name: str, *, zero_ok: bool = False) -> None:
    x = getattr(law, name)
    if isinstance(x, bool):
        raise InvalidParameterError(f"{type(law).__name__}.{name} must be a number, got {x!r}")
    x = float(x)
    if not math.isfinite(x) or x < 0 or (x == 0 and not zero_ok):
        raise InvalidParameterError(f"{type(law).__name__}.{name} must be finite and > 0, got {x!r}")
    object.__setattr__(law, name, x)


def _positive_int(law: object, name: str) -> None:
    x = getattr(law, name)
    if isinstance(x, bool) or not isinstance(x, int) or x < 1:
        raise InvalidParameterError(f"{type(law).__name__}.{name} must be an integer >= 1, got {x!r}")


# ------------------------------------------------------------------ exact integer noise (secure)


@dataclass(frozen=True)
class DiscreteGaussian:
    """``X ~ N_Z(0, sigma2)`` independently per key: ``P[X = x] ∝ exp(−x²/(2·sigma2))`` on the integers
    (Canonne–Kamath–Steinke 2020). ``sigma2`` is the exact rational parameter (not the variance, which is
    slightly smaller). Drawn by :func:`sparsedp.noise.sample_discrete_gaussian` (rejection) or by inversion
    (:class:`sparsedp.noise.inversion.DiscreteGaussianLaw`). Discrete GSHM."""

    sigma2: Fraction

    def __post_init__(self) -> None:
        _fraction(self, "sigma2")

    secure: ClassVar[bool] = True
    integer: ClassVar[bool] = True


@dataclass(frozen=True)
class DiscreteLaplace:
    """``X`` two-sided geometric with scale ``t``: ``P[X = x] ∝ exp(−|x|/t)`` on the integers, independently
    per key. Drawn by :func:`sparsedp.noise.sample_discrete_laplace` or by inversion
    (:class:`sparsedp.noise.inversion.DiscreteLaplaceLaw`). Discrete Laplace stability histogram; merged
    private Misra–Gries (scale k/ε)."""

    scale: Fraction

    def __post_init__(self) -> None:
        _fraction(self, "scale")

    secure: ClassVar[bool] = True
    integer: ClassVar[bool] = True


@dataclass(frozen=True)
class RoundedCorrelatedGaussian:
    """Rounded CSH noise: ``X_i = round(G_i + A)`` with ``G_i ~ N(0, sigma²)`` iid per key and one shared
    ``A ~ N(0, shared_sigma²)`` per release (integers; docs/proofs/rounded-csh.md). Sampled exactly:
    :class:`sparsedp.noise.rounded.SharedGaussianTerm` for ``A`` (certified intervals) and
    :class:`sparsedp.noise.rounded.RoundedShiftedGaussianLaw` by inversion for each ``X_i`` given ``A``."""

    sigma: float
    shared_sigma: float

    def __post_init__(self) -> None:
        _real(self, "sigma")
        _real(self, "shared_sigma")

    secure: ClassVar[bool] = True
    integer: ClassVar[bool] = True


@dataclass(frozen=True)
class DiscreteCorrelatedGaussian:
    """Algorithm 4 CSH noise (Lebeda & Retschmeier (2024) §7): the released value of key i is ``c_i + (Z_i + Z_c)/2`` with
    ``Z_i ~ N_Z(0, sigma2)`` iid per key and one shared ``Z_c ~ N_Z(0, shared_sigma2)`` per release (exact
    rationals, ``4σ²`` and ``4σ²/√k``), i.e. values on the ½-lattice. Drawn by
    :func:`sparsedp.noise.sample_discrete_gaussian` / inversion."""

    sigma2: Fraction
    shared_sigma2: Fraction

    def __post_init__(self) -> None:
        _fraction(self, "sigma2")
        _fraction(self, "shared_sigma2")

    secure: ClassVar[bool] = True
    integer: ClassVar[bool] = False


@dataclass(frozen=True)
class DiscreteCorrelatedLaplace:
    """PMG noise (Lebeda thesis Alg. 13): ``X_i = Z_i + η`` with ``Z_i`` two-sided geometric with scale
    ``scale`` iid per stored counter and one shared ``η`` two-sided geometric with scale ``shared_scale``
    per release (both 1/ε). Drawn by :func:`sparsedp.noise.sample_discrete_laplace`."""

    scale: Fraction
    shared_scale: Fraction

    def __post_init__(self) -> None:
        _fraction(self, "scale")
        _fraction(self, "shared_scale")

    secure: ClassVar[bool] = True
    integer: ClassVar[bool] = True


@dataclass(frozen=True)
class ScaledDiscreteLaplace:
    """Pure private Misra–Gries noise (thesis §3.6): ``Z`` two-sided geometric with scale ``scale``
    (``(2k+1)/ε``) added to the integer vector ``divisor·c̄`` (``divisor = k+1``); released values are
    ``(divisor·c̄ + Z)/divisor``, so the noise on a released value is ``Z/divisor``. Drawn by
    :func:`sparsedp.noise.sample_discrete_laplace`."""

    scale: Fraction
    divisor: int

    def __post_init__(self) -> None:
        _fraction(self, "scale")
        _positive_int(self, "divisor")

    @property
    def secure(self) -> bool:
        return True

    @property
    def integer(self) -> bool:
        return self.divisor == 1


@dataclass(frozen=True)
class DiscreteDenseCorrelatedGaussian:
    """Dense correlated Gaussian with an integer embedding (Lebeda (2024) Lemma 3.3/3.4, S4.4): the d + 1
    coordinates of ``y = (2f − n·1, c·n)`` each get iid ``N_Z(0, sigma2)`` (exact rational), and the release
    is ``f̃ = y/2 + y_{d+1}/(2c)``, ``ñ = y_{d+1}/c`` (not integers). Drawn by
    :func:`sparsedp.noise.sample_discrete_gaussian`."""

    sigma2: Fraction
    c: int

    def __post_init__(self) -> None:
        _fraction(self, "sigma2")
        _positive_int(self, "c")

    secure: ClassVar[bool] = True
    integer: ClassVar[bool] = False


@dataclass(frozen=True)
class ReleaseCurve:
    """No noise: a key held by ``n >= 1`` units is released with probability ``numerators[n − 1] / 2^bits``
    (``n`` beyond the table: the last entry, which is ``2^bits``, i.e. 1), independently per key; nothing but the
    key is released. Drawn exactly by :func:`sparsedp.noise.dyadic.dyadic_bernoulli`. The optimal l0 = 1 partition
    selection of Desfontaines, Voss, Gipson and Mandayam (2022), rounded down to the grid ``2^-bits``
    (:mod:`sparsedp.accounting.partition_selection`)."""

    bits: int
    numerators: tuple[int, ...]

    def __post_init__(self) -> None:
        _positive_int(self, "bits")
        nums = tuple(self.numerators)
        one = 1 << self.bits
        if not nums or any(isinstance(x, bool) or not isinstance(x, int) for x in nums) or nums[-1] != one \
                or any(not 0 <= a <= b <= one for a, b in zip(nums, nums[1:])) or nums[0] < 0:
            raise InvalidParameterError("ReleaseCurve.numerators must be non-decreasing integers in [0, 2^bits] "
                                        "ending at 2^bits")
        object.__setattr__(self, "numerators", nums)

    def probability(self, n: int) -> Fraction:
        """The exact release probability of a key held by ``n`` units (0 for ``n <= 0``)."""
        if n <= 0:
            return Fraction(0)
        return Fraction(self.numerators[min(n, len(self.numerators)) - 1], 1 << self.bits)

    secure: ClassVar[bool] = True
    integer: ClassVar[bool] = True


# ------------------------------------------------------------------ float noise (insecure)


@dataclass(frozen=True)
class Gaussian:
    """``X ~ N(0, sigma²)`` in double precision, iid per key (continuous GSHM; insecure:
    :func:`sparsedp.noise.sample_gaussian` with ``insecure_float=True``)."""

    sigma: float

    def __post_init__(self) -> None:
        _real(self, "sigma")

    secure: ClassVar[bool] = False
    integer: ClassVar[bool] = False


@dataclass(frozen=True)
class Laplace:
    """``X ~ Lap(scale)`` in double precision, iid per key (continuous Laplace stability histogram; insecure:
    :func:`sparsedp.noise.sample_laplace` with ``insecure_float=True``)."""

    scale: float

    def __post_init__(self) -> None:
        _real(self, "scale")

    secure: ClassVar[bool] = False
    integer: ClassVar[bool] = False


@dataclass(frozen=True)
class CorrelatedGaussian:
    """``X_i = G_i + A`` in double precision: ``G_i ~ N(0, sigma²)`` iid per key, one shared
    ``A ~ N(0, shared_sigma²)`` per release (continuous CSH, Algorithm 2 of Lebeda & Retschmeier (2024) with
    ``shared_sigma = σ/k^{1/4}``; the bounded-density mechanism of Lebeda (2024) §4.1, where ``shared_sigma`` may
    be 0). Insecure: :func:`sparsedp.noise.sample_gaussian` with ``insecure_float=True``."""

    sigma: float
    shared_sigma: float

    def __post_init__(self) -> None:
        _real(self, "sigma")
        _real(self, "shared_sigma", zero_ok=True)

    secure: ClassVar[bool] = False
    integer: ClassVar[bool] = False


@dataclass(frozen=True)
class DenseCorrelatedGaussian:
    """Dense correlated Gaussian, Algorithm 1 of Lebeda (2024) in its embedding form (Lemma 3.3/3.4): the d + 1
    coordinates of ``y = (2f − n·1, c·n)`` each get iid ``N(0, sigma²)`` in double precision and the release is
    ``f̃ = y/2 + y_{d+1}/(2c)``, ``ñ = y_{d+1}/c``. So each estimate has an independent part of std
    ``sigma/2`` and a shared part of std ``sigma/(2c)``, and ñ has std ``sigma/c`` (Lemma 3.5). Insecure:
    :func:`sparsedp.noise.sample_gaussian` with ``insecure_float=True``."""

    sigma: float
    c: float

    def __post_init__(self) -> None:
        _real(self, "sigma")
        _real(self, "c")

    @property
    def independent_std(self) -> float:
        return self.sigma / 2.0

    @property
    def shared_std(self) -> float:
        return self.sigma / (2.0 * self.c)

    @property
    def n_estimate_std(self) -> float:
        return self.sigma / self.c

    secure: ClassVar[bool] = False
    integer: ClassVar[bool] = False


NoiseLaw = (DiscreteGaussian | DiscreteLaplace | RoundedCorrelatedGaussian | DiscreteCorrelatedGaussian
            | DiscreteCorrelatedLaplace | ScaledDiscreteLaplace | DiscreteDenseCorrelatedGaussian | ReleaseCurve
            | Gaussian | Laplace | CorrelatedGaussian | DenseCorrelatedGaussian)

#: every law class (``isinstance(x, LAWS)`` tells a NoiseLaw)
LAWS = NoiseLaw.__args__


def law_as_dict(law: NoiseLaw) -> dict[str, Any]:
    """JSON-friendly view: ``{"law": class name, field: value, …}`` with Fractions as strings ("3/2")."""
    out: dict[str, Any] = {"law": type(law).__name__}
    for f in fields(law):
        x = getattr(law, f.name)
        out[f.name] = str(x) if isinstance(x, Fraction) else x
    return out
