"""Per-key quantiles released next to the count: ``release(..., aggregates=[sd.Count(), sd.Median(...)])``.

:class:`QuantileQuery` is :class:`~sparsedp.query.HistogramQuery` with one more private step. Its stages, in the
order :func:`~sparsedp.query.run_query` runs them:

1. **plan** — the split of (ε, δ) (:func:`sparsedp.accounting.quantiles.split_budget`): the count mechanism (with
   any SUM/MEAN columns) is planned at ``(ε_count, δ)``, each quantile ``j`` gets ``ε_j`` spent as ``ε_j/l0`` per
   key; the ledger charge is the :class:`~sparsedp.accounting.events.SequenceEvent` of the count's own event and
   one :class:`~sparsedp.accounting.events.ComposedPureEvent` (``l0`` ε_key-DP selections) per quantile,
   charged at the user's (ε, δ). An engine without :meth:`~sparsedp.core.engine.Engine.quantile_cells` is
   refused here, before anything is read or charged.
2. **read** — the quantile columns checked (present, numeric, finite, no nulls), then the count's engine pass.
3. **charge**, then **draw** — the count's private release; then, for the released keys only (public, in
   canonical key order), the engine's bounded cell counts (:mod:`sparsedp.engines.quantile_cells`; Spark
   computes them in its executors) and one exact permute-and-flip draw
   per key and quantile (:mod:`sparsedp.mechanisms.quantiles`), added as columns; with ``interval=…`` each is
   followed by ``<column>_rank_error``, its public worst-case rank error (:mod:`sparsedp.accounting.quantile_rank`).

Why releasing the quantiles of the selected keys is covered by this charge: ``docs/proofs/quantiles.md``.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from .accounting.charge import Charge
from .accounting.events import ComposedPureEvent, SequenceEvent
from .aggregates import Quantile
from .core.arrow_arrays import numpy_to_arrow
from .core.engine import Engine
from .core.key_order import canonical_rows
from .errors import InvalidParameterError, InvalidTypeError
from .execution import ReleaseContext, check_output_columns, open_engine, warn_before
from .core.lazy import lazy_module
from .query import HistogramQuery

if TYPE_CHECKING:
    from .accounting import quantile_rank as _quantile_rank, quantiles as _quantiles
    from .mechanisms import quantiles as _mech_quantiles
else:  # the quantiles' accountants and mechanism: imported by a release with sd.Quantile/sd.Median only (issue 31)
    _quantile_rank = lazy_module("sparsedp.accounting.quantile_rank")
    _quantiles = lazy_module("sparsedp.accounting.quantiles")
    _mech_quantiles = lazy_module("sparsedp.mechanisms.quantiles")

__all__ = ["split_quantiles", "QuantileQuery", "QuantilePlanRow", "quantile_plan_rows", "plan_split"]


def split_quantiles(aggregates: Any) -> tuple[Any, tuple[Quantile, ...]]:
    """``(the other aggregates, the quantiles)`` of ``release(aggregates=…)``; the other aggregates are ``None``
    (the default count) when only quantiles were listed."""
    if aggregates is None:
        return None, ()
    aggs = list(aggregates) if isinstance(aggregates, (list, tuple)) else [aggregates]
    qs = tuple(a for a in aggs if isinstance(a, Quantile))
    if not qs:
        return aggregates, ()
    rest = [a for a in aggs if not isinstance(a, Quantile)]
    return (rest or None), qs


def sorted_by_keys(table: Any, by: list[str]) -> Any:
    """An Arrow table's rows in canonical key order (:func:`~sparsedp.core.key_order.canonical_order`)."""
    import polars as pl

    frame = pl.from_arrow(table.select(by))
    assert isinstance(frame, pl.DataFrame)
    order = canonical_rows(frame, by)
    return table.take(order)


