"""The engine protocol: what the pipeline and the mechanisms may ask of an engine, and what it declares it offers.

An engine (:mod:`sparsedp.engines`) is where the data live; a mechanism (:mod:`sparsedp.mechanisms`) never
imports one. It receives the engine as an :class:`Engine` and calls only the methods below, so a mechanism written
once runs on every engine, and an engine written once runs every mechanism whose needs it declares.

The core methods (abstract) every engine implements. The *pair primitives* (:meth:`Engine.distinct_pairs`,
:meth:`Engine.weighted_histogram`, :meth:`Engine.kept_pairs`, :meth:`Engine.pair_ids`,
:meth:`Engine.one_group_per_unit`) read the distinct (unit, key) pairs in this process; an engine that offers
them declares :attr:`Capability.PAIRS` in :attr:`Engine.capabilities` and a mechanism asks
:meth:`Engine.offers` (never ``hasattr``) before anything is drawn or charged. :meth:`Engine.keys_per_unit_counts`
(the automatic bound) is declared by :attr:`Capability.UNIT_KEY_COUNTS`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from enum import Enum
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Protocol, Sequence, TypeVar

from ..errors import InvalidParameterError
from .bounded import BoundingStats, KeptPairs, LocalHistogram, OneGroupRows, PairIds, RoundsInput, UnitPairs
from .histogram import SparseHistogram
from .sources import InputData
from .unit_keys import UnitKeyCounts

if TYPE_CHECKING:  # numpy and the data libraries are the engines' to import
    import numpy as np
    import numpy.typing as npt
    import polars as pl
    import pyarrow as pa

    from ..aggregates import Aggregate, Quantile
    from .quantile_cells import KeyCells

__all__ = ["Capability", "Engine", "HistogramHandle", "NoiseTask", "RandomSource"]


class RandomSource(Protocol):
    """A release's random source as an engine uses it (:class:`sparsedp.noise.source.SecureRandom`): the
    per-release bounding secret is drawn from its bytes."""

    def random_bytes(self, n: int) -> bytes: ...


class HistogramHandle(Protocol):
    """What every engine's bounded histogram offers the pipeline: its curator statistics and its number of keys
    (:class:`~.bounded.LocalHistogram` in this process, :class:`~sparsedp.engines.spark_engine.SparkHistogram`
    in Spark)."""

    @property
    def stats(self) -> BoundingStats: ...

    def __len__(self) -> int: ...


class NoiseTask(Protocol):
    """The per-key noise step an engine applies chunk by chunk (:class:`~sparsedp.mechanisms.key_noise.KeyNoise`:
    an engine sees only these members, so it never imports the mechanisms)."""

    @property
    def column_names(self) -> tuple[str, ...]: ...

    @property
    def n_grid_columns(self) -> int: ...

    @property
    def float_output(self) -> bool: ...

    def apply(self, counts: np.ndarray, chunk: int) -> tuple[np.ndarray, np.ndarray]: ...

    def apply_joint(self, counts: np.ndarray, grid_sums: list[np.ndarray],
                    chunk: int) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]: ...


if TYPE_CHECKING:  # parameter defaults (PEP 696) are for the type checker: Python 3.11's TypeVar has none
    from typing_extensions import TypeVar as _DefaultTypeVar

    H = _DefaultTypeVar("H", bound=HistogramHandle, default=HistogramHandle)
    R = _DefaultTypeVar("R", default=Any)
else:
    H = TypeVar("H", bound=HistogramHandle)
    R = TypeVar("R")


class Capability(Enum):
    """What an engine offers beyond the abstract core methods (declared in :attr:`Engine.capabilities`)."""

    #: the pair primitives: the distinct (unit, key) pairs read and chosen in this process (set union, grouped
    #: public keys, the user-level Misra–Gries sketch, the keys objective of the automatic bound)
    PAIRS = "pairs"
    #: :meth:`Engine.keys_per_unit_counts` (``max_groups_per_unit="auto"``)
    UNIT_KEY_COUNTS = "unit-key-counts"
    #: :meth:`Engine.round_histogram` and :meth:`Engine.next_round` (the adaptive-weighting set union's rounds:
    #: ``mad``, ``mad2r``)
    ROUNDS = "weighted-rounds"


def lacks_error(engine_name: str, missing: frozenset[Capability], what: str, instead: str = "") -> InvalidParameterError:
    """The one refusal of a request whose mechanism needs engine primitives the engine does not declare
    (:attr:`Engine.capabilities`): raised when the engine is opened, before the ledger is touched or any data read.
    ``instead``: the request's other way out, if the mechanism has one (e.g. another option)."""
    names = ", ".join(sorted(c.value for c in missing))
    return InvalidParameterError(f"{what} needs the engine primitives {names!s}, which the {engine_name!r} engine does "
                                 f"not offer; use an embedded engine (⟨engine=polars⟩, or duckdb, pandas, arrow)"
                                 + (f", or {instead}" if instead else ""),
                                 param="engine")


