"""CLI errors speak the CLI: flag names, one line, exit code 2, nothing written or charged (issue 20)."""

from __future__ import annotations

import os

import numpy as np
import polars as pl
import pytest
from typer.testing import CliRunner

from sparsedp.cli import app
from sparsedp.cli._errors import PLAN_FLAGS, RELEASE_FLAGS, to_cli
from sparsedp.ledger import Ledger


def invoke(*args):
    return CliRunner().invoke(app, list(map(str, args)))


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("clierr")
    g = np.random.default_rng(1)
    pl.DataFrame({"user_id": g.integers(0, 500, 3000), "url": g.integers(0, 40, 3000).astype(str)}).write_parquet(
        d / "log.parquet")
    return d / "log.parquet"


BASE = ["--unit", "user_id", "--by", "url", "--epsilon", "1"]


def _check_usage_error(r, *, wanted, unwanted=()):
    assert r.exit_code == 2, (r.exit_code, r.stdout, r.stderr)
    err = r.stderr.strip()
    assert len(err.splitlines()) == 1, err  # one line
    assert err.startswith("error: ") and "Traceback" not in err
    for w in wanted:
        assert w in err, err
    for u in unwanted:
        assert u not in err, err


@pytest.mark.parametrize("extra,wanted,unwanted", [
    (["--delta", "1e-6", "--max-groups", "3", "--ledger", "{tmp}/l.db"], ["--ledger needs --dataset"],
     ["dataset must", "None"]),
    (["--max-groups", "3"], ["--delta is required"], ["NoneType", "None"]),
    (["--delta", "1e-6"], ["--max-groups", "--top-k"], ["max_groups_per_unit", "top_k"]),
    (["--delta", "1e-6", "--top-k", "3", "--mechanism", "gshm"], ["--top-k", "--mechanism gshm"], ["top_k"]),
    (["--delta", "1e-6", "--mechanism", "topk-csh"], ["--top-k"], ["top_k", "sd.TopKCSH"]),
    (["--delta", "1e-6", "--max-groups", "3", "--count-column", "url"], ["--count-column"], ["sd.Count"]),
    (["--delta", "2", "--max-groups", "3"], ["--delta must be < 1"], []),
    (["--delta", "1e-6", "--max-groups", "0"], ["--max-groups must be a positive integer or 'auto'"], ["max_groups_per_unit"]),
    (["--delta", "1e-6", "--max-groups", "3", "--unit", "userid"], ["did you mean 'user_id'"], []),
    # --by is repeatable: a second --by adds to the first (it does not replace it), so these are caught
    (["--delta", "1e-6", "--max-groups", "3", "--by", "url"], ["--by lists a column twice"], [" by lists"]),
    (["--delta", "1e-6", "--max-groups", "3", "--by", "user_id"], ["--unit 'user_id' is also in --by"],
     ["privacy_unit"]),
])
def test_release_usage_errors_in_flag_terms(data, tmp_path, extra, wanted, unwanted):
    out = tmp_path / "o.parquet"
    args = [a.replace("{tmp}", str(tmp_path)) if isinstance(a, str) else a for a in extra]
    base = BASE[2:] if "--unit" in extra else BASE  # an option is given once: the case's --unit replaces BASE's
    r = invoke("release", data, *base, *args, "--out", out)
    _check_usage_error(r, wanted=wanted, unwanted=unwanted)
    assert os.listdir(tmp_path) == []  # no output, no ledger file created


@pytest.mark.parametrize("sql,wanted", [
    ("SELEC user_id, url FROM '{data}'", ['SQL error', 'syntax error at or near "SELEC"']),
    ("SELECT user_id, url FRM '{data}'", ['SQL error', 'syntax error']),
    ("SELECT user_id, urll AS url FROM '{data}'", ['SQL error', 'urll']),
])
def test_sql_typos_are_sql_errors(data, tmp_path, sql, wanted):
    r = invoke("release", sql.format(data=data), *BASE, "--delta", "1e-6", "--max-groups", "3", "--out",
               tmp_path / "o.csv")
    _check_usage_error(r, wanted=wanted, unwanted=["Parquet or CSV", "LINE 1", "^^^"])
    assert os.listdir(tmp_path) == []


