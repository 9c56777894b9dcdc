"""Exact integer noise ``X = round(G + A)``, ``G ~ N(0, s²)``, for the rounded CSH (docs/proofs/rounded-csh.md).

Rounded CSH releases ``round(H_i + G_i + A)`` for the keys whose continuous noisy count exceeds a half-integer
threshold: with ``X_i = round(G_i + A)`` and an integer count ``H_i`` this is ``H_i + X_i`` and the test
``H_i + G_i + A > T + ½`` is ``H_i + X_i >= T + 1`` (ties have probability 0). Given the shared term ``A``
the ``X_i`` are iid with the survival function::

    S(j) = P[X >= j | A] = P[G + A >= j − ½] = Φ̄((j − ½ − A)/s).

This module gives that law to the exact inversion sampler (:mod:`sparsedp.noise.inversion`), which needs,
for any integer ``j`` and precision ``prec``, integers ``lo <= 2^prec·S(j) <= hi``:

* :class:`SharedGaussianTerm` — ``A = s_c·Φ⁻¹(V₀)`` with ``V₀`` uniform in [0, 1), known only through a
  prefix of its bits: ``V₀ ∈ [p/2^n, (p+1)/2^n)``. Since ``Φ⁻¹`` is increasing, ``A`` lies in
  ``[s_c Φ⁻¹(p/2^n), s_c Φ⁻¹((p+1)/2^n)]``; more bits are drawn (64 at a time) when a decision needs a
  narrower interval. ``A`` is thus *exactly* ``N(0, s_c²)`` (the inverse-CDF transform of an exactly
  uniform ``V₀``), and every decision is made on certified bounds, never on a rounded value of ``A``.
  The bits come from a deterministic stream keyed by a per-release secret
  (:class:`~sparsedp.noise.source.SecretKeyedStream`), so every process that refines ``A`` (Spark
  executors, task retries) sees the same ``V₀``: one release, one draw. The object pickles (it carries the
  secret, like the engines' noise tasks do) and is never released.
* :class:`RoundedShiftedGaussianLaw` — the ``IntegerLaw`` of ``X`` given such a term (or a fixed shift 0,
  used for the de-biasing estimate ``round(N(0, s_c²))``). ``S`` is increasing in ``A``, so the bounds of
  ``S`` at the two ends of ``A``'s interval bound ``S`` at the true ``A``.

High-precision Φ̄ (:func:`phi_bar_bounds`). ``Φ̄(x) = ½ erfc(x/√2)`` is evaluated with mpmath at a working
precision ``wp`` (bits). The argument ``x`` is an exact binary number (``mpf``); the only roundings are
the division by √2 (relative error <= 2^{2−wp}) and mpmath's ``erfc`` itself, which mpmath computes with
internal guard digits and documents as accurate to within a few units in the last place. A relative
perturbation ``η`` of ``u = x/√2`` changes ``erfc(u)`` by a relative ``<= (2u² + 2)η`` to first order
(``|d ln erfc(u)/d ln u| = 2|u| e^{−u²}/(√π erfc(u))``: < 1 for u <= 0 since erfc(u) >= 1, and
< u(u + √(u² + 2)) <= 2u² + 1 for u > 0 by the bound erfc(u) > 2e^{−u²}/(√π(u + √(u² + 2)))).
We therefore widen the computed value by the relative margin ``(x² + 2^8)·2^{4−wp}`` (x² = 2u²): it exceeds
the argument effect ``(x² + 2)·2^{2−wp}`` by a factor >= 4 and leaves ``2^{8+2}`` ulps for ``erfc``'s own
error (documented as a few ulps), i.e. it dominates the documented error by two orders of magnitude. ``wp`` is ``prec + 24 + 2·bitlen(|x|+1)``
so the widening is below 2^-12 units of 2^-prec (``x² <= 2^{2·bitlen}``).
"""

from __future__ import annotations

import math
import threading

import mpmath
from mpmath import mpf

from ..errors import InvalidParameterError

__all__ = ["SharedGaussianTerm", "RoundedShiftedGaussianLaw", "phi_bar_bounds"]

#: |z| beyond which Φ̄(z) < 2^-70 (Φ̄(10) = 7.6e-24 < 2^-70 = 8.5e-22): the window of the law
_WINDOW_Z = 10.0
_LABEL = b"sparsedp rounded-csh shared term"
_WORD = 64
_INV_SQRT_2PI_UP = mpf("0.3989422805")  # > 1/√(2π) = 0.39894228040143…
_MEMO_MAX = 1 << 18  # memoised bounds per (σ, prec) of one shared term (a table needs ~20σ of them)


def _wp(prec: int, x: mpf) -> int:
    mag = int(abs(x)) + 1
    return int(prec) + 24 + 2 * mag.bit_length()