class Engine(ABC, Generic[H, R]):
    """Where a release's data work happens: the bounded histogram, and the primitives mechanisms run on.

    The release pipeline (:mod:`sparsedp.pipeline`) and the mechanisms use only these methods:

    * :meth:`histogram` — validate the input, enforce the contribution bound, count (curator stats included);
    * :meth:`kth_largest` — the exact k-th largest bounded count (top-k's cut-off);
    * :meth:`noise_keys` — the per-key noise step (:class:`~sparsedp.mechanisms.key_noise.KeyNoise`) applied
      chunk by chunk with the per-release keyed streams (:mod:`sparsedp.core.noise_chunks`);
    * :meth:`collect` — the whole histogram as a :class:`~sparsedp.core.histogram.SparseHistogram` in this
      process, for mechanisms that need it (pure DP, Misra–Gries);
    * :meth:`to_arrow` — a released table as ``pyarrow.Table`` (released rows only);
    * the pair primitives and :meth:`keys_per_unit_counts`, where :attr:`capabilities` declares them.

    Type parameters: ``H``, the engine's bounded histogram (a :class:`HistogramHandle`); ``R``, what its noise
    step returns (:class:`~.bounded.LocalRelease` in this process, a lazy Spark frame on Spark).
    """

    #: engine name as accepted by ``sparsedp.release(engine=…)``
    name: str = ""
    #: what this engine offers beyond the abstract methods (module docstring)
    capabilities: ClassVar[frozenset[Capability]] = frozenset()
    #: the DuckDB connection SQL text runs on (``None``: DuckDB's default connection); set by the DuckDB engine
    connection: Any = None

    def offers(self, capability: Capability) -> bool:
        """Whether this engine declares ``capability``."""
        return capability in self.capabilities

    @property
    def embedded(self) -> bool:
        """The engine holds its bounded histogram and reads the (unit, key) pairs in this process
        (:attr:`Capability.PAIRS`)."""
        return self.offers(Capability.PAIRS)

    @abstractmethod
    def columns(self, data: InputData) -> list[str]:
        """Column names of ``data`` (no data read)."""

    @abstractmethod
    def histogram(self, data: InputData, privacy_unit: str, by: Sequence[str], l0: int | None, rng: RandomSource,
                  pre_threshold: int = 1, aggregates: Sequence[Aggregate] = ()) -> H:
        """The bounded histogram of ``data`` (an engine-specific handle), checked and counted.

        ``aggregates``: the SUM/MEAN aggregates of the release (:mod:`sparsedp.aggregates`): the handle then
        also holds each key's grid sums over the kept pairs, and the value columns are checked (missing,
        non-numeric, null, NaN/inf) before anything is drawn.

        Every unit adds at most 1 to each key and, with ``l0``, touches at most ``l0`` keys (uniform keyed choice,
        :mod:`sparsedp.engines.bounding`, secret drawn from ``rng`` only after the input passed validation).
        Keys below ``pre_threshold`` are left out. Raises :class:`~sparsedp.errors.InputDataError` on bad input
        (missing columns, nulls, NaN or nested key values, no rows) before anything is drawn.
        """

    @abstractmethod
    def kth_largest(self, hist: H, k: int) -> int:
        """The k-th largest bounded count of ``hist`` (0 if it has fewer than k keys)."""

    @abstractmethod
    def noise_keys(self, hist: H, task: NoiseTask) -> R:
        """Apply ``task`` (a :class:`~sparsedp.mechanisms.key_noise.KeyNoise`) to every chunk of keys."""

    @abstractmethod
    def collect(self, hist: H) -> SparseHistogram:
        """``hist`` as an in-process :class:`~sparsedp.core.histogram.SparseHistogram` (keys: ``pyarrow.Table``)."""

    @abstractmethod
    def to_arrow(self, released: R, by: Sequence[str], value_column: str) -> pa.Table:
        """A release of :meth:`noise_keys` as a ``pyarrow.Table`` of the key columns and ``value_column``."""

    def keys_per_unit_counts(self, data: InputData, privacy_unit: str, by: Sequence[str],
                             candidates: Sequence[int]) -> UnitKeyCounts:
        """For ``max_groups_per_unit="auto"`` (:mod:`sparsedp.auto_bound`; :attr:`Capability.UNIT_KEY_COUNTS`): N
        (units) and, for each candidate c, the number of units with at most c distinct keys. Validates the input
        like :meth:`histogram` (columns, nulls, no rows, key values) so a bad input is refused before the ledger
        charge. Not private; never released."""
        raise InvalidParameterError(f"max_groups_per_unit='auto' is not available on the {self.name} engine; "
                                    f"pass an integer max_groups_per_unit or use engine='polars' or 'duckdb'")

    def read_unit_key_counts(self, data: InputData, privacy_unit: str, by: Sequence[str], candidates: Sequence[int],
                             aggregates: Sequence[Aggregate] = ()) -> tuple[UnitKeyCounts, InputData]:
        """:meth:`keys_per_unit_counts` and, with SUM/MEAN ``aggregates``, :meth:`check_value_columns` (every
        input check of the release happens before the ledger charge), and what the release at the chosen bound
        then reads in place of ``data``. Here ``data`` itself: it is read again. An engine that keeps the rows
        this read (the Polars engine: :class:`~sparsedp.engines.pair_ids.ReadPairs`) returns them, and its
        :meth:`histogram` takes them for the release at the bound chosen (curator only; one use)."""
        counts = self.keys_per_unit_counts(data, privacy_unit, by, candidates)
        if aggregates:
            self.check_value_columns(data, privacy_unit, by, aggregates)
        return counts, data

    def check_value_columns(self, data: InputData, privacy_unit: str, by: Sequence[str],
                            aggregates: Sequence[Aggregate]) -> None:
        """The SUM/MEAN ``aggregates``' value columns exist, are numeric, are neither the unit nor a key, and hold
        no null, NaN or infinite value (:class:`~sparsedp.errors.InputDataError` otherwise), for a release whose
        first read does not check them (the automatic bound's), before the ledger charge. Nothing is drawn."""
        raise InvalidParameterError(f"the {self.name} engine does not check SUM/MEAN value columns ahead of its "
                                    f"histogram", param="engine")

    def read_candidate_counts(self, data: InputData, privacy_unit: str, by: Sequence[str], candidates: Sequence[int],
                              rng: RandomSource, weights: Sequence[Any] | None = None,
                              aggregates: Sequence[Aggregate] = ()
                              ) -> tuple[tuple[npt.NDArray[np.int64], ...], int, InputData]:
        """For ``AutoBound(objective="keys")`` (:func:`sparsedp.auto_keys.read_candidate_counts`;
        :attr:`Capability.PAIRS`): ``(counts, units, rows)``, each key's count n_k^(c) (canonical key order) of the
        pairs kept at every candidate bound c from ONE keyed ranking (every unit keeps its c pairs of smallest
        (:func:`~sparsedp.engines.bounding.prf_ranks` rank, canonical key); ``weights[i]``: the kept pairs' sum of
        ``W_{min(d_u, c)}`` instead), the number of units, and what the release at the chosen bound then reads (as
        :meth:`read_unit_key_counts`). Every input check of the release first (the SUM/MEAN value columns of
        ``aggregates`` too), then the ranking secret is drawn from ``rng``. Curator only; never released."""
        raise self._lacks(Capability.PAIRS)

    # ------------------------------------------------------------------ pair primitives (Capability.PAIRS)

    def distinct_pairs(self, data: InputData, privacy_unit: str, by: Sequence[str]) -> UnitPairs:
        """The distinct (unit, key) pairs of ``data`` after every input check (:class:`UnitPairs`)."""
        raise self._lacks(Capability.PAIRS)

    def weighted_histogram(self, data: InputData, privacy_unit: str, by: Sequence[str], l0: int,
                           weights: Sequence[int], rng: RandomSource) -> LocalHistogram:
        """The histogram of per-key weight sums ``S_k = Σ_{kept (u, k)} W_{min(d_u, l0)}`` over the pairs the one
        ℓ0 choice keeps (``weights[t − 1] = W_t``, integers; ``d_u``: the unit's distinct keys). The bounding secret
        is drawn from ``rng`` after every input check. Keys with no kept pair are left out."""
        raise self._lacks(Capability.PAIRS)

    def round_histogram(self, data: InputData, privacy_unit: str, by: Sequence[str], l0: int,
                        weights: Sequence[int], rng: RandomSource) -> tuple[H, RoundsInput]:
        """Round 1 of the adaptive-weighting set union (:attr:`Capability.ROUNDS`): the histogram of per-key weight
        sums ``S_k = Σ W_{t_u}`` over the pairs the one ℓ0 choice keeps (``weights[t − 1] = W_t``, integers;
        ``t_u = min(d_u, l0)``, the unit's kept pairs), the secret drawn from ``rng`` after every input check;
        returned with what the later rounds read (:class:`~sparsedp.core.bounded.RoundsInput`: the engine's handle
        on the checked input and round 1's secret). Keys with no kept pair are left out."""
        raise self._lacks(Capability.ROUNDS)

    def next_round(self, rounds: RoundsInput, exclude: Any, choose_first: bool, rng: RandomSource) -> H:
        """A later round (:attr:`Capability.ROUNDS`) on the input :meth:`round_histogram` checked: the per-key sums
        ``S_k = Σ W_{t_u}`` over the kept pairs whose key is not in ``exclude`` (``pyarrow.Table`` of the ``by``
        columns: keys released by earlier rounds), ``t_u`` = the unit's kept pairs. ``choose_first``: round 1's
        choice (its secret), then the excluded keys dropped (``mad``); else the excluded keys dropped, then a
        fresh choice among the unit's other keys keyed by a secret drawn from ``rng`` now (``mad2r``). Keys with
        no kept pair are left out."""
        raise self._lacks(Capability.ROUNDS)

    def kept_pairs(self, data: InputData, privacy_unit: str, by: Sequence[str], l0: int,
                   rng: RandomSource) -> KeptPairs:
        """The pairs the one ℓ0 choice keeps, as integer codes (:class:`KeptPairs`); secret drawn from ``rng``
        after every input check."""
        raise self._lacks(Capability.PAIRS)

    def pair_ids(self, data: InputData, privacy_unit: str, by: Sequence[str]) -> PairIds:
        """The distinct (unit, key) pairs as integer ids, units and keys in increasing order of value
        (:class:`PairIds`); nothing is drawn."""
        raise self._lacks(Capability.PAIRS)

    def one_group_per_unit(self, data: InputData, privacy_unit: str, by: Sequence[str], group: str,
                           groups: pl.DataFrame, from_text: bool, rng: RandomSource) -> OneGroupRows:
        """``data``'s rows restricted to the listed ``groups`` (Polars DataFrame of the ``group`` column, canonical
        order) and, per unit, to the ONE group of smallest keyed rank (secret drawn from ``rng`` after every input
        check); ``from_text``: the groups were read as text and take the data's type."""
        raise self._lacks(Capability.PAIRS)

    # ------------------------------------------------------------------ per-key quantiles

    def check_quantile_columns(self, data: InputData, quantiles: Sequence[Quantile]) -> None:
        """The quantiles' value columns exist, are numeric and hold no null, NaN or infinite value
        (:class:`~sparsedp.errors.InputDataError` otherwise); called before the ledger charge. Nothing is drawn."""
        raise self._no_quantiles()

    def quantile_cells(self, data: InputData, privacy_unit: str, by: Sequence[str], keys: pa.Table,
                       quantiles: Sequence[Quantile], l0: int, rng: RandomSource) -> list[KeyCells]:
        """Per quantile, the grid-cell counts of the released ``keys`` (Arrow table of the ``by`` columns; key
        ``i`` is the ``i``-th in canonical key order) under the quantile contribution model of
        :mod:`sparsedp.engines.quantile_cells` (its secret drawn from ``rng``). Curator-only."""
        raise self._no_quantiles()

    def _no_quantiles(self) -> InvalidParameterError:
        return InvalidParameterError(f"the {self.name} engine does not compute per-key quantiles; use engine='polars', "
                                     f"'duckdb', 'pandas', 'arrow' or 'spark'", param="engine")

    def _lacks(self, capability: Capability) -> InvalidParameterError:
        return InvalidParameterError(f"the {self.name} engine does not offer {capability.value!r} (the (unit, key) "
                                     f"pairs read in this process); use an embedded engine (polars, duckdb, pandas, "
                                     f"arrow)")

    def stats(self, hist: H) -> BoundingStats:
        """What bounding did (curator only)."""
        stats: BoundingStats = hist.stats
        return stats

    def release_resources(self, hist: H) -> None:
        """Free what :meth:`histogram` holds (Spark: the persisted histogram). Embedded engines: nothing."""
