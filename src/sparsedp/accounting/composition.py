"""Composable form of the thresholded mechanisms: a dominating pair with a bad event, and its composition.

The argument is written out in ``docs/proofs/composition.md``; in short (that document's Theorem 1):

A release is described by a :class:`DominatingPair` — a *core* pair ``(C1, C0)`` that is a product of
symmetric shift pairs (continuous Gaussian, discrete Gaussian, discrete Laplace coordinates shifted by
one), an *infinite-loss mass* ``p`` (the threshold event of GSHM / the Laplace stability histogram: a key
present in only one neighbour is released) and a *total-variation slack* ``t`` (the bad event of CSH,
Lebeda & Retschmeier (2024) Thm 3.3, whose proof moves the output distribution by at most ``t`` in total variation). With

    A = (1 − p)·C1 + p·⊤,      B = C0                      (⊤ an output B never produces)

every ordered neighbouring pair (P, Q) of the mechanism satisfies, for all α > 0,
``H_α(P‖Q) ≤ H_α(A‖B) + t`` (and the same with the roles of the neighbours swapped, for (B, A)).
Pairs of this form are closed under composition: cores multiply (like parts merge exactly: Gaussian μ²
add, discrete-Gaussian / discrete-Laplace coordinate counts of the same scale add), ``1 − p`` multiply
and ``t`` add; for an adaptive sequence of releases whose pairs are fixed in advance,

    δ_total(ε) ≤ max( p + (1 − p)·H_{e^{ε − ln(1−p)}}(C1‖C0),  H_{e^{ε + ln(1−p)}}(C1‖C0) ) + t

(the core is symmetric, H(C1‖C0) = H(C0‖C1)). ``H`` of the core is exact where the core has one kind of
part (Balle–Wang for Gaussians; the Poisson-summation bound of :mod:`.discrete_histograms` for discrete
Gaussians; the binomial form for discrete Laplace) and otherwise comes from :mod:`.pld`, a privacy-loss
distribution composed numerically with pessimistic discretisation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Iterable, overload

import numpy as np
import numpy.typing as npt

from .. import _validate as v
from ..errors import InvalidParameterError, InvalidTypeError
from . import pld
from ._types import FloatArray, RealOrArray
from .conversions import epsilon_from_delta, tradeoff_from_profile
from .discrete_histograms import dgauss_shift_hockey_stick, dlaplace_shift_hockey_stick
from .gaussian import gaussian_delta

__all__ = ["DominatingPair", "compose"]

#: relative widening of ln(1 − p) and of t (absorbs the float rounding of the tails; conservative)
_REL = 1e-12


def _merge(parts: Iterable[tuple[Fraction, int]]) -> tuple[tuple[Fraction, int], ...]:
    acc: dict[Fraction, int] = {}
    for s, j in parts:
        acc[Fraction(s)] = acc.get(Fraction(s), 0) + int(j)
    return tuple(sorted(acc.items()))


@dataclass(frozen=True)
class DominatingPair:
    """``A = (1 − p)·C1 + p·⊤`` vs ``B = C0``, plus a total-variation slack ``tv`` (module docstring).

    Attributes:
        gaussian_mu2: μ² of the continuous-Gaussian part of the core (N(μ, 1) vs N(0, 1)).
        dgauss: ``((s, j), …)``: j coordinates N_Z(1, s) vs N_Z(0, s) for each discrete-Gaussian scale s.
        dlaplace: ``((t, j), …)``: j coordinates of discrete Laplace(t) shifted by one vs not.
        log_keep: ln(1 − p) <= 0, p = probability of the infinite-loss (threshold) event under A.
        tv: additive total-variation slack (CSH's bad event).
    """

    gaussian_mu2: float = 0.0
    dgauss: tuple[tuple[Fraction, int], ...] = ()
    dlaplace: tuple[tuple[Fraction, int], ...] = ()
    log_keep: float = 0.0
    tv: float = 0.0

    def __post_init__(self) -> None:
        if not (self.gaussian_mu2 >= 0.0 and math.isfinite(self.gaussian_mu2)):
            raise InvalidParameterError(f"gaussian_mu2 must be finite and >= 0, got {self.gaussian_mu2!r}")
        if not self.log_keep <= 0.0:
            raise InvalidParameterError(f"log_keep must be <= 0, got {self.log_keep!r}")
        if not 0.0 <= self.tv <= 1.0:
            raise InvalidParameterError(f"tv must be in [0, 1], got {self.tv!r}")
        object.__setattr__(self, "dgauss", _merge(self.dgauss))
        object.__setattr__(self, "dlaplace", _merge(self.dlaplace))

    # -- construction ------------------------------------------------------------------------------
    @staticmethod
    def bad_event(p: float) -> float:
        """``log_keep`` for an infinite-loss probability ``p``, widened conservatively."""
        if p <= 0.0:
            return 0.0
        if p >= 1.0:
            return -math.inf
        return math.log1p(-p) * (1.0 + _REL)

    def compose(self, other: "DominatingPair") -> "DominatingPair":
        """The pair of the two releases run one after the other (docs/proofs/composition.md, Lemma 3)."""
        return DominatingPair(
            gaussian_mu2=self.gaussian_mu2 + other.gaussian_mu2,
            dgauss=self.dgauss + other.dgauss, dlaplace=self.dlaplace + other.dlaplace,
            log_keep=(self.log_keep + other.log_keep) * (1.0 + _REL),
            tv=min(1.0, (self.tv + other.tv) * (1.0 + _REL)))

    def repeat(self, k: int) -> "DominatingPair":
        """The pair of ``k`` runs of this release."""
        k = v.integer("k", k, lo=0)
        return DominatingPair(
            gaussian_mu2=self.gaussian_mu2 * k,
            dgauss=tuple((s, j * k) for s, j in self.dgauss),
            dlaplace=tuple((t, j * k) for t, j in self.dlaplace),
            log_keep=self.log_keep * k * (1.0 + _REL) if k else 0.0,
            tv=min(1.0, self.tv * k * (1.0 + _REL)))

    # -- evaluation --------------------------------------------------------------------------------
    @property
    def p_infinite(self) -> float:
        """p: probability of the infinite-loss event under A."""
        return float(-math.expm1(self.log_keep))

    def core_hockey_stick(self, epsilon: npt.ArrayLike) -> FloatArray:
        """``H_{e^ε}(C1‖C0)`` (= ``H_{e^ε}(C0‖C1)``) for an array of real ε (upper bound)."""
        eps = np.atleast_1d(np.asarray(epsilon, dtype=float))
        kinds = (self.gaussian_mu2 > 0) + len(self.dgauss) + len(self.dlaplace)
        if kinds == 0:
            pure: FloatArray = np.maximum(0.0, -np.expm1(eps))
            return pure
        if kinds == 1:
            if self.gaussian_mu2 > 0:
                return np.atleast_1d(gaussian_delta(math.sqrt(self.gaussian_mu2), eps))
            if self.dgauss:
                (s, j), = self.dgauss
                return np.array([dgauss_shift_hockey_stick(j, float(e), s) for e in eps])
            (t, j), = self.dlaplace
            return np.atleast_1d(dlaplace_shift_hockey_stick(j, eps, t))
        grid = self.__dict__.get("_grid")
        if grid is None:  # computed once per pair (the ledger evaluates it many times in a bisection)
            grid = pld.core_distribution(self)
            object.__setattr__(self, "_grid", grid)
        return grid.hockey_stick(eps)

    @overload
    def delta(self, epsilon: float) -> float: ...
    @overload
    def delta(self, epsilon: FloatArray) -> FloatArray: ...
    def delta(self, epsilon: RealOrArray) -> RealOrArray:
        """δ(ε) of this pair (module docstring): a valid δ for every real ε. Vectorised; float for scalars."""
        eps = np.atleast_1d(np.asarray(epsilon, dtype=float))
        lk = self.log_keep
        if lk == -math.inf:
            out = np.ones_like(eps)
        else:
            p = -math.expm1(lk)
            h = self.core_hockey_stick(np.concatenate([eps - lk, eps + lk]))
            fwd = p + (1.0 - p) * h[: eps.size]
            rev = h[eps.size:]
            out = np.minimum(1.0, np.maximum(fwd, rev) + self.tv)
        return float(out[0]) if np.ndim(epsilon) == 0 else out

    def epsilon(self, delta: float, *, hi: float = 200.0) -> float:
        """Smallest ε >= 0 (to 1e-9 relative, rounded up) with ``delta(ε) <= delta``; inf if none."""
        return epsilon_from_delta(self.delta, delta, hi=hi)

    def tradeoff_curve(self, alpha: npt.ArrayLike) -> FloatArray:
        """f-DP trade-off curve implied by :meth:`delta` (Dong–Roth–Su primal–dual conversion, finite ε grid)."""
        return tradeoff_from_profile(self.delta, alpha)

    # -- serialisation -----------------------------------------------------------------------------
    def to_dict(self) -> dict[str, float | list[list[str | int]]]:
        return {"gaussian_mu2": self.gaussian_mu2,
                "dgauss": [[str(s), j] for s, j in self.dgauss],
                "dlaplace": [[str(t), j] for t, j in self.dlaplace],
                "log_keep": self.log_keep, "tv": self.tv}


def compose(pairs: Iterable[DominatingPair]) -> DominatingPair:
    """Composition of a sequence of pairs (docs/proofs/composition.md, Theorem 1)."""
    out = DominatingPair()
    for p in pairs:
        if not isinstance(p, DominatingPair):
            raise InvalidTypeError(f"expected DominatingPair, got {type(p).__name__}")
        out = out.compose(p)
    return out

