"""The Misra–Gries sketch in the exact variant the privacy analysis needs (thesis Algorithm 12).

Source: Lebeda, *Differentially Private Release of Sparse and Skewed Data* (PhD thesis, 2023), Chapter 3
= Lebeda & Tětek, PODS 2023; After Lebeda (2023) §1.2. The update rule::

    T <- {d+1, ..., d+k}, c <- 0                      # k dummy keys outside the universe U
    for x in S:
        if x in T:                  c_x += 1          # Branch 1
        elif all c_i >= 1:          c_i -= 1 for all i  # Branch 2 (x is discarded; gamma += 1)
        else: y <- SMALLEST key with c_y = 0           # Branch 3
              T <- T + {x} - {y};   c_x <- 1

Three details matter for the sensitivity analysis (Lemma 3.1) and are implemented literally:
exactly ``k`` keys are always stored (zero counters are kept until their slot is needed), the ``k``
dummies lie outside the universe (here: tagged slots that no stream item can equal, ordered after every
real key and among themselves by index), and the zero-count key evicted is the smallest in a fixed,
stream-independent order (integer keys: their value; other keys: a fixed public 64-bit pre-hash, see
below). Fact 3.1 [BKMT03]: every estimate satisfies ``f(x) - n/(k+1) <= c_x <= f(x)``; Lemma 3.1: the
sketches of neighbouring streams differ either by -1 on all ``k`` counters or by +1 on one counter.

**Chunking is exact.** :meth:`MisraGries.update` feeds the items one by one, in stream order, through a
compiled kernel (numba when installed, otherwise the same function interpreted, which is slow); the
state persists between calls, so any chunking of a stream gives *exactly* the sketch of the sequential
algorithm (tested against a literal transcription, :func:`reference_algorithm12`). A sketch built by
:meth:`update` therefore may be released with Algorithm 13 (:mod:`sparsedp.sketches.private_mg`).
Sketches combined with :meth:`MisraGries.merge` (the [ACH+13] merge, thesis §3.7) are *merged*
sketches: their neighbours differ by up to ``k`` counters (Corollary 3.2), so they must be released
with the merged-sketch analysis (CSH or Laplace(k/ε)), never with Algorithm 13; :attr:`merged` says which.

Speed: the kernel keeps a key -> slot open-addressing table (O(1) per item), decrements all counters
in O(k) (at most ``n/(k+1)`` times, so O(1) amortised), and keeps the zero-count slots in a list sorted
at each decrement: between decrements no counter becomes zero, so "smallest zero key" is the next live
entry of that list. Memory is O(k) whatever the stream length.

Keys: integer keys (numpy/Arrow/Polars integer columns, Python ints) are used as they are. Any other key
(str, bytes, float, tuples of those, None) is mapped to a 64-bit code by a fixed public pre-hash
(BLAKE2b of a canonical encoding); the original of each *stored* key is kept next to it. The stream of
codes is a fixed function of the stream, so every sensitivity statement holds for it; two distinct keys
whose codes collide (probability about D^2 / 2^65 for D distinct keys) are counted as one.
"""

from __future__ import annotations

import hashlib
import struct
from typing import Any, Iterable

import numpy as np

from .. import _validate as v
from ..core.histogram import SparseHistogram
from ..errors import InputDataError, InvalidParameterError, InvalidTypeError

try:  # numba is optional: it only makes the identical kernel fast
    import importlib.util as _ilu
    _numba = _ilu.find_spec("numba")
except ImportError:  # pragma: no cover
    _numba = None
if _numba is not None:  # imported lazily by _kernel() (keeps `import sparsedp.sketches` light)
    class _LazyNumba:
        def __getattr__(self, name):
            import numba
            return getattr(numba, name)
    _numba = _LazyNumba()

__all__ = ["MisraGries", "reference_algorithm12", "key_code"]

_MAGIC = "sparsedp.misra-gries"
_FORMAT_VERSION = "1"
_CHUNK = 1 << 18


# ------------------------------------------------------------------------------------------------
# The kernel: plain Python over numpy arrays, compiled by numba when available.
# ------------------------------------------------------------------------------------------------

_HASH_MULT = np.uint64(0x9E3779B97F4A7C15)


