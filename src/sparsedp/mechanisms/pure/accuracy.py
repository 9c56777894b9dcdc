"""Error bounds of the pure-DP histograms (Balcer & Vadhan (2019) Figures 1 and 2, Cor 7.3; spec §7.1–§7.5).

Two kinds of helpers:

* ``figure1`` / ``figure2`` / ``corollary73``: the paper's closed-form table entries
  ``⌈(c/ε)·ln(·)⌉`` exactly as printed (floating ``ln``; reporting only). Figure 2's FastSample row is
  as printed although it is only derivable with ``γ = β/(8|X|)`` (erratum E3).
* ``*_accuracy``: tighter bounds computed **exactly** from the geometric tail
  ``P(|Y| > A) = 2α^{A+1}/(1+α)`` (spec §7.5; :meth:`GeoSample.accuracy`), composed with the union
  bounds of Thms 5.1, 6.1, 6.6 and 7.2. These are what the library reports.

Accuracy vocabulary (paper Defs 2.1–2.3): ``(a, β)``-per-query: each bin is within ``a`` w.p. ``1−β``;
``(a, β)``-simultaneous: all bins at once; "on counts larger than t": only bins whose true count
exceeds ``t`` (sparse releases must suppress small counts, Thm 1.5).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from ...errors import InvalidParameterError
from ...noise.clamped_geometric import CountingSampler, FastSample
from .compact import CompactHistogram

__all__ = [
    "figure1", "figure2", "corollary73", "Accuracy",
    "basic_accuracy", "keep_heavy_accuracy", "pure_sparse_accuracy", "compact_accuracy",
    "stability_accuracy",
]


def _c(x: float) -> int:
    return math.ceil(x)


def figure1(epsilon: float, domain_size: int, beta: float) -> dict[str, tuple[int, int]]:
    """Figure 1 (BasicHistogram_{M,X}): ``{M: (per-query a, simultaneous a)}``; FastSample uses
    ``γ = β/(2|X|)``."""
    e, X, b = float(epsilon), float(domain_size), float(beta)
    return {
        "geometric": (_c(2 / e * math.log(1 / b)), _c(2 / e * math.log(X / b))),
        "geosample": (_c(9 / (2 * e) * math.log(1 / b)), _c(9 / (2 * e) * math.log(X / b))),
        "fastsample": (_c(9 / (2 * e) * math.log(2 / b)), _c(9 / (2 * e) * math.log(2 * X / b))),
    }


def figure2(epsilon: float, domain_size: int, beta: float) -> dict[str, tuple[int, int, int]]:
    """Figure 2 (PureSparseHistogram_{M,ε,β/6,β/6}, erratum E7): ``{M: (per-query a, threshold t,
    simultaneous a)}`` as printed (FastSample row consistent with ``γ = β/(8|X|)``, erratum E3)."""
    e, X, b = float(epsilon), float(domain_size), float(beta)
    k = 9 / (2 * e)
    return {
        "geosample": (_c(k * math.log(4 / b)), 2 * _c(k * math.log(4 * X / b)), 2 * _c(k * math.log(2 * X / b))),
        "fastsample": (_c(k * math.log(8 / b)), 2 * _c(k * math.log(8 * X / b)), 2 * _c(k * math.log(4 * X / b))),
    }


def corollary73(epsilon: float, domain_size: int, beta: float) -> tuple[int, int]:
    """Cor 7.3 (CompactHistogram): ``(⌈(5/ε)ln(2/β)⌉, ⌈(5/ε)ln(2|X|/β)⌉)``."""
    e, X, b = float(epsilon), float(domain_size), float(beta)
    return _c(5 / e * math.log(2 / b)), _c(5 / e * math.log(2 * X / b))


@dataclass(frozen=True)
class Accuracy:
    """Exact error guarantees of one configured mechanism at total failure probability ``beta``.

    ``per_query``: each reported bin whose true count exceeds ``threshold`` is within ``per_query`` of
    it w.p. ``>= 1 − beta``; ``simultaneous``: every bin (released or not) is within ``simultaneous``
    w.p. ``>= 1 − beta``. ``threshold = 0`` means the per-query bound holds for all bins.
    """

    per_query: int
    threshold: int
    simultaneous: int
    beta: float


def _count_acc(sampler: CountingSampler, beta: Fraction) -> int:
    if beta <= 0:
        raise InvalidParameterError("the failure-probability budget left for the noise is <= 0; "
                                    "raise beta or lower beta1/beta2")
    if isinstance(sampler, FastSample) and beta <= sampler.gamma:
        return sampler.n  # no guarantee below gamma: the trivial bound (counts lie in [0, n])
    return sampler.accuracy(beta)


def basic_accuracy(sampler: CountingSampler, beta: Fraction | float | str, domain_size: int) -> Accuracy:
    """Thm 5.1: per-query ``a(β)``, simultaneous ``a(β/|X|)`` (union bound over the |X| bins)."""
    beta = Fraction(beta)
    return Accuracy(_count_acc(sampler, beta), 0, _count_acc(sampler, beta / domain_size), float(beta))


def keep_heavy_accuracy(sampler: CountingSampler, beta: Fraction | float | str, domain_size: int) -> Accuracy:
    """Thm 6.1: ``(a₁, 2β′)`` per-query on counts > ``2a₂``, ``(2a₂, β′)`` simultaneous, with the
    BasicHistogram's failure ``β′ = β/2`` (per-query) resp. ``β`` (simultaneous)."""
    beta = Fraction(beta)
    a1 = _count_acc(sampler, beta / 2)
    a2_pq = _count_acc(sampler, beta / 2 / domain_size)
    a2_sim = _count_acc(sampler, beta / domain_size)
    return Accuracy(a1, 2 * a2_pq, 2 * a2_sim, float(beta))


