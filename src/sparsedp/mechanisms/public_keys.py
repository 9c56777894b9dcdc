"""Public key domain (Lebeda (2024); the peers' "public partitions"): ``release(..., keys=…)`` gives every listed key a
noisy count, with no threshold. Keys absent from the data get noise too; keys in the data but not in the list are
dropped. The list is public: it must not be derived from the private data (a list built from the data's own keys
would disclose which keys occur).

Mechanisms (registered; calibrations in :mod:`sparsedp.accounting.public_keys`, whose docstring cites the
lemmas): ``correlated-gaussian`` (Lebeda (2024) Algorithm 1 in its embedding form, trade-off weight ``c``, known-n
variant ``known_n``), ``public-gaussian`` (independent Gaussian), ``public-laplace`` (independent Laplace); Lebeda (2024)
Algorithm 2 (keys in groups, one group per unit): ``grouped-correlated-gaussian`` in :mod:`.grouped_keys`.
``auto`` with ``keys=`` picks the one with the lowest per-key error std.

Data path (every engine): the engine's bounded histogram (ℓ0 bound ``max_groups_per_unit`` if given, one
contribution per key per unit), then :meth:`PublicKeyMechanism.prepare` joins it to the key list (canonical key
values; a key column whose type differs from the data's is refused *before* the ledger charge), then
:meth:`~PublicKeyMechanism.run` noises every listed key. Secrets, in order: the engine's bounding secret (with an
ℓ0 bound), ``K_noise``, then the embedding's shared coordinate ``Z_{d+1}`` (correlated Gaussian only). The
independent terms of chunk ``c`` of the key list (:mod:`sparsedp.core.noise_chunks`, the list in canonical
key order) come from ``SecretKeyedStream(K_noise, chunk_label(c))``, so a key's noise depends only on
``K_noise`` and the public list: every engine gives the same table for the same seeded source.

Each unit is one data point of Lebeda (2024): its bounded keys restricted to the list, ``x ∈ {0,1}^d``; ``n`` is the
number of distinct units in the input (a unit with no listed key is the zero vector, S1.1).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import numpy.typing as npt

from .. import _validate as v, noise
from ..accounting.calibration import Neighbours
from ..accounting.intervals import RowLaws
from ..accounting.names import CORRELATED_GAUSSIAN, LAPLACE
from ..accounting.public_keys import (calibrate_bounded_density, calibrate_correlated_public, calibrate_public_gaussian,
                                      calibrate_public_laplace)
from ..core.key_order import canonical_exprs, canonical_rows
from ..core.noise_chunks import chunk_label, key_chunks
from ..errors import InfeasibleError, InputDataError, InvalidParameterError, InvalidTypeError
from ..noise.source import SecretKeyedStream, SecureRandom
from .base import AutoRole, Disclosure, Mechanism, PlanQuery, Released, ReleaseRequest
from .registry import register
from .row_laws import public_laws

if TYPE_CHECKING:
    import polars as pl

    from ..core.engine import Engine

__all__ = ["PublicKeys", "public_keys", "CorrelatedGaussian", "BoundedDensity", "PublicGaussian", "PublicLaplace",
           "PublicCounts", "public_candidates"]


@dataclass(frozen=True, eq=False)
class PublicKeys:
    """A validated public key list: ``table`` (``pyarrow.Table`` of the key columns, distinct, no nulls, in
    canonical key order; ``None`` for :func:`sparsedp.plan`, which needs only ``d``), ``d`` its length."""

    table: Any
    d: int
    columns: tuple[str, ...]
    #: the keys were read as text (``--keys FILE``, one key per line): cast to the data's key type when joining
    from_text: bool = False


def _arrow_frame(table: Any) -> pl.DataFrame:
    """An Arrow table as a Polars DataFrame (``pl.from_arrow`` of a table is always a frame)."""
    import polars as pl

    frame = pl.from_arrow(table)
    assert isinstance(frame, pl.DataFrame)
    return frame


def _as_polars(keys: Any, by: list[str]) -> Any:
    """An Arrow or pandas table/column of keys as Polars (a column needs one key column: else None); anything
    else as it is."""
    import polars as pl

    mod = type(keys).__module__.split(".")[0]
    if mod == "pyarrow":
        import pyarrow as pa
        if isinstance(keys, pa.Table):
            return pl.from_arrow(keys)
        if isinstance(keys, (pa.Array, pa.ChunkedArray)):
            return pl.Series(by[0], keys) if len(by) == 1 else None
    elif mod == "pandas":
        import pandas as pd
        if isinstance(keys, pd.DataFrame):
            return pl.from_pandas(keys)
        if isinstance(keys, pd.Series):
            return pl.from_pandas(keys.rename(by[0])) if len(by) == 1 else None
    return keys


def _frame(keys: Any, by: list[str]) -> pl.DataFrame:
    """``keys`` as a Polars DataFrame with exactly the columns ``by``."""
    import polars as pl

    if isinstance(keys, (str, bytes)) or isinstance(keys, dict):
        raise InvalidTypeError(f"keys must be a list, Series or frame of keys, got {type(keys).__name__}")
    keys = _as_polars(keys, by)
    if isinstance(keys, pl.LazyFrame):
        keys = keys.collect()
    if isinstance(keys, np.ndarray):
        keys = keys.tolist()
    if isinstance(keys, pl.Series):
        if len(by) != 1:
            raise InvalidParameterError(f"by has {len(by)} columns {by}: give keys as a frame with those columns "
                                        f"(or a list of tuples)")
        return keys.rename(by[0]).to_frame()
    if isinstance(keys, pl.DataFrame):
        missing = [c for c in by if c not in keys.columns]
        if missing:
            raise InvalidParameterError(f"the keys frame has no column {', '.join(map(repr, missing))}; it must "
                                        f"have the key columns {by} (it has {keys.columns})")
        return keys.select(by)
    if keys is None:
        raise InvalidParameterError(f"by has {len(by)} columns {by}: give keys as a frame with those columns (or "
                                    f"a list of tuples)")
    if not isinstance(keys, (list, tuple, set, frozenset)):
        raise InvalidTypeError(f"keys must be a list, Series or frame of keys, got {type(keys).__name__}")
    rows = list(keys)
    try:
        if len(by) == 1:
            return pl.DataFrame({by[0]: rows}, strict=False)
        if any(not isinstance(r, (tuple, list)) or len(r) != len(by) for r in rows):
            raise InvalidParameterError(f"with by={by} each key must be a tuple of {len(by)} values")
        return pl.DataFrame(rows, schema=by, orient="row", strict=False)
    except (pl.exceptions.PolarsError, TypeError, ValueError) as e:
        if isinstance(e, InvalidParameterError):
            raise
        raise InvalidParameterError(f"keys: the values do not form one column per key column ({e})") from None


def public_keys(keys: Any, by: list[str], *, from_text: bool = False) -> PublicKeys:
    """Validate a public key list (no data read): a list (or list of tuples for several key columns), a
    Polars/pandas Series, or a Polars/pandas/Arrow frame holding the ``by`` columns. Refuses an empty list,
    nulls, NaN, nested values and duplicates, naming the problem in the user's terms."""
    import polars as pl

    df = keys if isinstance(keys, pl.DataFrame) and from_text else _frame(keys, by)
    if df.height == 0:
        raise InvalidParameterError("keys is empty: list at least one key to release")
    for c in by:
        dt = df.schema[c]
        if dt == pl.Null or df[c].null_count():
            raise InvalidParameterError(f"keys: column {c!r} has {df[c].null_count() or df.height} null value(s); "
                                        f"a key to release must be a value")
        if dt.is_nested() or dt == pl.Object:
            raise InvalidParameterError(f"keys: column {c!r} holds {dt} values; keys must be scalars")
        if dt.is_float() and df[c].is_nan().any():
            raise InvalidParameterError(f"keys: column {c!r} has NaN values")
    dup = df.select(canonical_exprs(df.schema, by)).is_duplicated()
    if dup.any():
        first = df.filter(dup).row(0)
        raise InvalidParameterError(f"keys lists {first if len(by) > 1 else first[0]!r} more than once; each key "
                                    f"must be listed once")
    df = df[canonical_rows(df, by)]
    return PublicKeys(table=df.to_arrow(), d=df.height, columns=tuple(by), from_text=from_text)


