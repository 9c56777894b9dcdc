"""The "other" row: ``release(..., other=True)`` adds one row with the private total of the bounded contributions
of every key not released.

:class:`WithOther` wraps the requested mechanism (as :class:`~sparsedp.bound_choice.AutoBounded` does) and runs
through the same pipeline stages:

1. **plan** — ε splits into ε_o = share·ε (the other row) and the rest (the release,
   :func:`~sparsedp.accounting.split.split_epsilon`); δ goes to the release. The discrete Laplace of scale
   ``t >= l0/ε_o`` is calibrated (:func:`~sparsedp.accounting.other_total.calibrate_other_total`). The charge is
   the whole (ε, δ), once: the sequence of the release's event and the pure ε_o event;
2. **read** (before the charge) — the release's own read, then the full keys' histogram bounded to ``l0 =
   max_groups_per_unit`` keys per unit with its own bounding secret, collected in this process (never published);
3. **draw** (after the charge) — the release's draw; then ``C_R = Σ_{k ∉ R} h_k`` over the keys R of the released
   table and ``C_R + Z``, Z ~ discrete Laplace(t) from the release's source, appended as the last row: every key
   column null (a real key is never null: the engines refuse null keys) and ``other = true`` (``false`` on every
   released key). SUM/MEAN columns are null in that row (the other row is a count).

Privacy (``docs/proofs/other-row.md``): for every fixed R, ``C_R`` has sensitivity l0 under add/remove one unit, so
the row is ε_o-DP given R; R is the release's output, so the pair is (ε, δ)-DP by adaptive composition. The rejected
construction (the noisy total of every key minus the released noisy counts) and why: the same document.

Secrets, in order: the release's (bounding secret, ``K_noise`` …) as drawn by its read and draw, with the other
row's bounding secret drawn after the release's read, and the other row's noise drawn last.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .accounting.charge import Charge
from .accounting.discrete import dlaplace_sf
from .accounting.events import PureEvent, SequenceEvent
from .accounting.split import split_epsilon
from .bound_choice import Wrapper
from .core.engine import Capability
from .core.key_order import canonical_exprs
from .errors import InvalidParameterError, InvalidTypeError
from .mechanisms.base import Mechanism, Planned, Read, Released, ReleaseRequest
from .noise import sample_discrete_laplace
from .core.lazy import lazy_module

if TYPE_CHECKING:
    from .accounting import other_total as _other_total
else:  # the other row's calibration: imported by a release with other=… only (issue 31)
    _other_total = lazy_module("sparsedp.accounting.other_total")

__all__ = ["OTHER_COLUMN", "DEFAULT_SHARE", "WithOther", "OtherPlan", "other_share", "complement_total",
           "with_other_row", "other_halfwidth", "with_other_interval"]

#: the boolean column marking the other row (``true``) and the released keys (``false``)
OTHER_COLUMN = "other"
#: the share of ε spent on the other row with ``other=True``
DEFAULT_SHARE = 0.1


def other_share(other: Any) -> float | None:
    """``other=`` checked: ``False``/``None`` → no row; ``True`` → :data:`DEFAULT_SHARE`; a number in (0, 1) → that
    share of ε for the other row."""
    if other is None or other is False:
        return None
    if other is True:
        return DEFAULT_SHARE
    if isinstance(other, bool) or not isinstance(other, (int, float)):
        raise InvalidTypeError(f"other must be True/False or the share of epsilon for the other row (a number in "
                               f"(0, 1)), got {other!r}")
    if not 0.0 < float(other) < 1.0:
        raise InvalidParameterError(f"⟨other⟩={other!r}: the share of epsilon for the other row must be in (0, 1)",
                                    param="other", fix="pass other=True (a tenth of epsilon) or e.g. other=0.2")
    return float(other)


@dataclass(frozen=True)
class OtherPlan:
    """What the plan keeps for the read and the draw: the release's own plan, the other row's calibration."""

    inner: Planned
    calibration: _other_total.OtherTotalCalibration


@dataclass(frozen=True, eq=False)
class _OtherRead:
    """The release's own read and the full keys' bounded histogram (in this process; curator only)."""

    inner: Read
    keys: Any
    counts: Any


def complement_total(keys: Any, counts: Any, released: Any, by: list[str]) -> int:
    """``Σ_{k ∉ R} h_k``: the bounded counts ``counts`` of the histogram keys ``keys`` (Arrow) whose key is not a
    row of ``released`` (Arrow, the ``by`` columns), matched on canonical key values."""
    import polars as pl

    c = np.asarray(counts, dtype=np.int64)
    total = int(c.sum())
    if released.num_rows == 0 or c.size == 0:
        return total
    hist = pl.from_arrow(keys)
    rel = pl.from_arrow(released.select(by))
    assert isinstance(hist, pl.DataFrame) and isinstance(rel, pl.DataFrame)
    hist = hist.select(canonical_exprs(hist.schema, by)).with_columns(pl.Series("__sparsedp_count", c))
    rel = rel.select(canonical_exprs(rel.schema, by))
    rel = rel.with_columns([pl.col(col).cast(hist.schema[col]) for col in by if rel.schema[col] != hist.schema[col]])
    return total - int(hist.join(rel, on=by, how="semi")["__sparsedp_count"].sum())


def with_other_row(table: Any, by: list[str], value_column: str, value: int) -> Any:
    """``table`` (Arrow) with the other row appended (key and SUM/MEAN columns null, ``value`` in the count
    column) and the boolean :data:`OTHER_COLUMN`."""
    import pyarrow as pa

    row = {f.name: pa.nulls(1, type=f.type) for f in table.schema}
    row[value_column] = pa.array([value]).cast(table.schema.field(value_column).type)
    extra = pa.table(row, schema=pa.schema([f.with_nullable(True) for f in table.schema]))
    out = pa.concat_tables([table.cast(extra.schema), extra])
    return out.append_column(OTHER_COLUMN, pa.array([False] * table.num_rows + [True], type=pa.bool_()))


@dataclass(frozen=True)
class WithOther(Wrapper):
    """``inner`` with the other row (module docstring). Not registered: :func:`sparsedp.request.build_request`
    builds it from ``other=True`` (``share`` of ε for the row) or ``other=<share>``."""

    inner: Mechanism
    share: float = DEFAULT_SHARE
    name = "other-row"

    def validate(self, request: Any) -> None:
        """The inner mechanism's rules; an integer ``max_groups_per_unit`` (the row's sensitivity); no input or
        output column named :data:`OTHER_COLUMN`."""
        self.inner.validate(request)
        if request.bound is None:
            raise InvalidParameterError(
                "⟨other⟩ needs ⟨max_groups_per_unit⟩ as a number: a unit changes the total of the keys not released "
                "by at most that many", param="max_groups_per_unit",
                fix="give ⟨max_groups_per_unit⟩ as a number (e.g. 5), or drop ⟨other⟩")
        names = {*request.by, request.unit, request.count.output_name, *(a.output_name for a in request.sums)}
        if OTHER_COLUMN in names:
            raise InvalidParameterError(f"⟨other⟩ marks its row with a column {OTHER_COLUMN!r}, which is already a "
                                        f"column of the release", param="other",
                                        fix="rename that column (or the aggregate's name=…), or drop ⟨other⟩")

    def needs(self, request: Any) -> frozenset[Capability]:
        return self.inner.needs(request)

    def check_engine(self, engine: Any) -> None:
        self.inner.check_engine(engine)

    def plan_release(self, request: ReleaseRequest, count_name: str) -> Planned:
        eps_other, eps_release = split_epsilon(request.epsilon, self.share)
        assert request.max_groups_per_unit is not None  # validate() refused otherwise
        planned = self.inner.plan_release(dataclasses.replace(request, epsilon=eps_release), count_name)
        if not planned.value_column:
            raise InvalidParameterError(
                f"⟨other⟩ adds a count row; ⟨mechanism={planned.mechanism.name!r}⟩ releases keys only (no counts)",
                param="other", fix="drop other=True, or count the selected keys: sd.TwoStage(select=…)")
        cal = _other_total.calibrate_other_total(eps_other, request.max_groups_per_unit)
        rel = planned.disclosure.neighbours
        seq = SequenceEvent([planned.charge.event, PureEvent(epsilon=eps_other, delta=0.0, neighbours=rel)],
                            epsilon=request.epsilon, delta=planned.charge.delta)
        charge = Charge.of_event(seq, f"{planned.mechanism.name}+other")
        disclosure = dataclasses.replace(planned.disclosure, epsilon=request.epsilon).with_notes(
            _note(cal, eps_release, count_name, planned.request.aggregates != ()))
        return dataclasses.replace(planned, charge=charge, disclosure=disclosure, detail=OtherPlan(planned, cal))

    def read(self, ctx: Any, planned: Planned) -> Read:
        """The release's read, then the full keys' histogram bounded to l0 (its own secret), collected."""
        plan: OtherPlan = planned.detail
        inner = self.inner.read(ctx, plan.inner)
        with ctx.stage("the other row: bounding and counting", "bound+count"):
            hist = ctx.engine.histogram(ctx.data, ctx.unit, list(ctx.by), plan.calibration.l0, ctx.source, 1)
            try:
                sh = ctx.engine.collect(hist)
            finally:
                ctx.engine.release_resources(hist)
        return Read(hist=inner.hist, prepared=_OtherRead(inner, sh.keys, sh.counts), units=inner.units)

    def draw(self, ctx: Any, planned: Planned, read: Read) -> Released:
        """The release's draw, then the other row (its noise drawn last)."""
        plan: OtherPlan = planned.detail
        r: _OtherRead = read.prepared
        released = self.inner.draw(ctx, plan.inner, r.inner)
        by, value = list(ctx.by), planned.value_column
        with ctx.stage("adding noise (the other row)", "noise"):
            table = released.rows if released.in_process else ctx.engine.to_arrow(released.rows, by, value)
            total = complement_total(r.keys, r.counts, table, by)
            z = int(sample_discrete_laplace(plan.calibration.scale, 1, rng=ctx.source)[0])
            table = with_other_row(table, by, value, total + z)
        shown = dataclasses.replace(released.disclosure, epsilon=planned.charge.epsilon).with_notes(
            *(n for n in planned.disclosure.notes if n.startswith("other row:")))
        return dataclasses.replace(released, rows=table, in_process=True, disclosure=shown)



