"""Aggregates released per key next to the distinct-unit count: ``Count``, ``Sum``, ``Mean``, ``Variance``, ``Std``.

Typed, frozen descriptions of *what* is released for every key; the accounting lives in
:mod:`sparsedp.accounting.aggregates`, the per-(unit, key) contributions in
:mod:`sparsedp.engines.aggregate_exprs`, the column noise in :mod:`sparsedp.mechanisms.aggregate_noise`.
No heavy import happens at module import time.

Contribution model (enforced by the engine, like ``l0``)
---------------------------------------------------------
Each privacy unit keeps at most ``l0`` keys (:mod:`sparsedp.engines.bounding`). For a kept key, the unit's
contribution to ``Sum(column, lower, upper)`` is the **sum of its rows' values of ``column`` for that key,
clipped to [lower, upper]** (one clip per (unit, key), after the unit's rows are added up — so a unit with
many small rows cannot exceed the bound either). Removing the unit changes the key's count by 1 and the key's
sum by that clipped contribution.

Fixed-point grid
----------------
The clipped contribution ``v`` is mapped to the public grid of step ``g = granularity`` by the deterministic
rounding ``q(v) = floor(v/g + 1/2)`` and then clipped again to the integer interval ``[q(lower), q(upper)]``
(the second clip only guards float rounding of ``v/g + 1/2``; ``q`` is monotone so it is a no-op in exact
arithmetic). Why this keeps the sensitivity bound: ``q`` is applied to *one unit's own* contribution, a
function of that unit's data only, before it is added to the key's total. So the key's grid sum
``Σ_units q(v_u)`` changes, when one unit is added or removed, by exactly that unit's ``q(v_u)``, an integer
in ``[q(lower), q(upper)]``: the sensitivity argument is the same as for the exact sums, with the bounds
``q(lower), q(upper)`` in grid units. Rounding is not noise and costs no privacy; it biases a unit's value by
at most ``g/2``.

Re-centring (Lebeda & Retschmeier (2024) §6, L346–348; After Lebeda & Retschmeier (2024) §3.5 "Sum-recentring trick"):
with ``recentre=True`` (the default) the engine sums ``q(v) − c`` with the integer centre
``c = floor((q(lower) + q(upper))/2)``, so each unit moves the column by at most
``ceil((q(upper) − q(lower))/2)`` instead of ``max(|q(lower)|, |q(upper)|)``, and the release adds ``c·g``
times the *noisy* count back (post-processing of released values). Under the default allocation (every column
gets the same μ as the count, :mod:`sparsedp.accounting.aggregates`) the squared error per key goes from
``max(|L|,|U|)²σ²`` to ``((U−L)/2)²σ² + ((U+L)/2)²σ² = (L² + U²)σ²/2``, never larger.

Default granularity: the power of two ``g = 2^(⌈log2(span)⌉ − 12)``, ``span = upper − lower`` (or
``max(|lower|, |upper|)`` when ``lower == upper``), so the range holds between 2^11 and 2^12 grid steps.
Justification: the rounding error (≤ g/2 ≤ span/2^12 per unit, half of that on average and of both signs) is
then below 1/4000 of the noise standard deviation the column needs for any useful privacy level (the noise
std is at least ``σ·sensitivity ≥ span/2`` grid·units·σ with σ ≥ 1), while the integers stay small: the
sampler's scale ``s_j ≈ (sensitivity)²·s`` is below ``2^24·s``, far inside the exact sampler's range
(``s ≤ 2^80``), and per-key grid sums stay exact in int64/float64 for up to 2^40 units per key. A power of
two makes ``v/g`` and ``q·g`` exact in binary floating point.

Sensitivity for the accountants (per key, per unit, in grid units): ``Sum`` and ``Mean`` expose
:attr:`Sum.sensitivity` (``D`` above, an ``int``); the L∞ sensitivity of the column in value units is
``D·g``. Columns have different sensitivities (non-uniform), so the accountant takes one per column and
gives each column its own noise scale ``s_j`` (diagonal Σ; a general Σ: ``release(..., column_shape=…)``,
:mod:`sparsedp.accounting.column_shape`).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any, Sequence
from fractions import Fraction

from . import _validate as v
from .errors import InvalidParameterError, InvalidTypeError

__all__ = ["Aggregate", "Count", "Sum", "Mean", "Quantile", "Median", "Variance", "Std", "Squares", "quantile_level",
           "default_granularity", "grid_index", "output_names", "noise_columns", "square_columns",
           "column_sensitivities", "DEFAULT_GRID_STEPS_LOG2"]

#: the default grid puts between 2^(this − 1) and 2^this steps across [lower, upper]
DEFAULT_GRID_STEPS_LOG2 = 12


def _name(name: object, what: str) -> str | None:
    if name is None:
        return None
    if not isinstance(name, str):
        raise InvalidTypeError(f"{what} name must be a string or None, got {type(name).__name__} {name!r}")
    if not name or name != name.strip() or any(ord(ch) < 32 for ch in name):
        raise InvalidParameterError(f"{what} name must be a non-empty string without leading/trailing spaces "
                                    f"or control characters, got {name!r}")
    return name


def _bound(what: str, x: object) -> float:
    if isinstance(x, bool) or not isinstance(x, numbers.Real):
        raise InvalidTypeError(f"{what} must be a real number, got {type(x).__name__} {x!r}")
    f = float(x)
    if not math.isfinite(f):
        raise InvalidParameterError(f"{what} must be finite, got {x!r}")
    return f


def default_granularity(lower: float, upper: float) -> float:
    """The default grid step: a power of two with 2^11 < span/g <= 2^12 (module docstring)."""
    span = upper - lower
    if span <= 0:
        span = max(abs(lower), abs(upper))
    if span <= 0:
        raise InvalidParameterError("lower == upper == 0: the sum is always 0, nothing to release")
    e = math.ceil(math.log2(span))
    if 2.0 ** e < span:  # log2 rounding
        e += 1
    return math.ldexp(1.0, e - DEFAULT_GRID_STEPS_LOG2)


def grid_index(x: float, granularity: float) -> int:
    """q(x) = floor(x/g + 1/2), computed exactly (the rounding the engine applies, module docstring)."""
    return math.floor(Fraction(x) / Fraction(granularity) + Fraction(1, 2))


@dataclass(frozen=True)
class Count:
    """The number of distinct privacy units per key (after bounding): the column that decides release.

    Output column ``count`` unless ``name`` is given. Always present in a release; listing it is optional.
    """

    name: str | None = None

    def __post_init__(self) -> None:
        _name(self.name, "Count")

    @property
    def output_name(self) -> str:
        return self.name or "count"


@dataclass(frozen=True)
class Sum:
    """Private sum of ``column`` per key; each unit's per-key total is clipped to [lower, upper].

    See the module docstring for the contribution model, the grid (``granularity``, default a power of two
    with about 2^12 steps over the range) and re-centring. Output column ``sum_<column>`` unless ``name``.
    """

    column: str
    lower: float
    upper: float
    granularity: float | None = None
    name: str | None = None
    recentre: bool = True

    _kind = "sum"

    def __post_init__(self) -> None:
        what = type(self).__name__
        if not isinstance(self.column, str) or not self.column:
            raise InvalidTypeError(f"{what} column must be a non-empty string, got {self.column!r}")
        lo = _bound(f"{what}({self.column!r}) lower", self.lower)
        hi = _bound(f"{what}({self.column!r}) upper", self.upper)
        if lo > hi:
            raise InvalidParameterError(f"{what}({self.column!r}): lower must be <= upper, got lower={lo:g} > "
                                        f"upper={hi:g}")
        object.__setattr__(self, "lower", lo)
        object.__setattr__(self, "upper", hi)
        if self.granularity is None:
            g = default_granularity(lo, hi)
        else:
            g = v.positive(f"{what}({self.column!r}) granularity", self.granularity)
        object.__setattr__(self, "granularity", g)
        _name(self.name, what)
        if not isinstance(self.recentre, bool):
            raise InvalidTypeError(f"{what} recentre must be a bool, got {self.recentre!r}")
        ql, qu = self.grid_bounds
        if max(abs(ql), abs(qu)) > 2**40:
            raise InvalidParameterError(
                f"{what}({self.column!r}): granularity {g:g} is too fine for bounds [{lo:g}, {hi:g}] "
                f"({max(abs(ql), abs(qu))} grid steps; at most 2^40)")
        if self.sensitivity == 0:
            raise InvalidParameterError(
                f"{what}({self.column!r}): granularity {g:g} is too coarse for bounds [{lo:g}, {hi:g}]: every "
                "contribution rounds to the same grid point, nothing to release")

    # --- the grid -----------------------------------------------------------------------------------------
    @property
    def grid_bounds(self) -> tuple[int, int]:
        """(q(lower), q(upper)): the integer range of one unit's gridded contribution (before re-centring)."""
        return grid_index(self.lower, self.step), grid_index(self.upper, self.step)

    @property
    def centre(self) -> int:
        """The integer centre c subtracted from each contribution (0 without re-centring)."""
        if not self.recentre:
            return 0
        ql, qu = self.grid_bounds
        return (ql + qu) // 2

    @property
    def sensitivity(self) -> int:
        """Per-key, per-unit L∞ sensitivity of the released grid column, in grid units (an int)."""
        ql, qu = self.grid_bounds
        c = self.centre
        return max(abs(ql - c), abs(qu - c))

    @property
    def sensitivity_value_units(self) -> float:
        """The same in value units: ``sensitivity * granularity``."""
        return self.sensitivity * self.step

    @property
    def step(self) -> float:
        """The grid step ``granularity`` (always set once constructed: the default is filled in at creation)."""
        assert self.granularity is not None
        return self.granularity

    @property
    def output_name(self) -> str:
        return self.name or f"{self._kind}_{self.column}"


