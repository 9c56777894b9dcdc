"""The mechanism registry: one name → class table read by ``release``, ``plan``, ``auto``, the CLI and the audit.

``register`` refuses duplicates. ``create(spec, **options)`` turns a name (``"gshm"``) or a mechanism object
into a mechanism, with options checked against the class's typed fields (an option the mechanism does not have
is an error naming the options it does have). The table itself and its lazy loading of the built-in
mechanisms live in :mod:`.catalog` (below :mod:`.base`); this module adds what needs the base class.
"""

from __future__ import annotations

from typing import Any

from ..errors import InvalidParameterError, InvalidTypeError
from .base import Mechanism
from .catalog import (_load, auto_candidates, builtin_module, classes, get, instantiate, names, option_fields,
                      option_names, planners, pure_names, register, required_options, unregister, with_auto_role)

__all__ = ["register", "unregister", "planners", "get", "names", "classes", "create", "auto_candidates",
           "option_names", "option_fields", "required_options", "pure_names", "with_auto_role", "builtin_module",
           "_load"]


def create(spec: Any, **options: Any) -> Mechanism:
    """A mechanism from a registered name plus options, or a mechanism object as it is (then ``options``
    must be empty). Options the class does not have, or required ones left out, raise with the class's
    options named."""
    if isinstance(spec, Mechanism):
        if options:
            raise InvalidParameterError(f"options {sorted(options)} are given twice: set them on the mechanism "
                                        f"object {spec.describe()}")
        return spec
    if isinstance(spec, type) and issubclass(spec, Mechanism):
        cls = spec
    elif isinstance(spec, str):
        cls = get(spec)
    else:
        raise InvalidTypeError(f"mechanism must be a name such as 'gshm' or a mechanism object such as "
                               f"sd.GSHM(); got {type(spec).__name__}")
    return instantiate(cls, options)
