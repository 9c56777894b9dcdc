"""The typed release request: ``sd.release``'s arguments checked once, before any data is read.

:func:`build_request` turns the arguments of :func:`sparsedp.release` into one frozen :class:`Request` (no data
read, no randomness drawn): the columns, the guarantee, the contribution bound, the aggregates, the public key
list, the output file, the ledger and the mechanism object that will run. Options live on the objects they
configure: a mechanism's options are its typed fields (``sd.TopKCSH(k=100)``), the automatic bound is a
mechanism wrapping the requested one (:class:`sparsedp.bound_choice.AutoBounded`), each aggregate carries its
column and bounds. The mechanism then refuses what it cannot serve (:meth:`Mechanism.validate
<sparsedp.mechanisms.base.Mechanism.validate>`, from its declared capabilities): nothing here names a
mechanism.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Callable, ContextManager

from . import _validate as v
from .accounting.intervals import DEFAULT_LEVEL, check_level
from .aggregates import Count, Sum, output_names
from .auto_bound import parse_auto
from .core import sources
from .engines.output import OUT_FORMATS, check_out_path
from .errors import InvalidParameterError, InvalidTypeError
from .mechanisms import registry
from .mechanisms.base import Mechanism, ReleaseRequest
from .mechanisms.thresholded import fit_shape
from .noise import default_source
from .core.lazy import lazy_module

if TYPE_CHECKING:
    from . import bound_choice as _bound_choice, other_row as _other_row
else:  # the automatic bound's and the other row's wrappers: imported by a release that asks for them (issue 31)
    _bound_choice, _other_row = lazy_module("sparsedp.bound_choice"), lazy_module("sparsedp.other_row")

__all__ = ["Request", "PlanRequest", "build_request", "build_plan_request", "check_out_path", "columns", "split_aggregates", "OUT_FORMATS"]



@dataclass(frozen=True)
class Request:
    """One release, fully typed (see :func:`sparsedp.release` for each argument's meaning).

    ``bound``: ``max_groups_per_unit`` as an integer (``None``: not given, or chosen from the data);
    ``auto_bound``: the :class:`~sparsedp.auto_bound.AutoBound` options when it is chosen from the data;
    ``mechanism``: the object the pipeline runs (the automatic bound wraps the requested mechanism);
    ``count``/``sums``: the count aggregate and the SUM/MEAN aggregates; ``keys``: the public key list;
    ``out``: ``(path, format)`` of the output file; ``source``: the release's random source."""

    data: Any
    unit: str | None
    by: tuple[str, ...]
    epsilon: float
    delta: float
    bound: int | None
    auto_bound: Any
    top_k: int | None
    mechanism: Any
    count: Count
    sums: tuple[Sum, ...]
    keys: Any
    column_shape: Any
    insecure_float: bool
    engine: Any = None
    connection: Any = None
    out: tuple[str, str] | None = None
    ledger: Any = None
    dataset: str | None = None
    source: Any = None
    progress: Callable[[str], ContextManager[Any]] | None = None
    #: the level of the per-row intervals (``release(..., interval=…)``), None: no interval columns
    interval: float | None = None

    def mechanism_request(self) -> ReleaseRequest:
        """The data-independent part the mechanism calibrates (:class:`~sparsedp.mechanisms.base.ReleaseRequest`)."""
        return ReleaseRequest(epsilon=self.epsilon, delta=self.delta, max_groups_per_unit=self.bound,
                              insecure_float=self.insecure_float, aggregates=self.sums, keys=self.keys,
                              column_shape=self.column_shape, interval=self.interval)


def columns(privacy_unit: Any, by: Any) -> tuple[str | None, list[str]]:
    """``(unit, by columns)`` checked: names, no duplicates, the unit not among the keys."""
    if privacy_unit is not None and (not isinstance(privacy_unit, str) or not privacy_unit):
        raise InvalidTypeError(f"⟨privacy_unit⟩ must be a column name (str), got {privacy_unit!r}")
    cols = [by] if isinstance(by, str) else by
    if not isinstance(cols, (list, tuple)) or not cols or not all(isinstance(c, str) and c for c in cols):
        raise InvalidTypeError(f"⟨by⟩ must be a column name or a non-empty list of column names, got {by!r}")
    cols = list(cols)
    if len(set(cols)) != len(cols):
        raise InvalidParameterError(f"⟨by⟩ lists a column twice: {cols}")
    if privacy_unit in cols:
        raise InvalidParameterError(f"⟨privacy_unit⟩ {privacy_unit!r} is also in ⟨by⟩; grouping by the unit would "
                                    f"release per-person counts")
    return privacy_unit, cols


def split_aggregates(aggregates: Any, unit: str | None, cols: list[str]) -> tuple[Count, tuple[Sum, ...]]:
    """``(count, sums)``: the count aggregate of ``aggregates`` (default ``Count()``; at most one) and the
    SUM/MEAN aggregates (:class:`~sparsedp.aggregates.Sum`, :class:`~sparsedp.aggregates.Mean`) in the given
    order. Types, duplicate output names, output names that are input columns, and value columns that are the
    unit or a key are refused here (no data read). The SUM/MEAN columns are released with the count by the
    joint GSHM (:mod:`sparsedp.accounting.aggregates`)."""
    if aggregates is None:
        return Count(), ()
    aggs = list(aggregates) if isinstance(aggregates, (list, tuple)) else [aggregates]
    if not aggs:
        raise InvalidParameterError("aggregates must list at least one aggregate (e.g. [sd.Count()])")
    output_names(aggs)  # Count/Sum/Mean objects only, distinct output names
    counts = [a for a in aggs if isinstance(a, Count)]
    if len(counts) > 1:
        raise InvalidParameterError(f"aggregates lists Count more than once: {counts!r}")
    sums = tuple(a for a in aggs if isinstance(a, Sum))
    for a in sums:
        if a.column == unit or a.column in cols:
            raise InvalidParameterError(f"{type(a).__name__}({a.column!r}): the value column must not be the "
                                        f"privacy unit or a key column")
        if a.output_name in cols or a.output_name == unit:
            raise InvalidParameterError(f"the output column {a.output_name!r} is also an input column; name it "
                                        f"otherwise: {type(a).__name__}(…, name=…)")
    return (counts[0] if counts else Count()), sums


def check_column_shape(shape: Any, sums: tuple[Sum, ...]) -> Any:
    """``column_shape`` checked and fitted once before anything is read (errors in the user's terms), kept as a
    tuple of tuples for the request (:func:`sparsedp.mechanisms.thresholded.fit_shape`)."""
    if shape is None:
        return None
    return fit_shape(sums, shape).requested


def mechanism_object(spec: Any, top_k: Any, bound_given: bool, keys: bool) -> Any:
    """The mechanism object for ``mechanism=spec`` (a registered name or object) and the ``top_k=…`` shorthand:
    the class that ``top_k`` configures says so (:meth:`Mechanism.with_top_k`)."""
    if top_k is not None and keys:
        raise InvalidParameterError("⟨keys=…⟩ releases every listed key (no threshold); ⟨top_k⟩ selects keys "
                                    "from the data: pass one of them", param="top_k")
    if isinstance(spec, str):
        cls, obj = registry.get(spec), None
    elif isinstance(spec, Mechanism):
        cls, obj = type(spec), spec
    else:
        return registry.create(spec)  # a class, or a type error naming what is accepted
    if top_k is not None:
        return cls.with_top_k(obj, v.integer("top_k", top_k, lo=1), bound_given)
    return obj if obj is not None else cls.default()


def source(rng: Any) -> Any:
    """The release's random source: the secure default, or a seeded source for tests."""
    if rng is None:
        return default_source()
    if not callable(getattr(rng, "uint64", None)) or not callable(getattr(rng, "random_bytes", None)):
        raise InvalidTypeError("rng must be a sparsedp.noise source (SecureRandom); leave it None in production")
    return rng


def _input(data: Any) -> Any:
    """The input as the engines read it: a directory of Parquet/CSV parts becomes the glob of its files."""
    return sources.resolve_file(data) if sources.kind(data) == "file" else data


def interval_level(interval: Any) -> float | None:
    """``release(..., interval=…)``: None/False (no interval columns), True (:data:`~sparsedp.accounting.
    intervals.DEFAULT_LEVEL`, 95 %) or a level in (0, 1)."""
    if interval is None or interval is False:
        return None
    if interval is True:
        return DEFAULT_LEVEL
    return check_level(interval)


def _bound(max_groups_per_unit: Any) -> tuple[int | None, Any]:
    """``(l0, AutoBound options)``: an integer bound, or the options of a bound chosen from the data."""
    auto = parse_auto(max_groups_per_unit)
    if auto is not None:
        return None, auto
    if max_groups_per_unit is None:
        return None, None
    return v.integer("max_groups_per_unit", max_groups_per_unit, lo=1), None


def _keys(keys: Any, cols: list[str]) -> tuple[Any, Any]:
    """``(public key list, partial key set)``: the public key list
    (:class:`~sparsedp.mechanisms.public_keys.PublicKeys`), checked, or for a mapping ``{column: values}`` naming
    some of the ``by`` columns the :class:`~sparsedp.mechanisms.mixed_keys.PartialKeys` (its module loads only
    when keys are given: :func:`~sparsedp.mechanisms.registry.builtin_module`, a default release stays light)."""
    if keys is None:
        return None, None
    if isinstance(keys, dict) or type(keys).__name__ == "PartialKeys":
        mixed = registry.builtin_module("mixed_keys")
        spec = keys if isinstance(keys, mixed.PartialKeys) else mixed.key_set(keys, cols)
        if isinstance(spec, mixed.PartialKeys):
            if list(spec.by) != cols:
                raise InvalidParameterError(f"keys is a key set for the columns {list(spec.by)}, not the by "
                                            f"columns {cols}", param="keys")
            return None, spec
        return spec, None
    return _public_list(keys, cols), None


def _public_list(keys: Any, cols: list[str]) -> Any:
    """The public key list of ``keys=`` (a list, frame or :class:`PublicKeys`) for the ``by`` columns."""
    mod = registry.builtin_module("public_keys")
    pub = keys if isinstance(keys, mod.PublicKeys) else mod.public_keys(keys, cols)
    if list(pub.columns) != cols:
        raise InvalidParameterError(f"keys has the columns {list(pub.columns)}, not the by columns {cols}")
    return pub


def _mixed(mech: Any, partial: Any, auto: Any) -> Any:
    """The mixed public × private release of a partial key set (:mod:`sparsedp.mechanisms.mixed_keys`)."""
    if auto is not None:
        raise InvalidParameterError("a partial key set (keys={column: [...]}) selects its private columns with a "
                                    "fixed bound: give ⟨max_groups_per_unit⟩ as a number", param="max_groups_per_unit")
    return registry.builtin_module("mixed_keys").mixed_mechanism(mech, partial)


def build_request(data: Any, privacy_unit: Any, by: Any, epsilon: Any, delta: Any, max_groups_per_unit: Any,
                  top_k: Any, mechanism: Any, *, aggregates: Any, keys: Any, column_shape: Any = None,
                  insecure_float: Any = False, **rest: Any) -> Request:
    """The :class:`Request` of ``sd.release``'s arguments (``rest``: engine, connection, out, ledger, dataset,
    rng, progress, other), every argument checked and the mechanism's :meth:`validate` passed: no data read."""
    eps = v.epsilon(epsilon)
    dlt = v.real("delta", delta, lo=0.0, hi=1.0, hi_open=True)
    unit, cols = columns(privacy_unit, by)
    count, sums = split_aggregates(aggregates, unit, cols)
    bound, auto = _bound(max_groups_per_unit)
    pub, partial = _keys(keys, cols)
    if not isinstance(insecure_float, bool):
        raise InvalidTypeError(f"insecure_float must be a bool, got {insecure_float!r}")
    if pub is not None and sums:
        raise InvalidParameterError("SUM/MEAN aggregates are not offered with keys= (public key lists release "
                                    "counts)")
    mech = mechanism_object(mechanism, top_k, max_groups_per_unit is not None, pub is not None)
    if partial is not None:
        mech = _mixed(mech, partial, auto)
    if auto is not None:
        mech = _bound_choice.AutoBounded(inner=mech, bound=auto)
    other = rest.pop("other", False)
    share = None if other is None or other is False else _other_row.other_share(other)
    if share is not None:
        if auto is not None:
            raise InvalidParameterError("⟨other⟩ needs ⟨max_groups_per_unit⟩ as a number (the other row's "
                                        "sensitivity), not 'auto'", param="max_groups_per_unit")
        mech = _other_row.WithOther(inner=mech, share=share)
    out, rng, overwrite = rest.pop("out", None), rest.pop("rng", None), rest.pop("overwrite", False)
    rest["interval"] = interval_level(rest.pop("interval", DEFAULT_LEVEL))
    data = _input(data)
    req = Request(data=data, unit=unit, by=tuple(cols), epsilon=eps, delta=dlt, bound=bound, auto_bound=auto,
                  top_k=top_k, mechanism=mech, count=count, sums=sums, keys=pub, column_shape=None,
                  insecure_float=insecure_float, **rest)
    mech.validate(req)
    if sums and insecure_float:
        raise InvalidParameterError("SUM/MEAN aggregates are released with secure discrete noise only; drop "
                                    "insecure_float=True")
    return replace(req, column_shape=check_column_shape(column_shape, sums),
                   out=None if out is None else check_out_path(out, overwrite), source=source(rng))


@dataclass(frozen=True)
class PlanRequest:
    """``sd.plan``'s arguments checked once (no data): the guarantee, the contribution model (``l0`` keys per
    unit, ``top_k``, ``max_units`` for the pure mechanisms), the SUM/MEAN aggregates, and for public key lists
    their number ``d`` (``keys``: the list or frame itself, ``group``: its grouping column)."""

    epsilon: float
    delta: float
    l0: int | None
    top_k: int | None
    max_units: int | None
    beta: Any
    sums: tuple[Sum, ...]
    column_shape: Any
    insecure_float: bool
    keys: Any = None
    d: int | None = None
    group: str | None = None

    def request(self, **changes: Any) -> ReleaseRequest:
        """The :class:`~sparsedp.mechanisms.base.ReleaseRequest` the mechanisms calibrate (``changes`` applied)."""
        base = ReleaseRequest(epsilon=self.epsilon, delta=self.delta, max_groups_per_unit=self.l0,
                              insecure_float=self.insecure_float, aggregates=self.sums,
                              column_shape=self.column_shape)
        return replace(base, **changes)

    def sort_key(self, calibration: Any) -> Any:
        """How the ranked rows are ordered: per-key error for public key lists, else margin then noise."""
        if self.d is not None:
            return calibration.noise_std
        return (calibration.tau, calibration.noise_std)

    def title(self) -> str:
        if self.d is not None:
            bound = "" if self.l0 is None else f", max_groups_per_unit={self.l0}"
            return f"sparsedp plan: epsilon={self.epsilon:g}, delta={self.delta:g}, keys={self.d}{bound}"
        model = ", ".join(f"{name}={x}" for name, x in (("max_groups_per_unit", self.l0), ("top_k", self.top_k),
                                                         ("max_units", self.max_units)) if x is not None)
        return f"sparsedp plan: epsilon={self.epsilon:g}, delta={self.delta:g}, {model}"


def build_plan_request(epsilon: Any, delta: Any, max_groups_per_unit: Any, top_k: Any, *, insecure_float: bool,
                       max_units: Any, beta: Any, aggregates: Any, keys: Any, group: Any,
                       column_shape: Any) -> PlanRequest:
    """The :class:`PlanRequest` of ``sd.plan``'s arguments, the combinations no mechanism lists refused."""
    eps = v.epsilon(epsilon)
    dlt = v.real("delta", delta, lo=0.0, hi=1.0, hi_open=True)
    l0 = None if max_groups_per_unit is None else v.integer("max_groups_per_unit", max_groups_per_unit, lo=1)
    k = None if top_k is None else v.integer("top_k", top_k, lo=1)
    common = dict(epsilon=eps, l0=l0, top_k=k, max_units=max_units, beta=beta, insecure_float=insecure_float)
    if keys is not None:
        if isinstance(keys, dict):
            raise InvalidParameterError("plan(keys={column: values}): a partial key set is not planned; plan its "
                                        "stages: the selection at its share of epsilon, the counting with "
                                        "keys=<number of public values x expected selected>", param="keys")
        if top_k is not None or aggregates is not None or max_units is not None:
            raise InvalidParameterError("plan(keys=…) lists the public-key mechanisms; top_k, aggregates and "
                                        "max_units do not apply to them")
        d = v.integer("keys", keys, lo=1) if isinstance(keys, int) else len(keys)
        if d < 1:
            raise InvalidParameterError("keys is empty: list at least one key to release")
        return PlanRequest(delta=dlt, sums=(), column_shape=None, keys=keys, d=d, group=group, **common)
    if group is not None:
        raise InvalidParameterError("plan(group=…) groups a public key list: pass keys=<frame with that column>")
    sums: tuple[Sum, ...] = () if aggregates is None else split_aggregates(aggregates, "", [])[1]
    if sums and (max_units is not None or dlt == 0):
        raise InvalidParameterError("SUM/MEAN are released by GSHM and top-k CSH only (delta > 0, "
                                    "max_groups_per_unit or top_k), not by the pure mechanisms")
    shape = check_column_shape(column_shape, sums)
    if dlt > 0:
        if l0 is None and k is None and max_units is None:
            raise InvalidParameterError("plan needs max_groups_per_unit=… (keys per unit) and/or top_k=…")
        dlt = v.delta(dlt)
    elif max_units is None:
        raise InvalidParameterError("delta=0 lists the pure-DP mechanisms: pass max_units=… (the number of units)")
    return PlanRequest(delta=dlt, sums=sums, column_shape=shape, **common)
