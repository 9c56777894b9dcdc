"""The per-key noise step of a thresholded release, written once and run by every engine chunk by chunk.

:class:`KeyNoise` is a picklable description of "noise these counts and keep the released ones": the noise plan
(from the calibration), the pre-threshold, the top-k cut-off, the released offset t̃ of de-biased top-k, the
release's shared CSH term and the per-release secret ``K_noise``. An engine calls :meth:`KeyNoise.apply` once per
chunk of keys (:mod:`sparsedp.engines.noise_chunks`) with the chunk's bounded counts in canonical key order; the
chunk's noise comes from ``SecretKeyedStream(K_noise, chunk_label(chunk))``, so the released values are a
deterministic function of ``(K_noise, histogram)`` on every engine ("one release, one draw").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .kernel import NoisePlan, noise_and_filter

__all__ = ["KeyNoise"]


@dataclass(frozen=True)
class KeyNoise:
    """Everything the per-key step needs (a task closure on Spark; ``repr`` hides the secret).

    Attributes:
        plan: what to sample and compare (:class:`~sparsedp.mechanisms.kernel.NoisePlan` of the calibration).
        pre: the pre-threshold (counts below it are never noised or released).
        cutoff: top-k's (k+1)-th largest count ``t``: counts become ``max(0, c − t)`` first (Algorithm 3 of
            seed 000); 0 for the other mechanisms.
        offset: added to every released value after thresholding (de-biased top-k's released ``t̃``).
        shared: the release's shared term of CSH / top-k CSH (drawn once on the driver), else ``None``.
        insecure_float: float noise was requested by name.
        secret: ``K_noise``, 32 bytes from the release's secure source.
    """

    plan: NoisePlan
    pre: int
    secret: bytes = field(repr=False)
    cutoff: int = 0
    offset: Any = None
    shared: Any = None
    insecure_float: bool = False

    @property
    def float_output(self) -> bool:
        """Released values are floats: float noise, Algorithm 4's ½-lattice, or a half-integer offset."""
        p = self.plan
        if not p.discrete or (p.family == "correlated" and not p.rounded):
            return True
        return self.offset is not None and not float(self.offset).is_integer()

    def apply(self, counts: np.ndarray, chunk: int) -> tuple[np.ndarray, np.ndarray]:
        """``(positions, values)`` of the released keys among one chunk's counts (canonical key order)."""
        from ..engines.noise_chunks import chunk_label
        from ..noise.source import SecretKeyedStream

        c = np.asarray(counts, dtype=np.int64)
        if self.cutoff:
            c = np.maximum(c - self.cutoff, 0)
        rng = SecretKeyedStream(self.secret, chunk_label(chunk))
        pos, values = noise_and_filter(c, self.plan, self.pre, rng, self.shared, insecure_float=self.insecure_float)
        if self.offset is not None:
            values = values + self.offset
        return pos, np.asarray(values, dtype=np.float64 if self.float_output else np.int64)
