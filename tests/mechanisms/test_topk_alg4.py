"""Discrete top-k CSH (Algorithm 4 of Lebeda & Retschmeier 2024) as an option of ``sd.TopKCSH``: its law,
through ``sd.release`` on the seeded AES-CTR source (the secure code path, seeded), against its accountant.

Released value of a key of count ``c`` (top-k cut-off ``t = 0``: at most k keys): ``c + (Z_i + Z_c)/2`` with
``Z_i ~ N_Z(0, 4σ²)`` per key and one ``Z_c ~ N_Z(0, 4σ²/√k)`` per release, released iff it is ``> 1 + τ``; the
de-biased output adds ``t̃ − t = Z_t/2``, ``Z_t ~ N_Z(0, 4σ²/√k)``, released in the report's notes. The laws
(``cal.noise``) are read from the calibration and the expected figures computed from the exact pmfs of
:mod:`sparsedp.accounting.discrete`, independently of the samplers.
"""

from __future__ import annotations

import math
import re

import numpy as np
import polars as pl
import pytest
from scipy import stats

import sparsedp as sd
from sparsedp.accounting.discrete import dgauss_pmf, dgauss_sf, dgauss_variance
from sparsedp.accounting.laws import DiscreteCorrelatedGaussian
from sparsedp.errors import InvalidParameterError
from sparsedp.mechanisms.base import ReleaseRequest
from sparsedp.noise import InsecureSeededRandom

EPS, DELTA = 1.0, 1e-6


def _frame(counts: list[int]) -> pl.DataFrame:
    keys, units = [], []
    for i, c in enumerate(counts):
        keys += [i] * c
        units += [f"{i}-{u}" for u in range(c)]
    return pl.DataFrame({"key": keys, "u": units})


def _releases(frame, mech, runs: int, seed: int):
    rng = InsecureSeededRandom(seed)
    out = []
    for _ in range(runs):
        res = sd.release(frame, privacy_unit="u", by="key", epsilon=EPS, delta=DELTA, mechanism=mech, rng=rng,
                         engine="arrow")
        col = res.table.columns[1]
        out.append((dict(zip(res.table["key"].to_list(), res.table[col].to_list())), res))
    return out


def test_option_selects_algorithm_4_law_and_refuses_what_it_cannot_serve():
    m = sd.TopKCSH(k=8, noise="alg4")
    cal = m.calibrate(ReleaseRequest(epsilon=EPS, delta=DELTA))
    assert isinstance(cal.noise, DiscreteCorrelatedGaussian)
    assert float(cal.noise.sigma2) == pytest.approx(4 * cal.sigma ** 2, rel=1e-9)
    assert float(cal.noise.shared_sigma2) == pytest.approx(4 * cal.sigma ** 2 / math.sqrt(8), rel=1e-9)
    assert cal.delta_achieved <= DELTA
    rounded = sd.TopKCSH(k=8).calibrate(ReleaseRequest(epsilon=EPS, delta=DELTA))
    assert cal.tau > rounded.tau  # the zCDP account is looser than the rounded CSH's
    assert "noise='alg4'" in m.describe() and "noise" not in sd.TopKCSH(k=8).describe()
    with pytest.raises(InvalidParameterError, match="noise"):
        sd.TopKCSH(k=8, noise="alg5")
    with pytest.raises(InvalidParameterError, match="insecure_float"):
        m.calibrate(ReleaseRequest(epsilon=EPS, delta=DELTA, insecure_float=True))
    with pytest.raises(InvalidParameterError, match="alg4"):
        sd.release(_frame([3, 3]).with_columns(x=pl.lit(1.0)), privacy_unit="u", by="key", epsilon=EPS,
                   delta=DELTA, mechanism=m, aggregates=[sd.Count(), sd.Sum("x", 0, 1)])


def test_plan_lists_both_noises():
    p = sd.plan(EPS, DELTA, top_k=8)
    rows = [(m.describe(), c.analysis) for m, c in zip(p.mechanisms, p)]
    names = [r[0] for r in rows]
    assert "topk-csh(k=8, debias=True)" in names and "topk-csh(k=8, debias=True, noise='alg4')" in names
    assert "topk-csh(k=8, debias=False, noise='alg4')" in names
    assert dict(rows)["topk-csh(k=8, debias=False, noise='alg4')"].startswith("discrete-")


