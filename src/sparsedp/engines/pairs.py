"""The pair primitives of the engine protocol (:attr:`~sparsedp.core.engine.Capability.PAIRS`), shared by every
embedded engine: the distinct (unit, key) pairs of an input read in this process (through the engine's rows as a
Polars LazyFrame), after every input check the engines make, and the one ℓ0 choice of
:mod:`sparsedp.engines.bounding` applied to them.

The mechanisms that need pairs (set union, grouped public keys, the user-level Misra–Gries sketch) call these
through the engine they are handed (:meth:`~sparsedp.core.engine.Engine.distinct_pairs` and siblings), never by
importing this module. Each function draws its bounding secret from the release's source only after the input
passed every check, in the order the mechanism's docstring states.
"""

from __future__ import annotations

from typing import Any, Sequence, cast

import numpy as np

from ..core.bounded import BoundingStats, KeptPairs, LocalHistogram, OneGroupRows, PairIds, RoundsInput, UnitPairs
from ..core.checks import check_columns, engine_errors_as_input_errors
from ..core.key_order import canonical_exprs
from ..errors import InputDataError
from .bounding import COUNT, KEY, choose_from_per_key, draw_bounding_secret, select_pairs
from .pair_ids import WEIGHT_SUM, RowChecks, WeightedPairs, weighted_pairs, weighted_round
from .input_checks import (check_key_values, check_mixed_types, check_nan_keys, check_nulls_and_rows,
                           check_pandas_nan_keys, check_unique_names)

__all__ = ["distinct_pairs", "weighted_histogram", "round_histogram", "next_round", "round_key_sums", "kept_pairs",
           "pair_ids", "one_group_per_unit", "select_one_group"]



def _checked_rows(engine: Any, data: Any, unit: str, by: list[str]) -> Any:
    """The unit and key columns of ``data`` as a Polars LazyFrame, after the checks that need no pass over the
    rows (duplicate names, mixed types, missing columns, pandas NaN keys); inside the caller's
    ``engine_errors_as_input_errors``."""
    check_unique_names(data)
    check_mixed_types(data, unit, by)
    check_columns(engine.columns(data), unit, by)
    check_pandas_nan_keys(data, by)
    return engine.rows_lazy(data).select([unit, *by])


def distinct_pairs(engine: Any, data: Any, unit: str, by: Sequence[str]) -> UnitPairs:
    """The distinct ``(unit, *by)`` pairs (a Polars DataFrame) and the number of input rows, after every input
    check the engines make (columns, duplicate names, mixed types, nulls and NaN keys, no rows)."""
    import polars as pl

    by = list(by)
    cols = [unit] + by
    with engine_errors_as_input_errors(engine.name):
        lf = _checked_rows(engine, data, unit, by)
        c = lf.select(pl.len().alias("__rows"), *[pl.col(x).null_count().alias(x) for x in cols]).collect()
        c = c.row(0, named=True)
        rows = int(c.pop("__rows"))
        check_nulls_and_rows(rows, {k: int(n) for k, n in c.items()})
        pairs = lf.unique().collect()
    check_nan_keys(pairs.select(by).unique(), by)
    return UnitPairs(pairs=pairs, rows=rows)


def weighted_histogram(engine: Any, data: Any, unit: str, by: Sequence[str], l0: int, weights: Any,
                       rng: Any) -> LocalHistogram:
    """The weighted bounded histogram (:meth:`~sparsedp.core.engine.Engine.weighted_histogram`): a
    :class:`~sparsedp.core.bounded.LocalHistogram` whose ``counts`` are the Int64 per-key weight sums
    ``S_k = Σ_{kept (u, k)} W_{min(d_u, l0)}`` (``weights[t − 1] = W_t``; ``d_u`` = the unit's distinct keys,
    so ``min(d_u, l0)`` is the number it keeps): the first round of :func:`round_histogram`."""
    return round_histogram(engine, data, unit, by, l0, weights, rng)[0]


