"""The one place where the library's errors become the CLI's: parameter names → flag names, one line, exit codes.

The library's errors carry the parameters they name as fields (:mod:`sparsedp.errors`: ``param``, and markers in
the message); every command runs its library calls inside :func:`cli_errors` with a table ``{parameter name:
flag}`` for that command, so the user reads ``--max-groups must be >= 1`` where a Python caller reads
``max_groups_per_unit must be >= 1``. No message is parsed. Usage errors exit with code 2, an interrupt (Ctrl-C,
or SIGTERM turned into one by :func:`sigterm_as_interrupt`) with 130; both print one line on stderr and no
traceback. Whatever was interrupted wrote nothing: outputs are written atomically
(:func:`sparsedp.engines.output.write_atomic`) and the ledger charge is committed only after the data are counted.
"""

from __future__ import annotations

import contextlib
import functools
import signal
import sys
from typing import Any, Callable, Iterator, Mapping, NoReturn, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

import typer
from typer.core import TyperCommand

from ..errors import SparsedpError, render

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
    "split": "--split", "count_bound": "--count-bound", "auto_share": "--auto-share",
    "auto_quantile": "--auto-quantile", "auto_objective": "--auto-objective", "overwrite": "--overwrite",
    "aggregates": "--sum/--mean/--variance/--std", "count_name": "--count-column", "keys": "--keys", "group": "--group",
    "quantile": "--quantile/--median", "share": "--quantile/--median",
    "other": "--other",
    "objective": "--objective",
    "interval": "--interval",
}
#: ``sparsedp plan``
PLAN_FLAGS: Mapping[str, str] = {
    "epsilon": "--epsilon", "delta": "--delta", "max_groups_per_unit": "--max-groups", "l0": "--max-groups",
    "top_k": "--top-k", "k": "--k-sparse", "max_units": "--max-units", "noise": "--noise",
    "quantile": "--quantile", "share": "--quantile", "keys": "--keys", "selected": "--selected",
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
    "rows": "--rows", "n_rows": "--rows", "seed": "--seed", "overwrite": "--overwrite",
}
#: ``sparsedp reproduce``
REPRODUCE_FLAGS: Mapping[str, str] = {"name": "NAME", "target": "NAME", "out": "--out"}

#: ``sparsedp sketch``
SKETCH_FLAGS: Mapping[str, str] = {
    "by": "--by", "sketch_size": "--sketch-size", "epsilon": "--epsilon", "delta": "--delta",
    "release": "--release", "combine": "--combine", "universe_size": "--universe-size", "out": "--out",
    "ledger": "--ledger", "dataset": "--dataset", "overwrite": "--overwrite",
}
#: ``sparsedp sum`` / ``sparsedp mean``
VECTOR_FLAGS: Mapping[str, str] = {
    "privacy_unit": "--unit", "columns": "--columns", "coordinate": "--coordinate", "value": "--value",
    "coordinates": "--coordinates", "lower": "--lower", "upper": "--upper", "max_norm": "--max-norm",
    "epsilon": "--epsilon", "delta": "--delta", "rho": "--rho", "mechanism": "--mechanism",
    "neighbours": "--neighbours", "shape": "--shape", "variances": "--variances", "method": "--method",
    "out": "--out", "ledger": "--ledger", "dataset": "--dataset", "overwrite": "--overwrite",
}

#: the lines of DuckDB's SQL errors that only point at a position (``LINE 1: …`` and its caret line)
_POSITION_LINES = ("LINE ",)


def to_cli(message: Any, flags: Mapping[str, str]) -> str:
    """``message`` in the command's terms, on one line.

    A :class:`~sparsedp.errors.SparsedpError` knows the parameters it names (its ``param`` field and the
    markers of its template, :mod:`sparsedp.errors`): each is shown as its flag in ``flags`` (``{parameter
    name: flag}``), so nothing is guessed from the wording. Other text (a warning, a third-party error) is shown
    as it is. Multi-line messages (DuckDB's SQL errors with a caret line) are joined into one line without the
    position marks.
    """
    if isinstance(message, Warning) and message.args:  # a warning's text (a ParamText keeps its template)
        message = message.args[0]
    if isinstance(message, SparsedpError):
        text = message.render(flags)
    else:
        text = render(getattr(message, "template", str(message)), flags)
    lines = [ln.strip() for ln in text.splitlines()
             if ln.strip() and not ln.strip().startswith(_POSITION_LINES) and set(ln.strip()) != {"^"}]
    return "; ".join(lines)


def fail(message: Any, flags: Mapping[str, str] = {}, code: int = USAGE) -> NoReturn:
    """Print ``error: <message in flag terms>`` on stderr (one line) and exit with ``code``."""
    typer.echo(f"error: {to_cli(message, flags)}", err=True)
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


class OnceCommand(TyperCommand):
    """A command whose single-valued options may be given once. Click keeps the last of repeated values without
    a word, so ``--epsilon 1 … --epsilon 10`` would release (and charge) at ε = 10; here a repeated option is a
    usage error naming it, before anything runs. Options that take several values (``--sum``, ``--by``,
    ``--keys``, ``--option``…) and on/off flags are unaffected. Every command is one: :class:`Commands` (the
    ``sparsedp`` app and its sub-apps) makes it the default class (``sparsedp release``: a subclass)."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        options = {name: p for p in self.params if p.param_type_name == "option"
                   for name in (*p.opts, *p.secondary_opts)}
        given: dict[str, str] = {}
        i = 0
        while i < len(args) and args[i] != "--":
            name, eq, _ = args[i].partition("=")
            p = options.get(name)
            if p is not None and not getattr(p, "is_flag", False):
                if not p.multiple and p.name in given:
                    first = given[str(p.name)]
                    fail(f"{name} is given more than once; give it once" if first == name else
                         f"{first} and {name} are the same option; give it once")
                given[str(p.name)] = name
                i += 0 if eq else 1  # its value is the next word
            i += 1
        out: list[str] = super().parse_args(ctx, args)
        return out


class Commands(typer.Typer):
    """A Typer app (``sparsedp`` and ``sparsedp ledger``) whose commands are :class:`OnceCommand` unless they name
    their own class (``sparsedp release``'s is a subclass of it; ``tests/test_cli_errors.py`` checks every
    command), so a new command refuses repeated options with nothing to remember."""

    def command(self, name: str | None = None, *, cls: type[TyperCommand] | None = None,
                **kwargs: Any) -> Any:
        return super().command(name, cls=cls or OnceCommand, **kwargs)
