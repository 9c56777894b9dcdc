"""The one release pipeline (``sparsedp.release``) and ``sparsedp.plan``.

Every mechanism and every engine, Spark included, goes through the same stages, and the pipeline never branches on
a mechanism's or an engine's name:

1. **validate and calibrate** — arguments, columns, output path, the mechanism (registry) and its calibration at
   (ε, δ): no data read, no randomness drawn;
2. **ledger pre-check** — a release that cannot fit the budget is refused before any data is read;
3. **engine: bounded histogram** — the engine validates the input (columns, nulls, NaN or nested keys, no rows),
   enforces the mechanism's contribution bound (:mod:`sparsedp.engines.bounding`) and counts;
4. **ledger charge** — committed (or refused) before any noise is drawn;
5. **mechanism** — the private release on the engine's primitives, every secret and noise word from the
   release's source (``K_noise`` keyed per-chunk streams: one release, one draw);
6. **publish** — the table written atomically with its guarantee as metadata, then the charge marked published;
7. **report** — the public :class:`~sparsedp.report.Report` and the curator-only :class:`~sparsedp.report.Curator`.

Privacy guarantee of ``release`` (add/remove one privacy unit unless the report says otherwise): two inputs are
neighbours when one has all the rows of one privacy unit (every row with that ``privacy_unit`` value) and the other
has none of them. The engine de-duplicates (unit, key) pairs and keeps at most ``max_groups_per_unit`` keys per
unit, chosen uniformly at random with a keyed rank from the secure source, so the bounded histograms of neighbours
differ in at most ``l0`` keys by 1 each (or, for top-k, by at most 1 per key): exactly the contribution model the
mechanism's accountant assumes.
"""

from __future__ import annotations

import html
import os
import time
from typing import Any, Callable, ContextManager, Sequence

from . import _validate as v
from .accounting.profiles import profile_of
from .errors import InvalidParameterError
from .mechanisms import registry
from .mechanisms.base import AutoRole, ReleaseRequest
from .quantile_release import QuantileQuery, plan_split, quantile_plan_rows, split_quantiles
from .query import HistogramQuery, run_query
from .report import Result
from .request import OUT_FORMATS, build_plan_request, build_request, check_out_path

__all__ = ["release", "plan", "Plan", "check_out_path", "OUT_FORMATS"]



# ---------------------------------------------------------------- public


