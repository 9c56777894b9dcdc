"""Weighted Gaussian set union (Gopi et al. ICML 2020) with exact discrete noise: the accountant
(sparsedp.accounting.set_union) against brute-force enumeration of the released outputs of tiny neighbouring
inputs, and the mechanism's release probability and noise law at fixed seeds (the real secure path).

The enumeration uses only the discrete Gaussian pmf and the release rule ``S + Z >= T``; it does not use the
decomposition the accountant rests on (docs/proofs/set-union.md §2).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import polars as pl
import pytest

import sparsedp as sd
from sparsedp.engines.bounding import COUNT
from sparsedp.accounting.discrete import dgauss_pmf, dgauss_sf, dgauss_variance
from sparsedp.accounting.set_union import (calibrate_weighted_gaussian, grid_weights, paper_threshold,
                                           weighted_gaussian_delta, weighted_shift_hockey_stick)
from sparsedp.errors import InvalidParameterError
from sparsedp.noise import InsecureSeededRandom

S2 = 3          # noise scale N_Z(0, 3): small, so every outcome can be enumerated
GRID = 2        # W_1 = 2, W_2 = W_3 = 1
THRESHOLD = 7
HUGE = 10_000   # an old key this heavy is always released (the threshold never binds)
WIDTH = 40      # noise support enumerated: |z| <= 40 (mass outside < 1e-100 at s = 3)


def _outputs(weight: int | None, lo: int, hi: int, thr: int = THRESHOLD) -> np.ndarray:
    """P[output] over (not released, released with value lo..hi) for a key of weight sum ``weight``
    (None: the key is absent)."""
    out = np.zeros(hi - lo + 2)
    if weight is None:
        out[0] = 1.0
        return out
    z = np.arange(-WIDTH, WIDTH + 1)
    pz = dgauss_pmf(z, S2)
    vals = weight + z
    rel = vals >= thr
    out[0] = float(pz[~rel].sum())
    idx = vals[rel] - lo + 1
    assert idx.size == 0 or (idx.min() >= 1 and idx.max() <= hi - lo + 1)
    out[idx] = pz[rel]
    return out


def _joint(laws):
    j = np.ones(1)
    for p in laws:
        j = np.multiply.outer(j, p).ravel()
    return j


def _enumerated_delta(eps: float, base: list[int | None], t: int, thr: int = THRESHOLD) -> float:
    """Exact max over the two directions of H_{e^ε} between the outputs with and without one unit that
    kept ``t`` keys, whose keys have base weight sums ``base`` (None = the key is new: only this unit has it)."""
    w = int(grid_weights(t, GRID)[t - 1])
    laws_d, laws_p = [], []
    for b in base:   # each key's outputs on one aligned range covering both neighbours' supports
        lo = max(thr, (0 if b is None else b) - WIDTH)
        hi = (0 if b is None else b) + w + WIDTH
        laws_d.append(_outputs(b, lo, hi, thr))
        laws_p.append(_outputs(w if b is None else b + w, lo, hi, thr))
    p, q = _joint(laws_d), _joint(laws_p)
    e = math.exp(eps)
    return max(float(np.maximum(q - e * p, 0).sum()), float(np.maximum(p - e * q, 0).sum()))


@pytest.mark.parametrize("eps,thr", [(0.5, THRESHOLD), (1.0, THRESHOLD), (3.0, 5), (2.0, 4)])
def test_weighted_gaussian_delta_equals_enumerated_worst_case(eps, thr):
    """Every configuration of a unit with t <= 3 kept keys, each key new or held by others with a small,
    at-threshold or huge weight: the enumerated δ never exceeds the accountant's, and the worst one equals it
    (attained with the old keys far above the threshold, as the proof says). At small ε the Gaussian part
    dominates; at ε = 2, 3 with a low threshold the new keys' release probability does (so a ``>`` for ``>=``
    in the accountant's ``P[Z >= T − W_t]`` fails here)."""
    l0 = 3
    acc, info = weighted_gaussian_delta(eps, S2, thr, l0, GRID, parts=True)
    worst = 0.0
    for t in range(1, l0 + 1):
        for base in itertools.product([None, 1, thr - 1, HUGE], repeat=t):
            d = _enumerated_delta(eps, list(base), t, thr)
            assert d <= acc * (1 + 1e-9) + 1e-15, (t, base, d, acc)
            worst = max(worst, d)
    assert worst == pytest.approx(acc, rel=1e-6)
    assert acc > 1e-4  # a regime where the comparison means something
    if eps >= 2:
        assert info["infinite"] == pytest.approx(acc, rel=1e-9)   # the new-key term is the worst one


