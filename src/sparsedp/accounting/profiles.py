"""Privacy profiles δ(ε) of single releases, and their composable forms.

Each profile is a frozen dataclass built from the *noise actually sampled* (explicit parameters, not a
:class:`~.calibration.Calibration`; :func:`profile_of` is the one bridge from a calibration). It exposes

* ``delta(eps)`` — the privacy profile of one release, from the mechanism's own (tight where available)
  accountant, so at the calibrated ε it agrees with the calibration's ``delta_achieved``;
* ``pair()`` — the composable form, a :class:`~.composition.DominatingPair` (core + infinite-loss mass +
  total-variation slack), proved in ``docs/proofs/composition.md``; ``None`` where there is none (pure
  mechanisms, which a ledger composes exactly in ε by basic composition);
* ``epsilon(delta)`` — the smallest ε of the single-release profile at ``delta``;
* ``tradeoff_curve(alpha)`` — an f-DP trade-off curve: Karrer et al. (2022) Thm 7.1 (Eq. 7.1 and its trade-off form,
  spec §7.2) for continuous GSHM; for the others the curve implied by the profile,
  ``f(α) = sup_ε max(0, 1 − δ(ε) − e^ε α, e^{−ε}(1 − δ(ε) − α))`` (Dong, Roth & Su 2022, Prop. 2.12),
  with the supremum over a finite ε grid (a valid lower bound of the true curve);
* ``to_dict()`` / :func:`profile_from_dict` — JSON-able form stored by the ledger.

The single-release composable δ (``pair().delta(ε)``) is an upper bound of ``delta(ε)``; for GSHM at a
calibrated point it is at most about δ_inf + δ_G (the pair puts all l0 rows in both the Gaussian part and
the threshold event), i.e. up to twice the tight Karrer value. A ledger therefore also keeps basic
composition of the calibrated (ε, δ) and uses whichever admits.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Mapping, overload

import numpy as np
import numpy.typing as npt
from ._special import special

from .. import _validate as v
from ..errors import InvalidParameterError
from ._types import FloatArray, RealOrArray
from .calibration import Calibration
from .names import CORRELATED_GAUSSIAN, GSHM, LAPLACE, TOPK_CSH
from . import laws
from .discrete import dgauss_sf, dlaplace_sf
from .discrete_histograms import _blocks, gshm_discrete_delta, laplace_discrete_delta
from ..core.lazy import lazy_module

# the dominating pairs (ledger composition) and the continuous and CSH accountants: on first use (issue 31; a
# default release's charge needs the discrete GSHM/Laplace profiles only)
if TYPE_CHECKING:
    from . import composition as _composition, conversions as _conversions, csh as _csh, csh_exact as _csh_exact
    from . import gaussian as _gaussian, gshm as _gshm
else:
    _composition, _conversions = lazy_module(f"{__package__}.composition"), lazy_module(f"{__package__}.conversions")
    _csh, _csh_exact = lazy_module(f"{__package__}.csh"), lazy_module(f"{__package__}.csh_exact")
    _gaussian, _gshm = lazy_module(f"{__package__}.gaussian"), lazy_module(f"{__package__}.gshm")

__all__ = ["PrivacyProfile", "GSHMDiscreteProfile", "GSHMProfile", "LaplaceDiscreteProfile", "CSHProfile",
           "RoundedCSHProfile", "GaussianProfile", "PureProfile", "ApproxDPProfile", "profile_of", "profile_from_dict",
           "tradeoff_from_profile"]

class PrivacyProfile:
    """Common interface (see the module docstring). Subclasses are frozen dataclasses."""

    family: str = ""

    @overload
    def delta(self, epsilon: float) -> float: ...
    @overload
    def delta(self, epsilon: FloatArray) -> FloatArray: ...
    def delta(self, epsilon: RealOrArray) -> RealOrArray:
        """δ(ε) of one release, for finite real ε (vectorised: a float for a scalar ε)."""
        eps, scalar = _eps_array(epsilon)
        return _out(self._delta(eps), scalar)

    def _delta(self, eps: FloatArray) -> FloatArray:  # pragma: no cover - abstract
        """δ at each ε of a validated 1-d array (each family's accountant)."""
        raise NotImplementedError

    def pair(self) -> _composition.DominatingPair | None:
        return None

    def epsilon(self, delta: float, *, hi: float = 200.0) -> float:
        """Smallest ε >= 0 (bisection to 1e-9 relative, rounded up) with ``delta(ε) <= delta``; inf if none."""
        return _conversions.epsilon_from_delta(self.delta, delta, hi=hi)

    def tradeoff_curve(self, alpha: npt.ArrayLike) -> FloatArray:
        return _conversions.tradeoff_from_profile(self.delta, alpha)

    def to_dict(self) -> dict[str, Any]:  # pragma: no cover - abstract
        raise NotImplementedError


def _eps_array(epsilon: npt.ArrayLike) -> tuple[FloatArray, bool]:
    arr = np.atleast_1d(np.asarray(epsilon, dtype=float))
    if not np.all(np.isfinite(arr)):
        raise InvalidParameterError(f"epsilon must be finite, got {epsilon!r}")
    return arr, np.ndim(epsilon) == 0


def _out(arr: FloatArray, scalar: bool) -> RealOrArray:
    return float(arr[0]) if scalar else arr


# ------------------------------------------------------------------ GSHM


@dataclass(frozen=True)
class GSHMDiscreteProfile(PrivacyProfile):
    """GSHM with per-key noise N_Z(0, sigma2), integer ``margin``, release rule ``count + Z >= pre + margin``.

    ``delta``: :func:`.discrete_histograms.gshm_discrete_delta` (discrete analogue of Karrer et al.
    Thm 5.4, docs/proofs/discrete-histograms.md). ``pair``: core N_Z(1, s)^{l0} vs N_Z(0, s)^{l0}, infinite
    mass 1 − (1 − P[Z >= margin])^{l0} (docs/proofs/composition.md, Lemma 2).
    """

    sigma2: Fraction
    margin: int
    l0: int
    family = "gshm-discrete"

    def __post_init__(self) -> None:
        object.__setattr__(self, "sigma2", v.rational("sigma2", self.sigma2))
        if self.sigma2 < 1:
            raise InvalidParameterError(f"sigma2 must be >= 1, got {self.sigma2}")
        object.__setattr__(self, "margin", v.integer("margin", self.margin, lo=0))
        object.__setattr__(self, "l0", v.integer("l0", self.l0, lo=1))

    def release_probability(self) -> float:
        """P[a key at the pre-threshold is released] = P[Z >= margin]."""
        return float(dgauss_sf(self.margin, self.sigma2))

    def _delta(self, eps: FloatArray) -> FloatArray:
        return np.array([gshm_discrete_delta(float(e), self.sigma2, self.margin, self.l0) for e in eps])

    def pair(self) -> _composition.DominatingPair:
        p = min(1.0, self.release_probability() * (1.0 + 1e-12))
        return _composition.DominatingPair(dgauss=((self.sigma2, self.l0),),
                                           log_keep=self.l0 * _composition.DominatingPair.bad_event(p))

    def to_dict(self) -> dict[str, Any]:
        return {"family": self.family, "sigma2": str(self.sigma2), "margin": self.margin, "l0": self.l0}


@dataclass(frozen=True)
class GSHMProfile(PrivacyProfile):
    """GSHM with continuous N(0, σ²) noise, margin τ, l0 groups per unit, aggregate sensitivity μ_o².

    ``delta``: :func:`.gshm.gshm_delta` with ``analysis`` (default Karrer et al. Thm 5.4, Karrer et al. (2022) §4.6).
    ``pair``: core N(μ(l0), 1) vs N(0, 1) with μ(l0)² = l0(1/σ² + μ_o²), infinite mass 1 − Φ(τ/σ)^{l0}.
    ``tradeoff_curve``: Karrer et al. (2022) Thm 7.1 (spec §7.2): f(α) = min_{a=0..l0} g_a(α),
    g_a(α) = (1 − p_a)·Φ(Φ⁻¹(1 − α/(1 − p_a)) − μ(l0 − a)), p_a = 1 − Φ(τ/σ)^a (0 for α > 1 − p_a).
    """

    sigma: float
    tau: float
    l0: int
    mu_o2: float = 0.0
    analysis: str = "exact"
    family = GSHM

    def __post_init__(self) -> None:
        object.__setattr__(self, "sigma", v.positive("sigma", self.sigma))
        object.__setattr__(self, "tau", v.nonnegative("tau", self.tau))
        object.__setattr__(self, "l0", v.integer("l0", self.l0, lo=1))
        object.__setattr__(self, "mu_o2", v.nonnegative("mu_o2", self.mu_o2))
        object.__setattr__(self, "analysis", v.choice("analysis", self.analysis, ("exact", "add", "fdp")))

    def _delta(self, eps: FloatArray) -> FloatArray:
        return np.array([_gshm.gshm_delta(max(0.0, float(e)), self.sigma, self.tau, self.l0, self.analysis,
                                          self.mu_o2) if e >= 0 else 1.0 for e in eps])

    def pair(self) -> _composition.DominatingPair:
        mu2 = self.l0 * (1.0 / (self.sigma * self.sigma) + self.mu_o2) * (1.0 + 1e-12)
        lphi = float(special.log_ndtr(self.tau / self.sigma))
        return _composition.DominatingPair(gaussian_mu2=mu2, log_keep=self.l0 * lphi * (1.0 + 1e-12))

    def tradeoff_curve(self, alpha: npt.ArrayLike) -> FloatArray:
        a_arr = np.atleast_1d(np.asarray(alpha, dtype=float))
        if np.any((a_arr < 0) | (a_arr > 1)):
            raise InvalidParameterError("alpha must lie in [0, 1]")
        lphi = float(special.log_ndtr(self.tau / self.sigma))
        scale = 1.0 / (self.sigma * self.sigma) + self.mu_o2
        if self.l0 <= 4096:
            los = his = np.arange(self.l0 + 1)
        else:  # blocks: a lower bound of min over each block (keep ↑ in a uses a_hi, μ ↓ in a uses a_lo)
            lo, hi = _blocks(self.l0)
            los, his = np.append(lo, self.l0), np.append(hi, self.l0)
        out = np.full_like(a_arr, np.inf)
        for a_lo, a_hi in zip(los.tolist(), his.tolist()):
            keep = math.exp(a_hi * lphi)  # 1 − p_a, smallest in the block
            mu = math.sqrt((self.l0 - a_lo) * scale)  # largest μ in the block
            u = np.minimum(a_arr / keep, 1.0)
            with np.errstate(divide="ignore"):
                g = keep * special.ndtr(-special.ndtri(u) - mu)
            g = np.where(a_arr > keep, 0.0, g)
            out = np.minimum(out, g)
        curve: FloatArray = np.clip(out, 0.0, 1.0 - a_arr)
        return curve

    def to_dict(self) -> dict[str, Any]:
        return {"family": self.family, "sigma": self.sigma, "tau": self.tau, "l0": self.l0,
                "mu_o2": self.mu_o2, "analysis": self.analysis}


# ------------------------------------------------------------------ Laplace stability histogram


@dataclass(frozen=True)
class LaplaceDiscreteProfile(PrivacyProfile):
    """Stability histogram with discrete Laplace(scale t) noise, integer margin, release ``count + Z >= pre + m``.

    ``delta``: :func:`.discrete_histograms.laplace_discrete_delta` (exact). ``pair``: core of l0 discrete
    Laplace coordinates shifted by one, infinite mass 1 − (1 − P[Z >= m])^{l0} (composition.md Lemma 2).
    """

    scale: Fraction
    margin: int
    l0: int
    family = "laplace-discrete"

    def __post_init__(self) -> None:
        object.__setattr__(self, "scale", v.rational("scale", self.scale))
        object.__setattr__(self, "margin", v.integer("margin", self.margin, lo=0))
        object.__setattr__(self, "l0", v.integer("l0", self.l0, lo=1))

    def _delta(self, eps: FloatArray) -> FloatArray:
        return np.array([laplace_discrete_delta(float(e), self.scale, self.margin, self.l0) for e in eps])

    def pair(self) -> _composition.DominatingPair:
        p = min(1.0, float(dlaplace_sf(self.margin, self.scale)) * (1.0 + 1e-12))
        return _composition.DominatingPair(dlaplace=((self.scale, self.l0),),
                                           log_keep=self.l0 * _composition.DominatingPair.bad_event(p))

    def to_dict(self) -> dict[str, Any]:
        return {"family": self.family, "scale": str(self.scale), "margin": self.margin, "l0": self.l0}


# ------------------------------------------------------------------ CSH / top-k CSH


def _csh_pair(sigma: float, tau: float, k: int, debias: bool) -> _composition.DominatingPair:
    """Lebeda & Retschmeier (2024) Thm 3.3's decomposition: Gaussian μ = ½√(k + √k)/σ (½√(k+5√k) de-biased), TV slack
    δ_inf = 1 − Φ(τ/(σ(1 + k^{−1/4})))^{k+1} (composition.md Lemma 4)."""
    rk = math.sqrt(k)
    mu2 = (k + (5.0 if debias else 1.0) * rk) / (4.0 * sigma * sigma) * (1.0 + 1e-12)
    x_c = tau / (sigma * (1.0 + k ** -0.25))
    tv = float(-math.expm1((k + 1) * float(special.log_ndtr(x_c)))) * (1.0 + 1e-12)
    return _composition.DominatingPair(gaussian_mu2=mu2, tv=min(1.0, tv))


def _csh_delta(eps: float, sigma: float, t: float, k: int, analysis: str, debias: bool, rounded: bool) -> float:
    """δ(ε) of CSH / top-k CSH at margin ``t`` (integer if ``rounded``, else continuous τ) under ``analysis``:
    "exact" = :func:`.csh_exact.csh_exact_delta` (certified profile), else Lebeda & Retschmeier (2024) Thm 3.5 / 3.3 (:mod:`.csh`)."""
    if analysis == "exact":
        return _csh_exact.csh_exact_delta(eps, sigma, t, k, rounded=rounded, topk=debias, debias=debias)
    if rounded:
        return _csh.csh_rounded_delta(eps, sigma, int(t), k, analysis, debias=debias)  # t is the integer margin
    return _csh.csh_delta(eps, sigma, t, k, analysis, debias=debias)


@dataclass(frozen=True)
class CSHProfile(PrivacyProfile):
    """CSH / top-k CSH with continuous noise (Lebeda & Retschmeier (2024) Alg. 2/3): σ, margin τ, sparsity k.

    ``delta``: :func:`.csh.csh_delta` (Thm 3.5 "tight" or Thm 3.3 "add"; ``debias`` = de-biased top-k).
    ``pair``: Thm 3.3's decomposition (Gaussian part + total-variation slack δ_inf).
    """

    sigma: float
    tau: float
    k: int
    analysis: str = "tight"
    debias: bool = False
    family = "csh"

    def __post_init__(self) -> None:
        object.__setattr__(self, "sigma", v.positive("sigma", self.sigma))
        object.__setattr__(self, "tau", v.positive("tau", self.tau))
        object.__setattr__(self, "k", v.integer("k", self.k, lo=1))
        object.__setattr__(self, "analysis", v.choice("analysis", self.analysis, ("exact", "tight", "add")))

    def _delta(self, eps: FloatArray) -> FloatArray:
        return np.array([_csh_delta(float(e), self.sigma, self.tau, self.k, self.analysis, self.debias, False)
                         if e >= 0 else 1.0 for e in eps])

    def pair(self) -> _composition.DominatingPair:
        return _csh_pair(self.sigma, self.tau, self.k, self.debias)

    def to_dict(self) -> dict[str, Any]:
        return {"family": self.family, "sigma": self.sigma, "tau": self.tau, "k": self.k,
                "analysis": self.analysis, "debias": self.debias}


@dataclass(frozen=True)
class RoundedCSHProfile(PrivacyProfile):
    """Rounded CSH (secure default; docs/proofs/rounded-csh.md): integer margin m, accounted at τ = m − ½.

    ``delta``: :func:`.csh.csh_rounded_delta`. ``pair``: as :class:`CSHProfile` at τ = m − ½ (rounding is
    post-processing, so Thm 3.3's decomposition carries over).
    """

    sigma: float
    margin: int
    k: int
    analysis: str = "tight"
    debias: bool = False
    family = "csh-rounded"

    def __post_init__(self) -> None:
        object.__setattr__(self, "sigma", v.positive("sigma", self.sigma))
        object.__setattr__(self, "margin", v.integer("margin", self.margin, lo=1))
        object.__setattr__(self, "k", v.integer("k", self.k, lo=1))
        object.__setattr__(self, "analysis", v.choice("analysis", self.analysis, ("exact", "tight", "add")))

    def _delta(self, eps: FloatArray) -> FloatArray:
        return np.array([_csh_delta(float(e), self.sigma, self.margin, self.k, self.analysis, self.debias, True)
                         if e >= 0 else 1.0 for e in eps])

    def pair(self) -> _composition.DominatingPair:
        return _csh_pair(self.sigma, self.margin - 0.5, self.k, self.debias)

    def to_dict(self) -> dict[str, Any]:
        return {"family": self.family, "sigma": self.sigma, "margin": self.margin, "k": self.k,
                "analysis": self.analysis, "debias": self.debias}


# ------------------------------------------------------------------ Gaussian, pure


@dataclass(frozen=True)
class GaussianProfile(PrivacyProfile):
    """Gaussian mechanism with μ = ℓ2 sensitivity / σ (Balle–Wang 2018 Thm 8; no threshold)."""

    mu: float
    family = "gaussian"

    def __post_init__(self) -> None:
        object.__setattr__(self, "mu", v.positive("mu", self.mu))

    def _delta(self, eps: FloatArray) -> FloatArray:
        return np.atleast_1d(_gaussian.gaussian_delta(self.mu, eps))

    def pair(self) -> _composition.DominatingPair:
        return _composition.DominatingPair(gaussian_mu2=self.mu * self.mu * (1.0 + 1e-12))

    def tradeoff_curve(self, alpha: npt.ArrayLike) -> FloatArray:
        a = np.atleast_1d(np.asarray(alpha, dtype=float))
        with np.errstate(divide="ignore"):
            curve: FloatArray = np.clip(special.ndtr(-special.ndtri(a) - self.mu), 0.0, 1.0 - a)
        return curve

    def to_dict(self) -> dict[str, Any]:
        return {"family": self.family, "mu": self.mu}


@dataclass(frozen=True)
class PureProfile(PrivacyProfile):
    """A pure ε₀-DP release: δ(ε) = max(0, (e^{ε₀} − e^ε)/(1 + e^{ε₀}), 1 − e^ε) (the hockey-stick divergence of
    the randomised-response pair, which dominates every ε₀-DP mechanism: Kairouz–Oh–Viswanath 2015). No pair: a ledger composes pure charges exactly in ε (basic composition)."""

    epsilon0: float
    family = "pure"

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon0", v.nonnegative("epsilon0", self.epsilon0))

    def _delta(self, eps: FloatArray) -> FloatArray:
        e0 = self.epsilon0
        out = np.maximum(0.0, (np.exp(e0 - np.logaddexp(0.0, e0))) * -np.expm1(np.minimum(eps - e0, 0.0)))
        out = np.maximum(out, -np.expm1(np.minimum(eps, 0.0)))  # S = everything: 1 − e^ε for ε < 0
        no_negative_zero: FloatArray = out + 0.0  # + 0.0: no −0 (x·(−expm1(0)) is −0.0, printed "-0")
        return no_negative_zero

    def to_dict(self) -> dict[str, Any]:
        return {"family": self.family, "epsilon0": self.epsilon0}


@dataclass(frozen=True)
class ApproxDPProfile(PrivacyProfile):
    """An (ε₀, δ₀)-DP release known only by its guarantee: the profile of the randomised-response pair that
    dominates every (ε₀, δ₀)-DP mechanism (Kairouz, Oh & Viswanath, "The composition theorem for differential
    privacy", ICML 2015, arXiv:1311.0776; docs/proofs/composition.md F5):
    δ(ε) = δ₀ + (1 − δ₀)·(e^{ε₀} − e^ε)_+ / (1 + e^{ε₀}) for ε >= 0 (and 1 − e^ε + e^ε·δ(−ε) below 0).
    :class:`PureProfile` is the case δ₀ = 0."""

    epsilon0: float
    delta0: float
    family = "approx-dp"

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon0", v.nonnegative("epsilon0", self.epsilon0))
        object.__setattr__(self, "delta0", v.real("delta0", self.delta0, lo=0.0, hi=1.0))

    def _delta(self, eps: FloatArray) -> FloatArray:
        e0, d0 = self.epsilon0, self.delta0
        a = np.abs(eps)
        pos = d0 + (1.0 - d0) * np.exp(e0 - np.logaddexp(0.0, e0)) * -np.expm1(np.minimum(a - e0, 0.0))
        out = np.where(eps >= 0, pos, -np.expm1(eps) + np.exp(eps) * pos)  # swap identity below 0
        capped: FloatArray = np.minimum(out, 1.0)
        return capped

    def to_dict(self) -> dict[str, Any]:
        return {"family": self.family, "epsilon0": self.epsilon0, "delta0": self.delta0}


_FAMILIES = {"gshm-discrete": GSHMDiscreteProfile, GSHM: GSHMProfile, "laplace-discrete": LaplaceDiscreteProfile,
             "csh": CSHProfile, "csh-rounded": RoundedCSHProfile, "gaussian": GaussianProfile,
             "pure": PureProfile, "approx-dp": ApproxDPProfile}


def profile_from_dict(d: Mapping[str, Any]) -> PrivacyProfile:
    """Inverse of ``to_dict`` (the ledger's stored JSON)."""
    if not isinstance(d, Mapping) or d.get("family") not in _FAMILIES:
        raise InvalidParameterError(f"not a stored privacy profile: {d!r}")
    kw = {k: val for k, val in d.items() if k != "family"}
    profile: PrivacyProfile = _FAMILIES[d["family"]](**kw)
    return profile


def _bound(value: int | None, name: str, mechanism: str) -> int:
    """A calibration's contribution bound ``name`` as an int (an error naming it if the calibration lacks it)."""
    if value is None:
        raise InvalidParameterError(f"a {mechanism} calibration without {name} has no privacy profile", param=name)
    return int(value)


def profile_of(calibration: Calibration) -> PrivacyProfile | None:
    """The profile of the noise a release made with ``calibration`` samples; ``None`` if it has none.

    THE one bridge from :class:`~.calibration.Calibration` to profiles, dispatching on the typed noise law
    (:mod:`.laws`). No profile (→ basic composition in the ledger) for: continuous Laplace, Algorithm-4 CSH
    (zCDP), the discrete correlated Gaussian, and anything else without a proved composable form.
    """
    cal, law, mech = calibration, calibration.noise, calibration.mechanism
    if mech == GSHM and isinstance(law, laws.DiscreteGaussian):
        return GSHMDiscreteProfile(Fraction(law.sigma2), int(cal.tau), _bound(cal.l0, "l0", mech))
    if mech == GSHM and isinstance(law, laws.Gaussian):
        return GSHMProfile(float(cal.sigma), float(cal.tau), _bound(cal.l0, "l0", mech), float(cal.mu_o2),
                           cal.analysis)
    if mech == LAPLACE and isinstance(law, laws.DiscreteLaplace):
        return LaplaceDiscreteProfile(Fraction(law.scale), int(cal.tau), _bound(cal.l0, "l0", mech))
    if mech in ("csh", TOPK_CSH):
        k = _bound(cal.k if cal.k is not None else cal.top_k, "k", mech)
        if isinstance(law, laws.RoundedCorrelatedGaussian):
            return RoundedCSHProfile(float(cal.sigma), int(cal.tau), k, cal.analysis.removeprefix("rounded-"),
                                     bool(cal.debias))
        if isinstance(law, laws.CorrelatedGaussian):
            return CSHProfile(float(cal.sigma), float(cal.tau), k, cal.analysis, bool(cal.debias))
        return None
    if mech == CORRELATED_GAUSSIAN and isinstance(law, laws.DenseCorrelatedGaussian):
        return GaussianProfile(1.0 / float(cal.sigma))
    return None


def __getattr__(name: str) -> Any:
    """``tradeoff_from_profile`` (:mod:`.conversions`), listed in ``__all__``, read on first use."""
    if name == "tradeoff_from_profile":
        return _conversions.tradeoff_from_profile
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
