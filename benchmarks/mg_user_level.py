"""User-level private Misra–Gries: the PAMG sketch against group privacy, at equal (ε, δ).

Both release the sketch with CSH (the default ``release="csh"``):

* **group privacy** (``unit_sketch="group-privacy"``): each unit bounded to ``l0`` keys, the stream of the bounded
  histogram, CSH at (ε/l0, δ/Σ_{i<l0} e^{iε/l0});
* **PAMG** (``unit_sketch="pamg"``, :mod:`sparsedp.sketches.user_mg`): each unit's set of distinct keys added in
  one step, no bound, CSH at (ε, δ).

Part 1 prints the release thresholds 1 + τ (data-independent) for k and l0. Part 2 runs both on a synthetic
Zipf input (units with 1–2·l0 distinct keys) and prints, as medians of ``--runs`` releases, the keys released,
the mean |released − true| over the 20 most common keys (true = distinct units holding the key) and the wall
time. Run: ``python benchmarks/mg_user_level.py [--runs 3] [--units 20000]``.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np


def thresholds(ks, l0s, epsilon, delta):
    from sparsedp.mechanisms.base import ReleaseRequest
    from sparsedp.mechanisms.misra_gries import MisraGries

    print(f"Part 1: release threshold 1 + tau at (eps, delta) = ({epsilon:g}, {delta:g}), CSH on the sketch")
    print(f"{'k':>6} {'l0':>4} {'group privacy':>14} {'PAMG':>8} {'ratio':>7}")
    for k in ks:
        pamg = MisraGries(sketch_size=k, unit_sketch="pamg").calibrate(ReleaseRequest(epsilon=epsilon, delta=delta))
        t_p = 1.0 + float(pamg.csh.tau)
        for l0 in l0s:
            gp = MisraGries(sketch_size=k, unit_sketch="group-privacy").calibrate(
                ReleaseRequest(epsilon=epsilon, delta=delta, max_groups_per_unit=l0))
            t_g = 1.0 + float(gp.csh.tau)
            print(f"{k:>6} {l0:>4} {t_g:>14.1f} {t_p:>8.1f} {t_g / t_p:>7.2f}")


def dataset(units: int, l0: int, seed: int):
    import polars as pl

    rng = np.random.default_rng(seed)
    per = rng.integers(1, 2 * l0 + 1, units)
    u = np.repeat(np.arange(units), per)
    q = np.minimum(rng.zipf(1.3, u.size), 100_000)
    return pl.DataFrame({"unit": u, "query": q})


def utility(units: int, k: int, l0: int, runs: int, epsilon: float, delta: float):
    import sparsedp as sd

    df = dataset(units, l0, seed=7)
    truth = df.unique().group_by("query").len().sort("len", descending=True)
    top = dict(zip(truth["query"].head(20).to_list(), truth["len"].head(20).to_list()))
    print(f"\nPart 2: {units} units with 1..{2 * l0} distinct Zipf(1.3) keys each ({df.height} rows, "
          f"{truth.height} distinct keys), k = {k}, l0 = {l0} for group privacy; medians of {runs} runs")
    print(f"{'sketch':>14} {'keys released':>14} {'top-20 MAE':>11} {'seconds':>8}")
    for label, mech, kw in (("group privacy", sd.MisraGries(sketch_size=k, unit_sketch="group-privacy"),
                             {"max_groups_per_unit": l0}),
                            ("PAMG", sd.MisraGries(sketch_size=k), {})):
        released, mae, secs = [], [], []
        for _ in range(runs):
            t0 = time.perf_counter()
            res = sd.release(df, "unit", "query", epsilon, delta, mechanism=mech, **kw)
            secs.append(time.perf_counter() - t0)
            got = dict(zip(res.table["query"].to_list(), res.table["count"].to_list()))
            released.append(len(got))
            mae.append(float(np.mean([abs(got.get(x, 0) - c) for x, c in top.items()])))
        print(f"{label:>14} {statistics.median(released):>14.0f} {statistics.median(mae):>11.1f} "
              f"{statistics.median(secs):>8.2f}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--units", type=int, default=20_000)
    a = ap.parse_args()
    thresholds((100, 1000), (1, 2, 5, 10, 20), 1.0, 1e-6)
    utility(a.units, 100, 10, a.runs, 1.0, 1e-6)


if __name__ == "__main__":
    main()