def test_shift_hockey_stick_matches_convolution():
    """H_t(j, ε) for a shift w on j coordinates against the convolved pmf of the loss."""
    z = np.arange(-WIDTH, WIDTH + 1)
    pz = dgauss_pmf(z, S2)
    for w, j, eps in [(1, 1, 0.3), (2, 1, 0.1), (1, 3, 0.5), (2, 2, -0.2)]:
        p0 = _joint([pz] * j)
        grids = np.meshgrid(*([z] * j), indexing="ij")
        tot = sum(g.ravel() for g in grids)
        # P1(y) = P0(y − w·1): the loss at y is (2w Σy − j w²)/(2s); evaluate both laws on the same grid
        loss = (2 * w * tot - j * w * w) / (2 * S2)
        logp1 = (-(((np.stack([g.ravel() for g in grids]) - w) ** 2).sum(0)) / (2 * S2))
        logp0 = (-((np.stack([g.ravel() for g in grids]) ** 2).sum(0)) / (2 * S2))
        c = p0.sum() / np.exp(logp0).sum()
        p1 = np.exp(logp1) * c
        direct = float(np.sum(np.maximum(p1 - math.exp(eps) * p0, 0)))
        assert np.allclose(loss, logp1 - logp0)
        ours = weighted_shift_hockey_stick(j, eps, S2, w)
        assert ours >= direct * (1 - 1e-9) - 1e-15
        assert ours == pytest.approx(direct, rel=1e-6, abs=1e-12)


def test_hockey_stick_boundaries_are_the_exact_rational_ones():
    """The loss boundaries ceil(sε/w ∓ jw/2) are computed in integers (s = p/q, ε = m/n): at Weighted Gaussian
    scales, huge and negative ε, odd j·w, the value equals the one with the boundaries taken in exact Fractions."""
    from fractions import Fraction

    from sparsedp.accounting.discrete import dgauss_logsf
    from sparsedp.accounting.discrete_histograms import _SF_REL_ERR, _log_ratio_iid

    def reference(j, eps, s, w):
        x = s * Fraction(eps) / w
        x1, x2 = math.ceil(x - Fraction(j * w, 2)), math.ceil(x + Fraction(j * w, 2))
        log_r = _log_ratio_iid(j, float(s)) + _SF_REL_ERR
        l1 = dgauss_logsf(x1, j * float(s)) + log_r
        l2 = eps + dgauss_logsf(x2, j * float(s)) - log_r
        val = 0.0 if l1 == -math.inf or l2 >= l1 else math.exp(l1) * (-math.expm1(l2 - l1))
        return min(1.0, max(val, max(0.0, -math.expm1(eps)) if eps < 0 else 0.0))

    rng = np.random.default_rng(2)
    for _ in range(300):
        s = Fraction(int(rng.integers(4 << 20, 1 << 52)), 1 << 20)
        w, j = int(rng.integers(1, 4097)), int(rng.integers(1, 300))
        eps = float(rng.choice([rng.uniform(-2, 0), rng.uniform(0, 3), rng.uniform(3, 40), 1.0]))
        assert weighted_shift_hockey_stick(j, eps, s, w) == reference(j, eps, s, w)


def test_blocks_bound_every_a_from_above():
    """Above 48 kept keys the maxima over a use blocks (DH §5): an upper bound, and here equal to the value
    with every a evaluated (the argmaxima sit at the single points)."""
    c = calibrate_weighted_gaussian(1.0, 1e-6, 60)
    for thr in (c.threshold_int - 40, c.threshold_int):
        blocks = weighted_gaussian_delta(1.0, c.noise.sigma2, thr, 60, c.grid)
        every = weighted_gaussian_delta(1.0, c.noise.sigma2, thr, 60, c.grid, every_a=True)
        assert every <= blocks <= every * (1 + 1e-9)


def test_grid_weights_round_down_to_unit_norm():
    for g in (2, 7, 4096):
        ws = grid_weights(50, g)
        t = np.arange(1, 51)
        assert np.all(t * ws.astype(object) ** 2 <= g * g)              # ℓ2 norm <= 1 exactly
        assert np.all(t * (ws.astype(object) + 1) ** 2 > g * g)         # the largest such integers


