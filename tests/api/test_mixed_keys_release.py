"""``keys={"country": [...]}`` with ``by=["country", "query"]``: public countries × privately selected queries.

On the real secure path with fixed seeds: the table is complete (every listed country for every released query,
absent combinations included), a query is released with the exact probability of the selection's law at its
*projected* count (distinct units holding it, whatever their country), never below the threshold, one ledger
charge with the sequence of the two stages' events, and every bad request refused before anything is charged
(docs/proofs/mixed-keys.md).
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from scipy import stats

import sparsedp as sd
from sparsedp.accounting import calibrate
from sparsedp.accounting.discrete import dgauss_sf
from sparsedp.errors import InputDataError, InvalidParameterError, InvalidTypeError
from sparsedp.noise.source import InsecureSeededRandom

EPS, DELTA = 1.0, 1e-6
BY = ["country", "query"]
COUNTRIES = ["DE", "FR", "IT"]  # IT is absent from the data


class Tripwire:
    """A random source that fails the test if anything draws from it."""

    def uint64(self, size):
        raise AssertionError("randomness drawn before validation finished")

    random_bytes = getrandbits = randbelow = uint64


def _split_half(n_queries: int, count: int) -> pl.DataFrame:
    """``n_queries`` queries with ``count`` units each, one query per unit; a query's units alternate between FR and
    DE, so each (country, query) pair holds about count/2 units while the query holds ``count``."""
    units = np.arange(n_queries * count)
    return pl.DataFrame({"user": units, "country": np.where(units % 2 == 0, "FR", "DE"),
                         "query": [f"q{u // count:04d}" for u in units]})


@pytest.fixture(scope="module")
def log():
    rng = np.random.default_rng(0)
    rows = []
    for u in range(3000):
        country = ["FR", "DE", "US"][u % 3]
        for q in rng.choice(20, size=2, replace=False):
            rows.append((u, country, f"q{int(q):02d}"))
    rows += [(10_000, "FR", "rare")]  # one unit: far below any threshold
    return pl.DataFrame(rows, schema=["user", *BY], orient="row")


def _queries(table) -> set:
    return set(table["query"].to_list())


def test_complete_table_of_listed_countries_and_released_queries(log):
    res = sd.release(log, "user", BY, EPS, DELTA, max_groups_per_unit=2, keys={"country": COUNTRIES},
                     rng=InsecureSeededRandom(4))
    t = res.table
    assert t.columns == [*BY, "count", "count_lo", "count_hi"]  # stage 2's exact intervals, on by default
    queries = _queries(t)
    assert queries and "rare" not in queries
    pairs = set(zip(t["country"].to_list(), t["query"].to_list()))
    assert pairs == {(c, q) for c in COUNTRIES for q in queries}  # every pair once, US (not listed) dropped
    assert t.height == len(COUNTRIES) * len(queries)
    r = res.report
    assert r.mechanism == "mixed-keys" and (r.epsilon, r.delta) == (EPS, DELTA)
    assert r.released_keys == t.height
    assert any("every selected query value gets a row for every listed country" in n for n in r.notes)
    assert "selection of query" in r.contribution and "at most 2 per unit" in r.contribution
    # IT has no data: its counts are pure noise around 0; FR's are near the truth (about 1000 · 2/20 · 1)
    it = t.filter(pl.col("country") == "IT")["count"].to_numpy()
    fr = t.filter(pl.col("country") == "FR")["count"].to_numpy()
    assert np.abs(it).mean() < 4 * r.noise_std and fr.mean() > 50
    # the same seed on another engine gives the same table
    again = sd.release(log.to_pandas(), "user", BY, EPS, DELTA, max_groups_per_unit=2,
                       keys={"country": COUNTRIES}, rng=InsecureSeededRandom(4)).table
    assert pl.from_pandas(again).equals(t)


def test_release_probability_is_the_selection_law_at_the_projected_count():
    """Selection by GSHM at (ε/2, δ/2, l0 = 1) on the projected (unit, query) pairs: a query of c units is released
    with probability P[N_Z(0, s) >= pre + margin − c] (binomial test over 3 seeded releases of 300 queries); the law
    at the per-(country, query) count c/2 — thresholding each pair — is rejected."""
    cal1 = calibrate("gshm", epsilon=EPS / 2, delta=DELTA / 2, l0=1, discrete=True)
    pre, margin = 1, int(cal1.tau)
    c = pre + margin - 1
    c += c % 2  # even: each country holds c/2
    df = _split_half(300, c)
    released = 0
    for seed in (1, 2, 3):
        t = sd.release(df, "user", BY, EPS, DELTA, max_groups_per_unit=1, keys={"country": COUNTRIES},
                       rng=InsecureSeededRandom(seed)).table
        assert t.height == 3 * len(_queries(t))
        released += len(_queries(t))
    p = dgauss_sf(pre + margin - c, cal1.noise.sigma2)
    assert 0.2 < p < 0.8 and stats.binomtest(released, 900, p).pvalue > 1e-4
    p_pair = dgauss_sf(pre + margin - c // 2, cal1.noise.sigma2)
    assert stats.binomtest(released, 900, p_pair).pvalue < 1e-6


def test_a_query_below_the_threshold_is_never_released(log):
    """"rare" has one unit: its exact release probability is below 1e-6 per release; 10 seeds never show it."""
    cal1 = calibrate("gshm", epsilon=EPS / 2, delta=DELTA / 2, l0=2, discrete=True)
    assert dgauss_sf(1 + int(cal1.tau) - 1, cal1.noise.sigma2) < 1e-6
    for seed in range(10):
        t = sd.release(log, "user", BY, EPS, DELTA, max_groups_per_unit=2, keys={"country": COUNTRIES},
                       rng=InsecureSeededRandom(seed)).table
        assert "rare" not in _queries(t)


def test_stage_options_follow_the_mechanism_argument(log):
    """``mechanism=`` names the selection (thresholded), the counting (public-key) stage, or both (TwoStage)."""
    a = sd.release(log, "user", BY, EPS, DELTA, max_groups_per_unit=2, keys={"country": COUNTRIES},
                   mechanism="laplace", rng=InsecureSeededRandom(1)).report
    assert a.options["select"].startswith("laplace")
    b = sd.release(log, "user", BY, EPS, DELTA, max_groups_per_unit=2, keys={"country": COUNTRIES},
                   mechanism=sd.TwoStage(count="public-gaussian", count_bound=2, split=0.3),
                   rng=InsecureSeededRandom(1)).report
    assert b.options["count"] == "public-gaussian" and b.options["count_bound"] == 2 and b.options["split"] == 0.3
    assert b.options["public_columns"] == ["country"] and b.options["public_keys"] == 3
    c = sd.release(log, "user", BY, EPS, DELTA, max_groups_per_unit=2, keys={"country": COUNTRIES},
                   mechanism="public-laplace", rng=InsecureSeededRandom(1)).report
    assert c.options["count"] == "public-laplace"
    d = sd.release(log, "user", BY, EPS, DELTA, keys={"country": COUNTRIES}, mechanism="optimal-partition",
                   rng=InsecureSeededRandom(1)).report
    assert d.options["select"] == "optimal-partition" and "at most 1 per unit" in d.contribution
    with pytest.raises(InvalidParameterError, match="mechanism"):
        sd.release(log, "user", BY, EPS, DELTA, max_groups_per_unit=2, keys={"country": COUNTRIES},
                   mechanism="misra-gries")


def test_ledger_charged_once_with_both_stages(log, tmp_path):
    from sparsedp.accounting.calibration import Neighbours
    from sparsedp.accounting.events import ApproxDPEvent, SequenceEvent
    from sparsedp.ledger import Ledger

    path = tmp_path / "l.db"
    with Ledger(path) as led:
        led.set_budget("d", epsilon=3.0, delta=1e-5)
    sd.release(log, "user", BY, EPS, DELTA, max_groups_per_unit=2, keys={"country": COUNTRIES},
               ledger=str(path), dataset="d", rng=InsecureSeededRandom(1))
    with Ledger(path) as led:
        h = led.history("d")
    assert [(c.mechanism, c.epsilon, c.delta, c.neighbours, c.status) for c in h] == [
        ("mixed-keys", EPS, DELTA, Neighbours.ADD_REMOVE, "published")]
    ev = h[0].event
    assert isinstance(ev, SequenceEvent) and (ev.epsilon, ev.delta) == (EPS, DELTA)
    first, second = ev.events
    assert first.kind != "approx-dp" and isinstance(second, ApproxDPEvent)
    assert first.epsilon + second.epsilon <= EPS and first.delta + second.delta <= DELTA


def test_a_mapping_of_every_column_is_the_public_list_and_an_empty_one_the_private_release(log):
    full = sd.release(log, "user", BY, EPS, DELTA, max_groups_per_unit=2,
                      keys={"country": ["FR", "DE"], "query": ["q01", "q02", "zz"]}, rng=InsecureSeededRandom(2))
    listed = sd.release(log, "user", BY, EPS, DELTA, max_groups_per_unit=2,
                        keys=[(c, q) for c in ("FR", "DE") for q in ("q01", "q02", "zz")],
                        rng=InsecureSeededRandom(2))
    assert full.table.equals(listed.table) and full.table.height == 6
    assert full.report.mechanism == listed.report.mechanism != "mixed-keys"
    none = sd.release(log, "user", BY, EPS, DELTA, max_groups_per_unit=2, keys={}, rng=InsecureSeededRandom(2))
    private = sd.release(log, "user", BY, EPS, DELTA, max_groups_per_unit=2, rng=InsecureSeededRandom(2))
    assert none.table.equals(private.table) and none.report.mechanism == private.report.mechanism


@pytest.mark.parametrize("kw,exc,msg", [
    (dict(keys={"nope": ["FR"]}), InvalidParameterError, "'nope', which is not a by column"),
    (dict(keys={"country": []}), InvalidParameterError, r"keys\['country'\].*empty"),
    (dict(keys={"country": ["FR", "FR"]}), InvalidParameterError, "more than once"),
    (dict(keys={"country": "FR"}), InvalidTypeError, r"keys\['country'\]"),
    (dict(keys={"country": ["FR"]}, max_groups_per_unit=None), InvalidParameterError, "max_groups_per_unit"),
    (dict(keys={"country": ["FR"]}, max_groups_per_unit="auto"), InvalidParameterError, "max_groups_per_unit"),
    (dict(keys={"country": ["FR"]}, aggregates=[sd.Count(), sd.Sum("v", 0, 1)]), InvalidParameterError,
     "SUM/MEAN"),
    (dict(keys={"country": ["FR"]}, privacy_unit="nope"), InputDataError, "nope"),
])
def test_bad_requests_refused_before_any_charge_or_draw(log, tmp_path, kw, exc, msg):
    from sparsedp.ledger import Ledger

    path = tmp_path / "l.db"
    with Ledger(path) as led:
        led.set_budget("d", epsilon=3.0, delta=1e-5)
    kw = {"privacy_unit": "user", "max_groups_per_unit": 2, **kw}
    data = log.with_columns(v=pl.lit(0.5))
    with pytest.raises(exc, match=msg):
        sd.release(data, by=BY, epsilon=EPS, delta=DELTA, ledger=str(path), dataset="d", rng=Tripwire(), **kw)
    with Ledger(path) as led:
        assert led.history("d") == []


def test_a_value_type_unlike_the_data_is_refused_before_the_charge(log, tmp_path):
    from sparsedp.ledger import Ledger

    path = tmp_path / "l.db"
    with Ledger(path) as led:
        led.set_budget("d", epsilon=3.0, delta=1e-5)
    with pytest.raises(InputDataError, match=r"keys\['country'\] holds Int64"):
        sd.release(log, "user", BY, EPS, DELTA, max_groups_per_unit=2, keys={"country": [1, 2]},
                   ledger=str(path), dataset="d", rng=InsecureSeededRandom(1))
    with Ledger(path) as led:
        assert led.history("d") == []


def test_cli_partial_keys_file(log, tmp_path):
    """``--keys country=FILE``: the text values take the data's type; a name that is not a --by column is refused
    naming the flag."""
    from typer.testing import CliRunner

    from sparsedp.cli import app

    data = log.with_columns(country=pl.col("country").replace_strict({"FR": 1, "DE": 2, "US": 3}))
    path, out = tmp_path / "in.parquet", tmp_path / "out.parquet"
    data.write_parquet(path)
    (tmp_path / "countries.txt").write_text("1\n2\n7\n")
    base = ["release", str(path), "--unit", "user", "--by", "country,query", "--epsilon", "1", "--delta", "1e-6",
            "--max-groups", "2"]
    r = CliRunner().invoke(app, [*base, "--keys", f"country={tmp_path / 'countries.txt'}", "--out", str(out)])
    assert r.exit_code == 0, r.output
    t = pl.read_parquet(out)
    assert "mixed-keys" in r.output and t.columns == [*BY, "count", "count_lo", "count_hi"]
    assert set(t["country"].to_list()) == {1, 2, 7} and t.height == 3 * len(_queries(t))
    bad = CliRunner().invoke(app, [*base, "--keys", f"nope={tmp_path / 'countries.txt'}"])
    assert bad.exit_code == 2 and "--keys" in bad.output and "--by columns" in bad.output


def test_cli_keys_is_repeatable(log, tmp_path):
    """``--keys`` repeated adds public columns (a repeated flag used to keep only its last value, which made the
    other column private without a word): both columns public is the all-public release; a column listed twice
    and a whole key list next to another ``--keys`` are refused before anything is written."""
    from typer.testing import CliRunner

    from sparsedp.cli import app

    path = tmp_path / "in.parquet"
    log.write_parquet(path)
    (tmp_path / "countries.txt").write_text("FR\nDE\n")
    (tmp_path / "queries.txt").write_text("q00\nq01\nrare\n")
    base = ["release", str(path), "--unit", "user", "--by", "country", "--by", "query", "--epsilon", "1",
            "--delta", "1e-6", "--max-groups", "2"]
    country, query = f"country={tmp_path / 'countries.txt'}", f"query={tmp_path / 'queries.txt'}"
    for keys in (["--keys", country, "--keys", query], ["--keys", f"{country},{query}"]):
        out = tmp_path / f"out{len(keys)}.parquet"
        r = CliRunner().invoke(app, [*base, *keys, "--out", str(out)])
        assert r.exit_code == 0, r.output
        t = pl.read_parquet(out)
        assert "mixed-keys" not in r.output  # every --by column public: the public-key release, no selection
        assert sorted(t.select(BY).rows()) == sorted((c, q) for c in ("FR", "DE") for q in ("q00", "q01", "rare"))
    for keys, msg in ((["--keys", country, "--keys", country], "listed twice"),
                      (["--keys", str(tmp_path / "countries.txt"), "--keys", query], "cannot be combined")):
        out = tmp_path / "refused.parquet"
        bad = CliRunner().invoke(app, [*base, *keys, "--out", str(out)])
        assert bad.exit_code == 2 and msg in bad.output and not out.exists(), bad.output


def test_plan_shows_a_partial_key_set_and_needs_its_bound():
    """sd.plan(keys={col: values}) lists both stages (tests/quantiles/test_quantile_plan.py checks the rows); like
    the release, it needs max_groups_per_unit (stage 1's bound)."""
    with pytest.raises(InvalidParameterError, match="max_groups_per_unit"):
        sd.plan(EPS, DELTA, keys={"country": COUNTRIES})
    p = sd.plan(EPS, DELTA, 2, keys={"country": COUNTRIES})
    assert {m.stage for m in p.mechanisms} == {1, 2} and f"({len(COUNTRIES)} listed)" in p.title
