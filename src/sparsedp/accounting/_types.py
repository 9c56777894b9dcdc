"""Type aliases of the accountants' numeric values.

``FloatArray`` / ``IntArray``: numpy arrays of float64 / of integers (what the vectorised accountants
compute on). ``RealOrArray``: a real or such an array; the vectorised accountants broadcast over it and return a
``float`` for a scalar argument. ``Scale``: the scale of an exact integer noise law (a rational, however given).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any, TypeAlias

import numpy as np
import numpy.typing as npt

__all__ = ["FloatArray", "IntArray", "RealOrArray", "Scale"]

FloatArray: TypeAlias = npt.NDArray[np.float64]
IntArray: TypeAlias = npt.NDArray[np.integer[Any]]
RealOrArray: TypeAlias = "float | FloatArray"
#: a positive scale of exact integer noise: a float, an exact rational or a decimal string (as the samplers take)
Scale: TypeAlias = "float | Fraction | str"
