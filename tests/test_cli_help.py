"""``sparsedp release --help`` (issue 30 item 12): short, with an example, and ``--mechanism`` lists every
registered mechanism (read from the registry, so a new one appears without editing the CLI)."""

from __future__ import annotations

from typer.testing import CliRunner

from sparsedp.cli import app
from sparsedp.mechanisms import registry


def test_release_help_is_short_has_an_example_and_every_mechanism():
    r = CliRunner().invoke(app, ["release", "--help"], env={"COLUMNS": "100"})
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert len(lines) <= 83, len(lines)  # was 121 at this width; 83 with the quantile, variance, interval, other and objective flags
    text = " ".join(r.output.split()).replace("│", " ")
    text = " ".join(text.split())
    assert "Example: sparsedp release " in text and "--out counts.csv" in text
    for name in registry.names():
        assert name in text, name


def test_help_imports_no_heavy_library():
    """``sparsedp --help`` starts without Polars, DuckDB, scipy or pyspark (issue 29: the command modules import
    their own modules at the top; a command that needs one of these imports it when it runs)."""
    import os
    import subprocess
    import sys

    code = ("import sys, runpy\n"
            "sys.argv = ['sparsedp', '--help']\n"
            "try:\n    runpy.run_module('sparsedp', run_name='__main__')\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in ('polars', 'duckdb', 'scipy', 'pyspark', 'pandas') if m in sys.modules))\n")
    src = os.path.join(os.path.dirname(__file__), "..", "src")
    env = {**os.environ, "PYTHONPATH": os.path.abspath(src) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stdout[-500:]
