"""Differentially private set union (Gopi et al., ICML 2020) as registered mechanisms: key discovery.

``weighted-gaussian`` (:class:`WeightedGaussian`, secure): each unit keeps at most ``Δ0 = max_groups_per_unit``
of its keys (the engine's one random ℓ0 choice, :mod:`sparsedp.engines.bounding`); a unit that kept ``t`` keys
gives each of them the integer weight ``W_t = floor(G/√t)`` on the public grid ``1/G`` (ℓ2 norm <= 1);
every key's weights are summed over the kept pairs (integers), exact discrete Gaussian noise
``N_Z(0, s)`` is added and a key is released iff ``S + Z >= T``. Calibration and the exact privacy profile of
the noise sampled: :mod:`sparsedp.accounting.set_union` (``docs/proofs/set-union.md``). The released value is
the key's noisy weight ``(S + Z)/G``, not a count: the mechanism discovers keys (count them with a second
release on the released keys as a public list, ``release(..., keys=…)``).

Versus GSHM at the same ``Δ0``: a unit with ``t < Δ0`` keys adds ``1/√t`` (not ``1/√Δ0``) per key in units
of the same noise, so units with few keys count more and a large ``Δ0`` no longer drowns them.

``policy-gaussian`` (:class:`PolicyGaussian`): Gopi et al.'s sequential ℓ2-descent policy, **float noise
only** (``insecure_float=True``, for measurement): ``docs/proofs/set-union.md`` §4 says why no secure
variant is registered.

Order of the secrets drawn from the release's source: the bounding secret, then ``K_noise`` (as GSHM), so
a seeded source gives the same table on every embedded engine.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import _validate as v
from ..accounting.set_union import (PolicyCalibration, SetUnionCalibration, calibrate_policy_gaussian,
                                    calibrate_weighted_gaussian, grid_weights)
from ..core.bounded import LocalRelease
from ..core.engine import Capability, Engine
from ..errors import InfeasibleError, InvalidParameterError
from ..noise.floating import sample_gaussian
from ..noise.source import SecureRandom
from .base import AutoRole, Disclosure, Mechanism, PlanQuery, Released, ReleaseRequest, UserRequest
from .registry import register
from .thresholded import _key_task

__all__ = ["WeightedGaussian", "PolicyGaussian", "policy_histogram", "l2_descent_weights", "discovery_candidates",
           "plan_rows", "PLAN_MAX_L0", "AUTO_MAX_L0"]


def _need_pairs(engine: Engine) -> None:
    """Refuse (before anything is drawn or charged) an engine that does not read the pairs in this process."""
    if not engine.offers(Capability.PAIRS):
        raise InvalidParameterError(f"the set-union mechanisms run on the embedded engines (polars, duckdb, pandas, "
                                    f"arrow), not on {engine.name!r}")


#: ``sd.plan`` lists the Weighted Gaussian up to this bound, ``sd.Auto(discover=True)`` considers it up to
#: :data:`AUTO_MAX_L0`: its calibration evaluates the profile of every kept-key count t (about 1 s at l0 = 100,
#: 5 s at 256, 9 s at 400, 34 s at 1000 on one loaded core); ``mechanism="weighted-gaussian"`` calibrates it at
#: any bound
PLAN_MAX_L0 = 100
AUTO_MAX_L0 = 1000


def discovery_candidates(request: ReleaseRequest) -> dict[str, Mechanism]:
    """The key-discovery mechanisms ``sd.Auto(discover=True)`` adds to its candidates (none with SUM/MEAN, a
    public key list, float noise, or above :data:`AUTO_MAX_L0` keys per unit)."""
    l0 = request.max_groups_per_unit
    if request.aggregates or request.keys is not None or request.insecure_float or (l0 or 0) > AUTO_MAX_L0:
        return {}
    return {WeightedGaussian.name: WeightedGaussian()}


def plan_rows(request: ReleaseRequest) -> list[tuple[Mechanism, Any]]:
    """``(mechanism, calibration)`` rows ``sd.plan`` lists after its main rows (count-equivalent margins)."""
    l0 = request.max_groups_per_unit
    if l0 is None or l0 > PLAN_MAX_L0 or not discovery_candidates(request):
        return []
    m = WeightedGaussian()
    try:
        return [(m, m.calibrate(request))]
    except InfeasibleError:
        return []


@functools.lru_cache(maxsize=64)
def _calibrate(epsilon: float, delta: float, l0: int, grid: int) -> SetUnionCalibration:
    return calibrate_weighted_gaussian(epsilon, delta, l0, grid)


class _SetUnion(Mechanism):
    """What the two set-union mechanisms share: they discover keys from a privacy unit's rows (no public key
    list, no SUM/MEAN columns) and release noisy key weights in the column ``weight``, not counts."""

    plan_group = 1  # listed after the count mechanisms: key weights, count-equivalent margins

    @classmethod
    def plan_rows(cls, query: PlanQuery) -> list[tuple[Mechanism, Any, int]]:
        if query.d is not None or query.delta == 0 or query.l0 is None:
            return []
        return [(m, cal, cls.plan_group) for m, cal in plan_rows(query.request())]

    def check(self, request: ReleaseRequest) -> None:
        super().check(request)
        if request.aggregates:
            raise InvalidParameterError(f"mechanism={self.name!r} discovers keys (noisy weights, no counts): "
                                        "SUM/MEAN need mechanism='gshm' or 'auto'")
        if request.keys is not None:
            raise InvalidParameterError(f"mechanism={self.name!r} discovers keys; with a public key list use "
                                        "mechanism='auto' or a public-key mechanism")

    def value_column(self, default: str) -> str:
        return "weight"

    def needs(self, request: UserRequest) -> frozenset[Capability]:
        return frozenset({Capability.PAIRS})  # the distinct (unit, key) pairs, chosen in this process

    def _need_unit(self, privacy_unit: str | None) -> str:
        if privacy_unit is None:
            raise InvalidParameterError(f"mechanism={self.name!r} needs a privacy_unit column")
        return privacy_unit


@register
@dataclass(frozen=True)
class WeightedGaussian(_SetUnion):
    """Gopi et al.'s Weighted Gaussian set union with exact discrete noise (module docstring). Needs
    ``max_groups_per_unit`` (Δ0, the keys kept per unit).

    Option: ``grid`` (default 4096): weights are multiples of ``1/grid`` (each ``1/√t`` rounded down, so a
    unit's ℓ2 norm stays <= 1); needs ``grid² >= max_groups_per_unit``.

    The released value column is ``weight``: the key's noisy weight (Σ over its units of ``1/√t`` + noise),
    not a count."""

    grid: int = 4096
    name = "weighted-gaussian"
    #: releases key weights, not counts: considered by ``sd.Auto(discover=True)`` only (never by plain ``auto``)
    discovery = True
    auto_role = AutoRole.DISCOVERY
    #: ``max_groups_per_unit=sd.AutoBound(objective="keys")`` may choose its Δ0 (the expected released keys)
    auto_bound_objectives = ("keys",)

    def __post_init__(self) -> None:
        object.__setattr__(self, "grid", v.integer("grid", self.grid, lo=1, hi=1 << 20))

    @classmethod
    def auto_offer(cls, request: ReleaseRequest, group: str | None) -> Mechanism | None:
        """Offered by ``sd.Auto(discover=True)`` (:func:`discovery_candidates`)."""
        return discovery_candidates(request).get(cls.name)

    def check(self, request: ReleaseRequest) -> None:
        super().check(request)
        if request.insecure_float:
            raise InvalidParameterError("weighted-gaussian samples exact discrete noise only; drop "
                                        "insecure_float=True")
        assert request.max_groups_per_unit is not None  # Mechanism.check refused None
        if self.grid * self.grid < request.max_groups_per_unit:
            raise InvalidParameterError(f"grid={self.grid} is too coarse for max_groups_per_unit="
                                        f"{request.max_groups_per_unit}: need grid^2 >= max_groups_per_unit")

    def calibrate(self, request: ReleaseRequest) -> Any:
        assert request.max_groups_per_unit is not None
        return _calibrate(float(request.epsilon), float(request.delta), int(request.max_groups_per_unit),
                          int(self.grid))

    def disclosure(self, request: ReleaseRequest, calibration: Any, value_column: str) -> Disclosure:
        cal = calibration
        g = cal.grid
        return Disclosure(
            mechanism=self.name, analysis=cal.analysis, epsilon=cal.epsilon, delta=cal.delta,
            delta_achieved=float(cal.delta_achieved), neighbours=self.neighbours,
            contribution=(f"at most {request.max_groups_per_unit} keys per unit, each of a unit's t kept keys "
                          f"weighted floor({g}/sqrt(t))/{g}"),
            value_column=value_column, delta_parts=dict(cal.delta_parts), sigma=cal.weight_sigma,
            noise_std=cal.weight_noise_std, threshold=cal.threshold_int / g, margin=(cal.threshold_int - 1) / g,
            pre_threshold=None, comparison=">=",
            notes=("set union (Gopi et al. ICML 2020, Weighted Gaussian): values are noisy key weights (sum over "
                   "the key's units of 1/sqrt(keys kept by the unit) + noise), not counts; exact discrete "
                   f"Gaussian noise N_Z(0, {cal.noise.sigma2}) on the grid 1/{g}, released iff weight*{g} + noise "
                   f">= {cal.threshold_int} (docs/proofs/set-union.md)",))

    def histogram(self, engine: Engine, data: Any, privacy_unit: str | None, by: list[str],
                  request: ReleaseRequest, rng: SecureRandom, **extra: Any) -> Any:
        privacy_unit = self._need_unit(privacy_unit)
        assert request.max_groups_per_unit is not None  # needed by check()
        l0 = int(request.max_groups_per_unit)
        _need_pairs(engine)
        weights: list[int] = grid_weights(l0, self.grid).tolist()  # W_t for t = 1..l0, exact integers
        return engine.weighted_histogram(data, privacy_unit, list(by), l0, weights, rng)

    def run(self, engine: Engine, hist: Any, calibration: Any, disclosure: Disclosure, rng: SecureRandom,
            request: ReleaseRequest) -> Released:

        task = _key_task(calibration.kernel(), 1, rng, False)   # rule S >= 1 and S + Z >= 1 + (T − 1)
        rel = engine.noise_keys(hist, task)
        values = np.asarray(rel.values, dtype=np.float64) / float(calibration.grid)
        return Released(rows=LocalRelease(keys=rel.keys, values=values), disclosure=disclosure)


# ------------------------------------------------------------------ Policy Gaussian (insecure float only)


@dataclass(frozen=True)
class PolicyHistogram:
    """The Policy Gaussian's final weights (curator only, never released): ``keys`` (``pyarrow.Table``, canonical
    key order), ``weights`` (float64, > 0), ``stats`` (what bounding did)."""

    keys: Any
    weights: np.ndarray
    stats: Any


def l2_descent_weights(unit_codes: np.ndarray, key_codes: np.ndarray, n_keys: int, order: np.ndarray,
                       gamma: float) -> np.ndarray:
    """Gopi et al.'s ℓ2-descent policy: units in ``order`` (a permutation of the unit codes), each moving its keys'
    weights toward the cutoff Γ by ℓ2 distance ``min(1, ‖g‖)``, ``g = (Γ − w)_+`` on its keys (keys already at Γ
    get nothing). Each step is the proximal map of the distance to the convex set ``{w_K >= Γ}``, so it is
    1-Lipschitz in ℓ2 (``docs/proofs/set-union.md`` §4.1). Float arithmetic."""
    w = np.zeros(n_keys, dtype=np.float64)
    srt = np.argsort(unit_codes, kind="stable")
    uc, kc = unit_codes[srt], key_codes[srt]
    starts = np.searchsorted(uc, np.arange(order.size + 1))
    for u in order:
        ks = kc[starts[u]:starts[u + 1]]
        if ks.size == 0:
            continue
        g = np.maximum(gamma - w[ks], 0.0)
        n = math.sqrt(float(g @ g))
        if n == 0.0:
            continue
        w[ks] += g if n <= 1.0 else g / n
    return w


def policy_histogram(engine: Engine, data: Any, unit: str, by: list[str], l0: int, gamma: float,
                     rng: Any) -> PolicyHistogram:
    """The kept pairs of the engines' one ℓ0 choice (:meth:`~sparsedp.core.engine.Engine.kept_pairs`), then the
    sequential ℓ2-descent policy over the units in a uniformly random order (drawn from the release's source
    after the bounding secret)."""
    _need_pairs(engine)
    kp = engine.kept_pairs(data, unit, list(by), l0, rng)
    seed = int.from_bytes(bytes(rng.random_bytes(32)), "big")
    order = np.random.default_rng(seed).permutation(kp.n_units)
    n_keys = len(kp.keys)
    w = l2_descent_weights(kp.unit_codes, kp.key_codes, n_keys, order, gamma)
    sel = np.flatnonzero(w > 0)
    keys = kp.keys.take(sel) if sel.size != n_keys else kp.keys
    stats = dataclasses.replace(kp.stats, keys_bounded=int(sel.size), keys_out=int(sel.size))
    return PolicyHistogram(keys=keys, weights=w[sel], stats=stats)


@functools.lru_cache(maxsize=64)
def _calibrate_policy(epsilon: float, delta: float, l0: int, alpha: float) -> PolicyCalibration:
    return calibrate_policy_gaussian(epsilon, delta, l0, alpha)


@register
@dataclass(frozen=True)
class PolicyGaussian(_SetUnion):
    """Gopi et al.'s Policy Gaussian set union (ℓ2-descent policy, cutoff Γ = ρ + α σ) with FLOAT noise: only
    with ``insecure_float=True`` (measurement; no secure variant, ``docs/proofs/set-union.md`` §4). Needs
    ``max_groups_per_unit`` (Δ0). Values are noisy policy weights, not counts.

    Option: ``alpha`` (default 3.0): the cutoff's margin above the threshold, in noise standard deviations."""

    alpha: float = 3.0
    name = "policy-gaussian"

    def __post_init__(self) -> None:
        object.__setattr__(self, "alpha", v.positive("alpha", self.alpha))

    def check(self, request: ReleaseRequest) -> None:
        super().check(request)
        if not request.insecure_float:
            raise InvalidParameterError(
                "policy-gaussian has no secure (exact integer noise) variant: rounding the l2-descent policy to a "
                "lattice can break the contractivity its privacy rests on (docs/proofs/set-union.md §4). Use "
                "mechanism='weighted-gaussian', or insecure_float=True for research measurement only")

    def calibrate(self, request: ReleaseRequest) -> Any:
        assert request.max_groups_per_unit is not None
        return _calibrate_policy(float(request.epsilon), float(request.delta), int(request.max_groups_per_unit),
                                 float(self.alpha))

    def disclosure(self, request: ReleaseRequest, calibration: Any, value_column: str) -> Disclosure:
        cal = calibration
        return Disclosure(
            mechanism=self.name, analysis=cal.analysis, epsilon=cal.epsilon, delta=cal.delta,
            delta_achieved=float(cal.delta_achieved), neighbours=self.neighbours,
            contribution=(f"at most {request.max_groups_per_unit} keys per unit; each unit moves its keys' weights "
                          f"toward the cutoff {cal.gamma:.6g} by l2 distance <= 1, units in a random order"),
            value_column=value_column, delta_parts=dict(cal.delta_parts), sigma=cal.sigma, noise_std=cal.noise_std,
            threshold=cal.tau, margin=cal.tau, pre_threshold=None, comparison=">=",
            notes=("set union (Gopi et al. ICML 2020, Policy Gaussian) with FLOAT noise: values are noisy policy "
                   "weights, not counts (docs/proofs/set-union.md §4)",))

    def histogram(self, engine: Engine, data: Any, privacy_unit: str | None, by: list[str],
                  request: ReleaseRequest, rng: SecureRandom, **extra: Any) -> Any:
        privacy_unit = self._need_unit(privacy_unit)
        cal = self.calibrate(request)
        assert request.max_groups_per_unit is not None  # needed by check()
        return policy_histogram(engine, data, privacy_unit, list(by), int(request.max_groups_per_unit), cal.gamma,
                                rng)

    def run(self, engine: Engine, hist: Any, calibration: Any, disclosure: Disclosure, rng: SecureRandom,
            request: ReleaseRequest) -> Released:
        import pyarrow as pa

        noisy = hist.weights + sample_gaussian(calibration.sigma, hist.weights.size, rng, insecure_float=True)
        keep = np.flatnonzero(noisy >= calibration.tau)
        table = hist.keys.take(pa.array(keep, pa.int64())).append_column(disclosure.value_column,
                                                                         pa.array(noisy[keep], pa.float64()))
        return Released(rows=table, disclosure=disclosure, in_process=True)
