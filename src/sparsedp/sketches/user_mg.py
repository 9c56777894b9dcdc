"""The user-level Misra–Gries sketch (PAMG): each step adds one privacy unit's *set* of distinct keys.

Source: Lebeda & Tětek, "Better Differentially Private Approximate Histograms and Heavy Hitters using the
Misra–Gries Sketch" (arXiv 2301.02457, v2 2025 = ACM TODS; the PODS 2023 version is thesis Chapter 3), the
section on users who contribute several distinct elements (their PAMG sketch). The update, written here as
one step per unit::

    for each unit u (in a fixed public order of the unit ids), with its set S_u of distinct keys:
        c_x <- c_x + 1 for every x in S_u                 # keys not yet stored enter with count 1
        r   <- the smallest r >= 0 with |{x : c_x > r}| <= k
        c   <- (c - r)^+  (keys whose count reaches 0 are dropped)

i.e. "decrement every counter by one while more than k keys are stored", done at once: r is the (k+1)-th
largest count when more than k keys are stored, else 0.

**Sensitivity (the lemma the release rests on; proof in ``docs/proofs/pamg-monotone.md``).** Let c and c' be
the sketches of two unit streams that differ by one unit (added or removed anywhere in the order; the sets
need not be bounded). Then c' − c ∈ {0, 1}^U ∪ {0, −1}^U over the whole universe U (a key absent from a
sketch counts 0), and every sketch has at most k keys. This is Definition 3.1 of Lebeda & Retschmeier, "The
Correlated Gaussian Sparse Histogram Mechanism" (arXiv 2412.10357): a k-sparse monotonic histogram, the case CSH (and the merged-sketch Laplace release of
the thesis §3.7, whose neighbours differ in the same way, Corollary 3.2) is calibrated for. So the sketch is
released at the unit level with the *same* noise and threshold as a one-row-per-unit stream: no group
privacy, and no bound on how many keys a unit has. ``tests/sketches/test_user_mg.py`` checks the lemma by
exact enumeration of every small stream and insertion point.

Error: every decrement round removes at least k + 1 from the stored counts, so with N = Σ_u |S_u| there are at
most N/(k+1) rounds and f(x) − N/(k+1) <= c_x <= f(x), with f(x) the number of units holding x (the
Misra–Gries bound with N elements).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

import numpy as np

from .. import _validate as v
from ..core.bounded import BoundingStats, PairIds

__all__ = ["UserMisraGries", "UnitSketchSummary", "pamg_reference", "sketch_units"]


class UserMisraGries:
    """The PAMG sketch over integer key codes (module docstring). ``update_set(codes)`` adds one unit.

    ``keys`` maps a code to the original key for the release (``_key``); :meth:`standard` is the
    code → positive count map, as :class:`~sparsedp.sketches.MisraGries` gives it, so the release functions
    of :mod:`sparsedp.mechanisms.misra_gries` apply unchanged."""

    merged = False

    def __init__(self, k: int, keys: dict[int, Any] | None = None) -> None:
        self.k = v.integer("k", k, lo=1)
        self.counts: dict[int, int] = {}
        self.units = 0
        self.elements = 0
        self._keys = keys

    def update_set(self, codes: Iterable[int]) -> "UserMisraGries":
        """Add one unit's keys (duplicates count once: the unit's *set* of keys)."""
        c = self.counts
        items = set(int(x) for x in codes)
        for x in items:
            c[x] = c.get(x, 0) + 1
        self.units += 1
        self.elements += len(items)
        if len(c) > self.k:
            r = sorted(c.values(), reverse=True)[self.k]  # the (k+1)-th largest count
            self.counts = {x: n - r for x, n in c.items() if n > r}
        return self

    def update_sets(self, unit_codes: np.ndarray, key_codes: np.ndarray) -> "UserMisraGries":
        """Add the units of the pairs ``(unit_codes[i], key_codes[i])``, in increasing unit code (the public
        order), each unit's keys as one set."""
        u = np.asarray(unit_codes)
        kc = np.asarray(key_codes, dtype=np.int64)
        if u.size == 0:
            return self
        order = np.lexsort((kc, u))
        u, kc = u[order], kc[order]
        starts = np.flatnonzero(np.r_[True, u[1:] != u[:-1]])
        ends = np.r_[starts[1:], u.size]
        for s, e in zip(starts.tolist(), ends.tolist()):
            self.update_set(kc[s:e].tolist())
        return self

    def standard(self) -> dict[int, int]:
        """The positive counters (code → count); at most k of them."""
        return dict(self.counts)

    def _key(self, code: int) -> Any:
        return code if self._keys is None else self._keys[code]


def pamg_reference(stream: Iterable[Iterable[Any]], k: int) -> dict[Any, int]:
    """A literal transcription for tests: insert the set, then decrement all counters by one (dropping zeros)
    while more than ``k`` keys are stored."""
    t: dict[Any, int] = {}
    for s in stream:
        for x in set(s):
            t[x] = t.get(x, 0) + 1
        while len(t) > k:
            t = {x: c - 1 for x, c in t.items() if c > 1}
    return t


@dataclass(frozen=True)
class UnitSketchSummary:
    """The PAMG sketch of a unit-level input (key ids are the positions in ``keys``, the distinct input keys
    sorted by value) and the curator statistics. Never released."""

    sketch: UserMisraGries
    keys: Any  # pyarrow.Table of the key columns, row i = key id i
    stats: BoundingStats


def sketch_units(ids: PairIds, k: int) -> UnitSketchSummary:
    """The PAMG sketch of the distinct (unit, key) pairs ``ids`` (read and checked by the engine,
    :meth:`~sparsedp.core.engine.Engine.pair_ids`), units added in increasing order of their value (a fixed public
    order: adding a unit does not move the others). Memory grows with the number of distinct pairs, as for the
    bounded histogram of the group-privacy path."""
    sketch = UserMisraGries(k).update_sets(ids.unit_ids, ids.key_ids)
    kept = len(sketch.counts)
    n_keys = len(ids.keys)
    stats = BoundingStats(rows_in=ids.rows, units_in=sketch.units, pairs_in=ids.pairs, units_over_l0=0,
                          pairs_dropped_l0=0, keys_in=n_keys, keys_bounded=n_keys, keys_out=kept, l0=None)
    return UnitSketchSummary(sketch=sketch, keys=ids.keys, stats=stats)
