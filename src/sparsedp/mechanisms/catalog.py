"""The table of registered mechanisms: one name → class table, filled by :func:`register` as the built-in
mechanism modules are imported (lazily, through :mod:`importlib`, so a default release imports only the modules
of its own mechanisms), and read by :mod:`.base`, :mod:`.registry`, ``release``, ``plan``, ``auto``, the CLI and
the audit.

This module sits below :mod:`.base` (it imports no mechanism module at its top), so the base class can ask
the table which mechanisms are registered; :mod:`.registry` adds ``create``, which needs the base class.
"""

from __future__ import annotations

import dataclasses
import importlib
from types import ModuleType
from typing import TYPE_CHECKING, Any

from ..errors import InvalidParameterError

if TYPE_CHECKING:
    from .base import AutoRole, Mechanism

__all__ = ["register", "unregister", "planners", "get", "names", "classes", "auto_candidates", "with_auto_role",
           "builtin_module",
           "option_names", "option_fields", "required_options", "instantiate", "pure_names"]

_REGISTRY: dict[str, type[Mechanism]] = {}
#: modules whose import registers the built-in mechanisms (imported on first registry use: light core import).
#: The first ``_CORE`` of them register the default release's mechanisms and every built-in ``auto``
#: candidate: :func:`get` of their names and :func:`auto_candidates` import only those (issue 19: a default
#: release does not pay for importing the pure, Misra–Gries, public-key… modules); any other name, and
#: :func:`names`, import them all, in this order, so the registration order is unchanged.
_BUILTIN = ("sparsedp.mechanisms.thresholded", "sparsedp.mechanisms.auto", "sparsedp.mechanisms.pure.registered",
            "sparsedp.mechanisms.misra_gries", "sparsedp.mechanisms.public_keys", "sparsedp.mechanisms.grouped_keys",
            "sparsedp.mechanisms.two_stage", "sparsedp.mechanisms.set_union",
            "sparsedp.mechanisms.partition_selection",
            "sparsedp.mechanisms.mixed_keys", "sparsedp.mechanisms.adaptive_weighting")
_CORE = 2  # thresholded (gshm, laplace, topk-csh: the auto candidates) and auto
#: names that are not release mechanisms, with the advice a user needs
_ADVICE = {
    "csh": "mechanism='csh' needs a k-sparse monotonic histogram (e.g. a Misra-Gries sketch), which raw rows are "
           "not; use mechanism='topk-csh' with top_k=…, or 'gshm'/'laplace' with max_groups_per_unit=…",
}
_loaded = 0  # how many modules of _BUILTIN are imported


def register(cls: type[Mechanism]) -> type[Mechanism]:
    """Class decorator: add ``cls`` under ``cls.name`` (refuses a duplicate name)."""
    name = cls.name
    if not name:
        raise ValueError(f"{cls.__name__} has no name")
    if name in _REGISTRY and _REGISTRY[name] is not cls:
        raise ValueError(f"mechanism {name!r} is already registered by {_REGISTRY[name].__name__}")
    _REGISTRY[name] = cls
    # the order is _BUILTIN's (then plug-ins in registration order) whichever module a caller imports first
    # (a direct ``import sparsedp.mechanisms.adaptive_weighting`` registers it before the modules listed ahead)
    order = sorted(_REGISTRY.items(), key=lambda kv: _module_rank(kv[1]))
    _REGISTRY.clear()
    _REGISTRY.update(order)
    return cls


def _module_rank(cls: type[Mechanism]) -> int:
    """Position of ``cls``'s module in ``_BUILTIN`` (a plug-in: after every built-in module)."""
    return _BUILTIN.index(cls.__module__) if cls.__module__ in _BUILTIN else len(_BUILTIN)


def _load(upto: int = len(_BUILTIN)) -> None:
    """Import the first ``upto`` modules of ``_BUILTIN`` (all by default), in order, each once."""
    global _loaded
    while _loaded < upto:
        mod = _BUILTIN[_loaded]
        _loaded += 1
        importlib.import_module(mod)


def builtin_module(name: str) -> ModuleType:
    """The built-in mechanism module ``sparsedp.mechanisms.<name>`` (one of ``_BUILTIN``), imported on first use
    after every built-in module registered before it, so the registration order stays ``_BUILTIN``'s whatever
    asks first. What the layers above use for the objects of a mechanism a default release does not load (the
    public key list of :mod:`.public_keys`: issue 19, start-up cost)."""
    full = f"sparsedp.mechanisms.{name}"
    if full not in _BUILTIN:
        raise ValueError(f"{full} is not a built-in mechanism module")
    _load(_BUILTIN.index(full) + 1)
    return importlib.import_module(full)


