"""The vectorised DuckDB Python UDF (over Arrow) of the ℓ0 choice of :mod:`sparsedp.engines.bounding`, and the
names of the engine's temporary objects.

One scalar function, registered on a connection for one release and removed afterwards
(:func:`bounding_objects`): ``fingerprint(unit)`` → ``h_u``, Polars' ``hash`` with the fixed public seed
:data:`~sparsedp.engines.bounding.SEED_UNIT` of the *canonicalised* value
(:func:`~sparsedp.engines.bounding.canonical_exprs`), computed by Polars on each Arrow batch DuckDB hands over —
literally the expression the Polars engine evaluates (:func:`~sparsedp.engines.bounding.fingerprint_exprs`), so
the fingerprints are equal whichever engine computes them (canonicalisation makes them independent of the Arrow
types DuckDB exports: Int32 vs Int64, string views vs strings, a time zone vs UTC). The engine applies it to the
units over ``l0`` only; the key fingerprints ``h_k`` are computed once by the engine on the distinct keys
(:func:`fingerprint_batch` is the same function for both).

The keyed rank ``AES-256_{K'}(h_u ‖ h_k)`` is **not** a DuckDB function: the engine reads the heavy units'
pairs out of DuckDB in large batches and ranks them in numpy with
:func:`~sparsedp.engines.bounding.prf_ranks` (issue 19, session 4: a rank UDF cost DuckDB an Arrow conversion
and a GIL hand-over per 2 048-row batch, more than the AES itself). So the secret ``K`` never enters DuckDB: not
its SQL text, its plans, its catalog or its function closures.

DuckDB calls the fingerprint on batches of up to 2 048 rows from its own worker threads (holding the GIL while
Python runs); it is a pure function of its argument, so any batching or order gives the same values.
"""

from __future__ import annotations

import secrets
from contextlib import contextmanager
from typing import Any, Iterator

from .bounding import SEED_UNIT, canonical_exprs


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
def bounding_objects(con: Any, unit: str, unit_type: Any) -> Iterator[tuple[str, str, str]]:
    """Register the unit fingerprint on ``con`` under a fresh random name for the duration of the block and
    yield ``(fingerprint function name, key table name, tag)``; the caller registers its key table (the distinct
    keys and their index) under the yielded name, and names its temporary tables ``__sparsedp_*_{tag}``: the
    function, the key table and every temporary table of that form are removed afterwards.

    ``unit_type``: the DuckDB type of the unit as the query passes it.
    """
    tag = secrets.token_hex(8)
    name = f"__sparsedp_hu_{tag}"
    view = f"__sparsedp_keys_{tag}"
    registered = False
    try:
        con.create_function(name, lambda u: fingerprint_batch([unit], (u,), SEED_UNIT), [unit_type],
                            "UBIGINT", type="arrow")
        registered = True
        yield name, view, tag
    finally:
        if registered:
            try:
                con.remove_function(name)
            except Exception:  # the connection may already be closed
                pass
        try:
            con.unregister(view)
        except Exception:
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
