"""Benchmark: streaming Misra–Gries and ALP space / access time.

Run:  python benchmarks/sketches.py [--items 1e8] [--k 10000] [--repeats 3]
      python benchmarks/sketches.py --alp-memory-only [--alp-u 2e4,2e5,1e6] [--baseline-src OLD/src]

Part 1 (issue 8 acceptance): a lazily generated stream (Pareto-skewed integer keys, chunks of 2^20) is
sketched with k = 10^4 by the exact Algorithm-12 kernel. Prints items/s of the sketch update (median of
``--repeats`` runs over the first 10^7 items, then one full run), items/s of ``collections.Counter`` on
the same 10^7-item prefix (the baseline, per item), and peak RSS after 10^7 and after all items (the
sketch's memory is O(k): the two must agree).

Part 2: ALP (thesis Ch. 2) space in bits against the stated sizes (s·m bits for z̃ with s = 10k and
m = ⌈ψε/α⌉ or ⌈tε₂/α⌉, 2·61 bits per hash function, 125 bits per threshold-map entry) and query time
against m (a query reads exactly m bits; Lemma 2.6: time O(m), independent of d and k).

Part 3 (issue 32): ALP memory at large u. Each size runs in a fresh subprocess (so its peak RSS,
``ru_maxrss``, is its own): ``ALP.build`` of k = 1000 keys (Zipf values capped at u) with the projection variant
at ε = 0.9 (what ``sd.alp`` gives the structure at ε = 1), u = 2·10^4, 2·10^5 and 10^6, then 50 point queries.
Prints s, m, s·m, build time, peak RSS and the packed structure's size. ``--baseline-src`` runs the same build
under another source tree (e.g. a worktree of an older commit) at the sizes listed in ``--baseline-u``, for a
before/after in the same run. Target: u = 10^6 within 4 GiB of RSS.
"""

from __future__ import annotations

import argparse
import collections
import math
import os
import resource
import statistics
import subprocess
import sys
import time

import numpy as np

from sparsedp.noise import InsecureSeededRandom
from sparsedp.sketches import ALP, MisraGries
from sparsedp.sketches.alp import key_code

CHUNK = 1 << 20


def stream(n_items: int, seed: int = 1):
    """Lazily generated skewed keys: floor(Pareto(a = 0.3)), i.e. a Zipf-like law with exponent ~1.3."""
    gen = np.random.default_rng(seed)
    left = n_items
    while left > 0:
        m = min(CHUNK, left)
        yield np.minimum(np.floor(gen.random(m) ** (-1.0 / 0.3)), 2.0 ** 62).astype(np.int64)
        left -= m


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def sketch_rate(n_items: int, k: int) -> tuple[float, float, MisraGries]:
    """(items/s of the update alone, items/s including generation, sketch)."""
    mg = MisraGries(k)
    t_upd = 0.0
    t0 = time.perf_counter()
    for chunk in stream(n_items):
        t = time.perf_counter()
        mg.update(chunk)
        t_upd += time.perf_counter() - t
    total = time.perf_counter() - t0
    return n_items / t_upd, n_items / total, mg


def counter_rate(n_items: int) -> float:
    c: collections.Counter = collections.Counter()
    t_upd = 0.0
    for chunk in stream(n_items):
        lst = chunk.tolist()
        t = time.perf_counter()
        c.update(lst)
        t_upd += time.perf_counter() - t
    return n_items / t_upd


