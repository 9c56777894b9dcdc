"""sparsedp: differentially private statistics over huge or unbounded key domains.

>>> import sparsedp as sd
>>> res = sd.release(df, privacy_unit="user_id", by="url", epsilon=1.0, delta=1e-6,
...                  max_groups_per_unit=10)                                     # doctest: +SKIP

The public API (``dir(sparsedp)`` lists it): :func:`release`, :func:`plan`, :class:`Result` / :class:`Report` /
:class:`Curator`, the mechanisms (:class:`GSHM`, :class:`Laplace`, :class:`TopKCSH`, :class:`PureBlanket`, :class:`PureSparse`,
:class:`Compact`, :class:`Basic`, :class:`Stability`, :class:`MisraGries`), the aggregates (:class:`Count`, :class:`Sum`, :class:`Mean`) and
:class:`Ledger`. The top-level import stays light: everything loads on first use.
"""

from __future__ import annotations

import gc
import importlib
from typing import Any

__version__ = "0.1.0"

_SUBMODULES = {"accounting", "noise", "mechanisms", "sketches", "engines", "errors", "reproduce", "pipeline",
               "report", "aggregates", "ledger", "vectors"}
#: public name -> module that defines it
_API = {
    "release": "sparsedp.pipeline", "plan": "sparsedp.pipeline", "Plan": "sparsedp.pipeline",
    "Result": "sparsedp.report", "Report": "sparsedp.report", "Curator": "sparsedp.report",
    "Count": "sparsedp.aggregates", "Sum": "sparsedp.aggregates", "Mean": "sparsedp.aggregates",
    "Quantile": "sparsedp.aggregates", "Median": "sparsedp.aggregates",
    "Variance": "sparsedp.aggregates", "Std": "sparsedp.aggregates",
    "GSHM": "sparsedp.mechanisms.thresholded", "Laplace": "sparsedp.mechanisms.thresholded",
    "TopKCSH": "sparsedp.mechanisms.thresholded", "Auto": "sparsedp.mechanisms.auto",
    "WeightedGaussian": "sparsedp.mechanisms.set_union", "PolicyGaussian": "sparsedp.mechanisms.set_union",
    "MAD": "sparsedp.mechanisms.adaptive_weighting", "MAD2R": "sparsedp.mechanisms.adaptive_weighting",
    "AutoBound": "sparsedp.auto_bound",
    "PureBlanket": "sparsedp.mechanisms.pure.registered",
    "PureSparse": "sparsedp.mechanisms.pure.registered", "Compact": "sparsedp.mechanisms.pure.registered",
    "Basic": "sparsedp.mechanisms.pure.registered", "Stability": "sparsedp.mechanisms.pure.registered",
    "KeepHeavy": "sparsedp.mechanisms.pure.registered", "KHPrime": "sparsedp.mechanisms.pure.registered",
    "KHDoublePrime": "sparsedp.mechanisms.pure.registered",
    "BVSparseHistogram": "sparsedp.mechanisms.pure.registered",
    "MisraGries": "sparsedp.mechanisms.misra_gries", "MGRelease": "sparsedp.mechanisms.misra_gries",
    "alp": "sparsedp.alp_release", "ALP": "sparsedp.sketches.alp",
    "GroupedCorrelatedGaussian": "sparsedp.mechanisms.grouped_keys",
    "TwoStage": "sparsedp.mechanisms.two_stage",
    "OptimalPartitionSelection": "sparsedp.mechanisms.partition_selection",
    "CorrelatedGaussian": "sparsedp.mechanisms.public_keys", "PublicGaussian": "sparsedp.mechanisms.public_keys",
    "PublicLaplace": "sparsedp.mechanisms.public_keys", "BoundedDensity": "sparsedp.mechanisms.public_keys",
    "Ledger": "sparsedp.ledger", "Neighbours": "sparsedp.accounting.calibration",
    "vector_sum": "sparsedp.vectors", "vector_mean": "sparsedp.vectors", "VectorSum": "sparsedp.vectors",
    "VectorMean": "sparsedp.vectors",
}


def __getattr__(name: str) -> Any:
    if name in _API:
        value = getattr(_import(_API[name]), name)
        globals()[name] = value
        return value
    if name in _SUBMODULES:
        return _import(f"sparsedp.{name}")
    raise AttributeError(f"module 'sparsedp' has no attribute {name!r}")


def _import(module: str) -> Any:
    """``importlib.import_module(module)`` with Python's cyclic garbage collector paused while it runs (as
    it was before: left off if it was off). Importing the release path creates some thousands of objects
    (classes, functions, dataclass methods), and the collections those allocations trigger each scan every
    object in the process, Polars' included: 30–40 ms of a fresh process's first release on a 2-core
    machine, about a tenth of it (``docs/engines_speed.md``, session 13). An import leaves no garbage for
    those collections to find; the next collection after it runs as usual."""
    if not gc.isenabled():
        return importlib.import_module(module)
    gc.disable()
    try:
        return importlib.import_module(module)
    finally:
        gc.enable()


def __dir__() -> list[str]:
    """The public API, the subpackages and the module's dunder attributes (what tab completion offers);
    not the helpers this module imports (``importlib``, ``Any``)."""
    return sorted(set(_API) | _SUBMODULES | {k for k in globals() if k.startswith("__")})


__all__ = sorted(set(_API) | {"__version__"})
