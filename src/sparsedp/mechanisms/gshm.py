"""The Gaussian Sparse Histogram Mechanism (GSHM; Karrer, Kifer, Wilkins & Zhang, Algorithm 1) on an in-memory
histogram: a thin wrapper of the registered :class:`~sparsedp.mechanisms.thresholded.GSHM`, plus the float
aggregate columns of Algorithm 1 line 6 (research reproduction).

Source: Karrer et al. (2022) §1.3. For every key with a non-zero count ``c``::

    release (key, c + Z)   iff   c >= pre_threshold  and  c + Z >= pre_threshold + margin

with independent noise per key, plus (optionally) aggregate columns ``A + N(0, Σ)`` released with the key
(their privacy cost enters as ``mu_o2``, Eq. 5.1). The released value is the noisy count, which is at least
the absolute threshold. Contribution model: each privacy unit adds at most 1 to each of at most ``l0``
keys (the engine enforces it); add/remove-one-unit neighbours.

Noise (secure by default): ``Z ~ N_Z(0, sigma2)``, the discrete Gaussian with an exact rational scale,
calibrated by ``sparsedp.accounting.calibrate("gshm", l0=…)`` (discrete by default:
:func:`sparsedp.accounting.discrete_histograms.calibrate_gshm_discrete`, the exact δ of the noise actually
sampled — discrete analogue of Karrer et al. Thm 5.4, ``docs/proofs/discrete-histograms.md``).
``insecure_float=True`` with a ``discrete=False`` calibration uses float ``N(0, σ²)`` and the continuous
analysis; only that path supports aggregate columns (``mu_o2``), the discrete analysis covers counts only.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import noise
from ..accounting.calibration import Calibration
from ..errors import InputDataError, InvalidParameterError
from ._common import check_histogram, make_release
from ..core.histogram import Release, SparseHistogram
from .thresholded import GSHM

__all__ = ["gshm"]


def gshm(hist: SparseHistogram, calibration: Calibration, *, pre_threshold: int = 1, rng: Any = None,
         insecure_float: bool = False, aggregates: Any = None, aggregate_sigmas: Any = None,
         aggregate_sensitivities: Any = None) -> Release:
    """Release ``hist`` with GSHM (Karrer et al. (2022) Algorithm 1) under ``calibration`` (``sparsedp.accounting.calibrate("gshm", ...)``):
    the counts by :meth:`GSHM.release_counts <sparsedp.mechanisms.thresholded.GSHM.release_counts>`.

    ``aggregates``: optional float array of shape (len(hist), m−1), one row per key (e.g. SUM(likes)); each
    released key also gets ``aggregates[i] + N(0, diag(aggregate_sigmas²))``, drawn independently of the
    count noise and only for released keys (line 6 of Algorithm 1). ``aggregate_sensitivities`` (the most
    one unit can change each column) gives ``μ_o² = Σ (sens_j/σ_j)²`` (Eq. 5.1), which must not exceed the
    calibration's ``mu_o2``. The noisy aggregates are in ``Release.extra["aggregates"]``. (A release from data
    with SUM/MEAN columns uses the secure joint calibration instead: ``sd.release(..., aggregates=…)``.)
    """
    hist = check_histogram(hist)
    mech = GSHM(pre_threshold=pre_threshold)
    if aggregates is None:
        return mech.release_counts(hist, calibration, rng=rng, insecure_float=insecure_float)
    if calibration.mechanism != mech.name:
        raise InvalidParameterError(f"calibration is for {calibration.mechanism!r}, not {mech.name!r}")
    agg, sig = _aggregates(len(hist), calibration, aggregates, aggregate_sigmas, aggregate_sensitivities,
                           insecure_float)
    pos, noisy = mech.noise_counts(hist.counts, calibration, rng=rng, insecure_float=insecure_float)
    z = np.column_stack([noise.sample_gaussian(float(s), pos.size, rng=rng, insecure_float=True) for s in sig])
    extra = {**mech.release_facts(calibration), "aggregates": agg[pos] + z.reshape(pos.size, agg.shape[1])}
    return make_release(hist, pos, noisy, calibration, extra)


def _aggregates(n_keys: int, calibration: Calibration, aggregates: Any, aggregate_sigmas: Any,
                aggregate_sensitivities: Any, insecure_float: bool) -> tuple[np.ndarray, np.ndarray]:
    """The aggregate columns (one row per key) and their noise σ_j, checked against the calibration's μ_o²
    before any noise is drawn."""
    if not insecure_float or calibration.discrete:
        raise InvalidParameterError("aggregate columns need a continuous calibration and insecure_float=True")
    agg = np.asarray(aggregates, dtype=float)
    if agg.ndim == 1:
        agg = agg[:, None]
    if agg.shape[0] != n_keys or not np.all(np.isfinite(agg)):
        raise InputDataError(f"aggregates must be finite with one row per key, got shape {agg.shape}")
    sig = np.broadcast_to(np.asarray(aggregate_sigmas, dtype=float), (agg.shape[1],))
    sens = np.broadcast_to(np.asarray(aggregate_sensitivities, dtype=float), (agg.shape[1],))
    if np.any(~np.isfinite(sig)) or np.any(sig <= 0) or np.any(~np.isfinite(sens)) or np.any(sens < 0):
        raise InvalidParameterError("aggregate_sigmas must be > 0 and aggregate_sensitivities >= 0")
    mu_o2 = float(np.sum((sens / sig) ** 2))
    if mu_o2 > float(calibration.mu_o2) * (1 + 1e-12):
        raise InvalidParameterError(
            f"the aggregate columns have mu_o2={mu_o2:.6g} but the calibration allows "
            f"{calibration.mu_o2!r}; calibrate with mu_o2 >= {mu_o2:.6g}")
    return agg, sig
