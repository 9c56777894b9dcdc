"""Private vector sums and means from a frame or a file, in one call: :func:`vector_sum` and :func:`vector_mean`.

Source: Lebeda (2023) PhD thesis, Ch. 4 (elliptical Gaussian / parallelotope Laplace sums with per-coordinate
sensitivities) and Ch. 5 (PLAN mean estimation) (Lebeda (2023) L1595–2557; spec
Lebeda (2023) §2–3). The mechanisms live in :mod:`sparsedp.mechanisms.elliptical`,
:mod:`sparsedp.mechanisms.vector_grid` (secure grid of the sums) and :mod:`sparsedp.mechanisms.mean` (PLAN);
this module reads the data, enforces the contribution model, charges the ledger and returns typed results.

Input. Any input :func:`sparsedp.release` accepts through the Polars engine (Polars/pandas frames, Polars
LazyFrame, pyarrow Table, DuckDB relation, Parquet/CSV path or glob), in one of two layouts:

* wide: ``columns=[…]``, one column per coordinate (one or more rows per unit);
* long: ``coordinate=`` and ``value=`` columns, one row per (unit, coordinate[, repeated]); the coordinates are
  the public list ``coordinates=`` (or the keys of ``lower``/``upper`` given as dicts). Rows whose coordinate
  is not listed are ignored (the curator is told how many); a coordinate a unit has no row for is 0.

Contribution model (enforced here, never trusted): a unit's vector v has v_i = the sum of the unit's values for
coordinate i (over all its rows); then v is clipped — to the box [lower_i, upper_i] per coordinate (default),
or, with ``max_norm=C`` for sums, scaled down to the ℓ2 ball ‖v‖₂ <= C. One unit therefore moves a released
sum by at most its bound, whatever its raw values.

Neighbouring relations. The thesis analyses replace-one (n public; per-coordinate sensitivity Δ_i =
upper_i − lower_i, or 2C for the ℓ2 ball), which is the default and how the ledger is charged
(:class:`~sparsedp.accounting.calibration.Neighbours`). :func:`vector_sum` also offers add/remove
(``neighbours="add-remove"``: Δ_i = max(|lower_i|, |upper_i|), or C; n stays private) —
``docs/proofs/vector-sums.md``. PLAN (:func:`vector_mean`) is replace-one, as in the thesis; its
``method="sum-count"`` (noisy add/remove sum / noisy count) is the add/remove alternative.

Noise and accounting: exact discrete Gaussian (or discrete Laplace) noise per coordinate on a public integer
grid, accounted as ρ-zCDP (Canonne–Kamath–Steinke 2020, Thm 14) and converted to (ε, δ) with their
Corollary 13 (:mod:`sparsedp.accounting.zcdp`); the ledger gets one charge carrying (ε, δ) and ρ.
``insecure_float=True`` uses float noise (warned; research only).
"""

from __future__ import annotations

import contextlib
import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, ContextManager, Mapping, Sequence

import numpy as np

from . import _validate as v
from .accounting.calibration import Neighbours
from .errors import InputDataError, InvalidParameterError, InvalidTypeError

__all__ = ["VectorGuarantee", "VectorCurator", "VectorSum", "VectorMean", "vector_sum", "vector_mean"]

_RELATIONS = {"replace-one": Neighbours.REPLACE_ONE, "add-remove": Neighbours.ADD_REMOVE}
_MAX_DENSE = 300_000_000      # PLAN needs the n x d matrix in memory


# ---------------------------------------------------------------- results


@dataclass(frozen=True)
class VectorGuarantee:
    """The public guarantee of a vector release: (ε, δ)-DP for ``neighbours`` (and ρ-zCDP when ``rho`` is set),
    the mechanism, the noise family actually sampled, and the contribution model the library enforced."""

    epsilon: float
    delta: float
    rho: float | None
    neighbours: Neighbours
    mechanism: str
    noise: str
    contribution: str

    def __str__(self) -> str:
        z = f", {self.rho:.6g}-zCDP" if self.rho is not None else ""
        return f"({self.epsilon:g}, {self.delta:g})-DP{z}, {self.neighbours.value}; {self.mechanism}, {self.noise}"


@dataclass(frozen=True)
class VectorCurator:
    """For the curator only — NOT private: rows/units read, how much clipping changed, rounding, timings."""

    source: str
    rows_in: int
    units_in: int
    rows_ignored: int
    values_clipped: int
    units_clipped: int
    rounding_bound: np.ndarray | None
    timings: Mapping[str, float] = field(default_factory=dict)

    def lines(self) -> list[str]:
        rb = "" if self.rounding_bound is None or not np.any(self.rounding_bound) else \
            f"; grid rounding error <= {float(np.max(self.rounding_bound)):.3g} per coordinate"
        return ["  -- for the curator only (not private, do not publish) --",
                f"  input         {self.source}: {self.rows_in} rows, {self.units_in} units, {self.rows_ignored} rows "
                f"with an unlisted coordinate ignored",
                f"  clipping      {self.units_clipped} units clipped ({self.values_clipped} coordinate values "
                f"outside the box){rb}",
                "  time          " + ", ".join(f"{k} {t:.2f}s" for k, t in self.timings.items())]


class _Printable:
    def __str__(self) -> str:
        return "\n".join(self.lines() + self.curator.lines())  # type: ignore[attr-defined]

    def to_frame(self):
        """A Polars frame: coordinate, estimate, noise_std (public)."""
        import polars as pl

        return pl.DataFrame({"coordinate": list(self.coordinates), "estimate": np.asarray(self.estimate),  # type: ignore
                             "noise_std": np.asarray(self.noise_std)})  # type: ignore[attr-defined]


