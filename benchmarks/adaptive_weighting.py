"""Keys released by the adaptive-weighting set unions (``mad``, ``mad2r``) against the Weighted Gaussian.

    PYTHONPATH=src python benchmarks/adaptive_weighting.py                    # demo log, ε ∈ {0.3, 1, 3}
    PYTHONPATH=src python benchmarks/adaptive_weighting.py --rows 1000000 --l0s 10 --seeds 1
    PYTHONPATH=src python benchmarks/adaptive_weighting.py --timing 5e7 --runs 3   # selection vs count-only time
    PYTHONPATH=src python benchmarks/adaptive_weighting.py --datasets demo,corpus,copyright   # issue 33's grid
    PYTHONPATH=src python benchmarks/adaptive_weighting.py --fresh 32 --runs 3   # calibration cache cold vs warm

The demo search log (``sparsedp.demo_data.search_log``, 200 000 rows, data seed 0), δ = 1e-6, every mechanism at
Δ0 ∈ ``--l0s``, secure path with a seeded source per ``--seeds`` (keys averaged over the seeds). Prints, per ε,
each mechanism's keys at each Δ0 and at its best Δ0, the ratio to the Weighted Gaussian (same Δ0 and best vs best)
and the median release time (after a warm-up release that calibrates: calibrations are cached per process).
Issue 33's targets: ``mad2r`` >= 1.10x and ``mad`` >= 1.0x the Weighted Gaussian's keys.

``--datasets demo,corpus,copyright``: issue 33's benchmark grid instead (the data of ``benchmarks/set_union.py``:
the demo search log, 100 000 rows; Python sources, words and bigrams, 1000 files; the Debian copyright holders),
each mechanism at every l0 of that script's grid for the dataset (``set_union.L0S``; ``mad``/``mad2r`` only up to
their ``MAX_L0`` = 256, plus 256 where the grid goes beyond), keys averaged over ``--seeds``, best l0 against best
l0, with the targets (``mad2r`` >= 1.10x, ``mad`` >= 1.0x the Weighted Gaussian) printed met / not met.

``--timing ROWS``: issue 33's time target instead ("selection at 10^8 rows on 2 cores <= 2x the time of the
count-only release of the same file"). The click log of ``benchmarks/release.py`` (``search_log``, ROWS rows,
ROWS/10 users) is written once to Parquet; then, alternating, ``--runs`` whole processes each (wall time from
start to exit, imports included, as ``release.py``) of: the count-only release (``sd.release(path, …)`` with
its defaults, ε = 1, δ = 1e-6, Δ0 = ``--l0s``' first), the default selection (``mechanism=sd.Auto(objective=
"keys")``), ``mad2r`` and ``weighted-gaussian``; printed: medians, and each selection's ratio to the count-only
median of the same run, with met / not met. ``--baseline DIR``: a mode suffixed ``@before`` (e.g. ``mad@before``)
runs with ``sparsedp`` imported from ``DIR/src`` (another checkout, e.g. the code before a change).

``--fresh L0``: a fresh process's ``mad`` release at Δ0 = L0 (the demo log, 200 000 rows, written once to Parquet;
ε = 1, δ = 1e-6, a seeded source), ``--runs`` whole processes each, alternating: with the calibration cache cold
(``SPARSEDP_CACHE_DIR`` an empty directory: the rounds' calibration computed) and warm (a directory an earlier
process filled: read back, :mod:`sparsedp.accounting.rounds_cache`). Printed: medians and their ratio, and
whether both gave the same table.
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings

MECHANISMS = ("weighted-gaussian", "mad", "mad2r")

TIMING_CHILD = r"""
import json, sys
import sparsedp as sd
path, what, l0 = sys.argv[1], sys.argv[2], int(sys.argv[3])
kw = {} if what == "count-only" else {
    "mechanism": sd.Auto(objective="keys") if what == "selection (auto keys)" else what}
res = sd.release(path, "user_id", "url", epsilon=1.0, delta=1e-6, max_groups_per_unit=l0, **kw)
print(json.dumps({"keys": int(res.report.released_keys)}))
"""
TIMED = ("count-only", "selection (auto keys)", "mad2r", "weighted-gaussian")

FRESH_CHILD = r"""
import hashlib, json, sys
import sparsedp as sd
from sparsedp.noise import InsecureSeededRandom
res = sd.release(sys.argv[1], "user_id", "query", epsilon=1.0, delta=1e-6, max_groups_per_unit=int(sys.argv[2]),
                 mechanism="mad", rng=InsecureSeededRandom(1))
