"""OpenDP 0.16 peer: make_laplace_threshold / make_gaussian_threshold on a bounded count map.

OpenDP's thresholded measurements take a hashmap of counts and a (l0, l1, linf) input distance; OpenDP 0.16's
Polars front end does not bound keys per unit for us, so this script de-duplicates (unit, key) and keeps a
uniformly random subset of at most l0 keys per unit with Polars (the same bounding sparsedp does), then hands
the counts to the OpenDP measurement, calibrated so its own privacy map reports (ε, δ) at d_in = (l0, l0, 1),
then CORRECTED BY ONE THRESHOLD STEP (see below).

Threshold correction. The low-level measurements release a key when its noisy count is >= threshold T (a key of
count T is kept at scale -> 0), so a key held by one unit is published with probability P[1 + Z >= T] = P[Z >= T-1];
OpenDP 0.16's privacy map for ``make_laplace_threshold`` reports l0 * P[Z >= T] for T (exactly the δ of threshold
T + 1), and the map of ``make_gaussian_threshold`` reports l0 * P[N(0, scale^2) >= T - 1], a bound on the discrete
Gaussian's P[Z >= T], again the tail of threshold T + 1 (at scale 2, T = 6 the map says 0.0062 while count-1 keys
are published at 0.0115). OpenDP's Polars ``Context`` picks the same T from the same map but publishes a key only
when its noisy count exceeds T (count-1 keys measured at the rate P[Z >= T]), so its δ is right. We therefore use
threshold T + 1 with the low-level ``>=`` rule, where T is the smallest threshold the map accepts: the same release
rule as the Context, δ as OpenDP's map states it. Earlier runs of this script used T itself (δ up to ~6x the
stated one at ε = 3, l0 = 1).
Gaussian: the measurement is approximate-zCDP (ρ, δ_threshold); converted to (ε, δ) with OpenDP's
make_zCDP_to_approxDP; the split of δ between threshold and conversion is optimised over a grid.
"""

from __future__ import annotations

import functools
import math

import opendp.prelude as dp

from _protocol import main, smallest_int

dp.enable_features("contrib")
DOM = dp.map_domain(dp.atom_domain(T=str), dp.atom_domain(T=int))


@functools.lru_cache(maxsize=None)  # sweep.py repeats each calibration once per run
def laplace(eps: float, delta: float, l0: int):
    """(scale, threshold): scale l0/ε (ℓ1 = l0), one above the smallest threshold whose map gives δ (module
    docstring: the map's δ for T is the true δ of T + 1)."""
    met = dp.l01inf_distance(dp.absolute_distance(T=int))
    scale = l0 / eps
    while True:  # OpenDP's map rounds up; nudge the scale until the map's ε fits
        def d(t):
            return dp.m.make_laplace_threshold(DOM, met, scale=scale, threshold=t).map((l0, l0, 1))
        if d(10 ** 9)[0] <= eps:
            break
        scale *= 1 + 1e-9
    t = smallest_int(lambda t: d(t)[1] <= delta) + 1  # the map's δ(T) is the true δ of T + 1
    return scale, t


@functools.lru_cache(maxsize=None)
def gaussian(eps: float, delta: float, l0: int):
    """(scale, threshold) minimising the threshold over the δ split; the threshold one above the smallest one the
    map accepts (module docstring)."""
    met = dp.l02inf_distance(dp.absolute_distance(T=int))
    best = (math.inf, math.inf)
    for frac in (0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 0.9):
        d_thr, d_conv = delta * frac, delta * (1 - frac)

        def eps_at(scale: float) -> float:
            m = dp.m.make_gaussian_threshold(DOM, met, scale=scale, threshold=10 ** 9)
            prof, _ = dp.c.make_zCDP_to_approxDP(m).map((l0, l0, 1))
            return prof.epsilon(d_conv)

        lo, hi = 0.01, 1.0
        while eps_at(hi) > eps:
            lo, hi = hi, hi * 2
        for _ in range(60):
            mid = (lo + hi) / 2
            lo, hi = (lo, mid) if eps_at(mid) <= eps else (mid, hi)
        scale = hi
        t = smallest_int(lambda t: dp.m.make_gaussian_threshold(DOM, met, scale=scale, threshold=t)
                         .map((l0, l0, 1))[1] <= d_thr) + 1  # the map's δ(T) bounds the true δ of T + 1
        if 0 < t < best[1]:
            best = (scale, t)
    return best


def keep50(threshold: int) -> int:
    return threshold  # symmetric integer noise: P[c + Z >= c] >= 1/2


def thresholds(eps, delta, l0):
    out = []
    for name, fn in (("laplace_threshold", laplace), ("gaussian_threshold", gaussian)):
        scale, t = fn(eps, delta, l0)
        out.append({"epsilon": eps, "delta": delta, "l0": l0, "library": "OpenDP", "mechanism": name,
                    "threshold": float(t), "keep50": float(keep50(int(t))), "scale": scale})
    return out