@dataclass(frozen=True, eq=False)
class PublicCounts:
    """The bounded counts of the listed keys (aligned with ``keys.table``, zeros for absent keys) and ``n``,
    the number of units in the input. Held in this process between the engine and the noise; never released."""

    counts: np.ndarray
    n: int
    keys: PublicKeys


def align(engine: Engine, hist: Any, keys: PublicKeys) -> PublicCounts:
    """Join the engine's bounded histogram to the public list on canonical key values (keys outside the list
    dropped, listed keys without data at 0). Refuses a key column whose type differs from the data's."""
    import polars as pl

    by = list(keys.columns)
    units = getattr(engine.stats(hist), "units_in", None)
    if units is None:
        raise InvalidParameterError(f"engine {engine.name!r} does not count the privacy units, which the public-key "
                                    f"release needs (n); use an embedded engine (polars, duckdb, pandas, arrow)")
    sh = engine.collect(hist)
    data = _arrow_frame(sh.keys)
    data = data.select(canonical_exprs(data.schema, by)).with_columns(
        pl.Series("__sparsedp_count", np.asarray(sh.counts, dtype=np.int64)))
    lst = _arrow_frame(keys.table)
    lst = lst.select(canonical_exprs(lst.schema, by))
    if keys.from_text and data.height and any(lst.schema[c] == pl.String != data.schema[c] for c in by):
        try:  # keys read as text: take the data's key types (then re-validate: "01" and "1" may now collide)
            cast = _arrow_frame(keys.table).with_columns(
                [pl.col(c).cast(data.schema[c], strict=True) for c in by if lst.schema[c] == pl.String])
        except pl.exceptions.PolarsError:
            raise InputDataError(f"the keys file (--keys) holds values that are not of the data's key type "
                                 f"({', '.join(f'{c}: {data.schema[c]}' for c in by)})") from None
        keys = public_keys(cast, by)
        lst = _arrow_frame(keys.table)
        lst = lst.select(canonical_exprs(lst.schema, by))
    for c in by:
        a, b = lst.schema[c], data.schema[c]
        if a != b:
            if data.height == 0:
                continue
            raise InputDataError(f"keys: column {c!r} holds {a} values but the data's {c!r} is {b}; give the keys "
                                 f"with the data's type")
    if data.height == 0:
        counts = np.zeros(keys.d, dtype=np.int64)
    else:
        joined = lst.with_row_index("__sparsedp_pos").join(data, on=by, how="left", nulls_equal=False)
        joined = joined.sort("__sparsedp_pos")
        counts = joined["__sparsedp_count"].fill_null(0).to_numpy().astype(np.int64)
    if counts.size != keys.d:  # pragma: no cover - distinct keys on both sides
        raise RuntimeError("joining the key list to the histogram changed its length")
    return PublicCounts(counts=counts, n=int(units), keys=keys)


