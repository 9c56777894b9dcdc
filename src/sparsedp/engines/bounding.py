"""Contribution bounding: the random choice of at most ``l0`` keys per privacy unit — ONE definition for every
engine (Polars, DuckDB, pandas, Arrow, files, and Spark, which calls :func:`select_pairs` in ``mapInArrow``).
The DuckDB engine computes the distinct pairs in SQL and applies the Polars engine's code to them
(:func:`sparsedp.engines.pair_ids.bound_pair_ids`).

**The choice.** For each release a 32-byte secret ``K`` is drawn from the secure source
(:func:`draw_bounding_secret`). Every distinct ``(unit, key)`` pair gets a *fingerprint*
``(h_u, h_k)`` — Polars' native ``hash`` with fixed public seeds of the canonicalised unit value and of the
canonicalised key values (:func:`canonical_exprs`: integers → Int64, Float32 → Float64, Categorical/Enum →
String, time-zone-aware datetimes → UTC microseconds, …) — and the *rank*

    ``r(unit, key) = first 8 bytes (big-endian) of AES-256_{K'}(h_u ‖ h_k)``,   ``K' = SHA-256(tag ‖ K)``

(AES in ECB mode over the 16-byte fingerprint blocks, each word little-endian). A unit with ``d > l0``
distinct keys keeps its ``l0`` pairs of smallest ``(r, key)`` in the canonical key order
(:func:`canonical_order`: canonical values, lexicographic for strings); a unit with ``d <= l0`` keeps all.

- *Private, for any secret and any fingerprint function.* A unit's kept keys are a deterministic function of
  its own distinct keys, its own value and ``K`` only (the rank of a pair involves no other unit's data and no
  global order). So for every fixed ``K``, adding or removing one unit changes the bounded histogram by that
  unit's at most ``l0`` contributions of 1 and nothing else: the contribution model every accountant assumes
  (ℓ∞ = 1, ℓ0 = ``l0``; Karrer et al. (2022) spec §1 ``C_u``, which also asks for the choice to be "per user and
  independently of other users' data"). ``K`` is independent of the data, so the guarantee holds for the
  randomised release as a whole. This part uses no cryptographic assumption at all.
- *Uniform (computational).* Assume ``x ↦ AES-256_{K'}(x)`` with ``K' = SHA-256(tag ‖ K)`` for a uniform
  32-byte ``K`` is a pseudorandom permutation (the standard PRP assumption on AES with a key derived by
  SHA-256; the tag only separates this use of ``K``). A PRP on 128-bit blocks is a PRF up to the birthday
  bound ``n²/2¹²⁹``, and truncating a PRF's output to 64 bits keeps it a PRF. If a unit's keys have pairwise distinct fingerprints, their blocks
  ``h_u ‖ h_k`` are distinct, so their ranks are (computationally indistinguishable from) i.i.d. uniform 64-bit
  words and the kept set is a uniformly random ``l0``-subset of the unit's keys (64-bit rank ties, probability
  below ``d²/2⁶⁵``, are broken by the canonical key order). Fingerprints are *not* collision resistant (Polars'
  hash is fast, not cryptographic): two of a unit's keys with equal ``h_k`` get equal ranks and are kept or
  dropped together (ties broken by canonical key order), a bias of the choice's uniformity only — privacy
  (above) is unaffected. For non-adversarial keys a unit of ``d`` keys has such a collision with probability
  about ``d²/2⁶⁵``.
- *Unpredictable.* ``K`` is fresh per release from the OS CSPRNG, so no one (data owner, curator) can predict
  or steer which keys are dropped. A fixed or public-seeded hash alone (e.g. ranking by Polars' ``hash``)
  would drop the same keys for every unit and every release, a bias a data owner could steer by choosing
  key spellings; the keyed PRF layer is what prevents it.
- *The same everywhere.* The rank depends only on values (canonicalised, so a Spark → Arrow → Polars batch
  with Int32/large-string/microsecond columns ranks like the user's Polars frame), never on row order,
  chunking or partitioning, and it is deterministic given ``K`` (a retried Spark task reproduces it). So every
  engine given the same ``K`` keeps the same pairs, and :func:`select_pairs` on a partition holding all rows of
  its units equals :func:`select_pairs` on the whole input restricted to those units. Polars' ``hash`` is
  stable within one Polars version: driver and executors must run the same Polars.
- *Cheap.* The one pass over all rows groups them by key collecting each key's distinct units
  (:func:`per_key_units`: de-duplication and units-per-key at once, about the cost of a plain
  ``group_by(key).agg(n_unique(unit))``); the pairs then become ``(key index, unit)`` integers
  (:func:`choose_from_per_key`): one aggregation for the unit degrees, one join giving the units over ``l0``
  a dense index, fingerprints of the distinct keys and heavy units only, AES ranks of the heavy units' pairs
  only (streamed through a small buffer), and one numpy sort of packed ``(unit index, rank)`` words
  (:func:`keep_smallest`). Key strings are hashed once and never re-sorted per pair.

:func:`bound` applies the choice to the engines' :class:`~sparsedp.engines.base.RawCounts` (key counts plus
the heavy units' pairs) and builds the bounded histogram in canonical key order.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from ..errors import InputDataError
from ..core.histogram import SparseHistogram
from ..core.key_order import SEED_KEY, SEED_UNIT, canonical_expr, canonical_exprs, canonical_rows

if TYPE_CHECKING:  # Polars is imported when the choice runs (``import sparsedp`` stays light)
    import polars as pl
    import pyarrow as pa

    from ..core.engine import RandomSource


COUNT = "__sparsedp_n"  # internal count column name (never shown to users)
DEG = "__sparsedp_d"

_TAG = b"sparsedp select_pairs v1 AES-256 rank key"
SECRET_BYTES = 32


def draw_bounding_secret(rng: RandomSource) -> bytes:
    """The per-release bounding secret ``K``: 32 bytes from a :mod:`sparsedp.noise` source (``random_bytes``;
    sources with only ``uint64`` give 4 words, little-endian)."""
    rb = getattr(rng, "random_bytes", None)
    if callable(rb):
        out = bytes(rb(SECRET_BYTES))
    else:
        words = getattr(rng, "uint64")  # a source with 64-bit words only
        out = np.asarray(words(SECRET_BYTES // 8), dtype="<u8").tobytes()
    if len(out) != SECRET_BYTES:
        raise RuntimeError("the random source returned the wrong number of bytes")
    return out


def fingerprint_exprs(unit: str, by: list[str]) -> tuple[pl.Expr, pl.Expr]:
    """``(h_u, h_k)`` expressions over *canonicalised* columns (public fixed seeds)."""
    import polars as pl

    hu = pl.col(unit).hash(SEED_UNIT)
    hk = pl.col(by[0]).hash(SEED_KEY) if len(by) == 1 else pl.struct(by).hash(SEED_KEY)
    return hu.alias("__hu"), hk.alias("__hk")


def unit_fingerprints(units: pl.Series) -> np.ndarray:
    """``h_u`` (uint64) of each value of the Polars Series ``units``: its canonical value
    (:func:`canonical_expr`) hashed with :data:`SEED_UNIT` — the same whatever type the values arrive in
    (e.g. Int32 or Int64 from Arrow)."""
    return (units.to_frame().select(canonical_expr(units.name, units.dtype).hash(SEED_UNIT))
            .to_series().to_numpy())


def key_fingerprints(keys: pl.DataFrame, by: list[str]) -> np.ndarray:
    """``h_k`` (uint64) of each row of the key columns ``by`` of the Polars DataFrame ``keys``: the canonical
    values (:func:`canonical_exprs`) hashed with :data:`SEED_KEY` (one column: the column, several: their
    struct), as :func:`fingerprint_exprs`."""
    return keys.select(canonical_exprs(keys.schema, by)).select(fingerprint_exprs(by[0], by)[1]).to_series().to_numpy()


def prf_ranks(hu: np.ndarray, hk: np.ndarray, secret: bytes, iu: np.ndarray | None = None,
              ik: np.ndarray | None = None) -> np.ndarray:
    """``r_i = first 8 bytes (big-endian) of AES-256_{K'}(h_u ‖ h_k)`` (each word little-endian) for the
    fingerprint pairs ``(hu[iu[i]], hk[ik[i]])`` (``iu``/``ik`` None: the identity), as uint64.

    ECB over the whole buffer, streamed through a small reused block buffer (gathers included), so the only
    large allocation is the output.
    """
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

    if len(secret) != SECRET_BYTES:
        raise ValueError("the bounding secret must be 32 bytes")
    n = (iu if iu is not None else hu).size
    out = np.empty(n, dtype=np.uint64)
    enc = Cipher(algorithms.AES(hashlib.sha256(_TAG + secret).digest()), modes.ECB()).encryptor()
    step = min(n, 1 << 16)
    block = np.empty((step, 2), dtype="<u8")
    ct = np.empty(16 * step + 15, dtype=np.uint8)
    for i in range(0, n, step):
        m = min(step, n - i)
        block[:m, 0] = hu[i:i + m] if iu is None else hu[iu[i:i + m]]
        block[:m, 1] = hk[i:i + m] if ik is None else hk[ik[i:i + m]]
        if enc.update_into(block[:m].data.cast("B"), ct.data) != 16 * m:
            raise RuntimeError("AES-ECB produced an unexpected number of bytes")
        out[i:i + m] = ct[:16 * m].view(">u8")[::2]
    return out


def keep_smallest(group: np.ndarray, rank: np.ndarray, tiebreak: np.ndarray, l0: int, n_groups: int) -> np.ndarray:
    """Mask keeping, in every group ``0 … n_groups-1``, the ``l0`` elements of smallest ``(rank, tiebreak)``.

    Fast path: pack ``(group, rank >> b)`` into one word, sort the words, read each group's ``l0``-th
    smallest and compare; exact whenever that word is not tied (checked by counting: every group keeps at
    least ``min(d, l0)``, so a correct total means every group is exact), else the exact ``lexsort`` path.
    """
    n = group.size
    d = np.bincount(group, minlength=n_groups)
    starts = np.cumsum(d) - d
    want = int(np.minimum(d, l0).sum())
    b = max(1, int(n_groups - 1).bit_length())
    if n and b <= 40:
        def packed() -> np.ndarray:
            p = group.astype(np.uint64)
            p <<= np.uint64(64 - b)
            p |= rank >> np.uint64(b)
            return p

        last = starts + np.minimum(d, l0) - 1  # index of each group's l0-th smallest word (groups are non-empty)
        srt = packed()
        srt.sort()  # numpy's, in this thread: the engines call this from every thread of their pool at once
        cut = srt[np.maximum(last, 0)]
        del srt  # packed words are recomputed rather than kept next to their sorted copy (peak memory)
        keep: np.ndarray = packed() <= cut[group]
        if int(keep.sum()) == want:
            return keep
    group = group.astype(np.int64, copy=False)
    order = np.lexsort((tiebreak, rank, group))
    pos = np.empty(n, dtype=np.int64)
    pos[order] = np.arange(n, dtype=np.int64) - starts[group[order]]
    return pos < l0


@dataclass
class Choice:
    """The ℓ0 choice on one input, in terms of its distinct keys in canonical order.

    Attributes:
        keys: the distinct keys (the ``by`` columns, input dtypes), sorted canonically; key ``i`` is row ``i``.
        units_per_key: distinct units per key (before the bound), int64, aligned with ``keys``.
        dropped_per_key: pairs removed by the bound per key (int64), aligned with ``keys``.
        units_in, pairs_in, units_over_l0: distinct units, distinct pairs, units with more than ``l0`` keys.
        pairs: only when asked for: the kept distinct pairs as ``(unit, KEY)``, ``KEY`` the key index.
        kept_sums: for each name of ``sums`` (:func:`choose_from_per_key`), the per-key Int64 sum of that
            per-pair value over the KEPT pairs, aligned with ``keys`` (empty tuple when no sums were asked).
    """

    keys: pl.DataFrame
    units_per_key: np.ndarray
    dropped_per_key: np.ndarray
    units_in: int
    pairs_in: int
    units_over_l0: int
    pairs: pl.DataFrame | None = None
    kept_sums: tuple[np.ndarray, ...] = ()


KEY = "__sparsedp_k"
SEG = "__sparsedp_g"


def per_key_units(lf: pl.LazyFrame, unit: str, by: list[str]) -> pl.LazyFrame:
    """Lazy query: one row per distinct key with the list of its distinct units (the one pass over all rows;
    it also de-duplicates the pairs)."""
    import polars as pl

    return lf.group_by(by).agg(pl.col(unit).unique())


def choose_from_per_key(pk: pl.DataFrame, unit: str, by: list[str], l0: int | None, secret: bytes | None,
                        with_pairs: bool = False, sums: Sequence[str] = ()) -> Choice:
    """The ℓ0 choice (module docstring) given ``pk`` = :func:`per_key_units` collected.

    ``sums``: names of further list columns of ``pk`` aligned element by element with the unit lists (one Int64
    value per distinct (unit, key) pair, e.g. the gridded SUM contributions of
    :mod:`sparsedp.engines.aggregate_exprs`); :attr:`Choice.kept_sums` then gives, per key, the sum of those
    values over the pairs the choice keeps (all pairs minus the dropped ones). The choice itself never looks at
    them: it is the same with or without ``sums``.

    Keys are put in canonical order once (a sort of the distinct keys only); the distinct pairs become
    ``(key index, unit)`` by exploding the unit lists, so every later step works on integers: unit degrees
    (one hash aggregation on the pairs), a join attaching a dense index to the units over ``l0``, fingerprints
    of the distinct heavy units and of the distinct keys only, the AES ranks of the heavy pairs, and
    :func:`keep_smallest` (one sort of packed words).
    """
    import polars as pl

    n_keys = pk.height
    canon_keys = pk.select(canonical_exprs(pk.schema, by))
    order = canonical_rows(pk, by)
    pos = np.empty(n_keys, dtype=np.uint32 if n_keys < 2**32 else np.int64)
    pos[order] = np.arange(n_keys, dtype=pos.dtype)
    upk = pk[unit].list.len().to_numpy().astype(np.int64)[order]
    keys = pk.select(by)[order] if n_keys else pk.select(by)
    sums = list(sums)
    totals = [pk.select(pl.col(c).list.sum().cast(pl.Int64))[c].to_numpy()[order] for c in sums]
    # (key index, unit[, per-pair values]) pairs
    ex = pk.lazy().select(pl.Series(KEY, pos), unit, *sums).explode([unit, *sums]).collect().lazy()
    del pk  # the unit lists are no longer needed (freed now if the caller kept no reference)
    deg = ex.group_by(unit).agg(pl.len().alias(DEG)).collect()
    lim = l0 if l0 is not None else 2**62
    stats = deg.select(pl.len().alias("u"), pl.col(DEG).sum().alias("p"), (pl.col(DEG) > lim).sum().alias("h"))
    units_in, pairs_in, heavy_n = (int(x or 0) for x in stats.row(0))
    dropped = np.zeros(n_keys, dtype=np.int64)
    pairs = None
    if l0 is not None and heavy_n:
        if secret is None:
            raise ValueError("bounding needs the per-release secret")
        hunits = deg.lazy().filter(pl.col(DEG) > l0).select(unit).with_row_index(SEG).collect()
        heavy = ex.join(hunits.lazy(), on=unit, how="inner").select(KEY, SEG, *sums).collect()
        hu = unit_fingerprints(hunits[unit])
        hk_sorted = key_fingerprints(canon_keys[order], by)
        k = heavy[KEY].to_numpy()
        g = heavy[SEG].to_numpy()
        rank = prf_ranks(hu, hk_sorted, secret, g, k)
        keep = keep_smallest(g, rank, k, l0, hunits.height)
        dropped = np.bincount(k[~keep], minlength=n_keys).astype(np.int64)
        if sums:  # per-key sums of the dropped pairs' values, subtracted exactly (Int64)
            gone = heavy.filter(pl.Series(~keep)).group_by(KEY).agg([pl.col(c).sum() for c in sums])
            gk = gone[KEY].to_numpy().astype(np.int64)
            for t, c in zip(totals, sums):
                t[gk] -= gone[c].to_numpy()
        if with_pairs:
            light = ex.join(hunits.lazy(), on=unit, how="anti").select(unit, KEY).collect()
            kept = heavy.filter(pl.Series(keep)).join(hunits, on=SEG).select(unit, KEY)
            pairs = pl.concat([light, kept])
    elif with_pairs:
        pairs = ex.select(unit, KEY).collect()
    return Choice(keys=keys, units_per_key=upk, dropped_per_key=dropped, units_in=units_in, pairs_in=pairs_in,
                  units_over_l0=heavy_n if l0 is not None else 0, pairs=pairs, kept_sums=tuple(totals))


def _choose(pairs: pl.DataFrame | pl.LazyFrame, unit: str, by: list[str], l0: int, secret: bytes | None,
            with_pairs: bool = False) -> Choice:
    """:func:`choose_from_per_key` on a Polars DataFrame or LazyFrame of (possibly repeated) pairs."""
    import polars as pl

    lf = pairs.lazy() if isinstance(pairs, pl.DataFrame) else pairs
    pk = per_key_units(lf.select([unit] + by), unit, by).collect()
    return choose_from_per_key(pk, unit, by, l0, secret, with_pairs=with_pairs)


def select_pairs(pairs: pl.DataFrame | pl.LazyFrame, unit: str, by: list[str], l0: int,
                 secret: bytes) -> pl.DataFrame:
    """The kept distinct ``(unit, by…)`` pairs of the random ℓ0 choice (module docstring), as a Polars DataFrame
    with columns ``[unit, *by]`` in the input's dtypes (any row order).

    ``pairs``: a Polars DataFrame or LazyFrame with (at least) the ``unit`` and ``by`` columns; duplicate rows
    are allowed (they are de-duplicated). Per-unit local and deterministic given ``secret``: on any subset of
    units holding all of those units' rows it returns exactly the pairs it returns for them on the whole input.
    """
    import polars as pl

    ch = _choose(pairs, unit, list(by), l0, secret, with_pairs=True)
    assert ch.pairs is not None  # asked for
    k = ch.pairs[KEY].to_numpy()
    return pl.concat([ch.pairs.select(unit), ch.keys[k]], how="horizontal")


def bounded_key_counts(pairs: pl.DataFrame | pl.LazyFrame, unit: str, by: list[str], l0: int,
                       secret: bytes) -> pl.DataFrame:
    """The key histogram of :func:`select_pairs` (the same choice) without materialising the kept pairs:
    a Polars DataFrame ``[*by, COUNT]`` (Int64 counts >= 1; keys in the input's dtypes, canonical order)."""
    import polars as pl

    ch = _choose(pairs, unit, list(by), l0, secret)
    counts = ch.units_per_key - ch.dropped_per_key
    return ch.keys.with_columns(pl.Series(COUNT, counts, dtype=pl.Int64)).filter(pl.col(COUNT) > 0)


def bound(key_counts: pa.Table | pl.DataFrame, heavy_pairs: pa.Table | pl.DataFrame | None, unit: str,
          by: list[str], l0: int | None, secret: bytes | None, pre_threshold: int = 1,
          pairs_dropped_l0: int | None = None) -> tuple[SparseHistogram, dict[str, Any]]:
    """Apply the random ℓ0 choice to an engine's counts and build the bounded histogram (module docstring).

    Args:
        key_counts: ``pyarrow.Table`` (or Polars DataFrame) of the key columns and :data:`COUNT` (distinct
            units per key).
        heavy_pairs: ``pyarrow.Table`` (or Polars DataFrame) with ``unit`` and the key columns: every distinct
            pair of every unit with more than ``l0`` keys (any order); ``None`` or empty when there are none.
            The choice is :func:`select_pairs`'s (per-unit local, so running it on these units alone is exact).
        l0: the bound (``None``: no bound, nothing is dropped).
        secret: the per-release bounding secret (:func:`draw_bounding_secret`); unused when ``l0`` is None.
        pre_threshold: keys with a bounded count below it are dropped (>= 1: zero counts never pass).
        pairs_dropped_l0: set when the engine already applied the choice (``key_counts`` are the bounded
            counts of every input key, in canonical key order, and ``heavy_pairs`` is None); the number of
            pairs it dropped.

    Returns:
        ``(histogram, info)`` with ``info`` = keys_in, keys_bounded, pairs_dropped_l0, and ``selected``: the
        rows of ``key_counts`` (after its canonical sort, none when ``pairs_dropped_l0`` is set) kept in the
        histogram, in its order.
    """
    import polars as pl

    kc = key_counts if isinstance(key_counts, pl.DataFrame) else pl.from_arrow(key_counts)
    assert isinstance(kc, pl.DataFrame)
    # Canonical key order: the histogram (hence the noise draws) follows it, so a seeded source gives the
    # same release from every engine.
    kc = kc.with_columns(pl.col(COUNT).cast(pl.Int64))
    if pairs_dropped_l0 is None:  # engines that applied the choice return their keys in canonical order
        kc = kc[canonical_rows(kc, by)]
    counts = kc[COUNT].to_numpy().copy()
    dropped_pairs = 0
    if pairs_dropped_l0 is not None:
        dropped_pairs = int(pairs_dropped_l0)
    elif l0 is not None and heavy_pairs is not None and len(heavy_pairs):
        heavy = heavy_pairs if isinstance(heavy_pairs, pl.DataFrame) else pl.from_arrow(heavy_pairs)
        assert isinstance(heavy, pl.DataFrame)
        ch = _choose(heavy, unit, by, l0, secret)
        d = ch.keys.with_columns(pl.Series("__n", ch.dropped_per_key)).filter(pl.col("__n") > 0)
        j = kc.select(by).with_row_index("__k").join(d, on=by, how="inner")
        if j.height != d.height:  # e.g. NaN keys, which never compare equal
            raise InputDataError("some (unit, key) values cannot be matched to themselves (NaN in a key or "
                                 "unit column?); replace NaN before releasing")
        counts[j["__k"].to_numpy().astype(np.int64)] -= j["__n"].to_numpy()
        dropped_pairs = int(ch.dropped_per_key.sum())
    keys_in = kc.height
    keys_bounded = int((counts >= 1).sum())
    sel = np.flatnonzero(counts >= max(1, pre_threshold))
    keys = kc.select(by)
    if sel.size != keys.height:
        keys = keys[sel]
    hist = SparseHistogram(keys=keys.to_arrow(), counts=counts[sel], distinct=True)
    return hist, {"keys_in": keys_in, "keys_bounded": keys_bounded, "pairs_dropped_l0": dropped_pairs,
                  "selected": sel}
