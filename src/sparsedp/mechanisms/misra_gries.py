"""Private Misra–Gries from data (Lebeda thesis Ch. 3 = Lebeda (2023); CSH of Lebeda & Retschmeier (2024)) as a registered mechanism.

``sd.release(data, privacy_unit, by, ε, δ, mechanism=sd.MisraGries(sketch_size=k, release=…))``.

**Contribution models** (the thesis's neighbouring relation is add/remove one *stream element*, Def. 3.1):

* ``privacy_unit=None`` — **each row is one stream element and one privacy unit** (event-level privacy: the
  guarantee is for adding or removing one row). No group-by at all: the sketch is built from the rows as they
  are read, one Algorithm-12 sketch per partition (each file of a glob, each Spark partition, the record
  batches of a frame or a DuckDB query) in O(k) memory per partition, merged with the [ACH+13] merge
  (:mod:`sparsedp.sketches.partitions`). This is the streaming path; its memory does not grow with the input.
* ``privacy_unit="col"`` with ``unit_sketch="pamg"`` (the default for the ``csh`` and ``merged-laplace``
  releases when no ``max_groups_per_unit`` is given) — add/remove one privacy unit with all its rows, **no bound on a unit's keys and no group privacy**:
  the user-level sketch of Lebeda & Tětek (arXiv 2301.02457 v2, their PAMG;
  :mod:`sparsedp.sketches.user_mg`) adds each unit's *set* of distinct keys in one step, units in increasing
  order of their id. Neighbouring sketches differ by +1 on some keys or by −1 on some keys (never both, never
  more than 1: ``docs/proofs/pamg-monotone.md``), the k-sparse monotonic case CSH and the merged-sketch
  Laplace release are calibrated for, so the release runs at the full (ε, δ) as for one row per unit. Each
  count underestimates the number of units holding the key by at most N/(k+1), N = the distinct (unit, key)
  pairs. Embedded engines only (the pairs are read through Polars).
* ``privacy_unit="col"`` with ``unit_sketch="group-privacy"`` (the only choice for ``pmg``, ``pure`` and
  ``threshold2``, whose analyses need one element per step, and the default when ``max_groups_per_unit`` is
  given) — the
  engine first bounds every unit to at most ``l0 = max_groups_per_unit`` (default 1) distinct keys (a group-by:
  memory grows with the number of (unit, key) pairs); the stream is then the bounded histogram written out in a
  fixed public order (keys sorted by their public 64-bit code, each repeated ``count`` times). Adding or
  removing one unit inserts or deletes at most ``l0`` elements of that stream, a chain of ``l0``
  element-neighbours; the release runs at ``(ε', δ') = (ε/l0, δ / Σ_{i<l0} e^{iε'})`` and is (ε, δ)-DP for
  add/remove one unit by group privacy (Fact 1.5; spec §1.9 [DERIVED] fallback (a)). With ``l0 = 1`` this is
  the thesis's guarantee.

**Releases** (:class:`MGRelease`, the ``release`` option):

* ``csh`` (default) — CSH (Lebeda & Retschmeier (2024) Alg. 2, its exact discrete variant, calibrated by
  :func:`sparsedp.accounting.calibrate` with sparsity bound k) on the sketch's positive counters. Valid because
  both a single Algorithm-12 sketch (Lemma 3.1: all counters −1, or one +1) and a merged sketch
  (Corollary 3.2: all ±1 on ≤ k keys, supports nested) are k-sparse monotonic histograms (Lebeda & Retschmeier (2024) Def. 3.1,
  "merged Misra–Gries sketches … exactly match Definition 3.1", Lebeda & Retschmeier (2024) L163).
* ``pmg`` — Algorithm 13 (Theorem 3.1, discrete Laplace, τ_geo of §3.5.2). Needs the Algorithm-12 sketch of
  one stream: ``combine="sequential"`` (the default for ``pmg``), never a merged sketch (§3.7).
* ``pure`` — the pure ε-DP variant of §3.6 (δ = 0): c̄ = c + γ − n/(k+1), ℓ1 sensitivity < 2, discrete
  Laplace on every key of the public universe ``0..universe_size−1`` (integer keys) and the top-k. With several
  partitions, §3.7 option A: the post-processed per-partition sketches are added (sensitivity unchanged).
* ``threshold2`` — the (ε, δ) variant of §3.6 (L1573): Threshold2 (thesis Alg. 9) on the post-processed sketch
  c̄ (ℓ1 sensitivity < 2), discretised: :func:`sparsedp.sketches.private_mg.threshold2_private_misra_gries`,
  proof in ``docs/proofs/mg-threshold2.md`` [DERIVED]. Several partitions: §3.7 option A, as for ``pure``.
* ``merged-laplace`` — discrete Laplace(k/ε) on the stored counters with the threshold hiding the ≤ k
  count-1 keys of a merged sketch (§3.7, spec §1.8 τ_merge [DERIVED]).

Only real keys are released (``pure`` releases keys of the public universe); the sketch itself (exact,
non-private counters) never leaves :meth:`MisraGries.run`.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any, ClassVar, Iterator, Sequence

import numpy as np
import numpy.typing as npt

from .. import _validate as v
from ..core.engine import Capability
from ..core.histogram import Release, SparseHistogram
from ..errors import InvalidParameterError
from ..noise.source import SecureRandom
from ..sketches import MisraGries as Sketch
from ..sketches.misra_gries import key_code
from ..sketches.partitions import Combine, SketchSummary, sketch_data
from ..sketches.private_mg import (merged_private_misra_gries, private_misra_gries, pure_private_misra_gries,
                                   threshold2_private_misra_gries)
from ..sketches.user_mg import UnitSketchSummary, sketch_units
from .auto import calibrate_mechanism
from .base import Disclosure, Mechanism, Released, ReleaseRequest, UserRequest
from .csh import csh
from .pure.registered import joined_keys, key_mode
from .registry import register

if TYPE_CHECKING:
    from ..core.engine import Engine

__all__ = ["MisraGries", "MGRelease", "MGCalibration", "UnitSketch", "group_privacy_parameters"]


class MGRelease(str, Enum):
    """How the sketch is released (module docstring)."""

    CSH = "csh"
    PMG = "pmg"
    PURE = "pure"
    THRESHOLD2 = "threshold2"
    MERGED_LAPLACE = "merged-laplace"


class UnitSketch(str, Enum):
    """How a unit-level input (``privacy_unit`` set) becomes a sketch (module docstring)."""

    PAMG = "pamg"
    GROUP_PRIVACY = "group-privacy"


#: the releases whose analysis covers the PAMG sketch's neighbours (k-sparse, all changes +1 or all −1)
PAMG_RELEASES = (MGRelease.CSH, MGRelease.MERGED_LAPLACE)


def group_privacy_parameters(epsilon: float, delta: float, group: int) -> tuple[float, float]:
    """Element-level ``(ε', δ')`` whose ``group``-fold chain gives ``(ε, δ)``: ``ε' = ε/g``,
    ``δ' = δ / Σ_{i=0}^{g-1} e^{iε'}`` (group privacy: chaining g neighbours, ``δ_g = δ' Σ_i e^{iε'}``).
    δ' is rounded down (conservative)."""
    g = v.integer("group", group, lo=1)
    eps_e = epsilon / g
    total = math.fsum(math.exp(i * eps_e) for i in range(g))
    return eps_e, math.nextafter(delta / total, 0.0) if g > 1 else delta


