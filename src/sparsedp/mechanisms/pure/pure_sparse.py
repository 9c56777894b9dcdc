"""PureSparseHistogram (Balcer & Vadhan (2019), Alg 8, Thm 6.6): pure ε-DP sparse histogram in time polylog |X|.

With probability ``1 − β₂`` run :func:`~.keep_heavy.sparse_histogram` at statistical distance
``δ = (ε/3)·β₂·(6|X|)^{−n}`` (exponent **n**: erratum E4), otherwise release a histogram from the
uniform-ish component ``𝒟`` (:func:`uniform_sparse_histogram`). Lemma 3.1 turns the ``δ``-close
approximation of the ``(ε, 0)``-DP KH″ back into ``(ε, 0)``-DP because ``𝒟`` gives every histogram of
``H_{n,n}(X)`` probability at least ``n!/((n+1)|X|)^n >= (6|X|)^{−n}`` — it must have **full support**
(erratum E8: the reference code's version always returned the empty histogram).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Mapping

from ...errors import InvalidParameterError
from ...noise.clamped_geometric import CountingSampler, unit_fraction
from ...noise.source import SecureRandom, default_source
from .keep_heavy import Histogram, check_counts, sparse_histogram

__all__ = ["pure_sparse_histogram", "pure_sparse_delta", "uniform_sparse_histogram"]


def pure_sparse_delta(k: int, g2: int, domain_size: int, n: int) -> Fraction:
    """``δ = (ε/3)·β₂·(1/(6|X|))^n`` with ``ε = 1/k``, ``β₂ = 1/g₂`` (Alg 8 with erratum E4)."""
    return Fraction(1, 3 * k * g2 * (6 * domain_size) ** n)


def uniform_sparse_histogram(domain_size: int, n: int, rng: SecureRandom | None = None) -> Histogram:
    """The mixing component ``𝒟`` of Alg 8 step 2: draw ``n`` iid uniform labels, give each distinct one
    a uniform count in ``{0..n}``, keep the positive ones. Full support on ``H_{n,n}(X)``."""
    rng = default_source() if rng is None else rng
    labels = sorted({rng.randbelow(domain_size) for _ in range(n)})
    out = []
    for q in labels:
        c = rng.randbelow(n + 1)
        if c > 0:
            out.append((q, c))
    return tuple(out)


def pure_sparse_histogram(sampler: CountingSampler, counts: Mapping[int, int], domain_size: int, beta1: object | None,
                          beta2: object, rng: SecureRandom | None = None) -> Histogram:
    """PureSparseHistogram_{M,ε,β₁,β₂} (Balcer & Vadhan (2019), Alg 8, Thm 6.6).

    ``sampler`` must be ``(ε/2, 0)``-DP for counting queries with ``ε = 1/sampler.params.k``
    (``GeoSample``/``FastSample`` at that ε); the release is ``(ε, 0)``-DP. Needs ``|X| >= 4n``.
    ``beta1=None`` uses exact distinct-label sampling (β₁ = 0) instead of Alg 7's coupon draws.
    Accuracy (Thm 6.6): ``(a₁, β₁+2β₂+2β₃)``-per-query on counts > ``2a₂`` and ``(2a₂, β₁+2β₂+β₃)``-
    simultaneous, see :mod:`~sparsedp.mechanisms.pure.accuracy`.
    """
    rng = default_source() if rng is None else rng
    g2 = unit_fraction("beta2", beta2)
    n = sampler.n
    if domain_size < 4 * n:
        raise InvalidParameterError(f"PureSparseHistogram needs |X| >= 4n={4 * n}, got domain_size={domain_size}")
    counts = check_counts(counts, n, domain_size)  # validate before any randomness is drawn
    delta = pure_sparse_delta(sampler.params.k, g2, domain_size, n)
    if rng.randbelow(g2) != 0:  # probability 1 − β₂
        return sparse_histogram(sampler, counts, domain_size, beta1, delta, rng)
    return uniform_sparse_histogram(domain_size, n, rng)