@dataclass(frozen=True, eq=False)
class VectorSum(_Printable):
    """A private vector sum (:func:`vector_sum`).

    ``estimate[i]``: the noisy sum of coordinate ``coordinates[i]``; ``noise_std[i]``: the std of its noise
    (value units; 0 for a coordinate with zero sensitivity); ``expected_error``: E‖η‖_p^p of the whole vector
    (m_p Σ σ_i^p for Gaussian noise, thesis Lemma 4.3/4.7; Γ(p+1) Σ s_i^p for Laplace, Lemma 4.10);
    ``spherical_error``: the same for the standard isotropic mechanism at the same privacy (Alg. 14 / Laplace
    with s = ‖Δ‖₁/ε), so ``improvement`` = spherical/elliptical. ``sensitivity[i]``: Δ_i under the relation;
    ``n_units``: the number of units (public under replace-one only, else None); ``grid``: the public integer
    grid and noise law (:class:`~sparsedp.mechanisms.vector_grid.VectorGrid`; None with float noise). Public,
    except ``curator``.
    """

    coordinates: tuple[str, ...]
    estimate: np.ndarray
    noise_std: np.ndarray
    expected_error: float
    spherical_error: float
    p: float
    sensitivity: np.ndarray
    guarantee: VectorGuarantee
    n_units: int | None
    grid: Any = field(repr=False)
    curator: VectorCurator = field(repr=False)

    @property
    def improvement(self) -> float:
        return self.spherical_error / self.expected_error

    def lines(self) -> list[str]:
        return ["sparsedp vector sum",
                f"  guarantee     {self.guarantee}",
                f"  contribution  {self.guarantee.contribution}",
                f"  coordinates   {len(self.coordinates)}" + (f"; {self.n_units} units" if self.n_units else ""),
                f"  noise         std per coordinate {_range(self.noise_std)}; E||eta||_{self.p:g}^{self.p:g} = "
                f"{self.expected_error:.6g} ({self.improvement:.3g}x below isotropic noise)"]


@dataclass(frozen=True, eq=False)
class VectorMean(_Printable):
    """A private mean by PLAN (:func:`vector_mean`, thesis Algorithm 17).

    ``estimate[i]``: the private mean of coordinate ``coordinates[i]``; ``noise_std[i]``: the std of the Gaussian
    noise on it (the clipping bias and sampling error come on top); ``expected_error``: E‖noise‖_p^p.
    ``plan``: the :class:`~sparsedp.mechanisms.mean.MeanEstimate` (private centre, σ̂, clip radius C, budget
    split; all outputs of private steps, public). ``n_units`` is public (replace-one). With
    ``method="sum-count"``: ``plan`` is None, ``n_units`` None (private under add/remove) and ``noisy_count`` the
    released noisy number of units.
    """

    coordinates: tuple[str, ...]
    estimate: np.ndarray
    noise_std: np.ndarray
    expected_error: float
    p: float
    guarantee: VectorGuarantee
    n_units: int | None
    plan: Any = field(repr=False)
    curator: VectorCurator = field(repr=False)
    noisy_count: float | None = None

    def lines(self) -> list[str]:
        if self.plan is None:
            head = ["sparsedp vector mean (noisy sum / noisy count)", f"  guarantee     {self.guarantee}",
                    f"  contribution  {self.guarantee.contribution}",
                    f"  coordinates   {len(self.coordinates)}; noisy unit count {self.noisy_count:g}"]
        else:
            parts = ", ".join(f"{k} {x:.3g}" for k, x in self.plan.rho_parts.items())
            head = ["sparsedp vector mean (PLAN)", f"  guarantee     {self.guarantee}",
                    f"  contribution  {self.guarantee.contribution}",
                    f"  coordinates   {len(self.coordinates)}; {self.n_units} units",
                    f"  budget (rho)  {parts}; clip radius C = {self.plan.clip_radius:.4g}"]
        return head + [f"  noise         std per coordinate {_range(self.noise_std)}; "
                       f"E||eta||_{self.p:g}^{self.p:g} = {self.expected_error:.6g}"]


def _range(a: np.ndarray) -> str:
    a = np.asarray(a, dtype=float)
    lo, hi = float(a.min()), float(a.max())
    return f"{lo:.4g}" if math.isclose(lo, hi, rel_tol=1e-9) else f"{lo:.4g} .. {hi:.4g}"


# ---------------------------------------------------------------- argument handling


def _relation(neighbours: Any) -> Neighbours:
    if isinstance(neighbours, Neighbours):
        return neighbours
    if isinstance(neighbours, str) and neighbours.replace("_", "-").lower() in _RELATIONS:
        return _RELATIONS[neighbours.replace("_", "-").lower()]
    raise InvalidParameterError(f"neighbours must be 'replace-one' or 'add-remove' (or a sparsedp.Neighbours), "
                                f"got {neighbours!r}")


def _privacy(epsilon, delta, rho, *, pure: bool, insecure_float: bool) -> tuple[float, float, float | None, float]:
    """(ε, δ) to charge, the zCDP ρ of the noise (None for pure / float-analytic), σ_opt (Gaussian, else nan).

    Gaussian: give ``epsilon`` and ``delta`` (ρ = the largest ρ whose CKS conversion gives (ε, δ); with
    ``insecure_float`` σ_opt is the analytic Gaussian's instead), or ``rho`` and ``delta`` (ε = the CKS
    conversion of ρ at δ). Laplace: ``epsilon`` only.
    """
    from .accounting.zcdp import zcdp_to_dp_epsilon
    from .mechanisms.elliptical import _largest_rho_for, unit_sigma

    if pure:
        if rho is not None or delta not in (None, 0, 0.0):
            raise InvalidParameterError("mechanism='laplace' is pure epsilon-DP: give epsilon only (no delta, rho)")
        if epsilon is None:
            raise InvalidParameterError("mechanism='laplace' needs epsilon")
        return v.epsilon(epsilon), 0.0, None, math.nan
    if delta is None:
        raise InvalidParameterError("give ⟨delta⟩ (0 < delta < 1) with ⟨epsilon⟩, or with ⟨rho⟩ (the delta at which "
                                    "the rho-zCDP guarantee is stated and charged)", param="delta")
    dlt = v.delta(delta)
    if (epsilon is None) == (rho is None):
        raise InvalidParameterError("give exactly one of ⟨epsilon⟩ or ⟨rho⟩ (with ⟨delta⟩)", param="epsilon")
    if rho is not None:
        r = v.positive("rho", rho)
        return zcdp_to_dp_epsilon(r, dlt), dlt, r, 1.0 / math.sqrt(2.0 * r)
    eps = v.epsilon(epsilon)
    r = _largest_rho_for(eps, dlt)
    s_opt = unit_sigma(epsilon=eps, delta=dlt, insecure_float=True) if insecure_float else 1.0 / math.sqrt(2.0 * r)
    return eps, dlt, r, s_opt


def _layout(columns, coordinate, value, coordinates, lower, upper) -> tuple[tuple[str, ...], bool]:
    """(coordinate names, long?)."""
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
        return tuple(cols), False
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
    return names, True


