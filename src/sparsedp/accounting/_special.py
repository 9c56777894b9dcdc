"""``special``: :mod:`scipy.special`, imported on first use (issue 31, start-up).

The accountants call ``special.erfcx``, ``special.ndtr``, ``special.log_ndtr``, ``special.betainc`` … through
this object: the first attribute read imports :mod:`scipy.special` (0.2–0.4 s of CPU in a fresh process) and
keeps the function, so every number is scipy's own, bit for bit. A release whose calibrations come from the
calibration cache (:mod:`.calibration_cache`) evaluates no special function and never imports scipy.
"""

from __future__ import annotations

from typing import Any, Protocol, overload

import numpy as np
import numpy.typing as npt

__all__ = ["special", "SpecialFunctions"]

_Floats = npt.NDArray[np.float64]
_AnyFloats = npt.NDArray[np.floating[Any]]


class SpecialFunctions(Protocol):
    """The :mod:`scipy.special` functions the accountants call, typed as the ufuncs they are: a float in gives a
    ``numpy.float64`` (a ``float``), an array in gives an array of the broadcast shape."""

    @overload
    def erf(self, x: float, /) -> np.float64: ...
    @overload
    def erf(self, x: _AnyFloats, /) -> _Floats: ...
    @overload
    def erfcx(self, x: float, /) -> np.float64: ...
    @overload
    def erfcx(self, x: _AnyFloats, /) -> _Floats: ...
    @overload
    def ndtr(self, x: float, /) -> np.float64: ...
    @overload
    def ndtr(self, x: _AnyFloats, /) -> _Floats: ...
    @overload
    def log_ndtr(self, x: float, /) -> np.float64: ...
    @overload
    def log_ndtr(self, x: _AnyFloats, /) -> _Floats: ...
    @overload
    def ndtri(self, p: float, /) -> np.float64: ...
    @overload
    def ndtri(self, p: _AnyFloats, /) -> _Floats: ...
    def betainc(self, a: _Floats, b: _Floats, x: _Floats | float, /) -> _Floats: ...
    def logsumexp(self, a: _Floats, *, axis: int) -> _Floats: ...


class _LazySpecial:
    """Attribute access imports :mod:`scipy.special` once and caches each function read on the instance."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        from scipy import special as sp

        value = getattr(sp, name)
        setattr(self, name, value)  # later reads find it in the instance dict (no __getattr__ call)
        return value


special: SpecialFunctions = _LazySpecial()
