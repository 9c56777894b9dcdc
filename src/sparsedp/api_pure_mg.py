"""``sparsedp.release`` for the pure-DP histograms (seed 003) and the private Misra–Gries sketch (seed 004b).

:func:`sparsedp.release` dispatches here for ``mechanism`` in :data:`PURE_MECHANISMS` or ``"misra-gries"``;
validation, bounding (by the same engines), the ledger charge and the output file work as for the other
mechanisms. What differs is the contribution model and the guarantee, stated here precisely.

**Pure mechanisms** (``"pure-sparse"``, ``"compact"``, ``"basic"``, ``"stability"``; Balcer–Vadhan,
:mod:`sparsedp.mechanisms.pure`). Their setting is "each unit contributes one item": the engine bounds every
unit to ``l0 = 1`` key (uniformly at random from the secure source), so the bounded histogram's counts sum
to the number of units ``n``. Neighbours:

* with ``max_units=N`` (a public bound on the number of units): add/remove one unit. The items are padded to
  ``N`` with a dummy label that is never released, so adding/removing a unit is a replacement in the padded
  data (seed 003 §2, :func:`~sparsedp.mechanisms.pure.release_pure`), and the release is ε-DP (δ = 0;
  ``"stability"``: (ε, δ)-DP) for add/remove one unit;
* without it: replace one unit, with ``n`` treated as **public** (the paper's bounded DP); the report says so.

Keys: one string column is used as is; any other key (several columns, non-string types) is joined
canonically into one string, the compact JSON array of its values (``'["u",3]'``), and released in one column
named ``"+".join(by)`` (Misra–Gries, which releases only real keys, keeps the key columns). Keys are byte strings of at most ``max_key_bytes`` UTF-8 bytes (a public bound: the
domain is all such strings; released empty bins carry random labels of that domain, as the mechanism
requires). ``"basic"`` is dense and needs a public ``domain_size`` (one integer key column in
``[0, domain_size)``, ``domain_size <= 2^20``). ``"compact"`` releases nothing by itself: its output is a
queryable :class:`~sparsedp.mechanisms.pure.CompactHistogram` (``result.release.extra["query"](key)``), and
the table lists the public ``query_keys`` (releasing the keys present in the data would not be private).
ε is rounded down to ``1/⌈1/ε⌉`` (seed 003 §1.5), so ε must be in (0, 1].

**Misra–Gries** (``"misra-gries"``, Lebeda thesis Alg. 12–13, :mod:`sparsedp.sketches`). The thesis's
neighbouring relation is add/remove one *stream element* (Def. 3.1). The engine first bounds every unit to
at most ``l0 = max_groups_per_unit`` (default 1) distinct keys; the stream is then the bounded histogram
written out in a fixed public order (keys sorted by their public 64-bit Misra–Gries code, each repeated
``count`` times) and sketched with ``k = sketch_size`` counters. Adding or removing one unit then inserts or
deletes at most ``l0`` elements of that stream (each of its keys' runs grows or shrinks by one), i.e. a chain
of at most ``l0`` element-neighbours. Algorithm 13 (PMG, discrete Laplace, Thm 3.1 with the §3.5.2
threshold) is run at ``(ε', δ')`` with ``ε' = ε/l0`` and ``δ' = δ / Σ_{i<l0} e^{iε'}``: by group privacy
(chaining the element-level guarantee ``l0`` times) the release is (ε, δ)-DP for add/remove one unit; with
``l0 = 1`` this is exactly the thesis's guarantee. The sketch holds O(k) memory; the bounding itself is the
engine's exact group-by (Polars/DuckDB can run it out of core).
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from . import _validate as v
from .errors import InvalidParameterError

__all__ = ["PURE_MECHANISMS", "SKETCH_MECHANISMS", "group_privacy_parameters", "PureMGReport"]

PURE_MECHANISMS = ("pure-sparse", "compact", "basic", "stability")
SKETCH_MECHANISMS = ("misra-gries",)


def group_privacy_parameters(epsilon: float, delta: float, group: int) -> tuple[float, float]:
    """Element-level ``(ε', δ')`` whose ``group``-fold chain gives ``(ε, δ)``: ``ε' = ε/g``,
    ``δ' = δ / Σ_{i=0}^{g-1} e^{iε'}`` (group privacy: chaining g neighbours, ``δ_g = δ' Σ_i e^{iε'}``).
    δ' is rounded down (conservative)."""
    g = v.integer("group", group, lo=1)
    eps_e = epsilon / g
    total = math.fsum(math.exp(i * eps_e) for i in range(g))
    return eps_e, math.nextafter(delta / total, 0.0) if g > 1 else delta