def _home(key, shift):
    return np.int64((np.uint64(key) * _HASH_MULT) >> np.uint64(shift))


def _lookup(table, keys, key, shift, mask):
    i = _home(key, shift)
    while True:
        s = table[i]
        if s < 0:
            return -1
        if keys[s] == key:
            return s
        i = (i + 1) & mask


def _insert(table, key, slot, shift, mask):
    i = _home(key, shift)
    while table[i] >= 0:
        i = (i + 1) & mask
    table[i] = slot


def _delete(table, keys, key, shift, mask):
    i = _home(key, shift)
    while keys[table[i]] != key:
        i = (i + 1) & mask
    # backward-shift deletion keeps linear probing correct without tombstones
    j = i
    while True:
        j = (j + 1) & mask
        s = table[j]
        if s < 0:
            break
        h = _home(keys[s], shift)
        if ((j - h) & mask) >= ((j - i) & mask):
            table[i] = s
            i = j
    table[i] = -1


def _update(items, keys, dummy, cnt, table, zl, meta, shift):
    """Run Algorithm 12 over ``items`` (int64), mutating the state arrays in place.

    meta = [zp, zn, gamma, n]: zl[zp:zn] lists the zero-count slots in eviction order (entries whose
    counter became positive again are skipped lazily).
    """
    mask = table.shape[0] - 1
    k = keys.shape[0]
    zp = meta[0]
    zn = meta[1]
    gamma = meta[2]
    for t in range(items.shape[0]):
        x = items[t]
        s = _lookup(table, keys, x, shift, mask)
        if s >= 0:  # Branch 1
            cnt[s] += 1
            continue
        while zp < zn and cnt[zl[zp]] != 0:
            zp += 1
        if zp == zn:  # Branch 2: every counter >= 1; x is discarded
            gamma += 1
            zp = 0
            zn = 0
            for j in range(k):
                cnt[j] -= 1
                if cnt[j] == 0:
                    zl[zn] = j
                    zn += 1
            # after a decrement every stored key is real (a dummy has count 0, so none was left)
            if zn > 1:
                order = np.argsort(keys[zl[:zn]])
                zl[:zn] = zl[:zn][order]
        else:  # Branch 3: replace the smallest zero-count key
            y = zl[zp]
            zp += 1
            if dummy[y] == 0:
                _delete(table, keys, keys[y], shift, mask)
            keys[y] = x
            dummy[y] = 0
            cnt[y] = 1
            _insert(table, x, y, shift, mask)
    meta[0] = zp
    meta[1] = zn
    meta[2] = gamma
    meta[3] += items.shape[0]


_COMPILED: list = []


def _kernel():
    """The Algorithm-12 update function: numba-compiled on first use when numba is installed (the helpers
    are rebound to their compiled versions, which the compiled ``_update`` calls), else interpreted."""
    if not _COMPILED:
        g = globals()
        if _numba is not None:
            jit = _numba.njit(cache=True, nogil=True)
            for name in ("_home", "_lookup", "_insert", "_delete", "_update"):
                g[name] = jit(g[name])
            _COMPILED.append(g["_update"])
        else:  # interpreted: uint64 products wrap by design, as they do in the compiled kernel
            def _update_interpreted(*args, _f=g["_update"]):
                with np.errstate(over="ignore"):
                    return _f(*args)
            _update_interpreted.py_func = g["_update"]
            _COMPILED.append(_update_interpreted)
    return _COMPILED[0]


def have_compiled_kernel() -> bool:
    """True when the fast (numba) kernel is available; results are identical either way."""
    return _numba is not None


# ------------------------------------------------------------------------------------------------
# Key codes for non-integer keys
# ------------------------------------------------------------------------------------------------

def _canon(x: Any) -> bytes:
    """Canonical, type-tagged byte encoding of a key (injective on the supported types)."""
    if isinstance(x, bool) or type(x).__name__ == "bool_":
        return b"?" + (b"1" if x else b"0")
    if isinstance(x, (int, np.integer)):
        return b"i" + str(int(x)).encode()
    if isinstance(x, str):
        return b"s" + x.encode("utf-8")
    if isinstance(x, (bytes, bytearray, memoryview)):
        return b"b" + bytes(x)
    if isinstance(x, (float, np.floating)):
        return b"f" + struct.pack("<d", float(x))
    if x is None:
        return b"n"
    if isinstance(x, tuple):
        parts = [_canon(p) for p in x]
        return b"t" + b"".join(struct.pack("<I", len(p)) + p for p in parts)
    raise InvalidTypeError(f"Misra-Gries keys must be int, str, bytes, float, None or tuples of those, "
                           f"got {type(x).__name__}")


