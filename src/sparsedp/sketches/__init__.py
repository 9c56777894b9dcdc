"""sparsedp.sketches: streaming and compact structures (thesis Chapters 2–3).

* :class:`MisraGries` — the exact Algorithm-12 sketch (streaming, chunk-exact, mergeable, serialisable).
* :mod:`.private_mg` — its private releases: Algorithm 13 (PMG), the pure-DP variant (§3.6), merged
  sketches (§3.7); the end-to-end entry point with CSH on the sketch as well is
  :func:`sparsedp.mechanisms.mg_stream.misra_gries_release` (CSH is a mechanism, one layer up).
* :class:`ALP` — private sparse-vector representations with O(1/ε) per-entry error and O(log d) access.
"""

from .alp import ALP, MaxProjection, experiment_2_9
from .misra_gries import MisraGries
from .private_mg import merged_private_misra_gries, private_misra_gries, pure_private_misra_gries

__all__ = ["ALP", "MaxProjection", "MisraGries", "experiment_2_9", "private_misra_gries", "pure_private_misra_gries",
           "merged_private_misra_gries"]
