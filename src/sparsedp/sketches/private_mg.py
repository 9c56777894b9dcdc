"""Private Misra–Gries releases (thesis Chapter 3 = Lebeda & Tětek, PODS 2023).

After Lebeda (2023) §1.4–§1.8. Neighbours: add/remove one stream element
(Def. 3.1); the stream length is not public. All noise is exact discrete noise from
:mod:`sparsedp.noise` (the thesis's continuous Laplace is replaced by the two-sided geometric /
discrete Laplace mechanism as its §3.5.2 recommends, with the matching threshold).

Releases offered (``variant`` of :func:`misra_gries_release`):

``"pmg"`` — Algorithm 13 on an Algorithm-12 sketch (:func:`private_misra_gries`): one shared
    discrete-Laplace(1/ε) sample η plus an independent one per counter, keep counters ≥ τ_geo =
    1 + 2⌈ln(6e^ε/((e^ε+1)δ))/ε⌉. (ε, δ)-DP by Lemmas 3.1–3.4 / Theorem 3.1 with the §3.5.2 geometric
    threshold: Lemma 3.2 (shared noise absorbs the all-counters shift, local noise the single bump) and
    Lemma 3.3 (at most 4 keys of counter ≤ 1 outside the common key set, 6 samples each ≥ τ_geo − 1 with
    probability q^t/(1+q) ≤ δ/6, q = e^{−ε}).
``"pure"`` — the pure ε-DP variant of §3.6 (:func:`pure_private_misra_gries`): c̄_x = c_x + γ − n/(k+1)
    with the *exact* n/(k+1) (flooring it makes the sensitivity k; spec §1.7), ℓ1 sensitivity
    ≤ 1 + k/(k+1); noise on every key of a finite universe and the top-k released.
``"merged-laplace"`` — merged sketches (§3.7, Corollary 3.2: counters change by +1 or by −1 on at most k
    keys, supports nested): discrete Laplace(k/ε) on the stored counters and a threshold hiding the ≤ k
    count-1 keys on one side only (spec §1.8 τ_merge, [DERIVED], discretised).
``"csh"`` — the correlated-noise release of Lebeda & Retschmeier (2024) (CSH) on the sketch, which is a k-sparse monotonic
    histogram (Lebeda & Retschmeier (2024) Def. 3.1) both for a single Algorithm-12 sketch (Lemma 3.1: all changes −1 or one
    +1) and for merged sketches (Corollary 3.2); delegated to
    ``sparsedp.mechanisms.release_histogram(..., mechanism="csh")`` with sparsity bound k.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any, Sequence

import numpy as np

from .. import _validate as v
from ..accounting.calibration import Calibration, Comparison
from ..accounting.laws import DiscreteCorrelatedLaplace, DiscreteLaplace, ScaledDiscreteLaplace
from ..core.histogram import Release
from ..errors import InvalidParameterError, InvalidTypeError
from ..noise.source import default_source
from ._noise import discrete_laplace
from .misra_gries import MisraGries

__all__ = [
    "threshold2_private_misra_gries",
    "threshold2_tail",
    "pmg_threshold",
    "merged_threshold",
    "theorem_3_1_slack",
    "private_misra_gries",
    "pure_private_misra_gries",
    "merged_private_misra_gries",
]


def _dlap(scale: Fraction, size: int, rng) -> np.ndarray:
    return discrete_laplace(scale, size, rng)


def _dlap_tail(t: int, epsilon_over_scale: float) -> float:
    """P[Z >= t] = q^t / (1 + q) for the discrete Laplace with q = exp(-epsilon_over_scale), integer t >= 1."""
    q = math.exp(-epsilon_over_scale)
    return math.exp(-epsilon_over_scale * t) / (1.0 + q)


def _smallest_t(ok, t0: int) -> int:
    t = max(1, t0 - 1)
    while not ok(t):
        t += 1
    while t > 1 and ok(t - 1):
        t -= 1
    return t


def pmg_threshold(epsilon: float, delta: float, *, noise: str = "discrete") -> float:
    """Algorithm 13's release threshold τ (counters ≥ τ are released).

    ``noise="laplace"``: the thesis constant τ = 1 + 2 ln(3/δ)/ε (Alg. 13 line 5, L1412; continuous
    Laplace). ``noise="discrete"`` (what the library samples): τ_geo = 1 + 2⌈ln(6e^ε/((e^ε+1)δ))/ε⌉
    (thesis §3.5.2, L1557), i.e. 1 + 2t with t the smallest integer with P[Z ≥ t] = q^t/(1+q) ≤ δ/6.
    Spec golden values: ε=1, δ=1e-6 gives 30.8282 (laplace) and 33 (discrete).
    """
    eps, dl = v.epsilon(epsilon), v.delta(delta)
    v.choice("noise", noise, ("discrete", "laplace"))
    if noise == "laplace":
        return 1.0 + 2.0 * math.log(3.0 / dl) / eps
    t0 = math.ceil(math.log(6.0 * math.exp(eps) / ((math.exp(eps) + 1.0) * dl)) / eps)
    t = _smallest_t(lambda t: 6.0 * _dlap_tail(t, eps) <= dl, t0)  # guards float rounding of the ceil
    return float(1 + 2 * t)


def merged_threshold(epsilon: float, delta: float, k: int) -> float:
    """Threshold for discrete Laplace(k/ε) on a merged sketch (spec §1.8 τ_merge, discretised [DERIVED]).

    The keys stored on one side only have counter exactly 1 and there are at most k of them
    (Corollary 3.2), so τ = 1 + t with t the smallest integer with k·P[Z ≥ t] ≤ δ, P[Z ≥ t] = q^t/(1+q),
    q = e^{−ε/k}. (The continuous version is 1 + (k/ε) ln(k/(2δ)).)
    """
    eps, dl, k = v.epsilon(epsilon), v.delta(delta), v.integer("k", k)
    r = eps / k
    t0 = math.ceil(math.log(k / (dl * (1 + math.exp(-r)))) / r)
    return float(1 + _smallest_t(lambda t: k * _dlap_tail(t, r) <= dl, t0))


def theorem_3_1_slack(k: int, n: int, epsilon: float, delta: float, beta: float, *,
                      noise: str = "discrete") -> tuple[float, float]:
    """(lower, upper) with f̂(x) ∈ [f(x) − lower, f(x) + upper] for all x with probability ≥ 1 − β.

    ``noise="laplace"``: Theorem 3.1 as printed (L1529): upper = 2 ln((k+1)/β)/ε,
    lower = upper + 1 + 2 ln(3/δ)/ε + n/(k+1). ``noise="discrete"``: the same proof with discrete
    Laplace tails P[|Z| ≥ t] = 2q^t/(1+q): t is the smallest integer with (k+1)·2q^t/(1+q) ≤ β,
    upper = 2t, lower = 2t + τ_geo − 1 + n/(k+1) (an unreleased counter satisfies c + noise ≤ τ_geo − 1).
    """
    k, eps, dl = v.integer("k", k), v.epsilon(epsilon), v.delta(delta)
    b = v.real("beta", beta, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
    n = v.integer("n", n, lo=0)
    if v.choice("noise", noise, ("discrete", "laplace")) == "laplace":
        up = 2.0 * math.log((k + 1) / b) / eps
        return up + 1.0 + 2.0 * math.log(3.0 / dl) / eps + n / (k + 1), up
    t = _smallest_t(lambda t: (k + 1) * 2.0 * _dlap_tail(t, eps) <= b, math.ceil(math.log((k + 1) / b) / eps))
    return 2.0 * t + pmg_threshold(eps, dl) - 1.0 + n / (k + 1), 2.0 * t


def _release(sketch: MisraGries, codes: np.ndarray, noisy: np.ndarray, cal: Calibration, n_in: int,
             extra: dict) -> Release:
    order = np.argsort(codes, kind="stable")  # a data-independent release order (by key code)
    codes, noisy = codes[order], noisy[order]
    keys = [sketch._key(c) for c in codes.tolist()]
    return Release(keys=keys, counts=noisy, calibration=cal, n_keys_in=n_in, n_keys_out=len(keys), extra=extra)


def _scale(num: int, epsilon: float) -> Fraction:
    return Fraction(num) / Fraction(epsilon)  # the exact rational value of the float ε


def private_misra_gries(sketch: MisraGries, *, epsilon: float, delta: float, rng=None) -> Release:
    """Algorithm 13 (PMG) on an Algorithm-12 sketch, with discrete Laplace noise and τ_geo.

    Draws one shared sample η and one local sample per stored slot (k + 1 in all, dummies included, as
    printed), releases the non-dummy keys with c_x + η + Z_x ≥ τ_geo, sorted by key. (ε, δ)-DP
    (Theorem 3.1 with the §3.5.2 threshold); each call draws fresh noise (repeated calls compose).
    """
    if not isinstance(sketch, MisraGries):
        raise InvalidTypeError(f"sketch must be a MisraGries, got {type(sketch).__name__}")
    if sketch.merged:
        raise InvalidParameterError("Algorithm 13 must not be applied to merged sketches (Lebeda (2023) §3.7); use "
                                    "variant='csh' or 'merged-laplace'")
    eps, dl = v.epsilon(epsilon), v.delta(delta)
    tau = pmg_threshold(eps, dl)
    codes, counts, dummy = sketch.slot_arrays()
    scale = _scale(1, eps)
    eta = _dlap(scale, 1, rng)[0]
    noisy = counts + eta + _dlap(scale, sketch.k, rng)
    keep = (noisy >= tau) & ~dummy
    q = math.exp(-eps)
    var = 2.0 * q / (1.0 - q) ** 2
    dpart = 6.0 * _dlap_tail(int((tau - 1) // 2), eps)
    cal = Calibration(mechanism="misra-gries", analysis="pmg-geometric", epsilon=eps, delta=dl,
                      sigma=float(scale), tau=tau - 1.0, noise_std=math.sqrt(2.0 * var),
                      delta_parts={"threshold": dpart}, delta_achieved=dpart,
                      noise=DiscreteCorrelatedLaplace(scale, scale), comparison=Comparison.GE, k=sketch.k)
    return _release(sketch, codes[keep], noisy[keep], cal, sketch.k, {"threshold": tau})


def pure_private_misra_gries(sketch: MisraGries | Sequence[MisraGries], *, epsilon: float, universe: Any, rng=None,
                             chunk_size: int = 1 << 16) -> Release:
    """The pure ε-DP variant of thesis §3.6 on an Algorithm-12 sketch over a finite universe.

    Post-processing: c̄_x = max(c_x + γ − n/(k+1), 0) with the exact real n/(k+1) (not floored); the
    integer vector C = (k+1)·c̄ has ℓ1 sensitivity ≤ (k+1)(1 + k/(k+1)) = 2k+1 (spec §1.7 item 3), so
    discrete Laplace with scale (2k+1)/ε on C for every key of the universe is ε-DP [GRS12]; the top-k
    noisy values (ties by key) are released as C̃/(k+1) (top-k is post-processing). The error is
    n/(k+1) + O(log(d)/ε). ``universe``: an int d (keys 0..d−1) or a sequence of keys; it is scanned
    in chunks, O(k + chunk) memory, d noise samples.

    ``sketch`` may also be a list of Algorithm-12 sketches of several streams (thesis §3.7, trusted
    aggregator option A): their post-processed counters are added; neighbours change one stream by one
    element, so the sensitivity bound is unchanged.
    """
    sketches = _algorithm_12(sketch)
    eps = v.epsilon(epsilon)
    chunk_size = v.integer("chunk_size", chunk_size)
    sketch = next((sk for sk in sketches if sk.key_type), sketches[0])  # decodes keys
    k = sketch.k
    stored = _post_processed(sketches)  # §3.7 option A: the post-processed counters of every stream's sketch
    chunks, to_codes = _universe_chunks(universe, sketches, sketch, chunk_size)
    scale = _scale(2 * k + 1, eps)
    best_v, best_c, n_u = _noisy_top_k(chunks, to_codes, stored, scale, k, rng)
    q = math.exp(-eps / (2 * k + 1))
    std = math.sqrt(2.0 * q / (1.0 - q) ** 2) / (k + 1)
    cal = Calibration(mechanism="misra-gries", analysis="pure-dp", epsilon=eps, delta=0.0,
                      sigma=float(scale) / (k + 1), tau=float("nan"), noise_std=std,
                      delta_parts={}, delta_achieved=0.0,
                      noise=ScaledDiscreteLaplace(scale, k + 1), comparison=Comparison.NONE, k=k, d=n_u)
    counts = best_v.astype(np.float64) / (k + 1)
    order = np.argsort(best_c, kind="stable")
    out_codes = best_c[order].tolist()
    if sketch.key_type == "hashed":  # released keys need not be stored in the sketch: map from the universe
        wanted = set(out_codes)
        lookup = {c: x for x in universe for c in (sketch._code(x),) if c in wanted}
        keys = [lookup[c] for c in out_codes]
    else:
        keys = out_codes
    return Release(keys=keys, counts=counts[order], calibration=cal, n_keys_in=n_u, n_keys_out=len(keys),
                   extra={"universe_size": n_u})


def _algorithm_12(sketch: Any) -> list[MisraGries]:
    """``sketch`` (one or a list) checked: Algorithm-12 sketches (not merged) with one k and one key type."""
    sketches = list(sketch) if isinstance(sketch, (list, tuple)) else [sketch]
    if not sketches or not all(isinstance(sk, MisraGries) for sk in sketches):
        raise InvalidTypeError("sketch must be a MisraGries or a non-empty list of them")
    if any(sk.merged for sk in sketches):
        raise InvalidParameterError("the §3.6 post-processing needs Algorithm-12 sketches (it uses gamma); "
                                    "for merged sketches use variant='merged-laplace' or 'csh'")
    if len({sk.k for sk in sketches}) > 1 or len({sk.key_type for sk in sketches if sk.key_type}) > 1:
        raise InvalidParameterError("all sketches must have the same k and key type")
    return sketches


def _universe_chunks(universe: Any, sketches: list[MisraGries], sketch: MisraGries, chunk_size: int) -> tuple:
    """``(chunks, to_codes)``: the universe (an int d: keys 0..d−1, or a sequence of keys) in chunks of
    ``chunk_size``, and the map of a chunk to the sketch's key codes."""
    if isinstance(universe, (int, np.integer)) and not isinstance(universe, bool):
        d = v.integer("universe", universe)
        if any(sk.key_type == "hashed" for sk in sketches):
            raise InvalidParameterError("universe=int means keys 0..d-1; this sketch holds hashed keys: "
                                        "pass the universe as a sequence of keys")
        chunks = (np.arange(s, min(s + chunk_size, d), dtype=np.int64) for s in range(0, d, chunk_size))
        return chunks, (lambda c: c)
    keys = list(universe)
    if not keys:
        raise InvalidParameterError("universe must not be empty")
    chunks = (keys[s:s + chunk_size] for s in range(0, len(keys), chunk_size))
    return chunks, (lambda c: np.fromiter((sketch._code(x) for x in c), np.int64, len(c)))