t = res.table.sort("query")
print(json.dumps({"keys": t.height, "table": hashlib.sha256(t.write_csv().encode()).hexdigest()[:16]}))
"""


def fresh(l0: int, runs: int) -> None:
    """A fresh process's ``mad`` release, calibration cache cold against warm (module docstring)."""
    import os
    import sys
    import tempfile
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import release  # benchmarks/release.py: the timed child runner

    from sparsedp.demo_data import search_log

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "log.parquet")
        search_log(200_000, seed=0).select("user_id", "query").write_parquet(path)
        warm_dir = os.path.join(tmp, "warm")
        before = os.environ.get("SPARSEDP_CACHE_DIR")
        res: dict[str, list[dict]] = {"cold": [], "warm": []}
        try:
            os.environ["SPARSEDP_CACHE_DIR"] = warm_dir
            release.run_process([FRESH_CHILD, path, str(l0)])  # fills the warm cache (not timed)
            print(f"demo log 200 000 rows, mad at l0 = {l0}; {release._uptime()} (shared, loaded machine)", flush=True)
            for i in range(runs):
                for mode in ("cold", "warm"):
                    os.environ["SPARSEDP_CACHE_DIR"] = tempfile.mkdtemp(dir=tmp) if mode == "cold" else warm_dir
                    r = release.run_process([FRESH_CHILD, path, str(l0)])
                    res[mode].append(r)
                    print(f"  run {i + 1} {mode}: {r['wall']:.2f} s wall, {r['cpu']:.2f} s CPU, {r['keys']} keys, "
                          f"table {r['table']}", flush=True)
        finally:
            if before is None:
                os.environ.pop("SPARSEDP_CACHE_DIR", None)
            else:
                os.environ["SPARSEDP_CACHE_DIR"] = before
    med = {m: statistics.median(r["wall"] for r in rs) for m, rs in res.items()}
    same = len({r["table"] for rs in res.values() for r in rs}) == 1
    print(f"\nmedians of {runs} whole processes ({release._uptime()}): cold {med['cold']:.2f} s, warm "
          f"{med['warm']:.2f} s ({med['cold'] / med['warm']:.1f}x); the same table every run: {same}")


def datasets(tags: list[str], epsilons: list[float], seeds: list[int]) -> None:
    """Issue 33's keys grid (module docstring): best l0 against best l0 per (dataset, ε), targets printed."""
    import sys
    import tempfile
    from pathlib import Path

    import polars as pl

    import sparsedp as sd
    from sparsedp.accounting.adaptive_weighting import MAX_L0
    from sparsedp.noise import InsecureSeededRandom

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import corpora
    import peers
    import set_union
    import utility

    build = {"demo": lambda p: peers.demo_dataset(100_000, p), "corpus": lambda p: utility.corpus_dataset(1000, 100, p),
             "copyright": corpora.copyright_dataset}
    verdicts = []
    with tempfile.TemporaryDirectory() as tmp:
        for tag in tags:
            path = Path(tmp) / f"{tag}.parquet"
            build[tag](path)
            df = pl.read_parquet(path)
            grid = set_union.L0S[tag]
            rounds_grid = tuple(sorted({x for x in grid if x <= MAX_L0} | ({MAX_L0} if max(grid) > MAX_L0 else set())))
            print(f"\n{tag}: {df.height} rows; l0 grid {grid} (mad, mad2r: {rounds_grid}); delta 1e-6, seeds {seeds}; "
                  f"shared loaded machine", flush=True)
            for eps in epsilons:
                best: dict[str, tuple[float, int]] = {}
                at: dict[tuple[str, int], float] = {}
                for m in MECHANISMS:
                    for l0 in (grid if m == "weighted-gaussian" else rounds_grid):
                        n = []
                        for s in seeds:
                            with warnings.catch_warnings():
                                warnings.simplefilter("ignore")
                                r = sd.release(df, "unit", "key", eps, 1e-6, max_groups_per_unit=l0, mechanism=m,
                                               rng=InsecureSeededRandom(s), interval=None)
                            n.append(r.table.height)
                        k = statistics.fmean(n)
                        at[(m, l0)] = k
                        if m not in best or k > best[m][0]:
                            best[m] = (k, l0)
                wg = best["weighted-gaussian"][0]
                line = ", ".join(f"{m} {k:.1f} (l0={l0})" for m, (k, l0) in best.items())
                print(f"  eps={eps:g}: {line}", flush=True)
                for m in MECHANISMS[1:]:  # equal l0 (docs/proofs/mad.md §8: mad at l0 = 1 is the Weighted Gaussian)
                    same = ", ".join(f"l0={l0}: {at[(m, l0)] / at[('weighted-gaussian', l0)]:.3f}"
                                     for l0 in rounds_grid if at.get(("weighted-gaussian", l0)))
                    print(f"    {m} / weighted-gaussian at the same l0: {same}", flush=True)
                for m, target in (("mad2r", 1.10), ("mad", 1.0)):
                    ratio = best[m][0] / wg if wg else float("nan")
                    verdicts.append(f"  {tag:<10} eps={eps:<4g} {m:<6} {ratio:6.3f}x WG (target >= {target:.2f}x): "
                                    + ("met" if ratio >= target else "NOT met"))
    print("\nissue 33 targets (best l0 vs best l0, keys averaged over the seeds):")
    print("\n".join(verdicts))


