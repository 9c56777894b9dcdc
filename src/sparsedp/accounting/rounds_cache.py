"""The adaptive-weighting rounds' calibrations (:func:`~.adaptive_weighting.calibrate_rounds`, ``mad``/``mad2r``)
kept within the process and in the on-disk calibration cache (:mod:`.calibration_cache`; issue 33).

A rounds calibration is a pure function of ``(name, ε, δ, Δ0, shares, grid)`` — no data, no randomness — and costs
seconds to minutes (the composed profile of the rounds: about 11 s at Δ0 = 32, 107 s at 100 and 170 s at 256 on a
loaded core, ``docs/proofs/mad.md`` §8), so a later process reads it back instead of computing it again.

**The entry.** Stored under the calibration cache's exact key (:func:`~.calibration_cache.entry_key`: the
arguments, floats by their hex form and the shares as a list of them, the sparsedp version and a stamp of the
accountants' source files), with its checksum, written atomically (:func:`~.calibration_cache.store_body`), as
every cached calibration. It holds only what the search chose: each round's exact scale ``s_r`` (a Fraction) and
integer threshold ``T_r`` with its δ_r(ε), the Gaussian fraction ``a``, the new-key targets and the composed
δ(ε) of the rounds.

**Read back, re-checked.** An entry is used only if

1. its file holds exactly the key asked for and its checksum matches, and every field has its exact type;
2. each round rebuilt from its ``(s_r, T_r)`` by the exact accountant (:func:`~.adaptive_weighting.round_of`,
   the Weighted Gaussian's exact profile at ε: the cheap part of the calibration, one profile per round) gives
   bit for bit the δ_r(ε) stored;
3. the composed δ(ε) stored is at most δ and at least every round's δ_r(ε) (a composition is never below one of
   its parts: post-processing); one round (``shares=(1.0,)``) has nothing composed and its δ(ε) is the round's;
4. each round's new-key term at ``T_r`` (:func:`~.adaptive_weighting.new_key_term`) is at most its recorded
   target, the bound the calibration fixed ``T_r`` by (``docs/proofs/mad.md`` §3).

Anything else — a missing, garbled, truncated, foreign or stale file, a number changed — is ignored and the
calibration computed afresh (and the file rewritten). The composed δ(ε) itself (the costly part: minutes to
recompute) is the one number taken from the file as stored; like every cached number it is protected by the
exact key, which changes with the accountants' source, and the checksum. An entry is written only if reading
it back gives the calibration just computed to the last bit (``repr``).

In memory (a dict per process, :func:`clear_memory`); the disk directory and ``SPARSEDP_CACHE_DIR`` are the
calibration cache's (:func:`~.calibration_cache.cache_dir`).
"""

from __future__ import annotations

import dataclasses
from fractions import Fraction
from typing import Any

from .adaptive_weighting import RoundsCalibration, calibrate_rounds, new_key_term, round_of
from .calibration_cache import decode_value, encode_value, cached_value, entry_key

__all__ = ["cached_rounds", "clear_memory"]

_KIND = "adaptive-weighting-rounds"
_MEMORY: dict[str, RoundsCalibration] = {}
_FIELDS = ("name", "epsilon", "delta", "l0", "grid", "shares", "gauss_fraction", "delta_achieved",
           "new_key_targets", "rounds")


def clear_memory() -> None:
    """Forget the rounds calibrations kept in this process (the disk cache stays)."""
    _MEMORY.clear()


def _key(name: str, epsilon: float, delta: float, l0: int, shares: tuple[float, ...], grid: int) -> str | None:
    if not all(isinstance(f, float) for f in shares):
        return None
    return entry_key(_KIND, {"name": name, "epsilon": epsilon, "delta": delta, "l0": l0, "grid": grid,
                             "shares": ",".join(f.hex() for f in shares)})