def round_histogram(engine: Any, data: Any, unit: str, by: Sequence[str], l0: int, weights: Any,
                    rng: Any) -> tuple[LocalHistogram, RoundsInput]:
    """:meth:`~sparsedp.core.engine.Engine.round_histogram` on the embedded engines: round 1's weighted histogram
    and what the later rounds read (:func:`next_round`).

    The count-only release's path: the rows read once with the row and null counts
    (:func:`~sparsedp.engines.pair_ids.weighted_pairs`: integer pair ids, sorted, every input check, then the
    bounding secret drawn), then the engines' one ℓ0 choice and each kept pair's weight ``W_{min(d_u, l0)}``
    summed per key (:func:`~sparsedp.engines.pair_ids.weighted_round`): the same kept pairs and sums as
    :func:`round_key_sums` (the per-unit definition Spark runs) on the distinct pairs with the same secret."""
    by = list(by)
    with engine_errors_as_input_errors(engine.name):
        lf = _checked_rows(engine, data, unit, by)
        wp = weighted_pairs(lf, unit, by, int(l0), [int(w) for w in weights], rng,
                            checks=RowChecks())
    hist = _round_histogram(weighted_round(wp, by), by, int(l0), first=True)
    rounds = RoundsInput(pairs=wp, secret=wp.secret, unit=unit, by=tuple(by), l0=int(l0),
                         weights=tuple(int(w) for w in weights))
    return hist, rounds


def next_round(engine: Any, rounds: RoundsInput, exclude: Any, choose_first: bool, rng: Any) -> LocalHistogram:
    """:meth:`~sparsedp.core.engine.Engine.next_round` on the embedded engines: a later round on the pairs read
    by :func:`round_histogram` (not the input again), the keys ``exclude`` dropped after round 1's choice
    (``choose_first``) or before a fresh choice keyed by a secret drawn from ``rng`` now."""
    wp: WeightedPairs = rounds.pairs
    secret = None if choose_first else draw_bounding_secret(rng)
    return _round_histogram(weighted_round(wp, rounds.by, exclude, choose_first, secret), list(rounds.by), rounds.l0,
                            first=False)


def _round_histogram(raw: Any, by: list[str], l0: int, first: bool) -> LocalHistogram:
    """A weighted round's :class:`~sparsedp.engines.base.RawCounts` as a histogram: the keys with a kept pair
    (canonical order) and their weight sums; bounding statistics (the ℓ0 figures for round 1 only)."""
    import polars as pl

    kc = raw.key_counts
    keys_in = kc.height
    kc = kc.filter(pl.col(COUNT) >= 1)
    arrow = kc.select(by).to_arrow()
    check_key_values(arrow, by)
    stats = BoundingStats(rows_in=raw.rows_in, units_in=raw.units_in, pairs_in=raw.pairs_in,
                          units_over_l0=raw.units_over_l0 if first else None,
                          pairs_dropped_l0=raw.pairs_dropped_l0 if first else None,
                          keys_in=keys_in, keys_bounded=kc.height, keys_out=kc.height, l0=l0)
    return LocalHistogram(keys=arrow, counts=kc[WEIGHT_SUM].to_numpy().astype(np.int64), stats=stats)


def _without(frame: Any, by: list[str], exclude: Any) -> Any:
    """``frame`` without the rows whose key is in ``exclude`` (an Arrow table of the ``by`` columns), the
    excluded keys cast to ``frame``'s key dtypes (they come from an earlier release of the same input)."""
    import polars as pl

    ex = pl.from_arrow(exclude.select(by))
    assert isinstance(ex, pl.DataFrame)  # a Table gives a frame
    ex = ex.with_columns([pl.col(c).cast(frame.schema[c]) for c in by])
    return frame.join(ex, on=by, how="anti", nulls_equal=True)


