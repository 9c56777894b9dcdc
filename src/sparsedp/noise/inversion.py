"""Exact inversion sampling of integer laws, and release decisions that never sample the value.

Proof in full: ``docs/proofs/inversion-sampler.md``. Summary:

Inversion
---------
For an integer law with survival function ``S(j) = P[X >= j]`` (non-increasing, ``S(-inf) = 1``,
``S(+inf) = 0``) and a uniform real ``V`` in [0, 1), ``X = max{j : V < S(j)}`` has exactly that law:
``P[X >= j] = P[V < S(j)] = S(j)``. ``V = (U + W)/2^64`` with ``U`` one uniform 64-bit word from the source
and ``W`` in [0, 1) the bits not drawn yet. Every question below is a comparison ``V < S(j)``, decided
exactly from integers ``lo <= 2^p S(j) <= hi``:

    U + 1 <= lo  =>  V < (U+1)/2^64 <= S(j)          U >= hi  =>  V >= U/2^64 >= S(j)

and otherwise (``U`` in ``[lo, hi)``, probability ``(hi − lo)/2^64``, a few times 2^-64) by the slow path:
``V`` is kept as a :class:`~sparsedp.noise.exact.LazyUniform` with prefix ``U``, 64 more bits are drawn, and
the comparison is repeated against bounds at precision 128, 192, … until decided (it terminates with
probability one since ``P[V = S(j)] = 0``). No comparison ever uses a rounded value as if it were exact, so
every outcome has exactly the probability of the ideal algorithm.

Release without sampling
------------------------
A key with noise threshold ``j`` (released iff ``X >= j``) is decided by ``V < S(j)``: one table lookup and
two integer comparisons. Only released keys get their value: ``X = j0 + t*`` with ``t*`` the last table index
whose lower bound is above ``U`` (a ``searchsorted``), confirmed by ``U >= hi(X + 1)``, so ``V < S(X)`` and
``V >= S(X + 1)``. The same ``V`` answers both questions, so ``(released, value)`` has the joint law of
``(X >= j, X)``.

Table
-----
Per law (cached by its parameters), bounds at precision 64 for ``j`` in ``[j_lo − 1, j_hi + 1]``, made
monotone (``lo'(j) = max_{i >= j} lo(i)``, ``hi'(j) = min_{i <= j} hi(i)``: still valid since S is
non-increasing), with ``hi'(j_lo − 1) := 2^64`` and ``lo'(j_hi + 1) := 0``, so the first entry bounds S on all
``j <= j_lo − 1`` and the last on all ``j >= j_hi + 1``: indices are clipped into the table. Correctness
never depends on the window; it only makes decisions outside it certain except for ``U`` next to 0 or
2^64 − 1. ``_TABLE_BITS`` (private, tests only) coarsens the table to fewer bits of ``U`` so that the slow
path is taken often.

Laws (:class:`IntegerLaw` protocol): :class:`DiscreteGaussianLaw` ``P[X = x] ∝ exp(−x²/(2σ²))`` and
:class:`DiscreteLaplaceLaw` ``P[X = x] ∝ exp(−|x|/b)`` (the laws of :mod:`sparsedp.accounting.discrete`).
Their survival bounds are proved by big-integer interval arithmetic (every product rounded down for the lower
and up for the upper bound, from the proved :func:`~sparsedp.noise.exact.exp_neg_bounds`), plus a rigorous
tail bound of the truncated Gaussian sums; see the two ``survival_bounds`` methods. Tables need the window
to have at most ``_MAX_TABLE`` entries (Gaussian σ up to ~6000, Laplace scale up to ~1350):
:func:`inversion_fits` says whether a law qualifies; callers use the rejection samplers otherwise.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Protocol, runtime_checkable

import numpy as np

from .. import _validate as v
from ..errors import InvalidParameterError
from .discrete import checked_source
from .exact import LazyUniform, exp_neg_bounds

__all__ = ["IntegerLaw", "DiscreteGaussianLaw", "DiscreteLaplaceLaw", "release_by_inversion",
           "sample_by_inversion", "inversion_fits"]

_WINDOW_BITS = 70          # outside the window, S is within 2^-70 of 1 resp. 0
_MAX_TABLE = 1 << 17       # largest window (entries) a table is built for
_TABLE_BITS = 64           # bits of U the table decides on (private knob: tests lower it)
_CHUNK = 1 << 14           # keys per vectorised step: temporaries stay small (no fresh mmap per array)
_GUIDE_BITS = 12           # buckets of the guide table that starts the value search
_MAX_WIDTH = 16            # a law's bounds wider than this (units of 2^-prec) are recomputed more precisely
_LN2_70 = 48.53            # > 70 ln 2 = 48.5203


@runtime_checkable
class IntegerLaw(Protocol):
    """An integer law given by proved bounds of its survival function ``S(j) = P[X >= j]``.

    ``window()``: ``[j_lo, j_hi]`` with ``S(j) >= 1 − 2^-70`` for ``j < j_lo`` and ``S(j) <= 2^-70`` for
    ``j > j_hi`` (used only for the table's extent: the samplers stay exact if it is wrong).
    ``survival_bounds(j_lo, j_hi, prec)``: for every integer j in ``[j_lo, j_hi]`` Python ints
    ``lo <= 2^prec S(j) <= hi`` (``prec >= 64``, any j, any prec; ``hi − lo`` a few units).
    Tables are cached by the law's value when it hashes by its parameters (e.g. a frozen dataclass); a law
    with identity hashing gets a fresh table per call (and is not kept, e.g. when it holds a secret).
    """

    def window(self) -> tuple[int, int]: ...

    def survival_bounds(self, j_lo: int, j_hi: int, prec: int) -> tuple[list[int], list[int]]: ...


# ------------------------------------------------------------------------------------------- laws


def _complement(lo: int, hi: int, prec: int) -> tuple[int, int]:
    """Bounds of 2^prec (1 − s) from bounds lo <= 2^prec s <= hi."""
    one = 1 << prec
    return one - hi, one - lo


def _ceil_div(a: int, b: int) -> int:
    return -((-a) // b)


@lru_cache(maxsize=8)
def _gauss_tail_table(sigma2: Fraction, prec: int) -> tuple[int, list[int], list[int], int, int]:
    """Bounds of 2^prec S(j) for j = 1 … M + 1 of N_Z(0, sigma2), and the bound for every j > M + 1.

    Returns ``(M, lo, hi, lo_beyond, hi_beyond)`` with ``lo[j−1] <= 2^prec S(j) <= hi[j−1]`` for
    ``1 <= j <= M + 1`` and ``0 = lo_beyond <= 2^prec S(j) <= hi_beyond`` for ``j > M + 1``.

    Weights w_x = exp(−x²/(2s)) (w_0 = 1), at fixed-point scale 2^P, by w_{x+1} = w_x r_x, r_x = r_0 q^x with
    r_0 = exp(−1/(2s)), q = exp(−1/s) (so r_x = exp(−(2x+1)/(2s)) = w_{x+1}/w_x): interval arithmetic, every
    product floored for the lower and ceiled for the upper bound. The walk stops at the first M >= 0 whose
    tail bound R = ⌈w_{M+1}^hi (1 + s/(M+1))⌉ is <= 2^(P − prec − 8): for x >= M+1 = a, x² >= a² + 2a(x − a),
    so Σ_{x>M} w_x <= w_a Σ_k e^{−ak/s} = w_a/(1 − e^{−a/s}) <= w_a (1 + s/a) (as e^y >= 1 + y).
    Then T(j) = Σ_{x>=j} w_x ∈ [Σ_{x=j}^M w_x^lo, Σ_{x=j}^M w_x^hi + R], Z = w_0 + 2 T(1) (symmetry), and
    S(j) = T(j)/Z ∈ [⌊2^prec T^lo/Z^hi⌋, ⌈2^prec T^hi/Z^lo⌉]. If the widths exceed ``_MAX_WIDTH`` units
    the computation is repeated with 32 more guard bits (never observed; keeps the claim self-checking).
    """
    s = sigma2
    num, den = s.numerator, s.denominator
    m_est = int(math.sqrt(2.0 * float(s) * (prec + 16) * math.log(2.0))) + 2
    if m_est > (1 << 22):
        raise InvalidParameterError(f"sigma2={float(s):g} is too large for survival tables; use the "
                                    "rejection sampler (sparsedp.noise.sample_discrete_gaussian)")
    guard = 2 * m_est.bit_length() + 24
    while True:
        p = prec + guard
        one = 1 << p
        q_lo, q_hi = exp_neg_bounds(Fraction(1) / s, p)
        r_lo, r_hi = exp_neg_bounds(Fraction(1) / (2 * s), p)
        w_lo, w_hi = [one], [one]
        a_lo, a_hi = one, one            # w_x bounds
        limit = 1 << (p - prec - 8)
        x = 0
        while True:
            a_lo = (a_lo * r_lo) >> p                  # w_{x+1}
            a_hi = -((-a_hi * r_hi) >> p)
            a = x + 1
            tail = _ceil_div(a_hi * (den * a + num), den * a)
            if tail <= limit:
                break
            w_lo.append(a_lo)
            w_hi.append(a_hi)
            r_lo = (r_lo * q_lo) >> p                  # r_{x+1}
            r_hi = -((-r_hi * q_hi) >> p)
            x += 1
        m = x                                           # w_lo/w_hi hold x = 0 … M; tail bounds x > M
        t_lo = [0] * (m + 2)                            # t_lo[j] = Σ_{x=j}^{M} w_lo, j = 1 … M+1
        t_hi = [0] * (m + 2)
        t_hi[m + 1] = tail
        for jj in range(m, 0, -1):
            t_lo[jj] = t_lo[jj + 1] + w_lo[jj]
            t_hi[jj] = t_hi[jj + 1] + w_hi[jj]
        z_lo = w_lo[0] + 2 * t_lo[1]
        z_hi = w_hi[0] + 2 * t_hi[1]
        lo = [(t_lo[jj] << prec) // z_hi for jj in range(1, m + 2)]
        hi = [min(_ceil_div(t_hi[jj] << prec, z_lo), 1 << prec) for jj in range(1, m + 2)]
        hi_beyond = _ceil_div(tail << prec, z_lo)
        if max(h - l_ for l_, h in zip(lo, hi)) <= _MAX_WIDTH and hi_beyond <= _MAX_WIDTH:
            return m, lo, hi, 0, hi_beyond
        guard += 32


@dataclass(frozen=True)
class DiscreteGaussianLaw:
    """N_Z(0, σ²): ``P[X = x] = exp(−x²/(2σ²)) / Σ_y exp(−y²/(2σ²))`` (CKS20 Definition 1;
    :mod:`sparsedp.accounting.discrete`), σ² an exact positive rational."""

    sigma2: Fraction

    def __post_init__(self) -> None:
        object.__setattr__(self, "sigma2", v.rational("sigma2", self.sigma2))

    def window(self) -> tuple[int, int]:
        # For j >= 1, S(j) <= T(j) (Z >= w_0 = 1) <= e^{−j²/(2s)} (1 + s/j) (tail bound above). With
        # j >= J = sqrt(2s (48.53 + 1 + ln(1 + sqrt s))) >= 9.8 sqrt s we have s/j <= sqrt s, so the bound is
        # <= e^{−49.53} < 2^-70 (one nat of slack covers the float evaluation). Symmetry gives j_lo.
        s = float(self.sigma2)
        j_hi = math.ceil(math.sqrt(2.0 * s * (_LN2_70 + 1.0 + math.log1p(math.sqrt(s))))) + 1
        return 1 - j_hi, j_hi

    def survival_bounds(self, j_lo: int, j_hi: int, prec: int) -> tuple[list[int], list[int]]:
        """``lo <= 2^prec S(j) <= hi`` for j in [j_lo, j_hi]: :func:`_gauss_tail_table` for j >= 1 and
        ``S(j) = 1 − S(1 − j)`` (symmetry) for j <= 0."""
        prec = _check_prec(prec)
        m, lo_t, hi_t, lo_b, hi_b = _gauss_tail_table(self.sigma2, prec)

        def pos(j: int) -> tuple[int, int]:      # j >= 1
            return (lo_t[j - 1], hi_t[j - 1]) if j <= m + 1 else (lo_b, hi_b)

        los, his = [], []
        for j in range(int(j_lo), int(j_hi) + 1):
            lo, hi = pos(j) if j >= 1 else _complement(*pos(1 - j), prec)
            los.append(lo)
            his.append(hi)
        return los, his


@dataclass(frozen=True)
class DiscreteLaplaceLaw:
    """Discrete Laplace: ``P[X = x] = (1 − q)/(1 + q) q^{|x|}``, ``q = exp(−1/b)`` (CKS20 Definition 28;
    :mod:`sparsedp.accounting.discrete`), scale b an exact positive rational."""

    scale: Fraction

    def __post_init__(self) -> None:
        object.__setattr__(self, "scale", v.rational("scale", self.scale))

    def window(self) -> tuple[int, int]:
        # S(j) = q^j/(1+q) <= e^{−j/b} <= e^{−48.53} < 2^-70 for j >= 48.53 b (j >= 1); symmetry for j_lo.
        j_hi = math.ceil(_LN2_70 * float(self.scale)) + 1
        return 1 - j_hi, j_hi

    def survival_bounds(self, j_lo: int, j_hi: int, prec: int) -> tuple[list[int], list[int]]:
        """``S(k) = q^k/(1 + q)`` for k >= 1 (geometric series), ``S(j) = 1 − S(1 − j)`` for j <= 0.

        q^k for the needed k in [k_min, k_max]: ``exp_neg_bounds(k_min/b)`` then multiplied by the bounds of
        q = exp(−1/b), rounding down resp. up, at P = prec + 2·bitlen(k_max − k_min + 1) + 24 bits; then
        ``lo = ⌊2^prec q^k_lo / (1 + q_hi)⌋``, ``hi = ⌈2^prec q^k_hi / (1 + q_lo)⌉``.
        """
        prec = _check_prec(prec)
        j_lo, j_hi = int(j_lo), int(j_hi)
        if j_hi < j_lo:
            return [], []
        ks = [j if j >= 1 else 1 - j for j in (j_lo, j_hi, min(max(j_lo, 1), j_hi), max(min(j_hi, 0), j_lo))]
        k_min, k_max = min(ks), max(ks)
        guard = 2 * (k_max - k_min + 1).bit_length() + 24
        while True:
            p = prec + guard
            one = 1 << p
            b = self.scale
            q_lo, q_hi = exp_neg_bounds(1 / b, p)
            e_lo, e_hi = exp_neg_bounds(k_min / b, p)
            s_lo, s_hi = {}, {}
            for k in range(k_min, k_max + 1):
                s_lo[k] = (e_lo << prec) // (one + q_hi)
                s_hi[k] = min(_ceil_div(e_hi << prec, one + q_lo), 1 << prec)
                e_lo = (e_lo * q_lo) >> p
                e_hi = -((-e_hi * q_hi) >> p)
            los, his = [], []
            for j in range(j_lo, j_hi + 1):
                lo, hi = (s_lo[j], s_hi[j]) if j >= 1 else _complement(s_lo[1 - j], s_hi[1 - j], prec)
                los.append(lo)
                his.append(hi)
            if max(h - l_ for l_, h in zip(los, his)) <= _MAX_WIDTH:
                return los, his
            guard += 32


def _check_prec(prec) -> int:
    return v.integer("prec", prec, lo=64)


# ------------------------------------------------------------------------------------------- tables


class _Table:
    """Monotone bounds for j = j0 + t, t = 0 … L−1, as numpy arrays at ``bits`` bits of U.

    ``lo[t] <= 2^bits S(j)`` and ``2^bits S(j) <= hm1[t] + 1`` for j = j0 + t, and also for every
    j < j0 at t = 0 and every j > j0 + L − 1 at t = L − 1 (``hm1[0] = 2^bits − 1``, ``lo[L−1] = 0``).
    """

    __slots__ = ("j0", "size", "lo", "hm1", "lo_asc", "bits", "shift", "guide", "guide_shift", "dense")

    def __init__(self, law, bits: int) -> None:
        j_lo, j_hi = (int(x) for x in law.window())
        j0, j1 = j_lo - 1, j_hi + 1
        lo, hi = law.survival_bounds(j0, j1, 64)
        size = j1 - j0 + 1
        if len(lo) != size or len(hi) != size:
            raise InvalidParameterError(f"{type(law).__name__}.survival_bounds returned {len(lo)}/{len(hi)} "
                                        f"bounds for {size} values of j")
        one = 1 << 64
        for a, b in zip(lo, hi):
            if not 0 <= a <= b <= one:
                raise InvalidParameterError(f"{type(law).__name__}.survival_bounds returned invalid bounds "
                                            f"({a}, {b}) at precision 64")
        # Loosen to lo <= 2^64 − 1 and hi >= 1 (still valid bounds; S may be exactly 0 or 1 for laws with
        # bounded support), so that lo fits a uint64 and hi − 1 >= 0.
        lo = [min(a, one - 1) for a in lo]
        hi = [max(b, 1) for b in hi]
        hi[0] = one                      # then hi[0] bounds every j <= j0
        lo[-1] = 0                       # and lo[-1] every j >= j1
        for t in range(size - 2, -1, -1):          # lo'(j) = max_{i >= j} lo(i)
            lo[t] = max(lo[t], lo[t + 1])
        for t in range(1, size):                   # hi'(j) = min_{i <= j} hi(i)
            hi[t] = min(hi[t], hi[t - 1])
        shift = 64 - bits
        self.j0, self.size, self.bits, self.shift = j0, size, bits, shift
        self.lo = np.array([a >> shift for a in lo], dtype=np.uint64)
        self.hm1 = np.array([_ceil_div(b, 1 << shift) - 1 for b in hi], dtype=np.uint64)
        self.lo_asc = np.ascontiguousarray(self.lo[::-1])
        # Guide table (Chen–Asau style index): for each bucket of the top g bits of u, the smallest
        # t*(u) = #{t : lo[t] > u} − 1 in the bucket (at its largest u); t* is that or one more unless the
        # bucket is "dense" (holds more than one lo[t]: the far tails), where a binary search is used.
        g = min(_GUIDE_BITS, bits)
        self.guide_shift = gs = bits - g
        top = np.array([((b + 1) << gs) - 1 for b in range(1 << g)], dtype=np.uint64)
        bottom = np.array([b << gs for b in range(1 << g)], dtype=np.uint64)
        self.guide = (size - 1 - np.searchsorted(self.lo_asc, top, side="right")).astype(np.int64)
        self.dense = (size - 1 - np.searchsorted(self.lo_asc, bottom, side="right")) > self.guide + 1


_tables: OrderedDict = OrderedDict()
_tables_lock = threading.Lock()
_TABLES_KEPT = 16


def _table(law) -> _Table:
    """The law's table, cached by value for laws that hash by their parameters (e.g. frozen dataclasses);
    a law with identity hashing (or none) gets a fresh table per call and is never kept here."""
    bits = int(_TABLE_BITS)
    if getattr(type(law), "__hash__", None) in (None, object.__hash__):
        return _Table(law, bits)
    key = (type(law), law, bits)
    with _tables_lock:
        tab = _tables.get(key)
        if tab is not None:
            _tables.move_to_end(key)
            return tab
    tab = _Table(law, bits)
    with _tables_lock:
        _tables[key] = tab
        while len(_tables) > _TABLES_KEPT:
            _tables.popitem(last=False)
    return tab


def inversion_fits(law) -> bool:
    """True when ``law``'s window is small enough for a table (at most ``_MAX_TABLE`` entries)."""
    j_lo, j_hi = law.window()
    return int(j_hi) - int(j_lo) + 3 <= _MAX_TABLE


def _require_fit(law) -> None:
    if not inversion_fits(law):
        j_lo, j_hi = law.window()
        raise InvalidParameterError(f"{type(law).__name__}'s window [{j_lo}, {j_hi}] is too wide for an inversion "
                                    f"table (> {_MAX_TABLE} entries); use the rejection samplers")


# ------------------------------------------------------------------------------------------- exact slow path


def _below(law, u: LazyUniform, j: int) -> bool:
    """Exactly decide V < S(j), drawing more bits of V when the bounds at its precision cannot."""
    while True:
        if u.nbits >= 64:
            lo, hi = law.survival_bounds(j, j, u.nbits)
            if u.prefix + 1 <= lo[0]:
                return True
            if u.prefix >= hi[0]:
                return False
        u._refine()


def _exact_value(law, u: LazyUniform, guess: int, known: int | None) -> int:
    """X = max{k : V < S(k)} by exact comparisons: gallop from ``guess``, then bisect.
    ``known`` (if given) is a k for which V < S(k) has already been decided true."""
    lo = hi = None                               # V < S(lo) and V >= S(hi) are established
    if known is not None:
        lo = known
        guess = max(guess, known)
    if lo is None or guess > lo:
        if _below(law, u, guess):
            lo = guess
        else:
            hi = guess
    step = 1
    while hi is None:
        c = lo + step
        if _below(law, u, c):
            lo = c
        else:
            hi = c
        step *= 2
    step = 1
    while lo is None:
        c = hi - step
        if _below(law, u, c):
            lo = c
        else:
            hi = c
        step *= 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _below(law, u, mid):
            lo = mid
        else:
            hi = mid
    return lo


# ------------------------------------------------------------------------------------------- vectorised


def _search(tab: _Table, u: np.ndarray) -> np.ndarray:
    """t*(u) = #{t : lo[t] > u} − 1 (lo is non-increasing, so those t are a prefix; t* <= size − 2 since
    lo[size − 1] = 0): the guide entry of u's bucket, plus one if lo[t + 1] > u; binary search in the
    dense buckets (the far tails, probability ~2^-11)."""
    b = u >> np.uint64(tab.guide_shift) if tab.guide_shift else u
    b = b.astype(np.intp)
    ts = tab.guide[b]
    ts += tab.lo[ts + 1] > u
    dense = np.flatnonzero(tab.dense[b])
    if dense.size:
        ts[dense] = tab.size - 1 - np.searchsorted(tab.lo_asc, u[dense], side="right")
    return ts


def _values(tab: _Table, law, u: np.ndarray, known: np.ndarray | None, rng) -> np.ndarray:
    """X for the T-bit words ``u`` (V = (u + W)/2^T): table search, exact slow path where uncertain.
    ``known[i]``, if given, is a j_i with V_i < S(j_i) established from ``u[i]`` alone."""
    ts = _search(tab, u)
    nxt = ts + 1                                                      # in [0, size − 1]
    ok = (ts >= 0) & (u > tab.hm1[nxt])                              # V < S(j0+ts) and V >= S(j0+ts+1)
    x = ts + tab.j0
    for i in np.flatnonzero(~ok).tolist():
        lu = LazyUniform(int(u[i]), tab.bits, rng)
        x[i] = _exact_value(law, lu, int(x[i]), None if known is None else int(known[i]))
    return x


def _as_thresholds(j) -> np.ndarray:
    a = np.asarray(j)
    if a.ndim != 1 or not (a.dtype.kind in "iu" or a.size == 0):
        raise InvalidParameterError(f"j must be a 1-d integer array, got dtype {a.dtype} and shape {a.shape}")
    if a.dtype.kind == "u" and a.size and int(a.max()) > np.iinfo(np.int64).max:
        # a cast would wrap 2^63 … 2^64 − 1 to negative thresholds (released almost surely)
        raise InvalidParameterError("thresholds j must fit in int64")
    return a.astype(np.int64, copy=False)


def release_by_inversion(law: IntegerLaw, j, rng=None) -> tuple[np.ndarray, np.ndarray]:
    """Decide ``X_i >= j[i]`` for independent ``X_i ~ law`` (one fresh X per element), exactly.

    Returns ``(positions, values)``: the increasing int64 positions i with ``X_i >= j[i]`` and ``X_i`` there
    (int64). Non-released elements cost one table lookup and two integer comparisons; their X is never
    computed. ``rng=None`` uses the secure default source.
    """
    j = _as_thresholds(j)
    rng = checked_source(rng)
    _require_fit(law)
    tab = _table(law)
    pos_parts, val_parts = [], []
    for start in range(0, j.size, _CHUNK):
        jc = j[start:start + _CHUNK]
        u = rng.uint64(jc.size)
        if tab.shift:
            u >>= np.uint64(tab.shift)
        # clip j into [j0, j0 + size − 1] *before* subtracting j0: ``jc − j0`` wraps in int64 for j near
        # 2^63 (a never-release threshold would become t < 0, i.e. released almost surely)
        t = np.clip(jc, tab.j0, tab.j0 + tab.size - 1) - tab.j0
        sel = np.flatnonzero(u < tab.lo[t])                   # V < S(j) surely
        maybe = u <= tab.hm1[t]                               # V < S(j) possibly (includes sel: lo <= hm1 + 1)
        if np.count_nonzero(maybe) == sel.size:               # none undecided (each is, w.p. ~2^-63)
            x = _values(tab, law, u[sel], jc[sel], rng)
        else:
            maybe[sel] = False
            unsure = np.flatnonzero(maybe)                    # neither sure: exact slow path
            slow: dict[int, LazyUniform] = {}
            for i in unsure.tolist():
                lu = LazyUniform(int(u[i]), tab.bits, rng)
                if _below(law, lu, int(jc[i])):
                    slow[i] = lu
            if slow:
                sel = np.union1d(sel, np.fromiter(slow, dtype=np.int64, count=len(slow)))
            fast = ~np.isin(sel, unsure)
            x = np.empty(sel.size, dtype=np.int64)
            x[fast] = _values(tab, law, u[sel[fast]], jc[sel[fast]], rng)
            for k in np.flatnonzero(~fast).tolist():          # continue with the same V (its bits are drawn)
                i = int(sel[k])
                x[k] = _exact_value(law, slow[i], int(jc[i]), int(jc[i]))
        pos_parts.append(sel.astype(np.int64, copy=False) + start)
        val_parts.append(x)
    if not pos_parts:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    return np.concatenate(pos_parts), np.concatenate(val_parts)


def sample_by_inversion(law: IntegerLaw, size: int, rng=None) -> np.ndarray:
    """``size`` iid draws of ``law`` as int64, exactly (X = max{j : V < S(j)}, module docstring)."""
    n = v.integer("size", size, lo=0)
    rng = checked_source(rng)
    _require_fit(law)
    tab = _table(law)
    out = np.empty(n, dtype=np.int64)
    for start in range(0, n, _CHUNK):
        m = min(_CHUNK, n - start)
        u = rng.uint64(m)
        if tab.shift:
            u >>= np.uint64(tab.shift)
        out[start:start + m] = _values(tab, law, u, None, rng)
    return out
