"""Start-up cost (issue 19): the discrete binomial tail used by the Laplace accountant equals
``scipy.stats.binom.logsf`` bit for bit without importing ``scipy.stats``; the accountants' Brent solver
(:mod:`sparsedp.accounting._brentq`) equals ``scipy.optimize.brentq`` bit for bit without importing
``scipy.optimize``; and a release of a small frame in a fresh process imports none of ``scipy.stats``,
``scipy.optimize``, ``scipy.linalg``, pandas or the mechanism modules it does not use; and (issue 31) a first
release whose calibrations are in the calibration cache imports none of the modules it does not run (the ledger,
``pyarrow.compute``, the calibrators …). (``numpy.testing`` is imported by ``scipy.special`` itself, which the
accountants need: not tested here.)"""

from __future__ import annotations

import math
import os
import subprocess
import sys

import numpy as np
import pytest

from sparsedp.accounting import _brentq
from sparsedp.accounting.discrete_histograms import binom_logsf
from sparsedp.accounting.gaussian import gaussian_sigma
from sparsedp.accounting.zcdp import zcdp_to_dp_delta, zcdp_to_dp_epsilon

#: made lazy for the default release (issue 19): scipy.stats and pandas in session 2, scipy.optimize (hence
#: scipy.linalg, scipy.sparse) and the mechanism modules a default release does not use in session 4
_NOT_ON_THE_RELEASE_PATH = ("scipy.stats", "scipy.optimize", "scipy.linalg", "scipy.sparse", "pandas",
                            "sparsedp.mechanisms.pure", "sparsedp.mechanisms.misra_gries",
                            "sparsedp.mechanisms.public_keys", "sparsedp.mechanisms.set_union",
                            "sparsedp.mechanisms.two_stage", "sparsedp.mechanisms.elliptical")


