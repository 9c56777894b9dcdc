"""Query kinds (``docs/architecture.md``, "a query kind"): every release — histograms, vector sums and means, ALP —
runs the stages of :func:`sparsedp.query.run_query` in one order and returns a :class:`~sparsedp.report.Result`.

The worked example is a toy query kind written in this test module only: the number of distinct privacy units plus
two-sided geometric noise ``P[Z = z] ∝ e^{−ε|z|}``. Adding or removing one unit changes the count by 1, so it is
ε-DP for add/remove neighbours (Ghosh, Roughgarden & Sundararajan, "Universally utility-maximizing privacy
mechanisms", 2009, arXiv:0811.2841). It runs through ``run_query`` with a ledger without touching ``src/``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import polars as pl
import pytest
from scipy import stats

import sparsedp as sd
from sparsedp.accounting.calibration import Neighbours
from sparsedp.errors import BudgetExceededError, InputDataError
from sparsedp.ledger import Charge
from sparsedp.noise import InsecureSeededRandom, sample_discrete_laplace
from sparsedp.query import QueryKind, run_query
from sparsedp.report import Result


@dataclass(frozen=True)
class UnitCountPlan:
    epsilon: float
    charge: Charge


class UnitCount(QueryKind):
    """The toy query kind (module docstring); ``log`` records the stages in the order they ran."""

    what = "unit count"

    def __init__(self, data: pl.DataFrame, unit: str, epsilon: float, rng: Any) -> None:
        self.data, self.unit, self.epsilon, self.rng = data, unit, epsilon, rng
        self.log: list[str] = []

    def plan(self) -> UnitCountPlan:
        self.log.append("plan")
        return UnitCountPlan(self.epsilon, Charge(epsilon=self.epsilon, delta=0.0, neighbours=Neighbours.ADD_REMOVE,
                                                  mechanism="toy-unit-count"))

    def pre_check(self, ledger: Any, planned: UnitCountPlan) -> None:
        self.log.append("pre_check")
        super().pre_check(ledger, planned)

    def read(self, planned: UnitCountPlan) -> int:
        self.log.append("read")
        if self.unit not in self.data.columns:
            raise InputDataError(f"column {self.unit!r} not in the data")
        return int(self.data[self.unit].n_unique())

    def draw(self, planned: UnitCountPlan, read: int) -> int:
        self.log.append("draw")
        return read + int(sample_discrete_laplace(Fraction(1) / Fraction(planned.epsilon), 1, rng=self.rng)[0])

    def publish(self, planned: UnitCountPlan, drawn: int, ledger: Any) -> Result:
        self.log.append("publish")
        ledger.published(None)
        return Result(table=pl.DataFrame({"units": [drawn]}), report=f"({planned.epsilon:g}, 0)-DP unit count",
                      curator={"units": int(self.data[self.unit].n_unique())})

    def close(self) -> None:
        self.log.append("close")


def _frame(n: int = 50) -> pl.DataFrame:
    return pl.DataFrame({"u": np.repeat(np.arange(n), 2), "k": ["a", "b"] * n})


def test_toy_query_kind_runs_the_stages_in_order_and_charges_once(tmp_path):
    with sd.Ledger(tmp_path / "l.db") as led:
        led.set_budget("d", epsilon=1.0, delta=1e-6)
        q = UnitCount(_frame(), "u", 0.5, InsecureSeededRandom(1))
        res = run_query(q, led, "d")
        assert q.log == ["plan", "pre_check", "read", "draw", "publish", "close"]
        (c,) = led.history("d")
        assert (c.epsilon, c.mechanism, c.status) == (0.5, "toy-unit-count", "published")
        assert c.note.startswith("unit count")
        assert isinstance(res, Result) and res.table["units"].to_list() != []
        # over budget: refused at the pre-check, the data are never read, nothing drawn or charged
        q = UnitCount(_frame(), "u", 0.6, InsecureSeededRandom(2))
        with pytest.raises(BudgetExceededError):
            run_query(q, led, "d")
        assert q.log == ["plan", "pre_check", "close"] and len(led.history("d")) == 1
        # bad input: refused by the read, before the charge and any noise
        q = UnitCount(_frame(), "user", 0.25, InsecureSeededRandom(3))
        with pytest.raises(InputDataError):
            run_query(q, led, "d")
        assert q.log == ["plan", "pre_check", "read", "close"] and len(led.history("d")) == 1


def test_toy_query_kind_noise_is_two_sided_geometric():
    """The released count minus the true count follows P[Z = z] = (1 − q)/(1 + q) q^|z|, q = e^{−ε}."""
    eps, n_rel = 0.7, 3000
    rng = InsecureSeededRandom(11)
    data = _frame(40)
    z = np.array([run_query(UnitCount(data, "u", eps, rng), None, None).table["units"][0] - 40
                  for _ in range(n_rel)])
    q = math.exp(-eps)
    cells = np.arange(-4, 5)
    pmf = (1 - q) / (1 + q) * q ** np.abs(cells)
    tail = (1 - pmf.sum()) / 2
    observed = [int(np.sum(z < -4))] + [int(np.sum(z == c)) for c in cells] + [int(np.sum(z > 4))]
    expected = n_rel * np.concatenate([[tail], pmf, [tail]])
    assert stats.chisquare(observed, expected).pvalue > 1e-4


def _vectors() -> pl.DataFrame:
    g = np.random.default_rng(5)
    return pl.DataFrame({"user": np.arange(300), **{f"c{j}": g.uniform(0, 1, 300) for j in range(3)}})


def test_vector_results_are_results_with_table_report_curator(tmp_path):
    df = _vectors()
    with sd.Ledger(tmp_path / "l.db") as led:
        led.set_budget("d", epsilon=5.0, delta=1e-5, neighbours=Neighbours.REPLACE_ONE)
        s = sd.vector_sum(df, "user", columns=["c0", "c1", "c2"], lower=0.0, upper=1.0, epsilon=1.0, delta=1e-6,
                          ledger=led, dataset="d", rng=InsecureSeededRandom(1))
        assert isinstance(s, Result) and s.report is s.guarantee
        assert s.table["estimate"].to_list() == list(s.estimate) and s.table.equals(s.to_frame())
        assert s.curator.units_in == 300 and "vector sum (3 coordinates)" in led.history("d")[0].note
        assert s.report.metadata()["neighbours"] == Neighbours.REPLACE_ONE.value


def test_alp_runs_the_pipeline(tmp_path):
    df = pl.DataFrame({"u": np.arange(400), "k": [f"k{i % 13}" for i in range(400)]})
    with sd.Ledger(tmp_path / "l.db") as led:
        led.set_budget("d", epsilon=1.5, delta=1e-5)
        a = sd.alp(df, "u", "k", 1.0, 1e-6, ledger=led, dataset="d", rng=InsecureSeededRandom(2))
        (c,) = led.history("d")
        assert (c.epsilon, c.mechanism, c.status) == (1.0, "alp", "published") and c.note.startswith("alp")
        assert a.guarantee["epsilon"] == 1.0 and a.guarantee["variant"] == "threshold"
        # over budget: refused before the data are read (a missing unit column would fail the read)
        with pytest.raises(BudgetExceededError):
            sd.alp(df.rename({"u": "v"}), "u", "k", 1.0, 1e-6, ledger=led, dataset="d")
        assert len(led.history("d")) == 1
