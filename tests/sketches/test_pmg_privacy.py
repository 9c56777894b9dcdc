"""Private Misra–Gries (thesis Algorithm 13, §3.6, §3.7): thresholds against the spec's golden values,
exact hockey-stick δ(ε) by enumeration on tiny sketches (spec §5.2), the implementation's output law
against that enumeration, the noise structure, Theorem 3.1's error bound, the pure-DP variant and the
merged-sketch release. Golden values: shared/specs/seed-004b-thesis-mg-skew.md §4, §5.0, §5.2, §5.3."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from sparsedp.accounting.discrete import dlaplace_pmf
from sparsedp.errors import InvalidParameterError
from sparsedp.noise import InsecureSeededRandom
from sparsedp.sketches.misra_gries import MisraGries
from sparsedp.mechanisms.mg_stream import PrivateMisraGries, misra_gries_release
from sparsedp.sketches.private_mg import (
    merged_private_misra_gries, merged_threshold, pmg_threshold, private_misra_gries, pure_private_misra_gries,
    theorem_3_1_slack)


# ---------------------------------------------------------------- constants (spec §4 derived numbers)
@pytest.mark.parametrize("eps,delta,laplace,geo", [(1, 1e-6, 30.8282, 33), (0.1, 1e-6, 299.2825, 301),
                                                    (1, 1e-9, 44.6438, 47), (0.5, 1e-5, 51.4462, 53)])
def test_thresholds_match_spec(eps, delta, laplace, geo):
    assert pmg_threshold(eps, delta, noise="laplace") == pytest.approx(laplace, abs=1e-4)
    assert pmg_threshold(eps, delta) == geo


def test_theorem_3_1_slack_matches_spec():
    lower, upper = theorem_3_1_slack(100, 0, 1.0, 1e-6, 0.05, noise="laplace")
    assert upper == pytest.approx(15.2216, abs=2e-4)
    assert lower == pytest.approx(46.0498, abs=2e-4)
    lower_n, _ = theorem_3_1_slack(100, 1010, 1.0, 1e-6, 0.05, noise="laplace")
    assert lower_n - lower == pytest.approx(10.0)


def test_merged_threshold_is_the_smallest_valid_integer():
    for eps, delta, k in [(1.0, 1e-6, 1), (1.0, 1e-6, 10), (0.5, 1e-9, 100)]:
        tau = merged_threshold(eps, delta, k)
        t = int(tau) - 1
        q = math.exp(-eps / k)
        tail = lambda t: q ** t / (1 + q)  # noqa: E731  P[Z >= t], spec §1.6 item 2
        assert k * tail(t) <= delta < k * tail(t - 1)
        # the continuous version 1 + (k/eps) ln(k/(2 delta)) (spec §1.8) is close
        assert abs(tau - (1 + k / eps * math.log(k / (2 * delta)))) <= k / eps + 1


# ---------------------------------------------------------------- exact output law of Algorithm 13
def output_law(slots, eps, tau, *, shared=True, vmax=None, H=60):
    """Exact distribution of PMG's output {key: value} (values >= vmax lumped), discrete Laplace(1/eps).

    slots: list of (key, count, is_dummy) for the k slots. Returns {frozenset((key, v)): prob}."""
    scale = 1.0 / eps
    vmax = vmax or (max(c for _, c, _ in slots) + H)
    etas = np.arange(-H, H + 1) if shared else np.array([0])
    p_eta = dlaplace_pmf(etas, scale) if shared else np.array([1.0])
    vals = np.arange(tau, vmax)
    per_slot = []  # (H', n_outcomes): [absent, v = tau..vmax-1, tail]
    for key, c, dummy in slots:
        base = c + etas[:, None]
        pv = dlaplace_pmf(vals[None, :] - base, scale)
        present = dlaplace_pmf_sf(tau - base, scale)  # P[c + eta + Z >= tau]
        tail = dlaplace_pmf_sf(vmax - base, scale)
        row = np.concatenate([1.0 - present, pv, tail], axis=1)
        if dummy:
            row = np.zeros_like(row)
            row[:, 0] = 1.0
        per_slot.append((key, row))
    labels = [None] + [int(x) for x in vals] + ["tail"]
    # joint law over slot outcomes: sum_eta p(eta) prod_slots row_slot(eta)
    joint = p_eta[:, None] * per_slot[0][1]
    shape = [per_slot[0][1].shape[1]]
    for _, row in per_slot[1:]:
        joint = (joint[:, :, None] * row[:, None, :]).reshape(len(etas), -1)
        shape.append(row.shape[1])
    joint = joint.sum(axis=0).reshape(shape)
    out = {}
    for idx in np.ndindex(*shape):
        pr = joint[idx]
        if pr == 0.0:
            continue
        o = frozenset((per_slot[s][0], labels[i]) for s, i in enumerate(idx) if i != 0)
        out[o] = out.get(o, 0.0) + pr
    return out


def dlaplace_pmf_sf(t, scale):
    """P[Z >= t] elementwise for integer arrays t (the accounting module's law)."""
    from sparsedp.accounting.discrete import dlaplace_sf
    return np.asarray(dlaplace_sf(np.asarray(t, dtype=float), scale), dtype=float)


def hockey(P, Q, eps):
    return sum(max(0.0, p - math.exp(eps) * Q.get(o, 0.0)) for o, p in P.items())


def delta_pair(a, b, eps, tau, mech_eps=None, **kw):
    """Exact delta(eps) of the pair for the mechanism run at mech_eps (default eps)."""
    me = eps if mech_eps is None else mech_eps
    P, Q = output_law(a, me, tau, **kw), output_law(b, me, tau, **kw)
    return max(hockey(P, Q, eps), hockey(Q, P, eps))


def slots_of(mg):
    codes, counts, dummy = mg.slot_arrays()
    return [(("dummy", c) if d else c, x, d) for c, x, d in zip(codes.tolist(), counts.tolist(), dummy.tolist())]


def test_all_shift_pair_golden_values():
    # spec §5.0 exact.py: c = (30, 30) vs (31, 31), tau_geo = 15 at eps = 1, delta = 0.01
    tau = pmg_threshold(1.0, 0.01)
    assert tau == 15
    a = [(0, 30, False), (1, 30, False)]
    b = [(0, 31, False), (1, 31, False)]
    assert delta_pair(a, b, 1.0, tau) < 1e-20
    assert delta_pair(a, b, 0.9, tau, mech_eps=1.0) == pytest.approx(0.00998, rel=0.01)
    assert delta_pair(a, b, 0.5, tau, mech_eps=1.0) == pytest.approx(0.143, rel=0.01)


def neighbouring_sketch_pairs(k, d, n_pairs, gen):
    pairs = []
    while len(pairs) < n_pairs:
        n = int(gen.integers(5, 60))
        w = gen.dirichlet(np.ones(d) * 0.7)
        s = gen.choice(d, size=n, p=w)
        i = int(gen.integers(0, n))
        sp = np.delete(s, i)
        pairs.append((slots_of(MisraGries(k).update(s)), slots_of(MisraGries(k).update(sp))))
    return pairs


def test_exact_delta_on_real_neighbouring_sketches():
    eps, delta = 1.0, 0.01
    tau = pmg_threshold(eps, delta)
    gen = np.random.default_rng(11)
    worst = 0.0
    for a, b in neighbouring_sketch_pairs(2, 3, 40, gen):
        worst = max(worst, delta_pair(a, b, eps, tau))
    assert worst <= delta  # spec §5.0: max exact delta 4.5e-6 at these settings
    assert worst < 1e-4


@pytest.mark.parametrize("a,b", [
    # synthetic pairs of the Lemma 3.1 states with counts at the threshold (spec §5.2 (b))
    ([(0, 15, False), (1, 14, False)], [(0, 14, False), (1, 14, False)]),          # S3: single bump
    ([(0, 15, False), (2, 1, False)], [(0, 15, False), (1, 0, False)]),            # S4: swapped count-1 key
    ([(0, 16, False), (1, 15, False)], [(0, 17, False), (1, 16, False)]),          # S1: all-shift
    ([(0, 14, False), (2, 0, False)], [(0, 15, False), (1, 1, False)]),            # S2
])
def test_exact_delta_on_lemma_3_1_states(a, b):
    eps, delta = 1.0, 0.01
    assert delta_pair(a, b, eps, pmg_threshold(eps, delta)) <= delta


def test_negative_controls_show_the_enumeration_can_fail():
    eps, delta = 1.0, 0.01
    tau = pmg_threshold(eps, delta)
    # (i) no shared noise: the all-shift pair moves both counters, l1 = 2 > 1
    a, b = [(0, 30, False), (1, 30, False)], [(0, 31, False), (1, 31, False)]
    assert delta_pair(a, b, eps, tau, shared=False) > 0.1
    # (ii) threshold 1: a count-1 key present on one side only is released half of the time
    a, b = [(0, 15, False), (2, 1, False)], [(0, 15, False), (1, 0, False)]
    assert delta_pair(a, b, eps, 1) > 0.2


def test_implementation_output_law_matches_enumeration():
    """Chi-square of the released key pattern and values of private_misra_gries vs the exact law."""
    mg = MisraGries(2).update([7] * 15 + [9] * 13 + [7])  # counters {7: 16, 9: 13}
    slots = slots_of(mg)
    eps, delta = 1.0, 0.01
    tau = pmg_threshold(eps, delta)
    law = output_law(slots, eps, tau)
    rng = InsecureSeededRandom(5)
    R = 4000
    obs = {}
    for _ in range(R):
        rel = private_misra_gries(mg, epsilon=eps, delta=delta, rng=rng).to_dict()
        pattern = tuple(sorted(rel))
        obs[pattern] = obs.get(pattern, 0) + 1
    exp = {}
    for o, pr in law.items():
        pattern = tuple(sorted(k for k, _ in o))
        exp[pattern] = exp.get(pattern, 0.0) + pr
    cats = sorted(set(exp) | set(obs))
    f_obs = np.array([obs.get(c, 0) for c in cats], float)
    f_exp = np.array([exp.get(c, 0.0) for c in cats]) * R
    keep = f_exp > 5
    assert set(obs) <= set(exp)
    chi = stats.chisquare(f_obs[keep], f_exp[keep] * f_obs[keep].sum() / f_exp[keep].sum())
    assert chi.pvalue > 1e-3


def test_noise_structure_shared_plus_local():
    """Var(c̃ − c) = 2 Var(Z) and Cov = Var(Z) (one shared sample, spec §5.3)."""
    mg = MisraGries(3).update([1] * 500 + [2] * 400 + [3] * 300)
    rng = InsecureSeededRandom(6)
    R = 3000
    errs = np.empty((R, 3))
    for r in range(R):
        rel = private_misra_gries(mg, epsilon=0.5, delta=1e-6, rng=rng).to_dict()
        errs[r] = [rel[1] - 500, rel[2] - 400, rel[3] - 300]
    q = math.exp(-0.5)
    var_z = 2 * q / (1 - q) ** 2
    cov = np.cov(errs.T)
    assert np.allclose(np.diag(cov), 2 * var_z, rtol=0.1)
    off = cov[np.triu_indices(3, 1)]
    assert np.allclose(off, var_z, rtol=0.15)
    assert abs(errs.mean()) < 0.2


@pytest.mark.parametrize("k,eps", [(10, 1.0), (100, 0.5)])
def test_theorem_3_1_error_bound_holds_empirically(k, eps):
    delta, beta, R = 1e-6, 0.05, 150
    gen = np.random.default_rng(k)
    stream = gen.zipf(1.4, 20000) % 3000
    f = np.bincount(stream, minlength=3000)
    mg = MisraGries(k).update(stream)
    rng = InsecureSeededRandom(7)
    viol = {"discrete": 0, "laplace": 0}
    for _ in range(R):
        rel = private_misra_gries(mg, epsilon=eps, delta=delta, rng=rng).to_dict()
        est = np.zeros_like(f)
        for x, c in rel.items():
            est[x] = c
        assert all(f[x] > 0 for x in rel)  # f(x) = 0 implies f̂(x) = 0
        assert len(rel) <= k
        for noise in viol:
            lower, upper = theorem_3_1_slack(k, stream.size, eps, delta, beta, noise=noise)
            if np.any(est < f - lower) or np.any(est > f + upper):
                viol[noise] += 1
    for noise, v_ in viol.items():
        assert stats.binomtest(v_, R, beta, alternative="greater").pvalue > 1e-3, (noise, v_)


# ---------------------------------------------------------------- pure DP (§3.6)
def pure_law(C, scale, k=1, W=60):
    """Exact law of the top-1 release (key, value) for integer vector C + iid discrete Laplace, ties by key."""
    lo, hi = min(C) - W, max(C) + W
    ws = np.arange(lo, hi + 1)
    pm = [dlaplace_pmf(ws - c, scale) for c in C]
    cdf_lt = [np.cumsum(p) - p for p in pm]  # P[C_i + Z < w]
    cdf_le = [np.cumsum(p) for p in pm]
    law = {}
    for j in range(len(C)):
        pr = pm[j].copy()
        for i in range(len(C)):
            if i < j:
                pr = pr * cdf_lt[i]
            elif i > j:
                pr = pr * cdf_le[i]
        for w, p in zip(ws.tolist(), pr.tolist()):
            if p > 0:
                law[(j, w)] = p
    return law


def scaled_postprocessed(mg, d):
    k, n, g = mg.k, mg.n, mg.gamma
    st = mg.counters(include_zero=True)
    return [max((k + 1) * (st.get(x, 0) + g) - n, 0) if x in st else 0 for x in range(d)]


def test_pure_variant_is_eps_dp_exactly_on_tiny_streams():
    import itertools
    eps, k, d = 1.0, 1, 3
    scale = (2 * k + 1) / eps
    worst_l1, worst_delta = 0, 0.0
    vecs = {}
    for n in range(7):
        for s in itertools.product(range(d), repeat=n):
            vecs[s] = scaled_postprocessed(MisraGries(k).update(np.array(s, dtype=np.int64)), d)
    checked = set()
    for s, C in vecs.items():
        for i in range(len(s)):
            Cp = vecs[s[:i] + s[i + 1:]]
            worst_l1 = max(worst_l1, sum(abs(a - b) for a, b in zip(C, Cp)))
            key = (tuple(C), tuple(Cp))
            if key in checked:
                continue
            checked.add(key)
            P, Q = pure_law(C, scale), pure_law(Cp, scale)
            worst_delta = max(worst_delta, hockey(P, Q, eps), hockey(Q, P, eps))
    assert worst_l1 <= 2 * k + 1
    assert worst_delta < 1e-9
    # negative control: noise calibrated to a third of the worst l1 change is not eps-DP on that pair
    bad = max(((C, vecs[s[:i] + s[i + 1:]]) for s, C in vecs.items() for i in range(len(s))),
              key=lambda pr: sum(abs(a - b) for a, b in zip(*pr)))
    P, Q = pure_law(bad[0], worst_l1 / (3 * eps)), pure_law(bad[1], worst_l1 / (3 * eps))
    assert max(hockey(P, Q, eps), hockey(Q, P, eps)) > 1e-3


def test_pure_release_shape_and_values(rng):
    gen = np.random.default_rng(9)
    s = gen.zipf(1.5, 5000) % 200
    mg = MisraGries(10).update(s)
    rel = pure_private_misra_gries(mg, epsilon=1.0, universe=200, rng=rng)
    assert rel.n_keys_out == 10 and list(rel.keys) == sorted(rel.keys)
    assert rel.calibration.delta == 0.0
    f = np.bincount(s, minlength=200)
    assert int(np.argmax(f)) in rel.keys  # the heaviest key (f = 1901, noise scale ~1.5) survives
    strs = MisraGries(10).update([f"k{x}" for x in s.tolist()])
    rel2 = pure_private_misra_gries(strs, epsilon=1.0, universe=[f"k{x}" for x in range(200)], rng=rng)
    assert f"k{int(np.argmax(f))}" in rel2.keys and rel2.n_keys_out == 10
    with pytest.raises(InvalidParameterError):
        pure_private_misra_gries(mg.merge(mg), epsilon=1.0, universe=200, rng=rng)


# ---------------------------------------------------------------- merged sketches and the entry point
def test_pmg_refuses_merged_sketches(rng):
    a = MisraGries(3).update([1, 2, 3, 1])
    with pytest.raises(InvalidParameterError):
        private_misra_gries(a.merge(a), epsilon=1.0, delta=1e-6, rng=rng)


def test_merged_release_hides_count_one_keys(rng):
    k = 4
    sk = [MisraGries(k).update(np.array([1] * 3000 + [2] * 2000 + [3, 4, 5])) for _ in range(3)]
    merged = MisraGries.merge_all(sk)
    tau = merged_threshold(1.0, 1e-6, k)
    for _ in range(50):
        rel = merged_private_misra_gries(merged, epsilon=1.0, delta=1e-6, rng=rng)
        assert set(rel.keys) <= {1, 2}
        assert all(c >= tau for c in rel.counts)
    assert rel.calibration.delta_achieved <= 1e-6


def test_misra_gries_release_entry_point(rng):
    gen = np.random.default_rng(10)
    s = gen.zipf(1.3, 50000)
    r1 = misra_gries_release(s, sketch_size=50, epsilon=1.0, delta=1e-6, rng=rng)
    assert r1.calibration.analysis == "pmg-geometric" and 1 in r1.keys
    chunks = np.array_split(s, 5)
    r2 = misra_gries_release(iter(chunks), sketch_size=50, epsilon=1.0, delta=1e-6, rng=rng)
    r3 = misra_gries_release(iter(s.tolist()), sketch_size=50, epsilon=1.0, delta=1e-6, rng=rng)
    assert set(r2.keys) - set(r1.keys) == set() or abs(len(r2.keys) - len(r1.keys)) < 10
    assert r3.n_keys_out > 0
    merged = [MisraGries(50).update(c) for c in chunks]
    r4 = misra_gries_release(merged, sketch_size=50, epsilon=1.0, delta=1e-6, variant="merged-laplace", rng=rng)
    assert r4.calibration.analysis == "merged-laplace"
    with pytest.raises(InvalidParameterError):
        misra_gries_release(s, sketch_size=50, epsilon=1.0, delta=1e-6, variant="nope", rng=rng)
    with pytest.raises(InvalidParameterError):
        misra_gries_release(merged, sketch_size=40, epsilon=1.0, delta=1e-6, rng=rng)
    with pytest.raises(InvalidParameterError):
        misra_gries_release(s, sketch_size=50, epsilon=1.0, delta=1e-6, variant="pure", rng=rng)


def test_csh_on_single_and_merged_sketches(rng):
    gen = np.random.default_rng(12)
    s = gen.zipf(1.3, 40000)
    single = MisraGries(30).update(s)
    r1 = misra_gries_release(single, sketch_size=30, epsilon=1.0, delta=1e-6, variant="csh", rng=rng)
    merged = MisraGries.merge_all([MisraGries(30).update(c) for c in np.array_split(s, 3)])
    r2 = misra_gries_release(merged, sketch_size=30, epsilon=1.0, delta=1e-6, rng=rng)  # default for merged
    for r, sk in ((r1, single), (r2, merged)):
        assert r.calibration.mechanism == "csh" and r.calibration.k == 30
        assert set(r.keys) <= set(sk.counters()) and 1 in r.keys
        assert r.calibration.delta_achieved <= 1e-6


def test_private_misra_gries_object(rng):
    import pandas as pd
    pmg = PrivateMisraGries(5, epsilon=1.0, delta=1e-6)
    pmg.update(pd.Series([1] * 300 + [2] * 200 + [3]))
    rel = pmg.release(rng=rng)
    assert set(rel.keys) == {1, 2}
    pure = PrivateMisraGries(5, epsilon=1.0, variant="pure").update([1] * 300 + [2, 3])
    assert pure.release(rng=rng, universe=10).n_keys_out == 5
    with pytest.raises(InvalidParameterError):
        PrivateMisraGries(5, epsilon=1.0)  # delta is required except for the pure variant


def test_pure_variant_on_several_streams_option_a(rng):
    """§3.7 option A: summed §3.6 post-processed sketches; neighbours (one element removed from one
    stream) keep the l1 sensitivity of the scaled vector within 2k+1 (exhaustive on tiny inputs)."""
    import itertools
    k, d = 1, 3
    def vec(streams):
        out = [0] * d
        for s in streams:
            mg = MisraGries(k).update(np.array(s, dtype=np.int64))
            for x, c in enumerate(scaled_postprocessed(mg, d)):
                out[x] += c
        return out
    worst = 0
    for s1 in itertools.chain.from_iterable(itertools.product(range(d), repeat=n) for n in range(5)):
        for s2 in [(0, 1), (2, 2, 2), ()]:
            base = vec([s1, s2])
            for i in range(len(s1)):
                worst = max(worst, sum(abs(a - b) for a, b in zip(base, vec([s1[:i] + s1[i + 1:], s2]))))
    assert 0 < worst <= 2 * k + 1
    sks = [MisraGries(3).update([1] * 50 + [2] * 30), MisraGries(3).update([1] * 40 + [3] * 5)]
    rel = pure_private_misra_gries(sks, epsilon=1.0, universe=10, rng=rng)
    assert rel.n_keys_out == 3 and 1 in rel.keys