@dataclass(frozen=True)
class _Guarantee:
    """Duck-typed calibration for the ledger (``epsilon``, ``delta``)."""

    epsilon: float
    delta: float
    mechanism: str


def validate(mechanism: str, epsilon: Any, delta: Any, l0: int | None, top_k: Any, pre_threshold: Any,
             sketch_size: Any, max_units: Any, domain_size: Any, insecure_float: bool) -> dict:
    """All checks of the pure / Misra–Gries paths (before any data is read)."""
    eps = v.epsilon(epsilon)
    if top_k is not None:
        raise InvalidParameterError(f"top_k is not used by mechanism={mechanism!r}")
    if v.integer("pre_threshold", pre_threshold, lo=1) != 1:
        raise InvalidParameterError(f"mechanism={mechanism!r} sets its own threshold; leave pre_threshold=1")
    if insecure_float:
        raise InvalidParameterError(f"mechanism={mechanism!r} uses exact integer noise only; "
                                    "insecure_float is not supported")
    out: dict[str, Any] = {"epsilon": eps}
    if mechanism in PURE_MECHANISMS:
        if sketch_size is not None:
            raise InvalidParameterError("sketch_size is only used by mechanism='misra-gries'")
        if l0 not in (None, 1):
            raise InvalidParameterError(f"mechanism={mechanism!r} assumes each unit contributes one item "
                                        f"(max_groups_per_unit=1), got {l0}")
        if eps > 1:
            raise InvalidParameterError(f"pure mechanisms need epsilon in (0, 1] (rounded down to 1/k), "
                                        f"got {eps}")
        if mechanism == "stability":
            out["delta"] = v.delta(delta)
        elif delta not in (None, 0, 0.0):
            raise InvalidParameterError(f"mechanism={mechanism!r} is pure DP: pass delta=0, got {delta!r}")
        else:
            out["delta"] = 0.0
        out["max_units"] = None if max_units is None else v.integer("max_units", max_units, lo=1)
        if mechanism == "basic":
            if domain_size is None:
                raise InvalidParameterError("mechanism='basic' is dense over a public domain: pass "
                                            "domain_size=… (one integer key column in [0, domain_size))")
            out["domain_size"] = v.integer("domain_size", domain_size, lo=2, hi=1 << 20)
        elif domain_size is not None:
            raise InvalidParameterError("domain_size is only used by mechanism='basic'")
    else:
        for name, x in (("max_units", max_units), ("domain_size", domain_size)):
            if x is not None:
                raise InvalidParameterError(f"{name} is not used by mechanism='misra-gries'")
        if sketch_size is None:
            raise InvalidParameterError("mechanism='misra-gries' needs sketch_size=… (number of counters k, "
                                        "e.g. 10000)")
        out["sketch_size"] = v.integer("sketch_size", sketch_size, lo=1)
        out["delta"] = v.delta(delta)
        out["l0"] = 1 if l0 is None else l0
    return out


def guarantee(mechanism: str, checked: dict) -> _Guarantee:
    return _Guarantee(epsilon=checked["epsilon"], delta=checked["delta"], mechanism=mechanism)


# ------------------------------------------------------------------ keys


def _key_mode(key_table, cols: Sequence[str], mechanism: str) -> str:
    import pyarrow as pa

    if mechanism == "basic":
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


def _joined_keys(key_table, cols: Sequence[str], mode: str) -> list:
    if mode in ("int", "str"):
        return key_table.column(cols[0]).to_pylist()
    columns = [key_table.column(c).to_pylist() for c in cols]
    return [_join(row) for row in zip(*columns)]


# ------------------------------------------------------------------ release


