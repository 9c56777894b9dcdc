"""The keys objective for the Weighted Gaussian: ``mechanism="weighted-gaussian"`` with
``sd.AutoBound(objective="keys")`` against fixed bounds (keys released, ε = 1, δ = 1e-6, seeds 1–3; the
demo log at 200k rows and the corpus of 5000 files as in ``benchmarks/utility.py``).

    PYTHONPATH=src python benchmarks/auto_keys_wg.py
"""

from __future__ import annotations

import sys
import tempfile
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

SEEDS = (1, 2, 3)


def main() -> int:
    import polars as pl

    import peers
    import sparsedp as sd
    from sparsedp.noise import InsecureSeededRandom
    from utility import corpus_dataset

    with tempfile.TemporaryDirectory() as td:
        for tag, build in (("demo", lambda p: peers.demo_dataset(200_000, p)),
                           ("corpus", lambda p: corpus_dataset(5000, 150, p))):
            path = Path(td) / f"{tag}.parquet"
            build(path)
            df = pl.read_parquet(path)
            routes = [(f"WG l0={l0}", dict(max_groups_per_unit=l0)) for l0 in (5, 20, 100, 256)]
            routes.append(("WG auto keys", dict(max_groups_per_unit=sd.AutoBound(objective="keys"))))
            for name, kw in routes:
                t = time.perf_counter()
                keys, l0s = [], []
                for seed in SEEDS:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        r = sd.release(df, "unit", "key", 1.0, 1e-6, mechanism="weighted-gaussian",
                                       rng=InsecureSeededRandom(seed), **kw)
                    keys.append(r.table.height)
                    l0s.append(r.report.auto_bound["bound"] if r.report.auto_bound else None)
                print(f"{tag} {name:14s} keys {sum(keys) / len(keys):6.1f} {keys} l0 {l0s} "
                      f"({(time.perf_counter() - t) / len(SEEDS):.1f} s/release)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
