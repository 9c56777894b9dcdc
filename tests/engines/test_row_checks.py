"""The input checks of the pass over the rows (:class:`sparsedp.engines.pair_ids.RowChecks`), counted on the rows
that pass reads (a file is read once): on Parquet and CSV files, for one String key (the Categorical ids) and for
other keys (the grouped rows), with and without SUM/MEAN: the same errors as before, raised before anything is
drawn, and nothing written."""

from __future__ import annotations

import polars as pl
import pytest

import sparsedp as sd
from sparsedp.errors import InputDataError


class Tripwire:
    """A random source that fails the test if anything draws from it."""

    def uint64(self, size):
        raise AssertionError("randomness drawn before validation finished")

    random_bytes = getrandbits = randbelow = uint64


def _rows(n: int = 60) -> pl.DataFrame:
    return pl.DataFrame({"user": [i // 3 for i in range(n)], "url": [f"u{i % 5}" for i in range(n)],
                         "country": [["fr", "de"][i % 2] for i in range(n)], "day": [i % 4 for i in range(n)],
                         "dwell": [float(i % 7) for i in range(n)]})


def _null_at(df: pl.DataFrame, col: str, rows: tuple[int, ...]) -> pl.DataFrame:
    return df.with_columns(pl.when(pl.int_range(pl.len()).is_in(list(rows))).then(None).otherwise(pl.col(col))
                           .alias(col))


KEYS = {"one String key": ["url"], "two keys": ["url", "country"], "an integer key": ["day"]}


def _write(df: pl.DataFrame, path, fmt: str):
    if fmt == "parquet":
        df.write_parquet(path)
    else:
        df.write_csv(path)
    return path


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
@pytest.mark.parametrize("keys", list(KEYS))
@pytest.mark.parametrize("col", ["user", "key"])
@pytest.mark.parametrize("aggregates", [False, True])
def test_nulls_in_a_file_are_refused_before_any_draw(tmp_path, fmt, keys, col, aggregates):
    by = KEYS[keys]
    col = by[-1] if col == "key" else col
    path = _write(_null_at(_rows(), col, (4, 7)), tmp_path / f"in.{fmt}", fmt)
    out = tmp_path / "out.csv"
    extra = {"aggregates": [sd.Sum("dwell", 0, 10)]} if aggregates else {}
    with pytest.raises(InputDataError, match=f"null values in '{col}' \\(2 nulls\\)"):
        sd.release(path, "user", by, epsilon=1.0, delta=1e-6, max_groups_per_unit=2, rng=Tripwire(), out=out,
                   **extra)
    assert not out.exists()


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
@pytest.mark.parametrize("keys", list(KEYS))
def test_an_empty_file_is_refused(tmp_path, fmt, keys):
    path = _write(_rows().head(0), tmp_path / f"in.{fmt}", fmt)
    with pytest.raises(InputDataError, match="no rows"):
        sd.release(path, "user", KEYS[keys], epsilon=1.0, delta=1e-6, max_groups_per_unit=2, rng=Tripwire())


@pytest.mark.parametrize("keys", list(KEYS))
@pytest.mark.parametrize("bad", [None, float("nan"), float("inf")])
def test_bad_values_in_a_file_are_named_before_any_draw(tmp_path, keys, bad):
    df = _rows().with_columns(pl.when(pl.int_range(pl.len()) == 5).then(pl.lit(bad, dtype=pl.Float64))
                              .otherwise(pl.col("dwell")).alias("dwell"))
    path = _write(df, tmp_path / "in.parquet", "parquet")
    what = "null" if bad is None else "NaN or infinite"
    with pytest.raises(InputDataError, match=f"'dwell': 1 {what} value"):
        sd.release(path, "user", KEYS[keys], epsilon=1.0, delta=1e-6, max_groups_per_unit=2, rng=Tripwire(),
                   aggregates=[sd.Mean("dwell", 0, 10)])


@pytest.mark.parametrize("keys", list(KEYS))
def test_a_clean_file_releases_as_its_frame_does(tmp_path, keys):
    """The checks pass on clean rows, and the file's release equals the in-memory frame's (same seed)."""
    from sparsedp.noise import InsecureSeededRandom

    df = _rows(3000)
    path = _write(df, tmp_path / "in.parquet", "parquet")
    kw = dict(epsilon=1.0, delta=1e-6, max_groups_per_unit=2, aggregates=[sd.Sum("dwell", 0, 10)])
    a = sd.release(path, "user", KEYS[keys], rng=InsecureSeededRandom(3), **kw).table
    b = sd.release(df, "user", KEYS[keys], rng=InsecureSeededRandom(3), **kw).table
    assert a.equals(b) and a.height > 0
