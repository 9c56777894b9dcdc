"""The quantile contribution model (engines/quantile_cells.py) is per-unit local and keyed by the secret only:
the partial cell counts of any split of the input by units sum to the whole input's (what Spark's executors
compute, one partition each), whatever the row order; another secret makes another choice; and the model's
bounds hold (at most l0 released keys per unit, at most max_rows rows per key)."""

from __future__ import annotations

import numpy as np
import polars as pl

import sparsedp as sd
from sparsedp.engines.quantile_cells import (CELL, COUNT, KEY, QUANTILE, cells_from_partials, indexed_keys,
                                             partial_cells)


def _frame(seed=3, n=3000, units=300, keys=12):
    r = np.random.default_rng(seed)
    return pl.DataFrame({"u": r.integers(0, units, n).astype(np.int32), "k": [f"q{x}" for x in r.integers(0, keys, n)],
                         "v": np.round(r.lognormal(3, 1, n), 1)})


QS = [sd.Median("v", 0, 200, cells=32), sd.Quantile("v", 0.9, 0, 200, cells=16, max_rows=2)]


def _cells(parts, keys, secret):
    partials = pl.concat([partial_cells(p, "u", ["k"], keys, QS, 2, secret) for p in parts])
    return cells_from_partials(partials, keys.height, len(QS))


def test_partial_cells_are_per_unit_local():
    df = _frame()
    keys = indexed_keys(df.select("k").unique().head(9).to_arrow(), ["k"])
    secret = bytes(range(32))
    whole = _cells([df], keys, secret)
    parts = [df.filter(pl.col("u") % 3 == i).sample(fraction=1.0, shuffle=True, seed=i) for i in range(3)]
    split = _cells(parts, keys, secret)
    other = _cells([df], keys, bytes(range(1, 33)))
    for w, s, o in zip(whole, split, other):
        assert np.array_equal(w.key, s.key) and np.array_equal(w.cell, s.cell) and np.array_equal(w.count, s.count)
    assert any(not (np.array_equal(w.cell, o.cell) and np.array_equal(w.count, o.count))
               for w, o in zip(whole, other))


def test_partial_cells_enforce_the_bounds():
    df = _frame(n=800, units=60)
    keys = indexed_keys(df.select("k").unique().to_arrow(), ["k"])
    secret = bytes(32)
    per_unit = []
    for u in df["u"].unique().to_list():  # one unit at a time: its own contribution
        p = partial_cells(df.filter(pl.col("u") == u), "u", ["k"], keys, QS, 2, secret)
        per_unit.append(p.with_columns(pl.lit(u).alias("u")))
    allp = pl.concat(per_unit)
    for i, q in enumerate(QS):
        mine = allp.filter(pl.col(QUANTILE) == i)
        per_key = mine.group_by("u", KEY).agg(pl.col(COUNT).sum())
        assert per_key.group_by("u").len()["len"].max() <= 2          # l0 released keys per unit
        assert per_key[COUNT].max() == q.max_rows                       # max_rows rows per (unit, key), reached
        assert mine[CELL].max() < q.cells
    whole = cells_from_partials(partial_cells(df, "u", ["k"], keys, QS, 2, secret), keys.height, len(QS))
    assert whole[0].rows == int(allp.filter(pl.col(QUANTILE) == 0)[COUNT].sum())
