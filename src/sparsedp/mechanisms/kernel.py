"""The per-key step every sparse-histogram mechanism shares: add noise to integer counts and filter.

:func:`noise_and_filter` works on an ``int64`` count array only and returns the *positions* of the released
keys with their noisy counts, so any key container works and an engine (a Polars frame, a Spark partition)
can run it where the data lives. The one shared term of the correlated mechanisms (CSH, top-k CSH) is drawn
once with :func:`draw_shared_noise` (on the driver) and passed to every call.

What is sampled is the law ``calibration.noise`` (:mod:`sparsedp.accounting.laws`) and what is compared is
``calibration.comparison``, so the release rule is the one its accountant analysed:

=================  ==========================================  ==============================================
mechanism          secure noise law (default)                  release rule (pre = pre-threshold)
=================  ==========================================  ==============================================
gshm               ``DiscreteGaussian``: ``Z ~ N_Z(0, sigma2)``  ``c >= pre`` and ``c + Z >= pre + margin``
laplace            ``DiscreteLaplace``: two-sided geometric     ``c >= pre`` and ``c + Z >= pre + margin``
csh, topk-csh      ``RoundedCorrelatedGaussian``:               ``c >= pre`` and ``c + X_i >= pre + margin``
                   ``X_i = round(G_i + A)``, ``G_i ~ N(0, σ²)``,
                   shared ``A ~ N(0, σ²/√k)`` (exact,
                   :mod:`sparsedp.noise.rounded`)
csh, topk-csh      ``DiscreteCorrelatedGaussian`` (Alg. 4,      ``c >= pre`` and ``c + (Z_i + Z_c)/2 > pre + τ``
                   ``csh_noise="alg4"``): ``Z_i ~ N_Z(0, 4σ²)``,
                   ``Z_c ~ N_Z(0, 4σ²/√k)``
=================  ==========================================  ==============================================

How the discrete rules are run: every rule is "key i is released iff its own noise ``X_i >= j_i``" for an
integer ``j_i`` computed from its count (and the shared term), so the plan yields a *law* and *integer
thresholds* (:meth:`NoisePlan.law`, :meth:`NoisePlan.release_floor`) and
:func:`sparsedp.noise.inversion.release_by_inversion` decides each key exactly by inversion, computing ``X_i``
only for released keys (:meth:`NoisePlan.noisy_values` then forms the released value). Laws too wide for an
inversion table (huge σ, :func:`~sparsedp.noise.inversion.inversion_fits`) are sampled with the exact
rejection samplers and compared instead; the law of the output is the same.

The discrete GSHM / Laplace rules use ``>=`` with an integer margin: the accountants
(:mod:`sparsedp.accounting.discrete_histograms`) take ``P[Z >= margin]`` as the release probability of a
count at the pre-threshold. Rounded CSH uses ``>=`` with an integer margin too (Algorithm 2's strict rule
at τ = margin − ½, then rounding: docs/proofs/rounded-csh.md); Algorithm 4 follows Lebeda & Retschmeier (2024) (strict ``>``). With
``insecure_float=True`` and a continuous calibration (laws ``Gaussian``, ``CorrelatedGaussian``, ``Laplace``)
the same rules apply to float noise (``N(0, σ²)``, shared ``N(0, σ²/√k)``, ``Lap(b)``); ties have probability
zero there.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import TYPE_CHECKING, Any, TypeAlias

import numpy as np
import numpy.typing as npt

from .. import _validate, noise
from ..accounting import laws
from ..accounting.calibration import Comparison
from ..errors import InvalidParameterError
from ..noise import inversion
from ..noise.inversion import DiscreteGaussianLaw, DiscreteLaplaceLaw, IntegerLaw
from ..noise.source import SecureRandom

__all__ = ["noise_and_filter", "draw_shared_noise", "noise_plan", "NoisePlan", "correlated_rule", "debias_noise",
           "truncate_top_k"]

if TYPE_CHECKING:
    from types import ModuleType

    from ..noise.rounded import SharedGaussianTerm

#: the one shared term of a CSH release (:func:`draw_shared_noise`): the rounded mechanism's refinable Gaussian,
#: Algorithm 4's integer, a float (continuous noise), or None (no shared term)
SharedNoise: TypeAlias = "SharedGaussianTerm | int | float | None"
#: an array of integers (counts, thresholds, noise draws)
IntArray: TypeAlias = npt.NDArray[np.int64]


def _rounded() -> ModuleType:
    """:mod:`sparsedp.noise.rounded` (the exact rounded-Gaussian laws of CSH), imported on first use: it loads
    mpmath (a few tenths of a second), which a GSHM or Laplace release never needs (issue 19, start-up cost)."""
    from ..noise import rounded

    return rounded


class NoisePlan:
    """What to sample and how to compare, derived once from a Calibration (cheap; pure).

    Dispatches on the type of ``calibration.noise`` (:mod:`sparsedp.accounting.laws`): independent
    Gaussian / Laplace laws (``family`` "gaussian" / "laplace") or the correlated laws of CSH
    (``family`` "correlated"); the release test is ``calibration.comparison``.
    """

    __slots__ = ("mechanism", "noise", "discrete", "family", "scale", "shared_scale", "sigma", "shared_sigma",
                 "tau", "strict", "k", "rounded")
    mechanism: str
    noise: Any  # the calibration's noise law (sparsedp.accounting.laws)
    discrete: bool
    family: str
    scale: Fraction | None
    shared_scale: Fraction | None
    sigma: float
    shared_sigma: float | None
    tau: float
    strict: bool
    k: int | None
    rounded: bool

    def __init__(self, calibration: Any):
        cal = calibration
        law = cal.noise
        self.mechanism = str(cal.mechanism)
        self.noise = law
        self.discrete = bool(law.secure)
        self.tau = float(cal.tau)
        self.sigma = float(cal.sigma)
        self.k = getattr(cal, "k", None)
        self.scale = self.shared_scale = None
        self.shared_sigma = None
        self.rounded = False
        if cal.comparison not in (Comparison.GE, Comparison.GT):
            raise InvalidParameterError(f"calibration for {self.mechanism!r} has no threshold test "
                                        f"(comparison {cal.comparison.value!r}); it has no per-key kernel")
        self.strict = cal.comparison is Comparison.GT
        if isinstance(law, laws.DiscreteGaussian):
            self.family, self.scale = "gaussian", law.sigma2
        elif isinstance(law, laws.Gaussian):
            self.family, self.sigma = "gaussian", law.sigma
        elif isinstance(law, laws.DiscreteLaplace):
            self.family, self.scale = "laplace", law.scale
        elif isinstance(law, laws.Laplace):
            self.family, self.sigma = "laplace", law.scale
        elif isinstance(law, laws.RoundedCorrelatedGaussian):
            # rounded CSH (noise.rounded): X_i = round(G_i + A), rule c + X_i >= pre + margin
            self.family, self.rounded = "correlated", True
            self.sigma, self.shared_sigma = law.sigma, law.shared_sigma
        elif isinstance(law, laws.DiscreteCorrelatedGaussian):  # Algorithm 4: the exact scales evaluated
            self.family, self.scale, self.shared_scale = "correlated", law.sigma2, law.shared_sigma2
        elif isinstance(law, laws.CorrelatedGaussian):
            self.family, self.sigma, self.shared_sigma = "correlated", law.sigma, law.shared_sigma
        else:
            raise InvalidParameterError(
                f"no per-key kernel for the noise law {type(law).__name__} of {self.mechanism!r}; expected a "
                "Gaussian, Laplace or correlated-Gaussian law (GSHM, Laplace, CSH, top-k CSH)")
        if self.rounded and self.strict:
            raise InvalidParameterError("rounded CSH is accounted for the rule c + X >= pre + margin (GE)")

    # -- discrete rules as "X_i >= j_i" (see the module docstring) ------------------------------------
    def law(self, shared: SharedNoise = None) -> IntegerLaw:
        """The law of each key's own noise X_i in a discrete release (given the release's shared term)."""
        if not self.discrete:
            raise InvalidParameterError("a continuous plan has no integer noise law")
        if self.rounded:                                # X_i = round(G_i + A) given the shared A
            law: IntegerLaw = _rounded().RoundedShiftedGaussianLaw(self.sigma, shared)
            return law
        assert self.scale is not None  # every discrete independent law has its exact scale
        if self.family == "laplace":
            return DiscreteLaplaceLaw(self.scale)
        return DiscreteGaussianLaw(self.scale)          # GSHM: N_Z(0, σ²); CSH: Z_i ~ N_Z(0, 4σ²)

    def release_floor(self, counts: IntArray, threshold: Fraction | float, shared: SharedNoise = None) -> IntArray:
        """int64 ``j`` with: key i is released iff its noise ``X_i >= j[i]``.

        GSHM / Laplace: ``c + X >= thr`` (``thr = ⌈threshold⌉``, or ``⌊threshold⌋ + 1`` for ``>``), so
        ``j = thr − c``. CSH (Alg. 4): ``2c + X + Z_corr`` is an integer compared with ``t2 = 2·threshold``:
        ``> t2`` iff ``>= ⌊t2⌋ + 1`` and ``>= t2`` iff ``>= ⌈t2⌉``, so ``j = base − 2c − Z_corr``.
        """
        if self.rounded:  # c + X >= ⌈threshold⌉ (threshold = pre + integer margin)
            return math.ceil(threshold) - counts
        if self.family == "correlated":
            t2 = 2 * threshold      # exact for a Fraction threshold (noise_and_filter passes one)
            base = math.floor(t2) + 1 if self.strict else math.ceil(t2)
            return (base - _int(shared)) - 2 * counts
        thr = math.floor(threshold) + 1 if self.strict else math.ceil(threshold)
        return thr - counts

    def noisy_values(self, counts: IntArray, x: IntArray, shared: SharedNoise = None) -> npt.NDArray[Any]:
        """Released values from the counts and noises of the released keys: ``c + X`` (int64), or for CSH
        ``(2c + X + Z_corr)/2`` (float64 on the ½-lattice)."""
        if self.family == "correlated" and not self.rounded:
            halves: npt.NDArray[np.floating[Any]] = (2 * counts + x + _int(shared)) * 0.5
            return halves
        values: IntArray = counts + x
        return values


def _int(shared: SharedNoise) -> int:
    """Algorithm 4's shared term ``Z_corr`` (an integer: :func:`draw_shared_noise` of a discrete plan)."""
    assert isinstance(shared, (int, np.integer)), "Algorithm 4 needs its integer shared term"
    return int(shared)


