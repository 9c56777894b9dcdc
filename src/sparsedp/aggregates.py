"""The statistics released per key. Today: the distinct-unit count (:class:`Count`), the default.

The release pipeline carries a tuple of aggregates per key; an aggregate is a frozen dataclass naming its output
column and (for value aggregates) its contribution model and clipping. Engines compute them generically.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import InvalidParameterError

__all__ = ["Count", "Aggregate"]


@dataclass(frozen=True)
class Count:
    """The number of distinct privacy units per key (``COUNT(DISTINCT privacy_unit)``), after the engine's
    contribution bound. ``name``: the output column (default ``"count"``)."""

    name: str | None = None

    def __post_init__(self) -> None:
        if self.name is not None and (not isinstance(self.name, str) or not self.name):
            raise InvalidParameterError(f"Count(name=…) must be a non-empty column name, got {self.name!r}")

    @property
    def output_column(self) -> str:
        return self.name or "count"


Aggregate = Count
