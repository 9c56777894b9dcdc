"""Benchmark: the fixed costs of a release (issue 19: "a release of a small frame takes well under a second").

Every measurement is a fresh ``python`` process timed from outside: wall seconds from start to exit and CPU
seconds (user + system of the child, ``wait4``; the robust figure on a shared machine), medians of ``--runs``,
the modes alternating run by run:

- ``python``          ``python -c pass`` (interpreter and ``site`` start-up: the floor of any process)
- ``import polars``   what any Polars user pays before calling sparsedp
- ``small release``   ``import polars, sparsedp``; ``sd.release`` of a 3 000-row frame (default mechanism,
  i.e. ``auto``: GSHM and Laplace calibrated, exact discrete noise)
- ``CLI release``     ``python -m sparsedp release small.csv --unit … --by … --epsilon 1 --delta 1e-6
  --max-groups 3 --out …`` (typer, the report printed)

``--baseline DIR`` also runs the two release modes with the sparsedp of ``DIR/src`` (a worktree of an earlier
commit), interleaved, as ``… @before``. Bytecode caches are written first for both trees (an installed package
has its ``.pyc`` files), and one unmeasured round warms the file cache.

    python benchmarks/start_up.py --runs 7
    python benchmarks/start_up.py --runs 7 --baseline /tmp/checkout-of-main
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

SMALL = r"""
import polars as pl
import sparsedp as sd
df = pl.DataFrame({"user_id": [i // 10 for i in range(3000)], "url": [f"u{i % 10}" for i in range(3000)]})
res = sd.release(df, "user_id", "url", epsilon=1.0, delta=1e-6, max_groups_per_unit=3)
assert res.report.released_keys == 10, res.report.released_keys
"""


def child_env(src: str | None) -> dict:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if src is not None:
        env["PYTHONPATH"] = src
    return env


def run(args: list[str], src: str | None) -> tuple[float, float]:
    t = time.perf_counter()
    p = subprocess.Popen([sys.executable, *args], env=child_env(src), stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"child failed: {args}")
    return wall, usage.ru_utime + usage.ru_stime


def _uptime() -> str:
    with open("/proc/loadavg") as fh:
        return "load average " + ", ".join(fh.read().split()[:3]) + f" on {os.cpu_count()} cores"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--baseline", default=None, help="a checkout of an earlier commit (its DIR/src)")
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
        modes: dict[str, tuple[list[str], str | None]] = {
            "python": (["-c", "pass"], None), "import polars": (["-c", "import polars"], None)}
        for tag, src in trees.items():
            modes["small release" + tag] = (["-c", SMALL], src)
            modes["CLI release" + tag] = (["-m", "sparsedp", "release", csv, "--unit", "user_id", "--by", "url",
                                           "--epsilon", "1", "--delta", "1e-6", "--max-groups", "3", "--out",
                                           os.path.join(d, "out.csv")], src)
        print(f"before: {_uptime()}", flush=True)
        res: dict[str, list[tuple[float, float]]] = {m: [] for m in modes}
        for i in range(args.runs + 1):
            for m, (cmd, src) in modes.items():
                r = run(cmd, src)
                if i:  # round 0 warms the file cache
                    res[m].append(r)
        print(f"{'whole process':24s} {'wall s':>7s} {'CPU s':>7s}  runs (wall s)")
        for m, rs in res.items():
            print(f"{m:24s} {statistics.median(r[0] for r in rs):7.3f} {statistics.median(r[1] for r in rs):7.3f}  "
                  + ", ".join(f"{r[0]:.2f}" for r in rs), flush=True)
        print(f"after: {_uptime()}")


if __name__ == "__main__":
    main()