def phi_bar_bounds(x: mpf, prec: int) -> tuple[mpf, mpf]:
    """Certified ``lo <= Φ̄(x) <= hi`` for an exact ``mpf`` x, relative width ~2^-(prec+50) (module doc)."""
    if not isinstance(x, mpf):
        x = mpf(x)  # floats and small ints are exact; pass exact mpfs otherwise
    if mpmath.isinf(x):
        v = mpf(0) if x > 0 else mpf(1)
        return v, v
    wp = _wp(prec, x)
    with mpmath.workprec(wp):
        val = mpmath.erfc(x / mpmath.sqrt(2)) / 2
        rel = (x * x + 256) * mpf(2) ** (4 - wp)
        lo = val * (1 - rel)
        hi = val * (1 + rel)
    return max(lo, mpf(0)), min(hi, mpf(1))


def _phi_inverse_approx(v: mpf, wp: int) -> mpf:
    """Φ⁻¹(v) for 0 < v < ½ to about wp bits (Newton on Φ̄ with a float start); only a guess, certified later."""
    with mpmath.workprec(wp + 20):
        fv = float(v)
        if fv > 1e-300:  # a 53-bit start: Newton then doubles the correct bits per step
            from scipy import special

            x = mpf(float(special.ndtri(fv)))
        else:  # asymptotic start −√(2 ln(1/v) − ln(2 ln(1/v)) − ln 2π) (v < 1e-300: probability < 2^-990)
            t = -2.0 * float(mpmath.log(v))
            x = mpf(-math.sqrt(t - math.log(t) - math.log(2.0 * math.pi)))
        sqrt2 = mpmath.sqrt(2)
        c = 1 / mpmath.sqrt(2 * mpmath.pi)
        for _ in range(200):
            f = mpmath.erfc(-x / sqrt2) / 2 - v
            step = f / (c * mpmath.exp(-x * x / 2))
            x -= step
            if abs(step) <= mpf(2) ** (-wp) * (1 + abs(x)):
                break
    return x


def _phi_inverse_bounds(v: mpf, wp: int) -> tuple[mpf, mpf]:
    """Certified ``lo <= Φ⁻¹(v) <= hi`` for dyadic 0 < v < 1: a Newton guess, moved out until
    ``Φ(lo) <= v <= Φ(hi)`` holds for the certified bounds of Φ (Φ is increasing)."""
    if v > mpf(1) / 2:
        lo, hi = _phi_inverse_bounds(mpmath.fsub(1, v, exact=True), wp)  # 1 − v is exact (dyadic); Φ⁻¹(v) = −Φ⁻¹(1 − v)
        return mpmath.fneg(hi, exact=True), mpmath.fneg(lo, exact=True)
    if v == mpf(1) / 2:
        return mpf(0), mpf(0)
    x = _phi_inverse_approx(v, wp)
    with mpmath.workprec(wp + 16):  # lo, hi are exact numbers at this precision; certification is exact
        step = mpf(2) ** (-wp + 8) * (1 + abs(x))
        lo = x - step
        while phi_bar_bounds(-lo, wp)[1] > v:  # need Φ(lo) = Φ̄(−lo) <= v
            step *= 4
            lo = x - step
        step = mpf(2) ** (-wp + 8) * (1 + abs(x))
        hi = x + step
        while phi_bar_bounds(-hi, wp)[0] < v:  # need Φ(hi) >= v
            step *= 4
            hi = x + step
    return lo, hi


