"""Private releases of a Misra–Gries sketch of a stream, end to end: :func:`misra_gries_release` (sketch a stream or
take ready sketches, then release) and :class:`PrivateMisraGries` (a sketch with its release attached).

The variants ``"pmg"`` (Algorithm 13), ``"pure"`` (§3.6) and ``"merged-laplace"`` (§3.7) are the sketch releases
of :mod:`sparsedp.sketches.private_mg`; ``"csh"`` runs the CSH mechanism (Lebeda & Retschmeier (2024)) on the
sketch's positive counters (:func:`csh_misra_gries`). They live here, in the mechanism layer, because CSH is a
mechanism: the sketches package holds the data structures and their own releases only.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import _validate as v
from ..core.histogram import Release
from ..errors import InvalidParameterError
from ..sketches.misra_gries import MisraGries
from ..sketches.private_mg import merged_private_misra_gries, private_misra_gries, pure_private_misra_gries
from .release import release_histogram

__all__ = ["PrivateMisraGries", "csh_misra_gries", "misra_gries_release", "VARIANTS"]

VARIANTS = ("pmg", "pure", "merged-laplace", "csh")


def csh_misra_gries(sketch: MisraGries, *, epsilon: float, delta: float, rng: Any = None) -> Release:
    """CSH (Lebeda & Retschmeier (2024), Alg. 2 / its discrete variant) on the sketch's positive counters, sparsity bound k.

    Valid because the sketch is a k-sparse monotonic histogram (Lebeda & Retschmeier (2024) Def. 3.1): always ≤ k positive
    counters, and between neighbours all counters move by −1 or one by +1 (Lemma 3.1) — or, for merged
    sketches, all by +1 or all by −1 on ≤ k keys (Corollary 3.2). Calibration and noise are those of
    ``sparsedp.mechanisms.release_histogram(..., mechanism="csh")``.
    """
    eps, dl = v.epsilon(epsilon), v.delta(delta)
    hist = sketch.to_histogram()
    return release_histogram(hist, epsilon=eps, delta=dl, k=sketch.k, mechanism="csh", rng=rng)


class PrivateMisraGries:
    """A Misra–Gries sketch with its private release attached.

    >>> pmg = PrivateMisraGries(k=100, epsilon=1.0, delta=1e-6)   # doctest: +SKIP
    >>> pmg.update(stream).release()                               # doctest: +SKIP
    """

    def __init__(self, k: int, *, epsilon: float, delta: float | None = None, variant: str = "pmg",
                 keys: str | None = None) -> None:
        self.sketch = MisraGries(k, keys=keys)
        self.epsilon = v.epsilon(epsilon)
        self.variant = v.choice("variant", variant, VARIANTS)
        self.delta = None if delta is None else v.delta(delta)
        if variant != "pure" and self.delta is None:
            raise InvalidParameterError(f"variant={variant!r} needs delta (only variant='pure' has delta=0)")

    def update(self, items: Any) -> "PrivateMisraGries":
        self.sketch.update(items)
        return self

    def release(self, *, rng: Any = None, universe: Any = None) -> Release:
        return _dispatch(self.sketch, self.variant, self.epsilon, self.delta, rng, universe)


def _dispatch(sketch: MisraGries, variant: str, eps: float, dl: float | None, rng: Any, universe: Any) -> Release:
    if variant != "pure" and dl is None:
        raise InvalidParameterError(f"variant={variant!r} needs delta (only variant='pure' has delta=0)")
    if variant == "pmg":
        assert dl is not None
        return private_misra_gries(sketch, epsilon=eps, delta=dl, rng=rng)
    if variant == "pure":
        if universe is None:
            raise InvalidParameterError("variant='pure' needs universe= (an int d or a sequence of keys)")
        return pure_private_misra_gries(sketch, epsilon=eps, universe=universe, rng=rng)
    if variant == "merged-laplace":
        assert dl is not None
        return merged_private_misra_gries(sketch, epsilon=eps, delta=dl, rng=rng)
    assert dl is not None
    return csh_misra_gries(sketch, epsilon=eps, delta=dl, rng=rng)


def _is_chunk(x: Any) -> bool:
    return isinstance(x, (np.ndarray, list, tuple)) or type(x).__module__.startswith(("pyarrow", "polars", "pandas"))


def misra_gries_release(items_or_chunks: Any, *, sketch_size: int, epsilon: float, delta: float | None,
                        rng: Any = None, variant: str | None = None, universe: Any = None) -> Release:
    """Sketch a stream (or take ready sketches) and release it privately: the end-to-end entry point.

    ``items_or_chunks``: a flat collection or iterator of keys, an iterable of chunks (numpy / Arrow /
    Polars / pandas columns), one :class:`MisraGries` sketch, or a list of sketches (merged in the given
    order). ``variant``: ``"pmg"`` (default for a single stream), ``"pure"`` (needs ``universe``,
    delta ignored), ``"csh"`` (default for merged sketches), ``"merged-laplace"``.
    """
    k = v.integer("sketch_size", sketch_size)
    eps = v.epsilon(epsilon)
    if variant is not None:
        v.choice("variant", variant, VARIANTS)
    if isinstance(items_or_chunks, MisraGries):
        sketch = items_or_chunks
    elif isinstance(items_or_chunks, (list, tuple)) and items_or_chunks and \
            all(isinstance(s, MisraGries) for s in items_or_chunks):
        sketch = MisraGries.merge_all(items_or_chunks) if len(items_or_chunks) > 1 else items_or_chunks[0]
    else:
        sketch = MisraGries(k)
        if _is_chunk(items_or_chunks):
            sketch.update(items_or_chunks)
        else:
            it = iter(items_or_chunks)
            first = next(it, None)
            if first is not None:
                if _is_chunk(first):
                    sketch.update(first)
                    sketch.update_chunks(it)
                else:
                    sketch.update([first])
                    sketch.update(it)
    if sketch.k != k:
        raise InvalidParameterError(f"sketch_size={k} but the sketch has k={sketch.k}")
    if variant is None:
        variant = "csh" if sketch.merged else "pmg"
    dl = None if variant == "pure" else v.delta(delta)
    return _dispatch(sketch, variant, eps, dl, rng, universe)
