"""The pure blanket histogram (docs/proofs/pure-blanket.md): exact enumeration of its privacy on tiny domains,
its sampler against the exact law, the identities of Theorem 1, and its agreement with the full-domain
geometric mechanism (and its comparison with PureSparse).

The exact law is computed by brute force over the algorithm's own random choices (the noise of each support key,
the blanket size as the sampler draws it — a truncated-Poisson proposal thinned by Π(d − k − i)/d —, every
blanket subset and every blanket value), with the laws the samplers use (:class:`TwoSidedGeometricLaw`,
:class:`GeometricLaw`); values at or above ``vmax`` are lumped into ``vmax`` (a post-processing, so the ε bound
must hold for the lumped law too, and the lumped law is a complete distribution).
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from fractions import Fraction as F

import numpy as np
import pytest
from scipy import stats

from sparsedp.accounting.blanket import BlanketParams, blanket_accuracy, calibrate_blanket
from sparsedp.mechanisms.pure import exact as ex
from sparsedp.mechanisms.pure.blanket import blanket_histogram
from sparsedp.noise.rational_geometric import GeometricLaw, blanket_size, subset_outside, truncated_poisson
from sparsedp.noise.source import InsecureSeededRandom


def size_law(p: BlanketParams, free: int, cap: int, theta_scale: F = F(1)) -> list[F]:
    """The blanket size law as :func:`blanket_size` draws it: proposal (1 − λ)λ^m accepted w.p. 1/m! (m <= cap),
    then thinned w.p. Π_{i<m}(free − i)/d; normalised over the accepted draws. ``theta_scale`` (mutants only)
    multiplies λ."""
    lam, d = p.lam * theta_scale, p.domain_size
    w = []
    for m in range(cap + 1):
        thin = F(math.prod(max(free - i, 0) for i in range(m)), d ** m)
        w.append((1 - lam) * lam ** m / math.factorial(m) * thin)
    total = sum(w)
    return [x / total for x in w]


def exact_law(counts: dict[int, int], p: BlanketParams, vmax: int, theta_scale: F = F(1)) -> dict:
    """Law of the output set (values >= vmax lumped into vmax) by enumerating the algorithm's random choices."""
    law, geo = p.law, GeometricLaw(p.alpha)
    S = sorted(counts)
    free_keys = [x for x in range(p.domain_size) if x not in counts]

    def key_outcomes(c):
        out = [(None, 1 - law.survival(p.tau - c))]
        out += [(v, law.pmf(v - c)) for v in range(p.tau, vmax)]
        return out + [(vmax, law.survival(vmax - c))]

    blanket_values = [(v, geo.pmf(v - p.tau)) for v in range(p.tau, vmax)] + [(vmax, geo.survival(vmax - p.tau))]
    dist: dict = {}
    for combo in itertools.product(*(key_outcomes(counts[x]) for x in S)):
        pr_real = math.prod((pr for _, pr in combo), start=F(1))
        real = [(x, v) for x, (v, _) in zip(S, combo) if v is not None]
        cap = p.target - len(real)
        sizes = size_law(p, len(free_keys), cap, theta_scale)
        for m, pm in enumerate(sizes):
            if pm == 0:
                continue
            subsets = list(itertools.combinations(free_keys, m))
            for sub in subsets:
                for vals in itertools.product(blanket_values, repeat=m):
                    pr = pr_real * pm / len(subsets) * math.prod((q for _, q in vals), start=F(1))
                    o = frozenset(real + [(x, v) for x, (v, _) in zip(sub, vals)])
                    dist[o] = dist.get(o, 0) + pr
    return dist


def full_domain_law(counts: dict[int, int], p: BlanketParams, vmax: int) -> dict:
    """The geometric mechanism on all d keys, release iff noisy count >= τ (each key independently)."""
    law = p.law
    outcomes = []
    for x in range(p.domain_size):
        c = counts.get(x, 0)
        o = [(None, 1 - law.survival(p.tau - c))] + [(v, law.pmf(v - c)) for v in range(p.tau, vmax)]
        outcomes.append(o + [(vmax, law.survival(vmax - c))])
    dist: dict = {}
    for combo in itertools.product(*outcomes):
        o = frozenset((x, v) for x, (v, _) in enumerate(combo) if v is not None)
        dist[o] = dist.get(o, 0) + math.prod((pr for _, pr in combo), start=F(1))
    return dist


TINY = [  # (alpha, tau, d, n, s): λ = d q/(1 − q) < 1 in each
    (F(1, 2), 3, 5, 3, 0),
    (F(1, 2), 3, 4, 2, 1),
    (F(2, 3), 5, 4, 2, 0),
    (F(3, 5), 4, 5, 2, 2),
]


