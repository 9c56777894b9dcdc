"""Where a release's wall time goes, and how many cores each part keeps busy: one release of a Parquet file in
this process, its steps wrapped in timers, printed as a timeline.

Each line: the step, when it started (seconds since this script started), its wall seconds, the process's CPU
seconds during it (all threads: ``time.process_time``) and their ratio, the cores it kept busy on average. A
step with few cores busy on a many-core machine is what limits the release's speed-up with cores (issue 31).
Imports are timed too (``import polars``, ``import sparsedp``, the release path's lazy imports).

    python benchmarks/release_stages.py clicks.parquet [--l0 10] [--repeat 2]

``--repeat 2`` releases twice: the second one has its imports and calibrations already done.
"""
from __future__ import annotations

import time

T0, C0 = time.perf_counter(), time.process_time()

import argparse  # noqa: E402
import functools  # noqa: E402
import importlib  # noqa: E402
import os  # noqa: E402
from typing import Any, Callable  # noqa: E402

EVENTS: list[tuple[int, str, float, float, float, float]] = []
DEPTH = [0]

#: (module, attribute): the steps timed. ``Class.method`` attributes are wrapped on the class.
STEPS = [
    ("polars", "collect_all"),
    ("sparsedp.engines.pair_ids", "sorted_pairs"),
    ("sparsedp.engines.pair_ids", "pack_pairs"),
    ("sparsedp.engines.pair_ids", "_sorted_pairs"),
    ("sparsedp.engines.sorted_runs", "SortedRuns.sort_in_place"),
    ("sparsedp.engines.pair_ids", "_category_strings"),
    ("sparsedp.engines.pair_ids", "check_nan_keys"),
    ("sparsedp.engines.pair_ids", "key_context"),
    ("sparsedp.engines.pair_ids", "_map_parts"),
    ("sparsedp.engines.pair_ids", "PairCounts.raw_counts"),
    ("sparsedp.engines.pair_ids", "bounded_raw_counts"),
    ("sparsedp.engines.base", "Engine.histogram"),
    ("sparsedp.query", "run_query"),
]


def timed(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def wrapper(*a: Any, **k: Any) -> Any:
        depth = DEPTH[0]
        DEPTH[0] += 1
        t, c = time.perf_counter(), time.process_time()
        try:
            return fn(*a, **k)
        finally:
            DEPTH[0] = depth
            EVENTS.append((depth, name, t - T0, time.perf_counter() - t, time.process_time() - c, t))
    return wrapper


def span(name: str, t: float, c: float) -> None:
    EVENTS.append((0, name, t - T0, time.perf_counter() - t, time.process_time() - c, t))


def wrap_steps() -> None:
    for mod, attr in STEPS:
        try:
            m = importlib.import_module(mod)
        except ImportError:
            continue
        owner: Any = m
        *path, last = attr.split(".")
        for p in path:
            owner = getattr(owner, p, None)
        if owner is not None and hasattr(owner, last):
            setattr(owner, last, timed(attr, getattr(owner, last)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("path")
    ap.add_argument("--l0", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    span("python start-up to main()", T0, C0)
    t, c = time.perf_counter(), time.process_time()
    import polars  # noqa: F401
    span("import polars", t, c)
    t, c = time.perf_counter(), time.process_time()
    import sparsedp as sd
    sd.release  # noqa: B018  (the lazy import of the release path)
    span("import sparsedp (+ release path)", t, c)
    t, c = time.perf_counter(), time.process_time()
    wrap_steps()
    span("import the timed modules (not in a release)", t, c)
    import warnings
    warnings.simplefilter("ignore")
    for i in range(args.repeat):
        t, c = time.perf_counter(), time.process_time()
        res = sd.release(args.path, "user_id", "url", epsilon=1.0, delta=1e-6, max_groups_per_unit=args.l0)
        span(f"release {i + 1} ({res.report.released_keys:,} keys)", t, c)
        timings = getattr(res.curator, "timings", {})
        print(f"release {i + 1}: its own stage timings: " + ", ".join(f"{k} {v:.3f}" for k, v in timings.items()))
    print(f"{os.cpu_count()} cores; {os.environ.get('POLARS_MAX_THREADS', 'all')} Polars threads")
    print(f"{'step':48s} {'start s':>8s} {'wall s':>7s} {'CPU s':>7s} {'cores':>6s}")
    for depth, name, start, wall, cpu, _ in sorted(EVENTS, key=lambda e: (e[5], e[0])):
        print(f"{'  ' * depth + name:48s} {start:8.3f} {wall:7.3f} {cpu:7.2f} {cpu / wall if wall > 0 else 0:6.1f}")
    print(f"{'whole script':48s} {0:8.3f} {time.perf_counter() - T0:7.3f} {time.process_time():7.2f}")


if __name__ == "__main__":
    main()
