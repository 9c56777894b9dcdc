"""sparsedp itself, run through the same protocol (system Python, where sparsedp is installed).

Thresholds: every mechanism ``sparsedp.accounting.compare`` lists at (ε, δ, l0) (secure integer noise), plus
top-k CSH at ``top_k = l0`` (secure, and the float-noise analysis for reference); the absolute threshold is pre_threshold (1) + margin τ, compared with ``>=``.
Release: ``sparsedp.release`` (Polars engine, secure noise, its own contribution bounding), mechanism
``auto`` when NOISE is ``auto``, else the Laplace (``laplace``) or Gaussian (``gshm``) stability histogram.
"""

from __future__ import annotations

import sparsedp as sd
from sparsedp import accounting as acc

from _protocol import main

PRE = 1


def thresholds(eps, delta, l0):
    out = []
    cals = [(c, "") for c in acc.compare(epsilon=eps, delta=delta, l0=l0)]
    for discrete, kind in ((True, "secure"), (False, "float")):
        try:  # top-k CSH: secure integer noise, and the float-noise analysis (insecure_float=True only)
            cals += [(c, kind) for c in acc.compare(epsilon=eps, delta=delta, top_k=l0, discrete=discrete)][:1]
        except Exception:  # infeasible top-k at tiny l0
            pass
    for c, kind in cals:
        t = PRE + float(c.tau)
        # keep50: integer noise symmetric about 0, release iff count + Z >= t; P[Z >= 0] >= 1/2.
        out.append({"epsilon": eps, "delta": delta, "l0": l0, "library": "sparsedp",
                    "mechanism": f"{c.mechanism} ({c.analysis})", "threshold": t,
                    "keep50": float(-(-t // 1)), "top_k": kind})
    return out


def release(table, eps, delta, l0, noise):
    import polars as pl
    df = pl.from_arrow(table)
    mech = {"auto": "auto", "laplace": sd.Laplace(pre_threshold=PRE), "gaussian": sd.GSHM(pre_threshold=PRE)}[noise]
    res = sd.release(df, privacy_unit="unit", by="key", epsilon=eps, delta=delta, max_groups_per_unit=l0,
                     mechanism=mech)
    t = res.table
    return t["key"].to_list(), [float(x) for x in t["count"].to_list()], {
        "version": f"sparsedp {getattr(sd, '__version__', 'dev')}", "mechanism": f"{res.report.mechanism}"}


def aggregates(table, eps, delta, l0, lower, upper, noise):
    """COUNT, SUM and MEAN per key with ``sd.release`` (mechanism ``auto``, which is the joint GSHM with exact
    discrete Gaussian noise on every column); sparsedp sums a unit's rows per key, clips to [lower, upper] and
    keeps at most l0 keys per unit itself, so the raw rows go in unchanged."""
    import polars as pl
    df = pl.from_arrow(table)
    res = sd.release(df, privacy_unit="unit", by="key", epsilon=eps, delta=delta, max_groups_per_unit=l0,
                     aggregates=[sd.Count(), sd.Sum("value", lower, upper), sd.Mean("value", lower, upper)])
    t = res.table
    rep = res.report
    return (t["key"].to_list(), [float(x) for x in t["count"].to_list()],
            [float(x) for x in t["sum_value"].to_list()], [float(x) for x in t["mean_value"].to_list()],
            {"version": f"sparsedp {getattr(sd, '__version__', 'dev')}",
             "mechanism": f"{getattr(rep, 'mechanism', 'auto')}: count + sum (exact discrete Gaussian), "
                          "mean = noisy sum / noisy count",
             "calibration": f"threshold {float(rep.threshold):g}, count noise std {float(rep.noise_std):.3g}, "
                            "report.column_errors (SUM: noise std; MEAN: worst-case RMSE at the threshold) " + ", ".join(
                                f"{k} {float(x):.4g}" for k, x in dict(rep.column_errors).items())})


def public_keys(table, listed, eps, delta, l0, noise):
    """``sd.release(..., keys=listed)``: NOISE is ``auto`` or a public-key mechanism name (``correlated-gaussian``,
    ``public-gaussian``, ``public-laplace``); secure integer noise, sparsedp's own ℓ0 bound."""
    import polars as pl
    res = sd.release(pl.from_arrow(table), privacy_unit="unit", by="key", epsilon=eps, delta=delta,
                     max_groups_per_unit=l0, mechanism=noise, keys=listed)
    t = res.table
    return t["key"].to_list(), [float(x) for x in t["count"].to_list()], {
        "version": f"sparsedp {getattr(sd, '__version__', 'dev')}", "mechanism": res.report.mechanism,
        "calibration": f"{res.report.analysis}, expected per-key error std {res.report.noise_std:.4g}"}


def quantiles(table, eps, delta, l0, lower, upper, cells):
    """Per-key medians with ``sd.release(..., aggregates=[sd.Median("value", lower, upper, cells=cells)])``
    (mechanism ``auto`` for the count; the median's permute-and-flip gets its default share of ε, 4/5, or
    the share in the environment variable ``SPARSEDP_PEER_MEDIAN_SHARE``); sparsedp keeps at most l0 released
    keys and one row per (unit, key) itself."""
    import os

    import polars as pl
    share = os.environ.get("SPARSEDP_PEER_MEDIAN_SHARE")
    res = sd.release(pl.from_arrow(table), privacy_unit="unit", by="key", epsilon=eps, delta=delta,
                     max_groups_per_unit=l0, aggregates=[sd.Median("value", lower, upper, cells=cells,
                                                                   share=float(share) if share else None)])
    t = res.table
    notes = [n for n in res.report.notes if n.startswith("budget split")]
    return t["key"].to_list(), [float(x) for x in t["median_value"].to_list()], {
        "version": f"sparsedp {getattr(sd, '__version__', 'dev')}",
        "mechanism": f"{res.report.mechanism} selection + permute-and-flip (exact sampler), {cells} cells",
        "calibration": f"threshold {float(res.report.threshold):g}; " + "; ".join(notes)}


if __name__ == "__main__":
    main(thresholds, release, aggregates, public_keys, quantiles)
