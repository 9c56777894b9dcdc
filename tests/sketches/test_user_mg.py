"""The user-level Misra–Gries sketch (PAMG): its update rule and its sensitivity, by exact enumeration."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from sparsedp.sketches.user_mg import UserMisraGries, pamg_reference

UNIVERSE = (0, 1, 2, 3)
SETS = [frozenset(s) for r in range(4) for s in itertools.combinations(UNIVERSE, r)]


def sketch(stream, k):
    s = UserMisraGries(k)
    for unit in stream:
        s.update_set(unit)
    return s.standard()


@pytest.mark.parametrize("k", [1, 2, 3])
def test_matches_the_literal_decrement_loop(k):
    for n in range(4):
        for stream in itertools.product(SETS, repeat=n):
            assert sketch(stream, k) == pamg_reference(stream, k)


@pytest.mark.parametrize("k", [1, 2, 3])
def test_neighbours_differ_monotonically_by_at_most_one(k):
    """Every stream of up to 3 units over 4 keys (sets of 0–3 keys), one more unit inserted at every position:
    the difference lies in {0,1}^U or {0,−1}^U (CSH's Definition 3.1), and each sketch has <= k keys."""
    seen = {"up": 0, "down": 0, "same": 0}
    for n in range(4):
        for stream in itertools.product(SETS, repeat=n):
            a = sketch(stream, k)
            assert len(a) <= k
            for pos in range(n + 1):
                for extra in SETS:
                    b = sketch(stream[:pos] + (extra,) + stream[pos:], k)
                    d = {b.get(x, 0) - a.get(x, 0) for x in UNIVERSE}
                    assert d <= {0, 1} or d <= {0, -1}, (stream, pos, extra, a, b)
                    seen["same" if d == {0} else "up" if 1 in d else "down"] += 1
    assert seen["up"] and seen["down"]  # both directions occur: the test can fail either way


def test_a_unit_with_many_keys_still_moves_each_counter_by_one():
    # one unit holding every key of a long stream's heavy keys: group privacy would need l0 = 6
    base = [frozenset({0, 1}), frozenset({2, 3, 4}), frozenset({0, 5})] * 4
    heavy = frozenset(range(6))
    for k in (2, 3, 5):
        a = sketch(base, k)
        for pos in range(len(base) + 1):
            b = sketch(base[:pos] + [heavy] + base[pos:], k)
            d = {b.get(x, 0) - a.get(x, 0) for x in range(6)}
            assert d <= {0, 1} or d <= {0, -1}


def test_error_bound_and_batch_update():
    rng = np.random.default_rng(3)
    units = rng.integers(0, 400, 3000)
    keys = np.minimum(rng.zipf(1.6, 3000), 60)
    k = 8
    s = UserMisraGries(k).update_sets(units, keys)
    pairs = set(zip(units.tolist(), keys.tolist()))
    f: dict[int, int] = {}
    for _, x in pairs:
        f[x] = f.get(x, 0) + 1
    n = len(pairs)
    assert s.elements == n and s.units == len(set(units.tolist()))
    st = s.standard()
    assert len(st) <= k
    for x, fx in f.items():
        assert fx - n / (k + 1) <= st.get(x, 0) <= fx
    # the batch update is the per-unit update in increasing unit order
    by_unit: dict[int, set] = {}
    for u, x in pairs:
        by_unit.setdefault(u, set()).add(x)
    assert st == pamg_reference([by_unit[u] for u in sorted(by_unit)], k)
