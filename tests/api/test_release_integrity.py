"""Release integrity: what a release samples is what its accountant analysed, every release draws fresh
secrets, and nothing exact leaves the mechanism.

Written to kill deliberate bugs of ``benchmarks/mutants.py`` that the rest of the suite missed: a calibration
whose sampled law (``cal.noise``) or margin is not the one its accountant certified (σ/2, margin − 1); a noise
key or CSH shared term reused across releases; the exact top-k cut-off or a non-private structure (histogram,
Misra–Gries sketch) reaching the :class:`~sparsedp.report.Result`.
"""

from __future__ import annotations

import pickle
import re

import numpy as np
import polars as pl
import pytest

import sparsedp as sd
from sparsedp.accounting import calibrate
from sparsedp.accounting.csh_exact import csh_exact_delta
from sparsedp.accounting.discrete_histograms import gshm_discrete_delta, laplace_discrete_delta
from sparsedp.accounting.laws import DiscreteGaussian, DiscreteLaplace, RoundedCorrelatedGaussian
from sparsedp.noise import InsecureSeededRandom

CASES = [(0.5, 1e-6, 1), (1.0, 1e-5, 4), (2.0, 1e-8, 16)]


@pytest.mark.parametrize("eps,dlt,bound", CASES)
def test_sampled_gshm_and_laplace_laws_are_the_accounted_ones(eps, dlt, bound):
    """δ recomputed by the accountant from the law the kernel samples (``cal.noise``) and the margin it
    compares with (``cal.tau``) is within the target, and the margin is the smallest such integer."""
    g = calibrate("gshm", epsilon=eps, delta=dlt, l0=bound)
    assert isinstance(g.noise, DiscreteGaussian)
    assert gshm_discrete_delta(eps, g.noise.sigma2, int(g.tau), bound) <= dlt
    assert gshm_discrete_delta(eps, g.noise.sigma2, int(g.tau) - 1, bound) > dlt
    assert g.sigma == pytest.approx(float(g.noise.sigma2) ** 0.5, rel=1e-12)
    lap = calibrate("laplace", epsilon=eps, delta=dlt, l0=bound)
    assert isinstance(lap.noise, DiscreteLaplace)
    assert laplace_discrete_delta(eps, lap.noise.scale, int(lap.tau), bound) <= dlt
    assert laplace_discrete_delta(eps, lap.noise.scale, int(lap.tau) - 1, bound) > dlt
    assert lap.sigma == pytest.approx(float(lap.noise.scale), rel=1e-12)


@pytest.mark.parametrize("eps,dlt,k,debias", [
    (1.0, 1e-3, 4, False), (1.0, 1e-4, 4, True), (0.5, 1e-6, 10, True), (0.5, 1e-6, 10, False),
    (2.0, 1e-8, 100, True), (2.0, 1e-8, 100, False),
    # the de-biased calibration at k = 4, δ = 1e-3 takes ~75x as long as at δ = 1e-4: run with -m slow
    pytest.param(1.0, 1e-3, 4, True, marks=pytest.mark.slow),
])
def test_sampled_topk_csh_law_is_the_accounted_one(eps, dlt, k, debias):
    cal = calibrate("topk-csh", epsilon=eps, delta=dlt, top_k=k, debias=debias)
    assert isinstance(cal.noise, RoundedCorrelatedGaussian)
    assert cal.analysis == "rounded-exact"  # the certified profile (docs/proofs/csh-exact.md)
    sigma = cal.noise.sigma
    assert cal.noise.shared_sigma == pytest.approx(sigma * k ** -0.25, rel=1e-12)
    assert sigma == pytest.approx(cal.sigma, rel=1e-12)
    assert csh_exact_delta(eps, sigma, int(cal.tau), k, topk=True, debias=debias) <= dlt
    if cal.tau > 1:
        assert csh_exact_delta(eps, sigma, int(cal.tau) - 1, k, topk=True, debias=debias) > dlt


def _frame(keys=40, units_per_key=60):
    rows = [(k * 1000 + u, f"k{k:02d}") for k in range(keys) for u in range(units_per_key)]
    return pl.DataFrame(rows, schema={"user": pl.Int64, "url": pl.String}, orient="row")


