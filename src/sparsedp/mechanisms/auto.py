"""``mechanism="auto"``: the valid mechanism with the lowest release threshold at the requested (ε, δ).

Which mechanisms are *valid* depends only on the contribution model the caller declares (never on the
data):

==========================================  =====================================================
declared                                    valid mechanisms
==========================================  =====================================================
``l0`` (keys per unit, engine-enforced)     ``gshm`` (l0), ``laplace`` (l0)
``k`` (k-sparse monotonic histogram, e.g.   ``csh`` (k); also ``gshm`` / ``laplace`` with l0 = k,
a merged Misra–Gries sketch of size k)      since neighbours then differ in at most k counts by 1
                                            (Lebeda & Retschmeier (2024) §1.5)
``top_k`` (one contribution per key per     ``topk-csh`` (top_k)
unit; keep the top_k keys)
==========================================  =====================================================

Each valid mechanism is calibrated (secure discrete noise by default), and the one with the smallest
margin τ (threshold minus pre-threshold) wins; ties go to the lower noise. The margins are comparable:
every analysis charges only τ (Karrer et al. (2022) §1, Lebeda & Retschmeier (2024) §1.6; for top-k, the margin above the truncation
level, Cor. 4.2). The report lists every candidate with its threshold and noise and says why the winner
won. Lebeda & Retschmeier (2024) §6.2 (19): at (0.35, 1e-5) continuous CSH-tight beats GSHM-exact iff k >= 6. Secure CSH is
the rounded mechanism (integer margin, rule ``count + X >= pre + margin``, accounted by Thm 3.5 at
τ = margin − ½; docs/proofs/rounded-csh.md), compared on the same footing as discrete GSHM / Laplace,
whose margins are integers with ``>=`` too; its crossover stays at k = 6 there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..accounting.calibration import Calibration
from ..accounting.calibration_cache import cached_calibrate
from ..accounting.names import GSHM, LAPLACE, TOPK_CSH
from ..errors import InfeasibleError, InvalidParameterError
from ..noise.source import SecureRandom
from .base import AutoRole, Disclosure, Mechanism, Released, ReleaseRequest, Resolved, UserRequest
from .catalog import auto_candidates, register, with_auto_role
from .thresholded import TopKCSH

if TYPE_CHECKING:
    from ..core.engine import Engine

__all__ = ["Auto", "valid_mechanisms", "calibrate_mechanism", "choose_mechanism", "MECHANISMS", "OBJECTIVES",
           "publishes"]

MECHANISMS = (GSHM, "csh", TOPK_CSH, LAPLACE)


def valid_mechanisms(l0: int | None, k: int | None, top_k: int | None) -> dict[str, int]:
    """``{mechanism: its bound}`` valid for the declared contribution model (see the module table)."""
    out: dict[str, int] = {}
    if l0 is not None:
        out[GSHM] = l0
        out[LAPLACE] = l0
    if k is not None:
        out["csh"] = k
        if l0 is None or k < l0:  # the k-sparse structure gives l0 = k for free
            out[GSHM] = k
            out[LAPLACE] = k
    if top_k is not None:
        out[TOPK_CSH] = top_k
    return out


def calibrate_mechanism(mechanism: str, bound: int, epsilon: float, delta: float, *,
                        insecure_float: bool = False) -> Calibration:
    """Calibrate one mechanism with its bound (l0 for gshm/laplace, k for csh, top_k for topk-csh).

    Secure (default): the accountant of the discrete noise the mechanism samples; ``insecure_float``: the
    tightest continuous analysis. Delegates to :func:`sparsedp.accounting.calibrate`.
    """
    name = {GSHM: "l0", LAPLACE: "l0", "csh": "k", TOPK_CSH: "top_k"}.get(mechanism)
    if name is None:
        raise InvalidParameterError(f"mechanism must be one of {', '.join(map(repr, MECHANISMS))}; got {mechanism!r}")
    return cached_calibrate(mechanism, epsilon=epsilon, delta=delta, discrete=not insecure_float, **{name: bound})


def choose_mechanism(epsilon: float, delta: float, *, l0: int | None = None, k: int | None = None,
                     top_k: int | None = None, insecure_float: bool = False) -> tuple[Calibration, dict[str, Any]]:
    """Calibrate every valid mechanism and return ``(best calibration, report)``.

    The report has ``chosen``, ``reason`` and ``candidates`` (mechanism, bound, margin τ, noise std, or the
    reason it was infeasible).
    """
    valid = valid_mechanisms(l0, k, top_k)
    if not valid:
        raise InvalidParameterError("declare a contribution model: l0 (keys per unit), k (k-sparse monotonic "
                                    "histogram) or top_k (keep the top-k keys)")
    tried: dict[str, Any] = {}
    for mech, bound in valid.items():
        try:
            tried[mech] = calibrate_mechanism(mech, bound, epsilon, delta, insecure_float=insecure_float)
        except InfeasibleError as e:
            tried[mech] = e
    best, reason, cands = _pick(tried, epsilon, delta)
    for c in cands:
        c["bound"] = valid[c["mechanism"]]
    return tried[best], {"chosen": best, "reason": reason, "candidates": cands}


def _pick(tried: dict[str, Any], epsilon: float, delta: float) -> tuple[str, str, list[dict[str, Any]]]:
    """The lowest-margin calibration among ``tried`` (name -> Calibration or the error that made it infeasible;
    ties: lower noise), the reason, and every candidate sorted by margin."""
    cals = {m: c for m, c in tried.items() if isinstance(c, Calibration)}
    cands: list[dict[str, Any]] = [
        {"mechanism": m, "tau": c.tau, "noise_std": c.noise_std, "analysis": c.analysis}
        if isinstance(c, Calibration) else {"mechanism": m, "infeasible": str(c)} for m, c in tried.items()]
    if not cals:
        raise InfeasibleError("no valid mechanism is feasible: " +
                              "; ".join(f"{c['mechanism']}: {c['infeasible']}" for c in cands))
    best = min(cals, key=lambda m: (cals[m].tau, cals[m].noise_std))
    others = sorted((c for c in cands if c["mechanism"] != best and "tau" in c), key=lambda c: c["tau"])
    if others:
        o = others[0]
        reason = (f"{best} has the lowest threshold margin among the mechanisms valid for the declared "
                  f"contribution model: tau={cals[best].tau:.6g} vs {o['mechanism']} tau={o['tau']:.6g} "
                  f"at epsilon={epsilon:g}, delta={delta:g}")
    else:
        reason = f"{best} is the only feasible mechanism for the declared contribution model"
    cands.sort(key=lambda c: c.get("tau", float("inf")))
    return best, reason, cands


#: ``sd.Auto(objective=…)``: the most released keys, or the lowest threshold among the count mechanisms
OBJECTIVES = ("counts", "keys")


def publishes(mech: Mechanism) -> str:
    """What a mechanism's table holds besides the keys: ``"counts"``, ``"key weights"`` or another column."""
    column = mech.value_column("count")
    return {"count": "counts", "weight": "key weights", "": "keys only"}.get(column, column.replace("_", " "))


