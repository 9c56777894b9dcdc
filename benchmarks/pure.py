"""Running time of the pure-DP histograms (seed 003) against the domain size |X| and the dataset size n.

Claim checked (Thm 6.6, Thm 7.2): PureSparseHistogram and CompactHistogram do not grow with |X| beyond
its bit length, while the dense BasicHistogram grows linearly in |X|. Prints medians of several runs
and ratios against the smallest configuration measured in the same run.

    python benchmarks/pure.py            # default sizes (about a minute)
    python benchmarks/pure.py --quick    # fewer repeats and sizes
"""

from __future__ import annotations

import argparse
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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    reps = 3 if args.quick else 5
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