def part1(n_items: int, k: int, repeats: int) -> None:
    prefix = min(n_items, 10 ** 7)
    MisraGries(k).update(next(stream(1000)))  # compile (or load) the kernel outside the timings
    rss0 = peak_rss_mb()
    rates = [sketch_rate(prefix, k)[0] for _ in range(repeats)]
    rss_prefix = peak_rss_mb()
    mg_rate, mg_rate_gen, mg = sketch_rate(n_items, k)
    rss_full = peak_rss_mb()
    base = [counter_rate(prefix) for _ in range(max(1, repeats - 1))]  # last: its dict is not O(k)
    print(f"== Misra-Gries, k = {k}, exact Algorithm 12 kernel ==")
    print(f"prefix {prefix:.0e} items, median of {repeats}: sketch {statistics.median(rates) / 1e6:8.1f} M items/s")
    print(f"prefix {prefix:.0e} items, median of {len(base)}: Counter {statistics.median(base) / 1e6:8.1f} M items/s"
          f"   (sketch / Counter = {statistics.median(rates) / statistics.median(base):.1f}x)")
    print(f"full   {n_items:.0e} items, one run : sketch {mg_rate / 1e6:8.1f} M items/s"
          f" ({mg_rate_gen / 1e6:.1f} M items/s including lazy generation)   target >= 5 M items/s")
    print(f"peak RSS: {rss0:.0f} MB before, {rss_prefix:.0f} MB after 1e7 items, {rss_full:.0f} MB after "
          f"{n_items:.0e} items (bounded: O(k) state, chunks of {CHUNK} items)")
    print(f"sketch: n = {mg.n}, decrements gamma = {mg.gamma} (<= n/(k+1) = {mg.n / (k + 1):.0f}), "
          f"{len(mg.counters())} positive counters, serialised {len(mg.to_bytes())} bytes")


def part2(repeats: int) -> None:
    print("\n== ALP space and access time ==")
    rng = InsecureSeededRandom(3)
    k = 10_000
    gen = np.random.default_rng(2)
    keys = gen.choice(2 ** 40, size=k, replace=False)
    vals = gen.integers(1, 60, size=k)
    data = dict(zip(keys.tolist(), vals.tolist()))
    print("expected: m = ceil(psi*eps2/alpha) with psi = t (threshold; thesis t = ln(1/delta)/eps1 + 2, "
          "ours the exact discrete-Laplace t) or psi = u; bits = s*m + 2*61*m + 125*|map|")
    print(f"{'variant':<20}{'eps':>5}{'s':>8}{'m':>4}{'m(thesis)':>10}{'bits':>10}{'s*m':>10}{'bits/key':>9}"
          f"{'us/query':>10}{'bits read':>10}")
    for variant, eps, kw in [("threshold d=1e-6", 1.0, {"delta": 1e-6}),
                             ("threshold d=1e-9", 1.0, {"delta": 1e-9}),
                             ("threshold d=1e-12", 1.0, {"delta": 1e-12}),
                             ("projection u=60", 1.0, {"u": 60, "variant": "projection"}),
                             ("projection u=300", 1.0, {"u": 300, "variant": "projection"}),
                             ("projection u=300", 0.25, {"u": 300, "variant": "projection"})]:
        alp = ALP.build(data, epsilon=eps, k=k, rng=rng, **kw)
        tm = 0 if alp.threshold_map is None else len(alp.threshold_map)
        eps2 = alp.epsilon_proj
        psi_thesis = (math.log(1 / kw["delta"]) / (eps - eps2) + 2) if "delta" in kw else kw["u"]
        m_thesis = math.ceil(psi_thesis * eps2 / alp.alpha)
        assert alp.size_in_bits() == alp.s * alp.m + 122 * alp.m + 125 * tm
        probe_keys = [int(x) for x in gen.integers(2 ** 41, 2 ** 42, 2000)]  # absent keys: full bit reads
        times = []
        for _ in range(repeats):
            before = alp.probes.bits_read
            t = time.perf_counter()
            for x in probe_keys:
                alp.estimate(x)
            times.append((time.perf_counter() - t) / len(probe_keys))
            read = (alp.probes.bits_read - before) / len(probe_keys)
        print(f"{variant:<20}{eps:>5g}{alp.s:>8}{alp.m:>4}{m_thesis:>10}{alp.size_in_bits():>10}{alp.s * alp.m:>10}"
              f"{alp.size_in_bits() / k:>9.1f}{statistics.median(times) * 1e6:>10.1f}{read:>10.0f}")
    dense_bits = 64 * 2 ** 40
    print(f"(dense Laplace over d = 2^40 keys: {dense_bits:.2e} bits; a query of ALP reads exactly m bits and "
          f"evaluates m hashes, so time grows linearly in m and does not depend on d or k)")
    # access time does not depend on k or d: same m, different k
    for kk in (1000, 100_000):
        sub = dict(zip(gen.choice(2 ** 60, size=kk, replace=False).tolist(), gen.integers(1, 60, kk).tolist()))
        alp = ALP.build(sub, epsilon=1.0, k=kk, u=60, variant="projection", rng=rng)
        probe = [key_code(int(x)) for x in gen.integers(2 ** 61 - 10 ** 6, 2 ** 61 - 2, 2000)]
        t = time.perf_counter()
        for x in probe:
            alp.estimate(x)
        dt = (time.perf_counter() - t) / len(probe)
        print(f"projection u=60, k = {kk:>6}: m = {alp.m}, {dt * 1e6:.1f} us/query, {alp.size_in_bits()} bits "
              f"({alp.size_in_bits() / kk:.1f} bits/key)")