def test_calibration_meets_delta_and_beats_the_papers_split():
    c = calibrate_weighted_gaussian(1.0, 1e-6, 10)
    assert c.delta_achieved <= 1e-6
    assert weighted_gaussian_delta(1.0, c.noise.sigma2, c.threshold_int, 10, c.grid) <= 1e-6
    # one threshold step lower must fail at the sub-grid step used (~σ/1024 in grid units)
    step = max(1, int(math.sqrt(float(c.noise.sigma2))) // 1024)
    assert weighted_gaussian_delta(1.0, c.noise.sigma2, c.threshold_int - step, 10, c.grid) > 1e-6
    sigma, rho = paper_threshold(1.0, 1e-6, 10)
    assert c.threshold_int / c.grid < rho   # the exact profile is sharper than δ/2 + δ/2
    # count-equivalent fields (keys whose units all fill the bound): sqrt(l0)·T/G − 1, sqrt(l0)·sqrt(s)/G
    assert c.tau == pytest.approx(math.sqrt(10) * c.threshold_int / c.grid - 1)
    assert c.sigma == pytest.approx(math.sqrt(10) * math.sqrt(float(c.noise.sigma2)) / c.grid)
    kern = c.kernel()
    assert kern.tau == c.threshold_int - 1 and kern.noise == c.noise


@pytest.mark.parametrize("l0", [5, 20])
def test_count_equivalent_threshold_is_below_gshms(l0):
    """Even for keys whose units all fill the bound (its worst case), the Weighted Gaussian needs no more units
    than GSHM at the same l0 (both exact discrete calibrations)."""
    from sparsedp.accounting import calibrate

    c = calibrate_weighted_gaussian(1.0, 1e-6, l0)
    g = calibrate("gshm", epsilon=1.0, delta=1e-6, l0=l0, discrete=True)
    assert c.tau <= g.tau


def _single_key_units(counts: dict[str, int]) -> pl.DataFrame:
    units, keys, u = [], [], 0
    for k, m in counts.items():
        for _ in range(m):
            units.append(u)
            keys.append(k)
            u += 1
    return pl.DataFrame({"unit": units, "key": keys})


def test_release_probability_and_noise_law_at_fixed_seed():
    """Keys held by m one-key units have S = m·G exactly; the release frequency and the released noise
    follow the exact discrete law (fixed seed, the secure code path with a seeded source)."""
    l0 = 1
    cal = calibrate_weighted_gaussian(1.0, 1e-6, l0)
    g, thr = cal.grid, cal.threshold_int
    m_mid = thr // g                                        # S just below T: release probability near 1/2
    p_mid = float(dgauss_sf(thr - m_mid * g, cal.noise.sigma2))
    assert 0.2 < p_mid < 0.8
    n = 400
    counts = {f"mid{i}": m_mid for i in range(n)} | {f"hi{i}": m_mid + 12 for i in range(n)}
    df = _single_key_units(counts)
    res = sd.release(df, "unit", "key", 1.0, 1e-6, max_groups_per_unit=l0, mechanism="weighted-gaussian",
                     rng=InsecureSeededRandom(7))
    t = res.table
    assert t.columns == ["key", "weight"]
    mid = t.filter(pl.col("key").str.starts_with("mid"))
    hi = t.filter(pl.col("key").str.starts_with("hi"))
    sd_bin = math.sqrt(n * p_mid * (1 - p_mid))
    assert abs(mid.height - n * p_mid) < 5 * sd_bin
    assert hi.height == n                                    # 12 units above T: 12 > 5σ in weight units
    noise = (hi["weight"].to_numpy() * g - (m_mid + 12) * g)
    assert np.all(noise == np.round(noise))                  # integer noise on the grid
    var = dgauss_variance(cal.noise.sigma2)
    assert abs(noise.mean()) < 5 * math.sqrt(var / n)
    assert noise.var() == pytest.approx(var, rel=5 * math.sqrt(2 / n))
    assert all((mid["weight"].to_numpy() * g) >= thr)        # every released value passed the threshold
    # same seed, same table (one release, one draw)
    again = sd.release(df, "unit", "key", 1.0, 1e-6, max_groups_per_unit=l0, mechanism="weighted-gaussian",
                       rng=InsecureSeededRandom(7)).table
    assert again.equals(t)


def test_weights_follow_each_units_kept_key_count():
    """A key held by units that keep 1, 2 and 4 keys has weight floor(G/1) + floor(G/√2) + floor(G/2) (grid
    units); checked on the weighted histogram the mechanism releases from."""
    from sparsedp.engines.polars_engine import PolarsEngine

    rows = [(0, "a"), (1, "a"), (1, "b"), (2, "a"), (2, "b"), (2, "c"), (2, "d")]
    df = pl.DataFrame({"unit": [r[0] for r in rows], "key": [r[1] for r in rows]})
    ws = grid_weights(4, 4096)
    h = PolarsEngine().weighted_histogram(df, "unit", ["key"], 4, ws, InsecureSeededRandom(0))
    got = dict(zip(h.keys.column("key").to_pylist(), h.counts.tolist()))
    assert got == {"a": ws[0] + ws[1] + ws[3], "b": ws[1] + ws[3], "c": ws[3], "d": ws[3]}
    # l0 = 2: unit 2 keeps 2 of its 4 keys, each at weight W_2
    h2 = PolarsEngine().weighted_histogram(df, "unit", ["key"], 2, grid_weights(2, 4096), InsecureSeededRandom(0))
    assert int(h2.counts.sum()) == 4096 + 2 * 2896 + 2 * 2896
    assert h2.stats.pairs_dropped_l0 == 2


@pytest.mark.parametrize("engine", ["polars", "duckdb", "arrow"])
def test_weighted_histogram_is_the_select_pairs_definition_with_the_same_secret(engine, tmp_path):
    """The fast weighted histogram (the count path's integer pair ids, degree weights summed per key) equals the
    definition: select_pairs' choice with the same secret (the first draw of the same source), each kept pair
    weighted W_t for its unit's kept count t (round_key_sums), on data with duplicate rows, units over and
    under the bound and integer keys; from a Parquet file too (the file path)."""
    from sparsedp.engines import draw_bounding_secret, get_engine
    from sparsedp.engines.pairs import round_key_sums

    g = np.random.default_rng(5)
    n = 3000
    df = pl.DataFrame({"unit": g.integers(0, 300, n), "key": g.zipf(1.3, n) % 97})
    path = tmp_path / "rows.parquet"
    df.write_parquet(path)
    for l0 in (1, 3, 8):
        ws = grid_weights(l0, 4096)
        want = round_key_sums(df.unique(), "unit", ["key"], l0, ws, draw_bounding_secret(InsecureSeededRandom(3)))
        want = dict(zip(want["key"].to_list(), want[COUNT].to_list()))
        for data in (df, str(path)):
            h = get_engine(engine).weighted_histogram(data, "unit", ["key"], l0, ws, InsecureSeededRandom(3))
            got = dict(zip(h.keys.column("key").to_pylist(), h.counts.tolist()))
            assert got == want, (engine, l0)
            assert h.stats.rows_in == n and h.stats.keys_out == len(want)


def test_refusals_before_any_charge():
    df = pl.DataFrame({"unit": [1], "key": ["a"]})
    with pytest.raises(InvalidParameterError, match="max_groups_per_unit"):
        sd.release(df, "unit", "key", 1.0, 1e-6, mechanism="weighted-gaussian")
    with pytest.raises(InvalidParameterError, match="insecure_float"):
        sd.release(df, "unit", "key", 1.0, 1e-6, max_groups_per_unit=2, mechanism="weighted-gaussian",
                   insecure_float=True)
    with pytest.raises(InvalidParameterError, match="grid"):
        sd.release(df, "unit", "key", 1.0, 1e-6, max_groups_per_unit=10, mechanism=sd.WeightedGaussian(grid=3))


# ------------------------------------------------------------------ Policy Gaussian (float only)


def test_policy_gaussian_refuses_secure_requests():
    df = pl.DataFrame({"unit": [1], "key": ["a"]})
    with pytest.raises(InvalidParameterError, match="no secure"):
        sd.release(df, "unit", "key", 1.0, 1e-6, max_groups_per_unit=2, mechanism="policy-gaussian")


def test_policy_accountant_reproduces_the_papers_threshold():
    from sparsedp.accounting.set_union import calibrate_policy_gaussian, policy_gaussian_delta

    for l0 in (1, 20):
        c = calibrate_policy_gaussian(1.0, 1e-6, l0)
        sigma, rho = paper_threshold(1.0, 1e-6, l0)
        assert c.sigma == pytest.approx(sigma)
        assert c.tau == pytest.approx(rho, rel=1e-5)
        assert c.delta_achieved <= 1e-6
        assert policy_gaussian_delta(1.0, c.sigma, c.tau * 0.99, l0) > 1e-6
        assert c.gamma == pytest.approx(c.tau + 3 * c.sigma)


def test_l2_descent_policy_moves_by_at_most_one_when_a_unit_is_added():
    """The contractivity the Policy Gaussian rests on: for random inputs and a random insertion point, the
    final weight vectors with and without one unit differ by at most 1 in l2, and the added unit's keys that no
    other unit holds get at most 1/sqrt(m) each."""
    from sparsedp.mechanisms.set_union import l2_descent_weights

    gen = np.random.default_rng(3)
    for _ in range(200):
        n_units, n_keys, gamma = int(gen.integers(2, 12)), 12, float(gen.uniform(1.5, 6))
        units = [gen.choice(n_keys - 4, size=int(gen.integers(1, 5)), replace=False) for _ in range(n_units)]
        new = gen.choice(np.arange(n_keys - 4, n_keys), size=int(gen.integers(0, 4)), replace=False)
        extra = np.concatenate([gen.choice(n_keys - 4, size=int(gen.integers(0, 3)), replace=False), new])
        if extra.size == 0:
            continue
        order = gen.permutation(n_units)
        pos = int(gen.integers(0, n_units + 1))

        def run(with_extra):
            uc = np.concatenate([np.full(k.size, i) for i, k in enumerate(units)]
                                + ([np.full(extra.size, n_units)] if with_extra else []))
            kc = np.concatenate(units + ([extra] if with_extra else []))
            o = list(order)
            if with_extra:
                o.insert(pos, n_units)
            return l2_descent_weights(uc.astype(np.int64), kc.astype(np.int64), n_keys, np.array(o), gamma)

        w0, w1 = run(False), run(True)
        assert np.linalg.norm(w1 - w0) <= 1 + 1e-9
        if new.size:
            assert np.all(w1[new] <= 1 / math.sqrt(new.size) + 1e-12)


# ------------------------------------------------------------------ auto and plan


def test_plan_lists_weighted_gaussian_after_the_count_mechanisms():
    p = sd.plan(1.0, 1e-6, max_groups_per_unit=20)
    names = [m.name for m in p.mechanisms]
    assert "weighted-gaussian" in names
    assert names[0] != "weighted-gaussian"          # plan's best stays what plain auto would use
    i = names.index("weighted-gaussian")
    g = names.index("gshm")
    assert p[i].tau <= p[g].tau                      # count-equivalent margin, comparable with GSHM's
    assert "weighted-gaussian" not in [m.name for m in sd.plan(1.0, 1e-6, max_groups_per_unit=1000).mechanisms]


def test_auto_considers_set_union_only_when_discovering():
    df = _single_key_units({f"k{i}": 30 + i for i in range(5)})
    plain = sd.release(df, "unit", "key", 1.0, 1e-6, max_groups_per_unit=20, mechanism="auto",
                       rng=InsecureSeededRandom(1))
    assert plain.report.mechanism != "weighted-gaussian"
    found = sd.release(df, "unit", "key", 1.0, 1e-6, max_groups_per_unit=20, mechanism=sd.Auto(discover=True),
                       rng=InsecureSeededRandom(1))
    assert found.report.mechanism == "weighted-gaussian"
    assert "objective 'keys'" in found.report.reason and "publishes key weights" in found.report.reason
    assert found.table.columns == ["key", "weight"]


def test_embedded_engines_release_the_same_table():
    """One release, one draw: the Polars path (pairs, weights, the one l0 choice, chunk streams) gives the same
    table from a Polars frame, a pandas frame, an Arrow table (Polars engine) and the DuckDB engine."""
    gen = np.random.default_rng(5)
    n = 3000
    df = pl.DataFrame({"unit": gen.integers(0, 300, n), "key": [f"q{x}" for x in gen.zipf(1.6, n) % 200]})
    kw = dict(max_groups_per_unit=4, mechanism="weighted-gaussian")
    eps = 4.0
    ref = sd.release(df, "unit", "key", eps, 1e-6, rng=InsecureSeededRandom(11), **kw).table
    assert ref.height > 3
    for data, engine in [(df.to_pandas(), None), (df.to_arrow(), None), (df, "duckdb")]:
        got = sd.release(data, "unit", "key", eps, 1e-6, rng=InsecureSeededRandom(11), engine=engine, **kw).table
        if not isinstance(got, pl.DataFrame):  # the table comes back in the input's kind
            got = pl.from_pandas(got) if hasattr(got, "iloc") else pl.from_arrow(got)
        assert got.equals(ref), (type(data).__name__, engine)