def _noisy_top_k(chunks: Any, to_codes: Any, stored: dict[int, int], scale: Any, k: int, rng: Any) -> tuple:
    """``(values, codes, universe size)``: the k largest of C_x + discrete Laplace noise over the universe, chunk
    by chunk (ties by key code), O(k + chunk) memory."""
    best_v = np.zeros(0, np.int64)
    best_c = np.zeros(0, np.int64)
    n_u = 0
    for ch in chunks:
        codes = to_codes(ch)
        if np.unique(codes).size != codes.size:
            raise InvalidParameterError("universe keys must be distinct")
        n_u += codes.size
        base = np.fromiter((stored.get(c, 0) for c in codes.tolist()), np.int64, codes.size)
        noisy = base + _dlap(scale, codes.size, rng)
        allv = np.concatenate([best_v, noisy])
        allc = np.concatenate([best_c, codes])
        order = np.lexsort((allc, -allv))[:k]  # top-k by noisy value, ties by key code
        best_v, best_c = allv[order], allc[order]
    return best_v, best_c, n_u


def _post_processed(sketches: list[MisraGries]) -> dict[int, int]:
    """code -> C_x = Σ_streams ((k+1)(c_x + γ) − n), positive entries only: (k+1) times the §3.6 post-processed
    counters c̄ (exact integers), added over the streams (§3.7 option A)."""
    k = sketches[0].k
    stored: dict[int, int] = {}
    for sk in sketches:
        for c, x in sk._state().items():
            val = (k + 1) * (x + sk.gamma) - sk.n
            if val > 0:
                stored[c] = stored.get(c, 0) + val
    return stored