class QuantileQuery(HistogramQuery):
    """A sparse-histogram release with per-key quantiles (module docstring). Every argument is checked here,
    before anything is read."""

    def __init__(self, request: Any, quantiles: Sequence[Quantile], t_start: float, other: bool = False) -> None:
        super().__init__(request, t_start)
        if other:
            raise InvalidParameterError("quantiles are released for released keys only; the ⟨other⟩ row (the total of "
                                        "the keys not released) has no quantile", param="other",
                                        fix="drop ⟨other⟩, or release the quantiles in a separate release")
        self.quantiles = tuple(quantiles)
        for q in self.quantiles:
            if not isinstance(q, Quantile):
                raise InvalidTypeError(f"expected sd.Quantile/sd.Median objects, got {type(q).__name__}")
        if request.unit is None:
            raise InvalidParameterError("quantiles need a privacy_unit (each unit's rows are bounded per key)",
                                        param="privacy_unit")
        if request.bound is None:
            raise InvalidParameterError(
                "quantiles need ⟨max_groups_per_unit=…⟩ as an integer: each unit's quantile contributions are bounded "
                "to that many released keys, and the quantiles are accounted l0-fold (\"auto\" and top-k without a "
                "bound are not offered with quantiles)", param="max_groups_per_unit")
        if request.keys is not None:
            raise InvalidParameterError("quantiles are released for the keys the count selects; they are not "
                                        "offered with ⟨keys=…⟩ (public key lists)", param="keys")
        if request.insecure_float:
            raise InvalidParameterError("quantiles are released with the exact secure sampler only; drop "
                                        "⟨insecure_float=True⟩", param="insecure_float")
        taken = {request.unit, *request.by, request.count.output_name, *(a.output_name for a in request.sums)}
        names = [q.output_name for q in self.quantiles]
        for q in self.quantiles:
            if q.column == request.unit or q.column in request.by:
                raise InvalidParameterError(f"{type(q).__name__}({q.column!r}): the value column must not be the "
                                            f"privacy unit or a key column", param="quantile")
            if q.output_name in taken or names.count(q.output_name) > 1:
                raise InvalidParameterError(f"the output column {q.output_name!r} is used twice (an input column or "
                                            f"another aggregate); name it: {type(q).__name__}(…, name=…)",
                                            param="quantile")
        self.split: _quantiles.QuantileSplit = _quantiles.split_budget(request.epsilon, request.delta, request.bound,
                                                 [q.share for q in self.quantiles])

    def plan(self) -> Any:
        request, split = self.request, self.split
        count_request = dataclasses.replace(request.mechanism_request(), epsilon=split.count_epsilon,
                                            delta=split.count_delta)
        planned = request.mechanism.plan_release(count_request, request.count.output_name)
        check_output_columns(request, planned.value_column)
        engine = open_engine(request, request.mechanism)
        if type(engine).quantile_cells is Engine.quantile_cells:
            raise InvalidParameterError(
                f"quantiles are computed by the polars, duckdb, pandas, arrow and spark engines; ⟨engine="
                f"{engine.name!r}⟩ does not offer them. Nothing was read or charged: pass engine='duckdb' (or "
                f"convert the input) to release quantiles", param="engine")
        self.ctx = ReleaseContext(request, engine, self.t_start)
        self.delta_note = warn_before(request)
        parts = [planned.charge.event] + [
            ComposedPureEvent(epsilon=e, delta=0.0, epsilon0=ek, k=split.l0)
            for e, ek in zip(split.quantile_epsilons, split.key_epsilons)]
        event = SequenceEvent(parts, epsilon=split.epsilon, delta=split.delta)
        charge = Charge.of_event(event, mechanism=f"{planned.mechanism.name}+quantiles")
        return dataclasses.replace(planned, charge=charge)

    def read(self, planned: Any) -> Any:
        assert self.ctx is not None
        with self.ctx.stage("checking the quantile columns", "bound+count"):  # before anything is drawn
            self.ctx.engine.check_quantile_columns(self.ctx.data, self.quantiles)
        return super().read(planned)

    def draw(self, planned: Any, read: Any) -> Any:
        drawn = super().draw(planned, read)
        ctx, split = self.ctx, self.split
        assert ctx is not None
        with ctx.stage("quantiles (permute-and-flip)", "noise"):
            table = drawn.rows if drawn.in_process else \
                ctx.engine.to_arrow(drawn.rows, list(ctx.by), planned.value_column)
            table = sorted_by_keys(table, list(ctx.by))  # row i = key i of the engine's cells
            cells = ctx.engine.quantile_cells(ctx.data, ctx.unit, list(ctx.by), table.select(list(ctx.by)),
                                              self.quantiles, split.l0, ctx.source)
            for q, kc, ek in zip(self.quantiles, cells, split.key_epsilons):
                values = _mech_quantiles.release_quantiles(kc, q, ek, ctx.source)
                table = table.append_column(q.output_name, numpy_to_arrow(values))
                if self.request.interval is not None:  # public: (ε_key, Δ, cells, q, level) only
                    table = table.append_column(*rank_error_column(q, ek, self.request.interval, table.num_rows))
        notes = split.lines([q.output_name for q in self.quantiles]) + tuple(
            f"{q.output_name}: permute-and-flip over {q.cells} cells of width {q.width:.6g} on "
            f"[{q.lower:g}, {q.upper:g}] (cell midpoints), at most {q.max_rows} row(s) per unit and key; with "
            f"probability >= 95% the released cell's utility is within "
            f"{_quantiles.utility_gap(ek, q.sensitivity, q.cells, 0.05):.4g} of the best cell's "
            f"(rank units x{q.level.denominator})"
            for q, ek in zip(self.quantiles, split.key_epsilons))
        if self.request.interval is not None:
            notes += tuple(rank_error_note(q, ek, self.request.interval)
                           for q, ek in zip(self.quantiles, split.key_epsilons))
        return dataclasses.replace(drawn, rows=table, in_process=True,
                                   disclosure=drawn.disclosure.with_notes(*notes))


