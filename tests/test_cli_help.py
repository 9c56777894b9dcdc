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
    assert len(lines) <= 80, len(lines)  # was 121 at this width
    text = " ".join(r.output.split()).replace("│", " ")
    text = " ".join(text.split())
    assert "Example: sparsedp release " in text and "--out counts.csv" in text
    for name in registry.names():
        assert name in text, name
