"""Dense and "keep the n+1 heaviest" histograms of Balcer & Vadhan (2019) (Balcer & Vadhan), §5 and §6.1–6.2.

Data model (paper §2): a dataset is ``n`` rows, each a label of the public finite domain
``X = {0, …, |X|−1}``; ``n`` is public and neighbours *replace* one row (bounded DP), so two bins change
by one and each counting query gets ``ε/2``. Functions here take the dataset as ``counts``, a mapping
``label -> count`` with positive counts summing to at most ``n = sampler.n`` (rows outside every bin are
allowed, as in the reference code). ``sampler`` is a counting-query sampler from
:mod:`sparsedp.noise.clamped_geometric` (``GeoSample`` or ``FastSample``), which is ``(ε/2, 0)``-DP for
counting queries.

Every released sparse histogram is a tuple of ``(label, count)`` pairs sorted by label with counts > 0
(spec P9: order must not reveal anything).

* :func:`basic_histogram` — Alg 3 / Thm 5.1, on a fixed, data-independent label set.
* :func:`keep_heavy` — Alg 4 / Thm 6.1, the reference semantics (time linear in |X|).
* :func:`kh_prime` — Alg 5 / Prop 6.2 with the **corrected** exact order-statistics sampler (E1).
* :func:`kh_double_prime` — Alg 7 / Thm 6.4, exact order statistics.
* :func:`sparse_histogram` — Thm 6.5: KH″ with approximate order statistics (TV ≤ δ), time polylog |X|.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Callable, Iterable, Mapping

from ...errors import InputDataError, InvalidParameterError
from ...noise.clamped_geometric import CountingSampler, unit_fraction
from ...noise.source import SecureRandom, default_source
from . import ordstats
from .labels import coupon_labels, distinct_labels

__all__ = [
    "basic_histogram",
    "keep_heavy",
    "release_heaviest",
    "kh_prime",
    "kh_double_prime",
    "sparse_histogram",
    "check_counts",
]

Histogram = tuple[tuple[int, int], ...]


def check_counts(counts: Mapping[int, int], n: int, domain_size: int) -> dict[int, int]:
    """Validate a dataset given as label counts: labels in ``[0, |X|)``, counts >= 0, total <= n."""
    out = {}
    total = 0
    for x, c in counts.items():
        x, c = int(x), int(c)
        if not 0 <= x < domain_size:
            raise InputDataError(f"label {x} is outside the domain [0, {domain_size})")
        if c < 0:
            raise InputDataError(f"count of label {x} is negative: {c}")
        if c:
            out[x] = c
            total += c
    if total > n:
        raise InputDataError(f"the counts sum to {total} > n={n} (n is the public number of rows)")
    return out


def _require_domain(domain_size: int, need: int, what: str) -> None:
    if domain_size < need:
        raise InvalidParameterError(f"{what} needs |X| >= {need}, got domain_size={domain_size}")


def basic_histogram(sampler: CountingSampler, counts: Mapping[int, int], labels: Iterable[int],
                    rng: SecureRandom | None = None) -> Histogram:
    """BasicHistogram_{M,A} (Balcer & Vadhan (2019), Alg 3, Thm 5.1): a noisy count for every label of ``labels``.

    ``labels`` (the set A) must not depend on the data: then the release is ``(2·ε_count, 0)``-DP, and
    each count is within the sampler's ``(a, β)`` accuracy. Zeros are included (a dense partial vector).
    """
    rng = default_source() if rng is None else rng
    return tuple((x, sampler.sample(counts.get(x, 0), rng)) for x in sorted(set(labels)))


def release_heaviest(noisy: Mapping[int, int], n: int) -> Histogram:
    """Release every bin whose value is strictly above the ``(n+1)``-th largest value (Alg 4 step 3)."""
    vals = sorted(noisy.values(), reverse=True)
    thr = vals[n]
    return tuple(sorted((x, c) for x, c in noisy.items() if c > thr))


def keep_heavy(sampler: CountingSampler, counts: Mapping[int, int], domain_size: int,
               rng: SecureRandom | None = None) -> Histogram:
    """KeepHeavy_M (Balcer & Vadhan (2019), Alg 4, Thm 6.1): BasicHistogram over all of X, keep bins above the
    ``(n+1)``-th largest noisy count. ``(ε, 0)``-DP. Time linear in ``|X|``: the reference semantics."""
    n = sampler.n
    _require_domain(domain_size, n + 1, "KeepHeavy")
    counts = check_counts(counts, n, domain_size)
    return release_heaviest(dict(basic_histogram(sampler, counts, range(domain_size), rng)), n)


def _assemble(sampler: CountingSampler, counts: dict[int, int], qs: list[int], vals: tuple[int, ...],
              rng: SecureRandom) -> Histogram:
    noisy = dict(basic_histogram(sampler, counts, counts.keys(), rng))
    for q, val in zip(qs, vals):
        noisy[q] = val
    return release_heaviest(noisy, sampler.n)


def _F0(sampler: CountingSampler) -> Callable[[int], int]:
    return lambda z: sampler.cdf(0, z)


def kh_prime(sampler: CountingSampler, counts: Mapping[int, int], domain_size: int,
             rng: SecureRandom | None = None) -> Histogram:
    """KH′_M (Balcer & Vadhan (2019), Alg 5, Prop 6.2), identically distributed to :func:`keep_heavy`.

    Occupied bins get ``M(c_x)``; ``n+1`` uniformly chosen distinct empty labels (P7) get the exact top
    ``n+1`` order statistics of the ``m = |X| − |A|`` empty-bin values, sampled level-wise with exact
    binomials (erratum E1: the paper's OrdSample is wrong). Exact binomials cost time polynomial in
    ``|X|`` — use :func:`sparse_histogram`/PureSparseHistogram for large domains. Needs ``|X| >= 2n+1``.
    """
    rng = default_source() if rng is None else rng
    n = sampler.n
    _require_domain(domain_size, 2 * n + 1, "KH'")
    counts = check_counts(counts, n, domain_size)
    qs = distinct_labels(domain_size, counts.keys(), n + 1, rng)
    binom = lambda M, pn, pd, T: ordstats.exact_trunc_binomial(M, pn, pd, T, rng)  # noqa: E731
    vals = ordstats.top_order_stats(_F0(sampler), n, domain_size - len(counts), binom)
    return _assemble(sampler, counts, qs, vals, rng)


def _kh2(sampler: CountingSampler, counts: Mapping[int, int], domain_size: int, g1: int | None,
         binom: ordstats.Binom, rng: SecureRandom) -> Histogram:
    n = sampler.n
    _require_domain(domain_size, 4 * n, "KH''/SparseHistogram")
    counts = check_counts(counts, n, domain_size)
    if g1 is None:  # exact distinct sampling (P7, footnote 4): no failure event, beta1 = 0
        qs = distinct_labels(domain_size, counts.keys(), n + 1, rng)
    else:
        drawn = coupon_labels(domain_size, set(counts), n, g1, rng)
        if drawn is None:
            return ()
        qs = drawn
    vals = ordstats.top_order_stats(_F0(sampler), n, domain_size - len(counts), binom)
    return _assemble(sampler, counts, qs, vals, rng)


def kh_double_prime(sampler: CountingSampler, counts: Mapping[int, int], domain_size: int, beta1: object | None,
                    rng: SecureRandom | None = None) -> Histogram:
    """KH″_{M,β₁} (Balcer & Vadhan (2019), Alg 7, Thm 6.4) with exact level-wise order statistics.

    Step 1 draws ``(4n+2)/β₁`` iid labels and releases the empty histogram if fewer than ``2n+1`` are
    distinct (probability ``<= β₁``, independent of the data). ``beta1=None`` samples the distinct labels
    exactly instead (spec P7; ``β₁ = 0``). ``(ε, 0)``-DP; needs ``|X| >= 4n``.
    """
    rng = default_source() if rng is None else rng
    g1 = None if beta1 is None else unit_fraction("beta1", beta1)
    binom = lambda M, pn, pd, T: ordstats.exact_trunc_binomial(M, pn, pd, T, rng)  # noqa: E731
    return _kh2(sampler, counts, domain_size, g1, binom, rng)


def sparse_histogram(sampler: CountingSampler, counts: Mapping[int, int], domain_size: int, beta1: object | None,
                     delta: Fraction | float | str, rng: SecureRandom | None = None) -> Histogram:
    """SparseHistogram_{M,β₁,δ} (Balcer & Vadhan (2019), Thm 6.5; construction spec §5.10).

    KH″ with the order statistics sampled by the dyadic round-down binomial walk at precision
    ``P = max(4, ⌈log₂((n+1)(16|X| + 9n + 9)/δ)⌉)`` (computed from ``|X|``, not the data-dependent ``m``),
    so the output is within statistical distance ``δ`` of KH″: ``(ε, (e^ε+1)δ)``-DP. Time polylog in |X|.
    """
    rng = default_source() if rng is None else rng
    g1 = None if beta1 is None else unit_fraction("beta1", beta1)
    d = Fraction(delta)
    if not 0 < d < 1:
        raise InvalidParameterError(f"delta must be in (0, 1), got {d}")
    P = ordstats.approx_precision(sampler.n, domain_size, d)
    binom = lambda M, pn, pd, T: ordstats.approx_trunc_binomial(M, pn, pd, T, P, rng)  # noqa: E731
    return _kh2(sampler, counts, domain_size, g1, binom, rng)
