"""ALP for signed values (thesis §2.10, 2m columns; ``docs/proofs/alp-signed.md``) and ALP's memory guard.

The embedding code itself (``alp_projection_packed(signed=True)`` with no flips) is checked against the
construction on every rounding of tiny inputs; the exact worst-case privacy loss (closed form over independent
cells) against brute force over all outputs and against the claim ε‖x − x′‖₁; the sampler's cell frequencies
against the exact cell law; accuracy against the §2.2 reduction; and the refusal of oversized structures
before anything is drawn or charged.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import polars as pl
import pytest

import sparsedp as sd
from sparsedp.errors import InputDataError, InvalidParameterError
from sparsedp.ledger import Ledger
from sparsedp.noise import InsecureSeededRandom
from sparsedp.sketches import alp as A


class FixedHashes:
    """A fixed hash: ``table[code] = [h_1, …, h_M]`` (0-based rows), with the column range of HashFamily.rows."""

    def __init__(self, table: dict, s: int):
        self.table, self.s = table, s
        self.m = len(next(iter(table.values())))

    def rows(self, codes, lo=0, hi=None):
        hi = self.m if hi is None else hi
        return np.array([self.table[int(c)][lo:hi] for c in codes], dtype=np.int64).reshape(len(codes), hi - lo)

    def __call__(self, code, b):
        return self.table[code][b]


def _embedding(codes, y, table, s):
    """Pre-noise bits (2m × s) of the real code path: RR probability 0."""
    h = FixedHashes(table, s)
    return A.alp_projection(np.asarray(codes, np.uint64), np.asarray(y), h, Fraction(0), InsecureSeededRandom(0),
                            signed=True)


def test_embedding_is_the_construction():
    """1^{m+y} 0^{m−y} per key; AND over colliding keys in columns 1..m, OR in m+1..2m; zero keys invisible."""
    m, s = 3, 2
    gen = np.random.default_rng(0)
    for _ in range(40):
        table = {c: gen.integers(0, s, 2 * m).tolist() for c in (1, 2, 3)}
        y = gen.integers(-m - 1, m + 2, 3)  # beyond ±m: clipped
        z = _embedding([1, 2, 3], y, table, s)
        want = np.zeros((2 * m, s), np.uint8)
        want[:m] = 1
        for b in range(2 * m):
            for a in range(s):
                bits = [int(min(max(yy, -m), m) >= b + 1 - m) for c, yy in zip((1, 2, 3), y) if table[c][b] == a]
                if bits:
                    want[b, a] = min(bits) if b < m else max(bits)
        assert np.array_equal(z, want)
    assert np.array_equal(_embedding([1], [0], {1: [0] * 6}, 2), np.repeat([[1, 1], [0, 0]], [3, 3], axis=0))


def _brute_force_max_loss(x, xp, table, eps, alpha, m, s):
    """max over all 2^{2ms} outputs of ln P[z̃ | x]/P[z̃ | x′]: every rounding of every key through the real
    embedding, then independent RR on each cell."""
    p = float(Fraction(A._prob_up(Fraction(1) / (Fraction(alpha) + 2)), 2 ** 64))
    cells = 2 * m * s
    outputs = np.array(list(itertools.product((0, 1), repeat=cells)), dtype=np.uint8)

    def law(xv):
        keys = list(xv)
        out = np.zeros(len(outputs))
        for up in itertools.product((0, 1), repeat=len(keys)):
            pr, ys = 1.0, []
            for key, u in zip(keys, up):
                r = eps * xv[key] / alpha
                fr = r - math.floor(r)
                pr *= fr if u else 1 - fr
                ys.append(math.floor(r) + u)
            if pr == 0:
                continue
            z = _embedding(keys, ys, table, s).reshape(-1)
            out += pr * np.prod(np.where(outputs == z[None], 1 - p, p), axis=1)
        return out

    return float(np.max(np.log(law(x) / law(xp))))


@pytest.mark.parametrize("m,s", [(1, 1), (1, 2), (2, 1)])
def test_closed_form_loss_equals_brute_force(m, s):
    gen = np.random.default_rng(10 * m + s)
    for _ in range(5):
        table = {i: gen.integers(0, s, 2 * m).tolist() for i in (1, 2)}
        alpha, eps = float(gen.choice([0.5, 1.0, 3.0])), float(gen.choice([0.5, 1.0]))
        lim = m * alpha / eps
        x = {i: float(gen.uniform(-lim, lim)) for i in (1, 2)}
        xp = dict(x)
        xp[1] += float(gen.uniform(-0.8, 0.8))
        closed = A.projection_max_privacy_loss(x, xp, table, epsilon=eps, alpha=alpha, m=2 * m, s=s, signed=True)
        assert closed == pytest.approx(_brute_force_max_loss(x, xp, table, eps, alpha, m, s), abs=1e-9)


@pytest.mark.parametrize("layout", ["one_row", "distinct", "random"])
def test_privacy_loss_bounded_by_eps_l1_across_signs(layout):
    gen = np.random.default_rng({"one_row": 1, "distinct": 2, "random": 3}[layout])
    worst = 0.0
    for _ in range(150):
        s, m, d = 5, int(gen.integers(1, 5)), 4
        alpha, eps = float(gen.uniform(0.3, 6)), float(gen.uniform(0.2, 3))
        if layout == "one_row":
            table = {i: [0] * (2 * m) for i in range(d)}
        elif layout == "distinct":
            table = {i: [i] * (2 * m) for i in range(d)}
        else:
            table = {i: gen.integers(0, s, 2 * m).tolist() for i in range(d)}
        lim = 1.3 * m * alpha / eps
        x = {i: float(gen.uniform(-lim, lim)) * (gen.random() < 0.7) for i in range(d)}
        xp = {i: v + float(gen.normal(0, 0.7)) * (gen.random() < 0.5) for i, v in x.items()}  # signs may flip
        l1 = sum(abs(x[i] - xp[i]) for i in x)
        for a, b in ((x, xp), (xp, x)):
            loss = A.projection_max_privacy_loss(a, b, table, epsilon=eps, alpha=alpha, m=2 * m, s=s, signed=True)
            assert loss <= eps * l1 + 1e-12
            if l1 > 0:
                worst = max(worst, loss / (eps * l1))
    assert worst > 0.3  # the check can fail: the loss reaches a large part of the bound


def test_sampler_realises_the_signed_cell_law():
    rng = InsecureSeededRandom(7)
    m, s, alpha = 3, 3, 1.5
    hashes = A.HashFamily(2 * m, s, rng)
    codes = np.array([11, 22, 33], dtype=np.uint64)
    xhat = {11: -2.3, 22: 0.6, 33: 3.7}  # ε-scaled
    table = {c: hashes.rows(np.array([c], dtype=np.uint64))[0].tolist() for c in xhat}
    P = A.cell_probabilities(table, xhat, alpha, 2 * m, s, 1 / (alpha + 2), signed=True).T  # (2m, s)
    R = 6000
    acc = np.zeros((2 * m, s))
    for _ in range(R):
        y = A.rand_round(np.array([xhat[int(c)] for c in codes]) / alpha, rng)
        acc += A.alp_projection(codes, y, hashes, Fraction(1) / (Fraction(alpha) + 2), rng, signed=True)
    z = (acc / R - P) / np.sqrt(P * (1 - P) / R)
    assert np.abs(z).max() < 4.5


def test_signed_estimates_and_error_against_the_reduction():
    """Same ε, u, k: the 2m-column embedding's mean error is below the §2.2 reduction's (which splits every key
    into two entries of the non-negative ALP and reads their difference)."""
    gen = np.random.default_rng(4)
    k, u = 300, 150.0
    x = np.round(gen.uniform(-u, u, k))
    keys = list(range(k))
    a = A.ALP.build((keys, x), epsilon=1.0, k=k, u=u, variant="signed", rng=InsecureSeededRandom(11))
    assert a.m == 2 * math.ceil(u / 3.0) and a.params["columns"] == a.m
    est = a.estimate_many(keys)
    assert np.all(np.abs(est) <= u) and est.tolist()[:20] == [a.estimate(i) for i in range(20)]
    err_signed = np.abs(est - x).mean()
    zero = a.estimate_many(range(10_000, 10_400))  # absent keys decode near 0
    assert abs(zero.mean()) < 3.0
    pos, neg = np.maximum(x, 0), np.maximum(-x, 0)
    red = A.ALP.build(([(i, "+") for i in keys] + [(i, "-") for i in keys], np.concatenate([pos, neg])),
                      epsilon=1.0, k=k, u=u, variant="projection", rng=InsecureSeededRandom(12), enforce_k=False)
    err_red = np.abs(red.estimate_many([(i, "+") for i in keys]) - red.estimate_many([(i, "-") for i in keys])
                     - x).mean()
    assert err_signed < err_red
    assert err_signed <= A.error_bound(3.0, 0.1)  # Lemma 2.11 at ε = 1, k/s = 1/10
    with pytest.raises(InputDataError, match="signed"):
        A.ALP.build((keys, x), epsilon=1.0, k=k, u=u, variant="projection")


def test_save_load_signed(tmp_path):
    a = A.ALP.build(([1, 2], [-40.0, 25.0]), epsilon=1.0, k=2, u=60, variant="signed", rng=InsecureSeededRandom(2))
    a.save(tmp_path / "a.npz")
    b = A.ALP.load(tmp_path / "a.npz")
    assert b.variant == "signed" and b.estimate_many([1, 2, 3]).tolist() == a.estimate_many([1, 2, 3]).tolist()


def test_sd_alp_signed_columns():
    rng = np.random.default_rng(2)
    keys = np.repeat(np.arange(40), 25)
    sign = np.where(np.arange(40) % 2 == 0, 1.0, -1.0)
    df = pl.DataFrame({"u": np.arange(keys.size), "key": keys, "v": sign[keys] * 4 + rng.normal(0, 0.1, keys.size)})
    a = sd.alp(df, "u", "key", 2.0, 0, value=sd.Sum("v", -4, 4), u=200, k=80, signed_embedding="columns",
               rng=InsecureSeededRandom(1))
    assert a.variant == "signed" and not a.signed and "2m-column" in a.guarantee["source"]
    truth = df.group_by("key").agg(pl.col("v").clip(-4, 4).sum()).sort("key")["v"].to_numpy()
    est = a.query_many(range(40))
    assert np.mean(np.sign(est) == np.sign(truth)) >= 0.8
    assert np.abs(est - truth).mean() <= A.error_bound(3.0, 0.1) / 2.0 * a.value_scale


def test_memory_guard_refuses_before_drawing_or_charging(tmp_path):
    class Counting:
        calls = 0

        def __getattr__(self, name):
            Counting.calls += 1
            return getattr(InsecureSeededRandom(0), name)

    with pytest.raises(InvalidParameterError, match=r"GiB.*max_memory") as e:
        A.ALP.build(([1], [5]), epsilon=1.0, k=10_000, u=1e8, variant="projection", rng=Counting())
    assert "Lower u" in str(e.value) and Counting.calls == 0
    assert A.memory_bytes(10_000, 8) == 8 * (1250 + 16)
    df = pl.DataFrame({"u": np.arange(50), "key": np.arange(50) % 5})
    path = tmp_path / "l.db"
    with Ledger(path) as led:
        led.set_budget("d", epsilon=5.0, delta=1e-6)
    with pytest.raises(InvalidParameterError, match="max_memory"):
        sd.alp(df, "u", "key", 1.0, 0, u=1e6, k=5000, max_memory=2 ** 20, ledger=str(path), dataset="d")
    with Ledger(path) as led:
        assert led.history("d") == []
