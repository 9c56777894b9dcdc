"""The ``sparsedp release`` and ``sparsedp demo`` commands, run as subprocesses."""

from __future__ import annotations

import glob
import os
import signal
import subprocess
import sys
import time

import numpy as np
import polars as pl
import pytest

CLI = [sys.executable, "-m", "sparsedp"]


def run(*args, cwd=None, env=None, timeout=120):
    """The command in a fresh process (what a user runs)."""
    return subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, cwd=cwd, env=env,
                          timeout=timeout)


class _Done:
    def __init__(self, r):
        self.returncode, self.stdout, self.stderr = r.exit_code, r.stdout, r.stderr


def run_inproc(*args):
    """The command in this process (typer's test runner): same code path, no interpreter start-up."""
    from typer.testing import CliRunner

    from sparsedp.cli import app

    return _Done(CliRunner().invoke(app, list(map(str, args))))


@pytest.fixture(scope="module")
def shares(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli")
    g = np.random.default_rng(0)
    n = 20_000
    users = g.integers(0, 2000, n)
    url = np.where(g.random(n) < 0.5, "a.com", np.char.add("u", g.integers(0, 3000, n).astype(str)))
    df = pl.DataFrame({"user_id": users, "url": url, "country": np.where(users % 2 == 0, "DE", "FR"),
                       "action": np.where(g.random(n) < 0.8, "share", "view")})
    df.write_parquet(d / "shares.parquet")
    df.write_csv(d / "shares.csv")
    return d


BASE = ["--unit", "user_id", "--by", "url,country", "--epsilon", "1", "--delta", "1e-6"]


@pytest.mark.parametrize("src,runner", [("shares.parquet", run), ("shares.csv", run_inproc)])
def test_release_file_to_out(shares, tmp_path, src, runner):
    out = tmp_path / "released.parquet"
    r = runner("release", shares / src, *BASE, "--max-groups", "3", "--out", out)
    assert r.returncode == 0, r.stderr
    t = pl.read_parquet(out)
    assert t.columns == ["url", "country", "count", "count_lo", "count_hi"] and t.schema["count"] == pl.Int64
    assert ("a.com", "DE") in set(map(tuple, t.select("url", "country").rows()))
    assert "add/remove one privacy unit" in r.stdout and f"output written to {out}" in r.stdout
    assert os.listdir(tmp_path) == ["released.parquet"]


def test_release_sql_with_duckdb(shares, tmp_path):
    sql = f"SELECT user_id, url, country FROM read_parquet('{shares / 'shares.parquet'}') WHERE action = 'share'"
    out = tmp_path / "r.csv"
    r = run_inproc("release", sql, *BASE, "--top-k", "5", "--out", out)
    assert r.returncode == 0, r.stderr
    assert "duckdb engine" in r.stdout and "topk-csh" in r.stdout
    assert pl.read_csv(out).columns == ["url", "country", "count", "count_lo", "count_hi"]


@pytest.mark.parametrize("extra,msg", [
    (["--max-groups", "3", "--epsilon", "0"], "epsilon must be > 0"),
    (["--max-groups", "3", "--delta", "2"], "delta must be < 1"),
    ([], "declare a contribution bound"),
    (["--max-groups", "3", "--top-k", "3"], "not both"),
    (["--max-groups", "3", "--unit", "userid"], "did you mean 'user_id'"),
    (["--max-groups", "3", "--engine", "nope"], "engine must be one of"),
])
def test_release_errors_exit_2_and_write_nothing(shares, tmp_path, extra, msg):
    out = tmp_path / "o.parquet"
    # each option once: the case's value replaces BASE's (a repeated option is refused, tests/test_cli_errors.py)
    base = [x for flag, value in zip(BASE[::2], BASE[1::2]) if flag not in extra for x in (flag, value)]
    r = run_inproc("release", shares / "shares.parquet", *base, *extra, "--out", out)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert msg in " ".join(r.stderr.split()), r.stderr
    assert "Traceback" not in r.stderr
    assert os.listdir(tmp_path) == []


def test_unwritable_out_and_bad_input(shares, tmp_path):
    r = run_inproc("release", shares / "shares.parquet", *BASE, "--max-groups", "3", "--out",
                   tmp_path / "no" / "o.csv")
    assert r.returncode == 2 and "does not exist" in r.stderr
    ro = tmp_path / "ro"
    ro.mkdir()
    os.chmod(ro, 0o555)
    try:
        if os.access(ro, os.W_OK):  # running as root: permissions do not apply
            pytest.skip("cannot make an unwritable directory as root")
        r = run_inproc("release", shares / "shares.parquet", *BASE, "--max-groups", "3", "--out", ro / "o.csv")
        assert r.returncode == 2 and "permission denied" in r.stderr
        assert os.listdir(ro) == []
    finally:
        os.chmod(ro, 0o755)


def test_not_parquet_or_csv_input(tmp_path):
    bad = tmp_path / "data.xlsx"
    bad.write_bytes(b"PK\x03\x04junk")
    r = run_inproc("release", bad, *BASE, "--max-groups", "3", "--out", tmp_path / "o.csv")
    assert r.returncode == 2 and "not a Parquet or CSV file" in " ".join(r.stderr.split())
    assert sorted(os.listdir(tmp_path)) == ["data.xlsx"]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_killing_a_release_mid_write_leaves_no_output(shares, tmp_path, sig):
    """The test hook pauses after the temporary file is complete and before the rename; the kill lands there."""
    out = tmp_path / "released.csv"
    env = {**os.environ, "SPARSEDP_TEST_PAUSE_BEFORE_RENAME": "60"}
    p = subprocess.Popen([*CLI, "release", str(shares / "shares.parquet"), *BASE, "--max-groups", "3",
                          "--out", str(out)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.time() + 60
    while not glob.glob(str(tmp_path / ".released.csv.*.tmp")):
        assert p.poll() is None, p.communicate()
        assert time.time() < deadline, "temporary file never appeared"
        time.sleep(0.05)
    p.send_signal(sig)
    p.communicate(timeout=30)
    assert p.returncode != 0
    assert not out.exists()
    if sig == signal.SIGTERM:  # handled: the temporary file is removed too
        assert os.listdir(tmp_path) == []


def test_demo_subprocess(tmp_path):
    r = run("demo", cwd=tmp_path, timeout=120)
    assert r.returncode == 0, r.stderr
    out = tmp_path / "sparsedp-demo" / "release.csv"  # its own folder, said in the output
    assert sorted(os.listdir(tmp_path)) == ["sparsedp-demo"]
    assert sorted(os.listdir(out.parent)) == ["release.csv", "release.csv.json"]
    table = pl.read_csv(out)
    assert table.columns == ["query", "count", "count_lo", "count_hi"] and table.height > 10
    assert table["count"].min() >= 1
    s = r.stdout
    assert "synthetic search log: 1,000,000 rows" in s
    assert "released keys" in s and "query" in s  # the table head
    assert "add/remove one privacy unit" in s and "threshold" in s and "gshm" in s
    assert f"output written to {out}" in s
    n_rel = int(s.split("released      ")[1].split()[0])
    assert n_rel == table.height
    assert "warning" not in r.stderr  # its default delta does not trip its own delta advice
    again = run("demo", "--rows", "20000", cwd=tmp_path, timeout=120)  # a second run replaces its own output
    assert again.returncode == 0 and "warning" not in again.stderr, again.stderr


def test_demo_default_delta_stays_below_its_advice():
    from sparsedp.advice import delta_note, delta_units_note
    from sparsedp.cli.demo import default_delta

    for rows in (2_000, 10**6, 10**7, 3 * 10**7, 10**9):
        d = default_delta(rows)
        assert d <= 1e-6 and delta_note(d) is None and delta_units_note(d, rows // 10) is None, rows
    assert default_delta(10**6) == 1e-6 and default_delta(10**7) == 1e-7
