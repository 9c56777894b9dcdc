"""The exceptions sparsedp raises on purpose.

Every error a user can cause is a subclass of :class:`SparsedpError`. Parameter errors also subclass
``ValueError`` (or ``TypeError``) so generic handlers keep working. The classes follow Polars' split (a column not
found, no data, a bad parameter, a budget exceeded, ...) under the older, broader classes, which stay the bases:
``except InputDataError`` still catches a :class:`ColumnNotFoundError`.

**Errors that know their argument.** An error carries, as fields, the parameter it is about (``param``, the
library's keyword name, e.g. ``"max_groups_per_unit"``) and the fix (``fix``). Its text is a template in which
every parameter it names is written as a marker, so each interface prints it in its own terms without parsing
the message:

* ``⟨name⟩`` — the parameter itself: ``name`` in Python, its flag (``--max-groups``) on the command line;
* ``⟨name=…⟩`` — "give this parameter": ``name=…`` in Python, ``--flag`` on the command line;
* ``⟨name=value⟩`` — a value of it: ``name=value`` in Python, ``--flag value`` on the command line;
* ``⟨name|label⟩`` — the parameter under another name in Python (``⟨auto_share|AutoBound share⟩``).

``str(error)`` is the Python rendering; :meth:`SparsedpError.render` takes another naming (the CLI passes its
table ``{parameter: flag}``, :mod:`sparsedp.cli._errors`). Errors raised with plain text (no markers) render the
same everywhere.
"""

from __future__ import annotations

import os
import re
import sys
import warnings
from typing import Any, Callable, Mapping

#: a parameter marker in an error template: ⟨name⟩, ⟨name=…⟩, ⟨name=value⟩
_MARKER = re.compile(r"⟨([A-Za-z_][A-Za-z0-9_]*)(?:\|([^⟩]*)|=([^⟩]*))?⟩")


def param_text(name: str, value: str | None = None, label: str | None = None) -> str:
    """The marker naming parameter ``name`` (``value=None``), asking for it (``"…"``) or giving ``value``;
    ``label``: how Python callers know it, when not by ``name``. A name that is not an identifier is returned
    as it is (no marker)."""
    if not name.isidentifier():
        return name if value is None else f"{name}={value}"
    if label is not None:
        return f"⟨{name}|{label}⟩"
    return f"⟨{name}⟩" if value is None else f"⟨{name}={value}⟩"


def render(template: str, flags: Mapping[str, str] | Callable[[str], str | None] | None = None) -> str:
    """``template`` with its parameter markers in the terms of ``flags`` (``{parameter: flag}`` or a function
    returning a flag or None); a parameter without a flag, or ``flags=None``, reads as in Python."""
    look: Callable[[str], str | None]
    if flags is None:
        look = lambda name: None  # noqa: E731
    elif callable(flags):
        look = flags
    else:
        look = flags.get

    def one(m: re.Match[str]) -> str:
        name, label, value = m.group(1), m.group(2), m.group(3)
        flag = look(name)
        if flag is None:
            shown = label if label is not None else name
            return shown if value is None else f"{shown}={value}"
        if value is None or value in ("…", "True"):  # a switch: the flag alone
            return flag
        return f"{flag} {value.strip(chr(39)).strip(chr(34))}"

    return _MARKER.sub(one, template)


class ParamText(str):
    """A message (a warning, a report note) that names parameters: the string is its Python rendering, and
    ``template`` keeps the markers so that another interface (the CLI) can render it in its own terms
    (:func:`render`)."""

    template: str

    def __new__(cls, template: str) -> "ParamText":
        obj = super().__new__(cls, render(template))
        obj.template = template
        return obj


class SparsedpError(Exception):
    """Base class of every error sparsedp raises deliberately.

    ``param``: the parameter the error is about (its keyword name), or None; ``fix``: what to do, or None (also
    a template). The message is ``template`` (then ``"; " + fix`` when a fix is given) rendered for Python.
    """

    def __init__(self, message: Any = "", *, param: str | None = None, fix: str | None = None) -> None:
        self.template = str(message)
        self.param = param
        self.fix = fix
        super().__init__(self.render())

    def render(self, flags: Mapping[str, str] | Callable[[str], str | None] | None = None) -> str:
        """The message with parameters named in the terms of ``flags`` (see :func:`render`)."""
        text = render(self.template, flags)
        if self.fix:
            text = f"{text}; {render(self.fix, flags)}"
        return text

    def __str__(self) -> str:
        return self.render()

    def __reduce__(self) -> tuple[Any, ...]:  # pickles with its fields (Spark, multiprocessing)
        return _rebuild, (type(self), dict(self.__dict__))


