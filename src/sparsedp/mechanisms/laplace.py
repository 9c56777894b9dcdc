"""The Laplace / geometric stability histogram on an in-memory histogram: a thin wrapper of the registered
:class:`~sparsedp.mechanisms.thresholded.Laplace` (Korolova et al. (WWW 2009); Wilson et al. (PoPETs 2020)).

For every key with count ``c``: release ``(key, c + Z)`` iff ``c >= pre_threshold`` and
``c + Z >= pre_threshold + margin``; secure default ``Z ~`` discrete Laplace with an integer margin, calibrated by
``sparsedp.accounting.calibrate("laplace", l0=…)`` (exact δ, ``docs/proofs/discrete-histograms.md`` §4);
``insecure_float=True``: float ``Lap(b)`` with a ``discrete=False`` calibration.
"""

from __future__ import annotations

from typing import Any

from ..accounting.calibration import Calibration
from ._common import check_histogram
from ..core.histogram import Release, SparseHistogram
from .thresholded import Laplace

__all__ = ["laplace_histogram"]


def laplace_histogram(hist: SparseHistogram, calibration: Calibration, *, pre_threshold: int = 1, rng: Any = None,
                      insecure_float: bool = False) -> Release:
    """Release ``hist`` with the Laplace stability histogram under ``calibration``
    (:meth:`Laplace.release_counts <sparsedp.mechanisms.thresholded.Laplace.release_counts>`)."""
    hist = check_histogram(hist)
    return Laplace(pre_threshold=pre_threshold).release_counts(hist, calibration, rng=rng,
                                                               insecure_float=insecure_float)
