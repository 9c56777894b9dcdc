"""sd.release with sd.Quantile / sd.Median (issue 34), each test from a frame in one call: the released values'
law against the accountant (chi-square on the real secure path), the engine's contribution model, the ledger
charge and its relation, the same table on every embedded engine, refusals before any charge or draw, and a
Result that holds no true quantile."""

from __future__ import annotations

import pickle

import numpy as np
import polars as pl
import pytest
from scipy import stats

import sparsedp as sd
from sparsedp.accounting.events import ComposedPureEvent, SequenceEvent
from sparsedp.accounting.quantiles import split_budget
from sparsedp.errors import ColumnNotFoundError, InputDataError, InvalidParameterError
from sparsedp.mechanisms.quantiles import key_law
from sparsedp.noise import InsecureSeededRandom

VALUES = [1.2, 2.7, 2.9, 3.1, 3.3, 3.6, 4.4, 5.8]  # none is a cell midpoint of the grid below


class Tripwire:
    """A random source that fails the test if anything draws from it."""

    def uint64(self, size):
        raise AssertionError("randomness drawn before validation finished")

    random_bytes = getrandbits = randbelow = uint64


def _iid_keys(n_keys: int = 150, units_per_key: int = 96) -> pl.DataFrame:
    """Every key has the same multiset of values (each unit one row in one key), so each key's released median is
    an independent draw from one law."""
    rows = []
    for k in range(n_keys):
        for j in range(units_per_key):
            rows.append((k * units_per_key + j, f"k{k}", VALUES[j % len(VALUES)]))
    return pl.DataFrame(rows, schema={"user": pl.Int64, "key": pl.String, "x": pl.Float64}, orient="row")


def test_released_medians_have_the_accountants_law():
    """One release of 150 keys with identical data: the released cells are i.i.d. from the exponential mechanism
    at the split's ε per key (chi-square), and not from the law at twice that ε (the test can fail)."""
    q = sd.Median("x", 0, 8, cells=16, share=0.1)  # a small ε per key: a law spread over several cells
    res = sd.release(_iid_keys(), privacy_unit="user", by="key", epsilon=1.0, delta=1e-6, max_groups_per_unit=1,
                     aggregates=[sd.Count(), q], rng=InsecureSeededRandom(11))
    vals = res.table["median_x"].to_numpy()
    assert res.table.height >= 100
    cells = np.floor((vals - q.lower) / q.width).astype(int)
    assert np.allclose(q.cell_value(cells), vals)  # every released value is a cell midpoint
    h = np.bincount(np.floor(np.array(VALUES * 12) / q.width).astype(int), minlength=q.cells)
    eps_key = split_budget(1.0, 1e-6, 1, [0.1]).key_epsilons[0]
    for eps, ok in ((eps_key, True), (2 * eps_key, False)):
        law = key_law(h, q, eps)
        obs = np.bincount(cells, minlength=q.cells).astype(float)
        exp = law * cells.size
        big = exp >= 5
        o, e = np.append(obs[big], obs[~big].sum()), np.append(exp[big], exp[~big].sum())
        p = stats.chisquare(o, e * o.sum() / e.sum()).pvalue
        assert (p > 1e-3) if ok else (p < 1e-4)


def _model_frame() -> pl.DataFrame:
    """Unit 0: 10 rows in each of 6 keys; units 1..400: one row in key 'a'."""
    rows = [(0, f"k{k}", 10.0 + r) for k in range(6) for r in range(10)]
    rows += [(u, "k0", 1.0) for u in range(1, 401)]
    return pl.DataFrame(rows, schema={"user": pl.Int64, "key": pl.String, "x": pl.Float64}, orient="row")


@pytest.mark.parametrize("engine", ["polars", "duckdb", "pandas", "arrow"])
def test_engine_enforces_the_contribution_model(engine):
    """bounded_cells on every embedded engine: unit 0 keeps at most l0 keys and max_rows rows per key."""
    import pyarrow as pa

    from sparsedp.engines import get_engine
    from sparsedp.engines.quantile_cells import bounded_cells

    df = _model_frame()
    data = df.to_pandas() if engine == "pandas" else df.to_arrow() if engine == "arrow" else df
    eng = get_engine(engine, data, None)
    keys = pa.table({"key": [f"k{k}" for k in range(6)]})
    q = sd.Median("x", 0, 32, cells=32, max_rows=3)
    (kc,) = bounded_cells(eng.rows_lazy(data), "user", ["key"], keys, [q], 2, InsecureSeededRandom(4))
    unit0 = kc.cell >= 10  # unit 0's values are >= 10, the others' 1.0
    assert kc.count[unit0].sum() == 2 * 3                     # l0 = 2 keys, 3 rows each
    assert len(set(kc.key[unit0].tolist())) <= 2
    assert kc.count[~unit0].sum() in (400, 399 + 1, 400)      # the other units: one row each (k0 kept or not)
    assert kc.dense(0, q.cells)[1] == 400