def _rebuild(cls: type[SparsedpError], state: dict[str, Any]) -> SparsedpError:
    err = Exception.__new__(cls)
    err.__dict__.update(state)
    Exception.__init__(err, err.render())
    return err


class InvalidParameterError(SparsedpError, ValueError):
    """A parameter is out of range or of the wrong kind; ``param`` names it, the message says the fix."""


class InvalidTypeError(SparsedpError, TypeError):
    """A parameter has the wrong type."""


class InfeasibleError(SparsedpError, ValueError):
    """A calibration request cannot be met; the message says which constraint fails."""


class InputDataError(SparsedpError, ValueError):
    """The data violate a requirement (missing column, nulls, negative counts, ...). Nothing was released."""


class ColumnNotFoundError(InputDataError):
    """A column the release needs is not in the data; ``param`` is the argument that named it."""


class ColumnTypeError(InputDataError):
    """A column holds values the release cannot use as they are (e.g. a key or unit column mixing ints and
    strings); ``column`` names it. Refused on every engine before any budget is charged."""

    def __init__(self, message: Any = "", *, column: str, param: str | None = None, fix: str | None = None):
        self.column = column
        super().__init__(message, param=param, fix=fix)


class NoDataError(InputDataError):
    """The input has no rows (or none left after the checks)."""


class InputFormatError(InputDataError):
    """An input file cannot be read as given (ragged CSV rows, a text encoding other than UTF-8, not Parquet
    or CSV); the message says where and how to read it."""


class OutputExistsError(InvalidParameterError):
    """The output file exists; it is replaced only when asked (``overwrite=True``, ``--overwrite``). Raised
    before anything is read or charged."""


class OutputWriteError(SparsedpError):
    """Writing the output failed after the release was computed (disk full, device gone). ``charge_id`` is the
    ledger charge the release made (the budget stays spent: the noise was drawn), or None; nothing half-written
    is left at ``path``; ``table`` and ``report`` hold the released table and its public report so that a
    Python caller can still save what it paid for."""

    def __init__(self, message: Any = "", *, path: str, charge_id: int | None = None, param: str | None = "out",
                 fix: str | None = None, table: Any = None, report: Any = None):
        self.path = path
        self.charge_id = charge_id
        self.table = table
        self.report = report
        super().__init__(message, param=param, fix=fix)


class GuaranteeMismatchError(InputDataError):
    """A released file and its guarantee metadata do not describe the same table (e.g. an interrupted
    overwrite left a new CSV sidecar next to an older CSV). Do not publish the pair."""


class BudgetExceededError(SparsedpError):
    """A release would exceed the privacy budget recorded in a ledger. Nothing was released.

    ``dataset``, ``budget`` (ε, δ), ``spent`` (ε at the budget's δ), ``remaining`` (ε at the budget's δ) and
    ``needed`` (the refused release's (ε, δ)) are given as fields when the ledger knows them."""

    def __init__(self, message: Any = "", *, dataset: str | None = None, budget: tuple[float, float] | None = None,
                 spent: float | None = None, remaining: float | None = None,
                 needed: tuple[float, float] | None = None, param: str | None = None, fix: str | None = None):
        self.dataset = dataset
        self.budget = budget
        self.spent = spent
        self.remaining = remaining
        self.needed = needed
        super().__init__(message, param=param, fix=fix)


def warn_at_caller(message: str, category: type[Warning]) -> None:
    """``warnings.warn`` attributed to the user's line: the first frame outside the sparsedp package, however deep
    inside the pipeline the warning is raised (a fixed ``stacklevel`` breaks whenever a stage moves)."""
    package = os.path.dirname(os.path.abspath(__file__)) + os.sep
    frame = sys._getframe(1)
    level = 2  # stacklevel 2 = the caller of this function
    while frame.f_back is not None and os.path.abspath(frame.f_code.co_filename).startswith(package):
        frame = frame.f_back
        level += 1
    warnings.warn(message, category, stacklevel=level)
