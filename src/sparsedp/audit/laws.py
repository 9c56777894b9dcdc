"""Exact release laws of the calibrated mechanism, for the audit's conformance check.

A privacy audit (:mod:`.stats`) can only refute an (ε, δ) claim. A threshold error inside the slack of a loose
accountant is not a privacy violation at all: rounded top-k CSH at ε = 1, δ = 1e-3, k = 4 has, by the certified
profile of :mod:`sparsedp.accounting.csh_exact`, δ(1) = 1.0e-3 at its calibrated margin and still 1.0e-3 three
below it (the same-support Gaussian part binds; the new-key part moves from 8.9e-7 to 3.9e-5), so no sound
(ε, δ) audit can refute it. What can be refuted is that the code releases *the mechanism the accountant
analysed*. The conformance check does that: on a tiny histogram of ``m`` keys at one count ``c`` it compares the
law of N = the number of keys released in one release with its exact law under the reference calibration,
by Pearson's chi-square test (pooled cells, :func:`.stats.pooled_chisquare`). Chosen ``c`` one noise standard
deviation below the absolute threshold, N's law moves with the margin (each shift of 1 moves the per-key
probability by ~φ(1)/sd), with the noise scale (σ/2 doubles the z-score of the distance to the threshold: the
per-key probability drops from Φ̄(1) ≈ 0.16 to Φ̄(2) ≈ 0.02) and with the correlation (CSH's shared term makes N
over-dispersed; without it N is binomial).

Exact laws, release rule ``c + X >= T`` with ``T = ⌈pre + margin⌉`` (:mod:`sparsedp.mechanisms.kernel`):

* GSHM: ``X ~ N_Z(0, σ²)`` iid, N ~ Binomial(m, P[X >= T − c]) (:func:`~sparsedp.accounting.discrete.dgauss_sf`).
* Laplace: ``X`` discrete Laplace, the same with :func:`~sparsedp.accounting.discrete.dlaplace_sf`.
* Rounded CSH / top-k CSH (``X_i = round(G_i + A)``, docs/proofs/rounded-csh.md; top-k with at most k keys has
  cut-off 0): given the shared ``A ~ N(0, σ_c²)`` the keys are iid with ``s(A) = Φ̄((T − c − ½ − A)/σ)``, so
  ``P[N = n] = C(m, n) E_A[s(A)^n (1 − s(A))^{m−n}]``, integrated over A on a grid of 24 001 points of
  [−12 σ_c, 12 σ_c] (composite Simpson; error < 1e-12, far below the test's sampling error).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special, stats

from ..accounting import laws as L
from ..accounting.discrete import dgauss_sf, dlaplace_sf

__all__ = ["release_count_law", "law_count"]


def _threshold(cal, pre: int) -> int:
    return math.ceil(pre + float(cal.tau))


def release_count_law(target, m: int, c: int) -> np.ndarray:
    """``P[N = n]``, n = 0..m, for ``m`` keys at count ``c`` under ``target.reference`` (module docstring)."""
    cal = target.reference
    law = cal.noise
    j = _threshold(cal, target.pre) - int(c)
    n = np.arange(m + 1)
    if isinstance(law, L.DiscreteGaussian):
        return stats.binom.pmf(n, m, float(dgauss_sf(j, law.sigma2)))
    if isinstance(law, L.DiscreteLaplace):
        return stats.binom.pmf(n, m, float(dlaplace_sf(j, law.scale)))
    if isinstance(law, L.RoundedCorrelatedGaussian):
        z = np.linspace(-12.0, 12.0, 24_001)
        w = np.ones_like(z)
        w[1:-1:2], w[2:-1:2] = 4.0, 2.0
        w *= (z[1] - z[0]) / 3.0 * np.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)
        s = special.ndtr(-(j - 0.5 - law.shared_sigma * z) / law.sigma)
        comb = special.comb(m, n)
        pmf = np.array([comb[i] * np.sum(w * s ** i * (1.0 - s) ** (m - i)) for i in n])
        return pmf / pmf.sum()
    raise NotImplementedError(f"no exact release law for the noise law {type(law).__name__}")


def law_count(target) -> int:
    """The count ``c`` of the conformance histogram: one noise standard deviation below the absolute threshold
    (rounded), and at least 1."""
    cal = target.reference
    return max(1, _threshold(cal, target.pre) - max(1, round(float(cal.noise_std))))