@pytest.mark.parametrize("alpha,tau,d,n,s", TINY)
def test_exact_law_is_a_distribution_and_matches_theorem1_identity(alpha, tau, d, n, s):
    """P_D(O) = P^full_D(O) / P[Binomial(d − k, q) <= T − r] for every output (the identity behind Theorem 1)."""
    p = BlanketParams(alpha=alpha, tau=tau, target=n + s, n=n, domain_size=d)
    vmax = tau + 2
    q = p.q_tau
    for D in ex.datasets(d, n)[:6]:
        counts = ex.as_counts(D)
        law = exact_law(counts, p, vmax)
        assert sum(law.values()) == 1
        full = full_domain_law(counts, p, vmax)
        k = len(counts)
        for o, pr in law.items():
            r = sum(1 for x, _ in o if x in counts)
            B = sum(math.comb(d - k, i) * q ** i * (1 - q) ** (d - k - i)
                    for i in range(0, min(p.target - r, d - k) + 1))
            assert pr == full[o] / B


@pytest.mark.parametrize("alpha,tau,d,n,s", TINY)
def test_exact_enumeration_epsilon_bound(alpha, tau, d, n, s):
    """max over replace-one neighbours and outputs of P_D(O)/P_D'(O) <= ρ = α^{-2}/(1 − t), and >= 1/α (the single
    changed key's ratio is attained: the bound is not vacuous)."""
    p = BlanketParams(alpha=alpha, tau=tau, target=n + s, n=n, domain_size=d)
    best, witness = ex.max_ratio(lambda c: exact_law(c, p, tau + 2), d, n)
    assert best != float("inf"), witness
    assert best <= p.ratio_bound, (float(best), float(p.ratio_bound), witness)
    assert best >= 1 / alpha


def test_exact_enumeration_detects_a_wrong_blanket_rate():
    """The enumeration has power: with too small a blanket rate (a mutant of step 2: a third of λ, or none at all,
    which is the stability histogram) the ratio of some output exceeds ρ (infinite without a blanket)."""
    p = BlanketParams(alpha=F(1, 2), tau=3, target=3, n=2, domain_size=4)
    best, _ = ex.max_ratio(lambda c: exact_law(c, p, 5, theta_scale=F(1, 3)), 4, 2)
    assert best > p.ratio_bound
    best, _ = ex.max_ratio(lambda c: exact_law(c, p, 5, theta_scale=F(0)), 4, 2)
    assert best == float("inf")


def test_agrees_in_law_with_the_full_domain_mechanism_when_padding_never_binds():
    """With T >= d the truncation never binds: the blanket histogram *is* the geometric mechanism on all d keys
    (release iff count + Z >= τ), exactly. PureSparse (Balcer–Vadhan) is a different mechanism (top-n of clamped
    GeoSample noise), so the claim tested against it is the one made: both are ε-DP (its enumeration is in
    test_pure_enumeration.py) and the blanket histogram's release bound is lower."""
    p = BlanketParams(alpha=F(1, 2), tau=3, target=5, n=2, domain_size=4)
    for D in ex.datasets(4, 2):
        counts = ex.as_counts(D)
        assert exact_law(counts, p, 5) == full_domain_law(counts, p, 5)


@pytest.mark.parametrize("n,eps", [(1000, 1), (3000, F(1, 2))])
def test_release_bound_below_pure_sparse(n, eps):
    from sparsedp.mechanisms.pure.release import StringCodec, _configure
    from sparsedp.noise.clamped_geometric import unit_fraction

    d = StringCodec(16).domain_size
    ps = _configure("pure-sparse", n, d, unit_fraction("epsilon", eps), F(1, 20), None).accuracy.threshold
    bl = blanket_accuracy(calibrate_blanket(eps, n, d, F(1, 2)), F(1, 20)).release_count
    assert bl < ps / 2


def test_sampler_matches_exact_law():
    """The real code path (blanket_histogram with its samplers) against the exact law: chi-square at a fixed seed."""
    p = BlanketParams(alpha=F(1, 2), tau=3, target=3, n=3, domain_size=5)
    counts = {0: 2, 1: 1}
    vmax = 5
    law = exact_law(counts, p, vmax)
    rng = InsecureSeededRandom(20261127)
    N = 6000
    seen: Counter = Counter()
    for _ in range(N):
        rel = blanket_histogram(counts, p, rng)
        assert list(rel.labels) == sorted(rel.labels) and all(v >= p.tau for v in rel.values)
        seen[frozenset((x, min(v, vmax)) for x, v in zip(rel.labels, rel.values))] += 1
    assert set(seen) <= set(law)
    outs = sorted(law, key=lambda o: -law[o])
    exp = np.array([float(law[o]) * N for o in outs])
    obs = np.array([seen[o] for o in outs], dtype=float)
    big = exp >= 5
    e2 = np.append(exp[big], exp[~big].sum())
    o2 = np.append(obs[big], obs[~big].sum())
    assert stats.chisquare(o2, e2).pvalue > 1e-4


