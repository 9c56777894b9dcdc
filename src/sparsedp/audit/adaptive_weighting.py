"""Audit targets of the adaptive-weighting set unions (``mad``, ``mad2r``;
:mod:`sparsedp.mechanisms.adaptive_weighting`, ``docs/proofs/mad.md``): rounds of the discrete Weighted Gaussian, a unit's later-round weights depending on the
keys earlier rounds released.

The neighbours differ by a **unit**, not by per-key weights, so a scenario's counts encode units: key ``i`` is held
by ``counts[i] // 2`` one-key units, and the added unit (D' only) holds every key with an odd count
(:func:`rounds_rows`). Each release runs the mechanism's own ``histogram`` and ``run`` on those rows (the real
secure path: Arrow engine, every round's ℓ0 choice, re-weighting and kernel), tiled: each release holds many
disjoint copies of the scenario (no key or unit shared), whose outputs are independent.

Scenarios (:func:`rounds_scenarios`, the terms of the composed profile): ``shared`` (``l0`` keys far above round
1's threshold, so released there; the added unit holds all of them: the Gaussian part), ``new`` (the added unit's
``l0`` new keys: every round's new-key term, each round re-weighting the unit's unreleased keys), ``mixed``.
Conformance: ``l0`` keys each held by ``c`` one-key units (no re-weighting: weight ``c·G`` in both rounds) are
released independently with probability ``1 − Π_r P[cG + Z_r < T_r]`` (binomial law). ``sigma_scale`` multiplies
every round's noise, ``margin_shift`` moves every round's threshold by ``margin_shift · W_l0``.
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING

import numpy as np
import polars as pl
from scipy import stats

from ..mechanisms.adaptive_weighting import MAD, MAD2R
from .histograms import arrow_engine
from .mutants import scaled_calibration
from .scenarios import Scenario
from .set_union import shifted_weighted

if TYPE_CHECKING:  # pragma: no cover
    from .targets import Target

__all__ = ["ROUNDS", "rounds_calibration", "rounds_scenarios", "rounds_rows", "release_rounds", "rounds_law"]

ROUNDS = (MAD.name, MAD2R.name)
#: rows per tiled release (each a real release of all its copies)
_ROWS = 1 << 16


def rounds_calibration(reference, factor: float, shift: int):
    """Every round's noise times ``factor`` and threshold moved by ``shift · W_l0`` (the broken releases)."""
    if factor == 1.0 and shift == 0:
        return reference
    return dataclasses.replace(reference, rounds=tuple(shifted_weighted(scaled_calibration(r, factor), shift)
                                                       for r in reference.rounds))


def _high(calibration) -> int:
    """One-key units a key needs to be released in round 1 with probability 1 − 1e-15 (and in round 2 if not)."""
    r1 = calibration.rounds[0]
    g = int(r1.grid)
    return math.ceil((int(r1.threshold_int) + 9 * float(r1.weight_noise_std) * g) / g) + 1


def rounds_scenarios(target: "Target") -> list[Scenario]:
    """The pairs of the module docstring (counts encode units: ``2·(one-key units) + (held by the added unit)``)."""
    b = int(target.bound)
    high = _high(target.calibration)
    out = [
        Scenario("shared", np.full(b, 2 * high, np.int64), np.full(b, 2 * high + 1, np.int64), "sum",
                 f"{b} keys each held by {high} one-key units (released in round 1); D' adds a unit holding all {b}"),
        Scenario("new", np.zeros(b, np.int64), np.ones(b, np.int64), "any",
                 f"D' adds a unit with {b} new keys (every round's new-key term)"),
    ]
    if b >= 2:
        j = (b + 1) // 2
        c0 = np.concatenate([np.full(j, 2 * high, np.int64), np.zeros(b - j, np.int64)])
        out.append(Scenario("mixed", c0, c0 + 1, "mixed", f"D' adds a unit holding {j} keys of {high} one-key units "
                                                          f"each and {b - j} new keys"))
    return out


def rounds_rows(counts: np.ndarray, copies: int) -> pl.DataFrame:
    """``copies`` disjoint copies of the encoded scenario as rows ``(unit, key)``: copy r's key i is
    ``r·n + i``, held by ``counts[i] // 2`` one-key units, and by the copy's added unit when ``counts[i]`` is odd."""
    c = np.asarray(counts, np.int64)
    n = c.size
    base = c // 2
    extra = np.flatnonzero(c % 2 == 1)
    per = int(base.sum())
    keys_one = np.repeat(np.arange(n, dtype=np.int64), base)
    r = np.arange(copies, dtype=np.int64)
    keys = (r[:, None] * n + keys_one[None, :]).ravel()
    units = np.arange(copies * per, dtype=np.int64)
    if extra.size:
        keys = np.concatenate([keys, (r[:, None] * n + extra[None, :]).ravel()])
        units = np.concatenate([units, np.repeat(copies * per + r, extra.size)])
    return pl.DataFrame({"unit": units, "key": keys})


def release_rounds(target: "Target", counts, runs: int, rng) -> np.ndarray:
    """``(runs, n)`` released weights (NaN: not released) of ``runs`` independent copies of the encoded scenario
    ``counts``, through the mechanism's ``histogram`` and ``run`` (tiled, :data:`_ROWS` rows a release)."""
    t = target
    c = np.asarray(counts, np.int64)
    n = c.size
    out = np.full((int(runs), n), np.nan)
    rows_each = max(1, int((c // 2).sum()) + int(np.count_nonzero(c % 2)))
    per = max(1, _ROWS // rows_each)
    engine = arrow_engine()
    disclosure = t.mechanism.disclosure(t.request, t.calibration, "weight")
    done = 0
    while done < runs:
        k = min(per, int(runs) - done)
        frame = rounds_rows(c, k)
        if frame.height:
            hist = t.mechanism.histogram(engine, frame.to_arrow(), "unit", ["key"], t.request, rng)
            rel = t.mechanism.run(engine, hist, t.calibration, disclosure, rng, t.request)
            key = np.asarray(rel.rows.column("key").to_numpy(), np.int64)
            val = np.asarray(rel.rows.column("weight").to_numpy(), np.float64)
            out[done:done + k].reshape(-1)[key] = val
        done += k
    return out


def rounds_law(target: "Target", calibration=None) -> tuple[int, int, np.ndarray]:
    """``(m, counts, P[N = n])``: ``m = bound`` keys, each held by ``c`` one-key units with ``c·G`` one noise std
    below the last round's threshold (reference); the binomial law of the number released under ``calibration``
    (default the reference). Returned count is encoded (``2c``)."""
    ref = target.reference
    cal = ref if calibration is None else calibration
    last = ref.rounds[-1]
    g = int(last.grid)
    c = max(1, round((int(last.threshold_int) - float(last.weight_noise_std) * g) / g))
    p = cal.release_probability(tuple(c * g for _ in cal.rounds))
    m = int(target.bound)
    return m, 2 * c, stats.binom.pmf(np.arange(m + 1), m, p)
