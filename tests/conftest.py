"""Shared test fixtures."""

from __future__ import annotations

import os
import tempfile

import pytest

from sparsedp.noise import InsecureSeededRandom

# the calibration disk cache of this test process starts empty, so every accountant runs (a cache left in the
# user's directory by an earlier run would answer instead); tests of the cache set their own directory
os.environ["SPARSEDP_CACHE_DIR"] = tempfile.mkdtemp(prefix="sparsedp-test-cache-")


@pytest.fixture
def rng():
    """A deterministic, NOT secure source: tests only."""
    return InsecureSeededRandom(20261122)
