"""Keys released at one key per unit: the optimal l0 = 1 partition selection (Desfontaines, Voss, Gipson and
Mandayam 2022, ``optimal-partition``) against Laplace, GSHM and the Weighted Gaussian at l0 = 1, and the two-stage
release with ``select="optimal-partition"`` against ``select="gshm"``.

Data: the demo log (``search_log(200_000, seed=0)``, the data of ``benchmarks/two_stage_discovery.py``).

* Part 1 (keys only): the log reduced to one key per unit (each user's first row), so no mechanism loses keys to
  bounding; ε ∈ {0.3, 1, 3}, δ = 1e-6, seeds 1–3 (seeded sources): released keys per seed, their mean, and the
  EXACT expected number of keys Σ_k P[release | c_k] of the optimal rule and of Laplace (data-dependent, for the
  comparison only). With ``--pydp PYTHON`` (an interpreter with python-dp installed), python-dp's
  truncated-geometric partition selection (PipelineDP's "magic" selection) at the same (ε, δ) and l0 = 1 is
  evaluated the same way (its ``probability_of_keep(n)``), and its 50 % point is printed next to ours.
* Part 2 (keys and counts): the full log; ``sd.TwoStage(select="optimal-partition")`` (stage 1 at one key per
  unit) against ``sd.TwoStage(select="gshm")`` at l0 = 1 and at l0 = 5, ε = 1, δ = 1e-6, split 0.5, seeds 1–3:
  keys, median absolute error and median relative error of the released counts against the unbounded truth
  (distinct users per query).

    python benchmarks/optimal_partition.py [--pydp /path/to/python]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import warnings

import numpy as np
import polars as pl

import sparsedp as sd
from sparsedp.accounting.discrete import dlaplace_sf
from sparsedp.accounting.discrete_histograms import calibrate_laplace_discrete
from sparsedp.accounting.partition_selection import calibrate_partition_selection
from sparsedp.demo_data import search_log
from sparsedp.noise import InsecureSeededRandom

EPSILONS = (0.3, 1.0, 3.0)
DELTA = 1e-6
SEEDS = (1, 2, 3)

_PYDP = """
import json, sys
import pydp.algorithms.partition_selection as ps
eps, delta, n = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
s = ps.create_partition_strategy("truncated_geometric", eps, delta, 1)
print(json.dumps([s.probability_of_keep(i) for i in range(1, n + 1)]))
"""


def pydp_curve(python: str, eps: float, n: int) -> np.ndarray:
    out = subprocess.run([python, "-c", _PYDP, str(eps), str(DELTA), str(n)], capture_output=True, text=True,
                         check=True).stdout
    return np.asarray(json.loads(out), dtype=np.float64)


def keys_only(df: pl.DataFrame, pydp: str | None) -> None:
    one = df.unique(subset="user_id", keep="first", maintain_order=True)
    counts = one.group_by("query").len()["len"].to_numpy()
    print(f"part 1: demo log reduced to one key per unit: {one.height} units, {counts.size} keys "
          f"({int((counts >= 10).sum())} with >= 10 units); delta = {DELTA:g}", flush=True)
    routes = [("optimal-partition", dict(mechanism="optimal-partition")),
              ("laplace l0=1", dict(mechanism="laplace", max_groups_per_unit=1)),
              ("gshm l0=1", dict(mechanism="gshm", max_groups_per_unit=1)),
              ("weighted-gaussian l0=1", dict(mechanism="weighted-gaussian", max_groups_per_unit=1))]
    for eps in EPSILONS:
        opt = calibrate_partition_selection(eps, DELTA)
        lap = calibrate_laplace_discrete(eps, DELTA, 1)
        e_opt = opt.expected_keys(counts)
        e_lap = float(dlaplace_sf(1 + lap.tau - counts.astype(float), lap.noise.scale).sum())
        line = (f"eps={eps:g}: optimal-partition n50={opt.n50} (sure from {opt.sure}), laplace threshold "
                f"{int(lap.tau) + 1}; expected keys optimal {e_opt:.3f}, laplace {e_lap:.3f}")
        if pydp:
            n_max = int(counts.max())
            p = pydp_curve(pydp, eps, n_max)
            e_pdp = float(p[counts - 1].sum())
            n50 = int(np.argmax(p >= 0.5)) + 1
            gap = float(np.max(np.abs(p - opt.probabilities(np.arange(1, n_max + 1)))))
            line += (f", python-dp truncated geometric {e_pdp:.3f} (n50={n50}; ours - python-dp = {e_opt - e_pdp:.1e} "
                     f"keys; max |p_pydp - p_ours| = {gap:.2e})")
        print(line, flush=True)
        for name, kw in routes:
            got = [sd.release(one, "user_id", "query", eps, DELTA, rng=InsecureSeededRandom(s), **kw).table.height
                   for s in SEEDS]
            print(f"  {name:24s} keys {got} mean {statistics.mean(got):7.1f}", flush=True)


def two_stage(df: pl.DataFrame) -> None:
    truth = df.group_by("query").agg(pl.col("user_id").n_unique().alias("__truth"))
    print(f"part 2: two-stage on the full log ({df.height} rows), eps=1, delta={DELTA:g}, split 0.5", flush=True)
    routes = [("two-stage select=optimal-partition", dict(mechanism=sd.TwoStage(select="optimal-partition"))),
              ("two-stage select=gshm l0=1", dict(mechanism=sd.TwoStage(select="gshm"), max_groups_per_unit=1)),
              ("two-stage select=gshm l0=5", dict(mechanism=sd.TwoStage(select="gshm"), max_groups_per_unit=5)),
              ("two-stage select=laplace l0=1",
               dict(mechanism=sd.TwoStage(select="laplace"), max_groups_per_unit=1))]
    tables: dict[str, list[pl.DataFrame]] = {}
    for name, kw in routes:
        keys, mae, mre = [], [], []
        for s in SEEDS:
            t = sd.release(df, "user_id", "query", 1.0, DELTA, rng=InsecureSeededRandom(s), **kw).table
            tables.setdefault(name, []).append(t)
            j = t.join(truth, on="query")
            keys.append(t.height)
            err = (j["count"] - j["__truth"]).abs()
            mae.append(float(err.median()))
            mre.append(float((err / j["__truth"]).median()))
        print(f"  {name:36s} keys {keys} mean {statistics.mean(keys):6.1f}; median |error| "
              f"{statistics.mean(mae):6.2f}, median relative error {statistics.mean(mre):.4f}", flush=True)
    a, b = "two-stage select=optimal-partition", "two-stage select=gshm l0=1"
    both = []
    for ta, tb in zip(tables[a], tables[b]):
        j = ta.join(tb, on="query", suffix="_b").join(truth, on="query")
        both.append((j.height, float((j["count"] - j["__truth"]).abs().median()),
                     float((j["count_b"] - j["__truth"]).abs().median())))
    print(f"  on the keys both select (per seed: keys, median |error| optimal-partition, gshm l0=1): {both}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pydp", default=None, help="a Python interpreter with python-dp installed")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    df = search_log(200_000, seed=0)
    keys_only(df, args.pydp)
    two_stage(df)


if __name__ == "__main__":
    main()