def _std(cal: Any) -> float:
    """The calibration's noise std, +inf when it has none (a keys-only selection releases no noisy value)."""
    x = float(getattr(cal, "noise_std", float("nan")))
    return x if x == x else float("inf")


def _pick_keys(tried: dict[str, Any], mechs: dict[str, Mechanism], epsilon: float,
               delta: float) -> tuple[str, str, list[dict[str, Any]]]:
    """The objective ``"keys"``: the candidate with the lowest count-equivalent release threshold keep50 =
    ``count_floor() + tau`` (ties: the one that publishes counts, then the lower noise), the reason, and every
    candidate with its keep50 and what it publishes, sorted by keep50. For a count mechanism with symmetric
    integer noise and rule ``n + X >= pre + tau``, P[release | n] >= 1/2 exactly from n = pre + tau; the key-weight
    mechanisms state tau count-equivalently for keys whose units fill the bound (their worst case)."""
    ok = {m: c for m, c in tried.items() if not isinstance(c, Exception)}
    if not ok:
        raise InfeasibleError("no key-selection mechanism is feasible: " +
                              "; ".join(f"{m}: {e}" for m, e in tried.items()))
    keep = {m: mechs[m].count_floor() + float(c.tau) for m, c in ok.items()}
    cands: list[dict[str, Any]] = [
        {"mechanism": m, "tau": c.tau, "keep50": keep[m], "noise_std": c.noise_std, "analysis": c.analysis,
         "publishes": publishes(mechs[m])} if m in ok else
        {"mechanism": m, "infeasible": str(c), "publishes": publishes(mechs[m])} for m, c in tried.items()]
    best = min(ok, key=lambda m: (keep[m], publishes(mechs[m]) != "counts", _std(ok[m])))
    cands.sort(key=lambda c: c.get("keep50", float("inf")))
    others = [c for c in cands if c["mechanism"] != best and "keep50" in c]
    reason = (f"{best} releases the most keys expected (objective 'keys'): a key held by n units is released with "
              f"probability >= 1/2 from n = {keep[best]:.6g}" + (" (count-equivalent: units that fill "
                                                                  "max_groups_per_unit)" if publishes(mechs[best])
                                                                 != "counts" else "")
              + (", the lowest among " + ", ".join(f"{c['mechanism']} {c['keep50']:.6g}" for c in others)
                 if others else ", the only feasible selection mechanism")
              + f" at epsilon={epsilon:g}, delta={delta:g}; chosen without the data (no budget spent); it publishes "
              f"{publishes(mechs[best])}")
    return best, reason, cands


