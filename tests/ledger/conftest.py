"""Shared helpers of the ledger tests."""

from __future__ import annotations

import pytest

from sparsedp.errors import BudgetExceededError


def _fill(led, dataset, make):
    """Call ``make()`` (one charge) until the ledger refuses; return how many were admitted."""
    n = 0
    while True:
        try:
            make()
        except BudgetExceededError:
            return n
        n += 1
        assert n < 1000


@pytest.fixture
def fill():
    return _fill
