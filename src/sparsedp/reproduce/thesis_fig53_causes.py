"""Lebeda (2023) thesis, Fig. 5.3a: why PLAN does not beat IOME on the synthetic binary data here.

The thesis (§5.7.2) says PLAN has "an advantage over IOME for α < 1 which increases as α decreases" on n = 4096
bit vectors of length d, q_i = 1/2 for i <= ⌈αd⌉ and 1/100 otherwise; ``thesis-fig5.3`` does not reproduce it
(``docs/reproduce.md#fig-53a``). This target settles the candidate causes by experiment, in two tables (one CSV):

**Part A, the decomposition (no privacy noise, one seeded sample).** The IOME/PLAN ratio of the expected ℓ1 noise
error with the same noise budget is ``C_I·d / (C_P·Σ_i 1/s_i)`` (both add N(0, 2C²/ρ₃) per coordinate; PLAN's is
divided by the scale s_i = σ̂_i^{−2/3}); C_I and C_P are the clip radii, the norms' quantile at rank (n − k)/n
(k = √n + PLAN's rank-error bound at ρ = 1) of ``x − q`` (IOME: the rotation keeps norms, its centre is the rotated
median, close to the mean) and of ``(x − μ̃)·s`` (PLAN). Stages, each adding one ingredient of the thesis's
instantiation:

1. ``ideal``: C at the root-mean-square norm and σ̂ = σ — Chapter 4's ratio d‖σ‖₂/‖σ‖_{2/3} (at most √d);
2. ``clip_rank``: C at rank (n − k)/n as PLAN's line 6 prescribes — the q = 1/100 bits, scaled by σ^{−2/3} = 4.7
   (a 1 bit adds 21.7 to the squared norm), make PLAN's norms heavy-tailed (the thesis's Lemma 5.9 needs σ_i² >= d^{−2/5}, which q = 1/100
   violates on purpose), IOME's are nearly constant;
3. ``median_centre``: μ̃ the coordinate-wise median (line 3): for a q = 1/2 bit every point of [0, 1] is a median,
   so μ̃_i is anywhere there (drawn uniform, mean over three draws), and PLAN's norms grow;
4. ``floor``: σ̂² floored at d^{−2/5} (§5.7.2, "we clip all estimated variances to 1/d^{2/5} from below");
5. ``floor_reg``: and σ̂_i ← σ̂_i + ‖σ̂‖₁/d (§5.7.1, the regularisation) — the thesis's estimator, noise-free.

**Part B, measured (the private mechanisms, seeded runs).** PLAN's binary instantiation with one ingredient
switched at a time — ``as_is`` (the reproduction's PLAN), ``no_reg``, ``no_floor`` (σ̂² >= 10^{−12} only to stay
positive), ``neither``, ``floor_on_std`` (the floor applied to σ̂, i.e. σ̂² >= d^{−4/5}) and ``oracle_var`` (the true
variances given for free, no floor, no regularisation) — against the IOME-style baseline; the ℓ1 error against the
true q (sampling error included) and against the empirical mean (the noise and the clipping only), and the clip
radius C beside the two readings of the garbled clipping universe of the thesis's Table 5.2 (‖σ̂^{2/3}‖₂ as printed;
ours is 2‖σ̂^{−2/3}‖₂). The privacy budget split is the reproduction's (ρ/16 centring, 3ρ/16 variances, 3ρ/16
clipping, 9ρ/16 noise).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from ..mechanisms import mean as pm
from ..noise import InsecureSeededRandom
from ._registry import Headline, ReproResult, target, write_csv
from .thesis_ch5_figs import _say, _uniform, iome_mean

_PLAN_REST = {"center": 1 / 16, "clip": 3 / 16, "noise": 9 / 16}   # PLAN's split once the variances are estimated
_VARIANCE_SHARE = 3 / 16
STAGES = ("ideal", "clip_rank", "median_centre", "floor", "floor_reg")
VARIANTS = ("as_is", "no_reg", "no_floor", "neither", "floor_on_std", "oracle_var")


def binary_q(d: int, alpha: float) -> np.ndarray:
    """Table 5.2 Binary: q_i = 1/2 for i <= ⌈αd⌉, else 1/100."""
    return np.where(np.arange(1, d + 1) <= math.ceil(alpha * d), 0.5, 0.01)


def _clip_rank(n: int) -> float:
    """(n − k)/n with k = √n + the rank-error bound of PLAN's clip search at ρ = 1 (10 steps, β/3 = 1/60)."""
    return (n - (math.sqrt(n) + pm.quantile_rank_error(10, 3 / 16, 0.05 / 3))) / n


def decomposition(x: np.ndarray, q: np.ndarray, rng: np.random.Generator) -> dict[str, float]:
    """Part A: the noise-error ratio IOME/PLAN at each stage (module docstring), from one sample ``x``."""
    n, d = x.shape
    level = _clip_rank(n)
    var = q * (1.0 - q)
    floored = np.sqrt(np.maximum(var, d ** -0.4))

    def ratio(sig_hat: np.ndarray, centre: np.ndarray, rms: bool = False) -> float:
        s = sig_hat ** (-2.0 / 3.0)
        ni = np.linalg.norm(x - q, axis=1)
        np_ = np.linalg.norm((x - centre) * s, axis=1)
        if rms:
            ci, cp = math.sqrt(float(np.mean(ni ** 2))), math.sqrt(float(np.mean(np_ ** 2)))
        else:
            ci, cp = float(np.quantile(ni, level)), float(np.quantile(np_, level))
        return ci * d / (cp * float(np.sum(1.0 / s)))

    centres = [np.where(q == 0.5, rng.random(d), q) for _ in range(3)]
    out = {"ideal": ratio(np.sqrt(var), q, rms=True), "clip_rank": ratio(np.sqrt(var), q)}
    out["median_centre"] = float(np.mean([ratio(np.sqrt(var), c) for c in centres]))
    out["floor"] = float(np.mean([ratio(floored, c) for c in centres]))
    out["floor_reg"] = float(np.mean([ratio(floored + floored.mean(), c) for c in centres]))
    return out