# ------------------------------------------------------------------ the registered "auto" mechanism


def _offers(role: AutoRole, request: ReleaseRequest, group: str | None) -> dict[str, Mechanism]:
    """``{name: candidate}`` of the registered classes offered in ``role`` for ``request`` (their
    :meth:`~sparsedp.mechanisms.base.Mechanism.auto_offer`, in their ``auto_order``)."""
    offers = {cls.name: cls.auto_offer(request, group) for cls in with_auto_role(role)}
    return {name: m for name, m in offers.items() if m is not None}


def _resolve_public(request: ReleaseRequest, group: str | None = None) -> Resolved:
    """``auto`` with ``keys=``: every public-key mechanism (default options) calibrated, the lowest per-key error
    std wins (no threshold to compare: each listed key is released). With δ = 0 only the Laplace one is pure.
    ``group``: also Lebeda (2024)'s grouped mechanism on that column
    (:class:`~sparsedp.mechanisms.grouped_keys.GroupedCorrelatedGaussian`, each unit kept in one group)."""
    tried: dict[str, Any] = {}
    mechs = _offers(AutoRole.PUBLIC_KEYS, request, group)
    for name, mech in mechs.items():
        try:
            refusal = mech.auto_refusal(request)
            if refusal is not None:
                raise InvalidParameterError(refusal)
            mech.check(request)
            tried[name] = mech.calibrate(request)
        except (InfeasibleError, InvalidParameterError) as e:
            tried[name] = e
    cands = [{"mechanism": m, "noise_std": c.noise_std, "analysis": c.analysis}
             if not isinstance(c, Exception) else {"mechanism": m, "infeasible": str(c)} for m, c in tried.items()]
    ok = {m: c for m, c in tried.items() if not isinstance(c, Exception)}
    if not ok:
        raise InfeasibleError("no public-key mechanism is feasible: " +
                              "; ".join(f"{c['mechanism']}: {c['infeasible']}" for c in cands))
    best = min(ok, key=lambda m: ok[m].noise_std)
    cands.sort(key=lambda c: c.get("noise_std", float("inf")))
    cal = ok[best]
    others = [c for c in cands if c["mechanism"] != best and "noise_std" in c]
    per = f"at most {cal.k} of {cal.d} keys per unit" if cal.k < cal.d else f"units may touch all {cal.d} keys"
    if others:
        reason = (f"{best} has the lowest expected error per key among the public-key mechanisms ({per}): noise "
                  f"std {cal.noise_std:.6g} vs " + ", ".join(f"{c['mechanism']} {c['noise_std']:.6g}" for c in others)
                  + f" at epsilon={request.epsilon:g}, delta={request.delta:g}")
    else:
        reason = f"{best} is the only feasible public-key mechanism at delta={request.delta:g}"
    return mechs[best], cal, reason, tuple(cands)