def _chain(delta_e: float, eps_e: float, group: int) -> float:
    """δ of the ``group``-fold chain of an (ε', δ') element guarantee (rounded up)."""
    return min(1.0, math.nextafter(delta_e * math.fsum(math.exp(i * eps_e) for i in range(group)), 2.0))


def sorted_stream(keys: Sequence[Any] | None, counts: npt.ArrayLike, codes: npt.NDArray[np.int64] | None = None
                  ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.intp]]:
    """Codes in the public order and the matching counts (see the module docstring)."""
    if codes is None:
        assert keys is not None  # the keys to code, unless their codes are given
        codes = np.fromiter((key_code(k) for k in keys), dtype=np.int64, count=len(keys))
    order = np.argsort(codes, kind="stable")
    return codes[order], np.asarray(counts, dtype=np.int64)[order], order


def stream_chunks(codes: npt.NDArray[np.int64], counts: npt.NDArray[np.int64],
                  target: int = 1 << 20) -> Iterator[npt.NDArray[np.int64]]:
    """``np.repeat(codes, counts)`` in chunks of about ``target`` elements (memory O(target + k))."""
    i, n = 0, codes.size
    cum = np.cumsum(counts)
    while i < n:
        base = cum[i - 1] if i else 0
        j = int(np.searchsorted(cum, base + target, side="right"))
        j = max(j, i + 1)
        yield np.repeat(codes[i:j], counts[i:j])
        i = j


