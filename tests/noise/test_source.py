"""The random source: interface, determinism of the insecure mode, independence across batches,
threads and forked processes."""

from __future__ import annotations

import multiprocessing as mp_
import os
import pickle
import threading

import numpy as np
import pytest
from scipy import stats

from sparsedp.errors import SparsedpError
from sparsedp.noise import InsecureSeededRandom, SecureRandom, default_source


def test_default_is_secure_singleton():
    src = default_source()
    assert isinstance(src, SecureRandom) and src.secure is True
    assert not isinstance(src, InsecureSeededRandom)
    assert default_source() is src
    assert InsecureSeededRandom(1).secure is False


def test_interface_types_and_ranges():
    src = SecureRandom()
    assert len(src.random_bytes(0)) == 0 and len(src.random_bytes(10)) == 10
    assert len(src.random_bytes(100_000)) == 100_000
    assert src.getrandbits(0) == 0
    for k in (1, 7, 64, 200):
        assert 0 <= src.getrandbits(k) < 2**k
    assert src.randbelow(1) == 0
    big = 10**40 + 7
    assert all(0 <= src.randbelow(big) < big for _ in range(50))
    a = src.uint64(5)
    assert a.dtype == np.uint64 and a.shape == (5,) and a.flags.writeable
    b = src.uint64(10_000)
    assert b.dtype == np.uint64 and b.flags.writeable and len(np.unique(b)) == 10_000
    with pytest.raises(SparsedpError):
        src.randbelow(0)
    with pytest.raises(SparsedpError):
        src.uint64(-1)
    with pytest.raises(SparsedpError):
        src.getrandbits(-1)


def test_randbelow_is_uniform_without_modulo_bias():
    src = InsecureSeededRandom(3)
    n = 3 * 2**61  # 2^64 mod n is large: a modulo reduction of a 64-bit word would be badly biased
    xs = np.array([src.randbelow(n) for _ in range(30_000)], dtype=object)
    thirds = np.array([int(x) * 3 // n for x in xs])
    assert stats.chisquare(np.bincount(thirds, minlength=3)).pvalue > 1e-4
    small = np.array([src.randbelow(6) for _ in range(30_000)])
    assert stats.chisquare(np.bincount(small, minlength=6)).pvalue > 1e-4


def test_bytes_are_uniform():
    words = SecureRandom().uint64(200_000)
    bytes_ = words.view(np.uint8)
    assert stats.chisquare(np.bincount(bytes_, minlength=256)).pvalue > 1e-4
    bits = np.unpackbits(bytes_[:100_000])
    assert abs(bits.mean() - 0.5) < 4.5 * 0.5 / np.sqrt(bits.size)


def test_seeded_source_is_deterministic_and_seed_dependent():
    a, b, c = InsecureSeededRandom(5), InsecureSeededRandom(5), InsecureSeededRandom(6)
    xa, xb, xc = a.uint64(1000), b.uint64(1000), c.uint64(1000)
    assert np.array_equal(xa, xb) and not np.array_equal(xa, xc)
    # the stream does not depend on how it is requested (buffered or direct)
    d = InsecureSeededRandom(5)
    assert d.random_bytes(8000) == InsecureSeededRandom(5).uint64(1000).tobytes()
    with pytest.raises(SparsedpError):
        InsecureSeededRandom(1.5)


def test_successive_batches_and_instances_differ():
    src = SecureRandom()
    assert not np.array_equal(src.uint64(64), src.uint64(64))
    assert src.random_bytes(32) != src.random_bytes(32)
    assert SecureRandom().random_bytes(32) != SecureRandom().random_bytes(32)
    seeded = InsecureSeededRandom(1)
    assert not np.array_equal(seeded.uint64(64), seeded.uint64(64))


def test_sources_refuse_pickling():
    with pytest.raises(TypeError):
        pickle.dumps(SecureRandom())


def _fork_and_compare(src, n=64):
    """Draw n bytes in a forked child and in the parent after the fork; return both."""
    src.random_bytes(3)  # leave buffered bytes behind, which the child must not reuse
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        try:
            os.write(w, src.random_bytes(n))
        finally:
            os._exit(0)
    os.close(w)
    child = b""
    while len(child) < n:
        chunk = os.read(r, n)
        if not chunk:
            break
        child += chunk
    os.close(r)
    os.waitpid(pid, 0)
    return src.random_bytes(n), child


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
@pytest.mark.parametrize("make", [default_source, SecureRandom, lambda: InsecureSeededRandom(9)])
def test_forked_child_never_replays_parent_stream(make):
    src = make()
    parent, child = _fork_and_compare(src)
    assert len(child) == 64 and parent != child
    # large (unbuffered) requests too
    parent, child = _fork_and_compare(src, n=10_000)
    assert parent != child


def _child_words(_):
    return default_source().uint64(4).tolist()


@pytest.mark.skipif("fork" not in mp_.get_all_start_methods(), reason="needs the fork start method")
def test_multiprocessing_workers_get_distinct_streams():
    default_source().uint64(1)  # the parent has keyed and buffered before forking
    with mp_.get_context("fork").Pool(3) as pool:
        results = pool.map(_child_words, range(6), chunksize=1)
    flat = [w for r in results for w in r] + default_source().uint64(4).tolist()
    assert len(set(flat)) == len(flat)


def test_threads_never_receive_the_same_bytes():
    src = SecureRandom()
    out: list[np.ndarray] = []
    lock = threading.Lock()

    def work():
        local = [src.uint64(n) for n in (1, 7, 300, 2000) * 20]
        with lock:
            out.extend(local)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    words = np.concatenate(out)
    assert len(np.unique(words)) == words.size
