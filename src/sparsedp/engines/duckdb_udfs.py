"""Vectorised DuckDB Python UDFs (over Arrow) for the ℓ0 choice of :mod:`sparsedp.engines.bounding`.

Two scalar functions, registered on a connection for one release and removed afterwards
(:func:`rank_functions`):

- ``fingerprint(unit)`` → ``h_u``: Polars' ``hash`` with the fixed public seed
  :data:`~sparsedp.engines.bounding.SEED_UNIT` of the *canonicalised* value
  (:func:`~sparsedp.engines.bounding.canonical_exprs`), computed by Polars on each Arrow batch DuckDB hands over
  — literally the expression the Polars engine evaluates (:func:`~sparsedp.engines.bounding.fingerprint_exprs`),
  so the fingerprints are equal whichever engine computes them (canonicalisation makes them independent of the
  Arrow types DuckDB exports: Int32 vs Int64, string views vs strings, a time zone vs UTC). The key
  fingerprints ``h_k`` are computed once by the engine on the distinct keys (:func:`fingerprint_batch` is the
  same function for both);
- ``rank(h_u, key index)`` → ``first 8 bytes of AES-256_{K'}(h_u ‖ h_k[key index])``:
  :func:`~sparsedp.engines.bounding.prf_ranks` on the batch. The secret ``K`` and the key fingerprints live
  only in this function's closure: ``K`` never appears in SQL text, in a query plan or in DuckDB's catalog (the
  function's name is a random identifier unrelated to ``K``).

DuckDB calls these on batches of up to 2 048 rows from its own worker threads (holding the GIL while Python
runs); they are pure functions of their arguments, so any batching or order gives the same values.
"""

from __future__ import annotations

import secrets
from contextlib import contextmanager
from typing import Any, Iterator

from .bounding import SEED_UNIT, canonical_exprs, prf_ranks


def fingerprint_batch(names: list[str], arrays: tuple, seed: int):
    """Polars' hash (``seed``) of the canonicalised columns ``names`` given as Arrow arrays: one column hashes
    as ``pl.col(name).hash(seed)``, several as ``pl.struct(names).hash(seed)`` (as
    :func:`~sparsedp.engines.bounding.fingerprint_exprs`). Returns a ``pyarrow`` uint64 array."""
    import polars as pl

    df = pl.DataFrame([pl.Series(n, a) for n, a in zip(names, arrays)])
    canon = df.select(canonical_exprs(df.schema, names))
    h = pl.col(names[0]).hash(seed) if len(names) == 1 else pl.struct(names).hash(seed)
    return canon.select(h.alias("__h")).to_series().to_arrow()


def rank_by_index_batch(hu, ki, hk, secret: bytes):
    """:func:`~sparsedp.engines.bounding.prf_ranks` of the pairs ``(hu[i], hk[ki[i]])`` (``hu``, ``ki``: Arrow
    arrays of one batch; ``hk``: the key fingerprints by key index, numpy uint64), as an Arrow uint64 array."""
    import numpy as np
    import pyarrow as pa

    u = np.asarray(hu.to_numpy(zero_copy_only=False), dtype=np.uint64)
    k = np.asarray(ki.to_numpy(zero_copy_only=False), dtype=np.int64)
    return pa.array(prf_ranks(u, hk, secret, None, k), type=pa.uint64())


@contextmanager
def rank_functions(con: Any, unit: str, unit_type: Any, index_type: str, key_fingerprints: Any,
                   secret: bytes | None) -> Iterator[tuple[tuple[str, str], str]]:
    """Register ``(unit fingerprint, rank)`` on ``con`` under fresh random names for the duration of the block
    and yield ``((unit fingerprint name, rank name), key table name)``; the caller registers its key table
    (the distinct keys and their index) under the yielded name, which is unregistered afterwards.

    ``rank(h_u, key index)`` is ``prf_ranks(h_u, h_k[key index])``: the key fingerprints ``h_k`` (numpy uint64,
    by key index) and the secret live in its closure. It is only registered when ``secret`` is given.
    ``unit_type``: the DuckDB type of the unit as the query passes it; ``index_type``: that of the key index.
    """
    tag = secrets.token_hex(8)
    names = (f"__sparsedp_hu_{tag}", f"__sparsedp_rank_{tag}")
    view = f"__sparsedp_keys_{tag}"
    registered = []
    try:
        con.create_function(names[0], lambda u: fingerprint_batch([unit], (u,), SEED_UNIT), [unit_type],
                            "UBIGINT", type="arrow")
        registered.append(names[0])
        if secret is not None:
            key, hk = bytes(secret), key_fingerprints
            con.create_function(names[1], lambda hu, ki: rank_by_index_batch(hu, ki, hk, key),
                                ["UBIGINT", index_type], "UBIGINT", type="arrow")
            registered.append(names[1])
        yield names, view
    finally:
        for n in registered:
            try:
                con.remove_function(n)
            except Exception:  # the connection may already be closed; nothing else holds the closure
                pass
        try:
            con.unregister(view)
        except Exception:
            pass