def _note(cal: _other_total.OtherTotalCalibration, eps_release: float, count_name: str, sums: bool) -> str:
    return (f"other row: the last row (every key column null, {OTHER_COLUMN} = true) holds in {count_name!r} the "
            f"total of the bounded contributions (at most {cal.l0} keys per unit, 1 each, its own uniform choice) "
            f"of every key not released, plus discrete Laplace noise of scale {float(cal.scale):.4g} (std "
            f"{cal.noise_std:.4g}) at epsilon {cal.epsilon:.4g} (pure); the released keys use epsilon "
            f"{eps_release:.4g}" + ("; its SUM/MEAN columns are null" if sums else ""))


def other_halfwidth(scale: Any, level: float) -> tuple[int, float]:
    """``(h, coverage)``: the smallest integer h with P[|Z| <= h] >= ``level`` for the other row's discrete Laplace
    noise Z of ``scale`` (exact law: P[|Z| <= h] = 1 − 2·P[Z >= h + 1]), and that probability.

    The upward scan starts just below the closed form ``h = b·log(2/((1 − level)(1 + q))) − 1`` (``q = e^{−1/b}``:
    ``P[Z >= k] = q^k/(1 + q)``) instead of at 0, once the test fails there (else from 0): the same first h
    (the test is monotone in h) in a few evaluations instead of about ``3b``."""
    def covers(h: int) -> bool:
        return 1.0 - 2.0 * float(dlaplace_sf(h + 1, scale)) >= level

    b = float(scale)
    guess = b * math.log(2.0 / (max(1.0 - level, 1e-300) * (1.0 + math.exp(-1.0 / b)))) - 1.0
    h = max(0, int(guess) - 2) if math.isfinite(guess) else 0
    if h > 0 and covers(h - 1):
        h = 0
    while not covers(h):
        h += 1
    return h, 1.0 - 2.0 * float(dlaplace_sf(h + 1, scale))


