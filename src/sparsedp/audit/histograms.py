"""What an audited release reads and writes: tiny bounded histograms, as an embedded engine hands them to
``Mechanism.run``, and the released rows read back as ``(key id, value)`` arrays.

The audit's keys are integer ids ``0..n−1`` (one column ``key``); a mechanism that releases string labels (the
pure mechanisms' JSON labels ``"[7]"``) is read back through :func:`key_id`. :func:`size_estimate` reads the
released size estimate ñ of an embedding release (Lebeda (2024) Alg. 1: ``y_(d+1)/C``) exactly from its note.
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable

import numpy as np
import pyarrow as pa

from ..core.bounded import BoundingStats, LocalHistogram
from ..engines import get_engine

__all__ = ["arrow_engine", "local_histogram", "released_rows", "key_id", "size_estimate", "release_tiled"]

_CHUNK = 1 << 18  # keys per tiled release (bounds memory)


def arrow_engine():
    """The Arrow embedded engine every audited release runs on."""
    return get_engine("arrow")


def local_histogram(counts: np.ndarray, ids: np.ndarray, units: int | None = None) -> LocalHistogram:
    """A bounded :class:`~sparsedp.core.bounded.LocalHistogram` of the given keys (int ids) and counts, as an
    embedded engine hands it to ``Mechanism.run`` (keys with a count below 1 are not in it); ``units``: the number
    of privacy units in the input (default: the total count, one key per unit)."""
    n = int(counts.size)
    u = int(counts.sum()) if units is None else int(units)
    stats = BoundingStats(rows_in=int(counts.sum()), units_in=u, pairs_in=int(counts.sum()),
                          units_over_l0=0, pairs_dropped_l0=0, keys_in=n, keys_bounded=n, keys_out=n, l0=None)
    return LocalHistogram(keys=pa.table({"key": pa.array(ids, type=pa.int64())}), counts=counts, stats=stats)


def released_rows(released) -> tuple[np.ndarray, np.ndarray]:
    """(key ids, values) of a ``Released``: a LocalRelease (thresholded) or an Arrow table (in-process)."""
    rows = released.rows
    if hasattr(rows, "values") and hasattr(rows, "keys") and not hasattr(rows, "schema"):
        return np.asarray(rows.keys.column("key").to_numpy(), np.int64), np.asarray(rows.values, np.float64)
    value_col = released.disclosure.value_column
    keys = rows.column("key").to_pylist()
    vals = rows.column(value_col).to_numpy(zero_copy_only=False)
    ids, out = [], []
    for kk, vv in zip(keys, vals):
        kid = key_id(kk)
        if kid is None:
            continue  # a random label of an empty bin that is not one of our integer keys
        ids.append(kid)
        out.append(float(vv))
    return np.asarray(ids, np.int64), np.asarray(out, np.float64)


def key_id(key) -> int | None:
    """Our integer key id from a released key: an int, or the pure mechanisms' JSON label ``"[7]"``."""
    if isinstance(key, (int, np.integer)):
        return int(key)
    try:
        x = json.loads(key)
    except (TypeError, ValueError):
        return None
    if isinstance(x, list) and len(x) == 1:
        x = x[0]
    return int(x) if isinstance(x, int) else None


def size_estimate(released) -> float:
    """The size estimate ñ = y_(d+1)/C of an embedding release, from its note (the exact integer ``y_(d+1)``)."""
    for note in released.disclosure.notes:
        m = re.search(r"y_\(d\+1\) = (\S+) with C = (\S+)\)", note)
        if m:
            return float(m.group(1)) / float(m.group(2))
    raise RuntimeError("the release carries no size estimate note")  # pragma: no cover


def release_tiled(mechanism, calibration, request, values: np.ndarray, runs: int, rng,
                  histogram: Callable[[np.ndarray, np.ndarray], Any]) -> np.ndarray:
    """``(runs, n)`` values of ``runs`` releases of the per-key ``values`` (0 = key absent; NaN = not released) by
    a mechanism with independent noise per key, as ONE release per chunk of ``r`` copies over disjoint key blocks
    (key ``i`` of copy ``j`` has id ``j·n + i``): disjoint blocks of one release are independent with the per-key
    law, so they are ``r`` independent releases, exactly. ``histogram(ids, values)`` builds what the engine hands
    to ``prepare``; each chunk goes through ``prepare`` and ``run`` as in the pipeline."""
    n = values.size
    out = np.full((runs, n), np.nan)
    live = np.flatnonzero(values > 0)
    if live.size == 0 or runs == 0:
        return out
    engine = arrow_engine()
    disclosure = mechanism.disclosure(request, calibration, "count")
    per = max(1, _CHUNK // live.size)
    done = 0
    while done < runs:
        r = min(per, runs - done)
        ids = (np.arange(r)[:, None] * n + live[None, :]).reshape(-1)
        hist = mechanism.prepare(engine, histogram(ids, np.tile(values[live], r)), request)
        keys, vals = released_rows(mechanism.run(engine, hist, calibration, disclosure, rng, request))
        out.reshape(-1)[done * n + keys] = vals
        done += r
    return out
