"""The finite field GF(2^k), ``k = 2·3^ℓ``, as ``F₂[x]/(x^k + x^{k/2} + 1)`` (Balcer & Vadhan (2019) §2.3, spec P8).

The trinomial is the cyclotomic polynomial ``Φ_{3^{ℓ+1}}``, irreducible over F₂ because 2 is a primitive
root modulo every power of 3 (van Lint), so this is an explicit, deterministic field of size ``2^{2·3^ℓ}``.
Elements are Python ints in ``[0, 2^k)`` (bit i = coefficient of x^i); addition is XOR.

Multiplication is a carry-less product followed by reduction with ``x^k ≡ x^{k/2} + 1``. For large k the
carry-less product spreads each bit into a 16- or 32-bit slot, multiplies as ordinary big integers and
reads back the slot parities with numpy (the slot never overflows: a slot sums at most k one-bit products).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

try:  # optional accelerator for the big-integer product inside clmul (same exact result)
    from gmpy2 import mpz as _mpz
except ImportError:  # pragma: no cover - depends on the environment
    _mpz = int

__all__ = ["GF2k", "clmul"]

_SMALL = 128  # below this many bits the shift-and-xor loop is faster than spreading


def _clmul_loop(a: int, b: int) -> int:
    if a.bit_count() > b.bit_count():
        a, b = b, a
    r = 0
    while a:
        low = a & -a
        r ^= b << (low.bit_length() - 1)
        a ^= low
    return r


def _spread(a: int, nbytes: int, dtype: np.dtype[Any]) -> int:
    bits = np.unpackbits(np.frombuffer(a.to_bytes(nbytes, "little"), dtype=np.uint8), bitorder="little")
    return int.from_bytes(bits.astype(dtype).tobytes(), "little")


def clmul(a: int, b: int) -> int:
    """Carry-less (F₂[x]) product of two nonnegative ints."""
    la, lb = a.bit_length(), b.bit_length()
    if min(la, lb) < _SMALL:
        return _clmul_loop(a, b)
    nbytes = (max(la, lb) + 7) // 8
    dtype = np.dtype("<u2") if 8 * nbytes < 65536 else np.dtype("<u4")
    w = dtype.itemsize
    prod = int(_mpz(_spread(a, nbytes, dtype)) * _mpz(_spread(b, nbytes, dtype)))
    raw = prod.to_bytes(2 * 8 * nbytes * w, "little")
    slots: npt.NDArray[np.unsignedinteger[Any]] = np.frombuffer(raw, dtype=dtype)
    bits = (slots & 1).astype(np.uint8)
    return int.from_bytes(np.packbits(bits, bitorder="little").tobytes(), "little")


class GF2k:
    """GF(2^{2·3^ℓ}) with the modulus ``x^{2·3^ℓ} + x^{3^ℓ} + 1``."""

    def __init__(self, ell: int):
        if ell < 0:
            raise ValueError(f"ell must be >= 0, got {ell}")
        self.ell = ell
        self.half: int = 3 ** ell
        self.k: int = 2 * self.half
        self.modulus: int = (1 << self.k) | (1 << self.half) | 1
        self.mask: int = (1 << self.k) - 1
        self.size: int = 1 << self.k

    def __repr__(self) -> str:
        return f"GF2k(ell={self.ell}, k={self.k})"

    def reduce(self, c: int) -> int:
        k, half, mask = self.k, self.half, self.mask
        while c >> k:
            hi = c >> k
            c = (c & mask) ^ hi ^ (hi << half)
        return c

    def mul(self, a: int, b: int) -> int:
        return self.reduce(clmul(a, b))

    def inv(self, a: int) -> int:
        """Multiplicative inverse by the binary extended Euclidean algorithm over F₂[x]."""
        if a == 0:
            raise ZeroDivisionError("0 has no inverse in GF(2^k)")
        u, v, g1, g2 = a, self.modulus, 1, 0  # invariants: g1·a ≡ u, g2·a ≡ v (mod f)
        while u != 1:
            j = u.bit_length() - v.bit_length()
            if j < 0:
                u, v, g1, g2 = v, u, g2, g1
                j = -j
            u ^= v << j
            g1 ^= g2 << j
        return self.reduce(g1)

    def batch_inv(self, xs: list[int]) -> list[int]:
        """Inverses of nonzero elements with one inversion (Montgomery's trick)."""
        prefix, acc = [], 1
        for x in xs:
            prefix.append(acc)
            acc = self.mul(acc, x)
        inv_acc = self.inv(acc)
        out = [0] * len(xs)
        for i in range(len(xs) - 1, -1, -1):
            out[i] = self.mul(inv_acc, prefix[i])
            inv_acc = self.mul(inv_acc, xs[i])
        return out

    def evaluate(self, coeffs: list[int] | tuple[int, ...], x: int) -> int:
        """``Σ coeffs[i]·x^i`` by Horner's rule (coefficients lowest degree first)."""
        r = 0
        for c in reversed(coeffs):
            r = self.mul(r, x) ^ c
        return r

    def interpolate(self, xs: list[int], ys: list[int]) -> list[int]:
        """The unique polynomial of degree < len(xs) through the points (distinct xs), lowest degree first.

        Lagrange form: ``p = Σ_j y_j/L′(x_j) · L(X)/(X − x_j)`` with ``L = Π (X − x_i)``; O(len²) products.
        """
        m = len(xs)
        if len(set(xs)) != m:
            raise ValueError("interpolation points must be distinct")
        L = [1]  # coefficients of Π (X + x_i), lowest first
        for x in xs:
            nxt = [0] * (len(L) + 1)
            for i, c in enumerate(L):
                nxt[i + 1] ^= c
                nxt[i] ^= self.mul(c, x)
            L = nxt
        coeffs = [0] * m
        quots = []
        weights = []
        for xj in xs:
            q = [0] * m  # L / (X + xj), synthetic division from the top
            carry = 0
            for i in range(m, 0, -1):
                carry = L[i] ^ self.mul(carry, xj) if i < m else L[i]
                q[i - 1] = carry
            quots.append(q)
            weights.append(self.evaluate(q, xj))  # = Π_{i≠j} (xj − xi)
        invw = self.batch_inv(weights)
        for q, y, iw in zip(quots, ys, invw):
            s = self.mul(y, iw)
            if s:
                for i in range(m):
                    if q[i]:
                        coeffs[i] ^= self.mul(s, q[i])
        return coeffs
