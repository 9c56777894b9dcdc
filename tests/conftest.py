"""Shared test fixtures."""

from __future__ import annotations

import pytest

from sparsedp.noise import InsecureSeededRandom


@pytest.fixture
def rng():
    """A deterministic, NOT secure source: tests only."""
    return InsecureSeededRandom(20261122)
