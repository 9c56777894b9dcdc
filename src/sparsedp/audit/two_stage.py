"""Audit target of the two-stage release (``two-stage``: a thresholded selection, then public-key counts of the
selected keys; :mod:`sparsedp.mechanisms.two_stage`, ``docs/proofs/two-stage.md``).

Each release is ``TwoStage.prepare`` and ``TwoStage.run`` on the histogram an embedded engine hands it
(:class:`~sparsedp.mechanisms.two_stage.TwoStageHistogram`: stage 1's histogram bounded to ``l0`` and stage 2's;
the scenarios' units have at most ``l0`` keys, so the two are the same counts), so stage 1's secure kernel selects
the keys, the real stage-2 mechanism (default Lebeda (2024)'s correlated Gaussian) is calibrated at ``d = |K|``
inside ``run`` and releases them, and the output is what a user gets: the selected keys with stage-2 values (and
stage 2's size estimate ñ, read exactly from its note). One release per run (stage 2 draws one shared coordinate).

Scenarios (:func:`two_stage_scenarios`), the two halves of the composition:

* ``new`` — the unit brings ``l0`` new keys at count 1: D releases nothing, D' a key only through stage 1's
  threshold (stage 1's infinite term). Statistic "any new key released".
* ``shift`` — ``l0`` keys far above stage 1's threshold (always selected, so K is the same on both sides) and
  ``high`` units each; D' adds a unit holding all of them: stage 2's noise part. Statistic: the likelihood-ratio
  projection ``⟨v, y⟩`` of the embedding, as for the public-key targets (:func:`.scenarios.public_scenarios`),
  with the stage-2 calibration at ``d = l0``.

Conformance: the variance of that projection over releases of D against stage 2's calibrated variance
(:class:`.runner.VarianceCheck`). Mutants: ``sigma_scale`` multiplies the noise of both stages (stage 2 through
:class:`.mutants.ScaledCount`), ``margin_shift`` moves stage 1's margin.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import numpy as np

from ..mechanisms.public_keys import PublicKeys
from ..mechanisms.two_stage import TwoStage, TwoStageHistogram
from .histograms import arrow_engine, local_histogram, released_rows, size_estimate
from .mutants import ScaledCount, scaled_calibration, shifted_calibration
from .scenarios import Scenario, high_count

if TYPE_CHECKING:  # pragma: no cover
    from .targets import Target

__all__ = ["TWO_STAGE", "two_stage_calibration", "stage_two", "two_stage_scenarios", "release_two_stage"]

TWO_STAGE = TwoStage.name


def two_stage_calibration(reference, factor: float, shift: int):
    """The calibration a broken two-stage release runs with: both stages' noise times ``factor``, stage 1's margin
    moved by ``shift``."""
    if factor == 1.0 and shift == 0:
        return reference
    sel = shifted_calibration(scaled_calibration(reference.select_cal, factor), shift)
    count = reference.count if factor == 1.0 else ScaledCount(reference.count, factor)
    return dataclasses.replace(reference, select_cal=sel, count=count)


def stage_two(calibration, d: int):
    """Stage 2's calibration at ``d`` selected keys (what ``TwoStage.run`` computes once stage 1 has selected)."""
    request = dataclasses.replace(calibration.count_request, keys=PublicKeys(table=None, d=int(d), columns=()))
    return calibration.count.resolve(request)[1]


def two_stage_scenarios(target: "Target") -> list[Scenario]:
    """The two-stage pairs of the module docstring for ``target`` (``l0 = target.bound``)."""
    b = int(target.bound)
    high = high_count(target.calibration.select_cal, target.pre)
    cal2 = stage_two(target.calibration, b)
    c0 = np.full(b, high, np.int64)
    x = np.ones(b, np.int64)
    units0 = b * high
    p, q, c = (getattr(cal2, f, None) for f in ("p", "q", "c"))
    if p is not None and q is not None and c is not None:
        embed = (int(p), int(q), int(c))
        direction = np.append(q * x - p, c).astype(np.float64)
    else:
        embed, direction = None, x.astype(np.float64)
    return [
        Scenario("new", np.zeros(b, np.int64), np.ones(b, np.int64), "any",
                 f"{b} new keys at count 1 in D' only (stage 1's threshold part)", units0=0, units1=1),
        Scenario("shift", c0, c0 + x, "projection",
                 f"{b} keys at {high} (always selected), {units0} units; D' adds a unit holding all {b} (stage 2's "
                 f"noise part, {cal2.analysis})", units0=units0, units1=units0 + 1, direction=direction,
                 embed=embed),
    ]


def release_two_stage(target: "Target", counts, units: int, runs: int, rng) -> np.ndarray:
    """``(runs, n + 1)`` values of ``runs`` two-stage releases of the histogram ``counts`` with ``units`` units
    (NaN: not released); the last column is stage 2's size estimate ñ (NaN when nothing was selected)."""
    c = np.asarray(counts, np.int64)
    n = c.size
    out = np.full((runs, n + 1), np.nan)
    live = np.flatnonzero(c > 0)
    if live.size == 0 or runs == 0:
        return out  # no key: stage 1 selects nothing, nothing is drawn
    t = target
    engine = arrow_engine()
    h = local_histogram(c[live], live.astype(np.int64), units=units)
    hist = t.mechanism.prepare(engine, TwoStageHistogram(select=h, count=h, by=("key",), stats=h.stats), t.request)
    disclosure = t.mechanism.disclosure(t.request, t.calibration, "count")
    for i in range(runs):
        rel = t.mechanism.run(engine, hist, t.calibration, disclosure, rng, t.request)
        keys, vals = released_rows(rel)
        out[i, keys] = vals
        if keys.size:
            out[i, n] = size_estimate(rel)
    return out
