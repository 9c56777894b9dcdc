"""Random sources: every random bit sparsedp uses comes through here.

Interface (every sampler draws only through these methods)::

    random_bytes(n) -> bytes           n uniform bytes
    getrandbits(k)  -> int             uniform on {0, ..., 2^k - 1} (Python int, any k >= 0)
    randbelow(n)    -> int             uniform on {0, ..., n - 1}, no modulo bias, any n >= 1
    uint64(size)    -> np.ndarray      uniform uint64 array

Choice of generator (why AES-256-CTR through ``cryptography``)
-------------------------------------------------------------
``SecureRandom`` is AES-256 in counter mode, keyed with 32 bytes and a 16-byte initial counter from
``os.urandom``: the keystream of a block cipher in CTR mode is indistinguishable from uniform for any
feasible amount of output (it is NIST SP 800-90A's CTR_DRBG construction without the derivation
function), the key never leaves the object, and OpenSSL's AES-NI implementation produces 3–5 GB/s
on one core here, against ~350–430 MB/s for ``os.urandom`` itself (a syscall per request). The exact
samplers need ~20 bytes per discrete-Gaussian draw, so at 2 M draws/s ``os.urandom`` alone would eat
most of a core, while AES-CTR costs ~1 %. ``cryptography`` is already a dependency of much of the
Python ecosystem; randomgen's AES/ChaCha bit generators would do the same job with a less audited
code base. The key is refreshed from the OS every 2^30 bytes (well inside AES-CTR's safe output
per key) and whenever the process id changes.

Fork safety: a child process must never replay its parent's stream. Every source remembers the pid
that keyed it and re-keys from ``os.urandom`` before producing output in a different pid (this also
covers ``multiprocessing``'s fork start method); ``os.register_at_fork`` additionally drops the
buffered parent bytes in the child immediately.

Thread safety: buffer and cipher are guarded by a lock, so threads never receive overlapping bytes.

``InsecureSeededRandom(seed)`` runs the same AES-CTR code with a key derived from the seed by SHA-256:
deterministic, for tests and reproducible research only, and named so. It is never a default. In a
forked child it mixes the child's pid into its key (so children of a seeded parent differ from it and
from each other; their streams are then not reproducible).
"""

from __future__ import annotations

import hashlib
import os
import threading
import weakref

import numpy as np

from ..errors import InvalidParameterError

try:  # pragma: no cover - the import itself
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
except ImportError:  # pragma: no cover - exercised only without cryptography
    Cipher = None

__all__ = ["SecureRandom", "InsecureSeededRandom", "SecretKeyedStream", "default_source"]

_CHUNK = 1 << 16          # bytes generated per refill of the small-request buffer
_DIRECT = 1 << 12         # requests at least this large bypass the buffer
_REKEY_BYTES = 1 << 30    # fresh OS key after this many output bytes
_BLOCK = 1 << 16          # keystream is produced in cache-sized blocks
_ZEROS = memoryview(bytes(_BLOCK))

_live_sources: "weakref.WeakSet[SecureRandom]" = weakref.WeakSet()


