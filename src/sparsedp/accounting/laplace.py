"""The Laplace / geometric stability histogram: the classic thresholded baseline.

This is the mechanism peers ship as OpenDP ``make_laplace_threshold``, Google's ``LAPLACE_THRESHOLDING`` /
``LaplacePartitionSelection`` (``google/differential-privacy``, ``cc/algorithms/partition-selection.h``) and
PipelineDP's Laplace partition selection: Wilson, Zhang, Lam, Desfontaines, Simmons-Marengo, Gipson,
"Differentially Private SQL with Bounded User Contribution", PoPETs 2020 (threshold τ* = 1 −
(l0/ε)·ln(2 − 2(1−δ)^{1/l0})); the stability-histogram idea goes back to Korolova, Kenthapadi, Mishra,
Ntoulas (WWW 2009) and Bun, Nissim, Stemmer (PODS 2016). ``sparsedp`` ships it so ``plan`` can show users
what the Gaussian mechanisms gain.

Mechanism. Each privacy unit adds at most 1 to each of at most ``l0`` distinct keys (add/remove
neighbours, contribution bounds enforced by the engine). To every non-zero count add independent noise
``Z`` of scale ``b`` — continuous Laplace ``Lap(b)`` (density ∝ e^{−|z|/b}) or, with ``discrete=True``, the
discrete Laplace / two-sided geometric law P[Z = z] ∝ e^{−|z|/b} on ℤ — and release the noisy counts
**strictly greater** than ``1 + τ`` (``tau`` is the margin over the pre-threshold 1, see DESIGN.md).

Privacy (written argument; the same add-the-deltas structure as Karrer et al. (2022) Thm 4.1 / Lebeda & Retschmeier (2024) Lemma 2.6, with
the Laplace hockey stick). Let X' = X ∪ {u}; u raises j keys present in X by 1 and creates m new keys of
count 1, j + m <= l0. Let q = P[Z > τ] (the release probability of a count-1 key) and p = (1 − q)^m the
probability that none of the m new keys is released (event E). On the j shared keys the noise is a product
Laplace with ℓ1 shift <= j, so that part is (j/b)-DP, and j/b <= l0/b <= ε when ``b >= l0/ε`` (required).

* X' vs X: P[M(X') ∈ S] <= P[M(X') ∈ S, E] + P[not E] <= e^{j/b} P[M(X) ∈ S] + (1 − p), so δ <= 1 − p.
* X vs X': M(X) never shows a new key, so P[M(X) ∈ S] − e^ε P[M(X') ∈ S] = A − e^ε p B with A, B the
  probabilities of S for the shared-key part under X and X'. Since A <= e^{j/b} B, this is
  <= A (1 − e^{ε − j/b} p) <= 1 − e^{ε − j/b}(1 − q)^m <= 1 − (1 − q)^m (as ε >= j/b).

Both are at most 1 − (1 − q)^{l0} (m = l0, j = 0 is attained by a unit whose l0 keys are all new), so

    δ = 1 − (1 − q)^{l0},    q = P[Z > τ] = ½ e^{−τ/b} (continuous, τ >= 0),
                             q = P[Z >= ⌊τ⌋ + 1] = α^{⌊τ⌋+1} / (1 + α), α = e^{−1/b} (discrete).

This δ is exact for the worst pair (j = 0): the release of any new key happens with probability exactly
1 − (1 − q)^{l0} under X' and never under X. For integer noisy counts, "> 1 + τ" and "≥ 2 + ⌊τ⌋" are the same
test; the discrete margins returned here are integers. Google's formula is the continuous threshold solved
for δ: τ = b·ln(1/(2·(1 − (1 − δ)^{1/l0}))).

(Google's Gaussian partition selection is GSHM with add-the-deltas and a fixed δ/2 + δ/2 split — Karrer et al. (2022)
§3.4; ``gshm`` with ``analysis="add"`` optimises that split and ``"exact"`` dominates both.)
"""

from __future__ import annotations

import math
from fractions import Fraction

from .. import _validate as v
from ..errors import InfeasibleError, InvalidTypeError

__all__ = ["laplace_delta", "laplace_tau", "laplace_scale", "laplace_calibrate", "laplace_noise_std"]


def _check_scale(eps: float, scale: float, l0: int) -> None:
    # Exact rational check that the shared-key part is ε-DP: l0 / scale <= ε.
    if Fraction(l0) > Fraction(scale) * Fraction(eps):
        raise InfeasibleError(
            f"scale={scale!r} is too small for epsilon={eps!r} with l0={l0}: the Laplace stability histogram "
            f"needs scale >= l0/epsilon = {l0 / eps:.6g}")


