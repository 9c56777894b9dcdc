"""Argument checks shared by every public function.

Each check returns the normalised value or raises :class:`~sparsedp.errors.InvalidParameterError`
(a ``ValueError``) / :class:`~sparsedp.errors.InvalidTypeError` (a ``TypeError``) whose message names
the argument, the accepted range and the value received, e.g. ``epsilon must be > 0, got -1``.
"""

from __future__ import annotations

import math
import numbers
from fractions import Fraction

from .errors import InvalidParameterError, InvalidTypeError
from .errors import param_text


def _p(name: str) -> str:
    """The marker for parameter ``name`` (``"auto_share|AutoBound share"``: parameter ``auto_share``, called
    ``AutoBound share`` in Python; see :mod:`sparsedp.errors`)."""
    param, _, label = name.partition("|")
    return param_text(param, label=label or None)


def _param(name: str) -> str:
    return name.partition("|")[0]


def _is_bool(x: object) -> bool:
    return isinstance(x, bool) or type(x).__name__ == "bool_"


def real(name: str, x: object, *, lo: float | None = None, hi: float | None = None,
         lo_open: bool = False, hi_open: bool = False) -> float:
    """A finite real number in [lo, hi] (or open ends), returned as ``float``."""
    if x is None:
        raise InvalidTypeError(f"{_p(name)} is required (a real number)", param=_param(name))
    if _is_bool(x) or not isinstance(x, numbers.Real):
        raise InvalidTypeError(f"{_p(name)} must be a real number, got {type(x).__name__} {x!r}", param=_param(name))
    v = float(x)
    if not math.isfinite(v):
        raise InvalidParameterError(f"{_p(name)} must be finite, got {x!r}", param=_param(name))
    if lo is not None and (v < lo or (lo_open and v == lo)):
        raise InvalidParameterError(f"{_p(name)} must be {'>' if lo_open else '>='} {lo:g}, got {x!r}", param=_param(name))
    if hi is not None and (v > hi or (hi_open and v == hi)):
        raise InvalidParameterError(f"{_p(name)} must be {'<' if hi_open else '<='} {hi:g}, got {x!r}", param=_param(name))
    return v


def epsilon(x: object, name: str = "epsilon") -> float:
    """ε > 0, finite."""
    return real(name, x, lo=0.0, lo_open=True)


def epsilon_any(x: object, name: str = "epsilon") -> float:
    """Any finite real ε (hockey-stick divergences are defined for negative ε too)."""
    return real(name, x)


def delta(x: object, name: str = "delta") -> float:
    """0 < δ < 1."""
    return real(name, x, lo=0.0, hi=1.0, lo_open=True, hi_open=True)


def positive(name: str, x: object) -> float:
    """A finite real > 0 (σ, a scale, a margin that must be positive)."""
    return real(name, x, lo=0.0, lo_open=True)


def nonnegative(name: str, x: object) -> float:
    """A finite real >= 0."""
    return real(name, x, lo=0.0)


def integer(name: str, x: object, *, lo: int | None = 1, hi: int | None = None) -> int:
    """An integer in [lo, hi]; integral floats such as ``5.0`` are refused (say what you mean)."""
    if x is None:
        raise InvalidTypeError(f"{_p(name)} is required (an integer)", param=_param(name))
    if _is_bool(x) or not isinstance(x, numbers.Integral):
        raise InvalidTypeError(f"{_p(name)} must be an integer, got {type(x).__name__} {x!r}", param=_param(name))
    v = int(x)
    if lo is not None and v < lo:
        raise InvalidParameterError(f"{_p(name)} must be >= {lo}, got {v}", param=_param(name))
    if hi is not None and v > hi:
        raise InvalidParameterError(f"{_p(name)} must be <= {hi}, got {v}", param=_param(name))
    return v


def rational(name: str, x: object, *, positive_only: bool = True, allow_zero: bool = False) -> Fraction:
    """An exact rational: int, Fraction, or a decimal string such as ``"0.5"``.

    Floats are accepted only when they are exactly representable as the user wrote them is not
    knowable, so a float is converted with ``Fraction(x)`` (its exact binary value): that is exact,
    and is what the sampler then uses. NaN/inf are refused.
    """
    if _is_bool(x):
        raise InvalidTypeError(f"{_p(name)} must be a rational number, got bool", param=_param(name))
    try:
        if isinstance(x, Fraction):
            v = x
        elif isinstance(x, numbers.Integral):
            v = Fraction(int(x))
        elif isinstance(x, str):
            v = Fraction(x)
        elif isinstance(x, numbers.Real):
            if not math.isfinite(float(x)):
                raise InvalidParameterError(f"{_p(name)} must be finite, got {x!r}", param=_param(name))
            v = Fraction(float(x))
        elif isinstance(x, numbers.Rational):
            v = Fraction(x.numerator, x.denominator)
        else:
            raise InvalidTypeError(f"{_p(name)} must be a rational number (int, Fraction, decimal string), "
                                   f"got {type(x).__name__} {x!r}", param=_param(name))
    except (ValueError, ZeroDivisionError) as e:
        if isinstance(e, InvalidParameterError):
            raise
        raise InvalidParameterError(f"{_p(name)} must be a rational number, got {x!r}", param=_param(name)) from None
    if positive_only and (v < 0 or (v == 0 and not allow_zero)):
        raise InvalidParameterError(f"{_p(name)} must be {'>= 0' if allow_zero else '> 0'}, got {x!r}", param=_param(name))
    return v


def choice(name: str, x: object, options: tuple[str, ...]) -> str:
    """One of a fixed set of strings."""
    if not isinstance(x, str) or x not in options:
        raise InvalidParameterError(f"{_p(name)} must be one of {', '.join(map(repr, options))}; got {x!r}", param=_param(name))
    return x