def _decanon(b: bytes) -> Any:
    tag, body = b[:1], b[1:]
    if tag == b"?":
        return body == b"1"
    if tag == b"i":
        return int(body.decode())
    if tag == b"s":
        return body.decode("utf-8")
    if tag == b"b":
        return bytes(body)
    if tag == b"f":
        return struct.unpack("<d", body)[0]
    if tag == b"n":
        return None
    if tag == b"t":
        out, i = [], 0
        while i < len(body):
            (ln,) = struct.unpack_from("<I", body, i)
            out.append(_decanon(body[i + 4:i + 4 + ln]))
            i += 4 + ln
        return tuple(out)
    raise InputDataError(f"corrupt key encoding {b[:16]!r}")


def key_code(x: Any) -> int:
    """The public 64-bit code of a non-integer key: BLAKE2b-64 of its canonical encoding (signed int64)."""
    h = hashlib.blake2b(_canon(x), digest_size=8, person=b"sparsedp-mg-key").digest()
    return int.from_bytes(h, "little", signed=True)


# ------------------------------------------------------------------------------------------------
# Input normalisation: every input becomes a sequence of int64 code chunks (plus originals if hashed)
# ------------------------------------------------------------------------------------------------

def _is_int_array(a: np.ndarray) -> bool:
    return a.dtype.kind in "iu"


def _as_numpy(chunk: Any) -> np.ndarray | list:
    """A numpy array (integer columns, zero-copy where possible) or a Python list of keys."""
    mod = type(chunk).__module__
    if isinstance(chunk, np.ndarray):
        return chunk
    if mod.startswith("pyarrow"):
        import pyarrow as pa
        if isinstance(chunk, pa.ChunkedArray):
            chunk = chunk.combine_chunks()
        if chunk.null_count:
            raise InputDataError("Misra-Gries input column contains nulls; drop or fill them first")
        if pa.types.is_integer(chunk.type):
            return chunk.to_numpy(zero_copy_only=False)
        return chunk.to_pylist()
    if mod.startswith("polars"):
        if chunk.null_count():
            raise InputDataError("Misra-Gries input column contains nulls; drop or fill them first")
        if chunk.dtype.is_integer():
            return chunk.to_numpy()
        return chunk.to_list()
    if mod.startswith("pandas"):
        return _as_numpy(chunk.to_numpy())
    return list(chunk)


