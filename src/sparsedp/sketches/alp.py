"""ALP: private representations of sparse vectors with Laplace-like error, optimal space and fast access.

Source: Lebeda thesis Chapter 2 = Aumüller, Lebeda, Pagh (CCS 2021, JPC 2022); spec
Lebeda (2023) (its §3 holds the pseudocode followed here line by line).
Neighbours (§2.2, Def. 2.1): non-negative k-sparse vectors with ‖x − x′‖₁ ≤ 1 (histograms: one count
changes by one).

What is here, by algorithm number:

* Alg. 1 (:func:`laplace_mechanism`): dense baseline.
* Alg. 2/4 (:func:`alp_projection`): y_i = RandRound(ε·x_i/α); bit (h_b(i), b) set for b ≤ y_i
  (m = ⌈ψε/α⌉ columns, s rows, one independent Carter–Wegman hash per column); randomized response with
  p = 1/(α+2) (rounded *up* to a multiple of 2^-64) on all s·m cells. ε-DP (Lemmas 2.4, 2.15): the
  probability ratio of any output is ≤ e^{ε‖x − x′‖₁} for every fixed hash.
* Alg. 3/5 (:func:`alp1_estimate`): average of all maximisers of the prefix sums f(n) = Σ_{a≤n}(2z̃ − 1),
  times α/ε, clamped to [0, u].
* Alg. 6 (Threshold, pure) and Alg. 9 (Threshold2, approximate DP), combined with Alg. 4 as Alg. 7/8
  (ψ = t, m = ⌈t·ε₂/α⌉, queries read the threshold map first): :meth:`ALP.build` with
  ``variant="threshold"``.
* Alg. 10 (Histogram-Projection): integer inputs, no scaling, RR with p = 1/(e^ε + 1).
* Alg. 11 (Max-Projection, O(1) access): :class:`MaxProjection`.
* §2.6 logarithmic ALP (multiplicative error): ``variant="log"`` (ẋ = max(log_B(x ln B), 0), B from
  Lemma 2.29, decode B^ẍ / ln B).

* §2.10 signed values with 2m columns: ``variant="signed"`` (or the §2.2 reduction: one ALP over keys
  (i, +) and (i, −), which :func:`sparsedp.alp` uses by default for signed sums).

Memory: the s × m noisy bits are built in streamed blocks of columns and stored packed (s·m/8 bytes,
:func:`memory_bytes`); :meth:`ALP.build` refuses a structure above ``max_memory`` before drawing anything.

Secure by default: RandRound and randomized response draw 64-bit uniforms from the ``sparsedp.noise``
source; Laplace noise on integer data is the exact discrete Laplace; continuous Laplace (real-valued
inputs to Alg. 1/6/9/11) only with ``insecure_float=True``. Hash keys come from the same source and are
released with the structure (privacy holds for every fixed hash function, spec §2.2).

:func:`experiment_2_9` reproduces the thesis §2.9 simulation (Fig. 2.4 numbers).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Mapping

import numpy as np

from .. import _validate as v
from ..errors import InputDataError, InvalidParameterError
from ..noise.source import default_source
from ._noise import discrete_laplace, laplace
from .misra_gries import _canon

__all__ = [
    "ALP", "HashFamily", "MaxProjection", "bucket_max", "rand_round", "alp_projection", "alp_projection_packed",
    "memory_bytes", "check_memory", "alp1_estimate", "alp1_estimate_definition",
    "laplace_mechanism", "cell_probabilities", "log_base", "projection_max_privacy_loss", "error_bound",
    "experiment_2_9", "P61",
]

P61 = (1 << 61) - 1  # Mersenne prime for the Carter–Wegman family
_M61 = np.uint64(P61)
_TWO64 = 1 << 64


# ------------------------------------------------------------------------------------------------
# Hashing: h_b(i) = ((a_b·i + c_b) mod P) mod s, independent (a_b, c_b) per column (spec §2.2, A15)
# ------------------------------------------------------------------------------------------------

def key_code(key: Any) -> int:
    """Public pre-hash of a key into [0, 2^61 − 1): integers in range are used as they are."""
    if isinstance(key, (int, np.integer)) and not isinstance(key, bool) and 0 <= int(key) < P61:
        return int(key)
    h = hashlib.blake2b(_canon(key), digest_size=8, person=b"sparsedp-alp-key").digest()
    return int.from_bytes(h, "little") % P61


def _mulmod61(a: np.ndarray, x: np.ndarray) -> np.ndarray:
    """(a·x) mod (2^61 − 1) for uint64 arrays with a, x < 2^61, without overflow."""
    lo32 = np.uint64(0xFFFFFFFF)
    a_lo, a_hi = a & lo32, a >> np.uint64(32)
    x_lo, x_hi = x & lo32, x >> np.uint64(32)
    lo = a_lo * x_lo                      # < 2^64
    mid = a_lo * x_hi + a_hi * x_lo       # < 2^62
    hi = a_hi * x_hi                      # < 2^58
    # 2^64 ≡ 8 and 2^61 ≡ 1 (mod P61)
    s = (hi << np.uint64(3)) + (mid >> np.uint64(29)) + ((mid & np.uint64((1 << 29) - 1)) << np.uint64(32)) \
        + (lo & _M61) + (lo >> np.uint64(61))
    s = (s & _M61) + (s >> np.uint64(61))
    return np.where(s >= _M61, s - _M61, s)


def _uniform_below(n: int, size: int, src) -> np.ndarray:
    """``size`` independent uniform integers on [0, n) for 2^60 < n <= 2^61 (uint64), exactly: 61-bit words by
    rejection (each word is kept with probability n / 2^61 > 1/2)."""
    out = np.empty(size, dtype=np.uint64)
    done = 0
    while done < size:
        w = src.uint64(size - done) >> np.uint64(3)
        w = w[w < np.uint64(n)]
        out[done:done + w.size] = w
        done += w.size
    return out


class HashFamily:
    """m independent Carter–Wegman universal hash functions into [s] (keys drawn from a secure source)."""

    def __init__(self, m: int, s: int, rng=None, *, a: np.ndarray | None = None, c: np.ndarray | None = None):
        self.m = int(m)
        self.s = int(s)
        if a is None:
            src = rng if rng is not None else default_source()
            a = 1 + _uniform_below(P61 - 1, self.m, src)
            c = _uniform_below(P61, self.m, src)
        self.a = np.asarray(a, dtype=np.uint64)
        self.c = np.asarray(c, dtype=np.uint64)
        self._a_py = [int(x) for x in self.a]
        self._c_py = [int(x) for x in self.c]

    def rows(self, codes: np.ndarray, lo: int = 0, hi: int | None = None) -> np.ndarray:
        """Row index h_b(i) for every code and every column b in ``lo..hi−1`` (default all m; shape
        len(codes) × (hi − lo)), vectorised."""
        hi = self.m if hi is None else hi
        a, c = self.a[lo:hi], self.c[lo:hi]
        x = np.asarray(codes, dtype=np.uint64)[:, None]
        shape = (x.shape[0], hi - lo)
        r = _mulmod61(np.broadcast_to(a, shape), np.broadcast_to(x, shape))
        r = r + c
        r = np.where(r >= _M61, r - _M61, r)
        return (r % np.uint64(self.s)).astype(np.int64)

    def __call__(self, code: int, b: int) -> int:
        """h_b(code) for one key and one column (0-based b): a constant number of word operations."""
        return ((self._a_py[b] * code + self._c_py[b]) % P61) % self.s

    def size_in_bits(self) -> int:
        return 2 * 61 * self.m


# ------------------------------------------------------------------------------------------------
# Exact-probability coins from the secure source
# ------------------------------------------------------------------------------------------------

def _uniform64(size: int, rng) -> np.ndarray:
    src = rng if rng is not None else default_source()
    return src.uint64(int(size)) if size else np.zeros(0, np.uint64)


def _prob_up(p: Fraction) -> int:
    """⌈p·2^64⌉: the numerator of the smallest multiple of 2^-64 that is ≥ p (conservative RR rounding)."""
    return -((-p.numerator * _TWO64) // p.denominator)


def _bernoulli(num: int, size: int, rng) -> np.ndarray:
    """Bernoulli(num / 2^64) bits, exactly, from one random byte per bit on average.

    With U = 2^56·H + L uniform on [0, 2^64) (H a uniform byte, L uniform on [0, 2^56), independent) and
    num = 2^56·n_H + n_L: U < num iff H < n_H, or H = n_H and L < n_L. So a uniform byte H decides each bit,
    except with probability 1/256 (H = n_H), when 56 more uniform bits L are drawn (the top 56 bits of a 64-bit
    word). The law is exactly that of ``uint64 < num`` at ~1/7 of the random bytes."""
    if num >= _TWO64:
        return np.ones(size, dtype=bool)
    if size == 0:
        return np.zeros(0, dtype=bool)
    src = rng if rng is not None else default_source()
    n_hi, n_lo = num >> 56, num & ((1 << 56) - 1)
    h = src.uint64((int(size) + 7) // 8).view(np.uint8)[: int(size)]  # uniform bytes, no copy
    out = h < n_hi
    tie = np.flatnonzero(h == n_hi)
    if tie.size:
        out[tie] = (src.uint64(tie.size) >> np.uint64(8)) < np.uint64(n_lo)
    return out


def rand_round(r: np.ndarray, rng=None) -> np.ndarray:
    """RandRound (spec §2.2): ⌈r⌉ with probability frac(r), else ⌊r⌋; frac is used on the 2^-64 grid."""
    r = np.asarray(r, dtype=np.float64)
    fl = np.floor(r)
    frac = r - fl
    num = np.minimum(np.floor(frac * 2.0 ** 64), 2.0 ** 64 - 2048).astype(np.uint64)
    return (fl + (_uniform64(r.size, rng) < num)).astype(np.int64)


# ------------------------------------------------------------------------------------------------
# Estimator (Alg. 3)
# ------------------------------------------------------------------------------------------------

def alp1_estimate(bits: Any) -> float:
    """Alg. 3 (single pass): the mean of all global maximisers n ∈ {0..m} of f(n) = Σ_{a≤n}(2 bit_a − 1)."""
    cur = best = sum_pos = 0
    cnt = 1
    for a, bit in enumerate(bits, start=1):
        cur += 1 if bit else -1
        if cur > best:
            best, sum_pos, cnt = cur, a, 1
        elif cur == best:
            sum_pos += a
            cnt += 1
    return sum_pos / cnt


def alp1_estimate_definition(bits: Any) -> float:
    """Alg. 3 as printed (prefix sums, argmax set P, average): the oracle for :func:`alp1_estimate`."""
    f = [0]
    for bit in bits:
        f.append(f[-1] + (2 * int(bool(bit)) - 1))
    mx = max(f)
    P = [n for n, val in enumerate(f) if val == mx]
    return sum(P) / len(P)


def _estimate_matrix(bits: np.ndarray) -> np.ndarray:
    """Alg. 3 for many rows at once: bits has shape (r, m); returns ỹ per row."""
    r, m = bits.shape
    f = np.zeros((r, m + 1), dtype=np.int32)
    np.cumsum(2 * bits.astype(np.int32) - 1, axis=1, out=f[:, 1:])
    mx = f.max(axis=1, keepdims=True)
    hit = f == mx
    pos = np.arange(m + 1, dtype=np.float64)
    return (hit * pos).sum(axis=1) / hit.sum(axis=1)


# ------------------------------------------------------------------------------------------------
# Projection (Alg. 2 / 4 / 10)
# ------------------------------------------------------------------------------------------------

def _as_sparse(data: Any, signed: bool = False) -> tuple[list, np.ndarray]:
    """(keys, values) from a mapping, a (keys, values) pair or a SparseHistogram; values >= 0 unless ``signed``."""
    if isinstance(data, Mapping):
        keys, vals = list(data.keys()), list(data.values())
    elif hasattr(data, "keys") and hasattr(data, "counts"):
        keys, vals = data.keys, data.counts
        if hasattr(keys, "to_pylist"):
            keys = keys.to_pylist()
        keys = list(keys)
    else:
        keys, vals = data
        keys = list(keys)
    vals = np.asarray(vals)
    if vals.ndim != 1 or vals.size != len(keys):
        raise InputDataError("data must give one value per key")
    if vals.dtype.kind not in "iuf":
        raise InputDataError(f"values must be numbers, got dtype {vals.dtype}")
    if vals.size and not np.all(np.isfinite(vals)):
        raise InputDataError("values must be finite")
    if vals.size and not signed and vals.min() < 0:
        raise InputDataError("values must be >= 0 (for negative values use variant='signed', Lebeda (2023) §2.10, or "
                             "the §2.2 reduction: keys (i, +) and (i, −))")
    keep = vals != 0
    return [k for k, kp in zip(keys, keep.tolist()) if kp], vals[keep]


def _set_bits(z: np.ndarray, rows: np.ndarray, y: np.ndarray, m: int) -> None:
    """z[b, h_b(i)] = 1 for b < min(y_i, m) (OR semantics; column-major z of shape (m, s))."""
    y = np.minimum(y, m)
    for b in range(m):  # O(k·m) work, vectorised over keys
        sel = y > b
        if not sel.any():
            break
        z[b, rows[sel, b]] = 1


#: cells of the bit matrix built (and randomised) at a time: bounds the working memory of a build to a few
#: times this many bytes on top of the packed result (s·m/8 bytes)
_BLOCK_CELLS = 1 << 24
#: (key, column) hash evaluations at a time (the modular arithmetic's temporaries: ~100 bytes each)
_HASH_CELLS = 1 << 20


def memory_bytes(s: int, m: int) -> int:
    """Bytes a built structure of ``s`` rows and ``m`` columns holds (its packed noisy bits, ⌈s/8⌉ per column,
    plus the two 8-byte hash keys per column); the build adds at most ~``16·2^24`` bytes of working memory
    (it streams :data:`_BLOCK_CELLS` cells at a time) and the input's keys."""
    return int(m) * ((int(s) + 7) // 8 + 16)


def check_memory(s: int, m: int, max_memory: float, variant: str) -> None:
    """Refuse (before anything is drawn) a structure of ``s`` rows and ``m`` columns above ``max_memory`` bytes,
    naming its size and what shrinks it."""
    need = memory_bytes(s, m)
    if need > max_memory:
        raise InvalidParameterError(
            f"the ALP structure would hold s·m = {s:,} x {m:,} bits = {need / 2 ** 30:.3g} GiB, above "
            f"max_memory={max_memory / 2 ** 30:.3g} GiB: m = ceil(u·epsilon/alpha) grows with the value bound u, "
            f"s = ceil(k/collision) with k. Lower u, raise alpha or collision, use delta > 0 (the threshold "
            f"variant: m from the threshold, not u){'' if variant != 'signed' else ', or the §2.2 reduction'}; or "
            f"pass max_memory= if the machine has the memory")


def alp_projection_packed(codes: np.ndarray, y: np.ndarray, hashes: HashFamily, p: Fraction, rng=None, *,
                          signed: bool = False) -> np.ndarray:
    """Alg. 2 steps 2–3 on already rounded integers y (Alg. 4 passes y = RandRound(ε·x/α)): the noisy bit
    matrix, column-major (m × s) and bit-packed along s (``np.packbits`` order), RR with probability
    ⌈p·2^64⌉/2^64 on every cell.

    Streamed over blocks of columns (:data:`_BLOCK_CELLS` cells): each block's pre-noise bits are set from the
    keys still active in it (those with y > the block's first column, hashed for its columns only), randomised
    and packed, so memory is the packed result plus one block, and hashing costs Σ_i min(y_i, m), not k·m.

    ``signed`` (thesis §2.10, 2m columns with ``hashes.m = 2m``): y ∈ [−m, m] and key i's code is
    1^{m+y_i} 0^{m−y_i}; columns 0..m−1 (the negative region) are 1 by default and a key with y_i < 0 clears
    columns m + y_i .. m − 1 (AND over colliding keys), columns m..2m−1 are 0 by default and a key with y_i > 0
    sets columns m .. m + y_i − 1 (OR)."""
    m_all, s = hashes.m, hashes.s
    codes = np.asarray(codes, dtype=np.uint64)
    y = np.asarray(y, dtype=np.int64)
    half = m_all // 2 if signed else 0
    # per key: its columns to write are [start, end) with value `val` (1 = set, 0 = clear)
    if signed:
        if m_all % 2:
            raise InvalidParameterError("the signed embedding needs an even number of columns (2m)")
        y = np.clip(y, -half, half)
        start = np.where(y > 0, half, half + y)
        end = np.where(y > 0, half + y, half)
    else:
        y = np.minimum(y, m_all)
        start, end = np.zeros_like(y), y
    live = end > start
    codes, start, end, y = codes[live], start[live], end[live], y[live]
    nb = (s + 7) // 8
    packed = np.empty((m_all, nb), dtype=np.uint8)
    p_num = _prob_up(p)
    block = max(1, _BLOCK_CELLS // max(s, 1))
    for b0 in range(0, m_all, block):
        b1 = min(m_all, b0 + block)
        z = np.zeros((b1 - b0, s), dtype=np.uint8)
        if signed and b0 < half:
            z[: min(b1, half) - b0] = 1
        act = np.flatnonzero((start < b1) & (end > b0))
        cols = np.arange(b0, b1, dtype=np.int64)[None, :]
        chunk = max(1, _HASH_CELLS // (b1 - b0))
        for c0 in range(0, act.size, chunk):  # the active keys, a bounded number of hash evaluations at a time
            a = act[c0:c0 + chunk]
            rows = hashes.rows(codes[a], b0, b1)
            hit = (start[a, None] <= cols) & (end[a, None] > cols)
            kk, jj = np.nonzero(hit)
            if signed:
                neg = jj + b0 < half
                z[jj[neg], rows[kk[neg], jj[neg]]] = 0
                z[jj[~neg], rows[kk[~neg], jj[~neg]]] = 1
            else:
                z[jj, rows[kk, jj]] = 1
        z ^= _bernoulli(p_num, z.size, rng).reshape(z.shape)
        packed[b0:b1] = np.packbits(z, axis=1)
    return packed


def alp_projection(codes: np.ndarray, y: np.ndarray, hashes: HashFamily, p: Fraction, rng=None, *,
                   signed: bool = False) -> np.ndarray:
    """:func:`alp_projection_packed`, unpacked to an (m × s) uint8 matrix (for small structures and tests)."""
    return np.unpackbits(alp_projection_packed(codes, y, hashes, p, rng, signed=signed), axis=1)[:, : hashes.s]


def laplace_mechanism(data: Any, d: int, *, epsilon: float, rng=None, insecure_float: bool = False) -> np.ndarray:
    """Alg. 1: the dense Laplace mechanism over keys 0..d−1 (baseline; Θ(d) space). Integer data get exact
    discrete Laplace(1/ε); real data need ``insecure_float=True``."""
    eps, d = v.epsilon(epsilon), v.integer("d", d)
    keys, vals = _as_sparse(data)
    x = np.zeros(d, dtype=vals.dtype if vals.size else np.int64)
    idx = np.asarray(keys, dtype=np.int64)
    if idx.size and (idx.min() < 0 or idx.max() >= d):
        raise InputDataError("keys must lie in 0..d-1")
    x[idx] = vals
    if x.dtype.kind in "iu":
        return x + discrete_laplace(Fraction(1) / Fraction(eps), d, rng)
    return x + laplace(1.0 / eps, d, rng, insecure_float)


# ------------------------------------------------------------------------------------------------
# The released structure
# ------------------------------------------------------------------------------------------------

@dataclass
class _Counters:
    bits_read: int = 0
    hash_evals: int = 0
    map_lookups: int = 0


class ALP:
    """A released ALP structure: hash functions, the noisy bit matrix and (optionally) a threshold map.

    Build with :meth:`ALP.build`; query with :meth:`estimate`. Everything stored is public output.
    ``probes`` counts bits read, hash evaluations and map look-ups (access-time instrumentation).
    """

    def __init__(self, *, variant: str, epsilon: float, epsilon_proj: float, alpha: float, psi: float,
                 u: float, hashes: HashFamily, bits: np.ndarray | None = None, p: Fraction, scale: float,
                 threshold_map: dict | None, params: dict, packed: np.ndarray | None = None):
        self.variant = variant
        self.epsilon = epsilon
        self.epsilon_proj = epsilon_proj
        self.alpha = alpha
        self.psi = psi
        self.u = u
        self.hashes = hashes
        self.m, self.s = hashes.m, hashes.s
        self.p = p
        self._scale = scale  # estimate = ỹ · scale  (α/ε for ALP, 1 for Alg. 10)
        if (bits is None) == (packed is None):
            raise InvalidParameterError("pass the noisy bits either unpacked (bits=, m × s) or packed (packed=)")
        #: (m, ⌈s/8⌉) bytes, np.packbits order along s
        self._packed = np.packbits(np.asarray(bits, dtype=np.uint8), axis=1) if packed is None else packed
        #: the signed §2.10 embedding has 2m columns and decodes (ỹ − m)·scale, clamped to [−u, u]
        self._offset = self.m // 2 if variant == "signed" else 0
        self._lower = -u if variant == "signed" else 0.0
        self.threshold_map = threshold_map
        self.params = params
        self.probes = _Counters()
        self._base = params.get("base")  # log variant: decode B^x / ln B
        #: built from data by :func:`sparsedp.alp` (set there): signed values (§2.2 reduction), value scale,
        #: the public guarantee and the private estimate of k
        self.signed = False
        self.value_scale = 1.0
        self.guarantee: dict = {}

    # -- point queries on a structure built from data (sparsedp.alp) ----------------------------------
    def query(self, key: Any) -> float:
        """The private estimate of ``key``'s value (any key: absent keys read noise around 0). Signed
        structures read ``x̃(key, +) − x̃(key, −)`` (spec §2.2 reduction); values are in the data's units."""
        if self.signed:
            return (self.estimate((key, "+")) - self.estimate((key, "-"))) * self.value_scale
        return self.estimate(key) * self.value_scale

    def __getitem__(self, key: Any) -> float:
        return self.query(key)

    def query_many(self, keys: Any) -> np.ndarray:
        """Vectorised :meth:`query`."""
        keys = list(keys)
        if self.signed:
            return (self.estimate_many([(k, "+") for k in keys])
                    - self.estimate_many([(k, "-") for k in keys])) * self.value_scale
        return self.estimate_many(keys) * self.value_scale

    def save(self, path: Any) -> None:
        """Write the released structure (and only it: hash keys, noisy bits, threshold map, public
        parameters) to ``path`` (NumPy ``.npz``, no pickles), atomically."""
        import json
        import os
        import tempfile

        meta = {"format": "sparsedp.alp", "version": 1, "variant": self.variant, "epsilon": self.epsilon,
                "epsilon_proj": self.epsilon_proj, "alpha": self.alpha, "psi": self.psi,
                "u": None if math.isinf(self.u) else self.u, "p": [self.p.numerator, self.p.denominator],
                "scale": self._scale, "params": self.params, "signed": self.signed,
                "value_scale": self.value_scale, "guarantee": self.guarantee, "s": self.s, "m": self.m}
        tmap = self.threshold_map or {}
        arrays = {"meta": np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8), "packed": self._packed,
                  "hash_a": self.hashes.a, "hash_c": self.hashes.c,
                  "tmap_codes": np.fromiter(tmap.keys(), np.uint64, len(tmap)),
                  "tmap_values": np.fromiter(tmap.values(), np.float64, len(tmap)),
                  "has_tmap": np.array([self.threshold_map is not None])}
        path = os.fspath(path)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(path)), suffix=".npz")
        try:
            with os.fdopen(fd, "wb") as fh:
                np.savez_compressed(fh, **arrays)
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise

    @classmethod
    def load(cls, path: Any) -> "ALP":
        """Read a structure written by :meth:`save` (validated; no pickles are loaded)."""
        import json

        try:
            with np.load(path, allow_pickle=False) as z:
                meta = json.loads(bytes(z["meta"]).decode())
                packed, a, c = z["packed"], z["hash_a"], z["hash_c"]
                tcodes, tvals, has_tmap = z["tmap_codes"], z["tmap_values"], bool(z["has_tmap"][0])
        except (OSError, KeyError, ValueError) as e:
            raise InputDataError(f"{path!s} is not a saved sparsedp ALP structure: {e}") from None
        if meta.get("format") != "sparsedp.alp" or meta.get("version") != 1:
            raise InputDataError(f"{path!s} is not a saved sparsedp ALP structure (format/version)")
        m, s = int(meta["m"]), int(meta["s"])
        if packed.shape != (m, (s + 7) // 8) or a.shape != (m,) or c.shape != (m,):
            raise InputDataError(f"{path!s}: corrupt ALP structure (shapes do not match m={m}, s={s})")
        out = cls(variant=meta["variant"], epsilon=meta["epsilon"], epsilon_proj=meta["epsilon_proj"],
                  alpha=meta["alpha"], psi=meta["psi"], u=math.inf if meta["u"] is None else meta["u"],
                  hashes=HashFamily(m, s, a=a, c=c), packed=packed, p=Fraction(*meta["p"]), scale=meta["scale"],
                  threshold_map=dict(zip(tcodes.tolist(), tvals.tolist())) if has_tmap else None,
                  params=meta["params"])
        out.signed, out.value_scale, out.guarantee = bool(meta["signed"]), float(meta["value_scale"]), \
            dict(meta["guarantee"])
        return out

    def _decode(self, y):
        x = (y - self._offset) * self._scale
        if self._base is not None:
            x = np.power(self._base, x) / math.log(self._base)
        return x

    # -- construction ----------------------------------------------------------------------------
    @classmethod
    def build(cls, data: Any, *, epsilon: float, k: int, delta: float | None = None, u: float | None = None,
              d: int | None = None, variant: str = "auto", alpha: float = 3.0, collision: float = 0.1,
              s: int | None = None, epsilon_split: float = 0.5, rng=None, insecure_float: bool = False,
              enforce_k: bool = True, max_memory: float = 4 * 2 ** 30) -> "ALP":
        """Build a private ALP structure of ``data`` (a {key: value ≥ 0} mapping, (keys, values), or a
        SparseHistogram).

        Parameters (defaults from the practitioner suggestions, thesis §2.10 / spec §5): ``alpha = 3``;
        ``s = ⌈k / collision⌉`` rows with ``collision = 0.1`` (s = 10k; must give s > 2k);
        ``k`` is a *public* sparsity bound; ``u`` bounds the entries (estimates are clamped to [0, u]).

        Variants:
          ``"projection"``: Alg. 4 + 5 alone, ψ = u (needs u); ε-DP.
          ``"threshold"``: Alg. 7/8. δ > 0: Threshold2 (Alg. 9) with ε₁ = split·ε, then Alg. 4 with
            ε₂ = ε − ε₁ on the full vector, ψ = t, m = ⌈t ε₂/α⌉ ((ε, δ)-DP, Lemmas 2.24, 2.26). δ = None:
            Threshold (Alg. 6, t = 2 ln d/ε₁, needs d, noise on all d keys 0..d−1; ε-DP, Lemma 2.21).
          ``"histogram"``: Alg. 10 for integer data (ψ = u columns, p = 1/(e^ε + 1)); ε-DP for histograms.
          ``"log"``: §2.6 logarithmic ALP (multiplicative error for entries ≥ 1/ln B; ψ = u); ε-DP (Lemma 2.28).
          ``"signed"``: thesis §2.10, signed values with 2m columns (m = ⌈u ε/α⌉, ψ = u bounds |x|): key i's
            code is 1^{m+ŷ_i} 0^{m−ŷ_i} with ŷ_i = RandRound(ε x_i/α) clipped to [−m, m] (columns 1..m, the
            negative region, are 1 by default and AND colliding keys; columns m+1..2m are 0 by default and OR
            them), RR(1/(α+2)) on all 2sm cells; Alg. 3 over the 2m bits, minus m, times α/ε, clamped to
            [−u, u]. ε-DP for ‖x − x′‖₁ ≤ 1 on signed vectors: the argument of Lemma 2.4 holds cell by cell
            (``docs/proofs/alp-signed.md``). Error as the non-negative ALP's (not doubled as by the §2.2
            reduction), access time 2m bits.
          ``"auto"``: ``"threshold"`` when delta is given, else ``"projection"``.

        Memory: the released bits are stored packed, s·m/8 bytes (:func:`memory_bytes`), and built in
        streamed blocks of columns; a structure above ``max_memory`` bytes (default 4 GiB) is refused before
        anything is drawn, with its size and the parameters that shrink it (m grows with u·ε/α, s with k).
        """
        eps = v.epsilon(epsilon)
        k = v.integer("k", k)
        alpha = v.positive("alpha", alpha)
        max_memory = v.positive("max_memory", max_memory)
        v.choice("variant", variant, ("auto", "projection", "threshold", "histogram", "log", "signed"))
        if variant == "auto":
            variant = "threshold" if delta is not None else "projection"
        if s is None:
            collision = v.real("collision", collision, lo=0.0, hi=0.5, lo_open=True, hi_open=True)
            s = math.ceil(k / collision)
        s = v.integer("s", s)
        if s <= 2 * k:
            raise InvalidParameterError(f"s must be > 2k for the error bound (Lemma 2.10); got s={s}, k={k}")
        keys, vals = _as_sparse(data, signed=variant == "signed")
        if enforce_k and len(keys) > k:  # from data (sd.alp), k only sizes the embedding: never a data check
            raise InputDataError(f"data has {len(keys)} non-zero entries, more than the declared sparsity k={k}")
        codes = np.fromiter((key_code(x) for x in keys), dtype=np.uint64, count=len(keys))
        integer = vals.dtype.kind in "iu"
        u = None if u is None else v.positive("u", u)

        if variant == "histogram":
            if not integer:
                raise InputDataError("variant='histogram' (Alg. 10) needs integer values: it is not private "
                                     "under the real-valued l1 relation (spec §8.2)")
            if u is None:
                raise InvalidParameterError("variant='histogram' needs u (the largest value represented, ψ)")
            m = int(u)
            check_memory(s, m, max_memory, variant)
            hashes = HashFamily(m, s, rng)
            p = Fraction(1) / (Fraction(math.nextafter(math.exp(eps), 0.0)) + 1)  # e^eps rounded down
            packed = alp_projection_packed(codes, vals.astype(np.int64), hashes, p, rng)
            return cls(variant=variant, epsilon=eps, epsilon_proj=eps, alpha=1.0, psi=float(m), u=float(u),
                       hashes=hashes, packed=packed, p=p, scale=1.0, threshold_map=None,
                       params={"k": k, "s": s, "m": m, "source": "Lebeda thesis Alg. 10, Lemma 2.30"})

        tmap = None
        eps_proj = eps
        params: dict = {"k": k, "s": s, "alpha": alpha}
        if variant == "threshold":
            split = v.real("epsilon_split", epsilon_split, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
            eps1 = eps * split
            eps_proj = eps - eps1
            tmap, t = _threshold(keys, vals, eps1, delta, d, rng, insecure_float)
            psi = t
            params.update(epsilon_threshold=eps1, threshold=t, delta=delta)
        elif variant == "log":
            if u is None:
                raise InvalidParameterError("variant='log' needs u (the value bound ψ = u)")
            base = log_base(alpha, k / s, eps)
            lnb = math.log(base)
            if u < max(1.0, 1.0 / lnb):
                raise InvalidParameterError(f"variant='log' needs u >= max(1, 1/ln B) = {max(1.0, 1.0 / lnb):g}")
            psi = math.log(u * lnb) / lnb  # ψ handed to Alg. 4 is log_B(ψ ln B)
            vals = np.maximum(np.log(vals.astype(np.float64) * lnb) / lnb, 0.0)  # 1-Lipschitz (Lemma 2.28)
            params.update(base=base)
        else:
            if u is None:
                raise InvalidParameterError(f"variant={variant!r} needs u (the value bound ψ = u)")
            psi = u
        m = math.ceil(psi * eps_proj / alpha)
        columns = 2 * m if variant == "signed" else m
        check_memory(s, columns, max_memory, variant)
        hashes = HashFamily(columns, s, rng)
        p = Fraction(1) / (Fraction(alpha) + 2)
        # Alg. 4: x̂ = εx, then Alg. 2 with α: y = RandRound(x̂/α); ε/α is rounded down (spec A17)
        ratio = math.nextafter(eps_proj / alpha, 0.0)
        y = rand_round(vals.astype(np.float64) * ratio, rng)
        packed = alp_projection_packed(codes, y, hashes, p, rng, signed=variant == "signed")
        params.update(m=m, psi=psi, epsilon_projection=eps_proj)
        if variant == "signed":
            params.update(columns=columns, source="Lebeda thesis §2.10 (signed values, 2m columns)")
        if variant == "log":
            psi = u
        return cls(variant=variant, epsilon=eps, epsilon_proj=eps_proj, alpha=alpha, psi=float(psi),
                   u=float(u) if u is not None else math.inf, hashes=hashes, packed=packed, p=p,
                   scale=alpha / eps_proj, threshold_map=tmap, params=params)

    # -- queries -------------------------------------------------------------------------------
    def _bit(self, b: int, a: int) -> int:
        return (int(self._packed[b, a >> 3]) >> (7 - (a & 7))) & 1

    def estimate(self, key: Any) -> float:
        """The private estimate x̃_key (Alg. 5 / 8): threshold map first, else Alg. 3 over the key's m bits,
        scaled and clamped to [0, u]. Reads exactly m bits with m hash evaluations (+1 map look-up)."""
        code = key_code(key)
        if self.threshold_map is not None:
            self.probes.map_lookups += 1
            val = self.threshold_map.get(code)
            if val is not None:
                return float(min(max(val, 0.0), self.u))
        h = self.hashes
        bits = [self._bit(b, h(code, b)) for b in range(self.m)]
        self.probes.hash_evals += self.m
        self.probes.bits_read += self.m
        return float(min(max(self._decode(alp1_estimate(bits)), self._lower), self.u))

    def estimate_many(self, keys: Any) -> np.ndarray:
        """Vectorised :meth:`estimate` for many keys (same values)."""
        keys = list(keys)
        codes = np.fromiter((key_code(x) for x in keys), dtype=np.uint64, count=len(keys))
        out = np.empty(len(keys), dtype=np.float64)
        if not len(keys):
            return out
        step = max(1, _HASH_CELLS // max(self.m, 1))  # keys at a time: bounded memory at any m
        col = np.arange(self.m)[None, :]
        for i0 in range(0, len(keys), step):
            rows = self.hashes.rows(codes[i0:i0 + step])
            mat = (self._packed[col, rows >> 3] >> (7 - (rows & 7)).astype(np.uint8)) & 1 if self.m else \
                np.zeros((rows.shape[0], 0), np.uint8)
            out[i0:i0 + step] = self._decode(_estimate_matrix(mat))
        if self.threshold_map is not None:
            for i, c in enumerate(codes.tolist()):
                val = self.threshold_map.get(c)
                if val is not None:
                    out[i] = val
        return np.clip(out, self._lower, self.u)

    def size_in_bits(self) -> int:
        """Bits of the released structure: s·m for z̃, 2·61 per hash function, and for the threshold map
        61 (key code) + 64 (value) bits per entry (spec §8.8)."""
        tm = 0 if self.threshold_map is None else len(self.threshold_map) * (61 + 64)
        return self.s * self.m + self.hashes.size_in_bits() + tm

    def bit_matrix(self) -> np.ndarray:
        """The released noisy bits z̃ as an (m × s) uint8 array (column b is row b here)."""
        return np.unpackbits(self._packed, axis=1)[:, : self.s]

    def __repr__(self) -> str:
        return (f"ALP(variant={self.variant!r}, epsilon={self.epsilon:g}, alpha={self.alpha:g}, s={self.s}, "
                f"m={self.m}, bits={self.size_in_bits()})")


def _threshold(keys: list, vals: np.ndarray, eps1: float, delta: float | None, d: int | None, rng,
               insecure_float: bool) -> tuple[dict, float]:
    """Alg. 9 (δ > 0) or Alg. 6 (δ = None); returns ({code: noisy value}, t)."""
    integer = vals.dtype.kind in "iu"
    if delta is not None:
        dl = v.delta(delta)
        if integer:
            # integer entries: only a 0 <-> 1 change alters the support, so the entry of value 1 must pass
            # with probability <= δ: t = 1 + t' with P[Z >= t'] = q^t'/(1+q) <= δ (discrete Laplace, q = e^-ε1)
            q = math.exp(-eps1)
            tp = max(1, math.ceil(math.log(1.0 / (dl * (1.0 + q))) / eps1))
            while math.exp(-eps1 * tp) / (1.0 + q) > dl:
                tp += 1
            t = float(1 + tp)
            z = discrete_laplace(Fraction(1) / Fraction(eps1), vals.size, rng)
            noisy = vals.astype(np.int64) + z
        else:
            t = math.log(1.0 / dl) / eps1 + 2.0  # Alg. 9 line 3
            y = np.where(vals < 1.0, rand_round(vals, rng), vals).astype(np.float64)
            noisy = y + laplace(1.0 / eps1, vals.size, rng, insecure_float)
            noisy = np.where(y != 0, noisy, -np.inf)
        keep = noisy >= t
        tmap = {key_code(kk): float(x) for kk, x, kp in zip(keys, noisy.tolist(), keep.tolist()) if kp}
        return tmap, t
    if d is None:
        raise InvalidParameterError("the pure threshold (Alg. 6) needs the universe size d (keys 0..d-1); "
                                    "or pass delta for Alg. 9")
    d = v.integer("d", d, lo=2)
    t = 2.0 * math.log(d) / eps1  # Lemma 2.20
    dense = laplace_mechanism((keys, vals), d, epsilon=eps1, rng=rng, insecure_float=insecure_float)
    idx = np.flatnonzero(dense >= t)
    return {int(i): float(dense[i]) for i in idx.tolist()}, t


# ------------------------------------------------------------------------------------------------
# Alg. 11 — Max-Projection (constant access time)
# ------------------------------------------------------------------------------------------------

def bucket_max(buckets: np.ndarray, vals: np.ndarray, s: int) -> np.ndarray:
    """Alg. 11 step 2: y_j = max over entries hashed to bucket j (0 for empty buckets)."""
    y = np.zeros(s, dtype=np.int64 if vals.dtype.kind in "iu" or not vals.size else np.float64)
    if vals.size:
        np.maximum.at(y, np.asarray(buckets, dtype=np.int64), vals.astype(y.dtype))
    return y


class MaxProjection:
    """Alg. 11: y_j = max_{i: h(i)=j} x_i, plus Laplace(1/ε) per cell; estimate x̃_i = ỹ_{h(i)} clamped to
    [0, u]. ε-DP (Lemma 2.33: ‖y − y′‖₁ ≤ ‖x − x′‖₁). One hash evaluation and one look-up per query.
    Size s from Cor. 2.2: ``s = ⌈size_factor·ε·n⌉`` words for a *public* bound n ≥ ‖x‖₁, or pass s."""

    def __init__(self, data: Any, *, epsilon: float, s: int | None = None, n: float | None = None,
                 size_factor: float = 1.0, u: float | None = None, rng=None, insecure_float: bool = False):
        eps = v.epsilon(epsilon)
        if s is None:
            if n is None:
                raise InvalidParameterError("MaxProjection needs s or a public bound n on ||x||_1")
            s = max(1, math.ceil(v.positive("size_factor", size_factor) * eps * v.positive("n", n)))
        self.s = v.integer("s", s)
        self.epsilon = eps
        self.u = math.inf if u is None else v.positive("u", u)
        keys, vals = _as_sparse(data)
        self.hash = HashFamily(1, self.s, rng)
        codes = np.fromiter((key_code(x) for x in keys), dtype=np.uint64, count=len(keys))
        integer = vals.dtype.kind in "iu" or not vals.size
        y = bucket_max(self.hash.rows(codes)[:, 0], vals, self.s)
        if integer:
            self.y = y + discrete_laplace(Fraction(1) / Fraction(eps), self.s, rng)
        else:
            self.y = y + laplace(1.0 / eps, self.s, rng, insecure_float)

    def estimate(self, key: Any) -> float:
        return float(min(max(self.y[self.hash(key_code(key), 0)], 0.0), self.u))

    def size_in_bits(self) -> int:
        return 64 * self.s + self.hash.size_in_bits()


# ------------------------------------------------------------------------------------------------
# Exact privacy loss of the projection (spec §8.1) and the error bound (Lemma 2.11)
# ------------------------------------------------------------------------------------------------

def cell_probabilities(rows: Mapping[Any, list[int]], xhat: Mapping[Any, float], alpha: float, m: int, s: int,
                       p: float, *, signed: bool = False) -> np.ndarray:
    """P[z̃_{a,b} = 1] for every cell (s × m) of Alg. 2 on the (already ε-scaled) input ``xhat``, for a
    fixed hash given as ``rows[key] = [h_1(key), …, h_m(key)]`` (0-based rows). The cells are independent:
    q_ab = 1 − Π_{i: h_b(i)=a}(1 − clip(x̂_i/α − b + 1, 0, 1)),  P_ab = q_ab(1 − p) + (1 − q_ab)p.

    ``signed`` (§2.10 embedding, ``m`` = 2m' columns): key i's bit in column b (1-based) is 1 with probability
    P_ib = P[ŷ_i ≥ b − m'] = clip(x̂_i/α − b + m' + 1, 0, 1); the negative region b ≤ m' ANDs the keys
    hashed to a cell (q_ab = Π P_ib, 1 for an empty cell), the positive region ORs them as above."""
    half = m // 2 if signed else 0
    miss = np.ones((s, m))   # Π (1 − P_ib): OR cells
    hit = np.ones((s, m))    # Π P_ib: AND cells
    for key, xv in xhat.items():
        for b in range(m):
            pb = min(max(xv / alpha - b + half, 0.0), 1.0)
            miss[rows[key][b], b] *= 1.0 - pb
            hit[rows[key][b], b] *= pb
    q = 1.0 - miss
    if signed:
        q[:, :half] = hit[:, :half]
    return q * (1.0 - p) + (1.0 - q) * p


def projection_max_privacy_loss(x: Mapping, x_prime: Mapping, rows: Mapping, *, epsilon: float, alpha: float,
                                m: int, s: int, signed: bool = False) -> float:
    """The exact worst-case privacy loss max_z ln(P[z̃ = z | x] / P[z̃ = z | x′]) of Alg. 4 for a fixed hash
    (spec §8.1): Σ_cells max(ln P/P′, ln (1−P)/(1−P′)). Lemma 2.15: ≤ ε‖x − x′‖₁; the same bound for the
    ``signed`` §2.10 embedding (``m`` = 2m' columns; ``docs/proofs/alp-signed.md``)."""
    p = float(Fraction(_prob_up(Fraction(1) / (Fraction(alpha) + 2)), _TWO64))
    P = cell_probabilities(rows, {i: epsilon * xv for i, xv in x.items()}, alpha, m, s, p, signed=signed)
    Q = cell_probabilities(rows, {i: epsilon * xv for i, xv in x_prime.items()}, alpha, m, s, p, signed=signed)
    return float(np.maximum(np.log(P / Q), np.log((1 - P) / (1 - Q))).sum())


def log_base(alpha: float, k_over_s: float, epsilon: float) -> float:
    """Lemma 2.29's base of the logarithmic ALP (§2.6): B = (4(p − p²))^{−ε/(4α)} with p = 1/(γ + 2),
    γ = (α+2)/(1 + αk/s) − 2. A zero entry decodes to 1/ln B (spec §8.6); at k/s = 0 and α ≈ 3.07,
    1/ln B ≈ 26.89/ε (spec §3)."""
    g = (alpha + 2.0) / (1.0 + alpha * k_over_s) - 2.0
    if g <= 0:
        raise InvalidParameterError("the log variant needs s > 2k (γ > 0)")
    p = 1.0 / (g + 2.0)
    return (4.0 * (p - p * p)) ** (-epsilon / (4.0 * alpha))


def error_bound(alpha: float, k_over_s: float) -> float:
    """Lemma 2.11 (ε = 1): E|x_i − x̃_i| ≤ (½ + (4α+4)/α² + (4γ+4)/γ²)·α with γ = (α+2)/(1 + αk/s) − 2.
    Spec §6.2 table: α = 3, k/s = 0.1 gives 16.9."""
    g = (alpha + 2.0) / (1.0 + alpha * k_over_s) - 2.0
    if g <= 0:
        return math.inf
    return (0.5 + (4 * alpha + 4) / alpha ** 2 + (4 * g + 4) / g ** 2) * alpha


# ------------------------------------------------------------------------------------------------
# §2.9 experiment (Fig. 2.4)
# ------------------------------------------------------------------------------------------------

def experiment_2_9(*, alpha: float = 3.0, collision: float = 0.1, psi: float = 5000.0, reps: int = 10 ** 6,
                   seed: int | None = 20230801, chunk: int = 4000) -> dict:
    """The thesis §2.9 simulation of ALP1 (ε = 1) under a fixed per-bit collision probability (spec §6.1).

    x ~ U[0, ψ]; y = RandRound(x/α); m = ⌈ψ/α⌉ bits, p = 1/(α+2); bit b is 1 with probability 1 − p for
    b ≤ y, else q(1 − p) + (1 − q)p; estimate with Alg. 3 × α, clamp to [0, ψ]. Returns the statistics of
    the signed error x̃ − x. Thesis (Fig. 2.4, α = 3, q = 0.1, 10^6 reps): mean |error| 6.4, std 11,
    mean 2.33, 90th percentile of |error| 15.78. This is a simulation, not a release: it uses a numpy
    generator (seeded from the secure source when ``seed`` is None).
    """
    alpha = v.positive("alpha", alpha)
    q = v.real("collision", collision, lo=0.0, hi=1.0)
    psi = v.positive("psi", psi)
    reps = v.integer("reps", reps)
    if seed is None:
        seed = int.from_bytes(default_source().random_bytes(8), "little")
    gen = np.random.Generator(np.random.PCG64(seed))
    m = math.ceil(psi / alpha)
    p = 1.0 / (alpha + 2.0)
    p_low, p_high = np.float32(1.0 - p), np.float32(q * (1.0 - p) + (1.0 - q) * p)
    cols = np.arange(1, m + 1, dtype=np.int32)
    errs = np.empty(reps, dtype=np.float64)
    for start in range(0, reps, chunk):
        r = min(chunk, reps - start)
        x = gen.uniform(0.0, psi, r)
        z = x / alpha
        y = np.floor(z) + (gen.random(r) < z - np.floor(z))
        prob = np.where(cols[None, :] <= y[:, None], p_low, p_high)
        bits = gen.random((r, m), dtype=np.float32) < prob
        est = np.clip(_estimate_matrix(bits) * alpha, 0.0, psi)
        errs[start:start + r] = est - x
    a = np.abs(errs)
    return {"mae": float(a.mean()), "std": float(errs.std()), "mean": float(errs.mean()),
            "p90_abs": float(np.quantile(a, 0.9)), "median_abs": float(np.median(a)),
            "p99_abs": float(np.quantile(a, 0.99)), "reps": reps, "alpha": alpha, "collision": q, "psi": psi,
            "m": m}