def threshold2_tail(epsilon: float, delta: float, k: int) -> int:
    """m = the smallest integer ≥ 1 with P[Z ≥ m] = q^m/(1+q) ≤ δ/(2e^ε), q = e^{−ε/(2k+1)} (Z discrete Laplace of
    scale (2k+1)/ε): the release threshold is T = (2k+1) + m in units of 1/(k+1) (docs/proofs/mg-threshold2.md)."""
    r = epsilon / (2 * k + 1)
    q = math.exp(-r)
    target = delta / (2.0 * math.exp(epsilon)) * (1.0 - 1e-9)  # float guard
    t0 = math.ceil(math.log(1.0 / (target * (1.0 + q))) / r)
    return _smallest_t(lambda m: q ** m / (1.0 + q) <= target, max(1, t0))


def threshold2_private_misra_gries(sketch: Any, *, epsilon: float, delta: float, rng=None) -> Release:
    """The (ε, δ) variant of thesis §3.6 (L1573): Threshold2 (thesis Alg. 9, [ALP22]) on the post-processed
    sketch, with exact discrete noise (the thesis's continuous version has threshold 4 + 2ln(1/δ)/ε in c̄ units).

    On the integer vector C = (k+1)·c̄ (ℓ1 sensitivity ≤ S = 2k+1 for add/remove one stream element, §3.6):
    entries 0 < C_x < S are rounded to S with probability C_x/S, else to 0 (exact coin); every non-zero entry
    gets discrete Laplace noise of scale S/ε; entries with noisy value ≥ T = S + m are released as (noisy)/(k+1),
    m from :func:`threshold2_tail`. (ε, δ)-DP by the discrete transcription of Lemma 2.24's proof
    (``docs/proofs/mg-threshold2.md``; exact single-entry check in the tests). Error n/(k+1) + O(log(1/δ)/ε).
    ``sketch``: an Algorithm-12 sketch or a list of them (§3.7 option A)."""
    sketches = list(sketch) if isinstance(sketch, (list, tuple)) else [sketch]
    if not sketches or not all(isinstance(sk, MisraGries) for sk in sketches) or any(sk.merged for sk in sketches):
        raise InvalidParameterError("the §3.6 post-processing needs Algorithm-12 sketches (it uses gamma)")
    eps, dl = v.epsilon(epsilon), v.delta(delta)
    k = sketches[0].k
    S = 2 * k + 1
    m = threshold2_tail(eps, dl, k)
    T = S + m
    stored = _post_processed(sketches)
    codes = np.fromiter(sorted(stored), np.int64, len(stored))
    C = np.fromiter((stored[c] for c in codes.tolist()), np.int64, codes.size)
    src = default_source() if rng is None else rng
    small = (C > 0) & (C < S)
    Y = C.copy()
    for i in np.flatnonzero(small).tolist():  # RandRound(C/S)·S with an exact rational coin
        Y[i] = S if src.randbelow(S) < int(C[i]) else 0
    nz = Y != 0
    noisy = Y[nz] + _dlap(_scale(S, eps), int(nz.sum()), src)
    codes = codes[nz]
    keep = noisy >= T
    q = math.exp(-eps / S)
    dpart = (math.exp(eps) + 1.0) * q ** m / (1.0 + q)  # the proof's chain: (1 + e^ε)·P[pass] ≤ δ
    cal = Calibration(mechanism="misra-gries", analysis="threshold2-discrete", epsilon=eps, delta=dl,
                      sigma=float(_scale(S, eps)) / (k + 1), tau=float(T - 1) / (k + 1),
                      noise_std=math.sqrt(2.0 * q / (1.0 - q) ** 2) / (k + 1), delta_parts={"threshold": dpart},
                      delta_achieved=dpart, noise=ScaledDiscreteLaplace(_scale(S, eps), k + 1),
                      comparison=Comparison.GE, k=k)
    rel = _release(next((sk for sk in sketches if sk.key_type), sketches[0]), codes[keep],
                   noisy[keep].astype(np.float64) / (k + 1), cal, k, {"threshold": T / (k + 1)})
    return rel


