"""Thesis Fig. 2.5 (ALP Alg. 4 vs Histogram-Projection Alg. 10 over ε; spec seed-004a §6.4, §8.7).

Three layers:
1. the random-walk sampler of ``sparsedp.reproduce._alp_walk`` has exactly the law of Alg. 3 on the §6.1
   bit model: chi-square against the exhaustive enumeration of all 2^m bit strings (with a power check);
2. that bit model is the law of the real ``sparsedp.sketches.alp.ALP`` structure (Alg. 4 and Alg. 10, with
   and without a colliding key): chi-square of real estimates against the same enumeration;
3. the ``alp-fig2.5`` target in fast mode meets the thesis' statements and the spec's Monte Carlo table.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from sparsedp import reproduce as rp
from sparsedp.noise import InsecureSeededRandom
from sparsedp.reproduce._alp_walk import collision_one_probability, estimator_offsets, return_table, walk_argmax
from sparsedp.reproduce.thesis_ch2_alp import EPS_FULL_25, crossover, lemma_2_31_bound
from sparsedp.sketches.alp import ALP, alp1_estimate_definition
from sparsedp.audit.stats import pooled_chisquare


def exact_offset_law(m: int, y: int, p1: float, p0: float) -> dict[float, float]:
    """The exact law of ỹ − y: every one of the 2^m bit strings, Alg. 3 as printed (the oracle)."""
    law: dict[float, float] = {}
    for bits in itertools.product((0, 1), repeat=m):
        pr = 1.0
        for b, bit in enumerate(bits, start=1):
            one = 1.0 - p1 if b <= y else p0
            pr *= one if bit else 1.0 - one
        key = round(alp1_estimate_definition(bits) - y, 6)
        law[key] = law.get(key, 0.0) + pr
    return law


def chi2_pvalue(sample: np.ndarray, law: dict[float, float]) -> float:
    """Chi-square goodness of fit of ``sample`` (values ỹ − y) to ``law``; adjacent support points are
    merged until every bin expects >= 5; a value outside the support gives p = 0."""
    vals, counts = np.unique(np.round(sample, 6), return_counts=True)
    seen = dict(zip(vals.tolist(), counts.tolist()))
    if set(seen) - set(law):
        return 0.0
    support = sorted(law)
    return pooled_chisquare([seen.get(k, 0) for k in support], [law[k] for k in support], min_expected=5)


def test_return_table_is_the_first_return_law():
    # from a maximum: up with p; first return after 2(n+1) steps with C_n (p q)^{n+1}; total 2p (infinite horizon)
    p = 0.3
    cum = return_table(p, 2000)
    assert cum[0] == p
    assert cum[1] - cum[0] == pytest.approx(p * (1 - p))           # C_0 = 1
    assert cum[3] - cum[2] == pytest.approx(2 * (p * (1 - p)) ** 3)  # C_2 = 2
    assert cum[-1] == pytest.approx(2 * p, abs=1e-12)


@pytest.mark.parametrize("m,y,p1,p0", [
    (10, 4, 0.3, 0.38),                                   # generic, with collisions
    (12, 0, 0.2, 0.26),                                   # Alg. 4 (α = 3), q = 0.1, true value 0
    (12, 12, 0.2, 0.2),                                   # true value at ψ: only the left walk
    (11, 6, 1 / (math.e ** 2 + 1), 1 / (math.e ** 2 + 1)),  # Alg. 10, ε = 2, no collisions
    (9, 3, 0.45, 0.48),                                   # near ½: long excursions, ties
])
def test_walk_sampler_equals_exhaustive_law(m, y, p1, p0):
    law = exact_offset_law(m, y, p1, p0)
    gen = np.random.Generator(np.random.PCG64(7 + m + y))
    sample = estimator_offsets(gen, np.full(100_000, y), m, p1, p0)
    assert chi2_pvalue(sample, law) > 1e-4
    # power: the same sample is far from the law with a slightly larger one-probability above y (when
    # there is anything above y)
    if y < m:
        assert chi2_pvalue(sample, exact_offset_law(m, y, p1, p0 + 0.03)) < 1e-6


def test_walk_argmax_edge_cases():
    gen = np.random.Generator(np.random.PCG64(3))
    top, s, c = walk_argmax(gen, 0.0, np.array([0, 5, 100]))  # never steps up: the maximum 0 only at 0
    assert top.tolist() == [0, 0, 0] and s.tolist() == [0, 0, 0] and c.tolist() == [1, 1, 1]
    with pytest.raises(ValueError):
        walk_argmax(gen, 0.5, np.array([3]))
    with pytest.raises(ValueError):
        estimator_offsets(gen, np.array([5]), 4, 0.2, 0.2)


def _real_offsets(n: int, seed: int, *, variant: str, eps: float, u: int, x: int, blocker: bool, s: int,
                  scale: float) -> np.ndarray:
    rng = InsecureSeededRandom(seed)
    data = {1: x, 2: 10 * u} if blocker else {1: x}
    out = np.empty(n)
    for r in range(n):
        a = ALP.build(data, epsilon=eps, k=2, u=u, variant=variant, s=s, rng=rng)
        out[r] = a.estimate(1) / scale - x / scale
    return out


# Alg. 4: ε = 1.5, α = 3, u = ψ = 18 → m = 9, x = 8 = 4·α/ε (y = 4, no rounding); Alg. 10: ε = 1, ψ = 10,
# x = 4. The blocker key (value > ψ, all m bits set) shares key 1's cell in each column with probability
# 1/s independently across columns (independent Carter–Wegman functions): the per-bit collision q = 1/s.
REAL_CASES = [("projection", 1.5, 18, 8, 2.0, 0.2), ("histogram", 1.0, 10, 4, 1.0, 1 / (math.e + 1))]


@pytest.mark.parametrize("case", REAL_CASES, ids=["alg4", "alg10"])
@pytest.mark.parametrize("blocker,s", [(False, 64), (True, 5)], ids=["no-collision", "q=0.2"])
def test_model_is_the_real_structure(case, blocker, s):
    variant, eps, u, x, scale, p = case
    m, y = round(u / scale), round(x / scale)
    q = 1.0 / s if blocker else 0.0
    law = exact_offset_law(m, y, p, collision_one_probability(p, q))
    sample = _real_offsets(600, 11 + s, variant=variant, eps=eps, u=u, x=x, blocker=blocker, s=s, scale=scale)
    assert chi2_pvalue(sample, law) > 1e-4
    if blocker:  # power: the collision-free law is rejected
        assert chi2_pvalue(sample, exact_offset_law(m, y, p, p)) < 1e-3


@pytest.mark.slow
@pytest.mark.parametrize("case", REAL_CASES, ids=["alg4", "alg10"])
def test_model_is_the_real_structure_large(case):
    variant, eps, u, x, scale, p = case
    m, y = round(u / scale), round(x / scale)
    law = exact_offset_law(m, y, p, collision_one_probability(p, 0.1))
    sample = _real_offsets(8000, 5, variant=variant, eps=eps, u=u, x=x, blocker=True, s=10, scale=scale)
    assert chi2_pvalue(sample, law) > 1e-4


def test_crossover_interpolation():
    eps = np.array([0.5, 0.6, 0.7, 0.8])
    a4 = np.array([1.0, 1.0, 1.0, 1.0])
    assert crossover(eps, a4, np.array([2.0, 1.5, 0.5, 0.25])) == pytest.approx(0.6 + 0.1 * math.log(1.5) / math.log(3))
    assert math.isnan(crossover(eps, a4, np.full(4, 2.0)))


# spec §6.4 Monte Carlo (2·10^4 reps per point): ε → (Alg4 s=∞, Alg4 q=0.1, Alg10 s=∞, Alg10 q=0.1/e^ε,
# Alg10 q=min(0.1, 0.1/ε))
SPEC = {0.05: (81.9, 117, 702, 798, 804), 0.25: (17.2, 24.4, 46.1, 56.7, 61.0), 0.5: (8.65, 12.0, 11.5, 13.4, 15.3),
        0.6: (7.06, 10.2, 7.94, 9.33, 10.5), 0.7: (6.15, 8.77, 5.87, 6.75, 7.86), 0.8: (5.27, 7.69, 4.47, 5.04, 5.95),
        1.0: (4.28, 6.05, 2.80, 3.12, 3.81), 2.0: (2.17, 3.07, 0.636, 0.668, 0.778),
        3.0: (1.42, 2.05, 0.203, 0.219, 0.292),
        5.0: (0.866, 1.21, 0.0279, 0.0287, 0.0716), 10.0: (0.428, 0.594, 0.00015, 0.0002, 0.0212)}
SERIES = ("alg4 s=inf", "alg4 s=10k", "alg10 s=inf", "alg10 q=0.1/e^eps", "alg10 q=min(0.1,0.1/eps)")


def test_figure_2_5_fast(tmp_path):
    res = rp.run("alp-fig2.5", tmp_path, fast=True)
    assert res.png_path.stat().st_size > 1000
    rows = rp.read_csv(res.csv_path)
    pts = {(r["series"], round(float(r["epsilon"]), 2)): r for r in rows}
    mae = {k: float(r["mae"]) for k, r in pts.items()}
    se = {k: float(r["se_mae"]) for k, r in pts.items()}
    grid = sorted({e for (lab, e), r in pts.items() if lab == SERIES[0] and r["in_figure"] == "True"})
    assert grid[0] == 0.25 and grid[-1] == 10.0
    assert (len(EPS_FULL_25), EPS_FULL_25[0], EPS_FULL_25[-1], EPS_FULL_25[1]) == (196, 0.25, 10.0, 0.3)
    reps = int(pts[SERIES[0], 1.0]["reps"])

    # spec §6.4 table: both estimates have s.e. ≈ se (the spec used 2·10^4 reps, fast mode uses `reps`);
    # 4.5 combined s.e. plus half a unit of the spec's last printed digit. Skipped: Alg. 10 at ε = 10 with
    # no or 0.1/e^ε collisions, where fewer than ~10 of the 2·10^4 runs have a non-zero error.
    for eps, vals in SPEC.items():
        for lab, want in zip(SERIES, vals):
            if eps == 10.0 and lab in ("alg10 s=inf", "alg10 q=0.1/e^eps"):
                continue
            digit = 10.0 ** (math.floor(math.log10(want)) - 2)  # the spec prints 3 significant digits
            tol = 4.5 * se[lab, eps] * math.sqrt(1 + reps / 20_000) + digit / 2
            assert mae[lab, eps] == pytest.approx(want, abs=tol), (lab, eps)

    # "Algorithm 10 is preferred when ε is approximately 0.7 and above" (spec §8.7: cross-over in [0.6, 0.8]);
    # the MAE gaps at 0.6 and 0.8 are >= 10%, the relative s.e. at 2·10^4 reps is ~1%
    h = {x.name: x for x in res.headlines}
    assert 0.6 < h["crossover eps, alg4 s=inf vs alg10 s=inf"].ours < 0.8
    assert 0.55 < h["crossover eps, alg4 s=10k vs alg10 q=min(0.1,0.1/eps)"].ours < 0.8
    for lab4, lab10 in (("alg4 s=inf", "alg10 s=inf"), ("alg4 s=10k", "alg10 q=min(0.1,0.1/eps)")):
        assert all(mae[lab4, e] < mae[lab10, e] for e in grid if e <= 0.55)
        assert all(mae[lab4, e] > mae[lab10, e] for e in grid if e >= 0.8)
    # "it still outperforms Algorithm 4 for large ε by more than an order of magnitude"
    assert mae["alg4 s=10k", 10.0] / mae["alg10 q=min(0.1,0.1/eps)", 10.0] > 10
    assert mae["alg4 s=10k", 5.0] / mae["alg10 q=min(0.1,0.1/eps)", 5.0] > 10
    # ε = 0.05: "Algorithm 4 outperformed the mean error of Algorithm 10 by an order of magnitude" (spec: 7–9×)
    assert 5 < mae["alg10 s=inf", 0.05] / mae["alg4 s=inf", 0.05] < 12
    assert 5 < mae["alg10 q=min(0.1,0.1/eps)", 0.05] / mae["alg4 s=10k", 0.05] < 12

    # Lemma 2.31 (no collisions): MAE <= 8e^ε/(e^ε − 1)² at every ε; at ε = 2 the bound is 1.448 (the spec's
    # "≈ 1.44" truncates it) and the spec observed ≈ 0.64 (a long run of this model gives 0.622 ± 0.001)
    for e in grid:
        assert mae["alg10 s=inf", e] <= lemma_2_31_bound(e) + 4 * se["alg10 s=inf", e]
    assert lemma_2_31_bound(2.0) == pytest.approx(59.1124 / 40.8200, abs=1e-4)
    assert h["alg10 s=inf MAE at eps=2 (<= Lemma 2.31 bound)"].ours == pytest.approx(0.636, abs=0.04)
    # Lemma 2.32 with k/s = q, and Lemma 2.17 for Alg. 4 (y needs no rounding): ((4α+4)/α² + (4γ+4)/γ²)·α/ε
    for e in grid:
        for lab, q in (("alg10 q=0.1/e^eps", 0.1 * math.exp(-e)), ("alg10 q=min(0.1,0.1/eps)", min(0.1, 0.1 / e))):
            t = 1 + math.expm1(e) * q
            g = (math.exp(e) + 1) / t - 2
            assert mae[lab, e] <= 4 * math.exp(e) / math.expm1(e) ** 2 + (4 * g + 4) / g ** 2
        for lab, q in (("alg4 s=inf", 0.0), ("alg4 s=10k", 0.1)):
            g = 5 / (1 + 3 * q) - 2
            assert mae[lab, e] <= (16 / 9 + (4 * g + 4) / g ** 2) * 3 / e

    # shapes: Alg. 4 is O(1/ε) (MAE·ε flat); Alg. 10 is O(1/e^ε) with q ∝ e^−ε and O(1/ε) with q ∝ 1/ε
    flat = [mae["alg4 s=inf", e] * e for e in grid]
    assert max(flat) / min(flat) < 1.12
    for e in (3.0, 5.0):
        assert 2 < mae["alg10 q=0.1/e^eps", e] * math.exp(e) < 8
    assert all(mae["alg10 q=min(0.1,0.1/eps)", e] * e < 1.0 for e in grid if e >= 3)
    # the reference curves are in the CSV
    assert mae["ref 1/e^eps", 2.0] == pytest.approx(math.exp(-2))
