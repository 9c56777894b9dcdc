"""Top-k CSH on an in-memory histogram: Lebeda & Retschmeier, Algorithm 3 (truncate at the (k+1)-th largest
count, then CSH), a thin wrapper of the registered :class:`~sparsedp.mechanisms.thresholded.TopKCSH`.

Source: Lebeda & Retschmeier (2024) §3.3. With ``t = H^{(k+1)}`` (the (k+1)-th largest count; 0 when
there are at most k non-zero counts) the truncated histogram ``H̃_i = max(0, H_i − t)`` has at most ``k``
non-zeros (only counts strictly above ``t`` survive, ties at ``t`` all drop) and, by Lemma 4.1, is a
k-sparse monotonic histogram for add/remove neighbours, whatever the data: so CSH applies (Cor. 4.2) and
**no per-unit l0 bound is needed**, only one contribution per key per unit (de-duplication).

The released values estimate ``H_i − t`` (biased down by t). The de-biasing variant also releases
``t̃ = t + noise`` (variance σ²/√k: ``N(0, σ²/√k)``; ``round(N(0, σ²/√k))``, sampled exactly, for the secure
rounded noise, which is ``round`` of the continuous t̃ since t is an integer; or ``Z_t/2`` with
``Z_t ~ N_Z(0, 4σ²/√k)`` for Algorithm 4) and adds it to every released value, a post-processing.
Rounded noise (the secure default) is accounted exactly as the continuous mechanism, Thm 3.5 / Thm 3.3
(de-biased: Thm 3.3 with ½√(k + 5√k)), since every output is a rounding of a continuous output
(docs/proofs/rounded-csh.md). Its privacy: Thm 3.3 with
``½√(k + 5√k)`` in place of ``½√(k + √k)`` (spec §3.3, continuous); for discrete noise the zCDP part of
Thm 7.7 gains ``2²/(2·4σ²/√k)`` (t moves by at most 1, i.e. 2 in the doubled units of Algorithm 4), so
``ρ = k/(2 s_ind) + 5/(2 s_corr) = (k + 5√k)/(8σ²)`` — zCDP composition over the same neighbouring pair.
"""

from __future__ import annotations

from typing import Any

from ..accounting.calibration import Calibration
from ._common import check_histogram
from ..core.histogram import Release, SparseHistogram
from .kernel import debias_noise, truncate_top_k
from .thresholded import TopKCSH

__all__ = ["truncate_top_k", "topk_csh", "debias_noise"]


def topk_csh(hist: SparseHistogram, calibration: Calibration, *, rng: Any = None, insecure_float: bool = False,
             shared_noise: Any = None, debias: bool | None = None) -> Release:
    """Release the top-k keys of ``hist`` with Algorithm 3 (truncation, then CSH) under ``calibration``: a thin
    wrapper of :meth:`TopKCSH.release_counts <sparsedp.mechanisms.thresholded.TopKCSH.release_counts>` for the
    top-k CSH the calibration was made for (:meth:`TopKCSH.of_calibration`).

    ``calibration``: from ``sparsedp.accounting.calibrate("topk-csh", top_k=…[, debias=True])`` (secure
    rounded noise by default) or :func:`sparsedp.accounting.discrete_histograms.calibrate_topk_debias_discrete`
    (Algorithm 4, de-biased); its ``k`` is the number of keys kept and its ``debias`` selects the de-biasing
    variant (``debias`` here must agree if given). Released values are ``H_i − t + noise``
    (``extra['bias']``) or, de-biased, ``H_i − t + noise + t̃`` with ``extra['t_tilde']`` the released estimate
    of t. The pre-threshold is 1 (Algorithm 3's data-dependent pre-threshold is ``1 + t``).
    """
    hist = check_histogram(hist)
    return TopKCSH.of_calibration(calibration, debias).release_counts(hist, calibration, rng=rng,
                                                                      insecure_float=insecure_float,
                                                                      shared_noise=shared_noise)
