"""Privacy accounting of the adaptive-weighting set unions ``mad`` and ``mad2r`` (after Chen, Cohen-Addad, Epasto &
Zadimoghaddam, "Scalable Private Partition Selection via Adaptive Weighting", ICML 2025, arXiv:2502.08878), with
the integer noise actually sampled.

sparsedp's secure versions run ``R`` rounds of the discrete Weighted Gaussian (:mod:`.set_union`), round ``r``
on the keys no earlier round released: each unit drops its released keys, keeps at most ``Δ0`` of the rest (a
fresh ℓ0 choice) and gives each of its ``t_r`` kept keys ``W_{t_r} = floor(G/√t_r)`` — a unit whose keys were
released early ("far above the threshold") puts its whole ℓ2 budget on its remaining keys (its *adaptive
degree* ``t_r`` is smaller). Round ``r`` adds exact ``N_Z(0, s_r)`` noise and releases ``S + Z >= T_r``.

**Each round's profile is the Weighted Gaussian's exact one** (``docs/proofs/set-union.md`` Theorem 1) given the
earlier rounds' output: a unit's round-``r`` weights are a function of its own rows, the public released keys
and a fresh secret, so adding one unit changes exactly its own kept keys' sums, by ``W_{t_r}`` each
(``docs/proofs/mad.md`` Lemma 1). The rounds compose adaptively: the release is charged as a
:class:`~.events.SequenceEvent` of the rounds' :class:`~.events.SetUnionEvent` s, whose privacy-loss
distributions the ledger composes (Dong, Roth & Su, "Gaussian differential privacy", JRSS-B 2022,
arXiv:1905.02383, Thm 3.2), and :func:`calibrate_rounds` checks that composition, not a proxy, at (ε, δ).

Calibration (``docs/proofs/mad.md`` §3): with ``s*`` the Weighted Gaussian's scale at ``(ε, a·δ)``
(:func:`.set_union.weighted_gaussian_scale`, ``a = 0.6``), round ``r`` gets ``s_r = s*/f_r`` for its share ``f_r``
(``Σ f_r = 1``: the rounds' Gaussian parts compose like one Weighted Gaussian at ``s*``) and the smallest
threshold ``T_r`` whose new-key term ``max_t 1 − (1 − P[Z_r >= T_r − W_t])^t`` is at most ``q_r·(1 − a)·δ``
(``q``: the rounds' shares of the new-key budget, 10 % to the earlier rounds together and 90 % to the last,
whose threshold decides the keys near the threshold); the composed δ(ε) is then computed, the slack
``δ − δ(ε)`` given (90 % of it) to the last round's target once, kept only if the composition still meets δ;
``a`` is lowered until the composition meets δ. One round (``shares=(1.0,)``) is the Weighted Gaussian's own
calibration and exact event (:func:`one_round`; ``docs/proofs/mad.md`` §3, §8).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from fractions import Fraction

from .. import _validate as v
from ..errors import InfeasibleError, InvalidParameterError
from .calibration import Comparison, Neighbours
from .discrete import dgauss_sf, dgauss_variance
from .discrete_histograms import _smallest_margin, rational_up
from .events import PrivacyEvent, SequenceEvent, event_of
from .laws import DiscreteGaussian
from .set_union import (SetUnionCalibration, calibrate_weighted_gaussian, grid_weights, weighted_gaussian_delta,
                        weighted_gaussian_scale)

__all__ = ["RoundsCalibration", "calibrate_rounds", "one_round", "last_threshold_floor", "new_key_shares",
           "new_key_term", "new_key_threshold", "round_of", "rounds_event", "MAX_L0"]

#: the composed profile is sampled from each round's exact profile (41 points, each a max over t = 1..Δ0):
#: a calibration evaluates three rounds' exact profiles at 41 ε points each: about 11 s at Δ0 = 32, 107 s at 100
#: and 170 s at 256 on one loaded core (docs/proofs/mad.md §8); the rounds are offered up to this bound
MAX_L0 = 256


def new_key_term(sigma2: Fraction, l0: int, grid: int, threshold: int) -> float:
    """``max_{1<=t<=Δ0} 1 − (1 − P[Z >= T − W_t])^t`` at ``T = threshold``, ``Z ~ N_Z(0, sigma2)``: the
    probability that a unit's ``t`` new keys (held by no other unit, weight ``W_t`` each) release anything (the
    "infinite" term of ``docs/proofs/set-union.md`` Theorem 1)."""
    ws = grid_weights(l0, grid)
    s = float(sigma2)
    return max(-math.expm1(t * math.log1p(-min(dgauss_sf(threshold - int(ws[t - 1]), s), 1.0 - 1e-300)))
               for t in range(1, l0 + 1))


def new_key_threshold(sigma2: Fraction, l0: int, grid: int, target: float) -> int:
    """The smallest integer threshold ``T`` with :func:`new_key_term` ``<= target``."""
    return _smallest_margin(lambda thr: new_key_term(sigma2, l0, grid, thr), target,
                            int(grid_weights(l0, grid)[0]) + 1)


@dataclass(frozen=True)
class RoundsCalibration:
    """An adaptive-weighting calibration: ``rounds`` (one :class:`~.set_union.SetUnionCalibration` per round, each
    charged at (ε, its own δ(ε)); its ``noise`` and ``threshold_int`` are what round r samples and compares),
    ``shares`` (each round's share ``f_r`` of the Gaussian budget), ``gauss_fraction`` (the ``a`` the search
    settled on), ``delta_achieved`` (the composed δ(ε) of the rounds, <= δ), ``new_key_targets`` (the bound on
    each round's new-key term that fixed its threshold: ``T_r = new_key_threshold(s_r, Δ0, G, target_r)``).

    ``sigma``/``tau``/``noise_std`` are the last round's count-equivalent figures (``plan`` and ``auto`` compare
    them with GSHM's); ``kernel(r)`` is round r's per-key kernel calibration."""

    mechanism: str
    analysis: str
    epsilon: float
    delta: float
    rounds: tuple[SetUnionCalibration, ...]
    shares: tuple[float, ...]
    gauss_fraction: float
    delta_achieved: float
    l0: int
    grid: int
    new_key_targets: tuple[float, ...] = ()

    @property
    def sigma(self) -> float:
        return self.rounds[-1].sigma

    @property
    def tau(self) -> float:
        return self.rounds[-1].tau

    @property
    def noise_std(self) -> float:
        return self.rounds[-1].noise_std

    @property
    def delta_parts(self) -> dict[str, float]:
        return {f"round {i + 1}": float(c.delta_achieved) for i, c in enumerate(self.rounds)}

    @property
    def comparison(self) -> Comparison:
        return Comparison.GE

    @property
    def noise(self) -> DiscreteGaussian:
        """The last round's law (in grid units; every round samples a :class:`~.laws.DiscreteGaussian`)."""
        law = self.rounds[-1].noise
        assert isinstance(law, DiscreteGaussian)  # round_of builds one
        return law

    @property
    def discrete(self) -> bool:
        """Exact integer noise from the CSPRNG in every round."""
        return True

    @property
    def neighbours(self) -> Neighbours:
        return Neighbours.ADD_REMOVE

    debias = False
    k = None
    top_k = None
    d = None

    def event(self) -> PrivacyEvent:
        """The ledger event: the rounds' exact events in sequence, charged at (ε, δ) (one round: its own exact
        Weighted Gaussian event, the one ``weighted-gaussian`` charges)."""
        return rounds_event(self.rounds, self.epsilon, self.delta)

    def release_probability(self, round_sums: tuple[int, ...]) -> float:
        """The probability that a key is released, given its integer weight sum (grid units) in each round it
        reaches, rounds independent given the sums: ``1 − Π_r P[S_r + Z_r < T_r]``. With the sums a key's units
        give it in round r (each ``W_{t_r}`` for a unit's adaptive degree ``t_r``), this is the exact release
        probability of that key when the other keys' round outcomes fix the ``t_r`` (a public, hypothetical
        profile: what ``auto`` compares)."""
        miss = 1.0
        for cal, s in zip(self.rounds, round_sums):
            miss *= 1.0 - dgauss_sf(int(cal.threshold_int) - int(s), float(cal.grid_sigma2))
        return 1.0 - miss


def rounds_event(rounds: tuple[SetUnionCalibration, ...], epsilon: float, delta: float) -> PrivacyEvent:
    """The rounds as one charge: a :class:`~.events.SequenceEvent` of their exact set-union events (each one's
    parameters are fixed before any round is run), charged at (ε, δ); one round is charged as its own exact
    :class:`~.events.SetUnionEvent` (no composition to sample: the Weighted Gaussian's charge)."""
    if len(rounds) == 1:
        return event_of(rounds[0])
    return SequenceEvent([event_of(c) for c in rounds], epsilon=epsilon, delta=delta)


def round_of(name: str, eps: float, s: Fraction, thr: int, l0: int, grid: int) -> SetUnionCalibration:
    """One round at scale ``s`` (grid units) and integer threshold ``thr``: its exact Weighted Gaussian profile
    at ε (:func:`~.set_union.weighted_gaussian_delta`, with its parts) as a
    :class:`~.set_union.SetUnionCalibration` charged at (ε, that δ(ε)); a function of its arguments only, so a
    stored calibration's rounds can be rebuilt from their ``(s, T)`` (:mod:`.rounds_cache`)."""
    d, info = weighted_gaussian_delta(eps, s, thr, l0, grid, parts=True)
    sf = float(s)
    root = math.sqrt(l0) / grid  # count-equivalent units, as SetUnionCalibration
    return SetUnionCalibration(
        mechanism=name, analysis="discrete-exact", epsilon=eps, delta=max(d, 1e-300),
        sigma=math.sqrt(sf) * root, tau=thr * root - 1.0, noise_std=math.sqrt(dgauss_variance(s)) * root,
        noise=DiscreteGaussian(s), comparison=Comparison.GE,
        delta_parts={"infinite": info["infinite"], "forward": info["forward"], "reverse": info["reverse"]},
        delta_achieved=d, l0=l0, grid=grid, threshold_int=thr)


def new_key_shares(rounds: int) -> tuple[float, ...]:
    """Each round's share ``q_r`` of the new-key budget ``(1 − a)·δ``: 10 % to the earlier rounds together (equal
    parts), 90 % to the last (one round: all of it). The earlier rounds release only keys far above their
    thresholds (their noise is large), so a higher threshold there costs little; the last round's threshold
    decides the keys near it (``docs/proofs/mad.md`` §3, §7)."""
    n = int(rounds)
    return (1.0,) if n == 1 else tuple([0.1 / (n - 1)] * (n - 1) + [0.9])


def _rounds_at(name: str, eps: float, s_star: Fraction, fs: tuple[float, ...], targets: tuple[float, ...], l0: int,
               grid: int) -> tuple[SetUnionCalibration, ...]:
    out = []
    for f, target in zip(fs, targets):
        s = rational_up(float(s_star) / f)
        out.append(round_of(name, eps, s, new_key_threshold(s, l0, grid, target), l0, grid))
    return tuple(out)


def last_threshold_floor(epsilon: float, delta: float, l0: int, shares: tuple[float, ...], grid: int = 4096) -> int:
    """A lower bound on the last round's integer threshold of every calibration :func:`calibrate_rounds` can
    return at (ε, δ) — without the composed profile (milliseconds instead of seconds): the Gaussian fraction is
    at most 0.6, so ``s* >= weighted_gaussian_scale(ε, 0.6·δ)`` and the last scale ``s_R >= s*/f_R``; the
    composed δ(ε) is at least the last round's new-key term (the probability of an infinite privacy loss only
    grows under composition), which is at most δ, so ``T_R >= new_key_threshold(s_R, Δ0, G, δ)`` (the term falls
    as T rises and grows with the scale). The scale is taken 0.1 % lower than that bound, for the 0.01 % grid of
    :func:`~.set_union.weighted_gaussian_scale`. One round is the Weighted Gaussian's own calibration (scale
    ``weighted_gaussian_scale(ε, δ)``, fraction 1): the same bound with ``δ`` in place of ``0.6·δ``.
    ``docs/proofs/mad.md`` §3."""
    eps = v.epsilon(epsilon)
    dlt = v.delta(delta)
    k = v.integer("max_groups_per_unit", l0, lo=1)
    g = v.integer("grid", grid, lo=1)
    s_star = weighted_gaussian_scale(eps, (1.0 if len(shares) == 1 else 0.6) * dlt, k, g)
    s_last = Fraction(float(s_star) / float(shares[-1]) * 0.999)
    return new_key_threshold(s_last, k, g, dlt)


def one_round(name: str, epsilon: float, delta: float, l0: int, grid: int = 4096) -> RoundsCalibration:
    """One round: exactly the Weighted Gaussian's calibration (:func:`~.set_union.calibrate_weighted_gaussian`:
    the same scale ``s`` and integer threshold ``T``, the same grid weights) and its exact event. A single round
    of fresh noise has nothing to compose, so no Gaussian/new-key split of δ is needed: its profile is WG
    Theorem 1's maximum, which is what the Weighted Gaussian is calibrated on (``docs/proofs/mad.md`` §8)."""
    wg = calibrate_weighted_gaussian(epsilon, delta, l0, grid)
    one = dataclasses.replace(wg, mechanism=name)
    return RoundsCalibration(mechanism=name, analysis="discrete-exact-rounds", epsilon=wg.epsilon, delta=wg.delta,
                             rounds=(one,), shares=(1.0,), gauss_fraction=1.0,
                             delta_achieved=float(wg.delta_achieved), l0=wg.l0 or l0, grid=wg.grid,
                             new_key_targets=(float(wg.delta),))


def calibrate_rounds(name: str, epsilon: float, delta: float, l0: int, shares: tuple[float, ...],
                     grid: int = 4096) -> RoundsCalibration:
    """The rounds of ``name`` at (ε, δ) (module docstring; ``docs/proofs/mad.md`` §3): the Gaussian fraction
    ``a`` starts at 0.6 and is multiplied by 0.7 until the composed δ(ε) is at most δ (at most 8 tries); the
    new-key targets ``q_r·(1 − a)·δ`` (:func:`new_key_shares`), then the last one raised once by 90 % of the
    composition's slack if the composition still meets δ. Every candidate is checked by the composed δ(ε) of
    its own thresholds: the slack step changes the efficiency, never the guarantee. One share ``(1.0,)``: the
    Weighted Gaussian's own calibration (:func:`one_round`)."""
    eps = v.epsilon(epsilon)
    dlt = v.delta(delta)
    k = v.integer("max_groups_per_unit", l0, lo=1)
    g = v.integer("grid", grid, lo=1)
    fs = tuple(float(f) for f in shares)
    if not fs or any(not (0 < f <= 1) for f in fs) or abs(math.fsum(fs) - 1.0) > 1e-9:
        raise InvalidParameterError(f"shares must be positive and sum to 1, got {shares!r}")
    if len(fs) == 1:
        return one_round(name, eps, dlt, k, g)
    qs = new_key_shares(len(fs))
    a = 0.6
    for _ in range(8):
        s_star = weighted_gaussian_scale(eps, a * dlt, k, g)
        targets = tuple(q * (1.0 - a) * dlt for q in qs)
        rounds = _rounds_at(name, eps, s_star, fs, targets, k, g)
        achieved = float(rounds_event(rounds, eps, dlt).delta_at(eps))
        if achieved <= dlt:
            wider = targets[:-1] + (targets[-1] + 0.9 * (dlt - achieved),)
            more = _rounds_at(name, eps, s_star, fs, wider, k, g)
            if more[-1].threshold_int < rounds[-1].threshold_int:
                got = float(rounds_event(more, eps, dlt).delta_at(eps))
                if got <= dlt:
                    rounds, achieved, targets = more, got, wider
            return RoundsCalibration(mechanism=name, analysis="discrete-exact-rounds", epsilon=eps, delta=dlt,
                                     rounds=rounds, shares=fs, gauss_fraction=a, delta_achieved=achieved,
                                     l0=k, grid=g, new_key_targets=targets)
        a *= 0.7
    raise InfeasibleError(f"{name}: no calibration of {len(fs)} rounds meets epsilon={eps}, delta={dlt} at "
                          f"max_groups_per_unit={k}")