def release(table, eps, delta, l0, noise):
    import polars as pl
    df = pl.from_arrow(table).unique(["unit", "key"])
    df = (df.with_columns(pl.int_range(pl.len()).shuffle().over("unit").alias("_r"))
          .filter(pl.col("_r") < l0).drop("_r"))  # NB: polars' shuffle is not a CSPRNG; benchmark only
    counts = df.group_by("key").len()
    data = dict(zip(counts["key"].to_list(), counts["len"].to_list()))
    if noise == "laplace":
        scale, t = laplace(eps, delta, l0)
        m = dp.m.make_laplace_threshold(DOM, dp.l01inf_distance(dp.absolute_distance(T=int)), scale, t)
    else:
        scale, t = gaussian(eps, delta, l0)
        m = dp.m.make_gaussian_threshold(DOM, dp.l02inf_distance(dp.absolute_distance(T=int)), scale, t)
    out = m(data)
    return list(out.keys()), [float(x) for x in out.values()], {
        "version": dp.__version__ if hasattr(dp, "__version__") else "0.16", "mechanism": f"{noise}_threshold",
        "threshold": t, "scale": scale}


def _context(df, eps, delta, l0, n):
    """The Polars Context over ``df`` (at most l0 keys per unit, one row per (unit, key), told by ``unit_of``) at
    ``loss_of(epsilon, delta)``, one query, with the loose public margin ``max_length = max_groups = n``."""
    return dp.Context.compositor(
        data=df.lazy(),
        privacy_unit=dp.unit_of(contributions=[dp.polars.Bound(per_group=l0),
                                               dp.polars.Bound(by=["key"], per_group=1)]),
        privacy_loss=dp.loss_of(epsilon=eps, delta=delta), split_evenly_over=1,
        margins=[dp.polars.Margin(by=["key"], max_length=n, max_groups=n)])


SCALE = 10  # the aggregates' fixed-point grid: 0.1 value units (sparsedp's default grid for [0, 600]: 0.25)


def aggregates(table, eps, delta, l0, lower, upper, noise):
    """Noisy count and sum per key through OpenDP's Polars Context, calibrated by the Context to (ε, δ).

    The rows are summed per (unit, key) and at most l0 keys kept per unit (uniformly at random, as in
    ``release``) with Polars before the Context sees them; the Context is told so with
    ``dp.unit_of(contributions=[Bound(per_group=l0), Bound(by=["key"], per_group=1)])``. The query is
    ``group_by("key").agg(pl.len().dp.noise(), pl.col("value").fill_null(0).dp.sum((lower, upper)))``: ``dp.sum``
    clips each row, i.e. the unit's per-key total, to [lower, upper]; unknown keys are released through the
    Context's own threshold on the noisy ``len`` (it spends δ there). ``dp.loss_of(epsilon, delta)``: Laplace
    noise (the Context picks Laplace under approximate pure DP), ε split evenly over the two columns. The
    margin ``Margin(by=["key"], max_length=rows, max_groups=rows)`` is a loose public bound the Context needs
    for its sum analysis. The unit's totals are rounded to integers in units of 1/SCALE = 0.1 first (integer
    sums, integer Laplace noise): with float sums the Context's rounding allowance, which grows with the
    margin's ``max_length``, made the sum's noise scale 1.8e5 instead of ~6e3 at 5e5 rows.
    MEAN = noisy sum / noisy count (post-processing; ``dp.mean`` does the same).
    """
    import polars as pl
    # integer sums (a fixed-point grid of 1/SCALE value units): OpenDP's float sums carry a rounding slack that
    # grows with the public max_length bound (here: the row count), which made the sum noise 60x larger
    df = (pl.from_arrow(table).group_by("unit", "key").agg(pl.col("value").sum())
          .with_columns((pl.col("value") * SCALE).round().cast(pl.Int64))
          .with_columns(pl.int_range(pl.len()).shuffle().over("unit").alias("_r"))
          .filter(pl.col("_r") < l0).drop("_r"))  # NB: polars' shuffle is not a CSPRNG; benchmark only
    n = max(table.num_rows, 1)
    ctx = _context(df, eps, delta, l0, n)
    q = ctx.query().group_by("key").agg(pl.len().dp.noise().alias("count"),
                                         pl.col("value").fill_null(0).dp.sum((round(lower * SCALE),
                                                                               round(upper * SCALE))).alias("sum"))
    summ = q.summarize()
    out = q.release().collect()
    counts = [float(x) for x in out["count"].to_list()]
    sums = [float(x) / SCALE for x in out["sum"].to_list()]
    thr = [x for x in summ["threshold"].to_list() if x is not None] if "threshold" in summ.columns else []
    return (out["key"].to_list(), counts, sums, [s / c for s, c in zip(sums, counts)],
            {"version": "opendp 0.16", "mechanism": "Polars Context: len().dp.noise() + dp.sum, Laplace, "
             f"threshold {thr[0] if thr else '?'}", "scales": [float(x) for x in summ["scale"].to_list()],
             "calibration": f"threshold {thr[0] if thr else '?'}, Laplace scales: count "
                            f"{float(summ['scale'][0]):.4g}, sum {float(summ['scale'][1]) / SCALE:.4g} (value "
                            "units)"})