def _bound_vector(name: str, b: Any, coords: tuple[str, ...]) -> np.ndarray:
    d = len(coords)
    if isinstance(b, Mapping):
        missing = [c for c in coords if c not in {str(k) for k in b}]
        if missing:
            raise InvalidParameterError(f"{name} has no bound for coordinate(s) {missing[:5]!r}")
        m = {str(k): x for k, x in b.items()}
        arr = np.array([v.real(f"{name}[{c!r}]", m[c]) for c in coords], dtype=float)
    elif np.ndim(b) == 0:
        arr = np.full(d, v.real(name, b))
    else:
        vals = list(b)
        if len(vals) != d:
            raise InvalidParameterError(f"{name} has {len(vals)} entries for {d} coordinates")
        arr = np.array([v.real(f"{name}[{i}]", x) for i, x in enumerate(vals)], dtype=float)
    return arr


def _box(lower, upper, coords) -> tuple[np.ndarray, np.ndarray]:
    if lower is None or upper is None:
        raise InvalidParameterError("give lower= and upper= (per coordinate, or one number for all): each unit's "
                                    "value of a coordinate is clipped to [lower, upper]")
    lo, hi = _bound_vector("lower", lower, coords), _bound_vector("upper", upper, coords)
    bad = np.flatnonzero(hi < lo)
    if bad.size:
        i = int(bad[0])
        raise InvalidParameterError(f"lower > upper for coordinate {coords[i]!r}: lower={lo[i]!r}, upper={hi[i]!r}")
    return lo, hi


# ---------------------------------------------------------------- reading the data


def _per_unit(data: Any, unit: str, coords: tuple[str, ...], long: bool, coordinate, value, connection=None,
              index_units: bool = False):
    """(per-unit frame, rows, units, rows ignored). Wide: one row per unit, columns ``__u, __c0 … __c{d−1}`` (the
    unit's sums). Long: one row per (unit, listed coordinate) with ``__u, __i, __v`` (and ``__j``, the unit's index
    in order of first appearance, with ``index_units``). Wide frames keep the units' first-appearance order when
    ``index_units`` (PLAN's draws then do not depend on hash order).

    Every input check happens here (columns, types, nulls, NaN/inf), before any charge or noise.
    """
    import polars as pl

    if not isinstance(unit, str) or not unit:
        raise InvalidParameterError(f"privacy_unit must be a column name, got {unit!r}")
    lf, schema = _lazy_input(data, connection)
    rows = _checked_rows(lf, schema, unit, coords, long, coordinate, value)
    if not long:
        # wide: one group-by over the units, per-unit sums of every coordinate column (named __c0, __c1, …)
        wide = lf.group_by(pl.col(unit).alias("__u"), maintain_order=index_units).agg(
            [pl.col(c).cast(pl.Float64).sum().alias(f"__c{j}") for j, c in enumerate(coords)])
        try:
            frame = wide.collect()
        except pl.exceptions.PolarsError as e:
            raise InputDataError(f"could not aggregate the input per unit: {e}") from None
        return frame, rows, frame.height, 0
    raw = lf.select(pl.col(unit).alias("__u"), pl.col(coordinate).cast(pl.String).alias("__k"),
                    pl.col(value).cast(pl.Float64).alias("__v"))
    keys = pl.DataFrame({"__k": list(coords), "__i": np.arange(len(coords), dtype=np.int64)}).lazy()
    agg = raw.join(keys, on="__k", how="inner").group_by("__u", "__i").agg(pl.col("__v").sum(),
                                                                            pl.len().alias("__rows"))
    if index_units:
        units = lf.select(pl.col(unit).alias("__u")).unique(maintain_order=True).with_row_index("__j")
        agg = agg.join(units, on="__u", how="inner")
        count = units.select(pl.len().alias("n"))
    else:
        count = lf.select(pl.col(unit).n_unique().alias("n"))
    try:
        agg_df, n_df = pl.collect_all([agg, count])
    except pl.exceptions.PolarsError as e:
        raise InputDataError(f"could not aggregate the input per unit: {e}") from None
    used = int(agg_df["__rows"].sum()) if agg_df.height else 0
    return agg_df.drop("__rows"), rows, int(n_df["n"][0]), rows - used


def _lazy_input(data: Any, connection: Any) -> tuple[Any, Any]:
    """``(LazyFrame, schema)`` of a vector release's input (frames, DuckDB relations/SQL, files; not Spark)."""
    import polars as pl

    from .core import sources
    from .engines.polars_engine import to_lazy

    k = sources.kind(data)
    if k == "file":
        sources.file_format(data)
    if k == "spark":
        raise InputDataError("vector releases read frames, DuckDB relations/SQL and Parquet/CSV files; convert the "
                             "Spark DataFrame first (e.g. write it to Parquet)")
    try:
        if k == "sql":
            import duckdb

            data = (connection if connection is not None else duckdb).sql(data)
        lf = to_lazy(data)
        return lf, lf.collect_schema()
    except Exception as e:  # noqa: BLE001 - Polars' and DuckDB's read errors, reported in the user's terms
        if isinstance(e, pl.exceptions.PolarsError) or type(e).__module__.split(".")[0] in ("duckdb", "_duckdb"):
            raise InputDataError(f"could not read the input: {e}") from None
        raise


def _checked_rows(lf: Any, schema: Any, unit: str, coords: tuple[str, ...], long: bool, coordinate: Any,
                  value: Any) -> int:
    """The number of input rows, after checking the columns exist, the values are numeric, and the unit,
    coordinate and value columns hold no null, NaN or infinity (one pass over the data)."""
    import polars as pl

    value_cols = list(coords) if not long else [value]
    needed = [unit] + ([coordinate] if long else []) + value_cols
    missing = [c for c in needed if c not in schema]
    if missing:
        raise InputDataError(f"column(s) {missing!r} not in the data (columns: {list(schema.names())})")
    for c in value_cols:
        dt = schema[c]
        if not dt.is_numeric() or dt == pl.Boolean:
            raise InvalidTypeError(f"value column {c!r} must be numeric, got {dt}")
    checks = [pl.len().alias("rows"), pl.col(unit).null_count().alias(f"null|{unit}")]
    if long:
        checks.append(pl.col(coordinate).null_count().alias(f"null|{coordinate}"))
    for c in value_cols:
        checks.append(pl.col(c).null_count().alias(f"null|{c}"))
        if schema[c].is_float():
            checks.append((~pl.col(c).is_finite()).sum().alias(f"nonfinite|{c}"))
    try:
        row = lf.select(checks).collect().row(0, named=True)
    except pl.exceptions.PolarsError as e:
        raise InputDataError(f"could not read the input: {e}") from None
    rows = int(row.pop("rows"))
    if rows == 0:
        raise InputDataError("the input has no rows; nothing to release")
    bad = [(key.split("|", 1)[1], key.split("|", 1)[0], int(n)) for key, n in row.items() if n]
    if bad:
        what = "; ".join(f"{c!r}: {n} {'null' if kind == 'null' else 'NaN or infinite'} value(s)" for c, kind, n in bad)
        raise InputDataError(f"the unit, coordinate and value columns must be free of nulls, NaN and infinities: "
                             f"{what}. Nothing was released.")
    return rows