def test_blanket_size_and_truncated_poisson_laws():
    rng = InsecureSeededRandom(7)
    lam = F(3, 5)
    draws = Counter(truncated_poisson(lam, 2, rng) for _ in range(4000))
    w = [lam ** m / math.factorial(m) for m in range(3)]
    exp = [float(x / sum(w)) * 4000 for x in w]
    assert set(draws) <= {0, 1, 2}
    assert stats.chisquare([draws[m] for m in range(3)], exp).pvalue > 1e-4
    draws = Counter(blanket_size(lam, 2, 3, 5, rng) for _ in range(4000))  # free = 2 < cap: m <= 2 always
    w = [math.comb(2, m) * (lam / 3) ** m for m in range(3)]
    exp = [float(x / sum(w)) * 4000 for x in w]
    assert set(draws) <= {0, 1, 2}
    assert stats.chisquare([draws[m] for m in range(3)], exp).pvalue > 1e-4


class _Scripted:
    """A source whose ``randbelow`` returns given outcomes in turn (each must lie in the asked range): drives the
    real sampler through every sequence of its draws, each of probability Π 1/range."""

    def __init__(self, outcomes):
        self.outcomes, self.ranges = list(outcomes), []

    def randbelow(self, n):
        self.ranges.append(n)
        t = self.outcomes[len(self.ranges) - 1]
        assert 0 <= t < n
        return t


@pytest.mark.parametrize("d,support,m", [(7, (1, 4), 2), (7, (0, 5, 6), 3), (6, (2,), 5), (8, (0, 1, 2, 3), 1),
                                         (5, (), 2), (6, (3, 4), 4)])
def test_subset_outside_is_uniform_by_exact_enumeration(d, support, m):
    """Step 3 of the mechanism, the real code path: every sequence of its m draws (Floyd's algorithm, ranges
    N − m + 1 … N with N = d − |S|), weighted by its exact probability, gives each m-subset of [0, d) \\ S probability
    exactly 1/C(N, m) and nothing else; and it makes exactly m draws (no rejection at the subset level)."""
    free = [x for x in range(d) if x not in support]
    N = len(free)
    law: Counter = Counter()
    for seq in itertools.product(*(range(j + 1) for j in range(N - m, N))):
        src = _Scripted(seq)
        out = subset_outside(m, d, set(support), src)
        assert src.ranges == [j + 1 for j in range(N - m, N)]  # exactly m draws, their ranges fixed in advance
        assert len(out) == m == len(set(out))
        law[frozenset(out)] += F(1, math.prod(range(N - m + 1, N + 1)))
    subsets = [frozenset(c) for c in itertools.combinations(free, m)]
    assert set(law) == set(subsets)
    assert all(law[c] == F(1, math.comb(N, m)) for c in subsets)


def test_subset_outside_on_a_seeded_source_and_large_labels():
    """Chi-square at a fixed seed: the 56 3-subsets of an 8-element complement are equally likely. With labels of
    the 16-byte key domain (d ≈ 2^136) the rank/shift map sends the first and last complement indices to the first
    and last labels outside the support (Python integers, no overflow)."""
    rng = InsecureSeededRandom(20261127)
    d, support = 12, {1, 2, 5, 11}
    free = [x for x in range(d) if x not in support]
    N = 14000
    seen = Counter(frozenset(subset_outside(3, d, support, rng)) for _ in range(N))
    cells = [frozenset(c) for c in itertools.combinations(free, 3)]
    assert set(seen) <= set(cells)
    assert stats.chisquare([seen[c] for c in cells], [N / len(cells)] * len(cells)).pvalue > 1e-4
    with pytest.raises(Exception, match="exceeds"):
        subset_outside(9, d, support, rng)
    big = (256 ** 17 - 1) // 255
    support = {0, 1, 2, 4, big - 1, big - 3}
    nfree = big - len(support)
    assert subset_outside(1, big, support, _Scripted([0])) == [3]
    assert subset_outside(1, big, support, _Scripted([nfree - 1])) == [big - 2]
    assert subset_outside(1, big, support, _Scripted([nfree - 2])) == [big - 4]


def test_calibration_meets_epsilon_and_blanket_rate():
    from sparsedp.mechanisms.pure.release import StringCodec

    for eps, L, lam in [(1.0, 16, F(1, 2)), (0.1, 8, F(1, 100)), (3.0, 2, F(1, 3))]:
        d = StringCodec(L).domain_size
        p = calibrate_blanket(eps, 500, d, lam)
        assert p.epsilon_bound <= eps
        assert p.lam <= lam
        q = p.law.survival(p.tau - 1)  # τ is the least threshold with the rate
        assert p.tau == 1 or d * q / (1 - q) > lam
        assert math.isclose(p.epsilon_bound, eps, rel_tol=1e-6)  # no ε left on the table


def test_accuracy_bounds_are_exact_tail_quantiles():
    p = calibrate_blanket(1.0, 100, 10 ** 12, F(1, 2))
    a = blanket_accuracy(p, F(1, 20))
    law = p.law
    assert 2 * law.survival(a.per_query + 1) <= F(1, 20) < 2 * law.survival(a.per_query)
    assert law.survival(a.release_count - p.tau + 1) <= F(1, 20) < law.survival(a.release_count - p.tau)
