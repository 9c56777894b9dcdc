"""The per-key step every sparse-histogram mechanism shares: add noise to integer counts and filter.

:func:`noise_and_filter` works on an ``int64`` count array only and returns the *positions* of the released
keys with their noisy counts, so any key container works and an engine (a Polars frame, a Spark partition)
can run it where the data lives. The one shared term of the correlated mechanisms (CSH, top-k CSH) is drawn
once with :func:`draw_shared_noise` (on the driver) and passed to every call.

What is sampled and compared is read from the :class:`~sparsedp.accounting.calibration.Calibration`, so the
release rule is the one its accountant analysed:

=================  ==========================================  ==============================================
mechanism          secure noise (default)                      release rule (pre = pre-threshold)
=================  ==========================================  ==============================================
gshm               ``Z ~ N_Z(0, sigma2)`` (exact rational)      ``c >= pre`` and ``c + Z >= pre + margin``
laplace            ``Z ~`` discrete Laplace(scale)              ``c >= pre`` and ``c + Z >= pre + margin``
csh, topk-csh      Alg. 4: ``Z_i ~ N_Z(0, 4σ²)``,              ``c >= pre`` and ``c + (Z_i + Z_c)/2 > pre + τ``
                   shared ``Z_c ~ N_Z(0, 4σ²/√k)``
=================  ==========================================  ==============================================

The discrete GSHM / Laplace rules use ``>=`` with an integer margin: the accountants
(:mod:`sparsedp.accounting.discrete_histograms`) take ``P[Z >= margin]`` as the release probability of a
count at the pre-threshold. CSH follows seed 000 (strict ``>``, Algorithms 2–4, Thm 7.7). With
``insecure_float=True`` and a continuous calibration the same rules apply to float noise
(``N(0, σ²)``, shared ``N(0, σ²/√k)``, ``Lap(b)``); ties have probability zero there.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from .. import _validate
from ..errors import InvalidParameterError

__all__ = ["noise_and_filter", "draw_shared_noise", "noise_plan", "NoisePlan", "correlated_rule"]

_CORRELATED = ("csh", "topk-csh")
_INDEPENDENT = ("gshm", "laplace")


class NoisePlan:
    """What to sample and how to compare, derived once from a Calibration (cheap; pure)."""

    __slots__ = ("mechanism", "discrete", "family", "scale", "shared_scale", "sigma", "shared_sigma",
                 "tau", "strict", "k")

    def __init__(self, calibration: Any):
        cal = calibration
        params = dict(getattr(cal, "params", {}) or {})
        self.mechanism = str(cal.mechanism)
        self.discrete = bool(params.get("discrete", False))
        self.tau = float(cal.tau)
        self.sigma = float(cal.sigma)
        self.k = params.get("k")
        self.scale = self.shared_scale = None
        self.shared_sigma = None
        if self.mechanism == "gshm":
            self.family = "gaussian"
            self.strict = params.get("comparison", ">=") == ">"
            if self.discrete:
                self.scale = Fraction(params["sigma2"])
                self.tau = float(int(params.get("margin", cal.tau)))
        elif self.mechanism == "laplace":
            self.family = "laplace"
            self.strict = params.get("comparison", ">") == ">"
            if self.discrete:
                self.scale = Fraction(params["scale"])
                if "margin" in params:
                    self.tau = float(int(params["margin"]))
        elif self.mechanism in _CORRELATED:
            self.family = "correlated"
            self.strict = params.get("comparison", ">") == ">"
            if self.k is None:
                raise InvalidParameterError(f"calibration for {self.mechanism!r} must carry params['k']")
            self.k = int(self.k)
            if self.discrete:
                if "sigma2_corr" in params:  # the exact scales the accountant evaluated
                    self.scale, self.shared_scale = Fraction(params["sigma2"]), Fraction(params["sigma2_corr"])
                else:
                    from ..accounting.csh import csh_discrete_scales

                    self.scale, self.shared_scale = csh_discrete_scales(self.sigma, self.k)
            else:
                self.shared_sigma = self.sigma / self.k ** 0.25
        else:
            raise InvalidParameterError(f"no per-key kernel for mechanism {self.mechanism!r}; expected one of "
                                        f"{', '.join(map(repr, _INDEPENDENT + _CORRELATED))}")


def noise_plan(calibration: Any) -> NoisePlan:
    """The :class:`NoisePlan` of a calibration (what :func:`noise_and_filter` samples and compares)."""
    return calibration if isinstance(calibration, NoisePlan) else NoisePlan(calibration)


def _check_float(plan: NoisePlan, insecure_float: bool) -> None:
    if not plan.discrete and not insecure_float:
        raise InvalidParameterError(
            "this calibration is for continuous (floating-point) noise, which is not secure; calibrate for "
            "discrete noise (the default) or pass insecure_float=True for research reproduction")


def draw_shared_noise(calibration: Any, rng=None, *, insecure_float: bool = False):
    """The one shared term of CSH / top-k CSH (``Z_corr``), drawn once per release; ``None`` otherwise.

    Discrete: an ``int`` from ``N_Z(0, 4σ²/√k)`` (Algorithm 4). Continuous: a float from ``N(0, σ²/√k)``
    (Algorithm 2), only with ``insecure_float=True``. Never release it.
    """
    plan = noise_plan(calibration)
    if plan.family != "correlated":
        return None
    _check_float(plan, insecure_float)
    z = _sample_shared(plan, 1, rng)[0]
    return int(z) if plan.discrete else float(z)


def _sample_shared(plan: NoisePlan, size: int, rng) -> np.ndarray:
    """``size`` draws of the shared term's law (one per release; tests simulate many releases)."""
    from .. import noise

    if plan.discrete:
        return noise.sample_discrete_gaussian(plan.shared_scale, size, rng=rng)
    return noise.sample_gaussian(plan.shared_sigma, size, rng=rng, insecure_float=True)


