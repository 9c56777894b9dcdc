"""GeoSample / FastSample (seed 003 Thms 4.5, 4.6; spec §3 P3, §5.3, §5.4, tests T1–T7)."""

from __future__ import annotations

import math
from collections import Counter
from fractions import Fraction as F

import pytest

from pure_helpers import FixedRandom, counting_max_ratio
from sparsedp.audit.stats import pooled_chisquare
from sparsedp.errors import InvalidParameterError
from sparsedp.mechanisms.pure.exact import exp_lower, exp_upper
from sparsedp.noise.clamped_geometric import (FastSample, GeoSample, ceil_log2, counting_sampler, epsilon_params,
                                              fast_sample_t_min, fast_sample_t_ref)


def test_T1_realised_epsilon_uses_log2():
    table = {1: (1, F(3, 2), 0.810930), 2: (2, F(5, 4), 0.446287), 3: (3, F(9, 8), 0.235566),
             4: (3, F(9, 8), 0.235566), 5: (4, F(17, 16), 0.121249), 10: (5, F(33, 32), 0.061543),
             100: (8, F(257, 256), 0.007797), 1000: (11, F(2049, 2048), 0.000976)}
    for k, (K, ratio, et) in table.items():
        p = epsilon_params(F(1, k))
        assert (p.K, p.exp_half_eps_tilde) == (K, ratio)
        assert p.epsilon_tilde == pytest.approx(et, abs=2e-6)
    lo = min(epsilon_params(F(1, k)).epsilon_tilde * k for k in range(1, 5001))
    assert 4 / 9 < lo <= 1 and lo == pytest.approx(0.5001, abs=2e-4)
    # E6: with natural log in the exponent the claimed range (4/9 eps, eps] fails, e.g. eps = 1/10
    K_ln = math.ceil(math.log(20))
    assert 2 * math.log1p(2.0 ** -K_ln) > 0.1  # the "realised" epsilon would exceed the requested one


def test_epsilon_rounding_and_validation():
    assert epsilon_params(0.3).k == 4 and epsilon_params("0.5").k == 2 and epsilon_params(1).k == 1
    for bad in (0, -1, 1.5, float("nan")):
        with pytest.raises((InvalidParameterError, ValueError)):
            epsilon_params(bad)
    assert [ceil_log2(x) for x in (1, 2, 3, 4, 5, F(1, 2), F(1, 3), F(3, 2))] == [0, 1, 2, 2, 3, -1, -1, 1]


def test_T2_cdf_tables():
    g = GeoSample(3, 1)
    assert g.d == 45
    assert [[g.cdf(c, z) for z in range(4)] for c in range(4)] == [
        [27, 33, 37, 45], [18, 27, 33, 45], [12, 18, 27, 45], [8, 12, 18, 45]]
    g = GeoSample(4, F(1, 2))
    assert g.d == 1125
    assert [[g.cdf(c, z) for z in range(5)] for c in range(5)] == [
        [625, 725, 805, 869, 1125], [500, 625, 725, 805, 1125], [400, 500, 625, 725, 1125],
        [320, 400, 500, 625, 1125], [256, 320, 400, 500, 1125]]
    assert GeoSample(3, 1).pmf(0) == [F(27, 45), F(6, 45), F(4, 45), F(8, 45)]


@pytest.mark.parametrize("n,eps", [(3, 1), (4, F(1, 2))])
def test_exhaustive_randomness(n, eps):
    """Every u in [1..d] through sample(): the multiset of outputs is d·pmf (spec §8)."""
    g = GeoSample(n, eps)
    for c in range(n + 1):
        got = Counter(g.sample(c, FixedRandom([u - 1])) for u in range(1, g.d + 1))
        assert [got[z] for z in range(n + 1)] == [p * g.d for p in g.pmf(c)]


@pytest.mark.parametrize("k", [1, 2, 3, 5, 10])
def test_T3_T4_closed_form_and_exact_privacy(k):
    for n in range(1, 7):
        g = GeoSample(n, F(1, k))
        p = g.params
        alpha = F(p.a, p.b)
        for c in range(n + 1):
            want = [(1 - alpha) / (1 + alpha) * alpha ** abs(z - c) for z in range(n + 1)]
            want[0] = alpha ** c / (1 + alpha)
            want[n] = alpha ** (n - c) / (1 + alpha)
            if n == 0:
                continue
            assert g.pmf(c) == want
        assert counting_max_ratio(g) == g.ratio_bound == F(p.b, p.a)  # T4: exactly e^{eps~/2}


