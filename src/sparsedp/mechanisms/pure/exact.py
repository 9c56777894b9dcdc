"""Exact output distributions of the pure-DP histograms and an exact DP checker (after Balcer & Vadhan (2019) §8).

For tiny instances every mechanism's complete output law is computed with ``fractions.Fraction`` by
composing the exact laws of its parts (the counting sampler's pmf from its integer CDF, the level-wise
order statistics, the uniform distinct-label sequence, the coupon failure probability, …). The checker
enumerates all datasets (multisets of ``n`` labels), all replace-one neighbours and all outputs and
returns the maximum likelihood ratio, compared by the callers with *rational* bounds on ``e^ε``.

Used by the test-suite; cost is exponential in ``|X|`` and ``n`` by design.
"""

from __future__ import annotations

import itertools
from collections import Counter
from fractions import Fraction
from math import factorial
from typing import Any, Callable, Iterable, Mapping

from ...noise.clamped_geometric import CountingSampler
from . import ordstats
from .labels import coupon_failure_probability
from .ordstats import approx_precision
from .pure_sparse import pure_sparse_delta
from .stability import stability_threshold

#: an exact output law: output -> probability
Dist = dict[Any, Fraction]
#: a dataset: a sorted tuple of labels
Dataset = tuple[int, ...]

__all__ = [
    "exp_lower", "exp_upper", "datasets", "neighbours", "as_counts", "max_ratio", "hockey_stick", "tv_distance",
    "basic_dist", "keep_heavy_dist", "kh_prime_dist", "kh_double_prime_dist", "sparse_dist",
    "uniform_component_dist", "pure_sparse_dist", "stability_dist",
]


# ---------------------------------------------------------------------------------------------- bounds
def exp_lower(x: Fraction, terms: int = 40) -> Fraction:
    """``L_N(x) = Σ_{j<=N} x^j/j!`` <= ``e^x`` for ``x >= 0`` (spec §8)."""
    x = Fraction(x)
    s, t = Fraction(0), Fraction(1)
    for j in range(terms + 1):
        s += t
        t = t * x / (j + 1)
    return s


def exp_upper(x: Fraction, terms: int = 40) -> Fraction:
    """``L_N(x) + 3x^{N+1}/(N+1)!`` >= ``e^x`` for ``0 <= x <= 1``."""
    x = Fraction(x)
    return exp_lower(x, terms) + 3 * x ** (terms + 1) / factorial(terms + 1)


# ------------------------------------------------------------------------------------------ DP checker
def datasets(domain_size: int, n: int) -> list[Dataset]:
    """All datasets of ``n`` rows over ``X``, as sorted tuples (mechanisms see only the histogram)."""
    return list(itertools.combinations_with_replacement(range(domain_size), n))


def neighbours(D: Dataset, domain_size: int) -> set[Dataset]:
    """Datasets obtained by replacing one row of ``D``."""
    out: set[Dataset] = set()
    for i in range(len(D)):
        for x in range(domain_size):
            if x != D[i]:
                out.add(tuple(sorted(D[:i] + (x,) + D[i + 1:])))
    return out


def as_counts(D: tuple[int, ...]) -> dict[int, int]:
    return dict(Counter(D))


def max_ratio(dist_of: Callable[[dict[int, int]], Dist], domain_size: int,
              n: int) -> tuple[Fraction | float, tuple[Dataset, Dataset, Any] | None]:
    """``max_{D ~ D′, o} P[M(D)=o]/P[M(D′)=o]`` (``float('inf')`` if some output has zero probability
    under one neighbour only), with a witness ``(D, D′, o)``."""
    laws = {D: dist_of(as_counts(D)) for D in datasets(domain_size, n)}
    best: Fraction = Fraction(0)
    witness: tuple[Dataset, Dataset, Any] | None = None
    for D, PD in laws.items():
        for D2 in neighbours(D, domain_size):
            PD2 = laws[D2]
            for o, p in PD.items():
                if p == 0:
                    continue
                q = PD2.get(o, 0)
                if q == 0:
                    return float("inf"), (D, D2, o)
                if p / q > best:
                    best, witness = p / q, (D, D2, o)
    return best, witness


