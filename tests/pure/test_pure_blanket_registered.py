"""pure-blanket through sd.release / auto / the CLI, and the pure mechanisms' input checks before the charge."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

import sparsedp as sd
from sparsedp.accounting.calibration import Neighbours
from sparsedp.errors import InputDataError, InvalidParameterError
from sparsedp.ledger import Ledger
from sparsedp.mechanisms.pure.registered import PureBlanket, could_be_key, utf8_fraction_bound
from sparsedp.noise import InsecureSeededRandom


def _frame(n=6000, keys=25, seed=0):
    rng = np.random.default_rng(seed)
    q = [f"q{int(i)}" for i in rng.zipf(1.4, n) % keys]
    return pl.DataFrame({"user_id": np.arange(n), "query": q})


def test_release_heavy_keys_and_report():
    df = _frame()
    res = sd.release(df, privacy_unit="user_id", by="query", epsilon=1, delta=0, mechanism="pure-blanket",
                     rng=InsecureSeededRandom(1))
    rep = res.report
    assert rep.mechanism == "pure-blanket" and rep.delta == 0 and rep.neighbours is Neighbours.REPLACE_ONE
    assert list(res.table.columns) == ["query", "count"]  # no padding rows or column by default
    true = df.group_by("query").len().to_dict(as_series=False)
    true = dict(zip(true["query"], true["len"]))
    released = dict(zip(res.table["query"].to_list(), res.table["count"].to_list()))
    tau = int(rep.threshold)
    assert all(v >= tau for v in released.values())
    bound = [int(s.split("every key with count >= ")[1].split()[0]) for s in rep.notes if "every key with" in s][0]
    assert all(q in released for q, c in true.items() if c >= bound)
    assert all(q in true for q in released)  # 1/1000 expected otherwise (fake_keys)
    text = str(rep)
    assert "padding: target length T=6040" in text and "= -0" not in text and "delta(2) = 0 " in text


def test_auto_at_delta_zero_is_pure_blanket():
    res = sd.release(_frame(), privacy_unit="user_id", by="query", epsilon=1, delta=0)
    assert res.report.mechanism == "pure-blanket" and "delta=0" in res.report.reason


def test_keep_padding_marks_blanket_keys_that_cannot_be_keys():
    """At max_key_bytes=1 every byte string of length <= 1 is a key of the domain; blanket keys that are not UTF-8
    are kept with padding=True; a generous fake_keys makes the blanket frequent (λ = 1/2)."""
    df = pl.DataFrame({"user_id": np.arange(400), "query": ["a"] * 300 + ["b"] * 100})
    marked = 0
    for seed in range(12):
        res = sd.release(df, privacy_unit="user_id", by="query", epsilon=1, delta=0, rng=InsecureSeededRandom(seed),
                         mechanism=PureBlanket(max_key_bytes=1, keep_padding=True, fake_keys=0.9))
        t = res.table
        assert list(t.columns) == ["query", "count", "padding"]
        for k, pad in zip(t["query"].to_list(), t["padding"].to_list()):
            assert pad == k.startswith("\\x")  # not UTF-8: shown with \\xNN escapes, marked
        marked += int(t["padding"].sum())
        assert "kept and marked padding=True" in str(res.report)
    assert marked >= 1  # λ = 1/2 over 12 releases, half of the 1-byte domain is not UTF-8


def test_could_be_key_rule_and_utf8_bound():
    assert could_be_key("é".encode(), "str", 1) and not could_be_key(b"\xff", "str", 1)
    assert could_be_key(b'["a",3]', "json", 2) and not could_be_key(b'["a", 3]', "json", 2)
    assert not could_be_key(b'["a"]', "json", 2)
    # exact count at length <= 1: 129 of 257 strings (empty + ASCII) are UTF-8
    from fractions import Fraction
    assert utf8_fraction_bound(1) == Fraction(129, 257)


def test_add_remove_with_max_units():
    res = sd.release(_frame(), privacy_unit="user_id", by="query", epsilon=1, delta=0,
                     mechanism=PureBlanket(max_units=10000), rng=InsecureSeededRandom(2))
    assert res.report.neighbours is Neighbours.ADD_REMOVE and res.table.height >= 1
    with pytest.raises(InputDataError, match="max_units"):
        sd.release(_frame(), privacy_unit="user_id", by="query", epsilon=1, delta=0,
                   mechanism=PureBlanket(max_units=100))


@pytest.mark.parametrize("mech", ["pure-blanket", "pure-sparse"])
def test_key_too_long_fails_before_the_charge(tmp_path, mech):
    path = str(tmp_path / "b.db")
    with Ledger(path) as led:
        led.set_budget("d", epsilon=5, delta=1e-6, neighbours=Neighbours.REPLACE_ONE)
    df = pl.DataFrame({"user_id": np.arange(300), "query": ["abcde"] * 300})
    with pytest.raises(InputDataError, match="max_key_bytes"):
        sd.release(df, privacy_unit="user_id", by="query", epsilon=1, delta=0, ledger=path, dataset="d",
                   mechanism={"pure-blanket": sd.PureBlanket, "pure-sparse": sd.PureSparse}[mech](max_key_bytes=4))
    with Ledger(path) as led:
        assert led.history("d") == [] and led.spent_epsilon("d") == 0


def test_charge_keeps_the_replace_one_relation(tmp_path):
    path = str(tmp_path / "b.db")
    with Ledger(path) as led:
        led.set_budget("d", epsilon=5, delta=1e-6, neighbours=Neighbours.REPLACE_ONE)
    sd.release(_frame(), privacy_unit="user_id", by="query", epsilon=1, delta=0, ledger=path, dataset="d")
    with Ledger(path) as led:
        (rec,) = led.history("d")
        assert rec.neighbours is Neighbours.REPLACE_ONE and rec.epsilon == 1.0


def test_compact_integer_query_keys():
    df = pl.DataFrame({"user_id": np.arange(300), "k": [7] * 200 + [3] * 100})
    res = sd.release(df, privacy_unit="user_id", by="k", epsilon=1, delta=0, rng=InsecureSeededRandom(3),
                     mechanism=sd.Compact(query_keys=(7, 3, 11), max_key_bytes=4))
    t = dict(zip(res.table["k"].to_list(), res.table["count"].to_list()))
    assert set(t) == {"[7]", "[3]", "[11]"} and t["[7]"] > t["[11]"]
    with pytest.raises(InputDataError, match="query_keys"):
        sd.release(df, privacy_unit="user_id", by="k", epsilon=1, delta=0,
                   mechanism=sd.Compact(query_keys=(10 ** 9,), max_key_bytes=4))


@pytest.mark.parametrize("mech,n", [(sd.PureSparse, 100_000), (sd.Compact, 5_000)])
def test_balcer_vadhan_refused_when_it_would_run_for_hours(mech, n):
    df = pl.DataFrame({"user_id": [1, 2], "query": ["a", "b"]})
    with pytest.raises(InvalidParameterError, match="pure-blanket"):
        sd.release(df, privacy_unit="user_id", by="query", epsilon=1, delta=0, mechanism=mech(max_units=n))


def test_cli_pure_blanket(tmp_path):
    from typer.testing import CliRunner

    from sparsedp.cli import app

    path = tmp_path / "x.parquet"
    _frame(3000).write_parquet(path)
    out = CliRunner().invoke(app, ["release", str(path), "--unit", "user_id", "--by", "query", "--epsilon", "1",
                                   "--delta", "0"])
    assert out.exit_code == 0, out.output
    assert "pure-blanket" in out.output and "padding" in out.output
