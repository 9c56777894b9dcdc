"""The stages of one release after its plan: the engine, the ledger, the publication and the report.

:func:`sparsedp.release` builds a :class:`~sparsedp.request.Request`, asks its mechanism for a plan
(:meth:`Mechanism.plan_release <sparsedp.mechanisms.base.Mechanism.plan_release>`) and runs it here:
:func:`open_engine` → ledger pre-check (:class:`LedgerSession`) → the mechanism's ``read`` on a
:class:`ReleaseContext` → the charge → the mechanism's ``draw`` → :func:`publish` (the table, written atomically
with its guarantee) → :func:`result` (the public report and the curator's figures). Nothing here names a
mechanism; the only engine distinction is the input's own kind (a Spark DataFrame in, a Spark DataFrame out).
"""

from __future__ import annotations

import dataclasses
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator

import numpy as np

from . import __version__
from .advice import DeltaWarning, delta_note, delta_units_note
from .core import sources
from .core.engine import lacks_error
from .engines import get_engine
from .core.arrow_arrays import take_rows
from .engines.choice import choose_engine
from .engines.output import OUTPUT_KIND, convert, write_atomic
from .errors import InvalidParameterError, OutputWriteError, warn_at_caller
from .mechanisms.row_intervals import add_intervals, interval_notes
from .progress import Stages
from .report import Curator, Report, Result, warn_insecure
from .core.lazy import imported, lazy_module

if TYPE_CHECKING:
    from . import ledger as _ledger, other_row as _other_row
else:  # the ledger (sqlite3, privacy-loss composition): imported by a release given ``ledger=`` only; the other
    # row by a release with ``other=…`` (issue 31)
    _ledger, _other_row = lazy_module("sparsedp.ledger"), lazy_module("sparsedp.other_row")

__all__ = ["ReleaseContext", "LedgerSession", "Published", "open_engine", "check_output_columns", "warn_before",
           "publish", "result"]


class ReleaseContext(Stages):
    """What a mechanism's ``read`` and ``draw`` stages run on: the engine, the input, the key columns, the
    release's random source, the stage display (:class:`~sparsedp.progress.Stages`: ``stage(label, timing)``,
    the progress display's context, its seconds added to ``timings[timing]``) and the engine results to release
    at the end (``track``)."""

    def __init__(self, request: Any, engine: Any, t_start: float) -> None:
        super().__init__(request.progress, t_start)
        self.request, self.engine = request, engine
        self.data, self.unit, self.by, self.source = request.data, request.unit, request.by, request.source
        self.mark("validate")
        self.hists: list[Any] = []
        self.units_warning: str | None = None
        #: the released rows' public error laws (set when the table is published)
        self.row_laws: Any = None

    def track(self, hist: Any) -> Any:
        """Keep ``hist`` (an engine result) to release its resources when the release ends."""
        self.hists.append(hist)
        return hist

    @contextmanager
    def reading(self, data: Any) -> Iterator[None]:
        """The stages inside read ``data`` in place of the request's input: the rows the automatic bound's first
        read kept (:meth:`~sparsedp.core.engine.Engine.read_unit_key_counts`), so the input is read once."""
        saved, self.data = self.data, data
        try:
            yield
        finally:
            self.data = saved

    def warn_units(self, units: int | None) -> None:
        """The curator-only δ advice once the number of units is known (:func:`sparsedp.advice.delta_units_note`)."""
        if units is None:
            return
        self.units_warning = delta_units_note(self.request.delta, units)
        if self.units_warning:
            warn_at_caller(self.units_warning, DeltaWarning)

    def close(self) -> None:
        for hist in self.hists:
            self.engine.release_resources(hist)


def open_engine(request: Any, mechanism: Any) -> Any:
    """The engine for the request's input (``engine=`` or the default for the input's kind), refused if the
    mechanism lacks a primitive on it (:meth:`Mechanism.check_engine`); file formats and SQL are checked here."""
    kind = sources.kind(request.data)
    if kind == "file":
        sources.file_format(request.data)
    elif kind == "sql":
        sources.check_sql(request.data)
    engine = get_engine(request.engine, request.data, request.connection)
    missing = mechanism.needs(request) - engine.capabilities
    if missing:
        raise lacks_error(engine.name, missing, f"mechanism={mechanism.describe()}", mechanism.lacks_hint)
    mechanism.check_engine(engine)
    return engine


def check_output_columns(request: Any, value_column: str) -> None:
    """The released value column must not collide with an input column or a SUM/MEAN output column."""
    if value_column in request.by or value_column == request.unit:
        raise InvalidParameterError(f"the output column {value_column!r} is also an input column; name the count "
                                    f"otherwise: ⟨count_name|aggregates=[sd.Count(name=…)]⟩", param="count_name")
    if value_column in {a.output_name for a in request.sums}:
        raise InvalidParameterError(f"the output column {value_column!r} is also a SUM/MEAN output column; give "
                                    f"them distinct names")