def _dense(frame, long: bool, n_units: int, d: int) -> np.ndarray:
    """The units × coordinates matrix (units in order of first appearance; missing coordinates 0)."""
    if not long:
        return frame.select([f"__c{j}" for j in range(d)]).to_numpy().astype(float, copy=True)
    x = np.zeros((n_units, d))
    x[frame["__j"].to_numpy(), frame["__i"].to_numpy()] = frame["__v"].to_numpy()
    return x


def _open(ledger, dataset):
    from .execution import LedgerSession

    session = LedgerSession(ledger, dataset)
    return session.ledger, session.owned


@contextlib.contextmanager
def _checked_ledger(ledger, dataset, charge, what: str | None, insecure_float: bool = False) -> Any:
    """The ledger of a vector release, pre-checked before any data is read, closed on exit if opened here: the
    insecure-noise warning, the ledger (``None`` without one), the neighbouring relation against the budget's
    (``what``: the release's name in the message; ``None`` = add/remove, always admitted) and the budget. Nothing
    is charged here."""
    if insecure_float:
        from .report import warn_insecure

        warn_insecure()
    led, own = _open(ledger, dataset)
    try:
        if what is not None:
            _check_relation(led, dataset, charge, what)
        if led is not None:
            led.check(dataset, charge)
        yield led
    finally:
        if own:
            led.close()


def _check_relation(led, dataset, charge, what: str) -> None:
    if led is not None and charge.neighbours is Neighbours.REPLACE_ONE and \
            led.budget_neighbours(dataset) is Neighbours.ADD_REMOVE:
        raise InvalidParameterError(
            f"release refused: dataset {dataset!r} has an add/remove budget and {what} is private for replace-one "
            f"neighbours (the number of units is public). " + (
                "Pass neighbours='add-remove' (sensitivity max(|lower|, |upper|) per coordinate), or give the "
                "dataset a replace-one budget." if what.startswith("this vector sum") else
                "Use method='sum-count' (CLI: --method sum-count; add/remove), or give the dataset a replace-one "
                "budget (Ledger.set_budget(..., neighbours=Neighbours.REPLACE_ONE) or `sparsedp ledger init "
                "--neighbours replace-one`).") + " Nothing was charged.")


def _source(rng):
    from .request import source

    return source(rng)


def _stage(progress):
    return progress or (lambda name: contextlib.nullcontext())


# ---------------------------------------------------------------- vector sum


def vector_sum(data: Any, privacy_unit: str, *, columns: Sequence[str] | None = None, coordinate: str | None = None,
               value: str | None = None, coordinates: Sequence[Any] | None = None, lower: Any = None,
               upper: Any = None, max_norm: float | None = None, epsilon: float | None = None,
               delta: float | None = None, rho: float | None = None, mechanism: str = "gaussian",
               neighbours: Any = "replace-one", p: float = 2.0, shape: str = "optimal", ledger: Any = None,
               dataset: str | None = None, connection: Any = None, insecure_float: bool = False, rng: Any = None,
               progress: Callable[[str], ContextManager[Any]] | None = None) -> VectorSum:
    """Private sum of the units' vectors: the elliptical Gaussian (thesis Algorithm 15) with per-coordinate bounds.

    Args:
        data: Polars/pandas frame, Polars LazyFrame, pyarrow Table, DuckDB relation, SQL text (run by DuckDB on
            ``connection``, default its in-memory one), or a Parquet/CSV path (glob). Spark: write it to Parquet.
        privacy_unit: the column identifying whom the guarantee protects.
        columns: wide layout — the coordinate columns. Or ``coordinate`` and ``value`` (long layout) with the
            public ``coordinates`` list (or dict bounds keyed by coordinate).
        lower, upper: the box, per coordinate (a number, a sequence in coordinate order, or a dict). Contribution
            model: a unit's vector is the per-coordinate sum of its rows' values, each coordinate clipped to
            [lower_i, upper_i] (enforced). Sensitivity Δ_i = upper_i − lower_i (replace-one, the thesis's
            relation; n is then public and reported) or max(|lower_i|, |upper_i|) (``neighbours="add-remove"``).
        max_norm: instead of the box, scale each unit's vector into the ℓ2 ball of radius C (Δ₂ = 2C replace-one,
            C add/remove) with isotropic noise (Algorithm 14).
        epsilon, delta / rho, delta: the guarantee (ρ-zCDP of the noise, converted to (ε, δ) by
            Canonne–Kamath–Steinke Cor. 13). ``mechanism="laplace"``: pure ε-DP parallelotope Laplace
            (Algorithm 16), ``epsilon`` only, box only.
        p, shape: the error exponent the noise shape minimises (E‖η‖_p^p; 2 = squared ℓ2) and the shape
            ("optimal" b_i ∝ Δ_i^{p/(p+2)}, Lemma 4.8; "spherical"; "proportional").
        ledger, dataset: charge the release (one charge: (ε, δ), ρ, the relation) — checked before reading, committed
            after the data are read and checked, before any noise.
        insecure_float: float noise instead of exact discrete noise (research only; warned).
        rng: a :mod:`sparsedp.noise` source (tests); None = the secure default.
        progress: ``progress(stage)`` → context manager around each stage (the CLI's display).

    Returns:
        :class:`VectorSum` (estimate, noise std per coordinate, expected error, guarantee; ``curator`` not private).
    """
    from .mechanisms import elliptical as ell
    from .mechanisms.vector_grid import box_grid, l2_grid

    t0 = time.perf_counter()
    stage = _stage(progress)
    sp = _plan_sum(columns, coordinate, value, coordinates, lower, upper, max_norm, epsilon, delta, rho, mechanism,
                   neighbours, p, shape, insecure_float)
    rel, pure, coords, long, d, eps, dlt, pp = sp.rel, sp.pure, sp.coords, sp.long, sp.d, sp.eps, sp.dlt, sp.pp
    lo, hi, sens, scales, expected, spherical = sp.lo, sp.hi, sp.sens, sp.scales, sp.expected, sp.spherical
    grid, noise_name, guarantee, charge = sp.grid, sp.noise_name, sp.guarantee, sp.charge
    with _checked_ledger(ledger, dataset, charge, "this vector sum", insecure_float) as led:
        timings = {"validate": time.perf_counter() - t0}
        t = time.perf_counter()
        with stage("reading and clipping each unit's vector"):
            agg, rows, n_units, ignored = _per_unit(data, privacy_unit, coords, long, coordinate, value, connection)
            if grid is not None:
                grid.check_units(n_units)
            sums, clipped_values, clipped_units = _clipped_sums(agg, long, d, n_units, lo, hi, max_norm, grid)
        timings["read+clip"] = time.perf_counter() - t
        charge_id = led.charge(dataset, charge, note=f"vector sum ({d} coordinates)") if led is not None else None
        t = time.perf_counter()
        with stage(f"adding noise ({noise_name})"):
            src = _source(rng)
            if grid is not None:
                est = grid.release(sums, n_units, grid.sample(src))
                noise_std = np.array(grid.noise_std)
            else:
                from . import noise

                draw = noise.sample_laplace if pure else noise.sample_gaussian
                eta = np.asarray(draw(1.0, d, rng=src, insecure_float=True), dtype=float)
                est = np.asarray(sums, dtype=float) + eta * scales
                noise_std = scales * (math.sqrt(2.0) if pure else 1.0)
        timings["noise"] = time.perf_counter() - t
        if charge_id is not None:
            led.mark_published(charge_id, None)
    if grid is not None:  # expected error of the noise actually added (per-coordinate scale γ_i·s or γ_i·t)
        per = np.asarray(grid.noise_std, dtype=float) / (math.sqrt(2.0) if pure else 1.0)
        mom = ell.laplace_moment(pp) if pure else ell.gaussian_moment(pp)
        expected = mom * float(np.sum(per[per > 0] ** pp))
    timings["total"] = time.perf_counter() - t0
    est.setflags(write=False)
    noise_std = np.asarray(noise_std, dtype=float)
    noise_std.setflags(write=False)
    curator = VectorCurator(source=_display(data), rows_in=rows, units_in=n_units, rows_ignored=ignored,
                            values_clipped=clipped_values, units_clipped=clipped_units,
                            rounding_bound=None if grid is None else grid.rounding_bound(n_units), timings=timings)
    return VectorSum(coordinates=coords, estimate=est, noise_std=noise_std, expected_error=float(expected),
                     spherical_error=float(spherical), p=pp, sensitivity=sens,
                     guarantee=guarantee, n_units=n_units if rel is Neighbours.REPLACE_ONE else None,
                     grid=grid, curator=curator)