def pure_sparse_accuracy(sampler: CountingSampler, beta: Fraction | float | str, domain_size: int,
                         beta1: Fraction | float | str | None, beta2: Fraction | float | str) -> Accuracy:
    """Thm 6.6: per-query ``(a₁, β₁+2β₂+2β₃)`` on counts > ``2a₂``; simultaneous ``(2a₂, β₁+2β₂+β₃)``;
    ``β₃`` is what remains of ``beta``. ``beta1=None`` (exact label sampling) counts as ``β₁ = 0``."""
    beta, b1, b2 = Fraction(beta), Fraction(beta1 or 0), Fraction(beta2)
    b3_pq = (beta - b1 - 2 * b2) / 2
    b3_sim = beta - b1 - 2 * b2
    a1 = _count_acc(sampler, b3_pq)
    thr = 2 * _count_acc(sampler, b3_pq / domain_size)
    return Accuracy(a1, thr, 2 * _count_acc(sampler, b3_sim / domain_size), float(beta))


def compact_accuracy(hist: CompactHistogram, beta: Fraction | float | str) -> Accuracy:
    """Thm 7.2 for a released :class:`~.compact.CompactHistogram` (its public parameters only): per-query
    ``a`` such that both the occupied-bin law ``M(c)`` and the empty-bin law ``M₀`` are within ``a``
    w.p. ``1−β``; simultaneous at ``β/|X|`` per bin."""
    beta = Fraction(beta)
    p0 = hist.m0_pmf()

    def acc(b: Fraction) -> int:
        a = _count_acc(hist.sampler, b)
        tail = sum(p0[a + 1:], Fraction(0))
        while tail > b:  # empty bins: P(M₀ > a) <= b as well
            a += 1
            tail -= p0[a]
        return a

    return Accuracy(acc(beta), 0, acc(beta / hist.domain_size), float(beta))


def stability_accuracy(sampler: CountingSampler, beta: Fraction | float | str, tau: int) -> Accuracy:
    """Stability histogram: a bin with true count > ``τ + a`` is released within ``a = a(β)``; all bins
    are within ``τ + a(β/n)`` simultaneously (only the ``<= n`` occupied bins carry noise)."""
    beta = Fraction(beta)
    a1 = _count_acc(sampler, beta)
    return Accuracy(a1, tau + a1, tau + _count_acc(sampler, beta / sampler.n), float(beta))