def _release_discrete(plan: NoisePlan, counts: IntArray, threshold: Fraction | float, shared: SharedNoise,
                      rng: SecureRandom | None) -> tuple[npt.NDArray[np.intp], npt.NDArray[Any]]:
    """``(selected positions into counts, noisy values)`` of a discrete release (exact; module docstring)."""
    law = plan.law(shared)
    j = plan.release_floor(counts, threshold, shared)
    if inversion.inversion_fits(law):
        sel, x = inversion.release_by_inversion(law, j, rng)
    elif plan.rounded:
        raise InvalidParameterError(f"sigma={plan.sigma:g} is too large for the exact rounded-CSH sampler "
                                    "(inversion table); calibrate with csh_noise='alg4'")
    else:  # window too wide for a table: draw every X with the rejection sampler (same law)
        z = _sample(plan, counts.size, rng, False)
        sel = np.flatnonzero(z >= j)
        x = z[sel]
    return sel, plan.noisy_values(counts[sel], x, shared)


def noise_plan(calibration: Any) -> NoisePlan:
    """The :class:`NoisePlan` of a calibration (what :func:`noise_and_filter` samples and compares)."""
    return calibration if isinstance(calibration, NoisePlan) else NoisePlan(calibration)


def _check_float(plan: NoisePlan, insecure_float: bool) -> None:
    if not plan.discrete and not insecure_float:
        raise InvalidParameterError(
            "this calibration is for continuous (floating-point) noise, which is not secure; calibrate for "
            "discrete noise (the default) or pass insecure_float=True for research reproduction")


