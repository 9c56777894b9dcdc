"""Hostile-input fuzzing of the ``sparsedp`` command (typer CliRunner, hypothesis).

Every invocation must end with exit code 0 (success), 1 (``audit`` found a contradiction) or 2 (a documented
error or a usage error), never with an uncaught exception or a traceback; a failed ``release`` writes
nothing. ``SPARSEDP_FUZZ=slow`` runs 10x more cases.
"""

from __future__ import annotations

import os
import tempfile

import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from fuzz_helpers import fuzz_settings
from sparsedp.cli import app

RUNNER = CliRunner()

pytestmark = pytest.mark.usefixtures("cached_calibration")


def invoke(args):
    res = RUNNER.invoke(app, args)
    assert res.exit_code in (0, 1, 2), (args, res.exit_code, res.output, res.exception)
    assert res.exception is None or isinstance(res.exception, SystemExit), (args, repr(res.exception))
    assert "Traceback" not in res.output, (args, res.output)
    return res


VALUE = st.one_of(st.sampled_from(["1", "0.5", "1e-5", "0", "-1", "nan", "inf", "1e400", "", "abc", "3", "10",
                                   "1e-320", "99999999999999999999", "0x10", "日本"]),
                  st.text(max_size=4))
NUMBER_OPTS = ["--epsilon", "--delta", "--max-groups", "--top-k", "--pre-threshold", "--head"]


@st.composite
def release_args(draw, src, out):
    args = ["release", draw(st.sampled_from([src, src + "x", "SELECT * FROM nowhere", "", "日本.csv"]))]
    args += ["--unit", draw(st.sampled_from(["u", "k", "x", "", "U"]))]
    args += ["--by", draw(st.sampled_from(["k", "k,k", "u", ",", "k, u", "日"]))]
    args += ["--epsilon", draw(st.sampled_from(["1", "4"]) | VALUE)]
    args += ["--delta", draw(st.sampled_from(["1e-5"]) | VALUE)]
    model = draw(st.sampled_from([["--max-groups", "1"], ["--top-k", "3"], ["--max-groups", "2"], []]))
    args += model
    for opt in draw(st.lists(st.sampled_from(NUMBER_OPTS + ["--mechanism", "--engine"]), max_size=2, unique=True)):
        args += [opt, draw(VALUE | st.sampled_from(["auto", "gshm", "laplace", "topk-csh", "csh", "polars",
                                                    "duckdb", "pandas", "arrow"]))]
    args += ["--out", draw(st.sampled_from([out, out + ".txt", os.path.join(out, "x.csv")]))]
    return args


@fuzz_settings(160)
@given(st.data())
def test_cli_release(data):
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "in.csv")
        pl.DataFrame({"u": [1, 2, 3, 3, 4], "k": ["a", "a", "b", "a", "日本"]}).write_csv(src)
        outdir = os.path.join(d, "out")
        os.mkdir(outdir)
        out = os.path.join(outdir, data.draw(st.sampled_from(["r.csv", "r.parquet"]), label="name"))
        res = invoke(data.draw(release_args(src, out), label="args"))
        written = os.listdir(outdir)
        if res.exit_code == 0:  # the output, and for CSV its guarantee sidecar
            name = os.path.basename(out)
            assert sorted(written) == sorted([name] + ([name + ".json"] if name.endswith(".csv") else []))
        else:
            assert written == [], res.output


@fuzz_settings(60)
@given(st.lists(st.sampled_from(NUMBER_OPTS[:4] + ["--plot"]), max_size=3, unique=True), st.data())
def test_cli_plan(opts, data):
    args = ["plan", "--epsilon", data.draw(st.sampled_from(["1", "4"]) | VALUE, label="eps"),
            "--delta", data.draw(st.sampled_from(["1e-5"]) | VALUE, label="delta")]
    with tempfile.TemporaryDirectory() as d:
        for o in opts:
            if o == "--plot":  # only refused paths: rendering a plot takes seconds
                args += [o, os.path.join(d, data.draw(st.sampled_from(["p.txt", "no/p.png"]), label="plot"))]
            elif o not in ("--epsilon", "--delta"):
                args += [o, data.draw(st.sampled_from(["1", "3"]) | VALUE, label=o)]
        invoke(args)


@fuzz_settings(80)
@given(st.data())
def test_cli_ledger_and_audit(data):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, data.draw(st.sampled_from(["l.db", "sub/l.db", ""]), label="path"))
        invoke(["ledger", "init", path, "--dataset", data.draw(st.sampled_from(["d", "", " "]) | VALUE),
                "--epsilon", data.draw(st.sampled_from(["1"]) | VALUE), "--delta",
                data.draw(st.sampled_from(["1e-6"]) | VALUE)])
        invoke(["ledger", "show", path] + data.draw(st.sampled_from([[], ["--dataset", "d"], ["--dataset", "zz"]])))
        invoke(["audit", data.draw(st.sampled_from(["laplace", "gshm", "x"]) | VALUE), "--epsilon",
                data.draw(st.sampled_from(["1"]) | VALUE), "--delta", data.draw(st.sampled_from(["1e-3"]) | VALUE),
                "--runs", data.draw(st.sampled_from(["200", "1000000000000"]) | VALUE),
                "--l0", data.draw(st.sampled_from(["1"]) | VALUE), "--seed", data.draw(st.sampled_from(["1", "-1"]))])
