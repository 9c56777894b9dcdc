"""Shared test fixtures, and the order in which xdist workers take the long tests."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from long_units import longest_first
from bytecode_cache import compile_package, write_rewritten_bytecode
import sparsedp
from sparsedp.noise import InsecureSeededRandom

# the calibration disk cache of this test process starts empty, so every accountant runs (a cache left in the
# user's directory by an earlier run would answer instead); tests of the cache set their own directory
os.environ["SPARSEDP_CACHE_DIR"] = tempfile.mkdtemp(prefix="sparsedp-test-cache-")


@pytest.fixture
def rng():
    """A deterministic, NOT secure source: tests only."""
    return InsecureSeededRandom(20261122)


@pytest.hookimpl(tryfirst=True)  # xdist starts its workers in its own (trylast) pytest_sessionstart
def pytest_sessionstart(session):
    """In the xdist controller, before the workers start: the test modules' assertion-rewritten bytecode and the
    package's bytecode, written once instead of by every worker and every fresh process (tests/bytecode_cache.py)."""
    config = session.config
    if config.pluginmanager.has_plugin("dsession"):
        if config.getoption("assertmode", "rewrite") == "rewrite":
            write_rewritten_bytecode(config, Path(__file__).parent)
        package = Path(sparsedp.__file__).resolve().parent
        if package.is_relative_to(config.rootpath.resolve()):  # this checkout only: pip compiled an installed copy
            compile_package(package)


@pytest.hookimpl(trylast=True)  # after tests/spark/conftest.py has put the Spark tests in their group
def pytest_collection_modifyitems(config, items):
    """In an xdist worker, the long units first (longest first), the rest in collection order; every worker
    computes the same order, as xdist requires."""
    if not hasattr(config, "workerinput"):
        return
    longest_first(items)