def release(data: Any, privacy_unit: str, by: str | Sequence[str], epsilon: float, delta: float,
            max_groups_per_unit: Any = None, top_k: int | None = None, mechanism: Any = "auto", *,
            aggregates: Any = None, engine: str | None = None, out: str | os.PathLike[str] | None = None,
            overwrite: bool = False,
            ledger: Any = None, dataset: str | None = None, connection: Any = None, insecure_float: bool = False,
            rng: Any = None, progress: Callable[[str], ContextManager[Any]] | None = None, keys: Any = None,
            column_shape: Any = None, other: Any = False, interval: Any = 0.95) -> Result:
    """Differentially private ``SELECT by…, COUNT(DISTINCT privacy_unit) [, SUM(x), AVG(x)] … GROUP BY by…``.

    Every argument in detail, with the rules each one follows: the documentation's "release() arguments" page
    (``docs/release-arguments.md``).

    Args:
        data: a Polars/pandas DataFrame, Polars LazyFrame, pyarrow Table, DuckDB relation, SQL text (run by DuckDB
            on ``connection``), a Spark DataFrame, or the path of a Parquet/CSV file (or glob).
        privacy_unit: the column identifying whom the guarantee protects; ``None`` (Misra–Gries only): each row.
        by: the key column(s).
        epsilon, delta: the guarantee, ε > 0 and 0 < δ < 1 (δ = 0 for the pure-DP mechanisms); a risky δ is warned
            (:class:`~sparsedp.advice.DeltaWarning`).
        max_groups_per_unit: l0, the distinct keys kept per unit (uniformly at random, secure source); ``"auto"``
            or ``sd.AutoBound(...)`` chooses it privately from the data (:mod:`sparsedp.auto_bound`).
        top_k: release at most the top-k keys: shorthand for ``mechanism=sd.TopKCSH(k=top_k)``.
        mechanism: ``"auto"`` (lowest release threshold), a registered name, or a mechanism object with its
            options (``sd.GSHM(pre_threshold=5)``, ``sd.TopKCSH(k=1000)``, ``sd.MisraGries(sketch_size=…)``…).
        aggregates: the statistics per key; default ``[sd.Count()]``; ``sd.Sum``/``sd.Mean(column, lower, upper)``
            add private SUM/MEAN columns released jointly with the count (:mod:`sparsedp.aggregates`);
            ``sd.Variance``/``sd.Std`` the per-key variance / standard deviation (noisy sums of values and squares).
        column_shape: the SUM/MEAN columns' noise covariance shape (J × J, value units²) for GSHM.
        engine: "polars", "duckdb", "pandas", "arrow", "spark", or an engine object with its options; the default
            follows the input (:mod:`sparsedp.engines.choice`).
        out, overwrite: also write the table atomically to this .parquet/.csv file with the guarantee as metadata;
            an existing file is refused unless ``overwrite=True``.
        ledger, dataset: charge the release against ``dataset``'s budget in this ledger (or ledger file path).
        connection: DuckDB connection for SQL text.
        insecure_float: float noise (research reproduction only; not secure; warned and recorded).
        rng: random source; ``None`` = the secure default. Tests pass a seeded one; never in production.
        progress: ``progress(stage)`` returns a context manager wrapped around each stage (:mod:`sparsedp.progress`).
        keys: a PUBLIC key list: every listed key gets a noisy count with no threshold
            (:mod:`sparsedp.mechanisms.public_keys`); a mapping ``{column: values}`` naming some ``by`` columns lists
            those publicly and selects the others privately (:mod:`sparsedp.mechanisms.mixed_keys`).
        other: ``True`` (or a share of ε in (0, 1), default 0.1): one more row with the private total of every key
            not released (:mod:`sparsedp.other_row`).
        interval: per-row intervals ``<column>_lo``/``<column>_hi`` for every count, SUM and MEAN column, exact for
            the noise sampled: a level such as 0.95 (the default), ``True`` (0.95), or None/False (no interval
            columns); what they mean for released keys: ``docs/proofs/intervals.md``. ``Result.release_probability(count)`` needs none.

    Returns:
        :class:`~sparsedp.report.Result`: ``.table`` (the input's frame type), ``.report`` (public), ``.curator``
        (not private).

    Raises:
        InvalidParameterError / InvalidTypeError: bad arguments (before any data is read).
        InfeasibleError: no mechanism meets (ε, δ) (before any data is read).
        InputDataError: missing columns, nulls, NaN keys, empty or unreadable input (before any charge or noise).
        BudgetExceededError: the ledger's budget for ``dataset`` does not admit this release.
    """
    t_start = time.perf_counter()
    aggregates, quantiles = split_quantiles(aggregates)  # sd.Quantile / sd.Median: quantile_release.py
    # 1. Validate and calibrate: no data read, no noise drawn.
    request = build_request(data, privacy_unit, by, epsilon, delta, max_groups_per_unit, top_k, mechanism,
                            aggregates=aggregates, keys=keys, column_shape=column_shape,
                            insecure_float=insecure_float, engine=engine, connection=connection, out=out,
                            overwrite=overwrite, ledger=ledger, dataset=dataset, rng=rng, progress=progress,
                            other=other, interval=interval)
    # 2.-7. ledger pre-check, the engine's pass, the charge, one private draw, publish, report (query.run_query)
    query = QuantileQuery(request, quantiles, t_start, other=other is not False and other is not None) \
        if quantiles else HistogramQuery(request, t_start)
    res: Result = run_query(query, request.ledger, request.dataset)
    return res


