"""Every δ of the GSHM accountants against an independent high-precision (mpmath) evaluation.

The same formulas (seed 001 Eq. 2.3, 5.8, 5.9, 7.1) are evaluated term by term with 60 working
digits (40 would do; the extra digits absorb the cancellation in f for tiny δ) and compared to the
double-precision, vectorised implementation at 1e-9 relative. A quick sample runs by default; the
large sample is marked slow.
"""

from __future__ import annotations

import numpy as np
import pytest
import mpmath as mp

from sparsedp.accounting import gaussian_delta, gshm_delta

DPS = 60


def _f(mu, eps):
    if mu == 0:
        return max(mp.mpf(0), 1 - mp.exp(eps))
    return mp.ncdf(mu / 2 - eps / mu) - mp.exp(eps) * mp.ncdf(-mu / 2 - eps / mu)


def _mp_deltas(eps: float, sigma: float, tau: float, cu: int, mu_o2: float) -> dict[str, mp.mpf]:
    with mp.workdps(DPS):
        e, s, t, m = mp.mpf(eps), mp.mpf(sigma), mp.mpf(tau), mp.mpf(mu_o2)
        b = mp.ncdf(t / s)
        lb = mp.log(b)
        mu = lambda k: mp.sqrt(k / s**2 + k * m)
        t1 = 1 - b**cu
        dg = _f(mu(cu), e)
        exact = t1
        fdp = t1
        for a in range(cu):
            beta = b**a
            k = cu - a
            exact = max(exact, 1 - beta + beta * _f(mu(k), e - a * lb), _f(mu(k), e + a * lb))
            fdp = max(fdp, 1 - beta + beta * _f(mu(k), e))
        return {"exact": exact, "fdp": fdp, "add": min(mp.mpf(1), t1 + dg)}


def _sample(seed: int, n: int, max_cu: int):
    r = np.random.default_rng(seed)
    for _ in range(n):
        cu = int(r.integers(1, max_cu + 1))
        sigma = float(np.exp(r.uniform(np.log(0.3), np.log(60))))
        tau = float(r.uniform(0, 8)) * sigma
        eps = float(r.uniform(0, 5))
        mu_o2 = 0.0 if r.random() < 0.5 else float(10 ** r.uniform(-4, 0))
        yield eps, sigma, tau, cu, mu_o2


def _check(params):
    for eps, sigma, tau, cu, mu_o2 in params:
        ref = _mp_deltas(eps, sigma, tau, cu, mu_o2)
        for analysis in ("exact", "fdp", "add"):
            got = gshm_delta(eps, sigma, tau, cu, analysis, mu_o2)
            r = float(ref[analysis])
            assert got == pytest.approx(r, rel=1e-9, abs=1e-300), (analysis, eps, sigma, tau, cu, mu_o2)


def _check_f(seed: int, n: int):
    r = np.random.default_rng(seed)
    for _ in range(n):
        mu = float(np.exp(r.uniform(np.log(1e-3), np.log(50))))
        eps = float(r.uniform(-10, 30))
        with mp.workdps(DPS):
            ref = float(_f(mp.mpf(mu), mp.mpf(eps)))
        if ref < 1e-290:  # below double range: the double result underflows to 0 (by design)
            assert gaussian_delta(mu, eps) <= 1e-280
            continue
        assert gaussian_delta(mu, eps) == pytest.approx(ref, rel=1e-9), (mu, eps)


def test_quick_sample():
    _check(_sample(2024, 12, 30))


def test_quick_f_sample():
    _check_f(11, 200)


@pytest.mark.slow
def test_large_sample():
    _check(_sample(7, 150, 400))


@pytest.mark.slow
def test_large_f_sample():
    _check_f(12, 5000)
