"""The engine interface and the shared driver of contribution bounding.

An engine turns user rows ``(privacy unit, key columns…)`` into a :class:`~sparsedp.mechanisms.SparseHistogram`
of *bounded* counts: after bounding, every privacy unit adds at most 1 to each key and touches at most ``l0``
keys. That is the contribution model every sparse-histogram accountant assumes (ℓ∞ = 1, ℓ0 = ``l0``; seed 001
spec §1, ``C_u``; seed 000 spec §1.1); an unenforced bound voids the guarantee.

Each engine implements :meth:`Engine.raw_counts` natively: de-duplicate ``(unit, key)`` pairs, count distinct
units per key, find the units with more than ``l0`` keys and return their pairs. The shared
:meth:`Engine.bounded_histogram` then runs :func:`sparsedp.engines.bounding.bound`, the secure uniform choice of
``l0`` keys per heavy unit (its docstring gives the method and why it is private, uniform and unpredictable),
so all engines bound identically. The Polars engine applies the same choice itself
(:meth:`Engine.bounded_raw_counts`), in one pass over the rows; Spark calls the same
:func:`~sparsedp.engines.bounding.select_pairs` in its executors.

The bounding statistics (:class:`BoundingStats`) are for the curator and are never part of a release.
"""

from __future__ import annotations

import contextlib
import difflib
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass
from typing import Any, Iterator, Sequence

from ..errors import InputDataError, SparsedpError
from ..mechanisms.histogram import SparseHistogram


@dataclass(frozen=True)
class BoundingStats:
    """What contribution bounding did (curator-facing; NOT differentially private, never released).

    Attributes:
        rows_in: input rows.
        units_in: distinct privacy units.
        pairs_in: distinct (unit, key) pairs, i.e. rows after de-duplication.
        duplicate_rows_removed: ``rows_in - pairs_in`` (repeat contributions of a unit to a key).
        units_over_l0: units that had more than ``l0`` distinct keys and were truncated.
        pairs_dropped_l0: (unit, key) pairs removed by the ``l0`` bound.
        keys_in: distinct keys in the input.
        keys_bounded: keys with a non-zero count after bounding.
        keys_out: keys handed to the mechanism (count >= ``pre_threshold``).
        l0: the bound applied (``None``: no ℓ0 bound, de-duplication only).
    """

    rows_in: int
    units_in: int
    pairs_in: int
    units_over_l0: int
    pairs_dropped_l0: int
    keys_in: int
    keys_bounded: int
    keys_out: int
    l0: int | None

    @property
    def duplicate_rows_removed(self) -> int:
        return self.rows_in - self.pairs_in

    def to_dict(self) -> dict:
        d = asdict(self)
        d["duplicate_rows_removed"] = self.duplicate_rows_removed
        return d


@dataclass(frozen=True)
class BoundedHistogram:
    """An engine's result: the bounded histogram (keys: a ``pyarrow.Table`` of the key columns) and its stats."""

    histogram: SparseHistogram
    stats: BoundingStats


@dataclass(frozen=True)
class RawCounts:
    """What an engine computes natively (step 1–2 of the module docstring); :func:`finish` does the rest.

    Attributes:
        rows_in, units_in, pairs_in: see :class:`BoundingStats`.
        units_over_l0: units with more than ``l0`` keys (0 when ``l0`` is None).
        key_counts: ``pyarrow.Table`` (or Polars DataFrame) of the key columns plus :data:`COUNT` (distinct units
            per key, before the ℓ0 bound).
        heavy_pairs: ``pyarrow.Table`` (or Polars DataFrame) with the unit column and the key columns: every
            distinct pair of every unit with more than ``l0`` keys, in any order. ``None`` when ``l0`` is None.
        pairs_dropped_l0: see the attribute comment (``None``: the choice is left to :func:`bound`).
    """

    rows_in: int
    units_in: int
    pairs_in: int
    units_over_l0: int
    key_counts: Any
    heavy_pairs: Any
    #: set by engines that apply the ℓ0 choice themselves (:meth:`Engine.bounded_raw_counts`): ``key_counts``
    #: then holds the *bounded* counts of every input key and ``heavy_pairs`` is None
    pairs_dropped_l0: int | None = None


