"""pandas engine: bounding and counting with pandas (``drop_duplicates``, ``groupby``).

The bounded histogram (:meth:`PandasEngine.bounded_raw_counts`) is computed by the fastest engine for the input
(:func:`sparsedp.engines.choice.fastest_engine`); the pandas path below is the generic
:meth:`~sparsedp.engines.base.EmbeddedEngine.raw_counts`.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, cast

from ..core import sources
from ..errors import InputDataError
from . import fastest_embedded_engine
from .base import EmbeddedEngine, RawCounts
from .bounding import COUNT
from .input_checks import check_nulls_and_rows
from ..core.sources import InputData

if TYPE_CHECKING:  # pandas and pyarrow are imported when the engine runs (``import sparsedp`` stays light)
    import pandas as pd
    import polars as pl
    import pyarrow as pa
    from duckdb import DuckDBPyRelation

    from ..core.engine import RandomSource


def to_pandas(data: InputData, columns: list[str] | None = None) -> pd.DataFrame:
    """A pandas DataFrame over ``data`` (files read with only ``columns``)."""
    import pandas as pd

    k = sources.kind(data)
    if k == "pandas":
        return data
    if k == "polars":
        return cast("pl.DataFrame", data).to_pandas()
    if k == "polars-lazy":
        return cast("pl.LazyFrame", data).collect().to_pandas()
    if k == "arrow":
        return cast("pa.Table", data).to_pandas()
    if k == "duckdb":
        return cast("DuckDBPyRelation", data).df()
    if k == "file":
        fmt = sources.file_format(sources.as_path(data))
        path = sources.as_path(data)
        try:
            parts = [pd.read_parquet(f, columns=columns) if fmt == "parquet" else pd.read_csv(f, usecols=columns)
                     for f in sources.expand(path)]
            return parts[0] if len(parts) == 1 else pd.concat(parts, ignore_index=True)
        except (ValueError, OSError) as e:
            raise InputDataError(f"pandas could not read {path!r}: {e}") from None
    raise InputDataError("SQL text needs the DuckDB engine (engine='duckdb' or engine=None)")


class PandasEngine(EmbeddedEngine):
    """Bounded histograms computed by pandas."""

    name = "pandas"

    def columns(self, data: InputData) -> list[str]:
        if sources.kind(data) == "file":
            return sources.file_columns(sources.as_path(data))
        return [str(c) for c in to_pandas(data).columns]

    def bounded_raw_counts(self, data: InputData, privacy_unit: str, by: list[str], l0: int | None,
                           rng: RandomSource) -> RawCounts:
        """The bounded counts from the fastest engine for this input (:mod:`sparsedp.engines.choice`), which
        takes it without a round trip through pandas (same choice, same counts, same statistics);
        :meth:`raw_counts` is this engine's own generic path."""
        return fastest_embedded_engine(data).bounded_raw_counts(data, privacy_unit, by, l0, rng)

    def raw_counts(self, data: InputData, privacy_unit: str, by: list[str], l0: int | None) -> RawCounts:
        import pandas as pd
        import pyarrow as pa

        cols = [privacy_unit] + by
        df = to_pandas(data, cols)[cols]
        check_nulls_and_rows(len(df), {c: int(n) for c, n in df.isna().sum().items()})
        pairs = df.drop_duplicates(ignore_index=True)
        deg = pairs.groupby(privacy_unit, sort=False, observed=True).size()
        lim = l0 if l0 is not None else 2**62
        key_counts = (pairs.groupby(by, sort=False, observed=True).size().astype("int64")
                      .rename(COUNT).reset_index())
        heavy = None
        if l0 is not None:
            heavy_units = deg.index[deg.to_numpy() > lim]
            h = pairs[pairs[privacy_unit].isin(heavy_units)]
            heavy = pa.Table.from_pandas(h, preserve_index=False)
        return RawCounts(rows_in=len(df), units_in=len(deg), pairs_in=len(pairs),
                         units_over_l0=int((deg.to_numpy() > lim).sum()) if l0 is not None else 0,
                         key_counts=pa.Table.from_pandas(pd.DataFrame(key_counts), preserve_index=False),
                         heavy_pairs=heavy)
