"""ALP (thesis Chapter 2): estimator test vectors, the Fig. 2.1/2.2 worked example, exact worst-case
privacy loss of the projection against brute force (spec §8.1), the implementation's cell law, the
§2.9 experiment (Fig. 2.4 numbers), error against Lemma 2.11, space and access-time accounting, the
histogram / threshold / max-projection variants and API checks. Golden values:
shared/specs/seed-004a-thesis-alp.md §3, §6, §8."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest

from sparsedp.errors import InputDataError, InvalidParameterError
from sparsedp.noise import InsecureSeededRandom
from sparsedp.sketches import alp as A


# ---------------------------------------------------------------- Alg. 3 estimator (spec §3, §8.6)
@pytest.mark.parametrize("bits,y", [([1, 1, 1, 0, 1, 0, 0, 1], 4.0), ([1, 0, 0, 0, 1, 0, 0, 1], 1.0),
                                    ([0, 1, 1, 0, 0, 1, 0, 1], 3.0)])
def test_estimator_vectors(bits, y):
    assert A.alp1_estimate(bits) == y
    assert A.alp1_estimate_definition(bits) == y


def test_estimator_scaled_vectors():
    # Alg. 5 scaling ỹ·α/ε: (α=3, ε=1) -> 12.0, (α=1, ε=2) -> 0.5, (α=1, ε=0.5) -> 6.0
    assert A.alp1_estimate([1, 1, 1, 0, 1, 0, 0, 1]) * 3 / 1 == 12.0
    assert A.alp1_estimate([1, 0, 0, 0, 1, 0, 0, 1]) * 1 / 2 == 0.5
    assert A.alp1_estimate([0, 1, 1, 0, 0, 1, 0, 1]) * 1 / 0.5 == 6.0


def test_estimator_edge_cases_and_single_pass_equals_definition():
    assert A.alp1_estimate([1] * 9) == 9
    assert A.alp1_estimate([0] * 9) == 0
    assert A.alp1_estimate([1, 0] * 4) == np.mean([1, 3, 5, 7])
    assert A.alp1_estimate([]) == 0
    gen = np.random.default_rng(1)
    mats = gen.integers(0, 2, (500, 13))
    vec = A._estimate_matrix(mats)
    for row, yv in zip(mats.tolist(), vec.tolist()):
        assert A.alp1_estimate(row) == A.alp1_estimate_definition(row) == pytest.approx(yv)


class FixedHashes:
    """A fixed (adversarial or worked-example) hash: rows[code] = [h_1, …, h_m] (0-based)."""

    def __init__(self, rows: dict, s: int):
        self.table, self.s = rows, s
        self.m = len(next(iter(rows.values())))

    def rows(self, codes):
        return np.array([self.table[int(c)] for c in codes], dtype=np.int64).reshape(len(codes), self.m)

    def __call__(self, code, b):
        return self.table[code][b]

    def size_in_bits(self):
        return 0


def test_figure_2_1_and_2_2_worked_example():
    h = {7: [x - 1 for x in (2, 3, 5, 3, 4, 4, 1, 2)]}
    z = np.zeros((8, 5), dtype=np.uint8)
    A._set_bits(z, FixedHashes(h, 5).rows([7]), np.array([5]), 8)
    ones = {(a + 1, b + 1) for b, a in zip(*np.nonzero(z))}
    assert ones == {(2, 1), (3, 2), (5, 3), (3, 4), (4, 5)}
    noisy_rows = ["00010000", "11000101", "01000000", "01001001", "00110000"]  # Fig. 2.2, rows a = 1..5
    zt = np.array([[int(c) for c in r] for r in noisy_rows], dtype=np.uint8).T  # (m, s) column-major
    alp = A.ALP(variant="projection", epsilon=1.0, epsilon_proj=1.0, alpha=3.0, psi=24.0, u=24.0,
                hashes=FixedHashes(h, 5), bits=zt, p=Fraction(1, 5), scale=3.0, threshold_map=None, params={})
    assert alp.estimate(7) == 12.0  # ỹ = 4 (true y = 5), times α/ε = 3
    assert alp.probes.bits_read == 8 and alp.probes.hash_evals == 8
    assert alp.estimate_many([7]).tolist() == [12.0]


# ---------------------------------------------------------------- exact privacy (spec §8.1)
def brute_force_max_loss(x, xp, rows, eps, alpha, m, s):
    p = float(Fraction(A._prob_up(Fraction(1) / (Fraction(alpha) + 2)), 2 ** 64))

    def law(xv):
        keys = list(xv)
        out = np.zeros(2 ** (s * m))
        outputs = np.array(list(itertools.product((0, 1), repeat=s * m)), dtype=np.uint8).reshape(-1, s, m)
        for rounding in itertools.product((0, 1), repeat=len(keys)):
            pr, z = 1.0, np.zeros((s, m), dtype=np.uint8)
            for key, up in zip(keys, rounding):
                r = eps * xv[key] / alpha
                fr = r - math.floor(r)
                pr *= fr if up else 1 - fr
                y = min(math.floor(r) + up, m)
                for b in range(y):
                    z[rows[key][b], b] = 1
            if pr == 0:
                continue
            agree = (outputs == z[None]).reshape(len(outputs), -1)
            out += pr * np.prod(np.where(agree, 1 - p, p), axis=1)
        return out

    P, Q = law(x), law(xp)
    return float(np.max(np.log(P / Q)))


@pytest.mark.parametrize("s,m", [(1, 2), (2, 2), (2, 3), (4, 2)])
def test_closed_form_loss_equals_brute_force(s, m):
    gen = np.random.default_rng(s * 10 + m)
    for _ in range(6):
        rows = {i: gen.integers(0, s, m).tolist() for i in range(3)}
        alpha, eps = float(gen.choice([0.5, 1.0, 3.0])), float(gen.choice([0.5, 1.0, 2.0]))
        x = {i: float(gen.uniform(0, m * alpha / eps * 1.2)) for i in range(3)}
        xp = dict(x)
        xp[int(gen.integers(0, 3))] += float(gen.uniform(-0.7, 0.7))
        xp = {i: max(v_, 0.0) for i, v_ in xp.items()}
        closed = A.projection_max_privacy_loss(x, xp, rows, epsilon=eps, alpha=alpha, m=m, s=s)
        assert closed == pytest.approx(brute_force_max_loss(x, xp, rows, eps, alpha, m, s), abs=1e-9)


@pytest.mark.parametrize("layout", ["one_row", "distinct", "random"])
def test_privacy_loss_bounded_by_eps_l1(layout):
    gen = np.random.default_rng(hash(layout) % 1000)
    worst = 0.0
    for _ in range(150):
        s, m, d = 6, int(gen.integers(1, 7)), 5
        alpha, eps = float(gen.uniform(0.3, 6)), float(gen.uniform(0.2, 3))
        if layout == "one_row":
            rows = {i: [0] * m for i in range(d)}
        elif layout == "distinct":
            rows = {i: [i] * m for i in range(d)}
        else:
            rows = {i: gen.integers(0, s, m).tolist() for i in range(d)}
        x = {i: float(gen.uniform(0, 1.3 * m * alpha / eps)) * (gen.random() < 0.7) for i in range(d)}
        xp = {i: max(0.0, v_ + float(gen.normal(0, 0.5)) * (gen.random() < 0.5)) for i, v_ in x.items()}
        l1 = sum(abs(x[i] - xp[i]) for i in x)
        for a, b in ((x, xp), (xp, x)):
            loss = A.projection_max_privacy_loss(a, b, rows, epsilon=eps, alpha=alpha, m=m, s=s)
            assert loss <= eps * l1 + 1e-12
            if l1 > 0:
                worst = max(worst, loss / (eps * l1))
    assert worst > 0.3  # the check is not vacuous


def test_projection_realises_the_cell_law():
    """Cell frequencies of alp_projection (RandRound + RR) against the exact law (spec §4.2)."""
    rng = InsecureSeededRandom(3)
    hashes = A.HashFamily(4, 3, rng)
    codes = np.array([11, 22, 33], dtype=np.uint64)
    xhat = {11: 2.3, 22: 0.6, 33: 5.0}  # already ε-scaled, α = 1.5
    alpha = 1.5
    rows = {c: hashes.rows(np.array([c], dtype=np.uint64))[0].tolist() for c in xhat}
    P = A.cell_probabilities(rows, xhat, alpha, 4, 3, 1 / (alpha + 2)).T  # (m, s)
    R = 6000
    acc = np.zeros((4, 3))
    for _ in range(R):
        y = A.rand_round(np.array([xhat[int(c)] for c in codes]) / alpha, rng)
        acc += A.alp_projection(codes, y, hashes, Fraction(1) / (Fraction(alpha) + 2), rng)
    z = (acc / R - P) / np.sqrt(P * (1 - P) / R)
    assert np.abs(z).max() < 4.5


def test_rr_flip_rate_and_rand_round_frequency():
    rng = InsecureSeededRandom(4)
    hashes = A.HashFamily(10, 5000, rng)
    bits = A.alp_projection(np.zeros(0, np.uint64), np.zeros(0, np.int64), hashes, Fraction(1, 5), rng)
    n = bits.size
    assert abs(bits.mean() - 0.2) < 3 * math.sqrt(0.2 * 0.8 / n)
    r = A.rand_round(np.full(200000, 3.3), rng)
    assert set(np.unique(r).tolist()) == {3, 4}
    assert abs((r == 4).mean() - 0.3) < 4 * math.sqrt(0.21 / 200000)
    assert A._prob_up(Fraction(1, 3)) == -((-(2 ** 64)) // 3)


def test_hash_family_vectorised_equals_scalar_and_is_universal():
    rng = InsecureSeededRandom(5)
    h = A.HashFamily(6, 97, rng)
    codes = np.array([0, 1, 2, A.P61 - 1 - 1, 2 ** 60 + 12345, 987654321987], dtype=np.uint64)
    rows = h.rows(codes)
    for i, c in enumerate(codes.tolist()):
        assert rows[i].tolist() == [h(c, b) for b in range(6)]
    # collision frequency of a fixed pair over random hash draws ≈ 1/s
    fam = A.HashFamily(4000, 50, rng)
    r2 = fam.rows(np.array([3, 10 ** 12 + 7], dtype=np.uint64))
    rate = (r2[0] == r2[1]).mean()
    assert abs(rate - 1 / 50) < 4 * math.sqrt(0.02 * 0.98 / 4000)


# ---------------------------------------------------------------- §2.9 experiment, error bounds
def test_experiment_2_9_reproduces_figure_2_4():
    r = A.experiment_2_9(alpha=3.0, collision=0.1, reps=100_000, seed=29)
    assert r["mae"] == pytest.approx(6.4, rel=0.05)        # thesis L1139
    assert r["p90_abs"] == pytest.approx(15.78, rel=0.05)  # thesis L1144
    assert r["mean"] == pytest.approx(2.33, abs=0.15)      # thesis L1152
    assert r["std"] == pytest.approx(10.8, abs=0.3)
    assert r["m"] == 1667


@pytest.mark.slow
def test_experiment_2_9_full_size_and_q001():
    r = A.experiment_2_9(alpha=3.0, collision=0.1, reps=1_000_000, seed=30)
    assert r["mae"] == pytest.approx(6.441, abs=0.05) and r["p90_abs"] == pytest.approx(15.82, abs=0.15)
    r = A.experiment_2_9(alpha=3.0, collision=0.01, reps=1_000_000, seed=31)
    assert r["mae"] == pytest.approx(4.78, abs=0.05) and r["p90_abs"] == pytest.approx(11.5, abs=0.15)


def test_lemma_2_11_bound_values():
    assert A.error_bound(4.0, 0.0) == pytest.approx(12.0)
    assert A.error_bound(3.0, 0.1) == pytest.approx(16.9, abs=0.05)
    assert A.error_bound(0.5, 0.2) == pytest.approx(46.5, abs=0.05)
    assert A.error_bound(3.0, 0.5) == math.inf


def test_real_structure_error_below_simulation_and_bound():
    rng = InsecureSeededRandom(6)
    k, u = 400, 600
    gen = np.random.default_rng(6)
    vals = gen.uniform(0, u, k)
    data = dict(zip(range(k), vals))
    alp = A.ALP.build(data, epsilon=1.0, k=k, u=u, variant="projection", rng=rng)
    assert alp.s == 4000 and alp.m == math.ceil(u * 1.0 / 3.0)
    err = np.abs(alp.estimate_many(range(k)) - vals)
    assert err.mean() <= 6.44 * 1.15            # simulated worst-case collisions at q = k/s = 0.1
    assert err.mean() <= A.error_bound(3.0, 0.1)
    zeros = alp.estimate_many(range(10 ** 6, 10 ** 6 + 500))
    assert zeros.mean() < 2 * A.error_bound(3.0, 0.1)
    assert alp.size_in_bits() == alp.s * alp.m + 2 * 61 * alp.m


def test_scaling_with_epsilon():
    # the per-entry error is O(1/ε): MAE·ε roughly constant (spec §8.7)
    gen = np.random.default_rng(7)
    k = 300
    out = []
    for eps in (0.5, 2.0):
        rng = InsecureSeededRandom(int(eps * 10))
        vals = gen.integers(0, int(200 / eps), k)
        alp = A.ALP.build(dict(zip(range(k), vals.tolist())), epsilon=eps, k=k, u=float(200 / eps),
                          variant="projection", rng=rng)
        out.append(np.abs(alp.estimate_many(range(k)) - vals).mean() * eps)
    assert 0.5 < out[0] / out[1] < 2.0


# ---------------------------------------------------------------- variants
def test_histogram_projection_alg10_privacy_and_estimates():
    rng = InsecureSeededRandom(8)
    k, u, eps = 100, 40, 2.0
    gen = np.random.default_rng(8)
    vals = gen.integers(0, u + 1, k)
    alp = A.ALP.build(dict(zip(range(k), vals.tolist())), epsilon=eps, k=k, u=u, variant="histogram", rng=rng)
    assert alp.m == u and float(alp.p) >= 1 / (math.exp(eps) + 1)
    p = float(alp.p)
    assert math.log((1 - p) / p) <= eps  # one changed cell per histogram neighbour (Lemma 2.30)
    # closed form: x' = x + e_i changes exactly one cell; loss ≤ ε for every layout
    rows = {i: gen.integers(0, 5, 6).tolist() for i in range(3)}
    x = {0: 2.0, 1: 0.0, 2: 4.0}
    for i in range(3):
        xp = dict(x)
        xp[i] += 1
        P = A.cell_probabilities(rows, x, 1.0, 6, 5, p)
        Q = A.cell_probabilities(rows, xp, 1.0, 6, 5, p)
        loss = float(np.maximum(np.log(P / Q), np.log((1 - P) / (1 - Q))).sum())
        assert loss <= eps + 1e-12
    err = np.abs(alp.estimate_many(range(k)) - vals).mean()
    assert err < 8 * math.exp(eps) / (math.exp(eps) - 1) ** 2 * 3  # Lemma 2.31/2.32 scale
    with pytest.raises(InputDataError):
        A.ALP.build({0: 1.5}, epsilon=1.0, k=1, u=5, variant="histogram", rng=rng)


def test_threshold_variant_alg9_integer_data():
    rng = InsecureSeededRandom(9)
    k, eps, delta = 200, 1.0, 1e-6
    gen = np.random.default_rng(9)
    vals = gen.integers(1, 100, k)
    alp = A.ALP.build(dict(zip(range(k), vals.tolist())), epsilon=eps, k=k, delta=delta, rng=rng)
    t = alp.params["threshold"]
    q = math.exp(-eps / 2)
    assert math.exp(-eps / 2 * (t - 1)) / (1 + q) <= delta < math.exp(-eps / 2 * (t - 2)) / (1 + q)
    assert alp.m == math.ceil(t * (eps / 2) / alp.alpha)  # m = ⌈t ε₂/α⌉ with ψ = t (A7)
    assert all(val >= t for val in alp.threshold_map.values())
    big = [i for i in range(k) if vals[i] > t + 30]
    assert all(A.key_code(i) in alp.threshold_map for i in big)
    est = alp.estimate_many(range(k))
    assert np.abs(est - vals).mean() < 15
    single = [alp.estimate(i) for i in range(20)]
    assert np.allclose(single, est[:20])
    assert alp.size_in_bits() == alp.s * alp.m + 122 * alp.m + 125 * len(alp.threshold_map)
    # a key stored in the map costs one look-up and no bit probes
    before = alp.probes.bits_read
    alp.estimate(big[0])
    assert alp.probes.bits_read == before


def test_threshold_variant_alg6_pure():
    rng = InsecureSeededRandom(10)
    d, k = 5000, 50
    data = {i * 7: 200 + i for i in range(k)}
    alp = A.ALP.build(data, epsilon=2.0, k=k, d=d, variant="threshold", rng=rng)
    t = alp.params["threshold"]
    assert t == pytest.approx(2 * math.log(d) / 1.0)
    assert all(v_ >= t for v_ in alp.threshold_map.values())
    assert sum(A.key_code(i * 7) in alp.threshold_map for i in range(k)) >= k - 2


def test_max_projection_sensitivity_and_access():
    gen = np.random.default_rng(11)
    for _ in range(300):
        s = int(gen.integers(1, 6))
        b = gen.integers(0, s, 6)
        x = gen.uniform(0, 5, 6) * (gen.random(6) < 0.6)
        xp = np.maximum(0, x + gen.normal(0, 1, 6) * (gen.random(6) < 0.5))
        y, yp = A.bucket_max(b, x, s), A.bucket_max(b, xp, s)
        assert np.abs(y - yp).sum() <= np.abs(x - xp).sum() + 1e-12  # Lemma 2.33
    rng = InsecureSeededRandom(12)
    mp = A.MaxProjection({i: 50 for i in range(100)}, epsilon=1.0, n=5000, size_factor=2.0, u=100, rng=rng)
    assert mp.s == 10000
    est = np.array([mp.estimate(i) for i in range(100)])
    assert np.abs(est - 50).mean() < 3


def test_api_rejections():
    rng = InsecureSeededRandom(13)
    with pytest.raises(InvalidParameterError):
        A.ALP.build({0: 1}, epsilon=1.0, k=10, u=5, s=20, variant="projection", rng=rng)  # s must be > 2k
    with pytest.raises(InputDataError):
        A.ALP.build({i: 1 for i in range(5)}, epsilon=1.0, k=4, u=5, variant="projection", rng=rng)
    with pytest.raises(InputDataError):
        A.ALP.build({0: -1.0}, epsilon=1.0, k=4, u=5, variant="projection", rng=rng)
    with pytest.raises(InvalidParameterError):
        A.ALP.build({0: 1.5}, epsilon=1.0, k=4, delta=1e-6, rng=rng)  # real data need insecure_float
    with pytest.raises(InvalidParameterError):
        A.ALP.build({0: 1}, epsilon=1.0, k=4, variant="projection", rng=rng)  # needs u


def test_determinism_under_a_fixed_seed_and_string_keys():
    data = {"apple": 30, "pear": 5, ("x", 1): 12}
    a = A.ALP.build(data, epsilon=1.0, k=3, u=40, variant="projection", rng=InsecureSeededRandom(14))
    b = A.ALP.build(data, epsilon=1.0, k=3, u=40, variant="projection", rng=InsecureSeededRandom(14))
    assert np.array_equal(a.bit_matrix(), b.bit_matrix()) and np.array_equal(a.hashes.a, b.hashes.a)
    assert a.estimate("apple") == b.estimate("apple")
    assert 0.0 <= a.estimate("missing") <= 40.0


def test_dense_laplace_baseline():
    rng = InsecureSeededRandom(15)
    out = A.laplace_mechanism({3: 10, 7: 4}, 10, epsilon=1.0, rng=rng)
    assert out.shape == (10,) and out.dtype.kind == "i"
    assert abs(out[3] - 10) < 30


def multiplicative_constant(alpha, k_over_s=0.0):
    """Lemma 2.29's bound on E[max(x̃/x, x/x̃)]: (2−4p)/((4p−4p²)^{1/4} − (4p−4p²)^{3/4}), p = 1/(γ+2)."""
    g = (alpha + 2) / (1 + alpha * k_over_s) - 2
    p = 1 / (g + 2)
    w = 4 * p - 4 * p * p
    return (2 - 4 * p) / (w ** 0.25 - w ** 0.75)


