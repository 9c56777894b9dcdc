"""Does OpenDP 0.16's threshold map state the δ its release has? (run in the OpenDP venv; stdlib + opendp only)

    .venvs/opendp/bin/python benchmarks/peers_scripts/opendp_threshold_check.py

For ``make_laplace_threshold`` / ``make_gaussian_threshold`` (integer counts, d_in = (l0, l0, 1)) it prints, per
threshold T, the map's δ against the exact δ of the release rule: the low-level measurements keep a key whose
noisy count is >= T, so a key held by one unit is published with probability P[1 + Z >= T] = P[Z >= T - 1] and a
unit holding l0 such keys adds up to l0 * P[Z >= T - 1] (Z discrete Laplace, P[Z >= k] = α^k / (1 + α) with
α = exp(-1/scale), k >= 1; or discrete Gaussian, its tail summed exactly). It also measures the release rate of
count-1 keys (one run over many keys, fixed count, OpenDP's own randomness) for the low-level measurement and for
the Polars ``Context`` at the same (scale, T). ``opendp_peer.py`` uses threshold T + 1 where T is the smallest
the map accepts; this script shows why.
"""

from __future__ import annotations

import math

import opendp.prelude as dp
import polars as pl

dp.enable_features("contrib")
DOM = dp.map_domain(dp.atom_domain(T=str), dp.atom_domain(T=int))
LAP, GAU = dp.l01inf_distance(dp.absolute_distance(T=int)), dp.l02inf_distance(dp.absolute_distance(T=int))


def lap_tail(scale: float, k: int) -> float:
    """P[Z >= k] for the discrete Laplace of ``scale`` (k >= 1)."""
    a = math.exp(-1 / scale)
    return a ** k / (1 + a)


def dg_tail(sigma: float, k: int) -> float:
    """P[Z >= k] for the discrete Gaussian of parameter ``sigma`` (exact sum over |x| <= 40 sigma + 50)."""
    r = int(40 * sigma) + 50
    w = [math.exp(-x * x / (2 * sigma * sigma)) for x in range(-r, r + 1)]
    return sum(w[k + r:]) / sum(w)


def maps() -> None:
    print("map δ vs exact δ (d_in = (l0, l0, 1))")
    for name, make, met, tail, cases in (
            ("laplace", dp.m.make_laplace_threshold, LAP, lap_tail, ((1 / 3, 1, 5), (1.0, 1, 14), (10 / 3, 1, 45),
                                                                     (5.0, 5, 75))),
            ("gaussian", dp.m.make_gaussian_threshold, GAU, dg_tail, ((1.5, 1, 7), (3.0, 1, 13), (3.0, 5, 19),
                                                                      (8.0, 20, 49)))):
        for scale, l0, t in cases:
            d = make(DOM, met, scale=scale, threshold=t).map((l0, l0, 1))[1]
            print(f"  {name:8s} scale {scale:.4g} l0 {l0:2d} T {t:3d}: map {d:.3g}; exact δ(T) = l0 P[Z >= T-1] "
                  f"{l0 * tail(scale, t - 1):.3g}; exact δ(T+1) = l0 P[Z >= T] {l0 * tail(scale, t):.3g}")


def rates(n: int = 20000) -> None:
    print(f"release rate of count-1 keys ({n} keys, one unit each)")
    df = pl.DataFrame({"unit": list(range(n)), "key": [f"k{i}" for i in range(n)]})
    for loss, make, met, tail in ((dict(epsilon=1.0, delta=0.05), dp.m.make_laplace_threshold, LAP, lap_tail),
                                  (dict(rho=0.125, delta=0.01), dp.m.make_gaussian_threshold, GAU, dg_tail)):
        ctx = dp.Context.compositor(
            data=df.lazy(), privacy_loss=dp.loss_of(**loss), split_evenly_over=1,
            privacy_unit=dp.unit_of(contributions=[dp.polars.Bound(per_group=1),
                                                   dp.polars.Bound(by=["key"], per_group=1)]))
        q = ctx.query().group_by("key").agg(pl.len().dp.noise().alias("count"))
        s = q.summarize().to_dicts()[0]
        t, scale = int(s["threshold"]), float(s["scale"])
        ctx_rate = q.release().collect().height / n
        m = make(DOM, met, scale=scale, threshold=t)
        low_rate = len(m({f"k{i}": 1 for i in range(n)})) / n
        print(f"  {s['distribution']}, {loss}: Context picks T {t}, scale {scale:.4g}; map δ(T) {m.map((1, 1, 1))[1]:.4f}; "
              f"low-level rate {low_rate:.4f} (exact P[Z >= T-1] {tail(scale, t - 1):.4f}); Context rate "
              f"{ctx_rate:.4f} (P[Z >= T] {tail(scale, t):.4f}); ±2 s.e. {2 * math.sqrt(0.25 / n):.4f} at most")


if __name__ == "__main__":
    maps()
    rates()
