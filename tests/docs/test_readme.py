"""Acceptance: every command and code block of README.md works after ONLY the README's first command.

The test builds a wheel of this checkout (``pip wheel --no-deps``, the project's real build backend), creates a
fresh virtual environment, runs the README's first command there with the wheel in place of ``.`` (``pip install
--no-compile <wheel> && sparsedp demo``: Python compiles what the blocks import when they import it instead of
pip compiling every file), then runs every ``bash``/``sh``/``console`` and ``python`` block of the README in
order, in one temporary directory, with that environment's ``python`` and ``sparsedp`` first on ``PATH`` and
nothing of this checkout importable. Any non-zero exit fails.

Where the wheel's dependencies come from (``deps``):

* ``linked`` (the default run): the venv receives exactly the distributions the wheel declares
  (``Requires-Dist`` without extras, markers evaluated) and, transitively, theirs, as they are installed in the
  environment running the tests: each one's top-level files and ``.dist-info`` are symlinked into the venv's
  ``site-packages`` (no resolver, no download, no unpacking, bytecode already compiled). The wheel is then
  installed with ``--no-deps --no-index`` and ``pip check`` proves that the linked set satisfies every declared
  requirement. Nothing else is importable, so a dependency the code imports but the wheel does not declare
  fails a block as it would for a user. The versions are the ones the index gave this environment: CI creates
  it with the README's second command (``pip install -e '.[test]'``) moments before the suite runs, from the
  same index a user's ``pip install .`` resolves against. (Where a dependency is not installed here, or has no
  ``RECORD`` to link it from, the test falls back to ``index``.)
* ``index`` (``-m slow``): ``pip install <wheel>`` resolves and downloads the dependencies from the index, as
  the user's command does (about 30 s of CPU in pip's resolver and unpacking, plus the first imports'
  compilation).

Skipped: the second set-up line (the test suite itself, which contains this test) and any block after a
``<!-- readme-test: skip … -->`` comment (the comment says why).
"""

from __future__ import annotations

import ensurepip
import email
import importlib.metadata as metadata
import os
import subprocess
import sys
import sysconfig
import time
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from blocks import blocks

pytestmark = [pytest.mark.xdist_group("readme")]  # its own unit: the fresh-venv run need not wait behind the docs

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


def _wheel_requirements(wheel: Path) -> list[Requirement]:
    """The ``Requires-Dist`` entries of the wheel's METADATA (what ``pip install .`` resolves)."""
    with zipfile.ZipFile(wheel) as z:
        (meta,) = [n for n in z.namelist() if n.endswith(".dist-info/METADATA")]
        msg = email.message_from_bytes(z.read(meta))
    return [Requirement(r) for r in msg.get_all("Requires-Dist") or []]


def _installed_closure(reqs: list[Requirement]) -> list[metadata.Distribution] | None:
    """The installed distributions that satisfy ``reqs`` (markers evaluated without extras) and, transitively,
    their own requirements (with the extras asked for); None where one is missing, its version does not satisfy
    the requirement, or it has no RECORD to link it from."""
    todo = [(r, "") for r in reqs]
    seen: dict[str, metadata.Distribution] = {}
    done: set[tuple[str, str]] = set()
    while todo:
        req, extra = todo.pop()
        if req.marker is not None and not req.marker.evaluate({"extra": extra}):
            continue
        name = canonicalize_name(req.name)
        try:
            dist = seen.get(name) or metadata.distribution(name)
        except metadata.PackageNotFoundError:
            return None
        if not req.specifier.contains(dist.version, prereleases=True) or dist.files is None:
            return None
        seen[name] = dist
        for e in ("", *sorted(req.extras)):
            if (name, e) not in done:
                done.add((name, e))
                todo += [(Requirement(r), e) for r in dist.requires or []]
    return list(seen.values())


def _link(dists: list[metadata.Distribution], site: Path) -> list[str]:
    """Symlink each distribution's top-level files and directories (its RECORD's first path parts, its
    ``.dist-info`` included) into ``site``; the names linked."""
    linked = []
    for dist in dists:
        base = Path(dist.locate_file(""))
        for top in sorted({f.parts[0] for f in dist.files or () if f.parts[0] not in ("..", "__pycache__")}):
            if not (site / top).exists() and (base / top).exists():
                (site / top).symlink_to(base / top, target_is_directory=(base / top).is_dir())
                linked.append(top)
    return linked


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


@pytest.mark.parametrize("deps", ["linked", pytest.param("index", marks=pytest.mark.slow)])
def test_readme_blocks_run_in_a_fresh_venv(tmp_path, deps):
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

    # The first command, with the wheel standing for "." (and its dependencies linked, or from the index).
    # a later block that ran pip could reinstall or remove a linked distribution, i.e. this environment's files
    pip_later = any("pip " in b.text for b in rest if b.mark != "skip" and b.is_shell)
    closure = _installed_closure(_wheel_requirements(wheel)) if deps == "linked" and not pip_later else None
    if closure is not None:
        where = "import sysconfig; print(sysconfig.get_path('purelib'))"
        vsite = Path(subprocess.run([str(bindir / "python"), "-c", where], capture_output=True, text=True,
                                    check=True).stdout.strip())
        assert vsite.is_relative_to(venv) and Path(sysconfig.get_path("purelib")) != vsite
        linked = _link(closure, vsite)
        assert {canonicalize_name(r.name) for r in _wheel_requirements(wheel) if r.marker is None
                or r.marker.evaluate({"extra": ""})} <= {canonicalize_name(d.metadata["Name"]) for d in closure}
        assert linked, closure
        first = install.replace("pip install . ", f"pip install -q --no-compile --no-deps --no-index '{wheel}' ", 1)
        first = first.replace(" && ", " && pip check && ", 1)
    else:
        first = install.replace("pip install . ", f"pip install -q --no-compile '{wheel}' ", 1)
    r = _run(["bash", "-euo", "pipefail", "-c", first], cwd=work, env=env, timeout=BLOCK_TIMEOUT)
    if r.returncode:
        _fail(f"README line 1 ({install!r}; {'linked dependencies' if closure is not None else 'index'})", r)
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