def test_two_releases_draw_independent_noise():
    """The secure default source: two releases of the same data never share their noise (a fixed or reused
    K_noise would give identical values on all 40 keys)."""
    frame = _frame()
    a = sd.release(frame, "user", "url", 1.0, 1e-6, max_groups_per_unit=1, mechanism="gshm").table.sort("url")
    b = sd.release(frame, "user", "url", 1.0, 1e-6, max_groups_per_unit=1, mechanism="gshm").table.sort("url")
    assert a["url"].to_list() == b["url"].to_list()  # every key far above the threshold
    assert (a["count"] != b["count"]).sum() >= 20  # σ ≈ 5: equal draws have probability ≈ 0.08 per key


def test_every_release_draws_its_own_csh_shared_term():
    """The shared term of CSH (one per release) comes from a fresh secret each time."""
    from sparsedp.mechanisms.kernel import draw_shared_noise, noise_plan
    from sparsedp.noise import default_source

    plan = noise_plan(calibrate("topk-csh", epsilon=1.0, delta=1e-6, top_k=16))
    src = default_source()
    terms = [draw_shared_noise(plan, src) for _ in range(4)]
    mids = {float(sum(t.bounds(1e-6)) / 2) for t in terms}
    assert len(mids) == 4
    seeded = [draw_shared_noise(plan, InsecureSeededRandom(s)) for s in (1, 2)]
    assert seeded[0].bounds(1e-6) != seeded[1].bounds(1e-6)


def test_topk_reports_the_noisy_cutoff_not_the_exact_one():
    """De-biased top-k releases t̃ = t + noise; the report must state t̃, never the exact (k+1)-th count t."""
    frame = _frame(keys=12, units_per_key=30)
    # give the keys distinct counts: key i has 30 + 3 i units, so with k = 5 the exact cut-off t is 48 (key 6)
    extra = [(10**6 + i * 100 + j, f"k{i:02d}") for i in range(12) for j in range(3 * i)]
    frame = pl.concat([frame, pl.DataFrame(extra, schema=frame.schema, orient="row")])
    t = 30 + 3 * 6
    seen = []
    for seed in range(6):
        res = sd.release(frame, "user", "url", 1.0, 1e-6, top_k=5, rng=InsecureSeededRandom(seed))
        note = [n for n in res.report.notes if "noisy cut-off" in n]
        assert len(note) == 1
        seen.append(float(re.search(r"= (-?[\d.e+]+)", note[0]).group(1)))
    assert sum(x != t for x in seen) >= 4, seen  # the noise of t̃ has std ≈ 4: P[t̃ = t] ≈ 0.1
    assert abs(np.mean(seen) - t) < 15


@pytest.mark.parametrize("mechanism", ["gshm", "topk", "misra-gries", "stability"])
def test_result_carries_no_histogram_or_sketch(mechanism):
    """Only the compact histogram publishes a query object; for every other mechanism ``Result.query`` is
    None, and the pickled Result holds no key that was not released."""
    rows = [(u, "popular") for u in range(300)] + [(10**6, "secret-one-unit-key")]
    frame = pl.DataFrame(rows, schema={"user": pl.Int64, "url": pl.String}, orient="row")
    kw = {"gshm": dict(max_groups_per_unit=1, mechanism="gshm"), "topk": dict(top_k=1),
          "misra-gries": dict(mechanism=sd.MisraGries(sketch_size=8)),
          "stability": dict(mechanism=sd.Stability(max_units=400, max_key_bytes=32))}[mechanism]
    res = sd.release(frame, "user", "url", 1.0, 1e-6, rng=InsecureSeededRandom(3), **kw)
    assert res.query is None
    assert b"secret-one-unit-key" not in pickle.dumps(res)
    assert res.table["url"].to_list() == ["popular"]


