"""The unit and key fingerprints of the ℓ0 choice of :mod:`sparsedp.engines.bounding` on Arrow arrays from
DuckDB, and the names and clean-up of the DuckDB engine's temporary objects.

:func:`fingerprint_batch`: Polars' ``hash`` with a fixed public seed (:data:`~sparsedp.engines.bounding.SEED_UNIT`
for units, :data:`~sparsedp.engines.bounding.SEED_KEY` for keys) of the *canonicalised* values
(:func:`~sparsedp.engines.bounding.canonical_exprs`) — literally the expression the Polars engine evaluates
(:func:`~sparsedp.engines.bounding.fingerprint_exprs`), so the fingerprints are equal whichever engine computes
them (canonicalisation makes them independent of the Arrow types DuckDB exports: Int32 vs Int64, string views
vs strings, a time zone vs UTC). The engine applies it once to the distinct keys and once per pass to the
units over ``l0`` (read out of DuckDB in index order).

Nothing is registered as a DuckDB function any more (issue 19, session 4): session 3's Arrow UDFs (the unit
fingerprint, and the keyed rank whose closure held the secret) were called by DuckDB on small batches, each
paying an Arrow conversion and a GIL hand-over, more than the work itself. The keyed rank
``AES-256_{K'}(h_u ‖ h_k)`` is computed in the process on the heavy units' pairs read out of DuckDB
(:func:`~sparsedp.engines.duckdb_engine.dropped_pairs`), so the secret ``K`` never enters DuckDB: not its SQL
text, its plans, its catalog or any function.
"""

from __future__ import annotations

import secrets
from contextlib import contextmanager
from typing import Any, Iterator

from .bounding import canonical_exprs


def fingerprint_batch(names: list[str], arrays: tuple, seed: int):
    """Polars' hash (``seed``) of the canonicalised columns ``names`` given as Arrow arrays: one column hashes
    as ``pl.col(name).hash(seed)``, several as ``pl.struct(names).hash(seed)`` (as
    :func:`~sparsedp.engines.bounding.fingerprint_exprs`). Returns a ``pyarrow`` uint64 array."""
    import polars as pl

    df = pl.DataFrame([pl.Series(n, a) for n, a in zip(names, arrays)])
    canon = df.select(canonical_exprs(df.schema, names))
    h = pl.col(names[0]).hash(seed) if len(names) == 1 else pl.struct(names).hash(seed)
    return canon.select(h.alias("__h")).to_series().to_arrow()


@contextmanager
def bounding_objects(con: Any) -> Iterator[tuple[str, str]]:
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


def drop_tables(con: Any, tag: str) -> None:
    """Drop the temporary tables ``__sparsedp_*_{tag}`` of one release from ``con`` (if it is still open)."""
    try:
        names = [r[0] for r in con.execute(
            "SELECT table_name FROM duckdb_tables() WHERE temporary AND table_name LIKE ?",
            [f"__sparsedp_%_{tag}"]).fetchall()]
        for n in names:
            con.execute(f'DROP TABLE IF EXISTS temp."{n}"')
    except Exception:  # a closed connection holds nothing
        pass
