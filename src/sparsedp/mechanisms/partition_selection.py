"""The optimal l0 = 1 partition selection (Desfontaines, Voss, Gipson and Mandayam, PoPETs 2022) as a registered
mechanism: key discovery, keys only.

``optimal-partition`` (:class:`OptimalPartitionSelection`, secure): every unit keeps ONE of its keys (the engine's
one random ℓ0 choice at l0 = 1, :mod:`sparsedp.engines.bounding`); a key held by ``n`` units is released with
probability π̂(n), the paper's optimal curve rounded down to a dyadic grid with a certified enclosure of
``e^{−ε}`` (:mod:`sparsedp.accounting.partition_selection`, ``docs/proofs/optimal-partition-selection.md``),
independently per key, by an exact Bernoulli draw from the release's secure source
(:func:`sparsedp.noise.dyadic.dyadic_bernoulli`). Nothing but the key set is released: the table has the ``by``
columns only (count the keys with a second release on them as a public list, or with
``sd.TwoStage(select="optimal-partition")``, which does both within one budget).

Among all (ε, δ)-DP rules that release a key depending on its own count only, π is the largest at every count
(the paper's Theorem 1), so at l0 = 1 this releases at least as many keys, in expectation, as any thresholded
count release (GSHM, Laplace) at the same (ε, δ), and the same as PipelineDP's truncated-geometric ("magic")
selection, which samples the same curve in floating point.

Order of the secrets drawn from the release's source: the bounding secret, then ``K_noise`` (32 bytes); key
chunk ``j``'s bits come from ``SecretKeyedStream(K_noise, chunk_label(j))``, so a seeded source gives the same
keys on every engine.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from ..accounting.partition_selection import OPTIMAL_PARTITION, PartitionCalibration, calibrate_partition_selection
from ..accounting.laws import ReleaseCurve
from ..core.engine import Engine
from ..core.noise_chunks import chunk_label
from ..errors import InvalidParameterError
from ..noise.dyadic import dyadic_bernoulli
from ..noise.source import SecretKeyedStream, SecureRandom
from .base import AutoRole, Disclosure, Mechanism, PlanQuery, Released, ReleaseRequest, UserRequest
from .registry import register

__all__ = ["OptimalPartitionSelection", "PartitionSelectionTask", "KEYS_ONLY"]

_NO_AGGREGATES = ("mechanism={name!r} releases keys only; SUM/MEAN need mechanism='gshm' or 'auto' (for counts "
                  "of the selected keys: sd.TwoStage(select={name!r}))")
#: the value column of a keys-only release: none (the published table holds the ``by`` columns only)
KEYS_ONLY = ""


@dataclass(frozen=True)
class PartitionSelectionTask:
    """The per-key step of the release, as an engine runs it chunk by chunk (the engines' ``NoiseTask``): key
    ``i`` of a chunk, with bounded count ``c_i >= 1``, is kept iff an exact Bernoulli(π̂(c_i)) bit from the chunk's
    stream is 1. ``secret`` is ``K_noise`` (hidden from ``repr``). Released values are 1 (the pipeline drops them:
    keys only)."""

    curve: ReleaseCurve
    secret: bytes = field(repr=False)

    @property
    def column_names(self) -> tuple[str, ...]:
        return ()

    @property
    def n_grid_columns(self) -> int:
        return 0

    @property
    def float_output(self) -> bool:
        return False

    def apply(self, counts: npt.NDArray[np.int64], chunk: int) -> tuple[npt.NDArray[np.intp], npt.NDArray[Any]]:
        """``(positions, ones)`` of the released keys among one chunk's counts (canonical key order)."""
        c = np.asarray(counts, dtype=np.int64)
        live = np.flatnonzero(c >= 1)
        idx = np.minimum(c[live], len(self.curve.numerators)) - 1
        keep = dyadic_bernoulli(self.curve.numerators, self.curve.bits, idx,
                                SecretKeyedStream(self.secret, chunk_label(chunk)))
        pos = live[keep]
        return pos, np.ones(pos.size, dtype=np.int64)

    def apply_joint(self, counts: npt.NDArray[np.int64], grid_sums: list[npt.NDArray[np.int64]],
                    chunk: int) -> tuple[npt.NDArray[np.intp], npt.NDArray[Any], dict[str, npt.NDArray[np.float64]]]:
        raise ValueError("the optimal partition selection releases keys only, no SUM/MEAN columns")


@functools.lru_cache(maxsize=64)
def _calibrate(epsilon: float, delta: float) -> PartitionCalibration:
    return calibrate_partition_selection(epsilon, delta)


def _one_key(request: ReleaseRequest | UserRequest, what: str) -> None:
    l0 = request.max_groups_per_unit if isinstance(request, ReleaseRequest) else request.bound
    if l0 is not None and l0 != 1:
        raise InvalidParameterError(
            f"⟨{what}⟩ is the optimal rule for ONE key per unit (each unit keeps one of its keys): drop "
            f"⟨max_groups_per_unit⟩ or set it to 1, not {l0}; for several keys per unit use mechanism='gshm', "
            f"'weighted-gaussian' or 'auto'", param="max_groups_per_unit")


@register
@dataclass(frozen=True)
class OptimalPartitionSelection(Mechanism):
    """The optimal l0 = 1 partition selection with exact arithmetic (module docstring): keys only, one key per
    unit (``max_groups_per_unit`` omitted or 1). No options."""

    name = OPTIMAL_PARTITION
    #: releases a key set, not counts: offered by ``sd.Auto(discover=True)`` at l0 = 1 (never by plain ``auto``)
    discovery = True
    auto_role = AutoRole.DISCOVERY
    bounded = True
    plan_group = 1  # listed after the count mechanisms: keys only

    @classmethod
    def auto_offer(cls, request: ReleaseRequest, group: str | None) -> Mechanism | None:
        """Offered by ``sd.Auto(discover=True)`` at l0 = 1 (no SUM/MEAN, no public key list, secure noise)."""
        if request.max_groups_per_unit != 1 or request.aggregates or request.keys is not None \
                or request.insecure_float or request.delta == 0:
            return None
        return cls()

    @classmethod
    def plan_rows(cls, query: PlanQuery) -> list[tuple[Mechanism, Any, int]]:
        """``sd.plan``'s keys-only row at l0 = 1 (after the count mechanisms; its margin is count-equivalent:
        the smallest count kept with probability >= 1/2, minus the pre-threshold 1)."""
        if query.d is not None or query.delta == 0 or query.l0 != 1 or query.sums:
            return []
        m = cls()
        req = query.request()
        if req.insecure_float:
            return []
        return [(m, m.calibrate(req), cls.plan_group)]

    def validate(self, request: UserRequest) -> None:
        if request.sums:
            raise InvalidParameterError(_NO_AGGREGATES.format(name=self.name))
        super().validate(request)
        _one_key(request, f"mechanism={self.name!r}")

    def needs(self, request: UserRequest) -> frozenset[Any]:
        return frozenset()

    def check(self, request: ReleaseRequest) -> None:
        self.check_delta(request)
        _one_key(request, f"mechanism={self.name!r}")
        if request.aggregates:
            raise InvalidParameterError(_NO_AGGREGATES.format(name=self.name))
        if request.keys is not None:
            raise InvalidParameterError(f"mechanism={self.name!r} discovers keys; with a public key list use "
                                        "mechanism='auto' or a public-key mechanism")
        if request.insecure_float:
            raise InvalidParameterError(f"mechanism={self.name!r} samples exact Bernoulli bits only; drop "
                                        "insecure_float=True")

    def engine_bound(self, request: ReleaseRequest) -> int | None:
        return 1

    def value_column(self, default: str) -> str:
        return KEYS_ONLY

    def calibrate(self, request: ReleaseRequest) -> PartitionCalibration:
        return _calibrate(float(request.epsilon), float(request.delta))

    def disclosure(self, request: ReleaseRequest, calibration: Any, value_column: str) -> Disclosure:
        cal: PartitionCalibration = calibration
        return Disclosure(
            mechanism=self.name, analysis=cal.analysis, epsilon=cal.epsilon, delta=cal.delta,
            delta_achieved=float(cal.delta_achieved), neighbours=self.neighbours,
            contribution="one key per unit (each unit keeps one of its keys, chosen at random)",
            value_column=value_column, delta_parts=dict(cal.delta_parts), sigma=None, noise_std=None,
            threshold=None, margin=None, pre_threshold=None, comparison="",
            notes=(f"optimal partition selection (Desfontaines, Voss, Gipson and Mandayam, PoPETs 2022) in exact "
                   f"arithmetic: keys only, no counts; a key held by n units is released with probability "
                   f"pi(n), the optimal (epsilon, delta) curve rounded down to multiples of 2^-{cal.curve.bits}: "
                   f"pi(n) >= 1/2 from n = {cal.n50}, pi(n) = 1 from n = {cal.sure} "
                   f"(docs/proofs/optimal-partition-selection.md)",))

    def run(self, engine: Engine, hist: Any, calibration: Any, disclosure: Disclosure, rng: SecureRandom,
            request: ReleaseRequest) -> Released:
        cal: PartitionCalibration = calibration
        task = PartitionSelectionTask(curve=cal.curve, secret=bytes(rng.random_bytes(32)))
        return Released(rows=engine.noise_keys(hist, task), disclosure=disclosure)
