"""Per-release noise streams, one per chunk of keys: "one release, one draw" on every engine.

A release's keys are split into ``C = n_chunks(number of keys)`` chunks (one chunk per ``KEYS_PER_CHUNK`` keys,
at least one); a key's *chunk* is ``c = h_k mod C`` with ``h_k`` the key's public fingerprint, the same Polars hash of
the canonicalised key values that contribution bounding uses (:data:`sparsedp.core.key_order.SEED_KEY`,
fixed public seed). The keys of chunk ``c`` are noised in canonical key order
(:func:`sparsedp.core.key_order.canonical_order`) with the stream
``SecretKeyedStream(K_noise, chunk_label(c))`` (:class:`sparsedp.noise.source.SecretKeyedStream`: AES-CTR keyed
by HMAC of ``K_noise`` and the label), where ``K_noise`` is a fresh 32-byte secret drawn once per release from the
release's secure source.

Consequences, on every engine (Polars, DuckDB, pandas, Arrow and Spark):

- each key's noise is a deterministic function of ``(K_noise, the bounded histogram)``, whatever the partitioning,
  the number of tasks or the row order: recomputing a Spark stage, retrying a task or acting twice on a lazy
  result cannot draw fresh noise, and a seeded source gives the same table on every engine;
- distinct chunks read streams of distinct labels, independent by the PRF property of HMAC-SHA256/AES, and
  within a chunk distinct keys read distinct words of one stream: the noise has the law of independent draws
  from the secure source, which is what the accountants assume. (The fingerprint only decides *which* stream a
  key reads; a fingerprint collision puts two keys in the same chunk, never on the same words.)

The number of keys (with a count at or above the pre-threshold) is known to every engine before the noise step,
so every engine derives the same ``C``. It changes only which stream words a key reads, never the noise law, so it
has no privacy cost. A chunk is the unit of noise derivation, not of parallelism: a Spark task may hold several
chunks; with one chunk (up to ``KEYS_PER_CHUNK`` keys) the embedded engines need no hashing or sorting at all.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator, Mapping, Sequence

import numpy as np

from .key_order import SEED_KEY, canonical_exprs

if TYPE_CHECKING:  # Polars and pyarrow are imported when keys are noised (``import sparsedp`` stays light)
    import polars as pl
    import pyarrow as pa

#: keys per noise chunk (part of the definition of the per-key noise derivation)
KEYS_PER_CHUNK = 1 << 24


def n_chunks(n_keys: int) -> int:
    """The number of chunks of a release with ``n_keys`` keys."""
    return max(1, -(-int(n_keys) // KEYS_PER_CHUNK))
CHUNK = "__sparsedp_chunk"


def chunk_label(chunk: int) -> bytes:
    """The public label of chunk ``chunk``'s noise stream."""
    return b"noise chunk " + int(chunk).to_bytes(8, "little", signed=True)


def chunk_expr(schema: Mapping[str, pl.DataType], by: Sequence[str], chunks: int) -> pl.Expr:
    """Polars expression of each key's chunk (UInt32) among ``chunks`` over the key columns of ``schema``."""
    import polars as pl

    cols = list(by)
    canon = canonical_exprs(schema, cols)
    h = canon[0].hash(SEED_KEY) if len(cols) == 1 else pl.struct(canon).hash(SEED_KEY)
    return (h % chunks).cast(pl.UInt32).alias(CHUNK)


def chunk_ids(keys: pa.Table | pl.DataFrame, by: Sequence[str], chunks: int) -> np.ndarray:
    """Chunk of every row of ``keys`` (a pyarrow Table or Polars DataFrame of the key columns), uint32."""
    import polars as pl

    frame = keys if isinstance(keys, pl.DataFrame) else pl.from_arrow(keys)
    assert isinstance(frame, pl.DataFrame)
    if frame.height == 0:
        return np.empty(0, dtype=np.uint32)
    return frame.select(chunk_expr(frame.schema, by, chunks))[CHUNK].to_numpy()


def key_chunks(keys: pa.Table | pl.DataFrame, by: Sequence[str]) -> Iterator[tuple[int, np.ndarray | None]]:
    """``(chunk, positions)`` of a histogram's keys (canonical order) for the noise step; ``positions`` is
    ``None`` when there is one chunk (every key, in order: no hashing, no sorting)."""
    c = n_chunks(len(keys))
    if c == 1:
        yield 0, None
        return
    yield from chunks(chunk_ids(keys, by, c))


def chunks(ids: np.ndarray) -> Iterator[tuple[int, np.ndarray]]:
    """``(chunk, positions)`` for every non-empty chunk, positions increasing (so a histogram already in
    canonical key order stays in canonical order within each chunk)."""
    order = np.argsort(ids, kind="stable")
    sorted_ids = ids[order]
    bounds = np.flatnonzero(np.r_[True, sorted_ids[1:] != sorted_ids[:-1], True])
    for s, e in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
        yield int(sorted_ids[s]), order[s:e]
