"""sparsedp.release / sparsedp.plan: output types and schema, report, validation before any data or noise."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pandas as pd
import polars as pl
import pyarrow as pa
import pytest

import sparsedp as sd
from sparsedp.mechanisms import registry
from sparsedp.mechanisms.base import AutoRole
from sparsedp.errors import InputDataError, InvalidParameterError, InvalidTypeError
from sparsedp.noise import InsecureSeededRandom


def _data(n_units=400, seed=1) -> pl.DataFrame:
    """Every unit shares 3 popular keys (so they are released at any sane threshold) plus rare ones."""
    g = np.random.default_rng(seed)
    rows = []
    for u in range(n_units):
        rows += [(u, "popular", "DE"), (u, "popular", "DE"), (u, "second", "FR"), (u, "third", "DE")]
        rows += [(u, f"rare{g.integers(0, 10_000)}", "US") for _ in range(g.integers(0, 4))]
    return pl.DataFrame(rows, schema={"user": pl.Int64, "url": pl.String, "country": pl.String}, orient="row")


@pytest.fixture(scope="module")
def df():
    return _data()


class Tripwire:
    """A random source that fails the test if anything draws from it."""

    def uint64(self, size):
        raise AssertionError("randomness drawn before validation finished")

    random_bytes = getrandbits = randbelow = uint64


KW = dict(privacy_unit="user", by=["url", "country"], epsilon=1.0, delta=1e-6, max_groups_per_unit=4)


@pytest.mark.parametrize("make,kind", [
    (lambda d: d, pl.DataFrame), (lambda d: d.lazy(), pl.DataFrame), (lambda d: d.to_pandas(), pd.DataFrame),
    (lambda d: d.to_arrow(), pa.Table)])
def test_output_frame_type_and_schema(df, make, kind, rng):
    res = sd.release(make(df), **KW, rng=rng)
    assert isinstance(res.table, kind)
    t = pl.from_pandas(res.table) if kind is pd.DataFrame else pl.from_arrow(res.table) if kind is pa.Table \
        else res.table
    assert t.columns == ["url", "country", "count", "count_lo", "count_hi"]  # the 95 % interval by default
    assert t.schema["url"] == pl.String and t.schema["country"] == pl.String and t.schema["count"] == pl.Int64
    got = set(map(tuple, t.select("url", "country").rows()))
    assert {("popular", "DE"), ("second", "FR"), ("third", "DE")} <= got
    assert t["count"].to_list() == sorted(t["count"].to_list(), reverse=True)
    assert (t["count"] >= res.report.threshold).all()  # GSHM releases only noisy counts >= threshold
    if kind is pd.DataFrame:
        assert str(res.table["count"].dtype) == "int64"


def test_files_and_sql_give_polars(df, tmp_path, rng):
    import duckdb

    p = tmp_path / "in.parquet"
    df.write_parquet(p)
    res = sd.release(str(p), **KW, rng=rng)
    assert isinstance(res.table, pl.DataFrame) and res.curator.engine == "polars"
    con = duckdb.connect()
    con.execute(f"CREATE VIEW shares AS SELECT * FROM read_parquet('{p}')")
    res = sd.release("SELECT user, url, country FROM shares WHERE url <> 'third'", **KW, rng=rng,
                     connection=con)
    assert isinstance(res.table, pl.DataFrame) and res.curator.engine == "duckdb"
    assert "third" not in res.table["url"].to_list()


def test_report_contents(df, rng):
    res = sd.release(df, **KW, rng=rng)
    r = res.report
    assert r.mechanism in ("gshm", "laplace") and r.reason
    assert r.epsilon == 1.0 and r.delta == 1e-6 and 0 < r.delta_achieved <= 1e-6
    assert r.sigma > 0 and r.noise_std > 0 and r.threshold == r.pre_threshold + r.margin
    assert r.delta_parts and r.released_keys == len(res.table)
    b = res.curator.bounding
    assert b.rows_in == df.height and b.units_in == 400 and b.duplicate_rows_removed >= 400
    assert b.keys_in >= b.keys_bounded >= b.keys_out >= r.released_keys
    assert set(res.curator.timings) >= {"validate", "bound+count", "noise", "output", "total"}
    text = str(r)
    for s in ("(1, 1e-06)-DP", "add/remove one privacy unit", "threshold", "noise std"):
        assert s in text
    assert "not private" in str(res.curator) and "rows" in str(res.curator) and "rows" not in text
    assert "bounding" not in r.to_dict() and "timings" not in r.to_dict()


def test_topk_release(df, rng):
    res = sd.release(df, "user", "url", 1.0, 1e-6, top_k=2, rng=rng)
    assert res.report.mechanism == "topk-csh" and res.report.options == {"k": 2, "debias": True}
    assert len(res.table) <= 2 and res.table.columns == ["url", "count", "count_lo", "count_hi"]
    assert res.curator.bounding.pairs_dropped_l0 == 0 and res.curator.bounding.l0 is None


def test_explicit_mechanism_and_out(df, tmp_path, rng):
    out = tmp_path / "rel.parquet"
    res = sd.release(df, **KW, mechanism="laplace", rng=rng, out=out)
    assert res.report.mechanism == "laplace" and res.curator.output == str(out)
    back = pl.read_parquet(out)
    assert back.equals(res.table)
    out2 = tmp_path / "rel.csv"
    sd.release(df, **KW, rng=rng, out=str(out2))
    assert pl.read_csv(out2).columns == ["url", "country", "count", "count_lo", "count_hi"]
    assert sorted(os.listdir(tmp_path)) == ["rel.csv", "rel.csv.json", "rel.parquet"]  # no temp files left


@pytest.mark.parametrize("kw,exc,msg", [
    (dict(epsilon=0), InvalidParameterError, "epsilon must be > 0"),
    (dict(epsilon=-1), InvalidParameterError, "epsilon must be > 0"),
    (dict(delta=0), InvalidParameterError, "delta=0 .pure DP.: auto uses mechanism='pure-blanket', one key per unit"),
    (dict(delta=1), InvalidParameterError, "delta must be < 1"),
    (dict(delta=1.5), InvalidParameterError, "delta must be < 1"),
    (dict(max_groups_per_unit=None), InvalidParameterError, "declare a contribution bound"),
    (dict(top_k=5), InvalidParameterError, "not both"),
    (dict(max_groups_per_unit=0), InvalidParameterError, "max_groups_per_unit must be >= 1"),
    (dict(max_groups_per_unit=2.5), InvalidTypeError, "max_groups_per_unit must be an integer"),
    (dict(mechanism="topk-csh"), InvalidParameterError, "needs top_k"),
    (dict(mechanism="gshm", max_groups_per_unit=None, top_k=3), InvalidParameterError, "not an option of"),
    (dict(mechanism="gshm", max_groups_per_unit=None), InvalidParameterError, "needs max_groups"),
    (dict(mechanism="csh"), InvalidParameterError, "k-sparse monotonic"),
    (dict(mechanism="best"), InvalidParameterError, "mechanism must be one of"),
    (dict(mechanism=("GSHM", dict(pre_threshold=0))), InvalidParameterError, "pre_threshold must be >= 1"),
    (dict(mechanism="misra-gries"), InvalidParameterError, "needs sketch_size"),
    (dict(mechanism=("TopKCSH", dict(k=0))), InvalidParameterError, "k must be >= 1"),
    (dict(by=[]), InvalidTypeError, "by must be"),
    (dict(by=["url", "url"]), InvalidParameterError, "twice"),
    (dict(by=["user"]), InvalidParameterError, "per-person counts"),
    (dict(privacy_unit=None), InvalidTypeError, "privacy_unit must be"),
    (dict(aggregates=("Count", dict(name="url"))), InvalidParameterError, "also an input column"),
    (dict(engine="sparc"), InvalidParameterError, "engine must be one of"),
    (dict(insecure_float="yes"), InvalidTypeError, "insecure_float must be a bool"),
])
def test_bad_arguments_fail_before_data_or_noise(df, tmp_path, kw, exc, msg):
    args = {**KW, **kw}
    out = tmp_path / "out.parquet"
    with pytest.raises(exc, match=msg):
        for name in ("mechanism", "aggregates"):  # objects are built inside the raises block: they validate too
            if isinstance(args.get(name), tuple):
                cls, opts = args[name]
                args[name] = getattr(sd, cls)(**opts) if name == "mechanism" else [getattr(sd, cls)(**opts)]
        sd.release(df, **args, rng=Tripwire(), out=out)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("mutate,msg", [
    (lambda d: d.rename({"url": "URL"}), r"'url' is not in the data.*did you mean 'URL'"),
    (lambda d: d.with_columns(pl.when(pl.col("user") == 3).then(None).otherwise(pl.col("user")).alias("user")),
     "null values in 'user'"),
    (lambda d: d.with_columns(pl.when(pl.col("user") == 3).then(None).otherwise(pl.col("country"))
                              .alias("country")), "null values in 'country'"),
    (lambda d: d.head(0), "no rows"),
])
def test_bad_data_fails_before_noise_and_writes_nothing(df, tmp_path, mutate, msg):
    out = tmp_path / "out.csv"
    for make in (lambda d: d, lambda d: d.to_pandas(), lambda d: d.to_arrow()):
        with pytest.raises(InputDataError, match=msg):
            sd.release(make(mutate(df)), **KW, rng=Tripwire(), out=out)
    assert os.listdir(tmp_path) == []


def test_bad_out_paths(df, tmp_path):
    with pytest.raises(InvalidParameterError, match="does not exist"):
        sd.release(df, **KW, rng=Tripwire(), out=tmp_path / "missing" / "x.parquet")
    with pytest.raises(InvalidParameterError, match=r"\.parquet or \.csv"):
        sd.release(df, **KW, rng=Tripwire(), out=tmp_path / "x.xlsx")
    with pytest.raises(InvalidParameterError, match="is a directory"):
        (tmp_path / "d.csv").mkdir()
        sd.release(df, **KW, rng=Tripwire(), out=tmp_path / "d.csv")


def test_bad_input_files(tmp_path):
    (tmp_path / "x.txt").write_text("user,url\n1,a\n")
    with pytest.raises(InputDataError, match="not a Parquet or CSV"):
        sd.release(str(tmp_path / "x.txt"), **KW, rng=Tripwire())
    with pytest.raises(InputDataError, match="does not exist"):
        sd.release(str(tmp_path / "nope.parquet"), **KW, rng=Tripwire())
    with pytest.raises(InvalidTypeError, match="data must be"):
        sd.release([1, 2, 3], **KW, rng=Tripwire())


def test_plan_needs_no_data():
    cals = sd.plan(1.0, 1e-6, max_groups_per_unit=10)
    # key selection (keys-only rows: weighted-gaussian, mad, mad2r) is listed after the count mechanisms
    selection = [c.mechanism for c in cals if registry.get(c.mechanism).auto_role is AutoRole.DISCOVERY]
    counts = [c for c in cals if c.mechanism not in selection]
    assert {c.mechanism for c in counts} == {"gshm", "laplace"}
    assert [c.tau for c in counts] == sorted(c.tau for c in counts)
    assert "weighted-gaussian" in selection and [c.mechanism for c in cals[len(counts):]] == selection
    assert {c.mechanism for c in sd.plan(1.0, 1e-6, top_k=100)} == {"topk-csh"}
    with pytest.raises(InvalidParameterError, match="needs max_groups_per_unit"):
        sd.plan(1.0, 1e-6)
    with pytest.raises(InvalidParameterError, match="epsilon"):
        sd.plan(0, 1e-6, max_groups_per_unit=1)


def test_release_uses_the_plan_calibration(df, rng):
    res = sd.release(df, **KW, rng=rng)
    best = sd.plan(1.0, 1e-6, max_groups_per_unit=4)[0]
    assert (res.report.mechanism, res.report.margin, res.report.sigma) == (best.mechanism, best.tau, best.sigma)


def test_import_stays_light():
    code = ("import sys, sparsedp; sparsedp.release; sparsedp.plan; "
            "print([m for m in ('polars', 'duckdb', 'pandas', 'pyarrow') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_same_seed_same_release_from_every_engine(df):
    from sparsedp.engines import ENGINES

    tables = {eng: sd.release(df.to_pandas(), **KW, engine=eng, rng=InsecureSeededRandom(99)).table
              for eng in ENGINES}
    for eng, t in tables.items():
        assert isinstance(t, pd.DataFrame) and list(t.columns) == ["url", "country", "count", "count_lo", "count_hi"], eng
        pd.testing.assert_frame_equal(t, tables["polars"], obj=eng)


def test_released_files_carry_their_guarantee(df, tmp_path, rng):
    from sparsedp.engines.output import read_guarantee

    for name in ("rel.parquet", "rel.csv"):
        res = sd.release(df, **KW, rng=rng, out=tmp_path / name)
        meta = read_guarantee(str(tmp_path / name))
        assert meta["epsilon"] == 1.0 and meta["delta"] == 1e-6 and meta["neighbours"] == "add/remove one privacy unit"
        assert meta["mechanism"] == res.report.mechanism and meta["threshold"] == res.report.threshold
        assert meta["noise_std"] == res.report.noise_std and meta["sparsedp_version"] == sd.__version__
        assert meta["insecure_float"] is False


def test_result_holds_no_unreleased_key_and_no_exact_count(tmp_path, rng):
    """A key of one unit is never released at this threshold: it must appear nowhere in the Result (pickled
    included), and no exact count may either (only noisy counts, above the threshold)."""
    import pickle

    rows = [(u, "popular") for u in range(300)] + [(10**6, "secret-one-unit-key")]
    frame = pl.DataFrame(rows, schema={"user": pl.Int64, "url": pl.String}, orient="row")
    for kw in (dict(max_groups_per_unit=1), dict(top_k=1)):
        res = sd.release(frame, "user", "url", 1.0, 1e-6, rng=rng, **kw)
        blob = pickle.dumps(res)
        assert b"secret-one-unit-key" not in blob and "secret-one-unit-key" not in repr(res) + str(res)
        assert res.table["url"].to_list() == ["popular"]
        assert res.curator.bounding.keys_in == 2  # the curator may know the key existed, never which


def test_list_typed_key_fails_before_the_ledger_charge(tmp_path, rng):
    from sparsedp.errors import InputDataError
    from sparsedp.ledger import Ledger

    frame = pl.DataFrame({"user": [1, 2, 3], "tags": [["a"], ["b"], ["a", "b"]]})
    path = tmp_path / "l.db"
    with Ledger(path) as led:
        led.set_budget("d", epsilon=1.0, delta=1e-5)
    with pytest.raises(InputDataError, match="scalar values"):
        sd.release(frame, "user", "tags", 0.5, 1e-6, max_groups_per_unit=1, ledger=str(path), dataset="d", rng=rng)
    with Ledger(path) as led:
        assert led.history("d") == []


def test_nan_keys_are_refused_on_every_engine(rng):
    from sparsedp.engines import ENGINES
    from sparsedp.errors import InputDataError

    frame = pl.DataFrame({"user": [1, 2, 3], "x": [0.5, float("nan"), 0.5]})
    for eng in ENGINES:
        data = frame.to_pandas() if eng == "pandas" else frame
        with pytest.raises(InputDataError, match="key column .x. contains NaN"):  # one rule, one message
            sd.release(data, "user", "x", 1.0, 1e-6, max_groups_per_unit=1, engine=eng, rng=rng)


def test_insecure_float_is_warned_stated_and_recorded(df, tmp_path, rng):
    from sparsedp.engines.output import read_guarantee
    from sparsedp.report import InsecureNoiseWarning

    with pytest.warns(InsecureNoiseWarning):
        res = sd.release(df, **KW, rng=rng, insecure_float=True, out=tmp_path / "f.parquet")
    assert str(res.report).splitlines()[0].startswith("WARNING: insecure float noise")
    assert read_guarantee(str(tmp_path / "f.parquet"))["insecure_float"] is True


def test_debiased_topk_counts_are_unbiased():
    """Default top-k releases counts: over repetitions on a fixed histogram, keys far above the cut-off have
    mean error about 0 (the shifted variant is off by the (k+1)-th count t)."""
    counts = {"a": 900, "b": 800, "c": 700, "d": 300, "e": 250}
    rows = [(f"{k}{u}", k) for k, c in counts.items() for u in range(c)]
    frame = pl.DataFrame(rows, schema={"user": pl.String, "url": pl.String}, orient="row")
    errs, shifted = [], []
    for seed in range(40):
        res = sd.release(frame, "user", "url", 1.0, 1e-6, top_k=3, rng=InsecureSeededRandom(seed))
        got = dict(zip(res.table["url"].to_list(), res.table["count"].to_list()))
        errs += [got[k] - counts[k] for k in ("a", "b", "c") if k in got]
        sh = sd.release(frame, "user", "url", 1.0, 1e-6, mechanism=sd.TopKCSH(k=3, debias=False),
                        rng=InsecureSeededRandom(seed))
        assert sh.table.columns == ["url", "count_minus_cutoff"]
        g2 = dict(zip(sh.table["url"].to_list(), sh.table["count_minus_cutoff"].to_list()))
        shifted += [g2[k] - counts[k] for k in ("a", "b", "c") if k in g2]
    errs = np.array(errs, dtype=float)
    assert len(errs) == 120  # far above the cut-off: always released
    se = errs.std(ddof=1) / np.sqrt(len(errs))
    assert abs(errs.mean()) < 4 * se + 1, (errs.mean(), se)  # unbiased (up to the noise's own ±0.5 rounding)
    assert abs(np.mean(shifted) + 300) < 30  # the shifted values are off by t = 300


def test_plan_shows_the_privacy_profile_and_tradeoff_curve():
    for kw in (dict(max_groups_per_unit=10), dict(top_k=100)):
        p = sd.plan(1.0, 1e-6, **kw)
        prof = p.profile()
        assert prof is not None
        # the profile at the calibrated epsilon is the accountant's delta of the noise actually sampled
        assert float(prof.delta(1.0)) <= 1e-6
        table = p.profile_table()
        deltas = [d for _, d in table]
        assert deltas == sorted(deltas, reverse=True) and deltas[0] > 1e-6  # more than one (eps, delta) point
        betas = prof.tradeoff_curve(np.array([1e-4, 1e-2, 0.5]))
        assert np.all(np.diff(betas) <= 0) and np.all((betas >= 0) & (betas <= 1))
    gshm = sd.plan(1.0, 1e-6, max_groups_per_unit=10)
    assert float(gshm.profile().delta(1.0)) == pytest.approx(gshm[0].delta_achieved, rel=1e-6)


def test_several_noise_chunks_keep_engines_identical_and_change_only_the_words(df, monkeypatch):
    """The per-chunk keyed streams: with chunks forced small, every embedded engine still gives the same table;
    the released keys may differ from the one-chunk release only through the noise words."""
    from sparsedp.core import noise_chunks
    from sparsedp.engines import ENGINES

    one = sd.release(df, **KW, rng=InsecureSeededRandom(5)).table
    monkeypatch.setattr(noise_chunks, "KEYS_PER_CHUNK", 3)
    assert noise_chunks.n_chunks(len(df)) > 1
    tables = [sd.release(df, **KW, engine=e, rng=InsecureSeededRandom(5)).table for e in ENGINES]
    assert all(t.equals(tables[0]) for t in tables)
    popular = {("popular", "DE"), ("second", "FR"), ("third", "DE")}
    assert popular <= set(map(tuple, tables[0].select("url", "country").rows()))
    assert not tables[0].equals(one)  # other stream words: other noise values
