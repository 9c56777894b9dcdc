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

import contextlib
import os
import time
import warnings
from typing import TYPE_CHECKING, Any, Callable, ContextManager, Sequence

from . import _validate as v
from .aggregates import Count
from .engines.output import OUT_FORMATS, check_out_path
from .errors import InvalidParameterError, InvalidTypeError, OutputWriteError

if TYPE_CHECKING:
    from .ledger import Ledger
    from .mechanisms.base import Mechanism, ReleaseRequest
    from .report import Result

__all__ = ["release", "plan", "Plan", "check_out_path", "OUT_FORMATS"]

# ---------------------------------------------------------------- validation (no data, no randomness)


def _columns(privacy_unit: Any, by: Any) -> tuple[str | None, list[str]]:
    if privacy_unit is not None and (not isinstance(privacy_unit, str) or not privacy_unit):
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
    return privacy_unit, cols


def _aggregates(aggregates: Any, unit: str | None, cols: list[str]) -> tuple[Count, tuple]:
    """``(count, sums)``: the count aggregate of ``aggregates`` (default ``Count()``; at most one) and the
    SUM/MEAN aggregates (:class:`~sparsedp.aggregates.Sum`, :class:`~sparsedp.aggregates.Mean`) in the given
    order. Types, duplicate output names, output names that are input columns, and value columns that are the
    unit or a key are refused here (no data read). The SUM/MEAN columns are released with the count by the
    joint GSHM (:mod:`sparsedp.accounting.aggregates`)."""
    from .aggregates import Sum, output_names

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
                                        f"privacy unit or a key column", param="aggregates")
        if a.output_name in cols or a.output_name == unit:
            raise InvalidParameterError(f"the output column {a.output_name!r} is also an input column; name it "
                                        f"otherwise: {type(a).__name__}(…, name=…)")
    return (counts[0] if counts else Count()), sums


def _column_shape(column_shape: Any, sums: tuple) -> Any:
    """``column_shape`` checked and fitted once before anything is read (errors in the user's terms), kept as a
    tuple of tuples for the request (:func:`sparsedp.mechanisms.thresholded.fit_shape`)."""
    if column_shape is None:
        return None
    from .mechanisms.thresholded import fit_shape

    return fit_shape(sums, column_shape).requested


def _mechanism(mechanism: Any, top_k: Any, max_groups_per_unit: int | None, keys: bool = False,
               pure: bool = False) -> Mechanism:
    """The mechanism object for the arguments: a registered name or object; ``top_k=…`` is the shorthand for
    ``mechanism=sd.TopKCSH(k=top_k)``."""
    from .mechanisms import registry
    from .mechanisms.thresholded import TopKCSH

    if top_k is not None and keys:
        raise InvalidParameterError("⟨keys=…⟩ releases every listed key (no threshold); ⟨top_k⟩ selects keys "
                                    "from the data: pass one of them", param="top_k")
    if top_k is not None:
        k = v.integer("top_k", top_k, lo=1)
        if isinstance(mechanism, TopKCSH):
            if mechanism.k != k:
                raise InvalidParameterError(f"⟨top_k={k}⟩ contradicts mechanism={mechanism.describe()}", param="top_k")
            return mechanism
        if mechanism in ("auto", "topk-csh"):
            return TopKCSH(k=k)
        name = mechanism if isinstance(mechanism, str) else getattr(mechanism, "name", mechanism)
        if max_groups_per_unit is not None and name in ("gshm", "laplace", "auto"):
            raise InvalidParameterError(
                "pass either ⟨max_groups_per_unit⟩ (bound each unit to l0 keys: gshm, laplace) or ⟨top_k⟩ (release "
                "the top-k keys: topk-csh), not both", param="top_k")
        raise InvalidParameterError(f"⟨top_k⟩ selects ⟨mechanism='topk-csh'⟩; it is not an option of "
                                    f"⟨mechanism={name!r}⟩", param="top_k")
    if mechanism == "topk-csh":
        raise InvalidParameterError("⟨mechanism='topk-csh'⟩ needs ⟨top_k=…⟩ (number of keys to keep, e.g. 100)",
                                    param="top_k", fix="or pass ⟨mechanism|mechanism=sd.TopKCSH(k=…)⟩")
    if mechanism == "auto" and max_groups_per_unit is None and not keys and not pure:  # δ = 0: one key per unit
        raise InvalidParameterError(
            "declare a contribution bound: ⟨max_groups_per_unit=…⟩ (keys per unit, e.g. 10) or ⟨top_k=…⟩ "
            "(release the top-k keys, e.g. 100)", param="max_groups_per_unit")
    return registry.create(mechanism)


