"""``sparsedp.alp``: an ALP structure (Lebeda thesis Ch. 2, after Lebeda (2023)) built from a table in one call,
as a query kind of the one pipeline (:func:`sparsedp.query.run_query`: calibrate → ledger pre-check → the
engine's bounded histogram → charge → the structure's noise → result).

The result is a queryable private sparse vector (:class:`~sparsedp.sketches.alp.ALP`): ``obj[key]`` /
``obj.query(key)`` answers any key (absent keys read noise around 0), ``obj.save(path)`` /
``sd.ALP.load(path)`` store only the released structure.

**Vector and contribution model.** The engine bounds every privacy unit to at most ``l0 = max_groups_per_unit``
keys (the same uniform keyed choice as :func:`sparsedp.release`), then counts or clipped (signed) sums per key
(:mod:`sparsedp.sketches.alp_data`). ``signed_embedding="columns"`` uses the thesis §2.10 embedding instead of
the §2.2 reduction: one ALP of 2m columns holding the signed values (error not doubled; a query reads 2m bits),
:meth:`ALP.build` ``variant="signed"``.

Adding or removing one unit changes ``x`` by at most 1 in each of at most ``l0`` keys: ‖x − x′‖₁ ≤ l0, a
chain of ``l0`` neighbours of the thesis relation (§2.2 Def. 2.1, one entry by at most 1). The structure is
built at ``(ε', δ') = (ε_alp / l0, δ / Σ_{i<l0} e^{iε'})`` (group privacy; for ALP-Projection directly, since
its ratio is ≤ e^{ε'‖x−x′‖₁}, Lemma 2.15), so it is (ε_alp, δ)-DP for add/remove one unit.

**Variants** (:meth:`ALP.build`): ``delta > 0`` with counts: ``"threshold"`` (Alg. 7/8 with the integer
Threshold2 of Alg. 9: exact discrete Laplace, then ALP-Projection of the full vector, ψ = t); ``delta = 0`` or
real values: ``"projection"`` (Alg. 4/5, pure ε-DP, ψ = ``u`` the public bound of an entry, estimates clamped
to [0, u]). All randomness is from the secure source.

**k**: a public ``k=``, or (default) the private §2.10 over-estimate with ``ε_k = k_epsilon_fraction · ε``
(sensitivity l0, 2·l0 for the signed reduction: a key may switch between ``(key,+)`` and ``(key,−)``); the ALP
gets ``ε_alp = ε − ε_k`` (basic composition).

The ledger (``ledger=``, ``dataset=``) is charged (ε, δ) for add/remove one unit before any noise is drawn.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from . import _validate as v
from .accounting.calibration import Neighbours
from .aggregates import Sum
from .core import sources
from .engines import get_engine
from .errors import InvalidParameterError, InvalidTypeError
from .execution import LedgerSession
from .accounting.charge import Charge
from .mechanisms.misra_gries import group_privacy_parameters
from .progress import Stages
from .query import QueryKind, run_query
from .report import Curator, Result
from .request import columns, source as release_source
from .sketches.alp import ALP
from .sketches.alp_data import alp_value, check_size, entry_vector, estimate_k, key_list

__all__ = ["alp", "ALPQuery", "ALPPlan", "ALPGuarantee", "budget_split"]


@dataclass(frozen=True)
class BudgetSplit:
    """:func:`budget_split`: the public k (``None``: estimated with ``epsilon_k`` at ``failure``), the
    structure's ε, the variant, and the (ε', δ') per entry change it is built at."""

    k: int | None
    failure: float | None
    epsilon_k: float
    epsilon_alp: float
    variant: str
    epsilon_entry: float
    delta_entry: float | None


