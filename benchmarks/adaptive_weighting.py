"""Keys released by the adaptive-weighting set unions (``mad``, ``mad2r``) against the Weighted Gaussian.

    PYTHONPATH=src python benchmarks/adaptive_weighting.py                    # demo log, ε ∈ {0.3, 1, 3}
    PYTHONPATH=src python benchmarks/adaptive_weighting.py --rows 1000000 --l0s 10 --seeds 1

The demo search log (``sparsedp.demo_data.search_log``, 200 000 rows, data seed 0), δ = 1e-6, every mechanism at
Δ0 ∈ ``--l0s``, secure path with a seeded source per ``--seeds`` (keys averaged over the seeds). Prints, per ε,
each mechanism's keys at each Δ0 and at its best Δ0, the ratio to the Weighted Gaussian (same Δ0 and best vs best)
and the median release time (after a warm-up release that calibrates: calibrations are cached per process).
Issue 33's targets: ``mad2r`` >= 1.10x and ``mad`` >= 1.0x the Weighted Gaussian's keys.
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings

MECHANISMS = ("weighted-gaussian", "mad", "mad2r")


def main() -> None:
    import sparsedp as sd
    from sparsedp.demo_data import search_log
    from sparsedp.noise import InsecureSeededRandom

    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--epsilons", default="0.3,1,3")
    ap.add_argument("--l0s", default="5,10,20,32")
    ap.add_argument("--seeds", default="1,2,3")
    a = ap.parse_args()
    df = search_log(a.rows, seed=0)
    seeds = [int(x) for x in a.seeds.split(",")]
    l0s = [int(x) for x in a.l0s.split(",")]
    print(f"demo log: {a.rows} rows, delta 1e-6, seeds {seeds}; shared loaded machine")
    for eps in (float(x) for x in a.epsilons.split(",")):
        keys: dict[tuple[str, int], float] = {}
        times: dict[str, list[float]] = {m: [] for m in MECHANISMS}
        for l0 in l0s:
            for m in MECHANISMS:
                kw = dict(epsilon=eps, delta=1e-6, max_groups_per_unit=l0, mechanism=m)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    sd.release(df, "user_id", ["query"], rng=InsecureSeededRandom(0), **kw)  # calibrates
                    n = []
                    for s in seeds:
                        t = time.perf_counter()
                        n.append(sd.release(df, "user_id", ["query"], rng=InsecureSeededRandom(s), **kw).table.height)
                        times[m].append(time.perf_counter() - t)
                keys[(m, l0)] = statistics.fmean(n)
        print(f"\nepsilon = {eps:g}")
        print("  " + "mechanism".ljust(18) + "".join(f"l0={l0:<8}" for l0 in l0s) + "best      vs WG (best)  median s")
        best_wg = max(keys[("weighted-gaussian", l0)] for l0 in l0s)
        for m in MECHANISMS:
            row = [keys[(m, l0)] for l0 in l0s]
            best = max(row)
            print("  " + m.ljust(18) + "".join(f"{x:<10.1f}" for x in row) + f"{best:<10.1f}{best / best_wg:<14.3f}"
                  f"{statistics.median(times[m]):.2f}")
        for m in MECHANISMS[1:]:
            same = ", ".join(f"l0={l0}: {keys[(m, l0)] / keys[('weighted-gaussian', l0)]:.3f}" for l0 in l0s)
            print(f"  {m} / weighted-gaussian at the same l0: {same}")


if __name__ == "__main__":
    main()