def test_T6_fast_sample_truncation_points_and_cdf():
    cases = {(20, 1, F(1, 2)): (13, 35), (20, 1, F(1, 10)): (18, 49), (100, 1, F(1, 10)): (22, 58),
             (1000, F(1, 10), F(1, 1000)): (591, 1214), (10 ** 6, F(1, 10), F(1, 10 ** 6)): (1040, 2114)}
    for (n, e, g), (tmin, tref) in cases.items():
        assert (fast_sample_t_min(n, e, g), fast_sample_t_ref(n, e, g)) == (tmin, tref)
    f = FastSample(20, 1, F(1, 2), t=13)
    assert (f.d_prime, f.d) == (7971615, 334807830)
    assert [f.cdf(0, z) for z in range(4)] == [108758028, 139050165, 161902128, 179793975]
    assert f.cdf(0, 19) == 326836215
    assert [f.cdf(10, z) for z in range(8, 13)] == [116041515, 146333652, 188474178, 218766315, 241618278]
    with pytest.raises(InvalidParameterError):
        FastSample(20, 1, F(1, 2), t=12)  # below (FS-t): refused


@pytest.mark.parametrize("n", [5, 8, 20])
@pytest.mark.parametrize("k", [1, 2, 4])
@pytest.mark.parametrize("g", [2, 10, 1000])
@pytest.mark.parametrize("t", ["min", "ref"])
def test_T6_fast_sample_is_private(n, k, g, t):
    f = FastSample(n, F(1, k), F(1, g), t=t)
    for c in range(n + 1):
        pm = f.pmf(c)
        assert sum(pm) == 1 and min(pm) > 0
    assert counting_max_ratio(f) <= exp_lower(F(1, 2 * k))


class _CappedFastSample(FastSample):
    """The reference code's bug (E2): t = min(n, formula). Test-only."""

    def __init__(self, n, eps, gamma):
        t = min(n, fast_sample_t_ref(n, eps, gamma))
        self.n, self.params, self.g, self.t = n, epsilon_params(eps), int(1 / gamma), t
        a, b = self.params.a, self.params.b
        self.d_prime = (2 * a + 1) * b ** t
        self._a_t1 = a ** (t + 1)
        self.d = (n + 1) * self.g * self.d_prime


def test_T7_regression_capped_fast_sample_is_not_private():
    bad = _CappedFastSample(3, 1, F(1, 10))
    r = counting_max_ratio(bad)
    assert float(r) == pytest.approx(2.885, abs=1e-3)
    assert r > exp_upper(F(1, 2))  # > e^{1/2}: violates the claimed (eps/2)-DP
    bad = _CappedFastSample(60, F(1, 4), F(1, 100))
    r = counting_max_ratio(bad)
    assert float(r) == pytest.approx(1.2616, abs=1e-4) and r > exp_upper(F(1, 8))
    # corrected: the factory never caps; here t >= n, so it falls back to GeoSample
    for n, e, g in [(3, 1, F(1, 10)), (60, F(1, 4), F(1, 100))]:
        s = counting_sampler(n, e, g)
        assert isinstance(s, GeoSample)
        assert counting_max_ratio(s) <= exp_lower(e / 2)
    s = counting_sampler(100, 1, F(1, 10))
    assert isinstance(s, FastSample) and s.t == 22


def test_T5_accuracy_holds_for_all_counts():
    for s in (GeoSample(12, 1), GeoSample(10, F(1, 3)), FastSample(40, 1, F(1, 100))):
        for beta in (F(1, 2), F(1, 5), F(1, 50)):
            A = s.accuracy(beta)
            for c in range(s.n + 1):
                pm = s.pmf(c)
                assert sum(p for z, p in enumerate(pm) if abs(z - c) > A) <= beta
            # Thm 4.4/4.6 closed form is never tighter than the exact bound
            et = s.params.epsilon_tilde
            b_eff = beta if isinstance(s, GeoSample) else beta - s.gamma
            assert A <= math.ceil(2 / et * math.log(1 / b_eff))


def test_T5_exact_accuracy_is_least():
    """§7.5: the least A for the unclamped geometric: A−1 must violate the bound (large n, no clamping)."""
    g = GeoSample(200, 1)
    c = 100
    for beta in (F(1, 3), F(1, 20), F(1, 1000)):
        A = g.accuracy(beta)
        pm = g.pmf(c)
        tail = lambda a: sum(p for z, p in enumerate(pm) if abs(z - c) > a)  # noqa: E731
        assert tail(A) <= beta < tail(A - 1)


def test_binary_search_depth_is_data_independent():
    class Count(GeoSample):
        calls = 0

        def cdf(self, c, z):
            Count.calls += 1
            return super().cdf(c, z)

    for n in (1, 2, 3, 7, 8, 20):
        g = Count(n, 1)
        for c in (0, n):
            for u in (1, g.d // 2, g.d):
                Count.calls = 0
                g.sample_u(c, u)
                assert Count.calls == math.ceil(math.log2(n + 1))


@pytest.mark.parametrize("sampler", [GeoSample(6, F(1, 2)), FastSample(30, 1, F(1, 20))], ids=["geo", "fast"])
def test_T28_chi_square_sampler_matches_pmf(sampler, rng):
    c = sampler.n // 3
    N = 4000
    draws = Counter(sampler.sample(c, rng) for _ in range(N))
    pm = sampler.pmf(c)
    obs = [draws[z] for z in range(sampler.n + 1)]
    assert pooled_chisquare(obs, [float(p) for p in pm], min_expected=10) > 1e-4