def public_keys(table, listed, eps, delta, l0, noise):
    """Counts of the listed keys (0 for absent ones) with OpenDP's core vector measurements, the noise step of its
    public-key (invariant keys) group-by: ``make_laplace`` on the integer count vector, ℓ1 sensitivity l0, scale
    nudged until the map gives ε; ``make_gaussian`` on the float count vector, ℓ2 sensitivity √l0, zCDP converted
    to (ε, δ) with ``make_zCDP_to_approxDP`` (OpenDP's own conversion), smallest scale by bisection. (Polars
    de-duplication and the uniform l0 choice as in ``release``.)"""
    import polars as pl
    df = pl.from_arrow(table).unique(["unit", "key"]).filter(pl.col("key").is_in(listed))
    df = (df.with_columns(pl.int_range(pl.len()).shuffle().over("unit").alias("_r"))
          .filter(pl.col("_r") < l0).drop("_r"))  # NB: polars' shuffle is not a CSPRNG; benchmark only
    c = df.group_by("key").len()
    m = dict(zip(c["key"].to_list(), c["len"].to_list()))
    vec = [int(m.get(k, 0)) for k in listed]
    if noise == "laplace":
        meas, scale = None, l0 / eps
        while True:
            meas = dp.m.make_laplace(dp.vector_domain(dp.atom_domain(T=int)), dp.l1_distance(T=int), scale=scale)
            if meas.map(l0) <= eps:
                break
            scale *= 1 + 1e-9
        out = [float(x) for x in meas(vec)]
        return list(listed), out, {"version": "opendp 0.16", "mechanism": "make_laplace (integer), public keys",
                                   "calibration": f"Laplace scale {scale:.6g}"}
    dom, met = dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.l2_distance(T=float)
    sens = math.sqrt(l0)

    def eps_at(scale):
        return dp.c.make_zCDP_to_approxDP(dp.m.make_gaussian(dom, met, scale=scale)).map(sens).epsilon(delta)

    lo, hi = 0.01, 1.0
    while eps_at(hi) > eps:
        lo, hi = hi, hi * 2
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if eps_at(mid) <= eps else (mid, hi)
    out = [float(x) for x in dp.m.make_gaussian(dom, met, scale=hi)([float(x) for x in vec])]
    return list(listed), out, {"version": "opendp 0.16", "mechanism": "make_gaussian (float), public keys",
                               "calibration": f"Gaussian scale {hi:.6g} (zCDP -> approxDP)"}


def quantiles(table, eps, delta, l0, lower, upper, cells):
    """Per-key medians through OpenDP's Polars Context: ``group_by("key").agg(pl.len().dp.noise(),
    pl.col("value").clip(lower, upper).dp.median(candidates))`` with the candidates the midpoints of ``cells`` equal
    cells of [lower, upper] (sparsedp's grid); unknown keys are released through the Context's own threshold on the
    noisy ``len``, ε split by the Context. One row per (unit, key) and at most l0 keys per unit are kept with Polars
    before the Context (Polars' shuffle, not a CSPRNG: benchmark only), and the Context is told so with
    ``dp.unit_of(contributions=[Bound(per_group=l0), Bound(by=["key"], per_group=1)])``."""
    import polars as pl
    df = (pl.from_arrow(table).with_columns(pl.int_range(pl.len()).shuffle().over("unit", "key").alias("_r"))
          .filter(pl.col("_r") < 1).drop("_r")
          .with_columns(pl.int_range(pl.len()).shuffle().over("unit").alias("_r"))
          .filter(pl.col("_r") < l0).drop("_r"))
    n = max(table.num_rows, 1)
    width = (upper - lower) / cells
    cands = [lower + (k + 0.5) * width for k in range(cells)]
    ctx = _context(df, eps, delta, l0, n)
    q = ctx.query().group_by("key").agg(pl.len().dp.noise().alias("count"),
                                         pl.col("value").fill_null(0).clip(lower, upper).dp.median(cands)
                                         .alias("median"))
    summ = q.summarize()
    out = q.release().collect()
    thr = [x for x in summ["threshold"].to_list() if x is not None] if "threshold" in summ.columns else []
    return out["key"].to_list(), [float(x) for x in out["median"].to_list()], {
        "version": "opendp 0.16", "mechanism": f"Polars Context: len().dp.noise() + dp.median({cells} candidates)",
        "calibration": f"threshold {thr[0] if thr else '?'}, scales: count {float(summ['scale'][0]):.4g}, "
                       f"median {float(summ['scale'][1]):.4g}"}


if __name__ == "__main__":
    main(thresholds, release, aggregates, public_keys, quantiles)
