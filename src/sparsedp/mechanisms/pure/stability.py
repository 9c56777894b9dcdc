"""Stability-based histogram (Balcer & Vadhan (2019), Thm 1.3; algorithm spec §5.13): ``(ε, δ)``-DP, time independent
of |X|.

Noise only the occupied bins with the exact counting sampler and release those above the integer
threshold ``τ`` = least ``b ∈ [0, n]`` with ``P(M(1, U) > b) <= δ/2`` (a bin present in one neighbour
and absent from the other has count 1 there). The released bins are sorted by label. Replacement
neighbours: at most two bins change, each by one. A bin present in only one neighbour (count 1) is
released there with probability ``<= δ/2`` and never in the other; every other changed bin costs the
sampler's ``ε/2``. Hence ``(ε, δ/2)``-DP with ``ε = 2·sampler.epsilon_count`` (``ε̃`` for GeoSample), for
any sampler that is ``(ε/2, 0)``-DP for counting queries (spec §5.13; checked exactly by T31: the
hockey-stick divergence at ``e^{ε̃}`` is ``<= δ/2``).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Mapping

from ...errors import InvalidParameterError
from ...noise.clamped_geometric import CountingSampler
from ...noise.source import SecureRandom, default_source
from .keep_heavy import Histogram, basic_histogram, check_counts

__all__ = ["stability_threshold", "stability_histogram"]


def stability_threshold(sampler: CountingSampler, delta: Fraction | float | str) -> int:
    """``τ`` = least ``b ∈ [0, n]`` with ``cdf(1, b) >= d·(1 − δ/2)``, exactly. ``τ = n`` means nothing
    can ever be released (δ too small for this n and ε)."""
    d = Fraction(delta)
    if not 0 < d < 1:
        raise InvalidParameterError(f"delta must be in (0, 1), got {d}")
    target = sampler.d * (1 - d / 2)
    for b in range(sampler.n + 1):
        if sampler.cdf(1, b) >= target:
            return b
    return sampler.n  # pragma: no cover - cdf(1, n) = d


def stability_histogram(sampler: CountingSampler, counts: Mapping[int, int], domain_size: int,
                        delta: Fraction | float | str, rng: SecureRandom | None = None) -> Histogram:
    """Release ``{(x, M(c_x)) : c_x > 0, M(c_x) > τ}`` sorted by label; ``(ε, δ)``-DP (spec §5.13)."""
    rng = default_source() if rng is None else rng
    tau = stability_threshold(sampler, delta)
    counts = check_counts(counts, sampler.n, domain_size)
    return tuple((x, c) for x, c in basic_histogram(sampler, counts, counts.keys(), rng) if c > tau)
