"""Privacy accounting of differentially private set union (Gopi, Gulhane, Kulkarni, Shen, Shokouhi, Yekhanin,
"Differentially Private Set Union", ICML 2020) with the integer noise actually sampled.

**Weighted Gaussian** (Gopi et al. §4, the weighted Gaussian update policy). Each unit keeps at most ``Δ0``
of its keys (the engine's random ℓ0 choice); a unit that kept ``t`` keys gives each of them the weight
``1/√t`` (ℓ2 norm 1), every key's weights are summed, Gaussian noise is added, and a key is released iff its
noisy weight reaches a threshold ρ. The paper accounts it in two halves: the Gaussian mechanism at
``(ε, δ/2)`` for the keys both neighbours hold, plus ``δ/2`` for a key only the added unit holds crossing
``ρ = max_{1<=t<=Δ0} [1/√t + σ Φ⁻¹((1 − δ/2)^{1/t})]``.

sparsedp samples exact integer noise, so the weights live on a public grid ``1/G``:

    W_t = floor(G/√t)  (exactly ``isqrt(G² // t)``),   t · W_t² <= G²  (ℓ2 norm <= 1 in weight units),

the per-key sums are integers, the noise is ``Z ~ N_Z(0, s)`` and the rule is ``S + Z >= T`` for an integer
``T`` (:class:`~sparsedp.accounting.calibration.Comparison` GE). Adding one unit that kept ``t`` keys adds
exactly ``W_t`` to each of them and changes nothing else (the ℓ0 choice is per unit, so the other units'
weights do not move). That is the contribution shape of GSHM with a per-key step ``W_t`` instead of 1, so
Karrer et al.'s decomposition (Karrer et al. (2022) Thm 5.4; its discrete form ``docs/proofs/discrete-histograms.md``
Theorem 1, which holds for any per-key noise law) applies per ``t``, and the profile is the maximum over
``t`` (``docs/proofs/set-union.md`` §2):

    δ(ε) = max_{1<=t<=Δ0} max( 1 − b_t^t,  max_a [1 − b_t^a + b_t^a H_t(t − a, ε − a ln b_t)],
                                           max_a H_t(t − a, ε + a ln b_t) ),        a = 0..t−1,
    b_t = 1 − P[Z >= T − W_t],
    H_t(j, ε) = H_{e^ε}(N_Z(W_t, s)^j ‖ N_Z(0, s)^j) = P[S_j >= sε/W_t − jW_t/2] − e^ε P[S_j >= sε/W_t + jW_t/2],

``S_j`` the sum of ``j`` i.i.d. ``N_Z(0, s)`` (within a certified pointwise ratio of ``N_Z(0, js)``: proof doc of
the discrete histograms, Lemma 2). This is the exact profile of the sampled mechanism (up to the ~1e-12
relative slack of that ratio), sharper than the paper's ``δ/2 + δ/2`` split.

**Policy Gaussian** (Gopi et al.'s ℓ2-descent policy) is accounted here for continuous noise only
(:func:`policy_gaussian_delta`); it has no secure variant: ``docs/proofs/set-union.md`` §4 says why.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, overload
from fractions import Fraction

import numpy as np

from .. import _validate as v
from ..errors import InfeasibleError, InvalidParameterError
from ._types import IntArray, Scale
from .calibration import Calibration, Comparison
from .discrete import _dgauss_logsf_float, dgauss_sf, dgauss_variance
from .discrete_histograms import _SF_REL_ERR, _karrer_max, _log_ratio_iid, _smallest_margin, rational_up
from .gaussian import gaussian_delta, gaussian_sigma
from .laws import DiscreteGaussian, Gaussian

__all__ = ["DEFAULT_GRID", "grid_weights", "weighted_shift_hockey_stick", "weighted_gaussian_delta",
           "calibrate_weighted_gaussian", "weighted_gaussian_scale", "SetUnionCalibration", "paper_threshold",
           "policy_gaussian_delta", "calibrate_policy_gaussian", "PolicyCalibration"]

#: default weight grid G (weights are multiples of 1/G): rounding costs at most 1/G per key and unit
DEFAULT_GRID = 4096


def grid_weights(l0: int, grid: int) -> IntArray:
    """``W_t = floor(grid/√t)`` for t = 1..l0 (index t − 1), exactly: the largest integer with
    ``t·W² <= grid²`` (``math.isqrt(grid² // t)``). Each is >= 1 when ``grid² >= l0``."""
    g2 = int(grid) * int(grid)
    return np.array([math.isqrt(g2 // t) for t in range(1, int(l0) + 1)], dtype=np.int64)


def weighted_shift_hockey_stick(j: int, epsilon: float, sigma2: Scale, w: int) -> float:
    """Upper bound (tight to ~1e-12 relative for s >= 4) of ``H_{e^ε}(N_Z(w, s)^j ‖ N_Z(0, s)^j)``, any real ε.

    The loss is ``(2w S ± j w²)/(2s)`` with ``S`` the sum of the j noise coordinates, so
    ``H = P[S >= sε/w − jw/2] − e^ε P[S >= sε/w + jw/2]``; ``S`` is within ratio ``R_j`` of ``N_Z(0, js)``
    (``docs/proofs/discrete-histograms.md`` Lemma 2). Symmetric in its two laws (``y ↦ w − y``).
    ``j = 0`` gives ``max(0, 1 − e^ε)``.
    """
    j = int(j)
    eps = float(epsilon)
    floor = max(0.0, -math.expm1(eps)) if eps < 0 else 0.0
    if j <= 0:
        return floor
    sq = Fraction(sigma2)
    s = float(sq)
    w = int(w)
    log_r = _log_ratio_iid(j, s) + _SF_REL_ERR
    # the set {L >= ε} is {S >= ceil(x1)} under the shifted law and {S >= ceil(x2)} under the other, with the
    # boundaries computed exactly (s rational, ε a binary float, hence exact rationals): the same set in both
    # terms, so the value is P1(A) − e^ε P0(A) for the optimal A (only the tails are bounded). With s = p/q and
    # ε = m/n: x1, x2 = ceil((2pm ∓ j·w²·qn) / (2qnw)), in integers (the same values as Fraction arithmetic)
    p, q = sq.numerator, sq.denominator
    m, n = eps.as_integer_ratio()
    den = 2 * q * n * w
    mid, half = 2 * p * m, j * w * w * q * n
    x1 = -((half - mid) // den)
    x2 = -((-mid - half) // den)
    l1 = _dgauss_logsf_float(x1, j * s) + log_r
    l2 = eps + _dgauss_logsf_float(x2, j * s) - log_r
    if l1 == -math.inf or l2 >= l1:
        val = 0.0
    else:
        val = math.exp(l1) * (-math.expm1(l2 - l1))
    return min(1.0, max(val, floor))


#: below this many kept keys every a = 0..t−1 is evaluated; above, blocks (:func:`_coarse_blocks`)
_SINGLE_BELOW = 48


def _coarse_blocks(t: int) -> tuple[IntArray, IntArray]:
    """Blocks ``[lo, hi]`` covering a = 0..t−1 for the maxima over a (DH §5's rigorous block bound): single points
    for a <= 16 and for the 16 largest a, geometric in a and in t − a in between (24 points each side), so a
    profile costs O(min(t, ~80)) divergences instead of O(t). An upper bound for any cover."""
    if t <= _SINGLE_BELOW:
        a = np.arange(t)
        return a, a
    pts = set(range(0, 17)) | set(range(t - 16, t))
    pts |= set(np.round(np.geomspace(16, t, 24)).astype(int).tolist())
    pts |= set((t - np.round(np.geomspace(16, t, 24))).astype(int).tolist())
    lo = np.array(sorted(x for x in pts if 0 <= x <= t - 1))
    hi = np.append(lo[1:] - 1, t - 1)
    return lo, hi


def _profile_t(eps: float, s: Fraction, threshold: int, t: int, w: int,
               blocks: bool = True) -> tuple[float, dict[str, float]]:
    p = dgauss_sf(threshold - w, float(s))         # a key only the added unit holds: S = w, released iff w + Z >= T
    log_b = math.log1p(-p) if p < 1 else -math.inf
    if log_b == -math.inf:
        return 1.0, {"infinite": 1.0, "forward": 1.0, "reverse": 1.0}
    cover = _coarse_blocks(t) if blocks else (np.arange(t), np.arange(t))
    return _karrer_max(t, log_b, eps, lambda jj, e: weighted_shift_hockey_stick(jj, e, s, w), cover)


@overload
def weighted_gaussian_delta(epsilon: float, sigma2: Scale, threshold: int, l0: int, grid: int = DEFAULT_GRID, *,
                            parts: Literal[False] = False, stop_above: float | None = None,
                            every_a: bool = False) -> float: ...
@overload
def weighted_gaussian_delta(epsilon: float, sigma2: Scale, threshold: int, l0: int, grid: int = DEFAULT_GRID, *,
                            parts: Literal[True], stop_above: float | None = None,
                            every_a: bool = False) -> tuple[float, dict[str, float]]: ...
def weighted_gaussian_delta(epsilon: float, sigma2: Scale, threshold: int, l0: int, grid: int = DEFAULT_GRID, *,
                            parts: bool = False, stop_above: float | None = None,
                            every_a: bool = False) -> float | tuple[float, dict[str, float]]:
    """δ(ε) of the discrete Weighted Gaussian set union (module docstring): integer weights
    :func:`grid_weights`, noise ``N_Z(0, sigma2)`` in grid units, release iff ``S + Z >= threshold``.

    Exact profile (max over the kept-key count t of Karrer's terms with step ``W_t``;
    ``docs/proofs/set-union.md`` §2), an upper bound tight to ~1e-12 relative for sigma2 >= 4. With
    ``parts=True`` returns ``(delta, info)`` (the worst t and its three terms). ``stop_above``: return as
    soon as some t's terms exceed it (then the value is a lower bound of δ, only good for "is δ above it?").
    Above 48 kept keys the maxima over a use DH §5's blocks (:func:`_coarse_blocks`; still an upper bound);
    ``every_a=True`` evaluates every a (slower, for checking the blocks).
    """
    eps = v.epsilon_any(epsilon)
    sq = v.rational("sigma2", sigma2)
    s = float(sq)
    if s < 1:
        raise InvalidParameterError(f"sigma2 must be >= 1 for the discrete accountant, got {sigma2!r}")
    thr = v.integer("threshold", threshold, lo=1)
    k = v.integer("l0", l0, lo=1)
    g = v.integer("grid", grid, lo=1)
    ws = grid_weights(k, g)
    if ws[-1] < 1:
        raise InvalidParameterError(f"grid={g} is too coarse for l0={k}: need grid^2 >= l0")
    best, best_t = -1.0, 0
    best_info: dict[str, float] = {}
    for t in range(k, 0, -1):  # the largest t first: usually the worst, so a failing check stops early
        d, info = _profile_t(eps, sq, thr, t, int(ws[t - 1]), blocks=not every_a)
        if d > best:
            best, best_info, best_t = d, info, t
        if stop_above is not None and best > stop_above:
            break
    best_info = dict(best_info, worst_t=best_t)
    return (best, best_info) if parts else best


def paper_threshold(epsilon: float, delta: float, l0: int) -> tuple[float, float]:
    """``(σ, ρ)`` of Gopi et al.'s Weighted Gaussian with continuous noise, in weight units: σ of the Gaussian
    mechanism (ℓ2 sensitivity 1) at ``(ε, δ/2)`` (Balle–Wang, :func:`~.gaussian.gaussian_sigma`) and
    ``ρ = max_{1<=t<=Δ0} [1/√t + σ Φ⁻¹((1 − δ/2)^{1/t})]``. For comparison only (the release uses the exact
    discrete calibration)."""
    from scipy.special import ndtri

    sigma = gaussian_sigma(epsilon, delta / 2.0, sensitivity=1.0)
    rho = max(1.0 / math.sqrt(t) + sigma * float(ndtri(math.exp(math.log1p(-delta / 2.0) / t)))
              for t in range(1, int(l0) + 1))
    return sigma, rho


@dataclass(frozen=True)
class SetUnionCalibration(Calibration):
    """A Weighted Gaussian calibration.

    The public fields are **count-equivalent** for keys whose units all fill the bound (each gives the key
    ``W_Δ0/G ≈ 1/√Δ0``), so ``plan`` and ``auto`` can compare them with GSHM's at the same ``l0``:
    ``sigma = √s/G·√Δ0``, ``noise_std`` likewise, ``tau = √Δ0·T/G − 1`` (the count such a key needs, above the
    pre-threshold 1). Units with fewer keys weigh more (``1/√t``), so this is the mechanism's worst case.
    ``grid`` is ``G``, ``threshold_int`` the integer threshold ``T`` (grid units), ``noise`` the exact
    ``DiscreteGaussian(s)`` in grid units; :meth:`kernel` is the calibration the per-key kernel runs (rule
    ``S >= 1`` and ``S + Z >= 1 + (T − 1)``, grid units)."""

    grid: int = DEFAULT_GRID
    threshold_int: int = 0

    @property
    def grid_sigma2(self) -> Fraction:
        """The exact scale ``s`` of the discrete Gaussian noise ``N_Z(0, s)``, in grid units."""
        if not isinstance(self.noise, DiscreteGaussian):  # pragma: no cover - calibrate_weighted_gaussian's law
            raise TypeError(f"a set-union calibration samples a DiscreteGaussian, got {self.noise!r}")
        return self.noise.sigma2

    @property
    def weights(self) -> IntArray:
        assert self.l0 is not None
        return grid_weights(self.l0, self.grid)

    @property
    def weight_sigma(self) -> float:
        """σ of the noise in weight units (√s/G)."""
        return math.sqrt(float(self.grid_sigma2)) / self.grid

    @property
    def weight_noise_std(self) -> float:
        """Standard deviation of the noise in weight units."""
        return math.sqrt(dgauss_variance(self.grid_sigma2)) / self.grid

    def kernel(self) -> Calibration:
        """The plain :class:`Calibration` the per-key kernel samples and compares, in grid units."""
        return Calibration(mechanism=self.mechanism, analysis=self.analysis, epsilon=self.epsilon, delta=self.delta,
                           sigma=math.sqrt(float(self.grid_sigma2)), tau=float(self.threshold_int - 1),
                           noise_std=math.sqrt(dgauss_variance(self.grid_sigma2)), noise=self.noise,
                           comparison=self.comparison, delta_parts=self.delta_parts,
                           delta_achieved=self.delta_achieved, l0=self.l0)


def weighted_gaussian_scale(epsilon: float, delta: float, l0: int, grid: int) -> Fraction:
    """The smallest rational scale ``s`` (grid units, a multiple of 2^-20 found by 0.01 % steps up from the
    analytic Gaussian σ of sensitivity ``max_t √t·W_t``) with the Gaussian part ``max_t H_t(t, ε) <= δ``: every
    touched key held by both neighbours (Karrer et al. (2022) §5.3(2); ``docs/proofs/set-union.md`` §3)."""
    eps, dlt, k = float(epsilon), float(delta), int(l0)
    ws = grid_weights(k, grid)
    norm = max(math.sqrt(t) * int(ws[t - 1]) for t in range(1, k + 1))  # <= G
    sigma_c = gaussian_sigma(eps, dlt, sensitivity=norm)
    s = rational_up(max(4.0, sigma_c * sigma_c))

    def gauss_part(ss: Fraction) -> float:
        return max(weighted_shift_hockey_stick(t, eps, ss, int(ws[t - 1])) for t in range(1, k + 1))

    for _ in range(2000):
        if gauss_part(s) <= dlt * (1 - 1e-9):
            return s
        s = rational_up(float(s) * 1.0001)
    raise InfeasibleError(f"no discrete Gaussian scale found for epsilon={eps}, delta={dlt}, "
                          f"l0={k}")  # pragma: no cover - the continuous σ plus 20% always suffices


def calibrate_weighted_gaussian(epsilon: float, delta: float, l0: int, grid: int = DEFAULT_GRID) -> SetUnionCalibration:
    """The discrete Weighted Gaussian at (ε, δ): smallest rational scale ``s`` (grid units) with the Gaussian
    part ``max_t H_t(t, ε) <= δ`` (every touched key held by both neighbours; Karrer's choice of σ, Karrer et al. (2022)
    §5.3(2), as :func:`~.discrete_histograms.calibrate_gshm_discrete`), then the smallest integer threshold
    ``T`` with :func:`weighted_gaussian_delta` ``<= δ``.

    δ(ε) is non-increasing in T: every ``b_t`` increases with T and the terms are monotone in ``b`` as in
    Karrer et al. (2022) §5.2 (``docs/proofs/set-union.md`` §3).
    """
    eps = v.epsilon(epsilon)
    dlt = v.delta(delta)
    k = v.integer("l0", l0, lo=1)
    g = v.integer("grid", grid, lo=1)
    ws = grid_weights(k, g)
    if ws[-1] < 1:
        raise InvalidParameterError(f"grid={g} is too coarse for max_groups_per_unit={k}: need grid^2 >= l0")
    s = weighted_gaussian_scale(eps, dlt, k, g)
    sf = float(s)
    # start: the t = l0 infinite term alone, 1 − (1 − P[Z >= T − W])^{l0} <= δ
    q = -math.expm1(math.log1p(-dlt) / k)
    start = _smallest_margin(lambda thr: dgauss_sf(thr - int(ws[-1]), sf) / q, 1.0, int(ws[-1]) + 1)
    # T on a sub-grid of step ~σ/1024 (finer thresholds change nothing a user could see, and any T whose
    # profile is <= δ is private): ~10 profile evaluations instead of ~17
    step = max(1, int(math.sqrt(sf)) // 1024)
    m = _smallest_margin(lambda x: weighted_gaussian_delta(eps, s, start + (x - 1) * step, k, g,
                                                              stop_above=dlt), dlt, 1)
    thr = start + (m - 1) * step
    achieved, info = weighted_gaussian_delta(eps, s, thr, k, g, parts=True)
    root = math.sqrt(k) / g  # count-equivalent units (SetUnionCalibration)
    return SetUnionCalibration(
        mechanism="weighted-gaussian", analysis="discrete-exact", epsilon=eps, delta=dlt,
        sigma=math.sqrt(sf) * root, tau=thr * root - 1.0, noise_std=math.sqrt(dgauss_variance(s)) * root,
        noise=DiscreteGaussian(s), comparison=Comparison.GE,
        delta_parts={"infinite": info["infinite"], "forward": info["forward"], "reverse": info["reverse"]},
        delta_achieved=achieved, l0=k, grid=g, threshold_int=thr)



# ------------------------------------------------------------------ Policy Gaussian (float noise only)


def policy_gaussian_delta(epsilon: float, sigma: float, rho: float, l0: int) -> float:
    """δ(ε) of Gopi et al.'s Policy Gaussian with CONTINUOUS noise ``N(0, σ²)`` and threshold ρ (weight units),
    for any cutoff Γ > 1 (``docs/proofs/set-union.md`` §4.1; float noise only, so no guarantee covers the
    sampled floats).

    Adding a unit whose kept keys include ``m`` keys no other unit holds: its ℓ2-descent step gives each of
    them ``Γ/‖g‖ <= 1/√m`` (``‖g‖ >= √m Γ > 1``), later steps never touch them, and the final weight vector
    on the other keys moves by at most 1 in ℓ2 (every step is the proximal map of the distance to a convex
    set, hence 1-Lipschitz). Karrer's decomposition (Karrer et al. (2022) Lemma 5.2) with ``β_m = Φ((ρ − 1/√m)/σ)^m``
    and the Gaussian mechanism's divergence at sensitivity 1 (Balle–Wang, :func:`~.gaussian.gaussian_delta`):

        δ = max_{0<=m<=Δ0} max(1 − β_m,  1 − β_m + β_m H(ε − ln β_m),  H(ε + ln β_m)),   H(e) = δ_G(1/σ, e).

    The paper's ``(ε, δ/2) + δ/2`` split omits the reverse term's ``ln β`` (a ~δ² effect); this charges it.
    """
    from scipy.special import log_ndtr

    eps = float(epsilon)
    mu = 1.0 / float(sigma)
    best = float(gaussian_delta(mu, eps))
    for m in range(1, int(l0) + 1):
        log_beta = m * float(log_ndtr((rho - 1.0 / math.sqrt(m)) / sigma))
        beta = math.exp(log_beta)
        t2 = -math.expm1(log_beta) + beta * float(gaussian_delta(mu, eps - log_beta))
        t3 = float(gaussian_delta(mu, eps + log_beta))
        best = max(best, -math.expm1(log_beta), t2, t3)
    return min(1.0, best)


def calibrate_policy_gaussian(epsilon: float, delta: float, l0: int, alpha: float = 3.0) -> PolicyCalibration:
    """Float Policy Gaussian at (ε, δ): σ of the Gaussian mechanism at ``(ε, δ/2)`` (Gopi et al.'s choice), the
    smallest ρ (bisection, 1e-6 relative) with :func:`policy_gaussian_delta` ``<= δ``, cutoff
    ``Γ = ρ + α σ``. Insecure float noise only (``docs/proofs/set-union.md`` §4)."""
    eps = v.epsilon(epsilon)
    dlt = v.delta(delta)
    k = v.integer("l0", l0, lo=1)
    a = float(alpha)
    sigma = gaussian_sigma(eps, dlt / 2.0, sensitivity=1.0)
    lo, hi = 1.0, 2.0
    while policy_gaussian_delta(eps, sigma, hi, k) > dlt:
        lo, hi = hi, hi * 2
    while hi - lo > 1e-6 * hi:
        mid = (lo + hi) / 2
        if policy_gaussian_delta(eps, sigma, mid, k) <= dlt:
            hi = mid
        else:
            lo = mid
    achieved = policy_gaussian_delta(eps, sigma, hi, k)
    return PolicyCalibration(
        mechanism="policy-gaussian", analysis="continuous-policy", epsilon=eps, delta=dlt, sigma=sigma, tau=hi,
        noise_std=sigma, noise=Gaussian(sigma), comparison=Comparison.GE, delta_achieved=achieved,
        delta_parts={"total": achieved}, l0=k, gamma=hi + a * sigma, alpha=a)


@dataclass(frozen=True)
class PolicyCalibration(Calibration):
    """A float Policy Gaussian calibration: ``tau`` is the threshold ρ (weight units), ``gamma`` the cutoff
    Γ = ρ + α σ of the ℓ2-descent policy."""

    gamma: float = 0.0
    alpha: float = 3.0