_ALP_CHILD = """
import resource, sys, time
import numpy as np
from sparsedp.noise import InsecureSeededRandom
from sparsedp.sketches import ALP
u, k = float(sys.argv[1]), int(sys.argv[2])
keys = np.arange(k)
vals = np.minimum(np.random.default_rng(0).zipf(1.3, k), int(u)).astype(np.int64)
t = time.perf_counter()
a = ALP.build((keys, vals), epsilon=0.9, k=k, u=u, variant="projection", rng=InsecureSeededRandom(1))
build = time.perf_counter() - t
t = time.perf_counter()
a.estimate_many(keys[:50])
query = time.perf_counter() - t
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2 ** 20
print(a.s, a.m, build, query, rss, a.s * a.m / 8 / 2 ** 30)
"""


def part3(sizes: list[float], k: int, baseline_src: str | None, baseline_sizes: list[float]) -> None:
    print("\n== ALP memory (projection, k = %d keys, eps = 0.9; one fresh process per row) ==" % k)
    print(f"{'code':<10}{'u':>10}{'s':>8}{'m':>9}{'s*m':>10}{'build s':>9}{'50 queries s':>14}{'peak RSS GiB':>14}"
          f"{'packed GiB':>12}")
    runs = [("this tree", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"), sizes)]
    if baseline_src:
        runs.insert(0, ("baseline", baseline_src, baseline_sizes))
    for label, src, us in runs:
        for u in us:
            env = dict(os.environ, PYTHONPATH=os.path.abspath(src))
            out = subprocess.run([sys.executable, "-c", _ALP_CHILD, str(u), str(k)], env=env, capture_output=True,
                                 text=True)
            if out.returncode != 0:
                print(f"{label:<10}{u:>10.3g}  failed: {out.stderr.strip().splitlines()[-1:]}")
                continue
            s_, m_, build, query, rss, packed = out.stdout.split()
            print(f"{label:<10}{u:>10.3g}{int(s_):>8}{int(m_):>9}{int(s_) * int(m_):>10.3g}{float(build):>9.1f}"
                  f"{float(query):>14.2f}{float(rss):>14.2f}{float(packed):>12.3f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--items", type=float, default=1e8)
    ap.add_argument("--k", type=int, default=10_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--skip-alp", action="store_true")
    ap.add_argument("--alp-memory-only", action="store_true", help="run part 3 only")
    ap.add_argument("--alp-u", default="2e4,2e5,1e6", help="part 3: the values of u (comma-separated)")
    ap.add_argument("--alp-k", type=int, default=1000, help="part 3: keys")
    ap.add_argument("--baseline-src", default=None, help="part 3: another source tree to run at --baseline-u")
    ap.add_argument("--baseline-u", default="2e4", help="part 3: the baseline's values of u")
    a = ap.parse_args()
    sizes = [float(x) for x in a.alp_u.split(",") if x]
    base_sizes = [float(x) for x in a.baseline_u.split(",") if x]
    if a.alp_memory_only:
        part3(sizes, a.alp_k, a.baseline_src, base_sizes)
        return
    part1(int(a.items), a.k, a.repeats)
    if not a.skip_alp:
        part2(a.repeats)
        part3(sizes, a.alp_k, a.baseline_src, base_sizes)


if __name__ == "__main__":
    main()