@dataclass(frozen=True)
class Mean(Sum):
    """Private mean of ``column`` per key: (noisy sum) / (noisy count), post-processing of the two.

    Same contribution model, grid and sensitivity as :class:`Sum` (the noisy sum it divides is one aggregate
    column of the joint release). With re-centring the release is ``c·g + g·(S' + Y)/(n + Z)``, with S' the
    re-centred grid sum; bias and variance: :func:`sparsedp.mechanisms.aggregate_noise.mean_error`.
    Output column ``mean_<column>`` unless ``name``.
    """

    _kind = "mean"


def square_bounds(lower: float, upper: float) -> tuple[float, float]:
    """The range of ``v²`` for ``v`` in [lower, upper]: ``(0 or min(lower², upper²), max(lower², upper²))``."""
    hi = max(lower * lower, upper * upper)
    lo = 0.0 if lower <= 0.0 <= upper else min(lower * lower, upper * upper)
    return lo, hi


@dataclass(frozen=True)
class Squares(Sum):
    """The noisy grid column of a :class:`Variance`: per key, the sum over its kept units of the SQUARE of each
    unit's clipped per-key total ``v = clip(Σ rows, lower, upper)`` (internal: built by :func:`noise_columns`).

    Contribution model: a unit adds ``q(v²) − c`` with ``q`` the grid rounding of :class:`Sum` on the range of
    ``v²`` (:func:`square_bounds`, ``[0, max(lower², upper²)]`` when the bounds straddle 0), so its sensitivity
    (grid units) is that range's, re-centred; ``granularity`` (default: about 2^12 steps over that range) is
    the step of the squares' grid. ``lower``/``upper`` stay the bounds of ``v`` (the engines clip ``v`` first).
    """

    _kind = "squares"

    def __post_init__(self) -> None:
        lo, hi = _bound("Variance lower", self.lower), _bound("Variance upper", self.upper)
        if self.granularity is None and lo <= hi:
            object.__setattr__(self, "granularity", default_granularity(*square_bounds(lo, hi)))
        super().__post_init__()

    @property
    def value_bounds(self) -> tuple[float, float]:
        """The range of one unit's contribution before gridding: that of ``v²`` (:func:`square_bounds`)."""
        return square_bounds(self.lower, self.upper)

    @property
    def grid_bounds(self) -> tuple[int, int]:
        lo, hi = self.value_bounds
        return grid_index(lo, self.step), grid_index(hi, self.step)