class SecureRandom:
    """Cryptographically secure randomness: AES-256-CTR keyed from ``os.urandom`` (see module doc).

    Fork-safe and thread-safe. This is what every public entry point uses when ``rng=None``.
    """

    secure = True

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._buf = b""
        self._pos = 0
        self._pid = -1
        self._enc = None
        self._out = 0
        _live_sources.add(self)

    # -- keying ---------------------------------------------------------------------------
    def _key_material(self) -> bytes:
        return os.urandom(48)

    def _rekey(self) -> None:
        material = self._key_material()
        self._pid = os.getpid()
        self._out = 0
        self._buf, self._pos = b"", 0
        if Cipher is None:  # pragma: no cover
            self._enc = None
            return
        self._enc = Cipher(algorithms.AES(material[:32]), modes.CTR(material[32:48])).encryptor()

    def _after_fork_in_child(self) -> None:
        # The lock may have been held by another thread at fork time: replace it.
        self._lock = threading.Lock()
        self._buf, self._pos, self._pid = b"", 0, -1

    def _fill(self, out: np.ndarray) -> None:
        """Overwrite the uint8 array ``out`` with fresh keystream (lock held)."""
        if self._pid != os.getpid() or self._out >= _REKEY_BYTES:
            self._rekey()
        n = out.size
        self._out += n
        if self._enc is None:  # pragma: no cover
            out[:] = np.frombuffer(os.urandom(n), dtype=np.uint8)
            return
        view = memoryview(out)
        for i in range(0, n, _BLOCK):
            m = min(_BLOCK, n - i)
            if n - i >= m + 15:
                if self._enc.update_into(_ZEROS[:m], view[i:i + m + 15]) != m:  # CTR is a stream mode
                    raise RuntimeError("AES-CTR produced an unexpected number of bytes")
            else:  # update_into needs 15 spare bytes of room; the tail goes through update()
                out[i:i + m] = np.frombuffer(self._enc.update(_ZEROS[:m]), dtype=np.uint8)

    def _keystream(self, n: int) -> bytes:
        """n fresh bytes (lock held)."""
        out = np.empty(n, dtype=np.uint8)
        self._fill(out)
        return out.tobytes()

    # -- interface ------------------------------------------------------------------------
    def random_bytes(self, n: int) -> bytes:
        """n uniform random bytes."""
        n = int(n)
        if n < 0:
            raise InvalidParameterError(f"n must be >= 0, got {n}")
        with self._lock:
            if self._pid != os.getpid():
                self._rekey()
            if n >= _DIRECT:
                return self._keystream(n)
            avail = len(self._buf) - self._pos
            if avail < n:
                self._buf = self._buf[self._pos:] + self._keystream(_CHUNK)
                self._pos = 0
            out = self._buf[self._pos:self._pos + n]
            self._pos += n
            return out

    def getrandbits(self, k: int) -> int:
        """Uniform integer on {0, ..., 2^k - 1}."""
        k = int(k)
        if k < 0:
            raise InvalidParameterError(f"k must be >= 0, got {k}")
        if k == 0:
            return 0
        nbytes = (k + 7) // 8
        return int.from_bytes(self.random_bytes(nbytes), "little") >> (8 * nbytes - k)

    def randbelow(self, n: int) -> int:
        """Uniform integer on {0, ..., n-1} by rejection from bit_length(n-1) bits (no modulo bias)."""
        n = int(n)
        if n < 1:
            raise InvalidParameterError(f"n must be >= 1, got {n}")
        if n == 1:
            return 0
        k = (n - 1).bit_length()
        while True:  # accepts with probability n / 2^k > 1/2
            r = self.getrandbits(k)
            if r < n:
                return r

    def uint64(self, size: int) -> np.ndarray:
        """A writable array of ``size`` independent uniform uint64 words."""
        size = int(size)
        if size < 0:
            raise InvalidParameterError(f"size must be >= 0, got {size}")
        if 8 * size < _DIRECT:
            return np.frombuffer(bytearray(self.random_bytes(8 * size)), dtype=np.uint64)
        out = np.empty(size, dtype=np.uint64)
        with self._lock:
            self._fill(out.view(np.uint8))
        return out

    def __getstate__(self):
        raise TypeError(f"{type(self).__name__} cannot be pickled (its key must not leave the process)")