def warn_before(request: Any) -> str | None:
    """The warnings known before any data is read (float noise, a risky δ); returns the δ note for the report."""
    note = delta_note(request.delta)
    if request.insecure_float:
        warn_insecure()
    if note:
        warn_at_caller(note, DeltaWarning)
    return note


class LedgerSession:
    """The ledger side of one release: opened from ``ledger=``/``dataset=`` (checked: the dataset must have a
    budget), pre-checked, charged once (before any noise), marked published, closed if this release opened it."""

    def __init__(self, ledger: Any, dataset: str | None) -> None:
        self.ledger: _ledger.Ledger | None = None
        self.dataset = dataset
        self.owned = False
        self.charge_id: int | None = None
        if ledger is None:
            if dataset is not None:
                raise InvalidParameterError("⟨dataset=…⟩ names a budget in a ledger; pass ⟨ledger=…⟩ too",
                                            param="ledger")
            return
        if dataset is None:
            raise InvalidParameterError("⟨ledger=…⟩ needs ⟨dataset=…⟩: the name of the dataset whose budget the "
                                        "release charges", param="dataset")
        _ledger._dataset_name(dataset)
        self.ledger, self.owned = _ledger.open_ledger(ledger)
        try:
            self.ledger.budget(dataset)  # the dataset must have a budget (raises with the fix otherwise)
        except BaseException:
            self.close()
            raise

    def check(self, charge: Any) -> None:
        if self.ledger is not None and self.dataset is not None:
            self.ledger.check(self.dataset, charge)

    def charge(self, charge: Any, source_name: str, what: str = "release") -> None:
        if self.ledger is not None and self.dataset is not None:
            self.charge_id = self.ledger.charge(self.dataset, charge, note=f"{what} {source_name}")

    def published(self, output: str | None) -> None:
        if self.ledger is not None and self.charge_id is not None:
            self.ledger.mark_published(self.charge_id, output)

    def close(self) -> None:
        if self.owned and self.ledger is not None:
            self.ledger.close()
        self.ledger = None


def _sorted_table(arrow: Any, value_column: str, by: Any = ()) -> Any:
    """Largest value first (stable: ties keep the engine's canonical key order); a row whose key is null (the
    other row, :mod:`sparsedp.other_row`: a real key is never null) last."""
    import polars as pl  # heavy: loaded by the engines before a table is published

    # through a Polars frame: pyarrow's to_numpy imports pandas, Polars' Series-from-Arrow pyarrow.compute
    by = [c for c in by[:1] if c in arrow.column_names]  # some releases key on a joined column
    frame = pl.from_arrow(arrow.select([value_column, *by]))
    assert isinstance(frame, pl.DataFrame)  # a Table converts to a DataFrame
    values = frame[value_column].to_numpy()
    order = np.argsort(-values, kind="stable")
    if by and frame[by[0]].null_count():
        order = order[np.argsort(frame[by[0]].is_null().to_numpy()[order], kind="stable")]
    return take_rows(arrow, order)


def _key_rows(arrow: Any, by: Any) -> int:
    """The released keys of a table (the other row's null key is not one)."""
    return int(arrow.num_rows - (arrow.column(by[0]).null_count if by and by[0] in arrow.column_names else 0))


@dataclass(frozen=True)
class Published:
    """The released table as Arrow (``None``: a Spark result not written to a file) and in the caller's frame
    type (``native``: the Spark DataFrame for Spark input), with its row count."""

    arrow: Any
    native: Any
    rows: int


#: the engine's value column of a keys-only release (value column ``""``: key discovery, e.g.
#: ``optimal-partition``), dropped before the table is published
_KEYS_ONLY_COLUMN = "__sparsedp_keys_only"


def _tables(ctx: ReleaseContext, released: Any, value_column: str) -> Published:
    """The released rows as a sorted Arrow table (and a Spark DataFrame for Spark input: Spark in, Spark out).
    A keys-only release (``value_column == ""``) publishes the ``by`` columns only, in canonical key order."""
    if not value_column:
        t = _tables(ctx, released, _KEYS_ONLY_COLUMN)
        return Published(None if t.arrow is None else t.arrow.drop_columns([_KEYS_ONLY_COLUMN]),
                         None if t.native is None else t.native.drop(_KEYS_ONLY_COLUMN), t.rows)
    eng, by, spark = ctx.engine, list(ctx.by), sources.kind(ctx.data) == "spark"
    if released.in_process:
        arrow = _sorted_table(released.rows, value_column, by)
        return Published(arrow, eng.from_arrow(arrow) if spark else None, _key_rows(arrow, by))
    if spark:
        native, n_rows = eng.native(released.rows, by, value_column)
        arrow = _sorted_table(eng.to_arrow(released.rows, by, value_column), value_column, by) \
            if ctx.request.out else None
        return Published(arrow, native, n_rows)
    arrow = _sorted_table(eng.to_arrow(released.rows, by, value_column), value_column, by)
    return Published(arrow, None, _key_rows(arrow, by))