def plan_variant(x: np.ndarray, variant: str, rho: float, true_var: np.ndarray, rng) -> pm.MeanEstimate:
    """Part B: PLAN's binary instantiation (p = 1) with one ingredient switched (module docstring); ρ-zCDP for every
    variant but ``oracle_var``, whose variances are not private (it spends the same ρ on the rest)."""
    n, d = x.shape
    if variant == "oracle_var":
        var = true_var
    else:
        var = pm.estimate_binary_variance(x, rho=rho * _VARIANCE_SHARE, floor=False, rng=rng)
        if variant in ("as_is", "no_reg"):
            var = np.maximum(var, d ** -0.4)
        elif variant == "floor_on_std":
            var = np.maximum(var, d ** -0.8)
        var = np.maximum(var, 1e-12)
    reg = variant in ("as_is", "no_floor", "floor_on_std")
    return pm.plan_mean(x, rho=rho * (1 - _VARIANCE_SHARE), bound=1.0, p=1.0, variances=var, regularize=reg,
                        budget=_PLAN_REST, check_sample_size=False, rng=rng)


@target("thesis-fig5.3-causes", "Lebeda thesis Fig. 5.3a: why PLAN does not beat IOME on binary data (ablation)")
def figure_5_3_causes(out_dir: Path, fast: bool) -> ReproResult:
    rng = InsecureSeededRandom(5_3_7)
    data_rng = np.random.default_rng(5_3_7)
    n = 4096
    alphas = (0.25,) if fast else (0.05, 0.25, 0.5)
    dims = (256,) if fast else (256, 2048)
    rows: list[tuple] = []
    dec_rows: list[tuple] = []
    heads: list[Headline] = []
    for d in dims:
        for a in alphas:
            q = binary_q(d, a)
            x = (data_rng.random((n, d)) < q).astype(np.float32)
            dec = decomposition(x, q, data_rng)
            dec_rows.append((d, a, n, round(_clip_rank(n), 6)) + tuple(dec[s] for s in STAGES))
            if d == 256 and a == 0.25:
                heads += [Headline(f"d=256 alpha=0.25 noise ratio IOME/PLAN, stage {s}", dec[s], None) for s in STAGES]
    runs = 1 if fast else 3
    rhos = (1.0,) if fast else (1.0, 0.125)
    d = 256
    for rho in rhos:
        for a in alphas:
            _say(f"fig5.3 causes rho={rho:g} alpha={a:g}")
            q = binary_q(d, a)
            errs = {key: np.zeros((runs, 2)) for key in VARIANTS + ("iome",)}
            clip = {key: np.zeros((runs, 3)) for key in VARIANTS}
            for r in range(runs):
                x = (_uniform((n, d), rng) < q).astype(float)
                emp = x.mean(axis=0)
                est = iome_mean(x, rho=rho, bound=1.0, rng=rng)
                errs["iome"][r] = np.abs(est - q).sum(), np.abs(est - emp).sum()
                for var in VARIANTS:
                    e = plan_variant(x, var, rho, q * (1 - q), rng)
                    errs[var][r] = np.abs(e.mean - q).sum(), np.abs(e.mean - emp).sum()
                    clip[var][r] = (e.clip_radius, float(np.linalg.norm(e.sigma_hat ** (2 / 3))),
                                    2.0 * float(np.linalg.norm(e.sigma_hat ** (-2 / 3))))
            io = errs["iome"].mean(axis=0)
            for var in VARIANTS:
                pe = errs[var].mean(axis=0)
                c = clip[var].mean(axis=0)
                rows.append((var, d, a, rho, n, runs, pe[0], io[0] / pe[0], pe[1], io[1] / pe[1], c[0], c[1], c[2]))
                if var in ("as_is", "oracle_var") and a == 0.25:
                    heads.append(Headline(f"rho={rho:g} alpha=0.25 {var}: IOME/PLAN l1 noise ratio (vs empirical)",
                                          io[1] / pe[1], None))
    dec_path = write_csv(out_dir / "thesis-fig5.3-decomposition.csv",
                         ("d", "alpha", "n", "clip_rank") + tuple(f"ratio_{s}" for s in STAGES), dec_rows)
    header = ("variant", "d", "alpha", "rho", "n", "runs", "plan_l1_error", "iome_over_plan", "plan_l1_error_vs_empirical",
              "iome_over_plan_vs_empirical", "clip_radius", "universe_as_printed", "universe_ours")
    csv_path = write_csv(out_dir / "thesis-fig5.3-causes.csv", header, rows)
    return ReproResult("thesis-fig5.3-causes", csv_path, None, tuple(heads), (csv_path, dec_path))
