"""The ``sparsedp`` command. Thin: parses arguments, calls :mod:`sparsedp.api` or the library, prints.

Each command lives in its own module in this package and registers itself on :data:`app`; the imports
at the bottom of this file wire them in.
"""

from __future__ import annotations

import typer

from .. import __version__
from ._errors import Commands

app = Commands(
    name="sparsedp",
    help="Differentially private counts over huge key domains.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"sparsedp {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="Print the version and exit."),
) -> None:
    """sparsedp: private GROUP BY counts with tight accounting and secure noise."""


def main() -> None:
    app()


# Command modules (each defines its commands on `app`).
from . import plan as _plan  # noqa: E402,F401
from . import ledger as _ledger  # noqa: E402,F401
from . import reproduce as _reproduce  # noqa: E402,F401
from . import release as _release  # noqa: E402,F401
from . import demo as _demo  # noqa: E402,F401
from . import audit as _audit  # noqa: E402,F401
from . import mean as _mean  # noqa: E402,F401
from . import sketch as _sketch  # noqa: E402,F401