def test_errors_after_the_ledger_opens_charge_nothing(data, tmp_path):
    led = tmp_path / "l.db"
    with Ledger(led) as lg:
        lg.set_budget("logs", epsilon=5, delta=1e-5)
    r = invoke("release", data, "--unit", "user_id", "--by", "nope", "--epsilon", "1", "--delta", "1e-6",
               "--max-groups", "3", "--ledger", led, "--dataset", "logs", "--out", tmp_path / "o.csv")
    _check_usage_error(r, wanted=["by column 'nope'"])
    with Ledger(led) as lg:
        assert lg.history("logs") == []
    r = invoke("release", data, *BASE, "--delta", "1e-6", "--max-groups", "3", "--ledger", led, "--dataset",
               "other")
    _check_usage_error(r, wanted=["other"])
    assert sorted(os.listdir(tmp_path)) == ["l.db"]


def test_plan_ledger_audit_demo_reproduce_errors(tmp_path):
    _check_usage_error(invoke("plan", "--epsilon", "0", "--delta", "1e-6", "--max-groups", "3"),
                       wanted=["--epsilon must be > 0"])
    _check_usage_error(invoke("plan", "--epsilon", "1", "--delta", "1e-6", "--max-groups", "0"),
                       wanted=["--max-groups must be >= 1"], unwanted=["max_groups_per_unit"])
    led = tmp_path / "l.db"
    _check_usage_error(invoke("ledger", "init", led, "--dataset", "d", "--epsilon", "-1", "--delta", "1e-6"),
                       wanted=["--epsilon must be > 0"])
    _check_usage_error(invoke("ledger", "init", led, "--dataset", "d", "--epsilon", "1", "--delta", "1e-6",
                              "--neighbours", "swap"), wanted=["--neighbours must be one of"])
    assert invoke("ledger", "init", led, "--dataset", "d", "--epsilon", "1", "--delta", "1e-6").exit_code == 0
    _check_usage_error(invoke("ledger", "plan", led, "--dataset", "d", "--epsilon", "1", "--delta", "2",
                              "--max-groups", "3"), wanted=["--delta must be < 1"])
    _check_usage_error(invoke("audit", "gshm", "--epsilon", "1", "--delta", "1e-6", "--l0", "0", "--runs", "100"),
                       wanted=["--l0 must be >= 1"], unwanted=["bound"])
    _check_usage_error(invoke("audit", "gshm", "--epsilon", "1", "--delta", "1e-6", "--runs", "5"),
                       wanted=["--runs must be >= 100"])
    out = tmp_path / "demo.csv"
    _check_usage_error(invoke("demo", "--rows", "2000", "--delta", "2", "--out", out),
                       wanted=["--delta must be < 1"])
    _check_usage_error(invoke("demo", "--rows", "2000", "--max-groups", "0", "--out", out),
                       wanted=["--max-groups must be >= 1"], unwanted=["max_groups_per_unit"])
    assert not out.exists()
    _check_usage_error(invoke("reproduce", "no-such-target", "--out", tmp_path / "r"), wanted=["no-such-target"])
    assert not (tmp_path / "r").exists()


def test_errors_name_their_parameter_as_fields_and_the_cli_shows_flags():
    """The CLI reads the error's fields and markers (no parsing of the wording): Python callers read the
    parameter names, the CLI its flags; text without markers (a warning, DuckDB's error) is shown as it is."""
    from sparsedp import _validate as v
    from sparsedp.errors import InvalidParameterError, SparsedpError

    with pytest.raises(InvalidParameterError) as e:
        v.integer("max_groups_per_unit", 0, lo=1)
    assert e.value.param == "max_groups_per_unit"
    assert str(e.value) == "max_groups_per_unit must be >= 1, got 0"
    assert to_cli(e.value, RELEASE_FLAGS) == "--max-groups must be >= 1, got 0"
    err = InvalidParameterError("pass either ⟨max_groups_per_unit⟩ (a) or ⟨top_k=…⟩ (b), not both", param="top_k",
                                fix="see ⟨mechanism='gshm'⟩")
    assert str(err) == "pass either max_groups_per_unit (a) or top_k=… (b), not both; see mechanism='gshm'"
    assert to_cli(err, RELEASE_FLAGS) == "pass either --max-groups (a) or --top-k (b), not both; see --mechanism gshm"
    with pytest.raises(SparsedpError) as e:
        v.real("delta", None)
    assert to_cli(e.value, PLAN_FLAGS) == "--delta is required (a real number)"
    assert to_cli("the delta achieved is 1e-7", RELEASE_FLAGS) == "the delta achieved is 1e-7"
    assert to_cli('Parser Error: x\n\nLINE 1: SELEC\n        ^^^^^', RELEASE_FLAGS) == "Parser Error: x"
    assert to_cli(InvalidParameterError("⟨l0=3⟩ is too large"), PLAN_FLAGS) == "--max-groups 3 is too large"
    assert to_cli(InvalidParameterError("⟨no_flag⟩ is odd"), PLAN_FLAGS) == "no_flag is odd"


