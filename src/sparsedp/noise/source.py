"""Random sources.

PROVISIONAL minimal implementation (owned by the noise issue, which makes it buffered, fork-safe and
thread-safe behind the same method names). Every sampler in sparsedp draws through this interface:

- ``random_bytes(n) -> bytes``
- ``getrandbits(k) -> int``            (Python int, k >= 0 bits)
- ``randbelow(n) -> int``             (uniform on {0, …, n−1}, no modulo bias, arbitrary-size n)
- ``uint64(size) -> np.ndarray``      (uniform uint64 array)

``SecureRandom`` is the default (OS CSPRNG). ``InsecureSeededRandom(seed)`` is deterministic and exists
only for tests and reproducible research; no public entry point defaults to it.
"""

from __future__ import annotations

import os

import numpy as np


class SecureRandom:
    """Cryptographically secure randomness from the operating system."""

    secure = True

    def random_bytes(self, n: int) -> bytes:
        return os.urandom(n)

    def getrandbits(self, k: int) -> int:
        if k <= 0:
            return 0
        nbytes = (k + 7) // 8
        return int.from_bytes(self.random_bytes(nbytes), "little") >> (8 * nbytes - k)

    def randbelow(self, n: int) -> int:
        if n <= 0:
            raise ValueError(f"n must be >= 1, got {n}")
        k = n.bit_length()
        while True:
            r = self.getrandbits(k)
            if r < n:
                return r

    def uint64(self, size: int) -> np.ndarray:
        return np.frombuffer(self.random_bytes(8 * int(size)), dtype=np.uint64).copy()


class InsecureSeededRandom(SecureRandom):
    """Deterministic, NOT secure: for tests and reproducible research only."""

    secure = False

    def __init__(self, seed: int):
        self._gen = np.random.Generator(np.random.PCG64(seed))

    def random_bytes(self, n: int) -> bytes:
        return self._gen.bytes(n)


_DEFAULT: SecureRandom | None = None


def default_source() -> SecureRandom:
    """The process-wide secure source."""
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = SecureRandom()
    return _DEFAULT
