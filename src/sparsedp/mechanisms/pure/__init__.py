"""Pure ε-DP histograms on finite computers (Balcer & Vadhan, ITCS 2018; after Balcer & Vadhan (2019)).

Integer/rational arithmetic only, randomness from :mod:`sparsedp.noise`, running time polylogarithmic
in the domain size for the sparse and compact mechanisms. Numbering follows the paper (ITCS version):

* counting samplers (§4): :class:`~sparsedp.noise.clamped_geometric.GeoSample` (Thm 4.5),
  :class:`~sparsedp.noise.clamped_geometric.FastSample` (Thm 4.6), :func:`counting_sampler`;
* :func:`basic_histogram` (Alg 3), :func:`keep_heavy` (Alg 4), :func:`kh_prime` (Alg 5 with the corrected
  order-statistics sampler, erratum E1), :func:`kh_double_prime` (Alg 7), :func:`sparse_histogram`
  (Thm 6.5), :func:`pure_sparse_histogram` (Alg 8), :func:`stability_histogram` (Thm 1.3),
  :func:`compact_histogram` (Alg 9 / Cor 7.3);
* :mod:`.accuracy` (Figures 1–2, exact bounds), :mod:`.exact` (exact laws for audits and tests);
* :func:`pure_histogram`: the simple entry point returning a :class:`~sparsedp.core.histogram.Release`.

Errata relied on are argued in ``docs/proofs/balcer-vadhan-errata.md``.
"""

from ...noise.clamped_geometric import FastSample, GeoSample, counting_sampler
from .accuracy import Accuracy
from .compact import CompactHistogram, compact_histogram
from .keep_heavy import basic_histogram, keep_heavy, kh_double_prime, kh_prime, sparse_histogram
from .pure_sparse import pure_sparse_histogram, uniform_sparse_histogram
from .release import PureCalibration, plan_pure, pure_histogram, release_pure
from .stability import stability_histogram

__all__ = [
    "GeoSample", "FastSample", "counting_sampler",
    "basic_histogram", "keep_heavy", "kh_prime", "kh_double_prime", "sparse_histogram",
    "pure_sparse_histogram", "uniform_sparse_histogram", "stability_histogram",
    "compact_histogram", "CompactHistogram", "Accuracy",
    "PureCalibration", "pure_histogram", "release_pure", "plan_pure",
]
