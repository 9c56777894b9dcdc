"""Regenerate the papers' figures and tables: ``sparsedp reproduce NAME`` or :func:`run`.

Targets live in one module per paper in this package and register themselves with
``@target("name", "description")``; every module here not starting with ``_`` is imported below.
"""

from __future__ import annotations

import importlib
import pkgutil

from ._registry import (
    TARGETS,
    check_summary,
    Headline,
    Kind,
    Paper,
    ReproResult,
    Target,
    list_targets,
    new_figure,
    read_csv,
    run,
    save_figure,
    steps,
    target,
    write_csv,
)

__all__ = ["TARGETS", "check_summary", "Headline", "Kind", "Paper", "ReproResult", "Target", "list_targets", "new_figure", "read_csv", "run",
           "save_figure", "steps", "target", "write_csv"]

for _mod in pkgutil.iter_modules(__path__):
    if not _mod.name.startswith("_"):
        importlib.import_module(f"{__name__}.{_mod.name}")
