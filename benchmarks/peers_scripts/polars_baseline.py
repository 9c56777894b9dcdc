"""Baseline: the plain (non-private) Polars group-by the other peers are timed against."""

from __future__ import annotations

from _protocol import main


def thresholds(eps, delta, l0):
    return []


def release(table, eps, delta, l0, noise):
    import polars as pl
    counts = pl.from_arrow(table).group_by("key").agg(pl.col("unit").n_unique().alias("count"))
    return counts["key"].to_list(), [float(x) for x in counts["count"].to_list()], {
        "version": f"polars {pl.__version__}", "mechanism": "group_by(key).n_unique(unit), no privacy"}


if __name__ == "__main__":
    main(thresholds, release)