@dataclass(frozen=True)
class MGCalibration:
    """The data-independent part of a Misra–Gries release: the element-level ``(epsilon_e, delta_e)`` the sketch
    is released at, the chain length ``group`` (1 for row units), and for CSH its calibration (the σ and margin
    of the discrete CSH at (ε', δ', k))."""

    release: MGRelease
    epsilon: float
    delta: float
    epsilon_e: float
    delta_e: float
    group: int
    k: int
    csh: Any = None


@register
@dataclass(frozen=True)
class MisraGries(Mechanism):
    """Private Misra–Gries on a sketch of ``sketch_size`` counters (module docstring).

    Options: ``sketch_size`` (k); ``release`` (:class:`MGRelease`: "csh" default, "pmg", "pure", "threshold2",
    "merged-laplace"); ``combine`` (:class:`~sparsedp.sketches.partitions.Combine`, row units only: "merge" =
    one sketch per partition merged, the default except for ``pmg``; "sequential" = one sketch over the
    partitions in order, identical to the sequential sketch); ``universe_size`` (``pure`` only: the public
    universe is the integers 0..universe_size−1); ``unit_sketch`` (:class:`UnitSketch`, unit-level inputs:
    "pamg", the default for ``csh`` and ``merged-laplace`` without ``max_groups_per_unit``, or
    "group-privacy")."""

    sketch_size: int
    release: MGRelease = MGRelease.CSH
    combine: Combine | None = None
    universe_size: int | None = None
    unit_sketch: UnitSketch | None = None
    name = "misra-gries"
    row_units: ClassVar[bool] = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "sketch_size", v.integer("sketch_size", self.sketch_size, lo=1))
        rel = self.release.value if isinstance(self.release, MGRelease) else self.release
        object.__setattr__(self, "release", MGRelease(v.choice("release", rel, tuple(r.value for r in MGRelease))))
        if self.combine is not None:
            c = self.combine.value if isinstance(self.combine, Combine) else self.combine
            object.__setattr__(self, "combine", Combine(v.choice("combine", c, tuple(x.value for x in Combine))))
        if self.universe_size is not None:
            object.__setattr__(self, "universe_size", v.integer("universe_size", self.universe_size, lo=1))
        if (self.universe_size is None) != (self.release is not MGRelease.PURE):
            raise InvalidParameterError("⟨release='pure'⟩ needs ⟨universe_size=…⟩ (integer keys 0..d−1; noise is "
                                        "added to every key of the universe) and only it takes ⟨universe_size⟩",
                                        param="universe_size")
        if self.unit_sketch is not None:
            u = self.unit_sketch.value if isinstance(self.unit_sketch, UnitSketch) else self.unit_sketch
            object.__setattr__(self, "unit_sketch", UnitSketch(v.choice("unit_sketch", u,
                                                                        tuple(x.value for x in UnitSketch))))
            if self.unit_sketch is UnitSketch.PAMG and self.release not in PAMG_RELEASES:
                raise InvalidParameterError(
                    f"unit_sketch='pamg' is released with release='csh' or 'merged-laplace' (its neighbours differ "
                    f"on up to k counters); release={self.release.value!r} needs unit_sketch='group-privacy'")
        if self.release is MGRelease.PMG and self.combine is Combine.MERGE:
            raise InvalidParameterError("release='pmg' (Algorithm 13) must not be applied to a merged sketch "
                                        "(thesis §3.7); use combine='sequential', or release='csh'")

    @property
    def combine_mode(self) -> Combine:
        if self.combine is not None:
            return self.combine
        return Combine.SEQUENTIAL if self.release is MGRelease.PMG else Combine.MERGE

    def unit_mode(self, request: ReleaseRequest) -> UnitSketch:
        """The unit-level sketch in force: ``unit_sketch`` if given; else PAMG where the release allows it and no
        ``max_groups_per_unit`` is asked for (an explicit l0 bound keeps the bounded, group-privacy route)."""
        return self._unit_mode(request.max_groups_per_unit)

    def _unit_mode(self, max_groups_per_unit: int | None) -> UnitSketch:
        if self.unit_sketch is not None:
            return self.unit_sketch
        if self.release in PAMG_RELEASES and max_groups_per_unit is None:
            return UnitSketch.PAMG
        return UnitSketch.GROUP_PRIVACY

    lacks_hint = "unit_sketch='group-privacy' (each unit's keys bounded, group privacy)"

    def needs(self, request: UserRequest) -> frozenset[Capability]:
        """PAMG reads the (unit, key) pairs in this process."""
        if request.unit is not None and self._unit_mode(request.bound) is UnitSketch.PAMG:
            return frozenset({Capability.PAIRS})
        return frozenset()

    def check(self, request: ReleaseRequest) -> None:
        if self.unit_sketch is UnitSketch.PAMG and request.max_groups_per_unit is not None:
            raise InvalidParameterError(
                "max_groups_per_unit is not used by unit_sketch='pamg' (a unit adds all its distinct keys and "
                "still moves each counter by at most 1): drop max_groups_per_unit, or pass "
                "unit_sketch='group-privacy' to bound units to l0 keys and release by group privacy")
        if self.release is MGRelease.PURE:
            if request.delta != 0:
                raise InvalidParameterError("release='pure' is pure DP: pass delta=0")
        else:
            v.delta(request.delta)
        if request.insecure_float:
            raise InvalidParameterError("mechanism='misra-gries' uses exact integer noise only; insecure_float is "
                                        "not supported")

    def engine_bound(self, request: ReleaseRequest) -> int | None:
        return None if self.unit_mode(request) is UnitSketch.PAMG else request.max_groups_per_unit or 1

    def histogram(self, engine: Engine, data: Any, privacy_unit: str | None, by: list[str], request: ReleaseRequest,
                  rng: SecureRandom, **extra: Any) -> Any:
        if privacy_unit is not None:
            if self.unit_mode(request) is UnitSketch.PAMG:
                return sketch_units(engine.pair_ids(data, privacy_unit, list(by)), self.sketch_size)
            return super().histogram(engine, data, privacy_unit, by, request, rng, **extra)
        if request.max_groups_per_unit is not None:
            raise InvalidParameterError("max_groups_per_unit bounds a privacy unit's keys; with privacy_unit=None "
                                        "every row is its own unit (one stream element): drop max_groups_per_unit")

        return sketch_data(data, by, self.sketch_size, combine=self.combine_mode,
                           connection=engine.connection)

    def calibrate(self, request: ReleaseRequest) -> MGCalibration:
        group = self.engine_bound(request) or 1  # PAMG and row units: one step per unit, no group privacy
        if self.release is MGRelease.PURE:
            eps_e, dlt_e = request.epsilon / group, 0.0
        else:
            eps_e, dlt_e = group_privacy_parameters(request.epsilon, request.delta, group)
        csh = None
        if self.release is MGRelease.CSH:
            csh = calibrate_mechanism("csh", self.sketch_size, eps_e, dlt_e)
        return MGCalibration(release=self.release, epsilon=request.epsilon, delta=request.delta, epsilon_e=eps_e,
                             delta_e=dlt_e, group=group, k=self.sketch_size, csh=csh)

    def disclosure(self, request: ReleaseRequest, calibration: MGCalibration, value_column: str) -> Disclosure:
        c = calibration
        g = c.group
        element = (f"({c.epsilon_e:.6g}, {c.delta_e:.3g})-DP per stream element, group privacy over {g} elements"
                   if g > 1 else "add/remove one stream element")
        what = {MGRelease.CSH: "CSH (Lebeda & Retschmeier (2024), discrete) on the sketch, sparsity bound k",
                MGRelease.PMG: "Algorithm 13 (PMG) with discrete Laplace noise",
                MGRelease.PURE: f"the pure-DP §3.6 variant over the universe 0..{self.universe_size}-1",
                MGRelease.THRESHOLD2: "the (eps, delta) §3.6 variant: Threshold2 on the post-processed sketch",
                MGRelease.MERGED_LAPLACE: "discrete Laplace(k/eps) with the merged-sketch threshold (§3.7)"}[
            c.release]
        extra: dict[str, Any] = {}
        if c.csh is not None:
            extra = dict(sigma=float(c.csh.sigma), noise_std=float(c.csh.noise_std), margin=float(c.csh.tau),
                         threshold=1.0 + float(c.csh.tau), delta_achieved=_chain(c.csh.delta_achieved, c.epsilon_e, g))
        return Disclosure(
            mechanism=self.name, analysis=f"misra-gries-{c.release.value}", epsilon=request.epsilon,
            delta=request.delta, delta_achieved=extra.pop("delta_achieved", float("nan")),
            neighbours=self.neighbours, value_column=value_column,
            contribution=("any number of distinct keys per unit (user-level PAMG sketch)"
                          if self.unit_mode(request) is UnitSketch.PAMG else f"at most {g} key(s) per unit"),
            pre_threshold=1, notes=(f"Misra-Gries sketch, k = {self.sketch_size} counters, {what} ({element}); "
                                    f"each sketch count underestimates the count by at most n/(k+1) before noise",),
            **extra)

    def run(self, engine: Engine, hist: Any, calibration: MGCalibration, disclosure: Disclosure, rng: SecureRandom,
            request: ReleaseRequest) -> Released:
        import pyarrow as pa

        c = calibration
        note: tuple[str, ...]
        if isinstance(hist, UnitSketchSummary):  # unit level, PAMG
            rel = _release_sketch(hist.sketch, (hist.sketch,), c, None, rng)
            table = hist.keys.take(pa.array(np.asarray(rel.keys, np.int64), pa.int64()))
            contribution = disclosure.contribution
            disclosure = dataclasses.replace(disclosure, notes=tuple(
                n.replace("(add/remove one stream element)", "(add/remove one unit: one set step of the user-level "
                          "PAMG sketch)") for n in disclosure.notes))
            note = (f"user-level PAMG sketch: {hist.sketch.units} units added as sets of distinct keys",)
        elif isinstance(hist, SketchSummary):  # row units: the streaming path
            rel = _release_sketch(hist.sketch, hist.parts, c, self.universe_size, rng)
            table = _key_table(rel.keys, hist.by, hist.key_types)
            contribution = "one row = one privacy unit = one stream element (event-level)"
            note = (f"sketched in {hist.info.partitions} partition(s), combine={hist.info.combine}",)
        else:
            h = engine.collect(hist)
            cols = h.keys.column_names
            int_keys = len(cols) == 1 and pa.types.is_integer(h.keys.schema.field(cols[0]).type)
            keys = joined_keys(h.keys, cols, key_mode(h.keys, cols, False)) if not int_keys else None
            raw = np.asarray(h.keys.column(cols[0]).to_numpy(), np.int64) if int_keys else None
            if self.release is MGRelease.PURE and not int_keys:
                raise InvalidParameterError("release='pure' needs one integer key column (universe 0..d−1)")
            codes, cnts, order = sorted_stream(keys, h.counts, codes=raw)
            sketch = Sketch(self.sketch_size, keys="int")
            sketch.update_chunks(stream_chunks(codes, cnts))
            rel = _release_sketch(sketch, (sketch,), c, self.universe_size, rng)
            del sketch
            if int_keys:
                table = pa.table({cols[0]: pa.array(np.asarray(rel.keys, np.int64)).cast(
                    h.keys.schema.field(cols[0]).type)})
            else:
                first: dict[int, int] = {}  # code -> first row in the public order (a collision maps to the first)
                for pos, cd in enumerate(codes.tolist()):
                    first.setdefault(cd, pos)
                rows = np.asarray([int(order[first[int(x)]]) for x in rel.keys], dtype=np.int64)
                table = h.keys.take(pa.array(rows, pa.int64()))
            contribution = disclosure.contribution
            note = ()
        values = np.asarray(rel.counts)
        table = table.append_column(disclosure.value_column, pa.array(values))
        cal = rel.calibration
        delta_unit = 0.0 if c.release is MGRelease.PURE else _chain(cal.delta_achieved, c.epsilon_e, c.group)
        threshold = rel.extra.get("threshold")
        disclosure = dataclasses.replace(
            disclosure, analysis=f"misra-gries-{c.release.value}:{cal.analysis}", delta_achieved=delta_unit,
            delta_parts={"threshold": delta_unit} if c.release is not MGRelease.PURE else {},
            sigma=float(cal.sigma), noise_std=float(cal.noise_std),
            threshold=None if threshold is None else float(threshold),
            margin=None if math.isnan(cal.tau) else float(cal.tau), contribution=contribution,
            notes=disclosure.notes + note)
        return Released(rows=table, disclosure=disclosure, in_process=True)


