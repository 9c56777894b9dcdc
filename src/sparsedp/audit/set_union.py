"""Audit targets of the set-union key discoveries (Gopi, Gulhane, Kulkarni, Shen, Shokouhi, Yekhanin,
"Differentially Private Set Union", ICML 2020, arXiv 2002.09745): their neighbours add a *weight* per key, not 1.

**Weighted Gaussian** (``weighted-gaussian``, exact discrete noise). A unit that kept ``t`` keys adds the integer
weight ``W_t = floor(G/√t)`` (grid ``1/G``) to each of them (:mod:`sparsedp.accounting.set_union`), so the audit's
histograms are the integer per-key weight sums ``S`` in grid units, exactly what
:func:`~sparsedp.mechanisms.set_union.weighted_histogram` hands to ``WeightedGaussian.run`` (checked on rows in
``tests/audit/test_set_union_targets.py``), and the release rule is the kernel's ``S + Z >= T``. Independent noise
per key: runs are tiled like GSHM's. Scenarios (:func:`weighted_scenarios`, the terms of the accountant's
profile, which is a maximum over t): ``shared`` (``l0`` keys far above T gain ``W_l0`` each: the Gaussian part),
``new`` (``l0`` new keys at ``W_l0``: the infinite term at t = l0), ``new-1`` (one new key at ``W_1 = G``: the
infinite term at t = 1, the largest weight), ``mixed``. The conformance check is the binomial law of the number
of ``b`` keys released at one noise std below T (the kernel's exact discrete Gaussian tail).
``margin_shift`` moves T by ``margin_shift · W_l0`` (one count-equivalent unit).

**Policy Gaussian** (``policy-gaussian``, float noise only: ``insecure_float=True``). The weights are the
output of Gopi et al.'s ℓ2-descent policy (:func:`~sparsedp.mechanisms.set_union.l2_descent_weights`, the
function the mechanism's histogram step runs) on the scenario's units; the release is
``PolicyGaussian.run`` (weights + N(0, σ²), released iff ``>= ρ``), tiled over disjoint key blocks (blocks share no
unit, so the policy on their union is the policy on each). Scenarios (:func:`policy_scenarios`): ``shared`` (``l0``
keys held by H identical units, H as large as keeps every step a full ℓ2 step of 1 below the cutoff Γ; D' adds
one more), ``new`` (one unit with ``l0`` new keys: weight ``1/√l0`` each), ``mixed``. Conformance: ``b`` keys at
weight ``ρ − σ``, released each with probability ``Φ̄(1)`` under the calibration (binomial law).
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
from scipy import special, stats

from ..errors import InvalidParameterError
from ..mechanisms.set_union import PolicyGaussian, PolicyHistogram, WeightedGaussian, l2_descent_weights
from .histograms import release_tiled
from .scenarios import Scenario

if TYPE_CHECKING:  # pragma: no cover
    from .targets import Target

__all__ = ["WEIGHTED", "POLICY", "weighted_scenarios", "shifted_weighted", "weighted_law_view", "policy_scenarios",
           "policy_weights", "release_policy", "policy_law"]

WEIGHTED = WeightedGaussian.name
POLICY = PolicyGaussian.name


# ------------------------------------------------------------------------------------ Weighted Gaussian


def weighted_scenarios(calibration, bound: int) -> list[Scenario]:
    """The worst-case pairs of the Weighted Gaussian with ``l0 = bound`` (module docstring), in grid units."""
    w = calibration.weights
    kern = calibration.kernel()
    t_int = int(calibration.threshold_int)
    high = t_int + math.ceil(25 * float(kern.noise_std)) + int(w[0]) + 2
    b = int(bound)
    wb = int(w[b - 1])
    out = [
        Scenario("shared", np.full(b, high, np.int64), np.full(b, high + wb, np.int64), "sum",
                 f"{b} keys at weight {high} in D; D' adds a unit that kept all {b} (+{wb} each, grid 1/"
                 f"{calibration.grid}: the Gaussian part)"),
        Scenario("new", np.zeros(b, np.int64), np.full(b, wb, np.int64), "any",
                 f"{b} new keys at weight {wb} (a unit that kept {b} keys: infinite term at t = {b})"),
    ]
    if b >= 2:
        out.append(Scenario("new-1", np.zeros(1, np.int64), np.full(1, int(w[0]), np.int64), "any",
                            f"one new key at weight {int(w[0])} (a unit with one key: infinite term at t = 1)"))
        j = (b + 1) // 2
        c0 = np.concatenate([np.full(j, high, np.int64), np.zeros(b - j, np.int64)])
        c1 = np.concatenate([np.full(j, high + wb, np.int64), np.full(b - j, wb, np.int64)])
        out.append(Scenario("mixed", c0, c1, "mixed", f"{j} keys at {high} -> {high + wb} and {b - j} new keys at "
                                                      f"{wb} (mixed terms)"))
    return out


def shifted_weighted(cal, shift: int):
    """A Weighted Gaussian calibration with its integer threshold T moved by ``shift · W_l0`` (one count-equivalent
    unit of a unit that fills the bound); the count-equivalent margin ``tau`` follows. T must stay >= 1."""
    if shift == 0:
        return cal
    step = int(cal.weights[-1])
    thr = int(cal.threshold_int) + int(shift) * step
    if thr < 1:
        raise InvalidParameterError(f"⟨margin_shift={shift}⟩ would move the weighted threshold below 1 (calibrated "
                                    f"{cal.threshold_int}, step {step})", param="margin_shift")
    root = math.sqrt(int(cal.l0)) / int(cal.grid)
    return dataclasses.replace(cal, threshold_int=thr, tau=thr * root - 1.0)


def weighted_law_view(target: "Target", calibration=None) -> "Target":
    """``target`` with its reference replaced by the kernel calibration (grid units, rule ``S + Z >= T``) of
    ``calibration`` (default the reference): what :mod:`.laws` reads."""
    cal = target.reference if calibration is None else calibration
    return dataclasses.replace(target, reference=cal.kernel())


# ------------------------------------------------------------------------------------ Policy Gaussian


def policy_weights(units: list[list[int]], n_keys: int, gamma: float) -> np.ndarray:
    """The ℓ2-descent weights of ``n_keys`` keys held by ``units`` (each a list of key ids), units in their given
    order (the scenarios' units that touch a common key are identical, so the order does not matter)."""
    u = np.array([i for i, ks in enumerate(units) for _ in ks], np.int64)
    k = np.array([x for ks in units for x in ks], np.int64)
    return l2_descent_weights(u, k, n_keys, np.arange(len(units)), float(gamma))


def _fill(h: int, keys: list[int]) -> list[list[int]]:
    return [list(keys) for _ in range(h)]


def policy_scenarios(calibration, bound: int) -> list[Scenario]:
    """The worst-case pairs of the Policy Gaussian with ``l0 = bound`` (module docstring); counts are weights."""
    gamma = float(calibration.gamma)
    b = int(bound)
    h = max(0, math.floor(math.sqrt(b) * gamma) - 1)
    every = list(range(b))
    w0 = policy_weights(_fill(h, every), b, gamma)
    w1 = policy_weights(_fill(h + 1, every), b, gamma)
    out = [
        Scenario("shared", w0, w1, "sum", f"{b} keys held by {h} units with all of them (weight {w0[0]:.4g}); D' "
                                          f"adds one more (weight {w1[0]:.4g}; cutoff {gamma:.4g})"),
        Scenario("new", np.zeros(b), policy_weights([every], b, gamma), "any",
                 f"one unit with {b} new keys (weight {1 / math.sqrt(b):.4g} each)"),
    ]
    if b >= 2:
        j = (b + 1) // 2
        hj = max(0, math.floor(math.sqrt(j) * gamma) - 1)
        shared = list(range(j))
        m0 = policy_weights(_fill(hj, shared), b, gamma)
        m1 = policy_weights(_fill(hj, shared) + [every], b, gamma)
        out.append(Scenario("mixed", m0, m1, "mixed", f"{j} keys held by {hj} units; D' adds a unit with them and "
                                                      f"{b - j} new keys"))
    return out


def release_policy(target: "Target", weights, runs: int, rng) -> np.ndarray:
    """``(runs, n)`` values of ``runs`` Policy Gaussian releases of the final weights ``weights`` (0 = key absent)
    through ``PolicyGaussian.run``, tiled over disjoint key blocks (independent float noise per key)."""
    t = target

    def histogram(ids: np.ndarray, w: np.ndarray) -> PolicyHistogram:
        return PolicyHistogram(keys=pa.table({"key": pa.array(ids, pa.int64())}), weights=w, stats=None)

    return release_tiled(t.mechanism, t.calibration, t.request, np.asarray(weights, np.float64), int(runs), rng,
                         histogram)


def policy_law(target: "Target", calibration=None) -> tuple[int, float, np.ndarray]:
    """``(m, w, P[N = n])``: ``m = bound`` keys at weight ``w = ρ − σ`` of the reference, and the binomial law of
    the number released under ``calibration`` (default the reference): ``P[w + σZ >= ρ] = Φ̄((ρ − w)/σ)``."""
    ref = target.reference
    cal = ref if calibration is None else calibration
    m = int(target.bound)
    w = float(ref.tau) - float(ref.sigma)
    p = float(special.ndtr(-(float(cal.tau) - w) / float(cal.sigma)))
    return m, w, stats.binom.pmf(np.arange(m + 1), m, p)
