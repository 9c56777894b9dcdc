"""Adaptive-weighting set union (after Chen, Cohen-Addad, Epasto & Zadimoghaddam, "Scalable Private Partition
Selection via Adaptive Weighting", ICML 2025, arXiv:2502.08878) as registered key-discovery mechanisms.

Both run rounds of the secure discrete Weighted Gaussian (:mod:`.set_union`), each round on the keys no earlier
round released, and publish every round's released keys with their noisy weight (column ``weight``, not a
count). A unit whose keys were released early — the keys far above the threshold — moves its whole ℓ2 budget to
its other keys: with ``t`` of them left it gives each ``W_t = floor(G/√t)`` instead of ``W_{t_0}`` (its
*adaptive degree* t is smaller), which raises the weight of the rarer keys it holds.

* ``mad`` (:class:`MAD`): one ℓ0 choice (round 1's); a later round keeps each unit's kept keys that are not
  released yet and re-weights them (weight rerouted within the kept set), so a key's weight only grows from round
  to round (``docs/proofs/mad.md`` Lemma 5). At Δ0 = 1 nothing can be re-weighted and ``mad`` runs one round,
  the Weighted Gaussian itself (same calibration, charge and table for the same source; §8 Corollary 7).
* ``mad2r`` (:class:`MAD2R`): the later round also re-chooses: each unit keeps up to Δ0 of *all* its keys not
  released yet, so keys dropped by round 1's ℓ0 bound get a second chance (the first round biases the second's
  choice).

The default Gaussian shares ``(0.15, 0.85)``: round 1 is noisy (it releases the keys far above the threshold),
round 2 gets most of the budget. Accounting: :mod:`sparsedp.accounting.adaptive_weighting` (each round's exact
Weighted Gaussian profile given the earlier rounds' output, composed by the ledger's
:class:`~sparsedp.accounting.events.SequenceEvent`); proofs ``docs/proofs/mad.md``.

Engine primitives: :meth:`~sparsedp.core.engine.Engine.round_histogram` (round 1, with what the later rounds read)
and :meth:`~sparsedp.core.engine.Engine.next_round`, with the engines' one keyed ℓ0 choice (the embedded engines:
the count-only release's path, the input read once into integer pair ids and each round a pass over them,
:func:`sparsedp.engines.pair_ids.weighted_round`; Spark: the per-unit definition
:func:`sparsedp.engines.pairs.round_key_sums` in its tasks; the same kept pairs and sums). Order of
the secrets drawn from the release's source: round 1's ℓ0 secret (in :meth:`~_Rounds.histogram`, after every
input check, before the charge), then in :meth:`~_Rounds.run` round 1's ``K_noise``, and for each later round
its ℓ0 secret (``mad2r`` only: ``mad`` keeps round 1's) and its ``K_noise``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from .. import _validate as v
from ..accounting.adaptive_weighting import MAX_L0, RoundsCalibration, last_threshold_floor
from ..accounting.charge import Charge
from ..accounting.rounds_cache import cached_rounds
from ..accounting.set_union import grid_weights
from ..core.bounded import RoundsInput
from ..core.engine import Capability, Engine
from ..errors import InfeasibleError, InvalidParameterError
from ..noise.source import SecureRandom
from .base import AutoRole, Disclosure, Mechanism, Released, ReleaseRequest, UserRequest
from .registry import register
from .set_union import _SetUnion
from .set_union import _calibrate as _calibrate_set_union
from .thresholded import _key_task

__all__ = ["MAD", "MAD2R", "RoundsHistogram", "rounds_candidates", "PLAN_MAX_L0"]

_VALUE = "__sparsedp_value"


#: ``sd.plan`` and ``sd.Auto(discover=True)`` consider ``mad``/``mad2r`` up to this bound: their calibration (the
#: composed profile of two rounds, shared by both) takes about 2 s at Δ0 = 10 and 18 s at 32 on a loaded core;
#: ``mechanism="mad"``/``"mad2r"`` calibrate up to :data:`~sparsedp.accounting.adaptive_weighting.MAX_L0`
PLAN_MAX_L0 = 10


def rounds_candidates(request: ReleaseRequest) -> dict[str, Mechanism]:
    """What ``sd.Auto(discover=True)`` and ``sd.plan`` add (as :func:`.set_union.discovery_candidates`, up to
    :data:`PLAN_MAX_L0` keys per unit)."""
    l0 = request.max_groups_per_unit
    if request.aggregates or request.keys is not None or request.insecure_float or l0 is None or l0 > PLAN_MAX_L0:
        return {}
    return {MAD.name: MAD(), MAD2R.name: MAD2R()}


def _calibrate(name: str, epsilon: float, delta: float, l0: int, shares: tuple[float, ...],
               grid: int) -> RoundsCalibration:
    """The rounds' calibration (the same for ``mad`` and ``mad2r``: one computation, kept in the process and in
    the on-disk calibration cache, :mod:`sparsedp.accounting.rounds_cache`), named ``name``."""
    return dataclasses.replace(cached_rounds("adaptive-weighting", epsilon, delta, l0, shares, grid), mechanism=name)


@dataclass(frozen=True)
class RoundsHistogram:
    """Round 1's weighted histogram (the engine's, curator only) and what the later rounds read
    (:class:`~sparsedp.core.bounded.RoundsInput`: the engine's handle on the checked input, round 1's ℓ0 secret,
    the unit and key columns). ``stats``: round 1's bounding statistics."""

    first: Any
    rounds: RoundsInput = field(repr=False)

    @property
    def stats(self) -> Any:
        return self.first.stats