def _log_release_prob(scale: float, tau: float, discrete: bool) -> float:
    """log q, q = P[Z > τ] for one count-1 key."""
    if discrete:
        m = math.floor(tau) + 1
        return -m / scale - math.log1p(math.exp(-1.0 / scale))
    return -math.log(2.0) - tau / scale


def laplace_delta(epsilon: float, scale: float, tau: float, l0: int, discrete: bool = False) -> float:
    """δ of the Laplace (or, ``discrete=True``, geometric) stability histogram: 1 − (1 − q)^{l0}.

    q = ½e^{−τ/b} (continuous) or e^{−(⌊τ⌋+1)/b}/(1 + e^{−1/b}) (discrete), the probability that a count-1
    key's noisy value exceeds 1 + τ. Requires ``scale >= l0/epsilon`` (then the shared keys cost no δ);
    see the module docstring for the argument and sources (Wilson et al. 2020; Google
    ``LaplacePartitionSelection``). ``tau`` is the margin >= 0, the release test is strict (> 1 + τ).
    """
    eps = v.epsilon(epsilon)
    scale = v.positive("scale", scale)
    tau = v.nonnegative("tau", tau)
    l0 = v.integer("l0", l0, lo=1)
    if not isinstance(discrete, bool):
        raise InvalidTypeError(f"discrete must be a bool, got {type(discrete).__name__} {discrete!r}")
    _check_scale(eps, scale, l0)
    log_q = _log_release_prob(scale, tau, discrete)
    return float(-math.expm1(l0 * math.log1p(-math.exp(log_q))))


def laplace_scale(epsilon: float, l0: int) -> float:
    """The noise scale b = l0/ε of the stability histogram (ℓ1 sensitivity l0 of the shared keys; Wilson et
    al. 2020), rounded up so that l0 <= b·ε holds exactly (as rationals)."""
    eps = v.epsilon(epsilon)
    l0 = v.integer("l0", l0, lo=1)
    b = l0 / eps
    while Fraction(l0) > Fraction(b) * Fraction(eps):
        b = math.nextafter(b, math.inf)
    return b


def laplace_tau(epsilon: float, delta: float, scale: float, l0: int, discrete: bool = False) -> float:
    """Smallest margin τ >= 0 with :func:`laplace_delta` <= δ (closed form, then checked).

    Continuous: τ = b·(ln(1/(2 q*)))⁺ with q* = 1 − (1 − δ)^{1/l0} (Wilson et al. 2020). Discrete: the
    smallest integer τ = m − 1 with α^m/(1+α) <= q*.
    """
    eps = v.epsilon(epsilon)
    dlt = v.delta(delta)
    scale = v.positive("scale", scale)
    l0 = v.integer("l0", l0, lo=1)
    _check_scale(eps, scale, l0)
    log_q_star = math.log(-math.expm1(math.log1p(-dlt) / l0))
    if discrete:
        m = max(1, math.ceil(scale * (-log_q_star - math.log1p(math.exp(-1.0 / scale)))))
        tau = float(m - 1)
        while laplace_delta(eps, scale, tau, l0, discrete=True) > dlt:
            tau += 1.0
        return tau
    tau = max(0.0, scale * (-math.log(2.0) - log_q_star))
    step = 1e-15
    while laplace_delta(eps, scale, tau, l0) > dlt:
        tau = max(tau * (1.0 + step), step)
        step *= 2.0
    return tau


def laplace_calibrate(epsilon: float, delta: float, l0: int, discrete: bool = False) -> tuple[float, float]:
    """(scale, τ) of the Laplace/geometric stability histogram at (ε, δ): b = l0/ε and the smallest margin.

    b = l0/ε is the smallest scale the analysis allows; a larger b only raises the threshold (q grows), so
    this pair minimises the margin.
    """
    eps = v.epsilon(epsilon)
    dlt = v.delta(delta)
    l0 = v.integer("l0", l0, lo=1)
    b = laplace_scale(eps, l0)
    return b, laplace_tau(eps, dlt, b, l0, discrete=discrete)


def laplace_noise_std(scale: float, discrete: bool = False) -> float:
    """Standard deviation of the noise: √2·b (Laplace) or √(2α)/(1−α), α = e^{−1/b} (discrete Laplace,
    Canonne–Kamath–Steinke 2020, Def. 28; :func:`.discrete.dlaplace_variance`)."""
    scale = v.positive("scale", scale)
    if discrete:
        return math.sqrt(2.0 * math.exp(-1.0 / scale)) / -math.expm1(-1.0 / scale)
    return math.sqrt(2.0) * scale
