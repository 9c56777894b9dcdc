"""The quantile accountant (issue 34): the exponential mechanism's law against its ε by exact enumeration of every
neighbouring pair of tiny inputs, the exact l0-fold composition against brute-force enumeration, the split."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest

import sparsedp as sd
from sparsedp.accounting.events import ComposedPureEvent, PureEvent, SequenceEvent, event_from_dict
from sparsedp.accounting.profiles import PureProfile
from sparsedp.accounting.quantiles import (permute_and_flip_law, pure_composition_delta, quantile_utilities,
                                           split_budget, utility_gap)
from sparsedp.errors import InvalidParameterError, InvalidTypeError
from sparsedp.mechanisms.quantiles import key_law


def _multisets(cells: int, size: int):
    for combo in itertools.combinations_with_replacement(range(cells), size):
        yield np.bincount(np.array(combo, dtype=int), minlength=cells) if combo else np.zeros(cells, int)


def _worst_log_ratio(q: sd.Quantile, eps: float, sensitivity: int | None = None) -> float:
    """max over multisets D of <= 4 values on the grid, neighbours D' = D plus up to max_rows values (one unit
    added), and outputs k, of |log P_D(k) − log P_D'(k)| — permute-and-flip's law (the released mechanism)."""
    d = q.sensitivity if sensitivity is None else sensitivity
    worst = 0.0
    for size in range(0, 5):
        for h in _multisets(q.cells, size):
            p = permute_and_flip_law(quantile_utilities(h, q.level), eps, d)
            for extra in range(1, q.max_rows + 1):
                for add in _multisets(q.cells, extra):
                    p2 = permute_and_flip_law(quantile_utilities(h + add, q.level), eps, d)
                    worst = max(worst, float(np.max(np.abs(np.log(p) - np.log(p2)))))
    return worst


@pytest.mark.parametrize("q", [sd.Median("x", 0, 5, cells=5),
                               pytest.param(sd.Quantile("x", 0.9, 0, 5, cells=5), marks=pytest.mark.slow),
                               pytest.param(sd.Quantile("x", 1 / 3, 0, 4, cells=4, max_rows=2),
                                            marks=pytest.mark.slow),
                               sd.Median("x", 0, 4, cells=4, max_rows=2)])
def test_exponential_mechanism_is_epsilon_dp_by_exact_enumeration(q):
    """Every neighbouring pair (one unit's <= max_rows values added) of every tiny input: the log-ratio of the
    output laws is <= ε (Lemma 1 + McKenna & Sheldon 2020, Thm 1), and the check can fail: with the sensitivity one too small
    (and ε large enough for the difference to show) it does."""
    eps = 1.3
    assert _worst_log_ratio(q, eps) <= eps * (1 + 1e-12)
    assert _worst_log_ratio(q, eps) > 0.5 * eps          # the bound is not vacuous on these inputs
    if q.sensitivity > 1:
        assert _worst_log_ratio(q, eps, q.sensitivity // 2) > eps


def test_utilities_match_the_definition():
    h = np.array([0, 3, 5, 2, 0, 1])
    level = Fraction(9, 10)
    u = quantile_utilities(h, level)
    for k in range(h.size):
        below, above = int(h[:k].sum()), int(h[k + 1:].sum())
        assert u[k] == -abs((10 - 9) * below - 9 * above)
    assert sd.Quantile("x", 0.9, 0, 1).sensitivity == 9
    assert sd.Quantile("x", 0.9, 0, 1, max_rows=3).sensitivity == 27
    assert sd.Median("x", 0, 1).sensitivity == 1


def _rr_composition_brute_force(e0: float, k: int, eps: float) -> float:
    """δ(ε) of k randomised responses by enumerating all 2^k outcomes."""
    p = math.exp(e0) / (1 + math.exp(e0))
    total = 0.0
    for bits in itertools.product((0, 1), repeat=k):
        flips = sum(bits)
        pp = p ** (k - flips) * (1 - p) ** flips
        qq = (1 - p) ** (k - flips) * p ** flips
        total += max(0.0, pp - math.exp(eps) * qq)
    return total


@pytest.mark.parametrize("e0,k", [(0.3, 1), (0.2, 3), (0.5, 6), (0.05, 7)])
def test_pure_composition_is_exact(e0, k):
    for eps in (0.0, 0.1, 0.35, 0.9, 2.0, k * e0):
        assert pure_composition_delta(e0, k, eps) == pytest.approx(_rr_composition_brute_force(e0, k, eps),
                                                                   abs=1e-15, rel=1e-10)
    grid = np.linspace(-1, 2, 31)
    if k == 1:
        assert np.allclose(pure_composition_delta(e0, 1, grid), PureProfile(e0).delta(grid), atol=1e-15)
    ours = ComposedPureEvent(epsilon=k * e0, delta=0.0, epsilon0=e0, k=k)
    assert ours.delta_at(k * e0) == 0.0
    assert event_from_dict(ours.to_dict()) == ours


@pytest.mark.slow
def test_pure_composition_agrees_with_the_ledgers_pld():
    """The ledger's PLD composition of k pure events is a pessimistic discretisation of the same curve."""
    e0, k = 0.2, 3
    seq = SequenceEvent([PureEvent(epsilon=e0, delta=0.0)] * k)
    ours = ComposedPureEvent(epsilon=k * e0, delta=0.0, epsilon0=e0, k=k)
    for eps in (0.1, 0.5 * k * e0):
        assert seq.delta_at(eps) >= ours.delta_at(eps) - 1e-12
        assert seq.delta_at(eps) == pytest.approx(ours.delta_at(eps), rel=1e-3, abs=1e-9)


def test_split_budget():
    s = split_budget(1.0, 1e-6, 5, [None, None])
    assert s.count_epsilon == pytest.approx(1 / 5) and s.quantile_epsilons == pytest.approx((2 / 5, 2 / 5))
    assert s.key_epsilons == pytest.approx((2 / 25, 2 / 25)) and s.count_delta == 1e-6
    s = split_budget(2.0, 1e-6, 4, [0.25])
    assert s.count_epsilon == pytest.approx(1.5) and s.key_epsilons == pytest.approx((0.125,))
    with pytest.raises(InvalidParameterError, match="leave a part"):
        split_budget(1.0, 1e-6, 5, [0.6, 0.5])


def test_utility_gap_is_the_tail_bound():
    """P[U < U_max − gap] <= α for the exact law, on a spread-out input."""
    q = sd.Median("x", 0, 64, cells=64)
    h = np.arange(64) % 3
    for eps in (0.1, 1.0):
        p = key_law(h, q, eps)
        u = quantile_utilities(h, q.level)
        gap = utility_gap(eps, q.sensitivity, q.cells, 0.05)
        assert p[u < u.max() - gap].sum() <= 0.05


@pytest.mark.parametrize("kw,exc,msg", [
    (dict(q=0.0), InvalidParameterError, "strictly between"), (dict(q=1.2), InvalidParameterError, "strictly"),
    (dict(q=0.123456), InvalidParameterError, "4 decimals"), (dict(q="0.5"), InvalidTypeError, "number"),
    (dict(lower=5.0), InvalidParameterError, "lower must be < upper"), (dict(cells=1), InvalidParameterError, "cells"),
    (dict(max_rows=0), InvalidParameterError, "max_rows"), (dict(share=1.0), InvalidParameterError, "share"),
])
def test_quantile_arguments_are_checked(kw, exc, msg):
    args = dict(column="x", q=0.5, lower=0.0, upper=5.0) | kw
    with pytest.raises(exc, match=msg):
        sd.Quantile(**args)


def test_names_and_levels():
    assert sd.Median("dwell", 0, 1).output_name == "median_dwell"
    assert sd.Quantile("dwell", 0.95, 0, 1).output_name == "q95_dwell"
    assert sd.Quantile("dwell", 0.95, 0, 1).level == Fraction(19, 20)
    assert sd.Quantile("dwell", 0.9, 0, 1, name="p90").output_name == "p90"