class Plan(tuple[Any, ...]):
    """``plan()``'s result: the calibrations of every applicable mechanism, the one ``auto`` would use first
    (a tuple of calibrations; ``.mechanisms`` gives the matching mechanism objects). Prints as a table."""

    mechanisms: tuple[Any, ...]
    title: str

    def __new__(cls, rows: list[tuple[Any, Any]], title: str = "sparsedp plan") -> "Plan":
        obj = super().__new__(cls, [cal for _, cal in rows])
        obj.mechanisms = tuple(m for m, _ in rows)
        obj.title = title
        return obj

    @property
    def best(self) -> Any:
        return self[0]

    def profile(self, i: int = 0) -> Any:
        """The privacy profile of row ``i`` (default: the best): δ(ε) of the noise actually sampled
        (``.delta(eps)``), its ``.epsilon(delta)``, and the f-DP trade-off curve ``.tradeoff_curve(alpha)``
        (Karrer et al. (2022) Thm 7.1 for continuous GSHM); ``None`` for mechanisms without one (basic composition)."""
        cal = self[i]
        return profile_of(cal) if hasattr(cal, "noise") else None

    def profile_table(self, i: int = 0) -> list[tuple[float, float]]:
        """``(ε, δ(ε))`` of row ``i``'s profile at ε/4 … 4ε (empty without a profile)."""
        prof = self.profile(i)
        if prof is None:
            return []
        eps = self[i].epsilon
        return [(e, float(prof.delta(e))) for e in (eps / 4, eps / 2, eps, 2 * eps, 4 * eps)]

    def rows(self) -> list[dict[str, Any]]:
        out = []
        for m, c in zip(self.mechanisms, self):
            row = {"mechanism": m.describe(), "analysis": getattr(c, "analysis", "balcer-vadhan")}
            for name in ("sigma", "noise_std", "tau", "delta_achieved"):
                val = getattr(c, name, None)
                if val is not None and val == val:  # NaN: no noise scale (keys-only selection)
                    row[name] = val
            if not m.value_column("count"):
                row["releases"] = "keys only"
            fields = getattr(c, "plan_fields", None)
            if fields is not None:  # a quantile's row: its ε and rank errors
                row.update(fields())
            acc = getattr(c, "accuracy", None)
            if acc is not None:
                row.update(per_count_error=acc.per_query, threshold=acc.threshold)
            if getattr(c, "aggregates", ()):  # joint calibration: each SUM/MEAN column's expected error
                req = _plan_request(c)
                d = getattr(m, "mechanism", m).disclosure(req, c, "count")
                row.update({f"err_{name}": err for name, err in d.column_errors.items()})
            out.append(row)
        return out

    def __str__(self) -> str:
        rows = self.rows()
        lines = [self.title]
        for r in rows:
            lines.append("  " + ", ".join(f"{k}={val:.6g}" if isinstance(val, float) else f"{k}={val}"
                                          for k, val in r.items()))
        return "\n".join(lines)

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        rows = self.rows()
        cols = list(dict.fromkeys(k for r in rows for k in r))
        head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
        body = "".join("<tr>" + "".join(f"<td>{html.escape(_fmt(r.get(c)))}</td>" for c in cols) + "</tr>"
                       for r in rows)
        return f"<table><caption>{html.escape(self.title)}</caption><tr>{head}</tr>{body}</table>"


#: the name the private columns of a planned partial key set go by (``sd.plan`` has no ``by``)
_PRIVATE = "<private columns>"


