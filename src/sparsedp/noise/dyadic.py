"""Independent Bernoulli bits with dyadic probabilities ``a / 2^b``, exactly, vectorised.

Each bit compares a uniform integer ``U`` on ``[0, 2^b)`` with the numerator ``a``: ``P[U < a] = a / 2^b``.
``U`` is drawn 64 bits at a time, most significant first, and only as far as needed: with ``U = 2^(b−64)·H + L``
(``H`` a uniform 64-bit word, ``L`` uniform on ``[0, 2^(b−64))``, independent) and ``a = 2^(b−64)·a_H + a_L``,
``U < a`` iff ``H < a_H``, or ``H = a_H`` and ``L < a_L``. So one 64-bit word decides every bit except with
probability ``2^-64`` (``H = a_H``), when ``L`` is drawn (``randbelow(2^(b−64))``) and compared. The law is
exactly that of the comparison. A numerator ``a = 2^b`` (probability 1) gives 1 (its word is drawn and ignored).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from ..errors import InvalidParameterError
from .source import SecureRandom, default_source

__all__ = ["dyadic_bernoulli"]


def dyadic_bernoulli(numerators: Sequence[int], bits: int, index: npt.ArrayLike,
                     rng: SecureRandom | None = None) -> npt.NDArray[np.bool_]:
    """``out[i] ~ Bernoulli(numerators[index[i]] / 2^bits)``, independently (module docstring).

    ``bits``: a multiple of 64, at least 64; ``numerators``: integers in ``[0, 2^bits]``; ``index``: integers
    into ``numerators``. One 64-bit word per bit from ``rng`` (default: the secure source), plus
    ``randbelow(2^(bits − 64))`` on the rare ties."""
    b = int(bits)
    if b < 64 or b % 64:
        raise InvalidParameterError(f"bits must be a positive multiple of 64, got {bits}")
    one = 1 << b
    nums = [int(a) for a in numerators]
    if any(not 0 <= a <= one for a in nums):
        raise InvalidParameterError("every numerator must be in [0, 2^bits]")
    idx = np.asarray(index, dtype=np.int64)
    if idx.size and (idx.min() < 0 or idx.max() >= len(nums)):
        raise InvalidParameterError("index out of the range of numerators")
    n = int(idx.size)
    if n == 0:
        return np.zeros(0, dtype=bool)
    src = default_source() if rng is None else rng
    low_bits = b - 64
    sure = np.array([a == one for a in nums], dtype=bool)
    top = np.array([0 if a == one else a >> low_bits for a in nums], dtype=np.uint64)
    words = src.uint64(n)
    a_hi = top[idx]
    out: npt.NDArray[np.bool_] = (words < a_hi) | sure[idx]
    ties = np.flatnonzero((words == a_hi) & ~sure[idx])
    if ties.size and low_bits:
        mask = (1 << low_bits) - 1
        for i in ties.tolist():
            out[i] = src.randbelow(1 << low_bits) < (nums[int(idx[i])] & mask)
    return out
