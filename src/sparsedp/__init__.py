"""sparsedp: differentially private counts over huge or unbounded key domains.

The top-level import stays light: subpackages (and heavy engines such as Polars or Spark)
load on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_SUBMODULES = {"accounting", "noise", "mechanisms", "sketches", "engines", "errors", "reproduce"}
_API = {"release", "plan", "Result"}


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return importlib.import_module(f"sparsedp.{name}")
    if name in _API:
        return getattr(importlib.import_module("sparsedp.api"), name)
    raise AttributeError(f"module 'sparsedp' has no attribute {name!r}")


__all__ = sorted(_SUBMODULES | _API | {"__version__"})
