"""Calibration time (issue 19): the discrete accountants memoise ``log Z(s)``, the upper tail sums and
``ω(v)`` (pure functions of their float arguments) and call the scalar tail without the array layer. The
calibrations must not change by a bit, whatever was computed before in the process: each is compared with
the same calibration computed with every cache emptied first, in a shuffled order of parameters."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from sparsedp.accounting import discrete as D
from sparsedp.accounting import discrete_histograms as H
from sparsedp.errors import InvalidParameterError

_CACHED = (D._log_normaliser, D._log_upper_sum, H._omega)


def _clear():
    for f in _CACHED:
        f.cache_clear()


def _cold(fn, *args):
    _clear()
    return fn(*args)


def test_calibrations_do_not_depend_on_what_the_caches_hold():
    params = [(e, d, l0) for e in (0.1, 0.5, 1.0, 3.0) for d in (1e-5, 1e-8) for l0 in (1, 2, 7, 30, 100)]
    cold = {p: (_cold(H.calibrate_gshm_discrete, *p), _cold(H.calibrate_laplace_discrete, *p)) for p in params}
    order = params * 2
    random.Random(0).shuffle(order)
    _clear()
    for p in order:  # warm caches, shuffled: every neighbour leaves different entries behind
        assert H.calibrate_gshm_discrete(*p) == cold[p][0], p
        assert H.calibrate_laplace_discrete(*p) == cold[p][1], p
    assert D._log_upper_sum.cache_info().hits > 0  # the caches were in use


def test_cached_functions_equal_the_uncached_ones():
    g = np.random.default_rng(3)
    for _ in range(400):
        s = float(g.choice([1.0, 4.0, 37.25, 1e3, 9.5e6])) * float(g.uniform(0.5, 2.0))
        t = int(g.integers(1, 3000))
        assert D._log_upper_sum(t, s) == D._log_upper_sum.__wrapped__(t, s)
        assert D._log_normaliser(s) == D._log_normaliser.__wrapped__(s)
        assert H._omega(s / 2.0) == H._omega.__wrapped__(s / 2.0)
    for s in (0.3, 0.7):  # the direct normaliser series (s < 1)
        assert D._log_normaliser(s) == D._log_normaliser.__wrapped__(s)


def test_scalar_tail_equals_the_public_one_bit_for_bit():
    for s in (1.0, 2.5, 100.0, 12345.678, 5e6, 9e6):
        for t in (-1e9, -3.5, -1.0, 0.0, 0.2, 1.0, 7.0, 7.5, math.sqrt(s), 10 * math.sqrt(s), 1e7, math.inf,
                  -math.inf):
            assert D._dgauss_logsf_float(t, s) == D.dgauss_logsf(t, s), (t, s)
    for bad in (0.0, -1.0, math.inf):
        with pytest.raises(InvalidParameterError):
            D._dgauss_logsf_float(1.0, bad)