@dataclass(frozen=True, eq=False)
class _SumPlan:
    """What :func:`vector_sum` fixes before reading any data: the relation, the layout, the guarantee, the box
    (or ball) and its sensitivities, the noise scales and grid, the public description and the ledger charge."""

    rel: Neighbours
    pure: bool
    coords: tuple
    long: bool
    d: int
    eps: float
    dlt: float
    pp: float
    lo: Any
    hi: Any
    sens: Any
    scales: Any
    expected: float
    spherical: float
    grid: Any
    noise_name: str
    guarantee: Any
    charge: Any


def _plan_sum(columns, coordinate, value, coordinates, lower, upper, max_norm, epsilon, delta, rho, mechanism,
              neighbours, p, shape, insecure_float) -> _SumPlan:
    """The data-independent part of :func:`vector_sum` (its arguments checked, calibrated, priced)."""
    from .accounting.charge import Charge
    from .mechanisms.vector_grid import box_grid, l2_grid

    rel = _relation(neighbours)
    v.choice("mechanism", mechanism, ("gaussian", "laplace"))
    pure = mechanism == "laplace"
    if not isinstance(insecure_float, bool):
        raise InvalidTypeError(f"insecure_float must be a bool, got {insecure_float!r}")
    coords, long = _layout(columns, coordinate, value, coordinates, lower, upper)
    d = len(coords)
    eps, dlt, zrho, s_opt = _privacy(epsilon, delta, rho, pure=pure, insecure_float=insecure_float)
    pp = v.positive("p", p)
    if max_norm is not None:
        sens, scales, expected, spherical, contribution, mech_name = _ball(max_norm, lower, upper, pure, d, rel,
                                                                           s_opt, pp)
        c, lo, hi = v.positive("max_norm", max_norm), None, None
    else:
        lo, hi = _box(lower, upper, coords)
        sens, scales, expected, spherical, contribution, mech_name = _box_calibration(lo, hi, rel, pure, eps, dlt,
                                                                                      zrho, pp, shape,
                                                                                      insecure_float)
    grid = None
    if not insecure_float:
        if max_norm is not None:
            grid = l2_grid(c, d, zrho, rel)
        else:
            grid = box_grid(lo, hi, scales, rel, rho=None if pure else zrho, epsilon=eps if pure else None)
        scales = np.array(grid.noise_std) / (math.sqrt(2.0) if pure else 1.0)
    noise_name = ("float " + ("Laplace" if pure else "Gaussian") + " (INSECURE)") if insecure_float else \
        ("discrete Laplace" if pure else "discrete Gaussian") + " per coordinate"
    guarantee = VectorGuarantee(epsilon=eps, delta=dlt, rho=None if (pure or insecure_float) else zrho,
                                neighbours=rel, mechanism=mech_name, noise=noise_name, contribution=contribution)
    charge = Charge(epsilon=eps, delta=dlt, neighbours=rel, mechanism=mech_name.split(" ")[0],
                    rho=guarantee.rho)
    return _SumPlan(rel=rel, pure=pure, coords=coords, long=long, d=d, eps=eps, dlt=dlt, pp=pp, lo=lo, hi=hi,
                    sens=sens, scales=scales, expected=expected, spherical=spherical, grid=grid,
                    noise_name=noise_name, guarantee=guarantee, charge=charge)


