"""Utility against the UNBOUNDED truth (issue 22): keys released, median and p90 absolute error.

    PYTHONPATH=src python benchmarks/utility.py                      # default run (samples; ~10 min when loaded)
    PYTHONPATH=src python benchmarks/utility.py --demo-rows 1000000 --corpus-files 0   # full inputs

For each dataset and ε ∈ {0.3, 1} (δ = 1e-6, add/remove one unit), every route releases distinct-unit counts per
key; each route's released table is scored against the true distinct-unit count of every key with **no** l0
bound (what a user wants to know), so the error includes the bounding bias:

* sparsedp: GSHM at fixed l0 ∈ {1, 5, 20, 100}; ``max_groups_per_unit="auto"`` (5 % of ε chooses l0, the
  smallest candidate at or above the median keys per unit, :mod:`sparsedp.auto_bound`; or ``sd.AutoBound(objective="keys")``, the most
  expected released keys, :mod:`sparsedp.auto_keys`); de-biased top-k CSH (``top_k=k``); the two-stage
  release (``sd.TwoStage``: GSHM selects at l0 with ``split`` of (ε, δ), the correlated Gaussian counts the
  selected keys with no l0 bound; ``--two-stage L0:SPLIT,…``). In process, seeded source (benchmark
  reproducibility; production uses the secure default). The route list is :func:`default_routes`; another
  script adds routes with ``main(argv, extra_routes=[(name, release kwargs), …])``.
* OpenDP and PipelineDP, each in its own venv (``benchmarks/peers.py``'s ``.venvs/``; their scripts in
  ``benchmarks/peers_scripts/``), Laplace and Gaussian thresholds at l0 ∈ {1, 5, 20, 100}; the best (most keys)
  is "the best peer at its best l0". Skipped (and said so) when the venvs are missing.

Datasets: (a) the synthetic search log ``sparsedp.demo_data.search_log`` (``--demo-rows`` rows, seed 0);
(b) a real text corpus from this machine: the Python source files under ``sys.prefix/lib/python3.X`` (standard
library and installed packages), one file = one unit, keys = the lower-cased words and word bigrams among the
first ``--words`` words of each file (``--corpus-files`` files, a deterministic sample: every n-th file).

Targets (issue 22, at ε = 1 on both corpora): keys released ≥ 1.25× the best peer's at its best l0, and the
median error against the unbounded truth on the keys both release ≤ 0.7× the best peer's. Results go to
``docs/benchmarks_utility.md`` (``--out``).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import re
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import peers  # noqa: E402  (venvs, run_script, demo_dataset)

L0S = (1, 5, 20, 100)
EPSILONS = (0.3, 1.0)
DELTA = 1e-6
TOPKS = (100, 1000, 10000)
#: two-stage routes: (selection l0, share of ε and δ for the selection)
TWO_STAGE = ((5, 0.5), (5, 0.7), (100, 0.5), (256, 0.5), (256, 0.7))
_WORD = re.compile(r"[a-z][a-z_']+")


def corpus_dataset(n_files: int, words: int, path: Path) -> dict:
    """Python sources on this machine: one file = one unit; keys = words and bigrams of its first ``words`` words."""
    import polars as pl

    root = Path(sys.prefix) / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    files = sorted(p for p in root.rglob("*.py") if p.is_file() and not p.is_symlink())
    if n_files and len(files) > n_files:
        step = len(files) / n_files
        files = [files[int(i * step)] for i in range(n_files)]
    units, keys = [], []
    for i, f in enumerate(files):
        try:
            text = f.read_text("utf-8", errors="replace").lower()
        except OSError:
            continue
        w = _WORD.findall(text)[:words]
        grams = w + [f"{a} {b}" for a, b in zip(w, w[1:])]
        units.extend([i] * len(grams))
        keys.extend(grams)
    df = pl.DataFrame({"unit": pl.Series(units, dtype=pl.Int64), "key": pl.Series(keys, dtype=pl.String)})
    df.write_parquet(path)
    return {"name": f"Python sources under {root} ({len(files)} files, first {words} words each; words and "
                    f"bigrams)", "rows": df.height, "units": df["unit"].n_unique(), "keys": df["key"].n_unique()}


def score(out, truth) -> dict:
    """Keys released; median and p90 of |released − true| (true = unbounded distinct units) over them."""
    import polars as pl

    if out.height == 0:
        return {"keys": 0, "med": float("nan"), "p90": float("nan"), "table": out}
    j = out.select("key", pl.col("count").cast(pl.Float64)).join(truth, on="key", how="left")
    err = (pl.col("count") - pl.col("true").fill_null(0)).abs()
    r = j.select(err.median().alias("m"), err.quantile(0.9, "nearest").alias("p")).row(0)
    return {"keys": out.height, "med": float(r[0]), "p90": float(r[1]), "table": j}


def common_median(a, b) -> tuple[int, float, float]:
    """(|common keys|, median abs error of a, of b) on the keys both released."""
    import polars as pl

    if a["keys"] == 0 or b["keys"] == 0:
        return 0, float("nan"), float("nan")
    ka = a["table"].select("key", ea=(pl.col("count") - pl.col("true")).abs())
    kb = b["table"].select("key", eb=(pl.col("count") - pl.col("true")).abs())
    j = ka.join(kb, on="key")
    if j.height == 0:
        return 0, float("nan"), float("nan")
    return j.height, float(j["ea"].median()), float(j["eb"].median())


def default_routes() -> list[tuple[str, dict]]:
    """The sparsedp routes: ``(name, keyword arguments of sd.release)``. Another script adds its own routes with
    ``main(argv, extra_routes=[(name, kwargs), …])`` (or ``--routes`` to pick some of these by name prefix)."""
    import sparsedp as sd

    routes = [(f"GSHM l0={l0}", dict(max_groups_per_unit=l0, mechanism="gshm")) for l0 in L0S]
    routes.append(("auto l0 (10% of eps)", dict(max_groups_per_unit="auto", mechanism="gshm")))
    # the keys objective (sparsedp.auto_keys): 10 % of eps picks the l0 with the most expected released keys
    routes.append(("auto keys l0 (10% of eps)", dict(max_groups_per_unit=sd.AutoBound(objective="keys"),
                                                      mechanism="gshm")))
    routes += [(f"top-k CSH k={k}", dict(top_k=k)) for k in TOPKS]
    # two-stage (docs/proofs/two-stage.md): GSHM selects at l0 with split*(eps, delta), the correlated Gaussian
    # counts the selected keys with no l0 bound at the rest
    routes += [(f"two-stage l0={l0} split={sp:g}", dict(max_groups_per_unit=l0, mechanism=sd.TwoStage(split=sp)))
               for l0, sp in TWO_STAGE]
    return routes


def run_sparsedp(df, truth, eps: float, seed: int, routes: list[tuple[str, dict]]) -> list[dict]:
    import sparsedp as sd
    from sparsedp.noise import InsecureSeededRandom

    rows = []
    for name, kw in routes:
        t = time.perf_counter()
        res = sd.release(df, "unit", "key", eps, DELTA, rng=InsecureSeededRandom(seed), **kw)
        s = score(res.table, truth)
        s.update(library="sparsedp", route=name, seconds=time.perf_counter() - t,
                 extra=f"l0={res.report.auto_bound['bound']}" if res.report.auto_bound else "")
        rows.append(s)
        print(f"    sparsedp   {name:22s} keys {s['keys']:6d}  median err {s['med']:8.1f}  p90 {s['p90']:8.1f}  "
              f"{s['extra']}  ({s['seconds']:.1f} s)", flush=True)
    return rows


def run_peer(name: str, py: Path, data: Path, truth, eps: float, tmp: Path, noises, timeout: float) -> list[dict]:
    import polars as pl

    rows = []
    for noise in noises:
        for l0 in L0S:
            out, meta = tmp / f"{name}_{noise}_{l0}.parquet", tmp / f"{name}_{noise}_{l0}.json"
            try:
                wall, _ = peers.run_script(py, peers.PEERS[name]["script"], [
                    "release", str(data), str(out), str(meta), str(eps), str(DELTA), str(l0), noise], timeout)
            except RuntimeError as err:
                print(f"    {name} {noise} l0={l0}: failed: {str(err)[:120]}", flush=True)
                continue
            s = score(pl.read_parquet(out), truth)
            s.update(library=name, route=f"{noise} l0={l0}", seconds=wall, extra="")
            rows.append(s)
            print(f"    {name:10s} {s['route']:22s} keys {s['keys']:6d}  median err {s['med']:8.1f}  "
                  f"p90 {s['p90']:8.1f}  ({wall:.1f} s)", flush=True)
    return rows


def targets(rows: list[dict]) -> list[str]:
    """The issue's two targets for each sparsedp route against the best peer (most keys at its best l0)."""
    peer_rows = [r for r in rows if r["library"] != "sparsedp"]
    if not peer_rows:
        return ["  targets: not evaluated (no peer ran)"]
    best = max(peer_rows, key=lambda r: r["keys"])
    out = [f"  best peer: {best['library']} {best['route']}: {best['keys']} keys, median err {best['med']:.1f}"]
    for r in rows:
        if r["library"] != "sparsedp":
            continue
        ratio = r["keys"] / best["keys"] if best["keys"] else float("inf")
        n, mo, mp = common_median(r, best)
        er = mo / mp if mp else float("nan")
        out.append(f"  {r['route']:22s} keys x{ratio:.2f} ({'MET' if ratio >= 1.25 else 'NOT met'}: >= 1.25); "
                   f"median err on {n} common keys {mo:.1f} vs {mp:.1f} = x{er:.2f} "
                   f"({'MET' if er <= 0.7 else 'NOT met'}: <= 0.7)")
    return out


