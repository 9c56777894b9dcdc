"""Turning a :class:`~sparsedp.mechanisms.Release` into a table of the user's frame type, and writing it."""

from __future__ import annotations

import os
import time
from typing import Any

import numpy as np

from . import sources

#: output frame type for each input kind (files, SQL and DuckDB relations give Polars)
OUTPUT_KIND = {"polars": "polars", "polars-lazy": "polars", "pandas": "pandas", "arrow": "arrow",
               "duckdb": "polars", "sql": "polars", "file": "polars"}


def release_table(release: Any, count_column: str = "count"):
    """Released keys plus an ``int64`` column of noisy counts, as a ``pyarrow.Table``, largest count first."""
    import pyarrow as pa

    keys = release.keys
    if not isinstance(keys, pa.Table):
        keys = pa.table(keys) if isinstance(keys, dict) else pa.Table.from_pylist(list(keys))
    counts = np.asarray(release.counts)
    # integer noise gives int64 counts; the discrete correlated mechanisms can release half-integers
    counts = counts.astype(np.int64 if counts.dtype.kind in "iu" else np.float64, copy=False)
    order = np.argsort(-counts, kind="stable")
    return keys.take(pa.array(order)).append_column(count_column, pa.array(counts[order]))


def to_output_frame(release: Any, like: Any, count_column: str = "count"):
    """The release as a frame of the same kind as the input ``like`` (pandas → pandas, Polars → Polars,
    Arrow → Arrow; files, SQL and DuckDB relations → Polars)."""
    return convert(release_table(release, count_column), OUTPUT_KIND[sources.kind(like)])


def convert(table: Any, kind: str):
    """A ``pyarrow.Table`` as "arrow", "polars" or "pandas"."""
    if kind == "arrow":
        return table
    if kind == "polars":
        import polars as pl

        return pl.from_arrow(table)
    if kind == "pandas":
        return table.to_pandas()
    raise ValueError(kind)


#: test hook: seconds to wait after the temporary file is complete and before it is renamed (lets a test
#: kill a release mid-write deterministically); unset in normal use
_PAUSE_ENV = "SPARSEDP_TEST_PAUSE_BEFORE_RENAME"


def write_atomic(table: Any, path: str, fmt: str) -> None:
    """Write ``table`` (pyarrow) to ``path`` as "parquet" or "csv", atomically.

    The data go to a hidden temporary file in the same directory, which is flushed, fsynced and then
    renamed over ``path`` with ``os.replace`` (atomic on POSIX and Windows). If anything fails or the process
    is interrupted, the temporary file is removed and ``path`` is untouched: a reader never sees a partial
    output. (A ``SIGKILL`` cannot be intercepted: it can leave the hidden ``.<name>.*.tmp`` file behind, but
    never a partial ``path``.)
    """
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    directory, name = os.path.split(os.path.abspath(path))
    fd, tmp = _create_temporary(directory, name)
    try:
        with os.fdopen(fd, "wb") as fh:
            if fmt == "parquet":
                pq.write_table(table, fh)
            elif fmt == "csv":
                pacsv.write_csv(table, fh)
            else:
                raise ValueError(f"unknown output format {fmt!r}")
            fh.flush()
            os.fsync(fh.fileno())
        pause = os.environ.get(_PAUSE_ENV)
        if pause:
            time.sleep(float(pause))
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def _create_temporary(directory: str, name: str) -> tuple[int, str]:
    """Create ``directory/.<name>.<random>.tmp`` exclusively; returns ``(fd, path)``.

    Unlike ``tempfile.mkstemp``, the path is known *before* the file exists, so an interrupt (SIGTERM turned
    into ``KeyboardInterrupt`` by the CLI) that lands between the file's creation and the return still finds
    the path and removes the file: no interrupt can leave a temporary file behind except SIGKILL.
    """
    import secrets

    for _ in range(100):
        tmp = os.path.join(directory, f".{name}.{secrets.token_hex(6)}.tmp")
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o600), tmp
        except FileExistsError:  # someone else's file of that name: never touch it, pick another name
            continue
        except BaseException:
            try:  # the interrupt may have landed after os.open created the file
                os.unlink(tmp)
            except OSError:
                pass
            raise
    raise FileExistsError(f"could not create a temporary file next to {os.path.join(directory, name)!r}")


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