def round_key_sums(pairs: Any, unit: str, by: Sequence[str], l0: int, weights: Any, secret: bytes,
                   exclude: Any = None, choose_first: bool = False) -> Any:
    """One round of the adaptive-weighting set union on distinct ``(unit, *by)`` pairs (a Polars frame holding all
    rows of each of its units; duplicates allowed): a Polars frame ``[*by, COUNT]`` of the Int64 per-key sums
    ``S_k = Σ W_{t_u}`` over the kept pairs, ``t_u`` = unit u's kept pairs (``weights[t − 1] = W_t``), sums >= 1.

    The kept pairs: :func:`~.bounding.select_pairs` (the engines' one ℓ0 choice, keyed by ``secret``) on the
    pairs whose key is not in ``exclude`` (``choose_first=False``: a fresh choice among the unit's other keys,
    ``mad2r``), or the choice on all pairs and then the excluded keys dropped (``choose_first=True``: round 1's
    choice kept, ``mad``). Per-unit local: on any set of whole units it gives those units' partial sums."""
    import polars as pl

    by = list(by)
    frame = pairs.select([unit, *by])  # select_pairs de-duplicates
    if exclude is not None and exclude.num_rows and not choose_first:
        frame = _without(frame, by, exclude)
    kept = select_pairs(frame, unit, by, int(l0), secret)
    if exclude is not None and exclude.num_rows and choose_first:
        kept = _without(kept, by, exclude)
    table = pl.DataFrame({"__t": np.arange(1, int(l0) + 1, dtype=np.int64),
                          "__w": np.asarray(weights, dtype=np.int64)})
    return (kept.with_columns(pl.len().over(unit).cast(pl.Int64).alias("__t"))
            .join(table, on="__t", how="left")
            .group_by(by).agg(pl.col("__w").sum().cast(pl.Int64).alias(COUNT))
            .filter(pl.col(COUNT) >= 1))


def kept_pairs(engine: Any, data: Any, unit: str, by: Sequence[str], l0: int, rng: Any) -> KeptPairs:
    """The pairs of the engines' one ℓ0 choice (secret drawn after every input check), as integer codes
    (:class:`~sparsedp.core.bounded.KeptPairs`): units by dense rank of their value, keys by their row in the
    canonical key order."""
    import polars as pl

    by = list(by)
    up = distinct_pairs(engine, data, unit, by)
    rows = up.rows
    pk = up.pairs.lazy().group_by(by).agg(pl.col(unit)).collect()
    del up
    secret = draw_bounding_secret(rng)
    ch = choose_from_per_key(pk, unit, by, l0, secret, with_pairs=True)
    assert ch.pairs is not None  # asked for
    kept = ch.pairs.with_columns(pl.col(unit).rank("dense").cast(pl.Int64).alias("__u") - 1)
    n_units = int(cast("int | None", kept["__u"].max()) or -1) + 1
    arrow = ch.keys.to_arrow()
    check_key_values(arrow, by)
    n_keys = ch.keys.height
    stats = BoundingStats(rows_in=rows, units_in=ch.units_in, pairs_in=ch.pairs_in, units_over_l0=ch.units_over_l0,
                          pairs_dropped_l0=int(ch.dropped_per_key.sum()), keys_in=n_keys, keys_bounded=n_keys,
                          keys_out=n_keys, l0=l0)
    return KeptPairs(unit_codes=kept["__u"].to_numpy(), key_codes=kept[KEY].to_numpy().astype(np.int64),
                     n_units=n_units, keys=arrow, stats=stats)


def pair_ids(engine: Any, data: Any, unit: str, by: Sequence[str]) -> PairIds:
    """The distinct (unit, key) pairs as integer ids (:class:`~sparsedp.core.bounded.PairIds`): key ids are the
    positions among the distinct keys sorted by value, unit ids the dense ranks of the unit values (a fixed public
    order: adding a unit does not move the others). Checks columns, empty input, nulls, NaN and nested keys."""
    import polars as pl

    by = list(by)
    with engine_errors_as_input_errors(engine.name):
        lf = engine.rows_lazy(data)
        check_columns(lf.collect_schema().names(), unit, by)
        df = lf.select([unit, *by]).collect()
        check_nulls_and_rows(df.height, {c: df[c].null_count() for c in [unit, *by]})
        pairs = df.unique()
        keys = pairs.select(by).unique().sort(by)
        check_nan_keys(keys, by)
        keys_arrow = keys.to_arrow()
        check_key_values(keys_arrow, by)
        ids = pairs.join(keys.with_row_index("__kid"), on=by, how="inner").select(
            pl.col(unit).rank("dense").cast(pl.Int64).alias("__uid"), pl.col("__kid").cast(pl.Int64))
    return PairIds(unit_ids=ids["__uid"].to_numpy(), key_ids=ids["__kid"].to_numpy(), keys=keys_arrow,
                   rows=df.height, pairs=pairs.height)


