"""PLAN (Private Limit Adapted Noise): variance-aware private mean estimation, ρ-zCDP.

Source: Lebeda (2023) PhD thesis, Chapter 5 = Aumüller, Lebeda, Nelson, Pagh 2023 (arXiv 2306.08745);
Lebeda (2023) L1857–2557; implementation After Lebeda (2023) §3.
Replacement neighbours, n public, every row clipped into [−M, M]^d.

Algorithm 17 (PLAN), as implemented by :func:`plan_mean`:

1. μ̃ = coordinate-wise private median (PRIVQUANTILE, budget ρ_center split evenly over the d coordinates).
2. σ̂: per-coordinate spread estimates — private (Algorithm 18, or the binary-data estimator, budget
   ρ_variance), public (given by the caller, no budget), or σ̂ ≡ 1 (the unscaled baseline, Theorem 5.4).
   Estimates are regularised σ̂_i ← σ̂_i + ‖σ̂‖₁/d (§5.7.1, aimed at the one-sided bound σ̂_i ≥ σ_i).
3. y_j = (x_j − μ̃)·s with s_i = σ̂_i^{−2/(p+2)} (line 4: Σ̂^{−1/(p+2)}; Chapter 4's optimal shape
   with Δ_i → σ_i).
4. k = √n + (rank-error bound of step 5), C = PRIVQUANTILE of the norms ‖y_j‖₂ at rank (n − k)/n
   (budget ρ_clip).
5. release μ̃ + (Σ_j min(C/‖y_j‖₂, 1)·y_j + η)/(n·s) with η ~ N(0, 2C²/ρ_noise·I): given μ̃ and C the
   clipped sum has ℓ₂ sensitivity 2C under replacement (thesis L2040), hence ρ_noise-zCDP.

Privacy: ρ = ρ_center + ρ_variance + ρ_clip + ρ_noise by zCDP composition (Lemma 5.2); everything else
is post-processing. Budget split (defaults, thesis §5.7.1–5.7.2 / Listing 5.1 / Table 5.2 footer):
ρ₁ = ρ/4 for centring plus variance (split 1/4 : 3/4 when σ̂ is estimated from the data, all to
centring otherwise), ρ_clip = (ρ − ρ₁)/4, ρ_noise = the rest. Override with ``budget=``.

PRIVQUANTILE is the binary search of [Smi11]/[HLY21] that the thesis analyses (Lemmas 5.4–5.5; the
experiments used [KSS22], which the thesis leaves unspecified): T steps, each branching on the count
|{j: z_j <= mid}| (sensitivity 1 under replacement) plus N_ℤ(0, T/(2ρ')) noise, so T steps are
ρ'-zCDP (Canonne–Kamath–Steinke 2020 Thm 4 + composition). Our rank-error bound is the exact Gaussian
tail with a union bound, √(T ln(2T/β)/ρ') (spec §3.2; a constant looser than Lemma 5.4 as printed).
A search may run on a log scale (geometric midpoints) for positive quantities (norms, variances): a
monotone reparametrisation, so the privacy argument is unchanged.

Secure noise. Noisy counts are integers plus exact discrete Gaussian noise. For step 5, each clipped row
is rounded to a grid of spacing γ = C/K (K a public power of two); the rounded row has ℓ₂ norm at most
(K + √d/2)·γ, so the sum of rounded rows has ℓ₂ sensitivity Δ_g = 2K + ⌈√d⌉ grid units and we add
N_ℤ(0, Δ_g²/(2ρ_noise)) per coordinate (CKS Thm 14: Δ²/(2σ²)-zCDP for the multivariate discrete
Gaussian). The reported noise std includes the (2K + ⌈√d⌉)/(2K) inflation. Float noise only with
``insecure_float=True``.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import math
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from .. import _validate as v, noise
from ..errors import InputDataError, InvalidParameterError
from ..noise import default_source
from ..noise.source import SecureRandom
from .elliptical import gaussian_moment

__all__ = [
    "MeanEstimate",
    "estimate_binary_variance",
    "estimate_variance",
    "plan_mean",
    "private_quantile",
    "quantile_rank_error",
]

_VARIANCE_MODES = ("estimate", "binary", "none")
_INT_BUDGET = 2**60


def _source(rng: SecureRandom | None) -> SecureRandom:
    return default_source() if rng is None else rng


def _count_noise(sigma2: Fraction, size: int, rng: SecureRandom | None, insecure_float: bool) -> np.ndarray:
    """Noise for integer counts: exact N_ℤ(0, σ²), or float N(0, σ²) when ``insecure_float``."""
    if insecure_float:
        return math.sqrt(float(sigma2)) * np.asarray(
            noise.sample_gaussian(1.0, size, rng=rng, insecure_float=True), dtype=float)
    return np.asarray(noise.sample_discrete_gaussian(sigma2, size, rng=rng), dtype=np.int64)


def quantile_rank_error(steps: int, rho: float, beta: float) -> float:
    """Bound on the rank error of :func:`private_quantile` for one column with budget ρ, w.p. ≥ 1 − β.

    Each of the T steps adds N(0, T/(2ρ)); P[|N| > t] <= 2exp(−t²ρ/T), and a union bound over T steps
    gives t = √(T ln(2T/β)/ρ) (after Lebeda (2023) §3.2, in place of the thesis's Lemma 5.4 constant).
    """
    t = v.integer("steps", steps, lo=1)
    r = v.positive("rho", rho)
    b = v.real("beta", beta, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
    return math.sqrt(t * math.log(2 * t / b) / r)


def _steps_for(lower: float, upper: float, resolution: float, log_scale: bool) -> int:
    if log_scale:
        # final interval [a, a·r] with log2 r = log2(upper/lower)/2^T <= log2(1 + resolution)
        span = math.log2(upper / lower) / math.log2(1.0 + resolution)
    else:
        span = (upper - lower) / resolution
    return max(1, math.ceil(math.log2(max(span, 1.0))))


def private_quantile(values: npt.ArrayLike, q: float, *, rho: float, lower: float, upper: float,
                     steps: int | None = None, resolution: float | None = None, log_scale: bool = False,
                     rng: SecureRandom | None = None, insecure_float: bool = False) -> np.ndarray:
    """PRIVQUANTILE (thesis §5.2.3): a ρ-zCDP estimate of the q-quantile of each column by binary search.

    ``values``: (n,) or (n, d). The budget ρ is split evenly over the d columns (zCDP composition) and
    over the T steps. Each step compares the noisy count |{j: z_j <= mid}| + N_ℤ(0, T·d/(2ρ)) with q·n.
    The search runs on [``lower``, ``upper``] (linear midpoints, or geometric ones with
    ``log_scale=True``, which needs ``lower > 0``); T = ``steps``, or the smallest T whose final interval
    is at most ``resolution`` wide (absolute; relative with ``log_scale``). Returns the midpoints of the
    final intervals, shape (d,).
    """
    z = np.asarray(values, dtype=float)
    if z.ndim == 1:
        z = z[:, None]
    if z.ndim != 2 or z.shape[0] == 0:
        raise InputDataError(f"values must be (n,) or (n, d) with n >= 1, got shape {z.shape}")
    if not np.all(np.isfinite(z)):
        raise InputDataError("values contain NaN or infinite entries")
    qq = v.real("q", q, lo=0.0, hi=1.0)
    r = v.positive("rho", rho)
    lo0 = v.real("lower", lower)
    hi0 = v.real("upper", upper)
    if not hi0 > lo0:
        raise InvalidParameterError(f"upper must be > lower, got lower={lo0!r}, upper={hi0!r}")
    if log_scale and lo0 <= 0:
        raise InvalidParameterError(f"log_scale search needs lower > 0, got {lo0!r}")
    if steps is None:
        if resolution is None:
            raise InvalidParameterError("give steps or resolution")
        t = _steps_for(lo0, hi0, v.positive("resolution", resolution), log_scale)
    else:
        t = v.integer("steps", steps, lo=1)
    n, d = z.shape
    cols = np.sort(z, axis=0)
    sigma2 = Fraction(t * d) / (2 * Fraction(r))
    target = qq * n
    lo = np.full(d, lo0)
    hi = np.full(d, hi0)
    src = _source(rng)
    for _ in range(t):
        mid = np.sqrt(lo * hi) if log_scale else (lo + hi) / 2.0
        counts = np.fromiter((np.searchsorted(cols[:, i], mid[i], side="right") for i in range(d)),
                             dtype=np.int64, count=d)
        noisy = counts + _count_noise(sigma2, d, src, insecure_float)
        below = noisy < target
        lo = np.where(below, mid, lo)
        hi = np.where(below, hi, mid)
    est: npt.NDArray[np.float64] = np.sqrt(lo * hi) if log_scale else (lo + hi) / 2.0
    return est


def _chi2_median_factor(k: int) -> float:
    """median(χ²_k)/k ≈ (1 − 2/(9k))³ (Wilson–Hilferty), the thesis's median-to-mean correction (App. 5.C.2)."""
    return (1.0 - 2.0 / (9.0 * k)) ** 3


def _permutation(n: int, src: SecureRandom) -> np.ndarray:
    """A uniformly random order (ties in 64-bit keys are harmless: the grouping only needs to be data-independent)."""
    return np.argsort(src.uint64(n), kind="stable")


def estimate_variance(data: Any, *, rho: float, bound: float, pairs: int = 1, chi2_correction: bool = True,
                      min_variance: float | None = None, resolution: float = 0.02, rng: SecureRandom | None = None,
                      insecure_float: bool = False) -> np.ndarray:
    """Algorithm 18 (VARIANCEESTIMATE, thesis App. 5.C), per coordinate; ρ-zCDP in total.

    Rows are put in a data-independent random order and cut into n' = ⌊n/(2k)⌋ groups of 2k (k =
    ``pairs``); group g gives ŷ_g = Σ_{j=1}^{k} (x_{2j−1} − x_{2j})²/2 (pairs (2j−1, 2j): the thesis's
    (2j, 2j+1) is off by one). Each row is in one group, so a private median of the ŷ_g (budget ρ/d per
    coordinate, log-scale search over [k·``min_variance``, k·2M²]) divided by k estimates σ² up to the
    median/mean ratio of ŷ/k; for Gaussian data ŷ/k ~ σ²χ²_k/k and ``chi2_correction`` divides by
    (1 − 2/(9k))³ (App. 5.C.2: (7/9)³ for k = 1). Data are clipped to [−M, M] (``bound``).
    ``min_variance`` defaults to min(1e−9·M², 1e−6): a floor relative to M² alone sits above the true variances
    when M is pessimistically large (the thesis's M = 100·d·max σ gives 1e−9·M² ≈ 4·10⁴ at d = 256, α = 2,
    which flattened every estimate to the floor and removed PLAN's skew adaptation); the absolute cap costs
    about one extra search step (the search is on a log scale).
    """
    x = _matrix(data)
    r = v.positive("rho", rho)
    m = v.positive("bound", bound)
    k = v.integer("pairs", pairs, lo=1)
    n, d = x.shape
    groups = n // (2 * k)
    if groups < 1:
        raise InputDataError(f"variance estimation with pairs={k} needs at least {2 * k} rows, got n={n}")
    vmin = min(1e-9 * m * m, 1e-6) if min_variance is None else v.positive("min_variance", min_variance)
    src = _source(rng)
    xc = np.clip(x, -m, m)[_permutation(n, src)[: groups * 2 * k]]
    g = xc.reshape(groups, k, 2, d)
    yhat = (((g[:, :, 0, :] - g[:, :, 1, :]) ** 2) / 2.0).sum(axis=1)  # (groups, d)
    upper = k * 2.0 * m * m
    lower = min(k * vmin, upper / 2.0)
    med = private_quantile(yhat, 0.5, rho=r, lower=lower, upper=upper, resolution=resolution,
                           log_scale=True, rng=src, insecure_float=insecure_float)
    est = med / k
    if chi2_correction:
        est = est / _chi2_median_factor(k)
    return est


def estimate_binary_variance(data: Any, *, rho: float, floor: bool = True, rng: SecureRandom | None = None,
                             insecure_float: bool = False) -> np.ndarray:
    """The binary-data variance estimator (thesis §5.7.1), ρ-zCDP: q̃ from the Gaussian mechanism on the column
    counts (ℓ₂ sensitivity √d under replacement, so N_ℤ(0, d/(2ρ)) per count), σ̂² = q̃(1 − q̃), floored at
    d^{−2/5} (Lemma 5.9; §5.7.2 "we clip all estimated variances to 1/d^{2/5} from below") unless ``floor=False``.
    ``data``: an (n, d) array of 0/1."""
    x = _matrix(data)
    r = v.positive("rho", rho)
    if not np.all((x == 0) | (x == 1)):
        raise InputDataError("the binary variance estimator needs 0/1 data")
    return _binary_variance(x, r, _source(rng), insecure_float, floor)


def _binary_variance(x: np.ndarray, rho: float, src: SecureRandom, insecure_float: bool,
                     floor: bool = True) -> np.ndarray:
    n, d = x.shape
    counts = x.sum(axis=0).astype(np.int64)
    noisy = counts + _count_noise(Fraction(d) / (2 * Fraction(rho)), d, src, insecure_float)
    q = np.clip(noisy / n, 0.0, 1.0)
    var: npt.NDArray[np.float64] = q * (1.0 - q)
    return np.maximum(var, d ** -0.4) if floor else var


def _matrix(data: Any, columns: Sequence[str] | None = None) -> np.ndarray:
    if columns is not None:
        if isinstance(columns, str):
            columns = [columns]
        try:
            data = data[list(columns)]
        except Exception as e:  # noqa: BLE001 - any frame library's missing-column error
            raise InputDataError(f"could not select columns {list(columns)!r}: {e}") from None
    if hasattr(data, "to_numpy") and not isinstance(data, np.ndarray):
        data = data.to_numpy()
    try:
        x = np.asarray(data, dtype=float)
    except (TypeError, ValueError) as e:
        raise InputDataError(f"data must be numeric (n x d): {e}") from None
    if x.ndim == 1:
        x = x[:, None]
    if x.ndim != 2 or x.shape[0] == 0 or x.shape[1] == 0:
        raise InputDataError(f"data must be a non-empty n x d array, got shape {x.shape}")
    if not np.all(np.isfinite(x)):
        raise InputDataError("data contain NaN, null or infinite values; drop or impute them first")
    return x


@dataclass(frozen=True, eq=False)
class MeanEstimate:
    """Result of :func:`plan_mean`.

    ``noise_std[i]`` is the std of the Gaussian noise on coordinate i of ``mean``;
    ``expected_error`` = E‖noise‖_p^p = m_p Σ_i noise_std_i^p (the noise part of the error; the clipping
    bias and the sampling error come on top). ``sigma_hat`` are the (regularised) spreads used for
    scaling, ``clip_radius`` is C, ``clip_target`` is k, ``n_clipped`` the rows with ‖y‖₂ > C;
    ``grid_spacing`` is γ = C/K of the secure noise step (None with float noise).
    """

    mean: np.ndarray
    noise_std: np.ndarray
    expected_error: float
    p: float
    n: int
    d: int
    rho: float
    rho_parts: dict[str, float] = field(repr=False)
    center: np.ndarray = field(repr=False)
    sigma_hat: np.ndarray = field(repr=False)
    clip_radius: float = 0.0
    clip_target: float = 0.0
    n_clipped: int = 0
    grid_spacing: float | None = None
    insecure_float: bool = False


_SPLIT_ESTIMATED = {"center": 1 / 16, "variance": 3 / 16, "clip": 3 / 16, "noise": 9 / 16}
_SPLIT_PUBLIC = {"center": 1 / 4, "variance": 0.0, "clip": 3 / 16, "noise": 9 / 16}


def _budget(rho: float, budget: Mapping[str, float] | None, estimated: bool) -> dict[str, float]:
    if budget is None:
        frac = dict(_SPLIT_ESTIMATED if estimated else _SPLIT_PUBLIC)
    else:
        if not isinstance(budget, dict) or set(budget) - {"center", "variance", "clip", "noise"}:
            raise InvalidParameterError("budget must be a dict with keys 'center', 'variance', 'clip', 'noise'")
        frac = {key: v.nonnegative(f"budget[{key!r}]", budget.get(key, 0.0))
                for key in ("center", "variance", "clip", "noise")}
        tot = sum(frac.values())
        frac = {key: val / tot for key, val in frac.items()}
        for key in ("center", "clip", "noise") + (("variance",) if estimated else ()):
            if frac[key] <= 0:
                raise InvalidParameterError(f"budget[{key!r}] must be > 0")
        if not estimated and frac["variance"] > 0:
            raise InvalidParameterError("budget['variance'] must be 0 when the variances are not estimated")
    parts = {key: rho * val for key, val in frac.items()}
    # composition: the parts must not exceed rho after float rounding
    parts["noise"] = rho - parts["center"] - parts["variance"] - parts["clip"]
    return parts


def plan_mean(data: Any, *, rho: float, bound: float, p: float = 2.0, variances: str | npt.ArrayLike = "estimate",
              columns: Sequence[str] | None = None, variance_pairs: int = 1, regularize: bool = True,
              beta: float = 0.05, budget: Mapping[str, float] | None = None, resolution: float | None = None,
              clip_steps: int = 10, check_sample_size: bool = True, rng: SecureRandom | None = None,
              insecure_float: bool = False) -> MeanEstimate:
    """PLAN (thesis Algorithm 17): ρ-zCDP estimate of the mean of n rows in [−M, M]^d (M = ``bound``).

    ``data``: an (n, d) array, or a DataFrame (pandas/polars) with ``columns`` selecting the d columns.
    ``variances``: ``"estimate"`` (Algorithm 18 with k = ``variance_pairs`` and the Gaussian χ²
    correction), ``"binary"`` (0/1 data, §5.7.1), ``"none"`` (σ̂ ≡ 1: no skew adaptation, Theorem 5.4),
    or a length-d array of data-independent variance guesses (no budget spent). ``p`` is the error
    exponent the scaling targets (2 = squared ℓ₂). ``resolution`` sets the median search precision;
    the default min(1, 2M/1024) is the thesis's T = log₂ M (resolution 1, which assumes σ_i >= 1) for
    large M and at least 10 search steps for small M. ``beta`` is the failure probability
    for the rank-error bound that sets k. With ``check_sample_size`` a too-small n (median rank error
    bound >= n/6, Lemma 5.6) raises :class:`~sparsedp.errors.InputDataError` instead of returning a
    meaningless estimate. See the module docstring for the algorithm, budget split and noise.
    """
    x = _matrix(data, columns)
    r = v.positive("rho", rho)
    m = v.positive("bound", bound)
    pp = v.positive("p", p)
    b = v.real("beta", beta, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
    resolution = min(1.0, 2.0 * m / 1024) if resolution is None else v.positive("resolution", resolution)
    c_steps = v.integer("clip_steps", clip_steps, lo=1)
    n, d = x.shape
    public_var = None
    if isinstance(variances, str):
        mode = v.choice("variances", variances, _VARIANCE_MODES)
    else:
        mode = "public"
        public_var = np.asarray(variances, dtype=float).reshape(-1)
        if public_var.size != d or not np.all(np.isfinite(public_var)) or np.any(public_var <= 0):
            raise InvalidParameterError(f"variances must be 'estimate', 'binary', 'none' or {d} positive "
                                        f"finite numbers")
    estimated = mode in ("estimate", "binary")
    if mode == "binary" and not np.all((x == 0) | (x == 1)):
        raise InputDataError("variances='binary' needs 0/1 data")
    parts = _budget(r, budget, estimated)
    src = _source(rng)

    # sample-size checks before any noise is drawn
    t_center = _steps_for(-m, m, resolution, False)
    center_err = quantile_rank_error(t_center, parts["center"] / d, b / (3 * d))
    clip_err = quantile_rank_error(c_steps, parts["clip"], b / 3)
    k = math.sqrt(n) + clip_err
    if check_sample_size and center_err >= n / 6:
        raise InputDataError(
            f"too few rows for PLAN: n={n}, but the private median's rank error bound is {center_err:.0f} "
            f"(must be < n/6, thesis Lemma 5.6) at rho={r}, d={d}; use more rows, a larger rho, a smaller "
            f"bound or a coarser resolution (or check_sample_size=False)")
    if k >= n:
        raise InputDataError(f"too few rows for PLAN: n={n} but the clipping target k = sqrt(n) + rank error "
                             f"= {k:.0f} >= n; use more rows or a larger rho")
    if mode == "estimate" and n < 2 * variance_pairs:
        raise InputDataError(f"variance estimation needs at least {2 * variance_pairs} rows, got n={n}")

    x = np.clip(x, -m, m)
    center = private_quantile(x, 0.5, rho=parts["center"], lower=-m, upper=m, steps=t_center, rng=src,
                              insecure_float=insecure_float)
    if mode == "public":
        assert public_var is not None  # set with mode "public" above
        sig = np.sqrt(public_var)
    elif mode == "estimate":
        sig = np.sqrt(estimate_variance(x, rho=parts["variance"], bound=m, pairs=variance_pairs, rng=src,
                                        insecure_float=insecure_float))
    elif mode == "binary":
        sig = np.sqrt(_binary_variance(x, parts["variance"], src, insecure_float))
    else:
        sig = np.ones(d)
    if regularize and mode != "none":
        sig = sig + np.sum(sig) / d
    scale = sig ** (-2.0 / (pp + 2.0))            # s_i = σ̂_i^{−2/(p+2)}
    y = (x - center) * scale
    norms = np.sqrt(np.einsum("ij,ij->i", y, y))
    r_max = 2.0 * m * float(np.linalg.norm(scale))  # ‖y‖₂ <= 2M‖s‖₂ (spec §3.3, line 6)
    c = float(private_quantile(norms, (n - k) / n, rho=parts["clip"], lower=r_max * 2.0 ** -30, upper=r_max,
                               steps=c_steps, log_scale=True, rng=src, insecure_float=insecure_float)[0])
    over = norms > c
    factor = np.ones(n)
    factor[over] = c / norms[over]
    yc = y * factor[:, None]

    if insecure_float:
        noise_y = math.sqrt(2.0 / parts["noise"]) * c
        gamma = None

        eta = noise_y * np.asarray(noise.sample_gaussian(1.0, d, rng=src, insecure_float=True), dtype=float)
        total = yc.sum(axis=0) + eta
    else:
        # public K: grid rounding error per coordinate <= n·γ/2 = n·C/(2K) at most noise std/1000, and the
        # rounding's sensitivity term √d at most 2K/1000 (both only cost utility, never privacy)
        need = max(1000.0 * n * math.sqrt(parts["noise"]) / (2.0 * math.sqrt(2.0)), 500.0 * math.sqrt(d))
        kk = 2 ** min(max(10, math.ceil(math.log2(need))), math.floor(math.log2(_INT_BUDGET / n)))
        gamma = c / kk
        ints = np.rint(yc / gamma).astype(np.int64)
        sens = 2 * kk + math.isqrt(d - 1) + 1          # integer >= 2K + √d
        sigma2 = Fraction(sens) ** 2 / (2 * Fraction(parts["noise"]))

        z = np.asarray(noise.sample_discrete_gaussian(sigma2, d, rng=src), dtype=np.int64)
        total = gamma * (ints.sum(axis=0) + z).astype(float)
        noise_y = gamma * math.sqrt(float(sigma2))
    est = center + total / (n * scale)
    noise_std = noise_y / (n * scale)
    return MeanEstimate(
        mean=est, noise_std=noise_std, expected_error=gaussian_moment(pp) * float(np.sum(noise_std ** pp)),
        p=pp, n=n, d=d, rho=r, rho_parts=parts, center=center, sigma_hat=sig, clip_radius=c, clip_target=k,
        n_clipped=int(np.count_nonzero(over)), grid_spacing=gamma, insecure_float=bool(insecure_float))
