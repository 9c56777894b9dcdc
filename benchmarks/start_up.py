"""Benchmark: the fixed costs of a release (issue 19: "a release of a small frame takes well under a second").

Every measurement is a fresh ``python`` process timed from outside: wall seconds from start to exit and CPU
seconds (user + system of the child, ``wait4``; the robust figure on a shared machine), medians of ``--runs``,
the modes alternating run by run:

- ``python``          ``python -c pass`` (interpreter and ``site`` start-up: the floor of any process)
- ``import polars``   what any Polars user pays before calling sparsedp
- ``small release``   ``import polars, sparsedp``; ``sd.release`` of a 3 000-row frame (default mechanism,
  i.e. ``auto``: GSHM and Laplace calibrated, exact discrete noise)
- ``first release (10 rows)``  issue 31's measure (and the same at ``l0 = 1``, the discrete Laplace):
  ``python -X importtime -c "import sparsedp as sd; sd.release"`` and then the first release of a 10-row
  Polars frame, in one fresh process (target ≤ 0.35 s); the child also prints its own time from its first
  line to its last (no interpreter start or exit: less noisy) and the time its cyclic garbage collections
  took, a second table;
  twice: with the calibration cache cold (an empty ``SPARSEDP_CACHE_DIR``: the accountant runs, importing
  ``scipy.special``) and warm (the calibrations on disk from an earlier process:
  :mod:`sparsedp.accounting.calibration_cache`). The ``-X importtime`` lines of the last warm run are summed
  by top-level package and printed (the imports a first release pays).
- ``CLI release``     ``python -m sparsedp release small.csv --unit … --by … --epsilon 1 --delta 1e-6
  --max-groups 3 --out …`` (typer, the report printed)

``--baseline DIR`` also runs the two release modes with the sparsedp of ``DIR/src`` (a worktree of an earlier
commit), interleaved, as ``… @before``. Bytecode caches are written first for both trees (an installed package
has its ``.pyc`` files), and one unmeasured round warms the file cache.

    python benchmarks/start_up.py --runs 7
    python benchmarks/start_up.py --runs 7 --baseline /tmp/checkout-of-main
    python benchmarks/start_up.py --runs 15 --first-only --baseline /tmp/checkout-of-main   # the issue's measure only

(``fastest``: the fastest run's wall seconds, the best stand-in for a quiet machine on a shared one.)

(``first release (10 rows)`` runs under ``-X importtime``, as issue 31 states the measure; its output goes to a
file, not the terminal.)
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

SMALL = r"""
import polars as pl
import sparsedp as sd
df = pl.DataFrame({"user_id": [i // 10 for i in range(3000)], "url": [f"u{i % 10}" for i in range(3000)]})
res = sd.release(df, "user_id", "url", epsilon=1.0, delta=1e-6, max_groups_per_unit=3)
assert res.report.released_keys == 10, res.report.released_keys
"""

#: issue 31: ``import sparsedp as sd; sd.release`` then the first release of a 10-row frame; prints the seconds
#: from its first line to its last (no interpreter start or exit) and those spent in cyclic garbage collections
FIRST = r"""
import time
t0 = time.perf_counter()
import gc
gc_s = {"start": 0.0, "total": 0.0}
def timer(phase, info):
    if phase == "start":
        gc_s["start"] = time.perf_counter()
    else:
        gc_s["total"] += time.perf_counter() - gc_s["start"]
gc.callbacks.append(timer)
import sparsedp as sd
sd.release
import polars as pl
df = pl.DataFrame({"user_id": list(range(10)), "url": ["a", "b"] * 5})
res = sd.release(df, "user_id", "url", epsilon=1.0, delta=1e-6, max_groups_per_unit=3)
print(time.perf_counter() - t0, gc_s["total"])
"""
#: the mode whose ``-X importtime`` output is summed at the end
WARM = "first release (10 rows), cache warm"
#: the same at l0 = 1, where the default mechanism is the discrete Laplace (its charge evaluates its profile)
FIRST_L0_1 = FIRST.replace("max_groups_per_unit=3", "max_groups_per_unit=1")


def child_env(src: str | None, cache: str | None = None) -> dict:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if src is not None:  # first on the path; what was there stays (wheels installed with --target)
        env["PYTHONPATH"] = os.pathsep.join([src, *filter(None, [env.get("PYTHONPATH")])])
    if cache is not None:
        env["SPARSEDP_CACHE_DIR"] = cache
    return env


def run(args: list[str], src: str | None, cache: str | None = None, stderr: Any = subprocess.DEVNULL,
        ) -> tuple[float, ...]:
    """``(wall, cpu)`` of the child, then the numbers on the last line it printed (:data:`FIRST`: its in-process
    and garbage-collection seconds)."""
    with tempfile.TemporaryFile("w+") as out:
        t = time.perf_counter()
        p = subprocess.Popen([sys.executable, *args], env=child_env(src, cache), stdout=out, stderr=stderr)
        _, status, usage = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t
        if os.waitstatus_to_exitcode(status) != 0:
            raise RuntimeError(f"child failed: {args}")
        out.seek(0)
        printed = out.read().split()
    return (wall, usage.ru_utime + usage.ru_stime, *(float(x) for x in printed[-2:] if args[-1] in (FIRST, FIRST_L0_1)))


def _uptime() -> str:
    with open("/proc/loadavg") as fh:
        return "load average " + ", ".join(fh.read().split()[:3]) + f" on {os.cpu_count()} cores"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--baseline", default=None, help="a checkout of an earlier commit (its DIR/src)")
    ap.add_argument("--first-only", action="store_true",
                    help="only `import polars` and issue 31's first release with a warm cache (more runs per minute)")
    args = ap.parse_args()
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")
    trees = {"": os.path.abspath(here)}
    if args.baseline:
        trees[" @before"] = os.path.join(os.path.abspath(args.baseline), "src")
    for src in trees.values():
        subprocess.run([sys.executable, "-m", "compileall", "-q", os.path.join(src, "sparsedp")],
                       env=child_env(None), check=False)
    with tempfile.TemporaryDirectory() as d:
        csv = os.path.join(d, "small.csv")
        with open(csv, "w") as fh:
            fh.write("user_id,url\n" + "".join(f"{i // 10},u{i % 10}\n" for i in range(3000)))
        warm = os.path.join(d, "cache-warm")
        modes: dict[str, tuple[list[str], str | None, str | None]] = {
            "python": (["-c", "pass"], None, None), "import polars": (["-c", "import polars"], None, None)}
        if args.first_only:
            del modes["python"]
        for tag, src in trees.items():
            if not args.first_only:
                modes["first release (10 rows), cache cold" + tag] = (["-X", "importtime", "-c", FIRST], src, "cold")
            modes[WARM + tag] = (["-X", "importtime", "-c", FIRST], src, warm)
            modes["first release (10 rows, l0 = 1), cache warm" + tag] = (["-c", FIRST_L0_1], src, warm)
            if args.first_only:
                continue
            modes["small release" + tag] = (["-c", SMALL], src, None)
            modes["CLI release" + tag] = (["-m", "sparsedp", "release", csv, "--unit", "user_id", "--by", "url",
                                           "--epsilon", "1", "--delta", "1e-6", "--max-groups", "3", "--out",
                                           os.path.join(d, "out.csv")], src, None)
        print(f"before: {_uptime()}", flush=True)
        res: dict[str, list[tuple[float, ...]]] = {m: [] for m in modes}
        importtime = os.path.join(d, "importtime.txt")
        for i in range(args.runs + 1):
            for m, (cmd, src, cache) in modes.items():
                if cache == "cold":  # a fresh, empty cache directory for every cold run
                    cache = tempfile.mkdtemp(dir=d)
                if m.startswith("CLI release"):  # a release never replaces an earlier output unasked
                    for name in ("out.csv", "out.csv.json"):
                        if os.path.exists(os.path.join(d, name)):
                            os.remove(os.path.join(d, name))
                if m == WARM:  # the -X importtime summary below is of this mode's last run
                    with open(importtime, "w") as err:
                        r = run(cmd, src, cache, stderr=err)
                    with open(importtime) as fh:
                        last_imports = fh.read()
                else:
                    r = run(cmd, src, cache)
                if i:  # round 0 warms the file cache (and the calibration cache of the warm runs)
                    res[m].append(r)
        print(f"{'whole process':44s} {'wall s':>7s} {'CPU s':>7s} {'fastest':>8s}  runs (wall s)")
        for m, rs in res.items():
            print(f"{m:44s} {statistics.median(r[0] for r in rs):7.3f} {statistics.median(r[1] for r in rs):7.3f} "
                  f"{min(r[0] for r in rs):8.3f}  " + ", ".join(f"{r[0]:.2f}" for r in rs), flush=True)
        print(f"{'in the process (first line to last)':44s} {'wall s':>7s} {'GC s':>7s} {'fastest':>8s}  runs (wall s)")
        for m, rs in res.items():
            if len(rs[0]) == 4:
                print(f"{m:44s} {statistics.median(r[2] for r in rs):7.3f} {statistics.median(r[3] for r in rs):7.3f} "
                      f"{min(r[2] for r in rs):8.3f}  " + ", ".join(f"{r[2]:.2f}" for r in rs), flush=True)
        print("imports of the last warm first release (-X importtime, top-level packages, cumulative s): "
              + ", ".join(f"{k} {v:.3f}" for k, v in top_imports(last_imports)[:8]))
        print("issue 31 target: first release (10 rows) <= 0.35 s in a fresh process")
        print(f"after: {_uptime()}")


def top_imports(text: str) -> list[tuple[str, float]]:
    """The cumulative seconds of each top-level import (no indentation) in ``-X importtime`` output, summed by
    top-level package, largest first."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        parts = line.split("|")
        if len(parts) == 3 and parts[0].startswith("import time:") and not parts[2].startswith("  "):
            try:
                us = int(parts[1])
            except ValueError:
                continue
            pkg = parts[2].strip().split(".")[0]
            out[pkg] = out.get(pkg, 0.0) + us / 1e6
    return sorted(out.items(), key=lambda kv: -kv[1])


if __name__ == "__main__":
    main()
