"""Speed of the sparse-histogram release against a plain numpy noise-and-filter baseline (same run).

Releases a histogram of ``--keys`` keys (default 1e7) with Zipf(1.3) counts, with GSHM (l0 = 10), the
discrete Laplace (geometric) histogram (l0 = 10) and top-k CSH (top_k = 1000; the default noise and
Algorithm 4), all with the secure default (exact discrete noise from the OS CSPRNG, decided by exact
inversion: ``sparsedp.noise.inversion``), through the mechanisms' public functions, and GSHM also through the release pipeline's engine path (the per-key step chunk by chunk, each chunk with its keyed per-release stream). Calibration is done once
outside the timed region (it does not depend on the data size). The baseline draws float
``numpy.random.Generator.normal`` noise, adds it and filters: the floor any implementation pays.

The releases are timed round-robin (baseline, then each mechanism, ``--repeats`` rounds), so a change of
machine load affects all of them alike; printed are medians, keys/s and the ratio to the baseline (target
<= 2x). The first call of each law builds its inversion table (cached per process); a warm-up call keeps
that out of the timings and its time is printed separately.

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
from sparsedp.mechanisms.laplace import laplace_histogram
from sparsedp.mechanisms.topk import topk_csh


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


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
    cal_l = calibrate("laplace", epsilon=1.0, delta=1e-6, l0=10)
    cal_t = calibrate("topk-csh", epsilon=1.0, delta=1e-6, top_k=1000)
    cal_t4 = calibrate("topk-csh", epsilon=1.0, delta=1e-6, top_k=1000, csh_noise="alg4")
    thr = 1 + cal_g.tau

    def baseline():
        noisy = counts + gen.normal(0.0, cal_g.sigma, n)
        keep = np.flatnonzero(noisy >= thr)
        return keep, noisy[keep]

    # the release pipeline's path: the engine's per-key step by chunks, each with its keyed per-release stream
    import pyarrow as pa

    from sparsedp.core.bounded import LocalHistogram
    from sparsedp.engines.base import EmbeddedEngine
    from sparsedp.engines.polars_engine import PolarsEngine
    from sparsedp.mechanisms.kernel import noise_plan
    from sparsedp.mechanisms.key_noise import KeyNoise

    local = LocalHistogram(keys=pa.table({"key": np.arange(n, dtype=np.int64)}), counts=counts, stats=None)
    eng: EmbeddedEngine = PolarsEngine()

    def pipeline_gshm():
        return eng.noise_keys(local, KeyNoise(plan=noise_plan(cal_g), pre=1, secret=bytes(32)))

    runs = {
        "numpy float noise + filter (baseline)": baseline,
        "GSHM, engine path (keyed chunk streams)": pipeline_gshm,
        "GSHM (l0=10)": lambda: gshm(hist, cal_g),
        "Laplace histogram (l0=10)": lambda: laplace_histogram(hist, cal_l),
        f"top-k CSH (top_k=1000, {type(cal_t.noise).__name__})": lambda: topk_csh(hist, cal_t),
        "top-k CSH (top_k=1000, Alg. 4)": lambda: topk_csh(hist, cal_t4),
    }
    small = SparseHistogram(np.arange(1000, dtype=np.int64), counts[:1000])
    warm = {"GSHM (l0=10)": lambda: gshm(small, cal_g), "Laplace histogram (l0=10)": lambda: laplace_histogram(
        small, cal_l), "top-k CSH (top_k=1000, Alg. 4)": lambda: topk_csh(small, cal_t4)}
    first = {name: _timed(fn) for name, fn in warm.items()}  # builds the (cached) inversion tables
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(args.repeats):
        for name, fn in runs.items():
            times[name].append(_timed(fn))
    t_base = statistics.median(times["numpy float noise + filter (baseline)"])
    print(f"histogram: {n:,} keys, Zipf(1.3) counts, secure discrete noise; medians of {args.repeats} "
          "round-robin runs")
    print(f"{'release':<42}{'seconds':>10}{'keys/s':>14}{'x baseline':>12}")
    for name, ts in times.items():
        t = statistics.median(ts)
        print(f"{name:<42}{t:>10.3f}{n / t:>14,.0f}{t / t_base:>12.2f}")
    print("first call on 1,000 keys (builds the law's inversion table, once per process): "
          + ", ".join(f"{name} {t * 1e3:.0f} ms" for name, t in first.items()))


if __name__ == "__main__":
    main()
