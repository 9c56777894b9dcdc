"""Round-down dyadic arithmetic with ``P`` significant bits (after Balcer & Vadhan (2019) §3 P4).

A nonnegative real is held as ``(m, e)`` meaning ``m·2^e`` with ``m = 0`` or ``2^{P−1} <= m < 2^P``.
Every operation rounds *down*, so errors are one-sided: writing the computed value as ``x·e^{−λ}``,
each operation adds ``λ <= 2^{3−P}`` (P >= 4) and ``pow(frac(q), k)`` has ``λ <= (2k−1)·2^{3−P}``.
This is what lets :func:`~sparsedp.mechanisms.pure.ordstats.approx_trunc_binomial` bound its
statistical distance from the exact law (spec P5) while working with ``O(P)``-bit integers only.
"""

from __future__ import annotations

try:  # optional accelerator: identical integer semantics, much faster products of 10^4+-bit numbers
    from gmpy2 import mpz as _mpz
except ImportError:  # pragma: no cover - depends on the environment
    _mpz = int

Dyadic = tuple[int, int]


def norm(m: int, e: int, P: int) -> Dyadic:
    """Floor ``m·2^e`` to ``P`` significant bits."""
    if m == 0:
        return (0, 0)
    s = m.bit_length() - P
    return (m >> s, e + s) if s > 0 else (m << -s, e + s)


def frac(num: int, den: int, P: int) -> Dyadic:
    """``⌊num/den⌋`` to ``P`` bits (``num >= 0``, ``den > 0``)."""
    if num == 0:
        return (0, 0)
    s = num.bit_length() - den.bit_length() - P - 1
    num, den = _mpz(num), _mpz(den)
    m0 = num // (den << s) if s >= 0 else (num << -s) // den
    return norm(m0, s, P)


def mul(x: Dyadic, y: Dyadic, P: int) -> Dyadic:
    return norm(x[0] * y[0], x[1] + y[1], P)


def mulfrac(x: Dyadic, num: int, den: int, P: int) -> Dyadic:
    """``x·num/den`` rounded down (``num >= 0``, ``den > 0``)."""
    s = den.bit_length() + 1
    return norm(((x[0] * num) << s) // den, x[1] - s, P)


def power(x: Dyadic, k: int, P: int) -> Dyadic:
    """``x^k`` (``k >= 1``) by left-to-right square-and-multiply, each step rounded down."""
    r = x
    for bit in bin(k)[3:]:
        r = mul(r, r, P)
        if bit == "1":
            r = mul(r, x, P)
    return r


def scaled_floor(x: Dyadic, P: int) -> int:
    """``⌊x·2^P⌋`` as an int."""
    sh = x[1] + P
    return int(x[0] << sh if sh >= 0 else x[0] >> (-sh))