# ------------------------------------------------------------------ the mechanisms


def _draws(cal: Any, size: int, rng: Any, insecure_float: bool, std: float | None = None) -> np.ndarray:
    """``size`` draws of the calibration's per-coordinate law from ``rng``."""
    if cal.secure:
        if cal.family == LAPLACE:
            return noise.sample_discrete_laplace(cal.scale, size, rng=rng)
        return noise.sample_discrete_gaussian(cal.scale, size, rng=rng)
    if not insecure_float:
        raise InvalidParameterError("this calibration is for float noise; pass insecure_float=True")
    if cal.family == LAPLACE:
        return noise.sample_laplace(cal.scale, size, rng=rng, insecure_float=True)
    return noise.sample_gaussian(cal.scale if std is None else std, size, rng=rng, insecure_float=True)


def _independent(cal: Any, d: int, keys: PublicKeys, secret: bytes, insecure_float: bool) -> np.ndarray:
    """One independent draw per listed key, chunk by chunk (the engines' convention,
    :mod:`sparsedp.core.noise_chunks`): chunk c's keys, in canonical order, read
    ``SecretKeyedStream(K_noise, chunk_label(c))``."""

    out = np.empty(d, dtype=np.int64 if cal.secure else np.float64)
    for chunk, pos in key_chunks(keys.table, list(keys.columns)):
        size = d if pos is None else pos.size
        z = _draws(cal, size, SecretKeyedStream(secret, chunk_label(chunk)), insecure_float)
        if pos is None:
            out[:] = z
        else:
            out[pos] = z
    return out


