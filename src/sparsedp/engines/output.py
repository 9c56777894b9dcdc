"""Turning a :class:`~sparsedp.mechanisms.Release` into a table of the user's frame type, and writing it."""

from __future__ import annotations

import json
import os
import time
from typing import Any, Mapping

#: Parquet key-value metadata key holding a release's guarantee (JSON)
METADATA_KEY = "sparsedp.guarantee"

#: output frame type for each input kind (files, SQL and DuckDB relations give Polars)
OUTPUT_KIND = {"polars": "polars", "polars-lazy": "polars", "pandas": "pandas", "arrow": "arrow",
               "duckdb": "polars", "sql": "polars", "file": "polars"}


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


def write_atomic(table: Any, path: str, fmt: str, metadata: Mapping[str, Any] | None = None) -> None:
    """Write ``table`` (pyarrow) to ``path`` as "parquet" or "csv", atomically.

    The data go to a hidden temporary file in the same directory, which is flushed, fsynced and then
    renamed over ``path`` with ``os.replace`` (atomic on POSIX and Windows). If anything fails or the process
    is interrupted, the temporary file is removed and ``path`` is untouched: a reader never sees a partial
    output. (A ``SIGKILL`` cannot be intercepted: it can leave the hidden ``.<name>.*.tmp`` file behind, but
    never a partial ``path``.)

    ``metadata`` (the release's guarantee) travels with the file: as the Parquet key-value metadata entry
    :data:`METADATA_KEY` (a JSON object), or for CSV as the JSON sidecar ``<path>.json`` (:func:`sidecar_path`),
    written atomically *before* the CSV so that no CSV output exists without its guarantee.
    """
    sidecar = None
    if metadata is not None:
        text = json.dumps(dict(metadata), sort_keys=True, default=str)
        if fmt == "parquet":
            table = table.replace_schema_metadata({**(table.schema.metadata or {}), METADATA_KEY.encode(): text.encode()})
        else:
            sidecar = (text + "\n").encode()
    directory, name = os.path.split(os.path.abspath(path))
    temps: list[str] = []
    renamed_sidecar = False
    done = False
    try:
        side_tmp = None
        if sidecar is not None:
            side_tmp = _write_temporary(directory, os.path.basename(sidecar_path(path)), lambda fh: fh.write(sidecar),
                                        temps)
        tmp = _write_temporary(directory, name, lambda fh: _write_table(table, fh, fmt), temps)
        pause = os.environ.get(_PAUSE_ENV)
        if pause:
            time.sleep(float(pause))
        if side_tmp is not None:  # the guarantee lands first: no CSV output ever exists without it
            os.replace(side_tmp, sidecar_path(path))
            temps.remove(side_tmp)
            renamed_sidecar = True
        os.replace(tmp, path)
        temps.remove(tmp)
        done = True
    finally:
        for t in temps:
            try:
                os.unlink(t)
            except FileNotFoundError:
                pass
        if renamed_sidecar and not done:
            try:
                os.unlink(sidecar_path(path))
            except FileNotFoundError:
                pass


def _write_table(table: Any, fh: Any, fmt: str) -> None:
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    if fmt == "parquet":
        pq.write_table(table, fh)
    elif fmt == "csv":
        pacsv.write_csv(table, fh)
    else:
        raise ValueError(f"unknown output format {fmt!r}")


def _write_temporary(directory: str, name: str, write: Any, temps: list) -> str:
    """A complete, fsynced hidden temporary file next to ``name`` (its path appended to ``temps`` as soon as it
    exists, so the caller's clean-up always finds it)."""
    fd, tmp = _create_temporary(directory, name)
    temps.append(tmp)
    with os.fdopen(fd, "wb") as fh:
        write(fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.chmod(tmp, 0o666 & ~_umask())
    return tmp


def sidecar_path(path: str) -> str:
    """The JSON sidecar holding the guarantee of a CSV output."""
    return os.fspath(path) + ".json"


def read_guarantee(path: str) -> dict:
    """The guarantee metadata of a released file (Parquet key-value metadata or the CSV's JSON sidecar)."""
    import pyarrow.parquet as pq

    if os.fspath(path).lower().endswith((".parquet", ".pq")):
        meta = pq.read_schema(path).metadata or {}
        return json.loads(meta[METADATA_KEY.encode()])
    with open(sidecar_path(path)) as fh:
        return json.load(fh)


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
