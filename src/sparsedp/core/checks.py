"""The input checks every reader shares (engines, sketches, the vector and ALP readers): a missing column named
with its closest match, and data-library errors turned into :class:`~sparsedp.errors.InputDataError`.
"""

from __future__ import annotations

import contextlib
from typing import Iterator, Sequence

from ..errors import ColumnNotFoundError, InputDataError, SparsedpError
from .sources import InputData, explain_read_error

__all__ = ["check_columns", "engine_errors_as_input_errors"]


@contextlib.contextmanager
def engine_errors_as_input_errors(engine: str, data: InputData | None = None) -> Iterator[None]:
    """Errors the data libraries raise on inputs they cannot process (unsupported column types, values out
    of range, unreadable files) become :class:`InputDataError`, so no library traceback reaches the user.
    Our own errors pass through unchanged, and so does an interrupt (DuckDB's ``InterruptException`` becomes
    :class:`KeyboardInterrupt` again). With ``data`` (the input), a CSV that is not UTF-8 or is ragged is
    explained with its line and how to read it (:func:`~sparsedp.core.sources.explain_read_error`)."""
    try:
        yield
    except InputDataError as e:
        better = explain_read_error(data, e) if data is not None else e
        if better is e:
            raise
        raise better from None
    except SparsedpError:
        raise
    except (ValueError, TypeError, OverflowError, KeyError, IndexError, NotImplementedError, OSError) as e:
        err = InputDataError(f"the {engine} engine could not process the input: {type(e).__name__}: {e}")
        raise (explain_read_error(data, err) if data is not None else err) from e
    except Exception as e:
        if type(e).__name__ == "InterruptException":  # DuckDB's Ctrl-C: still an interrupt (CLI exit 130)
            raise KeyboardInterrupt from None
        # library base classes outside the builtin hierarchy (polars/pyarrow/duckdb errors)
        if type(e).__module__.split(".")[0] in ("polars", "pyarrow", "duckdb", "pandas", "numpy", "_duckdb"):
            err = InputDataError(f"the {engine} engine could not process the input: {type(e).__name__}: {e}")
            raise (explain_read_error(data, err) if data is not None else err) from e
        raise


def check_columns(available: Sequence[str], privacy_unit: str | None, by: Sequence[str]) -> None:
    """Raise :class:`~sparsedp.errors.ColumnNotFoundError` naming any missing column (its ``param``: the argument
    that named it) and its closest match."""
    available = list(available)
    roles = ([("privacy_unit", privacy_unit)] if privacy_unit is not None else []) + [("by", c) for c in by]
    for role, col in roles:
        if col not in available:
            import difflib  # only for the error message (not on the path of a release that succeeds)

            close = ([a for a in available if a.lower() == col.lower()]
                     or difflib.get_close_matches(col, available, n=1))
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ColumnNotFoundError(f"⟨{role}⟩ column {col!r} is not in the data (columns: "
                                      f"{', '.join(map(repr, available[:20]))}{'…' if len(available) > 20 else ''})"
                                      f"{hint}", param=role)
