"""Connection settings of the DuckDB engine for inputs larger than memory (issue 19).

The DuckDB engine runs the bounded histogram with DuckDB's out-of-core operators: its hash aggregates, joins,
and temporary tables spill to a temporary directory when their state passes ``memory_limit``. On a connection the
engine opens itself (a file or frame input with no ``connection=``) it sets:

- ``memory_limit``: DuckDB's buffer-manager limit (DuckDB's default is 80 % of the machine's RAM). Set it when
  the process must stay under a budget: the limit covers DuckDB's buffers, not the Python process or the
  Arrow results. An input of at most a 256th of the connection's limit in rows goes to the process whole (the
  in-memory route); a larger one is de-duplicated by DuckDB, and its distinct (unit, key) pairs are read in
  batches of whole units of at most that many pairs (about a ninth of the limit in bytes;
  :meth:`~sparsedp.engines.duckdb_engine.DuckDBEngine.batch_budget`).
  Before session 4 of issue 19 (ranking in DuckDB) ``"6.5GB"`` gave a peak RSS of 6.94 GiB on 3·10^8 rows (
  ``docs/engines_speed.md``, "Session 3 -- 10^9 rows"). Spilling does not make the need vanish: DuckDB's
  out-of-core ``DISTINCT`` still holds memory growing with the number of distinct (unit, key) pairs (measured
  7–17 bytes per pair); below that the query stops with DuckDB's "Out of Memory Error".
- ``temp_directory``: where the spill files go. The engine always spills into a private directory it creates
  (and removes after the release); by default under the system's temporary directory (``TMPDIR``), else under
  the directory given here. Where ``/tmp`` is a RAM disk (tmpfs), spilling there uses memory: give a directory on
  a disk with room for a few times the input's size.
- ``threads``: DuckDB's worker threads (default: all cores).
- ``preserve_insertion_order = false`` always (no result order is ever needed: the histogram is sorted in
  canonical key order afterwards), which lets DuckDB stream and spill without keeping row order.

None of these changes the release: the same secret gives the same table with or without them (tested with a
memory limit small enough to force spilling).
"""

from __future__ import annotations

import os
import re
import tempfile
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidParameterError

_SIZE = re.compile(r"^\s*\d+(\.\d+)?\s*(B|KB|MB|GB|TB|KiB|MiB|GiB|TiB)\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class DuckDBSettings:
    """The out-of-core settings of an engine-owned DuckDB connection (module docstring).

    Args:
        memory_limit: DuckDB's ``memory_limit``, a size such as ``"6GB"`` or ``"512MiB"`` (``None``: DuckDB's
            default, 80 % of RAM).
        temp_directory: the directory under which the private spill directory is created (``None``: the
            system's temporary directory).
        threads: DuckDB's worker threads (``None``: all cores).
    """

    memory_limit: str | None = None
    temp_directory: str | os.PathLike[str] | None = None
    threads: int | None = None

    def __post_init__(self) -> None:
        if self.memory_limit is not None and not (isinstance(self.memory_limit, str)
                                                  and _SIZE.match(self.memory_limit)):
            raise InvalidParameterError(f"memory_limit must be a size such as '6GB' or '512MiB'; "
                                        f"got {self.memory_limit!r}")
        if self.threads is not None and (isinstance(self.threads, bool) or not isinstance(self.threads, int)
                                         or self.threads < 1):
            raise InvalidParameterError(f"threads must be a positive integer; got {self.threads!r}")
        if self.temp_directory is not None and not os.path.isdir(self.temp_directory):
            raise InvalidParameterError(f"temp_directory must be an existing directory; got "
                                        f"{os.fspath(self.temp_directory)!r}")

    def limit_bytes(self) -> int | None:
        """``memory_limit`` in bytes (:func:`size_bytes`); ``None`` when unset."""
        return None if self.memory_limit is None else size_bytes(self.memory_limit)

    def spill_directory(self) -> str:
        """Create the private spill directory (the caller removes it)."""
        return tempfile.mkdtemp(prefix="sparsedp-duckdb-",
                                dir=None if self.temp_directory is None else os.fspath(self.temp_directory))

    def config(self, spill_directory: str) -> dict[str, Any]:
        """The ``duckdb.connect(config=…)`` dictionary, spilling into ``spill_directory``."""
        cfg: dict[str, Any] = {"temp_directory": spill_directory, "preserve_insertion_order": False}
        if self.memory_limit is not None:
            cfg["memory_limit"] = self.memory_limit.replace(" ", "")
        if self.threads is not None:
            cfg["threads"] = self.threads
        return cfg


def size_bytes(text: str) -> int | None:
    """A DuckDB size (``"6GB"``, ``"1.5 GiB"``, ``"18.8 GiB"`` as ``current_setting('memory_limit')`` shows it)
    in bytes: KB, MB… are powers of 1000, KiB, MiB… of 1024, as in DuckDB; ``None`` if it is not a size."""
    m = re.match(r"^\s*(\d+(?:\.\d+)?)\s*([A-Za-z]+)\s*$", str(text))
    scale = {"B": 1, "BYTES": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
             "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}.get(m.group(2).upper()) if m else None
    return None if m is None or scale is None else int(float(m.group(1)) * scale)