@dataclass(frozen=True)
class Variance(Sum):
    """Private variance of the per-unit clipped totals of ``column`` per key, from three noisy statistics released
    jointly: the count ``n̂``, the sum ``Ŝ₁`` (the grid column of ``Sum(column, lower, upper)``, shared with a
    Sum/Mean of the same column and bounds) and the sum of squares ``Ŝ₂`` (:class:`Squares`, its own grid and
    sensitivity). Released value (post-processing of the three):

        var = clamp(Ŝ₂/n̂ − (Ŝ₁/n̂)², 0, ((upper − lower)/2)²)

    The interval is where the variance of any values in [lower, upper] lies (Popoviciu's inequality), so the
    clamp never moves the estimate away from the truth. It estimates the population variance (divisor n) of the
    units' clipped, gridded per-key totals; bias: ``docs/proofs/aggregates.md`` §8 (the squared noisy mean adds
    ``−Var(Ŝ₁ noise)/n²``, the ratio to the noisy count and the clamp add bias of order 1/n). ``granularity``
    is the grid of the sum; the squares' grid is the default one of their range. Output ``variance_<column>``.
    """

    _kind = "variance"

    @property
    def squares(self) -> Squares:
        """The noisy grid column of the sum of squares this variance reads."""
        return Squares(self.column, self.lower, self.upper, recentre=self.recentre)

    @property
    def clamp_upper(self) -> float:
        """The largest possible variance of values in [lower, upper]: ``((upper − lower)/2)²`` (Popoviciu)."""
        return ((self.upper - self.lower) / 2.0) ** 2