def _table(keys: PublicKeys, value_column: str, values: npt.NDArray[Any]) -> Any:
    import pyarrow as pa

    return keys.table.append_column(value_column, pa.array(values))


def _need_keys(name: str, request: ReleaseRequest) -> PublicKeys:
    if request.keys is None:
        raise InvalidParameterError(f"mechanism={name!r} releases counts for a public key list: pass keys=[…] "
                                    f"(the keys to release, fixed without looking at the data)")
    return request.keys


@dataclass(frozen=True)
class PublicKeyMechanism(Mechanism):
    """Common part of the public-key mechanisms: no threshold, every listed key released, add/remove units."""

    public_keys: ClassVar[bool] = True
    #: pure ε-DP (δ = 0 accepted): the one listed by ``plan`` and chosen by ``auto`` at δ = 0
    pure_dp: ClassVar[bool] = False

    @classmethod
    def plannable(cls, request: ReleaseRequest) -> bool:
        """Listed by ``plan`` and tried by ``auto`` for ``request``: δ > 0, or a pure mechanism."""
        return request.delta > 0 or cls.pure_dp

    @classmethod
    def auto_refusal(cls, request: ReleaseRequest) -> str | None:
        """Why ``auto`` does not try this class for ``request`` (listed with the candidates), or None."""
        return None if cls.plannable(request) else "needs delta > 0"

    @classmethod
    def plan_rows(cls, query: PlanQuery) -> list[tuple[Mechanism, Any, int]]:
        """With ``keys``: every public-key mechanism at d keys (ranked by per-key error); with ``group`` the
        grouped mechanism lists itself
        (:meth:`~sparsedp.mechanisms.grouped_keys.GroupedCorrelatedGaussian.plan_rows`)."""
        if query.d is None:
            return []
        request = query.request(keys=PublicKeys(table=None, d=query.d, columns=()))
        rows: list[tuple[Mechanism, Any, int]] = []
        for c in public_candidates():
            if not c.plannable(request):
                continue
            try:
                rows.append((c(), c().calibrate(request), 0))
            except (InfeasibleError, InvalidParameterError):
                continue
        return rows

    def check(self, request: ReleaseRequest) -> None:
        _need_keys(self.name, request)
        if request.aggregates:
            raise InvalidParameterError(f"mechanism={self.name!r} releases counts only; SUM/MEAN aggregates are not "
                                        f"offered with keys=")
        v.delta(request.delta)

    def prepare(self, engine: Engine, hist: Any, request: ReleaseRequest) -> Any:
        return align(engine, hist, _need_keys(self.name, request))

    def _contribution(self, cal: Any) -> str:
        per = f"at most {cal.k} of the {cal.d} listed keys per unit" if cal.k < cal.d else "any listed keys"
        return f"every listed key released (no threshold); 1 per key per unit, {per}"

    def disclosure(self, request: ReleaseRequest, calibration: Any, value_column: str) -> Disclosure:
        cal = calibration
        notes = (f"public key list of {cal.d} keys: absent keys get noise too, keys outside the list are dropped; "
                 f"the list must not be derived from the private data",) + self._notes(cal)
        return Disclosure(
            mechanism=self.name, analysis=cal.analysis, epsilon=cal.epsilon,
            delta=0.0 if cal.family == LAPLACE else cal.delta, delta_achieved=float(cal.delta_achieved),
            neighbours=Neighbours.ADD_REMOVE, contribution=self._contribution(cal), value_column=value_column,
            delta_parts=dict(cal.delta_parts), sigma=float(cal.sigma), noise_std=float(cal.noise_std),
            threshold=None, margin=None, pre_threshold=None, comparison="none", notes=notes)

    def _notes(self, cal: Any) -> tuple[str, ...]:
        return ()

    def row_laws(self, request: ReleaseRequest, calibration: Any, value_column: str) -> RowLaws | None:
        return public_laws(value_column, calibration)

    def _secret(self, rng: Any) -> bytes:
        return bytes(rng.random_bytes(32))


