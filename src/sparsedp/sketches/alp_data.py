"""``sparsedp.alp``: an ALP structure (Lebeda thesis Ch. 2, after Lebeda (2023)) built from a frame in one call.

The result is a queryable private sparse vector (:class:`~sparsedp.sketches.alp.ALP`): ``obj[key]`` /
``obj.query(key)`` answers any key (absent keys read noise around 0), ``obj.save(path)`` /
``sd.ALP.load(path)`` store only the released structure.

**Vector and contribution model.** The engine bounds every privacy unit to at most ``l0 = max_groups_per_unit``
keys (the same uniform keyed choice as :func:`sparsedp.release`), then

* counts (default): ``x_key`` = number of distinct units with the key (non-negative integers);
* ``value=sd.Sum(column, lower, upper)``: ``x_key`` = Σ over the key's units of the unit's rows' values clipped
  to [lower, upper] on the public grid (:mod:`sparsedp.aggregates`, ``recentre=False``), divided by
  ``D`` = the grid sensitivity, so each unit moves each of its keys by at most 1. Signed when ``lower < 0``:
  the spec §2.2 reduction (thesis L471–473) releases one ALP over the keys ``(key, "+")`` and ``(key, "−")``
  holding ``max(x, 0)`` and ``max(−x, 0)`` (the ℓ1 distance is preserved; error at most doubled); a query
  reads the difference. ``signed_embedding="columns"`` instead uses the thesis §2.10 embedding: one ALP of 2m
  columns holding the signed values (error not doubled; a query reads 2m bits), :meth:`ALP.build`
  ``variant="signed"``.

Adding or removing one unit changes ``x`` by at most 1 in each of at most ``l0`` keys: ‖x − x′‖₁ ≤ l0, a
chain of ``l0`` neighbours of the thesis relation (§2.2 Def. 2.1, one entry by at most 1). The structure is
built at ``(ε', δ') = (ε_alp / l0, δ / Σ_{i<l0} e^{iε'})`` (group privacy; for ALP-Projection directly, since
its ratio is ≤ e^{ε'‖x−x′‖₁}, Lemma 2.15), so it is (ε_alp, δ)-DP for add/remove one unit.

**Memory**: the structure holds s·m/8 bytes (s = ⌈k̃/collision⌉ rows, m = ⌈u·ε'/α⌉ columns, 2m for the signed
embedding), built in streamed blocks; above ``max_memory`` it is refused with its size and the fix.

**Variants** (:meth:`ALP.build`): ``delta > 0`` with counts: ``"threshold"`` (Alg. 7/8 with the integer
Threshold2 of Alg. 9: exact discrete Laplace, then ALP-Projection of the full vector, ψ = t); ``delta = 0`` or
real values: ``"projection"`` (Alg. 4/5, pure ε-DP, ψ = ``u`` the public bound of an entry, estimates clamped
to [0, u]). All randomness is from the secure source.

**k** sizes the embedding (s = ⌈k/collision⌉ rows; thesis §2.10 "k is used to size the embedding"): either a
public ``k=``, or (default) the private over-estimate of §2.10, ``k̃ = k + Z + t`` with ``Z`` discrete
Laplace(Δ/ε_k) and ``t`` the smallest integer with ``P[Z ≤ −t] = q^t/(1+q) ≤ k_failure`` (so k̃ < k with
probability ≤ ``k_failure``; the thesis's ``ln(d/2)/ε`` is the continuous version with failure 1/d), where
Δ = l0 (2·l0 for the signed reduction: a key may switch between ``(key,+)`` and ``(key,−)``) is the support's
sensitivity, using ``ε_k = k_epsilon_fraction · ε``; the ALP gets ``ε_alp = ε − ε_k`` (basic composition).
k is never checked against the data (a data-dependent refusal would leak, Lebeda & Retschmeier (2024) §1.5): a too-small k only
costs accuracy (more collisions), never privacy.

The ledger (``ledger=``, ``dataset=``) is charged (ε, δ) for add/remove one unit before any noise is drawn.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any, Sequence

import numpy as np

from .. import _validate as v
from ..errors import InvalidParameterError, InvalidTypeError

__all__ = ["alp", "estimate_k"]


def estimate_k(k: int, *, epsilon: float, sensitivity: int, failure: float, rng) -> tuple[int, int]:
    """``(k̃, t)``: the §2.10 private over-estimate ``k + Z + t`` (module docstring), discrete Laplace noise."""
    from ._noise import discrete_laplace

    q = math.exp(-epsilon / sensitivity)
    t = max(1, math.ceil(math.log(1.0 / (failure * (1.0 + q))) / (epsilon / sensitivity)))
    while q ** t / (1.0 + q) > failure:
        t += 1
    while t > 1 and q ** (t - 1) / (1.0 + q) <= failure:
        t -= 1
    z = int(discrete_laplace(Fraction(sensitivity) / Fraction(epsilon), 1, rng)[0])
    return max(1, k + z + t), t


def alp(data: Any, privacy_unit: str, by: str | Sequence[str], epsilon: float, delta: float = 0.0, *,
        max_groups_per_unit: int = 1, value: Any = None, k: int | None = None, k_epsilon_fraction: float = 0.1,
        k_failure: float = 1e-6, u: float | None = None, alpha: float = 3.0, collision: float = 0.1,
        epsilon_split: float = 0.5, signed_embedding: str = "reduction", max_memory: float = 4 * 2 ** 30,
        engine: str | None = None, ledger: Any = None, dataset: str | None = None,
        connection: Any = None, rng: Any = None):
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
    from ..accounting.calibration import Neighbours
    from ..core import sources
    from ..engines import get_engine
    from ..accounting.charge import Charge
    from ..execution import LedgerSession
    from ..request import columns, source as release_source
    from .alp import ALP

    eps = v.epsilon(epsilon)
    dlt = v.real("delta", delta, lo=0.0, hi=1.0, hi_open=True)
    unit, cols = columns(privacy_unit, by)
    if unit is None:
        raise InvalidTypeError("privacy_unit must be a column name (str)")
    l0 = v.integer("max_groups_per_unit", max_groups_per_unit, lo=1)
    value = _value(value, unit, cols)
    emb = v.choice("signed_embedding", signed_embedding, ("reduction", "columns"))
    max_memory = v.positive("max_memory", max_memory)
    signed_columns = value is not None and value.lower < 0 and emb == "columns"
    signed = value is not None and value.lower < 0 and not signed_columns
    p = _split(eps, dlt, l0, value, k, k_epsilon_fraction, k_failure, u)
    k, failure, eps_k, eps_alp, variant, eps_e, dlt_e = p
    u = None if u is None else v.positive("u", u)
    if variant == "projection":
        _check_size(value, u, eps_e, alpha, collision, k, max_memory, signed_columns)
        if signed_columns:
            variant = "signed"
    kind = sources.kind(data)
    if kind == "file":
        sources.file_format(data)
    eng = get_engine(engine, data, connection)
    source = release_source(rng)
    charge = Charge(epsilon=eps, delta=dlt, neighbours=Neighbours.ADD_REMOVE, mechanism="alp")
    led = LedgerSession(ledger, dataset)
    hist = None
    try:
        led.check(charge)
        extra = {"aggregates": (value,)} if value is not None else {}
        hist = eng.histogram(data, unit, cols, l0, source, 1, **extra)
        h = eng.collect(hist)
        keys = _key_list(h.keys, cols)
        if value is not None:
            grid = np.asarray(hist.columns[0] if hasattr(hist, "columns") and hist.columns else
                              _spark_grid(eng, hist), dtype=np.float64)
            scale = value.sensitivity  # x = grid sum / D: each unit moves each of its keys by ≤ 1
            vals = grid / scale
            value_scale = scale * value.granularity
        else:
            vals = np.asarray(h.counts, dtype=np.int64)
            value_scale = 1.0
        if signed:
            pos, neg = np.maximum(vals, 0.0), np.maximum(-vals, 0.0)
            keys = [(x, "+") for x in keys] + [(x, "-") for x in keys]
            vals = np.concatenate([pos, neg])
        led.charge(charge, sources.display(data), what="alp")
        params_k: dict = {}
        if k is None:
            support = int(np.count_nonzero(vals))
            k_used, t = estimate_k(support, epsilon=eps_k, sensitivity=2 * l0 if signed else l0, failure=failure,
                                   rng=source)
            params_k = {"k_estimate": k_used, "k_epsilon": eps_k, "k_failure": failure, "k_offset": t}
        else:
            k_used = k
        u_x = None if u is None else u / value_scale
        obj = ALP.build((keys, vals), epsilon=eps_e, k=k_used, delta=dlt_e, u=u_x, variant=variant, alpha=alpha,
                        collision=collision, epsilon_split=epsilon_split, rng=source, enforce_k=False,
                        max_memory=max_memory)
        obj.params.update(params_k)
        obj.signed = signed
        obj.value_scale = float(value_scale)
        obj.guarantee = {
            "epsilon": eps, "delta": dlt, "neighbours": Neighbours.ADD_REMOVE.value,
            "contribution": f"at most {l0} key(s) per unit" + (
                f", value clipped to [{value.lower:g}, {value.upper:g}] per (unit, key)" if value is not None else ""),
            "epsilon_structure": eps_alp, "epsilon_per_entry_change": eps_e, "epsilon_k": eps_k,
            "variant": variant, "source": "Lebeda thesis ch. 2 (ALP), §2.10 k estimate, signed values by "
            + ("the §2.10 2m-column embedding" if signed_columns else "the §2.2 reduction")}
        led.published(None)
        return obj
    finally:
        if hist is not None:
            eng.release_resources(hist)
        led.close()


def _check_size(value: Any, u: float, eps_e: float, alpha: float, collision: float, k: int | None,
                max_memory: float, signed_columns: bool) -> None:
    """The projection structure's size before anything is charged (s at least its k̃ = 1 value): refused above
    ``max_memory`` naming the size and the fix (:func:`sparsedp.sketches.alp.check_memory`)."""
    from .alp import check_memory

    coll = v.real("collision", collision, lo=0.0, hi=0.5, lo_open=True, hi_open=True)
    scale_u = value.sensitivity * value.granularity if value is not None else 1.0
    m = math.ceil(u / scale_u * eps_e / v.positive("alpha", alpha))
    check_memory(math.ceil((1 if k is None else k) / coll), 2 * m if signed_columns else m, max_memory,
                 "signed" if signed_columns else "projection")


def _value(value: Any, unit: str, cols: list[str]) -> Any:
    """``value=`` checked: a ``sd.Sum`` on a column that is neither the unit nor a key (not recentred)."""
    from ..aggregates import Sum

    if value is None:
        return None
    if not isinstance(value, Sum) or type(value).__name__ != "Sum":
        raise InvalidTypeError(f"value must be sd.Sum(column, lower, upper), got {value!r}")
    if value.column == unit or value.column in cols:
        raise InvalidParameterError("the value column must not be the privacy unit or a key column")
    return Sum(value.column, value.lower, value.upper, value.granularity, recentre=False)


def _split(eps: float, dlt: float, l0: int, value: Any, k: Any, k_epsilon_fraction: Any, k_failure: Any,
           u: Any) -> tuple:
    """``(k, failure, ε_k, ε_ALP, variant, ε per entry change, δ per entry change)``: the budget split of
    :func:`alp` (k estimated with a share of ε unless given; the threshold variant with δ > 0, group privacy over
    l0 keys; the projection variant with δ = 0 and ``u``)."""
    from ..mechanisms.misra_gries import group_privacy_parameters

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
        return k, failure, eps_k, eps_alp, "threshold", eps_e, dlt_e
    if u is None:
        raise InvalidParameterError("delta=0 (ALP-Projection, pure DP) needs u=… (public bound of one entry: "
                                    "units per key for counts, |sum| for sums); or pass delta > 0")
    return k, failure, eps_k, eps_alp, "projection", eps_alp / l0, None


def _key_list(keys: Any, cols: list[str]) -> list:
    columns = [keys.column(c).to_pylist() for c in cols]
    return columns[0] if len(cols) == 1 else [tuple(r) for r in zip(*columns)]


def _spark_grid(eng: Any, hist: Any) -> np.ndarray:  # pragma: no cover - Spark path
    raise InvalidParameterError("sd.alp with value=… runs on the embedded engines (polars, duckdb, pandas, arrow)")