@dataclass(frozen=True)
class Std(Variance):
    """Private standard deviation: the square root of the released :class:`Variance` (post-processing; same
    columns, same accounting). Output ``std_<column>``."""

    _kind = "std"


Aggregate = Count | Sum | Mean | Variance | Std


def output_names(aggregates: Sequence[Any]) -> list[str]:
    """The output column names, checked for duplicates (raises InvalidParameterError)."""
    names: list[str] = []
    for a in aggregates:
        if not isinstance(a, (Count, Sum)):
            raise InvalidTypeError(f"aggregates must be Count, Sum, Mean, Variance or Std objects, got {type(a).__name__} {a!r}")
        names.append(a.output_name)
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise InvalidParameterError(f"duplicate output column name(s) {dup}; give the aggregates distinct names")
    return names


def _grid_key(a: Sum) -> tuple[Any, ...]:
    return (isinstance(a, Squares), a.column, a.lower, a.upper, a.granularity, a.recentre)


def noise_columns(aggregates: Sequence[Any]) -> tuple[list[Sum], list[int | None]]:
    """The distinct noisy grid columns of a release and, per aggregate, the index of the one it uses.

    A ``Variance``/``Std`` uses the grid sum of its column (as a ``Sum``) and, right after it, a :class:`Squares`
    column (shared by the variances of the same column and bounds); ``where`` gives its sum column.
    A ``Sum`` and a ``Mean`` (or two of either) of the same column with the same bounds, granularity and
    re-centring share ONE noisy grid sum: the mean is post-processing of it and of the noisy count, so it costs
    nothing extra. ``Count`` maps to ``None``. The returned columns are plain :class:`Sum` objects, in order of
    first use; their sensitivities are what the accountant charges (:func:`column_sensitivities`).
    """
    output_names(aggregates)  # type and duplicate-name checks
    cols: list[Sum] = []
    index: dict[tuple[Any, ...], int] = {}
    where: list[int | None] = []
    for a in aggregates:
        if not isinstance(a, Sum):
            where.append(None)
            continue
        key = _grid_key(a)
        if key not in index:
            index[key] = len(cols)
            cols.append(Sum(a.column, a.lower, a.upper, a.granularity, recentre=a.recentre))
        where.append(index[key])
        if isinstance(a, Variance):  # a variance also reads the sum of squares: one more noisy column
            sq = a.squares
            if _grid_key(sq) not in index:
                index[_grid_key(sq)] = len(cols)
                cols.append(sq)
    return cols, where


def square_columns(aggregates: Sequence[Any]) -> list[int | None]:
    """Per aggregate, the index (in :func:`noise_columns` order) of the :class:`Squares` column a
    :class:`Variance`/:class:`Std` reads; ``None`` for the others."""
    cols = noise_columns(aggregates)[0]
    keys = [_grid_key(c) for c in cols]
    return [keys.index(_grid_key(a.squares)) if isinstance(a, Variance) else None for a in aggregates]


def column_sensitivities(aggregates: Sequence[Any]) -> list[int]:
    """Grid-unit sensitivities of the distinct noisy columns (:func:`noise_columns`), for the accountant."""
    return [c.sensitivity for c in noise_columns(aggregates)[0]]


# ------------------------------------------------------------------ quantiles (docs/proofs/quantiles.md)

#: the largest denominator of a quantile level q (q = a/b in lowest terms, b <= this)
MAX_QUANTILE_DENOMINATOR = 10_000
#: default number of grid cells over [lower, upper] a quantile is chosen from
DEFAULT_QUANTILE_CELLS = 1024


def quantile_level(q: object, what: str = "Quantile") -> Fraction:
    """``q`` as the exact rational a/b the integer utility uses: the fraction with b <= :data:`MAX_QUANTILE_DENOMINATOR`
    within 1e-12 of ``q`` (``0.95`` -> 19/20, ``1/3`` -> 1/3); 0 < q < 1."""
    if isinstance(q, bool) or not isinstance(q, (numbers.Real, Fraction)):
        raise InvalidTypeError(f"{what} q must be a number in (0, 1), got {type(q).__name__} {q!r}")
    exact = q if isinstance(q, Fraction) else Fraction(float(q)) if isinstance(q, float) else Fraction(int(q)) \
        if isinstance(q, numbers.Integral) else Fraction(float(q))
    if not 0 < exact < 1:
        raise InvalidParameterError(f"{what} q must be strictly between 0 and 1, got {q!r}")
    f: Fraction = exact.limit_denominator(MAX_QUANTILE_DENOMINATOR)
    if abs(f - exact) > Fraction(1, 10**12):
        raise InvalidParameterError(f"{what} q={q!r} is not a fraction a/b with b <= {MAX_QUANTILE_DENOMINATOR}; give "
                                    f"it with at most 4 decimals (e.g. 0.95) or as a simple fraction (1/3)")
    return f


