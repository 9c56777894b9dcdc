"""Golden outputs of the query-model refactor (issue 29), captured from the code before the refactor.

Run once, at the commit named in the file names, to write them (``python tests/golden/capture.py``; add
``--spark`` to write the Spark file too, which starts a local Spark session):

* ``plan_grid_<commit>.json`` — every row of ``sd.plan()`` (``Plan.rows()``: mechanism and options, analysis, σ,
  noise std, margin, δ achieved, pure error bounds, SUM/MEAN column errors) and each row's privacy profile at
  ε/4 … 4ε, over a grid of ε, δ (δ = 0: the pure mechanisms), ``max_groups_per_unit``, ``top_k``, ``max_units``,
  aggregates, column shapes and public keys (``keys=``, ``group=``).
* ``releases_<commit>.json`` — seeded releases (:class:`~sparsedp.noise.InsecureSeededRandom`, the tests'
  deterministic source, passed as ``rng=``): the released table (column names and every value) and every public
  field of the :class:`~sparsedp.report.Report` (``Report.to_dict()``, the profile included), and the
  deterministic curator figures (engine, bounding statistics, warnings; not timings, paths or sources) of
  every registered mechanism that runs on small data, on every embedded engine (Polars frame and Parquet file,
  DuckDB in memory and with ``passes=2`` (its SQL route), pandas, Arrow); vector sums and means; ALP; the
  Misra–Gries sketch releases; ``release_histogram``; the CLI ``release`` output file (its table and its
  metadata) with the process source replaced by a seeded one.
* ``releases_spark_<commit>.json`` — the Spark engine on the same cases (tests/spark/test_spark_golden.py).

``tests/golden/test_query_model_golden.py`` recomputes every entry with the current code and compares it
exactly (floats bit for bit, types included). Polars' ``hash`` (the key fingerprints of the ℓ0 choice) is stable
within one Polars version only: the files record the version, and the release tests skip under another one.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math
import subprocess
import sys
from fractions import Fraction
from pathlib import Path
from typing import Any, Callable

import numpy as np
import polars as pl

HERE = Path(__file__).parent
COMMIT = "bd27e4f"  # the commit the goldens were captured at (before issue 29's refactor)
PLAN_FILE = HERE / f"plan_grid_{COMMIT}.json"
RELEASE_FILE = HERE / f"releases_{COMMIT}.json"
SPARK_FILE = HERE / f"releases_spark_{COMMIT}.json"


# ------------------------------------------------------------------------------------------- plain values


def plain(x: Any) -> Any:
    """``x`` as JSON values that keep every bit: floats stay floats (NaN/±inf as strings), ints stay ints,
    Fractions as "p/q", enums by value, dataclasses and mappings as dicts, arrays and tuples as lists."""
    if isinstance(x, enum.Enum):
        return plain(x.value)
    if x is None or isinstance(x, (bool, str)):
        return x
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if isinstance(x, (int, np.integer)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        f = float(x)
        return f if math.isfinite(f) else repr(f)
    if isinstance(x, Fraction):
        return f"Fraction({x.numerator}, {x.denominator})"
    if isinstance(x, np.ndarray):
        return [plain(y) for y in x.tolist()]
    if isinstance(x, dict) or hasattr(x, "items"):
        return {str(k): plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [plain(y) for y in x]
    if dataclasses.is_dataclass(x):
        return {f.name: plain(getattr(x, f.name)) for f in dataclasses.fields(x)}
    if hasattr(x, "to_dict"):
        return plain(x.to_dict())
    raise TypeError(f"no golden form for {type(x).__name__}: {x!r}")


def frame(t: Any) -> dict:
    """A released table (Polars, pandas, Arrow or Spark) as its column names, dtypes (as Polars reads them)
    and values."""
    if isinstance(t, pl.DataFrame):
        p = t
    elif hasattr(t, "sparkSession"):
        from sparsedp.engines import spark_engine as se

        p = pl.from_arrow(se.to_arrow(t))
    elif hasattr(t, "to_pandas") and hasattr(t, "schema") and hasattr(t, "column_names"):
        p = pl.from_arrow(t)
    else:
        p = pl.from_pandas(t)
    return {"columns": p.columns, "dtypes": [str(d) for d in p.dtypes],
            "values": {c: plain(p[c].to_list()) for c in p.columns}}


def report(res: Any) -> dict:
    """The public report (every field) and the deterministic curator figures of a :class:`sparsedp.Result`."""
    cur = res.curator
    b = cur.bounding
    out = {"report": plain(res.report.to_dict()), "report_text": str(res.report),
           "curator": {"engine": cur.engine, "engine_choice": cur.engine_choice, "warnings": list(cur.warnings),
                       "bounding": None if b is None else plain(b.to_dict() if hasattr(b, "to_dict") else b),
                       "auto_bound": None if cur.auto_bound is None else _auto_bound_curator(cur.auto_bound)}}
    if res.query is not None:
        out["query"] = "callable"
    return out


def _auto_bound_curator(a: Any) -> Any:
    try:
        return plain(a)
    except TypeError:
        return {k: plain(v) for k, v in vars(a).items()}


def released(res: Any) -> dict:
    return {"table": frame(res.table), **report(res)}


# ------------------------------------------------------------------------------------------- comparison


def same(got, want, where: str = "") -> None:
    """``got == want`` with types: an int is not a float, a list has its length, a dict its keys in order; floats
    as :func:`float_same`."""
    if isinstance(want, dict) and want.get("not_golden"):  # recorded at capture, free to change
        return
    assert type(got) is type(want), f"{where}: {type(got).__name__} {got!r} != {type(want).__name__} {want!r}"
    if isinstance(want, dict):
        assert list(got) == list(want), f"{where}: keys {list(got)} != {list(want)}"
        for k in want:
            same(got[k], want[k], f"{where}.{k}")
    elif isinstance(want, list):
        assert len(got) == len(want), f"{where}: length {len(got)} != {len(want)}"
        for i, (g, w) in enumerate(zip(got, want)):
            same(g, w, f"{where}[{i}]")
    elif isinstance(want, float):
        assert float_same(got, want), f"{where}: {got!r} != {want!r}"
    else:
        assert got == want, f"{where}: {got!r} != {want!r}"


#: floats from accountants (σ, δ achieved, profiles) go through libm/SIMD transcendental functions whose last bits
#: differ between CPUs and numpy builds; any change a refactor could make is many orders of magnitude larger
FLOAT_REL = 1e-9


def float_same(got: float, want: float) -> bool:
    """Equal, both NaN, or within :data:`FLOAT_REL` relative (a few ULPs of a CPU's math library)."""
    if math.isnan(want):
        return math.isnan(got)
    return got == want or abs(got - want) <= FLOAT_REL * max(abs(got), abs(want))


def json_same(got, want, where: str = "") -> None:
    """Compare after the JSON round trip the golden file went through (tuples become lists)."""
    same(json.loads(json.dumps(got, ensure_ascii=False)), want, where)


def compare_release(got, want, where: str) -> None:
    """A release against its golden; a request refused at capture must still be refused (the refusal's
    wording and error type are not golden: issue 29 rewrites both)."""
    if want.get("refused"):
        assert got.get("refused"), f"{where}: refused at capture, now {got}"
    else:
        json_same(got, want, where)


# ------------------------------------------------------------------------------------------- plan grid


def _aggs(kind: str) -> Any:
    import sparsedp as sd

    return {"none": None,
            "sum": [sd.Count(), sd.Sum("dwell", 0, 600)],
            "sum_mean": [sd.Count(), sd.Sum("dwell", 0, 600), sd.Mean("clicks", 0, 10)],
            "mean_negative": [sd.Count(), sd.Mean("likes", -3, 8)],
            "two_sums": [sd.Count(), sd.Sum("dwell", 0, 600), sd.Sum("clicks", 0, 10)]}[kind]


def plan_cases() -> dict[str, tuple[dict, bool]]:
    """Named ``sd.plan`` arguments (aggregates named, built by :func:`_aggs`) and whether the case is slow
    (several seconds: small ε top-k, large k or n; checked with ``-m slow``)."""
    cases: dict[str, tuple[dict, bool]] = {}
    for eps in (0.1, 1.0, 3.0):
        for dlt in (1e-5, 1e-8):
            for l0 in (1, 4, 30):
                cases[f"l0 eps={eps} delta={dlt} l0={l0}"] = (dict(epsilon=eps, delta=dlt, max_groups_per_unit=l0),
                                                              False)
    cases["l0 eps=1.0 delta=1e-08 l0=200"] = (dict(epsilon=1.0, delta=1e-8, max_groups_per_unit=200), True)
    for (eps, dlt, k), slow in {(1.0, 1e-6, 1): True, (1.0, 1e-6, 10): False, (3.0, 1e-8, 10): True,
                                (1.0, 1e-6, 100): True, (0.1, 1e-5, 10): True, (0.5, 1e-7, 1): True}.items():
        cases[f"topk eps={eps} delta={dlt} k={k}"] = (dict(epsilon=eps, delta=dlt, top_k=k), slow)
    for (eps, units), slow in {(1.0, 50): False, (0.5, 50): False, (1.0, 1000): True, (0.2, 200): True}.items():
        cases[f"pure eps={eps} n={units}"] = (dict(epsilon=eps, delta=0.0, max_units=units), slow)
        cases[f"pure+approx eps={eps} n={units}"] = (dict(epsilon=eps, delta=1e-6, max_units=units,
                                                          max_groups_per_unit=1), slow)
    cases["pure beta eps=0.5 n=50"] = (dict(epsilon=0.5, delta=0.0, max_units=50, beta=0.2), False)
    for eps in (1.0, 0.5):
        for agg in ("sum", "sum_mean", "mean_negative"):
            cases[f"aggregates {agg} eps={eps} l0=3"] = (dict(epsilon=eps, delta=1e-6, max_groups_per_unit=3,
                                                              aggregates=agg), eps != 1.0)
            cases[f"aggregates {agg} eps={eps} k=20"] = (dict(epsilon=eps, delta=1e-6, top_k=20, aggregates=agg),
                                                         not (eps == 1.0 and agg == "sum_mean"))
        cases[f"column_shape eps={eps}"] = (dict(epsilon=eps, delta=1e-6, max_groups_per_unit=3,
                                                 aggregates="sum", column_shape=[[1.0]]), eps != 1.0)
    cases["column_shape two sums"] = (dict(epsilon=1.0, delta=1e-6, max_groups_per_unit=3, aggregates="two_sums",
                                           column_shape=[[1.0, 0.5], [0.5, 1.0]]), False)
    for eps in (0.5, 1.0):
        for n_keys in (1, 50, 5000):
            cases[f"keys eps={eps} n={n_keys}"] = (dict(epsilon=eps, delta=1e-6, keys=n_keys), False)
            cases[f"keys pure eps={eps} n={n_keys}"] = (dict(epsilon=eps, delta=0.0, keys=n_keys), False)
            cases[f"keys l0=3 eps={eps} n={n_keys}"] = (dict(epsilon=eps, delta=1e-6, keys=n_keys,
                                                             max_groups_per_unit=3), False)
    cases["keys grouped eps=1.0"] = (dict(epsilon=1.0, delta=1e-6, keys="grouped", group="region"), False)
    cases["insecure_float l0=5"] = (dict(epsilon=1.0, delta=1e-6, max_groups_per_unit=5, insecure_float=True), False)
    cases["insecure_float k=10"] = (dict(epsilon=1.0, delta=1e-6, top_k=10, insecure_float=True), True)
    return cases


def _plan_kwargs(kw: dict) -> dict:
    kw = dict(kw)
    if "aggregates" in kw:
        kw["aggregates"] = _aggs(kw["aggregates"])
    if kw.get("keys") == "grouped":
        kw["keys"] = pl.DataFrame({"region": [g for g in GROUPS for _ in PAGES], "page": PAGES * len(GROUPS)})
    return kw


def plan_golden(kw: dict) -> dict:
    """Every row of ``sd.plan(**kw)`` and its privacy profile, or the error it raises."""
    import warnings

    import sparsedp as sd

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            p = sd.plan(**_plan_kwargs(kw))
        except Exception as e:  # a refusal is golden too
            return {"error": type(e).__name__, "message": str(e)}
        rows = plain(p.rows())
        profiles = []
        for i in range(len(p)):
            try:
                profiles.append(plain(p.profile_table(i)))
            except Exception as e:
                # plan(top_k=…, aggregates=…).profile_table() raises at bd27e4f (the joint analysis names are
                # not profile analyses): recorded, not golden, so that a fix may change it
                profiles.append({"not_golden": True, "error": type(e).__name__, "message": str(e)})
    return {"rows": rows, "mechanisms": [m.describe() for m in p.mechanisms], "title": p.title,
            "best": p.mechanisms[0].describe() if len(p) else None, "text": str(p), "profiles": profiles}


# ------------------------------------------------------------------------------------------- data


def log(n_rows: int = 8000, n_units: int = 700, n_keys: int = 120, seed: int = 5) -> pl.DataFrame:
    """Pareto-tailed units (many over small l0), Zipf-like string keys with one non-ASCII key, repeated rows,
    value columns (float, int, signed int)."""
    g = np.random.default_rng(seed)
    w = g.pareto(1.0, n_units) + 1
    units = g.choice(n_units, size=n_rows, p=w / w.sum())
    ranks = np.minimum(g.zipf(1.3, n_rows), n_keys) - 1
    words = np.array([f"page/{i:04d}" for i in range(n_keys - 1)] + ["café ☕"])
    return pl.DataFrame({"uid": (units * 7 + 3).astype(np.int64), "url": words[ranks],
                         "lang": np.where(units % 3 == 0, "de", "en"),
                         "dwell": g.uniform(0, 900, n_rows), "clicks": g.integers(0, 20, n_rows),
                         "likes": g.integers(-3, 8, n_rows)})


def public_keys_data(n_units: int = 300, n_keys: int = 40, seed: int = 0) -> pl.DataFrame:
    g = np.random.default_rng(seed)
    rows = []
    for u in range(n_units):
        for k in g.choice(n_keys, size=g.integers(1, 6), replace=False):
            rows.append((u, f"k{k:03d}"))
    return pl.DataFrame(rows, schema=["user", "key"], orient="row")


PUBLIC_KEYS = [f"k{i:03d}" for i in range(0, 60)]  # k040..k059 are absent from the data
GROUPS = ["east", "north", "south", "west"]
PAGES = [f"p{i}" for i in range(6)]


def grouped_data(n_units: int = 200, seed: int = 0) -> pl.DataFrame:
    g = np.random.default_rng(seed)
    rows = []
    for u in range(n_units):
        gs = g.choice(GROUPS, size=1 + (u % 5 == 0) * int(g.integers(1, 3)), replace=False)
        for grp in gs:
            for p in g.choice(PAGES, size=int(g.integers(1, 4)), replace=False):
                rows.append((u, str(grp), str(p)))
    return pl.DataFrame(rows, schema=["user", "region", "page"], orient="row")


def one_key_per_unit(counts: dict, extra_rows_for_unit0: int = 0) -> pl.DataFrame:
    units, keys = [], []
    for key, c in counts.items():
        for _ in range(c):
            units.append(len(units))
            keys.append(key)
    for i in range(extra_rows_for_unit0):
        units.append(0)
        keys.append(f"extra{i}")
    return pl.DataFrame({"u": units, "a": keys})


def vector_data(n_units: int = 150, d: int = 4, seed: int = 3) -> pl.DataFrame:
    g = np.random.default_rng(seed)
    units = np.repeat(np.arange(n_units), 2)
    x = g.normal(0.3, 0.8, size=(units.size, d))
    return pl.DataFrame({"user": units, **{f"c{j}": x[:, j] for j in range(d)}})


# ------------------------------------------------------------------------------------------- release cases

LOG_KW = dict(privacy_unit="uid", epsilon=1.0, delta=1e-6)


def _log_cases() -> dict[str, dict]:
    """``sd.release`` arguments on :func:`log`: run on every engine."""
    import sparsedp as sd

    return {
        "count gshm l0=5": dict(by="url", max_groups_per_unit=5, mechanism="gshm"),
        "count auto l0=5": dict(by="url", max_groups_per_unit=5),
        "count two keys l0=3": dict(by=["url", "lang"], max_groups_per_unit=3),
        "count laplace l0=2": dict(by="url", max_groups_per_unit=2, mechanism="laplace"),
        "count laplace eps=0.3 delta=1e-9": dict(by="url", max_groups_per_unit=1, mechanism=sd.Laplace(),
                                                 epsilon=0.3, delta=1e-9),
        "count gshm pre_threshold=3": dict(by="url", max_groups_per_unit=4, mechanism=sd.GSHM(pre_threshold=3)),
        "sum+mean gshm l0=4": dict(by="url", max_groups_per_unit=4,
                                   aggregates=[sd.Count(), sd.Sum("dwell", 0, 600), sd.Mean("clicks", 0, 10)]),
        "sum signed + named": dict(by=["url", "lang"], max_groups_per_unit=2,
                                   aggregates=[sd.Count(), sd.Sum("likes", -3, 8, name="likes_total"),
                                               sd.Mean("dwell", 0, 900)]),
        "mean only": dict(by="url", max_groups_per_unit=3, aggregates=[sd.Mean("dwell", 0, 600)]),
        "column_shape": dict(by="url", max_groups_per_unit=3, epsilon=3.0,
                             aggregates=[sd.Count(), sd.Sum("dwell", 0, 600), sd.Sum("clicks", 0, 10)],
                             column_shape=[[1.0, 0.6], [0.6, 1.0]]),
        "top_k=10": dict(by="url", top_k=10),
        "top_k shifted": dict(by="url", mechanism=sd.TopKCSH(k=10, debias=False)),
        "top_k sums": dict(by="url", top_k=8, aggregates=[sd.Count(), sd.Sum("dwell", 0, 600),
                                                          sd.Mean("clicks", 0, 10)]),
        # the defaults of the capture (issue 33 moved them to share 0.05, quantile 0.5), pinned
        "auto bound": dict(by="url", max_groups_per_unit=sd.AutoBound(share=0.1, quantile=0.9)),
        "auto bound keys": dict(by="url", max_groups_per_unit=sd.AutoBound(objective="keys", share=0.1)),
        "weighted-gaussian": dict(by="url", max_groups_per_unit=3, mechanism="weighted-gaussian"),
        "policy-gaussian float": dict(by="url", max_groups_per_unit=3, mechanism="policy-gaussian",
                                      insecure_float=True),
        "gshm float": dict(by="url", max_groups_per_unit=3, mechanism="gshm", insecure_float=True),
        "two-stage": dict(by="url", max_groups_per_unit=2, mechanism=sd.TwoStage(select="gshm")),
        "two-stage split": dict(by="url", max_groups_per_unit=1,
                                mechanism=sd.TwoStage(select="gshm", split=0.4, delta_split=0.3)),
        "public keys auto": dict(by="url", keys=[f"page/{i:04d}" for i in range(0, 150, 3)]),
        "public keys gaussian l0=3": dict(by="url", keys=[f"page/{i:04d}" for i in range(40)],
                                          max_groups_per_unit=3, mechanism="public-gaussian"),
        "public keys laplace pure": dict(by="url", keys=[f"page/{i:04d}" for i in range(40)], delta=0.0,
                                         max_groups_per_unit=3, mechanism="public-laplace"),
    }


def _other_cases() -> dict[str, Callable[[], Any]]:
    """Releases on their own small data (Polars engine): mechanisms that need a data shape of their own."""
    import sparsedp as sd
    from sparsedp.noise import InsecureSeededRandom as R

    pk, gd = public_keys_data(), grouped_data()
    grouped_keys = [(g, p) for g in GROUPS for p in PAGES]
    one = one_key_per_unit({"x": 300, "y": 200, "z": 2}, extra_rows_for_unit0=3)
    mg = one_key_per_unit({"x": 400, "y": 250, "z": 1, "w": 1})
    two = pl.DataFrame({"u": list(range(600)), "a": ["p"] * 500 + ["q"] * 100, "b": [1] * 600})
    small = pl.DataFrame({"u": list(range(20)), "a": ["p"] * 12 + ["q"] * 8, "b": [7] * 20})
    dense = pl.DataFrame({"u": list(range(10)), "k": [0] * 6 + [3] * 4})
    wide = pl.DataFrame({"u": list(range(30)), "k": [0] * 14 + [3] * 9 + [17] * 5 + [40, 63]})
    zipf = np.random.default_rng(1).zipf(1.5, 3000) % 60
    items = pl.DataFrame({"item": [f"i{x}" for x in zipf]})
    int_items = pl.DataFrame({"item": (zipf[:300] % 16).astype(np.int64)})

    def rel(data, *a, seed, **kw):
        return lambda: sd.release(data, *a, rng=R(seed), **kw)

    return {
        "public keys correlated-gaussian": rel(pk, "user", "key", 1.0, 1e-6, keys=PUBLIC_KEYS,
                                              mechanism="correlated-gaussian", seed=1),
        "public keys correlated known_n": rel(pk, "user", "key", 1.0, 1e-6, keys=PUBLIC_KEYS,
                                             mechanism=sd.CorrelatedGaussian(known_n=300), seed=2),
        "public keys bounded-density": rel(pk, "user", "key", 1.0, 1e-6, keys=PUBLIC_KEYS,
                                           mechanism="bounded-density", seed=3),
        "public keys auto many": rel(pk, "user", "key", 1.0, 1e-6, keys=PUBLIC_KEYS, seed=4),
        "public keys auto pure": rel(pk, "user", "key", 1.0, 0.0, keys=PUBLIC_KEYS, seed=5),
        "public keys frame": rel(pk, "user", "key", 0.5, 1e-7, keys=pl.DataFrame({"key": PUBLIC_KEYS[::2]}),
                                 max_groups_per_unit=2, seed=6),
        "grouped keys": rel(gd, "user", ["region", "page"], 1.0, 1e-6, keys=grouped_keys,
                            mechanism=sd.GroupedCorrelatedGaussian(group="region"), seed=7),
        "stability": rel(one, "u", "a", epsilon=0.5, delta=1e-6, mechanism="stability", seed=3),
        "pure-sparse": rel(two, "u", ["a", "b"], epsilon=1, delta=0,
                           mechanism=sd.PureSparse(max_units=700, max_key_bytes=8), seed=5),
        "compact": rel(small, "u", ["a", "b"], epsilon=1, delta=0,
                       mechanism=sd.Compact(max_key_bytes=12, query_keys=[("p", 7), ("nope", 1)]), seed=9),
        "basic": rel(dense, "u", "k", epsilon=1, delta=0, mechanism=sd.Basic(domain_size=8), seed=2),
        "keep-heavy": rel(wide, "u", "k", epsilon=1, delta=0, mechanism=sd.KeepHeavy(domain_size=64), seed=4),
        "kh-prime": rel(wide, "u", "k", epsilon=1, delta=0, mechanism=sd.KHPrime(domain_size=64), seed=5),
        "kh-double-prime": rel(wide, "u", "k", epsilon=1, delta=0, mechanism=sd.KHDoublePrime(domain_size=128),
                               seed=6),
        "sparse-histogram": rel(wide, "u", "k", epsilon=1, delta=1e-6,
                                mechanism=sd.BVSparseHistogram(domain_size=128), seed=7),
        # the bounded route of bd27e4f (l0 = 1); the default with a unit column is now the user-level PAMG sketch
        "misra-gries": rel(mg, "u", "a", epsilon=1.0, delta=1e-6,
                           mechanism=sd.MisraGries(sketch_size=10, unit_sketch="group-privacy"), seed=11),
        "misra-gries no unit": rel(items, None, "item", 1.0, 1e-6, mechanism=sd.MisraGries(sketch_size=12), seed=12),
        "misra-gries pure": rel(int_items, None, "item", 1.0, 0,
                                mechanism=sd.MisraGries(sketch_size=6, release="pure",
                                                        universe_size=16), seed=13),
    }


def _compact_query(res: Any) -> Any:
    return None if res.query is None else plain(res.query(("p", 7)))


# ------------------------------------------------------------------------------------------- other query kinds


def vectors_golden() -> dict:
    import sparsedp as sd
    from sparsedp.noise import InsecureSeededRandom as R

    df = vector_data()
    cols = [f"c{j}" for j in range(4)]
    long = df.unpivot(index="user", on=cols, variable_name="coord", value_name="v")

    def vs(r) -> dict:
        g = r.guarantee
        return {"coordinates": list(r.coordinates), "estimate": plain(r.estimate), "noise_std": plain(r.noise_std),
                "expected_error": plain(r.expected_error), "spherical_error": plain(r.spherical_error),
                "p": plain(r.p), "sensitivity": plain(r.sensitivity), "guarantee": plain(g),
                "n_units": r.n_units, "text": str(g),
                "curator": {k: plain(getattr(r.curator, k)) for k in ("rows_in", "units_in", "rows_ignored",
                                                                       "values_clipped", "units_clipped",
                                                                       "rounding_bound")}}

    def vm(r) -> dict:
        return {"coordinates": list(r.coordinates), "estimate": plain(r.estimate), "noise_std": plain(r.noise_std),
                "expected_error": plain(r.expected_error), "p": plain(r.p), "guarantee": plain(r.guarantee),
                "n_units": r.n_units, "noisy_count": plain(r.noisy_count), "text": str(r.guarantee),
                "curator": {k: plain(getattr(r.curator, k)) for k in ("rows_in", "units_in", "rows_ignored",
                                                                       "values_clipped", "units_clipped",
                                                                       "rounding_bound")}}

    box = dict(lower=-1.0, upper=1.5)
    big = vector_data(n_units=4000, seed=4)  # PLAN's private medians need n well above their rank error
    big_long = big.unpivot(index="user", on=cols, variable_name="coord", value_name="v")
    return {
        "sum gaussian": vs(sd.vector_sum(df, "user", columns=cols, **box, epsilon=1.0, delta=1e-6, rng=R(1))),
        "sum gaussian long": vs(sd.vector_sum(long, "user", coordinate="coord", value="v", coordinates=cols,
                                              lower=[-1.0, -0.5, -1.0, 0.0], upper=[1.5, 1.0, 2.0, 1.0],
                                              epsilon=1.0, delta=1e-6, rng=R(2))),
        "sum max_norm": vs(sd.vector_sum(df, "user", columns=cols, max_norm=2.0, epsilon=1.0,
                                         delta=1e-6, rng=R(3))),
        "sum rho add-remove": vs(sd.vector_sum(df, "user", columns=cols, **box, rho=0.5, delta=1e-6,
                                               neighbours="add-remove",
                                               rng=R(4))),
        "sum p=1 spherical": vs(sd.vector_sum(df, "user", columns=cols, **box, p=1.0, shape="spherical",
                                                epsilon=1.0, delta=1e-6, rng=R(5))),
        "sum laplace": vs(sd.vector_sum(df, "user", columns=cols, **box, epsilon=1.0, delta=0.0,
                                        mechanism="laplace", rng=R(6))),
        "mean": vm(sd.vector_mean(big, "user", columns=cols, **box, epsilon=2.0, delta=1e-6, rng=R(7))),
        "mean long": vm(sd.vector_mean(big_long, "user", coordinate="coord", value="v", coordinates=cols, **box,
                                       epsilon=3.0, delta=1e-6, rng=R(8))),
        "mean given variances": vm(sd.vector_mean(big, "user", columns=cols, **box, epsilon=2.0, delta=1e-6,
                                                  variances=[0.5, 0.6, 0.7, 0.8], rng=R(9))),
    }


def _alp(a: Any, keys: list) -> dict:
    import hashlib

    return {"variant": a.variant, "epsilon": plain(a.epsilon), "epsilon_proj": plain(a.epsilon_proj),
            "alpha": plain(a.alpha), "psi": plain(a.psi), "u": plain(a.u), "m": int(a.m), "s": int(a.s),
            "p": plain(a.p), "params": plain(a.params), "guarantee": plain(a.guarantee), "signed": bool(a.signed),
            "value_scale": plain(a.value_scale), "size_in_bits": int(a.size_in_bits()),
            "bits_sha256": hashlib.sha256(np.ascontiguousarray(a.bit_matrix()).tobytes()).hexdigest(),
            "threshold_map": None if a.threshold_map is None else
            sorted([str(k), plain(v)] for k, v in a.threshold_map.items()),
            "queries": plain(a.query_many(keys))}


def alp_golden() -> dict:
    import sparsedp as sd
    from sparsedp.noise import InsecureSeededRandom as R
    from sparsedp.sketches import ALP

    df = log(n_rows=4000)
    keys = [f"page/{i:04d}" for i in range(119)] + ["café ☕", "absent", "page/9999"]
    signed = pl.DataFrame({"u": np.arange(1000), "key": np.repeat(np.arange(40), 25),
                           "v": np.where(np.repeat(np.arange(40), 25) % 2 == 0, 3.0, -3.0)})
    g = np.random.default_rng(4)
    counts = {f"k{i}": int(c) for i, c in enumerate(g.integers(0, 60, 300))}
    return {
        "alp pure u=": _alp(sd.alp(df, "uid", "url", 1.0, 0, u=40, rng=R(1)), keys),
        "alp threshold": _alp(sd.alp(df, "uid", "url", 1.0, 1e-6, rng=R(2)), keys),
        "alp l0=2 alpha": _alp(sd.alp(df, "uid", "url", 2.0, 1e-6, max_groups_per_unit=2, alpha=4.0, rng=R(3)),
                               keys),
        "alp signed sum": _alp(sd.alp(signed, "u", "key", 2.0, 0, value=sd.Sum("v", -4, 4), u=200, k=80,
                                      rng=R(4)), list(range(45))),
        "ALP.build pure": _alp(ALP.build(counts, epsilon=1.0, k=300, u=60, rng=R(5)), list(counts) + ["zz"]),
        "ALP.build threshold": _alp(ALP.build(counts, epsilon=1.0, k=300, delta=1e-6, rng=R(6)),
                                    list(counts) + ["zz"]),
    }


def _mg_release(r: Any) -> dict:
    return {"keys": plain(list(r.keys)), "counts": plain(r.counts), "calibration": plain(r.calibration),
            "n_keys_in": plain(r.n_keys_in), "n_keys_out": plain(r.n_keys_out), "extra": plain(r.extra)}


def sketches_golden() -> dict:
    from sparsedp.noise import InsecureSeededRandom as R
    from sparsedp.mechanisms.mg_stream import csh_misra_gries, misra_gries_release
    from sparsedp.sketches import MisraGries
    from sparsedp.sketches import private_mg as pmg

    items = (np.random.default_rng(2).zipf(1.4, 5000) % 200).tolist()
    sk = MisraGries(16)
    sk.update(items)
    out = {"sketch": {"n": sk.n, "gamma": sk.gamma, "counters": sorted([plain(k), plain(v)] for k, v in
                                                                       sk.counters(include_zero=True).items())}}
    out["pmg"] = _mg_release(pmg.private_misra_gries(sk, epsilon=1.0, delta=1e-6, rng=R(1)))
    out["pmg pure"] = _mg_release(pmg.pure_private_misra_gries(sk, epsilon=1.0, universe=range(200), rng=R(2)))
    out["pmg merged"] = _mg_release(pmg.merged_private_misra_gries(sk, epsilon=1.0, delta=1e-6, rng=R(3)))
    out["pmg csh"] = _mg_release(csh_misra_gries(sk, epsilon=1.0, delta=1e-6, rng=R(4)))
    out["misra_gries_release chunks"] = _mg_release(misra_gries_release(
        iter([np.array(items[:2000]), np.array(items[2000:])]), sketch_size=16, epsilon=1.0, delta=1e-6, rng=R(5)))
    return out


def histogram_golden() -> dict:
    """The function-level ``release_histogram`` (``mechanisms/release.py``) on a fixed histogram."""
    from sparsedp.core.histogram import SparseHistogram
    from sparsedp.mechanisms.release import release_histogram
    from sparsedp.noise import InsecureSeededRandom as R

    g = np.random.default_rng(7)
    counts = {f"key{i}": int(c) for i, c in enumerate((g.pareto(0.8, 400) * 5).astype(int) + 1)}
    h = SparseHistogram.from_mapping(counts)
    out = {}
    for name, kw in {"gshm l0=3": dict(l0=3, mechanism="gshm"), "laplace l0=1": dict(l0=1, mechanism="laplace"),
                     "auto l0=2": dict(l0=2), "topk k=10": dict(top_k=10)}.items():
        r = release_histogram(h, epsilon=1.0, delta=1e-6, rng=R(sum(map(ord, name))), **kw)
        out[name] = {f.name: plain(getattr(r, f.name)) for f in dataclasses.fields(r)} \
            if dataclasses.is_dataclass(r) else plain(r)
    return out


def cli_golden(tmp: Path) -> dict:
    """``sparsedp release … --out`` with the process's secure source replaced by a seeded one: the written
    table and its metadata."""
    import pyarrow.parquet as pq
    from typer.testing import CliRunner

    import sparsedp.noise.source as src
    from sparsedp.cli import app
    from sparsedp.noise import InsecureSeededRandom as R

    data = tmp / "log.parquet"
    log(n_rows=4000).write_parquet(data)
    runs = {
        "gshm l0=3": ["--by", "url", "--epsilon", "1", "--delta", "1e-6", "--max-groups", "3", "--mechanism", "gshm"],
        "top-k sums csv": ["--by", "url,lang", "--epsilon", "1", "--delta", "1e-6", "--top-k", "8",
                           "--sum", "dwell:0:600"],
    }
    out: dict[str, Any] = {}
    saved = src._DEFAULT
    try:
        for i, (name, args) in enumerate(runs.items()):
            ext = ".csv" if "csv" in name else ".parquet"
            path = tmp / f"out{i}{ext}"
            src._DEFAULT = R(100 + i)
            res = CliRunner().invoke(app, ["release", str(data), "--unit", "uid", *args, "--out", str(path)])
            if res.exit_code != 0:
                raise RuntimeError(f"CLI {name}: {res.output}")
            if ext == ".parquet":
                tbl = pl.read_parquet(path)
                meta = {k.decode(): v.decode() for k, v in (pq.read_schema(path).metadata or {}).items()
                        if not k.decode().startswith(("ARROW", "pandas"))}
            else:
                tbl = pl.read_csv(path)
                side = sorted(p.name for p in tmp.iterdir() if p.name.startswith(path.name) and p != path)
                meta = {n: (tmp / n).read_text() for n in side}
            out[name] = {"table": frame(tbl), "metadata": meta}
    finally:
        src._DEFAULT = saved
    return out


# ------------------------------------------------------------------------------------------- engines

EMBEDDED = ("polars", "polars-parquet", "duckdb", "duckdb-passes", "pandas", "arrow")


def engine_input(engine: str, df: pl.DataFrame, parquet: str) -> tuple[Any, Any]:
    """``(data, engine argument)`` for one of :data:`EMBEDDED` (or ``"spark"`` with a Spark frame as ``df``)."""
    if engine == "polars":
        return df, "polars"
    if engine == "polars-parquet":
        return parquet, "polars"
    if engine == "duckdb":
        return df, "duckdb"
    if engine == "duckdb-passes":
        from sparsedp.engines.duckdb_engine import DuckDBEngine

        return df, DuckDBEngine(passes=2)
    if engine == "pandas":
        return df.to_pandas(), "pandas"
    if engine == "arrow":
        return df.to_arrow(), "arrow"
    if engine == "spark":
        return df, "spark"
    raise ValueError(engine)


def log_release(name: str, data: Any, engine: Any) -> dict:
    import warnings

    import sparsedp as sd
    from sparsedp.noise import InsecureSeededRandom

    kw = {**LOG_KW, **_log_cases()[name]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            res = sd.release(data, **kw, engine=engine, rng=InsecureSeededRandom(sum(map(ord, name))))
        except Exception as e:  # an engine that refuses a request: that it refuses is golden (not the wording)
            return {"refused": True, "error": type(e).__name__, "message": str(e)}
    return released(res)


def other_release(name: str) -> dict:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = _other_cases()[name]()
    out = released(res)
    if name == "compact":
        out["query"] = _compact_query(res)
    return out


def versions() -> dict:
    import duckdb
    import pyarrow

    return {"polars": pl.__version__, "duckdb": duckdb.__version__, "pyarrow": pyarrow.__version__,
            "numpy": np.__version__}


def _src_unchanged() -> bool:
    """True when ``src/`` is the code of :data:`COMMIT` (the goldens must be captured from it)."""
    return subprocess.run(["git", "diff", "--quiet", COMMIT, "--", "src"], cwd=HERE).returncode == 0


def write_embedded(tmp: Path) -> None:
    df = log()
    parquet = str(tmp / "log.parquet")
    df.write_parquet(parquet)
    releases = {e: {n: log_release(n, *engine_input(e, df, parquet)) for n in _log_cases()} for e in EMBEDDED}
    out = {"captured_at": COMMIT, "versions": versions(), "releases": releases,
           "other_releases": {n: other_release(n) for n in _other_cases()},
           "vectors": vectors_golden(), "alp": alp_golden(), "sketches": sketches_golden(),
           "release_histogram": histogram_golden(), "cli": cli_golden(tmp)}
    RELEASE_FILE.write_text(json.dumps(out, indent=0, ensure_ascii=False) + "\n")
    PLAN_FILE.write_text(json.dumps({"captured_at": COMMIT, "cases": {n: {"args": kw, "slow": slow, "golden": plan_golden(kw)}
                                                                       for n, (kw, slow) in plan_cases().items()}},
                                    indent=0, ensure_ascii=False) + "\n")


def spark_session(tmp: Path) -> Any:
    from pyspark.sql import SparkSession

    s = (SparkSession.builder.master("local[2,2]").appName("sparsedp-golden")
         .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
         .config("spark.sql.shuffle.partitions", "4").config("spark.default.parallelism", "2")
         .config("spark.driver.memory", "1g").config("spark.sql.warehouse.dir", str(tmp / "wh")).getOrCreate())
    s.sparkContext.setLogLevel("FATAL")
    return s


SPARK_SCHEMA = "uid long, url string, lang string, dwell double, clicks long, likes long"


def spark_frame(spark: Any, df: pl.DataFrame) -> Any:
    return spark.createDataFrame(df.to_arrow(), schema=SPARK_SCHEMA)  # from Arrow: rows pickled one by one are slow


def spark_releases(spark: Any) -> dict:
    sdf = spark_frame(spark, log())
    return {n: log_release(n, sdf, "spark") for n in _log_cases()}


if __name__ == "__main__":
    import tempfile

    if not _src_unchanged():
        sys.exit(f"the goldens are named for {COMMIT}: capture them from its src/ (git diff {COMMIT} -- src)")
    with tempfile.TemporaryDirectory() as d:
        write_embedded(Path(d))
        print(f"wrote {PLAN_FILE.name}, {RELEASE_FILE.name}")
        if "--spark" in sys.argv:
            spark = spark_session(Path(d))
            try:
                SPARK_FILE.write_text(json.dumps({"captured_at": COMMIT, "versions": versions(),
                                                  "releases": spark_releases(spark)},
                                                 indent=0, ensure_ascii=False) + "\n")
            finally:
                spark.stop()
            print(f"wrote {SPARK_FILE.name}")