def test_binom_logsf_equals_scipy_stats_bit_for_bit():
    from scipy import stats

    g = np.random.default_rng(0)
    for n in [*range(0, 40), 100, 1000, 200_000]:
        for p in [0.0, 1.0, 0.5, 0.5000001, 1e-3, 0.999, *g.uniform(0, 1, 6)]:
            k = np.arange(-1, n + 2, max(1, n // 60)).astype(float)
            a = stats.binom.logsf(k, float(n), p)
            b = binom_logsf(k, float(n), p)
            assert np.array_equal(a, b), (n, p)
    # broadcasting as the accountant calls it (vector j, scalar p)
    j = np.arange(0, 30, dtype=float)
    assert np.array_equal(binom_logsf(j - 3, j, 0.7), stats.binom.logsf(j - 3, j, 0.7))


def test_one_coordinate_binomial_tail_is_scipys_without_scipy_special(monkeypatch):
    """At l0 = 1 every tail the Laplace accountant needs is ``I_p(1, 1)``: ``p`` itself, which is scipy's value bit
    for bit, so :func:`binom_logsf` returns it without reading ``scipy.special`` (a first release at l0 = 1 whose
    calibration is cached then never imports scipy)."""
    from scipy import special, stats

    from sparsedp.accounting import discrete_histograms

    p = np.random.default_rng(1).uniform(0, 1, 100_000)
    assert np.array_equal(special.betainc(1.0, 1.0, p), p)
    k = np.array([-1.0, 0.0, 1.0, 2.0])  # below, the one term inside, at and above n = 1

    class NoSpecial:
        def __getattr__(self, name):
            raise AssertionError(f"scipy.special.{name} read")

    monkeypatch.setattr(discrete_histograms, "special", NoSpecial())
    for q in [0.0, 1.0, 0.5, *p[:2000]]:
        assert np.array_equal(binom_logsf(k, 1.0, float(q)), stats.binom.logsf(k, 1.0, q))
    monkeypatch.undo()
    assert np.array_equal(binom_logsf(k, 2.0, 0.3), stats.binom.logsf(k, 2.0, 0.3))  # other terms: scipy's betainc


def test_small_release_imports_only_what_it_uses():
    code = ("import sys, polars as pl, sparsedp as sd\n"
            "df = pl.DataFrame({'u': list(range(300)) * 2, 'k': [f'k{i % 7}' for i in range(600)]})\n"
            "sd.release(df, 'u', 'k', epsilon=1.0, delta=1e-6, max_groups_per_unit=3)\n"
            "sd.release(df, 'u', 'k', epsilon=1.0, delta=1e-6, max_groups_per_unit=3, mechanism='laplace')\n"
            f"print(sorted(m for m in {_NOT_ON_THE_RELEASE_PATH!r} if m in sys.modules))\n")
    env = dict(os.environ)
    src = os.path.join(os.path.dirname(__file__), "..", "..", "src")
    env["PYTHONPATH"] = os.path.abspath(src) + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]"


#: issue 31: what a default release of a Polars frame does not import once its calibrations are in the calibration
#: cache (a fresh process's first release): the ledger (sqlite3), ``pyarrow.compute``, scipy, the calibrators, the
#: composition and conversion accountants, the SUM/MEAN, top-k, quantile, set-union and other-row modules, the
#: automatic bound's wrapper, the pair primitives
_NOT_WITH_A_WARM_CACHE = ("sqlite3", "pyarrow.compute", "scipy", "pandas", "sparsedp.ledger",
                          "sparsedp.accounting.calibrate", "sparsedp.accounting.gshm", "sparsedp.accounting.csh",
                          "sparsedp.accounting.csh_exact", "sparsedp.accounting.laplace",
                          "sparsedp.accounting.gaussian", "sparsedp.accounting.correlated",
                          "sparsedp.accounting.zcdp", "sparsedp.accounting.composition", "sparsedp.accounting.pld",
                          "sparsedp.accounting.conversions", "sparsedp.accounting.aggregates",
                          "sparsedp.accounting.csh_aggregates", "sparsedp.accounting.column_shape",
                          "sparsedp.accounting.set_union", "sparsedp.accounting.quantiles",
                          "sparsedp.accounting.quantile_rank", "sparsedp.accounting.other_total",
                          "sparsedp.accounting.public_keys", "sparsedp.mechanisms.aggregate_noise",
                          "sparsedp.mechanisms.quantiles", "sparsedp.mechanisms.release", "sparsedp.mechanisms.csh",
                          "sparsedp.other_row", "sparsedp.bound_choice", "sparsedp.auto_keys",
                          "sparsedp.engines.pairs", "sparsedp.engines.quantile_cells", *_NOT_ON_THE_RELEASE_PATH)
#: sparsedp's own modules such a release imports (64 when this was written, 98 before issue 31's work; 68 once the
#: pair ids' sort in runs added ``engines.sorted_runs`` and ``engines.threads`` to the release path, 69 with
#: ``engines.buffers``): a new top-level import that raises it belongs in a module that needs it, or behind
#: core.lazy.lazy_module
_MAX_OWN_MODULES = 69


@pytest.mark.parametrize("l0", [3, 1])
def test_first_release_with_a_warm_cache_imports_only_what_it_uses(tmp_path, l0):
    """Issue 31's measure: ``import sparsedp as sd; sd.release``, then the first release of a 10-row Polars frame, in
    a fresh process whose calibrations are in the calibration cache (written by an earlier process); at l0 = 3 (the
    discrete GSHM) and at l0 = 1 (the discrete Laplace, whose charge evaluates its profile: see
    ``test_one_coordinate_binomial_tail_is_scipys_without_scipy_special``)."""
    code = ("import sys, sparsedp as sd\nsd.release\nimport polars as pl\n"
            "df = pl.DataFrame({'user_id': list(range(10)), 'url': ['a', 'b'] * 5})\n"
            f"sd.release(df, 'user_id', 'url', epsilon=1.0, delta=1e-6, max_groups_per_unit={l0})\n"
            f"print(sorted(m for m in {_NOT_WITH_A_WARM_CACHE!r} if m in sys.modules))\n"
            "print(sum(m == 'sparsedp' or m.startswith('sparsedp.') for m in sys.modules))\n")
    env = dict(os.environ, SPARSEDP_CACHE_DIR=str(tmp_path))
    src = os.path.join(os.path.dirname(__file__), "..", "..", "src")
    env["PYTHONPATH"] = os.path.abspath(src) + os.pathsep + env.get("PYTHONPATH", "")
    subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)  # cache
    assert os.listdir(tmp_path), "the first process wrote no calibration to the cache"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    imported, own = out.stdout.strip().splitlines()[-2:]
    assert imported == "[]"
    assert int(own) <= _MAX_OWN_MODULES, f"a first release imports {own} of sparsedp's modules"


