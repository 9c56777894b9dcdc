"""Progress of a release's long stages, for a display (the CLI's progress bar). Never part of a release.

:func:`sparsedp.release` wraps each stage in ``progress(stage)``; when that context manager yields a callable
``reporter(done, total, unit)``, it becomes the current reporter for the stage (:func:`reporting`) and the code
doing the work reports through :func:`report` where it knows how far it is:

* embedded engines: the per-key noise step, chunk by chunk (:mod:`sparsedp.core.noise_chunks`);
* DuckDB: its own estimate of the running query's progress, in percent (``query_progress()``), polled
  (:func:`polling`) while the bounding query runs;
* Spark: completed/total tasks of the active stages (the status tracker), polled.

Reports carry counts of work (chunks, tasks, percent), never data values, and go to the curator's display only.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
import time
from typing import Any, Callable, ContextManager, Iterator, Optional

__all__ = ["Reporter", "listening", "report", "reporting", "polling", "Stages"]

#: ``reporter(done, total, unit)``: ``total`` None when unknown; ``unit`` names what is counted ("chunks", "%")
Reporter = Callable[[float, Optional[float], str], None]
_CURRENT: contextvars.ContextVar[Optional[Reporter]] = contextvars.ContextVar("sparsedp_progress", default=None)


def listening() -> bool:
    """Whether a display listens (engines skip the work of measuring progress otherwise)."""
    return _CURRENT.get() is not None


def report(done: float, total: float | None = None, unit: str = "") -> None:
    """Report progress of the current stage (nothing when no display listens). A reporter that fails is
    ignored: a display must never break a release."""
    r = _CURRENT.get()
    if r is not None:
        try:
            r(done, total, unit)
        except Exception:
            pass


@contextlib.contextmanager
def reporting(reporter: object) -> Iterator[None]:
    """Make ``reporter`` (if callable) the current reporter inside the block."""
    if not callable(reporter):
        yield
        return
    token = _CURRENT.set(reporter)
    try:
        yield
    finally:
        _CURRENT.reset(token)


@contextlib.contextmanager
def polling(sample: Callable[[], tuple[float, float | None, str] | None], interval: float = 0.2) -> Iterator[None]:
    """While the block runs, call ``sample()`` every ``interval`` seconds on a background thread and report
    what it returns (``(done, total, unit)``, or None for nothing new). No thread when no display listens."""
    r = _CURRENT.get()
    if r is None:
        yield
        return
    stop = threading.Event()

    def loop() -> None:
        while not stop.wait(interval):
            try:
                got = sample()
                if got is not None:
                    r(*got)
            except Exception:  # a display must never break a release
                pass

    t = threading.Thread(target=loop, name="sparsedp-progress", daemon=True)
    t.start()
    try:
        yield
    finally:
        stop.set()
        t.join(timeout=2 * interval + 1)


class Stages:
    """The stage display and timings of one release: ``stage(label, timing)`` wraps a stage in the progress
    display's context (``progress(label)``, its reporter made current) and adds its seconds to
    ``timings[timing]``."""

    def __init__(self, progress: Callable[[str], ContextManager[Any]] | None, t_start: float) -> None:
        self.t_start = t_start
        self.timings: dict[str, float] = {}
        self._display = progress or (lambda name: contextlib.nullcontext())

    def mark(self, timing: str) -> None:
        """``timings[timing]`` = seconds since the release started."""
        self.timings[timing] = time.perf_counter() - self.t_start

    @contextlib.contextmanager
    def stage(self, label: str | None, timing: str) -> Iterator[None]:
        t = time.perf_counter()
        try:
            if label is None:
                yield
            else:
                with self._display(label) as reporter, reporting(reporter):
                    yield
        finally:
            self.timings[timing] = self.timings.get(timing, 0.0) + time.perf_counter() - t