@dataclass(frozen=True)
class _IndependentPublic(PublicKeyMechanism):
    def run(self, engine: Engine, hist: Any, calibration: Any, disclosure: Disclosure, rng: SecureRandom,
            request: ReleaseRequest) -> Released:
        pc: PublicCounts = hist
        secret = self._secret(rng)
        z = _independent(calibration, pc.keys.d, pc.keys, secret, request.insecure_float)
        values = pc.counts + z
        return Released(rows=_table(pc.keys, disclosure.value_column, values), disclosure=disclosure,
                        in_process=True)


@register
@dataclass(frozen=True)
class PublicGaussian(_IndependentPublic):
    """Independent Gaussian noise on every listed key (the standard Gaussian mechanism; OpenDP / PipelineDP's
    Gaussian public-partition count): exact ``N_Z(0, s)`` calibrated on the exact discrete δ at ℓ2 sensitivity
    √k, ``k = min(max_groups_per_unit, number of keys)``
    (:func:`~sparsedp.accounting.public_keys.calibrate_public_gaussian`)."""

    name = "public-gaussian"
    auto_role = AutoRole.PUBLIC_KEYS
    auto_order = 2  # auto's public-key candidates: correlated, bounded density, Gaussian, Laplace

    def calibrate(self, request: ReleaseRequest) -> Any:
        k = _need_keys(self.name, request)
        return calibrate_public_gaussian(request.epsilon, request.delta, k.d, request.max_groups_per_unit,
                                         insecure_float=request.insecure_float)


@register
@dataclass(frozen=True)
class PublicLaplace(_IndependentPublic):
    """Independent (discrete) Laplace noise of scale ``k/ε`` on every listed key: pure ε-DP (δ = 0 is accepted),
    ``k = min(max_groups_per_unit, number of keys)``
    (:func:`~sparsedp.accounting.public_keys.calibrate_public_laplace`)."""

    name = "public-laplace"
    auto_role = AutoRole.PUBLIC_KEYS
    auto_order = 3  # auto's public-key candidates: correlated, bounded density, Gaussian, Laplace
    pure_dp = True

    def check(self, request: ReleaseRequest) -> None:
        _need_keys(self.name, request)
        if request.aggregates:
            raise InvalidParameterError("mechanism='public-laplace' releases counts only")

    def calibrate(self, request: ReleaseRequest) -> Any:
        k = _need_keys(self.name, request)
        return calibrate_public_laplace(request.epsilon, request.delta, k.d, request.max_groups_per_unit,
                                        insecure_float=request.insecure_float)