def _resolve_pure(request: ReleaseRequest) -> Resolved:
    """``auto`` at δ = 0: the pure blanket histogram (linear time, the lowest threshold of the pure mechanisms;
    the Balcer–Vadhan ones are quadratic and only by name)."""
    mech = next(iter(_offers(AutoRole.PURE, request, None).values()))
    if request.max_groups_per_unit not in (None, 1):
        raise InvalidParameterError(
            f"⟨delta=0⟩ (pure DP): auto uses ⟨mechanism='pure-blanket'⟩, one key per unit; drop "
            f"⟨max_groups_per_unit⟩ (or set it to 1), or pass ⟨delta⟩ > 0 to keep {request.max_groups_per_unit} keys "
            f"per unit", param="max_groups_per_unit")
    mech.check(request)
    cal = mech.calibrate(request)
    reason = ("delta=0: pure-blanket is the pure epsilon-DP mechanism (linear time, optimal error; one key per "
              "unit); the Balcer–Vadhan ones (pure-sparse, compact) are quadratic and run only by name")
    return mech, cal, reason, ({"mechanism": mech.name, "analysis": "blanket"},)


@register
@dataclass(frozen=True)
class Auto(Mechanism):
    """``mechanism="auto"``: among the registered mechanisms marked ``auto_candidate`` that accept the
    request (today GSHM and the Laplace stability histogram, given ``max_groups_per_unit``), the one with
    the lowest release threshold at the requested (ε, δ); ties go to the lower noise. See the module
    docstring for why the margins are comparable. The report names the winner, every candidate and why.

    ``group`` (with ``keys=``): a column of ``by`` whose values group the listed keys; Lebeda (2024)'s grouped
    mechanism (each unit kept in one group) then joins the public-key candidates.

    ``objective`` (issue 33): ``"counts"`` (default) chooses among the mechanisms that publish counts, by the
    lowest threshold margin (above). ``"keys"`` chooses among ALL key-selection mechanisms — every registered
    class offered in :attr:`AutoRole.DISCOVERY <sparsedp.mechanisms.base.AutoRole>` (the Weighted Gaussian set
    union today, :class:`~sparsedp.mechanisms.set_union.WeightedGaussian`, and any selection mechanism registered
    in that role) and the count mechanisms used as selectors — by the most expected released keys, measured by
    the count-equivalent release threshold keep50 = pre-threshold + margin: a key held by n units that fill the
    bound is released with probability ≥ 1/2 from n = keep50 on, so the lowest keep50 releases the most keys of
    any data whose keys' counts are spread over many values (:func:`_pick_keys`). The choice is data-independent:
    no budget is spent on it (a private choice from the data costs a share of ε, which on the benchmark corpora
    lost 4–8 % of the keys when choosing l0: ``benchmarks/auto_bound_choice.py``, while the mechanisms' release
    curves at one bound differ in their thresholds, which need no data). The winner may publish key weights or no
    values at all: the report says what it publishes. ``discover=True`` is the older spelling of
    ``objective="keys"``."""

    group: str | None = None
    discover: bool = False
    objective: str = "counts"
    name = "auto"

    def __post_init__(self) -> None:
        if self.objective not in OBJECTIVES:
            raise InvalidParameterError(f"⟨objective⟩ of mechanism 'auto' must be one of {OBJECTIVES} ('keys': the "
                                        f"most released keys, 'counts': the lowest threshold among the mechanisms "
                                        f"that publish counts), got {self.objective!r}", param="objective")
        if self.discover:
            object.__setattr__(self, "objective", "keys")

    @property
    def for_keys(self) -> bool:
        """The keys objective (``objective="keys"`` or ``discover=True``)."""
        return self.objective == "keys"

    def options(self) -> dict[str, Any]:
        return {k: x for k, x in (("group", self.group), ("discover", self.discover),
                                  ("objective", None if self.objective == "counts" or self.discover
                                   else self.objective)) if x}
    supports_aggregates = True  # resolves among the candidates that support them
    bounded = True
    resolves_public_keys = True
    auto_bound_objectives = ("quantile", "keys")

    @classmethod
    def with_top_k(cls, spec: Mechanism | None, k: int, bound_given: bool) -> Mechanism:
        """``top_k=k`` with ``auto``: the top-k mechanism (the one registered mechanism ``top_k`` configures)."""
        if spec is not None and spec != cls():
            return super().with_top_k(spec, k, bound_given)
        return TopKCSH(k=k)

    def validate(self, request: UserRequest) -> None:
        if request.bound is None and request.auto_bound is None and request.keys is None and request.delta != 0:
            # δ = 0: the pure mechanisms, one key per unit
            raise InvalidParameterError(
                "declare a contribution bound: ⟨max_groups_per_unit=…⟩ (keys per unit, e.g. 10) or ⟨top_k=…⟩ "
                "(release the top-k keys, e.g. 100)", param="max_groups_per_unit")
        super().validate(request)

    def resolve(self, request: ReleaseRequest) -> Resolved:
        """``(chosen mechanism, its calibration, reason, candidates)``: calibrates every candidate."""
        if request.keys is not None:
            return _resolve_public(request, self.group)
        if self.group is not None:
            raise InvalidParameterError("auto's group=… groups a public key list: pass keys=[…] too")
        if request.delta == 0 and not self.for_keys:
            return _resolve_pure(request)
        self.check(request)
        mechs = {cls.name: cls() for cls in auto_candidates()
                 if cls.supports_aggregates or not request.aggregates}  # SUM/MEAN: only those releasing them
        if self.for_keys:
            mechs.update(_offers(AutoRole.DISCOVERY, request, None))
        tried: dict[str, Any] = {}
        for name, mech in mechs.items():
            try:
                mech.check(request)
                tried[name] = mech.calibrate(request)
            except (InfeasibleError, InvalidParameterError) as e:
                tried[name] = e
        if self.for_keys:
            best, reason, cands = _pick_keys(tried, mechs, request.epsilon, request.delta)
        else:
            best, reason, cands = _pick(tried, request.epsilon, request.delta)
        if request.aggregates:
            reason += " (SUM/MEAN requested: only mechanisms that release aggregate columns were considered)"
        mech, cal = mechs[best], tried[best]
        return mech, cal, reason, tuple(cands)

    def calibrate(self, request: ReleaseRequest) -> Any:
        return self.resolve(request)[1]

    def disclosure(self, request: ReleaseRequest, calibration: Any,
                   value_column: str) -> Disclosure:  # pragma: no cover - resolved before use
        raise NotImplementedError("auto is resolved to a concrete mechanism before it is described")

    def run(self, engine: Engine, hist: Any, calibration: Any, disclosure: Disclosure, rng: SecureRandom,
            request: ReleaseRequest) -> Released:  # pragma: no cover - resolved first
        raise NotImplementedError("auto is resolved to a concrete mechanism before it runs")