def test_same_table_on_every_embedded_engine():
    df = _iid_keys(30, 64)
    aggs = [sd.Count(), sd.Median("x", 0, 8, cells=64), sd.Quantile("x", 0.9, 0, 8, cells=64, max_rows=2)]
    tables = []
    for eng, data in (("polars", df), ("duckdb", df), ("pandas", df.to_pandas()), ("arrow", df.to_arrow())):
        t = sd.release(data, privacy_unit="user", by="key", epsilon=1.0, delta=1e-6, max_groups_per_unit=1,
                       aggregates=aggs, engine=eng, rng=InsecureSeededRandom(2)).table
        tables.append(t if isinstance(t, pl.DataFrame) else pl.from_pandas(t) if eng == "pandas"
                      else pl.from_arrow(t))
    assert tables[0].columns == ["key", "count", "count_lo", "count_hi", "median_x", "median_x_rank_error", "q90_x",
                                 "q90_x_rank_error"] and tables[0].height > 0
    for t in tables[1:]:
        assert t.equals(tables[0])


def test_ledger_charge_and_relation(tmp_path):
    from sparsedp.ledger import Ledger

    path = tmp_path / "l.db"
    with Ledger(path) as led:
        led.set_budget("d", epsilon=3.0, delta=1e-5)
    aggs = [sd.Count(), sd.Median("x", 0, 8), sd.Quantile("x", 0.25, 0, 8, share=0.2)]
    res = sd.release(_iid_keys(20), privacy_unit="user", by="key", epsilon=1.5, delta=1e-6, max_groups_per_unit=3,
                     aggregates=aggs, ledger=str(path), dataset="d", rng=InsecureSeededRandom(5), mechanism="gshm")
    split = split_budget(1.5, 1e-6, 3, [None, 0.2])
    r = res.report
    assert (r.epsilon, r.delta) == (1.5, 1e-6)
    assert any("budget split: count" in n and f"{split.count_epsilon:.6g}" in n for n in r.notes)
    assert any("q25_x" in n and f"{split.key_epsilons[1]:.6g}" in n for n in r.notes)
    # the count was calibrated at its share: the same margin as a count-only release at (ε_count, δ)
    alone = sd.release(_iid_keys(20), privacy_unit="user", by="key", epsilon=split.count_epsilon, delta=1e-6,
                       max_groups_per_unit=3, rng=InsecureSeededRandom(5), mechanism="gshm").report
    assert (r.margin, r.sigma) == (alone.margin, alone.sigma)
    with Ledger(path) as led:
        (h,) = led.history("d")
    ev = h.event
    assert isinstance(ev, SequenceEvent) and (ev.epsilon, ev.delta) == (1.5, 1e-6)
    count_ev, *qs = ev.events
    assert count_ev.epsilon == pytest.approx(split.count_epsilon) and count_ev.delta == 1e-6
    assert [type(e) for e in qs] == [ComposedPureEvent, ComposedPureEvent]
    assert [(e.epsilon0, e.k) for e in qs] == [(ek, 3) for ek in split.key_epsilons]
    assert {e.neighbours for e in ev.events} == {ev.neighbours} and ev.neighbours.name == "ADD_REMOVE"
    assert ev.delta_at(1.5) <= 1e-6 * (1 + 1e-6)  # the composition is within the charge


def test_result_holds_no_true_quantile():
    """Values are integers + 0.3, cell midpoints k + 0.5: no released or reported figure is a true quantile."""
    g = np.random.default_rng(0)
    rows = [(u, f"k{u % 3}", float(g.integers(0, 50)) + 0.3) for u in range(3000)]
    rows.append((10**6, "secret-one-unit-key", 17.3))
    df = pl.DataFrame(rows, schema={"user": pl.Int64, "key": pl.String, "x": pl.Float64}, orient="row")
    res = sd.release(df, privacy_unit="user", by="key", epsilon=1.0, delta=1e-6, max_groups_per_unit=1,
                     aggregates=[sd.Median("x", 0, 50, cells=50), sd.Quantile("x", 0.9, 0, 50, cells=50)],
                     rng=InsecureSeededRandom(8))
    truth = df.group_by("key").agg(pl.col("x").median().alias("m"), pl.col("x").quantile(0.9).alias("q"),
                                   pl.col("x").quantile(0.9, "lower").alias("q2"))
    secrets = set(truth["m"].to_list() + truth["q"].to_list() + truth["q2"].to_list())
    t = res.table
    assert sorted(t["key"].to_list()) == ["k0", "k1", "k2"]
    released = t["median_x"].to_list() + t["q90_x"].to_list()
    assert all((v - 0.5) == int(v - 0.5) for v in released)  # cell midpoints only
    figures = list(res.report.to_dict().values()) + list(res.curator.bounding.to_dict().values())
    assert not any(isinstance(x, float) and x in secrets for x in figures + released)
    text = str(res.report) + repr(res.report)
    assert not any(f"{s:g}" in text for s in secrets)
    assert b"secret-one-unit-key" not in pickle.dumps(res)


