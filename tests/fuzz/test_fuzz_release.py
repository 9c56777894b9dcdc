"""Hostile-input fuzzing of ``sparsedp.release`` on pandas / Polars / Arrow frames (hypothesis).

Every generated case must either return a valid release or raise a documented sparsedp error
(a subclass of :class:`sparsedp.errors.SparsedpError`); nothing may be written when it fails.
Default: a fixed, derandomized budget (CI-reproducible); ``SPARSEDP_FUZZ=slow`` runs 10x more cases.
"""

from __future__ import annotations

import math
import os
import tempfile
import warnings

import numpy as np
import pandas as pd
import polars as pl
import pyarrow as pa
import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from fuzz_helpers import fuzz_settings
import sparsedp as sd
from sparsedp.errors import SparsedpError
from sparsedp.noise import InsecureSeededRandom

pytestmark = pytest.mark.usefixtures("cached_calibration")


# ------------------------------------------------------------------------------------------ strategies

BIG = [0, 1, -1, 2**31, 2**53 + 1, 2**63 - 1, -(2**63)]
TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=6)
SCALARS = {
    "int": st.one_of(st.integers(-3, 5), st.sampled_from(BIG)),
    "uint": st.one_of(st.integers(0, 5), st.just(2**64 - 1)),
    "float": st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([0.0, -0.0, 1.5])),
    "str": st.one_of(TEXT, st.sampled_from(["a", "é", "日本", "\x00", "🙂", ""])),
    "bytes": st.binary(max_size=5),
    "bool": st.booleans(),
}


@st.composite
def columns(draw, n):
    kind = draw(st.sampled_from(list(SCALARS)))
    values = draw(st.lists(SCALARS[kind], min_size=n, max_size=n))
    if n and draw(st.integers(0, 3)) == 0:
        mask = draw(st.lists(st.booleans(), min_size=n, max_size=n))
        values = [None if m else x for x, m in zip(values, mask)]
    return kind, values


def _arrow_array(kind, values):
    typ = {"int": pa.int64(), "uint": pa.uint64(), "float": pa.float64(), "str": pa.string(),
           "bytes": pa.binary(), "bool": pa.bool_()}[kind]
    if kind == "int":
        values = [None if x is None else max(min(x, 2**63 - 1), -(2**63)) for x in values]
    return pa.array(values, type=typ)


@st.composite
def frames(draw):
    """(frame, names): a frame of a random library with 1–3 columns of random types, 0–12 rows."""
    n = draw(st.sampled_from([0, 1, 2, 5, 12, 12]))
    ncol = draw(st.integers(1, 3))
    if draw(st.integers(0, 4)) == 0:  # sometimes repeated or clashing names
        names = draw(st.lists(st.sampled_from(["u", "k", "count", "ü"]), min_size=ncol, max_size=ncol))
    else:
        names = ["u", "k", "ü"][:ncol]
    cols = [draw(columns(n)) for _ in range(ncol)]
    table = pa.Table.from_arrays([_arrow_array(k, v) for k, v in cols], names=names)  # names may repeat
    lib = draw(st.sampled_from(["arrow", "pandas", "polars", "polars-lazy"]))
    if lib == "arrow":
        return table, names
    if lib == "pandas":  # plain Python values: object columns for text/bytes/None, numpy dtypes otherwise
        df = pd.DataFrame({i: pd.Series(v, dtype=object if k in ("str", "bytes") else None)
                           for i, (k, v) in enumerate(cols)})
        df.columns = names
        return df, names
    if len(set(names)) < len(names):
        return table, names  # Polars refuses duplicate names at construction: keep the Arrow table
    df = pl.from_arrow(table)
    return (df.lazy() if lib == "polars-lazy" else df), names


MODELS = st.sampled_from([
    dict(max_groups_per_unit=1), dict(max_groups_per_unit=3), dict(max_groups_per_unit=1, mechanism="laplace"),
    dict(max_groups_per_unit=3, mechanism="gshm"), dict(top_k=2), dict(top_k=5, mechanism="topk-csh"),
])
PRIVACY = st.sampled_from([(1.0, 1e-5), (4.0, 1e-5)])


def _check_result(res, by, count_column="count"):
    t = res.table
    frame = pl.from_pandas(t) if isinstance(t, pd.DataFrame) else pl.from_arrow(t) if isinstance(t, pa.Table) \
        else t
    assert frame.columns in (list(by) + [count_column], list(by) + [count_column, f"{count_column}_lo", f"{count_column}_hi"])
    assert res.report.released_keys == frame.height
    if frame.height:
        counts = frame[count_column].to_numpy()
        assert np.all(np.isfinite(counts))
        if res.report.mechanism != "topk-csh":
            assert counts.min() >= res.report.threshold


