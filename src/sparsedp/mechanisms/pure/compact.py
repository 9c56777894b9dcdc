"""CompactHistogram (Balcer & Vadhan (2019), §7: Lemma 7.1, Alg 9, Thm 7.2, Cor 7.3): a pure-DP histogram over a huge
domain with per-query error O(1/ε) on **every** bin, released as a polynomial.

Construction (spec §5.12). The counting sampler ``M`` (``(ε₁/2, 0)``-DP) is matched to the field size
``d₀ = 2^{2·3^ℓ}`` by the *block map* ``f : [d₀]₊ → [d]₊`` (first ``r`` blocks of size ``q+1``, the rest
``q``, ``q = ⌊d₀/d⌋``, ``r = d₀ mod d``), giving ``M₀(u₀) = M(0, f(u₀))``. For each occupied label ``x``
draw ``c̃_x = M(c_x, U)``, then a uniform ``u₀`` in the preimage ``S_{c̃_x} = {u₀ : M₀(u₀) = c̃_x}``, and
fix the polynomial's value at ``x`` to ``u₀ − 1``; fill the remaining ``n+1−|A|`` interpolation points
with uniform field elements and interpolate (degree ≤ n ⇒ the released polynomial is uniform among those
consistent with the constraints, Lemma 7.1). Any label's count is ``M₀(p(x) + 1)``: deterministic,
cheap, and needs no enumeration of the domain.

Privacy (Thm 7.2): ``ε₁ + ε₂ + ε₃`` with ``e^{ε₂} = max_v P[M₀=v]/P[M(0)=v]`` and
``e^{ε₃} = max_v P[M(0)=v]/P[M₀=v]`` — both computed exactly here and at most ``(q+1)/q``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Iterable, Mapping

from ...errors import InputDataError, InvalidParameterError
from ...noise.clamped_geometric import CountingSampler, FastSample, GeoSample
from ...noise.source import SecureRandom, default_source
from .gf2 import GF2k
from .keep_heavy import check_counts

__all__ = ["BlockMap", "CompactHistogram", "compact_histogram", "choose_ell"]


@dataclass(frozen=True)
class BlockMap:
    """The map ``f : [d₀]₊ → [d]₊`` into consecutive blocks (spec §5.12, Cor 7.3 construction)."""

    d0: int
    d: int

    def __post_init__(self) -> None:
        if self.d0 < self.d:
            raise InvalidParameterError(f"d0={self.d0} must be >= d={self.d}")

    @property
    def q(self) -> int:
        return self.d0 // self.d

    @property
    def r(self) -> int:
        return self.d0 % self.d

    def f(self, u0: int) -> int:
        q, r = self.q, self.r
        if u0 <= r * (q + 1):
            return -(-u0 // (q + 1))
        return r + -(-(u0 - r * (q + 1)) // q)

    def finv(self, u: int) -> int:
        """``#{u₀ : f(u₀) <= u} = u·q + min(u, r)``."""
        return u * self.q + min(u, self.r)


def choose_ell(domain_size: int, d: int, q_min: int, n: int) -> int:
    """Least ``ℓ`` with ``2^{2·3^ℓ} >= max(|X|, q_min·d, n+1)`` (spec §5.12 "Choice of ℓ")."""
    need = max(domain_size, q_min * d, n + 1)
    ell = 0
    while (1 << (2 * 3 ** ell)) < need:
        ell += 1
    return ell


def _sampler_state(s: CountingSampler) -> dict[str, Any]:
    st: dict[str, Any] = {"kind": type(s).__name__, "n": s.n, "epsilon_k": s.params.k, "d": s.d}
    if isinstance(s, FastSample):
        st.update(gamma_g=s.g, t=s.t)
    return st


def _sampler_from_state(st: Mapping[str, Any]) -> CountingSampler:
    if st["kind"] == "GeoSample":
        return GeoSample(st["n"], Fraction(1, st["epsilon_k"]))
    return FastSample(st["n"], Fraction(1, st["epsilon_k"]), Fraction(1, st["gamma_g"]), t=st["t"])