@pytest.mark.parametrize("mutate,exc,msg", [
    (lambda d: d.with_columns(pl.when(pl.col("user") == 5).then(None).otherwise(pl.col("x")).alias("x")),
     InputDataError, "null"),
    (lambda d: d.with_columns(pl.when(pl.col("user") == 5).then(float("nan")).otherwise(pl.col("x")).alias("x")),
     InputDataError, "NaN"),
    (lambda d: d.with_columns(pl.col("x").cast(pl.String)), InputDataError, "numeric"),
    (lambda d: d.drop("x"), ColumnNotFoundError, "not in the input"),
])
def test_bad_value_columns_are_refused_before_the_charge_and_any_draw(tmp_path, mutate, exc, msg):
    from sparsedp.ledger import Ledger

    path = tmp_path / "l.db"
    with Ledger(path) as led:
        led.set_budget("d", epsilon=2.0, delta=1e-5)
    df = _iid_keys(5, 20)
    for eng in ("polars", "duckdb"):
        with pytest.raises(exc, match=msg):
            sd.release(mutate(df), privacy_unit="user", by="key", epsilon=1.0, delta=1e-6, max_groups_per_unit=1,
                       aggregates=[sd.Median("x", 0, 8)], ledger=str(path), dataset="d", rng=Tripwire(), engine=eng)
    with Ledger(path) as led:
        assert led.history("d") == []


@pytest.mark.parametrize("kw,msg", [
    (dict(max_groups_per_unit=None, top_k=5), "max_groups_per_unit"),
    (dict(max_groups_per_unit="auto"), "max_groups_per_unit"),
    (dict(keys=["k0", "k1"]), "keys="),
    (dict(other=True), "other"),
    (dict(aggregates=[sd.Median("user", 0, 8)]), "must not be the privacy unit"),
    (dict(aggregates=[sd.Median("x", 0, 8, name="count")]), "used twice"),
    (dict(aggregates=[sd.Median("x", 0, 8), sd.Median("x", 0, 9)]), "used twice"),
    (dict(aggregates=[sd.Median("x", 0, 8, share=0.6), sd.Quantile("x", 0.9, 0, 8, share=0.5)]), "leave a part"),
])
def test_bad_requests_are_refused_before_reading(kw, msg):
    args = dict(privacy_unit="user", by="key", epsilon=1.0, delta=1e-6, max_groups_per_unit=1,
                aggregates=[sd.Median("x", 0, 8)]) | kw
    with pytest.raises(InvalidParameterError, match=msg):
        sd.release(_iid_keys(2, 4), **args, rng=Tripwire())


def test_cli_median_and_quantile(tmp_path):
    from typer.testing import CliRunner

    from sparsedp.cli import app

    path = tmp_path / "d.parquet"
    # 256 units per key: 30 of 30 CLI releases kept all 10 keys. With 64 units per key 4 of 40 releases kept
    # none, and this test (unseeded: the CLI draws from the CSPRNG) failed at random
    _iid_keys(10, 256).write_parquet(path)
    out = tmp_path / "o.parquet"
    base = ["release", str(path), "--unit", "user", "--by", "key", "--epsilon", "1", "--delta", "1e-6",
            "--max-groups", "1"]
    res = CliRunner().invoke(app, base + ["--median", "x:0:8", "--quantile", "x:0.9:0:8:p90", "--out", str(out)])
    assert res.exit_code == 0, res.output
    t = pl.read_parquet(out)
    assert t.columns == ["key", "count", "count_lo", "count_hi", "p90", "p90_rank_error", "median_x",
                         "median_x_rank_error"] and t.height > 0
    assert "budget split" in res.output
    bad = CliRunner().invoke(app, base + ["--quantile", "x:0:8"])
    assert bad.exit_code == 2 and "--quantile takes COLUMN:Q:LOWER:UPPER" in bad.output


def test_an_engine_without_quantile_cells_is_refused_before_anything(tmp_path):
    """An engine that does not implement Engine.quantile_cells is refused at plan time (nothing read, drawn or
    charged). Shown with an embedded engine whose quantile methods are the protocol's defaults."""
    from sparsedp.core.engine import Engine
    from sparsedp.engines.polars_engine import PolarsEngine
    from sparsedp.ledger import Ledger

    class NoQuantiles(PolarsEngine):
        quantile_cells = Engine.quantile_cells
        check_quantile_columns = Engine.check_quantile_columns

    path = tmp_path / "l.db"
    with Ledger(path) as led:
        led.set_budget("d", epsilon=2.0, delta=1e-5)
    with pytest.raises(InvalidParameterError, match="does not offer them"):
        sd.release(_iid_keys(2, 4), privacy_unit="user", by="key", epsilon=1.0, delta=1e-6, max_groups_per_unit=1,
                   aggregates=[sd.Median("x", 0, 8)], engine=NoQuantiles(), ledger=str(path), dataset="d",
                   rng=Tripwire())
    with Ledger(path) as led:
        assert led.history("d") == []
