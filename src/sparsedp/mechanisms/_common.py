"""Shared plumbing of the sparse-histogram mechanisms: input checks and building the Release."""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from .. import _validate as v
from ..core.histogram import Release, SparseHistogram, check_distinct_keys, take_keys
from ..errors import InputDataError, InvalidTypeError


def check_histogram(hist: Any) -> SparseHistogram:
    """Validate a histogram completely before any noise is drawn (types, counts, distinct keys)."""
    if not isinstance(hist, SparseHistogram):
        raise InvalidTypeError(f"hist must be a SparseHistogram, got {type(hist).__name__}; build one with "
                               "SparseHistogram(keys, counts) or SparseHistogram.from_mapping({...})")
    c = hist.counts
    if not isinstance(c, np.ndarray) or c.dtype != np.int64 or c.ndim != 1:
        raise InputDataError("counts must be a one-dimensional int64 array")
    if c.size and int(c.min()) < 0:
        raise InputDataError("counts must be non-negative")
    if len(hist.keys) != c.size:
        raise InputDataError(f"{len(hist.keys)} keys but {c.size} counts")
    if not hist.distinct:
        check_distinct_keys(hist.keys)
    return hist


def check_pre_threshold(pre_threshold: Any) -> int:
    """The pre-threshold: an integer >= 1 (keys with smaller counts are never released)."""
    return v.integer("pre_threshold", pre_threshold, lo=1)


def make_release(hist: SparseHistogram, positions: np.ndarray, noisy: np.ndarray, calibration: Any,
                 extra: Mapping[str, Any] | None = None) -> Release:
    """Assemble the Release from the kernel's positions (keys are selected, never copied otherwise)."""
    return Release(keys=take_keys(hist.keys, positions), counts=noisy, calibration=calibration,
                   n_keys_in=len(hist), n_keys_out=int(positions.size), extra=dict(extra or {}))
