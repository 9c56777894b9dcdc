"""Test-only helpers for tests/pure (imported by path-unique name)."""

from __future__ import annotations

from fractions import Fraction


class FixedRandom:
    """A fake source returning preset values (for exhaustive-randomness checks)."""

    def __init__(self, values):
        self.values = list(values)

    def randbelow(self, n):
        x = self.values.pop(0)
        assert 0 <= x < n
        return x

    def getrandbits(self, k):
        x = self.values.pop(0)
        assert 0 <= x < (1 << k)
        return x


class CountingRandom:
    """Wraps a source and counts calls."""

    def __init__(self, inner):
        self.inner, self.calls = inner, 0

    def randbelow(self, n):
        self.calls += 1
        return self.inner.randbelow(n)

    def getrandbits(self, k):
        self.calls += 1
        return self.inner.getrandbits(k)


def counting_max_ratio(sampler) -> Fraction:
    """max over neighbouring counts c, c±1 and outputs z of p_c(z)/p_{c'}(z)."""
    pm = [sampler.pmf(c) for c in range(sampler.n + 1)]
    best = Fraction(0)
    for c in range(sampler.n + 1):
        for c2 in (c - 1, c + 1):
            if 0 <= c2 <= sampler.n:
                for p, q in zip(pm[c], pm[c2]):
                    assert q > 0
                    best = max(best, p / q)
    return best
