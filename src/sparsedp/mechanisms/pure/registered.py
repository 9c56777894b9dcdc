"""The pure-DP histograms as registered mechanisms of ``sparsedp.release``: the linear-time blanket histogram
(:class:`PureBlanket`, ``docs/proofs/pure-blanket.md``; ``mechanism="auto"`` at δ = 0) and the Balcer–Vadhan ones
(Balcer and Vadhan, "Differential Privacy on Finite Computers", 2018, arXiv 1709.05396), kept for the papers'
comparisons and refused when their estimated running time exceeds :data:`COST_LIMIT_S` (:func:`check_cost`).
Every key is checked (type, length, compact's ``query_keys``) in ``prepare``, before the ledger charge
(:func:`prepare_keys`).

Their setting is "each unit contributes one item": the engine bounds every unit to ``l0 = 1`` key (uniformly at
random, :mod:`sparsedp.engines.bounding`), so the bounded histogram's counts sum to the number of units ``n``.
Neighbours:

* with ``max_units=N`` (a public bound on the number of units): add/remove one unit. The items are padded to
  ``N`` with a dummy label that is never released, so adding/removing a unit is a replacement in the padded
  data (Balcer & Vadhan (2019) §2, :func:`~sparsedp.mechanisms.pure.release_pure`); the release is ε-DP (δ = 0;
  ``Stability``: (ε, δ)-DP) for add/remove one unit;
* without it: **replace one unit, with n public** (the paper's bounded DP). The report, the output metadata and
  the ledger record that relation (:class:`~sparsedp.accounting.calibration.Neighbours`); a ledger never adds it
  to add/remove charges as if they were the same.

Keys: one string column is used as is; any other key (several columns, non-string types) is joined canonically
into one string, the compact JSON array of its values (``'["u",3]'``), released in one column named
``"+".join(by)``. Keys are byte strings of at most ``max_key_bytes`` UTF-8 bytes (a public bound: the domain is all
such strings; released empty bins carry random labels of that domain, as the mechanism requires). ``Basic`` is
dense and needs a public ``domain_size`` (one integer key column in ``[0, domain_size)``, ``domain_size <= 2^20``).
``Compact`` releases a queryable :class:`~sparsedp.mechanisms.pure.CompactHistogram` (``result.query(key)``), and
its table lists the public ``query_keys`` only (releasing the keys present in the data would not be private).
ε is rounded down to ``1/⌈1/ε⌉`` (Balcer & Vadhan (2019) §1.5), so ε must be in (0, 1].
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from ... import _validate as v
from ...accounting.blanket import blanket_accuracy, calibrate_blanket
from ...accounting.calibration import Neighbours
from ...accounting.charge import Charge
from ...accounting.profiles import PureProfile
from ...core.histogram import SparseHistogram
from ...errors import InfeasibleError, InputDataError, InvalidParameterError, InvalidTypeError
from ...noise.clamped_geometric import unit_fraction
from ...noise.source import SecureRandom
from ..base import AutoRole, Disclosure, Mechanism, PlanQuery, Released, ReleaseRequest
from ..registry import get, register
from .blanket import blanket_histogram
from .compact import CompactHistogram
from .release import StringCodec, _configure, _encode, plan_pure, release_pure

if TYPE_CHECKING:
    from ...core.engine import Engine

__all__ = ["PureBlanket", "PureSparse", "Compact", "Basic", "Stability", "KeepHeavy", "KHPrime", "KHDoublePrime",
           "BVSparseHistogram", "joined_keys", "key_mode", "DEFAULT_MAX_KEY_BYTES"]

#: Default key-length bound (bytes). The domain of keys is every byte string up to this length,
#: |X| = (256^(L+1) − 1)/255, and the empty bins' noise grows with log |X|: at n = 1000 units and ε = 1 the
#: pure-sparse release threshold (Thm 6.6, counts released with probability ≥ 1 − β) is 244 for L = 8,
#: 462 for L = 16 and 1776 for L = 64, above n: with L = 64 no real key could ever be released (the release
#: was random labels of empty bins only). 16 bytes covers typical identifiers and codes; longer keys are
#: refused by name (raise max_key_bytes, a public bound) and a domain too large for the number of units is
#: refused before anything is charged (:meth:`PureSparse.histogram`).
DEFAULT_MAX_KEY_BYTES = 16


def key_mode(key_table: Any, cols: Sequence[str], dense: bool) -> str:
    """How keys become pure-mechanism items: "int" (dense), "str" (one string column) or "json" (joined)."""
    import pyarrow as pa

    if dense:
        if len(cols) != 1 or not pa.types.is_integer(key_table.schema.field(cols[0]).type):
            raise InvalidParameterError("mechanism='basic' needs one integer key column (values in "
                                        "[0, domain_size))")
        return "int"
    if len(cols) == 1 and (pa.types.is_string(key_table.schema.field(cols[0]).type)
                           or pa.types.is_large_string(key_table.schema.field(cols[0]).type)):
        return "str"
    return "json"


def _join(values: Sequence[Any]) -> str:
    """Canonical one-string form of a key: compact JSON array of its column values."""
    return json.dumps(list(values), ensure_ascii=False, separators=(",", ":"), default=str)


def joined_keys(key_table: Any, cols: Sequence[str], mode: str) -> list[Any]:
    if mode in ("int", "str"):
        keys: list[Any] = key_table.column(cols[0]).to_pylist()
        return keys
    columns = [key_table.column(c).to_pylist() for c in cols]
    return [_join(row) for row in zip(*columns)]


def _printable(x: str) -> str:
    """A released label as valid UTF-8: random labels of empty bins (pure-sparse) are arbitrary bytes,
    decoded with ``surrogateescape``; their undecodable bytes are shown as ``\\xNN`` (post-processing)."""
    try:
        x.encode("utf-8")
        return x
    except UnicodeEncodeError:
        return x.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


@dataclass(frozen=True)
class PreparedKeys:
    """The collected histogram with every key checked (before the charge): ``cols``, ``mode`` (:func:`key_mode`),
    ``keys`` (one item per key, :func:`joined_keys`), ``labels`` (their domain labels), ``domain_size`` (|X|
    without the add/remove dummy), ``n_items`` (the number of units: counts sum), ``query_keys`` (compact's,
    canonical and checked)."""

    hist: Any
    cols: tuple[str, ...]
    mode: str
    keys: list[Any]
    labels: tuple[int, ...]
    domain_size: int
    n_items: int
    query_keys: tuple[Any, ...] = ()


def _query_key(q: Any, mode: str) -> Any:
    """A compact query key in the form of the released keys: joined keys take a tuple/list of column values or
    one value (a one-column non-string key, e.g. an int), or the joined string itself."""
    if mode != "json" or isinstance(q, str):
        return q
    return _join(q if isinstance(q, (list, tuple)) else (q,))


def prepare_keys(h: Any, dense: bool, max_key_bytes: int, domain_size: int | None,
                 query_keys: Sequence[Any] | None = None) -> PreparedKeys:
    """Check every key of the collected histogram ``h`` (type, ``max_key_bytes``) and compact's ``query_keys``,
    raising :class:`~sparsedp.errors.InputDataError` / :class:`~sparsedp.errors.InvalidTypeError` before
    anything is charged or drawn."""
    cols = tuple(h.keys.column_names)
    mode = key_mode(h.keys, cols, dense)
    keys = joined_keys(h.keys, cols, mode)
    labels, N, _ = _encode(keys, domain_size if mode == "int" else None, max_key_bytes)
    qk: tuple[Any, ...] = ()
    if query_keys is not None:
        qk = tuple(_query_key(q, mode) for q in query_keys)
        try:
            _encode(list(qk), domain_size if mode == "int" else None, max_key_bytes)
        except (InputDataError, InvalidTypeError) as e:
            raise type(e)(f"query_keys: {e}") from None
    return PreparedKeys(hist=h, cols=cols, mode=mode, keys=keys, labels=tuple(labels), domain_size=N,
                        n_items=int(np.asarray(h.counts).sum()), query_keys=qk)


#: Running time of the Balcer–Vadhan mechanisms in CPU seconds: ``c·n^power``, the leading term fitted to the
#: largest sizes measured by ``python benchmarks/pure.py --cost`` (docs/benchmarks_pure.md: ``sd.release``, one key
#: per unit over 21 string keys, ε = 1; CPU 7.6 s for PureSparse at n = 4,000, i.e. 4.8e-7·n², and 16.9 s for
#: Compact at n = 400, i.e. 2.7e-7·n³). The estimates are within 0.9–1.1× of the measured CPU at those sizes and
#: below it at small n, where fixed costs dominate (3× at n = 500), which does not matter for a refusal at
#: ``COST_LIMIT_S``; a loaded machine's wall time is a multiple of the CPU time. A release whose estimate exceeds
#: ``COST_LIMIT_S`` is refused before anything is charged, naming the linear-time mechanism.
COST_SECONDS = {"pure-sparse": (4.8e-7, 2), "compact": (2.7e-7, 3)}
COST_LIMIT_S = 1200.0


def estimated_seconds(name: str, n: int) -> float | None:
    """Estimated running time of mechanism ``name`` at ``n`` units (None: not estimated)."""
    if name not in COST_SECONDS:
        return None
    c, power = COST_SECONDS[name]
    return c * float(n) ** power


def check_cost(name: str, n: int, domain_size: int) -> None:
    """Refuse a Balcer–Vadhan release that would run for more than ``COST_LIMIT_S`` (:data:`COST_SECONDS`)."""
    est = estimated_seconds(name, n)
    if est is not None and est > COST_LIMIT_S:
        raise InvalidParameterError(
            f"mechanism={name!r} would take about {est / 60:.0f} minutes at n={n} units (its running time grows "
            f"as n^{COST_SECONDS[name][1]}: Balcer–Vadhan); use mechanism='pure-blanket' (pure epsilon-DP in "
            f"linear time, a lower threshold; also what mechanism='auto' uses at delta=0). Nothing was charged "
            f"or released.")


@dataclass(frozen=True)
class CompactQuery:
    """Point queries of a released compact histogram (public: a post-processing of the private release)."""

    histogram: CompactHistogram
    mode: str
    max_key_bytes: int

    def __call__(self, key: Any) -> int:
        """Noisy count of ``key`` (a str, or a tuple/list of column values for joined keys)."""
        if self.mode == "json" and not isinstance(key, str):
            key = _join(key)
        if self.mode == "int":
            return self.histogram.count(int(key))
        return self.histogram.count(StringCodec(self.max_key_bytes).encode(key))


@dataclass(frozen=True)
class _Pure(Mechanism):
    """Shared options: ``max_units`` (public bound on the number of units: add/remove neighbours; else
    replace-one with n public), ``max_key_bytes`` (keys are UTF-8 strings of at most this many bytes),
    ``beta`` (failure probability of the reported error bounds)."""

    max_units: int | None = None
    max_key_bytes: int = DEFAULT_MAX_KEY_BYTES
    beta: Fraction = Fraction(1, 20)
    pure_dp = True  # not a field: a ClassVar of the base class

    dense: bool = field(default=False, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.max_units is not None:
            object.__setattr__(self, "max_units", v.integer("max_units", self.max_units, lo=1))
        object.__setattr__(self, "max_key_bytes", v.integer("max_key_bytes", self.max_key_bytes, lo=1))
        beta = v.rational("beta", self.beta)
        if not 0 < beta < 1:
            raise InvalidParameterError(f"beta must be in (0, 1), got {beta}")
        object.__setattr__(self, "beta", beta)

    def options(self) -> dict[str, Any]:
        return {k: val for k, val in super().options().items() if k != "dense"}

    plan_group = 3  # listed last by ``plan``, with their exact error bounds

    @classmethod
    def plan_rows(cls, query: PlanQuery) -> list[tuple[Mechanism, Any, int]]:
        """With ``max_units`` (n units, one key each): the pure mechanisms ``plan_pure`` configures, by their
        error bound at ``beta`` (default 1/20)."""
        if query.d is not None or query.max_units is None:
            return []
        if query.epsilon > 1:
            raise InvalidParameterError(f"pure mechanisms need epsilon in (0, 1], got {query.epsilon}")
        n = v.integer("max_units", query.max_units, lo=1)
        wanted = [c.name for c in (PureSparse, Compact, Stability)]
        pure = plan_pure(n, query.epsilon, Fraction(1, 20) if query.beta is None else query.beta, None,
                         delta=query.delta or None, mechanisms=wanted)
        rows: list[tuple[Mechanism, Any, int]] = []
        for c in pure:
            pure_cls = get(c.mechanism)
            assert issubclass(pure_cls, _Pure)  # plan_pure names the registered pure mechanisms only
            rows.append((pure_cls(max_units=n), c, cls.plan_group))
        return rows

    @property
    def neighbours(self) -> Neighbours:  # type: ignore[override]
        return Neighbours.ADD_REMOVE if self.max_units is not None else Neighbours.REPLACE_ONE

    def check(self, request: ReleaseRequest) -> None:
        if request.max_groups_per_unit not in (None, 1):
            raise InvalidParameterError(f"mechanism={self.name!r} assumes each unit contributes one item "
                                        f"(max_groups_per_unit=1), got {request.max_groups_per_unit}")
        if request.epsilon > 1:
            raise InvalidParameterError(f"pure mechanisms need epsilon in (0, 1] (rounded down to 1/k), got "
                                        f"{request.epsilon}")
        if request.insecure_float:
            raise InvalidParameterError(f"mechanism={self.name!r} uses exact integer noise only; insecure_float "
                                        "is not supported")
        self._check_delta(request.delta)

    def _check_delta(self, delta: float) -> None:
        if delta != 0:
            raise InvalidParameterError(f"mechanism={self.name!r} is pure DP: pass delta=0, got {delta!r}")

    def engine_bound(self, request: ReleaseRequest) -> int | None:
        return 1

    def calibrate(self, request: ReleaseRequest) -> Any:
        if self.max_units is not None:  # n = the public bound: a release that would run for hours is refused here
            check_cost(self.name, self.max_units, 0)
        k = unit_fraction("epsilon", request.epsilon)
        return Fraction(1, k)  # the guaranteed ε (rounded down to 1/k); the rest depends on n (data)

    def disclosure(self, request: ReleaseRequest, calibration: Any, value_column: str) -> Disclosure:
        eps = float(calibration)
        return Disclosure(
            mechanism=self.name, analysis="balcer-vadhan", epsilon=eps, delta=float(request.delta),
            delta_achieved=float(request.delta), neighbours=self.neighbours,
            contribution="one key per unit (max_groups_per_unit = 1)", value_column=value_column,
            notes=(f"epsilon rounded down to 1/{calibration.denominator}",) +
                  (("the number of units is treated as public (pass max_units=… for add/remove neighbours)",)
                   if self.max_units is None else ()))

    def charge(self, calibration: Any, disclosure: Disclosure) -> Any:
        """Pure ε-DP charges compose exactly in ε (:class:`~sparsedp.accounting.profiles.PureProfile`)."""
        profile = PureProfile(float(calibration)) if disclosure.delta == 0 else None
        return Charge(epsilon=float(calibration), delta=disclosure.delta, neighbours=self.neighbours,
                      mechanism=self.name, profile=profile)

    def _domain_size(self) -> int | None:
        return None

    def _query_keys(self) -> tuple[Any, ...]:
        return ()

    def prepare(self, engine: Engine, hist: Any, request: ReleaseRequest) -> "PreparedKeys | BlanketInput":
        return self._prepare_keys(engine, hist)

    def _prepare_keys(self, engine: Engine, hist: Any) -> "PreparedKeys":
        """Collect the histogram and check every key (type, length: :func:`prepare_keys`) and the running time
        (:func:`check_cost`) before the ledger charge: a refusal here charges nothing."""
        prep = prepare_keys(engine.collect(hist), self.dense, self.max_key_bytes, self._domain_size(),
                            self._query_keys() if self.name == "compact" else None)
        check_cost(self.name, int(self.max_units if self.max_units is not None else prep.n_items),
                   prep.domain_size)
        return prep

    def run(self, engine: Engine, hist: Any, calibration: Any, disclosure: Disclosure, rng: SecureRandom,
            request: ReleaseRequest) -> Released:
        import pyarrow as pa

        prep: PreparedKeys = hist
        cols, mode, keys = list(prep.cols), prep.mode, prep.keys

        qk = list(prep.query_keys) if self.name == "compact" else None
        h = prep.hist
        rel = release_pure(SparseHistogram(np.array(keys, dtype=object), h.counts), epsilon=calibration,
                           beta=self.beta, domain_size=self._domain_size() if mode == "int" else None,
                           mechanism=self.name, rng=rng, max_items=self.max_units,
                           delta=request.delta if self.name in ("stability", "sparse-histogram") else None,
                           query_keys=qk,
                           max_key_bytes=self.max_key_bytes)
        cal, acc = rel.calibration, rel.calibration.accuracy
        out_col = cols[0] if mode in ("int", "str") else "+".join(cols)
        out_keys = list(rel.keys)
        if mode != "int":  # random labels of empty bins need not be UTF-8 (real keys always are)
            out_keys = [_printable(x) for x in out_keys]
        key_type = pa.int64() if mode == "int" else pa.string()
        counts = np.asarray(rel.counts, dtype=np.int64)
        table = pa.table({out_col: pa.array(out_keys, type=key_type), disclosure.value_column: pa.array(counts)})
        details = (f"error bounds at beta={acc.beta:g}: per released count +-{acc.per_query} (counts above "
                   f"{acc.threshold}), all counts at once +-{acc.simultaneous}")
        disclosure = disclosure.with_notes(details)
        import dataclasses

        # the error bounds are (1 − beta)-probability bounds, not a noise std or a release rule: notes only
        disclosure = dataclasses.replace(disclosure, delta_achieved=float(cal.delta))
        query = CompactQuery(rel.extra["histogram"], mode, self.max_key_bytes) if self.name == "compact" else None
        return Released(rows=table, disclosure=disclosure, in_process=True, query=query)


def _threshold_check(mech: "_Pure", n: int, epsilon: float) -> None:
    """Refuse a release whose public parameters make every real key unreleasable: the (1 − β) release
    threshold of Thm 6.6 (a function of n, ε, β and |X| only, all public: n is public under replace-one, and
    the bound max_units under add/remove) is at least n, the largest possible count."""
    k = unit_fraction("epsilon", epsilon)
    N = StringCodec(mech.max_key_bytes).domain_size
    NX = N + 1 if mech.max_units is not None else N
    if NX < 4 * n:
        return  # release_pure refuses it with its own message
    thr = _configure("pure-sparse", n, NX, k, mech.beta, None).accuracy.threshold
    if thr >= n:
        fits = [L for L in (2, 4, 8, 12, 16, 24, 32) if L < mech.max_key_bytes and
                _configure("pure-sparse", n, StringCodec(L).domain_size + 1, k, mech.beta, None).accuracy.threshold < n]
        hint = (f"; max_key_bytes={fits[-1]} would release keys with counts above "
                f"{_configure('pure-sparse', n, StringCodec(fits[-1]).domain_size + 1, k, mech.beta, None).accuracy.threshold}"
                if fits else "; no key length works at this n: use mechanism='stability' (approximate DP)")
        raise InvalidParameterError(
            f"mechanism='pure-sparse' with max_key_bytes={mech.max_key_bytes} (a domain of about "
            f"2^{N.bit_length()} keys) and n={n} units cannot release any real key: the noise of the empty bins "
            f"needs counts above {thr} (Balcer–Vadhan Thm 6.6 at beta={float(mech.beta):g}), more than n; the "
            f"output would be random labels only. Set max_key_bytes to the longest key you need{hint}. "
            f"Nothing was charged or released.")


@register
@dataclass(frozen=True)
class PureSparse(_Pure):
    """Pure ε-DP sparse histogram (Balcer–Vadhan Alg. 8, Balcer & Vadhan (2019)): released counts of heavy keys plus random
    labels of empty bins, δ = 0. One key per unit. A key-length bound too large for the number of units (no
    real key could pass the empty bins' noise) is refused before any charge (:func:`_threshold_check`)."""

    name = "pure-sparse"

    def calibrate(self, request: ReleaseRequest) -> Any:
        cal = super().calibrate(request)
        if self.max_units is not None:  # n = the public bound: refuse before any data is read
            _threshold_check(self, self.max_units, float(cal))
        return cal

    def histogram(self, engine: Engine, data: Any, privacy_unit: str | None, by: list[str],
                  request: ReleaseRequest, rng: SecureRandom, **extra: Any) -> Any:
        hist = super().histogram(engine, data, privacy_unit, by, request, rng, **extra)
        if self.max_units is None:  # replace-one: n (units, one key each) is public; checked before the charge
            try:
                units = engine.stats(hist).units_in
                if units is None:
                    raise InvalidParameterError(
                        f"mechanism={self.name!r} treats the number of units as public, which the {engine.name} "
                        f"engine does not count; pass max_units=… (a public bound) or use an embedded engine")
                _threshold_check(self, int(units), float(self.calibrate(request)))
            except BaseException:
                engine.release_resources(hist)
                raise
        return hist


@dataclass(frozen=True)
class _Stone(_Pure):
    """The Balcer–Vadhan stepping stones (Balcer & Vadhan (2019) §6): release the bins whose noisy count is above the
    (n+1)-th largest. ``domain_size`` (optional): integer keys in ``[0, domain_size)``; else strings of at most
    ``max_key_bytes`` bytes (|X| = (256^(L+1) − 1)/255, so small L only: 1 → 257, 2 → 65793 keys)."""

    domain_size: int | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.domain_size is not None:
            object.__setattr__(self, "domain_size", v.integer("domain_size", self.domain_size, lo=2))
            object.__setattr__(self, "dense", True)

    def _domain_size(self) -> int | None:
        return self.domain_size


@register
@dataclass(frozen=True)
class KeepHeavy(_Stone):
    """KeepHeavy (Balcer–Vadhan Alg 4, Thm 6.1): noisy counts for every key of the domain, keep those above the
    (n+1)-th largest; ε-DP, time linear in |X| (≤ 2^20). One key per unit."""

    name = "keep-heavy"


@register
@dataclass(frozen=True)
class KHPrime(_Stone):
    """KH′ (Alg 5, Prop 6.2): identically distributed to KeepHeavy, noise only on the occupied bins and n+1
    random empty labels with exact order statistics (|X| ≤ 2^9: exact binomials). ε-DP. One key per unit."""

    name = "kh-prime"


@register
@dataclass(frozen=True)
class KHDoublePrime(_Stone):
    """KH″ (Alg 7, Thm 6.4) with exact distinct-label sampling (β₁ = 0, spec P7): distributed as KH′; needs
    |X| ≥ 4n, |X| ≤ 2^9. ε-DP. One key per unit."""

    name = "kh-double-prime"


@register
@dataclass(frozen=True)
class BVSparseHistogram(_Stone):
    """SparseHistogram (Thm 6.5): KH″ with approximate order statistics (TV ≤ δ_TV from KH″), time polylog |X|;
    (ε, (e^ε+1)δ_TV)-DP, run with δ_TV = δ/4 so the release is (ε, δ)-DP. One key per unit."""

    name = "sparse-histogram"

    def _check_delta(self, delta: float) -> None:
        v.delta(delta)


@register
@dataclass(frozen=True)
class Compact(_Pure):
    """Balcer–Vadhan compact histogram (§7, Cor. 7.3): a queryable private sketch of every key's count
    (``result.query(key)``); the table lists the public ``query_keys`` only. δ = 0. One key per unit."""

    query_keys: tuple[Any, ...] = ()
    name = "compact"

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "query_keys", tuple(self.query_keys))

    def _query_keys(self) -> tuple[Any, ...]:
        return self.query_keys