class InsecureSeededRandom(SecureRandom):
    """Deterministic and NOT secure: AES-CTR keyed by SHA-256 of ``seed``. For tests and reproducible
    research only; never pass it to a release whose output is published."""

    secure = False

    def __init__(self, seed: int) -> None:
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
            raise InvalidParameterError(f"seed must be an integer, got {type(seed).__name__} {seed!r}")
        self._seed = int(seed)
        self._root_pid = os.getpid()
        super().__init__()

    def _key_material(self) -> bytes:
        tag = b"sparsedp insecure seeded source"
        seed_bytes = self._seed.to_bytes((self._seed.bit_length() + 8) // 8 + 1, "little", signed=True)
        h = hashlib.sha256(tag + seed_bytes)
        if os.getpid() != self._root_pid:  # forked child: never replay the parent's stream
            h.update(b"pid" + os.getpid().to_bytes(8, "little") + os.urandom(16))
        digest = h.digest()
        return digest + hashlib.sha256(digest).digest()[:16]

    def _fill(self, out: np.ndarray) -> None:
        # Deterministic output must not depend on request sizes: no volume-based re-keying for the
        # seeded source (AES-CTR's 2^128-block counter space is ample for tests).
        self._out = 0
        super()._fill(out)

    def __repr__(self) -> str:
        return f"InsecureSeededRandom(seed={self._seed})"


class SecretKeyedStream(SecureRandom):
    """A deterministic stream derived from a **secret, per-release** key and a public label.

    Keystream: AES-256-CTR with key and initial counter ``HMAC-SHA256(secret_key, "sparsedp keyed stream" ||
    label)`` (32 bytes) and ``HMAC-SHA256(secret_key, "sparsedp keyed iv" || label)[:16]``. HMAC-SHA256 is a
    PRF, so for a uniformly random secret key the streams of distinct labels are computationally
    indistinguishable from independent uniform streams: a sampler fed from one behaves as if fed from the
    secure source. The point is *recomputation*: a distributed engine (Spark) may run a task several times
    (retries, speculation, a second action on a lazy result); deriving each chunk's noise from
    ``(secret_key, chunk label)`` makes every run draw identical noise, so one release is one draw.

    Rules of use: ``secret_key`` comes from the secure source, once per release, and is never stored or
    released; a ``(secret_key, label)`` pair feeds exactly one consumer (two consumers of the same stream
    would get the same words). Refuses to be used in a process forked after creation (the child would replay
    the parent's words).
    """

    secure = True

    def __init__(self, secret_key: bytes, label: bytes) -> None:
        if not isinstance(secret_key, (bytes, bytearray)) or len(secret_key) < 16:
            raise InvalidParameterError("secret_key must be at least 16 bytes from the secure source")
        if not isinstance(label, (bytes, bytearray)):
            raise InvalidParameterError(f"label must be bytes, got {type(label).__name__}")
        self._secret = bytes(secret_key)
        self._label = bytes(label)
        self._root_pid = os.getpid()
        super().__init__()

    def _key_material(self) -> bytes:
        import hmac

        if os.getpid() != self._root_pid:
            raise RuntimeError("a SecretKeyedStream must not be used in a forked child (it would replay "
                               "its parent's stream); create it where it is used")
        key = hmac.new(self._secret, b"sparsedp keyed stream" + self._label, hashlib.sha256).digest()
        iv = hmac.new(self._secret, b"sparsedp keyed iv" + self._label, hashlib.sha256).digest()[:16]
        return key + iv

    def _fill(self, out: np.ndarray) -> None:
        # Deterministic: no volume-based re-keying (the output must not depend on request sizes).
        self._out = 0
        super()._fill(out)

    def __repr__(self) -> str:
        return f"SecretKeyedStream(label={self._label!r})"


_DEFAULT: SecureRandom | None = None
_DEFAULT_LOCK = threading.Lock()


def default_source() -> SecureRandom:
    """The process-wide secure source (created on first use; fork-safe, thread-safe)."""
    global _DEFAULT
    if _DEFAULT is None:
        with _DEFAULT_LOCK:
            if _DEFAULT is None:
                _DEFAULT = SecureRandom()
    return _DEFAULT


def _reset_after_fork() -> None:
    global _DEFAULT_LOCK
    _DEFAULT_LOCK = threading.Lock()
    for src in list(_live_sources):
        src._after_fork_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)