def _printable(x: str) -> str:
    """A released label as valid UTF-8: random labels of empty bins (pure-sparse) are arbitrary bytes,
    decoded with ``surrogateescape``; their undecodable bytes are shown as ``\\xNN`` (post-processing)."""
    try:
        x.encode("utf-8")
        return x
    except UnicodeEncodeError:
        return x.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def release_special(*, data, kind, eng, unit, cols, count_column, mech, checked, out_path, source, stage,
                    t_start, led, dataset, max_key_bytes, beta, query_keys):
    """Stages 2–4 of :func:`sparsedp.release` for the pure and Misra–Gries mechanisms."""
    import pyarrow as pa

    from .engines import sources
    from .api import publish
    from .engines.output import release_table
    from .mechanisms.histogram import Release

    timings = {"validate": time.perf_counter() - t_start}
    l0 = checked.get("l0", 1)
    t = time.perf_counter()
    with stage("bounding contributions and counting"):
        bounded = eng.bounded_histogram(data, unit, cols, l0, source, pre_threshold=1)
    timings["bound+count"] = time.perf_counter() - t
    hist = bounded.histogram
    mode = _key_mode(hist.keys, cols, mech)
    keys = _joined_keys(hist.keys, cols, mode)
    out_col = cols[0] if mode in ("int", "str") else "+".join(cols)

    charge_id = None
    if led is not None:
        from .ledger import charge_of

        charge_id = led.charge(dataset, mechanism=mech, note=f"release {sources.display(data)}",
                               **charge_of(guarantee(mech, checked)))
    t = time.perf_counter()
    with stage(f"adding noise ({mech})"):
        if mech == "misra-gries":
            rel, info = _misra_gries(keys, hist.counts, checked, source)
        else:
            rel, info = _pure(keys, hist.counts, mech, checked, source, max_key_bytes, beta, query_keys, mode)
    timings["noise"] = time.perf_counter() - t

    t = time.perf_counter()
    with stage("writing the output" if out_path else "building the table"):
        if mech == "misra-gries":  # only real keys are released: keep the key columns and their types
            key_table = hist.keys.take(pa.array(np.asarray(rel.keys, dtype=np.int64)))
        else:
            key_type = pa.int64() if mode == "int" else pa.string()
            out_keys = list(rel.keys)
            if mode != "int":  # random labels of empty bins need not be UTF-8 (real keys always are)
                out_keys = [_printable(x) for x in out_keys]
            key_table = pa.table({out_col: pa.array(out_keys, type=key_type)})
        table_rel = Release(keys=key_table, counts=rel.counts,
                            calibration=rel.calibration, n_keys_in=rel.n_keys_in, n_keys_out=rel.n_keys_out,
                            extra=rel.extra)
        frame = publish(release_table(table_rel, count_column), kind, out_path, led, charge_id)
    timings["output"] = time.perf_counter() - t
    timings["total"] = time.perf_counter() - t_start

    from .api import Result

    report = PureMGReport(
        mechanism=mech, reason="requested explicitly", analysis=info["analysis"], epsilon=info["epsilon"],
        delta=info["delta"], delta_achieved=info["delta_achieved"], delta_parts=info.get("delta_parts", {}),
        sigma=info.get("sigma", 0.0), noise_std=info.get("noise_std", 0.0), tau=info.get("tau", 0.0),
        threshold=info.get("threshold", 0.0), pre_threshold=1, l0=l0, top_k=None,
        released_keys=int(rel.n_keys_out), engine=eng.name, source=sources.display(data),
        bounding=bounded.stats, timings=timings, extra={"guarantee": info["guarantee"], "details": info["details"]},
        output=out_path[0] if out_path else None)
    return Result(table=frame, report=report, release=table_rel)


