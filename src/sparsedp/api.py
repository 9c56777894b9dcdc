"""``sparsedp.release`` and ``sparsedp.plan``: the one-call interface.

``release`` validates every argument and calibrates the mechanism *before* reading any data or drawing any
noise, then runs three stages: contribution bounding and counting in an engine (:mod:`sparsedp.engines`),
the private release of the bounded histogram (:func:`sparsedp.mechanisms.release_histogram`), and the output
(a frame of the input's kind, optionally written atomically to a file). ``plan`` needs no data.

Privacy guarantee of ``release`` (add/remove one privacy unit): two inputs are neighbours when one has all
the rows of one privacy unit (every row with that ``privacy_unit`` value) and the other has none of them. The
engine de-duplicates (unit, key) pairs and keeps at most ``max_groups_per_unit`` keys per unit, chosen
uniformly at random from the secure source, so the bounded histograms of neighbours differ in at most ``l0``
keys by 1 each (or, for ``top_k``, by at most 1 per key): exactly the contribution model the mechanism's
accountant assumes. The released table then satisfies (ε, δ)-DP for that neighbouring relation.
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable, ContextManager, Mapping, Sequence

from . import _validate as v
from .errors import InvalidParameterError, InvalidTypeError

__all__ = ["release", "plan", "Result", "Report"]

#: mechanisms ``release`` accepts (plain "csh" needs a k-sparse monotonic histogram, which raw data are not)
API_MECHANISMS = ("auto", "gshm", "laplace", "topk-csh")
#: also accepted, handled by :mod:`sparsedp.api_pure_mg`
OTHER_MECHANISMS = ("pure-sparse", "compact", "basic", "stability", "misra-gries")
OUT_FORMATS = {".parquet": "parquet", ".pq": "parquet", ".csv": "csv"}


@dataclass(frozen=True)
class Report:
    """How a release was made. Printable (``print(result.report)``).

    Only ``mechanism`` … ``released_keys`` describe the private output; ``bounding`` (rows/units/keys in and
    affected by bounding) and ``timings`` describe the *input* and are for the curator: they are not
    differentially private and must not be published with the table.
    """

    mechanism: str
    reason: str
    analysis: str
    epsilon: float
    delta: float
    delta_achieved: float
    delta_parts: Mapping[str, float]
    sigma: float
    noise_std: float
    tau: float
    threshold: float
    pre_threshold: int
    l0: int | None
    top_k: int | None
    released_keys: int
    engine: str
    source: str
    bounding: Any  # engines.BoundingStats
    timings: Mapping[str, float]
    candidates: Sequence[Mapping[str, Any]] = ()
    extra: Mapping[str, Any] = field(default_factory=dict)
    output: str | None = None

    def to_dict(self) -> dict:
        d = {k: getattr(self, k) for k in self.__dataclass_fields__}
        d["bounding"] = self.bounding.to_dict()
        d["delta_parts"] = dict(self.delta_parts)
        d["timings"] = dict(self.timings)
        d["extra"] = {k: v_ for k, v_ in self.extra.items() if k != "auto"}
        return d

    def __str__(self) -> str:
        model = (f"at most {self.l0} keys per unit, 1 per key" if self.l0 is not None
                 else f"top-{self.top_k} keys, 1 per key per unit")
        lines = [
            "sparsedp release",
            f"  guarantee     ({self.epsilon:g}, {self.delta:g})-DP, add/remove one privacy unit "
            f"(delta achieved {self.delta_achieved:.3g})",
            f"  mechanism     {self.mechanism} [{self.analysis}]: {self.reason}",
            f"  contribution  {model}",
            f"  noise         sigma = {self.sigma:.4g}; each released count is off by about "
            f"±{self.noise_std:.3g} (noise std), ±{1.96 * self.noise_std:.3g} at 95%",
            f"  threshold     released iff noisy count {self._cmp()} {self.threshold:.6g} "
            f"(pre-threshold {self.pre_threshold} + margin {self.tau:.6g})",
            "  delta parts   " + ", ".join(f"{k} {val:.3g}" for k, val in self.delta_parts.items()),
        ]
        if "bias" in self.extra:
            lines.append(f"  top-k         {self.extra['bias']}")
        if "t_tilde" in self.extra:
            lines.append(f"  top-k         de-biased with the noisy truncation level {self.extra['t_tilde']:.6g}")
        return "\n".join(lines + self._curator_lines())

    def _curator_lines(self) -> list[str]:
        """The released-key count, then the figures for the curator only (not private), timings, output."""
        b = self.bounding
        lines = [
            f"  released      {self.released_keys} keys",
            "  -- for the curator only (not private, do not publish) --",
            f"  input         {self.source} via the {self.engine} engine",
            f"  rows          {b.rows_in} in; {_known(b.duplicate_rows_removed)} duplicate (unit, key) rows removed",
            f"  units         {_known(b.units_in)} in; {_known(b.units_over_l0)} had more than l0={b.l0} keys "
            f"({_known(b.pairs_dropped_l0)} (unit, key) pairs dropped)" if b.l0 is not None
            else f"  units         {_known(b.units_in)} in (no l0 bound: top-k mode)",
            f"  keys          {_known(b.keys_in)} in, {b.keys_bounded} after bounding, {b.keys_out} to the mechanism, "
            f"{self.released_keys} released",
            "  time          " + ", ".join(f"{k} {t:.2f}s" for k, t in self.timings.items()),
        ]
        if self.output:
            lines.append(f"  output        {self.output}")
        return lines

    def _cmp(self) -> str:
        return {">": ">", ">=": ">="}.get(str(self.extra.get("comparison", ">=")), ">=")


def _known(x: Any) -> str:
    """A statistic, or "?" where the engine did not compute it (Spark skips the extra passes)."""
    return "?" if x is None else str(x)


@dataclass(frozen=True)
class Result:
    """A release: ``table`` (keys + noisy ``count``, largest first, in the input's frame type), ``report``,
    and the raw :class:`~sparsedp.mechanisms.Release`."""

    table: Any
    report: Report
    release: Any

    def __repr__(self) -> str:
        return f"Result({self.report.released_keys} keys released by {self.report.mechanism})\n{self.report}"


# ---------------------------------------------------------------- validation


def _columns(privacy_unit: Any, by: Any, count_column: Any) -> tuple[str, list[str], str]:
    if not isinstance(privacy_unit, str) or not privacy_unit:
        raise InvalidTypeError(f"privacy_unit must be a column name (str), got {privacy_unit!r}")
    cols = [by] if isinstance(by, str) else by
    if not isinstance(cols, (list, tuple)) or not cols or not all(isinstance(c, str) and c for c in cols):
        raise InvalidTypeError(f"by must be a column name or a non-empty list of column names, got {by!r}")
    cols = list(cols)
    if len(set(cols)) != len(cols):
        raise InvalidParameterError(f"by lists a column twice: {cols}")
    if privacy_unit in cols:
        raise InvalidParameterError(f"privacy_unit {privacy_unit!r} is also in by; grouping by the unit would "
                                    f"release per-person counts")
    if not isinstance(count_column, str) or not count_column or count_column in cols:
        raise InvalidParameterError(f"count_column must be a new column name, not one of by={cols}; got "
                                    f"{count_column!r}")
    return privacy_unit, cols, count_column


def _model(max_groups_per_unit: Any, top_k: Any, mechanism: Any, pre_threshold: Any):
    l0 = None if max_groups_per_unit is None else v.integer("max_groups_per_unit", max_groups_per_unit, lo=1)
    k = None if top_k is None else v.integer("top_k", top_k, lo=1)
    if mechanism == "csh":
        raise InvalidParameterError(
            "mechanism='csh' needs a k-sparse monotonic histogram (e.g. a Misra-Gries sketch), which raw rows "
            "are not; use mechanism='topk-csh' with top_k=…, or 'gshm'/'laplace' with max_groups_per_unit=…")
    mech = v.choice("mechanism", mechanism, API_MECHANISMS + OTHER_MECHANISMS)
    if l0 is not None and k is not None:
        raise InvalidParameterError(
            "pass either max_groups_per_unit (bound each unit to l0 keys: gshm, laplace) or top_k (release "
            "the top-k keys: topk-csh), not both")
    if mech in ("gshm", "laplace") and l0 is None:
        raise InvalidParameterError(f"mechanism={mech!r} needs max_groups_per_unit=… (max keys per unit, "
                                    f"e.g. 10)")
    if mech == "topk-csh" and k is None:
        raise InvalidParameterError("mechanism='topk-csh' needs top_k=… (number of keys to keep, e.g. 100)")
    if mech == "auto" and l0 is None and k is None:
        raise InvalidParameterError(
            "declare a contribution bound: max_groups_per_unit=… (keys per unit, e.g. 10) or top_k=… "
            "(release the top-k keys, e.g. 100)")
    pre = v.integer("pre_threshold", pre_threshold, lo=1)
    if k is not None and pre != 1:
        raise InvalidParameterError(f"top_k releases use pre_threshold=1 (the truncation sets the level); "
                                    f"got {pre}")
    return l0, k, mech, pre


def check_out_path(out: Any) -> tuple[str, str]:
    """``(path, format)`` for an output file that can be written; raises before any data is touched."""
    if not isinstance(out, (str, os.PathLike)):
        raise InvalidTypeError(f"out must be a file path, got {type(out).__name__}")
    path = os.path.abspath(os.fspath(out))
    ext = os.path.splitext(path)[1].lower()
    if ext not in OUT_FORMATS:
        raise InvalidParameterError(f"out must end in .parquet or .csv, got {os.fspath(out)!r}")
    parent = os.path.dirname(path)
    if os.path.isdir(path):
        raise InvalidParameterError(f"out {os.fspath(out)!r} is a directory; give a file name")
    if not os.path.isdir(parent):
        raise InvalidParameterError(f"cannot write out={os.fspath(out)!r}: directory {parent!r} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        raise InvalidParameterError(f"cannot write out={os.fspath(out)!r}: permission denied; choose a "
                                    f"writable location")
    return path, OUT_FORMATS[ext]


def _rng(rng: Any):
    from .noise import default_source

    if rng is None:
        return default_source()
    if not callable(getattr(rng, "uint64", None)):
        raise InvalidTypeError("rng must be a sparsedp.noise source (SecureRandom); leave it None in production")
    return rng


# ---------------------------------------------------------------- public


def release(data: Any, privacy_unit: str, by: str | Sequence[str], epsilon: float, delta: float,
            max_groups_per_unit: int | None = None, top_k: int | None = None, mechanism: str = "auto",
            pre_threshold: int = 1, engine: str | None = None, rng: Any = None, *,
            out: str | os.PathLike | None = None, count_column: str = "count", connection: Any = None,
            insecure_float: bool = False,
            progress: Callable[[str], ContextManager[Any]] | None = None,
            ledger: Any = None, dataset: str | None = None,
            sketch_size: int | None = None, max_units: int | None = None, domain_size: int | None = None,
            max_key_bytes: int = 64, beta: Any = None, query_keys: Any = None) -> Result:
    """Differentially private ``SELECT by…, COUNT(DISTINCT privacy_unit) … GROUP BY by…``.

    Args:
        data: a Polars DataFrame/LazyFrame, pandas DataFrame, pyarrow Table, DuckDB relation, SQL text
            (run by DuckDB on ``connection``), or the path of a Parquet/CSV file (or glob).
        privacy_unit: the column identifying whom the guarantee protects (user id, account, device…).
        by: the key column(s).
        epsilon, delta: the guarantee, ε > 0 and 0 < δ < 1.
        max_groups_per_unit: l0, the number of distinct keys kept per unit (uniformly at random from the
            secure source). Needed by "gshm" and "laplace".
        top_k: release (at most) the top-k keys instead ("topk-csh"; no per-unit key bound needed).
        mechanism: "auto" (lowest release threshold among the valid mechanisms), "gshm", "laplace",
            "topk-csh"; also the pure-DP "pure-sparse", "compact", "basic", "stability" and the sketch
            "misra-gries" (see :mod:`sparsedp.api_pure_mg` for their contribution model and guarantee).
        pre_threshold: keys whose bounded count is below it are never released (>= 1).
        engine: "polars" (default), "duckdb" (default for SQL and DuckDB relations), "pandas", "arrow",
            "spark" (default for Spark DataFrames; everything runs in the executors, the table is a Spark
            DataFrame; for a file path it runs a local Spark session unless a cluster is configured).
        rng: random source; ``None`` = the secure default. Tests pass a seeded one; never in production.
        out: also write the table atomically to this .parquet/.csv file.
        count_column: name of the noisy count column.
        connection: DuckDB connection for SQL text.
        insecure_float: float noise (research only; not secure).
        progress: ``progress(stage)`` returns a context manager wrapped around each stage (the CLI's
            progress display).
        ledger, dataset: charge the release against ``dataset``'s budget in this
            :class:`~sparsedp.ledger.Ledger` (or ledger file path). The charge is committed after the data
            are counted and before any noise is drawn; a release that does not fit is refused with
            :class:`~sparsedp.errors.BudgetExceededError` (nothing drawn, nothing written). Once the output is
            written (or returned), the charge is marked published.
        sketch_size: ``mechanism="misra-gries"``: number of sketch counters k (for streams too large to
            count; each unit bounded to ``max_groups_per_unit`` keys, default 1; see :mod:`sparsedp.api_pure_mg`).
        max_units, domain_size, max_key_bytes, beta, query_keys: the pure-DP mechanisms ``"pure-sparse"``,
            ``"compact"``, ``"basic"``, ``"stability"`` (δ = 0 except "stability"; one key per unit):
            public bound on the number of units (add/remove neighbours; without it the number of units is
            public), dense domain of "basic", key length bound, failure probability of the reported error
            bounds, public keys to query from "compact". See :mod:`sparsedp.api_pure_mg`.

    Returns:
        :class:`Result` with ``.table`` (Polars for Polars/files/SQL/DuckDB input, pandas for pandas, Arrow
        for Arrow), ``.report`` and ``.release``.

    Raises:
        InvalidParameterError / InvalidTypeError: bad arguments (checked before any data is read).
        InfeasibleError: no mechanism meets (ε, δ) (checked before any data is read).
        InputDataError: missing columns, nulls, empty input, unreadable file (before any noise is drawn).
        BudgetExceededError: the ledger's budget for ``dataset`` does not admit this release.
    """
    from . import api_pure_mg

    if isinstance(mechanism, str) and mechanism in api_pure_mg.PURE_MECHANISMS + api_pure_mg.SKETCH_MECHANISMS:
        return api_pure_mg.release(
            data, privacy_unit, by, epsilon, delta, max_groups_per_unit=max_groups_per_unit, top_k=top_k,
            mechanism=mechanism, pre_threshold=pre_threshold, engine=engine, rng=rng, out=out,
            count_column=count_column, connection=connection, insecure_float=insecure_float, progress=progress,
            ledger=ledger, dataset=dataset, sketch_size=sketch_size, max_units=max_units,
            domain_size=domain_size, max_key_bytes=max_key_bytes, beta=beta, query_keys=query_keys)
    for name, x in (("sketch_size", sketch_size), ("max_units", max_units), ("domain_size", domain_size),
                    ("beta", beta), ("query_keys", query_keys)):
        if x is not None:
            raise InvalidParameterError(f"{name} is only used by the pure-DP mechanisms and 'misra-gries', "
                                        f"not mechanism={mechanism!r}")
    t_start = time.perf_counter()
    stage = progress or (lambda name: contextlib.nullcontext())
    # 1. Validate everything and calibrate: no data read, no noise drawn.
    eps = v.epsilon(epsilon)
    dlt = v.delta(delta)
    unit, cols, count_column = _columns(privacy_unit, by, count_column)
    l0, k, mech, pre = _model(max_groups_per_unit, top_k, mechanism, pre_threshold)
    if not isinstance(insecure_float, bool):
        raise InvalidTypeError(f"insecure_float must be a bool, got {insecure_float!r}")
    from .engines import get_engine, sources
    from .mechanisms.auto import calibrate_mechanism, choose_mechanism

    kind = sources.kind(data)
    if kind == "file":
        sources.file_format(data)
    eng = get_engine(engine, data, connection)
    if (kind == "spark") != (eng.name == "spark") and not (kind == "file" and eng.name == "spark"):
        raise InvalidParameterError("Spark DataFrames are released by the spark engine (engine='spark' or None), "
                                    f"and the spark engine takes a Spark DataFrame or a file path; got "
                                    f"engine={eng.name!r} for {sources.display(data)}")
    if kind == "sql" and eng.name != "duckdb":
        raise InvalidParameterError(f"SQL text is run by DuckDB; use engine='duckdb' (or None), not {engine!r}")
    out_path = check_out_path(out) if out is not None else None
    source = _rng(rng)
    if mech == "auto":
        cal0 = choose_mechanism(eps, dlt, l0=l0, top_k=k, insecure_float=insecure_float)[0]
    else:
        cal0 = calibrate_mechanism(mech, l0 if l0 is not None else k, eps, dlt, insecure_float=insecure_float)
    led, own_ledger = _open_ledger(ledger, dataset)
    try:
        if led is not None:
            from .ledger import charge_of

            led.check(dataset, **charge_of(cal0))  # advisory: fail before reading data; charged below
        return _release_body(data, kind, eng, unit, cols, count_column, l0, k, mech, pre, eps, dlt,
                             insecure_float, out_path, source, stage, t_start, cal0, led, dataset)
    finally:
        if own_ledger:
            led.close()


def _open_ledger(ledger: Any, dataset: Any):
    if ledger is None:
        if dataset is not None:
            raise InvalidParameterError("dataset=… names a budget in a ledger; pass ledger=… too")
        return None, False
    from .ledger import _dataset_name, open_ledger

    name = _dataset_name(dataset)
    led, owned = open_ledger(ledger)
    try:
        led.budget(name)  # the dataset must have a budget (raises with the fix otherwise)
    except BaseException:
        if owned:
            led.close()
        raise
    return led, owned


def _reason(auto: dict, cal: Any) -> str:
    """Why this mechanism and noise: the ``auto`` choice (or "requested explicitly"), plus any calibration
    fallback (e.g. rounded CSH beyond its exact sampler's range)."""
    reason = auto.get("reason", "requested explicitly")
    fallback = getattr(cal, "fallback", None)
    return f"{reason}; {fallback}" if fallback else reason


def publish(table: Any, kind: str, out_path: tuple[str, str] | None, led: Any, charge_id: int | None) -> Any:
    """Write ``table`` atomically to ``out_path`` (if any), then mark the ledger charge published.

    Returns the table converted to the output frame type of input ``kind``. The order is the ledger's
    contract: the charge was committed before the noise; "published" is recorded only after the output exists.
    """
    from .engines.output import OUTPUT_KIND, convert, write_atomic

    if out_path:
        write_atomic(table, *out_path)
    frame = convert(table, OUTPUT_KIND[kind])
    if charge_id is not None:
        led.mark_published(charge_id, out_path[0] if out_path else None)
    return frame


def _release_body(data, kind, eng, unit, cols, count_column, l0, k, mech, pre, eps, dlt, insecure_float,
                  out_path, source, stage, t_start, cal0, led, dataset) -> Result:
    """Stages 2–4 of :func:`release` (arguments already validated and calibrated)."""
    if eng.name == "spark":
        return _release_body_spark(data, kind, eng, unit, cols, count_column, l0, k, mech, pre, eps, dlt,
                                   insecure_float, out_path, source, stage, t_start, cal0, led, dataset)
    from .engines import sources
    from .engines.output import release_table
    from .mechanisms import release_histogram

    timings = {"validate": time.perf_counter() - t_start}

    # 2. Bound and count where the data live (column, null and emptiness checks happen first).
    t = time.perf_counter()
    with stage("bounding contributions and counting"):
        bounded = eng.bounded_histogram(data, unit, cols, l0, source, pre_threshold=pre)
    timings["bound+count"] = time.perf_counter() - t

    # 3. Charge the ledger (committed, or refused with BudgetExceededError), then one private draw.
    charge_id = None
    if led is not None:
        from .ledger import charge_of

        charge_id = led.charge(dataset, mechanism=cal0.mechanism, note=f"release {sources.display(data)}",
                               **charge_of(cal0))
    t = time.perf_counter()
    with stage(f"adding noise ({mech})"):
        rel = release_histogram(bounded.histogram, epsilon=eps, delta=dlt, l0=l0, top_k=k, mechanism=mech,
                                pre_threshold=pre, rng=source, insecure_float=insecure_float)
    timings["noise"] = time.perf_counter() - t

    # 4. Output.
    t = time.perf_counter()
    with stage("writing the output" if out_path else "building the table"):
        frame = publish(release_table(rel, count_column), kind, out_path, led, charge_id)
    timings["output"] = time.perf_counter() - t
    timings["total"] = time.perf_counter() - t_start

    cal = rel.calibration
    auto = dict(rel.extra.get("auto") or {})
    extra = {kk: vv for kk, vv in rel.extra.items() if kk != "auto"}
    extra.setdefault("comparison", cal.comparison.value)
    threshold = extra.get("threshold")
    if threshold is None:
        threshold = cal.threshold(pre)
    report = Report(
        mechanism=cal.mechanism, reason=_reason(auto, cal), analysis=cal.analysis,
        epsilon=eps, delta=dlt, delta_achieved=float(cal.delta_achieved), delta_parts=dict(cal.delta_parts),
        sigma=float(cal.sigma), noise_std=float(cal.noise_std), tau=float(cal.tau), threshold=float(threshold),
        pre_threshold=pre, l0=l0, top_k=k, released_keys=int(rel.n_keys_out), engine=eng.name,
        source=sources.display(data), bounding=bounded.stats, timings=timings,
        candidates=tuple(auto.get("candidates", ())), extra=extra, output=out_path[0] if out_path else None)
    return Result(table=frame, report=report, release=rel)


def _release_body_spark(data, kind, eng, unit, cols, count_column, l0, k, mech, pre, eps, dlt, insecure_float,
                        out_path, source, stage, t_start, cal0, led, dataset) -> Result:
    """Stages 2–4 on Spark: bounding, counting, noise and threshold all run in the executors
    (:mod:`sparsedp.engines.spark_engine`). ``table`` is a Spark DataFrame for Spark input (its rows are one
    draw: recomputing it gives the same rows); files read by Spark give a Polars table, like other engines."""
    from .engines import sources, spark_engine
    from .engines.output import OUTPUT_KIND, convert, write_atomic
    from .mechanisms.auto import choose_mechanism
    from .mechanisms.histogram import Release

    timings = {"validate": time.perf_counter() - t_start}
    auto = choose_mechanism(eps, dlt, l0=l0, top_k=k, insecure_float=insecure_float)[1] if mech == "auto" else {}
    charge_id = None
    if led is not None:  # charged before any noise is drawn (the Spark job counts and noises in one pass)
        from .ledger import charge_of

        charge_id = led.charge(dataset, mechanism=cal0.mechanism, note=f"release {sources.display(data)}",
                               **charge_of(cal0))
    t = time.perf_counter()
    with stage(f"bounding, counting and adding noise ({cal0.mechanism}) on Spark"):
        sr = spark_engine.release_spark(data, unit, cols, cal0, l0=l0, top_k=k, pre=pre, rng=source,
                                        count_column=count_column, insecure_float=insecure_float)
    timings["spark"] = time.perf_counter() - t
    t = time.perf_counter()
    table, rel = sr.table, None
    if out_path or kind != "spark":  # the released rows (and only they) come to the driver
        with stage("writing the output" if out_path else "building the table"):
            arrow = spark_engine.to_arrow(sr.table)
            if out_path:
                write_atomic(arrow, *out_path)
            rel = Release(keys=arrow.select(cols), counts=arrow.column(count_column).to_numpy(),
                          calibration=cal0, n_keys_in=sr.stats.keys_out, n_keys_out=arrow.num_rows,
                          extra=dict(sr.extra))
            if kind != "spark":
                table = convert(arrow, OUTPUT_KIND.get(kind, "polars"))
    if charge_id is not None:
        led.mark_published(charge_id, out_path[0] if out_path else None)
    timings["output"] = time.perf_counter() - t
    timings["total"] = time.perf_counter() - t_start
    extra = dict(sr.extra)
    extra.setdefault("comparison", cal0.comparison.value)
    report = Report(
        mechanism=cal0.mechanism, reason=_reason(auto, cal0), analysis=cal0.analysis,
        epsilon=eps, delta=dlt, delta_achieved=float(cal0.delta_achieved), delta_parts=dict(cal0.delta_parts),
        sigma=float(cal0.sigma), noise_std=float(cal0.noise_std), tau=float(cal0.tau),
        threshold=float(extra.get("threshold", cal0.threshold(pre))), pre_threshold=pre, l0=l0, top_k=k,
        released_keys=sr.released_keys, engine="spark", source=sources.display(data), bounding=sr.stats,
        timings=timings, candidates=tuple(auto.get("candidates", ())), extra=extra,
        output=out_path[0] if out_path else None)
    return Result(table=table, report=report, release=rel)


def plan(epsilon: float, delta: float, max_groups_per_unit: int | None = None, top_k: int | None = None,
         *, insecure_float: bool = False, max_units: int | None = None, beta: Any = None) -> list:
    """Every mechanism applicable to the contribution bound, calibrated at (ε, δ), best (lowest threshold)
    first: a list of :class:`~sparsedp.accounting.Calibration`. Touches no data.

    Pass ``max_groups_per_unit`` (l0; GSHM, Laplace) and/or ``top_k`` (top-k CSH). Secure (discrete noise)
    accountants unless ``insecure_float=True``. With ``max_units`` (n, one key per unit) the pure-DP
    mechanisms follow, as :class:`~sparsedp.mechanisms.pure.PureCalibration` with their exact error bounds
    at ``beta`` (default 1/20); ``delta=0`` lists the pure ones only (:func:`sparsedp.api_pure_mg.plan`).
    """
    from .accounting import compare

    eps = v.epsilon(epsilon)
    l0 = None if max_groups_per_unit is None else v.integer("max_groups_per_unit", max_groups_per_unit, lo=1)
    k = None if top_k is None else v.integer("top_k", top_k, lo=1)
    if max_units is not None:
        from . import api_pure_mg

        pure = api_pure_mg.plan(eps, delta, max_units, beta=beta)
        if delta in (0, 0.0) or (l0 is None and k is None):
            return pure
        return compare(epsilon=eps, delta=v.delta(delta), l0=l0, top_k=k, discrete=not insecure_float) + pure
    dlt = v.delta(delta)
    if l0 is None and k is None:
        raise InvalidParameterError("plan needs max_groups_per_unit=… (keys per unit) and/or top_k=…")
    return compare(epsilon=eps, delta=dlt, l0=l0, top_k=k, discrete=not insecure_float)