def _encode(cal: RoundsCalibration, name: str) -> dict[str, Any]:
    enc = encode_value
    return {"name": name, "epsilon": enc(cal.epsilon), "delta": enc(cal.delta), "l0": enc(cal.l0),
            "grid": enc(cal.grid), "shares": [enc(f) for f in cal.shares],
            "gauss_fraction": enc(cal.gauss_fraction), "delta_achieved": enc(cal.delta_achieved),
            "new_key_targets": [enc(x) for x in cal.new_key_targets],
            "rounds": [[enc(r.grid_sigma2), enc(int(r.threshold_int)), enc(r.delta_achieved)] for r in cal.rounds]}


def _typed(x: Any, kind: type) -> Any:
    got = decode_value(x)
    if type(got) is not kind:
        raise ValueError("bad value")
    return got


def _decode(body: Any, name: str, epsilon: float, delta: float, l0: int, shares: tuple[float, ...],
            grid: int) -> RoundsCalibration:
    """The calibration ``body`` describes, rebuilt and re-checked (module docstring, items 1–4), for exactly this
    request; ``ValueError`` if anything does not hold."""
    if not isinstance(body, dict) or sorted(body) != sorted(_FIELDS) or body["name"] != name:
        raise ValueError("bad entry")
    eps, dlt = _typed(body["epsilon"], float), _typed(body["delta"], float)
    if (eps, dlt, _typed(body["l0"], int), _typed(body["grid"], int)) != (epsilon, delta, l0, grid):
        raise ValueError("another request")
    fs = tuple(_typed(f, float) for f in body["shares"])
    targets = tuple(_typed(x, float) for x in body["new_key_targets"])
    params = body["rounds"]
    if fs != tuple(shares) or not isinstance(params, list) or len(params) != len(fs) or len(targets) != len(fs):
        raise ValueError("bad rounds")
    rounds = []
    for p in params:
        if not isinstance(p, list) or len(p) != 3:
            raise ValueError("bad round")
        s, thr, d = _typed(p[0], Fraction), _typed(p[1], int), _typed(p[2], float)
        r = round_of(name, eps, s, thr, l0, grid)  # the exact accountant at the stored parameters
        if r.delta_achieved != d:
            raise ValueError("a round's δ(ε) is not the accountant's")
        rounds.append(r if len(fs) > 1 else dataclasses.replace(r, delta=dlt))
    achieved = _typed(body["delta_achieved"], float)
    a = _typed(body["gauss_fraction"], float)
    parts = [float(r.delta_achieved) for r in rounds]
    if not (0.0 < a <= 1.0 and max(parts) <= achieved <= dlt) or (len(fs) == 1 and achieved != parts[0]):
        raise ValueError("the composed δ(ε) does not bound its rounds or exceeds δ")
    if len(fs) > 1 and any(new_key_term(r.grid_sigma2, l0, grid, int(r.threshold_int)) > t
                           for r, t in zip(rounds, targets)):
        raise ValueError("a threshold below its new-key bound")
    return RoundsCalibration(mechanism=name, analysis="discrete-exact-rounds", epsilon=eps, delta=dlt,
                             rounds=tuple(rounds), shares=fs, gauss_fraction=a, delta_achieved=achieved, l0=l0,
                             grid=grid, new_key_targets=targets)


def cached_rounds(name: str, epsilon: float, delta: float, l0: int, shares: tuple[float, ...],
                  grid: int = 4096) -> RoundsCalibration:
    """:func:`~.adaptive_weighting.calibrate_rounds` ``(name, ε, δ, Δ0, shares, grid)``, from this process's
    memory, else from the disk cache when its entry passes every check (module docstring), else computed and
    stored (:func:`~.calibration_cache.cached_value`). Errors (infeasible or invalid requests) are raised as by
    ``calibrate_rounds`` and never cached."""
    return cached_value(_key(name, epsilon, delta, l0, shares, grid), _MEMORY,
                        lambda: calibrate_rounds(name, epsilon, delta, l0, shares, grid),
                        lambda cal: _encode(cal, name),
                        lambda body: _decode(body, name, epsilon, delta, l0, shares, grid))
