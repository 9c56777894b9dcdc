"""The registry of reproduction targets and the helpers every target uses.

A target is a function ``run(out_dir: Path, fast: bool) -> ReproResult`` registered with the
:func:`target` decorator in a module of this package named for its paper (``thesis_ch4.py``, …).
Every module of the package whose name does not start with ``_`` is imported by the package, so adding
a module is all it takes to add targets. A target writes the plotted numbers to a CSV and a PNG into
``out_dir`` and returns its headline numbers as ``(name, ours, paper's)`` tuples.
"""

from __future__ import annotations

import contextvars
import csv
import math
import numbers
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import NamedTuple, TypeVar

T = TypeVar("T")
#: ``progress(description, done, total)``: called by :func:`steps` as a target's main loop advances
Progress = Callable[[str, int, int], None]
_PROGRESS: contextvars.ContextVar[Progress | None] = contextvars.ContextVar("sparsedp_reproduce_progress",
                                                                           default=None)

from ..errors import InvalidParameterError


class Kind(str, Enum):
    """Where a reference number comes from. Only the first three are the paper's; ``RECOMPUTED`` numbers (a
    re-derivation or a prototype run made while writing the specification) are shown for context and never
    checked as the paper's."""

    PUBLISHED = "printed"          # a number printed in the paper (table, text, caption)
    FORMULA = "paper formula"      # the paper's closed form evaluated at the paper's parameters
    CLAIM = "paper claim"          # a qualitative statement read as a range ("≈ 0.7", "more than 10×")
    RECOMPUTED = "not the paper's"


@dataclass(frozen=True)
class Paper:
    """A paper's number for a headline: its ``value``, where it is printed (``cite``: table, figure or section),
    the range ``[lo, hi]`` our number must fall in to count as a match (the tolerance, stated with ``why``), and,
    for a known mismatch, the anchor of its explanation in ``docs/reproduce.md`` (``mismatch``)."""

    value: float
    cite: str
    lo: float
    hi: float
    kind: Kind = Kind.PUBLISHED
    why: str = ""
    mismatch: str = ""

    @classmethod
    def rel(cls, value: float, cite: str, rtol: float, **kw) -> "Paper":
        """Match when ``|ours/value − 1| <= rtol``."""
        a, b = value * (1 - rtol), value * (1 + rtol)
        return cls(value, cite, min(a, b), max(a, b), **kw)

    @classmethod
    def abs(cls, value: float, cite: str, atol: float, **kw) -> "Paper":
        """Match when ``|ours − value| <= atol``."""
        return cls(value, cite, value - atol, value + atol, **kw)

    def status(self, ours: float) -> str:
        if self.kind is Kind.RECOMPUTED:
            return "context (not the paper's)"
        if not math.isnan(ours) and self.lo <= ours <= self.hi:
            return "match"
        return f"documented mismatch (docs/reproduce.md#{self.mismatch})" if self.mismatch else "MISMATCH"


class Headline(NamedTuple):
    """One headline number: ours next to the paper's (``paper`` is None when the paper gives none; ``ref`` says
    where it is printed and how close ours must be, :class:`Paper`)."""

    name: str
    ours: float
    paper: float | None
    ref: "Paper | None" = None

    @classmethod
    def of(cls, name: str, ours: float, ref: "Paper | None") -> "Headline":
        return cls(name, float(ours), None if ref is None else ref.value, ref)

    @property
    def status(self) -> str:
        if self.ref is None:
            return "no paper number" if self.paper is None else "paper value without citation"
        return self.ref.status(self.ours)


@dataclass(frozen=True)
class ReproResult:
    """What a target produced: the files it wrote and its headline numbers."""

    name: str
    csv_path: Path
    png_path: Path | None
    headlines: tuple[Headline, ...]
    files: tuple[Path, ...] = field(default=())

    def headline(self, name: str) -> Headline:
        for h in self.headlines:
            if h.name == name:
                return h
        raise KeyError(name)

    def format(self, check: bool = False) -> str:
        """The headline numbers side by side, one per line; with ``check``, also the accepted range, the
        citation and the status of each (:meth:`Headline.status`)."""
        width = max([len(h.name) for h in self.headlines] + [8])
        head = f"  {'quantity':<{width}}  {'sparsedp':>14}  {'paper':>14}  {'ratio':>8}"
        if check:
            head += f"  {'accepted':>23}  {'source':<36}  status"
        lines = [f"{self.name}: wrote {self.csv_path}" + (f" and {self.png_path}" if self.png_path else ""), head]
        for h in self.headlines:
            paper = "-" if h.paper is None else _num(h.paper)
            ratio = "-" if (h.paper is None or h.paper == 0) else f"{h.ours / h.paper:8.4f}"
            line = f"  {h.name:<{width}}  {_num(h.ours):>14}  {paper:>14}  {ratio:>8}"
            if check:
                acc = "-" if h.ref is None else f"[{_num(h.ref.lo)}, {_num(h.ref.hi)}]"
                src = "-" if h.ref is None else f"{h.ref.cite} ({h.ref.kind.value})"
                line += f"  {acc:>23}  {src:<36}  {h.status}"
            lines.append(line)
        return "\n".join(lines)

    def mismatches(self) -> list[Headline]:
        """Headlines whose paper number ours misses without a documented reason (``status == "MISMATCH"``)."""
        return [h for h in self.headlines if h.status == "MISMATCH"]


