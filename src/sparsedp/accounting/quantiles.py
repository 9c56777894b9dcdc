"""Accounting of per-key quantiles: the selection mechanism's law on a grid, its exact l0-fold composition, and
the split of a release's ε between the count and its quantiles.

The mechanism (``docs/proofs/quantiles.md``; sampled by :mod:`sparsedp.noise.exponential`)
    A key's values, each clipped to [lower, upper], fall in ``B`` public grid cells with counts ``h_0 … h_{B−1}``.
    For the level ``q = a/b`` (lowest terms) cell ``k`` has the integer utility

        U_k = −|(b − a)·L_k − a·G_k|,   L_k = Σ_{j<k} h_j,   G_k = Σ_{j>k} h_j,

    (b times the utility ``−|(1 − q)·L_k − q·G_k|`` of McSherry & Talwar's exponential mechanism for a quantile,
    Smith, "Privacy-preserving statistical estimation with optimal convergence rates", STOC 2011, discretised to
    the grid as in OpenDP's quantile score). Adding or removing one value changes ``L_k`` or ``G_k`` by one for
    every ``k`` other than the value's own cell, so ``|ΔU_k| <= max(a, b − a)``; a unit contributing at most
    ``m`` values to the key moves every ``U_k`` by at most ``Δ = m·max(a, b − a)`` (Lemma 1 of the proof).
    The released mechanism is permute-and-flip at ``t = ε/(2Δ)`` (McKenna & Sheldon, "Permute-and-Flip: A new
    mechanism for differentially private selection", NeurIPS 2020, arXiv:2010.12603, Thm 1: ε-DP), whose law is
    :func:`permute_and_flip_law`; the exponential mechanism ``P[k] ∝ exp(ε·U_k/(2Δ))`` (McSherry & Talwar 2007,
    Thm 6), :func:`exponential_law`, has the same ε and is never more accurate in expectation (McKenna & Sheldon
    2020, Thm 2). Both are ε-DP for add/remove neighbours of the key's multiset (the utilities of a neighbour move
    in both directions, hence the factor 2).

Composition over keys
    Each unit keeps at most ``l0`` keys (enforced by the engine), so a unit changes the multisets of at most
    ``l0`` keys; the mechanisms of the other keys have identical laws on the two neighbours. The quantiles of all
    keys are therefore the ``l0``-fold composition of ε-DP mechanisms per unit, whose exact privacy profile is that
    of ``l0`` independent randomised responses (Kairouz, Oh & Viswanath, "The composition theorem for differential
    privacy", ICML 2015, arXiv:1311.0776, Thm 3.3; the randomised response pair dominates every ε-DP mechanism):
    :func:`pure_composition_delta`. Releasing them only for the keys the count released is post-processing of
    (count release, all quantiles) (proof, Theorem 2).

The split (:func:`split_budget`)
    Quantile ``j`` gets ``share_j·ε`` (default :data:`DEFAULT_QUANTILES_SHARE` ``= 4/5`` of ε for the ``J``
    quantiles together, ``3/(4J)`` each), spent as ``ε_key = share_j·ε/l0`` per key; the count mechanism is
    calibrated at ``(ε − Σ_j share_j·ε, δ)``. Why 4/5 (``docs/howto/quantiles.md``): the count only decides which
    keys appear, and GSHM keeps a usable threshold at ε/5 (at ε = 1, δ = 1e-6, l0 = 5 a margin of 216 units, below
    the 222 of OpenDP's count at ε/3), while each quantile's share is divided by ``l0`` and its error falls in
    proportion to it; measured on the demo log in ``docs/benchmarks_quantiles.md``. By basic composition the release is (ε, δ)-DP; the ledger composes the parts'
    events (the count's own event and one :class:`~.events.ComposedPureEvent` per quantile) by privacy-loss
    distributions, which is never looser.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Sequence

import numpy as np
import numpy.typing as npt

from .. import _validate as v
from ..errors import InvalidParameterError
from ._types import FloatArray, RealOrArray

#: the part of ε the quantiles of a release get together when no ``share`` is given (module docstring)
DEFAULT_QUANTILES_SHARE = 0.8

__all__ = ["DEFAULT_QUANTILES_SHARE", "quantile_utilities", "exponential_law", "permute_and_flip_law", "pure_composition_delta", "utility_gap", "QuantileSplit",
           "split_budget", "em_scale"]


def quantile_utilities(cell_counts: npt.ArrayLike, level: Fraction) -> np.ndarray:
    """The integer utilities ``U_k = −|(b − a)·L_k − a·G_k|`` of every grid cell (module docstring), int64."""
    h = np.asarray(cell_counts, dtype=np.int64)
    if h.ndim != 1 or h.size < 1 or (h < 0).any():
        raise InvalidParameterError("cell_counts must be a non-empty 1-d array of non-negative counts")
    lv = Fraction(level)
    a, b = lv.numerator, lv.denominator
    below = np.concatenate(([0], np.cumsum(h)[:-1]))
    above = int(h.sum()) - below - h
    if int(h.sum()) * b >= 1 << 62:
        raise InvalidParameterError("too many values in one key for the int64 utilities")
    return -np.abs((b - a) * below - a * above)


def em_scale(epsilon: float, sensitivity: int) -> Fraction:
    """The exact rational ``t = ε/(2Δ)`` of the weights ``exp(t·U_k)`` (ε read at its binary value)."""
    return Fraction(v.epsilon(epsilon)) / (2 * v.integer("sensitivity", sensitivity, lo=1))


def exponential_law(utilities: npt.ArrayLike, epsilon: float, sensitivity: int) -> FloatArray:
    """P[k] ∝ exp(ε·U_k/(2Δ)) of the exponential mechanism over the cells (float64, log-sum-exp)."""
    u = np.asarray(utilities, dtype=float)
    t = float(em_scale(epsilon, sensitivity))
    z = t * (u - u.max())
    w = np.exp(z)
    out: FloatArray = w / w.sum()
    return out


def permute_and_flip_law(utilities: npt.ArrayLike, epsilon: float, sensitivity: int) -> FloatArray:
    """The output law of permute-and-flip at ``t = ε/(2Δ)`` (McKenna & Sheldon 2020, arXiv:2010.12603):
    ``P[k] = p_k ∫_0^1 Π_{j≠k}(1 − τ p_j) dτ``, ``p_j = exp(−t·(max U − U_j))``.

    Why: give every cell an independent uniform arrival time; a uniformly random order is the order of the
    times, and given cell k's time τ every other cell comes before it independently with probability τ, and is
    then rejected with probability 1 − p_j. The integrand is a polynomial of degree ``len − 1`` in τ, integrated
    exactly (up to float rounding) by Gauss–Legendre quadrature with ``len`` nodes. For tests and small grids."""
    u = np.asarray(utilities, dtype=float)
    t = float(em_scale(epsilon, sensitivity))
    p = np.exp(-t * (u.max() - u))
    nodes, weights = np.polynomial.legendre.leggauss(max(1, u.size))
    tau = (nodes + 1.0) / 2.0
    w = weights / 2.0
    one_minus = 1.0 - np.outer(tau, p)                  # (nodes, cells)
    log_all = np.log(one_minus).sum(axis=1)             # 1 − τ p_j > 0 at every interior node
    inner = np.exp(log_all[:, None] - np.log(one_minus))  # Π_{j≠k}
    out: FloatArray = p * (w @ inner)
    normalised: FloatArray = out / out.sum()
    return normalised


def utility_gap(epsilon: float, sensitivity: int, cells: int, alpha: float) -> float:
    """``g`` with ``P[U_out < U_max − g] <= alpha`` for every input: ``(2Δ/ε)·ln(cells/alpha)``.

    Both permute-and-flip and the exponential mechanism output cell k with probability at most
    ``p_k = exp(−t·(U_max − U_k))``, ``t = ε/(2Δ)`` (:func:`permute_and_flip_law`: the integral is at most 1; the
    exponential mechanism's normaliser is at least 1; McSherry & Talwar 2007, Thm 8; Dwork & Roth 2014, Thm 3.11),
    so the cells below ``U_max − g`` have total probability at most ``cells·exp(−t·g)``.
    Public (no data): the rank-space half-width of a (1 − alpha) statement about a released quantile."""
    a = v.real("alpha", alpha, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
    return 2.0 * v.integer("sensitivity", sensitivity, lo=1) / v.epsilon(epsilon) * math.log(
        v.integer("cells", cells, lo=1) / a)


def pure_composition_delta(epsilon0: float, k: int, epsilon: RealOrArray) -> RealOrArray:
    """Exact δ(ε) of the ``k``-fold composition of ε0-DP mechanisms (Kairouz, Oh & Viswanath 2015, Thm 3.3).

    The ``k``-fold product of the randomised-response pair ``P = (p, 1 − p)``, ``Q = (1 − p, p)``,
    ``p = e^{ε0}/(1 + e^{ε0})``, dominates every such composition; its privacy loss is ``(k − 2i)·ε0`` with
    ``i ~ Binomial(k, 1 − p)`` under P, so for ε >= 0

        δ(ε) = Σ_{i : (k − 2i)ε0 > ε} C(k, i)·(p^{k−i}(1 − p)^i − e^ε·p^i(1 − p)^{k−i}),

    and ``δ(ε) = 1 − e^ε + e^ε·δ(−ε)`` below 0 (the pair is symmetric). Vectorised over ε, log-space terms."""
    e0 = v.nonnegative("epsilon0", epsilon0)
    kk = v.integer("k", k, lo=1)
    eps = np.atleast_1d(np.asarray(epsilon, dtype=float))
    i = np.arange(kk + 1, dtype=float)
    log_c = np.array([math.lgamma(kk + 1) - math.lgamma(j + 1) - math.lgamma(kk - j + 1) for j in range(kk + 1)])
    lp = e0 - np.logaddexp(0.0, e0)          # log p
    lq = -np.logaddexp(0.0, e0)              # log (1 − p)
    log_p_term = log_c + (kk - i) * lp + i * lq
    log_q_term = log_c + i * lp + (kk - i) * lq
    loss = (kk - 2 * i) * e0

    def pos(e: float) -> float:
        m = loss > e
        if not m.any():
            return 0.0
        terms = np.exp(log_p_term[m]) - np.exp(e + log_q_term[m])
        return float(max(0.0, math.fsum(terms)))

    out = np.array([pos(e) if e >= 0 else -math.expm1(e) + math.exp(e) * pos(-e) for e in eps])
    out = np.minimum(np.maximum(out, 0.0), 1.0)
    return float(out[0]) if np.ndim(epsilon) == 0 else out


@dataclass(frozen=True)
class QuantileSplit:
    """The split of a release's (ε, δ): the count mechanism's ``(count_epsilon, count_delta)``; per quantile ``j``
    its total ``quantile_epsilons[j]`` (the basic-composition ε of its ``l0`` per-key mechanisms) and the per-key
    ``key_epsilons[j] = quantile_epsilons[j]/l0`` each per-key mechanism runs at."""

    epsilon: float
    delta: float
    l0: int
    count_epsilon: float
    count_delta: float
    quantile_epsilons: tuple[float, ...]
    key_epsilons: tuple[float, ...]

    def lines(self, names: Sequence[str]) -> tuple[str, ...]:
        """Public description of the split (the report shows it)."""
        out = [f"budget split: count (and SUM/MEAN) epsilon={self.count_epsilon:.6g}, delta={self.count_delta:.3g}"]
        for n, e, ek in zip(names, self.quantile_epsilons, self.key_epsilons):
            out.append(f"budget split: {n} epsilon={e:.6g} (permute-and-flip at epsilon={ek:.6g} per key, "
                       f"l0={self.l0} keys per unit, pure DP)")
        return tuple(out)


def split_budget(epsilon: float, delta: float, l0: int, shares: Sequence[float | None]) -> QuantileSplit:
    """The split of the module docstring: quantile ``j`` gets ``shares[j]·ε`` (``None``: ``4/(5J)``), the count
    the rest of ε and all of δ. Refused if the quantiles' shares leave nothing for the count."""
    eps = v.epsilon(epsilon)
    dlt = v.real("delta", delta, lo=0.0, hi=1.0, hi_open=True)
    k = v.integer("l0", l0, lo=1)
    n = len(shares)
    if n == 0:
        raise InvalidParameterError("split_budget needs at least one quantile")
    sh = [DEFAULT_QUANTILES_SHARE / n if s is None else float(s) for s in shares]
    total = math.fsum(sh)
    if not total < 1.0:
        raise InvalidParameterError(f"the quantiles' shares of epsilon add up to {total:g}; they must leave a part "
                                    f"for the count (sum of Quantile(..., share=…) below 1)", param="share")
    q_eps = tuple(s * eps for s in sh)
    count_eps = eps - math.fsum(q_eps)
    return QuantileSplit(epsilon=eps, delta=dlt, l0=k, count_epsilon=count_eps, count_delta=dlt,
                         quantile_epsilons=q_eps, key_epsilons=tuple(e / k for e in q_eps))