def _sample(plan: NoisePlan, size: int, rng, insecure_float: bool) -> np.ndarray:
    from .. import noise

    if plan.family == "laplace":
        if plan.discrete:
            return noise.sample_discrete_laplace(plan.scale, size, rng=rng)
        return noise.sample_laplace(plan.sigma, size, rng=rng, insecure_float=True)
    if plan.discrete:
        return noise.sample_discrete_gaussian(plan.scale, size, rng=rng)
    return noise.sample_gaussian(plan.sigma, size, rng=rng, insecure_float=True)


def correlated_rule(plan: NoisePlan, counts: np.ndarray, z: np.ndarray, shared, threshold: float):
    """CSH's per-key rule (Algorithm 2 / 4): ``(keep mask, noisy values)`` for counts, independent noise z
    and the shared term (a scalar in a release; arrays broadcast, which the sampling-law tests use to
    simulate many releases at once). Discrete: ``2c + Z_i + Z_corr`` is an exact integer compared with
    ``2·threshold`` and halved afterwards (values on the ½-lattice)."""
    if plan.discrete:
        doubled = 2 * counts + z
        doubled = doubled + np.asarray(shared, dtype=np.int64)
        keep = doubled > 2.0 * threshold if plan.strict else doubled >= 2.0 * threshold
        return keep, doubled * 0.5
    noisy = counts + z + np.asarray(shared, dtype=np.float64)
    return (noisy > threshold if plan.strict else noisy >= threshold), noisy


def noise_and_filter(counts, calibration, pre_threshold=1, rng=None, shared_noise=None, *,
                     insecure_float: bool = False) -> tuple[np.ndarray, np.ndarray]:
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
        return np.empty(0, np.int64), np.empty(0, np.int64 if plan.discrete and plan.family != "correlated"
                                               else np.float64)
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
        z = _sample(plan, n, rng, insecure_float)
        keep, noisy_all = correlated_rule(plan, cc, z, shared_noise, threshold)
        sel = np.flatnonzero(keep)
        noisy = noisy_all[sel]
    else:
        z = _sample(plan, n, rng, insecure_float)
        if plan.discrete:
            z += cc  # in place: int64
            noisy_all = z
            thr = math.floor(threshold) + 1 if plan.strict else math.ceil(threshold)
            keep = noisy_all >= thr
        else:
            noisy_all = z + cc
            keep = noisy_all > threshold if plan.strict else noisy_all >= threshold
        sel = np.flatnonzero(keep)
        noisy = noisy_all[sel]
    positions = sel if pos is None else pos[sel]
    return positions.astype(np.int64, copy=False), noisy
