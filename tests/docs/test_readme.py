"""Acceptance: every command and code block of README.md works after ONLY the README's first command.

The test builds a wheel of this checkout (``pip wheel --no-deps``), creates a fresh virtual environment, runs the
README's first command there with the wheel in place of ``.`` (``pip install --no-compile <wheel> && sparsedp
demo``: Python compiles what the blocks import when they import it instead of pip compiling every file; the
wheel's dependencies come from the index, as for a user), then runs every ``bash``/``sh``/``console`` and
``python`` block of the README in order, in one temporary directory, with that environment's ``python`` and
``sparsedp`` first on ``PATH`` and nothing of this checkout importable. Any non-zero exit fails.

Skipped: the second set-up line (the test suite itself, which contains this test) and any block after a
``<!-- readme-test: skip … -->`` comment (the comment says why).
"""

from __future__ import annotations

import ensurepip
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from blocks import blocks

pytestmark = [pytest.mark.xdist_group("readme")]  # its own unit: the ~100 s fresh-venv run need not wait behind the docs pages

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
BLOCK_TIMEOUT = 600


def _run(cmd, **kw):
    t = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    print(f"{time.perf_counter() - t:6.1f}s  {' '.join(map(str, cmd))[:100]!r}")  # shown with -s or on failure
    return r


def _fail(what, r):
    pytest.fail(f"{what} exited with {r.returncode}\n--- stdout (tail)\n{r.stdout[-3000:]}\n"
                f"--- stderr (tail)\n{r.stderr[-3000:]}", pytrace=False)


def _make_venv(venv: Path, bindir: Path) -> None:
    """A fresh virtual environment (no system site-packages) with its own ``pip``.

    ``python -m venv`` would run ensurepip, which installs pip and setuptools and byte-compiles every file
    (about three quarters of the venv's cost); here the venv is made without pip and pip is installed into it
    from the same bundled wheel ensurepip uses, without compiling. The environment the README's commands run
    in is the same fresh venv with a real ``pip`` on ``PATH``, and no setuptools (so nothing can lean on an
    undeclared setuptools). Where the interpreter ships no bundled pip wheel, the plain ``python -m venv``."""
    bundled = sorted((Path(ensurepip.__file__).parent / "_bundled").glob("pip-*.whl"))
    if not bundled:
        r = _run([sys.executable, "-m", "venv", str(venv)], timeout=300)
        if r.returncode:
            _fail("python -m venv", r)
        return
    r = _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], timeout=300)
    if r.returncode:
        _fail("python -m venv --without-pip", r)
    vpython = bindir / ("python.exe" if os.name == "nt" else "python")
    r = _run([sys.executable, "-m", "pip", "--python", str(vpython), "install", "-q", "--no-compile",
              "--no-index", "--disable-pip-version-check", str(bundled[-1])], timeout=300)
    if r.returncode:
        _fail("pip install of the bundled pip into the venv", r)
    assert (bindir / ("pip.exe" if os.name == "nt" else "pip")).exists()


def test_setup_block_is_the_two_documented_commands():
    """The README opens with exactly the two set-up commands, and CI (.ci/run) runs the second."""
    first = blocks(README, "readme-test")[0]
    assert first.mark == "setup" and first.is_shell
    lines = [ln for ln in first.text.splitlines() if ln.strip()]
    assert len(lines) == 2, lines
    assert lines[0].startswith("pip install . && ")
    assert lines[1].startswith("pip install -e '.[test]' && ")
    ci = (ROOT / ".ci" / "run").read_text()
    assert "pip install -e '.[test]'" in ci and lines[1].split("&& ", 1)[1] in ci


def test_readme_blocks_run_in_a_fresh_venv(tmp_path):
    bl = blocks(README, "readme-test")
    setup, rest = bl[0], bl[1:]
    assert setup.mark == "setup"
    install, _tests = [ln for ln in setup.text.splitlines() if ln.strip()]

    wheels = tmp_path / "wheels"
    r = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(wheels), str(ROOT)],
             timeout=600)
    if r.returncode:
        _fail("pip wheel", r)
    (wheel,) = wheels.glob("sparsedp-*.whl")

    venv = tmp_path / "venv"
    bindir = venv / ("Scripts" if os.name == "nt" else "bin")
    _make_venv(venv, bindir)
    # bytecode is written on first import (the blocks import a small part of the dependencies), not compiled for
    # every installed file by pip (--no-compile below): the same programs run, the install takes ~40% of the time
    env = {k: v for k, v in os.environ.items()
           if k not in {"PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONDONTWRITEBYTECODE"}}
    env.update(PATH=f"{bindir}{os.pathsep}{env.get('PATH', '')}", VIRTUAL_ENV=str(venv),
               PIP_DISABLE_PIP_VERSION_CHECK="1")
    work = tmp_path / "work"
    work.mkdir()

    # The first command, with the wheel standing for ".".
    first = install.replace("pip install . ", f"pip install -q --no-compile '{wheel}' ", 1)
    r = _run(["bash", "-euo", "pipefail", "-c", first], cwd=work, env=env, timeout=BLOCK_TIMEOUT)
    if r.returncode:
        _fail(f"README line 1 ({install!r})", r)
    r = _run([str(bindir / "python"), "-c", "import sparsedp, sys; print(sparsedp.__file__)"], cwd=work, env=env,
             timeout=60)
    assert r.returncode == 0 and str(venv) in r.stdout, (r.stdout, r.stderr)  # the wheel, not this checkout

    ran = 0
    for b in rest:
        if b.mark == "skip" or not (b.is_shell or b.is_python):
            continue
        if b.is_shell:
            cmd = ["bash", "-euo", "pipefail", "-c", b.shell_script()]
        else:
            cmd = [str(bindir / "python"), "-c", b.text]
        r = _run(cmd, cwd=work, env=env, timeout=BLOCK_TIMEOUT)
        if r.returncode:
            _fail(f"README.md line {b.line} ({b.lang} block)", r)
        ran += 1
    assert ran >= 3