def draw_shared_noise(calibration: Any, rng: SecureRandom | None = None, *,
                      insecure_float: bool = False) -> SharedNoise:
    """The one shared term of CSH / top-k CSH (``Z_corr``), drawn once per release; ``None`` otherwise.

    Rounded (secure default): a :class:`~sparsedp.noise.rounded.SharedGaussianTerm` ``A ~ N(0, σ²/√k)``
    known as an interval refined on demand from a stream keyed by a secret drawn from ``rng`` (picklable,
    reproducible in every process). Algorithm 4: an ``int`` from ``N_Z(0, 4σ²/√k)``. Continuous: a float
    from ``N(0, σ²/√k)`` (Algorithm 2), only with ``insecure_float=True``. Never release it.
    """
    plan = noise_plan(calibration)
    if plan.family != "correlated":
        return None
    _check_float(plan, insecure_float)
    if plan.rounded:
        term: SharedGaussianTerm = _rounded().SharedGaussianTerm.draw(plan.shared_sigma, rng)
        return term
    z = _sample_shared(plan, 1, rng)[0]
    return int(z) if plan.discrete else float(z)


def debias_noise(plan: NoisePlan, rng: Any) -> int | float:
    """The noise of de-biased top-k's t̃ = t + noise (variance σ²/√k) for the plan's noise: rounded (secure
    default): ``round(W)``, ``W ~ N(0, σ²/√k)``, an int sampled exactly by inversion
    (:class:`~sparsedp.noise.rounded.RoundedShiftedGaussianLaw` with shift 0); Algorithm 4: ``Z_t/2`` with
    ``Z_t ~ N_Z(0, 4σ²/√k)``; float (``insecure_float``): ``N(0, σ²/√k)`` (Lebeda & Retschmeier (2024) §4).
    Used by every engine."""
    if plan.rounded:
        law = _rounded().RoundedShiftedGaussianLaw(plan.shared_sigma)
        return int(inversion.sample_by_inversion(law, 1, rng)[0])
    if plan.discrete:
        return int(noise.sample_discrete_gaussian(plan.shared_scale, 1, rng=rng)[0]) / 2.0
    return float(noise.sample_gaussian(plan.shared_sigma, 1, rng=rng, insecure_float=True)[0])


