"""``core.key_order.canonical_rows``: the rows of a key frame in the canonical key order, by a sort whose last key
is the row number. For distinct keys that is the order of the canonical sort alone; rows of equal keys come in
row order."""
from __future__ import annotations

import datetime as dt

import numpy as np
import polars as pl
import pytest

from sparsedp.core.key_order import canonical_order, canonical_rows


def _frames() -> dict[str, tuple[pl.DataFrame, list[str]]]:
    g = np.random.default_rng(11)
    n = 5000
    words = np.array([f"https://example.org/{w}" for w in g.permutation(20_000)[:n]])
    base = dt.datetime(2026, 1, 1)
    return {
        "strings": (pl.DataFrame({"url": words}), ["url"]),
        "two keys": (pl.DataFrame({"a": g.integers(0, 40, n), "b": words}), ["a", "b"]),
        "ints and floats": (pl.DataFrame({"i": g.permutation(n).astype(np.int32) - 2000,
                                          "f": g.normal(size=n).astype(np.float32)}), ["i", "f"]),
        "datetimes": (pl.DataFrame({"t": [base + dt.timedelta(seconds=int(s)) for s in g.permutation(n)]})
                      .with_columns(pl.col("t").dt.replace_time_zone("Europe/Paris")), ["t"]),
    }


@pytest.mark.parametrize("case", list(_frames()))
def test_distinct_keys_in_the_canonical_sort_order(case):
    frame, by = _frames()[case]
    assert frame.select(by).is_unique().all()
    want = frame.with_row_index("__row").sort(canonical_order(frame.schema, by))["__row"].to_numpy()
    got = canonical_rows(frame, by)
    assert got.dtype == np.int64 and np.array_equal(got, want)


def test_equal_keys_come_in_row_order():
    frame = pl.DataFrame({"k": ["b", "a", "b", "c", "a", "b"], "v": [0, 1, 2, 3, 4, 5]})
    assert canonical_rows(frame, ["k"]).tolist() == [1, 4, 0, 2, 5, 3]
    assert canonical_rows(frame.head(0), ["k"]).tolist() == []
