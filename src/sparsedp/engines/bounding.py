"""Contribution bounding: the random choice of at most ``l0`` keys per privacy unit (engine-independent).

Every engine de-duplicates ``(unit, key)`` pairs, counts distinct units per key, and hands back the pairs of
the *heavy* units (more than ``l0`` distinct keys) in any order (:class:`~sparsedp.engines.base.RawCounts`).
:func:`bound` then keeps, for each heavy unit, a uniformly random ``l0``-subset of its keys, and subtracts the
dropped pairs from the key counts.

**The choice.** Sort the distinct keys (all of them, canonical order) and draw an independent uniform 64-bit
word ``A(key)`` for each from the secure source; sort the heavy units and draw ``B(unit)`` for each. The rank of
a pair is ``r(unit, key) = mix(A(key) + B(unit) mod 2⁶⁴)`` with ``mix`` the SplitMix64 finaliser (a bijection
of 64-bit words). A unit keeps its ``l0`` pairs of smallest rank.

- *Uniform.* For a fixed unit, the ``A(key)`` of its distinct keys are i.i.d. uniform; adding ``B(unit)`` and
  applying the bijection ``mix`` keeps them i.i.d. uniform. So the kept set is a uniformly random ``l0``-subset
  of the unit's keys, exactly (ties at the ``l0``-th rank are detected and broken by the canonical key order;
  they have probability below ``d²/2⁶⁴`` for a unit with ``d`` keys).
- *Private.* A unit's choice depends only on its own keys, on ``A`` at those keys and on ``B`` at the unit.
  ``A`` and ``B`` are i.i.d. draws assigned to values in sorted order, so their joint law is that of
  independent uniform random functions on the whole key and unit universes, whatever the data; couple neighbours
  through those functions and adding or removing one unit changes the bounded histogram by that unit's at most
  ``l0`` contributions of 1 and nothing else: the contribution model every accountant assumes (ℓ∞ = 1,
  ℓ0 = ``l0``; seed 001 spec §1 ``C_u``, which also asks for the choice to be "per user and independently of
  other users' data"). This holds information-theoretically; no cryptographic assumption is used.
- *Unpredictable.* The words come from the OS CSPRNG afresh for every release, so no one (data owner, curator)
  can predict or steer which keys are dropped. A fixed or weakly keyed hash (e.g. Polars' ``hash(seed=…)``,
  which is not a keyed PRF) would drop the same keys for every unit and every release, a bias a data owner
  could steer by choosing key spellings.
- *The same in every engine.* Ranks depend on values only, and the canonical sorts happen here (Polars), so
  every engine given the same random source state makes the same choice, in any row order.
- *Cheap.* No sort of the pairs: two hash joins attach ``A`` and ``B``, then one ``np.sort`` of packed
  (unit index, rank) words finds each unit's ``l0``-th smallest rank.

Across units, ranks share ``A(key)``; with ``mix`` they behave independently in practice, but only per-unit
uniformity is claimed (privacy needs none of it).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import InputDataError
from ..mechanisms.histogram import SparseHistogram

COUNT = "__sparsedp_n"  # internal count column name (never shown to users)

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def mix64(z: np.ndarray) -> np.ndarray:
    """SplitMix64 finaliser (Steele, Lea & Flood 2014): a bijection of uint64 words, applied elementwise."""
    z = z.astype(np.uint64, copy=True)
    with np.errstate(over="ignore"):
        z ^= z >> np.uint64(30)
        z *= _M1
        z ^= z >> np.uint64(27)
        z *= _M2
        z ^= z >> np.uint64(31)
    return z


def keep_smallest(group: np.ndarray, rank: np.ndarray, tiebreak: np.ndarray, l0: int, n_groups: int) -> np.ndarray:
    """Mask keeping, in every group ``0 … n_groups-1``, the ``l0`` elements of smallest ``(rank, tiebreak)``.

    Fast path: pack ``(group, rank >> b)`` into one word, ``np.sort`` the words, read each group's ``l0``-th
    smallest and compare; exact whenever that word is not tied (checked by counting), else the exact
    ``lexsort`` path.
    """
    n = group.size
    group = group.astype(np.int64, copy=False)
    d = np.bincount(group, minlength=n_groups)
    starts = np.cumsum(d) - d
    want = int(np.minimum(d, l0).sum())
    b = max(1, int(n_groups - 1).bit_length())
    if n and b <= 40:
        packed = (group.astype(np.uint64) << np.uint64(64 - b)) | (rank >> np.uint64(b))
        last = starts + np.minimum(d, l0) - 1  # index of each group's l0-th smallest word (groups are non-empty)
        cut = np.sort(packed)[np.maximum(last, 0)]
        keep = packed <= cut[group]
        if int(keep.sum()) == want:
            return keep
    order = np.lexsort((tiebreak, rank, group))
    pos = np.empty(n, dtype=np.int64)
    pos[order] = np.arange(n, dtype=np.int64) - starts[group[order]]
    return pos < l0


def _sort_key(frame: Any, cols: list[str]) -> list:
    """Sort expressions giving a canonical value order (categoricals by their strings, not their codes)."""
    import polars as pl

    return [pl.col(c).cast(pl.String) if frame.schema[c] in (pl.Categorical, pl.Enum) or
            isinstance(frame.schema[c], (pl.Categorical, pl.Enum)) else pl.col(c) for c in cols]


def bound(key_counts: Any, heavy_pairs: Any, unit: str, by: list[str], l0: int | None, rng: Any,
          pre_threshold: int = 1) -> tuple[SparseHistogram, dict]:
    """Apply the random ℓ0 choice and build the bounded histogram (see the module docstring).

    Args:
        key_counts: ``pyarrow.Table`` (or Polars DataFrame) of the key columns and :data:`COUNT` (distinct
            units per key).
        heavy_pairs: ``pyarrow.Table`` (or Polars DataFrame) with ``unit`` and the key columns: every distinct
            pair of every unit with more than ``l0`` keys (any order); ``None`` or empty when there are none.
        l0: the bound (``None``: no bound, nothing is dropped).
        rng: a :mod:`sparsedp.noise` source (its ``uint64``).
        pre_threshold: keys with a bounded count below it are dropped (>= 1: zero counts never pass).

    Returns:
        ``(histogram, info)`` with ``info`` = keys_in, keys_bounded, pairs_dropped_l0.
    """
    import polars as pl

    kc = key_counts if isinstance(key_counts, pl.DataFrame) else pl.from_arrow(key_counts)
    assert isinstance(kc, pl.DataFrame)
    # Canonical key order: the A(key) words are assigned in it, and the histogram (hence the noise draws)
    # follows it, so a seeded source gives the same release from every engine.
    kc = kc.with_columns(pl.col(COUNT).cast(pl.Int64)).sort(_sort_key(kc, by))
    counts = kc[COUNT].to_numpy().copy()
    dropped_pairs = 0
    if l0 is not None and heavy_pairs is not None and len(heavy_pairs):
        heavy = heavy_pairs if isinstance(heavy_pairs, pl.DataFrame) else pl.from_arrow(heavy_pairs)
        assert isinstance(heavy, pl.DataFrame)
        units = heavy.lazy().select(unit).unique().collect()
        units = units.sort(_sort_key(units, [unit]))
        a = np.asarray(rng.uint64(kc.height), dtype=np.uint64)
        b = np.asarray(rng.uint64(units.height), dtype=np.uint64)
        h = (heavy.lazy().join(kc.lazy().select(by).with_row_index("__k"), on=by, how="left")
             .join(units.lazy().with_row_index("__g"), on=unit, how="left").select("__k", "__g").collect())
        if h["__k"].null_count() or h["__g"].null_count():  # e.g. NaN keys, which never compare equal
            raise InputDataError("some (unit, key) values cannot be matched to themselves (NaN in a key or "
                                 "unit column?); replace NaN before releasing")
        kidx = h["__k"].to_numpy().astype(np.int64)
        g = h["__g"].to_numpy().astype(np.int64)
        with np.errstate(over="ignore"):
            rank = mix64(a[kidx] + b[g])
        keep = keep_smallest(g, rank, kidx, l0, units.height)
        dropped = np.bincount(kidx[~keep], minlength=kc.height)
        dropped_pairs = int(dropped.sum())
        counts -= dropped
    keys_in = kc.height
    nonzero = counts >= 1
    keys_bounded = int(nonzero.sum())
    sel = np.flatnonzero(counts >= max(1, pre_threshold))
    keys = kc.select(by)
    if sel.size != keys.height:
        keys = keys[sel]
    hist = SparseHistogram(keys=keys.to_arrow(), counts=counts[sel], distinct=True)
    return hist, {"keys_in": keys_in, "keys_bounded": keys_bounded, "pairs_dropped_l0": dropped_pairs}
