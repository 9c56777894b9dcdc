"""``release_histogram``: one call from an in-memory SparseHistogram to a private Release: the chosen (or best
valid) mechanism's calibration, then the registered class's in-memory release
(:meth:`~sparsedp.mechanisms.thresholded.GSHM.release_counts`; CSH on a k-sparse sketch by
:func:`~sparsedp.mechanisms.csh.csh`). A release from data goes through :func:`sparsedp.release` instead."""

from __future__ import annotations

from .. import _validate as v
from ..accounting.calibration import Calibration
from ..accounting.names import GSHM, LAPLACE, TOPK_CSH
from ..errors import InvalidParameterError
from ._common import check_histogram, check_pre_threshold
from .auto import MECHANISMS, calibrate_mechanism, choose_mechanism, valid_mechanisms
from .csh import check_k_sparse, csh
from ..core.histogram import Release, SparseHistogram
from .thresholded import GSHM as GSHMMechanism, Laplace, TopKCSH
from ..noise.source import SecureRandom

__all__ = ["release_histogram"]


def release_histogram(hist: SparseHistogram, *, epsilon: float, delta: float, l0: int | None = None,
                      k: int | None = None, top_k: int | None = None, mechanism: str = "auto", pre_threshold: int = 1,
                      rng: SecureRandom | None = None, insecure_float: bool = False) -> Release:
    """Release ``hist`` at (ε, δ) with the chosen (or best valid) sparse-histogram mechanism.

    Contribution model (declare at least one; the engine must enforce it): ``l0`` = keys per unit
    (GSHM, Laplace); ``k`` = the histogram is k-sparse monotonic, e.g. a merged Misra–Gries sketch (CSH;
    GSHM/Laplace with l0 = k); ``top_k`` = keep the top-k keys, one contribution per key per unit (top-k
    CSH). ``mechanism``: "auto" (lowest threshold, :mod:`.auto`), "gshm", "csh", "topk-csh" or "laplace".
    ``pre_threshold``: keys with smaller counts are never released (top-k CSH requires 1).

    Noise is exact discrete noise from the secure source unless ``insecure_float=True``; ``rng`` is for
    tests only. Every check (arguments, histogram, sparsity promise) runs before any noise is drawn.
    ``Release.extra`` holds the threshold, the mechanism, and for "auto" the candidates and the reason.
    """
    eps = v.epsilon(epsilon)
    dlt = v.delta(delta)
    l0 = None if l0 is None else v.integer("l0", l0, lo=1)
    k = None if k is None else v.integer("k", k, lo=1)
    top_k = None if top_k is None else v.integer("top_k", top_k, lo=1)
    mech = v.choice("mechanism", mechanism, ("auto",) + MECHANISMS)
    pre = check_pre_threshold(pre_threshold)
    if not isinstance(insecure_float, bool):
        raise v.InvalidTypeError(f"insecure_float must be a bool, got {type(insecure_float).__name__}")
    if top_k is not None and pre != 1:
        raise InvalidParameterError("top-k CSH uses the data-dependent pre-threshold 1 + t (Algorithm 3); "
                                    f"pre_threshold must be 1 when top_k is declared, got {pre}")
    hist = check_histogram(hist)
    if k is not None:
        check_k_sparse(hist, k)
    valid = valid_mechanisms(l0, k, top_k)
    if mech == "auto":
        cal, report = choose_mechanism(eps, dlt, l0=l0, k=k, top_k=top_k, insecure_float=insecure_float)
    else:
        if mech not in valid:
            need = {GSHM: "l0 (or k)", LAPLACE: "l0 (or k)", "csh": "k", TOPK_CSH: "top_k"}[mech]
            raise InvalidParameterError(f"mechanism={mech!r} needs {need} to be declared; got l0={l0}, k={k}, "
                                        f"top_k={top_k}")
        cal = calibrate_mechanism(mech, valid[mech], eps, dlt, insecure_float=insecure_float)
        report = {"chosen": mech, "reason": "requested explicitly", "candidates": []}
    if cal.mechanism == "csh":  # CSH on a k-sparse sketch: no registered class (Misra-Gries releases through it)
        rel = csh(hist, cal, pre_threshold=pre, rng=rng, insecure_float=insecure_float)
    else:
        rel = _registered(cal, pre).release_counts(hist, cal, rng=rng, insecure_float=insecure_float)
    extra = dict(rel.extra)
    extra["auto"] = report
    return Release(keys=rel.keys, counts=rel.counts, calibration=rel.calibration, n_keys_in=rel.n_keys_in,
                   n_keys_out=rel.n_keys_out, extra=extra)


def _registered(cal: Calibration, pre: int) -> GSHMMechanism | Laplace | TopKCSH:
    """The registered mechanism a calibration was made for, with the pre-threshold."""
    if cal.mechanism == TOPK_CSH:
        return TopKCSH.of_calibration(cal)
    return GSHMMechanism(pre_threshold=pre) if cal.mechanism == GSHM else Laplace(pre_threshold=pre)
