"""Mechanisms: each takes a SparseHistogram and a calibration and returns a Release.

``release_histogram`` (:mod:`.release`), ``gaussian_sum``, ``laplace_sum`` (:mod:`.elliptical`), ``plan_mean``
(:mod:`.mean`), ``pure`` and ``pure_histogram`` (:mod:`.pure`) load on first use: a default release needs none of
them (issues 19 and 31, start-up cost).
"""

from __future__ import annotations

import importlib
from typing import Any

from ..core.histogram import Release, SparseHistogram

__all__ = ["Release", "SparseHistogram"]

from .kernel import draw_shared_noise, noise_and_filter  # noqa: E402

__all__ += ["noise_and_filter", "draw_shared_noise"]

#: name -> (module, attribute; None: the module itself), imported on first access
_LAZY = {"release_histogram": (".release", "release_histogram"),
         "gaussian_sum": (".elliptical", "gaussian_sum"), "laplace_sum": (".elliptical", "laplace_sum"),
         "plan_mean": (".mean", "plan_mean"), "pure": (".pure", None), "pure_histogram": (".pure", "pure_histogram")}

__all__ += list(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        mod, attr = _LAZY[name]
        value = importlib.import_module(mod, __name__)
        value = value if attr is None else getattr(value, attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