def _ball(max_norm, lower, upper, pure, d, rel, s_opt, pp) -> tuple:
    """The ℓ2-ball sum: sensitivities 2C (replace-one) or C, isotropic σ, its expected errors and description."""
    from .mechanisms import elliptical as ell

    if lower is not None or upper is not None:
        raise InvalidParameterError("give either lower=/upper= (box) or max_norm= (l2 ball), not both")
    if pure:
        raise InvalidParameterError("max_norm (l2 ball) goes with the Gaussian mechanism; the Laplace mechanism "
                                    "needs a box (lower=, upper=)")
    c = v.positive("max_norm", max_norm)
    sens = np.full(d, (2.0 if rel is Neighbours.REPLACE_ONE else 1.0) * c)
    sigma = s_opt * (2.0 if rel is Neighbours.REPLACE_ONE else 1.0) * c
    expected = ell.gaussian_moment(pp) * d * sigma ** pp
    contribution = f"each unit's vector (the per-coordinate sum of its rows) scaled into the l2 ball of radius {c:g}"
    return sens, np.full(d, sigma), expected, expected, contribution, "spherical-gaussian"


def _box_calibration(lo, hi, rel, pure, eps, dlt, zrho, pp, shape, insecure_float) -> tuple:
    """The box sum: per-coordinate sensitivities, the calibrated scales (Laplace, zCDP Gaussian or float
    Gaussian), their expected errors and description."""
    from .mechanisms import elliptical as ell

    sens = (hi - lo) if rel is Neighbours.REPLACE_ONE else np.maximum(np.abs(lo), np.abs(hi))
    if not np.any(sens > 0):
        raise InvalidParameterError("every coordinate has sensitivity 0 (lower == upper"
                                    + ("" if rel is Neighbours.REPLACE_ONE else " == 0") + "): nothing to release")
    if pure:
        cal = ell.calibrate_laplace(sens, epsilon=eps, p=pp, shape=shape)
    elif zrho is not None and not insecure_float:
        cal = ell.calibrate_gaussian(sens, rho=zrho, p=pp, shape=shape)
    else:
        cal = ell.calibrate_gaussian(sens, epsilon=eps, delta=dlt, p=pp, shape=shape, insecure_float=True)
    contribution = "each unit's vector (the per-coordinate sum of its rows) clipped to [lower_i, upper_i] per " \
                   "coordinate"
    mech_name = "parallelotope-laplace" if pure else ("spherical-gaussian" if shape == "spherical"
                                                      else f"elliptical-gaussian ({shape} shape, p={pp:g})")
    return sens, np.array(cal.scales), cal.expected_error, cal.spherical_error, contribution, mech_name


def _display(data) -> str:
    from .core import sources

    return sources.display(data)


def _clipped_sums(agg, long: bool, d: int, n_units: int, lo, hi, max_norm, grid) -> tuple[np.ndarray, int, int]:
    """Per-coordinate sums of the clipped (and, with a grid, gridded) unit vectors; coordinates a unit has no row
    for count as 0 (clipped like any value). Returns (sums: int64 grid sums or float sums, values clipped,
    units clipped)."""
    import polars as pl

    if not long:
        return _clipped_sums_wide(agg, d, lo, hi, max_norm, grid)
    if max_norm is not None:
        norms = agg.group_by("__u").agg((pl.col("__v") ** 2).sum().sqrt().alias("__n"))
        f = agg.join(norms, on="__u").with_columns(
            pl.when(pl.col("__n") > max_norm).then(max_norm / pl.col("__n")).otherwise(1.0).alias("__f"))
        units_clipped = int((norms["__n"] > max_norm).sum())
        vals = pl.col("__v") * pl.col("__f")
        if grid is None:
            s = f.group_by("__i").agg(vals.sum().alias("__s"))
            out = np.zeros(d)
            out[s["__i"].to_numpy()] = s["__s"].to_numpy()
            return out, units_clipped, units_clipped
        g = float(grid.spacing[0])
        k = int(grid.radius_units) + 1
        r = (vals / g).round().clip(-k, k).cast(pl.Int64)
        s = f.group_by("__i").agg(r.sum().alias("__s"))
        out = np.zeros(d, dtype=np.int64)
        out[s["__i"].to_numpy()] = s["__s"].to_numpy()
        return out, units_clipped, units_clipped
    params = {"__i": np.arange(d, dtype=np.int64), "__lo": lo, "__hi": hi}
    if grid is not None:
        gam = np.where(grid.spacing > 0, grid.spacing, 1.0)
        params.update({"__o": np.asarray(grid.offset), "__g": gam, "__rlo": np.asarray(grid.r_lo),
                       "__rhi": np.asarray(grid.r_hi)})
    f = agg.join(pl.DataFrame(params), on="__i")
    clipped = (pl.col("__v") < pl.col("__lo")) | (pl.col("__v") > pl.col("__hi"))
    cv = pl.col("__v").clip(pl.col("__lo"), pl.col("__hi"))
    if grid is not None:
        contrib = ((cv - pl.col("__o")) / pl.col("__g")).round().clip(pl.col("__rlo"), pl.col("__rhi")) \
            .cast(pl.Int64)
    else:
        contrib = cv
    s = f.group_by("__i").agg(contrib.sum().alias("__s"), pl.len().alias("__c"))
    stats = f.select(clipped.sum().alias("v"), pl.col("__u").filter(clipped).n_unique().alias("u")).row(0)
    present = np.zeros(d, dtype=np.int64)
    present[s["__i"].to_numpy()] = s["__c"].to_numpy()
    # coordinates a unit has no row for: value 0, clipped to the box like any value
    zero = np.clip(0.0, lo, hi)
    missing = n_units - present
    if grid is not None:
        gam = np.where(grid.spacing > 0, grid.spacing, 1.0)
        r0 = np.clip(np.rint((zero - grid.offset) / gam), grid.r_lo, grid.r_hi).astype(np.int64)
        out = np.zeros(d, dtype=np.int64)
        out[s["__i"].to_numpy()] = s["__s"].to_numpy()
        out = out + missing * r0
    else:
        out = np.zeros(d)
        out[s["__i"].to_numpy()] = s["__s"].to_numpy()
        out = out + missing * zero
    # implicit zeros outside the box are clipped too (counted as values; their units are not identified)
    extra = int(np.sum(np.where(zero != 0.0, missing, 0)))
    return out, int(stats[0]) + extra, int(stats[1])


# ---------------------------------------------------------------- vector mean (PLAN)