def budget_split(eps: float, dlt: float, l0: int, value: Sum | None, k: Any, k_epsilon_fraction: Any,
                 k_failure: Any, u: Any) -> BudgetSplit:
    """The budget split of :func:`alp` (k estimated with a share of ε unless given; the threshold variant with
    δ > 0, group privacy over l0 keys; the projection variant with δ = 0 and ``u``)."""
    failure = None
    if k is None:
        frac = v.real("k_epsilon_fraction", k_epsilon_fraction, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
        failure = v.real("k_failure", k_failure, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
        eps_k = eps * frac
    else:
        k = v.integer("k", k, lo=1)
        eps_k = 0.0
    eps_alp = eps - eps_k
    if dlt > 0:
        if value is not None:
            raise InvalidParameterError("sums are real-valued: their threshold variant needs continuous Laplace "
                                        "noise; use delta=0 (the projection variant, with u=…)")
        eps_e, dlt_e = group_privacy_parameters(eps_alp, dlt, l0)
        return BudgetSplit(k, failure, eps_k, eps_alp, "threshold", eps_e, dlt_e)
    if u is None:
        raise InvalidParameterError("delta=0 (ALP-Projection, pure DP) needs u=… (public bound of one entry: "
                                    "units per key for counts, |sum| for sums); or pass delta > 0")
    return BudgetSplit(k, failure, eps_k, eps_alp, "projection", eps_alp / l0, None)


@dataclass(frozen=True)
class ALPGuarantee:
    """The public report of an ALP release: (ε, δ)-DP for add/remove one unit, the contribution model, the
    structure's share of ε and its per-entry-change ε', the k estimate's share, the variant and the sources.
    :meth:`to_dict` is the ALP's ``guarantee`` (stored with the structure by :meth:`ALP.save`)."""

    epsilon: float
    delta: float
    neighbours: Neighbours
    contribution: str
    epsilon_structure: float
    epsilon_per_entry_change: float
    epsilon_k: float
    variant: str
    source: str

    def to_dict(self) -> dict[str, Any]:
        return {"epsilon": self.epsilon, "delta": self.delta, "neighbours": self.neighbours.value,
                "contribution": self.contribution, "epsilon_structure": self.epsilon_structure,
                "epsilon_per_entry_change": self.epsilon_per_entry_change, "epsilon_k": self.epsilon_k,
                "variant": self.variant, "source": self.source}

    def lines(self) -> list[str]:
        return ["sparsedp ALP", f"  guarantee     ({self.epsilon:g}, {self.delta:g})-DP, {self.neighbours.value}",
                f"  mechanism     ALP ({self.variant}): {self.source}", f"  contribution  {self.contribution}"]

    def __str__(self) -> str:
        return "\n".join(self.lines())


@dataclass(frozen=True)
class ALPPlan:
    """What :func:`alp` fixes before reading any data: the budget split, the structure's options, the public
    report and the ledger charge."""

    split: BudgetSplit
    l0: int
    value: Sum | None
    signed: bool
    u: float | None
    alpha: float
    collision: float
    epsilon_split: float
    max_memory: float
    guarantee: ALPGuarantee
    charge: Charge


@dataclass(frozen=True, eq=False)
class ALPInput:
    """An ALP's read: the vector it is built on (keys, entries, the value scale a query multiplies back)."""

    keys: list
    values: np.ndarray
    value_scale: float


class ALPQuery(QueryKind):
    """:func:`alp`'s query kind: the engine's bounded histogram (counts or grid sums) → the ALP structure."""

    what = "alp"

    def __init__(self, data: Any, unit: str, by: list[str], plan: ALPPlan, engine: Any, rng: Any,
                 t_start: float) -> None:
        self.data, self.unit, self.by, self.alp_plan, self.engine = data, unit, by, plan, engine
        self.source = release_source(rng)
        self.stages = Stages(None, t_start)
        self.hist: Any = None

    def plan(self) -> ALPPlan:
        return self.alp_plan

    def read(self, planned: ALPPlan) -> ALPInput:
        self.stages.mark("validate")
        eng, value = self.engine, planned.value
        with self.stages.stage(None, "histogram"):
            extra = {"aggregates": (value,)} if value is not None else {}
            self.hist = eng.histogram(self.data, self.unit, self.by, planned.l0, self.source, 1, **extra)
            h = eng.collect(self.hist)
            grid = None
            if value is not None:
                if not getattr(self.hist, "columns", None):
                    raise InvalidParameterError("sd.alp with value=… runs on the embedded engines (polars, duckdb, "
                                                "pandas, arrow)", param="value")
                grid = self.hist.columns[0]
            keys, vals, scale = entry_vector(key_list(h.keys, self.by), h.counts, grid, value, planned.signed)
        return ALPInput(keys, vals, scale)

    def draw(self, planned: ALPPlan, read: ALPInput) -> ALP:
        split = planned.split
        with self.stages.stage(None, "structure"):
            params_k: dict[str, Any] = {}
            k_used = split.k
            if k_used is None:
                assert split.failure is not None
                support = int(np.count_nonzero(read.values))
                k_used, t = estimate_k(support, epsilon=split.epsilon_k,
                                       sensitivity=2 * planned.l0 if planned.signed else planned.l0,
                                       failure=split.failure, rng=self.source)
                params_k = {"k_estimate": k_used, "k_epsilon": split.epsilon_k, "k_failure": split.failure,
                            "k_offset": t}
            u_x = None if planned.u is None else planned.u / read.value_scale
            obj = ALP.build((read.keys, read.values), epsilon=split.epsilon_entry, k=k_used,
                            delta=split.delta_entry, u=u_x, variant=split.variant, alpha=planned.alpha,
                            collision=planned.collision, epsilon_split=planned.epsilon_split, rng=self.source,
                            enforce_k=False, max_memory=planned.max_memory)
        obj.params.update(params_k)
        obj.signed = planned.signed
        obj.value_scale = float(read.value_scale)
        obj.guarantee = planned.guarantee.to_dict()
        return obj

    def publish(self, planned: ALPPlan, drawn: ALP, ledger: LedgerSession) -> Result:
        """The structure (``Result.query``: ``query(key)``), its public report and the curator's figures; no
        table (the structure answers any key)."""
        ledger.published(None)
        self.stages.mark("total")
        curator = Curator(engine=self.engine.name, source=sources.display(self.data),
                          bounding=self.engine.stats(self.hist), timings=dict(self.stages.timings))
        return Result(table=None, report=planned.guarantee, curator=curator, query=drawn)

    def close(self) -> None:
        if self.hist is not None:
            self.engine.release_resources(self.hist)


def alp(data: Any, privacy_unit: str, by: str | Sequence[str], epsilon: float, delta: float = 0.0, *,
        max_groups_per_unit: int = 1, value: Any = None, k: int | None = None, k_epsilon_fraction: float = 0.1,
        k_failure: float = 1e-6, u: float | None = None, alpha: float = 3.0, collision: float = 0.1,
        epsilon_split: float = 0.5, signed_embedding: str = "reduction", max_memory: float = 4 * 2 ** 30,
        engine: str | None = None, ledger: Any = None, dataset: str | None = None,
        connection: Any = None, rng: Any = None) -> ALP:
    """A private ALP sparse vector of ``data`` grouped by ``by`` (module docstring), (ε, δ)-DP for add/remove
    one ``privacy_unit``. Returns a :class:`~sparsedp.sketches.alp.ALP` with ``.query(key)`` / ``[key]``,
    ``.save(path)``, ``.guarantee`` (public description) and ``.params["k_estimate"]`` when k was estimated.

    Args:
        epsilon, delta: the guarantee; ``delta > 0`` selects the threshold variant (counts only).
        max_groups_per_unit: l0, keys kept per unit (uniform keyed choice by the engine).
        value: ``sd.Sum(column, lower, upper)`` for per-key clipped sums (signed if ``lower < 0``); default counts.
        k: public sparsity used to size the embedding; ``None``: estimated privately (§2.10).
        u: public bound of one entry (counts: units per key; sums: |sum|), needed by the projection variant.
        alpha, collision, epsilon_split: ALP parameters (α = 3, s = 10k, ε₁ = ε/2 for the threshold; §2.10).
        signed_embedding: signed sums (``lower < 0``): ``"reduction"`` (default; §2.2, keys (key, ±), error at
            most doubled) or ``"columns"`` (§2.10, one embedding of 2m columns, ALP's error, 2m bits per query).
        max_memory: refuse (naming the size and the fix) a structure above this many bytes (default 4 GiB):
            checked before anything is charged where the size is known (public ``k``; else its lower bound at
            k̃ = 1), and again once the private k̃ is drawn, before the structure's noise.
    """
    result = run_query(alp_query(data, privacy_unit, by, epsilon, delta, max_groups_per_unit=max_groups_per_unit,
                                 value=value, k=k, k_epsilon_fraction=k_epsilon_fraction, k_failure=k_failure, u=u,
                                 alpha=alpha, collision=collision, epsilon_split=epsilon_split,
                                 signed_embedding=signed_embedding, max_memory=max_memory, engine=engine,
                                 connection=connection, rng=rng), ledger, dataset)
    return result.query


def alp_query(data: Any, privacy_unit: Any, by: Any, epsilon: Any, delta: Any, *, max_groups_per_unit: Any,
              value: Any, k: Any, k_epsilon_fraction: Any, k_failure: Any, u: Any, alpha: Any, collision: Any,
              epsilon_split: Any, signed_embedding: Any, max_memory: Any, engine: Any, connection: Any,
              rng: Any) -> ALPQuery:
    """:func:`alp`'s arguments checked (no data read) into its :class:`ALPQuery`."""
    t0 = time.perf_counter()
    eps = v.epsilon(epsilon)
    dlt = v.real("delta", delta, lo=0.0, hi=1.0, hi_open=True)
    unit, cols = columns(privacy_unit, by)
    if unit is None:
        raise InvalidTypeError("privacy_unit must be a column name (str)")
    l0 = v.integer("max_groups_per_unit", max_groups_per_unit, lo=1)
    val = alp_value(value, unit, cols)
    emb = v.choice("signed_embedding", signed_embedding, ("reduction", "columns"))
    max_memory = v.positive("max_memory", max_memory)
    signed_columns = val is not None and val.lower < 0 and emb == "columns"
    signed = val is not None and val.lower < 0 and not signed_columns
    split = budget_split(eps, dlt, l0, val, k, k_epsilon_fraction, k_failure, u)
    u = None if u is None else v.positive("u", u)
    variant = split.variant
    if variant == "projection":
        assert u is not None
        check_size(val, u, split.epsilon_entry, alpha, collision, split.k, max_memory, signed_columns)
        if signed_columns:
            variant = "signed"
    if sources.kind(data) == "file":
        sources.file_format(data)
    guarantee = ALPGuarantee(
        epsilon=eps, delta=dlt, neighbours=Neighbours.ADD_REMOVE,
        contribution=f"at most {l0} key(s) per unit" + (
            f", value clipped to [{val.lower:g}, {val.upper:g}] per (unit, key)" if val is not None else ""),
        epsilon_structure=split.epsilon_alp, epsilon_per_entry_change=split.epsilon_entry, epsilon_k=split.epsilon_k,
        variant=variant, source="Lebeda thesis ch. 2 (ALP), §2.10 k estimate, signed values by "
        + ("the §2.10 2m-column embedding" if signed_columns else "the §2.2 reduction"))
    plan = ALPPlan(split=BudgetSplit(split.k, split.failure, split.epsilon_k, split.epsilon_alp, variant,
                                     split.epsilon_entry, split.delta_entry),
                   l0=l0, value=val, signed=signed, u=u, alpha=alpha, collision=collision, epsilon_split=epsilon_split,
                   max_memory=max_memory, guarantee=guarantee,
                   charge=Charge(epsilon=eps, delta=dlt, neighbours=Neighbours.ADD_REMOVE, mechanism="alp"))
    return ALPQuery(data, unit, cols, plan, get_engine(engine, data, connection), rng, t0)
