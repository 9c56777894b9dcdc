"""Worked examples of ``docs/architecture.md``: a new mechanism and a new embedded engine, written in this test
module only (nothing in ``src/`` names them), run through ``sd.release``, ``sd.plan``, the CLI and the audit.

**The toy mechanism** is the discrete-Laplace stability histogram written from scratch as a plug-in: each unit
keeps at most l0 keys (the engine enforces it), every kept key's count gets iid discrete Laplace noise
``P[Z = z] ∝ t^|z|``, ``t = exp(−ε/l0)``, and a key is released iff ``count >= pre`` and
``count + Z >= pre + τ``. Its accountant (:func:`toy_calibrate`): adding or removing one unit changes at most
l0 counts by 1 each, so on the keys of both neighbours the noisy counts are ε-DP (ℓ1 sensitivity l0, scale
l0/ε); the at most l0 keys whose count crosses the pre-threshold are released with probability
``P[Z >= τ] = t^τ/(1 + t)`` each, so the release is (ε, δ)-DP with ``δ = l0·t^τ/(1 + t)`` (Korolova, Kenthapadi,
Mishra & Ntoulas, "Releasing search queries and clicks privately", 2009; Wilson, Zhang, Lam, Desfontaines,
Simmons-Marengo & Gipson, "Differentially private SQL with bounded user contribution", 2020, arXiv:1909.01917).

**The toy engine** counts in pure Python (a ``Counter`` of distinct (unit, key) pairs) and hands the counts to
the shared ℓ0 choice of :class:`~sparsedp.engines.base.EmbeddedEngine`: with the same seeded source it must
release exactly the table the Polars engine releases.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pytest
from typer.testing import CliRunner

import sparsedp as sd
from sparsedp import engines
from sparsedp.accounting.calibration import Neighbours
from sparsedp.cli import app
from sparsedp.engines.base import EmbeddedEngine, RawCounts
from sparsedp.engines.bounding import COUNT
from sparsedp.errors import InfeasibleError, InputDataError, InvalidParameterError
from sparsedp.mechanisms import registry
from sparsedp.mechanisms.base import Disclosure, Mechanism, Released, ReleaseRequest
from sparsedp.noise import InsecureSeededRandom, sample_discrete_laplace

# ------------------------------------------------------------------ the toy mechanism: accountant + class


@dataclass(frozen=True)
class ToyCalibration:
    """The toy accountant's answer: the noise scale ``l0/ε`` (exact rational), the integer margin τ and the δ of
    that margin, ``l0·t^τ/(1 + t)`` (module docstring)."""

    epsilon: float
    delta: float
    l0: int
    scale: Fraction
    tau: int
    delta_achieved: float
    analysis: str = "toy-discrete-laplace"

    @property
    def sigma(self) -> float:
        return float(self.scale)

    @property
    def noise_std(self) -> float:
        t = math.exp(-1 / float(self.scale))
        return math.sqrt(2 * t) / (1 - t)  # the discrete Laplace's standard deviation


def tail(scale: Fraction, m: int) -> float:
    """P[Z >= m] for m >= 1 of the discrete Laplace of ``scale``: t^m / (1 + t), t = exp(−1/scale)."""
    t = math.exp(-1 / float(scale))
    return t ** m / (1 + t)


def toy_calibrate(epsilon: float, delta: float, l0: int) -> ToyCalibration:
    """The smallest integer τ >= 1 with ``l0·P[Z >= τ] <= δ`` at scale ``l0/ε``."""
    scale = Fraction(l0) / Fraction(epsilon)
    t = math.exp(-1 / float(scale))
    tau = max(1, math.ceil(math.log(delta * (1 + t) / l0) / math.log(t)))
    while l0 * tail(scale, tau) > delta:
        tau += 1
    if tau > 10**6:
        raise InfeasibleError("toy: no margin below 10^6 meets delta")
    return ToyCalibration(epsilon=epsilon, delta=delta, l0=l0, scale=scale, tau=tau,
                          delta_achieved=l0 * tail(scale, tau))


@dataclass(frozen=True)
class ToyLaplace(Mechanism):
    """The toy stability histogram (module docstring). Option: ``pre_threshold``."""

    pre_threshold: int = 1
    name = "toy-laplace"
    bounded = True  # takes max_groups_per_unit; top_k is refused as a second bound

    def count_floor(self) -> int:
        return self.pre_threshold

    @classmethod
    def plan_rows(cls, query: Any) -> list[tuple[Mechanism, Any, int]]:
        if query.d is not None or query.l0 is None or query.delta == 0:
            return []
        return [(cls(), cls().calibrate(query.request()), 0)]

    def calibrate(self, request: ReleaseRequest) -> ToyCalibration:
        return toy_calibrate(request.epsilon, request.delta, request.max_groups_per_unit)

    def disclosure(self, request: ReleaseRequest, calibration: Any, value_column: str) -> Disclosure:
        c = calibration
        return Disclosure(mechanism=self.name, analysis=c.analysis, epsilon=c.epsilon, delta=c.delta,
                          delta_achieved=c.delta_achieved, neighbours=Neighbours.ADD_REMOVE,
                          contribution=f"at most {c.l0} keys per unit, 1 per key", value_column=value_column,
                          sigma=c.sigma, noise_std=c.noise_std, threshold=float(self.pre_threshold + c.tau),
                          margin=float(c.tau), pre_threshold=self.pre_threshold)

    def run(self, engine, hist, calibration, disclosure, rng, request) -> Released:
        h = engine.collect(hist)
        counts = np.asarray(h.counts, np.int64)
        noisy = counts + sample_discrete_laplace(calibration.scale, counts.size, rng)
        keep = (counts >= self.pre_threshold) & (noisy >= self.pre_threshold + calibration.tau)
        table = h.keys.filter(pa.array(keep)).append_column(disclosure.value_column, pa.array(noisy[keep]))
        return Released(rows=table, disclosure=disclosure, in_process=True)


# ------------------------------------------------------------------ the toy engine


class ToyEngine(EmbeddedEngine):
    """Distinct (unit, key) pairs and per-key unit counts in pure Python; the ℓ0 choice is the shared one."""

    name = "toy"

    def columns(self, data: Any) -> list[str]:
        return list(_frame(data).columns)

    def raw_counts(self, data: Any, privacy_unit: str, by: list[str], l0: int | None) -> RawCounts:
        frame = _frame(data).select([privacy_unit, *by])
        if frame.height == 0:
            raise InputDataError("the input has no rows")
        if any(frame[c].null_count() for c in frame.columns):
            raise InputDataError("the unit or key columns contain nulls")
        rows = frame.rows()
        pairs = set(rows)
        degree = Counter(r[0] for r in pairs)
        per_key = Counter(r[1:] for r in pairs)
        keys = sorted(per_key)
        key_counts = pa.table({**{c: [k[i] for k in keys] for i, c in enumerate(by)},
                               COUNT: pa.array([per_key[k] for k in keys], pa.int64())})
        heavy = None
        if l0 is not None:
            hp = [p for p in pairs if degree[p[0]] > l0]
            heavy = pa.table({c: [p[i] for p in hp] for i, c in enumerate([privacy_unit, *by])},
                             schema=pa.schema([(c, frame.to_arrow().schema.field(c).type)
                                               for c in [privacy_unit, *by]]))
        return RawCounts(rows_in=len(rows), units_in=len(degree), pairs_in=len(pairs),
                         units_over_l0=sum(d > l0 for d in degree.values()) if l0 is not None else 0,
                         key_counts=key_counts, heavy_pairs=heavy)


def _frame(data: Any) -> pl.DataFrame:
    return data if isinstance(data, pl.DataFrame) else pl.read_parquet(data)


# ------------------------------------------------------------------ fixtures


@pytest.fixture
def toys():
    """Register the toy mechanism and engine for one test, and remove them after it."""
    registry.register(ToyLaplace)
    engines.register("toy", ToyEngine, {"polars", "file"})
    try:
        yield
    finally:
        registry.unregister(ToyLaplace.name)
        engines.unregister("toy")


@pytest.fixture
def data() -> pl.DataFrame:
    g = np.random.default_rng(5)
    n = 6000
    heavy = g.integers(0, 5, n)  # a few popular keys, a long tail
    url = np.where(g.random(n) < 0.7, heavy, g.integers(5, 400, n))
    return pl.DataFrame({"user": g.integers(0, 1500, n), "url": [f"u{x}" for x in url]})


# ------------------------------------------------------------------ the mechanism through every entry point


def test_toy_accountant_margin_is_the_smallest_meeting_delta():
    for eps, dlt, l0 in ((1.0, 1e-6, 1), (0.5, 1e-5, 4), (2.0, 1e-9, 10)):
        c = toy_calibrate(eps, dlt, l0)
        assert c.delta_achieved <= dlt < l0 * tail(c.scale, c.tau - 1)


def test_toy_release_probability_matches_the_accountant():
    """The real run path on 200 000 keys at count 1 and at count τ: released fractions against the exact
    P[Z >= τ] and P[Z >= 0] = 1/(1 + t) + (t/(1 + t))·0 … (two-sided binomial z-test at 5 sigma, fixed seed)."""
    from sparsedp.audit.targets import _engine, _histogram

    mech = ToyLaplace()
    req = ReleaseRequest(epsilon=1.0, delta=0.05, max_groups_per_unit=1)
    cal = mech.calibrate(req)
    n = 200_000
    for count, p in ((1, tail(cal.scale, cal.tau)), (cal.tau + 1, 1 - tail(cal.scale, 1))):
        hist = _histogram(np.full(n, count, np.int64), np.arange(n, dtype=np.int64))
        released = mech.run(_engine(), hist, cal, mech.disclosure(req, cal, "count"), InsecureSeededRandom(7), req)
        k = released.rows.num_rows
        assert abs(k - n * p) <= 5 * math.sqrt(n * p * (1 - p)), (count, k, n * p)


def test_toy_mechanism_release_plan_and_report(toys, data, rng):
    res = sd.release(data, "user", "url", epsilon=1.0, delta=1e-6, max_groups_per_unit=2,
                     mechanism="toy-laplace", rng=rng)
    cal = toy_calibrate(1.0, 1e-6, 2)
    assert res.report.mechanism == "toy-laplace" and res.report.margin == cal.tau
    assert res.report.released_keys == res.table.height > 0
    assert res.table["count"].min() >= 1 + cal.tau  # the release rule
    assert res.curator.bounding.l0 == 2
    # options are the class's fields
    res2 = sd.release(data, "user", "url", epsilon=1.0, delta=1e-6, max_groups_per_unit=2,
                      mechanism=ToyLaplace(pre_threshold=30), rng=InsecureSeededRandom(1))
    assert res2.report.options == {"pre_threshold": 30}
    # plan lists it next to the built-in count mechanisms, ranked by margin
    plan = sd.plan(1.0, 1e-6, max_groups_per_unit=2)
    names = [m.name for m in plan.mechanisms]
    assert "toy-laplace" in names and plan[names.index("toy-laplace")].tau == cal.tau
    taus = [c.tau for m, c in zip(plan.mechanisms, plan) if m.name != "weighted-gaussian"]
    assert taus == sorted(taus)
    # the capabilities it declares are enforced before any data is read
    with pytest.raises(InvalidParameterError, match="not both"):
        sd.release(data, "user", "url", 1.0, 1e-6, max_groups_per_unit=2, top_k=3, mechanism="toy-laplace")
    with pytest.raises(InvalidParameterError, match="releases counts only"):
        sd.release(data, "user", "url", 1.0, 1e-6, max_groups_per_unit=2, mechanism="toy-laplace",
                   aggregates=[sd.Count(), sd.Sum("v", 0, 1)])


def test_toy_mechanism_on_the_cli(toys, data, tmp_path):
    path = tmp_path / "d.parquet"
    data.write_parquet(path)
    out = tmp_path / "out.parquet"
    res = CliRunner().invoke(app, ["release", str(path), "--unit", "user", "--by", "url", "--epsilon", "1",
                                   "--delta", "1e-6", "--max-groups", "2", "--mechanism", "toy-laplace",
                                   "--option", "pre_threshold=3", "--out", str(out)])
    assert res.exit_code == 0, res.output
    table = pl.read_parquet(out)
    assert table.height > 0 and table["count"].min() >= 3 + toy_calibrate(1.0, 1e-6, 2).tau
    bad = CliRunner().invoke(app, ["release", str(path), "--unit", "user", "--by", "url", "--epsilon", "1",
                                   "--delta", "1e-6", "--max-groups", "2", "--mechanism", "toy-laplace",
                                   "--option", "grid=3"])
    assert bad.exit_code == 2 and "not an option of --mechanism toy-laplace" in bad.output


def test_toy_mechanism_passes_the_audit_and_a_broken_one_fails(toys):
    from sparsedp.audit import audit

    # 3000 runs per neighbour: a wrong refutation of the calibrated toy has probability <= 5 % at any number of
    # runs (the audit's simultaneous Clopper–Pearson bounds); the broken toy (margin 3: a new key released with
    # p = P[Z >= 3] = e^-3/(1 + e^-1) = 0.0364, never on D) is refuted iff the new-key event counts >= 23 of the
    # 1500 bounding runs, so it is missed with probability P[Bin(1500, 0.0364) <= 22] = 3.2e-7 (4.8e-12 at
    # 4000 runs, which took a third longer)
    res = audit("toy-laplace", epsilon=1.0, delta=1e-3, bound=1, runs=3000, rng=InsecureSeededRandom(3))
    assert not res.refutes_claim, res
    # the same class with a margin 4 below its accountant's: the audit must catch it
    broken = toy_calibrate(1.0, 1e-3, 1)

    @dataclass(frozen=True)
    class Broken(ToyLaplace):
        name = "toy-broken"

        def calibrate(self, request):
            import dataclasses

            return dataclasses.replace(broken, tau=broken.tau - 4)

    registry.register(Broken)
    try:
        res = audit("toy-broken", epsilon=1.0, delta=1e-3, bound=1, runs=3000, rng=InsecureSeededRandom(3))
        assert res.refutes_claim
    finally:
        registry.unregister("toy-broken")


# ------------------------------------------------------------------ the engine through every entry point


@pytest.mark.parametrize("mechanism", ["gshm", "laplace"])
def test_toy_engine_releases_what_polars_releases(toys, data, mechanism):
    kw = dict(epsilon=1.0, delta=1e-6, max_groups_per_unit=2, mechanism=mechanism)
    toy = sd.release(data, "user", "url", engine="toy", rng=InsecureSeededRandom(11), **kw)
    ref = sd.release(data, "user", "url", engine="polars", rng=InsecureSeededRandom(11), **kw)
    assert toy.curator.engine == "toy"
    assert toy.table.equals(ref.table) and toy.table.height > 0
    assert toy.curator.bounding == ref.curator.bounding


def test_toy_engine_with_the_toy_mechanism_and_the_cli(toys, data, tmp_path):
    a = sd.release(data, "user", "url", 1.0, 1e-6, max_groups_per_unit=2, mechanism="toy-laplace", engine="toy",
                   rng=InsecureSeededRandom(2))
    b = sd.release(data, "user", "url", 1.0, 1e-6, max_groups_per_unit=2, mechanism="toy-laplace",
                   engine="polars", rng=InsecureSeededRandom(2))
    assert a.table.equals(b.table)
    path = tmp_path / "d.parquet"
    data.write_parquet(path)
    res = CliRunner().invoke(app, ["release", str(path), "--unit", "user", "--by", "url", "--epsilon", "1",
                                   "--delta", "1e-6", "--max-groups", "2", "--engine", "toy"])
    assert res.exit_code == 0, res.output
    assert "engine: toy" in res.output or "toy" in res.output
    with pytest.raises(InputDataError):
        sd.release(data.with_columns(pl.lit(None).alias("url")), "user", "url", 1.0, 1e-6,
                   max_groups_per_unit=2, engine="toy")