def _pure(keys, counts, mech, checked, source, max_key_bytes, beta, query_keys, mode):
    from fractions import Fraction

    from .mechanisms.histogram import SparseHistogram
    from .mechanisms.pure import release_pure

    n_max = checked["max_units"]
    if mode == "int":
        domain_size = checked["domain_size"]
    else:
        domain_size = None
    qk = None
    if mech == "compact":
        qk = [] if query_keys is None else [q if mode != "json" or isinstance(q, str) else _join(q)
                                            for q in query_keys]
    elif query_keys is not None:
        raise InvalidParameterError("query_keys is only used by mechanism='compact'")
    hist = SparseHistogram(np.array(keys, dtype=object), np.asarray(counts, dtype=np.int64))
    rel = release_pure(hist, epsilon=checked["epsilon"], beta=Fraction(1, 20) if beta is None else beta,
                       domain_size=domain_size, mechanism=mech, rng=source, max_items=n_max,
                       delta=checked["delta"] if mech == "stability" else None, query_keys=qk,
                       max_key_bytes=max_key_bytes)
    cal = rel.calibration
    acc = cal.accuracy
    if mech == "compact":
        chist = rel.extra["histogram"]
        from .mechanisms.pure.release import StringCodec

        codec = None if mode == "int" else StringCodec(max_key_bytes)

        def query(key):
            """Noisy count of ``key`` (a str, or a tuple/list of column values for joined keys)."""
            if mode == "json" and not isinstance(key, str):
                key = _join(key)
            return chist.count(int(key) if codec is None else codec.encode(key))

        rel.extra["query"] = query
    neighbours = ("add/remove one privacy unit (at most max_units units, padded)" if n_max is not None
                  else "replace one privacy unit (the number of units is public)")
    pure = cal.delta == 0
    guarantee_text = (f"{'pure ' if pure else ''}({cal.epsilon:g}, {cal.delta:g})-DP, {neighbours}; "
                      f"epsilon rounded down to 1/{cal.k}")
    details = (f"each unit contributes one key (l0 = 1); error bounds at beta={acc.beta:g}: per released count "
               f"+-{acc.per_query} (counts above {acc.threshold}), all counts at once +-{acc.simultaneous}")
    info = {"analysis": "balcer-vadhan", "epsilon": cal.epsilon, "delta": cal.delta,
            "delta_achieved": cal.delta, "guarantee": guarantee_text, "details": details,
            "tau": float(acc.threshold if cal.tau is None else cal.tau), "threshold": float(acc.threshold),
            "noise_std": float(acc.per_query)}
    return rel, info


def _sorted_stream(keys: list, counts: np.ndarray):
    """Codes in the public order and the matching counts (see the module docstring)."""
    from .sketches.misra_gries import key_code

    codes = np.fromiter((key_code(k) for k in keys), dtype=np.int64, count=len(keys))
    order = np.argsort(codes, kind="stable")
    return codes[order], np.asarray(counts, dtype=np.int64)[order], order


def _stream_chunks(codes: np.ndarray, counts: np.ndarray, target: int = 1 << 20):
    """``np.repeat(codes, counts)`` in chunks of about ``target`` elements (memory O(target + k))."""
    i, n = 0, codes.size
    cum = np.cumsum(counts)
    while i < n:
        base = cum[i - 1] if i else 0
        j = int(np.searchsorted(cum, base + target, side="right"))
        j = max(j, i + 1)
        yield np.repeat(codes[i:j], counts[i:j])
        i = j


def _misra_gries(keys, counts, checked, source):
    from .mechanisms.histogram import Release
    from .sketches import MisraGries, private_misra_gries

    eps, dlt, l0, k = checked["epsilon"], checked["delta"], checked["l0"], checked["sketch_size"]
    eps_e, dlt_e = group_privacy_parameters(eps, dlt, l0)
    codes, cnts, order = _sorted_stream(keys, counts)
    sketch = MisraGries(k, keys="int")
    sketch.update_chunks(_stream_chunks(codes, cnts))
    rel = private_misra_gries(sketch, epsilon=eps_e, delta=dlt_e, rng=source)
    # codes -> original keys (a code collision, probability ~D^2/2^65, maps to the first key in order)
    first: dict[int, int] = {}
    for pos, c in enumerate(codes.tolist()):
        first.setdefault(c, pos)
    out_keys = [int(order[first[int(c)]]) for c in rel.keys]  # row indices into the bounded histogram
    cal = rel.calibration
    rel = Release(keys=out_keys, counts=rel.counts, calibration=cal, n_keys_in=len(keys),
                  n_keys_out=len(out_keys), extra={**rel.extra, "sketch": sketch})
    element = f"({eps_e:.6g}, {dlt_e:.3g})-DP per stream element" if l0 > 1 else "add/remove one stream element"
    guarantee_text = (f"({eps:g}, {dlt:g})-DP, add/remove one privacy unit (at most {l0} key(s) per unit; "
                      f"{element}{', group privacy over ' + str(l0) + ' elements' if l0 > 1 else ''})")
    details = (f"Misra-Gries sketch, k = {k} counters, Algorithm 13 with discrete Laplace noise; each count "
               f"underestimates the bounded count by at most n/(k+1) before noise")
    delta_unit = min(1.0, cal.delta_achieved * math.fsum(math.exp(i * eps_e) for i in range(l0)))
    info = {"analysis": cal.analysis, "epsilon": eps, "delta": dlt, "delta_achieved": delta_unit,
            "delta_parts": {"threshold": delta_unit}, "sigma": cal.sigma, "noise_std": cal.noise_std,
            "tau": cal.tau, "threshold": float(rel.extra["threshold"]), "guarantee": guarantee_text,
            "details": details}
    return rel, info