def _source(rng: Any) -> Any:
    from .noise import default_source

    if rng is None:
        return default_source()
    if not callable(getattr(rng, "uint64", None)) or not callable(getattr(rng, "random_bytes", None)):
        raise InvalidTypeError("rng must be a sparsedp.noise source (SecureRandom); leave it None in production")
    return rng


def _open_ledger(ledger: Any, dataset: Any) -> tuple[Ledger | None, bool]:
    if ledger is None:
        if dataset is not None:
            raise InvalidParameterError("⟨dataset=…⟩ names a budget in a ledger; pass ⟨ledger=…⟩ too", param="ledger")
        return None, False
    from .ledger import _dataset_name, open_ledger

    if dataset is None:
        raise InvalidParameterError("⟨ledger=…⟩ needs ⟨dataset=…⟩: the name of the dataset whose budget the "
                                    "release charges", param="dataset")
    _dataset_name(dataset)
    led, owned = open_ledger(ledger)
    try:
        led.budget(dataset)  # the dataset must have a budget (raises with the fix otherwise)
    except BaseException:
        if owned:
            led.close()
        raise
    return led, owned


def _sorted_table(arrow: Any, value_column: str) -> Any:
    """Largest value first (stable: ties keep the engine's canonical key order)."""
    import numpy as np
    import polars as pl

    from .engines.base import numpy_to_arrow

    # through a Polars frame: pyarrow's to_numpy imports pandas, Polars' Series-from-Arrow pyarrow.compute
    frame = pl.from_arrow(arrow.select([value_column]))
    assert isinstance(frame, pl.DataFrame)  # a Table converts to a DataFrame
    values = frame[value_column].to_numpy()
    order = np.argsort(-values, kind="stable")
    return arrow.take(numpy_to_arrow(order))


# ---------------------------------------------------------------- public


