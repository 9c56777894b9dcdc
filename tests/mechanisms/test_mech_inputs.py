"""Bad input raises before any noise is drawn, with an error naming the problem."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import polars as pl
import pytest

import sparsedp.noise as noise_mod
from sparsedp.accounting import calibrate
from sparsedp.errors import InputDataError, InvalidParameterError, InvalidTypeError
from sparsedp.mechanisms import SparseHistogram, noise_and_filter, release_histogram
from sparsedp.mechanisms.csh import csh
from sparsedp.noise import InsecureSeededRandom


class _NoNoise(InsecureSeededRandom):
    """A source that fails the test if anything draws from it."""

    def __init__(self):
        super().__init__(0)

    def random_bytes(self, n):  # every method of the source goes through here or uint64
        raise AssertionError("noise was drawn before the input was validated")

    def uint64(self, size):
        raise AssertionError("noise was drawn before the input was validated")


@pytest.fixture
def no_noise(monkeypatch):
    def boom(*a, **k):
        raise AssertionError("a sampler was called before the input was validated")

    for name in ("sample_discrete_gaussian", "sample_discrete_laplace", "sample_gaussian", "sample_laplace"):
        monkeypatch.setattr(noise_mod, name, boom, raising=False)
    return _NoNoise()


def test_histogram_construction_rejects_bad_counts():
    with pytest.raises(InputDataError, match="non-negative"):
        SparseHistogram(["a", "b"], np.array([1, -2]))
    with pytest.raises(InputDataError, match="integers"):
        SparseHistogram(["a"], np.array([1.5]))
    with pytest.raises(InputDataError, match="integers"):
        SparseHistogram(["a"], np.array([np.nan]))
    with pytest.raises(InputDataError, match="integers"):
        SparseHistogram.from_mapping({"a": 2.0})
    with pytest.raises(InputDataError, match="keys but"):
        SparseHistogram(["a", "b"], np.array([1]))


@pytest.mark.parametrize("mechanism,model", [("gshm", {"l0": 2}), ("laplace", {"l0": 2}), ("csh", {"k": 5}),
                                             ("topk-csh", {"top_k": 2}), ("auto", {"l0": 2})])
def test_mutated_negative_count_raises_before_noise(no_noise, mechanism, model):
    hist = SparseHistogram(np.arange(3), np.array([4, 5, 6]))
    hist.counts[1] = -1  # numpy arrays are mutable: re-validated at release time
    with pytest.raises(InputDataError, match="non-negative"):
        release_histogram(hist, epsilon=1.0, delta=1e-6, mechanism=mechanism, rng=no_noise, **model)


@pytest.mark.parametrize("keys", [
    np.array([3, 1, 3]),
    ["x", "y", "x"],
    [("a", 1), ("b", 2), ("a", 1)],
    pl.DataFrame({"url": ["u", "v", "u"], "c": ["fr", "fr", "fr"]}),
    pa.table({"url": ["u", "v", "u"]}),
])
def test_duplicate_keys_raise_before_noise(no_noise, keys):
    hist = SparseHistogram(keys, np.array([4, 5, 6]))
    with pytest.raises(InputDataError, match="distinct"):
        release_histogram(hist, epsilon=1.0, delta=1e-6, l0=2, rng=no_noise)


def test_distinct_multicolumn_keys_pass():
    hist = SparseHistogram(pl.DataFrame({"url": ["u", "u", "v"], "c": ["fr", "de", "fr"]}), np.array([40, 50, 60]))
    rel = release_histogram(hist, epsilon=1.0, delta=1e-6, l0=2, mechanism="gshm", rng=InsecureSeededRandom(1))
    assert rel.n_keys_in == 3


def test_more_than_k_nonzeros_for_declared_k_raises_before_noise(no_noise):
    hist = SparseHistogram(np.arange(6), np.array([1, 2, 3, 4, 0, 5]))
    with pytest.raises(InputDataError, match="k=4"):
        release_histogram(hist, epsilon=1.0, delta=1e-6, k=4, mechanism="csh", rng=no_noise)
    with pytest.raises(InputDataError, match="k=4"):  # also when auto would have picked another mechanism
        release_histogram(hist, epsilon=1.0, delta=1e-6, k=4, rng=no_noise)
    cal = calibrate("csh", epsilon=1.0, delta=1e-6, k=4)
    with pytest.raises(InputDataError, match="non-zero"):
        csh(hist, cal, rng=no_noise)


def test_exactly_k_nonzeros_is_accepted():
    cal = calibrate("csh", epsilon=1.0, delta=1e-6, k=4)
    ok = SparseHistogram(np.arange(5), np.array([1, 2, 0, 4, 5]))  # zeros do not count
    assert csh(ok, cal, rng=InsecureSeededRandom(2)).n_keys_in == 5


@pytest.mark.parametrize("kwargs,err,match", [
    ({"epsilon": -1.0, "delta": 1e-6, "l0": 2}, InvalidParameterError, "epsilon"),
    ({"epsilon": 1.0, "delta": 1.5, "l0": 2}, InvalidParameterError, "delta"),
    ({"epsilon": 1.0, "delta": 1e-6, "l0": 0}, InvalidParameterError, "l0"),
    ({"epsilon": 1.0, "delta": 1e-6, "l0": 2.0}, InvalidTypeError, "l0"),
    ({"epsilon": 1.0, "delta": 1e-6}, InvalidParameterError, "contribution model"),
    ({"epsilon": 1.0, "delta": 1e-6, "l0": 2, "mechanism": "csh"}, InvalidParameterError, "needs k"),
    ({"epsilon": 1.0, "delta": 1e-6, "l0": 2, "mechanism": "bogus"}, InvalidParameterError, "mechanism"),
    ({"epsilon": 1.0, "delta": 1e-6, "top_k": 2, "pre_threshold": 3}, InvalidParameterError, "pre_threshold"),
    ({"epsilon": 1.0, "delta": 1e-6, "l0": 2, "pre_threshold": 0}, InvalidParameterError, "pre_threshold"),
])
def test_bad_arguments_raise_before_noise(no_noise, kwargs, err, match):
    hist = SparseHistogram(np.arange(3), np.array([4, 5, 6]))
    with pytest.raises(err, match=match):
        release_histogram(hist, rng=no_noise, **kwargs)


def test_not_a_histogram():
    with pytest.raises(InvalidTypeError, match="SparseHistogram"):
        release_histogram({"a": 1}, epsilon=1.0, delta=1e-6, l0=1)


def test_float_noise_needs_explicit_opt_in(no_noise):
    cal = calibrate("gshm", epsilon=1.0, delta=1e-6, l0=2, discrete=False)
    with pytest.raises(InvalidParameterError, match="insecure_float"):
        noise_and_filter(np.array([5, 6]), cal, 1, no_noise)


def test_pre_threshold_drops_small_counts_and_empty_input():
    rng = InsecureSeededRandom(4)
    cal = calibrate("gshm", epsilon=1.0, delta=1e-6, l0=1)
    pos, vals = noise_and_filter(np.array([], dtype=np.int64), cal, 1, rng)
    assert pos.size == 0 and vals.size == 0
    counts = np.array([10_000, 4, 10_000, 0])
    pos, vals = noise_and_filter(counts, cal, 5, rng)
    assert pos.tolist() == [0, 2]
