"""Audit target of the ALP structure (``alp``: :func:`sparsedp.alp`, ALP-Projection of Lebeda (2023) PhD thesis
Ch. 2, Algorithms 2/4 = Aumüller, Lebeda & Pagh, "Representing sparse vectors with differential privacy, low
error, optimal space, and fast access" (2022, arXiv 2106.10068); pure ε-DP, δ = 0).

Not a registered mechanism (its output is a structure, not a table): each release is the whole public function
``sparsedp.alp(rows, "uid", "key", epsilon=ε, delta=0, k=1, u=U, rng=…)`` on a tiny table of one key held by
``c`` units (one row each), so the engine's bounding and counting, RandRound, the hash family and the
randomized response are the code a user runs. ``k = 1`` is public (the §2.10 private estimate of k would make the
number of rows s data dependent; its discrete Laplace draw is audited elsewhere). ``U`` = :data:`_U` gives
``m = ⌈U·ε/α⌉`` columns and ``s = 10`` rows at the defaults (α = 3, collision 0.1).

Output read per release: ``N_key``, the number of set bits among the key's m cells ``(b, h_b(key))`` (the released
hash functions locate them), and ``N_rest``, the set bits of the other ``s·m − m`` cells (one key: those are
randomized response of 0 only).

Exact law (thesis Alg. 2/4): ``y = RandRound(x·r)`` with ``r`` = ε/α rounded down (``⌊x r⌋ + 1`` with probability
``frac(x r)``), key bits ``1{b < y}`` XOR Bernoulli(p) with ``p = ⌈2^64/(α+2)⌉/2^64`` (the sampler's rounding up), so
``N_key | y ~ Bin(min(y, m), 1 − p) + Bin(m − min(y, m), p)`` and ``N_rest ~ Bin(s·m − m, p)``, independent.

Privacy scenarios (add/remove one unit, l0 = 1: one entry moves by 1, thesis Def. 2.1): ``shift`` (the key at
:data:`_COUNT` → +1) and ``new`` (absent → 1, with one unit on another key in both, as the engine refuses an empty
table; N_key then reads key 0's cells in the columns where they differ from that key's); statistic ``N_key`` (the likelihood-ratio statistic of the key's
cells; the other cells do not depend on the data). Conformance: Pearson's chi-square of ``N_key`` and ``N_rest``
over ``law_runs`` releases of D against their exact laws (pooled cells, the two statistics added, independent).
Mutant ``sigma_scale = s``: the structure built at ε/s per entry change with the same number of columns (``u``
times s) — e.g. a missing division by l0 in the group-privacy step — so ``y`` grows by 1/s while the claim
stays ε.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
from scipy import stats

from ..alp_release import alp
from ..sketches.alp import key_code
from .scenarios import Scenario
from .stats import pooled_pearson

if TYPE_CHECKING:  # pragma: no cover
    from .targets import Target

__all__ = ["ALP_TARGET", "ALPRelease", "ALPCalibration", "ALPLawCheck", "alp_scenarios", "release_alp", "alp_check"]

ALP_TARGET = "alp"
#: the public bound u of one entry: m = ⌈u·ε/α⌉ columns (4 at ε = 1, α = 3)
_U = 12
#: the count of the "shift" pair's key in D (y = RandRound(x·ε/α): 2 or 3 at ε = 1, α = 3, of m = 4 columns)
_COUNT = 7
_TWO64 = 1 << 64


@dataclass(frozen=True)
class ALPCalibration:
    """What one audited ALP release runs with: ``epsilon`` (per entry change; l0 = 1), ``u`` (public bound of an
    entry), the structure's shape ``m`` × ``s``, the scaling ``ratio`` = ε/α rounded down and the randomized
    response probability ``p`` as sampled. The report's "noise scale" is α/ε, the value of one column (an
    estimate's error is a number of columns times it): the ε × 2 mutant halves it."""

    epsilon: float
    u: float
    alpha: float
    m: int
    s: int
    ratio: float
    p: float

    @property
    def sigma(self) -> float:
        return self.alpha / self.epsilon

    @property
    def tau(self) -> float:
        return math.nan  # no threshold


