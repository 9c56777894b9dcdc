"""The calibration cache (issue 31): a cached calibration is the freshly computed one to the last bit, from
memory and from disk; a damaged, foreign or stale file is ignored and replaced; a release whose calibrations
are on disk does not import scipy."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from sparsedp.accounting import calibrate
from sparsedp.accounting import calibration_cache as cc

REQUESTS = [("gshm", dict(epsilon=1.0, delta=1e-6, l0=10, discrete=True)),
            ("laplace", dict(epsilon=0.7, delta=1e-7, l0=3, discrete=True)),
            ("topk-csh", dict(epsilon=1.0, delta=1e-6, top_k=10, debias=False, discrete=True)),
            ("gshm", dict(epsilon=2.0, delta=1e-8, l0=1, discrete=False))]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SPARSEDP_CACHE_DIR", str(tmp_path))
    cc.clear_memory()
    yield tmp_path / "calibrations"
    cc.clear_memory()


def _files(d):
    return sorted(p for p in d.iterdir() if p.suffix == ".json") if d.exists() else []


@pytest.mark.parametrize("mech,kw", REQUESTS)
def test_cached_equals_fresh_from_memory_and_disk(cache, mech, kw):
    fresh = calibrate(mech, **kw)
    first = cc.cached_calibrate(mech, **kw)  # computed and stored
    assert repr(first) == repr(fresh)
    assert len(_files(cache)) == 1
    assert cc.cached_calibrate(mech, **kw) is first  # the process's copy
    cc.clear_memory()
    from_disk = cc.cached_calibrate(mech, **kw)
    assert from_disk is not first and repr(from_disk) == repr(fresh)
    assert from_disk.noise == fresh.noise and from_disk.tau == fresh.tau and from_disk.sigma == fresh.sigma
    assert dict(from_disk.delta_parts) == dict(fresh.delta_parts)


def test_distinct_requests_are_distinct_entries(cache):
    a = cc.cached_calibrate("gshm", epsilon=1.0, delta=1e-6, l0=10, discrete=True)
    b = cc.cached_calibrate("gshm", epsilon=1.0, delta=1e-6, l0=11, discrete=True)
    c = cc.cached_calibrate("gshm", epsilon=1.0 + 2**-52, delta=1e-6, l0=10, discrete=True)  # next float
    assert len(_files(cache)) == 3
    assert a.l0 == 10 and b.l0 == 11 and c.epsilon == 1.0 + 2**-52


@pytest.mark.parametrize("damage", ["garbage", "truncated", "other key", "checksum", "unknown law", "empty"])
def test_a_damaged_file_is_ignored_and_replaced(cache, damage):
    kw = dict(epsilon=1.0, delta=1e-6, l0=10, discrete=True)
    fresh = calibrate("gshm", **kw)
    cc.cached_calibrate("gshm", **kw)
    (path,) = _files(cache)
    text = path.read_text()
    entry = json.loads(text)
    if damage == "garbage":
        path.write_bytes(b"\x00\xff not json")
    elif damage == "truncated":
        path.write_text(text[: len(text) // 2])
    elif damage == "other key":
        entry["key"] = entry["key"].replace('"i":"10"', '"i":"11"')
        path.write_text(json.dumps(entry))
    elif damage == "checksum":  # a changed number without the matching checksum
        entry["calibration"]["tau"] = {"f": (fresh.tau + 1).hex()}
        path.write_text(json.dumps(entry))
    elif damage == "unknown law":
        entry["calibration"]["noise"]["law"] = "os.system"
        entry["sha256"] = cc._checksum(entry["key"], entry["calibration"])
        path.write_text(json.dumps(entry))
    else:
        path.write_text("")
    cc.clear_memory()
    got = cc.cached_calibrate("gshm", **kw)
    assert repr(got) == repr(fresh)
    cc.clear_memory()
    assert repr(cc._read(json.loads(path.read_text())["key"])) == repr(fresh)  # rewritten intact


def test_disk_cache_off_and_unwritable_directory(tmp_path, monkeypatch):
    kw = dict(epsilon=1.0, delta=1e-6, l0=4, discrete=True)
    monkeypatch.setenv("SPARSEDP_CACHE_DIR", "")
    cc.clear_memory()
    assert cc.cache_dir() is None
    assert repr(cc.cached_calibrate("gshm", **kw)) == repr(calibrate("gshm", **kw))
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("SPARSEDP_CACHE_DIR", str(blocker))
    cc.clear_memory()
    assert repr(cc.cached_calibrate("gshm", **kw)) == repr(calibrate("gshm", **kw))
    cc.clear_memory()


def test_errors_are_raised_and_not_cached(cache):
    from sparsedp.errors import InvalidParameterError

    with pytest.raises(InvalidParameterError):
        cc.cached_calibrate("gshm", epsilon=-1.0, delta=1e-6, l0=3, discrete=True)
    assert _files(cache) == []


def test_the_key_changes_with_the_accountants_source(cache, monkeypatch):
    k1 = cc._key("gshm", {"epsilon": 1.0})
    monkeypatch.setattr(cc, "_STAMP", ["another stamp"])
    assert cc._key("gshm", {"epsilon": 1.0}) != k1


def test_a_release_with_cached_calibrations_does_not_import_scipy(tmp_path):
    code = ("import sys, polars as pl, sparsedp as sd\n"
            "df = pl.DataFrame({'u': list(range(300)) * 2, 'k': [f'k{i % 7}' for i in range(600)]})\n"
            "r = sd.release(df, 'u', 'k', epsilon=1.0, delta=1e-6, max_groups_per_unit=3)\n"
            "print(r.report.threshold, r.report.sigma, 'scipy' in sys.modules)\n")
    env = dict(os.environ, SPARSEDP_CACHE_DIR=str(tmp_path))
    src = os.path.join(os.path.dirname(__file__), "..", "..", "src")
    env["PYTHONPATH"] = os.path.abspath(src) + os.pathsep + env.get("PYTHONPATH", "")
    runs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                           check=True).stdout.split() for _ in range(2)]
    assert runs[0][-1] == "True" and runs[1][-1] == "False"  # computed (scipy), then read from the cache
    assert runs[0][:2] == runs[1][:2]
