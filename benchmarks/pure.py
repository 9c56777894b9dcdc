"""Running time of the pure-DP histograms (seed 003) against the domain size |X| and the dataset size n.

Claim checked (Thm 6.6, Thm 7.2): PureSparseHistogram and CompactHistogram do not grow with |X| beyond
its bit length, while the dense BasicHistogram grows linearly in |X|. Prints medians of several runs
and ratios against the smallest configuration measured in the same run.

    python benchmarks/pure.py            # default sizes (a few minutes)
    python benchmarks/pure.py --quick    # fewer repeats and sizes
    python benchmarks/pure.py --blanket  # only the linear-time pure-blanket tables and the acceptance run
    python benchmarks/pure.py --cost     # the Balcer–Vadhan refusal's run-time estimates against measured times
    python benchmarks/pure.py --subset   # the blanket subset step: Floyd + rank/shift against the old rejection

pure-blanket (linear time, docs/proofs/pure-blanket.md): its core against n (ratios to the smallest n, with
pure-sparse at the small n as the quadratic baseline), then the acceptance run of issue 32: ``sd.release`` at
δ = 0 (``mechanism="auto"``) on 10^6 units with 10^5 distinct Zipf keys, against the approximate-DP Laplace
release of the same data in the same run; it prints the machine load, checks that every key whose true count is at
least the reported bound is released, and counts released keys that are not in the data (blanket keys: 1/1000
expected) and padding rows (none: blanket keys that cannot be keys are dropped).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time

from sparsedp.mechanisms.pure import pure_histogram
from sparsedp.noise import InsecureSeededRandom


def items_for(n: int, domain: int, seed: int = 0) -> list[int]:
    """n items, Zipf-like over the first min(|X|, 1024) labels (same data for every |X|)."""
    rnd = random.Random(seed)
    return [min(int(rnd.paretovariate(1.1)) - 1, min(domain, 1024) - 1) for _ in range(n)]


def timed(fn, repeats: int) -> float:
    ts = []
    for r in range(repeats):
        t = time.perf_counter()
        fn(r)
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def table(title: str, rows: list[tuple[str, float]]) -> None:
    base = rows[0][1]
    print(f"\n{title}")
    print(f"  {'size':>14} {'median s':>10} {'ratio':>8}")
    for label, t in rows:
        print(f"  {label:>14} {t:10.4f} {t / base:8.2f}")


def blanket_vs_n(reps: int, quick: bool) -> None:
    from collections import Counter
    from fractions import Fraction

    from sparsedp.accounting.blanket import calibrate_blanket
    from sparsedp.mechanisms.pure.blanket import blanket_histogram
    from sparsedp.mechanisms.pure.release import StringCodec

    d = StringCodec(16).domain_size
    ns = [1000, 10_000, 100_000] if quick else [1000, 10_000, 100_000, 1_000_000]
    rows = []
    warm = calibrate_blanket(1.0, 10, d, Fraction(1, 2))
    blanket_histogram({1: 5}, warm, InsecureSeededRandom(0))  # the noise table is built once per law
    for n in ns:
        rnd = random.Random(n)  # n items over n/10 labels, Zipf-like: about n/10 distinct keys (the support)
        counts = Counter(int(rnd.paretovariate(0.6)) % (n // 10) for _ in range(n))
        p = calibrate_blanket(1.0, n, d, Fraction(1, 2))
        rows.append((f"n={n}", timed(lambda r: blanket_histogram(counts, p, InsecureSeededRandom(r)), reps)))
    for n in (1000, 2000):
        data = items_for(n, 2 ** 32)
        rows.append((f"pure-sparse n={n}", timed(lambda r: pure_histogram(data, 1, beta=0.05, domain_size=2 ** 32,
                                                                          rng=InsecureSeededRandom(r)), 1)))
    table("pure-blanket core (keys of <= 16 bytes, eps=1, about n/10 distinct keys) vs n; pure-sparse (Alg 8) at "
          "small n for scale", rows)


def zipf_units(n_units: int, n_keys: int, seed: int = 0):
    """n_units units, one key each: every one of n_keys keys once, the rest Zipf(1.1) over the keys."""
    import numpy as np
    import polars as pl

    rng = np.random.default_rng(seed)
    w = 1.0 / np.arange(1, n_keys + 1) ** 1.1
    rest = rng.choice(n_keys, size=n_units - n_keys, p=w / w.sum())
    ids = np.concatenate([np.arange(n_keys), rest])
    return pl.DataFrame({"user_id": np.arange(n_units), "query": pl.Series(ids).cast(pl.Utf8).str.zfill(6)})


def acceptance(reps: int) -> None:
    import sparsedp as sd

    df = zipf_units(1_000_000, 100_000)
    true = df.group_by("query").len()
    truth = dict(zip(true["query"].to_list(), true["len"].to_list()))
    print(f"\nacceptance: 10^6 units, {len(truth)} distinct keys (Zipf 1.1), eps=1; load average before: "
          f"{os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    base = timed(lambda r: sd.release(df, privacy_unit="user_id", by="query", epsilon=1, delta=1e-7,
                                      mechanism="laplace", max_groups_per_unit=1, rng=InsecureSeededRandom(r)), reps)
    results = []
    t = timed(lambda r: results.append(sd.release(df, privacy_unit="user_id", by="query", epsilon=1, delta=0,
                                                  rng=InsecureSeededRandom(r))), reps)
    print(f"  laplace (delta=1e-7, baseline)  median {base:8.3f} s")
    print(f"  auto at delta=0 (pure-blanket)  median {t:8.3f} s   ratio {t / base:.2f}   "
          f"load average after: {os.getloadavg()[0]:.2f}")
    for res in results:
        rep = res.report
        bound = int([s.split("every key with count >= ")[1].split()[0] for s in rep.notes if "every key with" in s][0])
        released = set(res.table["query"].to_list())
        missed = [k for k, c in truth.items() if c >= bound and k not in released]
        fake = [k for k in released if k not in truth]
        print(f"  {rep.mechanism}: threshold {rep.threshold:g}, bound {bound}: {len(released)} keys released, "
              f"{sum(c >= bound for c in truth.values())} keys at or above the bound, {len(missed)} of them missed; "
              f"{len(fake)} released keys not in the data; columns {res.table.columns}")


def _rejection_subset(m: int, d: int, excluded, rng) -> list[int]:
    """The blanket subset step before 2026-11-27 (the baseline): uniform labels on [0, d), redrawn while in the
    support or already taken (expected d/(d − k − m) draws each)."""
    out: list[int] = []
    taken: set[int] = set()
    while len(out) < m:
        x = rng.randbelow(d)
        if x in excluded or x in taken:
            continue
        taken.add(x)
        out.append(x)
    return out


def subset_step(reps: int) -> None:
    """Step 3's subset: the rejection sampler it replaced (baseline) against subset_outside (Floyd's algorithm and a
    rank/shift map, exactly m draws), on the same support in the same run; medians of ``reps`` runs (each draws the
    subset 20 times), and the number of uniform draws (randbelow calls) each made."""
    from sparsedp.noise.rational_geometric import subset_outside

    class Counting(InsecureSeededRandom):
        calls = 0

        def randbelow(self, n):
            Counting.calls += 1
            return super().randbelow(n)

    print(f"\nblanket subset step (20 draws per run, medians of {reps}); load average {os.getloadavg()[0]:.2f}")
    print(f"  {'d':>22} {'k':>8} {'m':>3} {'rejection s':>12} {'draws':>9} {'floyd s':>10} {'draws':>6} {'ratio':>7}")
    big = (256 ** 17 - 1) // 255
    for d, k, m in [(big, 100_000, 1), (big, 100_000, 40), (2_000_000, 1_000_000, 40), (1_001_000, 1_000_000, 10)]:
        support = set(range(0, 2 * k, 2)) if 2 * k <= d else set(range(k))
        res = []
        for fn in (_rejection_subset, subset_outside):
            Counting.calls = 0
            t = timed(lambda r: [fn(m, d, support, Counting(r)) for _ in range(20)], reps)
            res.append((t, Counting.calls / (20 * reps)))
        (t0, c0), (t1, c1) = res
        print(f"  {d:>22} {k:>8} {m:>3} {t0:12.4f} {c0:9.1f} {t1:10.4f} {c1:6.1f} {t1 / t0:7.2f}", flush=True)


def _cpu_and_wall(fn, repeats: int) -> tuple[float, float]:
    """Medians of (process CPU seconds, wall seconds) over ``repeats`` calls of ``fn(r)``."""
    cpu, wall = [], []
    for r in range(repeats):
        c, w = time.process_time(), time.perf_counter()
        fn(r)
        cpu.append(time.process_time() - c)
        wall.append(time.perf_counter() - w)
    return statistics.median(cpu), statistics.median(wall)


def cost_check(reps: int) -> None:
    """The refusal's estimates (``registered.estimated_seconds``) against the measured CPU and wall time of
    ``sd.release`` with the same mechanism, one key per unit over 21 string keys (as in the issue's report), ε = 1,
    δ = 0; pure-blanket on the same data as the baseline of each row. CPU seconds are the figure to compare on a
    loaded machine (the wall time grows with the load)."""
    import polars as pl

    import sparsedp as sd
    from sparsedp.mechanisms import registry
    from sparsedp.mechanisms.pure.registered import COST_LIMIT_S, estimated_seconds

    print(f"\nBalcer–Vadhan run-time estimates vs measured (median of {reps}; refusal above {COST_LIMIT_S:g} s; "
          f"load average at the start {os.getloadavg()[0]:.1f})")
    print(f"  {'mechanism':>11} {'n':>6} {'estimate s':>11} {'CPU s':>8} {'wall s':>8} {'CPU/est':>8} "
          f"{'blanket CPU s':>14} {'CPU vs blanket':>15}")
    keys = [f"q{i}" for i in range(21)]

    def frame(n: int):
        return pl.DataFrame({"uid": list(range(n)), "query": [keys[i % 21] for i in range(n)]})

    for name, sizes in (("pure-sparse", (500, 1000, 2000, 4000)), ("compact", (100, 200, 400))):
        for n in sizes:
            df = frame(n)
            kw = {"mechanism": registry.create("compact", query_keys=tuple(keys))} \
                if name == "compact" else {"mechanism": name}
            c, w = _cpu_and_wall(lambda r: sd.release(df, privacy_unit="uid", by="query", epsilon=1.0, delta=0.0,
                                                      rng=InsecureSeededRandom(r), **kw), reps)
            b, _ = _cpu_and_wall(lambda r: sd.release(df, privacy_unit="uid", by="query", epsilon=1.0, delta=0.0,
                                                      mechanism="pure-blanket", rng=InsecureSeededRandom(r)), reps)
            est = estimated_seconds(name, n)
            print(f"  {name:>11} {n:6d} {est:11.3f} {c:8.3f} {w:8.3f} {c / est:8.2f} {b:14.3f} {c / b:15.1f}",
                  flush=True)
    print(f"  load average at the end: {os.getloadavg()[0]:.1f}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--blanket", action="store_true")
    ap.add_argument("--cost", action="store_true")
    ap.add_argument("--subset", action="store_true")
    args = ap.parse_args()
    if args.subset:
        subset_step(5)
        return
    reps = 3 if args.quick else 5
    if args.cost:
        cost_check(3)
        return
    blanket_vs_n(3, args.quick)
    acceptance(3)
    if args.blanket:
        return
    exps = [10, 20, 32, 60] if args.quick else [10, 16, 24, 32, 40, 48, 60]

    def run(mech, n, X, **kw):
        data = items_for(n, X)
        return lambda r: pure_histogram(data, 1, beta=0.05, domain_size=X, mechanism=mech,
                                        rng=InsecureSeededRandom(r), **kw)

    n = 200
    table(f"pure-sparse (Alg 8), n={n}, eps=1, vs |X|",
          [(f"2^{e}", timed(run("pure-sparse", n, 2 ** e), reps)) for e in exps])
    nc = 100
    table(f"compact (Alg 9 / Cor 7.3), n={nc}, eps=1, vs |X| (3 counts queried)",
          [(f"2^{e}", timed(run("compact", nc, 2 ** e, query_keys=[0, 1, 2]), reps)) for e in exps])
    dense = [10, 12, 14] if args.quick else [10, 12, 14, 16]
    table(f"basic (dense, Alg 3), n={n}, eps=1, vs |X| (baseline: linear in |X|)",
          [(f"2^{e}", timed(run("basic", n, 2 ** e), reps)) for e in dense])
    ns = [50, 100, 200, 400] if args.quick else [50, 100, 200, 400, 800, 1600]
    table("pure-sparse vs n at |X| = 2^32, eps=1", [(f"n={m}", timed(run("pure-sparse", m, 2 ** 32), reps)) for m in ns])
    ns_c = [25, 50, 100] if args.quick else [25, 50, 100, 200]
    table("compact vs n at |X| = 2^32, eps=1", [(f"n={m}", timed(run("compact", m, 2 ** 32), reps)) for m in ns_c])


if __name__ == "__main__":
    main()
