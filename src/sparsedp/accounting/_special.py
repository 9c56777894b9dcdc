"""``special``: :mod:`scipy.special`, imported on first use (issue 31, start-up).

The accountants call ``special.erfcx``, ``special.ndtr``, ``special.log_ndtr``, ``special.betainc`` … through
this object: the first attribute read imports :mod:`scipy.special` (0.2–0.4 s of CPU in a fresh process) and
keeps the function, so every number is scipy's own, bit for bit. A release whose calibrations come from the
calibration cache (:mod:`.calibration_cache`) evaluates no special function and never imports scipy.
"""

from __future__ import annotations

from typing import Any

__all__ = ["special"]


class _LazySpecial:
    """Attribute access imports :mod:`scipy.special` once and caches each function read on the instance."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        from scipy import special as sp

        value = getattr(sp, name)
        setattr(self, name, value)  # later reads find it in the instance dict (no __getattr__ call)
        return value


special: Any = _LazySpecial()
