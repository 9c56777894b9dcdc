"""sparsedp.sketches: streaming and compact structures (thesis Chapters 2–3).

* :class:`MisraGries` — the exact Algorithm-12 sketch (streaming, chunk-exact, mergeable, serialisable).
* :mod:`.private_mg` — its private releases: Algorithm 13 (PMG), the pure-DP variant (§3.6), merged
  sketches (§3.7) and CSH on the sketch; :func:`misra_gries_release` is the end-to-end entry point.
* :class:`ALP` — private sparse-vector representations with O(1/ε) per-entry error and O(log d) access.
"""

from .alp import ALP, MaxProjection, experiment_2_9
from .misra_gries import MisraGries
from .private_mg import (
    PrivateMisraGries, merged_private_misra_gries, misra_gries_release, private_misra_gries,
    pure_private_misra_gries)

__all__ = ["ALP", "MaxProjection", "MisraGries", "PrivateMisraGries", "experiment_2_9", "misra_gries_release",
           "private_misra_gries", "pure_private_misra_gries", "merged_private_misra_gries"]
