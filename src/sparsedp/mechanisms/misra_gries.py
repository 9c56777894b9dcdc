"""The private Misra–Gries sketch (Lebeda thesis Alg. 12–13, seed 004b) as a registered mechanism.

The thesis's neighbouring relation is add/remove one *stream element* (Def. 3.1). The engine first bounds every
unit to at most ``l0 = max_groups_per_unit`` (default 1) distinct keys; the stream is then the bounded histogram
written out in a fixed public order (keys sorted by their public 64-bit Misra–Gries code, each repeated ``count``
times) and sketched with ``k = sketch_size`` counters. Adding or removing one unit then inserts or deletes at most
``l0`` elements of that stream (each of its keys' runs grows or shrinks by one), i.e. a chain of at most ``l0``
element-neighbours. Algorithm 13 (PMG, discrete Laplace, Thm 3.1 with the §3.5.2 threshold) is run at
``(ε', δ')`` with ``ε' = ε/l0`` and ``δ' = δ / Σ_{i<l0} e^{iε'}``: by group privacy (chaining the element-level
guarantee ``l0`` times) the release is (ε, δ)-DP for add/remove one unit; with ``l0 = 1`` this is exactly the
thesis's guarantee. Only real keys are released; the sketch itself (exact, non-private counters) never leaves
:meth:`MisraGries.run`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import _validate as v
from ..errors import InvalidParameterError
from .base import Disclosure, Mechanism, Released, ReleaseRequest
from .registry import register

__all__ = ["MisraGries", "group_privacy_parameters"]


def group_privacy_parameters(epsilon: float, delta: float, group: int) -> tuple[float, float]:
    """Element-level ``(ε', δ')`` whose ``group``-fold chain gives ``(ε, δ)``: ``ε' = ε/g``,
    ``δ' = δ / Σ_{i=0}^{g-1} e^{iε'}`` (group privacy: chaining g neighbours, ``δ_g = δ' Σ_i e^{iε'}``).
    δ' is rounded down (conservative)."""
    g = v.integer("group", group, lo=1)
    eps_e = epsilon / g
    total = math.fsum(math.exp(i * eps_e) for i in range(g))
    return eps_e, math.nextafter(delta / total, 0.0) if g > 1 else delta


def sorted_stream(keys: list, counts: np.ndarray):
    """Codes in the public order and the matching counts (see the module docstring)."""
    from ..sketches.misra_gries import key_code

    codes = np.fromiter((key_code(k) for k in keys), dtype=np.int64, count=len(keys))
    order = np.argsort(codes, kind="stable")
    return codes[order], np.asarray(counts, dtype=np.int64)[order], order


def stream_chunks(codes: np.ndarray, counts: np.ndarray, target: int = 1 << 20):
    """``np.repeat(codes, counts)`` in chunks of about ``target`` elements (memory O(target + k))."""
    i, n = 0, codes.size
    cum = np.cumsum(counts)
    while i < n:
        base = cum[i - 1] if i else 0
        j = int(np.searchsorted(cum, base + target, side="right"))
        j = max(j, i + 1)
        yield np.repeat(codes[i:j], counts[i:j])
        i = j


@register
@dataclass(frozen=True)
class MisraGries(Mechanism):
    """Private Misra–Gries (PMG, thesis Alg. 13) on the sketch of the bounded histogram's stream.

    Option: ``sketch_size`` — the number of counters k. ``max_groups_per_unit`` (default 1) bounds each unit's
    keys; the guarantee is for add/remove one privacy unit by group privacy over its stream elements."""

    sketch_size: int
    name = "misra-gries"

    def __post_init__(self) -> None:
        object.__setattr__(self, "sketch_size", v.integer("sketch_size", self.sketch_size, lo=1))

    def check(self, request: ReleaseRequest) -> None:
        v.delta(request.delta)
        if request.insecure_float:
            raise InvalidParameterError("mechanism='misra-gries' uses exact integer noise only; insecure_float is "
                                        "not supported")

    def engine_bound(self, request: ReleaseRequest) -> int | None:
        return request.max_groups_per_unit or 1

    def calibrate(self, request: ReleaseRequest) -> Any:
        return group_privacy_parameters(request.epsilon, request.delta, self.engine_bound(request))

    def disclosure(self, request: ReleaseRequest, calibration: Any, value_column: str) -> Disclosure:
        l0 = self.engine_bound(request)
        eps_e, dlt_e = calibration
        element = (f"({eps_e:.6g}, {dlt_e:.3g})-DP per stream element, group privacy over {l0} elements" if l0 > 1
                   else "add/remove one stream element")
        return Disclosure(
            mechanism=self.name, analysis="pmg", epsilon=request.epsilon, delta=request.delta,
            delta_achieved=float("nan"), neighbours=self.neighbours,
            contribution=f"at most {l0} key(s) per unit", value_column=value_column,
            notes=(f"Misra-Gries sketch, k = {self.sketch_size} counters, Algorithm 13 with discrete Laplace "
                   f"noise ({element}); each count underestimates the bounded count by at most n/(k+1) before "
                   f"noise",))

    def run(self, engine, hist, calibration, disclosure, rng, request) -> Released:
        import dataclasses

        import pyarrow as pa

        from ..sketches import MisraGries as Sketch
        from ..sketches import private_misra_gries
        from .pure.registered import joined_keys, key_mode

        h = engine.collect(hist)
        cols = h.keys.column_names
        keys = joined_keys(h.keys, cols, key_mode(h.keys, cols, False))
        eps_e, dlt_e = calibration
        l0 = self.engine_bound(request)
        codes, cnts, order = sorted_stream(keys, h.counts)
        sketch = Sketch(self.sketch_size, keys="int")
        sketch.update_chunks(stream_chunks(codes, cnts))
        rel = private_misra_gries(sketch, epsilon=eps_e, delta=dlt_e, rng=rng)
        del sketch
        first: dict[int, int] = {}  # code -> first row in the public order (a collision maps to the first key)
        for pos, c in enumerate(codes.tolist()):
            first.setdefault(c, pos)
        rows = np.asarray([int(order[first[int(c)]]) for c in rel.keys], dtype=np.int64)
        table = h.keys.take(pa.array(rows)).append_column(disclosure.value_column,
                                                         pa.array(np.asarray(rel.counts, dtype=np.int64)))
        cal = rel.calibration
        delta_unit = min(1.0, cal.delta_achieved * math.fsum(math.exp(i * eps_e) for i in range(l0)))
        disclosure = dataclasses.replace(disclosure, analysis=cal.analysis, delta_achieved=delta_unit,
                                         delta_parts={"threshold": delta_unit}, sigma=float(cal.sigma),
                                         noise_std=float(cal.noise_std), threshold=float(rel.extra["threshold"]),
                                         margin=float(cal.tau), pre_threshold=1)
        return Released(rows=table, disclosure=disclosure, in_process=True)
