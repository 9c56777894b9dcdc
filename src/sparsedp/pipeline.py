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

from .accounting.profiles import profile_of
from .mechanisms import registry
from .mechanisms.base import ReleaseRequest
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
            column_shape: Any = None) -> Result:
    """Differentially private ``SELECT by…, COUNT(DISTINCT privacy_unit) [, SUM(x), AVG(x)] … GROUP BY by…``.

    Args:
        data: a Polars DataFrame/LazyFrame, pandas DataFrame, pyarrow Table, DuckDB relation, SQL text (run by
            DuckDB on ``connection``), a Spark DataFrame, or the path of a Parquet/CSV file (or glob).
        privacy_unit: the column identifying whom the guarantee protects (user id, account, device…);
            ``None`` (Misra–Gries only): every row is its own unit, the sketch is built in O(k) memory.
        by: the key column(s).
        epsilon, delta: the guarantee, ε > 0 and 0 < δ < 1 (δ = 0 for the pure-DP mechanisms). A legal but
            risky δ is warned (:class:`~sparsedp.advice.DeltaWarning`, not refused): δ > 1e-4 before any data
            is read (also a note of the report), else δ > 1/(10·units) once the number of privacy units is
            known (curator only: it depends on the exact count). See :mod:`sparsedp.advice`.
        max_groups_per_unit: l0, the number of distinct keys kept per unit (uniformly at random from the secure
            source); needed by GSHM, Laplace and ``auto``. ``"auto"`` (or ``sd.AutoBound(share=0.1,
            candidates=(1, 2, 4, …, 256), quantile=0.9)``): l0 is chosen privately from the data with ``share``·ε
            (report noisy max with exact discrete Laplace noise over the candidates, targeting the ``quantile`` of
            distinct keys per unit; pure DP) and the release runs with the rest of ε and the same δ; the whole
            is (ε, δ)-DP by basic composition, charged once; ``report.auto_bound`` states the share, the candidates
            and the chosen bound (:mod:`sparsedp.auto_bound`, ``docs/proofs/auto-bound.md``).
        top_k: release (at most) the top-k keys: shorthand for ``mechanism=sd.TopKCSH(k=top_k)`` (de-biased
            counts; no per-unit key bound needed).
        mechanism: ``"auto"`` (lowest release threshold among the valid mechanisms), a registered name
            (``sparsedp.mechanisms.registry.names()``: "gshm", "laplace", "topk-csh", "pure-sparse", "compact",
            "basic", "stability", "misra-gries") or a mechanism object with its options, e.g.
            ``sd.GSHM(pre_threshold=5)``, ``sd.TopKCSH(k=1000, debias=False)``, ``sd.MisraGries(sketch_size=…)``,
            ``sd.PureSparse(max_units=…)``.
        aggregates: the statistics per key; default ``[sd.Count()]`` (``sd.Count(name="n")`` renames the column).
            ``sd.Sum(column, lower, upper)`` / ``sd.Mean(column, lower, upper)`` add private SUM / MEAN columns
            (``sum_<column>`` / ``mean_<column>`` unless ``name=``), in value units. Contribution model, enforced
            by the engine: a unit's contribution to a key's sum is the sum of its rows' values for that key,
            clipped to [lower, upper], for the same kept keys as the count (``max_groups_per_unit``), on a public
            grid (:mod:`sparsedp.aggregates`). Released jointly with the count: the count decides release, each
            column gets exact discrete Gaussian noise on released keys only, and (ε, δ) is that of the joint
            release (:mod:`sparsedp.accounting.aggregates`; charged once). MEAN = noisy sum / noisy count (its
            bias and error: :func:`sparsedp.mechanisms.aggregate_noise.mean_error`); ``report.column_errors``
            gives each column's expected error. Mechanisms: ``gshm`` / ``auto`` with ``max_groups_per_unit``,
            or de-biased ``top_k`` (CSH with columns, :mod:`sparsedp.accounting.csh_aggregates`); the others are
            refused before any data is read. Value columns that are missing, non-numeric, null, NaN or
            infinite are refused before the ledger charge and before any randomness.
        column_shape: with SUM/MEAN columns and GSHM (or ``auto`` with ``max_groups_per_unit``): the shape of
            the columns' noise covariance, a J × J symmetric positive definite matrix in value units², one row
            and column per noisy column (a Sum and a Mean of the same column and bounds share one), in the
            order of ``aggregates``; the column noise then has covariance ≈ σ²·``column_shape`` (σ² the count's
            noise variance, calibrated), as in Karrer et al. (2022) Algorithm 1 with a general Σ. Default: independent
            columns, ``diag((sensitivity_k · granularity_k)²)``. Sampled exactly as ``L z`` (integer unit
            lower-triangular L, independent discrete Gaussians z; :mod:`sparsedp.accounting.column_shape`); the
            report states the covariance actually used and the Mahalanobis sensitivity μ_o² (Eq. 5.1). Bad
            shapes are refused before any data is read.
        engine: "polars" (default), "duckdb" (default for SQL and DuckDB relations), "pandas", "arrow", "spark"
            (default for Spark DataFrames; the table is then a lazy Spark DataFrame, one draw); files larger
            than memory default to "duckdb" (:mod:`sparsedp.engines.choice`). Or an engine object with its
            options, e.g. ``DuckDBEngine(memory_limit="6GB", temp_directory=…)`` (out-of-core settings,
            :mod:`sparsedp.engines.duckdb_settings`).
        out: also write the table atomically to this .parquet/.csv file, with the guarantee as metadata
            (Parquet key-value metadata; a ``<out>.json`` sidecar for CSV) naming the table it describes (rows,
            content hash, ledger charge id; checked by :func:`sparsedp.engines.output.read_guarantee`). An existing
            file is refused before anything is read or charged (:class:`~sparsedp.errors.OutputExistsError`)
            unless ``overwrite=True``. A write that fails after the charge (a full disk) raises
            :class:`~sparsedp.errors.OutputWriteError` with the charge id, the table and the report.
        ledger, dataset: charge the release against ``dataset``'s budget in this
            :class:`~sparsedp.ledger.Ledger` (or ledger file path): checked before the data are read, committed
            after they are counted and before any noise is drawn; refused with
            :class:`~sparsedp.errors.BudgetExceededError` (nothing drawn, nothing written).
        connection: DuckDB connection for SQL text.
        insecure_float: float noise (research reproduction only; not secure; warned and recorded).
        rng: random source; ``None`` = the secure default. Tests pass a seeded one; never in production.
        progress: ``progress(stage)`` returns a context manager wrapped around each stage (the CLI's display); if
            it yields a callable ``reporter(done, total, unit)``, the stage reports its progress through it
            where the engine can measure it (:mod:`sparsedp.progress`).
        keys: a PUBLIC key list (a list — of tuples for several ``by`` columns —, a Series, or a frame with the
            ``by`` columns): every listed key gets a noisy count with no threshold, keys absent from the data
            included; keys in the data but not in the list are dropped. The list must be fixed without looking
            at the private data (a list derived from it discloses which keys occur). Mechanisms:
            ``"auto"`` (lowest expected error per key, the report says why), ``"correlated-gaussian"``
            (Lebeda (2024), ``sd.CorrelatedGaussian(c=…, known_n=…)``), ``"bounded-density"`` (Lebeda (2024) §4.1, for
            ``max_groups_per_unit`` below the number of keys), ``"public-gaussian"``, ``"public-laplace"``;
            ``max_groups_per_unit`` is optional (without it a unit may count in every listed key; with it the
            bound is applied to all of a unit's keys in the data, listed or not, before the list is applied:
            filter the data to the listed keys first to keep more of them). Empty lists,
            nulls, NaN and duplicates are refused before any data is read (:mod:`sparsedp.mechanisms.public_keys`).

    Returns:
        :class:`~sparsedp.report.Result` with ``.table`` (Polars for Polars/files/SQL/DuckDB input, pandas for
        pandas, Arrow for Arrow, Spark for Spark), ``.report`` (public) and ``.curator`` (not private).

    Raises:
        InvalidParameterError / InvalidTypeError: bad arguments (checked before any data is read).
        InfeasibleError: no mechanism meets (ε, δ) (checked before any data is read).
        InputDataError: missing columns, nulls, NaN or nested keys, empty input, unreadable file (before any
            budget is charged or noise drawn). NaN keys, one rule on every engine (Spark included): a float key
            column holding NaN is refused with ``key column '<name>' contains NaN``, whatever the key's count
            (NaN never equals itself, so its units cannot be counted; it is not treated as null, and a pandas
            frame's NaN is refused the same way). Replace it by null and drop, or by a sentinel value.
        BudgetExceededError: the ledger's budget for ``dataset`` does not admit this release.
    """
    t_start = time.perf_counter()
    # 1. Validate and calibrate: no data read, no noise drawn.
    request = build_request(data, privacy_unit, by, epsilon, delta, max_groups_per_unit, top_k, mechanism,
                            aggregates=aggregates, keys=keys, column_shape=column_shape,
                            insecure_float=insecure_float, engine=engine, connection=connection, out=out,
                            overwrite=overwrite, ledger=ledger, dataset=dataset, rng=rng, progress=progress)
    # 2.-7. ledger pre-check, the engine's pass, the charge, one private draw, publish, report (query.run_query)
    res: Result = run_query(HistogramQuery(request, t_start), request.ledger, request.dataset)
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
                if val is not None:
                    row[name] = val
            acc = getattr(c, "accuracy", None)
            if acc is not None:
                row.update(per_count_error=acc.per_query, threshold=acc.threshold)
            if getattr(c, "aggregates", ()):  # joint calibration: each SUM/MEAN column's expected error
                req = _plan_request(c)
                d = m.disclosure(req, c, "count")
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
         aggregates: Any = None, keys: Any = None, group: str | None = None, column_shape: Any = None) -> Plan:
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
    """
    query = build_plan_request(epsilon, delta, max_groups_per_unit, top_k, insecure_float=insecure_float,
                               max_units=max_units, beta=beta, aggregates=aggregates, keys=keys, group=group,
                               column_shape=column_shape)
    rows = [row for plan_rows in registry.planners() for row in plan_rows(query)]
    ranked = sorted((r for r in rows if r[2] == 0), key=lambda r: query.sort_key(r[1]))
    after = sorted((r for r in rows if r[2] > 0), key=lambda r: r[2])  # stable: registration order within
    return Plan([(m, cal) for m, cal, _ in ranked + after], title=query.title())