class StagedMechanism:
    """A row's mechanism in the plan of a partial key set: ``mechanism`` as stage ``stage`` of the mixed release
    (``chosen``: the stage the release uses by default). Reads like the mechanism it wraps."""

    def __init__(self, stage: int, mechanism: Any, what: str, chosen: bool) -> None:
        self.stage, self.mechanism, self.what, self.chosen = stage, mechanism, what, chosen

    def __getattr__(self, name: str) -> Any:
        return getattr(self.__dict__["mechanism"], name)

    def describe(self) -> str:
        return f"stage {self.stage} ({self.what}): {self.mechanism.describe()}"


def _plan_partial_keys(epsilon: float, delta: float, l0: Any, spec: dict[Any, Any], insecure_float: bool,
                       selected: int) -> Plan:
    """``sd.plan(keys={column: values})``: the mixed release's two stages (:func:`plan`'s docstring)."""
    n_sel = v.integer("selected", selected, lo=1)
    mixed = registry.builtin_module("mixed_keys")  # loaded only for a partial key set (import sparsedp stays light)
    partial = mixed.key_set(spec, [*spec, _PRIVATE])
    if not isinstance(partial, mixed.PartialKeys):
        raise InvalidParameterError("plan(keys={column: values}) names at least one public column", param="keys")
    mech = mixed.MixedKeys(keys=partial)
    cal = mech.calibrate(ReleaseRequest(epsilon=epsilon, delta=delta, max_groups_per_unit=l0,
                                        insecure_float=insecure_float))
    r1, r2 = cal.select_request, cal.count_request
    pub = ", ".join(partial.public.columns)
    d = partial.public.d * n_sel
    one = plan(r1.epsilon, r1.delta, r1.max_groups_per_unit, insecure_float=insecure_float)
    two = plan(r2.epsilon, r2.delta, r2.max_groups_per_unit, insecure_float=insecure_float, keys=d)
    rows = [(StagedMechanism(1, m, "selects the private values", m.name == cal.select.name), c)
            for m, c in zip(one.mechanisms, one)]
    rows += [(StagedMechanism(2, m, f"counts {pub} x selected: {d:,} keys", m.name == cal.count.name), c)
             for m, c in zip(two.mechanisms, two)]
    title = (f"sparsedp plan: epsilon={epsilon:g}, delta={delta:g}, max_groups_per_unit={l0}, keys: {pub} public "
             f"({partial.public.d} listed), the rest private; stage 1 at epsilon={r1.epsilon:.4g}, "
             f"delta={r1.delta:.3g}; stage 2 at epsilon={r2.epsilon:.4g}, delta={r2.delta:.3g} for {n_sel} "
             f"selected value(s) (selected=…)")
    return Plan(rows, title=title)


def _plan_request(cal: Any) -> ReleaseRequest:
    return ReleaseRequest(epsilon=cal.epsilon, delta=cal.delta, max_groups_per_unit=cal.l0 if cal.top_k is None
                          else None, aggregates=cal.aggregates, column_shape=_requested_shape(cal))


def _requested_shape(cal: Any) -> Any:
    """The ``column_shape`` a joint calibration was made for (None: independent columns)."""
    fit = getattr(cal.joint, "shape", None)
    return None if fit is None else fit.requested


def _fmt(x: Any) -> str:
    return "" if x is None else f"{x:.6g}" if isinstance(x, float) else str(x)