def _sample_shared(plan: NoisePlan, size: int, rng: SecureRandom | None) -> npt.NDArray[Any]:
    """``size`` draws of the shared term's law (one per release; tests simulate many releases).
    Rounded plans: float draws, for *simulation only* (audit, tests; see :func:`correlated_rule`)."""
    if plan.rounded:
        return noise.sample_gaussian(plan.shared_sigma, size, rng=rng, insecure_float=True)
    if plan.discrete:
        return noise.sample_discrete_gaussian(plan.shared_scale, size, rng=rng)
    return noise.sample_gaussian(plan.shared_sigma, size, rng=rng, insecure_float=True)


def _sample(plan: NoisePlan, size: int, rng: SecureRandom | None, insecure_float: bool) -> npt.NDArray[Any]:
    if plan.family == "laplace":
        if plan.discrete:
            return noise.sample_discrete_laplace(plan.scale, size, rng=rng)
        return noise.sample_laplace(plan.sigma, size, rng=rng, insecure_float=True)
    if plan.discrete and not plan.rounded:  # rounded: float G_i, simulation only (never a release path)
        return noise.sample_discrete_gaussian(plan.scale, size, rng=rng)
    return noise.sample_gaussian(plan.sigma, size, rng=rng, insecure_float=True)


def correlated_rule(plan: NoisePlan, counts: npt.NDArray[Any], z: npt.NDArray[Any], shared: Any,
                    threshold: float) -> tuple[npt.NDArray[np.bool_], npt.NDArray[Any]]:
    """CSH's per-key rule (Algorithm 2 / 4): ``(keep mask, noisy values)`` for counts, independent noise z
    and the shared term (a scalar in a release; arrays broadcast, which the sampling-law tests use to
    simulate many releases at once). Discrete: ``2c + Z_i + Z_corr`` is an exact integer compared with
    ``2·threshold`` and halved afterwards (values on the ½-lattice). Rounded: ``c + round(z + shared) >=
    threshold`` with float z and shared: a double-precision *simulation* of the rounded law for the audit and
    the many-release tests (releases use the exact sampler, :func:`_release_discrete`)."""
    if plan.rounded:
        noisy = counts + np.rint(z + np.asarray(shared, dtype=np.float64))
        return noisy >= math.ceil(threshold), noisy
    if plan.discrete:
        doubled = 2 * counts + z
        doubled = doubled + np.asarray(shared, dtype=np.int64)
        keep = doubled > 2.0 * threshold if plan.strict else doubled >= 2.0 * threshold
        return keep, doubled * 0.5
    noisy = counts + z + np.asarray(shared, dtype=np.float64)
    return (noisy > threshold if plan.strict else noisy >= threshold), noisy