@register
@dataclass(frozen=True)
class Basic(_Pure):
    """Dense pure ε-DP histogram over a public integer domain ``[0, domain_size)`` (Balcer–Vadhan Alg. 3;
    ``domain_size <= 2^20``). One key per unit."""

    domain_size: int = field(kw_only=True)
    name = "basic"

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "domain_size", v.integer("domain_size", self.domain_size, lo=2, hi=1 << 20))
        object.__setattr__(self, "dense", True)

    def _domain_size(self) -> int | None:
        return self.domain_size


@register
@dataclass(frozen=True)
class Stability(_Pure):
    """The (ε, δ) stability histogram of Balcer–Vadhan (Thm 1.3) with exact clamped-geometric noise. One key
    per unit."""

    name = "stability"

    def _check_delta(self, delta: float) -> None:
        v.delta(delta)


def utf8_fraction_bound(max_bytes: int) -> Fraction:
    """An upper bound on the fraction of the byte strings of length ``<= max_bytes`` (the key domain) that are
    valid UTF-8: strings made of the blocks lead 00–7F; C2–DF + 1 continuation; E0–EF + 2; F0–F4 + 3
    (continuations 80–BF) include every valid UTF-8 string (RFC 3629 §4 restricts some second bytes further),
    and ``f(ℓ) = 128 f(ℓ−1) + 30·64 f(ℓ−2) + 16·64² f(ℓ−3) + 5·64³ f(ℓ−4)`` counts them."""
    f = [1]
    for ell in range(1, max_bytes + 1):
        f.append(sum(w * f[ell - j] for j, w in ((1, 128), (2, 30 * 64), (3, 16 * 64 ** 2), (4, 5 * 64 ** 3))
                     if ell - j >= 0))
    return Fraction(sum(f), StringCodec(max_bytes).domain_size)


