"""SecretKeyedStream: deterministic per (secret, label), independent across labels and secrets, and it feeds
the exact samplers like any source."""

from __future__ import annotations

import hashlib
import hmac
import os

import numpy as np
import pytest

from sparsedp.errors import InvalidParameterError
from sparsedp.noise import sample_discrete_gaussian
from sparsedp.noise.source import SecretKeyedStream


def test_same_secret_and_label_same_stream():
    """The same sequence of requests gives the same words (what a recomputed task makes)."""
    a, b = SecretKeyedStream(b"s" * 32, b"chunk 1"), SecretKeyedStream(b"s" * 32, b"chunk 1")
    seq = lambda r: r.random_bytes(8) + r.uint64(4999).tobytes() + r.random_bytes(3) + r.uint64(3).tobytes()  # noqa: E731
    assert seq(a) == seq(b)


def test_stream_is_aes_ctr_under_the_documented_hmac_key():
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

    secret, label = os.urandom(32), b"x"
    key = hmac.new(secret, b"sparsedp keyed stream" + label, hashlib.sha256).digest()
    iv = hmac.new(secret, b"sparsedp keyed iv" + label, hashlib.sha256).digest()[:16]
    want = Cipher(algorithms.AES(key), modes.CTR(iv)).encryptor().update(bytes(64))
    assert SecretKeyedStream(secret, label).random_bytes(64) == want


def test_labels_and_secrets_separate_streams():
    s = b"k" * 32
    words = [SecretKeyedStream(s, b"a").uint64(4), SecretKeyedStream(s, b"b").uint64(4),
             SecretKeyedStream(b"j" * 32, b"a").uint64(4)]
    assert len({w.tobytes() for w in words}) == 3


def test_feeds_the_exact_sampler_deterministically():
    draw = lambda: sample_discrete_gaussian(9, 2000, rng=SecretKeyedStream(b"q" * 32, b"n"))  # noqa: E731
    x = draw()
    assert np.array_equal(x, draw())
    assert abs(x.mean()) < 4 * 3 / np.sqrt(2000) and abs(x.var() / 9 - 1) < 0.15


def test_rejects_weak_secrets_and_pickling():
    with pytest.raises(InvalidParameterError):
        SecretKeyedStream(b"short", b"x")
    with pytest.raises(TypeError):
        import pickle

        pickle.dumps(SecretKeyedStream(b"k" * 32, b"x"))
