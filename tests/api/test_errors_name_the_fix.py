"""Errors that name the argument (the flag on the CLI) and the fix (issue 30, item 8): δ = 0 with an (ε, δ)
mechanism, ragged and Latin-1 CSV files, a directory of Parquet parts, mixed-type unit/key columns on every
engine, and --by / --out on the CLI. Each is refused before any charge, with nothing written."""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
import polars as pl
import pytest
from typer.testing import CliRunner

import sparsedp as sd
from sparsedp.cli import app
from sparsedp.errors import ColumnNotFoundError, ColumnTypeError, InputFormatError, InvalidParameterError
from sparsedp.ledger import Ledger

ENGINES = ("polars", "duckdb", "pandas", "arrow")
KW = dict(privacy_unit="u", by="k", epsilon=1.0, delta=1e-6, max_groups_per_unit=2)


@pytest.fixture()
def led(tmp_path):
    path = tmp_path / "ledger.db"
    with Ledger(path) as lg:
        lg.set_budget("logs", epsilon=10, delta=1e-5)
    return path


def _nothing_charged(led):
    with Ledger(led) as lg:
        assert lg.history("logs") == []


def _cli(*args):
    return CliRunner().invoke(app, list(map(str, args)))


def _one_error_line(r):
    assert r.exit_code == 2, (r.exit_code, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in r.stdout + r.stderr, r.stderr
    print(lines[0])
    return lines[0]


@pytest.fixture()
def files(tmp_path):
    g = np.random.default_rng(5)
    frame = pl.DataFrame({"u": g.integers(0, 200, 2000), "k": g.integers(0, 10, 2000).astype(str)})
    parts = tmp_path / "parts"
    parts.mkdir()
    frame[:1000].write_parquet(parts / "part-0.parquet")
    frame[1000:].write_parquet(parts / "part-1.parquet")
    (parts / "_SUCCESS").write_text("")
    (tmp_path / "ragged.csv").write_bytes(b"u,k\n1,a\n2,b,extra\n3,c\n")
    (tmp_path / "latin.csv").write_bytes(b"u,k\n1,a\n2,caf\xe9\n")
    out = tmp_path / "out"
    out.mkdir()
    return frame, tmp_path, out


# ---------------------------------------------------------------- δ = 0


@pytest.mark.parametrize("mechanism", ["gshm", "laplace"])
def test_delta_zero_names_the_pure_mechanisms(files, led, mechanism):
    frame, _, out = files
    with pytest.raises(InvalidParameterError) as e:
        sd.release(frame, **{**KW, "delta": 0}, mechanism=mechanism, out=out / "r.csv", ledger=str(led),
                   dataset="logs")
    msg = str(e.value)
    print(msg)
    assert e.value.param == "delta" and f"delta=0 (pure DP) is not offered by mechanism='{mechanism}'" in msg
    assert "'pure-sparse'" in msg and "'compact'" in msg and "'stability'" in msg and "max_units" in msg
    _nothing_charged(led)
    assert os.listdir(out) == []


def test_delta_zero_on_the_cli(files, led):
    _, tmp, out = files
    base = ["release", tmp / "parts", "--unit", "u", "--by", "k", "--epsilon", "1", "--delta", "0", "--max-groups", "2",
            "--out", out / "r.csv", "--ledger", led, "--dataset", "logs"]
    line = _one_error_line(_cli(*base, "--mechanism", "gshm"))
    assert "--delta 0 (pure DP) is not offered by --mechanism gshm" in line
    assert "choose a pure-DP --mechanism: " in line and "'pure-sparse'" in line and "--max-units" in line
    assert "delta=" not in line
    line = _one_error_line(_cli(*base))  # auto at delta 0 is the pure blanket histogram: one key per unit
    assert "--delta 0 (pure DP): auto uses --mechanism pure-blanket" in line and "drop --max-groups" in line
    _nothing_charged(led)
    assert os.listdir(out) == []


# ---------------------------------------------------------------- CSV files: ragged, Latin-1


@pytest.mark.parametrize("engine", ENGINES)
def test_ragged_and_latin1_csv_say_where_and_how(files, led, engine):
    _, tmp, out = files
    with pytest.raises(InputFormatError) as e:
        sd.release(str(tmp / "ragged.csv"), **KW, engine=engine, out=out / "r.csv", ledger=str(led), dataset="logs")
    assert "is ragged: line 3 has 3 fields, the header has 2" in str(e.value)
    assert "null_padding=true" in str(e.value) and "truncate_ragged_lines" not in str(e.value)
    with pytest.raises(InputFormatError) as e:
        sd.release(str(tmp / "latin.csv"), **KW, engine=engine, out=out / "r.csv", ledger=str(led), dataset="logs")
    assert "is not UTF-8 text: line 3" in str(e.value) and "encoding='latin-1'" in str(e.value)
    _nothing_charged(led)
    assert os.listdir(out) == []


def test_the_advised_sql_reads_the_latin1_file(files):
    _, tmp, _ = files
    res = sd.release(f"SELECT * FROM read_csv('{tmp / 'latin.csv'}', encoding='latin-1')", **KW)
    assert res.curator.bounding.rows_in == 2


def test_ragged_and_latin1_csv_on_the_cli(files, led):
    _, tmp, out = files
    for name, wanted in (("ragged.csv", "is ragged: line 3"), ("latin.csv", "is not UTF-8 text: line 3")):
        line = _one_error_line(_cli("release", tmp / name, "--unit", "u", "--by", "k", "--epsilon", "1", "--delta",
                                    "1e-6", "--max-groups", "2", "--out", out / "r.csv", "--ledger", led,
                                    "--dataset", "logs"))
        assert wanted in line and "SELECT * FROM read_csv(" in line
    _nothing_charged(led)
    assert os.listdir(out) == []


# ---------------------------------------------------------------- a directory of Parquet parts


@pytest.mark.parametrize("engine", ENGINES)
def test_a_directory_of_parquet_parts_is_read_as_its_files(files, engine):
    frame, tmp, _ = files
    res = sd.release(str(tmp / "parts"), **KW, engine=engine)
    assert res.curator.bounding.rows_in == frame.height


def test_an_empty_directory_is_refused_naming_what_it_expects(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputFormatError, match="holds no Parquet or CSV file"):
        sd.release(str(tmp_path / "empty"), **KW)


# ---------------------------------------------------------------- mixed-type unit and key columns


MIXED = {"u": pd.DataFrame({"u": pd.Series([1, "1", 2, 3] * 50, dtype=object), "k": ["a", "b", "c", "d"] * 50}),
         "k": pd.DataFrame({"u": list(range(200)), "k": pd.Series([1, "1", "a", "b"] * 50, dtype=object)})}


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("column", ["u", "k"])
def test_mixed_type_columns_refused_on_every_engine(column, engine, led, tmp_path):
    for bound in (2, "auto"):
        with pytest.raises(ColumnTypeError) as e:
            sd.release(MIXED[column], **{**KW, "max_groups_per_unit": bound}, engine=engine,
                       out=tmp_path / "r.csv", ledger=str(led), dataset="logs")
        role = "privacy_unit" if column == "u" else "by"
        assert e.value.column == column and e.value.param == role
        assert str(e.value).startswith(f"{role} column {column!r} mixes values of different types (int, str)")
        assert "astype(str)" in str(e.value)
    _nothing_charged(led)
    assert not (tmp_path / "r.csv").exists()


def test_a_mixed_column_cast_to_one_type_is_accepted():
    frame = MIXED["u"].assign(u=MIXED["u"]["u"].astype(str))
    assert sd.release(frame, **KW).curator.bounding.units_in == 3  # "1" and "1": one unit, said by the user


# ---------------------------------------------------------------- --by and --out on the CLI


def test_by_and_out_named_as_flags(files, led, tmp_path):
    frame, tmp, out = files
    with pytest.raises(ColumnNotFoundError) as e:
        sd.release(frame, **{**KW, "by": "qurey"})
    assert e.value.param == "by" and str(e.value).startswith("by column 'qurey' is not in the data")
    base = ["release", tmp / "parts", "--unit", "u", "--epsilon", "1", "--delta", "1e-6", "--max-groups", "2",
            "--ledger", led, "--dataset", "logs"]
    line = _one_error_line(_cli(*base, "--by", "qurey"))
    assert line.startswith("error: --by column 'qurey' is not in the data")
    line = _one_error_line(_cli(*base, "--by", "k", "--out", tmp_path / "no-such-dir" / "r.csv"))
    assert line.startswith("error: cannot write --out ") and "does not exist" in line and "out=" not in line
    _nothing_charged(led)
    assert os.listdir(out) == []