def table(rows: list[dict]) -> list[str]:
    lines = ["| library | route | keys released | median abs error | p90 abs error | note |", "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['library']} | {r['route']} | {r['keys']} | {r['med']:.1f} | {r['p90']:.1f} | "
                     f"{r['extra']} |")
    return lines


def main(argv: list[str] | None = None, extra_routes: tuple = ()) -> int:
    global L0S, TWO_STAGE
    import polars as pl

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--demo-rows", type=int, default=200_000)
    ap.add_argument("--corpus-files", type=int, default=5000, help="0 = every file")
    ap.add_argument("--words", type=int, default=150)
    ap.add_argument("--peers", default="opendp,pipelinedp")
    ap.add_argument("--peer-noises", default="gaussian", help="laplace,gaussian for both")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--l0s", default=",".join(map(str, L0S)), help="fixed bounds for GSHM and the peers")
    ap.add_argument("--epsilons", default=",".join(map(str, EPSILONS)))
    ap.add_argument("--datasets", default="demo,corpus")
    ap.add_argument("--two-stage", default=",".join(f"{l0}:{sp:g}" for l0, sp in TWO_STAGE),
                    help="two-stage routes L0:SPLIT,… ('' for none)")
    ap.add_argument("--routes", default="", help="run only the sparsedp routes whose name starts with one of these "
                                                 "comma-separated prefixes (default: all)")
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent.parent / "docs" / "benchmarks_utility.md"))
    a = ap.parse_args(argv)
    L0S = tuple(int(x) for x in a.l0s.split(","))
    TWO_STAGE = tuple((int(x.split(":")[0]), float(x.split(":")[1])) for x in a.two_stage.split(",") if x)
    epsilons = tuple(float(x) for x in a.epsilons.split(","))
    prefixes = tuple(x for x in a.routes.split(",") if x)
    routes = [r for r in default_routes() if not prefixes or r[0].startswith(prefixes)] + list(extra_routes)
    t0 = time.perf_counter()
    pythons, skipped = {}, []
    for p in [x for x in a.peers.split(",") if x]:
        why = peers.ensure_venv(p, a.timeout, skip_install=True)
        if why:
            skipped.append(f"{p}: {why}")
        else:
            pythons[p] = peers.venv_python(peers.PEERS[p]["venv"])
    noises = tuple(x for x in a.peer_noises.split(",") if x)
    md = ["# Utility against the unbounded truth (issue 22)", "",
          f"Run {_dt.datetime.now(_dt.timezone.utc):%Y-%m-%d %H:%M} UTC on {peers.machine()} (2 cores shared with "
          f"other jobs: timings are indicative only).", "",
          "Command: `PYTHONPATH=src python benchmarks/utility.py " + " ".join(sys.argv[1:] if argv is None else argv)
          + "`", "",
          f"δ = {DELTA:g}, add/remove one unit. Error = |released − true| where true = distinct units of the key "
          "with no l0 bound; median / p90 over each route's own released keys. Peers: " +
          (", ".join(pythons) if pythons else "none") + (f" (skipped: {'; '.join(skipped)})" if skipped else ""), ""]
    summary = []
    with tempfile.TemporaryDirectory(prefix="sparsedp-utility-") as td:
        tmp = Path(td)
        sets = [("demo", tmp / "demo.parquet", lambda p: peers.demo_dataset(a.demo_rows, p)),
                ("corpus", tmp / "corpus.parquet", lambda p: corpus_dataset(a.corpus_files, a.words, p))]
        for tag, path, build in [x for x in sets if x[0] in a.datasets.split(",")]:
            info = build(path)
            df = pl.read_parquet(path)
            truth = df.group_by("key").agg(pl.col("unit").n_unique().alias("true").cast(pl.Float64))
            print(f"{tag}: {info['name']}: {info['rows']} rows, {info['units']} units, {info['keys']} keys",
                  flush=True)
            md += [f"## {info['name']}", "", f"{info['rows']} rows, {info['units']} units, {info['keys']} keys.", ""]
            for eps in epsilons:
                print(f"  epsilon = {eps:g}", flush=True)
                rows = run_sparsedp(df, truth, eps, a.seed, routes)
                for name, py in pythons.items():
                    rows += run_peer(name, py, path, truth, eps, tmp, noises, a.timeout)
                tl = targets(rows)
                print("\n".join(tl), flush=True)
                md += [f"### ε = {eps:g}", ""] + table(rows) + ["", "Targets (issue 22; they are stated for ε = 1):",
                                                                 "", "```"] + tl + ["```", ""]
                summary.append((tag, eps, tl))
    md += [f"Total time {time.perf_counter() - t0:.0f} s."]
    Path(a.out).write_text("\n".join(md) + "\n")
    print(f"wrote {a.out} ({time.perf_counter() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
