"""A vector release's arguments checked once, before any data is read: the neighbouring relation, the privacy
parameters (ε, δ or ρ), the layout (wide columns or long coordinate/value rows) and the box of per-coordinate bounds.

Every refusal names its argument and the fix; nothing here reads data or draws randomness.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from .. import _validate as v
from ..accounting.calibration import Neighbours
from ..accounting.zcdp import zcdp_to_dp_epsilon
from ..errors import InvalidParameterError, InvalidTypeError
from ..mechanisms.elliptical import _largest_rho_for, unit_sigma

__all__ = ["VectorInput", "Privacy", "relation", "privacy", "vector_input", "bound_vector", "box", "secure_flag"]

_RELATIONS = {"replace-one": Neighbours.REPLACE_ONE, "add-remove": Neighbours.ADD_REMOVE}


@dataclass(frozen=True)
class VectorInput:
    """Where a vector release reads its units' vectors: the input, the unit column, the public coordinate names,
    and the layout — wide (``long=False``: one column per coordinate, ``coords`` are the columns) or long
    (``coordinate``/``value`` columns, one row per unit and coordinate) — and the DuckDB connection for SQL."""

    data: Any
    unit: str
    coords: tuple[str, ...]
    long: bool
    coordinate: str | None
    value: str | None
    connection: Any = None

    @property
    def d(self) -> int:
        return len(self.coords)


@dataclass(frozen=True)
class Privacy:
    """The guarantee to charge: (ε, δ), the zCDP ρ of the noise (``None`` for pure ε-DP) and σ_opt, the noise
    scale of a unit-sensitivity Gaussian (nan for Laplace)."""

    epsilon: float
    delta: float
    rho: float | None
    sigma_opt: float


def relation(neighbours: Any) -> Neighbours:
    """``neighbours=``: ``"replace-one"``, ``"add-remove"`` or a :class:`Neighbours`."""
    if isinstance(neighbours, Neighbours):
        return neighbours
    if isinstance(neighbours, str) and neighbours.replace("_", "-").lower() in _RELATIONS:
        return _RELATIONS[neighbours.replace("_", "-").lower()]
    raise InvalidParameterError(f"neighbours must be 'replace-one' or 'add-remove' (or a sparsedp.Neighbours), "
                                f"got {neighbours!r}")


def secure_flag(insecure_float: Any) -> bool:
    if not isinstance(insecure_float, bool):
        raise InvalidTypeError(f"insecure_float must be a bool, got {insecure_float!r}")
    return insecure_float


def privacy(epsilon: Any, delta: Any, rho: Any, *, pure: bool, insecure_float: bool) -> Privacy:
    """The guarantee to charge, the zCDP ρ of the noise and σ_opt.

    Gaussian: give ``epsilon`` and ``delta`` (ρ = the largest ρ whose Canonne–Kamath–Steinke (2020) Cor. 13
    conversion gives (ε, δ); with ``insecure_float`` σ_opt is the analytic Gaussian's instead), or ``rho`` and
    ``delta`` (ε = the conversion of ρ at δ). Laplace: ``epsilon`` only.
    """
    if pure:
        if rho is not None or delta not in (None, 0, 0.0):
            raise InvalidParameterError("mechanism='laplace' is pure epsilon-DP: give epsilon only (no delta, rho)")
        if epsilon is None:
            raise InvalidParameterError("mechanism='laplace' needs epsilon")
        return Privacy(v.epsilon(epsilon), 0.0, None, math.nan)
    if delta is None:
        raise InvalidParameterError("give ⟨delta⟩ (0 < delta < 1) with ⟨epsilon⟩, or with ⟨rho⟩ (the delta at which "
                                    "the rho-zCDP guarantee is stated and charged)", param="delta")
    dlt = v.delta(delta)
    if (epsilon is None) == (rho is None):
        raise InvalidParameterError("give exactly one of ⟨epsilon⟩ or ⟨rho⟩ (with ⟨delta⟩)", param="epsilon")
    if rho is not None:
        r = v.positive("rho", rho)
        return Privacy(zcdp_to_dp_epsilon(r, dlt), dlt, r, 1.0 / math.sqrt(2.0 * r))
    eps = v.epsilon(epsilon)
    r = _largest_rho_for(eps, dlt)
    s_opt = unit_sigma(epsilon=eps, delta=dlt, insecure_float=True) if insecure_float else 1.0 / math.sqrt(2.0 * r)
    return Privacy(eps, dlt, r, s_opt)


def vector_input(data: Any, unit: Any, columns: Any, coordinate: Any, value: Any, coordinates: Any, lower: Any,
                 upper: Any, connection: Any) -> VectorInput:
    """The layout: ``columns=[…]`` (wide) or ``coordinate=``/``value=`` with the public ``coordinates`` list
    (long; or the keys of ``lower``/``upper`` given as dicts)."""
    if not isinstance(unit, str) or not unit:
        raise InvalidParameterError(f"privacy_unit must be a column name, got {unit!r}")
    if columns is not None:
        if coordinate is not None or value is not None:
            raise InvalidParameterError("give either columns=[…] (wide: one column per coordinate) or coordinate= "
                                        "and value= (long format), not both")
        cols = [columns] if isinstance(columns, str) else list(columns)
        if not cols or not all(isinstance(c, str) and c for c in cols):
            raise InvalidParameterError(f"columns must be a non-empty list of column names, got {columns!r}")
        if len(set(cols)) != len(cols):
            raise InvalidParameterError(f"columns has duplicates: {cols!r}")
        if coordinates is not None and list(map(str, coordinates)) != cols:
            raise InvalidParameterError("coordinates= is for the long format; in the wide format the columns are "
                                        "the coordinates")
        return VectorInput(data, unit, tuple(cols), False, None, None, connection)
    if coordinate is None or value is None:
        raise InvalidParameterError("give columns=[…] (wide: one column per coordinate), or coordinate= and value= "
                                    "(long format: one row per unit and coordinate)")
    if coordinates is None:
        dicts = [b for b in (lower, upper) if isinstance(b, Mapping)]
        if not dicts:
            raise InvalidParameterError("the long format needs the public list of coordinates: coordinates=[…] "
                                        "(or lower=/upper= as dicts keyed by coordinate); it is never read from "
                                        "the data")
        coordinates = list(dicts[0])
    names = tuple(str(c) for c in coordinates)
    if not names:
        raise InvalidParameterError("coordinates must not be empty")
    if len(set(names)) != len(names):
        raise InvalidParameterError("coordinates has duplicates")
    return VectorInput(data, unit, names, True, coordinate, value, connection)


def bound_vector(name: str, b: Any, coords: tuple[str, ...]) -> np.ndarray:
    """``b`` (a number, a sequence in coordinate order, or a dict keyed by coordinate) as one float per
    coordinate."""
    d = len(coords)
    if isinstance(b, Mapping):
        missing = [c for c in coords if c not in {str(k) for k in b}]
        if missing:
            raise InvalidParameterError(f"{name} has no bound for coordinate(s) {missing[:5]!r}")
        m = {str(k): x for k, x in b.items()}
        return np.array([v.real(f"{name}[{c!r}]", m[c]) for c in coords], dtype=float)
    if np.ndim(b) == 0:
        return np.full(d, v.real(name, b))
    vals = list(b)
    if len(vals) != d:
        raise InvalidParameterError(f"{name} has {len(vals)} entries for {d} coordinates")
    return np.array([v.real(f"{name}[{i}]", x) for i, x in enumerate(vals)], dtype=float)


def box(lower: Any, upper: Any, coords: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
    """``(lower, upper)`` per coordinate, ``lower <= upper``."""
    if lower is None or upper is None:
        raise InvalidParameterError("give lower= and upper= (per coordinate, or one number for all): each unit's "
                                    "value of a coordinate is clipped to [lower, upper]")
    lo, hi = bound_vector("lower", lower, coords), bound_vector("upper", upper, coords)
    bad = np.flatnonzero(hi < lo)
    if bad.size:
        i = int(bad[0])
        raise InvalidParameterError(f"lower > upper for coordinate {coords[i]!r}: lower={lo[i]!r}, upper={hi[i]!r}")
    return lo, hi
