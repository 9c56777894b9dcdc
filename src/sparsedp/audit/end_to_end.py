"""End-to-end audit of ``sparsedp.release`` on an embedded engine: bounding, de-duplication, fresh noise, noisy output.

The per-mechanism audit (:mod:`.runner`) starts from a bounded histogram; this one starts from rows and runs the
whole pipeline (:func:`sparsedp.release`: validation, the engine's de-duplication and random ℓ0 bounding, the
ledger-free release, the Result table) ``runs`` times on one tiny dataset:

* ``L`` keys, each with ``base`` distinct light units (one key each, far above the threshold: always released);
* ``heavy`` heavy units, each with a row for every one of the ``L`` keys, every row written twice.

After de-duplication and bounding each heavy unit keeps exactly ``l0`` keys (top-k CSH: all of them; its model
bounds nothing but one contribution per key), so the bounded counts sum to ``C = L·base + heavy·min(l0, L)``
whatever keys the secure bounding chose, and the released total ``S`` of one release is ``C`` plus the sum of
the released noise. Under the calibrated mechanism ``E[S] = C`` exactly (the noise laws are symmetric; de-biased
top-k adds ``L·t̃`` with ``t = 0``, also symmetric) and, for GSHM / Laplace, ``Var[S] = L·v`` with ``v`` the
exact variance of one key's noise. Three tests, each at level (1 − confidence)/3:

1. mean: ``(mean(S) − C)/√(Var/n)`` (GSHM / Laplace: the exact variance; top-k: the sample variance, a t-test) —
   catches a bounding that keeps more than ``l0`` keys, a missing de-duplication, biased noise;
2. variance (GSHM / Laplace): ``(n − 1)s²/(L·v) ~ χ²(n − 1)``, two-sided — catches exact counts in the Result
   (variance 0), a wrong noise scale; top-k CSH and Misra–Gries: a total constant over the releases (exact
   counts or the non-private sketch) is refuted;
3. independence: the lag-1 correlation of successive releases' ``S``, ``|r|·√n`` against the normal quantile —
   catches noise reused across releases.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from scipy import stats

from .. import _validate as v
from ..accounting import calibrate
from ..accounting.discrete import dgauss_variance, dlaplace_variance
from ..mechanisms.misra_gries import MGRelease, MisraGries
from ..mechanisms.thresholded import GSHM, Laplace, TopKCSH
from ..noise import default_source
from ..pipeline import release

__all__ = ["EndToEndAudit", "audit_release", "audit_dataset", "ENGINES"]

ENGINES = ("polars", "duckdb", "pandas", "arrow")


@dataclass(frozen=True)
class EndToEndAudit:
    """Outcome of :func:`audit_release`: the released totals and the three p-values."""

    engine: str
    mechanism: str
    runs: int
    expected_total: int
    totals: tuple[float, ...]
    p_mean: float
    p_variance: float | None
    p_independence: float
    level: float

    @property
    def contradicts(self) -> bool:
        ps = [self.p_mean, self.p_independence] + ([self.p_variance] if self.p_variance is not None else [])
        return min(ps) < self.level

    def __str__(self) -> str:
        pv = "n/a" if self.p_variance is None else f"{self.p_variance:.3g}"
        return (f"sparsedp end-to-end audit: {self.mechanism} on {self.engine}, {self.runs} releases; total "
                f"mean {np.mean(self.totals):.4g} (exact {self.expected_total}); p-values mean {self.p_mean:.3g}, "
                f"variance {pv}, independence {self.p_independence:.3g} (refute below {self.level:.3g}): "
                + ("CONTRADICTION" if self.contradicts else "no contradiction"))


def audit_dataset(keys: int, base: int, heavy: int):
    """The rows of the module docstring as a pyarrow Table (columns ``uid``, ``key``)."""
    uid, key = [], []
    nxt = 0
    for k in range(keys):
        for _ in range(base):
            uid.append(nxt)
            key.append(k)
            nxt += 1
    for h in range(heavy):
        for _rep in range(2):  # every row twice: de-duplication must count it once
            for k in range(keys):
                uid.append(1_000_000 + h)
                key.append(k)
    return pa.table({"uid": pa.array(uid, pa.int64()), "key": pa.array(key, pa.int64())})


def _as_engine_input(table, engine: str):
    if engine == "pandas":
        return table.to_pandas()
    if engine == "polars":
        import polars as pl

        return pl.from_arrow(table)
    if engine == "duckdb":
        import duckdb

        con = duckdb.connect()
        return con.from_arrow(table)
    return table


def _total(tab) -> float:
    """Sum of the released value column of a Result table (Arrow, pandas, Polars or DuckDB)."""
    if not isinstance(tab, pa.Table):
        if hasattr(tab, "to_arrow"):
            tab = tab.to_arrow()
        elif hasattr(tab, "arrow"):
            tab = tab.arrow()
        else:
            tab = pa.Table.from_pandas(tab, preserve_index=False)
    col = [c for c in tab.column_names if c != "key"][0]
    return float(np.sum(tab.column(col).to_numpy()))


#: per-mechanism ε of the audit dataset: noise of std ~1 per key (GSHM's discrete σ² is floored at 1; the
#: discrete Laplace scale is l0/ε)
DEFAULT_EPSILON = {GSHM.name: 16.0, Laplace.name: 2.0, TopKCSH.name: 8.0, "misra-gries": 2.0}


def audit_release(engine: str, mechanism: str = GSHM.name, *, epsilon: float | None = None, delta: float = 1e-3, l0: int = 2,
                  keys: int = 4, base: int = 40, heavy: int = 20, runs: int = 20, confidence: float = 0.99,
                  rng=None) -> EndToEndAudit:
    """Run :func:`sparsedp.release` ``runs`` times on :func:`audit_dataset` with ``engine`` and test the released
    totals (module docstring). ``mechanism``: "gshm", "laplace", "misra-gries" (bounded by ``l0``; the sketch has
    2·``keys`` counters, so its counters are exact before noise) or "topk-csh" (top_k = ``keys``). ``rng``: a :mod:`sparsedp.noise` source shared by the releases (``None``: the secure default)."""
    eng = v.choice("engine", engine, ENGINES)
    mech = v.choice("mechanism", mechanism, (GSHM.name, Laplace.name, TopKCSH.name, "misra-gries"))
    n = v.integer("runs", runs, lo=5)
    conf = v.real("confidence", confidence, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
    if epsilon is None:
        epsilon = DEFAULT_EPSILON[mech]
    if rng is None:
        rng = default_source()
    table = audit_dataset(keys, base, heavy)
    topk = mech == TopKCSH.name
    t_test = mech in (TopKCSH.name, "misra-gries")  # no closed-form variance of the total: a t-test
    kept = keys if topk else min(l0, keys)
    expected = keys * base + heavy * kept
    totals = []
    data = _as_engine_input(table, eng)
    if topk:
        kw = {"top_k": keys}
    elif mech == "misra-gries":
        # exact counters; the PMG release (Algorithm 13: independent discrete Laplace per counter, whose total
        # has the t-test's law). The default CSH release of the sketch is CSH's audit (targets "csh", "topk-csh").
        kw = {"max_groups_per_unit": l0, "mechanism": MisraGries(sketch_size=2 * keys, release=MGRelease.PMG)}
    else:
        kw = {"max_groups_per_unit": l0, "mechanism": mech}
    for _ in range(n):
        result = release(data, "uid", "key", epsilon=epsilon, delta=delta, engine=eng,
                         rng=rng, **kw)
        totals.append(_total(result.table))
    s = np.asarray(totals)
    level = (1.0 - conf) / 3.0
    p_var = None
    if t_test:
        sd = float(np.std(s, ddof=1))
        t = (s.mean() - expected) / (sd / math.sqrt(n)) if sd > 0 else (0.0 if s.mean() == expected else math.inf)
        p_mean = float(2 * stats.t.sf(abs(t), n - 1))
        if sd == 0:  # constant totals: exact counts, not a noisy release
            p_var = 0.0
    else:
        c = calibrate(mech, epsilon=epsilon, delta=delta, l0=l0)
        per = dgauss_variance(c.noise.sigma2) if mech == GSHM.name else dlaplace_variance(c.noise.scale)
        var = keys * float(per)
        z = (s.mean() - expected) / math.sqrt(var / n)
        p_mean = float(2 * stats.norm.sf(abs(z)))
        q = (n - 1) * float(np.var(s, ddof=1)) / var
        p_var = float(2 * min(stats.chi2.cdf(q, n - 1), stats.chi2.sf(q, n - 1)))
    d = s - s.mean()
    den = float(np.sum(d * d))
    r = float(np.sum(d[1:] * d[:-1]) / den) if den > 0 else 1.0
    p_ind = float(2 * stats.norm.sf(abs(r) * math.sqrt(n)))
    return EndToEndAudit(engine=eng, mechanism=mech, runs=n, expected_total=int(expected),
                         totals=tuple(totals), p_mean=p_mean, p_variance=p_var, p_independence=p_ind, level=level)