def test_reproduce_reports_progress_of_its_main_loop(tmp_path):
    from sparsedp import reproduce as rp

    seen = []
    rp.run("karrer-fig1b", tmp_path, fast=True, progress=lambda d, done, total: seen.append((d, done, total)))
    assert seen[0][1] == 0 and seen[-1][1] == seen[-1][2] > 10  # from 0 to total, one report per step
    assert [s[1] for s in seen] == list(range(seen[-1][2] + 1))


@pytest.mark.parametrize("args,target", [
    (["plan", "--epsilon", "1", "--delta", "1e-6", "--max-groups", "3"], "sparsedp.pipeline.plan"),
    (["audit", "gshm", "--epsilon", "1", "--delta", "1e-6", "--runs", "100"], "sparsedp.audit.audit"),
    (["reproduce", "karrer-fig1b", "--fast", "--out", "{tmp}/r"], "sparsedp.reproduce.karrer_gshm.steps"),
    (["ledger", "plan", "{tmp}/l.db", "--dataset", "d", "--epsilon", "1", "--delta", "1e-6", "--max-groups", "3"],
     "sparsedp.accounting.calibrate"),
    (["demo", "--rows", "1000", "--out", "{tmp}/d.csv"], "sparsedp.demo_data.search_log"),
])
def test_every_command_exits_130_on_ctrl_c(tmp_path, monkeypatch, args, target):
    with Ledger(tmp_path / "l.db") as lg:
        lg.set_budget("d", epsilon=5, delta=1e-5)

    def interrupt(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(target, interrupt)
    r = invoke(*[a.replace("{tmp}", str(tmp_path)) for a in args])
    assert r.exit_code == 130, (r.exit_code, r.stdout, r.stderr)
    assert r.stderr.strip().startswith("interrupted") and len(r.stderr.strip().splitlines()) == 1
    files = sorted(os.path.relpath(os.path.join(d, f), tmp_path) for d, _, fs in os.walk(tmp_path) for f in fs)
    assert files == ["l.db"]  # no output file (reproduce may have created its empty output directory)


def test_help_still_lists_the_options():
    r = invoke("plan", "--help")
    assert r.exit_code == 0 and "--max-groups" in r.stdout and "--plot" in r.stdout


def test_a_file_name_with_spaces_is_not_taken_for_sql(tmp_path):
    r = invoke("release", str(tmp_path / "my data file.xlsx"), *BASE, "--delta", "1e-6", "--max-groups", "3")
    _check_usage_error(r, wanted=["not a Parquet or CSV file"], unwanted=["SQL"])


def test_sketch_and_vector_commands_speak_flags(data):
    _check_usage_error(invoke("sketch", data, "--by", "url", "--sketch-size", "0", "--epsilon", "1"),
                       wanted=["--sketch-size must be >= 1"], unwanted=["sketch_size"])
    _check_usage_error(invoke("sum", data, "--unit", "user_id", "--columns", "url", "--lower", "0", "--upper", "1",
                              "--epsilon", "1"), wanted=["give --delta", "with --epsilon"])


def test_by_repeated_is_by_comma_separated(tmp_path):
    """``--by a --by b`` releases the same (a, b) keys as ``--by a,b`` (a repeated flag used to keep only b)."""
    g = np.random.default_rng(3)
    src = tmp_path / "two.parquet"
    pl.DataFrame({"u": g.integers(0, 4000, 40000), "a": g.integers(0, 2, 40000).astype(str),
                  "b": g.integers(0, 3, 40000).astype(str)}).write_parquet(src)
    tables = []
    for by in (["--by", "a", "--by", "b"], ["--by", "a,b"], ["--by", " a , b "]):
        out = tmp_path / f"o{len(tables)}.csv"
        r = invoke("release", src, "--unit", "u", *by, "--epsilon", "1", "--delta", "1e-6", "--max-groups", "6",
                   "--no-interval", "--out", out)
        assert r.exit_code == 0, (r.stdout, r.stderr)
        tables.append(pl.read_csv(out).sort("a", "b"))
    for t in tables:
        assert t.columns == ["a", "b", "count"]
        assert t.select("a", "b").rows() == [(a, b) for a in (0, 1) for b in (0, 1, 2)]  # ~6700 units per key
    r = invoke("release", src, "--unit", "u", "--by", ",", "--epsilon", "1", "--delta", "1e-6", "--max-groups", "6")
    _check_usage_error(r, wanted=["--by must be a column name"], unwanted=[" by must"])


@pytest.mark.parametrize("args,wanted", [
    (["release", "{data}", *BASE, "--delta", "1e-6", "--max-groups", "3", "--epsilon", "10", "--out", "{out}"],
     "--epsilon is given more than once"),
    (["release", "{data}", *BASE, "--delta=1e-6", "--max-groups", "3", "--delta=1e-9", "--out", "{out}"],
     "--delta is given more than once"),
    (["release", "{data}", *BASE, "--privacy-unit", "url", "--delta", "1e-6", "--max-groups", "3", "--out", "{out}"],
     "--unit and --privacy-unit are the same option"),
    (["plan", "--epsilon", "1", "--delta", "1e-6", "--l0", "3", "--l0", "4"], "--l0 is given more than once"),
    (["demo", "--rows", "1000", "--rows", "2000", "--write", "{out}"], "--rows is given more than once"),
])
def test_a_single_valued_option_given_twice_is_refused(data, tmp_path, args, wanted):
    """Click keeps the last of repeated values silently (``--epsilon 1 … --epsilon 10`` would release at 10): every
    command refuses a repeated single-valued option, naming it, before anything runs or is written."""
    out = tmp_path / "o.parquet"
    r = invoke(*[str(a).replace("{data}", str(data)).replace("{out}", str(out)) for a in args])
    _check_usage_error(r, wanted=[wanted])
    assert not out.exists()


def test_repeatable_options_and_flags_still_repeat(data, tmp_path):
    """Options that take several values (``--sum``) and on/off flags are not affected by the check."""
    src, out = tmp_path / "v.parquet", tmp_path / "o.csv"
    pl.read_parquet(data).with_columns(v=pl.lit(1.0)).write_parquet(src)
    r = invoke("release", src, *BASE, "--delta", "1e-6", "--max-groups", "3", "--sum", "v:0:10",
               "--sum", "v:0:5:small", "--no-interval", "--overwrite", "--overwrite", "--out", out)
    assert r.exit_code == 0, (r.stdout, r.stderr)
    assert pl.read_csv(out).columns == ["url", "count", "sum_v", "small"]


@pytest.mark.parametrize("command", [["release", "{data}", *BASE, "--delta", "1e-6", "--max-groups", "3"],
                                     ["sketch", "{data}", "--by", "url", "--sketch-size", "8", "--epsilon", "1",
                                      "--delta", "1e-6"]])
def test_negative_head_is_refused(data, tmp_path, command):
    """``--head -1`` used to print every row but the last (a negative slice); it is refused before anything runs."""
    out = tmp_path / "o.parquet"
    r = invoke(*[str(a).replace("{data}", str(data)) for a in command], "--head", "-1", "--out", out)
    assert r.exit_code == 2 and "--head" in r.output and not out.exists(), r.output


def test_every_command_refuses_repeated_options():
    """Every command (and sub-command) is a ``OnceCommand``, so a new one cannot forget the check."""
    import typer.main

    from sparsedp.cli._errors import OnceCommand

    def commands(group):
        for cmd in group.commands.values():
            yield from commands(cmd) if hasattr(cmd, "commands") else (cmd,)

    found = list(commands(typer.main.get_command(app)))
    assert len(found) >= 10 and all(isinstance(c, OnceCommand) for c in found), \
        [c.name for c in found if not isinstance(c, OnceCommand)]