def release(data: Any, privacy_unit: str, by: str | Sequence[str], epsilon: float, delta: float,
            max_groups_per_unit: Any = None, top_k: int | None = None, mechanism: Any = "auto", *,
            aggregates: Any = None, engine: str | None = None, out: str | os.PathLike | None = None,
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
    from . import __version__
    from .engines import get_engine, sources
    from .engines.output import OUTPUT_KIND, convert, write_atomic
    from .advice import DeltaWarning, delta_note, delta_units_note
    from .progress import reporting
    from .mechanisms.base import ReleaseRequest
    from .report import Curator, Report, Result, warn_insecure

    t_start = time.perf_counter()
    display = progress or (lambda name: contextlib.nullcontext())

    @contextlib.contextmanager
    def stage(name: str) -> Any:  # the display's context; what it yields reports the stage's progress
        with display(name) as reporter, reporting(reporter):
            yield
    # 1. Validate and calibrate: no data read, no noise drawn.
    eps = eps_total = v.epsilon(epsilon)
    dlt = v.real("delta", delta, lo=0.0, hi=1.0, hi_open=True)
    unit, cols = _columns(privacy_unit, by)
    count, sums = _aggregates(aggregates, unit, cols)
    delta_warning = delta_note(dlt)  # public (depends on δ only): warned below, once the arguments are valid
    from .auto_bound import parse_auto

    auto = parse_auto(max_groups_per_unit)  # max_groups_per_unit="auto": l0 chosen privately (auto_bound.py)
    if auto is not None:
        from .auto_bound import split_epsilon

        if top_k is not None:
            raise InvalidParameterError("pass either max_groups_per_unit='auto' (choose l0 from the data: gshm, "
                                        "laplace) or top_k (release the top-k keys: topk-csh), not both")
        if keys is not None:
            raise InvalidParameterError("max_groups_per_unit='auto' chooses the bound of a thresholded release; with "
                                        "keys=… give max_groups_per_unit as a number (or leave it out)")
        eps_sel, eps = split_epsilon(eps, auto.share)  # eps: the release's share from here on
        l0: int | None = auto.candidates[-1]  # feasibility at the largest candidate, before any data is read
    else:
        l0 = None if max_groups_per_unit is None else v.integer("max_groups_per_unit", max_groups_per_unit, lo=1)
    pub = None
    if keys is not None:
        from .mechanisms.public_keys import PublicKeys, public_keys

        pub = keys if isinstance(keys, PublicKeys) else public_keys(keys, cols)
        if list(pub.columns) != cols:
            raise InvalidParameterError(f"keys has the columns {list(pub.columns)}, not the by columns {cols}")
    mech = _mechanism(mechanism, top_k, l0, keys=pub is not None, pure=dlt == 0)
    if auto is not None and mech.name not in ("auto", "gshm", "laplace") and not (
            auto.objective == "keys" and mech.name == "weighted-gaussian"):
        raise InvalidParameterError(f"max_groups_per_unit='auto' chooses l0 for mechanism 'auto', 'gshm' or "
                                    f"'laplace', not {mech.describe()}")
    mech_requested = mech
    if unit is None and not mech.row_units:
        raise InvalidTypeError(f"privacy_unit must be a column name (str); privacy_unit=None (every row is its own "
                               f"unit) is accepted by mechanism='misra-gries' only, not {mech.describe()}")
    if pub is not None and not mech.public_keys and mech.name != "auto":
        raise InvalidParameterError(
            f"keys=… releases every listed key without a threshold; mechanism={mech.describe()} selects keys by a "
            f"threshold. Use mechanism='auto', 'correlated-gaussian', 'bounded-density', "
            f"'grouped-correlated-gaussian', 'public-gaussian' or 'public-laplace', or drop keys= (CLI: --keys)")
    if pub is None and mech.public_keys:
        raise InvalidParameterError(f"mechanism={mech.describe()} releases counts for a public key list: pass "
                                    f"keys=[…] (CLI: --keys FILE; the keys to release, fixed without looking at the "
                                    f"data)")
    if pub is not None and sums:
        raise InvalidParameterError("SUM/MEAN aggregates are not offered with keys= (public key lists release "
                                    "counts)")
    if not isinstance(insecure_float, bool):
        raise InvalidTypeError(f"insecure_float must be a bool, got {insecure_float!r}")
    if sums and not mech.supports_aggregates:
        raise InvalidParameterError(
            f"mechanism={mech.describe()} releases counts only; SUM/MEAN aggregates are released by the joint "
            f"GSHM: mechanism='gshm' or 'auto' with ⟨max_groups_per_unit=…⟩", param="aggregates")
    if sums and insecure_float:
        raise InvalidParameterError("SUM/MEAN aggregates are released with secure discrete noise only; drop "
                                    "insecure_float=True")
    shape = _column_shape(column_shape, sums)
    request = ReleaseRequest(epsilon=eps, delta=dlt, max_groups_per_unit=l0, insecure_float=insecure_float,
                             aggregates=sums, keys=pub, column_shape=shape)
    mech, cal, reason, candidates = mech.resolve(request)
    kind = sources.kind(data)
    if kind == "file":
        data = sources.resolve_file(data)  # a directory of Parquet/CSV parts: the glob of its files
        sources.file_format(data)
    elif kind == "sql":
        sources.check_sql(data)
    eng = get_engine(engine, data, connection)
    keys_plan = None
    if auto is not None and auto.objective == "keys":  # public: every candidate calibrated (auto_keys.py)
        from .auto_keys import keys_plan as _keys_plan

        if not hasattr(eng, "rows_lazy"):
            raise InvalidParameterError(f"AutoBound(objective='keys') runs on the embedded engines (polars, duckdb, "
                                        f"pandas, arrow), not on {eng.name!r}; use objective='quantile'")
        keys_plan = _keys_plan(mech_requested, lambda c: ReleaseRequest(
            epsilon=eps, delta=dlt, max_groups_per_unit=c, insecure_float=insecure_float, aggregates=sums,
            column_shape=shape), auto.candidates, eps_sel, eps)
    out_path = check_out_path(out, overwrite) if out is not None else None
    source = _source(rng)
    value_column = mech.value_column(count.output_name)
    if value_column in cols or value_column == unit:
        raise InvalidParameterError(f"the output column {value_column!r} is also an input column; name the count "
                                    f"otherwise: ⟨count_name|aggregates=[sd.Count(name=…)]⟩", param="count_name")
    if value_column in {a.output_name for a in sums}:
        raise InvalidParameterError(f"the output column {value_column!r} is also a SUM/MEAN output column; give "
                                    f"them distinct names")
    disclosure = mech.disclosure(request, cal, value_column)
    if insecure_float:
        warn_insecure()
    if delta_warning:
        warnings.warn(delta_warning, DeltaWarning, stacklevel=2)
    charge = mech.charge(cal, disclosure)
    if auto is not None:  # basic composition: ε₁ (pure) + the release's (ε₂, δ) = the user's (ε, δ), charged once
        from .ledger import Charge

        charge = Charge(epsilon=eps_total, delta=dlt, neighbours=disclosure.neighbours,
                        mechanism=f"{mech.name}+auto-bound")
    led, own_ledger = _open_ledger(ledger, dataset)
    hist = None
    try:
        # 2. Ledger pre-check (advisory; the charge below repeats it atomically).
        if led is not None:
            assert dataset is not None  # _open_ledger refuses a ledger without a dataset
            led.check(dataset, charge)
        timings = {"validate": time.perf_counter() - t_start}
        charge_id = None
        choice: Any = None  # auto_bound.BoundChoice or auto_keys.KeysChoice
        unit_counts: Any = None
        if auto is not None:
            # keys per unit (input checked here), ONE charge of (ε, δ), then the private choice of l0
            from .auto_bound import select_bound

            assert unit is not None  # privacy_unit=None is refused above for every mechanism auto can pick

            t = time.perf_counter()
            with stage("choosing max_groups_per_unit"):
                if keys_plan is not None:
                    from .auto_keys import candidate_counts, select_by_keys

                    unit_counts = candidate_counts(eng, data, unit, cols, auto.candidates, source,
                                                   keys_plan.statistic_weights)
                else:
                    unit_counts = eng.keys_per_unit_counts(data, unit, cols, auto.candidates)
                if led is not None and dataset is not None:
                    charge_id = led.charge(dataset, charge, note=f"release {sources.display(data)}")
                if keys_plan is not None:
                    choice, unit_counts = select_by_keys(unit_counts, keys_plan, auto, source)
                else:
                    choice = select_bound(unit_counts, auto, eps_sel, eps, source)
                request = ReleaseRequest(epsilon=eps, delta=dlt, max_groups_per_unit=choice.bound,
                                         insecure_float=insecure_float, aggregates=sums, column_shape=shape)
                mech, cal, reason, candidates = mech_requested.resolve(request)
                disclosure = mech.disclosure(request, cal, value_column)
            timings["choose l0"] = time.perf_counter() - t
        # 3. Bounded histogram where the data live (every input check happens here, before the charge).
        t = time.perf_counter()
        with stage("bounding contributions and counting"):
            extra = {"aggregates": sums} if sums else {}
            hist = mech.histogram(eng, data, unit, cols, request, source, **extra)
        prepared = mech.prepare(eng, hist, request)  # data-dependent checks before the charge
        timings["bound+count"] = time.perf_counter() - t
        units_warning = delta_units_note(dlt, eng.stats(hist).units_in)  # curator only (exact unit count)
        if units_warning:
            warnings.warn(units_warning, DeltaWarning, stacklevel=2)
        # 4. Charge (committed, or refused with BudgetExceededError), then 5. one private draw.
        if led is not None and dataset is not None and auto is None:
            charge_id = led.charge(dataset, charge, note=f"release {sources.display(data)}")
        t = time.perf_counter()
        with stage(f"adding noise ({mech.name})"):
            released = mech.run(eng, prepared, cal, disclosure, source, request)
        timings["noise"] = time.perf_counter() - t
        disclosure = released.disclosure
        # 6. Publish: only released rows leave the engine.
        t = time.perf_counter()
        with stage("writing the output" if out_path else "building the table"):
            if released.in_process:
                arrow, native = _sorted_table(released.rows, value_column), None
                n_rows = arrow.num_rows
                if kind == "spark":  # Spark in, Spark out (the released rows only)
                    native = eng.from_arrow(arrow)  # type: ignore[attr-defined]  # kind spark: SparkEngine
            elif kind == "spark":
                native, n_rows = eng.native(released.rows, cols, value_column)  # type: ignore[attr-defined]
                arrow = _sorted_table(eng.to_arrow(released.rows, cols, value_column), value_column) \
                    if out_path else None
            else:
                arrow = _sorted_table(eng.to_arrow(released.rows, cols, value_column), value_column)
                native, n_rows = None, arrow.num_rows
            notes = disclosure.notes
            if choice is not None and auto is not None:
                notes = notes + (choice.describe(),)
            report = Report(
                mechanism=mech.name, options=mech.options(), reason=reason, analysis=disclosure.analysis,
                epsilon=eps_total if choice is not None else disclosure.epsilon, delta=disclosure.delta, neighbours=disclosure.neighbours,
                delta_achieved=disclosure.delta_achieved, delta_parts=dict(disclosure.delta_parts),
                sigma=disclosure.sigma, noise_std=disclosure.noise_std, threshold=disclosure.threshold,
                margin=disclosure.margin, pre_threshold=disclosure.pre_threshold, comparison=disclosure.comparison,
                contribution=disclosure.contribution, value_column=value_column, released_keys=int(n_rows),
                insecure_float=insecure_float, notes=notes + ((delta_warning,) if delta_warning else ()),
                candidates=candidates, version=__version__,
                profile=charge.profile, column_errors=dict(disclosure.column_errors),
                auto_bound=None if choice is None else choice.to_dict())
            if out_path:
                try:
                    write_atomic(arrow, *out_path, metadata=report.metadata(), charge_id=charge_id)
                except OutputWriteError as e:  # the budget is spent: hand the caller what it paid for
                    e.table, e.report = convert(arrow, OUTPUT_KIND.get(kind, "polars")), report
                    raise
            table = native if native is not None else convert(arrow, OUTPUT_KIND.get(kind, "polars"))
            if charge_id is not None and led is not None:
                led.mark_published(charge_id, out_path[0] if out_path else None)
        timings["output"] = time.perf_counter() - t
        timings["total"] = time.perf_counter() - t_start
    finally:
        if hist is not None:
            eng.release_resources(hist)
        if own_ledger and led is not None:
            led.close()
    engine_choice = None
    if engine is None:
        from .engines.choice import choose_engine

        engine_choice = choose_engine(data).describe()
    curator = Curator(engine=eng.name, source=sources.display(data), bounding=eng.stats(hist), timings=timings,
                      output=out_path[0] if out_path else None, engine_choice=engine_choice,
                      warnings=(units_warning,) if units_warning else (), auto_bound=unit_counts)
    return Result(table=table, report=report, curator=curator, query=released.query)


class Plan(tuple):
    """``plan()``'s result: the calibrations of every applicable mechanism, the one ``auto`` would use first
    (a tuple of calibrations; ``.mechanisms`` gives the matching mechanism objects). Prints as a table."""

    mechanisms: tuple
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
        from .accounting.profiles import profile_of

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
        import html

        rows = self.rows()
        cols = list(dict.fromkeys(k for r in rows for k in r))
        head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
        body = "".join("<tr>" + "".join(f"<td>{html.escape(_fmt(r.get(c)))}</td>" for c in cols) + "</tr>"
                       for r in rows)
        return f"<table><caption>{html.escape(self.title)}</caption><tr>{head}</tr>{body}</table>"


def _plan_request(cal: Any) -> ReleaseRequest:
    from .mechanisms.base import ReleaseRequest

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
    from fractions import Fraction

    from .errors import InfeasibleError
    from .mechanisms import registry
    from .mechanisms.base import ReleaseRequest
    from .mechanisms.thresholded import TopKCSH

    eps = v.epsilon(epsilon)
    dlt = v.real("delta", delta, lo=0.0, hi=1.0, hi_open=True)
    l0 = None if max_groups_per_unit is None else v.integer("max_groups_per_unit", max_groups_per_unit, lo=1)
    k = None if top_k is None else v.integer("top_k", top_k, lo=1)
    if keys is not None:
        return _plan_public(eps, dlt, l0, keys, k, aggregates, max_units, insecure_float, group)
    if group is not None:
        raise InvalidParameterError("plan(group=…) groups a public key list: pass keys=<frame with that column>")
    rows: list = []
    extra: list = []
    sums: tuple = ()
    if aggregates is not None:
        _, sums = _aggregates(aggregates, "", [])
        if sums and (max_units is not None or dlt == 0):
            raise InvalidParameterError("SUM/MEAN are released by GSHM and top-k CSH only (delta > 0, "
                                        "max_groups_per_unit or top_k), not by the pure mechanisms")
    shape = _column_shape(column_shape, sums)
    if dlt > 0:
        if l0 is None and k is None and max_units is None:
            raise InvalidParameterError("plan needs ⟨max_groups_per_unit=…⟩ (keys per unit) and/or ⟨top_k=…⟩",
                                        param="max_groups_per_unit")
        dlt = v.delta(dlt)
        req = ReleaseRequest(epsilon=eps, delta=dlt, max_groups_per_unit=l0, insecure_float=insecure_float,
                             aggregates=sums, column_shape=shape)
        if l0 is not None:
            for cls in registry.auto_candidates():
                if sums and not cls.supports_aggregates:
                    continue
                try:
                    rows.append((cls(), cls().calibrate(req)))
                except InfeasibleError:
                    continue
            from .mechanisms.set_union import plan_rows

            extra += plan_rows(req)  # key discovery (weights, not counts): listed after the count mechanisms
        if k is not None:
            kreq = ReleaseRequest(epsilon=eps, delta=dlt, insecure_float=insecure_float, aggregates=sums,
                                  column_shape=shape)
            variants: list[tuple[TopKCSH, list]] = [(TopKCSH(k=k), rows)]
            if not sums:
                variants.append((TopKCSH(k=k, debias=False), extra))
            if not (sums or insecure_float):  # Algorithm 4's exact discrete noise (the paper's own), both outputs
                variants += [(TopKCSH(k=k, noise="alg4"), extra), (TopKCSH(k=k, debias=False, noise="alg4"), extra)]
            for m, target in variants:
                try:
                    target.append((m, m.calibrate(kreq)))
                except InfeasibleError:
                    continue
        rows.sort(key=lambda r: (r[1].tau, r[1].noise_std))
    elif max_units is None:
        raise InvalidParameterError("⟨delta=0⟩ lists the pure-DP mechanisms: pass ⟨max_units=…⟩ (the number of "
                                    "units)", param="max_units")
    if max_units is not None:
        from .mechanisms.pure import plan_pure
        from .mechanisms.pure.registered import Basic, PureSparse, Stability, Compact

        if eps > 1:
            raise InvalidParameterError(f"pure mechanisms need epsilon in (0, 1], got {eps}")
        n = v.integer("max_units", max_units, lo=1)
        wanted = [m for m in ("pure-sparse", "compact", "stability")]
        pure = plan_pure(n, eps, Fraction(1, 20) if beta is None else beta, None, delta=dlt or None,
                         mechanisms=wanted)
        objs = {"pure-sparse": PureSparse(max_units=n), "compact": Compact(max_units=n),
                "stability": Stability(max_units=n), "basic": Basic}
        extra += [(objs[c.mechanism], c) for c in pure]
    model = ", ".join(f"{name}={x}" for name, x in (("max_groups_per_unit", l0), ("top_k", k), ("max_units", max_units))
                      if x is not None)
    return Plan(rows + extra, title=f"sparsedp plan: epsilon={eps:g}, delta={dlt:g}, {model}")


def _plan_public(eps: float, dlt: float, l0: int | None, keys: Any, top_k: Any, aggregates: Any, max_units: Any,
                 insecure_float: bool, group: str | None = None) -> Plan:
    """``plan(..., keys=…)``: every public-key mechanism at d keys, lowest per-key error std first."""
    from .errors import InfeasibleError
    from .mechanisms.base import ReleaseRequest
    from .mechanisms.public_keys import PublicKeys, public_candidates

    if top_k is not None or aggregates is not None or max_units is not None:
        raise InvalidParameterError("plan(keys=…) lists the public-key mechanisms; top_k, aggregates and max_units "
                                    "do not apply to them")
    d = v.integer("keys", keys, lo=1) if isinstance(keys, int) else len(keys)
    if d < 1:
        raise InvalidParameterError("keys is empty: list at least one key to release")
    req = ReleaseRequest(epsilon=eps, delta=dlt, max_groups_per_unit=l0, insecure_float=insecure_float,
                         keys=PublicKeys(table=None, d=d, columns=()))
    rows = []
    for cls in public_candidates():
        if dlt == 0 and cls.name != "public-laplace":
            continue
        if cls.name == "bounded-density" and (l0 is None or l0 >= d):
            continue  # units may touch every key: that is correlated-gaussian
        try:
            rows.append((cls(), cls().calibrate(req)))
        except (InfeasibleError, InvalidParameterError):
            continue
    if group is not None and dlt > 0:
        from .mechanisms.grouped_keys import plan_grouped

        rows.append(plan_grouped(keys, group, req))
    rows.sort(key=lambda r: r[1].noise_std)
    bound = "" if l0 is None else f", max_groups_per_unit={l0}"
    return Plan(rows, title=f"sparsedp plan: epsilon={eps:g}, delta={dlt:g}, keys={d}{bound}")
