"""The Laplace / geometric stability histogram: the peers' default thresholded histogram.

Korolova et al. (WWW 2009); Wilson et al. (PoPETs 2020); Google ``LaplacePartitionSelection``; OpenDP
``make_laplace_threshold``. For every key with count ``c``::

    release (key, c + Z)   iff   c >= pre_threshold  and  c + Z >= pre_threshold + margin

Secure default: ``Z ~`` discrete Laplace (two-sided geometric) with scale ``t >= l0/ε`` and an integer
margin, calibrated by ``sparsedp.accounting.calibrate("laplace", l0=…)``, i.e.
:func:`sparsedp.accounting.discrete_histograms.calibrate_laplace_discrete` (exact δ,
Karrer's decomposition with the binomial privacy loss of the discrete Laplace; see
``docs/proofs/discrete-histograms.md`` §4). ``insecure_float=True``: float ``Lap(b)``, release ``> pre +
τ``, with a ``discrete=False`` calibration (:func:`sparsedp.accounting.laplace.laplace_calibrate`).
"""

from __future__ import annotations

from ..accounting.calibration import Calibration
from ..core.histogram import Release, SparseHistogram
from ..errors import InvalidParameterError
from ..noise.source import SecureRandom
from ._common import check_histogram, check_pre_threshold, make_release
from .kernel import noise_and_filter

__all__ = ["laplace_histogram"]


def laplace_histogram(hist: SparseHistogram, calibration: Calibration, *, pre_threshold: int = 1,
                      rng: SecureRandom | None = None, insecure_float: bool = False) -> Release:
    """Release ``hist`` with the Laplace / geometric stability histogram under ``calibration``."""
    hist = check_histogram(hist)
    pre = check_pre_threshold(pre_threshold)
    if calibration.mechanism != "laplace":
        raise InvalidParameterError(f"calibration is for {calibration.mechanism!r}, not 'laplace'")
    pos, noisy = noise_and_filter(hist.counts, calibration, pre, rng, insecure_float=insecure_float)
    return make_release(hist, pos, noisy, calibration,
                        {"mechanism": "laplace", "pre_threshold": pre, "threshold": pre + calibration.tau})
