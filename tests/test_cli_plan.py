"""``sparsedp plan``: the compare() table on the command line."""

from __future__ import annotations

from typer.testing import CliRunner

from sparsedp.cli import app

runner = CliRunner()


def test_plan_table_and_best_line():
    res = runner.invoke(app, ["plan", "--epsilon", "1", "--delta", "1e-6", "--l0", "10", "--top-k", "1000",
                              "--noise", "continuous"])
    assert res.exit_code == 0, res.output
    for word in ("mechanism", "analysis", "sigma", "noise std", "delta achieved", "gshm", "laplace", "topk-csh",
                 "tight", "exact"):
        assert word in res.output
    assert "best: gshm (exact, continuous noise)" in res.output
    assert "below the Laplace baseline" in res.output


def test_max_groups_alias_and_section_5_3_numbers():
    res = runner.invoke(app, ["plan", "--epsilon", "0.349", "--delta", "1e-5", "--max-groups", "51914",
                              "--top-k", "51914", "--noise", "continuous"])
    assert res.exit_code == 0, res.output
    assert "7,453.4198" in res.output and "13,950.0513" in res.output and "7,860.5428" in res.output
    assert "best: topk-csh (exact" in res.output and "7,005.64" in res.output  # certified profile (issue 22)


def test_default_shows_discrete_and_continuous():
    res = runner.invoke(app, ["plan", "--epsilon", "1", "--delta", "1e-6", "--l0", "3"])
    assert res.exit_code == 0, res.output
    assert "discrete-exact" in res.output and "continuous" in res.output
    assert "a release with these arguments uses: gshm (discrete-exact, discrete noise)" in res.output
    assert "lowest margin of any analysis: gshm (exact, continuous noise)" in res.output


def test_plan_says_what_the_release_does_and_marks_other_outputs(tmp_path):
    """Issue 30 item 7: plan names the mechanism a release with the same arguments uses (auto's choice, with its
    margin), and marks the rows that publish something else (weighted-gaussian: key weights)."""
    import re

    import numpy as np
    import polars as pl

    import sparsedp as sd
    from sparsedp.noise import InsecureSeededRandom

    res = runner.invoke(app, ["plan", "--epsilon", "1", "--delta", "1e-6", "--max-groups", "10"],
                        env={"COLUMNS": "160"})
    assert res.exit_code == 0, res.output
    m = re.search(r"a release with these arguments uses: (\S+) \(discrete-exact, discrete noise\), threshold "
                  r"margin ([\d,]+\.\d+)", res.output)
    assert m, res.output
    g = np.random.default_rng(0)
    data = pl.DataFrame({"u": g.integers(0, 3000, 30000), "k": g.integers(0, 300, 30000).astype(str)})
    rel = sd.release(data, "u", "k", 1.0, 1e-6, max_groups_per_unit=10, rng=InsecureSeededRandom(1))
    assert rel.report.mechanism == m.group(1) == "gshm"
    assert f"{rel.report.margin:,.2f}" == m.group(2)
    weighted = next(ln for ln in res.output.splitlines() if "weighted-gaussian" in ln)
    assert "keys only (key weights, not counts)" in weighted
    chosen = next(ln for ln in res.output.splitlines() if "release uses this" in ln)
    assert "gshm" in chosen and "discrete-exact" in chosen


def test_bad_arguments_exit_2_with_message():
    res = runner.invoke(app, ["plan", "--epsilon", "1", "--delta", "2", "--l0", "3"])
    assert res.exit_code == 2
    assert "delta must be < 1" in res.output
    res = runner.invoke(app, ["plan", "--epsilon", "1", "--delta", "1e-6", "--noise", "loud"])
    assert res.exit_code == 2
    assert "--noise" in res.output


def test_bad_plot_path_fails_before_the_table(tmp_path):
    res = runner.invoke(app, ["plan", "--epsilon", "1", "--delta", "1e-6", "--l0", "3",
                              "--plot", str(tmp_path / "missing" / "plan.png")])
    assert res.exit_code == 2
    assert "directory does not exist" in res.output
    assert "mechanism" not in res.output and "best:" not in res.output  # nothing printed before the error
    res = runner.invoke(app, ["plan", "--epsilon", "1", "--delta", "1e-6", "--l0", "3",
                              "--plot", str(tmp_path / "plan.txt")])
    assert res.exit_code == 2 and "must end in .png" in res.output and "best:" not in res.output