def test_alg4_noise_law_through_release():
    """k = 8 keys far above the threshold: every key is released every time; 2·(value − c) = Z_i + Z_c exactly
    (integers), the within-release spread has variance Var Z_i, the release mean Var Z_c + Var Z_i / k."""
    k, c, runs = 8, 400, 150
    mech = sd.TopKCSH(k=k, noise="alg4", debias=False)
    law = mech.calibrate(ReleaseRequest(epsilon=EPS, delta=DELTA)).noise
    got = _releases(_frame([c] * k), mech, runs, seed=41)
    x = np.array([[vals[i] for i in range(k)] for vals, _ in got]) * 2 - 2 * c
    assert np.all(x == np.round(x)), "Algorithm 4 releases values on the half-integer lattice"
    v_i, v_c = dgauss_variance(law.sigma2), dgauss_variance(law.shared_sigma2)
    within = float(x.var(axis=1, ddof=1).mean())
    assert within == pytest.approx(v_i, rel=5 * math.sqrt(2 / (runs * (k - 1))))
    means = x.mean(axis=1)
    assert float(means.var(ddof=1)) == pytest.approx(v_c + v_i / k, rel=5 * math.sqrt(2 / runs))
    assert abs(float(means.mean())) <= 5 * math.sqrt((v_c + v_i / k) / runs)


def test_alg4_debiased_cutoff_noise_through_release():
    """De-biased: the released t̃ (t = 0 here) is Z_t/2 with Z_t ~ N_Z(0, 4σ²/√k), and every value is
    c + (Z_i + Z_c + Z_t)/2."""
    k, c, runs = 4, 400, 150
    mech = sd.TopKCSH(k=k, noise="alg4")
    law = mech.calibrate(ReleaseRequest(epsilon=EPS, delta=DELTA)).noise
    got = _releases(_frame([c] * k), mech, runs, seed=43)
    tt = []
    for _, res in got:
        note = next(n for n in res.report.notes if "noisy cut-off" in n)
        tt.append(float(re.search(r"= (-?[\d.]+)", note).group(1)))
    zt = 2 * np.array(tt)
    assert np.all(zt == np.round(zt))
    assert float(zt.var(ddof=1)) == pytest.approx(dgauss_variance(law.shared_sigma2), rel=5 * math.sqrt(2 / runs))
    x = np.array([[vals[i] for i in range(k)] for vals, _ in got]) * 2 - 2 * c - zt[:, None]
    assert float(x.var(axis=1, ddof=1).mean()) == pytest.approx(dgauss_variance(law.sigma2),
                                                                rel=5 * math.sqrt(2 / (runs * (k - 1))))


def test_alg4_release_probability_through_release():
    """Two keys near the threshold (and two far above): the number of them released per release follows the
    exact law Σ_z P[Z_c = z]·Binomial(2, q(z)), q(z) = P[Z_i > 2(1 + τ) − 2c − z] (chi-square)."""
    k, runs = 4, 300
    mech = sd.TopKCSH(k=k, noise="alg4", debias=False)
    cal = mech.calibrate(ReleaseRequest(epsilon=EPS, delta=DELTA))
    law = cal.noise
    c_near = int(round(1 + cal.tau))
    w = int(40 * math.sqrt(float(law.shared_sigma2))) + 2
    zc = np.arange(-w, w + 1)
    pz = dgauss_pmf(zc, float(law.shared_sigma2))
    q = np.array([dgauss_sf(float(math.floor(2 * (1 + cal.tau) - 2 * c_near - z) + 1), float(law.sigma2))
                  for z in zc])
    expected = np.array([np.sum(pz * (1 - q) ** 2), np.sum(pz * 2 * q * (1 - q)), np.sum(pz * q * q)])
    assert 0.05 < expected[1] and abs(expected.sum() - 1) < 1e-9
    got = _releases(_frame([400, 400, c_near, c_near]), mech, runs, seed=47)
    n_rel = np.array([(2 in vals) + (3 in vals) for vals, _ in got])
    assert all(0 in vals and 1 in vals for vals, _ in got)
    observed = np.bincount(n_rel, minlength=3)
    p = stats.chisquare(observed, expected * runs).pvalue
    assert p > 1e-3, (observed, expected * runs)


def test_cli_flag(tmp_path):
    from typer.testing import CliRunner

    from sparsedp.cli import app

    path = tmp_path / "d.parquet"
    _frame([300, 300, 2]).write_parquet(path)
    base = ["release", str(path), "--unit", "u", "--by", "key", "--epsilon", "1", "--delta", "1e-6", "--top-k", "2"]
    res = CliRunner().invoke(app, base + ["--csh-noise", "alg4"])
    assert res.exit_code == 0, res.output
    assert "discrete-zcdp-cks" in res.output
    plan = CliRunner().invoke(app, ["plan", "--epsilon", "1", "--delta", "1e-6", "--top-k", "2"])
    assert plan.exit_code == 0 and "Algorithm 4" in plan.output and "rounded-exact" in plan.output
    bad = CliRunner().invoke(app, base + ["--csh-noise", "alg5"])
    assert bad.exit_code != 0 and "--csh-noise" in bad.output
