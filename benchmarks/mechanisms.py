"""Speed of the sparse-histogram release against a plain numpy noise-and-filter baseline (same run).

Releases a histogram of ``--keys`` keys (default 1e7) with Zipf(1.3) counts, with GSHM (l0 = 10) and
top-k CSH (top_k = 1000), both with the secure default (exact discrete noise from the OS CSPRNG), through
``sparsedp.mechanisms.release_histogram``. Calibration is done once outside the timed region (it does not
depend on the data size). The baseline draws float ``numpy.random.Generator.normal`` noise, adds it and
filters: the floor any implementation pays. Prints medians of ``--repeats`` runs, keys/s and the ratio to
the baseline (target <= 2x).

    python benchmarks/mechanisms.py [--keys 10000000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from sparsedp.accounting import calibrate
from sparsedp.mechanisms import SparseHistogram
from sparsedp.mechanisms.gshm import gshm
from sparsedp.mechanisms.topk import topk_csh


def _median_time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keys", type=int, default=10_000_000)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    n = args.keys
    gen = np.random.default_rng(2026)
    counts = np.minimum(gen.zipf(1.3, n), 10**9).astype(np.int64)
    hist = SparseHistogram(np.arange(n, dtype=np.int64), counts)  # distinct keys, checked (sorted fast path)
    cal_g = calibrate("gshm", epsilon=1.0, delta=1e-6, l0=10)
    cal_t = calibrate("topk-csh", epsilon=1.0, delta=1e-6, top_k=1000)
    thr = 1 + cal_g.tau

    def baseline():
        noisy = counts + gen.normal(0.0, cal_g.sigma, n)
        keep = np.flatnonzero(noisy >= thr)
        return keep, noisy[keep]

    t_base = _median_time(baseline, args.repeats)
    t_gshm = _median_time(lambda: gshm(hist, cal_g), args.repeats)
    t_topk = _median_time(lambda: topk_csh(hist, cal_t), args.repeats)
    print(f"histogram: {n:,} keys, Zipf(1.3) counts, secure discrete noise; medians of {args.repeats} runs")
    print(f"{'release':<34}{'seconds':>10}{'keys/s':>14}{'x baseline':>12}")
    for name, t in (("numpy float noise + filter (baseline)", t_base), ("GSHM (l0=10)", t_gshm),
                    ("top-k CSH (top_k=1000)", t_topk)):
        print(f"{name:<34}{t:>10.3f}{n / t:>14,.0f}{t / t_base:>12.2f}")


if __name__ == "__main__":
    main()