class SharedGaussianTerm:
    """The shared term ``A = s_c·Φ⁻¹(V₀) ~ N(0, s_c²)`` of one release, known as a shrinking interval.

    ``secret`` (>= 16 bytes from the secure source, once per release) keys the stream of ``V₀``'s bits
    (:class:`~sparsedp.noise.source.SecretKeyedStream` with a fixed label): the n-th 64-bit word of ``V₀``
    is the same in every process. Never release this object or its bounds; ``repr`` hides them.
    """

    def __init__(self, sigma_c: float, secret: bytes):
        sigma_c = float(sigma_c)
        if not (sigma_c > 0 and math.isfinite(sigma_c)):
            raise InvalidParameterError(f"sigma_c must be positive and finite, got {sigma_c!r}")
        if not isinstance(secret, (bytes, bytearray)) or len(secret) < 16:
            raise InvalidParameterError("secret must be at least 16 bytes from the secure source")
        self.sigma_c = sigma_c
        self._secret = bytes(secret)
        self._init_state()

    def _init_state(self) -> None:
        self._memo: dict = {}
        self._lock = threading.Lock()
        self._prefix = 0
        self._nbits = 0
        self._bounds: tuple[mpf, mpf] = (mpf("-inf"), mpf("inf"))

    @classmethod
    def draw(cls, sigma_c: float, rng=None) -> "SharedGaussianTerm":
        """A fresh term whose secret comes from ``rng`` (``None``: the secure default source)."""
        from .discrete import checked_source

        return cls(sigma_c, bytes(checked_source(rng).random_bytes(32)))

    def __getstate__(self):
        return {"sigma_c": self.sigma_c, "secret": self._secret}

    def __setstate__(self, state):
        self.sigma_c = state["sigma_c"]
        self._secret = state["secret"]
        self._init_state()

    def __repr__(self) -> str:
        return f"SharedGaussianTerm(sigma_c={self.sigma_c!r}, <secret>)"

    def memo(self, sigma: float, prec: int) -> dict:
        """Memo of proved survival bounds ``{j: (lo, hi)}`` of the law with this σ at ``prec`` (bounds stay
        valid as A's interval shrinks; one table per release instead of one per call)."""
        with self._lock:
            d = self._memo.setdefault((float(sigma), int(prec)), {})
            if len(d) > _MEMO_MAX:
                d.clear()
            return d

    @property
    def nbits(self) -> int:
        """How many bits of V₀ are known (grows by 64 per refinement)."""
        return self._nbits

    def _refine(self) -> None:
        from .source import SecretKeyedStream

        nwords = max(self._nbits // _WORD + 1, 2)  # 128 bits at first: what a 64-bit table needs anyway
        data = SecretKeyedStream(self._secret, _LABEL).random_bytes(8 * nwords)  # the same prefix everywhere
        self._prefix = int.from_bytes(data, "big")
        self._nbits = _WORD * nwords
        n = self._nbits
        wp = n + 64
        s_c = mpf(self.sigma_c)  # a double: exact
        if self._prefix == 0:
            a_lo = mpf("-inf")
        else:
            q_lo = _phi_inverse_bounds(_dyadic(self._prefix, n), wp)[0]
            a_lo = mpmath.fmul(s_c, q_lo, prec=wp, rounding="f")
        if self._prefix + 1 == 1 << n:
            a_hi = mpf("inf")
        else:
            q_hi = _phi_inverse_bounds(_dyadic(self._prefix + 1, n), wp)[1]
            a_hi = mpmath.fmul(s_c, q_hi, prec=wp, rounding="c")
        self._bounds = (a_lo, a_hi)

    def bounds(self, width: float | mpf | None = None) -> tuple[mpf, mpf]:
        """``(a_lo, a_hi)`` with ``a_lo <= A <= a_hi`` and, if ``width`` is given, ``a_hi − a_lo <= width``
        (drawing more bits of V₀ as needed)."""
        with self._lock:
            if self._nbits == 0:
                self._refine()
            if width is not None:
                w = mpf(width)
                while not (self._bounds[1] - self._bounds[0] <= w):
                    self._refine()
            return self._bounds


_ZERO_MEMO: dict = {}  # bounds of the unshifted law are not secret: shared across calls


class _ZeroShift:
    """The fixed shift A = 0 (a plain rounded Gaussian)."""

    def bounds(self, width=None):
        return mpf(0), mpf(0)

    def memo(self, sigma: float, prec: int) -> dict:
        if len(_ZERO_MEMO) > 64:  # bounded: a few laws are in use at a time
            _ZERO_MEMO.clear()
        return _ZERO_MEMO.setdefault((float(sigma), int(prec)), {})

    def __repr__(self) -> str:
        return "_ZeroShift()"


class RoundedShiftedGaussianLaw:
    """``IntegerLaw`` of ``X = round(G + A)`` given A, ``G ~ N(0, s²)``: ``S(j) = Φ̄((j − ½ − A)/s)``.

    ``shift`` is a :class:`SharedGaussianTerm` (the CSH shared term) or ``None`` for A = 0. The law
    pickles with its shift (Spark ships it to executors). See the module docstring for the bounds.
    """

    def __init__(self, sigma: float, shift: SharedGaussianTerm | None = None):
        sigma = float(sigma)
        if not (sigma > 0 and math.isfinite(sigma)):
            raise InvalidParameterError(f"sigma must be positive and finite, got {sigma!r}")
        self.sigma = sigma
        self.shift = _ZeroShift() if shift is None else shift

    def __repr__(self) -> str:
        return f"RoundedShiftedGaussianLaw(sigma={self.sigma!r}, shift={self.shift!r})"

    def _fill(self, memo: dict, todo: list[int], prec: int) -> None:
        a_lo, a_hi = self.shift.bounds(mpf(self.sigma) * mpf(2) ** (-prec - 2))
        _fill_bounds(memo, todo, self.sigma, a_lo, a_hi, prec)

    def window(self) -> tuple[int, int]:
        """``(j_lo, j_hi)``: ``S(j) >= 1 − 2^-70`` for j < j_lo, ``S(j) <= 2^-70`` for j > j_hi."""
        a_lo, a_hi = self.shift.bounds(self.sigma)  # A known to within s: a cheap, valid window
        half = _WINDOW_Z * self.sigma
        j_lo = int(mpmath.floor(a_lo + mpf(1) / 2 - mpf(half))) - 1
        j_hi = int(mpmath.ceil(a_hi + mpf(1) / 2 + mpf(half))) + 1
        return j_lo, j_hi

    def survival_bounds(self, j_lo: int, j_hi: int, prec: int) -> tuple[list[int], list[int]]:
        """For every integer j in [j_lo, j_hi]: ``lo <= 2^prec·S(j) <= hi``; ``hi − lo <= 3`` typically.

        A is first narrowed to width <= s·2^-(prec+2), so the spread of S over A's interval is at most
        ``2^-(prec+2)/√(2π)`` (|dS/dA| <= 1/(s√(2π))).
        """
        j_lo, j_hi, prec = int(j_lo), int(j_hi), int(prec)
        if j_hi < j_lo:
            return [], []
        if prec < 64:
            raise InvalidParameterError(f"prec must be >= 64, got {prec}")
        memo = self.shift.memo(self.sigma, prec)
        todo = [j for j in range(j_lo, j_hi + 1) if j not in memo]
        if todo:
            self._fill(memo, todo, prec)
        pairs = [memo[j] for j in range(j_lo, j_hi + 1)]
        return [p[0] for p in pairs], [p[1] for p in pairs]


def _fill_bounds(memo: dict, todo: list[int], sigma: float, a_lo: mpf, a_hi: mpf, prec: int) -> None:
    """memo[j] = (lo, hi) with lo <= 2^prec Φ̄((j − ½ − A)/σ) <= hi for every A in [a_lo, a_hi].

    One working precision ``wp = prec + 24 + 2·bitlen(max|x| + 1)`` for the batch (x = (j − ½ − A)/σ). With
    ``u = (j − ½ − a_lo)·(1/(σ√2))`` computed in round-to-nearest (relative error η <= 5·2^-wp: the
    constant 1/(σ√2) <= 3 ulps, one subtraction, one product), ``½erfc(u)`` is widened by the relative
    margin ``(2u² + 256)·2^{4−wp}`` = the one of :func:`phi_bar_bounds`: ``|d ln erfc(u)/d ln u| <= 2u² + 2``,
    so the argument error moves erfc by at most ``(2u² + 2)·5·2^-wp`` (relative), which the margin
    exceeds by 3x, leaving > 2^7 ulps for erfc's own documented few-ulp error. The upper bound adds ``(a_hi − a_lo)/σ · 0.3989422805`` for the spread
    of A (mean value theorem, ``|Φ̄'| <= 1/√(2π) < 0.3989422805``) plus 2^-(prec+30) for its rounding.
    """
    if mpmath.isinf(a_lo) or mpmath.isinf(a_hi):
        for j in todo:  # A not localised (cannot happen after bounds(width)); trivial bounds
            memo[j] = (0, 1 << prec)
        return
    top = 1 << prec
    xmax = max(abs(todo[0] - 0.5 - float(a_lo)), abs(todo[-1] - 0.5 - float(a_lo))) / sigma
    wp = int(prec) + 24 + 2 * (int(xmax) + 1).bit_length()
    with mpmath.workprec(wp):
        s = mpf(sigma)
        k = 1 / (s * mpmath.sqrt(2))
        spread = (a_hi - a_lo) / s * _INV_SQRT_2PI_UP * (1 + mpf(2) ** (8 - wp)) + mpf(2) ** (-prec - 30)
        scale = mpf(2) ** (4 - wp)
        for j in todo:
            u = (mpf(2 * j - 1) / 2 - a_lo) * k
            val = mpmath.erfc(u) / 2
            rel = (2 * u * u + 256) * scale
            lo = val * (1 - rel)
            hi = val * (1 + rel) + spread
            memo[j] = (max(0, _floor_scaled(lo, prec)), min(top, _floor_scaled(hi, prec, ceil=True)))


def _floor_scaled(x: mpf, prec: int, ceil: bool = False) -> int:
    """floor (or ceil) of 2^prec · x exactly, from x's raw form ±man·2^exp (no rounding to the context
    precision: mpmath's arithmetic, even unary minus, rounds to the context precision)."""
    if not x:
        return 0
    sign, man, exp, _ = x._mpf_  # |x| = man·2^exp, sign bit separate (mpmath's raw representation)
    man = -int(man) if sign else int(man)
    if ceil:
        man = -man
    shift = exp + prec
    out = man << shift if shift >= 0 else man >> -shift  # >> floors, also for negative man
    return -out if ceil else out


def _dyadic(p: int, n: int) -> mpf:
    """The exact number p/2^n as an mpf."""
    with mpmath.workprec(max(p.bit_length(), 1) + 8):
        return mpmath.ldexp(mpf(p), -n)
