"""Query kinds and the one stage runner every release goes through.

A query kind is what a user asks for — a sparse histogram (counts, sums, means; public-key histograms), a vector sum
or mean (:mod:`sparsedp.vectors`), an ALP structure (:mod:`sparsedp.alp_release`). Each is a
:class:`QueryKind`: an object built from the user's arguments (every argument checked, typed, frozen: no data read)
that implements the stages; :func:`run_query` runs them in the one order the guarantee needs::

    planned = query.plan()                      # 1. calibrate: no data read, no randomness
    ledger  = LedgerSession(ledger, dataset)    #    the budget named by ledger=/dataset= (checked)
    query.pre_check(ledger, planned)            # 2. ledger pre-check: refused before any data is read
    read    = query.read(planned)               # 3. the engine's pass: every input check happens here
    ledger.charge(planned.charge, ...)          # 4. committed before any noise is drawn
    drawn   = query.draw(planned, read)         # 5. the mechanism: every secret and noise word from the source
    return query.publish(planned, drawn, ledger)  # 6-7. the table, its public report, the curator's figures;
                                                #    the output writer, then the charge marked published

:class:`HistogramQuery` is :func:`sparsedp.release`'s kind: its stages are the mechanism's
(:meth:`Mechanism.plan_release <sparsedp.mechanisms.base.Mechanism.plan_release>`, ``read``, ``draw``) on a
:class:`~sparsedp.execution.ReleaseContext`, published by :func:`sparsedp.execution.publish`. A new query kind
subclasses :class:`QueryKind` and calls :func:`run_query`; nothing here changes.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Protocol

from .core import sources
from .execution import (LedgerSession, ReleaseContext, check_output_columns, open_engine, publish, result,
                        warn_before)
from .progress import Stages

__all__ = ["QueryKind", "Priced", "HistogramQuery", "run_query"]


class Priced(Protocol):
    """What a query kind's plan hands the ledger: the :class:`~sparsedp.ledger.Charge` of the whole release."""

    @property
    def charge(self) -> Any: ...


class QueryKind(ABC):
    """One query, its arguments already checked (the constructor's job: no data read, no randomness drawn).

    ``what`` names the query in the ledger's note; ``data`` is the input (its display name goes with the
    charge)."""

    what: str = "release"
    data: Any

    @abstractmethod
    def plan(self) -> Priced:
        """Stage 1: calibrate and price the release (no data read)."""

    def pre_check(self, ledger: LedgerSession, planned: Priced) -> None:
        """Stage 2: refuse a release the budget cannot admit, before any data is read."""
        ledger.check(planned.charge)

    @abstractmethod
    def read(self, planned: Priced) -> Any:
        """Stage 3: the engine's pass over the data; every input check happens here, before the charge."""

    @abstractmethod
    def draw(self, planned: Priced, read: Any) -> Any:
        """Stage 5 (after the charge): the private draw, every secret and noise word from the release's source."""

    @abstractmethod
    def publish(self, planned: Priced, drawn: Any, ledger: LedgerSession) -> Any:
        """Stages 6-7: the result (table, public report, curator-only figures), written by the one output
        writer where an output was asked for, then the charge marked published."""

    def close(self) -> None:
        """Release what the engine holds (always called, also after an error)."""


def run_query(query: QueryKind, ledger: Any, dataset: str | None) -> Any:
    """Run ``query``'s stages in the one order of the module docstring, charging ``dataset``'s budget in
    ``ledger`` (a :class:`~sparsedp.ledger.Ledger`, a ledger file, or ``None``) once, before any noise."""
    planned = query.plan()
    session = LedgerSession(ledger, dataset)
    try:
        query.pre_check(session, planned)
        read = query.read(planned)
        session.charge(planned.charge, sources.display(query.data), query.what)
        drawn = query.draw(planned, read)
        return query.publish(planned, drawn, session)
    finally:
        query.close()
        session.close()


class HistogramQuery(QueryKind):
    """:func:`sparsedp.release`'s query kind: a sparse histogram (counts, SUM/MEAN, public key lists) by the
    request's mechanism, on the request's engine. The stages are the mechanism's own; the pipeline names no
    mechanism and no engine."""

    def __init__(self, request: Any, t_start: float) -> None:
        self.request, self.data, self.t_start = request, request.data, t_start
        self.ctx: ReleaseContext | None = None
        self.delta_note: str | None = None

    def plan(self) -> Any:
        request = self.request
        planned = request.mechanism.plan_release(request.mechanism_request(), request.count.output_name)
        check_output_columns(request, planned.value_column)
        self.ctx = ReleaseContext(request, open_engine(request, request.mechanism), self.t_start)
        self.delta_note = warn_before(request)
        return planned

    def read(self, planned: Any) -> Any:
        assert self.ctx is not None
        read = self.request.mechanism.read(self.ctx, planned)
        self.ctx.warn_units(read.units)
        return read

    def draw(self, planned: Any, read: Any) -> Any:
        assert self.ctx is not None
        return self.request.mechanism.draw(self.ctx, planned, read)

    def publish(self, planned: Any, drawn: Any, ledger: LedgerSession) -> Any:
        assert self.ctx is not None
        table, report = publish(self.ctx, planned, drawn, ledger, self.delta_note)
        return result(self.ctx, table, report, drawn, self.t_start)

    def close(self) -> None:
        if self.ctx is not None:
            self.ctx.close()