def could_be_key(raw: bytes, mode: str, n_cols: int) -> bool:
    """The public rule that drops blanket keys no unit can have (post-processing, no privacy cost): a string
    key column holds valid UTF-8 only; a joined key is the canonical compact JSON array of ``n_cols`` values."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    if mode == "str":
        return True
    try:
        vals = json.loads(text)
    except ValueError:
        return False
    return isinstance(vals, list) and len(vals) == n_cols and _join(vals) == text


@dataclass(frozen=True)
class BlanketInput:
    """What :meth:`PureBlanket.run` gets: the checked keys and the parameters for their number of units."""

    keys: PreparedKeys
    params: Any  # accounting.blanket.BlanketParams
    n: int


@register
@dataclass(frozen=True)
class PureBlanket(_Pure):
    """Pure ε-DP sparse histogram in linear time with optimal ℓ∞ error: the private item blanket with
    target-length padding (our reconstruction of Kerschbaum, Lee and Wu 2025, arXiv 2507.17017;
    ``docs/proofs/pure-blanket.md``). δ = 0; one key per unit; replace-one neighbours with n public, or
    add/remove with ``max_units``. What ``mechanism="auto"`` uses at δ = 0.

    Every key of the data gets ``count + Z`` (two-sided geometric noise) and is released iff that is ``>= τ``;
    a few random keys of the domain (the blanket, ``λ < 1`` expected) are released with values ``>= τ`` too:
    that is what makes the release pure DP (a key of count 1 must be as likely to appear as a key of count 0,
    up to e^ε). Blanket keys that no unit can have (not UTF-8, not a canonical joined key) are dropped at no
    privacy cost (``keep_padding=True`` keeps them, marked in a boolean column ``padding``); the others cannot be
    told apart from real keys — ``fake_keys`` bounds their expected number (default 1/1000) and sets λ.
    ε may be any positive number (no rounding to 1/k)."""

    fake_keys: Fraction = Fraction(1, 1000)
    keep_padding: bool = False
    name = "pure-blanket"
    auto_role = AutoRole.PURE

    def __post_init__(self) -> None:
        super().__post_init__()
        fk = v.rational("fake_keys", self.fake_keys)
        if not 0 < fk < 1:
            raise InvalidParameterError(f"fake_keys (expected number of released keys no unit has that look like "
                                        f"real keys) must be in (0, 1), got {self.fake_keys}")
        object.__setattr__(self, "fake_keys", fk)
        if not isinstance(self.keep_padding, bool):
            raise InvalidParameterError(f"keep_padding must be a bool, got {self.keep_padding!r}")

    def check(self, request: ReleaseRequest) -> None:
        if request.max_groups_per_unit not in (None, 1):
            raise InvalidParameterError(f"mechanism={self.name!r} assumes each unit contributes one item "
                                        f"(max_groups_per_unit=1), got {request.max_groups_per_unit}")
        v.positive("epsilon", request.epsilon)
        if request.insecure_float:
            raise InvalidParameterError(f"mechanism={self.name!r} uses exact integer noise only; insecure_float "
                                        "is not supported")
        if request.delta != 0:
            raise InvalidParameterError(f"mechanism={self.name!r} is pure DP: pass delta=0, got {request.delta!r}")

    def blanket_rate(self) -> Fraction:
        """λ's upper bound: ``fake_keys`` over the fraction of the domain that could be a real key, at most 1/2."""
        return min(Fraction(1, 2), self.fake_keys / utf8_fraction_bound(self.max_key_bytes))

    def params(self, n: int, epsilon: float) -> Any:
        """The calibration for ``n`` units (public: the bound ``max_units``, or the number of units)."""
        d = StringCodec(self.max_key_bytes).domain_size + (1 if self.max_units is not None else 0)
        try:
            return calibrate_blanket(epsilon, n, d, self.blanket_rate())
        except InfeasibleError as e:
            raise InvalidParameterError(f"{e}: raise max_key_bytes (a public bound on the key length). Nothing "
                                        f"was charged or released.") from None

    def calibrate(self, request: ReleaseRequest) -> Any:
        if self.max_units is not None:  # n = the public bound: refuse an infeasible domain before any data is read
            self.params(self.max_units, request.epsilon)
        return Fraction(v.positive("epsilon", request.epsilon))

    def disclosure(self, request: ReleaseRequest, calibration: Any, value_column: str) -> Disclosure:
        return Disclosure(
            mechanism=self.name, analysis="blanket (pure-blanket Theorem 1)", epsilon=float(calibration), delta=0.0,
            delta_achieved=0.0, neighbours=self.neighbours, contribution="one key per unit (max_groups_per_unit = 1)",
            value_column=value_column,
            notes=(("the number of units is treated as public (pass max_units=… for add/remove neighbours)",)
                   if self.max_units is None else ()))

    def prepare(self, engine: Engine, hist: Any, request: ReleaseRequest) -> BlanketInput:
        prep = self._prepare_keys(engine, hist)
        n = self.max_units if self.max_units is not None else prep.n_items
        if self.max_units is not None and prep.n_items > n:
            raise InputDataError(f"{prep.n_items} units exceed max_units={n}")
        if n < 1:
            raise InputDataError("no units: pass max_units=… (a public bound) to release an empty dataset")
        return BlanketInput(keys=prep, params=self.params(n, request.epsilon), n=n)

    def run(self, engine: Engine, hist: Any, calibration: Any, disclosure: Disclosure, rng: SecureRandom,
            request: ReleaseRequest) -> Released:
        import dataclasses

        import pyarrow as pa

        inp: BlanketInput = hist
        prep, p = inp.keys, inp.params
        codec = StringCodec(self.max_key_bytes)
        counts = dict(zip(prep.labels, np.asarray(prep.hist.counts).tolist()))
        dummy = codec.domain_size  # add/remove: the padding label of the absent units, never released
        if self.max_units is not None and inp.n > prep.n_items:
            counts[dummy] = inp.n - prep.n_items
        rel = blanket_histogram(counts, p, rng)
        keys, values, padding, not_keys = [], [], [], 0
        for lab, val in zip(rel.labels, rel.values):
            if lab == dummy:
                not_keys += 1
                continue
            raw = codec.decode(lab, as_str=False)
            ok = could_be_key(raw, prep.mode, len(prep.cols))
            not_keys += not ok
            if not ok and not self.keep_padding:
                continue
            keys.append(raw.decode("utf-8", "surrogateescape"))
            values.append(val)
            padding.append(not ok)
        out_col = prep.cols[0] if prep.mode == "str" else "+".join(prep.cols)
        cols = {out_col: pa.array([_printable(k) for k in keys], type=pa.string()),
                disclosure.value_column: pa.array(np.asarray(values, dtype=np.int64))}
        if self.keep_padding:
            cols["padding"] = pa.array(padding, type=pa.bool_())
        table = pa.table(cols)
        acc = blanket_accuracy(p, self.beta)
        visible = float(p.lam * utf8_fraction_bound(self.max_key_bytes))
        notes = (
            f"error bounds at beta={acc.beta:g}: a released count is within +-{acc.per_query} of the true count and "
            f"a key with count >= {acc.release_count} is released; all at once: released counts within "
            f"+-{acc.simultaneous}, every key with count >= {acc.release_all} released",
            f"padding: target length T={p.target} keys; {len(rel.labels)} released, {not_keys} of them blanket keys "
            f"no unit can have (not valid keys), " + ("kept and marked padding=True" if self.keep_padding
                                                       else "dropped from the table at no privacy cost")
            + f"; expected blanket keys that look like real keys: <= {visible:.2g} (they are part of the guarantee)",
            f"noise: two-sided geometric, alpha={float(p.alpha):.6g}; epsilon bound {p.epsilon_bound:.6g} "
            f"(pure-blanket Theorem 1)",
        )
        disclosure = dataclasses.replace(disclosure.with_notes(*notes), threshold=float(p.tau),
                                         noise_std=p.noise_std)
        return Released(rows=table, disclosure=disclosure, in_process=True)
