"""Calibration of the public-key-domain counts: every key of a public list of d keys gets a noisy count.

Contribution model (enforced by the engine): each privacy unit adds at most 1 to each key and touches at most
``k = min(l0, d)`` listed keys (``l0 = max_groups_per_unit``; no ℓ0 bound: ``k = d``). Neighbours: add/remove
one unit. ``n`` is the number of units in the input (each unit, listed keys or not, is one data point
``x ∈ {0,1}^d`` of Lebeda (2024) §3, S1.1: a unit with no listed key is the zero vector and still counts in n).

Three mechanisms, each with the exact δ of the integer noise actually sampled (secure default) or the
continuous analysis (``insecure_float``):

* ``public-gaussian`` — independent ``N_Z(0, s)`` per key; a neighbour shifts at most k coordinates by 1, so
  ``δ = H(k, ε)`` of ``docs/proofs/discrete-histograms.md`` §3 (the discrete analogue of the standard
  Gaussian mechanism with ℓ2 sensitivity √k, Lebeda (2024) Lemma 2.1 / §4.1 "standard mechanism").
* ``public-laplace`` — independent discrete Laplace of scale ``t >= k/ε`` per key (ℓ1 sensitivity k): pure ε-DP
  (δ = 0) exactly, the integer noise of the peers' public-partition counts.
* ``correlated-gaussian`` — Lebeda (2024) Algorithm 1 in its embedding form with an integer weight C (Lemmas 3.3–3.5,
  spec S2.3/S4.4): ``y = (2f − n·1, C·n) + Z``, ``Z`` i.i.d. ``N_Z(0, s)`` on d+1 coordinates;
  ``f̃ = y_{1..d}/2 + y_{d+1}/(2C)``, ``ñ = y_{d+1}/C``. The last coordinate is the shared term (η = Z_{d+1}/(2C)),
  the first d the independent terms. Every unit changes g by ``(±1, …, ±1, C)`` (|v|² = d + C², for any k):
  :func:`~.discrete_histograms.correlated_discrete_delta` (``docs/proofs/discrete-histograms.md`` §7 and
  ``docs/proofs/public-keys.md``). ``C`` is the trade-off weight of §3.1 (default: the integer minimising the
  per-key error, S4.4; larger C gives a better ñ and better sums of counts, S2.6).
  Known-n variant (Lemma 3.6): given a previously released estimate ñ of n (public), release
  ``f̃ = (2f − n·1 + Z + ñ·1)/2`` with Z i.i.d. ``N_Z(0, s)`` on d coordinates (|v|² = d): δ = H(d, ε). Its
  cost is this release only; ñ's release was charged when it was made (composition, spec S2.5).

Bounded density (Lebeda (2024) §4.1, ``l0 < d``): the choice between the standard mechanism (public-gaussian at
ℓ2 sensitivity √k) and Algorithm 1 (independent of k) is the spec's S4.2 decision rule "if JY24 is not
implemented", made by ``auto`` on the exact discrete per-key errors. The optimal symmetric ellipse (JY24) is not
offered with integer noise: its shared direction has no integer embedding whose exact δ is computed here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Callable, Iterable, Mapping

from .. import _validate as v
from ..errors import InfeasibleError, InvalidParameterError
from .names import CORRELATED_GAUSSIAN, LAPLACE
from ._types import Scale
from .calibration import Calibration, Comparison, Neighbours
from .correlated import correlated_gaussian_sigma1
from .discrete import dgauss_variance, dlaplace_variance
from .discrete_histograms import (_dgauss_hs_from_law, _log_ratio_iid, _log_ratio_step, best_integer_c,
                                  correlated_discrete_delta, dgauss_shift_hockey_stick, rational_up)
from .gaussian import gaussian_delta, gaussian_sigma
from .laws import DiscreteDenseCorrelatedGaussian

__all__ = ["PublicKeysCalibration", "calibrate_public_gaussian", "calibrate_public_laplace",
           "calibrate_correlated_public", "centred_embedding_delta", "centred_embedding_choice",
           "calibrate_bounded_density", "discrete_laplace_scale"]


@dataclass(frozen=True)
class PublicKeysCalibration:
    """The calibration of a public-key-domain release (math only: no data, no noise).

    Attributes:
        mechanism: registry name.
        analysis: "discrete-exact" (integer noise, exact δ), "pure" (discrete Laplace, δ = 0) or "continuous"
            (float noise, ``insecure_float``).
        epsilon, delta: the target.
        d: number of public keys; k: keys per unit among them (``min(l0, d)``).
        family: "gaussian" (independent per key), "laplace" (independent per key), "embedding" (Algorithm 1),
            "known-n" (Lemma 3.6).
        scale: the sampled scale: ``N_Z(0, scale)`` / discrete Laplace ``scale`` (exact ``Fraction``) when
            secure; the float σ / Laplace b otherwise.
        c: the embedding weight C (embedding only).
        known_n: the public estimate ñ of n used by the known-n variant.
        noise_std: std of each released count's error (known-n: the fresh noise only).
        n_noise_std: std of the released size estimate ñ (embedding only).
        shared_std, independent_std: the error's decomposition (shared term over all keys, per-key term).
        delta_achieved: the δ(ε) of the noise sampled (<= delta).
        secure: exact integer noise from the CSPRNG.
    """

    mechanism: str
    analysis: str
    epsilon: float
    delta: float
    d: int
    k: int
    family: str
    scale: Fraction | float
    noise_std: float
    delta_achieved: float
    secure: bool
    c: float | None = None
    known_n: float | None = None
    n_noise_std: float | None = None
    shared_std: float = 0.0
    independent_std: float = 0.0
    delta_parts: Mapping[str, float] = field(default_factory=dict)
    #: the embedding's centre p/q (``x ↦ (q·x − p·1, c)``; Algorithm 1: p = 1, q = 2)
    p: int = 1
    q: int = 2

    @property
    def sigma(self) -> float:
        """Std of one sampled coordinate (Laplace: the scale)."""
        if self.family == LAPLACE:
            return float(self.scale)
        return math.sqrt(float(self.scale)) if self.secure else float(self.scale)

    @property
    def tau(self) -> float:
        return 0.0


def _smallest_scale(delta_of: Callable[[Fraction], float], start: float, target: float, what: str) -> Fraction:
    """The first scale on the 0.01% ladder above ``start`` (rounded up to a short rational) with
    ``delta_of(s) <= target`` (the lattice makes δ slightly non-monotone in s, hence the walk, as in
    :func:`~.discrete_histograms.calibrate_gshm_discrete`)."""
    s = rational_up(max(1.0, start))
    for _ in range(5000):
        if delta_of(s) <= target:
            return s
        s = rational_up(float(s) * 1.0001)
    raise InfeasibleError(f"no discrete Gaussian scale found for {what}")  # pragma: no cover


def _k(d: int, l0: int | None) -> tuple[int, int]:
    dd = v.integer("d", d, lo=1)
    return dd, dd if l0 is None else min(dd, v.integer("l0", l0, lo=1))


def calibrate_public_gaussian(epsilon: float, delta: float, d: int, l0: int | None = None, *,
                              insecure_float: bool = False) -> PublicKeysCalibration:
    """Independent Gaussian noise on every public key (standard mechanism, ℓ2 sensitivity √k, k = min(l0, d)).

    Secure: the smallest ``s`` on a 0.01% ladder above the continuous ``σ²`` (Balle–Wang at √k) with
    ``H(k, ε) <= δ`` (:func:`~.discrete_histograms.dgauss_shift_hockey_stick`, exact up to the proof doc's
    conservative ratio; ``docs/proofs/discrete-histograms.md`` §3). Float: σ = Balle–Wang σ at √k.
    """
    eps, dlt = v.epsilon(epsilon), v.delta(delta)
    dd, k = _k(d, l0)
    sig = gaussian_sigma(eps, dlt, math.sqrt(k))
    if insecure_float:
        return PublicKeysCalibration("public-gaussian", "continuous", eps, dlt, dd, k, "gaussian", sig, sig,
                                     float(gaussian_delta(math.sqrt(k) / sig, eps)), False, independent_std=sig)
    s = _smallest_scale(lambda s: dgauss_shift_hockey_stick(k, eps, s), sig * sig, dlt,
                        f"epsilon={eps}, delta={dlt}, k={k}")
    std = math.sqrt(dgauss_variance(s))
    achieved = dgauss_shift_hockey_stick(k, eps, s)
    return PublicKeysCalibration("public-gaussian", "discrete-exact", eps, dlt, dd, k, "gaussian", s, std,
                                 achieved, True, independent_std=std, delta_parts={"gaussian": achieved})


def discrete_laplace_scale(k: int, epsilon: float) -> Fraction:
    """The rational scale ``t >= k/ε`` (``k/ε`` rounded up to a multiple of 2⁻²⁰) with the exact check
    ``k/t <= ε``: the discrete Laplace of scale t is ε-DP for a shift of ℓ1 norm k (its pmf ratio at distance k is
    ``exp(k/t)``)."""
    t = rational_up(k / epsilon)
    while Fraction(k) / t > Fraction(epsilon):  # exact: the rational scale must give loss <= ε
        t += Fraction(1, 1 << 20)
    return t


def calibrate_public_laplace(epsilon: float, delta: float, d: int, l0: int | None = None, *,
                             insecure_float: bool = False) -> PublicKeysCalibration:
    """Independent (discrete) Laplace noise of scale ``k/ε`` on every public key: ε-DP (δ = 0), ℓ1 sensitivity
    k. Secure: the scale is ``k/ε`` rounded up to a multiple of 2⁻²⁰ with an exact check ``k/t <= ε`` (the
    discrete Laplace with ``t >= k/ε`` has privacy loss at most ``k/t`` for a shift of ℓ1 norm k)."""
    eps = v.epsilon(epsilon)
    dlt = v.real("delta", delta, lo=0.0, hi=1.0, hi_open=True)
    dd, k = _k(d, l0)
    if insecure_float:
        b = k / eps
        return PublicKeysCalibration("public-laplace", "continuous", eps, dlt, dd, k, LAPLACE, b,
                                     math.sqrt(2) * b, 0.0, False, independent_std=math.sqrt(2) * b)
    t = discrete_laplace_scale(k, eps)
    std = math.sqrt(dlaplace_variance(t))
    return PublicKeysCalibration("public-laplace", "pure", eps, dlt, dd, k, LAPLACE, t, std, 0.0, True,
                                 independent_std=std)


def calibrate_correlated_public(epsilon: float, delta: float, d: int, l0: int | None = None, *,
                                c: float | None = None, known_n: float | None = None,
                                insecure_float: bool = False) -> PublicKeysCalibration:
    """Lebeda (2024)'s correlated Gaussian over d public keys (module docstring).

    ``c``: the embedding weight C (integer for secure noise; default :func:`~.discrete_histograms.best_integer_c`,
    or ``d^{1/4}`` with float noise). Per-key error variance ``Var(Z)/4 + Var(Z)/(4C²)`` (Lemma 3.5), of which
    ``Var(Z)/(4C²)`` is the shared term; ``Var(ñ) = Var(Z)/C²``. ``known_n``: Lemma 3.6 (no ñ released; the
    per-key error is the fresh ``Z/2`` plus the shared ``(ñ − n)/2`` of the earlier estimate).
    """
    eps, dlt = v.epsilon(epsilon), v.delta(delta)
    dd, k = _k(d, l0)
    s1 = correlated_gaussian_sigma1(eps, dlt)
    if known_n is not None:
        kn = v.real("known_n", known_n)
        if c is not None:
            raise InvalidParameterError("c (the size weight) and known_n exclude each other: with a known estimate "
                                        "of n no size coordinate is released (Lebeda (2024) Lemma 3.6)")
        if insecure_float:  # Z ~ N(0, d σ₁²) on 2f − n (ℓ2 sensitivity √d); f̃ = (y + ñ)/2
            sd = math.sqrt(dd) * s1
            return PublicKeysCalibration(CORRELATED_GAUSSIAN, "continuous", eps, dlt, dd, k, "known-n", sd,
                                         sd / 2, dlt, False, known_n=kn, independent_std=sd / 2)
        s = _smallest_scale(lambda s: dgauss_shift_hockey_stick(dd, eps, s), dd * s1 * s1, dlt,
                            f"epsilon={eps}, delta={dlt}, d={dd}")
        achieved = dgauss_shift_hockey_stick(dd, eps, s)
        std = math.sqrt(dgauss_variance(s)) / 2
        return PublicKeysCalibration(CORRELATED_GAUSSIAN, "discrete-exact", eps, dlt, dd, k, "known-n", s, std,
                                     achieved, True, known_n=kn, independent_std=std,
                                     delta_parts={"gaussian": achieved})
    if insecure_float:
        cc = dd ** 0.25 if c is None else v.positive("c", c)
        b = (dd + cc * cc) * s1 * s1
        var = b / 4 + b / (4 * cc * cc)
        return PublicKeysCalibration(CORRELATED_GAUSSIAN, "continuous", eps, dlt, dd, k, "embedding",
                                     math.sqrt(b), math.sqrt(var), dlt, False, c=cc,
                                     n_noise_std=math.sqrt(b) / cc, shared_std=math.sqrt(b) / (2 * cc),
                                     independent_std=math.sqrt(b) / 2)
    if c is not None and (isinstance(c, bool) or not isinstance(c, int)):
        raise InvalidParameterError(f"c must be an integer >= 1 with secure (integer) noise, got {c!r} (Lebeda (2024) "
                                    f"S4.4: the embedding (2f − n, C·n) must be integer)")
    cc = best_integer_c(dd) if c is None else v.integer("c", c, lo=1)
    s = _smallest_scale(lambda s: correlated_discrete_delta(eps, s, dd, cc), s1 * s1 * (dd + cc * cc), dlt,
                        f"epsilon={eps}, delta={dlt}, d={dd}, c={cc}")
    achieved = correlated_discrete_delta(eps, s, dd, cc)
    var = dgauss_variance(s)
    return PublicKeysCalibration(CORRELATED_GAUSSIAN, "discrete-exact", eps, dlt, dd, k, "embedding", s,
                                 math.sqrt(var / 4 + var / (4 * cc * cc)), achieved, True, c=cc,
                                 n_noise_std=math.sqrt(var) / cc, shared_std=math.sqrt(var) / (2 * cc),
                                 independent_std=math.sqrt(var) / 2, delta_parts={"gaussian": achieved})


# ------------------------------------------------------------------ bounded density: the centred embedding


def _coprime_log_ratio(parts: Iterable[tuple[int, int]], s: float) -> tuple[float, float]:
    """``(log R, variance)`` of ``T = Σ m_i S_i``, ``S_i`` the sum of ``j_i`` i.i.d. ``N_Z(0, s)``: T's pmf is within a
    pointwise ratio R of ``N_Z(0, variance)``. Each ``S_i`` by DH Lemma 2 with multiplier 1 (ω(s/2) per step);
    then the terms are combined by the coprime-multiplier lemma (docs/proofs/public-keys.md §8): ``m U + m' V``
    with ``gcd(m, m') = 1``, U, V within ratios of ``N_Z(0, A)``, ``N_Z(0, A')``, is within the product of the
    ratios times ``(1 + ω(r))/(1 − ω(r))`` of ``N_Z(0, m²A + m'²A')``, ``r = A A'/(m'² A' + m² A)``. The first two
    terms must have coprime multipliers; later ones are added to a unit-multiplier variable."""
    terms = [(int(m), int(j)) for m, j in parts if j > 0]
    log_r = sum(_log_ratio_iid(j, s) for _, j in terms)
    (m1, j1) = terms[0]
    var = m1 * m1 * j1 * s
    if len(terms) == 1:
        if m1 != 1:
            raise ValueError("a single term needs multiplier 1")
        return log_r, var
    (m2, j2), rest = terms[1], terms[2:]
    if math.gcd(m1, m2) != 1:
        raise ValueError(f"the first two multipliers {m1}, {m2} must be coprime")
    a1, a2 = j1 * s, j2 * s
    log_r += _log_ratio_step([a1 * a2 / (m2 * m2 * a2 + m1 * m1 * a1)])
    var = m1 * m1 * a1 + m2 * m2 * a2
    for m, j in rest:  # unit-multiplier variable (variance var) plus m S_j
        a = j * s
        log_r += _log_ratio_step([var * a / (m * m * a + var)])
        var += m * m * a
    return log_r, var


def _parts(a: int, d: int, k: int, p: int, q: int, c: int) -> list[tuple[int, int]]:
    """The terms of ⟨v, Z⟩ for a unit with ``a`` listed keys: (q − p) on a coordinates, p on d − a, c on one;
    ordered so that the first two multipliers are coprime."""
    terms = [(q - p, a), (p, d - a), (c, 1)]
    terms = [t for t in terms if t[1] > 0]
    for i in range(len(terms)):
        for j in range(len(terms)):
            if i != j and math.gcd(terms[i][0], terms[j][0]) == 1:
                return [terms[i], terms[j]] + [t for n, t in enumerate(terms) if n not in (i, j)]
    raise ValueError(f"no coprime pair among the multipliers {[t[0] for t in terms]}")


def centred_embedding_delta(epsilon: float, sigma2: Scale, d: int, k: int, p: int, q: int, c: int) -> float:
    """δ(ε) of the centred embedding ``g = Σ_units (q·x − p·1, c)`` (``x ∈ {0,1}^d``, at most ``k`` ones) plus i.i.d.
    ``N_Z(0, sigma2)`` on its d + 1 coordinates, under add/remove one unit: the maximum over a = 0 … k (the unit's
    number of listed keys) of the hockey-stick bound with ``|v|² = a(q − p)² + (d − a)p² + c²`` and the sum
    ``⟨v, Z⟩ = (q − p)S_a + p S_{d−a} + c Y`` within the ratio of :func:`_coprime_log_ratio` of ``N_Z(0, |v|² s)``
    (docs/proofs/public-keys.md §8; p = 1, q = 2 is :func:`~.discrete_histograms.correlated_discrete_delta`).
    Every a is evaluated (cost linear in k)."""
    eps = v.epsilon_any(epsilon)
    sv = float(v.rational("sigma2", sigma2))
    best = 0.0
    for a in range(0, k + 1):
        shift2 = a * (q - p) ** 2 + (d - a) * p * p + c * c
        log_r, var = _coprime_log_ratio(_parts(a, d, k, p, q, c), sv)
        assert abs(var - shift2 * sv) <= 1e-9 * var
        best = max(best, _dgauss_hs_from_law(eps, sv, float(shift2), shift2 * sv, log_r))
    return best


def _max_shift2(d: int, k: int, p: int, q: int, c: int) -> int:
    return max(k * (q - p) ** 2 + (d - k) * p * p, d * p * p) + c * c  # linear in a: an end point


def centred_embedding_choice(d: int, k: int, q_max: int = 24) -> tuple[int, int, int]:
    """``(p, q, c)`` minimising the per-key variance factor ``max_a |v|² (1 + p²/c²)/q²`` (continuous noise; the
    discrete one follows it) over integers 2 <= q <= q_max, 1 <= p <= q/2 with gcd(p, q) = 1, c >= 1 coprime to
    p and to q − p. At k = d the optimum is Algorithm 1's centre p/q = 1/2; for small k it approaches the
    independent mechanism (p → 0); in between it matches the optimal symmetric ellipse OPT(d, k) of spec S4.2
    (checked in the tests), while also releasing ñ = y_{d+1}/c."""
    best = (math.inf, 1, 2, 1)
    for q in range(2, q_max + 1):
        for p in range(1, q // 2 + 1):
            if math.gcd(p, q) != 1:
                continue
            lam = p / q
            base = k * (1 - 2 * lam) + d * lam * lam
            c0 = q * math.sqrt(max(lam * math.sqrt(max(base, 1e-300)), 1e-12))
            for c in {max(1, math.floor(c0) + i) for i in range(-3, 4)}:
                if math.gcd(p, c) != 1 or math.gcd(q - p, c) != 1:
                    continue
                obj = _max_shift2(d, k, p, q, c) * (1 + p * p / (c * c)) / (q * q)
                if obj < best[0] - 1e-12:
                    best = (obj, p, q, c)
    return best[1], best[2], best[3]


def calibrate_bounded_density(epsilon: float, delta: float, d: int, l0: int | None = None, *,
                              insecure_float: bool = False,
                              choice: tuple[int, int, int] | None = None) -> PublicKeysCalibration:
    """Lebeda (2024) §4.1 (bounded density, each unit with at most k = min(l0, d) listed keys) with integer noise: the
    centred embedding ``(q·x − p·1, c)`` of :func:`centred_embedding_choice` plus i.i.d. ``N_Z(0, s)``, released
    ``f̃_j = (y_j + (p/c) y_{d+1})/q`` and ``ñ = y_{d+1}/c``. Per-key error ``Z_j/q`` (independent) plus
    ``p Z_{d+1}/(c q)`` (shared): variance ``Var(Z)(1 + p²/c²)/q²``. [Beyond the paper: its optimal ellipse, JY24,
    written as an integer embedding; docs/proofs/public-keys.md §8.] Float: the same embedding with
    ``σ = σ₁ √(max |v|²)``."""
    eps, dlt = v.epsilon(epsilon), v.delta(delta)
    dd, k = _k(d, l0)
    p, q, c = centred_embedding_choice(dd, k) if choice is None else choice
    s1 = correlated_gaussian_sigma1(eps, dlt)
    m2 = _max_shift2(dd, k, p, q, c)
    factor = (1 + p * p / (c * c)) / (q * q)
    if insecure_float:
        sd = s1 * math.sqrt(m2)
        return PublicKeysCalibration("bounded-density", "continuous", eps, dlt, dd, k, "embedding", sd,
                                     sd * math.sqrt(factor), dlt, False, c=c, p=p, q=q, n_noise_std=sd / c,
                                     shared_std=sd * p / (c * q), independent_std=sd / q)
    what = f"epsilon={eps}, delta={dlt}, d={dd}, k={k}"
    # the ladder on the largest shift (a = k or a = 0), then every a checked, and raised until all pass
    worst_a = k if k * (q - p) ** 2 + (dd - k) * p * p >= dd * p * p else 0

    def worst_only(sv: Fraction) -> float:
        log_r, _ = _coprime_log_ratio(_parts(worst_a, dd, k, p, q, c), float(sv))
        return _dgauss_hs_from_law(eps, float(sv), float(m2), m2 * float(sv), log_r)

    s = _smallest_scale(worst_only, s1 * s1 * m2, dlt, what)
    s = _smallest_scale(lambda sv: centred_embedding_delta(eps, sv, dd, k, p, q, c), float(s), dlt, what)
    achieved = centred_embedding_delta(eps, s, dd, k, p, q, c)
    var = dgauss_variance(s)
    return PublicKeysCalibration("bounded-density", "discrete-exact", eps, dlt, dd, k, "embedding", s,
                                 math.sqrt(var * factor), achieved, True, c=c, p=p, q=q,
                                 n_noise_std=math.sqrt(var) / c, shared_std=math.sqrt(var) * p / (c * q),
                                 independent_std=math.sqrt(var) / q, delta_parts={"gaussian": achieved})


# ------------------------------------------------------------------ grouped queries, replacement (Algorithm 2)


def grouped_replacement_discrete_delta(epsilon: float, sigma2: Scale, d: int, c: int) -> float:
    """δ(ε) of Lebeda (2024) Algorithm 2 under **replacement** with integer noise (docs/proofs/public-keys.md §9): each
    unit in at most one row, embedded there as ``(2x − 1, c)`` (zero elsewhere), i.i.d. ``N_Z(0, s)`` on every
    embedded coordinate. Replacing a unit either changes its row's block by ``2(x − x')`` (entries in {−2, 0, 2},
    at most d non-zero; worst all d) or moves it: ``(2x − 1, c)`` in one row and ``−(2x' − 1, c)`` in another
    (|v|² = 2(d + c²)). The maximum of the two hockey-stick bounds (DH §3 and Lemma 2)."""
    eps = v.epsilon_any(epsilon)
    s = float(v.rational("sigma2", sigma2))
    dd = v.integer("d", d, lo=1)
    cc = v.integer("c", c, lo=1)
    # same row: loss (4S ± 4d)/(2s), S a sum of d i.i.d.: H = P[S >= sε/2 − d] − e^ε P[S >= sε/2 + d]
    same = _dgauss_hs_from_law(eps, s / 2.0, 2.0 * dd, dd * s, _log_ratio_iid(dd, s))
    # moved: ⟨v, Z⟩ ~ Z_1 + … + Z_2d + c Y_1 + c Y_2
    a = 2 * dd * s
    log_r = _log_ratio_iid(2 * dd, s) + _log_ratio_step([a * s / (a + cc * cc * s),
                                                        (a + cc * cc * s) * s / (a + 2 * cc * cc * s)])
    shift2 = 2.0 * (dd + cc * cc)
    moved = _dgauss_hs_from_law(eps, s, shift2, shift2 * s, log_r)
    return max(same, moved)


def calibrate_grouped_replacement_discrete(epsilon: float, delta: float, d: int) -> Calibration:
    """Algorithm 2, replacement, with integer noise: ``C = ⌊√d⌋`` (= √d, the proof's choice, when d is a square;
    then the two cases have the same |v|² = 4d, spec S4.1 ERRATUM) and the smallest ``s`` on a 0.01% ladder above
    the continuous ``4dσ₁²`` with :func:`grouped_replacement_discrete_delta` ``<= δ``. Returns a
    :class:`~.calibration.Calibration` with ``noise = DiscreteDenseCorrelatedGaussian(s, C)`` and
    ``neighbours = REPLACE_ONE``: per-row release ``f̃ = y/2 + y_{d+1}/(2C)``, row count ``y_{d+1}/C``."""
    eps, dlt = v.epsilon(epsilon), v.delta(delta)
    dd = v.integer("d", d, lo=1)
    cc = max(1, math.isqrt(dd))
    s1 = correlated_gaussian_sigma1(eps, dlt)
    s = _smallest_scale(lambda sv: grouped_replacement_discrete_delta(eps, sv, dd, cc), 4 * dd * s1 * s1, dlt,
                        f"epsilon={eps}, delta={dlt}, d={dd}")
    achieved = grouped_replacement_discrete_delta(eps, s, dd, cc)
    var = dgauss_variance(s)
    return Calibration(
        mechanism="correlated-gaussian-grouped", analysis="discrete-exact", epsilon=eps, delta=dlt,
        sigma=math.sqrt(float(s)), tau=0.0, noise_std=math.sqrt(var / 4 + var / (4 * cc * cc)),
        delta_parts={"gaussian": achieved}, delta_achieved=achieved,
        noise=DiscreteDenseCorrelatedGaussian(s, cc), comparison=Comparison.NONE,
        neighbours=Neighbours.REPLACE_ONE, d=dd)
