"""The Correlated Stability Histogram (CSH): Lebeda & Retschmeier, Algorithm 2 (rounded, or Algorithm 4).

Source: Lebeda & Retschmeier (2024) §3.2 (continuous) and §3.6 (discrete, Thm 7.7). One shared term
``Z_corr`` is drawn once per release and added to every noisy count, together with independent ``Z_i``::

    secure (rounded):  H̃_i = H_i + round(Z_i + Z_corr),  Z_i ~ N(0, σ²), Z_corr ~ N(0, σ²/√k)  (exact integers)
    Alg. 4:            Z_i ~ N_Z(0, 4σ²), Z_corr ~ N_Z(0, 4σ²/√k),  H̃_i = H_i + (Z_i + Z_corr)/2
    float  (Alg. 2):   Z_i ~ N(0, σ²),    Z_corr ~ N(0, σ²/√k),     H̃_i = H_i + Z_i + Z_corr

and a key is released iff ``H_i >= pre_threshold`` and ``H̃_i > pre_threshold + τ`` (strict, as in the
paper); the rounded default releases iff ``H̃_i >= pre_threshold + margin`` (integer margin), which is
Algorithm 2's rule at τ = margin − ½ followed by rounding: a post-processing, so Thms 3.3/3.5 hold as
stated (docs/proofs/rounded-csh.md; sampling: :mod:`sparsedp.noise.rounded`). The pre-threshold substitution is Lebeda & Retschmeier (2024) §3.4: after filtering, a key present in only one of two
neighbouring histograms has value exactly ``pre_threshold`` there (so it is released iff ``Z_i + Z_corr >
τ``, the event the δ_inf terms charge), keys present in both still differ by 0 or 1 in one direction, and
the filtered histogram stays k-sparse; the proofs of Thms 3.3/3.5/7.7 use nothing else. Per-key noise variance σ²(1 + 1/√k), pairwise
covariance σ²/√k (continuous; the discrete scales give the same up to the discrete Gaussian's variance
deficit). ``Z_corr`` and the set of suppressed keys are never released. Calibrate with
``sparsedp.accounting.calibrate("csh", k=…)`` (rounded default: Thm 3.5 at τ = margin − ½; Thm 7.7 with
``csh_noise="alg4"``; Thm 3.5/3.3 with ``discrete=False``).

**Structural requirement (read this).** CSH is private only for *k-sparse monotonic histograms*
(Def. 3.1): for every possible dataset the histogram has at most ``k`` non-zero counts, and between
add/remove neighbours every count moves by +1 or every count by −1 (at most 1 each). Merged Misra–Gries
sketches of size ``k`` and the top-k truncation of Algorithm 3 (:mod:`.topk`) satisfy it by construction.
This cannot be verified on the data without leaking: the check below (more than ``k`` non-zeros raises
before any noise is drawn) only catches a broken promise; it does not make an arbitrary histogram valid.
For a plain group-by histogram use GSHM with ``l0`` or top-k CSH.
"""

from __future__ import annotations

from typing import Any

from ..accounting.calibration import Calibration
from ..accounting.names import TOPK_CSH
from ..core.histogram import Release, SparseHistogram
from ..errors import InputDataError, InvalidParameterError
from ..noise.source import SecureRandom
from ._common import check_histogram, check_pre_threshold, make_release
from .kernel import draw_shared_noise, noise_and_filter

__all__ = ["csh", "check_k_sparse"]


def check_k_sparse(hist: SparseHistogram, k: int) -> int:
    """Raise (before any noise) if the histogram has more than ``k`` non-zero counts; return the count."""
    nnz = int((hist.counts > 0).sum())
    if nnz > k:
        raise InputDataError(
            f"the histogram has {nnz} non-zero counts but CSH was declared with k={k}: the k-sparse structural "
            "promise is broken (e.g. not a merged Misra–Gries sketch of size k). Use top-k CSH (mechanism="
            "'topk-csh') or GSHM with l0 for an arbitrary histogram")
    return nnz


def csh(hist: SparseHistogram, calibration: Calibration, *, pre_threshold: int = 1, rng: SecureRandom | None = None,
        insecure_float: bool = False, shared_noise: Any = None) -> Release:
    """Release a k-sparse monotonic histogram with CSH (Algorithm 2/4) under ``calibration``.

    The caller guarantees the structural requirement of the module docstring (``calibration.k``
    is the bound). ``shared_noise`` lets a distributed engine pass the one ``Z_corr`` drawn on the driver
    (:func:`sparsedp.mechanisms.kernel.draw_shared_noise`); by default it is drawn here, once.
    """
    hist = check_histogram(hist)
    pre = check_pre_threshold(pre_threshold)
    if calibration.mechanism not in ("csh", TOPK_CSH):
        raise InvalidParameterError(f"calibration is for {calibration.mechanism!r}, not 'csh'")
    if calibration.k is None:
        raise InvalidParameterError("a CSH calibration must carry k (the sparsity bound)")
    k = int(calibration.k)
    check_k_sparse(hist, k)
    if shared_noise is None:
        shared_noise = draw_shared_noise(calibration, rng, insecure_float=insecure_float)
    pos, noisy = noise_and_filter(hist.counts, calibration, pre, rng, shared_noise, insecure_float=insecure_float)
    return make_release(hist, pos, noisy, calibration,
                        {"mechanism": calibration.mechanism, "pre_threshold": pre,
                         "threshold": pre + calibration.tau, "k": k})
