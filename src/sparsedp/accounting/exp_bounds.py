"""Exact integer bounds of exp(−x) for rational x >= 0: ``lo <= 2^prec · exp(−x) <= hi``.

exp(−x) = exp(−1)^m · exp(−f) with m = ⌊x⌋ and f = x − m in [0, 1). Each factor is bounded by the alternating
Taylor series ``Σ_k (−f)^k / k!`` in fixed point: its terms ``f^k/k!`` do not increase for f <= 1, so every odd
partial sum is a lower and every even one an upper bound of e^{−f}; the terms are carried with floor (lower)
and ceil (upper) rounding, and the power ``exp(−1)^m`` is taken by squaring with every product rounded down (or
up). ``hi − lo`` is a few units. Integer arithmetic only: the exact samplers (:mod:`sparsedp.noise.exact`,
:mod:`sparsedp.noise.discrete`, :mod:`sparsedp.noise.inversion`) decide ``V < exp(−x)`` with it, and the
blanket accountant (:mod:`.blanket`) rounds its noise base α up to a rational with it.
"""

from __future__ import annotations

from fractions import Fraction

from ..errors import InvalidParameterError

__all__ = ["exp_neg_bounds"]


def _exp_neg_small(a: int, b: int, p: int) -> tuple[int, int]:
    """Fixed-point bounds of e^{-a/b} at scale 2^p for 0 <= a <= b (alternating Taylor series).

    With terms t_k = f^k/k! (non-increasing for f <= 1), every odd partial sum is <= e^{-f} and
    every even one is >= e^{-f}. Terms are carried with floor (lower) and ceil (upper) rounding.
    """
    one = 1 << p
    tl = th = one            # bounds of the term t_k at scale 2^p
    low = high = one         # bounds of the partial sum S_k
    prev_high = one
    k = 0
    while True:
        k += 1
        tl = (tl * a) // (b * k)
        th = -((-th * a) // (b * k))
        prev_high = high
        if k % 2:
            low, high = low - th, high - tl
            if th <= 1:
                # S_k (k odd) <= e^{-f} <= S_{k-1} (k-1 even)
                return max(low, 0), prev_high
        else:
            low, high = low + tl, high + th


def _fixed_pow(x: int, m: int, p: int, up: bool) -> int:
    """x^m for a fixed-point x at scale 2^p, rounding every product down (or up)."""
    result = 1 << p
    while m:
        if m & 1:
            result = -((-result * x) >> p) if up else (result * x) >> p
        m >>= 1
        if m:
            x = -((-x * x) >> p) if up else (x * x) >> p
    return result


def exp_neg_bounds(x: Fraction | float, prec: int) -> tuple[int, int]:
    """Integers ``lo <= 2**prec * exp(-x) <= hi`` for rational ``x >= 0``; ``hi - lo`` is a few units.

    exp(−x) = exp(−1)^m · exp(−f), m = ⌊x⌋, f = x − m, each factor from :func:`_exp_neg_small` with
    ``prec + 2·bit_length(m) + 16`` working bits, multiplied with directed rounding.
    """
    xq = Fraction(x)
    if xq < 0:
        raise InvalidParameterError(f"x must be >= 0, got {xq}")
    m = xq.numerator // xq.denominator
    if m * 1.4426950408889634 >= prec + 2:  # e^{-m} <= 2^{-1.4427 m} <= 2^{-prec-2}
        return 0, 1
    f = xq - m
    p = prec + 2 * m.bit_length() + 16
    f_lo, f_hi = _exp_neg_small(f.numerator, f.denominator, p)
    if m:
        e_lo, e_hi = _exp_neg_small(1, 1, p)
        f_lo = (f_lo * _fixed_pow(e_lo, m, p, up=False)) >> p
        f_hi = -((-f_hi * _fixed_pow(e_hi, m, p, up=True)) >> p)
    shift = p - prec
    return f_lo >> shift, -((-f_hi) >> shift)