class _Rounds(_SetUnion):
    """What ``mad`` and ``mad2r`` share (module docstring); ``rechoose``: a later round re-chooses among all the
    unit's keys not released yet (``mad2r``) rather than keeping round 1's choice (``mad``)."""

    shares: tuple[float, ...] = (0.15, 0.85)
    grid: int = 4096
    rechoose = False
    discovery = True
    auto_role = AutoRole.DISCOVERY

    def __post_init__(self) -> None:
        sh = self.shares
        if not isinstance(sh, (tuple, list)) or not 1 <= len(sh) <= 4:
            raise InvalidParameterError(f"shares must be a tuple of 1 to 4 positive numbers summing to 1 (each "
                                        f"round's share of the Gaussian budget), got {sh!r}")
        fs = tuple(v.positive("shares", f) for f in sh)
        if abs(sum(fs) - 1.0) > 1e-9:
            raise InvalidParameterError(f"shares must sum to 1 (each round's share of the Gaussian budget), got "
                                        f"{sh!r}")
        object.__setattr__(self, "shares", fs)
        object.__setattr__(self, "grid", v.integer("grid", self.grid, lo=1, hi=1 << 20))

    @classmethod
    def auto_offer(cls, request: ReleaseRequest, group: str | None) -> Mechanism | None:
        """Offered by ``sd.Auto(objective="keys")`` (:func:`rounds_candidates`) unless it cannot win there: auto
        ranks selections by the count-equivalent threshold, and when the last round's threshold is provably at or
        above the Weighted Gaussian's (:func:`~sparsedp.accounting.adaptive_weighting.last_threshold_floor`, no
        composed profile computed) the rounds' seconds-long calibration is skipped (``docs/proofs/mad.md`` §3). Not
        offered when it runs one round (``mad`` at Δ0 = 1): that is the Weighted Gaussian, a candidate already."""
        mech = rounds_candidates(request).get(cls.name)
        if mech is None or not isinstance(mech, _Rounds):
            return mech
        l0 = int(request.max_groups_per_unit or 0)
        if len(mech.rounds_shares(l0)) == 1:
            return None  # one round is the Weighted Gaussian itself, already a candidate (§8 Corollary 7)
        try:
            wg = _calibrate_set_union(float(request.epsilon), float(request.delta), l0, int(mech.grid))
            floor = last_threshold_floor(request.epsilon, request.delta, l0, mech.rounds_shares(l0), mech.grid)
        except (InfeasibleError, InvalidParameterError):
            return mech
        return None if floor >= wg.threshold_int else mech

    @classmethod
    def plan_rows(cls, query: Any) -> list[tuple[Mechanism, Any, int]]:
        """Both rounds mechanisms (one implementation, planned once: :func:`~.catalog.planners`), up to
        :data:`PLAN_MAX_L0` keys per unit."""
        if query.d is not None or query.delta == 0 or query.l0 is None or query.l0 > PLAN_MAX_L0:
            return []
        req = query.request()
        rows: list[tuple[Mechanism, Any, int]] = []
        for m in rounds_candidates(req).values():
            try:
                rows.append((m, m.calibrate(req), cls.plan_group))
            except InfeasibleError:
                continue
        return rows

    def check(self, request: ReleaseRequest) -> None:
        super().check(request)
        if request.insecure_float:
            raise InvalidParameterError(f"{self.name} samples exact discrete noise only; drop insecure_float=True")
        l0 = request.max_groups_per_unit
        assert l0 is not None  # Mechanism.check refused None
        if l0 > MAX_L0:
            raise InvalidParameterError(
                f"⟨mechanism={self.name!r}⟩ is calibrated up to max_groups_per_unit={MAX_L0} (its composed "
                f"profile costs minutes above that); got {l0}: use mechanism='weighted-gaussian' for "
                f"larger bounds", param="max_groups_per_unit")
        if self.grid * self.grid < l0:
            raise InvalidParameterError(f"grid={self.grid} is too coarse for max_groups_per_unit={l0}: need "
                                        f"grid^2 >= max_groups_per_unit")

    def rounds_shares(self, l0: int) -> tuple[float, ...]:
        """The Gaussian shares the release runs with at ``l0`` keys per unit: :attr:`shares`, except ``mad`` at
        Δ0 = 1, which runs one round, the Weighted Gaussian itself (``(1.0,)``): a unit keeps at most one key
        and ``mad`` keeps round 1's choice, so a later round re-weights nothing (a unit's one key is released or
        keeps its weight ``W_1``) and would only repeat round 1 with a split budget (``docs/proofs/mad.md`` §8,
        Corollary 7). ``mad2r`` re-chooses, so its later rounds can move a unit to another key."""
        return (1.0,) if l0 == 1 and not self.rechoose else tuple(self.shares)

    def calibrate(self, request: ReleaseRequest) -> RoundsCalibration:
        assert request.max_groups_per_unit is not None
        l0 = int(request.max_groups_per_unit)
        return _calibrate(self.name, float(request.epsilon), float(request.delta), l0, self.rounds_shares(l0),
                          int(self.grid))

    def charge(self, calibration: Any, disclosure: Disclosure) -> Any:
        """The rounds' exact set-union events in sequence (:meth:`RoundsCalibration.event`)."""
        return Charge.of_event(calibration.event(), self.name)

    def disclosure(self, request: ReleaseRequest, calibration: Any, value_column: str) -> Disclosure:
        cal: RoundsCalibration = calibration
        g = cal.grid
        last = cal.rounds[-1]
        rounds = "; ".join(f"round {i + 1}: noise N_Z(0, {float(c.grid_sigma2):.6g}) (std {c.weight_noise_std:.4g}), "
                           f"released iff weight >= {c.threshold_int / g:.6g}" for i, c in enumerate(cal.rounds))
        how = ("re-choose up to Δ0 of all their keys not released yet" if self.rechoose
               else "keep round 1's kept keys that are not released yet")
        later = (f"; in a later round units {how}" if len(cal.rounds) > 1 else
                 " (one round: nothing to re-weight at this bound, the Weighted Gaussian's calibration)")
        composed = ("the rounds' exact profiles composed" if len(cal.rounds) > 1
                    else "the Weighted Gaussian's exact profile")
        return Disclosure(
            mechanism=self.name, analysis=cal.analysis, epsilon=cal.epsilon, delta=cal.delta,
            delta_achieved=float(cal.delta_achieved), neighbours=self.neighbours,
            contribution=(f"at most {request.max_groups_per_unit} keys per unit in each of {len(cal.rounds)} "
                          f"round{'s' if len(cal.rounds) > 1 else ''}, each of a unit's t kept keys weighted floor({g}/sqrt(t))/{g}{later}"),
            value_column=value_column, delta_parts=cal.delta_parts, sigma=last.weight_sigma,
            noise_std=last.weight_noise_std, threshold=last.threshold_int / g, margin=(last.threshold_int - 1) / g,
            pre_threshold=None, comparison=">=",
            notes=(f"adaptive-weighting set union (after Chen, Cohen-Addad, Epasto & Zadimoghaddam, ICML 2025): values "
                   f"are noisy key weights in the round that released the key, not counts; {rounds}; Gaussian "
                   f"shares {', '.join(f'{f:g}' for f in cal.shares)}; {composed} (docs/proofs/mad.md)",))

    def needs(self, request: UserRequest) -> frozenset[Capability]:
        return frozenset({Capability.ROUNDS})  # Engine.round_histogram: the embedded engines and Spark

    def histogram(self, engine: Engine, data: Any, privacy_unit: str | None, by: list[str],
                  request: ReleaseRequest, rng: SecureRandom, **extra: Any) -> RoundsHistogram:
        """Round 1's weighted histogram (every input check happens here, before the ℓ0 secret is drawn and
        before anything is charged)."""
        unit = self._need_unit(privacy_unit)
        l0 = int(request.max_groups_per_unit or 0)
        first, rounds = engine.round_histogram(data, unit, list(by), l0, grid_weights(l0, self.grid).tolist(), rng)
        return RoundsHistogram(first=first, rounds=rounds)

    def run(self, engine: Engine, hist: Any, calibration: Any, disclosure: Disclosure, rng: SecureRandom,
            request: ReleaseRequest) -> Released:
        """Each round: its weighted histogram on the keys no earlier round released (round 1's is ``hist``; the
        later ones on the input the engine read once, :meth:`~sparsedp.core.engine.Engine.next_round`), the
        per-key kernel (``K_noise`` drawn per round), the released keys collected (few) and excluded next."""
        import pyarrow as pa
        import pyarrow.compute as pc

        h: RoundsHistogram = hist
        cal: RoundsCalibration = calibration
        by = list(h.rounds.by)
        tables, found = [], []
        excluded: Any = None
        for r, rc in enumerate(cal.rounds):
            rh = h.first if r == 0 else engine.next_round(h.rounds, excluded, not self.rechoose, rng)
            try:
                task = _key_task(rc.kernel(), 1, rng, False)  # rule S >= 1 and S + Z >= 1 + (T_r − 1)
                table = engine.to_arrow(engine.noise_keys(rh, task), by, _VALUE)
            finally:
                engine.release_resources(rh)
            keys = table.select(by)
            excluded = keys if excluded is None else pa.concat_tables([excluded, keys])
            found.append(int(table.num_rows))
            values = pc.divide(pc.cast(table.column(_VALUE), pa.float64()), float(cal.grid))
            tables.append(keys.append_column(disclosure.value_column, values))
        out = pa.concat_tables(tables)
        note = "keys released by round: " + ", ".join(str(n) for n in found)
        return Released(rows=out, disclosure=disclosure.with_notes(note), in_process=True)


@register
@dataclass(frozen=True)
class MAD(_Rounds):
    """Adaptive-weighting set union with weight rerouted inside each unit's kept keys (module docstring). Needs
    ``max_groups_per_unit`` (Δ0 <= 256); at Δ0 = 1 it is the Weighted Gaussian (one round).

    Options: ``shares`` (default ``(0.15, 0.85)``: each round's share of the Gaussian budget, 1 to 4 rounds),
    ``grid`` (default 4096: weights are multiples of ``1/grid``, each ``1/√t`` rounded down).

    The released value column is ``weight`` (the key's noisy weight in the round that released it), not a
    count."""

    shares: tuple[float, ...] = (0.15, 0.85)
    grid: int = 4096
    name = "mad"
    rechoose = False


@register
@dataclass(frozen=True)
class MAD2R(_Rounds):
    """Two-round adaptive-weighting set union: round 2 re-chooses each unit's keys among all those not released
    in round 1 (module docstring). Needs ``max_groups_per_unit`` (Δ0 <= 256). Options as :class:`MAD`.

    The released value column is ``weight``, not a count."""

    shares: tuple[float, ...] = (0.15, 0.85)
    grid: int = 4096
    name = "mad2r"
    rechoose = True