def test_log_variant_constants_and_multiplicative_error():
    # spec §3 (§2.6): 1/ln B ≈ 26.89/ε at α ≈ 3.07 (k/s = 0); the constant is minimised (≈ 4.83) near α = 20.26
    assert 1 / math.log(A.log_base(3.07, 0.0, 1.0)) == pytest.approx(26.89, abs=0.01)
    assert 1 / math.log(A.log_base(3.07, 0.0, 2.0)) == pytest.approx(26.89 / 2, abs=0.01)
    # (the spec writes "≈ 4.83 (= 1 + 2√2)"; 1 + 2√2 = 3.83, the value 4.83 is 2 + 2√2)
    assert multiplicative_constant(20.26) == pytest.approx(4.83, abs=0.005)
    assert min(multiplicative_constant(a / 100) for a in range(500, 4000)) == pytest.approx(2 + 2 * math.sqrt(2))
    rng = InsecureSeededRandom(16)
    gen = np.random.default_rng(16)
    k, u = 400, 20000.0
    vals = np.exp(gen.uniform(math.log(100), math.log(u), k))
    alp = A.ALP.build(dict(zip(range(k), vals)), epsilon=1.0, k=k, u=u, variant="log", rng=rng)
    base = alp.params["base"]
    assert base == pytest.approx(A.log_base(3.0, 0.1, 1.0))
    psi_log = math.log(u * math.log(base)) / math.log(base)
    assert alp.m == math.ceil(psi_log * 1.0 / 3.0)
    est = alp.estimate_many(range(k))
    ratio = np.maximum(est / vals, vals / est)
    assert ratio.mean() <= multiplicative_constant(3.0, 0.1)
    assert alp.estimate(10 ** 12) == pytest.approx(1 / math.log(base), rel=0.5)  # zero entries decode near 1/ln B


def test_real_valued_threshold_and_max_projection_need_insecure_float():
    rng = InsecureSeededRandom(17)
    data = {i: 100.0 + 0.5 * i for i in range(50)}
    with pytest.raises(InvalidParameterError):
        A.MaxProjection(data, epsilon=1.0, s=500, rng=rng)
    alp = A.ALP.build(data, epsilon=1.0, k=50, delta=1e-6, rng=rng, insecure_float=True)
    t = alp.params["threshold"]
    assert t == pytest.approx(math.log(1e6) / 0.5 + 2)  # Alg. 9 line 3 with ε₁ = ε/2
    assert len(alp.threshold_map) >= 45 and all(val >= t for val in alp.threshold_map.values())
    mp = A.MaxProjection(data, epsilon=1.0, s=5000, rng=rng, insecure_float=True)
    assert np.abs(np.array([mp.estimate(i) for i in range(50)]) - np.array(list(data.values()))).mean() < 5
