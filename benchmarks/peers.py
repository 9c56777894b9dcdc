"""sparsedp against the libraries users would otherwise pick: thresholds, utility, time and memory.

    python benchmarks/peers.py                      # installs the peers into .venvs/ and runs everything
    python benchmarks/peers.py --rows 100000 --skip-install --peers opendp,pipelinedp

Peers, each in its own virtual environment under ``.venvs/`` at the repository root (created and filled with
pip on first use; ``--skip-install`` uses what is there):

* OpenDP 0.16 (``opendp[polars]==0.16.0``): ``make_laplace_threshold`` / ``make_gaussian_threshold`` (threshold one
  above the smallest its map accepts: the map states the δ of the next threshold, ``peers_scripts/opendp_peer.py``);
* PipelineDP with Google's python-dp: Laplace / Gaussian / truncated-geometric partition selection;
* Tumult Analytics on pyspark 3.5: ``get_groups`` + ``count_distinct`` (release only; no threshold exposed).

Each peer runs in a subprocess executing a small script from ``benchmarks/peers_scripts/`` in its venv;
data goes in and out as Parquet files in a temporary directory (protocol: ``peers_scripts/_protocol.py``).

Printed and written to ``docs/benchmarks.md`` (``--out``):

1. the release threshold of every mechanism at each (ε, δ) and l0 ∈ {1, 5, 20, 100, 1000}, as the
   smallest true count of distinct units released with probability >= 1/2 ("keep50"; for a threshold
   mechanism with symmetric integer noise this is its absolute threshold), and sparsedp's ratio to the best
   peer, at the same add/remove-one-unit guarantee;
2. on a synthetic search log (``sparsedp.demo_data``) and a real text corpus built from the plain-text
   documentation Debian installs (word bigrams per file, each file one unit): keys released and the median
   relative error of the released counts against the true distinct-unit counts, each library at equal
   (ε, δ, l0);
3. wall time and peak memory (max RSS of the subprocess tree) per library, against a plain Polars group-by.

``--aggregates`` runs only the SUM / MEAN comparison (issue 16) and writes ``docs/benchmarks_aggregates.md``:

    python benchmarks/peers.py --aggregates --skip-install --rows 1000000 --l0 5 --repeats 3

On the synthetic search log with a value column ``value`` = dwell seconds (log-normal, μ = 3.5, σ = 1.2, rounded
to 0.1 s, numpy seed ``--value-seed``), each library releases COUNT, SUM and MEAN per key at the same (ε, δ, l0)
and bounds [``--lower``, ``--upper``] under one contribution model: a unit keeps at most l0 keys, and its
contribution to a key's sum is the sum of its rows' values for that key clipped to [lower, upper] (how each
peer is made to follow it: the docstrings of ``aggregates`` in ``peers_scripts/*_peer.py``). Errors are taken
on the keys every library released in the same repeat (pooled over repeats), against two truths: the clipped
one (per-(unit, key) totals clipped to [lower, upper], summed over *all* units of the key, no l0 sampling; MEAN
= that sum / distinct units) and the unclipped one (raw sums; MEAN = raw sum / distinct units).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import gzip
import json
import math
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = Path(__file__).resolve().parent / "peers_scripts"
VENVS = ROOT / ".venvs"

PEERS = {
    "opendp": {"venv": "opendp", "pip": ["opendp[polars]==0.16.0", "pyarrow"], "script": "opendp_peer.py",
               "label": "OpenDP", "noises": ("laplace", "gaussian")},
    "pipelinedp": {"venv": "pipelinedp", "pip": ["pipeline-dp", "python-dp", "pyarrow"],
                   "script": "pipelinedp_peer.py", "label": "PipelineDP", "noises": ("laplace", "gaussian")},
    "tumult": {"venv": "tumult", "pip": ["tmlt.analytics", "pyspark>=3.5,<3.6", "pyarrow"],
               "script": "tumult_peer.py", "label": "Tumult Analytics", "noises": ("laplace",)},
}
L0S = (1, 5, 20, 100, 1000)
EPS_DELTAS = ((1.0, 1e-6), (0.5, 1e-9))


# ----------------------------------------------------------------------------------------------- set-up

def venv_python(name: str) -> Path:
    return VENVS / name / "bin" / "python"


def ensure_venv(peer: str, timeout: float, skip_install: bool, spec: dict | None = None) -> str | None:
    """Create/fill the peer's venv (``spec``: ``{"venv": name, "pip": [...]}``, default ``PEERS[peer]``);
    returns None when usable, else the reason it is not."""
    spec = spec or PEERS[peer]
    py = venv_python(spec["venv"])
    if skip_install:
        return None if py.exists() else f"{py} missing (run without --skip-install)"
    t0 = time.perf_counter()
    try:
        if not py.exists():
            subprocess.run([sys.executable, "-m", "venv", str(VENVS / spec["venv"])], check=True, timeout=timeout)
        r = subprocess.run([str(py), "-m", "pip", "install", "-q", *spec["pip"]], capture_output=True, text=True,
                           timeout=timeout)
        if r.returncode != 0:
            return "pip install failed: " + r.stderr.strip().splitlines()[-1][:200]
    except subprocess.TimeoutExpired:
        return f"install did not finish within {timeout:.0f} s"
    print(f"  {peer}: venv ready ({time.perf_counter() - t0:.0f} s)", flush=True)
    return None


def run_script(python: str | Path, script: str, args: list[str], timeout: float) -> tuple[float, float]:
    """Run a peer script; returns (wall seconds, peak RSS in MiB summed over its process tree).

    The tree's RSS is sampled from /proc every 20 ms (ru_maxrss of a child is useless here: Linux carries
    the parent's high-water mark over fork/exec, and Spark's JVM is a grandchild).
    """
    t0 = time.perf_counter()
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    proc = subprocess.Popen([str(python), str(SCRIPTS / script), *args], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, env=env)
    peak = 0.0
    err_chunks: list[bytes] = []
    import threading
    reader = threading.Thread(target=lambda: err_chunks.append(proc.stderr.read()), daemon=True)
    reader.start()
    while proc.poll() is None:
        peak = max(peak, _tree_rss_mib(proc.pid))
        if time.perf_counter() - t0 > timeout:
            proc.kill()
            proc.wait()
            raise RuntimeError(f"{script} timed out after {timeout:.0f} s")
        time.sleep(0.02)
    wall = time.perf_counter() - t0
    reader.join(5)
    if proc.returncode != 0:
        err = b"".join(err_chunks).decode(errors="replace").strip()
        raise RuntimeError(f"{script} failed: {err[-600:]}")
    return wall, peak


def process_tree_sum(root: int, value) -> int:
    """Sum of ``value(fields)`` over ``root`` and all its live descendants (Linux ``/proc``; ``fields`` = the
    ``/proc/<pid>/stat`` fields after the command name, so ``fields[1]`` is the parent pid)."""
    parent: dict[int, int] = {}
    got: dict[int, int] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        parent[int(d)] = int(fields[1])
        got[int(d)] = value(fields)
    children: dict[int, list[int]] = {}
    for pid, pp in parent.items():
        children.setdefault(pp, []).append(pid)
    tree, frontier = {root}, [root]
    while frontier:
        for c in children.get(frontier.pop(), []):
            if c not in tree:
                tree.add(c)
                frontier.append(c)
    return sum(got.get(p, 0) for p in tree)


def _tree_rss_mib(root: int) -> float:
    """Resident memory of ``root`` and all its descendants, in MiB."""
    page = os.sysconf("SC_PAGE_SIZE")
    return process_tree_sum(root, lambda f: int(f[21]) * page) / 2 ** 20


# ----------------------------------------------------------------------------------------------- data

def demo_dataset(rows: int, path: Path) -> dict:
    from sparsedp.demo_data import search_log
    df = search_log(n_rows=rows, seed=0).select(unit="user_id", key="query")
    df.write_parquet(path)
    return {"name": "search log (sparsedp.demo_data)", "rows": df.height, "units": df["unit"].n_unique(),
            "keys": df["key"].n_unique()}


_WORD = re.compile(r"[a-z][a-z']+")


_TEXT = (".gz", ".txt", ".md", ".rst")


def _doc_files(limit: int) -> list[Path]:
    """Every plain-text file under /usr/share/doc (copyright, changelogs, READMEs, NEWS, *.txt/md/rst, gzipped)."""
    files = sorted(p for p in Path("/usr/share/doc").rglob("*") if p.is_file() and not p.is_symlink() and (
        p.suffix in _TEXT or p.name == "copyright" or p.name.startswith(("README", "NEWS", "changelog"))))
    return files[:limit] if limit else files


def corpus_dataset(limit: int, words_per_doc: int, path: Path) -> dict:
    """Word bigrams of the first ``words_per_doc`` words of each plain-text documentation file Debian ships;
    each file is one unit."""
    import polars as pl
    units, keys = [], []
    for i, f in enumerate(_doc_files(limit)):
        try:
            raw = gzip.open(f).read() if f.suffix == ".gz" else f.read_bytes()
        except OSError:
            continue
        words = _WORD.findall(raw.decode("utf-8", errors="replace").lower())[:words_per_doc]
        grams = [f"{a} {b}" for a, b in zip(words, words[1:])]
        units.extend([i] * len(grams))
        keys.extend(grams)
    df = pl.DataFrame({"unit": pl.Series(units, dtype=pl.Int64), "key": pl.Series(keys, dtype=pl.String)})
    df.write_parquet(path)
    return {"name": f"Debian docs word bigrams (plain text under /usr/share/doc, first {words_per_doc} words "
            "per file)", "rows": df.height,
            "units": df["unit"].n_unique(), "keys": df["key"].n_unique()}


def utility(out, truth, keys=None) -> tuple[int, float]:
    """(keys released, median |released − true| / true over the released keys, or over ``keys``)."""
    import polars as pl
    if keys is not None:
        out = out.filter(pl.col("key").is_in(keys))
    if out.height == 0:
        return 0, float("nan")
    j = out.join(truth, on="key", how="left").with_columns(pl.col("true").fill_null(0))
    rel = ((pl.col("count") - pl.col("true")).abs() / pl.col("true").clip(lower_bound=1))
    return out.height, float(j.select(rel.median()).item())


# ----------------------------------------------------------------------------------------------- parts

def thresholds(pythons: dict[str, Path], tmp: Path, timeout: float) -> list[dict]:
    params = [{"epsilon": e, "delta": d, "l0": l0} for e, d in EPS_DELTAS for l0 in L0S]
    (tmp / "params.json").write_text(json.dumps(params))
    rows = []
    for name, py in pythons.items():
        out = tmp / f"thr_{name}.json"
        run_script(py, _script(name), ["thresholds", str(tmp / "params.json"), str(out)], timeout)
        rows.extend(json.loads(out.read_text()))
    return rows


def _script(name: str) -> str:
    return {"sparsedp": "sparsedp_peer.py", "polars": "polars_baseline.py"}.get(name) or PEERS[name]["script"]


def threshold_table(rows: list[dict]) -> tuple[list[str], list[dict]]:
    """Markdown lines and one summary dict per (ε, δ, l0)."""
    lines, summary = [], []
    cols = sorted({(r["library"], r["mechanism"]) for r in rows if r["library"] != "sparsedp"})
    head = ["ε", "δ", "l0", "sparsedp best (l0-bounded)", *[f"{lib}: {m}" for lib, m in cols], "best peer",
            "sparsedp / best peer", "top-k CSH (k = l0)", "top-k / best peer", "top-k CSH, float noise",
            "float top-k / best peer"]
    lines.append("| " + " | ".join(head) + " |")
    lines.append("|" + "---|" * len(head))
    for e, d in EPS_DELTAS:
        for l0 in L0S:
            sel = [r for r in rows if r["epsilon"] == e and r["delta"] == d and r["l0"] == l0]
            ours = [r for r in sel if r["library"] == "sparsedp" and not r.get("top_k")]
            topk = [r for r in sel if r["library"] == "sparsedp" and r.get("top_k") == "secure"]
            topf = [r for r in sel if r["library"] == "sparsedp" and r.get("top_k") == "float"]
            peers = [r for r in sel if r["library"] != "sparsedp" and r["keep50"] > 0]
            best_ours = min(ours, key=lambda r: r["keep50"])
            best_peer = min(peers, key=lambda r: r["keep50"]) if peers else None
            cells = [f"{e:g}", f"{d:g}", str(l0), f"{best_ours['keep50']:.0f} ({best_ours['mechanism']})"]
            for lib, m in cols:
                hit = [r for r in sel if r["library"] == lib and r["mechanism"] == m]
                cells.append(f"{hit[0]['keep50']:.0f}" if hit and hit[0]["keep50"] > 0 else "–")
            ratio = best_ours["keep50"] / best_peer["keep50"] if best_peer else float("nan")
            tk = topk[0]["keep50"] if topk else float("nan")
            tk_ratio = tk / best_peer["keep50"] if best_peer else float("nan")
            cells += [f"{best_peer['keep50']:.0f} ({best_peer['library']}: {best_peer['mechanism']})"
                      if best_peer else "–", f"{ratio:.3f}", f"{tk:.0f}" if topk else "–",
                      f"{tk_ratio:.3f}" if topk else "–"]
            tf = topf[0]["keep50"] if topf else float("nan")
            cells += [f"{tf:.0f}" if topf else "–",
                      f"{tf / best_peer['keep50']:.3f}" if topf and best_peer else "–"]
            lines.append("| " + " | ".join(cells) + " |")
            summary.append({"epsilon": e, "delta": d, "l0": l0, "ratio": ratio, "topk_ratio": tk_ratio,
                            "topk_float_ratio": tf / best_peer["keep50"] if best_peer else float("nan"),
                            "ours": best_ours["keep50"], "best_peer": best_peer["keep50"] if best_peer else None})
    return lines, summary


def releases(pythons: dict[str, Path], noises: dict[str, tuple[str, ...]], data: Path, tmp: Path, eps: float,
             delta: float, l0: int, timeout: float, repeats: int) -> list[dict]:
    import polars as pl
    truth = (pl.read_parquet(data).group_by("key").agg(pl.col("unit").n_unique().alias("true")))
    rows = []
    for name, py in pythons.items():
        for noise in noises[name]:
            walls, peaks, inner, util, meta = [], [], [], None, {}
            for rep in range(repeats):
                out, mp = tmp / f"rel_{name}_{noise}.parquet", tmp / f"meta_{name}_{noise}.json"
                try:
                    wall, peak = run_script(py, _script(name), ["release", str(data), str(out), str(mp),
                                                                 str(eps), str(delta), str(l0), noise], timeout)
                except RuntimeError as err:
                    print(f"  {name} {noise}: {err}", flush=True)
                    meta = {"error": str(err)[:200]}
                    break
                meta = json.loads(mp.read_text())
                walls.append(wall)
                peaks.append(peak)
                inner.append(meta["seconds"])
                released = pl.read_parquet(out)
                util = utility(released, truth)
            row = {"library": name, "noise": noise, "meta": meta}
            if walls:
                row["released"] = released
            if walls:
                row.update(keys=util[0], mre=util[1], wall=_median(walls), inner=_median(inner),
                           peak=_median(peaks))
            rows.append(row)
            print(f"  {name:10s} {noise:8s} " + (f"keys {row['keys']:6d}  median rel. err {row['mre']:.4f}  "
                                                f"wall {row['wall']:.2f} s  release {row['inner']:.2f} s  "
                                                f"peak {row['peak']:.0f} MiB" if walls else "failed"),
                  flush=True)
    # the same keys for everyone: those every private release published
    common = None
    for r in rows:
        if r["library"] != "polars" and "released" in r and r["released"].height:
            ks = set(r["released"]["key"].to_list())
            common = ks if common is None else common & ks
    for r in rows:
        if "released" in r:
            r["common_n"], r["common_mre"] = utility(r.pop("released"), truth, sorted(common or ()))
    return rows


def _median(xs: list[float]) -> float:
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def release_table(rows: list[dict]) -> list[str]:
    base = next((r for r in rows if r["library"] == "polars" and "wall" in r), None)
    lines = ["| library | noise / mechanism | keys released | median rel. error (own keys) | "
             "median rel. error (common keys) | release time (s) | wall incl. start-up (s) | × Polars wall | "
             "peak RSS (MiB) | × Polars RSS |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        label = {"polars": "Polars group-by (no privacy)", "sparsedp": "sparsedp"}.get(
            r["library"], PEERS.get(r["library"], {}).get("label", r["library"]))
        mech = r["meta"].get("mechanism", r["noise"])
        if "wall" not in r:
            lines.append(f"| {label} | {mech} | failed: {r['meta'].get('error', '')[:80]} | | | | | | | |")
            continue
        xw = r["wall"] / base["wall"] if base else float("nan")
        xm = r["peak"] / base["peak"] if base else float("nan")
        lines.append(f"| {label} | {mech} | {r['keys']} | {r['mre']:.4f} | {r['common_mre']:.4f} "
                     f"({r['common_n']}) | {r['inner']:.2f} | {r['wall']:.2f} | "
                     f"{xw:.1f} | {r['peak']:.0f} | {xm:.1f} |")
    return lines


# ----------------------------------------------------------------------------------------------- aggregates

AGG_NOISES = {"sparsedp": ("auto",), "opendp": ("laplace",), "pipelinedp": ("gaussian", "laplace", "gaussian-sum", "laplace-sum")}


def aggregates_dataset(rows: int, value_seed: int, path: Path, prebound_l0: int | None = None) -> dict:
    """The search log with a dwell-seconds column ``value`` (log-normal(3.5, 1.2), 0.1 s, numpy seed fixed).

    With ``prebound_l0``, only the rows of at most that many distinct keys per unit are kept (a seeded uniform
    choice, numpy seed ``value_seed + 1``): every library's own l0 bound is then a no-op, so the truth below
    is exactly what each library aggregates before noise and the errors measure noise (and clipping) only.
    """
    import numpy as np
    import polars as pl
    from sparsedp.demo_data import search_log
    df = search_log(n_rows=rows, seed=0).select(unit="user_id", key="query")
    g = np.random.Generator(np.random.PCG64(value_seed))
    df = df.with_columns(value=pl.Series(np.round(g.lognormal(3.5, 1.2, df.height), 1)))
    if prebound_l0:
        pairs = df.select("unit", "key").unique().sort("unit", "key")
        r = np.random.Generator(np.random.PCG64(value_seed + 1)).random(pairs.height)
        pairs = (pairs.with_columns(_r=pl.Series(r)).with_columns(pl.col("_r").rank("ordinal").over("unit"))
                 .filter(pl.col("_r") <= prebound_l0).drop("_r"))
        df = df.join(pairs, on=["unit", "key"], how="semi")
    df.write_parquet(path)
    return {"rows": df.height, "units": df["unit"].n_unique(), "keys": df["key"].n_unique()}


def aggregate_truth(path: Path, lower: float, upper: float):
    """Per key: distinct units, clipped and raw sums of the per-(unit, key) totals, and their means per unit."""
    import polars as pl
    pairs = pl.read_parquet(path).group_by("key", "unit").agg(pl.col("value").sum())
    return (pairs.group_by("key")
            .agg(pl.len().alias("n"), pl.col("value").clip(lower, upper).sum().alias("sum_clip"),
                 pl.col("value").sum().alias("sum_raw"))
            .with_columns((pl.col("sum_clip") / pl.col("n")).alias("mean_clip"),
                          (pl.col("sum_raw") / pl.col("n")).alias("mean_raw")))


AGG_STATS = (("sum", "clip"), ("mean", "clip"), ("sum", "raw"), ("mean", "raw"))


def _quantile(xs: list[float], q: float) -> float:
    import numpy as np
    return float(np.quantile(np.asarray(xs, dtype=float), q)) if xs else float("nan")


def run_aggregates(a, pythons: dict[str, Path]) -> tuple[list[str], dict]:
    import polars as pl
    configs = [(lib, noise) for lib in pythons for noise in AGG_NOISES.get(lib, ())]
    errs = {c: {st: [] for st in AGG_STATS} for c in configs}
    keys = {c: [] for c in configs}
    secs = {c: [] for c in configs}
    mech = {c: "" for c in configs}
    calib = {c: "" for c in configs}
    common_sizes = []
    # pairwise: sparsedp and one peer on the keys both released (more keys than the all-library intersection)
    pair = {c: {"ours": {st: [] for st in AGG_STATS}, "peer": {st: [] for st in AGG_STATS}, "n": 0}
            for c in configs if c[0] != "sparsedp"}
    with tempfile.TemporaryDirectory(prefix="sparsedp-peers-agg-") as td:
        tmp = Path(td)
        data = tmp / "agg.parquet"
        info = aggregates_dataset(a.rows, a.value_seed, data, None if a.no_prebound else a.l0)
        print(f"data: {info['rows']} rows, {info['units']} units, {info['keys']} keys", flush=True)
        truth = aggregate_truth(data, a.lower, a.upper)
        for rep in range(a.repeats):
            outs = {}
            for c in configs:
                lib, noise = c
                out, mp = tmp / f"agg_{lib}_{noise}.parquet", tmp / f"agg_{lib}_{noise}.json"
                try:
                    run_script(pythons[lib], _script(lib), [
                        "aggregates", str(data), str(out), str(mp), str(a.epsilon), str(a.delta), str(a.l0),
                        str(a.lower), str(a.upper), noise], a.timeout)
                except RuntimeError as err:
                    print(f"  {lib} {noise}: {err}", flush=True)
                    continue
                meta = json.loads(mp.read_text())
                mech[c], outs[c] = meta.get("mechanism", noise), pl.read_parquet(out)
                calib[c] = meta.get("calibration", "")
                keys[c].append(outs[c].height)
                secs[c].append(meta["seconds"])
                print(f"  repeat {rep}: {lib:10s} {noise:8s} keys {outs[c].height:6d}  "
                      f"release {meta['seconds']:.2f} s", flush=True)
            common = None
            for o in outs.values():
                ks = set(o["key"].to_list())
                common = ks if common is None else common & ks
            common = sorted(common or ())
            common_sizes.append(len(common))
            for c, o in outs.items():
                j = o.filter(pl.col("key").is_in(common)).join(truth, on="key", how="inner")
                for stat, kind in AGG_STATS:
                    errs[c][(stat, kind)].extend((j[stat] - j[f"{stat}_{kind}"]).abs().to_list())
            ours = next((o for c, o in outs.items() if c[0] == "sparsedp"), None)
            for c, o in outs.items():
                if c[0] == "sparsedp" or ours is None:
                    continue
                both = sorted(set(o["key"].to_list()) & set(ours["key"].to_list()))
                pair[c]["n"] += len(both)
                for who, frame in (("ours", ours), ("peer", o)):
                    j = frame.filter(pl.col("key").is_in(both)).join(truth, on="key", how="inner")
                    for stat, kind in AGG_STATS:
                        pair[c][who][(stat, kind)].extend((j[stat] - j[f"{stat}_{kind}"]).abs().to_list())
    summary = {c: {st: (_quantile(errs[c][st], 0.5), _quantile(errs[c][st], 0.9)) for st in AGG_STATS}
               for c in configs}
    head = ["library", "noise / mechanism", "keys released (median)", "release time (s)"]
    for stat, kind in AGG_STATS:
        head += [f"{stat.upper()} {'clipped' if kind == 'clip' else 'unclipped'} truth: median abs. error",
                 "p90 abs. error"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for c in configs:
        if not keys[c]:
            lines.append(f"| {c[0]} | {c[1]} | failed |" + " |" * (len(head) - 3))
            continue
        cells = [PEERS.get(c[0], {}).get("label", c[0]), mech[c], f"{_median(keys[c]):.0f}",
                 f"{_median(secs[c]):.2f}"]
        for st in AGG_STATS:
            cells += [f"{summary[c][st][0]:.4g}", f"{summary[c][st][1]:.4g}"]
        lines.append("| " + " | ".join(cells) + " |")
    ours = next((c for c in configs if c[0] == "sparsedp" and keys[c]), None)
    ratio_head = ["sparsedp / peer"]
    for stat, kind in AGG_STATS:
        ratio_head += [f"{stat.upper()} {'clipped' if kind == 'clip' else 'unclipped'}: median", "p90"]
    rlines = ["| " + " | ".join(ratio_head) + " |", "|" + "---|" * len(ratio_head)]
    for c in configs:
        if c[0] == "sparsedp" or not keys[c] or ours is None:
            continue
        cells = [f"{PEERS[c[0]]['label']} ({c[1]})"]
        for st in AGG_STATS:
            cells += [f"{summary[ours][st][0] / summary[c][st][0]:.3f}",
                      f"{summary[ours][st][1] / summary[c][st][1]:.3f}"]
        rlines.append("| " + " | ".join(cells) + " |")
    plines = ["| sparsedp / peer, keys both released | pooled keys | " + " | ".join(ratio_head[1:]) + " |",
              "|" + "---|" * (len(ratio_head) + 1)]
    for c, d in pair.items():
        if not d["n"]:
            continue
        cells = [f"{PEERS[c[0]]['label']} ({c[1]})", str(d["n"])]
        for st in AGG_STATS:
            for q in (0.5, 0.9):
                cells.append(f"{_quantile(d['ours'][st], q) / _quantile(d['peer'][st], q):.3f}")
        plines.append("| " + " | ".join(cells) + " |")
    info.update(common=common_sizes, pooled=sum(common_sizes),
                calibration=[f"{c[0]} ({c[1]}): {calib[c]}" for c in configs if calib[c]])
    return lines + [""] + rlines + ["", "Pairwise (sparsedp and one peer, on the keys both released in the same "
                                        "repeat, pooled):", ""] + plines, info


def aggregates_main(a, pythons: dict[str, Path], versions: dict[str, str], setup: float, t_start: float) -> int:
    print(f"aggregates: ε = {a.epsilon:g}, δ = {a.delta:g}, l0 = {a.l0}, bounds [{a.lower:g}, {a.upper:g}], "
          f"{a.repeats} repeat(s)", flush=True)
    lines, info = run_aggregates(a, pythons)
    print("\n".join(lines), flush=True)
    total = time.perf_counter() - t_start
    out = Path(a.out) if a.out else ROOT / "docs" / "benchmarks_aggregates.md"
    cmd = (f"python benchmarks/peers.py --aggregates{' --skip-install' if a.skip_install else ''} --rows {a.rows} "
           f"--epsilon {a.epsilon:g} --delta {a.delta:g} --l0 {a.l0} --lower {a.lower:g} --upper {a.upper:g} "
           f"--repeats {a.repeats} --value-seed {a.value_seed}{' --no-prebound' if a.no_prebound else ''} "
           f"--peers {a.peers}")
    md = [
        "# SUM and MEAN per key: sparsedp against OpenDP and PipelineDP",
        "",
        f"Generated by `{cmd}` on {_dt.datetime.now(_dt.timezone.utc):%Y-%m-%d %H:%M} UTC in {total / 60:.1f} min "
        f"({setup:.0f} s of it on the peers' venvs; without `--skip-install` the script first creates or "
        "updates `.venvs/opendp` and `.venvs/pipelinedp` with pip, which took under a minute here).",
        "",
        f"Machine: {machine()} (shared and loaded while this ran: times are indicative only).",
        "",
        "Versions: " + "; ".join(f"{k}: {v}" for k, v in versions.items()) + ".",
        "",
        f"Data: the synthetic search log (`sparsedp.demo_data.search_log(n_rows={a.rows}, seed=0)`: "
        f"{info['rows']:,} rows, {info['units']:,} units, {info['keys']:,} keys) with a value column `value` = "
        f"dwell seconds, log-normal(μ = 3.5, σ = 1.2) rounded to 0.1 s, numpy PCG64 seed {a.value_seed}"
        + (f"; {a.rows:,} rows generated, then only the rows of at most l0 = {a.l0} distinct keys per unit kept "
           f"(seeded uniform choice, seed {a.value_seed + 1}), so that no library's own l0 bound drops anything "
           "and the truth is exactly what every library aggregates before noise." if not a.no_prebound else
           "; every library applies its own l0 bound (its own random choice of keys)."),
        "",
        f"Every library: ε = {a.epsilon:g}, δ = {a.delta:g} for the whole release (count, sum and mean together), "
        f"l0 = {a.l0} keys per unit, bounds [{a.lower:g}, {a.upper:g}] on a unit's per-key total.",
        "",
        "Errors are absolute errors on the keys that every library released in the same repeat (the "
        f"intersection: {', '.join(map(str, info['common']))} keys in the {len(info['common'])} repeat(s), "
        f"{info['pooled']} key-releases pooled per library). Clipped truth: per key, the sum over all its units "
        "of the unit's total for the key clipped to the bounds (over all units of the data: "
        + ("the data already hold at most l0 keys per unit, so this is what each library aggregates); "
           if not a.no_prebound else "keys a library's l0 bound drops count as error, alike for every library); ")
        + "MEAN = that sum / distinct units. Unclipped "
        "truth: raw sums, MEAN = raw sum / distinct units (clipping bias included).",
        "",
        *lines,
        "",
        "A ratio below 1 means sparsedp's error is smaller.",
        "",
        "Calibrations (as reported by the libraries, last repeat): " + "; ".join(info["calibration"]) + ".",
        "",
        "## How the contribution model was matched",
        "",
        "* **sparsedp** (`sd.release(..., mechanism='auto', aggregates=[Count(), Sum('value', lower, upper), "
        "Mean('value', lower, upper)])`, which resolves to the joint GSHM): gets the raw rows; it sums a unit's "
        "rows per key, clips the total to [lower, upper], keeps at most l0 keys per unit (secure uniform "
        "choice), adds exact discrete Gaussian noise to the count and to one gridded, re-centred sum column "
        "(MEAN is noisy sum / noisy count, no extra budget), and releases a key when its noisy count clears the "
        "threshold. (ε, δ) is that of the joint release.",
        "* **PipelineDP** (metrics PRIVACY_ID_COUNT, SUM, MEAN in one `DPEngine.aggregate`, "
        "`NaiveBudgetAccountant(ε, δ)`): the rows are first summed per (unit, key) in the script; PipelineDP "
        "then bounds with `max_partitions_contributed = l0` (its own uniform sample of keys), "
        "`max_contributions_per_partition = 1` (the one pre-summed row), `min_value = lower`, `max_value = upper` "
        "(clips that row, i.e. the unit's per-key total). Keys selected by `post_aggregation_thresholding=True` "
        "on the noisy PRIVACY_ID_COUNT with the matching thresholding strategy. Its `NaiveBudgetAccountant` splits ε "
        "evenly over its mechanisms and δ evenly over those that use δ (with Laplace noise: only the "
        "thresholding) — here three mechanisms: the thresholded privacy-id count, and MEAN's own noisy count and noisy "
        "normalised sum (SUM is derived from MEAN's). Float noise (python-dp's). Rows `gaussian-sum` / "
        "`laplace-sum`: metrics PRIVACY_ID_COUNT and SUM only (two mechanisms, SUM not re-centred), MEAN = noisy "
        "SUM / noisy PRIVACY_ID_COUNT computed by the script (post-processing).",
        "* **OpenDP 0.16** (Polars Context, `dp.Context.compositor(privacy_loss=dp.loss_of(epsilon=ε, "
        "delta=δ))`, query `group_by('key').agg(pl.len().dp.noise(), pl.col('value').fill_null(0).dp.sum((lower, "
        "upper)))`): the rows are summed per (unit, key) and cut to at most l0 keys per unit with Polars before "
        "the Context (Polars' shuffle, not a CSPRNG: benchmark only), and the Context is told so with "
        "`dp.unit_of(contributions=[Bound(per_group=l0), Bound(by=['key'], per_group=1)])`; `dp.sum` clips each "
        "row (the unit's per-key total). The Context calibrates the noise and the release threshold on the "
        "noisy `len` itself, so its δ is its own (calibrated through the Context, not by hand). The unit's "
        "per-key totals are rounded to integers in tenths of a value unit first (bounds [10·lower, 10·upper], "
        "sums divided by 10 after release): with float sums the Context adds a rounding allowance that grows "
        "with the public `max_length` margin it requires, and with the only safe public bound at hand "
        "(`max_length = rows`) that made its sum noise scale 1.8e5 instead of 6e3 at these sizes. Integer "
        "Laplace noise on both columns, ε split evenly by the Context; MEAN = noisy sum / noisy count "
        "(post-processing, what `dp.mean` computes). Margin given: `Margin(by=['key'], max_length=rows, "
        "max_groups=rows)`.",
        "",
        "## Differences in semantics that remain",
        "",
        "* Noise: sparsedp uses exact discrete Gaussian noise and an (ε, δ) analysis of the joint Gaussian "
        "release; OpenDP's Context under `loss_of(epsilon, delta)` uses Laplace (L1 sensitivity l0·max(|lower|, "
        "|upper|) for the sum, so its sum noise grows like l0 rather than √l0); PipelineDP runs both Gaussian "
        "and Laplace (rows above), with float noise and naive (linear) composition of its mechanisms. sparsedp's count threshold and "
        "PipelineDP's thresholding differ in calibration (each library's own analysis at the same (ε, δ)), "
        "which is why the numbers of keys released differ.",
        "* Budget: sparsedp noises two columns (count, sum) and derives MEAN; OpenDP two (count, sum, MEAN "
        "derived here); PipelineDP with its MEAN metric three (its MEAN mechanism has its own count besides the "
        "thresholded privacy-id count), with `-sum` two.",
        "* Centring: sparsedp re-centres the sum at the middle c of [lower, upper] and adds c times the noisy "
        "count back (sum error variance ((upper − lower)/2)²σ² + c²σ_count², see `sparsedp.aggregates`); "
        "PipelineDP's MEAN (and the SUM derived from it) uses a normalised sum the same way; OpenDP's `dp.sum` "
        "and PipelineDP's plain SUM do not re-centre (sensitivity max(|lower|, |upper|)).",
        "* Rounding: sparsedp rounds each unit's clipped total to a public grid (default step a power of two, "
        "here 0.25 for [0, 600]) before noising; the OpenDP script rounds it to 0.1; PipelineDP adds float "
        "noise to float sums.",
        "* Per-unit key sampling: sparsedp and PipelineDP sample inside the library; for OpenDP the script "
        "samples with Polars (not a secure source).",
        "* All three use add/remove-one-unit neighbours here.",
        "",
    ]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(md) + "\n")
    print(f"wrote {out} ({total / 60:.1f} min)")
    return 0


# ----------------------------------------------------------------------------------------------- quantiles

QUANTILE_PEERS = ("sparsedp", "opendp", "pipelinedp")


def quantiles_dataset(rows: int, value_seed: int, path: Path, l0: int) -> dict:
    """:func:`aggregates_dataset` (the search log with the dwell-seconds column ``value``, log-normal(3.5, 1.2)
    rounded to 0.1 s, numpy seed ``value_seed``; at most l0 keys per unit kept, seed ``value_seed + 1``), then one
    row per (unit, key) kept (a seeded uniform choice, seed ``value_seed + 2``): every library's own bounds (l0
    keys per unit, one row per key) are then no-ops and each key's true median is what every library estimates."""
    import numpy as np
    import polars as pl
    aggregates_dataset(rows, value_seed, path, l0)
    df = pl.read_parquet(path).sort("unit", "key", "value")
    r = np.random.Generator(np.random.PCG64(value_seed + 2)).random(df.height)
    df = (df.with_columns(_r=pl.Series(r)).with_columns(pl.col("_r").rank("ordinal").over("unit", "key"))
          .filter(pl.col("_r") == 1).drop("_r"))
    df.write_parquet(path)
    return {"rows": df.height, "units": df["unit"].n_unique(), "keys": df["key"].n_unique()}