def noise_and_filter(counts: npt.ArrayLike, calibration: Any, pre_threshold: int = 1, rng: SecureRandom | None = None,
                     shared_noise: Any = None, *,
                     insecure_float: bool = False) -> tuple[npt.NDArray[np.intp], npt.NDArray[Any]]:
    """Noise the counts and keep the released ones: returns ``(positions, noisy_counts)``.

    ``counts``: non-negative ``int64`` array (validated by the caller, e.g. ``SparseHistogram``).
    Keys with ``count < pre_threshold`` are dropped *before* any noise is drawn for them (they are never
    released). ``positions`` index into ``counts`` (int64, increasing); ``noisy_counts`` are ``int64``
    (GSHM, Laplace), multiples of ½ as float64 (discrete CSH) or float64 (``insecure_float``), and are all
    at or above the absolute threshold ``pre_threshold + calibration.tau`` (strictly above for CSH).

    For CSH / top-k CSH pass the ``shared_noise`` drawn once by :func:`draw_shared_noise`; if omitted it is
    drawn here (fine for a single in-memory call, wrong for per-partition calls of one release).
    """
    plan = noise_plan(calibration)
    _check_float(plan, insecure_float)
    c = np.asarray(counts)
    if c.dtype != np.int64:
        c = c.astype(np.int64)
    pre = _validate.integer("pre_threshold", pre_threshold, lo=1)  # counts below it are never released
    if c.size == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64 if plan.discrete and (plan.family != "correlated"
                                                                             or plan.rounded) else np.float64)
    if c.min() >= pre:
        pos = None
        cc = c
    else:
        pos = np.flatnonzero(c >= pre)
        cc = c[pos]
    n = cc.size
    threshold = pre + plan.tau
    if plan.family == "correlated":
        if shared_noise is None:
            shared_noise = draw_shared_noise(plan, rng, insecure_float=insecure_float)
        if np.ndim(shared_noise) != 0:
            raise InvalidParameterError("shared_noise must be one scalar drawn once per release")
    if plan.discrete:
        # the exact rational threshold: the float pre + tau rounds for pre > 2^52 (e.g. 2^53 + 1 + 2.0 gives
        # 2^53 + 2), which would release a count at pre with P[X >= margin − 1]
        sel, noisy = _release_discrete(plan, cc, Fraction(pre) + Fraction(plan.tau), shared_noise, rng)
    elif plan.family == "correlated":
        z = _sample(plan, n, rng, insecure_float)
        keep, noisy_all = correlated_rule(plan, cc, z, shared_noise, threshold)
        sel = np.flatnonzero(keep)
        noisy = noisy_all[sel]
    else:
        noisy_all = _sample(plan, n, rng, insecure_float) + cc
        keep = noisy_all > threshold if plan.strict else noisy_all >= threshold
        sel = np.flatnonzero(keep)
        noisy = noisy_all[sel]
    positions = sel if pos is None else pos[sel]
    return positions.astype(np.int64, copy=False), noisy


def truncate_top_k(counts: np.ndarray, k: int) -> tuple[int, np.ndarray]:
    """``(t, H̃)``: t = the (k+1)-th largest count (0 if there are at most k counts), H̃ = max(0, H − t)
    (Lebeda & Retschmeier (2024) Algorithm 3; by their Lemma 4.1 H̃ is k-sparse monotonic).

    O(n) (``np.partition``). At most k entries of H̃ are positive.
    """
    c = np.asarray(counts, dtype=np.int64)
    if c.size <= k:
        return 0, c.copy()
    t = int(np.partition(c, c.size - k - 1)[c.size - k - 1])
    out = c - t
    np.maximum(out, 0, out=out)
    return t, out
