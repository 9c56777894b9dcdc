"""Fixtures shared by the fuzz tests."""

from __future__ import annotations

import functools
import sys

import pytest

import sparsedp.accounting as acc


@pytest.fixture(scope="module")
def cached_calibration():
    """Calibration is pure and deterministic; memoise it so the fuzz budget goes to input handling."""
    real = acc.calibrate

    @functools.lru_cache(maxsize=None)
    def cached(mechanism, items):
        return real(mechanism, **dict(items))

    def calibrate(mechanism, **kw):
        try:
            return cached(mechanism, tuple(sorted(kw.items())))
        except TypeError:  # unhashable argument: let the real function judge it
            return real(mechanism, **kw)

    mp = pytest.MonkeyPatch()
    mp.setattr(acc, "calibrate", calibrate)
    mp.setattr(sys.modules["sparsedp.accounting.calibrate"], "calibrate", calibrate)  # used by compare()
    yield
    mp.undo()