def hockey_stick(dist_of: Callable[[dict[int, int]], Dist], domain_size: int, n: int,
                 exp_eps: Fraction) -> Fraction:
    """``max_{D ~ D′} Σ_o max(0, P_D[o] − e^ε·P_{D′}[o])`` exactly, with ``e^ε`` given as a rational."""
    laws = {D: dist_of(as_counts(D)) for D in datasets(domain_size, n)}
    worst = Fraction(0)
    for D, PD in laws.items():
        for D2 in neighbours(D, domain_size):
            PD2 = laws[D2]
            s = sum((max(Fraction(0), p - exp_eps * PD2.get(o, 0)) for o, p in PD.items()), Fraction(0))
            worst = max(worst, s)
    return worst


def tv_distance(P: Mapping[Any, Fraction], Q: Mapping[Any, Fraction]) -> Fraction:
    keys = set(P) | set(Q)
    return sum((abs(P.get(k, Fraction(0)) - Q.get(k, Fraction(0))) for k in keys), Fraction(0)) / 2


def _mix(*parts: tuple[Fraction, Dist]) -> Dist:
    out: Dist = {}
    for w, law in parts:
        for o, p in law.items():
            out[o] = out.get(o, 0) + w * p
    return out


# ------------------------------------------------------------------------------------- mechanism laws
def basic_dist(sampler: CountingSampler, counts: Mapping[int, int], labels: Iterable[int]) -> Dist:
    """Law of BasicHistogram_{M,A}: product of the per-label pmfs (outputs as sorted tuples)."""
    labels = sorted(set(labels))
    pmfs = [sampler.pmf(counts.get(x, 0)) for x in labels]
    out: Dist = {}
    for vals in itertools.product(range(sampler.n + 1), repeat=len(labels)):
        p = Fraction(1)
        for pm, v in zip(pmfs, vals):
            p *= pm[v]
            if not p:
                break
        if p:
            out[tuple(zip(labels, vals))] = p
    return out


def _heaviest(noisy: Mapping[int, int], n: int) -> tuple[tuple[int, int], ...]:
    thr = sorted(noisy.values(), reverse=True)[n]
    return tuple(sorted((x, c) for x, c in noisy.items() if c > thr))


def keep_heavy_dist(sampler: CountingSampler, counts: Mapping[int, int], domain_size: int) -> Dist:
    """Law of KeepHeavy by enumerating all ``(n+1)^{|X|}`` noisy vectors."""
    out: Dist = {}
    for vec, p in basic_dist(sampler, counts, range(domain_size)).items():
        o = _heaviest(dict(vec), sampler.n)
        out[o] = out.get(o, 0) + p
    return out


def _kh_core_dist(sampler: CountingSampler, counts: Mapping[int, int], domain_size: int, order_dist: Dist) -> Dist:
    """KH′ structure: Basic over A, a uniform sequence of n+1 distinct labels of X \\ A carrying the
    order statistics ``order_dist`` (law of the tuple of values), keep the heaviest."""
    n = sampler.n
    A = sorted(x for x, c in counts.items() if c > 0)
    free = [x for x in range(domain_size) if x not in set(A)]
    seqs = list(itertools.permutations(free, n + 1))
    w_seq = Fraction(1, len(seqs))
    out: Dist = {}
    for vec, p in basic_dist(sampler, counts, A).items():
        base = dict(vec)
        for vals, q in order_dist.items():
            for seq in seqs:
                noisy = dict(base)
                noisy.update(zip(seq, vals))
                o = _heaviest(noisy, n)
                out[o] = out.get(o, 0) + p * q * w_seq
    return out


def _F0(sampler: CountingSampler) -> Callable[[int], int]:
    return lambda z: sampler.cdf(0, z)


def exact_order_dist(sampler: CountingSampler, m: int) -> Dist:
    """Exact law of the top ``n+1`` of ``m`` iid ``M(0, U)`` (level-wise binomial recursion)."""
    return ordstats.top_order_stats_dist(_F0(sampler), sampler.n, m, ordstats.exact_trunc_binomial_dist)