def merged_private_misra_gries(sketch: MisraGries, *, epsilon: float, delta: float, rng=None) -> Release:
    """Release a merged (or single) sketch with discrete Laplace(k/ε) noise on the stored counters and
    the threshold :func:`merged_threshold` (thesis §3.7 / Corollary 3.2; spec §1.8 τ_merge [DERIVED]).

    (ε, δ)-DP: on the keys stored on both sides the counters differ by ≤ 1 on ≤ k keys (ℓ1 ≤ k, discrete
    Laplace(k/ε) is ε-DP); each key stored on one side only has counter 1 and passes with probability
    P[Z ≥ τ − 1] ≤ δ/k, and there are at most k of them.
    """
    eps, dl = v.epsilon(epsilon), v.delta(delta)
    k = sketch.k
    tau = merged_threshold(eps, dl, k)
    st = sketch.standard()
    codes = np.fromiter(st.keys(), np.int64, len(st))
    counts = np.fromiter(st.values(), np.int64, len(st))
    scale = _scale(k, eps)
    noisy = counts + _dlap(scale, codes.size, rng)
    keep = noisy >= tau
    q = math.exp(-eps / k)
    dpart = k * _dlap_tail(int(tau - 1), eps / k)
    cal = Calibration(mechanism="misra-gries", analysis="merged-laplace", epsilon=eps, delta=dl,
                      sigma=float(scale), tau=tau - 1.0, noise_std=math.sqrt(2.0 * q / (1.0 - q) ** 2),
                      delta_parts={"threshold": dpart}, delta_achieved=dpart,
                      noise=DiscreteLaplace(scale), comparison=Comparison.GE, k=k)
    return _release(sketch, codes[keep], noisy[keep], cal, k, {"threshold": tau})  # k: public, not len(st)