@dataclass(frozen=True)
class ALPRelease:
    """The audited release: :func:`sparsedp.alp` on a table of one key (the target's ``mechanism``);
    :meth:`calibrate` is the structure's public shape and noise at (ε, u)."""

    alpha: float = 3.0
    name = ALP_TARGET

    def calibrate(self, epsilon: float, u: float = _U) -> ALPCalibration:
        m = math.ceil(u * epsilon / self.alpha)
        p = Fraction(1) / (Fraction(self.alpha) + 2)
        p_up = -((-p.numerator * _TWO64) // p.denominator)
        return ALPCalibration(epsilon=float(epsilon), u=float(u), alpha=self.alpha, m=m, s=10,
                              ratio=math.nextafter(epsilon / self.alpha, 0.0), p=p_up / _TWO64)

    def release(self, counts: np.ndarray, cal: ALPCalibration, rng: Any) -> tuple[int, int]:
        """``(N_key, N_rest)`` of one ``sparsedp.alp`` release of a table where ``counts[0]`` units hold key 0 and
        ``counts[1]`` units key 1 (one row each). With key 1 present, N_key counts key 0's cells in the columns
        where its cell differs from key 1's (the released hashes say which), so it does not see key 1."""
        c0, c1 = int(counts[0]), int(counts[1])
        keys = np.concatenate([np.zeros(c0, np.int64), np.ones(c1, np.int64)])
        rows = pa.table({"uid": pa.array(np.arange(keys.size, dtype=np.int64)), "key": pa.array(keys)})
        a = alp(rows, "uid", "key", epsilon=cal.epsilon, delta=0.0, k=1, u=cal.u, alpha=self.alpha, rng=rng)
        bits = a.bit_matrix()
        cells = a.hashes.rows(np.array([key_code(0), key_code(1)], dtype=np.uint64))
        cols = np.arange(a.m) if c1 == 0 else np.flatnonzero(cells[0] != cells[1])
        n_key = int(bits[cols, cells[0, cols]].sum())
        return n_key, int(bits.sum()) - n_key


def alp_scenarios(target: "Target") -> list[Scenario]:
    """The add/remove pairs of the module docstring (counts of keys 0 and 1; statistic N_key, the first released
    column). ``new`` keeps one unit on key 1 in both (the engine refuses an empty table)."""
    direction = np.array([1.0, 0.0])
    return [Scenario("shift", np.array([_COUNT, 0]), np.array([_COUNT + 1, 0]), "projection",
                     f"key 0 held by {_COUNT} units in D, {_COUNT + 1} in D' (one entry +1)", direction=direction),
            Scenario("new", np.array([0, 1]), np.array([1, 1]), "projection",
                     "one unit on key 1 in both; D' adds a unit on key 0 (N_key: key 0's cells apart from key 1's)",
                     direction=direction)]


def release_alp(target: "Target", counts, runs: int, rng) -> np.ndarray:
    """``(runs, 2)`` of ``(N_key, N_rest)`` over ``runs`` releases of the key counts ``counts`` (keys 0 and 1)."""
    c = np.asarray(counts, np.int64).reshape(-1)
    c = np.append(c, np.zeros(max(0, 2 - c.size), np.int64))
    out = np.zeros((int(runs), 2))
    for i in range(int(runs)):
        out[i] = target.mechanism.release(c, target.calibration, rng)
    return out


def key_law(cal: ALPCalibration, count: int) -> np.ndarray:
    """``P[N_key = n]``, n = 0..m (module docstring)."""
    t = count * cal.ratio
    lo = math.floor(t)
    out = np.zeros(cal.m + 1)
    n = np.arange(cal.m + 1)
    for y, w in ((lo, 1.0 - (t - lo)), (lo + 1, t - lo)):
        if w <= 0:
            continue
        ones = min(y, cal.m)
        a = stats.binom.pmf(np.arange(ones + 1), ones, 1.0 - cal.p)
        b = stats.binom.pmf(np.arange(cal.m - ones + 1), cal.m - ones, cal.p)
        out += w * np.convolve(a, b)[n]
    return out


@dataclass(frozen=True)
class ALPLawCheck:
    """Conformance of the ALP: chi-square of ``N_key`` (key at ``count``) and ``N_rest`` over ``runs`` releases
    against their exact laws under the reference calibration; ``p_value`` of the summed statistic."""

    runs: int
    count: int
    key_observed: tuple[int, ...]
    key_expected: tuple[float, ...]
    rest_mean: float
    rest_expected: float
    p_value: float
    level: float

    @property
    def contradicts(self) -> bool:
        return self.p_value < self.level

    def describe(self) -> str:
        return (f"key at count {self.count}, {self.runs} releases: set bits among its cells {list(self.key_observed)} "
                f"vs exact {[round(p * self.runs, 1) for p in self.key_expected]}; other cells' mean "
                f"{self.rest_mean:.4g} vs {self.rest_expected:.4g}; chi-square p = {self.p_value:.3g}")


def alp_check(target: "Target", law_runs: int, level: float, rng) -> ALPLawCheck:
    """The conformance check of the module docstring on ``law_runs`` releases of D (the "shift" pair's D)."""
    ref = target.reference
    out = release_alp(target, [_COUNT, 0], law_runs, rng)
    n_key = out[:, 0].astype(np.int64)
    n_rest = out[:, 1].astype(np.int64)
    p_key = key_law(ref, _COUNT)
    cells = ref.s * ref.m - ref.m
    p_rest = stats.binom.pmf(np.arange(cells + 1), cells, ref.p)
    obs_key = np.bincount(np.clip(n_key, 0, ref.m + 1), minlength=ref.m + 2)
    obs_rest = np.bincount(np.clip(n_rest, 0, cells + 1), minlength=cells + 2)
    if obs_key[ref.m + 1] or obs_rest[cells + 1]:  # a structure larger than the calibrated shape
        p = 0.0
    else:
        s1, d1 = pooled_pearson(obs_key[: ref.m + 1], p_key)
        s2, d2 = pooled_pearson(obs_rest[: cells + 1], p_rest)
        p = float(stats.chi2.sf(s1 + s2, max(1, d1 + d2)))
    return ALPLawCheck(runs=int(law_runs), count=_COUNT, key_observed=tuple(int(x) for x in obs_key[: ref.m + 1]),
                       key_expected=tuple(float(x) for x in p_key), rest_mean=float(n_rest.mean()),
                       rest_expected=float(cells * ref.p), p_value=p, level=level)