def run_release(data, *, out_dir=None, out_name="out.parquet", **kw):
    """Call release; on failure the error must be a SparsedpError and the out dir must stay empty."""
    before = set(os.listdir(out_dir)) if out_dir else set()
    out = os.path.join(out_dir, out_name) if out_dir else None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = sd.release(data, rng=InsecureSeededRandom(1), out=out, **kw)
    except SparsedpError:
        if out_dir:
            assert set(os.listdir(out_dir)) == before, "a failed release wrote a file"
        return None
    if out_dir:
        sidecar = {out_name + ".json"} if out_name.endswith(".csv") else set()
        assert set(os.listdir(out_dir)) == before | {out_name} | sidecar  # only the output, no temp file left
    return res


# ------------------------------------------------------------------------------------------ tests


@fuzz_settings(400)
@given(frames(), st.data(), MODELS, PRIVACY)
def test_release_on_hostile_frames(frame_names, data, model, privacy):
    frame, names = frame_names
    if len(names) >= 2 and data.draw(st.integers(0, 3), label="well-formed call") > 0:
        unit, by = names[0], names[1:]
    else:
        unit = data.draw(st.sampled_from(names + ["missing"]), label="unit")
        by = data.draw(st.lists(st.sampled_from(names + ["missing"]), min_size=1, max_size=2), label="by")
    engine = data.draw(st.sampled_from([None, None, "polars", "duckdb", "pandas", "arrow"]), label="engine")
    write = data.draw(st.booleans(), label="write")
    with tempfile.TemporaryDirectory() as d:
        res = run_release(frame, out_dir=d if write else None, privacy_unit=unit, by=by, epsilon=privacy[0],
                          delta=privacy[1], engine=engine, **model)
    event("released" if res is not None else "refused with a sparsedp error")
    if res is not None:
        _check_result(res, by)


ROWS = st.lists(st.tuples(st.integers(0, 6), st.sampled_from(["a", "b", "c", "日", "🙂", "\x00", ""])),
                min_size=1, max_size=40)


@fuzz_settings(200)
@given(ROWS, MODELS, PRIVACY, st.sampled_from(["polars", "pandas", "arrow", "duckdb"]))
def test_release_on_valid_frames_always_succeeds(rows, model, privacy, engine):
    """Well-formed inputs never fail, on any engine, and the release is valid."""
    df = pl.DataFrame(rows, schema={"u": pl.Int64, "k": pl.String}, orient="row")
    res = sd.release(df, privacy_unit="u", by="k", epsilon=privacy[0], delta=privacy[1], engine=engine,
                     rng=InsecureSeededRandom(2), **model)
    _check_result(res, ["k"])
    assert set(res.table["k"].to_list()) <= set(df["k"].to_list())


BAD = st.one_of(st.none(), st.booleans(), st.text(max_size=3), st.lists(st.integers(), max_size=2),
                st.complex_numbers(max_magnitude=2), st.sampled_from([math.nan, math.inf, -math.inf, -1, 0, 1e-300,
                                                                       1e300, 10**30, -(10**30), 2.5, np.float64(0.5),
                                                                       np.int64(2), object()]))


@fuzz_settings(500)
@given(st.data())
def test_release_with_hostile_parameters(data):
    df = pl.DataFrame({"u": [1, 2, 3, 3], "k": ["a", "a", "b", "a"]})
    kw = dict(privacy_unit="u", by="k", epsilon=1.0, delta=1e-5, max_groups_per_unit=1)
    for name in data.draw(st.lists(st.sampled_from(
            ["privacy_unit", "by", "epsilon", "delta", "max_groups_per_unit", "top_k", "mechanism", "aggregates",
             "engine", "insecure_float", "ledger", "dataset", "connection"]),
            min_size=1, max_size=3, unique=True), label="names"):
        kw[name] = data.draw(BAD | st.sampled_from(["u", "k", "count", "auto", "gshm", "csh", "laplace",
                                                    "topk-csh", "polars", "", "k,u"]), label=name)
    with tempfile.TemporaryDirectory() as d:
        res = run_release(df, out_dir=d, **kw)
    if res is not None:
        _check_result(res, [kw["by"]] if isinstance(kw["by"], str) else kw["by"], res.report.value_column)


@fuzz_settings(80)
@given(st.text(max_size=12), st.sampled_from(["x.parquet", "x.csv", "x.txt", "", "sub/x.csv", "x.CSV"]))
def test_release_with_hostile_paths(source, out_name):
    with tempfile.TemporaryDirectory() as d:
        res = run_release(source, out_dir=d, out_name=out_name, privacy_unit="u", by="k", epsilon=1.0,
                          delta=1e-5, max_groups_per_unit=1) if "/" not in out_name else None
        if "/" in out_name:
            with pytest.raises(SparsedpError):
                sd.release(pl.DataFrame({"u": [1], "k": ["a"]}), privacy_unit="u", by="k", epsilon=1.0,
                           delta=1e-5, max_groups_per_unit=1, out=os.path.join(d, out_name))
            assert os.listdir(d) == []
    assert res is None or res.report.released_keys >= 0
