"""Bytecode written once by the xdist controller before the workers start (tests/conftest.py): the test modules'
assertion-rewritten bytecode and the sparsedp package's bytecode.

Under ``pytest -n 3`` every worker collects the whole suite, and pytest rewrites the ``assert`` statements of every
test module and conftest as it imports them, caching the result in ``__pycache__`` only where bytecode may be
written (not under ``PYTHONDONTWRITEBYTECODE``) and only after the first import: on a fresh checkout each of the
three workers rewrites all ~200 modules (about 9 s of CPU each on this suite) at the same time. Likewise each
worker, and each fresh process a test starts (the CLI, the ledger's concurrent writers, the import checks),
compiles the sparsedp modules it imports (about 0.3–0.5 s of CPU per process) when nothing may be cached.

So the controller writes, where Python and pytest look for them (``__pycache__``, ignored by git), even where
bytecode writing is off: the rewritten bytecode of the test modules this session collects (pytest's own
``_rewrite_test`` and ``_write_pyc``, the calls its import hook makes) and the package's bytecode
(:func:`compileall.compile_dir`, what ``pip install`` writes for an installed package). Python and pytest read a
cached ``.pyc`` even where they may not write one, and check it against the source's size and modification time
as usual, so every process runs exactly the code it would have compiled. Speed only: if pytest's internals
change or a directory cannot be written, nothing is written and every process compiles as before.
"""

from __future__ import annotations

import compileall
import fnmatch
from pathlib import Path

import pytest


def _rewritten_by_pytest(path: Path, patterns: list[str]) -> bool:
    """Whether pytest's import hook rewrites this file: a conftest or a module matching ``python_files``."""
    return path.name == "conftest.py" or any(fnmatch.fnmatch(path.name, p) for p in patterns)


def _selected(config: pytest.Config, root: Path) -> list[Path]:
    """The Python files under ``root`` that this session's arguments name (a file, or every file of a directory),
    and the conftests above them."""
    out: set[Path] = set()
    for arg in config.args:
        path = (config.invocation_params.dir / arg.split("::", 1)[0]).resolve()
        if path.is_dir():
            out.update(p for p in path.rglob("*.py") if p.is_relative_to(root))
        elif path.suffix == ".py" and path.is_relative_to(root):
            out.add(path)
            out.update(d / "conftest.py" for d in path.parents
                       if d.is_relative_to(root) and (d / "conftest.py").exists())
    return sorted(out)


def write_rewritten_bytecode(config: pytest.Config, root: Path) -> int:
    """Write the rewritten ``.pyc`` of every test module under ``root`` that this session collects and that has
    none; the number written."""
    try:
        from _pytest.assertion import rewrite as rw

        state = config.stash[rw.assertstate_key]
        tail, read, rewrite, write = rw.PYC_TAIL, rw._read_pyc, rw._rewrite_test, rw._write_pyc
        cache_dir_of, makedirs = rw.get_cache_dir, rw.try_makedirs
    except (ImportError, AttributeError, KeyError):
        return 0
    patterns = list(config.getini("python_files"))
    written = 0
    for path in _selected(config, root.resolve()):
        if not _rewritten_by_pytest(path, patterns):
            continue
        try:
            cache_dir = cache_dir_of(path)
            pyc = cache_dir / (path.name[:-3] + tail)
            if read(path, pyc) is not None or not makedirs(cache_dir):
                continue
            source_stat, co = rewrite(path, config)
            written += bool(write(state, co, source_stat, pyc))
        except (OSError, SyntaxError, TypeError, ValueError):
            continue  # pytest reports a module that does not compile when a worker imports it
    return written


def compile_package(package_dir: Path) -> bool:
    """Byte-compile a package's modules into their ``__pycache__`` (those already compiled are skipped)."""
    try:
        return bool(compileall.compile_dir(str(package_dir), quiet=2, workers=1))
    except OSError:
        return False