def _release_sketch(sketch: Any, parts: Sequence[Any], c: MGCalibration, universe_size: int | None,
                    rng: SecureRandom) -> Release:
    """The private release of the sketch (``parts``: the per-partition Algorithm-12 sketches) at (ε', δ').
    ``sketch``: a :class:`~sparsedp.sketches.MisraGries` or, unit level, a
    :class:`~sparsedp.sketches.user_mg.UserMisraGries` (the same counters interface)."""
    if c.release is MGRelease.CSH:
        st = sketch.standard()
        codes = np.fromiter(st.keys(), np.int64, len(st))
        counts = np.fromiter(st.values(), np.int64, len(st))
        order = np.argsort(codes, kind="stable")  # public release order (by key code)
        codes, counts = codes[order], counts[order]
        assert c.csh is not None  # calibrated with the CSH release
        if codes.size == 0:
            return Release(keys=[], counts=np.zeros(0, np.int64), calibration=c.csh, n_keys_in=0, n_keys_out=0,
                           extra={"threshold": 1.0 + c.csh.tau})
        rel = csh(SparseHistogram(keys=codes.tolist(), counts=counts), c.csh, rng=rng)
        keys = [sketch._key(int(x)) for x in rel.keys]
        return dataclasses.replace(rel, keys=keys)
    if c.release is MGRelease.PMG:
        return private_misra_gries(sketch, epsilon=c.epsilon_e, delta=c.delta_e, rng=rng)
    if c.release is MGRelease.THRESHOLD2:
        return threshold2_private_misra_gries(list(parts) if len(parts) > 1 else sketch, epsilon=c.epsilon_e,
                                              delta=c.delta_e, rng=rng)
    if c.release is MGRelease.PURE:
        if sketch.key_type == "hashed":
            raise InvalidParameterError("release='pure' needs one integer key column (its universe is 0..d−1)")
        return pure_private_misra_gries(list(parts) if len(parts) > 1 else sketch, epsilon=c.epsilon_e,
                                        universe=universe_size, rng=rng)
    return merged_private_misra_gries(sketch, epsilon=c.epsilon_e, delta=c.delta_e, rng=rng)


def _key_table(keys: Sequence[Any], by: tuple[str, ...], types: tuple[Any, ...]) -> Any:
    """Released keys (Python scalars or tuples) as an Arrow table of the key columns in their input types."""
    import pyarrow as pa

    cols: list[Sequence[Any]] = list(zip(*keys)) if len(by) > 1 else [keys]
    if not keys:
        cols = [[] for _ in by]
    arrays = {}
    for name, col, t in zip(by, cols, types or [None] * len(by)):
        if t is not None and pa.types.is_dictionary(t):
            t = t.value_type
        arrays[name] = pa.array(list(col), type=t) if t is not None else pa.array(list(col))
    return pa.table(arrays)
