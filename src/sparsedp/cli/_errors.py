"""The one place where the library's errors become the CLI's: parameter names → flag names, one line, exit codes.

The library words its errors for Python callers (``max_groups_per_unit=…``, ``delta must be …``); every command
runs its library calls inside :func:`cli_errors` with a table ``{parameter name: flag}`` for that command, so the
user reads ``--max-groups …`` and ``--delta is required``. Usage errors exit with code 2, an interrupt (Ctrl-C,
or SIGTERM turned into one by :func:`sigterm_as_interrupt`) with 130; both print one line on stderr and no
traceback. Whatever was interrupted wrote nothing: outputs are written atomically
(:func:`sparsedp.engines.output.write_atomic`) and the ledger charge is committed only after the data are counted.
"""

from __future__ import annotations

import contextlib
import functools
import re
import signal
import sys
from typing import Any, Callable, Iterator, Mapping, NoReturn, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

import typer

#: exit code of a usage error (bad flag value, bad input, budget exceeded): nothing was written or charged
USAGE = 2
#: exit code after Ctrl-C / SIGTERM (128 + SIGINT, the shell convention)
INTERRUPTED = 130

#: the library's parameter names and the flags of ``sparsedp release`` (and ``demo``) that set them
RELEASE_FLAGS: Mapping[str, str] = {
    "privacy_unit": "--unit", "by": "--by", "epsilon": "--epsilon", "delta": "--delta",
    "max_groups_per_unit": "--max-groups", "top_k": "--top-k", "mechanism": "--mechanism", "engine": "--engine",
    "out": "--out", "ledger": "--ledger", "dataset": "--dataset", "pre_threshold": "--pre-threshold",
    "sketch_size": "--sketch-size", "unit_sketch": "--unit-sketch", "max_units": "--max-units",
    "domain_size": "--domain-size",
    "max_key_bytes": "--max-key-bytes", "query_keys": "--query-keys", "debias": "--shifted",
    "column_shape": "--column-shape",
    "split": "--split", "count_bound": "--count-bound",
}
#: ``sparsedp plan``
PLAN_FLAGS: Mapping[str, str] = {
    "epsilon": "--epsilon", "delta": "--delta", "max_groups_per_unit": "--max-groups", "l0": "--max-groups",
    "top_k": "--top-k", "k": "--k-sparse", "max_units": "--max-units", "noise": "--noise",
}
#: ``sparsedp ledger …``
LEDGER_FLAGS: Mapping[str, str] = {
    "dataset": "--dataset", "epsilon": "--epsilon", "delta": "--delta", "max_groups_per_unit": "--max-groups",
    "l0": "--max-groups", "top_k": "--top-k", "mechanism": "--mechanism", "neighbours": "--neighbours",
}
#: ``sparsedp audit``
AUDIT_FLAGS: Mapping[str, str] = {
    "epsilon": "--epsilon", "delta": "--delta", "bound": "--l0", "runs": "--runs", "sigma_scale": "--sigma-scale",
    "margin_shift": "--margin-shift", "law_runs": "--law-runs", "scenarios": "--scenario",
    "confidence": "--confidence", "seed": "--seed",
}
#: ``sparsedp demo``
DEMO_FLAGS: Mapping[str, str] = {
    "epsilon": "--epsilon", "delta": "--delta", "max_groups_per_unit": "--max-groups", "out": "--out",
    "rows": "--rows", "n_rows": "--rows", "seed": "--seed",
}
#: ``sparsedp reproduce``
REPRODUCE_FLAGS: Mapping[str, str] = {"name": "NAME", "target": "NAME", "out": "--out"}

#: ``sparsedp sketch``
SKETCH_FLAGS: Mapping[str, str] = {
    "by": "--by", "sketch_size": "--sketch-size", "epsilon": "--epsilon", "delta": "--delta",
    "release": "--release", "combine": "--combine", "universe_size": "--universe-size", "out": "--out",
    "ledger": "--ledger", "dataset": "--dataset",
}
#: ``sparsedp sum`` / ``sparsedp mean``
VECTOR_FLAGS: Mapping[str, str] = {
    "privacy_unit": "--unit", "columns": "--columns", "coordinate": "--coordinate", "value": "--value",
    "coordinates": "--coordinates", "lower": "--lower", "upper": "--upper", "max_norm": "--max-norm",
    "epsilon": "--epsilon", "delta": "--delta", "rho": "--rho", "mechanism": "--mechanism",
    "neighbours": "--neighbours", "shape": "--shape", "variances": "--variances", "method": "--method",
    "out": "--out", "ledger": "--ledger", "dataset": "--dataset",
}