@register
@dataclass(frozen=True)
class CorrelatedGaussian(PublicKeyMechanism):
    """Lebeda (2024)'s correlated Gaussian mechanism on the listed keys (Lebeda, Algorithm 1 in the embedding form
    of Lemma 3.3–3.5 with exact integer noise; :func:`~sparsedp.accounting.public_keys.calibrate_correlated_public`).

    Each key's error is a shared term (the size coordinate's noise, ``Z_{d+1}/(2C)``) plus an independent one
    (``Z_j/2``): per-key std ≈ σ₁(√d + 1)/2 against σ₁√d for independent noise when units may touch every key.
    The size estimate ``ñ`` (of the number of units) is released in the report's notes.

    Options:
        c: the trade-off weight C of the size coordinate (integer; default the one minimising the per-key
            error, ≈ d^{1/4}); larger C (up to √d) gives a better ñ and better sums of counts (spec S2.6).
        known_n: a previously released estimate ñ of the number of units (public; e.g. from an earlier
            release): Lebeda (2024) Lemma 3.6, per-key fresh noise std ≈ σ₁√d/2 plus the shared ``(ñ − n)/2``.
    """

    c: int | None = None
    known_n: float | None = None
    name = CORRELATED_GAUSSIAN
    auto_role = AutoRole.PUBLIC_KEYS
    auto_order = 0  # auto's public-key candidates: correlated, bounded density, Gaussian, Laplace

    def __post_init__(self) -> None:
        if self.c is not None and (isinstance(self.c, bool) or not isinstance(self.c, (int, float))):
            raise InvalidTypeError(f"c must be a number >= 1, got {self.c!r}")
        if self.c is not None and self.c <= 0:
            raise InvalidParameterError(f"c must be > 0, got {self.c!r}")
        if self.known_n is not None:
            v.real("known_n", self.known_n)
            if self.c is not None:
                raise InvalidParameterError("c (the size weight) and known_n exclude each other: with a known "
                                            "estimate of n no size coordinate is released (Lebeda (2024) Lemma 3.6)")

    def calibrate(self, request: ReleaseRequest) -> Any:
        k = _need_keys(self.name, request)
        c = self.c
        if c is not None and not request.insecure_float:
            if float(c) != int(c):
                raise InvalidParameterError(f"c must be an integer with secure (integer) noise, got {c!r}; "
                                            f"non-integer C needs insecure_float=True")
            c = int(c)
        return calibrate_correlated_public(request.epsilon, request.delta, k.d, request.max_groups_per_unit,
                                           c=c, known_n=self.known_n, insecure_float=request.insecure_float)

    def _notes(self, cal: Any) -> tuple[str, ...]:
        if cal.family == "known-n":
            return (f"known-n variant (Lebeda (2024) Lemma 3.6) with the public estimate n~ = {cal.known_n:g}: each "
                    f"count's error is the fresh noise (std {cal.noise_std:.4g}) plus (n~ − n)/2, shared by all keys",)
        return (f"correlated noise (Lebeda (2024) Alg. 1, embedding weight C = {cal.c:g}): per-key error std "
                f"{cal.noise_std:.4g} = shared term {cal.shared_std:.4g} (the same for every key) + independent "
                f"{cal.independent_std:.4g}; the size estimate n~ has std {cal.n_noise_std:.4g}",)

    def run(self, engine: Engine, hist: Any, calibration: Any, disclosure: Disclosure, rng: SecureRandom,
            request: ReleaseRequest) -> Released:
        pc: PublicCounts = hist
        cal = calibration
        secret = self._secret(rng)
        d, n = pc.keys.d, pc.n
        if cal.family == "known-n":
            z = _independent(cal, d, pc.keys, secret, request.insecure_float)
            y = 2 * pc.counts - n + z                                    # g = 2f − n·1 plus noise (Lemma 3.6)
            values = (y + cal.known_n) / 2.0
            return Released(rows=_table(pc.keys, disclosure.value_column, values), disclosure=disclosure,
                            in_process=True)
        shared: int | float
        if cal.secure:
            shared = int(_draws(cal, 1, rng, False)[0])                    # Z_{d+1}: the shared coordinate
            y_last = cal.c * n + shared                                    # exact integer
        else:
            shared = float(_draws(cal, 1, rng, True)[0])
            y_last = cal.c * n + shared
        z = _independent(cal, d, pc.keys, secret, request.insecure_float)
        y = cal.q * pc.counts - cal.p * n + z                            # exact integers when secure
        values = (y + cal.p * (y_last / cal.c)) / cal.q                  # Alg. 1 (p, q = 1, 2): y/2 + y_last/(2C)
        n_tilde = y_last / cal.c
        disclosure = disclosure.with_notes(f"released size estimate n~ = {n_tilde:.6g} (std {cal.n_noise_std:.4g}; "
                                           f"y_(d+1) = {y_last} with C = {cal.c:g})")
        return Released(rows=_table(pc.keys, disclosure.value_column, values), disclosure=disclosure,
                        in_process=True)


