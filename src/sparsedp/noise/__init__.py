"""Randomness: a CSPRNG source and exact discrete noise samplers.

* :mod:`.source` — ``SecureRandom`` (AES-256-CTR keyed from the OS; the default), ``InsecureSeededRandom``
  (tests only), ``default_source()``.
* :mod:`.discrete` — vectorised exact ``sample_discrete_gaussian`` / ``sample_discrete_laplace``
  (``sample_two_sided_geometric`` is the same law).
* :mod:`.inversion` — exact inversion sampling of integer laws from proved survival-function bounds
  (``DiscreteGaussianLaw``, ``DiscreteLaplaceLaw``): ``release_by_inversion`` decides "X_i >= j_i" per key
  with one table lookup, computing X only for released keys (the per-key kernel of the mechanisms);
  ``sample_by_inversion`` draws iid values.
* :mod:`.exact` — scalar reference algorithms of Canonne–Kamath–Steinke 2020 (``bernoulli``,
  ``bernoulli_exp``, ...) and the exact big-integer fallback of the vectorised samplers.
* :mod:`.floating` — float Gaussian/Laplace, only with ``insecure_float=True``.

The laws themselves (pmf, tails, variance) live in :mod:`sparsedp.accounting.discrete`.
"""

from .discrete import sample_discrete_gaussian, sample_discrete_laplace, sample_two_sided_geometric
from .exact import bernoulli, bernoulli_exp
from .floating import sample_gaussian, sample_laplace
from .inversion import (
    DiscreteGaussianLaw, DiscreteLaplaceLaw, IntegerLaw, inversion_fits, release_by_inversion, sample_by_inversion,
)
from .source import InsecureSeededRandom, SecureRandom, default_source

__all__ = [
    "InsecureSeededRandom", "SecureRandom", "default_source",
    "sample_discrete_gaussian", "sample_discrete_laplace", "sample_two_sided_geometric",
    "bernoulli", "bernoulli_exp", "sample_gaussian", "sample_laplace",
    "IntegerLaw", "DiscreteGaussianLaw", "DiscreteLaplaceLaw", "release_by_inversion", "sample_by_inversion",
    "inversion_fits",
]