# ------------------------------------------------------------------ report


def _report_base():
    from .api import Report

    return Report


class PureMGReport(_report_base()):
    """:class:`sparsedp.Report` of a pure or Misra–Gries release (its own guarantee wording)."""

    def __str__(self) -> str:
        lines = [
            "sparsedp release",
            f"  guarantee     {self.extra['guarantee']}",
            f"  mechanism     {self.mechanism} [{self.analysis}]",
            f"  details       {self.extra['details']}",
        ]
        if self.mechanism == "misra-gries":
            lines.append(f"  threshold     released iff noisy counter >= {self.threshold:.6g}; noise std "
                         f"{self.noise_std:.3g}; delta achieved {self.delta_achieved:.3g}")
        return "\n".join(lines + self._curator_lines())

    def to_dict(self) -> dict:
        d = super().to_dict()
        d["extra"] = dict(self.extra)
        return d


# ------------------------------------------------------------------ entry point (called by api.release)


def release(data, privacy_unit, by, epsilon, delta, *, max_groups_per_unit, top_k, mechanism, pre_threshold,
            engine, rng, out, count_column, connection, insecure_float, progress, ledger, dataset,
            sketch_size, max_units, domain_size, max_key_bytes, beta, query_keys):
    """:func:`sparsedp.release` for ``mechanism`` in :data:`PURE_MECHANISMS` or ``"misra-gries"``.

    Validates everything before reading data (same order and errors as the other mechanisms)."""
    import contextlib

    from . import api
    from .engines import get_engine, sources

    t_start = time.perf_counter()
    stage = progress or (lambda name: contextlib.nullcontext())
    l0 = None if max_groups_per_unit is None else v.integer("max_groups_per_unit", max_groups_per_unit, lo=1)
    checked = validate(mechanism, epsilon, delta, l0, top_k, pre_threshold, sketch_size, max_units,
                       domain_size, insecure_float)
    unit, cols, count_column = api._columns(privacy_unit, by, count_column)
    if mechanism in PURE_MECHANISMS:
        max_key_bytes = v.integer("max_key_bytes", max_key_bytes, lo=1)
        if beta is not None:
            beta = v.rational("beta", beta)
    kind = sources.kind(data)
    if kind == "file":
        sources.file_format(data)
    eng = get_engine(engine, data, connection)
    if kind == "sql" and eng.name != "duckdb":
        raise InvalidParameterError(f"SQL text is run by DuckDB; use engine='duckdb' (or None), not {engine!r}")
    out_path = api.check_out_path(out) if out is not None else None
    source = api._rng(rng)
    led, own_ledger = api._open_ledger(ledger, dataset)
    try:
        if led is not None:
            from .ledger import charge_of

            led.check(dataset, **charge_of(guarantee(mechanism, checked)))
        return release_special(data=data, kind=kind, eng=eng, unit=unit, cols=cols, count_column=count_column,
                               mech=mechanism, checked=checked, out_path=out_path, source=source, stage=stage,
                               t_start=t_start, led=led, dataset=dataset, max_key_bytes=max_key_bytes,
                               beta=beta, query_keys=query_keys)
    finally:
        if own_ledger:
            led.close()


def plan(epsilon: float, delta: float | None, max_units: int, *, beta: Any = None, max_key_bytes: int = 64,
         domain_size: int | None = None) -> list:
    """:class:`~sparsedp.mechanisms.pure.PureCalibration` of every applicable pure mechanism for ``max_units``
    units (one key each), with their exact error bounds at ``beta`` (default 1/20): what ``plan`` shows.

    ``"stability"`` is listed only with ``0 < delta < 1``; ``"basic"`` only with ``domain_size <= 2^20``.
    """
    from fractions import Fraction

    from .mechanisms.pure import plan_pure

    eps = v.epsilon(epsilon)
    if eps > 1:
        raise InvalidParameterError(f"pure mechanisms need epsilon in (0, 1], got {eps}")
    n = v.integer("max_units", max_units, lo=1)
    dlt = None if not delta else v.delta(delta)
    wanted = [m for m in PURE_MECHANISMS if m != "basic" or domain_size is not None]
    return plan_pure(n, eps, Fraction(1, 20) if beta is None else beta, domain_size, delta=dlt,
                     max_key_bytes=max_key_bytes, mechanisms=wanted)