@register
@dataclass(frozen=True)
class BoundedDensity(PublicKeyMechanism):
    """Lebeda (2024) §4.1 (bounded density: each unit counts in at most ``k = min(max_groups_per_unit, number of keys)``
    listed keys) with exact integer noise: the centred embedding ``(q·x − p·1, c)`` with the integers of
    :func:`~sparsedp.accounting.public_keys.centred_embedding_choice` and i.i.d. ``N_Z(0, s)``
    (:func:`~sparsedp.accounting.public_keys.calibrate_bounded_density`). Its per-key error is within 0.1% of the
    optimal symmetric ellipse OPT(d, k) of the paper's Fig. 3 (JY24 for k <= d/2) in the cases tested, below both
    the standard mechanism and Algorithm 1 when 1 < k < d; at k = d it is Algorithm 1. It also releases ñ.
    [Beyond the paper: docs/proofs/public-keys.md §8.] Cost: the exact δ is evaluated for every a = 0 … k."""

    name = "bounded-density"
    auto_role = AutoRole.PUBLIC_KEYS
    auto_order = 1  # auto's public-key candidates: correlated, bounded density, Gaussian, Laplace
    run = CorrelatedGaussian.run  # the same embedding release, with this calibration's (p, q, c)

    @classmethod
    def plannable(cls, request: ReleaseRequest) -> bool:
        """Only below the number of keys: a unit that may touch every key is the correlated Gaussian."""
        assert request.keys is not None  # planned and tried with a public key list only
        l0, d = request.max_groups_per_unit, request.keys.d
        return super().plannable(request) and l0 is not None and l0 < d

    @classmethod
    def auto_refusal(cls, request: ReleaseRequest) -> str | None:
        if request.delta == 0:
            return "needs delta > 0"
        assert request.keys is not None  # tried with a public key list only
        d, l0 = request.keys.d, request.max_groups_per_unit
        if l0 is None or l0 >= d:
            return "units may touch every key: it is correlated-gaussian"
        if l0 > BOUNDED_DENSITY_MAX_K:
            return (f"not calibrated above {BOUNDED_DENSITY_MAX_K} keys per unit (its exact delta costs O(k)); "
                    f"request it by name")
        return None

    def calibrate(self, request: ReleaseRequest) -> Any:
        k = _need_keys(self.name, request)
        return calibrate_bounded_density(request.epsilon, request.delta, k.d, request.max_groups_per_unit,
                                         insecure_float=request.insecure_float)

    def _notes(self, cal: Any) -> tuple[str, ...]:
        return (f"bounded density (Lebeda (2024) §4.1): centred embedding (q·x − p, c) with p/q = {cal.p}/{cal.q}, "
                f"c = {cal.c}; per-key error std {cal.noise_std:.4g} = shared {cal.shared_std:.4g} + independent "
                f"{cal.independent_std:.4g}; the size estimate n~ has std {cal.n_noise_std:.4g}",)


#: ``auto`` calibrates bounded-density only up to this many keys per unit (its exact δ costs O(k))
BOUNDED_DENSITY_MAX_K = 5000


def public_candidates() -> tuple[type[PublicKeyMechanism], ...]:
    """The public-key mechanisms ``auto`` chooses among when ``keys=`` is given (default options)."""
    return (CorrelatedGaussian, BoundedDensity, PublicGaussian, PublicLaplace)
