"""The adaptive-weighting rounds' calibrations in the on-disk calibration cache (issue 33): read back (in this
process after its memory is cleared, and in a second process) they are the computed calibration to the last bit,
without the composed profile being computed again; a damaged, foreign or altered entry is never trusted (the
calibration is computed afresh and the file rewritten); the key separates every argument."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import sparsedp
from sparsedp.accounting import adaptive_weighting as aw
from sparsedp.accounting import calibration_cache as cc
from sparsedp.accounting import rounds_cache as rc
from sparsedp.accounting.calibration_cache import encode_value
from sparsedp.accounting.events import SequenceEvent

NAME = "adaptive-weighting"
TWO = (1.0, 1e-6, 3, (0.15, 0.85))
ONE = (1.0, 1e-6, 3, (1.0,))


@pytest.fixture(scope="module")
def fresh():
    """The calibrations computed directly (no cache involved)."""
    return {TWO: aw.calibrate_rounds(NAME, *TWO), ONE: aw.calibrate_rounds(NAME, *ONE)}


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An empty disk cache and an empty memory for this test (the process's memory is restored after)."""
    monkeypatch.setenv("SPARSEDP_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(rc, "_MEMORY", {})
    return tmp_path / "calibrations"


def _files(d):
    return sorted(d.glob("*.json"))


@pytest.fixture
def computed(monkeypatch, fresh):
    """``calibrate_rounds`` as the cache calls it, answering the precomputed calibrations; ``calls`` counts the
    calls (a read back from disk makes none)."""
    calls = []

    def fake(name, *args):
        calls.append(args)
        return fresh[args[:4]]

    monkeypatch.setattr(rc, "calibrate_rounds", fake)
    return calls


def _no_composition(monkeypatch):
    def refuse(*a, **k):
        raise AssertionError("the composed profile was computed")

    monkeypatch.setattr(SequenceEvent, "delta_at", refuse)  # the composition of the rounds
    monkeypatch.setattr(aw, "weighted_gaussian_scale", refuse)  # the scale search
    monkeypatch.setattr(aw, "calibrate_rounds", refuse)
    monkeypatch.setattr(rc, "calibrate_rounds", refuse)


@pytest.mark.parametrize("req", [TWO, ONE], ids=["two rounds", "one round"])
def test_read_back_from_disk_is_the_computed_calibration(cache, fresh, computed, monkeypatch, req):
    first = rc.cached_rounds(NAME, *req)
    assert repr(first) == repr(fresh[req]) and len(computed) == 1 and len(_files(cache)) == 1
    assert rc.cached_rounds(NAME, *req) is first  # the process's copy
    rc.clear_memory()
    _no_composition(monkeypatch)
    back = rc.cached_rounds(NAME, *req)
    assert back is not first and repr(back) == repr(fresh[req])
    assert back.event() == fresh[req].event()  # the same charge
    assert [r.threshold_int for r in back.rounds] == [r.threshold_int for r in fresh[req].rounds]


def test_a_second_process_reads_the_calibration_without_the_composition(cache, fresh, computed):
    rc.cached_rounds(NAME, *TWO)  # stored by this process
    code = ("import sys\n"
            "from sparsedp.accounting import adaptive_weighting as aw, rounds_cache as rc\n"
            "from sparsedp.accounting.events import SequenceEvent\n"
            "def refuse(*a, **k):\n    raise AssertionError('composed')\n"
            "aw.weighted_gaussian_scale = aw.calibrate_rounds = rc.calibrate_rounds = refuse\n"
            "SequenceEvent.delta_at = refuse\n"
            f"print(repr(rc.cached_rounds({NAME!r}, *{TWO!r})))\n")
    env = dict(os.environ, SPARSEDP_CACHE_DIR=str(cache.parent))
    src = os.path.dirname(os.path.dirname(os.path.abspath(sparsedp.__file__)))  # the sparsedp of this process
    env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.strip() == repr(fresh[TWO])


def _tamper(entry, what):
    """Change one number of a stored entry and re-seal it (a valid checksum: only the re-checks can notice)."""
    body = entry["calibration"]
    if what == "threshold":  # round 2's threshold one grid step lower, its stored δ_r(ε) kept
        body["rounds"][-1][1] = encode_value(int(body["rounds"][-1][1]["i"]) - 1)
    elif what == "scale":  # round 2's scale 10 % smaller
        num, den = body["rounds"][-1][0]["q"]
        body["rounds"][-1][0] = {"q": [str(int(num) * 9), str(int(den) * 10)]}
    elif what == "round delta":  # a round's δ_r(ε) that is not the accountant's
        body["rounds"][0][2] = encode_value(float.fromhex(body["rounds"][0][2]["f"]) / 2)
    elif what == "composed above delta":
        body["delta_achieved"] = encode_value(2e-6)
    elif what == "composed below a round":
        body["delta_achieved"] = encode_value(1e-9)
    elif what == "target":  # round 2's new-key target below its threshold's new-key term
        body["new_key_targets"][-1] = encode_value(1e-12)
    elif what == "shares":
        body["shares"] = [encode_value(0.5), encode_value(0.5)]
    entry["sha256"] = cc._checksum(entry["key"], body)
    return entry


@pytest.mark.parametrize("damage", ["garbage", "truncated", "empty", "checksum", "foreign", "threshold", "scale",
                                    "round delta", "composed above delta", "composed below a round", "target",
                                    "shares", "type"])
def test_a_damaged_or_altered_entry_is_not_trusted(cache, fresh, computed, damage):
    rc.cached_rounds(NAME, *TWO)
    (path,) = _files(cache)
    text = path.read_text()
    entry = json.loads(text)
    raw = {"garbage": b"\x00\xff not json", "truncated": text[: len(text) // 2].encode(), "empty": b""}
    if damage in raw:
        path.write_bytes(raw[damage])
    elif damage == "checksum":  # a changed number without the matching checksum
        entry["calibration"]["delta_achieved"] = encode_value(1e-7)
        path.write_text(json.dumps(entry))
    elif damage == "foreign":  # the entry of another request (ε = 3) under this request's file name
        entry["key"] = entry["key"].replace(encode_value(1.0)["f"], encode_value(3.0)["f"])
        path.write_text(json.dumps(_tamper(entry, "none")))
    elif damage == "type":  # an integer threshold stored as a float
        entry["calibration"]["rounds"][1][1] = encode_value(float(entry["calibration"]["rounds"][1][1]["i"]))
        path.write_text(json.dumps(_tamper(entry, "none")))
    else:
        path.write_text(json.dumps(_tamper(entry, damage)))
    rc.clear_memory()
    got = rc.cached_rounds(NAME, *TWO)
    assert repr(got) == repr(fresh[TWO])
    assert len(computed) == 2  # not read back: computed afresh
    rc.clear_memory()
    assert repr(rc.cached_rounds(NAME, *TWO)) == repr(fresh[TWO]) and len(computed) == 2  # rewritten intact


def test_the_key_separates_every_argument(cache, fresh, computed):
    base = rc._key(NAME, *TWO, 4096)
    others = [rc._key("other", *TWO, 4096), rc._key(NAME, 1.0 + 2**-52, *TWO[1:], 4096),
              rc._key(NAME, 1.0, 2e-6, *TWO[2:], 4096), rc._key(NAME, 1.0, 1e-6, 4, TWO[3], 4096),
              rc._key(NAME, 1.0, 1e-6, 3, (0.25, 0.75), 4096), rc._key(NAME, 1.0, 1e-6, 3, (0.15, 0.35, 0.5), 4096),
              rc._key(NAME, *ONE, 4096), rc._key(NAME, *TWO, 2048)]
    assert len({base, *others}) == len(others) + 1 and None not in others
    assert rc._key(NAME, 1.0, 1e-6, 3, (1, 0), 4096) is None  # not plain floats: not cached
    rc.cached_rounds(NAME, *TWO)
    rc.cached_rounds(NAME, *ONE)
    assert len(_files(cache)) == 2 and len(computed) == 2


def test_mad_and_mad2r_share_the_entry_of_their_shares(cache, monkeypatch):
    """``mad`` and ``mad2r`` calibrate the same rounds (one entry, each named for itself); at Δ0 = 1 ``mad`` runs
    one round, a different entry."""
    import sparsedp as sd
    from sparsedp.mechanisms.adaptive_weighting import _calibrate

    seen = []
    monkeypatch.setattr(rc, "calibrate_rounds", lambda name, *a: seen.append(a[3]) or aw.calibrate_rounds(name, *a))
    for mech in (sd.MAD(), sd.MAD2R()):
        for l0 in (1, 3):
            shares = mech.rounds_shares(l0)
            cal = _calibrate(mech.name, 1.0, 1e-6, l0, shares, 4096)
            assert cal.mechanism == mech.name and cal.shares == shares
    assert sorted(seen) == [(0.15, 0.85), (0.15, 0.85), (1.0,)]  # mad2r at 3 read mad's entry
    assert len(_files(cache)) == 3