def vector_mean(data: Any, privacy_unit: str, *, columns: Sequence[str] | None = None, coordinate: str | None = None,
                value: str | None = None, coordinates: Sequence[Any] | None = None, lower: Any = None,
                upper: Any = None, epsilon: float | None = None, delta: float | None = None,
                rho: float | None = None, variances: Any = "estimate", p: float = 2.0, budget: dict | None = None,
                beta: float = 0.05, method: str = "plan", count_share: float = 0.1, ledger: Any = None,
                dataset: str | None = None, connection: Any = None, insecure_float: bool = False, rng: Any = None,
                progress: Callable[[str], ContextManager[Any]] | None = None) -> VectorMean:
    """Private mean of the units' vectors by PLAN (thesis Algorithm 17, variance-aware; ρ-zCDP), replace-one.

    ``method="sum-count"`` is the add/remove alternative (for add/remove budgets; n stays private): the elliptical
    Gaussian sum of :func:`vector_sum` with ``neighbours="add-remove"`` at ρ(1 − ``count_share``) divided by a
    noisy unit count N_ℤ(0, 1/(2ρ·count_share)) (sensitivity 1); zCDP composition gives ρ. ``noise_std`` is then
    the delta-method std √(σ_i² + m_i² σ_c²)/ñ from released values (m: the estimate, ñ: the noisy count); the
    variance-aware steps of PLAN (``variances``, ``budget``, ``beta``) do not apply.

    Same input layouts and contribution model as :func:`vector_sum`: a unit's vector is the per-coordinate sum of
    its rows, clipped to the box [lower_i, upper_i] (enforced). PLAN then runs on the box re-centred at its
    public midpoint with M = max_i (upper_i − lower_i)/2 (a public shift: pre- and post-processing):
    private coordinate-wise median, private variances σ̂ (``variances="estimate"``, Algorithm 18 with the χ²
    correction; ``"binary"`` for 0/1 data; ``"none"`` for σ̂ ≡ 1, Theorem 5.4; or a list of public
    variance guesses, no budget), scaling by σ̂^{−2/(p+2)}, a private clip radius C, and exact discrete Gaussian
    noise N_ℤ on a grid (:func:`sparsedp.mechanisms.mean.plan_mean`). ``budget``: the ρ split (default: thesis
    §5.7.2). The guarantee is replace-one (n public) as in the thesis; (ε, δ) from ρ by CKS Cor. 13.

    Returns:
        :class:`VectorMean` (estimate, per-coordinate noise std, expected error E‖η‖_p^p, guarantee, PLAN details).
    """
    from .accounting.charge import Charge
    from .mechanisms.mean import plan_mean

    t0 = time.perf_counter()
    stage = _stage(progress)
    if not isinstance(insecure_float, bool):
        raise InvalidTypeError(f"insecure_float must be a bool, got {insecure_float!r}")
    coords, long = _layout(columns, coordinate, value, coordinates, lower, upper)
    d = len(coords)
    lo, hi = _box(lower, upper, coords)
    if not np.all(hi > lo):
        i = int(np.argmax(~(hi > lo)))
        raise InvalidParameterError(f"PLAN needs lower < upper for every coordinate; coordinate {coords[i]!r} has "
                                    f"lower = upper = {lo[i]!r}")
    eps, dlt, zrho, _ = _privacy(epsilon, delta, rho, pure=False, insecure_float=False)
    pp = v.positive("p", p)
    v.choice("method", method, ("plan", "sum-count"))
    if method == "sum-count":
        return _sum_count_mean(data, privacy_unit, coords, long, coordinate, value, lo, hi, eps, dlt, zrho, pp,
                               v.real("count_share", count_share, lo=0.0, hi=1.0, lo_open=True, hi_open=True),
                               ledger, dataset, connection, insecure_float, rng, stage, t0)
    mid = (lo + hi) / 2.0
    m = float(np.max((hi - lo) / 2.0))
    rel = Neighbours.REPLACE_ONE
    noise_name = "float Gaussian (INSECURE)" if insecure_float else "discrete Gaussian per coordinate"
    guarantee = VectorGuarantee(epsilon=eps, delta=dlt, rho=zrho, neighbours=rel,
                                mechanism=f"PLAN (p={pp:g}, variances={variances if isinstance(variances, str) else 'public'})",
                                noise=noise_name,
                                contribution="each unit's vector (the per-coordinate sum of its rows) clipped to "
                                             "[lower_i, upper_i] per coordinate")
    charge = Charge(epsilon=eps, delta=dlt, neighbours=rel, mechanism="plan", rho=zrho)
    with _checked_ledger(ledger, dataset, charge, "PLAN (thesis Ch. 5)", insecure_float) as led:
        timings = {"validate": time.perf_counter() - t0}
        t = time.perf_counter()
        with stage("reading and clipping each unit's vector"):
            agg, rows, n_units, ignored = _per_unit(data, privacy_unit, coords, long, coordinate, value, connection,
                                                    index_units=True)
            if n_units * d > _MAX_DENSE:
                raise InputDataError(f"PLAN holds the units x coordinates matrix in memory: {n_units} x {d} is too "
                                     f"large (limit {_MAX_DENSE:,} values)")
            x = _dense(agg, long, n_units, d)
            xc = np.clip(x, lo, hi)
            changed = xc != x
            values_clipped, units_clipped = int(changed.sum()), int(np.any(changed, axis=1).sum())
            del x
            xc -= mid
        timings["read+clip"] = time.perf_counter() - t
        # the sample-size checks of plan_mean raise before any noise; run them before the charge
        charge_id = None
        t = time.perf_counter()
        with stage("PLAN: private centre, variances, clip radius, noise"):
            src = _source(rng)
            if isinstance(variances, str):
                var = variances
            else:
                var = _bound_vector("variances", variances, coords)
            kw = dict(rho=zrho, bound=m, p=pp, variances=var, beta=beta, budget=budget, rng=src,
                      insecure_float=insecure_float)
            _plan_checks(xc, kw)
            if led is not None:
                charge_id = led.charge(dataset, charge, note=f"vector mean PLAN ({d} coordinates)")
            est = plan_mean(xc, **kw)
        timings["plan"] = time.perf_counter() - t
        if charge_id is not None:
            led.mark_published(charge_id, None)
    timings["total"] = time.perf_counter() - t0
    mean = np.asarray(est.mean, dtype=float) + mid
    mean.setflags(write=False)
    nstd = np.asarray(est.noise_std, dtype=float)
    nstd.setflags(write=False)
    curator = VectorCurator(source=_display(data), rows_in=rows, units_in=n_units, rows_ignored=ignored,
                            values_clipped=values_clipped, units_clipped=units_clipped, rounding_bound=None,
                            timings=timings)
    return VectorMean(coordinates=coords, estimate=mean, noise_std=nstd, expected_error=float(est.expected_error),
                      p=pp, guarantee=guarantee, n_units=n_units, plan=est, curator=curator)


