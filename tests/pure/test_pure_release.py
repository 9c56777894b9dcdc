"""The simple entry point pure_histogram / release_pure (T25, T30) and the add/remove padding."""

from __future__ import annotations

from fractions import Fraction as F

import numpy as np
import pytest

from pure_helpers import CountingRandom
from sparsedp.accounting.calibration import Neighbours
from sparsedp.errors import InputDataError, InvalidParameterError, InvalidTypeError
from sparsedp.core.histogram import Release, SparseHistogram
from sparsedp.mechanisms.pure import CompactHistogram, pure_histogram, release_pure
from sparsedp.mechanisms.pure.release import StringCodec
from sparsedp.noise import InsecureSeededRandom


def test_heavy_keys_are_released(rng):
    items = [7] * 400 + [9] * 60 + list(range(100, 140))
    r = pure_histogram(items, 1, beta=F(1, 20), domain_size=2 ** 32, rng=rng)
    assert isinstance(r, Release) and r.counts.dtype == np.int64
    assert r.keys == sorted(r.keys) and len(r.keys) == r.n_keys_out <= 500
    cal = r.calibration
    assert (cal.epsilon, cal.delta, cal.n, cal.mechanism) == (1.0, 0.0, 500, "pure-sparse")
    assert cal.neighbours is Neighbours.REPLACE_ONE
    d = r.to_dict()
    assert abs(d[7] - 400) <= cal.accuracy.per_query and cal.accuracy.threshold < 400


def test_strings_domain_and_codec(rng):
    codec = StringCodec(3)
    labels = [codec.encode(s) for s in ["", "a", "ab", "abc", b"\xff\xff\xff", "é"]]
    assert len(set(labels)) == 6 and max(labels) < codec.domain_size == 1 + 256 + 256 ** 2 + 256 ** 3
    assert codec.encode(b"\xff\xff\xff") == codec.domain_size - 1
    assert [codec.decode(x, True) for x in labels[:4]] == ["", "a", "ab", "abc"]
    for x in (0, 1, 256, 257, 65792, codec.domain_size - 1):
        assert codec.encode(codec.decode(x, False)) == x
    items = ["query"] * 300 + [f"rare{i}" for i in range(30)]
    r = pure_histogram(items, 1, max_key_bytes=6, rng=rng)
    assert r.to_dict().get("query", 0) > 250 and all(isinstance(k, str) for k in r.keys)
    with pytest.raises(InputDataError):
        pure_histogram(["x" * 7], 1, max_key_bytes=6, rng=rng)
    with pytest.raises(InvalidTypeError):
        pure_histogram([1, 2], 1, rng=rng)


def test_add_remove_padding_dummy_never_released(rng):
    items = [3] * 40
    r = pure_histogram(items, 1, domain_size=64, mechanism="basic", max_items=100, rng=rng)
    assert r.calibration.neighbours is Neighbours.ADD_REMOVE and r.calibration.n == 100
    assert r.keys == list(range(64))  # dense over the domain, dummy label 64 dropped
    with pytest.raises(InputDataError):
        pure_histogram(items, 1, domain_size=64, max_items=10, rng=rng)


@pytest.mark.parametrize("mech", ["basic", "keep-heavy", "pure-sparse", "stability", "compact"])
def test_every_mechanism_runs(mech, rng):
    items = [1] * 50 + [2] * 20 + [5]
    kw = {"delta": F(1, 10 ** 6)} if mech == "stability" else {}
    if mech == "compact":
        kw["query_keys"] = [1, 2, 3]
    r = pure_histogram(items, F(1, 2), domain_size=1024, mechanism=mech, rng=rng, **kw)
    assert r.calibration.mechanism == mech and 0 < r.calibration.epsilon_realised <= 0.5 + 1e-12
    if mech == "compact":
        h = r.extra["histogram"]
        assert isinstance(h, CompactHistogram) and r.keys == [1, 2, 3]
        assert list(r.counts) == [h.count(1), h.count(2), h.count(3)]
    if mech == "stability":
        assert r.calibration.delta == 1e-6 and set(r.keys) <= {1, 2, 5}