@dataclass(frozen=True)
class CompactHistogram:
    """A released compact histogram: ``count(x) = M₀(p(x) + 1)`` for the released polynomial ``p``.

    Everything here is public (it is the release). ``coeffs`` are the ``n+1`` coefficients of ``p`` over
    GF(2^{2·3^ℓ}), lowest degree first. Re-querying gives the same counts (no fresh noise): counts of
    different labels are only ``(n+1)``-wise independent.
    """

    sampler: CountingSampler
    ell: int
    coeffs: tuple[int, ...]
    domain_size: int
    _field: GF2k = field(init=False, repr=False, compare=False)
    _block: BlockMap = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_field", GF2k(self.ell))
        object.__setattr__(self, "_block", BlockMap(self._field.size, self.sampler.d))

    @property
    def d0(self) -> int:
        return self._field.size

    @property
    def block_map(self) -> BlockMap:
        return self._block

    def m0(self, u0: int) -> int:
        """``M₀(u₀) = M(0, f(u₀))`` for ``u₀ ∈ [1, d₀]``."""
        return self.sampler.sample_u(0, self._block.f(u0))

    def count(self, x: int) -> int:
        """The released noisy count of label ``x`` (time O(n) field products + one CDF search)."""
        x = int(x)
        if not 0 <= x < self.domain_size:
            raise InputDataError(f"label {x} is outside the domain [0, {self.domain_size})")
        return self.m0(self._field.evaluate(self.coeffs, x) + 1)

    def counts(self, labels: Iterable[int]) -> list[int]:
        return [self.count(x) for x in labels]

    def m0_pmf(self) -> list[Fraction]:
        """Exact law of ``M₀(U₀)``, ``U₀`` uniform on ``[1, d₀]``."""
        F = [0] + [self.sampler.cdf(0, z) for z in range(self.sampler.n + 1)]
        return [Fraction(self._block.finv(F[z + 1]) - self._block.finv(F[z]), self.d0)
                for z in range(self.sampler.n + 1)]

    def mismatch_ratios(self) -> tuple[Fraction, Fraction]:
        """``(e^{ε₂}, e^{ε₃})`` of Thm 7.2, exactly: ``max_v P[M₀=v]/P[M=v]`` and its reverse."""
        p0, p = self.m0_pmf(), self.sampler.pmf(0)
        return max(a / b for a, b in zip(p0, p)), max(b / a for a, b in zip(p0, p))

    @property
    def epsilon(self) -> float:
        """Guaranteed ``ε₁ + ε₂ + ε₃`` (Thm 7.2), rounded up slightly (reporting)."""
        r2, r3 = self.mismatch_ratios()
        eps = 2 * self.sampler.epsilon_count + math.log(r2) + math.log(r3)
        return math.nextafter(eps * (1 + 1e-12), math.inf)

    def to_dict(self) -> dict[str, Any]:
        """Serialisable public description; :meth:`from_dict` rebuilds an identical histogram."""
        return {"format": "sparsedp.compact-histogram/1",
                "field": f"GF(2^{self._field.k}) = F2[x]/(x^{self._field.k} + x^{self._field.half} + 1)",
                "ell": self.ell, "domain_size": self.domain_size, "sampler": _sampler_state(self.sampler),
                "coeffs": [format(c, "x") for c in self.coeffs]}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "CompactHistogram":
        return cls(sampler=_sampler_from_state(d["sampler"]), ell=int(d["ell"]),
                   coeffs=tuple(int(c, 16) for c in d["coeffs"]), domain_size=int(d["domain_size"]))


def compact_histogram(sampler: CountingSampler, counts: Mapping[int, int], domain_size: int,
                      rng: SecureRandom | None = None, *, q_min: int | None = None,
                      ell: int | None = None) -> CompactHistogram:
    """CompactHistogram_{M,M₀} (Balcer & Vadhan (2019), Alg 9, Thm 7.2).

    ``q_min`` (default ``⌈20/ε⌉`` for the sampler's ε = 1/k, i.e. ``ε₂+ε₃ <= ε/10``) sets the least block
    size, hence the field: ``ℓ`` = :func:`choose_ell` unless given explicitly (it must still give
    ``d₀ >= max(|X|, d, n+1)``). Time: ``O(n²)`` field products for the interpolation, independent of |X|
    beyond the field size.
    """
    rng = default_source() if rng is None else rng
    n = sampler.n
    counts = check_counts(counts, n, domain_size)
    if q_min is None:
        q_min = 20 * sampler.params.k
    if ell is None:
        ell = choose_ell(domain_size, sampler.d, q_min, n)
    F = GF2k(ell)
    if F.size < max(domain_size, sampler.d, n + 1):
        raise InvalidParameterError(f"ell={ell} gives d0=2^{F.k} < max(|X|, d, n+1)")
    block = BlockMap(F.size, sampler.d)
    xs, ys = [], []
    for x in sorted(counts):
        v = sampler.sample(counts[x], rng)  # step 2: BasicHistogram over A
        lo = block.finv(sampler.cdf(0, v - 1))  # S_v = (lo, hi]
        hi = block.finv(sampler.cdf(0, v))
        u0 = lo + 1 + rng.randbelow(hi - lo)
        xs.append(x)
        ys.append(u0 - 1)  # T^{-1}(u0)
    occupied = set(xs)
    cand = 0
    while len(xs) < n + 1:  # extra points: any elements disjoint from A, uniform values
        if cand not in occupied:
            xs.append(cand)
            ys.append(rng.randbelow(F.size))
        cand += 1
    coeffs = F.interpolate(xs, ys)
    return CompactHistogram(sampler=sampler, ell=ell, coeffs=tuple(coeffs), domain_size=domain_size)