def _sum_count_mean(data, unit, coords, long, coordinate, value, lo, hi, eps, dlt, zrho, pp, share, ledger, dataset,
                    connection, insecure_float, rng, stage, t0) -> VectorMean:
    """``vector_mean(method="sum-count")``: add/remove; elliptical sum at ρ(1 − share) / count at ρ·share."""
    from fractions import Fraction

    from . import noise
    from .accounting.charge import Charge
    from .mechanisms import elliptical as ell
    from .mechanisms.vector_grid import box_grid

    if insecure_float:
        raise InvalidParameterError("method='sum-count' uses exact discrete noise only; drop insecure_float=True")
    rel = Neighbours.ADD_REMOVE
    rho_c = zrho * share
    rho_s = zrho - rho_c
    sens = np.maximum(np.abs(lo), np.abs(hi))
    if not np.any(sens > 0):
        raise InvalidParameterError("every coordinate has lower == upper == 0: nothing to release")
    cal = ell.calibrate_gaussian(sens, rho=rho_s, p=pp)
    grid = box_grid(lo, hi, np.array(cal.scales), rel, rho=rho_s)
    count_s2 = 1 / (2 * Fraction(rho_c))
    guarantee = VectorGuarantee(epsilon=eps, delta=dlt, rho=zrho, neighbours=rel,
                                mechanism=f"noisy elliptical sum / noisy count (count share {share:g} of rho)",
                                noise="discrete Gaussian per coordinate and on the count",
                                contribution="each unit's vector (the per-coordinate sum of its rows) clipped to "
                                             "[lower_i, upper_i] per coordinate; the unit counts once")
    charge = Charge(epsilon=eps, delta=dlt, neighbours=rel, mechanism="vector-mean-sum-count", rho=zrho)
    with _checked_ledger(ledger, dataset, charge, None) as led:
        timings = {"validate": time.perf_counter() - t0}
        t = time.perf_counter()
        with stage("reading and clipping each unit's vector"):
            agg, rows, n_units, ignored = _per_unit(data, unit, coords, long, coordinate, value, connection)
            grid.check_units(n_units)
            sums, clipped_values, clipped_units = _clipped_sums(agg, long, len(coords), n_units, lo, hi, None,
                                                                grid)
        timings["read+clip"] = time.perf_counter() - t
        charge_id = led.charge(dataset, charge, note=f"vector mean sum/count ({len(coords)} coordinates)") \
            if led is not None else None
        t = time.perf_counter()
        with stage("adding noise (discrete Gaussian)"):
            src = _source(rng)
            total = grid.release(sums, n_units, grid.sample(src))
            count = n_units + int(noise.sample_discrete_gaussian(count_s2, 1, rng=src)[0])
        timings["noise"] = time.perf_counter() - t
        if charge_id is not None:
            led.mark_published(charge_id, None)
    timings["total"] = time.perf_counter() - t0
    den = float(max(count, 1))
    mean = total / den
    sig = np.asarray(grid.noise_std, dtype=float)
    nstd = np.sqrt(sig ** 2 + mean ** 2 * float(count_s2)) / den
    mean.setflags(write=False)
    nstd.setflags(write=False)
    curator = VectorCurator(source=_display(data), rows_in=rows, units_in=n_units, rows_ignored=ignored,
                            values_clipped=clipped_values, units_clipped=clipped_units,
                            rounding_bound=grid.rounding_bound(n_units) / den, timings=timings)
    return VectorMean(coordinates=coords, estimate=mean, noise_std=nstd,
                      expected_error=ell.gaussian_moment(pp) * float(np.sum(nstd ** pp)), p=pp, guarantee=guarantee,
                      n_units=None, plan=None, curator=curator, noisy_count=float(count))


def _clipped_sums_wide(frame, d: int, lo, hi, max_norm, grid) -> tuple[np.ndarray, int, int]:
    """:func:`_clipped_sums` for the wide per-unit frame: one ``select`` of per-column expressions (no reshaping)."""
    import polars as pl

    cols = [pl.col(f"__c{j}") for j in range(d)]
    if max_norm is not None:
        norm = pl.sum_horizontal([c * c for c in cols]).sqrt()
        f = pl.when(norm > max_norm).then(max_norm / norm).otherwise(1.0)
        vals = [c * f for c in cols]
        over = norm > max_norm
        if grid is None:
            exprs = [x.sum().alias(f"s{j}") for j, x in enumerate(vals)]
        else:
            g, k = float(grid.spacing[0]), int(grid.radius_units) + 1
            exprs = [(x / g).round().clip(-k, k).cast(pl.Int64).sum().alias(f"s{j}") for j, x in enumerate(vals)]
        row = frame.select(*exprs, over.sum().alias("u")).row(0)
        out = np.array(row[:d], dtype=np.int64 if grid is not None else float)
        return out, int(row[d]), int(row[d])
    exprs = []
    for j, c in enumerate(cols):
        cv = c.clip(float(lo[j]), float(hi[j]))
        if grid is None:
            exprs.append(cv.sum().alias(f"s{j}"))
        elif grid.spacing[j] > 0:
            exprs.append(((cv - float(grid.offset[j])) / float(grid.spacing[j])).round()
                         .clip(int(grid.r_lo[j]), int(grid.r_hi[j])).cast(pl.Int64).sum().alias(f"s{j}"))
        else:
            exprs.append(pl.lit(0, dtype=pl.Int64).alias(f"s{j}"))
    outside = [(c < float(lo[j])) | (c > float(hi[j])) for j, c in enumerate(cols)]
    row = frame.select(*exprs, pl.sum_horizontal([o.cast(pl.Int64) for o in outside]).sum().alias("v"),
                       pl.any_horizontal(outside).sum().alias("u")).row(0)
    out = np.array(row[:d], dtype=np.int64 if grid is not None else float)
    return out, int(row[d]), int(row[d + 1])


def _plan_checks(x: np.ndarray, kw: dict) -> None:
    """PLAN's input checks (sample size, binary data, variances) without drawing noise: a dry run of the
    argument validation of :func:`~sparsedp.mechanisms.mean.plan_mean` on a source that refuses to be used."""
    from .mechanisms.mean import plan_mean

    class _NoDraw:  # any use of the source ends the dry run before a word of randomness is produced
        def uint64(self, *a, **k):
            raise _Checked

        def random_bytes(self, *a, **k):
            raise _Checked

        def __getattr__(self, name):
            raise _Checked

    try:
        plan_mean(x, **{**kw, "rng": _NoDraw(), "insecure_float": False})
    except _Checked:
        return


class _Checked(Exception):
    pass
