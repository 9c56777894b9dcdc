"""Golden released tables of the DuckDB engine (issue 19, session 3): the releases below were captured from the
code BEFORE the DuckDB bounding statement was rewritten (``python tests/engines/golden_releases.py`` at commit
c516e8d wrote ``tests/engines/golden/*.parquet``), and ``test_duckdb_golden.py`` checks that every engine still
releases exactly these tables for the same seeded source."""

from __future__ import annotations

import numpy as np
import polars as pl

import sparsedp as sd
from sparsedp.noise import InsecureSeededRandom


def golden_frame() -> pl.DataFrame:
    """20 000 rows: Pareto-ish unit activity (many units over l0 = 4), Zipf-ish string keys, a second key
    column, float and integer value columns (1 row per (unit, key) for the floats in most pairs)."""
    g = np.random.default_rng(20261124)
    n_units = 1500
    act = np.minimum((g.pareto(1.2, n_units) + 1) * 4, 200).astype(np.int64)
    units = np.repeat(np.arange(n_units, dtype=np.int64), act)
    n = units.size
    q = np.minimum(g.zipf(1.3, n), 400) - 1
    return pl.DataFrame({
        "user": units * 7919 + 11, "url": [f"page-{i:03d}" for i in q],
        "country": g.choice(["DE", "US", "FR", "BR"], n),
        "dwell": np.round(g.uniform(-10, 700, n), 2), "clicks": g.integers(0, 20, n).astype(np.int32),
    })


#: name → (release keyword arguments, seed)
CASES = {
    "count_l0_4": (dict(privacy_unit="user", by="url", epsilon=4.0, delta=1e-6, max_groups_per_unit=4), 101),
    "count_two_keys": (dict(privacy_unit="user", by=["url", "country"], epsilon=2.0, delta=1e-6,
                            max_groups_per_unit=3), 102),
    "count_sums": (dict(privacy_unit="user", by="url", epsilon=4.0, delta=1e-6, max_groups_per_unit=4,
                        aggregates=[sd.Count(), sd.Sum("dwell", 0, 600), sd.Mean("clicks", 0, 10)]), 103),
    "top_k_no_l0": (dict(privacy_unit="user", by="url", epsilon=2.0, delta=1e-6, top_k=50), 104),
    "top_k_sums": (dict(privacy_unit="user", by=["url", "country"], epsilon=2.0, delta=1e-6, top_k=30,
                        aggregates=[sd.Count(), sd.Sum("dwell", 0, 600)]), 105),
}


def run(name: str, data, engine: str):
    kw, seed = CASES[name]
    return sd.release(data, **kw, engine=engine, rng=InsecureSeededRandom(seed))


if __name__ == "__main__":
    import pathlib
    import sys

    out = pathlib.Path(__file__).parent / "golden"
    out.mkdir(exist_ok=True)
    df = golden_frame()
    for name in CASES:
        t = pl.DataFrame(run(name, df, "duckdb").table)
        ref = pl.DataFrame(run(name, df, "polars").table)
        assert t.equals(ref), name
        t.write_parquet(out / f"{name}.parquet")
        print(name, t.shape, file=sys.stderr)