def kh_prime_dist(sampler: CountingSampler, counts: Mapping[int, int], domain_size: int,
                  order_dist_of: Callable[[int], Dist] | None = None) -> Dist:
    """Law of KH′; ``order_dist_of(m)`` gives the order-statistics law (default: exact)."""
    counts = {x: c for x, c in counts.items() if c > 0}
    m = domain_size - len(counts)
    od = exact_order_dist(sampler, m) if order_dist_of is None else order_dist_of(m)
    return _kh_core_dist(sampler, counts, domain_size, od)


def kh_double_prime_dist(sampler: CountingSampler, counts: Mapping[int, int], domain_size: int, g1: int | None,
                         order_dist_of: Callable[[int], Dist] | None = None) -> Dist:
    """Law of KH″ = p_fail·δ_∅ + (1 − p_fail)·KH′ (spec T16); ``g1=None``: exact labels, p_fail = 0."""
    core = kh_prime_dist(sampler, counts, domain_size, order_dist_of)
    if g1 is None:
        return core
    pf = coupon_failure_probability(domain_size, sampler.n, g1)
    return _mix((pf, {(): Fraction(1)}), (1 - pf, core))


def sparse_dist(sampler: CountingSampler, counts: Mapping[int, int], domain_size: int, g1: int | None,
                delta: Fraction) -> Dist:
    """Law of SparseHistogram (KH″ with the approximate order statistics at the precision it uses)."""
    P = approx_precision(sampler.n, domain_size, delta)
    bd = lambda M, pn, pd, T: ordstats.approx_trunc_binomial_dist(M, pn, pd, T, P)  # noqa: E731
    return kh_double_prime_dist(sampler, counts, domain_size, g1,
                                lambda m: ordstats.top_order_stats_dist(_F0(sampler), sampler.n, m, bd))


def uniform_component_dist(domain_size: int, n: int) -> Dist:
    """Law of Alg 8's uniform component (n iid labels, uniform counts in [0, n], keep positives)."""
    out: Dist = {}
    w_labels = Fraction(1, domain_size ** n)
    for xs in itertools.product(range(domain_size), repeat=n):
        Q = sorted(set(xs))
        w_c = Fraction(1, (n + 1) ** len(Q))
        for cs in itertools.product(range(n + 1), repeat=len(Q)):
            o = tuple((q, c) for q, c in zip(Q, cs) if c > 0)
            out[o] = out.get(o, 0) + w_labels * w_c
    return out


def pure_sparse_dist(sampler: CountingSampler, counts: Mapping[int, int], domain_size: int, g1: int | None,
                     g2: int) -> Dist:
    """Law of PureSparseHistogram (Alg 8)."""
    delta = pure_sparse_delta(sampler.params.k, g2, domain_size, sampler.n)
    b2 = Fraction(1, g2)
    return _mix((1 - b2, sparse_dist(sampler, counts, domain_size, g1, delta)),
                (b2, uniform_component_dist(domain_size, sampler.n)))


def stability_dist(sampler: CountingSampler, counts: Mapping[int, int], delta: Fraction) -> Dist:
    """Law of the stability histogram (bins are independent: each is suppressed or released above τ)."""
    tau = stability_threshold(sampler, delta)
    A = [x for x in sorted(counts) if counts[x] > 0]
    per_bin = []
    for x in A:
        pm = sampler.pmf(counts[x])
        opts = [(None, sum(pm[: tau + 1], Fraction(0)))] + [(z, pm[z]) for z in range(tau + 1, sampler.n + 1)]
        per_bin.append([(z, p) for z, p in opts if p])
    out: Dist = {}
    for combo in itertools.product(*per_bin):
        p = Fraction(1)
        for _, q in combo:
            p *= q
        o = tuple((x, z) for x, (z, _) in zip(A, combo) if z is not None)
        out[o] = out.get(o, 0) + p
    return out