def names() -> tuple[str, ...]:
    """Registered mechanism names, in registration order."""
    _load()
    return tuple(_REGISTRY)


def classes() -> tuple[type[Mechanism], ...]:
    """Registered mechanism classes, in registration order (what the CLI, ``plan`` and the audit read)."""
    _load()
    return tuple(_REGISTRY.values())


def unregister(name: str) -> None:
    """Remove ``name`` (a mechanism registered by a test or a plug-in; the built-in ones stay registered)."""
    _load()
    _REGISTRY.pop(name, None)


def planners() -> tuple[Any, ...]:
    """Each distinct ``plan_rows`` of the registered classes, once, in registration order (a family of
    mechanisms that shares one implementation is planned once: :meth:`Mechanism.plan_rows`)."""
    seen: list[Any] = []
    out = []
    for cls in classes():
        impl = cls.plan_rows.__func__  # type: ignore[attr-defined]
        if impl not in seen:
            seen.append(impl)
            out.append(cls.plan_rows)
    return tuple(out)


def get(name: str) -> type[Mechanism]:
    """The class registered as ``name``."""
    _load(_CORE)
    if not (isinstance(name, str) and name in _REGISTRY):
        _load()
    if name in _ADVICE:
        raise InvalidParameterError(_ADVICE[name])
    if not isinstance(name, str) or name not in _REGISTRY:
        raise InvalidParameterError(f"mechanism must be one of {', '.join(map(repr, _REGISTRY))} or a mechanism "
                                    f"object such as sd.GSHM(); got {name!r}")
    return _REGISTRY[name]


def option_names(cls: type[Mechanism]) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls))  # type: ignore[arg-type]


def option_fields(cls: type[Mechanism]) -> dict[str, Any]:
    """``{option: its type annotation}`` of ``cls`` (its init fields: what the CLI's ``--option`` parses)."""
    return {f.name: f.type for f in dataclasses.fields(cls) if f.init}  # type: ignore[arg-type]


def required_options(cls: type[Mechanism]) -> tuple[str, ...]:
    """The options of ``cls`` that have no default."""
    return tuple(f.name for f in dataclasses.fields(cls)  # type: ignore[arg-type]
                 if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING)


def instantiate(cls: type[Mechanism], options: dict[str, Any]) -> Mechanism:
    """``cls(**options)``, after checking ``options`` against the class's typed fields: options the class does
    not have, or required ones left out, raise with the class's options named."""
    known = option_names(cls)
    unknown = [k for k in options if k not in known]
    if unknown:
        raise InvalidParameterError(f"{', '.join(unknown)} is not an option of mechanism {cls.name!r} (its options: "
                                    f"{', '.join(known) or 'none'})")
    missing = [name for name in required_options(cls) if name not in options]
    if missing:
        raise InvalidParameterError(f"mechanism {cls.name!r} needs {', '.join(missing)}: pass "
                                    f"mechanism=sd.{cls.__name__}({', '.join(m + '=…' for m in missing)})")
    return cls(**options)


def pure_names() -> tuple[tuple[str, bool], ...]:
    """``(name, needs a public key list)`` of every registered mechanism that accepts δ = 0 (pure ε-DP)."""
    return tuple((n, get(n).public_keys) for n in names() if get(n).pure_dp)


def auto_candidates() -> tuple[type[Mechanism], ...]:
    """The classes ``mechanism="auto"`` chooses among (every built-in one is registered by the first ``_CORE``
    modules of ``_BUILTIN``: tested)."""
    _load(_CORE)
    return tuple(c for c in _REGISTRY.values() if c.auto_candidate)


def with_auto_role(role: AutoRole) -> tuple[type[Mechanism], ...]:
    """The registered classes that ``mechanism="auto"`` considers in ``role`` (their ``auto_role``), ordered by
    their ``auto_order`` (then registration order). Imports every built-in mechanism module: the roles are
    those of the releases that are not the default one (public keys, δ = 0, key discovery)."""
    _load()
    return tuple(sorted((c for c in _REGISTRY.values() if c.auto_role is role), key=lambda c: c.auto_order))
