"""Mechanisms: each takes a SparseHistogram and a calibration and returns a Release."""

from .histogram import Release, SparseHistogram

__all__ = ["Release", "SparseHistogram"]