# ---------------------------------------------------------------- sd.plan(..., aggregates=[…, sd.Median(…)])

@dataclass(frozen=True)
class QuantilePlanRow:
    """``sd.plan``'s row for one quantile of a release (no data): what it costs and its error, public.

    ``epsilon``: the quantile's part of ε (its ``l0`` per-key mechanisms composed), ``epsilon_key`` = that over
    ``l0``; the error is in rank (numbers of values), the only unit that needs no data: with probability at
    least 95 % the released cell's utility is within ``g = utility_gap(ε_key, Δ, cells, 0.05)`` of the best cell's
    (:func:`~sparsedp.accounting.quantiles.utility_gap`), and moving one value across the released cell changes
    the utility by ``b`` (``q = a/b``), so the released cell's rank is within ``rank_error_95 = g/b`` values of the
    best cell's; on average within ``rank_error_mean = (2Δ/ε_key)(ln(cells) + 1)/b`` (the exponential
    mechanism's expected gap, Dwork & Roth, "The Algorithmic Foundations of Differential Privacy", 2014,
    Cor. 3.12, which permute-and-flip never exceeds: McKenna & Sheldon 2020, Thm 2). Its value error is that rank
    error divided by the density of the key's values near the quantile (a key of n values spread over the bounds
    evenly: ``rank_error·(upper − lower)/n``). It is both the row's "mechanism" and its "calibration" in a
    :class:`~sparsedp.pipeline.Plan` (``describe``/``value_column`` like a mechanism, the table's fields like a
    calibration; no noise scale, no threshold: NaN)."""

    quantile: Quantile
    epsilon: float
    epsilon_key: float
    l0: int
    rank_error_95: float
    rank_error_mean: float
    mechanism: str = "permute-and-flip"
    discrete: bool = True
    debias: bool = False
    delta_achieved: float = 0.0
    sigma: float = float("nan")
    noise_std: float = float("nan")
    tau: float = float("nan")

    @property
    def analysis(self) -> str:
        q = self.quantile
        return (f"{q.output_name}: {q.cells} cells on [{q.lower:g}, {q.upper:g}], pure DP, epsilon "
                f"{self.epsilon:.4g} = {self.l0} x {self.epsilon_key:.4g} per key")

    def describe(self) -> str:
        return f"{self.quantile.output_name} (permute-and-flip)"

    def value_column(self, default: str) -> str:
        return self.quantile.output_name

    def use(self) -> str:
        """The plan table's "use" text."""
        return (f"{self.quantile.output_name}: rank error <= {self.rank_error_95:,.1f} values at 95 %, mean "
                f"<= {self.rank_error_mean:,.1f}")

    def plan_fields(self) -> dict[str, float]:
        """The row's own columns in :meth:`Plan.rows <sparsedp.pipeline.Plan.rows>`."""
        return {"epsilon": self.epsilon, "epsilon_per_key": self.epsilon_key, "rank_error_95": self.rank_error_95,
                "rank_error_mean": self.rank_error_mean}