def test_the_compiled_solver_is_in_use_here():
    """Otherwise the tests below would compare scipy.optimize.brentq with itself."""
    assert _brentq._load_compiled() is not None


def _with_public_solver(monkeypatch, fn):
    monkeypatch.setattr(_brentq, "_solver", _brentq._public)
    try:
        return fn()
    finally:
        monkeypatch.setattr(_brentq, "_solver", None)


def test_brentq_equals_scipy_optimize_bit_for_bit():
    from scipy import optimize

    funcs = [lambda x: x ** 3 - 2.0, lambda x: math.exp(x) - 3.7, lambda x: math.atan(x - 0.3) * 1e-12,
             lambda x: math.log1p(abs(x)) - 0.5 + 1e-9 * x ** 5, lambda x: x - 1e-300]
    for f in funcs:
        for a, b in [(-1.0, 4.0), (0.0, 2.0), (-0.5, 100.0)]:
            if f(a) * f(b) >= 0:
                continue
            for xtol, rtol, maxiter in [(1e-15, 4 * np.finfo(float).eps, 500), (1e-14, 8 * 2.2e-16, 300),
                                        (1e-6, 1e-6, 100)]:
                want = optimize.brentq(f, a, b, xtol=xtol, rtol=rtol, maxiter=maxiter)
                got = _brentq.brentq(f, a, b, xtol=xtol, rtol=rtol, maxiter=maxiter)
                assert type(got) is float and got == want, (a, b, xtol)


def test_brentq_errors_as_scipy():
    with pytest.raises(ValueError, match="different signs"):
        _brentq.brentq(lambda x: x * x + 1.0, -1.0, 1.0, xtol=1e-12, rtol=1e-12, maxiter=100)
    with pytest.raises(ValueError, match="NaN"):
        _brentq.brentq(lambda x: x if x < 0.2 else math.nan, -1.0, 1.0, xtol=1e-12, rtol=1e-12, maxiter=100)
    with pytest.raises(RuntimeError):
        _brentq.brentq(lambda x: x ** 3 - 2.0, 0.0, 4.0, xtol=1e-15, rtol=1e-15, maxiter=2)
    with pytest.raises(ValueError, match="rtol too small"):
        _brentq.brentq(lambda x: x, -1.0, 1.0, xtol=1e-12, rtol=1e-17, maxiter=100)


def test_accountants_roots_equal_with_scipy_optimize(monkeypatch):
    """gaussian_sigma and the zCDP conversions give the same doubles through scipy.optimize.brentq."""
    g = np.random.default_rng(1)
    grid = [(e, d, s) for e in (0.0, 0.01, 0.1, 0.5, 1.0, 2.0, 8.0, 30.0) for d in (1e-3, 1e-6, 1e-10, 1e-30)
            for s in (1.0, math.sqrt(10.0))]
    grid += [(float(g.uniform(0.01, 10)), float(10 ** -g.uniform(2, 20)), float(g.uniform(0.5, 20)))
             for _ in range(40)]
    ours = [gaussian_sigma(e, d, s) for e, d, s in grid]
    ref = _with_public_solver(monkeypatch, lambda: [gaussian_sigma(e, d, s) for e, d, s in grid])
    assert ours == ref
    zgrid = [(r, x) for r in (1e-4, 0.01, 0.5, 3.0) for x in (0.1, 1.0, 5.0)]
    ours = [(zcdp_to_dp_delta(r, x), zcdp_to_dp_epsilon(r, 10 ** -x)) for r, x in zgrid]
    ref = _with_public_solver(monkeypatch, lambda: [(zcdp_to_dp_delta(r, x), zcdp_to_dp_epsilon(r, 10 ** -x))
                                                   for r, x in zgrid])
    assert ours == ref


def test_brentq_falls_back_to_scipy_optimize(monkeypatch):
    """A scipy whose compiled solver cannot be loaded (or fails the self-check) is served by its public
    function, with the same results."""
    want = gaussian_sigma(1.0, 1e-6, 2.0)
    monkeypatch.setattr(_brentq, "_solver", None)
    monkeypatch.setattr(_brentq.os.path, "isfile", lambda p: False)
    monkeypatch.delitem(sys.modules, "scipy.optimize._zeros", raising=False)
    assert _brentq._load_compiled() is None
    assert gaussian_sigma(1.0, 1e-6, 2.0) == want
    assert _brentq._solver is _brentq._public
    monkeypatch.setattr(_brentq, "_solver", None)
