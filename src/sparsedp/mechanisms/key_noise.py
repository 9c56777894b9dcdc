"""The per-key noise step of a thresholded release, written once and run by every engine chunk by chunk.

:class:`KeyNoise` is a picklable description of "noise these counts and keep the released ones": the noise plan
(from the calibration), the pre-threshold, the top-k cut-off, the released offset t̃ of de-biased top-k, the
release's shared CSH term and the per-release secret ``K_noise``. An engine calls :meth:`KeyNoise.apply` once per
chunk of keys (:mod:`sparsedp.core.noise_chunks`) with the chunk's bounded counts in canonical key order; the
chunk's noise comes from ``SecretKeyedStream(K_noise, chunk_label(chunk))``, so the released values are a
deterministic function of ``(K_noise, histogram)`` on every engine ("one release, one draw").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np
import numpy.typing as npt

from ..accounting.intervals import VarianceBox, variance_interval
from ..aggregates import Mean, Sum, Variance, noise_columns, square_columns
from ..core.noise_chunks import chunk_label
from ..noise.source import SecretKeyedStream, SecureRandom
from .kernel import NoisePlan, SharedNoise, noise_and_filter
from ..core.lazy import lazy_module

if TYPE_CHECKING:
    from . import aggregate_noise as _aggregate_noise
else:  # the SUM/MEAN columns' noise: on first use (issue 31; a count release has none)
    _aggregate_noise = lazy_module("sparsedp.mechanisms.aggregate_noise")

__all__ = ["KeyNoise"]


@dataclass(frozen=True)
class KeyNoise:
    """Everything the per-key step needs (a task closure on Spark; ``repr`` hides the secret).

    Attributes:
        plan: what to sample and compare (:class:`~sparsedp.mechanisms.kernel.NoisePlan` of the calibration).
        pre: the pre-threshold (counts below it are never noised or released).
        cutoff: top-k's (k+1)-th largest count ``t``: counts become ``max(0, c − t)`` first (Algorithm 3 of
            Lebeda & Retschmeier (2024)); 0 for the other mechanisms.
        offset: added to every released value after thresholding (de-biased top-k's released ``t̃``).
        shared: the release's shared term of CSH / top-k CSH (drawn once on the driver), else ``None``.
        insecure_float: float noise was requested by name.
        secret: ``K_noise``, 32 bytes from the release's secure source.
        aggregates: the SUM/MEAN aggregates released next to the count (joint GSHM release), in output order;
            empty for a count-only release.
        column_sigma2s: the exact scales ``s_j`` of the distinct noisy grid columns
            (:func:`sparsedp.aggregates.noise_columns` order), from the joint calibration
            (:class:`sparsedp.accounting.aggregates.JointDiscreteCalibration`).
        column_noise: a general column shape's noise map ``{"lower": L, "refine": F}``
            (:func:`sparsedp.mechanisms.aggregate_noise.noise_map`; column noise ``L z`` on grids ``F_k`` times
            finer); empty for independent columns.
        variance_boxes: per VARIANCE/STD output name, its interval's public half-widths
            (:class:`~sparsedp.accounting.intervals.VarianceBox`, ``release(..., interval=…)``): the step adds
            ``<name>_lo``/``<name>_hi`` computed from the three noisy statistics it holds; empty: no interval.
    """

    plan: NoisePlan
    pre: int
    secret: bytes = field(repr=False)
    cutoff: int = 0
    offset: float | None = None
    shared: SharedNoise = None
    insecure_float: bool = False
    aggregates: tuple[Sum, ...] = ()
    column_sigma2s: tuple[Fraction, ...] = ()
    column_noise: tuple[tuple[str, Any], ...] | None = None
    variance_boxes: tuple[tuple[str, VarianceBox], ...] = ()

    @property
    def column_names(self) -> tuple[str, ...]:
        """Output names of the SUM/MEAN columns (empty for a count-only release), each VARIANCE/STD column with an
        interval followed by its ``_lo``/``_hi`` columns."""
        boxes = dict(self.variance_boxes)
        return tuple(n for a in self.aggregates for n in (
            (a.output_name, f"{a.output_name}_lo", f"{a.output_name}_hi") if a.output_name in boxes
            else (a.output_name,)))

    @property
    def n_grid_columns(self) -> int:
        """Number of distinct noisy grid columns the histogram must carry."""
        return len(self.column_sigma2s)

    @property
    def float_output(self) -> bool:
        """Released values are floats: float noise, Algorithm 4's ½-lattice, or a half-integer offset."""
        p = self.plan
        if not p.discrete or (p.family == "correlated" and not p.rounded):
            return True
        return self.offset is not None and not float(self.offset).is_integer()

    def stream(self, chunk: int) -> SecretKeyedStream:
        """The chunk's noise stream ``SecretKeyedStream(K_noise, chunk_label(chunk))``."""
        return SecretKeyedStream(self.secret, chunk_label(chunk))

    def apply(self, counts: npt.NDArray[np.int64], chunk: int) -> tuple[npt.NDArray[np.intp], npt.NDArray[Any]]:
        """``(positions, values)`` of the released keys among one chunk's counts (canonical key order)."""
        return self._counts(counts, self.stream(chunk))

    def _counts(self, counts: npt.NDArray[np.int64],
                rng: SecureRandom) -> tuple[npt.NDArray[np.intp], npt.NDArray[Any]]:
        c = np.asarray(counts, dtype=np.int64)
        if self.cutoff:
            c = np.maximum(c - self.cutoff, 0)
        pos, values = noise_and_filter(c, self.plan, self.pre, rng, self.shared, insecure_float=self.insecure_float)
        if self.offset is not None:
            values = values + self.offset
        return pos, np.asarray(values, dtype=np.float64 if self.float_output else np.int64)

    def apply_joint(self, counts: npt.NDArray[np.int64], grid_sums: Sequence[npt.ArrayLike],
                    chunk: int) -> tuple[npt.NDArray[np.intp], npt.NDArray[Any], dict[str, npt.NDArray[np.float64]]]:
        """The joint release of one chunk (``docs/proofs/aggregates.md`` §0): ``(positions, noisy counts,
        {output name: values})``.

        The count decision is exactly :meth:`apply`'s (same stream words, so the same keys and counts as a
        count-only release with this calibration); then, from the SAME chunk stream after those words, one exact
        ``N_Z(0, s_j)`` draw per RELEASED key for each distinct grid column j in turn
        (:func:`~sparsedp.mechanisms.aggregate_noise.noisy_grid_sums`), and the SUM/MEAN values in value units
        (:func:`~sparsedp.mechanisms.aggregate_noise.to_value_units`: ``g·(A' + Y) + g·c·(count + Z)``, divided
        by the noisy count for MEAN). Keys not released get no column noise and leave nothing.
        """
        if self.float_output or self.insecure_float:
            raise ValueError("aggregate columns are released with integer count noise only (discrete GSHM, "
                             "rounded de-biased top-k CSH)")
        if self.cutoff and self.offset is None:
            raise ValueError("top-k CSH releases aggregate columns with de-biased counts only")
        column_indices, noisy_grid_sums = _aggregate_noise.column_indices, _aggregate_noise.noisy_grid_sums
        to_value_units, variance_values = _aggregate_noise.to_value_units, _aggregate_noise.variance_values
        where = column_indices(self.aggregates)
        if len(grid_sums) != len(self.column_sigma2s):
            raise ValueError(f"{len(grid_sums)} grid-sum columns for {len(self.column_sigma2s)} noise scales")
        rng = self.stream(chunk)
        pos, values = self._counts(counts, rng)  # the count words first, then the columns' words
        extra = dict(self.column_noise or {})
        noisy = noisy_grid_sums([np.asarray(a, dtype=np.int64)[pos] for a in grid_sums], self.column_sigma2s, rng,
                                **extra)
        refine = extra.get("refine") or (1,) * len(self.column_sigma2s)
        cols: dict[str, npt.NDArray[np.float64]] = {}
        grid, squares = noise_columns(self.aggregates)[0], square_columns(self.aggregates)
        for a, i, sq in zip(self.aggregates, where, squares):
            if isinstance(a, Variance):
                assert sq is not None
                cols[a.output_name] = variance_values(noisy[i], noisy[sq], values, a, grid[i], grid[sq],
                                                      (refine[i], refine[sq]))
                box = dict(self.variance_boxes).get(a.output_name)
                if box is not None:  # post-processing of the three noisy statistics (accounting.intervals)
                    lo, hi = variance_interval(values, to_value_units(noisy[i], values, grid[i], refine[i]),
                                               to_value_units(noisy[sq], values, grid[sq], refine[sq]), box)
                    cols[f"{a.output_name}_lo"], cols[f"{a.output_name}_hi"] = lo, hi
            elif isinstance(a, Mean):
                # MEAN = (re-centred noisy sum) / (count estimate); top-k's de-biased estimate can in principle
                # be <= 0, so the divisor is max(estimate, 1) (post-processing; GSHM's is always >= 1)
                total = to_value_units(noisy[i], values, Sum(a.column, a.lower, a.upper, a.granularity,
                                                             recentre=a.recentre), refine[i])
                cols[a.output_name] = total / np.maximum(np.asarray(values, dtype=np.float64), 1.0)
            else:
                cols[a.output_name] = to_value_units(noisy[i], values, a, refine[i])
        return pos, values, cols
