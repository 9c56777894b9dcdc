"""The names and clean-up of the DuckDB engine's temporary objects (the registered key table and the temporary
tables of one release: :mod:`sparsedp.engines.duckdb_engine`).

Nothing is registered as a DuckDB function (issue 19, session 4): session 3's Arrow UDFs (the unit
fingerprint, and the keyed rank whose closure held the secret) were called by DuckDB on small batches, each
paying an Arrow conversion and a GIL hand-over, more than the work itself. The fingerprints are now computed by
:func:`~sparsedp.engines.bounding.unit_fingerprints` / :func:`~sparsedp.engines.bounding.key_fingerprints` (the
Polars engine's functions) and the keyed rank ``AES-256_{K'}(h_u ‖ h_k)`` in the process on the distinct pairs
read out of DuckDB (:func:`~sparsedp.engines.pair_ids.bound_pair_ids`), so the secret ``K`` never
enters DuckDB: not its SQL text, its plans, its catalog or any function.
"""

from __future__ import annotations

import secrets
from contextlib import contextmanager
from typing import TYPE_CHECKING, Iterator

if TYPE_CHECKING:  # DuckDB is imported when the engine runs (``import sparsedp`` stays light)
    from duckdb import DuckDBPyConnection


@contextmanager
def bounding_objects(con: DuckDBPyConnection) -> Iterator[tuple[str, str]]:
    """Yield ``(key table name, tag)`` for one release on ``con``: the caller registers its key table (the
    distinct keys and their index) under that name and names its temporary tables ``__sparsedp_*_{tag}``;
    the key table and every temporary table of that form are removed afterwards, whatever happens."""
    tag = secrets.token_hex(8)
    view = f"__sparsedp_keys_{tag}"
    try:
        yield view, tag
    finally:
        try:
            con.unregister(view)
        except Exception:  # the connection may already be closed
            pass
        drop_tables(con, tag)


def drop_tables(con: DuckDBPyConnection, tag: str) -> None:
    """Drop the temporary tables ``__sparsedp_*_{tag}`` of one release from ``con`` (if it is still open)."""
    try:
        names = [r[0] for r in con.execute(
            "SELECT table_name FROM duckdb_tables() WHERE temporary AND table_name LIKE ?",
            [f"__sparsedp_%_{tag}"]).fetchall()]
        for n in names:
            con.execute(f'DROP TABLE IF EXISTS temp."{n}"')
    except Exception:  # a closed connection holds nothing
        pass
