"""Floating-point Gaussian and Laplace noise: research reproduction ONLY.

Textbook float samplers leak information through the set of representable outputs (Mironov 2012;
Balcer & Vadhan (2019) §1), so no guarantee of sparsedp covers them. They exist
to reproduce papers that assume ideal continuous noise, and refuse to run unless the caller passes
``insecure_float=True``. Released integer counts should use :func:`sample_discrete_gaussian` /
:func:`sample_discrete_laplace` instead.

Uniforms come from the given sparsedp source (53-bit, in (0, 1)); the Gaussian uses Box–Muller and the
Laplace the inverse CDF, both in numpy float64.
"""

from __future__ import annotations

import numpy as np

from .. import _validate as v
from ..errors import InvalidParameterError
from .discrete import checked_source
from .source import SecureRandom

__all__ = ["sample_gaussian", "sample_laplace"]


def _refuse(name: str, insecure_float: bool) -> None:
    if not (insecure_float is True or (isinstance(insecure_float, np.bool_) and bool(insecure_float))):
        raise InvalidParameterError(
            f"{name} draws floating-point noise, which is not differentially private on real hardware "
            "(Mironov 2012); use sample_discrete_gaussian / sample_discrete_laplace, or pass "
            "insecure_float=True for research reproduction only")


def _open_uniform(rng, n: int) -> np.ndarray:
    """n uniforms in (0, 1): (k + 0.5) / 2^53 for a 53-bit integer k."""
    w = rng.uint64(n) >> np.uint64(11)
    return (w.astype(np.float64) + 0.5) * 2.0**-53


def sample_gaussian(sigma, size: int, rng: SecureRandom | None = None, insecure_float: bool = False) -> np.ndarray:
    """``size`` float draws of N(0, sigma²) by Box–Muller. Requires ``insecure_float=True``."""
    _refuse("sample_gaussian", insecure_float)
    sigma = v.positive("sigma", sigma)
    n = v.integer("size", size, lo=0)
    rng = checked_source(rng)
    half = (n + 1) // 2
    u1, u2 = _open_uniform(rng, half), _open_uniform(rng, half)
    rad = np.sqrt(-2.0 * np.log(u1))
    z = np.concatenate([rad * np.cos(2.0 * np.pi * u2), rad * np.sin(2.0 * np.pi * u2)])[:n]
    return sigma * z


def sample_laplace(scale, size: int, rng: SecureRandom | None = None, insecure_float: bool = False) -> np.ndarray:
    """``size`` float draws with density ∝ exp(−|x|/scale) by inversion. Requires ``insecure_float=True``."""
    _refuse("sample_laplace", insecure_float)
    scale = v.positive("scale", scale)
    n = v.integer("size", size, lo=0)
    rng = checked_source(rng)
    u = _open_uniform(rng, n) - 0.5
    return -scale * np.sign(u) * np.log1p(-2.0 * np.abs(u))