def quantile_plan_rows(quantiles: Sequence[Quantile], split: _quantiles.QuantileSplit) -> list[QuantilePlanRow]:
    """One :class:`QuantilePlanRow` per quantile of the split (no data)."""
    out = []
    for q, e, ek in zip(quantiles, split.quantile_epsilons, split.key_epsilons):
        b = q.level.denominator
        gap = _quantiles.utility_gap(ek, q.sensitivity, q.cells, 0.05)
        mean = 2.0 * q.sensitivity / ek * (math.log(q.cells) + 1.0)
        out.append(QuantilePlanRow(quantile=q, epsilon=e, epsilon_key=ek, l0=split.l0, rank_error_95=gap / b,
                                   rank_error_mean=mean / b))
    return out


def plan_split(epsilon: float, delta: float, max_groups_per_unit: Any, quantiles: Sequence[Quantile],
               keys: Any, insecure_float: bool) -> _quantiles.QuantileSplit:
    """The split ``sd.plan`` shows for quantiles, the combinations ``release`` refuses refused the same way (no
    data)."""
    for q in quantiles:
        if not isinstance(q, Quantile):
            raise InvalidTypeError(f"expected sd.Quantile/sd.Median objects, got {type(q).__name__}")
    if keys is not None:
        raise InvalidParameterError("quantiles are released for the keys the count selects; they are not offered "
                                    "with ⟨keys=…⟩ (public key lists)", param="keys")
    if insecure_float:
        raise InvalidParameterError("quantiles are released with the exact secure sampler only; drop "
                                    "⟨insecure_float=True⟩", param="insecure_float")
    if max_groups_per_unit is None or isinstance(max_groups_per_unit, (str, bool)):
        raise InvalidParameterError("quantiles need ⟨max_groups_per_unit=…⟩ as an integer (each unit's quantile "
                                    "contributions are bounded to that many released keys)",
                                    param="max_groups_per_unit")
    return _quantiles.split_budget(epsilon, delta, max_groups_per_unit, [q.share for q in quantiles])


def rank_error_column(q: Quantile, epsilon_key: float, level: float, rows: int) -> tuple[str, Any]:
    """``(<quantile>_rank_error, the constant column)``: :func:`~sparsedp.accounting.quantile_rank.rank_error`'s
    bound in values of the key, the same for every row (it depends on public parameters only)."""
    r = _quantile_rank.rank_error(epsilon_key, q.sensitivity, q.cells, level, q.level)
    return f"{q.output_name}_rank_error", numpy_to_arrow(np.full(rows, r.values, dtype=np.float64))


def rank_error_note(q: Quantile, epsilon_key: float, level: float) -> str:
    """The report's line on a quantile's rank error (what it bounds and what it is not)."""
    r = _quantile_rank.rank_error(epsilon_key, q.sensitivity, q.cells, level, q.level)
    return (f"{q.output_name}_rank_error = {r.values:.6g}: with probability >= {1.0 - r.miss:.4%} (level {level:.4g}; "
            f"exact worst case over all data for permute-and-flip over {q.cells} cells) the released cell's rank "
            f"score |#values below - q*#values outside| is within {r.values:.6g} of the best cell's; a rank bound "
            f"in values of the key, not a value interval (that would need the key's private values: "
            f"docs/proofs/intervals.md)")