def test_joint_topk_margin_is_the_accounted_one():
    """De-biased top-k CSH with a SUM column: the margin the kernel compares with is the joint accountant's
    smallest (Thm 3.3 with the columns, at τ = margin − ½)."""
    from sparsedp.accounting.csh_aggregates import csh_joint_delta_parts
    from sparsedp.mechanisms.base import ReleaseRequest
    from sparsedp.mechanisms.thresholded import topk_joint_calibration

    for eps, dlt, k in ((1.0, 1e-6, 10), (0.5, 1e-5, 4)):
        req = ReleaseRequest(epsilon=eps, delta=dlt, aggregates=(sd.Sum("x", 0.0, 10.0),))
        cal = topk_joint_calibration(req, k)
        j = cal.joint
        assert cal.noise.sigma == pytest.approx(j.sigma, rel=1e-12)

        def total(margin):
            return csh_joint_delta_parts(eps, j.sigma, margin - 0.5, k, j.column_sigma2s, j.column_sensitivities,
                                         debias=True).total

        assert total(cal.tau) <= dlt < total(cal.tau - 1)


def test_stability_releases_only_counts_above_its_threshold():
    """The stability histogram releases (x, M(c_x)) only when M(c_x) > τ (spec §5.13): with every count at τ,
    noisy values equal to τ occur and must never be released."""
    from fractions import Fraction as F

    from sparsedp.mechanisms.pure import pure_histogram

    def run(c, seed):
        items = [k for k in range(1, 201) for _ in range(c)]
        return pure_histogram(items, F(1, 2), domain_size=1024, mechanism="stability", delta=F(1, 10**6),
                              rng=InsecureSeededRandom(seed))

    tau = run(66, 0).calibration.options.tau
    r = run(tau, 1)
    assert r.calibration.options.tau == tau and len(r.keys) > 20
    assert min(int(c) for c in r.counts) == tau + 1  # values at τ + 1 are released, values at τ never


@pytest.mark.parametrize("name,kw", [
    ("gshm", dict(l0=2)), ("laplace", dict(l0=2)), ("topk-csh", dict(top_k=4)),
    ("csh", dict(k=4, csh_noise="alg4"))])
def test_kernel_compares_as_the_calibration_states(name, kw):
    """``X_i >= release_floor`` (what the kernel samples against) is exactly the calibration's rule: ``>=`` or
    ``>`` (``cal.comparison``) of the noisy count (CSH Alg. 4: ``(2c + Z_i + Z_corr)/2``) against pre + margin."""
    import dataclasses

    cal = calibrate(name, epsilon=1.0, delta=1e-5, **kw)
    # the calibrated margin, and (for Alg. 4's real margin) margins where ties are possible: 2(pre + τ) integer
    for tau in dict.fromkeys([cal.tau, float(int(cal.tau)), int(cal.tau) + 0.5]):
        _check_rule(dataclasses.replace(cal, tau=tau))


def _check_rule(cal):
    from fractions import Fraction

    from sparsedp.accounting.calibration import Comparison
    from sparsedp.mechanisms.kernel import noise_plan

    plan = noise_plan(cal)
    counts = np.arange(0, 40, dtype=np.int64)
    thr = Fraction(1) + Fraction(cal.tau)
    strict = cal.comparison is Comparison.GT
    shared = 3 if plan.family == "correlated" and not plan.rounded else None
    j = plan.release_floor(counts, thr, shared)
    for c, jc in zip(counts.tolist(), j.tolist()):
        for x in range(jc - 3, jc + 4):
            if shared is not None:
                value = Fraction(2 * c + x + shared, 2)
            else:
                value = Fraction(c + x)
            assert (x >= jc) == (value > thr if strict else value >= thr), (c, x)


def test_distinct_noise_chunks_read_distinct_streams():
    """Chunks of one release read streams of distinct labels (independent by the PRF property); a shared
    stream would give the keys at the same position of two chunks the same noise."""
    from sparsedp.core.noise_chunks import chunk_label
    from sparsedp.mechanisms.thresholded import _key_task

    assert len({chunk_label(c) for c in range(-2, 64)}) == 66
    task = _key_task(calibrate("gshm", epsilon=1.0, delta=1e-6, l0=1), 1, InsecureSeededRandom(9), False)
    words = {bytes(task.stream(c).random_bytes(32)) for c in range(16)}
    assert len(words) == 16
    assert bytes(task.stream(3).random_bytes(32)) == bytes(task.stream(3).random_bytes(32))  # deterministic
    # and in a release: same counts, 40 chunks of 3 keys: the noise vectors of the chunks are not all equal
    counts = np.full(3, 200, dtype=np.int64)
    noise = {tuple(task.apply(counts, c)[1] - 200) for c in range(40)}
    assert len(noise) > 30
