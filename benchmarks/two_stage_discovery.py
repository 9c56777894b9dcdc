"""Two-stage release with the Weighted Gaussian set union as its selection (issue 22): keys and median error
against the unbounded truth on the demo log (200 000 rows, ``search_log(seed=0)``, the data of
``benchmarks/utility.py``'s demo dataset), ε = 1, δ = 1e-6, means over seeds 1–3 (seeded sources).

Routes: GSHM at its best l0 (5); the Weighted Gaussian alone (releases weights, so its error column is not a
count error and is not printed); ``sd.TwoStage(select="gshm")`` at l0 = 5 and ``sd.TwoStage(select=
"weighted-gaussian")`` at l0 = 20, each with split ∈ {0.5, 0.7, 0.8} (stage 2: the correlated Gaussian with no
l0 bound on the selected keys).

    python benchmarks/two_stage_discovery.py
"""

from __future__ import annotations

import statistics
import warnings

import polars as pl

import sparsedp as sd
from sparsedp.demo_data import search_log
from sparsedp.noise import InsecureSeededRandom


def main() -> None:
    warnings.simplefilter("ignore")
    df = search_log(200_000, seed=0)
    truth = df.group_by("query").agg(pl.col("user_id").n_unique().alias("__truth"))

    def run(name: str, counts: bool = True, **kw) -> None:
        keys, med = [], []
        for seed in (1, 2, 3):
            t = sd.release(df, "user_id", "query", 1.0, 1e-6, rng=InsecureSeededRandom(seed), **kw).table
            keys.append(t.height)
            col = [c for c in t.columns if c != "query"][0]
            j = t.join(truth, on="query")
            med.append(float((j[col] - j["__truth"]).abs().median()) if j.height else float("nan"))
        err = f"{statistics.mean(med):7.1f}" if counts else "    (weights)"
        print(f"{name:45s} keys {statistics.mean(keys):6.1f}  median error {err}", flush=True)

    run("GSHM l0=5", max_groups_per_unit=5)
    run("weighted-gaussian l0=20", counts=False, max_groups_per_unit=20, mechanism="weighted-gaussian")
    for split in (0.5, 0.7, 0.8):
        run(f"two-stage select=gshm l0=5 split={split}", max_groups_per_unit=5, mechanism=sd.TwoStage(split=split))
        run(f"two-stage select=weighted-gaussian l0=20 split={split}", max_groups_per_unit=20,
            mechanism=sd.TwoStage(select="weighted-gaussian", split=split))


if __name__ == "__main__":
    main()
