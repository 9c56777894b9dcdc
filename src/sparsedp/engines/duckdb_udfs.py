"""Vectorised DuckDB Python UDFs (over Arrow) for the ℓ0 choice of :mod:`sparsedp.engines.bounding`.

Three scalar functions, registered on a connection for one release and removed afterwards:

- ``fingerprint(unit)`` → ``h_u`` and ``fingerprint(key columns…)`` → ``h_k``: Polars' ``hash`` with the fixed
  public seeds :data:`~sparsedp.engines.bounding.SEED_UNIT` / :data:`~sparsedp.engines.bounding.SEED_KEY` of
  the *canonicalised* values (:func:`~sparsedp.engines.bounding.canonical_exprs`), computed by Polars on each
  Arrow batch DuckDB hands over — literally the same expressions the Polars engine evaluates
  (:func:`~sparsedp.engines.bounding.fingerprint_exprs`), so the fingerprints are equal whichever engine
  computes them (canonicalisation makes them independent of the Arrow types DuckDB exports: Int32 vs Int64,
  string views vs strings, a time zone vs UTC);
- ``rank(h_u, h_k)`` → ``first 8 bytes of AES-256_{K'}(h_u ‖ h_k)``: :func:`~sparsedp.engines.bounding.prf_ranks`
  on the batch. The secret ``K`` lives only in this function's closure: it never appears in SQL text, in a
  query plan or in DuckDB's catalog (the function's name is a random identifier unrelated to ``K``).

DuckDB calls these on batches of up to 2 048 rows from its own worker threads (holding the GIL while Python
runs); they are pure functions of their arguments, so any batching or order gives the same values.
"""

from __future__ import annotations

import inspect
import secrets
from contextlib import contextmanager
from typing import Any, Iterator

from .bounding import SEED_KEY, SEED_UNIT, canonical_exprs, prf_ranks


def fingerprint_batch(names: list[str], arrays: tuple, seed: int):
    """Polars' hash (``seed``) of the canonicalised columns ``names`` given as Arrow arrays: one column hashes
    as ``pl.col(name).hash(seed)``, several as ``pl.struct(names).hash(seed)`` (as
    :func:`~sparsedp.engines.bounding.fingerprint_exprs`). Returns a ``pyarrow`` uint64 array."""
    import polars as pl

    df = pl.DataFrame([pl.Series(n, a) for n, a in zip(names, arrays)])
    canon = df.select(canonical_exprs(df.schema, names))
    h = pl.col(names[0]).hash(seed) if len(names) == 1 else pl.struct(names).hash(seed)
    return canon.select(h.alias("__h")).to_series().to_arrow()


def rank_batch(hu, hk, secret: bytes):
    """:func:`~sparsedp.engines.bounding.prf_ranks` of Arrow uint64 arrays, as an Arrow uint64 array."""
    import numpy as np
    import pyarrow as pa

    u = np.asarray(hu.to_numpy(zero_copy_only=False), dtype=np.uint64)
    k = np.asarray(hk.to_numpy(zero_copy_only=False), dtype=np.uint64)
    return pa.array(prf_ranks(u, k, secret), type=pa.uint64())


def _with_arity(f: Any, n: int) -> Any:
    """``f(*args)`` with a signature of exactly ``n`` positional parameters (DuckDB reads a UDF's arity from
    its signature)."""
    def g(*args):
        return f(*args)

    g.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter(f"a{i}", inspect.Parameter.POSITIONAL_ONLY) for i in range(n)])
    return g


@contextmanager
def choice_functions(con: Any, unit: str, unit_type: Any, by: list[str], key_types: list[Any],
                     secret: bytes | None) -> Iterator[tuple[str, str, str]]:
    """Register ``(unit fingerprint, key fingerprint, rank)`` on ``con`` under fresh random names for the
    duration of the block and yield the names (``rank`` is only registered when ``secret`` is given).

    ``unit_type``/``key_types``: the DuckDB types of the arguments as the query passes them.
    """
    tag = secrets.token_hex(8)
    names = (f"__sparsedp_hu_{tag}", f"__sparsedp_hk_{tag}", f"__sparsedp_rank_{tag}")
    registered = []
    try:
        con.create_function(names[0], lambda u: fingerprint_batch([unit], (u,), SEED_UNIT), [unit_type],
                            "UBIGINT", type="arrow")
        registered.append(names[0])
        con.create_function(names[1], _with_arity(lambda *ks: fingerprint_batch(by, ks, SEED_KEY), len(by)),
                            list(key_types), "UBIGINT", type="arrow")
        registered.append(names[1])
        if secret is not None:
            key = bytes(secret)
            con.create_function(names[2], lambda hu, hk: rank_batch(hu, hk, key), ["UBIGINT", "UBIGINT"],
                                "UBIGINT", type="arrow")
            registered.append(names[2])
        yield names
    finally:
        for n in registered:
            try:
                con.remove_function(n)
            except Exception:  # the connection may already be closed; nothing else holds the closure
                pass
