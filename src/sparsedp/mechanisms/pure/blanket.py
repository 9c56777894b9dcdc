"""The pure ε-DP blanket histogram: linear time, optimal ℓ∞ error (``docs/proofs/pure-blanket.md``).

Our reconstruction of the "private item blanket with target-length padding" of Kerschbaum, Lee and Wu, "Optimal
Pure Differentially Private Sparse Histograms in Deterministic Linear Time" (2025, arXiv 2507.17017); the
parameters and Theorem 1 are in :mod:`sparsedp.accounting.blanket`. One item per unit; replace-one neighbours
with ``n`` public (add/remove through a dummy label, as :func:`~sparsedp.mechanisms.pure.release_pure` does).

:func:`blanket_histogram` runs the four steps on integer labels ``[0, d)``:

1. noise on the support only: ``release_by_inversion`` decides ``Z_x >= τ − c_x`` per key (one table lookup,
   :class:`~sparsedp.noise.rational_geometric.TwoSidedGeometricLaw`) and computes ``Z_x`` for the released ones;
2. the blanket size ``m ∝ C(d − k, m)(q/(1 − q))^m`` on ``{0 … T − r}``
   (:func:`~sparsedp.noise.rational_geometric.blanket_size`);
3. a uniform m-subset of the labels outside the support, with no rejection
   (:func:`~sparsedp.noise.rational_geometric.subset_outside`: Floyd's algorithm on the complement's indices, then
   rank and shift over the sorted support), values ``τ + G`` (:class:`~sparsedp.noise.rational_geometric.GeometricLaw`);
4. the union, **sorted by label**: the output is a function of the released set only, so the order cannot say
   which keys are blanket keys.

Time: step 1 one 64-bit word and one table lookup per key (a value only for released keys); step 3 a fixed
amount of work given m and k (one sort of the support, m draws, m binary searches); step 4 one sort of the output.
Randomised in time are only the exact samplers: step 2 (a rejection sampler, an expected constant number of rounds
as λ < 1), each uniform draw on a range that is not a power of two (bit-level rejection, accepting with probability
above 1/2), and the inversion samplers' rare exact slow path (where the 64-bit word does not decide the value). No
step's cost grows with the domain size beyond the bit length of its labels (``docs/proofs/pure-blanket.md``,
"Running time"). The output has the law of the geometric mechanism run on all d keys, conditioned on at most T − r blanket keys (:mod:`sparsedp.accounting.blanket`).

The blanket keys are part of the guarantee: a key of count 1 is released with probability about ``e^{ε/2}`` times
that of a key of count 0, and keys of count 0 are released only as blanket keys — an output that said which keys
are blanket keys would reveal the support.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np

from ...accounting.blanket import BlanketParams
from ...errors import InputDataError
from ...noise.inversion import release_by_inversion, sample_by_inversion
from ...noise.rational_geometric import GeometricLaw, blanket_size, subset_outside
from ...noise.source import SecureRandom, default_source

__all__ = ["BlanketRelease", "blanket_histogram"]


@dataclass(frozen=True)
class BlanketRelease:
    """The released set as two aligned tuples, sorted by label: ``labels`` (ints in ``[0, d)``) and
    ``values`` (noisy counts, all ``>= τ``). It does not say which labels are blanket labels."""

    labels: tuple[int, ...]
    values: tuple[int, ...]


def blanket_histogram(counts: Mapping[int, int], params: BlanketParams,
                      rng: SecureRandom | None = None) -> BlanketRelease:
    """Run the blanket histogram on ``counts`` (label → count >= 1; at most ``params.n`` labels)."""
    rng = default_source() if rng is None else rng
    labels = list(counts)
    c = np.fromiter((int(counts[x]) for x in labels), dtype=np.int64, count=len(labels))
    if len(labels) > params.n:
        raise InputDataError(f"{len(labels)} keys exceed the public bound n = {params.n} of the calibration")
    if c.size and int(c.min()) < 1:
        raise InputDataError("counts must be >= 1 (the support of the histogram)")
    # 1. the support: released iff c + Z >= τ, i.e. Z >= τ − c
    pos, z = release_by_inversion(params.law, params.tau - c, rng)
    out = {labels[i]: int(c[i] + zi) for i, zi in zip(pos.tolist(), z.tolist())}
    # 2. target-length padding: at most T keys in all; P[m] ∝ C(d − k, m)(q/(1 − q))^m
    m = blanket_size(params.lam, params.domain_size - len(labels), params.domain_size, params.target - len(out), rng)
    # 3. the blanket: uniform keys outside the support, values distributed as Z given Z >= τ
    blanket = subset_outside(m, params.domain_size, counts, rng)
    g = sample_by_inversion(GeometricLaw(params.alpha), m, rng) if m else np.empty(0, np.int64)
    for x, gi in zip(blanket, g.tolist()):
        out[x] = params.tau + int(gi)
    order = sorted(out)
    return BlanketRelease(labels=tuple(order), values=tuple(out[x] for x in order))