def quantile_truth(path: Path, lower: float, upper: float):
    """Per key: its number of units and the median of its values clipped to [lower, upper] (numpy's median:
    the mean of the two middle values for an even count)."""
    import polars as pl
    return (pl.read_parquet(path).with_columns(pl.col("value").clip(lower, upper))
            .group_by("key").agg(pl.len().alias("n"), pl.col("value").median().alias("true_median")))


def _paired_ratio_interval(ours: list[float], peer: list[float], draws: int = 2000) -> tuple[float, float]:
    """The 95 % percentile-bootstrap interval of median(ours)/median(peer) over the common keys, each key's two
    errors resampled together (numpy PCG64 seed 0): how far the ratio moves with the keys a run happens to hold."""
    import numpy as np
    x, y = np.asarray(ours), np.asarray(peer)
    idx = np.random.default_rng(0).integers(0, x.size, size=(draws, x.size))
    r = np.median(x[idx], axis=1) / np.median(y[idx], axis=1)
    lo, hi = np.quantile(r, [0.025, 0.975])
    return float(lo), float(hi)


def run_quantiles(a, pythons: dict[str, Path]) -> tuple[list[str], dict]:
    import polars as pl
    libs = [lib for lib in QUANTILE_PEERS if lib in pythons]
    if "sparsedp" in libs:  # sparsedp again at each extra median share (--median-shares), as its own row
        libs[1:1] = [f"sparsedp@{x}" for x in (a.median_shares or "").split(",") if x]
    errs: dict[str, list[float]] = {lib: [] for lib in libs}
    own: dict[str, list[float]] = {lib: [] for lib in libs}
    keys: dict[str, list[int]] = {lib: [] for lib in libs}
    secs: dict[str, list[float]] = {lib: [] for lib in libs}
    meta_last: dict[str, dict] = {}
    common_sizes = []
    with tempfile.TemporaryDirectory(prefix="sparsedp-peers-q-") as td:
        tmp = Path(td)
        data = tmp / "q.parquet"
        info = quantiles_dataset(a.rows, a.value_seed, data, a.l0)
        print(f"data: {info['rows']} rows, {info['units']} units, {info['keys']} keys", flush=True)
        truth = quantile_truth(data, a.lower, a.upper)
        for rep in range(a.repeats):
            outs = {}
            for lib in libs:
                out, mp = tmp / f"q_{lib}.parquet", tmp / f"q_{lib}.json"
                name, _, share = lib.partition("@")
                os.environ["SPARSEDP_PEER_MEDIAN_SHARE"] = share  # read by sparsedp_peer.quantiles only
                try:
                    run_script(pythons[name], _script(name), [
                        "quantiles", str(data), str(out), str(mp), str(a.epsilon), str(a.delta), str(a.l0),
                        str(a.lower), str(a.upper), str(a.cells)], a.timeout)
                except RuntimeError as err:
                    print(f"  {lib}: {err}", flush=True)
                    continue
                finally:
                    os.environ.pop("SPARSEDP_PEER_MEDIAN_SHARE", None)
                meta_last[lib] = json.loads(mp.read_text())
                outs[lib] = pl.read_parquet(out).join(truth, on="key", how="inner")
                keys[lib].append(outs[lib].height)
                secs[lib].append(meta_last[lib]["seconds"])
                own[lib].extend((outs[lib]["median"] - outs[lib]["true_median"]).abs().to_list())
                print(f"  repeat {rep}: {lib:10s} keys {outs[lib].height:6d}  release {meta_last[lib]['seconds']:.2f} s",
                      flush=True)
            common = None
            for o in outs.values():
                ks = set(o["key"].to_list())
                common = ks if common is None else common & ks
            common = sorted(common or ())
            common_sizes.append(len(common))
            for lib, o in outs.items():  # in key order: every library's list pairs the same keys
                j = o.filter(pl.col("key").is_in(common)).sort("key")
                errs[lib].extend((j["median"] - j["true_median"]).abs().to_list())
    head = ["library", "mechanism", "keys released (median)", "release time (s)",
            "median abs. error, common keys", "p90, common keys", "median abs. error, own keys"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    summary = {}
    for lib in libs:
        if not keys[lib]:
            lines.append(f"| {lib} | failed |" + " |" * (len(head) - 2))
            continue
        summary[lib] = (_quantile(errs[lib], 0.5), _quantile(errs[lib], 0.9), _quantile(own[lib], 0.5))
        label = PEERS.get(lib, {}).get("label", lib.replace("@", " with median share="))
        lines.append("| " + " | ".join([label, meta_last[lib].get("mechanism", ""),
                                        f"{_median(keys[lib]):.0f}", f"{_median(secs[lib]):.2f}",
                                        f"{summary[lib][0]:.4g}", f"{summary[lib][1]:.4g}",
                                        f"{summary[lib][2]:.4g}"]) + " |")
    peers_done = [lib for lib in summary if not lib.startswith("sparsedp")]
    verdict = "not run"
    if "sparsedp" in summary and peers_done:
        best = min(peers_done, key=lambda lib: summary[lib][0])
        parts = []
        for lib in [x for x in summary if x.startswith("sparsedp")]:
            ratio = summary[lib][0] / summary[best][0]
            what = "sparsedp (default share)" if lib == "sparsedp" else lib.replace("@", " with median share=")
            paired = len(keys[lib]) == len(keys[best]) == a.repeats  # neither failed a repeat: the lists pair keys
            spread = (" (95 % bootstrap interval {:.2f}–{:.2f})".format(*_paired_ratio_interval(errs[lib], errs[best]))
                      if paired else " (not paired: a library failed a repeat)")
            parts.append(f"{what} / best peer ({PEERS[best]['label']}) median abs. error on the common keys = "
                         f"{ratio:.3f}{spread}, at p90 {summary[lib][1] / summary[best][1]:.3f}; target <= 0.8: "
                         f"**{'met' if ratio <= 0.8 else 'not met'}**")
        verdict = "; ".join(parts)
    info.update(common=common_sizes, verdict=verdict,
                calibration=[f"{lib}: {m.get('calibration', m.get('mechanism', ''))}" for lib, m in meta_last.items()])
    return lines, info


def quantiles_main(a, pythons: dict[str, Path], versions: dict[str, str], setup: float, t_start: float) -> int:
    print(f"quantiles: per-key median, ε = {a.epsilon:g}, δ = {a.delta:g}, l0 = {a.l0}, bounds [{a.lower:g}, "
          f"{a.upper:g}], {a.cells} cells, {a.repeats} repeat(s)", flush=True)
    lines, info = run_quantiles(a, pythons)
    print("\n".join(lines), flush=True)
    print(info["verdict"], flush=True)
    total = time.perf_counter() - t_start
    out = Path(a.out) if a.out else ROOT / "docs" / "benchmarks_quantiles.md"
    cmd = (f"python benchmarks/peers.py --quantiles{' --skip-install' if a.skip_install else ''} --rows {a.rows} "
           f"--epsilon {a.epsilon:g} --delta {a.delta:g} --l0 {a.l0} --lower {a.lower:g} --upper {a.upper:g} "
           f"--cells {a.cells} --repeats {a.repeats} --value-seed {a.value_seed} --peers {a.peers}"
           + (f" --median-shares {a.median_shares}" if a.median_shares else ""))
    md = [
        "# Per-key medians: sparsedp against OpenDP and PipelineDP",
        "",
        f"Generated by `{cmd}` on {_dt.datetime.now(_dt.timezone.utc):%Y-%m-%d %H:%M} UTC in {total / 60:.1f} min "
        f"({setup:.0f} s of it on the peers' venvs).",
        "",
        f"Machine: {machine()} (shared and loaded while this ran: times are indicative only).",
        "",
        "Versions: " + "; ".join(f"{k}: {v}" for k, v in versions.items()) + ".",
        "",
        f"Data: the synthetic search log (`sparsedp.demo_data.search_log(n_rows={a.rows}, seed=0)`, which has no "
        "numeric column) with a dwell-like column `value` added deterministically: dwell seconds, log-normal(μ = "
        f"3.5, σ = 1.2) rounded to 0.1 s, numpy PCG64 seed {a.value_seed}; then at most l0 = {a.l0} keys per unit "
        f"(seed {a.value_seed + 1}) and one row per (unit, key) (seed {a.value_seed + 2}) kept, so that every "
        f"library's own bounds are no-ops: {info['rows']:,} rows, {info['units']:,} units, {info['keys']:,} keys.",
        "",
        f"Every library: ε = {a.epsilon:g}, δ = {a.delta:g} for the whole release (private key selection and the "
        f"medians together), l0 = {a.l0} keys per unit, one row per (unit, key), values clipped to [{a.lower:g}, "
        f"{a.upper:g}]; where a library takes candidates, the midpoints of {a.cells} equal cells.",
        "",
        "Error: |released median − true median| per key, the true median of the key's clipped values (mean of the two "
        "middle values for an even count), pooled over repeats; 'common keys': the keys every library released in "
        "the same repeat (" + ", ".join(map(str, info["common"])) + " keys); 'own keys': every key the library "
        "released (libraries that release rarer keys show larger errors there).",
        "",
        *lines,
        "",
        info["verdict"] + ".",
        "",
        "Reading it: OpenDP's `dp.median` is the exponential mechanism over the same candidates with the same rank "
        "utility; sparsedp draws with permute-and-flip (McKenna & Sheldon 2020), never less accurate in expectation "
        "at the same ε per key. OpenDP's Context chooses its own split (its summary: Gumbel scale 15 for the "
        "median, threshold 222 for the count). sparsedp's default gives the median 4/5 of ε (ε = 0.16 per key) "
        "and its GSHM count ε/5 (threshold margin 216, no higher than OpenDP's), so it releases about as many "
        "keys as OpenDP"
        + ("; a row 'with median share=x' gives the medians x·ε instead (more or fewer keys)"
           if a.median_shares else "") + ". sparsedp keeps the same "
        "contribution model as the peers (l0 keys per unit, one row per key, the same bounds and grid): what "
        "differs is the split and permute-and-flip, not the estimand. The interval after each ratio is a "
        "bootstrap over the common keys (a few hundred in all): how far the ratio moves with the keys a run holds; "
        "runs with another --value-seed move it by as much.",
        "",
        "Why not a noisy binary search: see the algorithm comparison in `docs/howto/quantiles.md` "
        "(`benchmarks/quantile_algorithms.py`): at equal ε per key it is 2 to 16 times less accurate than "
        "the exponential mechanism over the grid wherever the noise matters.",
        "",
        "Calibrations (as reported, last repeat): " + "; ".join(info["calibration"]) + ".",
        "",
        "## How each library was run",
        "",
        "* **sparsedp**: `sd.release(..., max_groups_per_unit=l0, aggregates=[sd.Median('value', lower, upper, "
        "cells=cells)])`: the count mechanism (`auto`) selects keys at ε/5, the median of each released key is "
        "one exact permute-and-flip draw over the grid cells at (4ε/5)/l0 (its default share of ε; "
        "pure DP, composed l0-fold per unit; the ledger event is the composition of both parts).",
        "* **OpenDP 0.16** Polars Context: `group_by('key').agg(pl.len().dp.noise(), pl.col('value').clip(lower, "
        "upper).dp.median(candidates))` under `dp.loss_of(epsilon, delta)` with `dp.unit_of(contributions="
        "[Bound(per_group=l0), Bound(by=['key'], per_group=1)])`; the Context chooses the split, the threshold "
        "for unknown keys and the scales.",
        "* **PipelineDP** `Metrics.PERCENTILE(50)` with `max_partitions_contributed=l0`, "
        "`max_contributions_per_partition=1`, `min_value`/`max_value` = the bounds and its default private "
        "partition selection; `NaiveBudgetAccountant(ε, δ)` splits ε evenly between selection and percentile.",
        "",
    ]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(md) + "\n")
    print(f"wrote {out} ({total / 60:.1f} min)")
    return 0