class MisraGries:
    """A Misra–Gries sketch of size ``k`` (thesis Algorithm 12), streaming, mergeable and serialisable.

    >>> mg = MisraGries(2).update([1, 1, 2, 3, 1])   # 3 arrives when no counter is 0: a decrement
    >>> mg.counters(), mg.gamma
    ({1: 2}, 1)

    Args:
        k: number of counters (the sketch stores exactly ``k`` keys; memory O(k)).
        keys: ``"int"`` (integer keys used directly), ``"hashed"`` (any supported key, pre-hashed to a
            64-bit code), or ``None`` to decide from the first data seen (integer data -> ``"int"``).
    """

    def __init__(self, k: int, *, keys: str | None = None):
        self._k = v.integer("k", k, lo=1)
        if keys is not None:
            v.choice("keys", keys, ("int", "hashed"))
        self._key_type = keys
        self._originals: dict[int, Any] = {}
        self._merged: dict[int, int] | None = None  # set for merged (standard) sketches
        self._n = 0
        k = self._k
        self._keys = np.arange(k, dtype=np.int64)  # a dummy slot holds its dummy index
        self._dummy = np.ones(k, dtype=np.uint8)
        self._cnt = np.zeros(k, dtype=np.int64)
        bits = max(4, int(4 * k - 1).bit_length())  # table size >= 4k keeps probe sequences short
        self._shift = 64 - bits
        self._table = np.full(1 << bits, -1, dtype=np.int64)
        self._zl = np.arange(k, dtype=np.int64)
        self._meta = np.array([0, k, 0, 0], dtype=np.int64)

    # -- properties ------------------------------------------------------------------------------
    @property
    def k(self) -> int:
        """Sketch size (number of counters)."""
        return self._k

    @property
    def n(self) -> int:
        """Stream length seen (for merged sketches: the total length N of all merged streams)."""
        return int(self._meta[3]) if self._merged is None else self._n

    @property
    def gamma(self) -> int | None:
        """Number of Branch-2 (decrement) executions; ``None`` for merged sketches. gamma <= n/(k+1)."""
        return int(self._meta[2]) if self._merged is None else None

    @property
    def merged(self) -> bool:
        """True for sketches produced by :meth:`merge` (release only with the merged-sketch analysis)."""
        return self._merged is not None

    @property
    def key_type(self) -> str | None:
        return self._key_type

    # -- updating --------------------------------------------------------------------------------
    def update(self, items: Any, *, chunk_size: int = _CHUNK) -> "MisraGries":
        """Process ``items`` in stream order: a numpy array, an Arrow array/ChunkedArray, a Polars or
        pandas Series, a list, or any iterator (consumed lazily in chunks of ``chunk_size``).
        Returns ``self``."""
        if self._merged is not None:
            raise InvalidParameterError("a merged sketch cannot be updated with stream items; update the "
                                        "per-stream sketches and merge them again")
        chunk_size = v.integer("chunk_size", chunk_size, lo=1)
        mod = type(items).__module__
        if isinstance(items, (np.ndarray, list, tuple)) or mod.startswith(("pyarrow", "polars", "pandas")):
            self._update_chunk(_as_numpy(items))
            return self
        if isinstance(items, (str, bytes)):
            raise InvalidTypeError("items must be a collection of keys, not a single str/bytes")
        it = iter(items)
        while True:
            buf = []
            for x in it:
                buf.append(x)
                if len(buf) >= chunk_size:
                    break
            if not buf:
                return self
            self._update_chunk(buf)

    def update_chunks(self, chunks: Iterable[Any]) -> "MisraGries":
        """Process an iterable of chunks (arrays, Arrow arrays or record batches' columns, Series), in order."""
        for c in chunks:
            self.update(c)
        return self

    def _codes(self, data: np.ndarray | list) -> tuple[np.ndarray, list | None]:
        """int64 codes of a chunk, and the originals (hashed mode only)."""
        if isinstance(data, np.ndarray) and data.dtype == object:
            data = data.tolist()
        if isinstance(data, list):
            if self._key_type != "hashed" and all(type(x) is int or isinstance(x, np.integer) for x in data):
                try:
                    arr = np.array(data, dtype=np.int64) if data else np.zeros(0, np.int64)
                except OverflowError:
                    arr = None
                if arr is not None:
                    data = arr
        if isinstance(data, np.ndarray) and _is_int_array(data):
            if self._key_type is None:
                self._key_type = "int"
            if self._key_type == "int":
                if data.dtype == np.uint64 and data.size and int(data.max()) >= 2 ** 63:
                    raise InputDataError("integer keys must fit in int64")
                return np.ascontiguousarray(data, dtype=np.int64), None
            data = data.tolist()
        if isinstance(data, np.ndarray):
            data = data.tolist()
        if self._key_type == "int":
            raise InputDataError("this sketch holds integer keys (keys='int'); got non-integer items. "
                                 "Create it with keys='hashed' to mix key types")
        self._key_type = "hashed"
        codes = np.fromiter((key_code(x) for x in data), dtype=np.int64, count=len(data))
        return codes, data

    def _update_chunk(self, data: np.ndarray | list) -> None:
        codes, originals = self._codes(data)
        if codes.size == 0:
            return
        _kernel()(codes, self._keys, self._dummy, self._cnt, self._table, self._zl, self._meta, self._shift)
        if originals is not None:
            self._refresh_originals(codes, originals)

    def update_codes(self, codes: np.ndarray, distinct_codes: np.ndarray | None = None,
                     distinct_keys: list | None = None) -> "MisraGries":
        """Process ready-made int64 ``codes`` in stream order (the batched path of
        :mod:`sparsedp.sketches.partitions`). Integer keys: ``codes`` are the keys and ``distinct_keys`` is
        None. Hashed keys: ``distinct_codes[i] == key_code(distinct_keys[i])`` covers every code of the batch,
        so the originals of the stored keys are kept. Exactly :meth:`update` on the same items."""
        if self._merged is not None:
            raise InvalidParameterError("a merged sketch cannot be updated with stream items")
        mode = "int" if distinct_keys is None else "hashed"
        if self._key_type not in (None, mode):
            raise InputDataError(f"this sketch holds {self._key_type} keys; got {mode} keys")
        self._key_type = mode
        codes = np.ascontiguousarray(codes, dtype=np.int64)
        if codes.size == 0:
            return self
        _kernel()(codes, self._keys, self._dummy, self._cnt, self._table, self._zl, self._meta, self._shift)
        if distinct_keys is not None:
            stored = self._keys[self._dummy == 0]
            live = set(stored.tolist())
            for c in [c for c in self._originals if c not in live]:
                del self._originals[c]
            need = stored[~np.isin(stored, np.fromiter(self._originals, np.int64, len(self._originals)))]
            if need.size:
                pos = np.flatnonzero(np.isin(distinct_codes, need))
                for p in pos.tolist():
                    self._originals[int(distinct_codes[p])] = distinct_keys[p]
        return self

    def _refresh_originals(self, codes: np.ndarray, originals: list) -> None:
        stored = set(self._keys[self._dummy == 0].tolist())
        for c in list(self._originals):
            if c not in stored:
                del self._originals[c]
        missing = np.fromiter((c for c in stored if c not in self._originals), dtype=np.int64)
        if missing.size:
            pos = np.flatnonzero(np.isin(codes, missing))
            for p in pos.tolist():
                c = int(codes[p])
                if c not in self._originals:
                    self._originals[c] = originals[p]

    # -- reading ---------------------------------------------------------------------------------
    def _key(self, code: int) -> Any:
        return code if self._key_type != "hashed" else self._originals[code]

    def _code(self, key: Any) -> int:
        if self._key_type == "hashed":
            return key_code(key)
        if isinstance(key, bool) or not isinstance(key, (int, np.integer)):
            raise InvalidTypeError(f"this sketch holds integer keys, got {type(key).__name__}")
        return int(key)

    def _state(self) -> dict[int, int]:
        """code -> counter of the stored real keys (zero counters included for Algorithm-12 sketches)."""
        if self._merged is not None:
            return dict(self._merged)
        real = self._dummy == 0
        return dict(zip(self._keys[real].tolist(), self._cnt[real].tolist()))

    def estimate(self, key: Any) -> int:
        """The sketch's estimate f̂(key) (0 when not stored); f(x) - n/(k+1) <= f̂(x) <= f(x)."""
        return int(self._state().get(self._code(key), 0))

    def counters(self, *, include_zero: bool = False) -> dict[Any, int]:
        """{key: counter} of the stored real keys, sorted by key code (dummies never appear)."""
        st = self._state()
        return {self._key(c): st[c] for c in sorted(st) if include_zero or st[c] > 0}

    def dummy_slots(self) -> int:
        """Number of dummy keys still stored (they are always dropped before output)."""
        return 0 if self._merged is not None else int(self._dummy.sum())

    def slot_arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(codes, counts, is_dummy) of all k slots in code order (Algorithm-12 sketches); for Algorithm 13."""
        if self._merged is not None:
            raise InvalidParameterError("a merged sketch has no Algorithm-12 slots")
        order = np.lexsort((self._keys, self._dummy))
        return self._keys[order].copy(), self._cnt[order].copy(), self._dummy[order].astype(bool)

    def to_histogram(self) -> SparseHistogram:
        """The positive counters as a :class:`~sparsedp.core.histogram.SparseHistogram` (key order)."""
        c = self.counters()
        return SparseHistogram(keys=list(c.keys()), counts=np.fromiter(c.values(), np.int64, len(c)))

    def standard(self) -> dict[int, int]:
        """code -> counter with zero counters dropped (the 'standard' MG summary the merge works on)."""
        return {c: x for c, x in self._state().items() if x > 0}

    # -- merging ([ACH+13], thesis §3.7) -----------------------------------------------------------
    def merge(self, other: "MisraGries") -> "MisraGries":
        """The mergeable-summaries merge [ACH+13] (thesis §3.7): add counters, subtract the (k+1)-th
        largest, drop non-positive ones. At most k keys remain and every estimate lies in
        [f(x) - N/(k+1), f(x)] with N the total stream length, for any merge order.

        The result is a *merged* sketch: neighbouring datasets give counters that differ by +1 (or by -1)
        on at most k keys (Corollary 3.2, Lemma 3.6), a k-sparse monotonic histogram (Lebeda & Retschmeier (2024) Def. 3.1).
        """
        if not isinstance(other, MisraGries):
            raise InvalidTypeError(f"can only merge with a MisraGries sketch, got {type(other).__name__}")
        if other.k != self.k:
            raise InvalidParameterError(f"cannot merge sketches of different sizes k={self.k} and k={other.k}")
        kt = {t for t in (self.key_type, other.key_type) if t is not None}
        if len(kt) > 1:
            raise InvalidParameterError("cannot merge a sketch of integer keys with one of hashed keys")
        s: dict[int, int] = self.standard()
        for c, x in other.standard().items():
            s[c] = s.get(c, 0) + x
        if len(s) > self.k:
            vth = sorted(s.values(), reverse=True)[self.k]  # (k+1)-th largest
            s = {c: x - vth for c, x in s.items() if x - vth > 0}
        out = MisraGries(self.k, keys=kt.pop() if kt else None)
        out._merged = dict(sorted(s.items()))
        out._n = self.n + other.n
        out._originals = {c: (self._originals.get(c) if c in self._originals else other._originals.get(c))
                          for c in s} if out._key_type == "hashed" else {}
        return out

    @classmethod
    def merge_all(cls, sketches: Iterable["MisraGries"]) -> "MisraGries":
        """Left fold of :meth:`merge` over ``sketches`` (a fixed, data-independent merge order)."""
        it = iter(sketches)
        try:
            acc = next(it)
        except StopIteration:
            raise InvalidParameterError("merge_all needs at least one sketch") from None
        for s in it:
            acc = acc.merge(s)
        return acc

    # -- serialisation -------------------------------------------------------------------------------
    def to_arrow(self):
        """The full state as a ``pyarrow.Table`` (columns code, count, dummy, key; state in metadata)."""
        import pyarrow as pa
        if self._merged is not None:
            codes = np.fromiter(self._merged.keys(), np.int64, len(self._merged))
            counts = np.fromiter(self._merged.values(), np.int64, len(self._merged))
            dummy = np.zeros(codes.size, dtype=bool)
        else:
            codes, counts, dummy = self.slot_arrays()
        enc = [None if d else (_canon(self._originals[c]) if self._key_type == "hashed" else None)
               for c, d in zip(codes.tolist(), dummy.tolist())]
        meta = {"format": _MAGIC, "version": _FORMAT_VERSION, "k": str(self.k), "n": str(self.n),
                "gamma": "" if self.gamma is None else str(self.gamma),
                "merged": "1" if self.merged else "0", "key_type": self._key_type or ""}
        table = pa.table({"code": pa.array(codes, pa.int64()), "count": pa.array(counts, pa.int64()),
                          "dummy": pa.array(dummy, pa.bool_()), "key": pa.array(enc, pa.binary())})
        return table.replace_schema_metadata(meta)

    @classmethod
    def from_arrow(cls, table) -> "MisraGries":
        """Rebuild a sketch from :meth:`to_arrow` output (validated)."""
        meta = {k.decode(): x.decode() for k, x in (table.schema.metadata or {}).items()}
        if meta.get("format") != _MAGIC or meta.get("version") != _FORMAT_VERSION:
            raise InputDataError("not a sparsedp Misra-Gries sketch (format/version metadata missing)")
        out = cls(int(meta["k"]), keys=meta["key_type"] or None)
        codes = np.asarray(table.column("code").to_numpy(), dtype=np.int64)
        counts = np.asarray(table.column("count").to_numpy(), dtype=np.int64)
        dummy = np.asarray(table.column("dummy").to_numpy(zero_copy_only=False), dtype=bool)
        enc = table.column("key").to_pylist()
        if counts.size and counts.min() < 0:
            raise InputDataError("corrupt sketch: negative counter")
        if out._key_type == "hashed":
            out._originals = {c: _decanon(e) for c, e, d in zip(codes.tolist(), enc, dummy.tolist()) if not d}
        if meta["merged"] == "1":
            if codes.size > out.k:
                raise InputDataError("corrupt sketch: more than k counters")
            out._merged = dict(zip(codes.tolist(), counts.tolist()))
            out._n = int(meta["n"])
            return out
        if codes.size != out.k:
            raise InputDataError(f"corrupt sketch: {codes.size} slots for k={out.k}")
        out._restore(codes, counts, dummy, int(meta["n"]), int(meta["gamma"]))
        return out

    def _restore(self, codes: np.ndarray, counts: np.ndarray, dummy: np.ndarray, n: int, gamma: int) -> None:
        if np.any(counts[dummy] != 0):
            raise InputDataError("corrupt sketch: a dummy key has a non-zero counter")
        self._keys = codes.copy()
        self._dummy = dummy.astype(np.uint8)
        self._cnt = counts.copy()
        self._table[:] = -1
        _kernel()
        with np.errstate(over="ignore"):
            for slot in np.flatnonzero(~dummy).tolist():
                _insert(self._table, np.int64(self._keys[slot]), slot, self._shift, self._table.size - 1)
        zero = np.flatnonzero(self._cnt == 0)
        zero = zero[np.lexsort((self._keys[zero], self._dummy[zero]))]  # real keys by value, then dummies
        self._zl = np.zeros(self.k, dtype=np.int64)
        self._zl[:zero.size] = zero
        self._meta = np.array([0, zero.size, gamma, n], dtype=np.int64)

    def to_bytes(self) -> bytes:
        """Serialise (Arrow IPC stream of :meth:`to_arrow`)."""
        import pyarrow as pa
        sink = pa.BufferOutputStream()
        table = self.to_arrow()
        with pa.ipc.new_stream(sink, table.schema) as w:
            w.write_table(table)
        return sink.getvalue().to_pybytes()

    @classmethod
    def from_bytes(cls, data: bytes) -> "MisraGries":
        """Inverse of :meth:`to_bytes`."""
        import pyarrow as pa
        try:
            table = pa.ipc.open_stream(pa.py_buffer(data)).read_all()
        except (pa.ArrowInvalid, OSError) as e:
            raise InputDataError(f"not a serialised Misra-Gries sketch: {e}") from None
        return cls.from_arrow(table)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MisraGries):
            return NotImplemented
        if self.merged != other.merged or self.k != other.k or self.n != other.n or self.gamma != other.gamma:
            return False
        if self.merged:
            return self._merged == other._merged
        return all(np.array_equal(a, b) for a, b in zip(self.slot_arrays(), other.slot_arrays()))

    def __repr__(self) -> str:
        kind = "merged" if self.merged else "algorithm-12"
        return f"MisraGries(k={self.k}, n={self.n}, {kind}, {len(self.standard())} positive counters)"


# ------------------------------------------------------------------------------------------------
# Literal transcription (test oracle)
# ------------------------------------------------------------------------------------------------

def reference_algorithm12(stream: Iterable[int], k: int, order=None) -> tuple[dict, int]:
    """Algorithm 12 exactly as printed (O(k) per item): returns ({key: counter}, gamma).

    Dummies are the tuples ``("dummy", j)``; ``order`` maps a real key to its sort key (default: the key
    itself); dummies come after every real key. Used as the oracle for the fast kernel.
    """
    order = order or (lambda x: x)
    T = {("dummy", j): 0 for j in range(k)}
    gamma = 0

    def rank(key):
        return (1, key[1]) if isinstance(key, tuple) and key[:1] == ("dummy",) else (0, order(key))

    for x in stream:
        if x in T:
            T[x] += 1
        elif all(c >= 1 for c in T.values()):
            gamma += 1
            for key in T:
                T[key] -= 1
        else:
            y = min((key for key, c in T.items() if c == 0), key=rank)
            del T[y]
            T[x] = 1
    return T, gamma

