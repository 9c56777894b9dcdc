"""The DuckDB engine's out-of-core settings (engines/duckdb_settings.py) and the default engine for files larger
than memory (engines/choice.py)."""

from __future__ import annotations

import duckdb
import polars as pl
import pytest

import sparsedp as sd
from sparsedp.demo_data import search_log
from sparsedp.engines import choice
from sparsedp.engines.duckdb_engine import DuckDBEngine
from sparsedp.errors import InputDataError, InvalidParameterError
from sparsedp.noise import InsecureSeededRandom


@pytest.fixture(scope="module")
def clicks(tmp_path_factory):
    path = tmp_path_factory.mktemp("ooc") / "clicks.parquet"
    search_log(500_000, seed=3).select("user_id", url="query").write_parquet(path)
    return str(path)


def _release(path, engine):
    return sd.release(path, "user_id", "url", 1.0, 1e-6, max_groups_per_unit=3, engine=engine,
                      rng=InsecureSeededRandom(5))


def test_spilling_release_is_identical(clicks, tmp_path):
    """Under a memory limit (one thread) too small for the data's distinct pairs without a spill directory
    (DuckDB refuses them: the first such limit of a few, as DuckDB's needs differ between versions) the release
    spills, slicing the units into passes if one pass does not fit, and gives the same table and statistics as
    the engine with DuckDB's defaults, for the same secret."""
    for limit in ("32MB", "24MB", "16MB", "12MB"):
        con = duckdb.connect(config={"memory_limit": limit, "threads": 1, "temp_directory": ""})
        try:
            con.sql(f"SELECT count(*) FROM (SELECT DISTINCT user_id, url FROM '{clicks}')").fetchall()
        except duckdb.OutOfMemoryException:
            break
    else:
        pytest.fail("the distinct pairs fit in 12 MB without spilling")
    ref = _release(clicks, DuckDBEngine())
    spill = tmp_path / "spill"
    spill.mkdir()
    got = None
    for passes in (1, 4, 16):
        try:
            got = _release(clicks, DuckDBEngine(memory_limit=limit, threads=1, temp_directory=spill, passes=passes))
        except InputDataError as e:
            assert "Out of Memory" in str(e)
            continue
        break
    assert got is not None, f"no release completed under {limit}"
    assert ref.report.released_keys > 100
    assert got.table.equals(ref.table)
    assert got.curator.bounding == ref.curator.bounding
    assert list(spill.iterdir()) == []  # the private spill directories are removed


def test_settings_are_checked(tmp_path):
    for bad in ({"memory_limit": "lots"}, {"memory_limit": 6}, {"threads": 0}, {"threads": True},
                {"temp_directory": tmp_path / "missing"}):
        with pytest.raises(InvalidParameterError):
            DuckDBEngine(**bad)
    with pytest.raises(InvalidParameterError, match="with connection"):
        DuckDBEngine(duckdb.connect(), memory_limit="1GB")
    with pytest.raises(InvalidParameterError, match="connection= goes with an engine name"):
        sd.release(pl.DataFrame({"u": [1], "k": ["a"]}), "u", "k", 1.0, 1e-6, max_groups_per_unit=1,
                   engine=DuckDBEngine(), connection=duckdb.connect())


def test_file_larger_than_memory_goes_to_duckdb(clicks, monkeypatch):
    """A Parquet file whose in-memory estimate passes half the RAM is released by DuckDB (spilling), not by the
    in-memory Polars engine; the report says why."""
    assert choice.choose_engine(clicks).engine == "polars"
    est = choice.in_memory_bytes(clicks) * choice.POLARS_MEMORY_FACTOR
    monkeypatch.setattr(choice, "physical_memory", lambda: int(est * 1.9))
    c = choice.choose_engine(clicks)
    assert c.engine == "duckdb" and "files larger than memory" in c.describe()
    res = _release(clicks, None)
    assert res.curator.engine == "duckdb" and "larger than memory" in res.curator.engine_choice
    monkeypatch.setattr(choice, "physical_memory", lambda: int(est * 2.1))
    assert choice.choose_engine(clicks).engine == "polars"


def test_passes_give_the_one_pass_histogram(clicks):
    """``DuckDBEngine(passes=p)`` runs the bounding statement once per slice ``hash(unit) % p`` and adds the
    per-key results: each unit's choice depends on its own pairs and the secret only, so the released table and
    the bounding statistics are those of one pass (count only, and count + sums with a binding and a non-binding bound)."""
    ref = _release(clicks, DuckDBEngine())
    for p in (2, 5):
        got = _release(clicks, DuckDBEngine(passes=p))
        assert got.table.equals(ref.table)
        assert got.curator.bounding == ref.curator.bounding
    frame = pl.read_parquet(clicks).with_columns(v=(pl.col("user_id") % 7).cast(pl.Float64))
    aggs = [sd.Count(), sd.Sum("v", lower=0, upper=5)]
    for l0 in (3, 1000):
        one, three = (sd.release(frame, "user_id", "url", 1.0, 1e-6, max_groups_per_unit=l0, aggregates=aggs,
                                 engine=DuckDBEngine(passes=p), rng=InsecureSeededRandom(6)) for p in (1, 3))
        assert one.report.released_keys > 10
        assert three.table.equals(one.table)


def test_passes_shrink_duckdbs_working_set(clicks, tmp_path):
    """Under a limit (one thread) at which the one-pass statement runs out of memory even with a spill directory
    (16 MB with DuckDB 2.0; the first such limit of a few, as DuckDB's needs differ between versions), eight
    passes (an eighth of the distinct pairs each) complete with the same table."""
    ref = _release(clicks, DuckDBEngine())
    for limit in ("16MB", "12MB", "8MB"):
        try:
            _release(clicks, DuckDBEngine(memory_limit=limit, threads=1, temp_directory=tmp_path))
        except InputDataError as e:
            assert "Out of Memory" in str(e)
            break
    else:
        pytest.fail("one pass fits in 8 MB")
    got = _release(clicks, DuckDBEngine(memory_limit=limit, threads=1, temp_directory=tmp_path, passes=8))
    assert got.table.equals(ref.table)


def test_passes_are_checked():
    for bad in (0, 1.5, True, 5000):
        with pytest.raises(InvalidParameterError, match="passes"):
            DuckDBEngine(passes=bad)