def _num(x: float) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "nan"
    return f"{x:.6g}"


@dataclass(frozen=True)
class Target:
    """A registered reproduction: ``run(out_dir, fast)`` writes a CSV and a PNG and returns a ReproResult."""

    name: str
    description: str
    run: Callable[[Path, bool], ReproResult]


TARGETS: dict[str, Target] = {}


def target(name: str, description: str):
    """Register ``fn(out_dir: Path, fast: bool) -> ReproResult`` as the reproduction ``name``."""

    def register(fn: Callable[[Path, bool], ReproResult]):
        if name in TARGETS:
            raise InvalidParameterError(f"reproduce target {name!r} is registered twice")
        TARGETS[name] = Target(name=name, description=description, run=fn)
        return fn

    return register


def check_summary(missed: Sequence[str]) -> str:
    """The last line of ``sparsedp reproduce --check``: the paper numbers missed without a documented reason."""
    if not missed:
        return "check: every paper number is matched or its mismatch is documented in docs/reproduce.md"
    return "check: missed without a documented reason:\n  " + "\n  ".join(missed)


def list_targets() -> list[Target]:
    """All registered targets, sorted by name."""
    return [TARGETS[k] for k in sorted(TARGETS)]


def run(name: str, out_dir: str | Path = "reproduce-out", fast: bool = False,
        progress: Progress | None = None) -> ReproResult:
    """Run the target ``name`` (see :func:`list_targets`), writing its files into ``out_dir``.

    ``progress(description, done, total)`` is called as the target's main loop advances (targets that report
    it use :func:`steps`; the CLI shows a progress bar)."""
    if name not in TARGETS:
        known = ", ".join(sorted(TARGETS)) or "(none)"
        raise InvalidParameterError(f"unknown reproduce target {name!r}; known targets: {known}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    token = _PROGRESS.set(progress)
    try:
        return TARGETS[name].run(out, bool(fast))
    finally:
        _PROGRESS.reset(token)


def steps(items: Iterable[T], description: str) -> Iterator[T]:
    """``items``, reporting ``(description, done, total)`` to the running :func:`run`'s ``progress`` after each
    item (nothing when none is set). A target wraps its main loop in it: ``for s in steps(grid, "sigma grid")``."""
    seq = list(items)
    report = _PROGRESS.get()
    if report is not None:
        report(description, 0, len(seq))
    for i, x in enumerate(seq, 1):
        yield x
        if report is not None:
            report(description, i, len(seq))


def write_csv(path: Path, header: Sequence[str], rows: Iterable[Sequence[object]]) -> Path:
    """Write rows under a header; floats with full precision (repr)."""
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(list(header))
        for row in rows:
            w.writerow([_cell(x) for x in row])
    return path


def _cell(x: object) -> object:
    """Floats (numpy's too) at full precision as plain decimals; numpy integers as ints."""
    if isinstance(x, bool):
        return x
    if isinstance(x, numbers.Integral):
        return int(x)
    if isinstance(x, numbers.Real):
        return repr(float(x))
    return x


def read_csv(path: Path) -> list[dict[str, str]]:
    """The rows of a CSV written by :func:`write_csv`, as dicts (for tests and checks)."""
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def new_figure(ncols: int = 1, nrows: int = 1, size: tuple[float, float] | None = None):
    """A matplotlib Figure and its axes, drawn off-screen (Agg); no pyplot, no global backend change.

    matplotlib is imported here, lazily, so the rest of sparsedp does not need it.
    """
    try:
        from matplotlib.figure import Figure
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("sparsedp reproduce needs matplotlib: pip install 'sparsedp[plot]'") from e
    fig = Figure(figsize=size or (5.0 * ncols, 4.0 * nrows), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False)
    return fig, axes


def save_figure(fig, path: Path) -> Path:
    fig.savefig(path, dpi=120)
    return path