#: Python idioms in library advice and what a CLI user types instead
_IDIOMS = (
    (re.compile(r"aggregates=\[sd\.Count\(name=…\)\]"), "--count-column NAME"),
    (re.compile(r"sd\.Count\(name=…\)"), "--count-column NAME"),
    (re.compile(r",? or mechanism=sd\.TopKCSH\(k=…\)"), ""),
)
_LINE_MARK = re.compile(r"^\s*(LINE \d+:.*|\^+\s*)$")
_NONE = re.compile(r"^(?P<flag>--[\w-]+) must be (?P<what>.+?), got (NoneType )?None$")


def to_cli(message: str, flags: Mapping[str, str]) -> str:
    """``message`` (a library error) in the command's terms, on one line.

    For each ``parameter → flag`` of ``flags``: ``parameter=value`` and ``parameter=…`` become ``flag value`` /
    ``flag`` (quotes around a simple value dropped); a parameter name with an underscore (unambiguous) is
    replaced wherever it stands as a word; a plain word (``delta``, ``dataset``) only where it opens the
    message as its subject (``delta must be …``) or is the object of "give", "pass" or "with". A required value that is missing (``… got None``) reads
    ``flag is required (…)``. Multi-line messages (DuckDB's SQL errors with a caret line) are joined into one
    line without the position marks.
    """
    lines = [ln.strip() for ln in str(message).splitlines() if ln.strip() and not _LINE_MARK.match(ln)]
    text = "; ".join(lines)
    for pattern, repl in _IDIOMS:
        text = pattern.sub(repl, text)
    for name in sorted(flags, key=len, reverse=True):
        flag = flags[name]
        text = re.sub(rf"(?<![\w.-]){re.escape(name)}=(['\"]?)([\w.-]+)\1(?![\w(-]|\.[\w(])",
                      lambda m: f"{flag} {m.group(2)}", text)
        text = re.sub(rf"(?<![\w.-]){re.escape(name)}=…", flag, text)
        if "_" in name:
            text = re.sub(rf"(?<![\w.-]){re.escape(name)}(?![\w=(])", flag, text)
        else:
            text = re.sub(rf"^{re.escape(name)}(?= (must|is|has|needs|=))", flag, text)
            text = re.sub(rf"(?<=\b(give|pass|with) ){re.escape(name)}(?=[ ,;:)]|$)", flag, text)
    m = _NONE.match(text)
    if m:
        text = f"{m.group('flag')} is required ({m.group('what')})"
    return text


def fail(message: Any, flags: Mapping[str, str] = {}, code: int = USAGE) -> NoReturn:
    """Print ``error: <message in flag terms>`` on stderr (one line) and exit with ``code``."""
    typer.echo(f"error: {to_cli(str(message), flags)}", err=True)
    raise typer.Exit(code=code)


def interrupted(note: str = "nothing was written") -> NoReturn:
    """Print the one interrupt line and exit 130."""
    typer.echo(f"interrupted: {note}" if note else "interrupted", err=True)
    raise typer.Exit(code=INTERRUPTED)


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Turn SIGTERM into KeyboardInterrupt so clean-up (removing a half-written temp file) runs."""
    def handler(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    try:
        old = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not in the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


@contextlib.contextmanager
def cli_errors(flags: Mapping[str, str], interrupt_note: str = "nothing was written") -> Iterator[None]:
    """Run a command's library calls: a :class:`~sparsedp.errors.SparsedpError` exits 2 with its message in
    ``flags`` terms (:func:`to_cli`), an interrupt (Ctrl-C, SIGTERM, DuckDB's ``InterruptException``) exits
    130; one line on stderr either way, no traceback."""
    from ..errors import SparsedpError

    try:
        with sigterm_as_interrupt():
            yield
    except SparsedpError as e:
        fail(e, flags)
    except KeyboardInterrupt:
        interrupted(interrupt_note)
    except Exception as e:
        if is_interrupt(e):
            interrupted(interrupt_note)
        raise


def is_interrupt(e: BaseException) -> bool:
    """An interrupt a data library turned into its own exception (DuckDB: ``duckdb.InterruptException``)."""
    return isinstance(e, KeyboardInterrupt) or type(e).__name__ == "InterruptException" and \
        type(e).__module__.split(".")[0] in ("duckdb", "_duckdb")


def warn_line(message: str) -> None:
    """A warning for the user: one ``warning: …`` line on stderr (the command continues)."""
    print(f"warning: {message}", file=sys.stderr)


def interruptible(command: F) -> F:
    """Decorator for a command: Ctrl-C (or SIGTERM) anywhere in it exits 130 with one line, instead of click's
    "Aborted!" and exit 1. Put it under ``@app.command()``."""
    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            with sigterm_as_interrupt():
                return command(*args, **kwargs)
        except KeyboardInterrupt:  # outputs are atomic and ledger writes transactional: nothing half-written
            interrupted()
    return wrapper  # type: ignore[return-value]