class Engine(ABC):
    """One way of computing a bounded histogram where the data live.

    Subclasses implement :meth:`raw_counts`; :meth:`bounded_histogram` (shared) validates, runs it and applies
    the random ℓ0 choice, so every engine bounds identically.
    """

    #: engine name as accepted by ``sparsedp.release(engine=…)``
    name: str = ""

    @abstractmethod
    def columns(self, data: Any) -> list[str]:
        """Column names of ``data`` (no data read)."""

    @abstractmethod
    def raw_counts(self, data: Any, privacy_unit: str, by: list[str], l0: int | None) -> RawCounts:
        """De-duplicate, count keys and units, and return the heavy units' pairs (see :class:`RawCounts`).

        Must raise :class:`~sparsedp.errors.InputDataError` on empty input or nulls in the unit/key columns.
        """

    def bounded_raw_counts(self, data: Any, privacy_unit: str, by: list[str], l0: int | None,
                           rng: Any) -> RawCounts:
        """:meth:`raw_counts`, or (engines that can) the counts with the ℓ0 choice already applied, i.e.
        :func:`~sparsedp.engines.bounding.select_pairs` with the secret ``draw_bounding_secret(rng)``, drawn
        only after the data passed validation and only when ``l0`` is set (``RawCounts.pairs_dropped_l0``
        set)."""
        return self.raw_counts(data, privacy_unit, by, l0)

    def bounded_histogram(self, data: Any, privacy_unit: str, by: Sequence[str], l0: int | None,
                          rng: Any, pre_threshold: int = 1) -> BoundedHistogram:
        """Bounded histogram of ``data`` grouped by ``by`` with contribution bounding per ``privacy_unit``.

        Args:
            data: input accepted by this engine.
            privacy_unit: column identifying the privacy unit (one person, one account, …).
            by: key columns.
            l0: keep at most this many distinct keys per unit (uniform random choice); ``None``: no ℓ0 bound.
            rng: a :mod:`sparsedp.noise` source for the random choice (secure default source in production).
            pre_threshold: keys whose bounded count is below this are dropped (must be >= 1: a key with count
                zero must never reach a mechanism).
        """
        from .bounding import bound, draw_bounding_secret

        by = list(by)
        check_unique_names(data)
        with engine_errors_as_input_errors(self.name):
            check_columns(self.columns(data), privacy_unit, by)
            raw = self.bounded_raw_counts(data, privacy_unit, by, l0, rng)
        # The secret is drawn only after the data passed validation (drawn even if no unit is over l0), by the
        # engine itself when it applied the choice (pairs_dropped_l0 set), else here for bound().
        secret = draw_bounding_secret(rng) if l0 is not None and raw.pairs_dropped_l0 is None else None
        hist, info = bound(raw.key_counts, raw.heavy_pairs, privacy_unit, by, l0, secret, pre_threshold,
                           pairs_dropped_l0=raw.pairs_dropped_l0)
        stats = BoundingStats(rows_in=raw.rows_in, units_in=raw.units_in, pairs_in=raw.pairs_in,
                              units_over_l0=raw.units_over_l0, pairs_dropped_l0=info["pairs_dropped_l0"],
                              keys_in=info["keys_in"], keys_bounded=info["keys_bounded"], keys_out=len(hist), l0=l0)
        return BoundedHistogram(histogram=hist, stats=stats)


def check_unique_names(data: Any) -> None:
    """Frames with a repeated column name are ambiguous (which "user_id"?): refuse them by name."""
    from collections import Counter

    names = getattr(data, "column_names", None)  # pyarrow
    if names is None and type(data).__module__.split(".")[0] == "pandas":
        names = [str(c) if not isinstance(c, str) else c for c in data.columns]
    if names is None:
        return
    dup = sorted({repr(n) for n, c in Counter(names).items() if c > 1})
    if dup:
        raise InputDataError(f"the input has duplicate column names ({', '.join(dup)}); rename them so "
                             f"each column is unambiguous")


@contextlib.contextmanager
def engine_errors_as_input_errors(engine: str) -> Iterator[None]:
    """Errors the data libraries raise on inputs they cannot process (unsupported column types, values out
    of range, unreadable files) become :class:`InputDataError`, so no library traceback reaches the user.
    Our own errors pass through unchanged."""
    try:
        yield
    except SparsedpError:
        raise
    except (ValueError, TypeError, OverflowError, KeyError, IndexError, NotImplementedError, OSError) as e:
        raise InputDataError(f"the {engine} engine could not process the input: {type(e).__name__}: {e}") from e
    except Exception as e:
        # library base classes outside the builtin hierarchy (polars/pyarrow/duckdb errors)
        if type(e).__module__.split(".")[0] in ("polars", "pyarrow", "duckdb", "pandas", "numpy", "_duckdb"):
            raise InputDataError(f"the {engine} engine could not process the input: {type(e).__name__}: "
                                 f"{e}") from e
        raise


def check_columns(available: Sequence[str], privacy_unit: str, by: Sequence[str]) -> None:
    """Raise :class:`InputDataError` naming any missing column and its closest match."""
    available = list(available)
    for role, col in [("privacy_unit", privacy_unit)] + [("by", c) for c in by]:
        if col not in available:
            close = ([a for a in available if a.lower() == col.lower()]
                     or difflib.get_close_matches(col, available, n=1))
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise InputDataError(f"{role} column {col!r} is not in the data (columns: "
                                 f"{', '.join(map(repr, available[:20]))}{'…' if len(available) > 20 else ''}){hint}")


def check_nulls_and_rows(rows: int, null_counts: dict[str, int]) -> None:
    """Shared data checks: non-empty input, no null unit or key (nulls are not silently dropped)."""
    if rows == 0:
        raise InputDataError("the input has no rows; nothing to release (check the filter or the file)")
    bad = {c: n for c, n in null_counts.items() if n}
    if bad:
        desc = ", ".join(f"{c!r} ({n} nulls)" for c, n in bad.items())
        raise InputDataError(f"null values in {desc}; drop or fill them before releasing "
                             f"(a null unit would merge unrelated people, a null key is ambiguous)")
