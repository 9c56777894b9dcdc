"""The ledger composes every charge by its privacy-loss distribution (issue 29's acceptance on the ledger).

The independent check below rebuilds each charge's pair from the same profile samples (the accountants'
numbers) with a brute-force lower convex envelope (not :func:`sparsedp.accounting.pld.hull_pair`'s monotone
chain) and composes the pairs by direct shift-and-add on the exact loss lattice (no FFT, no truncation, no
rounding: the sampled ε are multiples of the step), so its δ(ε) is the exact composed δ of those pairs, which
dominate the true one.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from sparsedp.accounting import calibrate
from sparsedp.accounting.events import event_of
from sparsedp.accounting.pld import DEFAULT_STEP
from sparsedp.ledger import Charge, Ledger

BUDGET = dict(epsilon=3.0, delta=1e-5)
H = DEFAULT_STEP


def _envelope_atoms(eps, dlt):
    """Loss atoms (integer multiples of H) and masses of the pair whose hockey-stick curve is the lower convex
    envelope of the profile points and their swapped images, by brute force over chords."""
    eps, dlt = np.asarray(eps, float), np.minimum.accumulate(np.asarray(dlt, float))
    xs = np.concatenate([[0.0], np.exp(-eps), np.exp(eps)])
    ys = np.concatenate([[1.0], 1 - np.exp(-eps) + np.exp(-eps) * dlt, dlt])
    order = np.lexsort((ys, xs))
    xs, ys = xs[order], ys[order]
    env = ys.copy()  # envelope at the sample abscissae: min over chords of points bracketing them
    for i in range(xs.size):
        for j in range(i + 1, xs.size):
            if xs[j] <= xs[i]:
                continue
            lam = (xs[i + 1:j] - xs[i]) / (xs[j] - xs[i])
            env[i + 1:j] = np.minimum(env[i + 1:j], ys[i] + lam * (ys[j] - ys[i]))
    keep = np.concatenate([[True], np.diff(xs) > 0])
    xs, env = xs[keep], env[keep]
    slopes = np.append(np.diff(env) / np.diff(xs), 0.0)
    q = np.maximum(np.diff(slopes), 0.0)
    b = xs[1:]
    p = b * q
    nz = p > 1e-300
    keys = np.rint(np.log(b[nz]) / H).astype(np.int64)
    assert np.allclose(keys * H, np.log(b[nz]), atol=1e-9)  # on the lattice: the composition below is exact
    return keys, p[nz], float(env[-1])


def _compose_exact(parts):
    """δ(ε) of the product of the pairs (each part: (keys, masses, infinity), count), by shift-and-add."""
    lo, arr, keep = 0, np.array([1.0]), 1.0
    for (keys, mass, inf), count in parts:
        for _ in range(count):
            k0, k1 = int(keys.min()), int(keys.max())
            out = np.zeros(arr.size + k1 - k0)
            for k, m in zip(keys.tolist(), mass.tolist()):
                out[k - k0: k - k0 + arr.size] += m * arr
            lo, arr, keep = lo + k0, out, keep * (1.0 - inf)
    losses = (lo + np.arange(arr.size)) * H

    def delta(e: float) -> float:
        return float(np.dot(arr, np.maximum(0.0, -np.expm1(e - losses)))) + (1.0 - keep)

    return delta


def _epsilon_for(delta_of, target):
    lo, hi = 0.0, 50.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if delta_of(mid) <= target else (mid, hi)
    return hi


@pytest.fixture(scope="module")
def topk_charge():
    return Charge.from_calibration(calibrate("topk-csh", epsilon=0.5, delta=1e-7, top_k=100, debias=True))


def test_topk_csh_ledger_admits_15_never_past_the_composed_delta(tmp_path, topk_charge, fill):
    ev = topk_charge.event
    assert ev.kind == "csh" and ev.debias and ev.k == 100 and ev.analysis == "exact"
    with Ledger(tmp_path / "l.db") as led:
        led.set_budget("basic", **BUDGET)
        led.set_budget("csh", **BUDGET)
        n_basic = fill(led, "basic", lambda: led.charge("basic", epsilon=0.5, delta=1e-7, mechanism="topk-csh"))
        planned = led.how_many("csh", topk_charge, cap=400)
        n = fill(led, "csh", lambda: led.charge("csh", topk_charge))
        assert n_basic == 6 and n == planned >= 15
        eps_star = led.spent_epsilon("csh")
        assert eps_star <= 3.0
    # independent: the exact composition of n (and n + 1) hull pairs of the same certified profile samples
    atoms = _envelope_atoms(*ev.profile_samples())
    d_n = _compose_exact([(atoms, n)])
    d_n1 = _compose_exact([(atoms, n + 1)])
    assert d_n(eps_star) <= 1e-5  # never past the composed δ at the certified ε
    assert d_n(3.0) <= 1e-5
    assert d_n1(3.0) > 0.9e-5  # and not far from the best that composition can certify
    # the pair dominates the certified profile between the samples too
    eps_s, _ = ev.profile_samples()
    for e in (0.5 * (eps_s[3] + eps_s[4]), 0.5 * (eps_s[9] + eps_s[10])):
        assert _compose_exact([(atoms, 1)])(e) >= ev.delta_at(e) * (1 - 1e-9)


def test_mixed_dataset_certifies_below_the_basic_sum(tmp_path, topk_charge):
    gshm = Charge.from_calibration(calibrate("gshm", epsilon=0.5, delta=1e-7, l0=10))
    lap = Charge.from_calibration(calibrate("laplace", epsilon=0.5, delta=1e-7, l0=3))
    mix = [(gshm, 10), (lap, 3), (topk_charge, 2)]
    with Ledger(tmp_path / "l.db") as led:
        led.set_budget("d", epsilon=8.0, delta=1e-5)
        for c, k in mix:
            for _ in range(k):
                led.charge("d", c)
        s = led.spent("d")
        assert s.n_charges == 15 and s.epsilon == pytest.approx(7.5) and s.delta == pytest.approx(1.5e-6)
        eps_star = s.epsilon_at_budget_delta
        assert eps_star < 7.5 - 1.0  # well below basic composition's 7.5
    delta_of = _compose_exact([(_envelope_atoms(*c.event.profile_samples()), k) for c, k in mix])
    assert delta_of(eps_star) <= 1e-5
    assert eps_star - _epsilon_for(delta_of, 1e-5) < 0.02  # within the discretisation of the exact composition


def test_events_and_samples_are_stored_for_a_later_process(tmp_path):
    import json
    import sqlite3

    cal = calibrate("laplace", epsilon=0.5, delta=1e-7, l0=3)
    path = tmp_path / "l.db"
    with Ledger(path) as led:
        led.set_budget("d", **BUDGET)
        for _ in range(6):
            led.charge("d", Charge.from_calibration(cal))
        assert led.spent_epsilon("d") < 3.0  # the composed accounting: this process has the event's samples now
        led.charge("d", Charge.from_calibration(cal))  # stored with them (and the earlier rows backfilled)
        before = led.spent_epsilon("d")
    rows = sqlite3.connect(str(path)).execute("SELECT event, samples FROM charges").fetchall()
    assert len({r for r in rows}) == 1  # the samples, once computed, are stored with every row of the event
    (ev_text, smp_text), *_ = rows
    ev = json.loads(ev_text)
    assert ev["event"] == "laplace-threshold" and ev["scale"] == str(cal.noise.scale) and ev["l0"] == 3
    eps, dlt = json.loads(smp_text)
    assert len(eps) == len(dlt) > 10
    with Ledger(path) as led:  # a new connection recomputes the same composition from the stored parameters
        assert led.spent_epsilon("d") == before
        assert led.history("d")[0].event == event_of(cal)
    assert before <= 3.0 < 7 * 0.5 and math.isfinite(before)


def test_sequence_event_charge_composes_its_parts(tmp_path, fill):
    """The automatic bound's two-part charge: a pure choice then the release, charged as one event."""
    from sparsedp.accounting.events import PureEvent, SequenceEvent
    from sparsedp.errors import InvalidParameterError

    inner = event_of(calibrate("gshm", epsilon=0.4, delta=1e-7, l0=10))
    seq = SequenceEvent([PureEvent(epsilon=0.1, delta=0.0), inner])
    c = Charge.of_event(seq, mechanism="gshm+auto-bound")
    assert (c.epsilon, c.delta) == (pytest.approx(0.5), 1e-7) and c.event is seq
    with pytest.raises(InvalidParameterError, match="Charge.of_event"):
        Charge(epsilon=0.6, delta=1e-7, neighbours=seq.neighbours, mechanism="x", event=seq)
    with Ledger(tmp_path / "l.db") as led:
        led.set_budget("d", **BUDGET)
        n = fill(led, "d", lambda: led.charge("d", c))
        assert n > 6  # basic composition: 3 / 0.5
        (rec, *_) = led.history("d")
        assert rec.event == seq
    # independent: the parts' pairs composed exactly; the ledger's n charges fit, n + 1 do not by much
    parts = [(_envelope_atoms(*PureEvent(epsilon=0.1, delta=0.0).profile_samples()), n),
             (_envelope_atoms(*inner.profile_samples()), n)]
    assert _compose_exact(parts)(3.0) <= 1e-5