# ----------------------------------------------------------------------------------------------- main

# ----------------------------------------------------------------------------------------------- public keys

PK_NOISES = {"sparsedp": ("auto", "correlated-gaussian", "bounded-density", "public-gaussian", "public-laplace"),
             "opendp": ("gaussian", "laplace"), "pipelinedp": ("gaussian", "laplace")}


def public_keys_dataset(d: int, l0: int, units: int, seed: int, data: Path, keys: Path) -> dict:
    """A public list of ``d`` keys and a log of ``units`` units, each touching a random number (1 … min(l0, d),
    uniform) of distinct keys drawn by popularity (Zipf-like weights) from the list's first 90% plus d/10
    unlisted keys; the list's last 10% never occur. Every unit already touches at most ``l0`` listed keys, so
    each library's bound is a no-op and the truth (distinct units per listed key) is what each one counts."""
    import numpy as np
    import polars as pl
    g = np.random.Generator(np.random.PCG64(seed))
    listed = [f"k{i:06d}" for i in range(d)]
    pool = listed[: max(1, int(0.9 * d))] + [f"x{i:06d}" for i in range(max(1, d // 10))]
    w = 1.0 / np.arange(1, len(pool) + 1) ** 0.6
    w /= w.sum()
    us, ks = [], []
    for u in range(units):
        m = int(g.integers(1, min(l0, d) + 1))
        pick = g.choice(len(pool), size=min(m, len(pool)), replace=False, p=w)
        picked = [pool[i] for i in pick]
        listed_part = [k for k in picked if k.startswith("k")][:l0]
        picked = listed_part + [k for k in picked if not k.startswith("k")]
        us += [u] * len(picked)
        ks += picked
    df = pl.DataFrame({"unit": us, "key": ks}, schema={"unit": pl.Int64, "key": pl.String})
    df.write_parquet(data)
    pl.DataFrame({"key": listed}).write_parquet(keys)
    return {"rows": df.height, "units": units, "d": d, "l0": l0}


def run_public_keys(a, pythons: dict[str, Path]) -> tuple[list[str], list[dict]]:
    import numpy as np
    import polars as pl
    configs = [(int(x.split(":")[0]), int(x.split(":")[1])) for x in a.pk_configs.split(",") if x]
    lines, infos = [], []
    with tempfile.TemporaryDirectory(prefix="sparsedp-peers-pk-") as td:
        tmp = Path(td)
        for d, l0 in configs:
            data, keys = tmp / f"pk_{d}_{l0}.parquet", tmp / f"keys_{d}.parquet"
            info = public_keys_dataset(d, l0, a.pk_units, a.value_seed, data, keys)
            print(f"public keys: d = {d}, l0 = {l0}: {info['rows']} rows, {info['units']} units", flush=True)
            truth = (pl.read_parquet(data).unique().group_by("key").len()
                     .join(pl.read_parquet(keys), on="key", how="right").with_columns(pl.col("len").fill_null(0)))
            errs: dict = {}
            meta: dict = {}
            for lib in pythons:
                for noise in PK_NOISES.get(lib, ()):
                    c = (lib, noise)
                    errs[c], secs = [], []
                    for rep in range(a.repeats):
                        out, mp = tmp / f"o_{lib}_{noise}.parquet", tmp / f"o_{lib}_{noise}.json"
                        try:
                            run_script(pythons[lib], _script(lib), [
                                "public_keys", str(data), str(keys), str(out), str(mp), str(a.epsilon),
                                str(a.delta), str(l0), noise], a.timeout)
                        except RuntimeError as err:
                            print(f"  {lib} {noise}: {err}", flush=True)
                            break
                        m = json.loads(mp.read_text())
                        o = pl.read_parquet(out)
                        j = truth.join(o, on="key", how="left")
                        if j["count"].null_count():
                            print(f"  {lib} {noise}: {j['count'].null_count()} listed keys missing", flush=True)
                        errs[c].extend((j["count"] - j["len"]).to_list())
                        secs.append(m["seconds"])
                        meta[c] = m
                    if errs[c]:
                        rmse = float(np.sqrt(np.mean(np.square(errs[c]))))
                        print(f"  {lib:10s} {noise:20s} RMSE per key {rmse:9.4g}  ({meta[c].get('mechanism')}; "
                              f"{meta[c].get('calibration', '')}) {_median(secs):.2f} s", flush=True)
                        meta[c]["rmse"], meta[c]["secs"] = rmse, _median(secs)
            ok = {c: m for c, m in meta.items() if "rmse" in m}
            head = ["library", "noise", "mechanism (calibration)", "RMSE per key", "release time (s)"]
            tab = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
            for (lib, noise), m in ok.items():
                cal = f" ({m['calibration']})" if m.get("calibration") else ""
                tab.append(f"| {PEERS.get(lib, {}).get('label', lib)} | {noise} | {m.get('mechanism', '')}{cal} | "
                           f"{m['rmse']:.4g} | {m['secs']:.2f} |")
            ratios = []
            for ours in ("auto", "correlated-gaussian", "bounded-density", "public-gaussian", "public-laplace"):
                o = ok.get(("sparsedp", ours))
                if o is None:
                    continue
                for (lib, noise), m in ok.items():
                    if lib == "sparsedp":
                        continue
                    ratios.append(f"| sparsedp {ours} / {PEERS.get(lib, {}).get('label', lib)} {noise} | "
                                  f"{o['rmse'] / m['rmse']:.3f} |")
            g = ok.get(("sparsedp", "public-gaussian"))
            cg = ok.get(("sparsedp", "correlated-gaussian"))
            if g and cg:
                ratios.append(f"| sparsedp correlated-gaussian / sparsedp public-gaussian | "
                              f"{cg['rmse'] / g['rmse']:.3f} |")
            pred = (math.sqrt(d) + 1) / (2 * math.sqrt(d))
            lines += [f"### d = {d} public keys, l0 = {l0}: {info['rows']:,} rows, {info['units']:,} units", "",
                      *tab, "", "| ratio of RMSE per key | value |", "|---|---|", *ratios, ""]
            if l0 >= d:
                lines += [f"Seed 002's continuous prediction for the correlated / independent Gaussian ratio when "
                          f"units may touch every key (l0 = d): (√d + 1)/(2√d) = {pred:.3f}.", ""]
            info["ratios"] = ratios
            infos.append(info)
    return lines, infos


def public_keys_main(a, pythons: dict[str, Path], versions: dict[str, str], setup: float, t_start: float) -> int:
    print(f"public keys: ε = {a.epsilon:g}, δ = {a.delta:g}, configs {a.pk_configs}, {a.repeats} repeat(s)",
          flush=True)
    lines, _ = run_public_keys(a, pythons)
    print("\n".join(lines), flush=True)
    total = time.perf_counter() - t_start
    out = Path(a.out) if a.out else ROOT / "docs" / "benchmarks_public_keys.md"
    cmd = (f"python benchmarks/peers.py --public-keys{' --skip-install' if a.skip_install else ''} "
           f"--pk-configs {a.pk_configs} --pk-units {a.pk_units} --epsilon {a.epsilon:g} --delta {a.delta:g} "
           f"--repeats {a.repeats} --value-seed {a.value_seed} --peers {a.peers}")
    md = [
        "# Public key domain: error per key against the peers' public-partition counts",
        "",
        f"Generated by `{cmd}` on {_dt.datetime.now(_dt.timezone.utc):%Y-%m-%d %H:%M} UTC in {total / 60:.1f} min "
        f"({setup:.0f} s of it on the peers' venvs). Machine: {machine()}; shared with other jobs while this ran, "
        "so the times are indicative only; the errors do not depend on the load.",
        "",
        "Versions: " + "; ".join(f"{k}: {v}" for k, v in versions.items()) + ".",
        "",
        "Every library releases a noisy count of distinct units for every key of the same public list (no "
        "threshold), at the same (ε, δ) under add/remove one unit, with the same contribution bound: each unit "
        "adds at most 1 to each key and touches at most l0 listed keys. The data already respect the bound, so the "
        "truth (distinct units per listed key, 0 for the 10% of listed keys that never occur) is what each library "
        "counts and the error is noise only. RMSE per key is pooled over all listed keys and all repeats. With "
        "correlated noise each release draws its shared term once, so over a few repeats the measured RMSE "
        "scatters more than for independent noise; sparsedp's expected per-key error std (in the mechanism "
        "column) is the exact figure of the noise law.",
        "",
        "* **sparsedp**: `sd.release(..., keys=list, max_groups_per_unit=l0, mechanism=…)`, secure integer noise: "
        "`correlated-gaussian` (seed 002 Algorithm 1, embedding form, exact discrete δ), `bounded-density` "
        "(seed 002 §4.1, the centred integer embedding reaching the optimal ellipse), `public-gaussian` "
        "(independent discrete Gaussian, exact discrete δ at ℓ2 sensitivity √l0), `public-laplace` (discrete "
        "Laplace, scale l0/ε, pure), `auto` (the lowest expected error of the four; bounded-density only when "
        "l0 < d).",
        "* **OpenDP 0.16**: `make_gaussian` (float vector, ℓ2 sensitivity √l0, zCDP converted with "
        "`make_zCDP_to_approxDP`) / `make_laplace` (integer vector, ℓ1 sensitivity l0) on the count vector "
        "aligned with the list: the noise step of its public-key group-by.",
        "* **PipelineDP**: `PRIVACY_ID_COUNT` with `public_partitions=list`, `max_partitions_contributed = l0`, "
        "`max_contributions_per_partition = 1`, the whole budget on the one metric.",
        "",
        *lines,
    ]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(md) + "\n")
    print(f"wrote {out} ({total / 60:.1f} min)")
    return 0


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = ""
    try:
        kb = int(open("/proc/meminfo").readline().split()[1])
        mem = f", {kb / 2 ** 20:.0f} GiB RAM"
    except (OSError, ValueError, IndexError):
        pass
    return f"{platform.system()} {platform.release()}, {os.cpu_count()} cores ({cpu}){mem}, Python {platform.python_version()}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=200_000, help="rows of the synthetic search log")
    ap.add_argument("--docs", type=int, default=0, help="cap on corpus files (0 = all)")
    ap.add_argument("--words", type=int, default=300, help="words read per corpus file")
    ap.add_argument("--peers", default="opendp,pipelinedp,tumult")
    ap.add_argument("--skip-install", action="store_true", help="use the venvs as they are")
    ap.add_argument("--install-timeout", type=float, default=900.0)
    ap.add_argument("--timeout", type=float, default=600.0, help="per peer-script run")
    ap.add_argument("--repeats", type=int, default=1, help="runs per release (medians reported)")
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--delta", type=float, default=1e-6)
    ap.add_argument("--l0", type=int, default=20, help="keys per unit for the release comparison (search log)")
    ap.add_argument("--corpus-l0", type=int, default=300, help="keys (bigrams) per document for the corpus")
    ap.add_argument("--out", default=None, help="default docs/benchmarks.md (docs/benchmarks_aggregates.md "
                    "with --aggregates)")
    ap.add_argument("--aggregates", action="store_true",
                    help="only the SUM / MEAN comparison with OpenDP and PipelineDP (issue 16)")
    ap.add_argument("--lower", type=float, default=0.0, help="--aggregates: lower bound of a unit's per-key total")
    ap.add_argument("--upper", type=float, default=600.0, help="--aggregates: upper bound")
    ap.add_argument("--value-seed", type=int, default=0, help="--aggregates: numpy seed of the value column")
    ap.add_argument("--no-prebound", action="store_true",
                    help="--aggregates: keep every key of every unit in the data (by default the data keep at "
                    "most l0 keys per unit, so the truth is what each library aggregates before noise)")
    ap.add_argument("--quantiles", action="store_true",
                    help="only the per-key median comparison (issue 34); writes docs/benchmarks_quantiles.md")
    ap.add_argument("--cells", type=int, default=1024, help="--quantiles: grid cells (candidates) over the bounds")
    ap.add_argument("--median-shares", default="",
                    help="--quantiles: also run sparsedp with these median shares of ε (comma-separated)")
    ap.add_argument("--public-keys", action="store_true",
                    help="only the public-key-domain comparison (docs/benchmarks_public_keys.md)")
    ap.add_argument("--pk-configs", default="100:100,1000:1000,1000:20",
                    help="--public-keys: comma-separated d:l0 (number of listed keys : keys per unit)")
    ap.add_argument("--pk-units", type=int, default=600, help="--public-keys: units in each synthetic log")
    a = ap.parse_args(argv)
    if a.public_keys and a.peers == "opendp,pipelinedp,tumult":
        a.peers = "opendp,pipelinedp"  # Tumult is not part of the public-keys comparison
    if a.aggregates and a.peers == "opendp,pipelinedp,tumult":
        a.peers = "opendp,pipelinedp"  # Tumult is not part of the aggregates comparison
    if a.quantiles and a.peers == "opendp,pipelinedp,tumult":
        a.peers = "opendp,pipelinedp"  # Tumult is not part of the quantiles comparison
    if a.out is None and not a.aggregates and not a.public_keys and not a.quantiles:
        a.out = str(ROOT / "docs" / "benchmarks.md")
    t_start = time.perf_counter()

    print("peers: setting up venvs", flush=True)
    pythons: dict[str, Path] = {"sparsedp": Path(sys.executable)}
    problems: dict[str, str] = {}
    for peer in [p for p in a.peers.split(",") if p]:
        why = ensure_venv(peer, a.install_timeout, a.skip_install)
        if why:
            problems[peer] = why
            print(f"  {peer}: skipped ({why})", flush=True)
        else:
            pythons[peer] = venv_python(PEERS[peer]["venv"])
    setup = time.perf_counter() - t_start
    versions = {}
    for peer, py in pythons.items():
        if peer == "sparsedp":
            import sparsedp
            versions[peer] = f"sparsedp {getattr(sparsedp, '__version__', 'dev')}"
            continue
        r = subprocess.run([str(py), "-m", "pip", "list", "--format", "json"], capture_output=True, text=True)
        wanted = {"opendp", "polars", "pipeline-dp", "python-dp", "tmlt.analytics", "tmlt-analytics", "pyspark"}
        pk = [f"{p['name']} {p['version']}" for p in json.loads(r.stdout or "[]") if p["name"].lower() in wanted]
        versions[peer] = ", ".join(sorted(pk))
    import polars
    versions["polars (sparsedp, baseline)"] = f"polars {polars.__version__}"
    if a.aggregates:
        return aggregates_main(a, pythons, versions, setup, t_start)
    if a.public_keys:
        return public_keys_main(a, pythons, versions, setup, t_start)
    if a.quantiles:
        return quantiles_main(a, pythons, versions, setup, t_start)

    with tempfile.TemporaryDirectory(prefix="sparsedp-peers-") as td:
        tmp = Path(td)
        print("thresholds", flush=True)
        thr_pythons = {k: v for k, v in pythons.items() if k != "tumult"}
        thr_rows = thresholds(thr_pythons, tmp, a.timeout)
        thr_lines, summary = threshold_table(thr_rows)
        print("\n".join(thr_lines), flush=True)

        datasets = []
        print("data", flush=True)
        demo = tmp / "demo.parquet"
        datasets.append((demo_dataset(a.rows, demo), demo))
        corpus = tmp / "corpus.parquet"
        datasets.append((corpus_dataset(a.docs, a.words, corpus), corpus))
        rel_pythons = {"polars": Path(sys.executable), **pythons}
        noises = {"polars": ("none",), "sparsedp": ("auto", "laplace", "gaussian"),
                  **{p: PEERS[p]["noises"] for p in pythons if p in PEERS}}
        rel_sections = []
        for (info, path), l0 in zip(datasets, (a.l0, a.corpus_l0)):
            info["l0"] = l0
            print(f"releases on {info['name']}: {info['rows']} rows, {info['units']} units, {info['keys']} keys",
                  flush=True)
            rows = releases(rel_pythons, noises, path, tmp, a.epsilon, a.delta, l0, a.timeout, a.repeats)
            rel_sections.append((info, release_table(rows)))

    total = time.perf_counter() - t_start
    goal5 = all(s["ratio"] < 1 for s in summary if s["l0"] >= 5)
    goal1000 = all(s["topk_ratio"] <= 0.6 for s in summary if s["l0"] >= 1000)
    md = [
        "# sparsedp against its peers",
        "",
        f"Generated by `python benchmarks/peers.py --rows {a.rows}{' --docs %d' % a.docs if a.docs else ''} --words {a.words}"
        f" --l0 {a.l0} --corpus-l0 {a.corpus_l0}` on "
        f"{_dt.datetime.now(_dt.timezone.utc):%Y-%m-%d %H:%M} UTC in {total / 60:.1f} min, of which "
        f"{setup:.0f} s {'checking' if a.skip_install else 'creating or updating'} the peers' venvs (a fresh "
        "install of all three takes a few minutes more). How to read it, and what differs between the "
        "libraries' guarantees: [comparison.md](comparison.md).",
        "",
        f"Machine: {machine()}.",
        "",
        "Versions: " + "; ".join(f"{k}: {v}" for k, v in versions.items()) + ".",
        "",
    ]
    if problems:
        md += ["Peers not run: " + "; ".join(f"{k}: {v}" for k, v in problems.items()) + ".", ""]
    md += [
        "## Release thresholds",
        "",
        "Smallest true count of distinct units that each mechanism releases with probability >= 1/2 (for a",
        "noise-and-threshold mechanism with symmetric integer noise: its absolute threshold), at the same",
        "(ε, δ) under add/remove one unit, each unit contributing 1 to at most l0 keys. Peers' selection-only",
        "mechanisms (python-dp partition selection) spend the whole budget on selection and release no counts;",
        "sparsedp's and OpenDP's release the noisy counts too. \"top-k CSH\" releases at most k = l0 keys and",
        "needs no per-unit key bound; it is listed separately because it answers a different question.",
        "",
        *thr_lines,
        "",
        f"Goal \"sparsedp's threshold below every peer's at every l0 >= 5\": **{'met' if goal5 else 'not met'}**"
        " (ratios " + ", ".join(f"{s['ratio']:.3f}" for s in summary if s["l0"] >= 5) + ").",
        f"Goal \"top-k CSH at most 0.6x the best peer at l0 >= 1000\": **{'met' if goal1000 else 'not met'}**"
        " with the secure (integer-noise) top-k CSH (ratios "
        + ", ".join(f"{s['topk_ratio']:.3f}" for s in summary if s["l0"] >= 1000) + "); with float noise"
        " (research only, `insecure_float=True`) the ratios would be "
        + ", ".join(f"{s['topk_float_ratio']:.3f}" for s in summary if s["l0"] >= 1000) + ".",
        "",
        f"## Releases at ε = {a.epsilon:g}, δ = {a.delta:g}",
        "",
        "Keys released and the median relative error |released − true| / true of the released counts (true =",
        "distinct units per key before contribution bounding, so bounding bias is included), over the keys each",
        "library released (a library that releases more, rarer keys shows a larger median) and over the keys that",
        "every private release that published anything published (their number in brackets). Key counts near",
        "the threshold vary by several keys from run to run (one run per library). Release time is",
        "measured inside the script (read data excluded); wall includes interpreter and library start-up",
        "(Spark for Tumult). Peak RSS is the subprocess tree's maximum resident set.",
        "",
    ]
    for info, lines in rel_sections:
        md += [f"### {info['name']}: {info['rows']:,} rows, {info['units']:,} units, {info['keys']:,} keys; "
               f"l0 = {info['l0']}", "",
               *lines, ""]
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text("\n".join(md) + "\n")
    print(f"wrote {a.out} ({total / 60:.1f} min)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