def _report(request: Any, planned: Any, released: Any, rows: int, delta_note: str | None) -> Report:
    """The public report, built from the charged event and the run's disclosure (the plan's, or the run's
    re-plan's mechanism)."""
    final = released.planned or planned
    return Report(event=planned.charge.event, disclosure=released.disclosure, mechanism=final.mechanism.name,
                  options=final.mechanism.options(), reason=final.reason, released_keys=int(rows),
                  insecure_float=request.insecure_float, advice=(delta_note,) if delta_note else (),
                  candidates=final.candidates, version=__version__, **released.report_fields)


def _intervals(ctx: ReleaseContext, planned: Any, released: Any, tables: Published) -> tuple[Published, Any]:
    """The rows' public error laws (kept on ``ctx`` for :meth:`Result.release_probability`) and, with
    ``release(..., interval=…)``, the interval columns and the report's notes on them
    (:mod:`sparsedp.mechanisms.row_intervals`). Post-processing of the released table: no data, no noise."""
    final = released.planned or planned
    laws = released.row_laws if released.row_laws is not None else \
        final.mechanism.row_laws(final.request, final.calibration, final.value_column)
    ctx.row_laws = laws
    level = ctx.request.interval
    if level is None or not final.value_column:  # no intervals asked for, or a keys-only release: no values
        return tables, released
    if laws is None:
        notes = interval_notes(laws, level, {}, final.mechanism.name)
        return tables, dataclasses.replace(released, disclosure=released.disclosure.with_notes(*notes))
    base = tables.arrow
    if base is None:  # a Spark frame not written to a file: its published rows (few) collected once, in the
        # published frame's own order (value, then the key columns), so the table keeps it with its intervals
        base = ctx.engine.to_arrow(tables.native, list(ctx.by), planned.value_column)
    arrow, added = add_intervals(base, laws, level, final.value_column)
    notes = interval_notes(laws, level, added.coverage, final.mechanism.name, added.skipped)
    if imported(_other_row) and isinstance(planned.detail, _other_row.OtherPlan):  # the other row's interval
        arrow, note = _other_row.with_other_interval(arrow, list(ctx.by), final.value_column, planned.detail, level)
        notes += (note,) if note else ()
    # Spark in, Spark out: the table with its intervals, converted once
    native = ctx.engine.from_arrow(arrow) if tables.native is not None else None
    return (Published(arrow, native, tables.rows),
            dataclasses.replace(released, disclosure=released.disclosure.with_notes(*notes)))


def publish(ctx: ReleaseContext, planned: Any, released: Any, ledger: LedgerSession,
            delta_note: str | None) -> tuple[Any, Report]:
    """Stage 6: ``(table, report)``; only released rows leave the engine, the file is written atomically with the
    report as metadata, then the charge is marked published."""
    request = ctx.request
    with ctx.stage("writing the output" if request.out else "building the table", "output"):
        tables = _tables(ctx, released, planned.value_column)
        tables, released = _intervals(ctx, planned, released, tables)
        report = _report(request, planned, released, tables.rows, delta_note)
        table = tables.native if tables.native is not None else convert(
            tables.arrow, OUTPUT_KIND.get(sources.kind(request.data), "polars"))
        if request.out:
            path, fmt = request.out
            try:
                write_atomic(tables.arrow, path, fmt, metadata=report.metadata(), charge_id=ledger.charge_id)
            except OutputWriteError as e:  # the budget is spent: hand the caller what it paid for
                e.table, e.report = table, report
                raise
        ledger.published(request.out[0] if request.out else None)
    return table, report


def result(ctx: ReleaseContext, table: Any, report: Report, released: Any, t_start: float) -> Result:
    """Stage 7: the :class:`~sparsedp.report.Result` with the curator-only figures."""
    request = ctx.request
    ctx.timings["total"] = time.perf_counter() - t_start
    engine_choice = None
    if request.engine is None:
        engine_choice = choose_engine(request.data).describe()
    fields = {"auto_bound": None, **released.curator_fields}
    curator = Curator(engine=ctx.engine.name, source=sources.display(request.data),
                      bounding=ctx.engine.stats(ctx.hists[-1] if ctx.hists else None), timings=ctx.timings,
                      output=request.out[0] if request.out else None, engine_choice=engine_choice,
                      warnings=(ctx.units_warning,) if ctx.units_warning else (), **fields)
    return Result(table=table, report=report, curator=curator, query=released.query, row_laws=ctx.row_laws)
