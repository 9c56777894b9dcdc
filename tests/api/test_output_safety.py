"""Writing a release's output (issue 30, items 2-4): a full disk gives one error line naming the charge, an
existing output is never replaced unless asked (refused before any charge), and a file's guarantee names the
table it describes (rows, content hash, ledger charge id), checked by ``read_guarantee``."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import polars as pl
import pytest
from typer.testing import CliRunner

import sparsedp as sd
from sparsedp.cli import app
from sparsedp.engines import output
from sparsedp.engines.output import read_guarantee, sidecar_path
from sparsedp.errors import GuaranteeMismatchError, InvalidParameterError, OutputExistsError, OutputWriteError
from sparsedp.ledger import Ledger


@pytest.fixture()
def setup(tmp_path):
    g = np.random.default_rng(3)
    frame = pl.DataFrame({"u": g.integers(0, 400, 4000), "k": g.integers(0, 20, 4000).astype(str)})
    src = tmp_path / "log.parquet"
    frame.write_parquet(src)
    led = tmp_path / "ledger.db"
    with Ledger(led) as lg:
        lg.set_budget("logs", epsilon=10, delta=1e-5)
    out = tmp_path / "out"
    out.mkdir()
    return frame, src, led, out


KW = dict(privacy_unit="u", by="k", epsilon=1.0, delta=1e-6, max_groups_per_unit=2)


def _cli(src, out, led, *extra):
    return CliRunner().invoke(app, ["release", str(src), "--unit", "u", "--by", "k", "--epsilon", "1", "--delta",
                                    "1e-6", "--max-groups", "2", "--out", str(out), "--ledger", str(led),
                                    "--dataset", "logs", *extra])


def _charges(led):
    with Ledger(led) as lg:
        return lg.history("logs")


def _full_disk(*a, **k):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


# ---------------------------------------------------------------- item 2: a full disk


def test_full_disk_python_names_the_charge_and_hands_back_the_table(setup, monkeypatch):
    frame, _, led, out = setup
    monkeypatch.setattr(output, "_write_table", _full_disk)
    with pytest.raises(OutputWriteError) as e:
        sd.release(frame, **KW, out=out / "r.csv", ledger=str(led), dataset="logs")
    (charge,) = _charges(led)
    assert e.value.charge_id == charge.id and charge.status == "charged"  # the budget is spent: noise was drawn
    msg = str(e.value)
    print(msg)
    assert msg.startswith(f"budget charged (charge id {charge.id}), output not written: ")
    assert "No space left on device" in msg and "free space" in msg
    assert os.listdir(out) == []  # nothing half-written, no sidecar, no temporary file
    assert e.value.table is not None and e.value.table.height > 0 and e.value.report.epsilon == 1.0


def test_full_disk_cli_one_error_line_exit_2(setup, monkeypatch):
    _, src, led, out = setup
    monkeypatch.setattr(output, "_write_table", _full_disk)
    r = _cli(src, out / "r.parquet", led)
    print(r.stderr)
    assert r.exit_code == 2, (r.exit_code, r.stdout, r.stderr)
    (charge,) = _charges(led)
    err = r.stderr.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in r.stdout + r.stderr
    assert err.startswith(f"error: budget charged (charge id {charge.id}), output not written: cannot write ")
    assert "--out" in err and "out=" not in err
    assert os.listdir(out) == []


def test_full_disk_on_a_real_tmpfs(setup, tmp_path):
    """A 1 MB tmpfs filled to the last byte, the CLI in a subprocess (root only: skipped where mount fails)."""
    _, src, led, _ = setup
    mnt = tmp_path / "full"
    mnt.mkdir()
    if shutil.which("mount") is None or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)],
                                                       capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        with open(mnt / "filler", "wb", buffering=0) as fh:  # fill it: every later write fails with ENOSPC
            try:
                while True:
                    fh.write(b"\0" * 4096)
            except OSError as e:
                assert e.errno == errno.ENOSPC
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        r = subprocess.run([sys.executable, "-m", "sparsedp", "release", str(src), "--unit", "u", "--by", "k",
                            "--epsilon", "1", "--delta", "1e-6", "--max-groups", "2", "--out", str(mnt / "r.csv"),
                            "--ledger", str(led), "--dataset", "logs"], capture_output=True, text=True, env=env)
        print(r.stderr)
        assert r.returncode == 2, r.stderr
        (charge,) = _charges(led)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(
            f"error: budget charged (charge id {charge.id}), output not written: cannot write"), r.stderr
        assert "No space left on device" in lines[0]
        assert sorted(os.listdir(mnt)) == ["filler"]
    finally:
        subprocess.run(["umount", str(mnt)], capture_output=True)


# ---------------------------------------------------------------- item 3: no silent overwrite


@pytest.mark.parametrize("name", ["r.csv", "r.parquet"])
def test_existing_output_refused_before_any_charge_python(setup, name):
    frame, _, led, out = setup
    first = sd.release(frame, **KW, out=out / name, ledger=str(led), dataset="logs")
    before = {p: (out / p).read_bytes() for p in os.listdir(out)}
    with pytest.raises(OutputExistsError) as e:
        sd.release(frame, **{**KW, "epsilon": 2.0}, out=out / name, ledger=str(led), dataset="logs")
    print(e.value)
    assert isinstance(e.value, InvalidParameterError) and e.value.param == "out"
    assert "exists" in str(e.value) and "overwrite=True" in str(e.value)
    assert len(_charges(led)) == 1  # nothing charged
    assert {p: (out / p).read_bytes() for p in os.listdir(out)} == before  # nothing written
    second = sd.release(frame, **{**KW, "epsilon": 2.0}, out=out / name, ledger=str(led), dataset="logs",
                        overwrite=True)
    assert read_guarantee(str(out / name))["epsilon"] == 2.0 and first.report.epsilon == 1.0
    assert second.report.epsilon == 2.0 and len(_charges(led)) == 2


def test_a_lone_sidecar_also_blocks_a_csv_output(setup):
    frame, _, led, out = setup
    (out / "r.csv.json").write_text("{}")
    with pytest.raises(OutputExistsError, match="r.csv.json"):
        sd.release(frame, **KW, out=out / "r.csv")


def test_existing_output_refused_before_any_charge_cli(setup):
    _, src, led, out = setup
    assert _cli(src, out / "r.csv", led).exit_code == 0
    before = {p: (out / p).read_bytes() for p in os.listdir(out)}
    r = _cli(src, out / "r.csv", led)
    print(r.stderr)
    assert r.exit_code == 2 and len(r.stderr.strip().splitlines()) == 1
    assert r.stderr.startswith(f"error: --out {out / 'r.csv'} exists") and "pass --overwrite to replace it" in r.stderr
    assert "overwrite=True" not in r.stderr
    assert len(_charges(led)) == 1 and {p: (out / p).read_bytes() for p in os.listdir(out)} == before
    r = _cli(src, out / "r.csv", led, "--overwrite")
    assert r.exit_code == 0, r.stderr
    assert len(_charges(led)) == 2 and read_guarantee(str(out / "r.csv"))["table"]["charge_id"] == 2


# ---------------------------------------------------------------- item 4: the guarantee names its table


@pytest.mark.parametrize("name", ["r.csv", "r.parquet"])
def test_guarantee_names_rows_hash_and_charge(setup, name):
    frame, _, led, out = setup
    res = sd.release(frame, **KW, out=out / name, ledger=str(led), dataset="logs")
    meta = read_guarantee(str(out / name))
    (charge,) = _charges(led)
    assert meta["table"]["rows"] == res.table.height and meta["table"]["charge_id"] == charge.id
    assert len(meta["table"]["sha256"]) == 64
    if name.endswith(".csv"):
        import hashlib

        assert meta["table"]["sha256"] == hashlib.sha256((out / name).read_bytes()).hexdigest()


def test_mismatched_sidecar_is_detected(setup):
    frame, _, _, out = setup
    sd.release(frame, **KW, out=out / "a.csv")
    sd.release(frame, **{**KW, "epsilon": 2.0}, out=out / "b.csv")
    shutil.copy(sidecar_path(str(out / "b.csv")), sidecar_path(str(out / "a.csv")))  # b's guarantee, a's table
    with pytest.raises(GuaranteeMismatchError, match="do not publish"):
        read_guarantee(str(out / "a.csv"))
    assert read_guarantee(str(out / "a.csv"), verify=False)["epsilon"] == 2.0


def test_a_crash_between_the_two_renames_is_detected(setup, tmp_path):
    """A process killed (os._exit) after the sidecar's rename and before the CSV's, while overwriting an
    ε = 1 release with an ε = 2 one: the new sidecar stands next to the old CSV, and read_guarantee refuses
    the pair."""
    frame, _, _, out = setup
    data = tmp_path / "frame.parquet"
    frame.write_parquet(data)
    sd.release(frame, **KW, out=out / "r.csv")
    script = textwrap.dedent(f"""
        import os, polars as pl, sparsedp as sd
        from sparsedp.engines import output
        real, calls = os.replace, []
        def replace(a, b):
            if os.path.dirname(os.path.abspath(b)) == {str(out)!r}:  # not the calibration cache's own writes
                calls.append(b)
            if len(calls) == 2:
                os._exit(9)  # killed between the sidecar's rename and the CSV's
            real(a, b)
        output.os.replace = replace
        sd.release(pl.read_parquet({str(data)!r}), privacy_unit="u", by="k", epsilon=2.0, delta=1e-6,
                   max_groups_per_unit=2, out={str(out / 'r.csv')!r}, overwrite=True)
    """)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    assert subprocess.run([sys.executable, "-c", script], env=env).returncode == 9
    assert json.loads((out / "r.csv.json").read_text())["epsilon"] == 2.0  # the new sidecar, the old CSV
    with pytest.raises(GuaranteeMismatchError):
        read_guarantee(str(out / "r.csv"))