def with_other_interval(table: Any, by: list[str], value_column: str, plan: OtherPlan,
                        level: float) -> tuple[Any, str | None]:
    """``table`` (with interval columns) where the other row's interval is its own: ``value ± h`` of its discrete
    Laplace (:func:`other_halfwidth`, lower end raised to 0, as a count's), the other interval columns null in that
    row (SUM/MEAN are null there); and the report's note on it. Post-processing of released values."""
    import pyarrow as pa

    key = by[0] if by and by[0] in table.column_names else None
    lo_name, hi_name = f"{value_column}_lo", f"{value_column}_hi"
    if key is None or not table.column(key).null_count or lo_name not in table.column_names:
        return table, None
    is_other = np.asarray(table.column(key).is_null().to_numpy(zero_copy_only=False), dtype=bool)
    h, coverage = other_halfwidth(plan.calibration.scale, level)
    value = float(np.asarray(table.column(value_column).to_numpy(zero_copy_only=False), dtype=np.float64)[is_other][0])
    cols = {}
    for name in table.column_names:
        col = table.column(name)
        if name.endswith("_lo") or name.endswith("_hi"):
            own = max(value - h, 0.0) if name == lo_name else value + h if name == hi_name else None
            vals = col.to_pylist()
            for i in np.flatnonzero(is_other):
                vals[i] = None if own is None else (int(own) if pa.types.is_integer(col.type) else own)
            col = pa.array(vals, type=col.type)
        cols[name] = col
    note = (f"other row: its interval is its own discrete Laplace's, ±{h} (exact coverage {coverage:.4f}), not "
            f"conditional on a selection (the row is always released)")
    return pa.table(cols), note
