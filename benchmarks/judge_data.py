"""Write the data sets of issue 31's 16-core judge (``benchmarks/judge_16core.sh``) into a folder, in parallel
child processes: the search-log data and the high-cardinality ("wide-keys") data of ``benchmarks/release.py``
at 5·10^7 and 10^8 rows (``--scale`` multiplies the row counts, for a small trial run).

    python benchmarks/judge_data.py /tmp/bench              # on the device machine, before judge_16core.sh
    python benchmarks/judge_data.py /tmp/bench --scale 0.01 # a trial at 5·10^5 and 10^6 rows
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from release import write_data  # noqa: E402  (the same generators as release.py)

SETS = (("sl5e7", 5e7, "search-log"), ("sl1e8", 1e8, "search-log"),
        ("wide5e7", 5e7, "wide-keys"), ("wide1e8", 1e8, "wide-keys"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folder")
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--sets", default=",".join(s[0] for s in SETS), help="which, e.g. sl5e7,wide5e7")
    args = ap.parse_args()
    sets = [s for s in SETS if s[0] in args.sets.split(",")]
    os.makedirs(args.folder, exist_ok=True)

    def one(spec: tuple[str, float, str]) -> str:
        name, rows_f, shape = spec
        rows = int(rows_f * args.scale)
        t = time.perf_counter()
        keys = write_data(os.path.join(args.folder, name + ".parquet"), rows, rows // 10, shape, rows // 25)
        return f"{name}: {rows:,} rows, {rows // 10:,} users, {keys:,} distinct urls, {time.perf_counter() - t:.0f} s"

    with ThreadPoolExecutor(len(sets)) as pool:
        for line in pool.map(one, sets):
            print(line, flush=True)


if __name__ == "__main__":
    main()
