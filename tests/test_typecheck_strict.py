"""The seams and the public API are strictly typed (issue 29): ``mypy --strict`` passes on the packages listed here.

Each package joins the list when it passes; the issue's target is every one of ``accounting/``, ``mechanisms/``,
``engines/``, ``core/``, the pipeline and the ledger. Imports outside the list are followed silently, so an error
is reported only in a listed file."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: paths (relative to src/sparsedp) that pass ``mypy --strict``
STRICT: list[str] = [
    "mechanisms",
    "accounting",
    "engines",
    "core",
    "pipeline.py", "request.py", "execution.py", "ledger.py", "report.py", "quantile_release.py",
    # the rest of the public API
    "__init__.py", "aggregates.py", "errors.py", "advice.py", "plotting.py", "progress.py", "cli/_errors.py",
]


def test_mypy_strict_passes_on_the_seams(tmp_path):
    pytest.importorskip("mypy", reason="mypy is in the test extra: pip install 'sparsedp[test]'")
    if not STRICT:
        pytest.skip("no package is listed yet")
    paths = [str(ROOT / "src" / "sparsedp" / p) for p in STRICT]
    r = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent",
                        "--ignore-missing-imports", "--python-version", "3.11",
                        "--cache-dir", str(tmp_path / "cache"), *paths],
                       cwd=ROOT, capture_output=True, text=True, timeout=600,
                       env={**os.environ, "MYPYPATH": str(ROOT / "src")})
    assert r.returncode == 0, r.stdout + r.stderr
