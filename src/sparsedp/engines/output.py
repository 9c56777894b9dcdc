"""Turning a :class:`~sparsedp.mechanisms.Release` into a table of the user's frame type, and writing it."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import time
from typing import TYPE_CHECKING, Any, BinaryIO, Callable, Mapping

from ..errors import (GuaranteeMismatchError, InputDataError, InvalidParameterError, InvalidTypeError,
                      OutputExistsError, OutputWriteError)

if TYPE_CHECKING:  # the data libraries are imported when a table is written (``import sparsedp`` stays light)
    import pandas as pd
    import polars as pl
    import pyarrow as pa

#: Parquet key-value metadata key holding a release's guarantee (JSON)
METADATA_KEY = "sparsedp.guarantee"
#: the guarantee's entry identifying the table it describes (:func:`table_identity`)
TABLE_KEY = "table"
#: output formats by file extension
OUT_FORMATS = {".parquet": "parquet", ".pq": "parquet", ".csv": "csv"}


def check_out_path(out: object, overwrite: bool = False) -> tuple[str, str]:
    """``(absolute path, format)`` for an output file that can be written; raises before any data is read, any
    budget charged or any noise drawn.

    An existing file (for CSV: the file or its ``.json`` guarantee sidecar) is refused with
    :class:`~sparsedp.errors.OutputExistsError` unless ``overwrite=True``: a release never silently replaces an
    earlier one (and its guarantee).
    """
    if not isinstance(out, (str, os.PathLike)):
        raise InvalidTypeError(f"⟨out⟩ must be a file path, got {type(out).__name__}", param="out")
    if not isinstance(overwrite, bool):
        raise InvalidTypeError(f"⟨overwrite⟩ must be a bool, got {overwrite!r}", param="overwrite")
    shown = os.fspath(out)
    path = os.path.abspath(shown)
    ext = os.path.splitext(path)[1].lower()
    if ext not in OUT_FORMATS:
        raise InvalidParameterError(f"⟨out⟩ must end in .parquet or .csv, got {shown!r}", param="out")
    parent = os.path.dirname(path)
    if os.path.isdir(path):
        raise InvalidParameterError(f"⟨out={shown!r}⟩ is a directory; give a file name", param="out")
    if not os.path.isdir(parent):
        raise InvalidParameterError(f"cannot write ⟨out={shown!r}⟩: directory {parent!r} does not exist",
                                    param="out")
    if not os.access(parent, os.W_OK | os.X_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        raise InvalidParameterError(f"cannot write ⟨out={shown!r}⟩: permission denied; choose a writable location",
                                    param="out")
    fmt = OUT_FORMATS[ext]
    existing = [p for p in ((path, sidecar_path(path)) if fmt == "csv" else (path,)) if os.path.lexists(p)]
    if existing and not overwrite:
        what = "exists" if existing == [path] else f"exists ({' and '.join(map(os.path.basename, existing))})"
        raise OutputExistsError(f"⟨out={shown!r}⟩ {what}: a release does not replace an earlier output and its "
                                f"guarantee unless asked", param="out",
                                fix="choose another file, or pass ⟨overwrite=True⟩ to replace it")
    return path, fmt

#: output frame type for each input kind (files, SQL and DuckDB relations give Polars)
OUTPUT_KIND = {"polars": "polars", "polars-lazy": "polars", "pandas": "pandas", "arrow": "arrow",
               "duckdb": "polars", "sql": "polars", "file": "polars"}


def convert(table: pa.Table, kind: str) -> pa.Table | pl.DataFrame | pd.DataFrame:
    """A ``pyarrow.Table`` as "arrow", "polars" or "pandas"."""
    if kind == "arrow":
        return table
    if kind == "polars":
        import polars as pl

        frame = pl.from_arrow(table)
        assert isinstance(frame, pl.DataFrame)  # a table gives a frame
        return frame
    if kind == "pandas":
        return table.to_pandas()
    raise ValueError(kind)


#: test hook: seconds to wait after the temporary file is complete and before it is renamed (lets a test
#: kill a release mid-write deterministically); unset in normal use
_PAUSE_ENV = "SPARSEDP_TEST_PAUSE_BEFORE_RENAME"


def write_atomic(table: pa.Table, path: str, fmt: str, metadata: Mapping[str, Any] | None = None, *,
                 charge_id: int | None = None) -> dict[str, Any]:
    """Write ``table`` (pyarrow) to ``path`` as "parquet" or "csv", atomically; returns the metadata written.

    The data go to a hidden temporary file in the same directory, which is flushed, fsynced and then
    renamed over ``path`` with ``os.replace`` (atomic on POSIX and Windows). If anything fails or the process
    is interrupted, the temporary file is removed and ``path`` is untouched: a reader never sees a partial
    output. (A ``SIGKILL`` cannot be intercepted: it can leave the hidden ``.<name>.*.tmp`` file behind, but
    never a partial ``path``.) An ``OSError`` while writing (a full disk, a device gone) is raised as
    :class:`~sparsedp.errors.OutputWriteError` naming ``charge_id``, the ledger charge the release made (the
    budget stays spent: the noise was drawn).

    ``metadata`` (the release's guarantee) travels with the file, with the entry :data:`TABLE_KEY` added: the
    table's row count, a content hash and ``charge_id`` (:func:`table_identity`), so that the guarantee names the
    table it describes. Parquet: the key-value metadata entry :data:`METADATA_KEY` (a JSON object), in the same
    file, renamed into place in one step. CSV: the JSON sidecar ``<path>.json`` (:func:`sidecar_path`), renamed
    into place *before* the CSV so that no CSV output exists without a guarantee; a crash between the two renames
    (possible only when an earlier output is overwritten) leaves the new sidecar next to the old CSV, which
    :func:`read_guarantee` detects (the hash differs) and refuses.
    """
    meta: dict[str, Any] | None = None
    sidecar = None
    directory, name = os.path.split(os.path.abspath(path))
    temps: list[str] = []
    renamed_sidecar = False
    done = False
    try:
        if metadata is not None:
            meta = {**dict(metadata), TABLE_KEY: table_identity(table, charge_id)}
            text = json.dumps(meta, sort_keys=True, default=str)
            if fmt == "parquet":
                table = table.replace_schema_metadata({**(table.schema.metadata or {}),
                                                       METADATA_KEY.encode(): text.encode()})
            else:
                sidecar = (text + "\n").encode()
        side_tmp = None
        if sidecar is not None:
            side_tmp = _write_temporary(directory, os.path.basename(sidecar_path(path)), lambda fh: fh.write(sidecar),
                                        temps)
        tmp = _write_temporary(directory, name, lambda fh: _write_table(table, fh, fmt), temps)
        pause = os.environ.get(_PAUSE_ENV)
        if pause:
            time.sleep(float(pause))
        if side_tmp is not None:  # the guarantee lands first: no CSV output ever exists without one
            os.replace(side_tmp, sidecar_path(path))
            temps.remove(side_tmp)
            renamed_sidecar = True
        os.replace(tmp, path)
        temps.remove(tmp)
        done = True
    except OSError as e:
        charged = "" if charge_id is None else f"budget charged (charge id {charge_id}), "
        reason = e.strerror or str(e)
        if e.errno == errno.ENOSPC:
            fix = "free space on that disk or choose another ⟨out=…⟩, then release again (a new charge)"
        else:
            fix = "choose another ⟨out=…⟩, then release again (a new charge)"
        raise OutputWriteError(f"{charged}output not written: cannot write {path!r}: {reason} "
                               f"(nothing half-written was left)", path=path, charge_id=charge_id,
                               fix=fix) from None
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
    return meta or {}


def table_identity(table: pa.Table, charge_id: int | None = None) -> dict[str, Any]:
    """What identifies a released table in its guarantee: ``rows``, ``sha256`` (:func:`content_hash`) and the
    ledger's ``charge_id`` (None without a ledger)."""
    return {"rows": int(table.num_rows), "sha256": content_hash(table), "charge_id": charge_id}


class _HashSink:
    """A write-only file object that hashes what is written to it."""

    def __init__(self) -> None:
        self.h = hashlib.sha256()
        self.closed = False

    def write(self, data: bytes) -> int:
        self.h.update(data)
        return len(data)

    def flush(self) -> None:
        pass

    def writable(self) -> bool:
        return True


def content_hash(table: pa.Table) -> str:
    """SHA-256 (hex) of ``table`` written as CSV by pyarrow: for a CSV output, exactly the hash of the file's
    bytes; for Parquet, of the table read back (Parquet keeps Arrow's types, so the rendering is the same)."""
    import pyarrow.csv as pacsv

    sink = _HashSink()
    pacsv.write_csv(table.replace_schema_metadata(None), sink)
    return sink.h.hexdigest()


def _write_table(table: pa.Table, fh: BinaryIO, fmt: str) -> None:
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    if fmt == "parquet":
        pq.write_table(table, fh)
    elif fmt == "csv":
        pacsv.write_csv(table, fh)
    else:
        raise ValueError(f"unknown output format {fmt!r}")


def _write_temporary(directory: str, name: str, write: Callable[[BinaryIO], object], temps: list[str]) -> str:
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


def read_guarantee(path: str, *, verify: bool = True) -> dict[str, Any]:
    """The guarantee metadata of a released file (Parquet key-value metadata or the CSV's JSON sidecar).

    With ``verify`` (the default) the file must be the table the guarantee describes: same row count and content
    hash (:func:`table_identity`); otherwise :class:`~sparsedp.errors.GuaranteeMismatchError` (e.g. an interrupted
    overwrite left a new sidecar next to an older CSV: do not publish that pair). Files written before the
    guarantee named its table (no ``table`` entry) are returned unchecked.
    """
    import pyarrow.parquet as pq

    path = os.fspath(path)
    parquet = path.lower().endswith((".parquet", ".pq"))
    if parquet:
        meta = pq.read_schema(path).metadata or {}
        if METADATA_KEY.encode() not in meta:
            raise InputDataError(f"{path!r} carries no sparsedp guarantee (no {METADATA_KEY!r} metadata)")
        guarantee: dict[str, Any] = json.loads(meta[METADATA_KEY.encode()])
    else:
        try:
            with open(sidecar_path(path)) as fh:
                guarantee = json.load(fh)
        except FileNotFoundError:
            raise InputDataError(f"{path!r} has no guarantee sidecar {sidecar_path(path)!r}") from None
    ident = guarantee.get(TABLE_KEY)
    if verify and ident is not None:
        if parquet:
            table = pq.read_table(path)
            rows, digest = table.num_rows, content_hash(table)
        else:
            rows, digest = _csv_identity(path)
        if rows != ident.get("rows") or digest != ident.get("sha256"):
            raise GuaranteeMismatchError(
                f"the guarantee of {path!r} describes another table ({ident.get('rows')} rows, sha256 "
                f"{str(ident.get('sha256'))[:12]}…, ledger charge {ident.get('charge_id')}) than the file holds "
                f"({rows} rows, sha256 {digest[:12]}…): an interrupted overwrite left them mismatched; do not "
                f"publish this pair, release again")
    return guarantee


def _csv_identity(path: str) -> tuple[int, str]:
    """(data rows, SHA-256 of the bytes) of a CSV file written by :func:`write_atomic`."""
    import pyarrow.csv as pacsv

    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return pacsv.read_csv(path).num_rows, h.hexdigest()


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
