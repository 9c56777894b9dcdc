"""Key discovery: the set-union mechanisms (Gopi et al., ICML 2020) against GSHM, top-k CSH and the peers.

    PYTHONPATH=src python benchmarks/set_union.py                       # demo log + text corpus, ε = 1
    PYTHONPATH=src python benchmarks/set_union.py --epsilons 0.3,1 --datasets corpus

Same datasets as ``benchmarks/utility.py`` (imported from it: the demo search log of 200 000 rows, seed 0, and
the text corpus of Python sources on this machine, 5 000 files, first 150 words, words and bigrams), δ = 1e-6.
Routes, all in process with a seeded source (``--seeds``: keys averaged over one draw per seed; with one seed,
differences of a few keys are noise):

* ``weighted-gaussian`` (secure: exact discrete noise) at Δ0 ∈ ``--l0s``;
* ``policy-gaussian`` (FLOAT noise, ``insecure_float=True``: measurement only) at Δ0 ∈ ``--l0s``;
* GSHM at l0 ∈ ``--l0s`` and de-biased top-k CSH at k ∈ {100, 1000} (sparsedp's count releases).

Keys released only: the set-union values are weights, not counts. The peers (OpenDP, PipelineDP) are not run
here; their keys at their best l0 are the figures of ``docs/benchmarks_utility.md`` on the same datasets
(:data:`BEST_PEER`). Target (issue 22): keys >= 1.25x the best peer's at ε = 1.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import peers  # noqa: E402
import utility  # noqa: E402

DELTA = 1e-6
#: best peer (most keys at its best l0) per (dataset, ε), from docs/benchmarks_utility.md (run 2026-11-24 10:04,
#: same datasets and δ); the corpus at ε = 1 also has the addendum with the peers at l0 = 256
BEST_PEER = {
    ("demo", 1.0): ("PipelineDP Gaussian l0=5", 155),
    ("demo", 0.3): ("PipelineDP Gaussian l0=5", 56),
    ("corpus", 1.0): ("PipelineDP Gaussian l0=256 (addendum)", 118),
    ("corpus", 0.3): ("OpenDP Gaussian l0=100", 16),
}


def run(df, eps: float, l0s, seeds) -> list[tuple[str, str, float, float]]:
    import sparsedp as sd
    from sparsedp.noise import InsecureSeededRandom

    routes = [(f"weighted-gaussian l0={l0}", "secure", dict(max_groups_per_unit=l0, mechanism="weighted-gaussian"))
              for l0 in l0s]
    routes += [(f"policy-gaussian l0={l0}", "FLOAT", dict(max_groups_per_unit=l0, mechanism="policy-gaussian",
                                                          insecure_float=True)) for l0 in l0s]
    routes += [(f"GSHM l0={l0}", "secure", dict(max_groups_per_unit=l0, mechanism="gshm")) for l0 in l0s]
    routes += [(f"top-k CSH k={k}", "secure", dict(top_k=k)) for k in (100, 1000)]
    out = []
    for name, kind, kw in routes:
        t = time.perf_counter()
        keys = []
        for seed in seeds:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                res = sd.release(df, "unit", "key", eps, DELTA, rng=InsecureSeededRandom(seed), **kw)
            keys.append(res.table.height)
        sec = (time.perf_counter() - t) / len(seeds)
        mean = sum(keys) / len(keys)
        out.append((name, kind, mean, sec))
        print(f"    {name:28s} {kind:6s} keys {mean:8.1f}  {keys if len(keys) > 1 else ''}  ({sec:.1f} s per "
              f"release)", flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    import polars as pl

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--datasets", default="demo,corpus")
    ap.add_argument("--epsilons", default="1")
    ap.add_argument("--l0s", default="5,20,100,256")
    ap.add_argument("--demo-rows", type=int, default=200_000)
    ap.add_argument("--corpus-files", type=int, default=5000)
    ap.add_argument("--words", type=int, default=150)
    ap.add_argument("--seeds", default="1", help="seeds of the seeded source; keys are averaged over them")
    a = ap.parse_args(argv)
    l0s = [int(x) for x in a.l0s.split(",")]
    lines = []
    with tempfile.TemporaryDirectory(prefix="sparsedp-setunion-") as td:
        tmp = Path(td)
        sets = {"demo": lambda p: peers.demo_dataset(a.demo_rows, p),
                "corpus": lambda p: utility.corpus_dataset(a.corpus_files, a.words, p)}
        for tag in a.datasets.split(","):
            path = tmp / f"{tag}.parquet"
            info = sets[tag](path)
            df = pl.read_parquet(path)
            print(f"{tag}: {info['rows']} rows, {info['units']} units, {info['keys']} keys", flush=True)
            for eps in (float(x) for x in a.epsilons.split(",")):
                print(f"  epsilon = {eps:g}", flush=True)
                rows = run(df, eps, l0s, [int(x) for x in a.seeds.split(",")])
                peer = BEST_PEER.get((tag, eps))
                best_gshm = max((r for r in rows if r[0].startswith("GSHM")), key=lambda r: r[2])
                for name, kind, keys, sec in rows:
                    vs_peer = f"{keys / peer[1]:.2f}" if peer else "n/a"
                    lines.append(f"| {tag} | {eps:g} | {name} | {kind} | {keys:.1f} | {keys / best_gshm[2]:.2f} | "
                                 f"{vs_peer} |")
                if peer:
                    print(f"  best peer ({peer[0]}, docs/benchmarks_utility.md): {peer[1]} keys; best GSHM: "
                          f"{best_gshm[0]} {best_gshm[2]:.1f} keys", flush=True)
    print("\n| dataset | ε | route | noise | keys | ÷ best GSHM (same run) | ÷ best peer (docs) |")
    print("|---|---|---|---|---|---|---|")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
