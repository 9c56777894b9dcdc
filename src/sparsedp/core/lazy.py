"""Own modules imported on first use: what keeps a fresh process's first release small (issue 31).

A default release runs a few of the accountants' and mechanisms' modules; importing the others costs it more
than its own work on a small frame (each frozen dataclass costs about 1--2 ms to create on a 2-core machine
once Polars is imported, much of it in the garbage collections its allocations trigger, which scan every
object of the process: ``sparsedp.__getattr__`` pauses the collector while it imports the release path). A
module whose functions need another module only on some paths (a ledger, SUM/MEAN columns, top-k, a
calibration not in the cache …) reads it through a :class:`LazyModule`:

.. code-block:: python

    if TYPE_CHECKING:
        from . import set_union as _set_union
    else:
        _set_union = lazy_module("sparsedp.accounting.set_union")

The type checker and the layer contract (``tests/test_layer_contract.py``, which reads ``TYPE_CHECKING``
imports like any other) see an ordinary import; at run time the first attribute read imports the module
(:func:`importlib.import_module`, thread-safe) and every read returns the module's own attribute, so a call
through it is the module's function, unchanged.

:func:`imported` tells whether such a module is imported yet. No object is an instance of a class of a module
that was never imported, so ``imported(_set_union) and isinstance(x, _set_union.SetUnionCalibration)`` is
``isinstance(x, SetUnionCalibration)`` without importing the module.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

__all__ = ["LazyModule", "lazy_module", "imported"]


class LazyModule:
    """A stand-in for the module ``name``: attribute reads import it on first use and return its attributes."""

    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        object.__setattr__(self, "_name", name)

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):  # copy, pickle, inspect … probing the stand-in: not the module's business
            raise AttributeError(attr)
        return getattr(importlib.import_module(object.__getattribute__(self, "_name")), attr)

    def __setattr__(self, attr: str, value: Any) -> None:
        raise AttributeError(f"{self!r} is read-only (set {attr!r} on the module itself)")

    def __repr__(self) -> str:
        return f"<lazy module {object.__getattribute__(self, '_name')!r}>"

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        """Pickled by name (a function pickled by value, e.g. for a Spark task, may carry one)."""
        return lazy_module, (object.__getattribute__(self, "_name"),)


def lazy_module(name: str) -> Any:
    """A :class:`LazyModule` for the absolute module name ``name`` (typed ``Any``: declare the module's own type
    with an import under ``TYPE_CHECKING``, module docstring)."""
    return LazyModule(name)


def imported(module: object) -> bool:
    """Whether ``module`` (a module, or a :class:`LazyModule`) has been imported in this process."""
    if isinstance(module, LazyModule):
        return object.__getattribute__(module, "_name") in sys.modules
    return True
