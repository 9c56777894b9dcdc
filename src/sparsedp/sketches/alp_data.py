"""The data side of an ALP built from a table (Lebeda thesis Ch. 2, after Lebeda (2023)): the private §2.10
estimate of the sparsity k, the value model, the signed reduction and the structure's size check.

:func:`sparsedp.alp` (:mod:`sparsedp.alp_release`, a query kind of the one pipeline) reads the table, charges the
ledger and calls these; nothing here reads data, opens an engine or touches a ledger.

**Vector.** Counts: ``x_key`` = number of distinct units with the key (non-negative integers). Sums
(``value=sd.Sum(column, lower, upper)``): ``x_key`` = Σ over the key's units of the unit's rows' values clipped
to [lower, upper] on the public grid (:mod:`sparsedp.aggregates`, ``recentre=False``), divided by ``D`` = the
grid sensitivity, so each unit moves each of its keys by at most 1. Signed when ``lower < 0``: the spec §2.2
reduction (thesis L471–473) releases one ALP over the keys ``(key, "+")`` and ``(key, "−")`` holding
``max(x, 0)`` and ``max(−x, 0)`` (the ℓ1 distance is preserved; error at most doubled); a query reads the
difference (:func:`entry_vector`).

**k** sizes the embedding (s = ⌈k/collision⌉ rows; thesis §2.10 "k is used to size the embedding"): either a
public ``k=``, or the private over-estimate of §2.10, ``k̃ = k + Z + t`` with ``Z`` discrete Laplace(Δ/ε_k) and
``t`` the smallest integer with ``P[Z ≤ −t] = q^t/(1+q) ≤ k_failure`` (so k̃ < k with probability ≤
``k_failure``; the thesis's ``ln(d/2)/ε`` is the continuous version with failure 1/d), where Δ is the support's
sensitivity (:func:`estimate_k`). k is never checked against the data (a data-dependent refusal would leak,
Lebeda & Retschmeier (2024) §1.5): a too-small k only costs accuracy (more collisions), never privacy.

**Memory**: the structure holds s·m/8 bytes (s = ⌈k̃/collision⌉ rows, m = ⌈u·ε'/α⌉ columns, 2m for the signed
embedding); :func:`check_size` refuses a larger one before anything is charged.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from .. import _validate as v
from ..aggregates import Sum
from ..errors import InvalidParameterError, InvalidTypeError
from ._noise import discrete_laplace
from .alp import check_memory

__all__ = ["estimate_k", "alp_value", "check_size", "entry_vector", "key_list"]


def estimate_k(k: int, *, epsilon: float, sensitivity: int, failure: float, rng: Any) -> tuple[int, int]:
    """``(k̃, t)``: the §2.10 private over-estimate ``k + Z + t`` (module docstring), discrete Laplace noise."""
    q = math.exp(-epsilon / sensitivity)
    t = max(1, math.ceil(math.log(1.0 / (failure * (1.0 + q))) / (epsilon / sensitivity)))
    while q ** t / (1.0 + q) > failure:
        t += 1
    while t > 1 and q ** (t - 1) / (1.0 + q) <= failure:
        t -= 1
    z = int(discrete_laplace(Fraction(sensitivity) / Fraction(epsilon), 1, rng)[0])
    return max(1, k + z + t), t


def alp_value(value: Any, unit: str, cols: list[str]) -> Sum | None:
    """``value=`` checked: a ``sd.Sum`` on a column that is neither the unit nor a key (not recentred)."""
    if value is None:
        return None
    if not isinstance(value, Sum) or type(value).__name__ != "Sum":
        raise InvalidTypeError(f"value must be sd.Sum(column, lower, upper), got {value!r}")
    if value.column == unit or value.column in cols:
        raise InvalidParameterError("the value column must not be the privacy unit or a key column")
    return Sum(value.column, value.lower, value.upper, value.granularity, recentre=False)


def check_size(value: Sum | None, u: float, eps_e: float, alpha: float, collision: float, k: int | None,
               max_memory: float, signed_columns: bool) -> None:
    """The projection structure's size before anything is charged (s at least its k̃ = 1 value): refused above
    ``max_memory`` naming the size and the fix (:func:`sparsedp.sketches.alp.check_memory`)."""
    coll = v.real("collision", collision, lo=0.0, hi=0.5, lo_open=True, hi_open=True)
    scale_u = value.sensitivity * value.granularity if value is not None else 1.0
    m = math.ceil(u / scale_u * eps_e / v.positive("alpha", alpha))
    check_memory(math.ceil((1 if k is None else k) / coll), 2 * m if signed_columns else m, max_memory,
                 "signed" if signed_columns else "projection")


def entry_vector(keys: list, counts: np.ndarray, grid_sums: np.ndarray | None, value: Sum | None,
                 signed: bool) -> tuple[list, np.ndarray, float]:
    """``(keys, x, value scale)``: the vector the ALP is built on (module docstring): the counts, or the grid sums
    over the grid sensitivity D (each unit moves each of its keys by ≤ 1; a query multiplies back by the value
    scale D·granularity); with ``signed``, the §2.2 reduction to the keys ``(key, "+")``, ``(key, "-")``."""
    if value is not None:
        assert grid_sums is not None
        vals = np.asarray(grid_sums, dtype=np.float64) / value.sensitivity
        value_scale = value.sensitivity * value.granularity
    else:
        vals = np.asarray(counts, dtype=np.int64)
        value_scale = 1.0
    if signed:
        pos, neg = np.maximum(vals, 0.0), np.maximum(-vals, 0.0)
        return [(x, "+") for x in keys] + [(x, "-") for x in keys], np.concatenate([pos, neg]), float(value_scale)
    return keys, vals, float(value_scale)


def key_list(keys: Any, cols: list[str]) -> list:
    """The keys of an Arrow table of key columns, as values (one column) or tuples."""
    columns = [keys.column(c).to_pylist() for c in cols]
    return columns[0] if len(cols) == 1 else [tuple(r) for r in zip(*columns)]