def select_one_group(lf: Any, unit: str, group: str, groups: Any, secret: bytes) -> tuple[Any, Any]:
    """The rows of ``lf`` (Polars LazyFrame) restricted to the listed ``groups`` and, per unit, to ONE group:
    the one of smallest keyed rank (:func:`~sparsedp.engines.bounding.select_pairs` with ``by=[group]``,
    ``l0 = 1``). Returns ``(rows, kept)``: the kept rows (DataFrame) and the kept ``(unit, group)`` pairs."""
    import polars as pl

    rows = lf.filter(pl.col(group).is_in(groups[group].implode())).collect()
    kept = select_pairs(rows.select(unit, group), unit, [group], 1, secret)
    return rows.join(kept, on=[unit, group], how="semi", nulls_equal=False), kept


def _canonical_dtype(dtype: Any) -> Any:
    """The dtype of a column of ``dtype`` after :func:`~sparsedp.core.key_order.canonical_exprs` (Int32 and
    Int64 compare equal, as in the key list's join)."""
    import polars as pl

    lf = pl.LazyFrame(schema={"c": dtype})
    return lf.select(canonical_exprs(lf.collect_schema(), ["c"])).collect_schema()["c"]


def one_group_per_unit(engine: Any, data: Any, unit: str, by: Sequence[str], group: str, groups: Any,
                       from_text: bool, rng: Any) -> OneGroupRows:
    """:meth:`~sparsedp.core.engine.Engine.one_group_per_unit`: check the input, give the listed ``groups`` the
    data's type of the ``group`` column (refused if they differ, unless the groups were read as text), refuse
    nulls in the unit or group column and an empty input, draw the bounding secret, then keep one group per unit
    (:func:`select_one_group`)."""
    import polars as pl

    by = list(by)
    check_unique_names(data)
    with engine_errors_as_input_errors(engine.name):
        check_mixed_types(data, unit, by)
        check_columns(engine.columns(data), unit, by)
        lf = engine.rows_lazy(data).select([unit, *by])
        schema = lf.collect_schema()
    if from_text and schema[group] != groups.schema[group]:  # text keys take the data's type
        groups = groups.with_columns(pl.col(group).cast(schema[group], strict=False)).drop_nulls()
    elif _canonical_dtype(schema[group]) != _canonical_dtype(groups.schema[group]):
        raise InputDataError(f"keys: column {group!r} holds {groups.schema[group]} values but the data's "
                             f"{group!r} is {schema[group]}; give the keys with the data's type")
    else:
        groups = groups.with_columns(pl.col(group).cast(schema[group]))
    # the engine checks the kept rows later; nulls in the unit or group column would vanish in the filter,
    # so refuse them here first (before the secret)
    nulls = lf.select(pl.col(unit).null_count(), pl.col(group).null_count(), pl.len()).collect().row(0)
    if nulls[0] or nulls[1] or not nulls[2]:
        what = "no rows" if not nulls[2] else (f"nulls in {unit!r}" if nulls[0] else f"nulls in {group!r}")
        raise InputDataError(f"the input has {what}; the unit and key columns must have values")
    secret = draw_bounding_secret(rng)  # drawn after validation, before K_noise
    rows, kept = select_one_group(lf, unit, group, groups, secret)
    return OneGroupRows(rows=rows, n_per_group=kept.group_by(group).len(), rows_in=int(nulls[2]))
