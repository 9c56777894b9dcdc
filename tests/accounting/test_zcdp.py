"""zCDP → (ε, δ) conversions (Bun–Steinke 2016 Prop. 1.3; Canonne–Kamath–Steinke 2020 Cor. 13).

Golden values: shared/specs/seed-000-csh.md §3.6 (OpenDP's test vector ρ = 1/32). The CKS infimum is
recomputed independently with mpmath at 40 digits (root of the derivative, then the objective).
"""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest

from sparsedp.accounting import (gaussian_delta, gaussian_rho, zcdp_to_dp_delta,
                                 zcdp_to_dp_epsilon)
from sparsedp.errors import InvalidParameterError


def test_opendp_vector_cks():
    # seed 000 §3.6: ρ = 1/32 gives δ(0.6880024554878086) = 1e-3 and δ(0) = 0.15084578456
    rho = 1 / 32
    assert zcdp_to_dp_delta(rho, 0.6880024554878086) == pytest.approx(1e-3, rel=1e-13)
    assert zcdp_to_dp_delta(rho, 0.0) == pytest.approx(0.15084578456, rel=1e-10)
    assert zcdp_to_dp_epsilon(rho, 1e-3) == pytest.approx(0.6880024554878086, rel=1e-14)
    assert zcdp_to_dp_epsilon(rho, 0.1508457845622862) == 0.0


def test_bun_steinke_formula_round_trip():
    # seed 000 Lemma 7.3: ε = ρ + 2√(ρ log 1/δ), inverted δ = exp(−(ε−ρ)²/(4ρ))
    r = np.random.default_rng(73)
    for _ in range(50):
        rho = float(10 ** r.uniform(-5, 1))
        dlt = float(10 ** r.uniform(-12, -1))
        eps = zcdp_to_dp_epsilon(rho, dlt, conversion="bs")
        assert eps == pytest.approx(rho + 2 * math.sqrt(rho * math.log(1 / dlt)), rel=1e-15)
        assert zcdp_to_dp_delta(rho, eps, conversion="bs") == pytest.approx(dlt, rel=1e-9)
    assert zcdp_to_dp_delta(0.5, 0.4, conversion="bs") == 1.0


def _cks_mp(rho: float, eps: float) -> mp.mpf:
    """inf_{α>1} exp((α−1)(αρ−ε))/(α−1)·(1−1/α)^α at 40 digits, via the root of the log-derivative."""
    with mp.workdps(40):
        r, e = mp.mpf(rho), mp.mpf(eps)
        dlog = lambda a: (2 * a - 1) * r - e + mp.log(1 - 1 / a)
        lo, hi = mp.mpf(1) + mp.mpf(10) ** -30, mp.mpf(1)
        while dlog(hi) < 0:
            hi *= 2
        # bisection (monotone derivative) to full precision
        for _ in range(200):
            mid = (lo + hi) / 2
            if dlog(mid) < 0:
                lo = mid
            else:
                hi = mid
        a = (lo + hi) / 2
        val = mp.exp((a - 1) * (a * r - e)) / (a - 1) * (1 - 1 / a) ** a
        return min(val, mp.mpf(1))


def test_cks_matches_mpmath():
    r = np.random.default_rng(2020)
    for _ in range(40):
        rho = float(10 ** r.uniform(-4, 1))
        eps = float(r.uniform(0, 6)) * max(1.0, math.sqrt(rho))
        got = zcdp_to_dp_delta(rho, eps)
        ref = _cks_mp(rho, eps)
        if ref < 1e-300:
            continue
        assert got == pytest.approx(float(ref), rel=1e-10)


def test_cks_is_infimum_and_tighter_than_bs():
    r = np.random.default_rng(13)
    for _ in range(100):
        rho = float(10 ** r.uniform(-4, 1))
        eps = float(r.uniform(0, 10))
        cks = zcdp_to_dp_delta(rho, eps)
        bs = zcdp_to_dp_delta(rho, eps, conversion="bs")
        assert cks <= bs * (1 + 1e-12)
        # any α gives an upper bound no smaller than the infimum
        for alpha in (1.01, 1.5, 2.0, 5.0, 50.0):
            log_val = (alpha - 1) * (alpha * rho - eps) + alpha * math.log1p(-1 / alpha) - math.log(alpha - 1)
            assert cks <= math.exp(min(0.0, log_val)) * (1 + 1e-12)


def test_conversion_never_beats_exact_gaussian():
    # the Gaussian mechanism is exactly 1/(2σ²)-zCDP and f(1/σ, ε) is its tight δ, so every valid
    # conversion of its zCDP guarantee must give δ >= f (Balle–Wang Thm 8)
    for sigma in (0.5, 1.0, 3.0, 10.0):
        rho = gaussian_rho(sigma)
        assert rho == pytest.approx(1 / (2 * sigma**2))
        for eps in (0.0, 0.1, 0.5, 1.0, 3.0):
            exact = gaussian_delta(1 / sigma, eps)
            assert zcdp_to_dp_delta(rho, eps) >= exact * (1 - 1e-12)


def test_monotone_in_eps_and_rho():
    eps = np.linspace(0, 8, 81)
    for rho in (1e-3, 0.05, 0.5, 2.0):
        d = [zcdp_to_dp_delta(rho, e) for e in eps]
        assert all(x >= y for x, y in zip(d, d[1:]))
    rhos = np.geomspace(1e-4, 10, 60)
    d = [zcdp_to_dp_delta(rh, 1.0) for rh in rhos]
    assert all(x <= y for x, y in zip(d, d[1:]))


def test_epsilon_inverse_is_smallest_and_conservative():
    r = np.random.default_rng(99)
    for _ in range(40):
        rho = float(10 ** r.uniform(-5, 2))
        dlt = float(10 ** r.uniform(-14, -1))
        eps = zcdp_to_dp_epsilon(rho, dlt)
        assert zcdp_to_dp_delta(rho, eps) <= dlt
        if eps > 0:
            assert zcdp_to_dp_delta(rho, eps * (1 - 1e-9)) > dlt
        assert eps <= zcdp_to_dp_epsilon(rho, dlt, conversion="bs")


def test_extremes():
    assert zcdp_to_dp_delta(0.0, 1.0) == 0.0
    assert zcdp_to_dp_epsilon(0.0, 1e-6) == 0.0
    assert zcdp_to_dp_delta(1e4, 1.0) == 1.0
    assert zcdp_to_dp_delta(1e-9, 0.0) > 0.0
    assert zcdp_to_dp_delta(1e-3, 50.0) == 0.0


@pytest.mark.parametrize("bad", [
    lambda: zcdp_to_dp_delta(-1, 1.0),
    lambda: zcdp_to_dp_delta(1, -1.0),
    lambda: zcdp_to_dp_delta(1, 1.0, conversion="rdp"),
    lambda: zcdp_to_dp_epsilon(1, 0.0),
    lambda: zcdp_to_dp_epsilon(1, 1.5),
    lambda: gaussian_rho(0.0),
    lambda: gaussian_rho(1.0, sensitivity=-1),
])
def test_invalid(bad):
    with pytest.raises(InvalidParameterError):
        bad()