def test_release_pure_from_sparse_histogram(rng):
    hist = SparseHistogram(keys=np.array([4, 8]), counts=np.array([300, 5]))
    r = release_pure(hist, epsilon=1, domain_size=2 ** 16, rng=rng)
    assert r.calibration.n == 305 and 4 in r.to_dict()


@pytest.mark.parametrize("kwargs,err", [
    ({"epsilon": 0}, InvalidParameterError), ({"epsilon": 2}, InvalidParameterError),
    ({"epsilon": 1, "beta": 1}, InvalidParameterError), ({"epsilon": 1, "mechanism": "laplace"}, InvalidParameterError),
    ({"epsilon": 1, "domain_size": 1}, InvalidParameterError), ({"epsilon": 1, "mechanism": "stability"}, InvalidParameterError),
    ({"epsilon": 1, "delta": 0.1}, InvalidParameterError),
    ({"epsilon": 1, "domain_size": 2 ** 30, "mechanism": "basic"}, InvalidParameterError),
    ({"epsilon": 1, "domain_size": 6}, InvalidParameterError),  # |X| < 4n for pure-sparse
    ({"epsilon": 1, "domain_size": 3, "mechanism": "basic"}, InputDataError),  # item 3 outside [0, 3)
    ({"epsilon": 1, "query_keys": [1]}, InvalidParameterError),
])
def test_T30_validation_before_any_randomness(kwargs, err):
    cr = CountingRandom(InsecureSeededRandom(1))
    kwargs = {"domain_size": 100, **kwargs}
    with pytest.raises(err):
        pure_histogram([1, 2, 3], rng=cr, **kwargs)
    assert cr.calls == 0


def test_deterministic_under_seed_and_order_independent():
    items = [5, 1, 5, 9, 1, 5] * 20
    a = pure_histogram(items, 1, domain_size=2 ** 40, rng=InsecureSeededRandom(3))
    b = pure_histogram(sorted(items), 1, domain_size=2 ** 40, rng=InsecureSeededRandom(3))
    assert a.keys == b.keys and list(a.counts) == list(b.counts)


@pytest.mark.slow
def test_T27_time_does_not_grow_with_domain():
    """PureSparse/Compact wall time grows at most polylogarithmically in |X| (generous slack)."""
    import time

    items = [1] * 60 + [2] * 30 + list(range(3, 13))

    def t(X, mech):
        best = float("inf")
        for r in range(3):
            t0 = time.perf_counter()
            pure_histogram(items, 1, domain_size=X, mechanism=mech, rng=InsecureSeededRandom(r),
                           **({"query_keys": [1]} if mech == "compact" else {}))
            best = min(best, time.perf_counter() - t0)
        return best

    for mech in ("pure-sparse", "compact"):
        assert t(2 ** 256, mech) <= 16 * t(2 ** 16, mech) + 0.05


def test_plan_pure_matches_release(rng):
    from sparsedp.mechanisms.pure import plan_pure

    plans = plan_pure(300, 1, F(1, 20), domain_size=2 ** 16, delta=F(1, 10 ** 6))
    assert {p.mechanism for p in plans} == {"basic", "keep-heavy", "pure-sparse", "stability", "compact"}
    ths = [(p.accuracy.threshold, p.accuracy.per_query) for p in plans]
    assert ths == sorted(ths)
    assert {p.mechanism for p in plan_pure(300, 1, domain_size=2 ** 64)} == {"pure-sparse", "compact"}
    items = [5] * 250 + list(range(10, 60))
    for p in plans:
        kw = {"delta": F(1, 10 ** 6)} if p.mechanism == "stability" else {}
        r = pure_histogram(items, 1, beta=F(1, 20), domain_size=2 ** 16, mechanism=p.mechanism, rng=rng, **kw)
        assert r.calibration.accuracy == p.accuracy and r.calibration.epsilon_realised == p.epsilon_realised