def plan(epsilon: float, delta: float, max_groups_per_unit: int | None = None, top_k: int | None = None, *,
         insecure_float: bool = False, max_units: int | None = None, beta: Any = None,
         aggregates: Any = None, keys: Any = None, group: str | None = None, column_shape: Any = None,
         selected: int = 100) -> Plan:
    """Every mechanism applicable to the contribution bound, calibrated at (ε, δ), touching no data: the ones
    ``auto`` chooses among (best first), then the opt-in variants.

    ``max_groups_per_unit`` (l0) lists GSHM and the Laplace stability histogram; ``top_k`` lists top-k CSH
    (de-biased counts, the default) and its shifted variant, each with the rounded noise and (secure noise, no
    aggregates) with Algorithm 4's noise (``sd.TopKCSH(k, noise="alg4")``). With ``max_units`` (n units, one key each) the
    pure-DP mechanisms follow with their exact error bounds at ``beta`` (default 1/20); ``delta=0`` lists the pure
    ones only. Secure (discrete noise) accountants unless ``insecure_float=True``.

    ``keys`` (the number of public keys, or the list itself): the public-key mechanisms of
    ``release(..., keys=…)`` calibrated for that many keys (``max_groups_per_unit`` optional), lowest per-key
    error first (the one ``auto`` uses). ``group`` (a column of a ``keys`` frame): also Lebeda (2024)'s grouped
    mechanism on that column (:class:`~sparsedp.mechanisms.grouped_keys.GroupedCorrelatedGaussian`).

    ``aggregates`` (e.g. ``[sd.Count(), sd.Sum("dwell_s", 0, 600)]``): the joint calibrations of the mechanisms
    that release SUM/MEAN columns (GSHM, de-biased top-k CSH): the extra columns move σ and the margin; each row
    also gives every column's expected error (``err_<output name>``, value units). ``column_shape``: the columns'
    noise covariance shape, as in :func:`release` (GSHM only).

    ``aggregates`` with ``sd.Quantile``/``sd.Median`` (an integer ``max_groups_per_unit``): the count rows at the
    count's part of ε (the split of :func:`sparsedp.accounting.quantiles.split_budget`), then one row per quantile
    (:class:`~sparsedp.quantile_release.QuantilePlanRow`: its ε, its ε per key, its rank error at 95 % and on
    average). ``keys={column: values}`` (a partial key set, ``max_groups_per_unit`` required): the two stages of
    the mixed release (:mod:`sparsedp.mechanisms.mixed_keys`), each row's mechanism a :class:`StagedMechanism`:
    stage 1's selection mechanisms at its part of (ε, δ), then stage 2's public-key mechanisms at the rest for
    ``d = (listed public values) × selected`` keys (``selected``: the number of private values you expect
    stage 1 to select; stage 2's error grows with it).
    """
    rest, quantiles = split_quantiles(aggregates)
    if quantiles:
        split = plan_split(epsilon, delta, max_groups_per_unit, quantiles, keys, insecure_float)
        base = plan(split.count_epsilon, split.count_delta, split.l0, top_k, max_units=max_units, beta=beta,
                    aggregates=rest, column_shape=column_shape)
        qrows = quantile_plan_rows(quantiles, split)
        return Plan(list(zip(base.mechanisms, base)) + [(r, r) for r in qrows],
                    title=f"{base.title.replace(f'epsilon={split.count_epsilon:g}', f'epsilon={split.epsilon:g}')}"
                          f" (count rows at epsilon={split.count_epsilon:.4g}; quantiles "
                          f"{', '.join(f'{r.quantile.output_name} at {r.epsilon:.4g}' for r in qrows)})")
    if isinstance(keys, dict):
        return _plan_partial_keys(epsilon, delta, max_groups_per_unit, keys, insecure_float, selected)
    query = build_plan_request(epsilon, delta, max_groups_per_unit, top_k, insecure_float=insecure_float,
                               max_units=max_units, beta=beta, aggregates=aggregates, keys=keys, group=group,
                               column_shape=column_shape)
    rows = [row for plan_rows in registry.planners() for row in plan_rows(query)]
    # key-selection mechanisms (AutoRole.DISCOVERY) are keys-only rows: never ranked with the count mechanisms
    rows = [(m, cal, max(g, 1) if m.auto_role is AutoRole.DISCOVERY else g) for m, cal, g in rows]
    ranked = sorted((r for r in rows if r[2] == 0), key=lambda r: query.sort_key(r[1]))
    after = sorted((r for r in rows if r[2] > 0), key=lambda r: r[2])  # stable: registration order within
    return Plan([(m, cal) for m, cal, _ in ranked + after], title=query.title())
