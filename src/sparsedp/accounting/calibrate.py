"""One entry point to calibrate any mechanism, and a side-by-side comparison.

:func:`calibrate` returns a :class:`~sparsedp.accounting.calibration.Calibration` (σ, margin τ, per-count
noise std, δ parts, δ re-evaluated with the full accountant) for one mechanism; :func:`compare` returns every
mechanism applicable to the stated contribution model, sorted by margin. The accountants live in their own
modules and cite their theorems:

* ``"gshm"`` (needs ``l0``): continuous :mod:`.gshm` (Karrer et al. (2022): exact / add / fdp); discrete
  :mod:`.discrete_histograms` (exact, Karrer decomposition with the discrete-Gaussian law).
* ``"csh"`` (needs ``k``): default analysis ``"exact"``, the certified privacy profile of :mod:`.csh_exact`
  (beyond the paper: exact p_inf(m) and Gaussian part in place of Lebeda & Retschmeier (2024) Lemma 3.2 / Thm 3.5,
  docs/proofs/csh-exact.md); ``"tight"`` / ``"add"``: Lebeda & Retschmeier (2024) Thm 3.5 / Thm 3.3 (:mod:`.csh`). Secure
  default: rounded CSH (integer outputs as post-processing of Alg. 2, accounted at τ = margin − ½,
  docs/proofs/rounded-csh.md); ``csh_noise="alg4"``: Algorithm 4 (Lebeda & Retschmeier (2024) Thm 7.7, zCDP).
* ``"topk-csh"`` (needs ``top_k``): as ``"csh"`` with k = top_k (Lebeda & Retschmeier (2024) Alg. 3, Cor. 4.2); the
  de-biasing variant adds the t̃ release to the same analyses ("exact"; "add": Thm 3.3 with ½√(k+5√k)) or
  uses :mod:`.discrete_histograms` (Algorithm 4).
* ``"laplace"`` (needs ``l0``): continuous :mod:`.laplace`; discrete :mod:`.discrete_histograms` (exact).
* ``"correlated-gaussian"`` (needs ``d``): continuous :mod:`.correlated` (Lebeda (2024) Alg. 1, dense, no
  threshold); discrete :mod:`.discrete_histograms`.

Contribution models: ``l0`` = max distinct keys per privacy unit (GSHM, Laplace); ``k`` = the whole
histogram has at most k non-zero counts and neighbours differ monotonically (CSH, e.g. a Misra–Gries
sketch of size k); ``top_k`` = keep the top k keys (Algorithm 3 of Lebeda & Retschmeier (2024) truncates any histogram so CSH
applies; outputs estimate count − H^{(k+1)} unless ``debias=True``); ``d`` = a fixed, public set of d keys
released densely (no threshold).

Secure releases use discrete noise, so ``discrete=True`` is the default: the reported δ is then the δ of
the integer noise actually sampled (``Calibration.noise`` is the law sampled, ``Calibration.discrete`` says
whether it is exact integer noise; ``Calibration.comparison`` says whether the release test is ``>`` or
``>=`` the absolute threshold pre_threshold + τ).
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypedDict

from .. import _validate as v
from ..errors import InfeasibleError, InvalidParameterError, InvalidTypeError
from . import correlated as _cg
from . import csh as _csh
from . import csh_exact as _ex
from . import discrete_histograms as _dh
from . import gshm as _gshm
from . import laplace as _lap
from . import laws
from .calibration import Calibration, Comparison
from .gaussian import gaussian_delta
from .names import CORRELATED_GAUSSIAN, GSHM, LAPLACE, TOPK_CSH

__all__ = ["calibrate", "compare", "best", "MECHANISMS"]

MECHANISMS = (GSHM, "csh", TOPK_CSH, LAPLACE, CORRELATED_GAUSSIAN)
_DEFAULT_ANALYSIS = {GSHM: "exact", "csh": "exact", TOPK_CSH: "exact", LAPLACE: "exact",
                     CORRELATED_GAUSSIAN: "exact"}
#: CSH "exact": the certified profile of :mod:`.csh_exact` (docs/proofs/csh-exact.md), beyond the paper;
#: "tight"/"add": Lebeda & Retschmeier (2024) Thm 3.5 / Thm 3.3 (kept to reproduce the paper and for comparison)
_CONTINUOUS_ANALYSES = {GSHM: ("exact", "add", "fdp"), "csh": ("exact", "tight", "add"),
                        TOPK_CSH: ("exact", "tight", "add"),
                        LAPLACE: ("exact",), CORRELATED_GAUSSIAN: ("exact",)}


def _checked(cal: Calibration) -> Calibration:
    if not cal.delta_achieved <= cal.delta:  # also catches NaN
        raise InfeasibleError(  # pragma: no cover - every accountant rounds conservatively
            f"internal: {cal.mechanism}/{cal.analysis} re-evaluated delta {cal.delta_achieved!r} exceeds "
            f"the target {cal.delta!r}")
    return cal


#: the (ε, δ, bound) ranges calibration supports; outside them the accountants' floating-point inversions
#: overflow or fail to terminate (found by tests/fuzz), and no meaningful release needs them
EPSILON_RANGE = (1e-6, 1000.0)
MIN_DELTA = 1e-300
MAX_BOUND = 10**9


def _need(name: str, value: int | None, mechanism: str) -> int:
    if value is None:
        raise InvalidParameterError(f"⟨{name}⟩ is required for ⟨mechanism={mechanism!r}⟩", param=name)
    return v.integer(name, value, lo=1, hi=MAX_BOUND)


def _supported(eps: float, dlt: float) -> None:
    lo, hi = EPSILON_RANGE
    if not lo <= eps <= hi:
        raise InvalidParameterError(f"epsilon must be between {lo:g} and {hi:g} for calibration, got {eps!r}")
    if dlt < MIN_DELTA:
        raise InvalidParameterError(f"delta must be >= {MIN_DELTA:g} for calibration, got {dlt!r}")


# ------------------------------------------------------------------ per mechanism


def _cal_gshm(eps: float, dlt: float, l0: int, analysis: str, mu_o2: float, discrete: bool) -> Calibration:
    if discrete and mu_o2 == 0.0:
        return _dh.calibrate_gshm_discrete(eps, dlt, l0)
    sigma, tau = _gshm.gshm_calibrate(eps, dlt, l0, analysis, mu_o2)
    parts = _gshm.gshm_delta_parts(eps, sigma, tau, l0, analysis, mu_o2)
    return Calibration(
        mechanism=GSHM, analysis=analysis, epsilon=eps, delta=dlt, sigma=sigma, tau=tau, noise_std=sigma,
        delta_parts={"gaussian": parts["gaussian"], "threshold": parts["threshold"]},
        delta_achieved=_gshm.gshm_delta(eps, sigma, tau, l0, analysis, mu_o2),
        noise=laws.Gaussian(sigma), comparison=Comparison.GT, l0=l0, mu_o2=mu_o2)


#: Largest σ of rounded CSH: its exact sampler (noise.rounded, by inversion) needs a table of ~21σ + 4 entries,
#: at most noise.inversion's 2^17 (tests/noise/test_rounded.py checks the two agree). Above it, calibration falls
#: back to Algorithm 4, whose discrete Gaussians have a rejection sampler for any σ.
ROUNDED_SIGMA_MAX = 6000.0


class _CshBase(TypedDict, total=False):
    """The contribution fields every CSH calibration carries, and why it falls back to Algorithm 4 (if it does)."""

    k: int
    top_k: int
    debias: bool
    fallback: str


def _cal_csh_exact(mechanism: str, eps: float, dlt: float, k: int, discrete: bool,
                   base: _CshBase) -> Calibration | None:
    """CSH / top-k CSH calibrated by the certified profile of :mod:`.csh_exact` (docs/proofs/csh-exact.md:
    exact p_inf(m) and the exact Gaussian part in place of Lebeda & Retschmeier (2024) Lemma 3.2 / Thm 3.5), rounded (secure,
    integer margin, rule ``count + X >= pre + margin``) or continuous (``discrete=False``)."""
    topk, debias = mechanism == TOPK_CSH, bool(base.get("debias", False))
    sigma, t = _ex.csh_exact_calibrate(eps, dlt, k, rounded=discrete, topk=topk, debias=debias)
    if discrete and sigma > ROUNDED_SIGMA_MAX:  # no exact sampler for it: the caller falls back to Algorithm 4
        base["fallback"] = (f"rounded CSH needs sigma={sigma:.6g} > {ROUNDED_SIGMA_MAX:g}, beyond its exact "
                            "sampler's table; Algorithm 4 (zCDP) is used instead")
        return None
    parts = _ex.csh_exact_delta_parts(eps, sigma, t, k, rounded=discrete, topk=topk, debias=debias)
    delta_parts = {"new_only": parts.new_only, "shifted_only": parts.shifted_only, "mixed": parts.mixed}
    if discrete:
        return Calibration(
            mechanism=mechanism, analysis="rounded-exact", epsilon=eps, delta=dlt, sigma=sigma, tau=float(t),
            noise_std=_csh.csh_rounded_noise_std(sigma, k), delta_parts=delta_parts, delta_achieved=parts.total,
            noise=laws.RoundedCorrelatedGaussian(sigma, sigma * k ** -0.25), comparison=Comparison.GE,
            tau_continuous=t - 0.5, **base)
    return Calibration(
        mechanism=mechanism, analysis="exact", epsilon=eps, delta=dlt, sigma=sigma, tau=float(t),
        noise_std=_csh.csh_noise_std(sigma, k), delta_parts=delta_parts, delta_achieved=parts.total,
        noise=laws.CorrelatedGaussian(sigma, sigma / k ** 0.25), comparison=Comparison.GT, **base)


def _cal_csh(mechanism: str, eps: float, dlt: float, k: int, analysis: str, discrete: bool, conversion: str,
             debias: bool, csh_noise: str) -> Calibration:
    base: _CshBase = {"k": k}
    if mechanism == TOPK_CSH:
        base["top_k"], base["debias"] = k, debias
    rounded = None
    if analysis == "exact" and not (discrete and csh_noise == "alg4"):
        cal = _cal_csh_exact(mechanism, eps, dlt, k, discrete, base)
        if cal is not None:
            return cal
    elif discrete and csh_noise == "rounded":
        # Secure default: rounded CSH (docs/proofs/rounded-csh.md), integers as post-processing of Alg. 2/3,
        # accounted by the continuous Thm 3.5 (tight) / Thm 3.3 (add; de-biasing variant) at τ = margin − ½.
        rounded = _csh.csh_rounded_calibrate(eps, dlt, k, analysis, debias=debias)
        if rounded[0] > ROUNDED_SIGMA_MAX:  # no exact sampler for it: Algorithm 4 below, and `fallback` says why
            base["fallback"] = (f"rounded CSH needs sigma={rounded[0]:.6g} > {ROUNDED_SIGMA_MAX:g}, beyond its exact "
                                "sampler's table; Algorithm 4 (zCDP) is used instead")
    if rounded is not None and "fallback" not in base:
        sigma, m = rounded
        return Calibration(
            mechanism=mechanism, analysis=f"rounded-{analysis}", epsilon=eps, delta=dlt, sigma=sigma,
            tau=float(m), noise_std=_csh.csh_rounded_noise_std(sigma, k),
            delta_parts=_csh.csh_rounded_delta_parts(eps, sigma, m, k, analysis, debias=debias),
            delta_achieved=_csh.csh_rounded_delta(eps, sigma, m, k, analysis, debias=debias),
            noise=laws.RoundedCorrelatedGaussian(sigma, sigma * k ** -0.25), comparison=Comparison.GE,
            tau_continuous=m - 0.5, **base)
    if discrete:  # Algorithm 4 (Lebeda & Retschmeier (2024) Thm 7.7, zCDP): kept for reproducing the paper (csh_noise="alg4")
        if debias:
            cal = _dh.calibrate_topk_debias_discrete(eps, dlt, k, conversion)
            return dataclasses.replace(cal, fallback=base["fallback"]) if "fallback" in base else cal
        sigma, tau = _csh.csh_discrete_calibrate(eps, dlt, k, conversion)
        s_ind, s_corr = _csh.csh_discrete_scales(sigma, k)
        parts = _csh.csh_discrete_delta_parts(eps, sigma, tau, k, conversion)
        return Calibration(
            mechanism=mechanism, analysis=f"discrete-{conversion}", epsilon=eps, delta=dlt, sigma=sigma,
            tau=tau, noise_std=_csh.csh_discrete_noise_std(sigma, k), delta_parts=parts,
            delta_achieved=_csh.csh_discrete_delta(eps, sigma, tau, k, conversion),
            noise=laws.DiscreteCorrelatedGaussian(s_ind, s_corr), comparison=Comparison.GT,
            conversion=conversion, **base)
    sigma, tau = _csh.csh_calibrate(eps, dlt, k, analysis, debias=debias)
    return Calibration(
        mechanism=mechanism, analysis=analysis, epsilon=eps, delta=dlt, sigma=sigma, tau=tau,
        noise_std=_csh.csh_noise_std(sigma, k),
        delta_parts=_csh.csh_delta_parts(eps, sigma, tau, k, analysis, debias=debias),
        delta_achieved=_csh.csh_delta(eps, sigma, tau, k, analysis, debias=debias),
        noise=laws.CorrelatedGaussian(sigma, sigma / k ** 0.25), comparison=Comparison.GT, **base)


def _cal_laplace(eps: float, dlt: float, l0: int, discrete: bool) -> Calibration:
    if discrete:
        return _dh.calibrate_laplace_discrete(eps, dlt, l0)
    scale, tau = _lap.laplace_calibrate(eps, dlt, l0)
    achieved = _lap.laplace_delta(eps, scale, tau, l0)
    return Calibration(
        mechanism=LAPLACE, analysis="exact", epsilon=eps, delta=dlt, sigma=scale, tau=tau,
        noise_std=_lap.laplace_noise_std(scale), delta_parts={"threshold": achieved}, delta_achieved=achieved,
        noise=laws.Laplace(scale), comparison=Comparison.GT, l0=l0)


def _cal_correlated(eps: float, dlt: float, d: int, discrete: bool) -> Calibration:
    if discrete:
        return _dh.calibrate_correlated_discrete(eps, dlt, d)
    noise = _cg.correlated_gaussian_calibrate(eps, dlt, d)
    achieved = gaussian_delta(1.0 / noise.sigma1, eps)
    return Calibration(
        mechanism=CORRELATED_GAUSSIAN, analysis="exact", epsilon=eps, delta=dlt, sigma=noise.sigma1, tau=0.0,
        noise_std=noise.per_query_std, delta_parts={"gaussian": achieved}, delta_achieved=achieved,
        noise=laws.DenseCorrelatedGaussian(noise.embedding_std, noise.embedding_c), comparison=Comparison.NONE,
        d=d)


# ------------------------------------------------------------------ public


def calibrate(mechanism: str, *, epsilon: float, delta: float, l0: int | None = None, k: int | None = None,
              top_k: int | None = None, d: int | None = None, analysis: str | None = None, mu_o2: float = 0.0,
              discrete: bool = True, conversion: str = "cks", debias: bool = False,
              csh_noise: str = "rounded") -> Calibration:
    """Calibrate ``mechanism`` to (ε, δ): the smallest margin τ and its σ, re-checked with the full accountant.

    Args:
        mechanism: one of :data:`MECHANISMS`.
        epsilon, delta: the target guarantee (ε > 0, 0 < δ < 1).
        l0: max distinct keys per privacy unit ("gshm", "laplace").
        k: sparsity bound of a k-sparse monotonic histogram ("csh"; Lebeda & Retschmeier (2024) Def. 3.1).
        top_k: number of keys kept by the top-k truncation ("topk-csh"; Lebeda & Retschmeier (2024) Alg. 3).
        d: number of fixed public keys ("correlated-gaussian").
        analysis: accountant for continuous noise (gshm: "exact" | "add" | "fdp"; csh/topk-csh: "exact"
            (certified profile) | "tight" | "add"); ``None`` = the tightest ("exact"). With ``discrete=True`` the discrete accountant is used and
            ``analysis`` must be ``None``.
        mu_o2: extra μ² per released aggregate column (GSHM only, Karrer et al. (2022) Thm 5.4); forces continuous.
        discrete: account for exact integer noise (secure default). ``Calibration.noise`` (and its
            ``discrete`` property) records what was used.
        conversion: zCDP→DP conversion of Algorithm 4 CSH, "cks" (Canonne–Kamath–Steinke) or "bs" (Lemma 7.3).
        debias: top-k de-biasing variant (topk-csh; Lebeda & Retschmeier (2024) §4): Thm 3.3 with ½√(k+5√k) (continuous and
            rounded noise); Algorithm 4 noise uses the zCDP account of
            :func:`.discrete_histograms.calibrate_topk_debias_discrete`.
        csh_noise: integer noise of "csh"/"topk-csh" when ``discrete=True``: "rounded" (default; the
            rounded continuous mechanism, accounted by Thm 3.5/3.3 at τ = margin − ½, integer ``margin``,
            rule ``count + X >= pre + margin``, docs/proofs/rounded-csh.md; ``analysis`` may be "exact",
            "tight" or "add") or "alg4" (Algorithm 4, Thm 7.7 zCDP; looser, kept to reproduce the paper).

    Raises:
        InvalidParameterError: bad or missing arguments (the message names the argument).
        InfeasibleError: the request cannot be met; the message says which constraint fails.
    """
    mechanism = v.choice("mechanism", mechanism, MECHANISMS)
    eps = v.epsilon(epsilon)
    dlt = v.delta(delta)
    _supported(eps, dlt)
    mu_o2 = v.nonnegative("mu_o2", mu_o2)
    conversion = v.choice("conversion", conversion, ("cks", "bs"))
    csh_noise = v.choice("csh_noise", csh_noise, ("rounded", "alg4"))
    rounded = discrete and csh_noise == "rounded" and mechanism in ("csh", TOPK_CSH)
    for name, flag in (("discrete", discrete), ("debias", debias)):
        if not isinstance(flag, bool):
            raise InvalidTypeError(f"{name} must be a bool, got {type(flag).__name__} {flag!r}")
    if mu_o2 and mechanism != GSHM:
        raise InvalidParameterError(f"mu_o2 is only supported by mechanism='gshm', got mechanism={mechanism!r}")
    if debias and mechanism != TOPK_CSH:
        raise InvalidParameterError(f"debias applies to mechanism='topk-csh' only, got {mechanism!r}")
    if mu_o2:
        discrete = False  # aggregate columns are accounted for continuous noise only (Karrer et al. (2022) Thm 5.4)
    if analysis is not None:
        if discrete and not rounded:
            raise InvalidParameterError(
                f"analysis={analysis!r} selects a continuous-noise accountant; with discrete=True (the "
                f"secure default) the discrete accountant is used: pass analysis = None or discrete=False")
        analysis = v.choice("analysis", analysis, _CONTINUOUS_ANALYSES[mechanism])
    else:
        analysis = _DEFAULT_ANALYSIS[mechanism]
    if debias and analysis == "tight":
        raise InvalidParameterError("debias=True is accounted by analysis='exact' (certified profile) or 'add' "
                                    "(Lebeda & Retschmeier (2024) Thm 3.3); Thm 3.5 ('tight') does not cover the t~ release")

    if mechanism == GSHM:
        cal = _cal_gshm(eps, dlt, _need("l0", l0, mechanism), analysis, mu_o2, discrete)
    elif mechanism == "csh":
        cal = _cal_csh(mechanism, eps, dlt, _need("k", k, mechanism), analysis, discrete, conversion, debias,
                       csh_noise)
    elif mechanism == TOPK_CSH:
        cal = _cal_csh(mechanism, eps, dlt, _need("top_k", top_k, mechanism), analysis, discrete, conversion, debias,
                       csh_noise)
    elif mechanism == LAPLACE:
        cal = _cal_laplace(eps, dlt, _need("l0", l0, mechanism), discrete)
    else:
        cal = _cal_correlated(eps, dlt, _need("d", d, mechanism), discrete)
    return _checked(cal)


def compare(epsilon: float, delta: float, l0: int | None = None, top_k: int | None = None, *, k: int | None = None,
            d: int | None = None, discrete: bool | None = True, conversion: str = "cks") -> list[Calibration]:
    """Every mechanism applicable to the given contribution model, calibrated at (ε, δ), sorted by margin τ.

    ``l0`` enables GSHM and the Laplace stability histogram, ``top_k`` the top-k CSH, ``k`` CSH on a
    k-sparse monotonic histogram, ``d`` the dense correlated Gaussian (τ = 0: no threshold). With
    ``discrete=False`` every continuous analysis is listed (GSHM exact/add/fdp, CSH tight/add, …); with
    ``True`` the accountants of the integer noise a secure release samples; ``None`` lists both.
    Mechanisms that are infeasible at (ε, δ) are left out.
    """
    eps = v.epsilon(epsilon)
    dlt = v.delta(delta)
    _supported(eps, dlt)
    if l0 is None and top_k is None and k is None and d is None:
        raise InvalidParameterError("compare needs a contribution model: l0, top_k, k or d")
    if discrete is not None and not isinstance(discrete, bool):
        raise InvalidTypeError(f"discrete must be True, False or None, got {discrete!r}")
    models: dict[str, dict[str, Any]] = {}  # mechanism -> its contribution keyword (l0=…, top_k=…) for calibrate
    if l0 is not None:
        models[GSHM] = models[LAPLACE] = {"l0": v.integer("l0", l0, lo=1, hi=MAX_BOUND)}
    if top_k is not None:
        models[TOPK_CSH] = {"top_k": v.integer("top_k", top_k, lo=1, hi=MAX_BOUND)}
    if k is not None:
        models["csh"] = {"k": v.integer("k", k, lo=1, hi=MAX_BOUND)}
    if d is not None:
        models[CORRELATED_GAUSSIAN] = {"d": v.integer("d", d, lo=1, hi=MAX_BOUND)}
    flags = (True, False) if discrete is None else (discrete,)
    out: list[Calibration] = []
    for mech, model in models.items():
        for disc in flags:
            analyses = (None,) if disc else _CONTINUOUS_ANALYSES[mech]
            for an in analyses:
                if mech == GSHM and an == "fdp":
                    continue  # Thm 7.1 of Karrer et al. (2022) is never tighter than "exact"; keep the table short
                try:
                    out.append(calibrate(mech, epsilon=eps, delta=dlt, analysis=an, discrete=disc,
                                         conversion=conversion, **model))
                except InfeasibleError:
                    continue
    out.sort(key=lambda c: (c.tau, c.noise_std, c.mechanism, c.analysis))
    return out


def best(calibrations: list[Calibration]) -> Calibration:
    """The calibration with the smallest margin (ties: smaller noise std); the first of :func:`compare`."""
    if not calibrations:
        raise InfeasibleError("no applicable mechanism is feasible at this (epsilon, delta)")
    return min(calibrations, key=lambda c: (c.tau, c.noise_std))

