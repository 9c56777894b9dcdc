"""Dense correlated Gaussian mechanisms for a known, public key domain (Lebeda, Lebeda (2024)).

Source: Lebeda (2024). Unlike the sparse histograms these release
*every* key of a public domain of size d (zeros included) and no threshold is needed. Each privacy unit
adds at most 1 to each key (any number of keys); add/remove neighbours; ``n_units`` counts every unit,
including units with no key in the domain.

* :func:`correlated_histogram` — Algorithm 1 in its embedding form (Lemma 3.3/3.4, S2.3, the form the
  paper recommends for production): ``g = (2f − n·1, C·n)``, add i.i.d. noise to the d+1 coordinates,
  release ``f̃ = y/2 + y_{d+1}/(2C)`` and the size estimate ``ñ = y_{d+1}/C``. Secure default: integer
  ``C`` (S4.4) and ``N_Z(0, s)`` noise calibrated by the exact discrete accountant
  :func:`sparsedp.accounting.discrete_histograms.calibrate_correlated_discrete`. ``insecure_float=True``:
  ``C = d^{1/4}`` and ``N(0, (d + C²)σ₁²)`` (Theorem 3.1).
* :func:`grouped_correlated_histogram` — Algorithm 2 (m disjoint rows of d queries, each unit in at most
  one row). Add/remove: Algorithm 1 independently per row with the row's unit count (Lemma 4.2), secure
  or float. Replacement: secure by default with integer C = ⌊√d⌋ and the exact discrete δ
  (:func:`sparsedp.accounting.public_keys.calibrate_grouped_replacement_discrete`, docs/proofs/public-keys.md
  §9); float: C = √d and ``N(0, 4dσ₁²)`` per embedded entry, i.e. the shared term has variance σ₁² — the
  spec's correction (S4.1 ERRATUM) of the printed 4σ₁².
* :func:`bounded_density_histogram` — §4.1 (S4.2), each unit has at most k non-zero entries. Secure by
  default: the centred integer embedding reaching the optimal ellipse (with ``n_units``) or the standard
  mechanism (without), exact discrete δ (docs/proofs/public-keys.md §8). Float: the best of the standard
  mechanism, Algorithm 1 and the optimal symmetric ellipse (independent variance α, shared (β − α)/d).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any, Sequence

import numpy as np
import numpy.typing as npt

from .. import _validate as v, noise
from ..accounting import calibrate
from ..accounting.calibration import Calibration, Comparison, Neighbours
from ..accounting.correlated import bounded_density_noise, grouped_correlated_gaussian_calibrate
from ..accounting.laws import CorrelatedGaussian, DenseCorrelatedGaussian, DiscreteDenseCorrelatedGaussian
from ..accounting.names import CORRELATED_GAUSSIAN
from ..accounting.public_keys import (calibrate_bounded_density, calibrate_grouped_replacement_discrete,
                                      calibrate_public_gaussian)
from ..core.histogram import Release, SparseHistogram
from ..errors import InputDataError, InvalidParameterError
from ..noise.source import SecureRandom
from ._common import check_histogram

__all__ = ["calibrate_correlated", "correlated_histogram", "grouped_correlated_histogram",
           "bounded_density_histogram", "domain_counts"]

#: a public key domain (its keys in release order)
Domain = Sequence[Any] | npt.NDArray[Any]


DenseLaw = DiscreteDenseCorrelatedGaussian | DenseCorrelatedGaussian


def domain_counts(hist: SparseHistogram, domain: Domain) -> np.ndarray:
    """Counts of ``hist`` laid out over the public ``domain`` (absent keys are 0; keys outside raise)."""
    dom = list(domain)
    index = {key: i for i, key in enumerate(dom)}
    if len(index) != len(dom):
        raise InputDataError("domain keys must be distinct")
    out = np.zeros(len(dom), dtype=np.int64)
    keys = hist.keys.tolist() if isinstance(hist.keys, np.ndarray) else list(hist.keys)
    for key, c in zip(keys, hist.counts.tolist()):
        i = index.get(key)
        if i is None:
            raise InputDataError(f"key {key!r} is not in the public domain; the dense mechanism releases a "
                                 "fixed domain only (drop or map unknown keys before releasing)")
        out[i] += c
    return out


def calibrate_correlated(epsilon: float, delta: float, d: int, *, insecure_float: bool = False) -> Calibration:
    """Calibrate Algorithm 1's embedding form for d queries (``accounting.calibrate("correlated-gaussian")``).

    Secure default: integer C and the exact discrete accountant; ``insecure_float``: C = d^{1/4}, σ₁.
    """
    return calibrate(CORRELATED_GAUSSIAN, epsilon=epsilon, delta=delta, d=d, discrete=not insecure_float)


def _embedded_noise(law: DenseLaw, size: int, rng: SecureRandom | None, insecure_float: bool) -> np.ndarray:
    if isinstance(law, DiscreteDenseCorrelatedGaussian):
        return noise.sample_discrete_gaussian(law.sigma2, size, rng=rng)
    if not insecure_float:
        raise InvalidParameterError("this calibration is for float noise; pass insecure_float=True")
    return noise.sample_gaussian(law.sigma, size, rng=rng, insecure_float=True)


def _embed_release(f: npt.NDArray[np.int64], n: int | npt.NDArray[np.int64], cal: Calibration,
                   rng: SecureRandom | None, insecure_float: bool) -> tuple[Any, Any]:
    """Lemma 3.3/3.4 for one row (f of shape (d,), n a scalar) or many independent rows (f (m, d), n (m,)):
    y = (2f − n, C n) + Z with i.i.d. Z per coordinate (the law ``cal.noise``); returns (f̃, ñ)."""
    law = cal.noise
    if not isinstance(law, (DiscreteDenseCorrelatedGaussian, DenseCorrelatedGaussian)):
        raise InvalidParameterError(f"calibration {cal.mechanism!r} does not describe a dense embedding "
                                    f"(noise law {type(law).__name__})")
    c = law.c
    f2 = np.atleast_2d(f)
    nn = np.atleast_1d(np.asarray(n, dtype=np.int64))
    m, d = f2.shape
    z = _embedded_noise(law, m * (d + 1), rng, insecure_float).reshape(m, d + 1)
    if isinstance(law, DiscreteDenseCorrelatedGaussian):
        y = np.empty((m, d + 1), dtype=np.int64)
        y[:, :-1] = 2 * f2 - nn[:, None]
        y[:, -1] = c * nn
        y += z
        y = y.astype(np.float64)
    else:
        y = np.column_stack([2.0 * f2 - nn[:, None], c * nn.astype(float)]) + z
    est = y[:, :-1] / 2.0 + y[:, -1:] / (2.0 * c)
    n_tilde = y[:, -1] / c
    if np.ndim(f) == 1:
        return est[0], float(n_tilde[0])
    return est, n_tilde


def _check_units(f: np.ndarray, n_units: int) -> int:
    n = v.integer("n_units", n_units, lo=0)
    if f.size and (int(f.min()) < 0 or int(f.max()) > n):
        raise InputDataError(f"each count must lie in [0, n_units={n}] (each unit adds at most 1 per key)")
    return n


def correlated_histogram(hist: SparseHistogram, domain: Domain, n_units: int, *, epsilon: float, delta: float,
                         rng: SecureRandom | None = None, insecure_float: bool = False) -> Release:
    """Release every key of the public ``domain`` with Algorithm 1 (embedding form) and the size estimate.

    Returns a Release whose keys are the whole domain (in order) and whose counts are the float estimates
    ``f̃``; ``extra['n_estimate']`` is ñ. Per-key error std ≈ σ₁(√d+1)/2 (vs σ₁√d for independent noise).
    """
    hist = check_histogram(hist)
    f = domain_counts(hist, domain)
    n = _check_units(f, n_units)
    cal = calibrate_correlated(epsilon, delta, f.size, insecure_float=insecure_float)
    est, n_tilde = _embed_release(f, n, cal, rng, insecure_float)
    dom = list(domain)
    keys = np.asarray(dom) if isinstance(domain, np.ndarray) else dom
    return Release(keys=keys, counts=est, calibration=cal, n_keys_in=len(hist), n_keys_out=len(dom),
                   extra={"mechanism": CORRELATED_GAUSSIAN, "n_estimate": n_tilde})


def grouped_correlated_histogram(counts: npt.ArrayLike, row_counts: npt.ArrayLike, *, epsilon: float, delta: float,
                                 neighbours: str = "add-remove", rng: SecureRandom | None = None,
                                 insecure_float: bool = False) -> dict[str, Any]:
    """Algorithm 2: ``counts`` is an (m, d) integer matrix, ``row_counts[j]`` the units in row j.

    Returns ``{"estimates": (m, d) floats, "row_estimates": (m,) floats, "calibration": Calibration}``.
    """
    f = np.asarray(counts)
    if f.ndim != 2 or f.dtype.kind not in "iu":
        raise InputDataError(f"counts must be an (m, d) integer matrix, got shape {f.shape} dtype {f.dtype}")
    nrow = np.asarray(row_counts)
    if nrow.shape != (f.shape[0],) or nrow.dtype.kind not in "iu":
        raise InputDataError("row_counts must be one integer per row")
    f = f.astype(np.int64)
    nrow = nrow.astype(np.int64)
    if f.size and (f.min() < 0 or np.any(f > nrow[:, None])):
        raise InputDataError("each count must lie in [0, row count]")
    nb = v.choice("neighbours", neighbours, ("add-remove", "replacement"))
    m, d = f.shape
    if nb == "add-remove":
        cal = calibrate_correlated(epsilon, delta, d, insecure_float=insecure_float)
    elif not insecure_float:  # secure: integer C = ⌊√d⌋, exact discrete δ (docs/proofs/public-keys.md §9)
        cal = calibrate_grouped_replacement_discrete(epsilon, delta, d)
    else:
        nz = grouped_correlated_gaussian_calibrate(epsilon, delta, d, neighbours="replacement")
        cal = Calibration(mechanism="correlated-gaussian-grouped", analysis="exact", epsilon=float(epsilon),
                          delta=float(delta), sigma=nz.sigma1, tau=0.0, noise_std=nz.per_query_std,
                          noise=DenseCorrelatedGaussian(nz.embedding_std, nz.embedding_c),
                          comparison=Comparison.NONE, neighbours=Neighbours.REPLACE_ONE, d=d)
    est, rows = _embed_release(f, nrow, cal, rng, insecure_float)  # rows are independent Algorithm-1 runs
    return {"estimates": est, "row_estimates": rows, "calibration": cal}


def bounded_density_histogram(hist: SparseHistogram, domain: Domain, k: int, *, epsilon: float, delta: float,
                              rng: SecureRandom | None = None, insecure_float: bool = False,
                              n_units: int | None = None) -> Release:
    """Release the public domain when each unit has at most ``k`` non-zero keys (Lebeda (2024) §4.1).

    Secure (default), exact integer noise: with ``n_units`` (every unit counted, as for
    :func:`correlated_histogram`) the centred embedding ``(q·x − p, c)`` that reaches the optimal ellipse
    OPT(d, k) (:func:`sparsedp.accounting.public_keys.calibrate_bounded_density`, ``docs/proofs/public-keys.md``
    §8; ``extra['n_estimate']`` is ñ); without ``n_units`` the standard mechanism (independent ``N_Z(0, s)``,
    :func:`~sparsedp.accounting.public_keys.calibrate_public_gaussian` at ℓ2 sensitivity √k). The choice is in
    ``extra['variant']``. ``insecure_float``: the smallest per-query error among the standard mechanism (std
    √k σ₁), Algorithm 1 and the optimal symmetric ellipse
    (:func:`sparsedp.accounting.correlated.bounded_density_noise`),
    float noise, no size estimate.
    """
    hist = check_histogram(hist)
    f = domain_counts(hist, domain)
    kk = v.integer("k", k, lo=1, hi=max(1, f.size))
    if not insecure_float:
        return _bounded_density_secure(hist, domain, f, kk, epsilon, delta, rng, n_units)
    opts = bounded_density_noise(epsilon, delta, f.size, kk)
    name = min(opts, key=lambda s: opts[s].per_query_std)
    nz = opts[name]
    z = noise.sample_gaussian(nz.independent_std, f.size, rng=rng, insecure_float=True)
    if nz.shared_std > 0:
        z = z + float(noise.sample_gaussian(nz.shared_std, 1, rng=rng, insecure_float=True)[0])
    cal = Calibration(mechanism="correlated-gaussian-bounded", analysis="exact", epsilon=float(epsilon),
                      delta=float(delta), sigma=nz.sigma1, tau=0.0, noise_std=nz.per_query_std,
                      noise=CorrelatedGaussian(nz.independent_std, nz.shared_std), comparison=Comparison.NONE,
                      d=f.size, k=kk)
    dom = list(domain)
    return Release(keys=np.asarray(dom) if isinstance(domain, np.ndarray) else dom, counts=f + z,
                   calibration=cal, n_keys_in=len(hist), n_keys_out=f.size,
                   extra={"mechanism": "correlated-gaussian-bounded", "variant": name})



def _bounded_density_secure(hist: SparseHistogram, domain: Domain, f: np.ndarray, k: int, epsilon: float,
                            delta: float, rng: SecureRandom | None, n_units: int | None) -> Release:
    """:func:`bounded_density_histogram` with exact integer noise (see there)."""
    d = f.size
    dom = list(domain)
    keys = np.asarray(dom) if isinstance(domain, np.ndarray) else dom
    if n_units is None:
        pk = calibrate_public_gaussian(epsilon, delta, d, k)
        counts = (f + noise.sample_discrete_gaussian(pk.scale, d, rng=rng)).astype(np.float64)
        extra: dict[str, Any] = {"mechanism": "correlated-gaussian-bounded", "variant": "standard"}
    else:
        n = _check_units(f, n_units)
        pk = calibrate_bounded_density(epsilon, delta, d, k)
        z = noise.sample_discrete_gaussian(pk.scale, d + 1, rng=rng)
        c = pk.c
        assert c is not None  # the centred embedding's weight (calibrate_bounded_density)
        y = pk.q * f - pk.p * n + z[:d]
        y_last = c * n + int(z[d])
        counts = (y + pk.p * (y_last / c)) / pk.q
        extra = {"mechanism": "correlated-gaussian-bounded", "variant": f"centred embedding p/q={pk.p}/{pk.q}, "
                 f"c={pk.c}", "n_estimate": y_last / c}
    cal = Calibration(mechanism="correlated-gaussian-bounded", analysis="discrete-exact", epsilon=pk.epsilon,
                      delta=pk.delta, sigma=pk.sigma, tau=0.0, noise_std=pk.noise_std,
                      delta_parts=dict(pk.delta_parts), delta_achieved=pk.delta_achieved,
                      noise=DiscreteDenseCorrelatedGaussian(Fraction(pk.scale), int(pk.c) if pk.c else 1),
                      comparison=Comparison.NONE,
                      d=d, k=k)
    return Release(keys=keys, counts=counts, calibration=cal, n_keys_in=len(hist), n_keys_out=d, extra=extra)