@dataclass(frozen=True)
class Quantile:
    """Private ``q``-quantile of ``column`` per released key, chosen from a public grid of ``cells`` cells over
    [lower, upper] by permute-and-flip (exponential-mechanism family) with integer utilities (:mod:`sparsedp.mechanisms.quantiles`;
    why this algorithm: ``docs/quantiles.md``; proof: ``docs/proofs/quantiles.md``).

    Contribution model (enforced by the engine, :mod:`sparsedp.engines.quantile_cells`): each unit keeps at most
    l0 of the *released* keys (uniform choice, secure source), and for each kept key at most ``max_rows`` of its
    rows (uniform choice, secure source), each row's value clipped to [lower, upper] and put in its grid cell.
    The quantile of a key is released only when the key's count is released, as its own pure-DP mechanism
    (``share`` of the release's ε; default 4/5 of ε for all quantiles together, equal parts), composed
    with the count by the ledger's event composition. Output column ``q<100·q>_<column>`` unless ``name``; the
    released value is the midpoint of the chosen cell.
    """

    column: str
    q: float
    lower: float
    upper: float
    cells: int = DEFAULT_QUANTILE_CELLS
    max_rows: int = 1
    share: float | None = None
    name: str | None = None

    def __post_init__(self) -> None:
        what = type(self).__name__
        if not isinstance(self.column, str) or not self.column:
            raise InvalidTypeError(f"{what} column must be a non-empty string, got {self.column!r}")
        level = quantile_level(self.q, f"{what}({self.column!r})")
        object.__setattr__(self, "q", float(level))
        lo = _bound(f"{what}({self.column!r}) lower", self.lower)
        hi = _bound(f"{what}({self.column!r}) upper", self.upper)
        if not lo < hi:
            raise InvalidParameterError(f"{what}({self.column!r}): lower must be < upper, got lower={lo:g}, "
                                        f"upper={hi:g}")
        object.__setattr__(self, "lower", lo)
        object.__setattr__(self, "upper", hi)
        object.__setattr__(self, "cells", v.integer(f"{what}({self.column!r}) cells", self.cells, lo=2,
                                                    hi=1 << 20))
        object.__setattr__(self, "max_rows", v.integer(f"{what}({self.column!r}) max_rows", self.max_rows, lo=1,
                                                       hi=1 << 20))
        if self.share is not None:
            s = _bound(f"{what}({self.column!r}) share", self.share)
            if not 0 < s < 1:
                raise InvalidParameterError(f"{what}({self.column!r}) share must be in (0, 1) (the part of epsilon "
                                            f"this quantile spends), got {self.share!r}")
            object.__setattr__(self, "share", s)
        _name(self.name, what)

    @property
    def level(self) -> Fraction:
        """q as the exact fraction a/b of the integer utility."""
        return quantile_level(self.q)

    @property
    def sensitivity(self) -> int:
        """L∞ sensitivity of the integer utility ``U_k = −|(b − a)·L_k − a·G_k|`` per unit and key:
        ``max_rows · max(a, b − a)`` (one row moves L_k or G_k by at most 1; docs/proofs/quantiles.md Lemma 1)."""
        a, b = self.level.numerator, self.level.denominator
        return self.max_rows * max(a, b - a)

    @property
    def width(self) -> float:
        """The grid cell width ``(upper − lower)/cells``."""
        return (self.upper - self.lower) / self.cells

    def cell_value(self, k: Any) -> Any:
        """The released value of cell ``k`` (its midpoint), numpy-vectorised."""
        return self.lower + (k + 0.5) * self.width

    @property
    def output_name(self) -> str:
        return self.name or f"q{float(self.level) * 100:g}_{self.column}"


@dataclass(frozen=True, init=False)
class Median(Quantile):
    """``Quantile(column, 0.5, lower, upper, …)``; output column ``median_<column>`` unless ``name``."""

    def __init__(self, column: str, lower: float, upper: float, cells: int = DEFAULT_QUANTILE_CELLS,
                 max_rows: int = 1, share: float | None = None, name: str | None = None) -> None:
        super().__init__(column, 0.5, lower, upper, cells, max_rows, share, name)

    @property
    def output_name(self) -> str:
        return self.name or f"median_{self.column}"