def timing(rows: int, runs: int, l0: int, data: str | None = None, modes: tuple[str, ...] = TIMED,
           baseline: str | None = None) -> None:
    """Issue 33's time target (module docstring): whole processes on one Parquet file, medians, ratios."""
    import os
    import sys
    import tempfile
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import release  # benchmarks/release.py: the data writer and the timed child runner

    with tempfile.TemporaryDirectory() as tmp:
        path = data or os.path.join(tmp, "clicks.parquet")
        t = time.perf_counter()
        if data is None:
            release.write_data(path, rows, max(1, rows // 10))
        import pyarrow.parquet as pq
        n = pq.ParquetFile(path).metadata.num_rows
        print(f"click log: {n:.3g} rows ({'given' if data else f'written in {time.perf_counter() - t:.0f} s'}); "
              f"l0 = {l0}; {release._uptime()} (shared, loaded machine)", flush=True)
        res: dict[str, list[dict]] = {m: [] for m in modes}
        for i in range(runs):
            for m in modes:
                before = m.endswith("@before")
                if before and not baseline:
                    raise SystemExit(f"{m}: give --baseline DIR (the checkout to time it with)")
                r = release.run_process([TIMING_CHILD, path, m.removesuffix("@before"), str(l0)],
                                        src=os.path.join(baseline, "src") if before and baseline else None)
                res[m].append(r)
                print(f"  run {i + 1} {m}: {r['wall']:.1f} s wall, {r['cpu']:.1f} s CPU, {r['rss_gib']:.2f} GiB, "
                      f"{r['keys']} keys", flush=True)
        base = statistics.median(r["wall"] for r in res["count-only"])
        print(f"\nmedians of {runs} whole processes ({release._uptime()}):")
        for m in modes:
            med = statistics.median(r["wall"] for r in res[m])
            cpu = statistics.median(r["cpu"] for r in res[m])
            verdict = "" if m == "count-only" else ("  target <= 2x: met" if med <= 2 * base else "  target <= 2x: NOT met")
            print(f"  {m:<24}{med:8.1f} s wall {cpu:8.1f} s CPU  {med / base:6.2f}x count-only{verdict}")


def main() -> None:
    import sparsedp as sd
    from sparsedp.demo_data import search_log
    from sparsedp.noise import InsecureSeededRandom

    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--epsilons", default="0.3,1,3")
    ap.add_argument("--l0s", default="5,10,20,32")
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--timing", type=float, default=None, help="rows: the selection-time target instead")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--data", default=None, help="--timing: reuse this Parquet file (columns user_id, url)")
    ap.add_argument("--modes", default=",".join(TIMED), help="--timing: what to time (count-only first)")
    ap.add_argument("--baseline", default=None, help="--timing: the checkout that modes suffixed @before run with")
    ap.add_argument("--datasets", default=None, help="issue 33's grid: demo,corpus,copyright")
    ap.add_argument("--fresh", type=int, default=None, help="l0: a fresh process's mad release, cache cold vs warm")
    a = ap.parse_args()
    if a.fresh:
        return fresh(a.fresh, a.runs)
    if a.datasets:
        return datasets(a.datasets.split(","), [float(x) for x in a.epsilons.split(",")],
                        [int(x) for x in a.seeds.split(",")])
    if a.timing:
        return timing(int(a.timing), a.runs, int(a.l0s.split(",")[0]), a.data, tuple(a.modes.split(",")),
                      a.baseline)
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
