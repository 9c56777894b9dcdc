"""End-to-end audit through ``sparsedp.release`` on every embedded engine (bounding, de-duplication, fresh
noise, noisy output), and proof that it can fail: exact counts in the Result and noise reused across releases
are refuted."""

from __future__ import annotations

import numpy as np
import pytest

from sparsedp.audit.end_to_end import audit_dataset, audit_release
from sparsedp.noise import InsecureSeededRandom

ENGINES = ["arrow", "pandas", "polars", "duckdb"]


def test_dataset_shape():
    t = audit_dataset(keys=3, base=5, heavy=2)
    uid = np.asarray(t.column("uid")); key = np.asarray(t.column("key"))  # noqa: E702
    assert t.num_rows == 3 * 5 + 2 * 2 * 3
    heavy = uid >= 1_000_000
    assert len(set(uid[heavy])) == 2 and len(set(zip(uid[heavy], key[heavy]))) == 6  # every row twice


@pytest.mark.parametrize("engine", ENGINES)
def test_gshm_release_passes_on_every_engine(engine):
    res = audit_release(engine, "gshm", runs=12, rng=InsecureSeededRandom(3))
    assert not res.contradicts, str(res)


@pytest.mark.parametrize("mech", ["laplace", "topk-csh"])
def test_other_thresholded_mechanisms_pass(mech):
    res = audit_release("arrow", mech, runs=12, rng=InsecureSeededRandom(4))
    assert not res.contradicts, str(res)


@pytest.mark.slow
@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("mech", ["gshm", "laplace", "topk-csh"])
def test_every_engine_and_mechanism_60_runs(engine, mech):
    res = audit_release(engine, mech, runs=60, rng=InsecureSeededRandom(5))
    assert not res.contradicts, str(res)


def test_exact_counts_in_the_result_are_refuted(monkeypatch):
    import sparsedp.mechanisms.key_noise as kn

    def exact(counts, plan, pre, rng, shared=None, *, insecure_float=False):
        c = np.asarray(counts, np.int64)
        pos = np.flatnonzero(c >= pre)
        return pos, c[pos]

    monkeypatch.setattr(kn, "noise_and_filter", exact)
    res = audit_release("arrow", "gshm", runs=12, rng=InsecureSeededRandom(6))
    assert res.contradicts and res.p_variance == 0.0, str(res)


def test_noise_reused_across_releases_is_refuted(monkeypatch):
    import sparsedp.mechanisms.key_noise as kn
    from sparsedp.noise.source import SecretKeyedStream

    def same(self, chunk):  # every release's chunk stream keyed by one fixed secret
        from sparsedp.core.noise_chunks import chunk_label

        return SecretKeyedStream(b"\x01" * 32, chunk_label(chunk))

    monkeypatch.setattr(kn.KeyNoise, "stream", same)
    res = audit_release("arrow", "gshm", runs=12, rng=InsecureSeededRandom(7))
    assert res.contradicts and len(set(res.totals)) == 1, str(res)


def test_misra_gries_release_passes_and_its_exact_sketch_is_refuted(monkeypatch):
    ok = audit_release("arrow", "misra-gries", runs=10, rng=InsecureSeededRandom(8))
    assert not ok.contradicts, str(ok)
    import sparsedp.sketches.private_mg as pmg

    # the non-private sketch: PMG's discrete Laplace draws replaced by zeros (the counters released as they are)
    monkeypatch.setattr(pmg, "_dlap", lambda scale, size, rng: np.zeros(size, np.int64))
    bad = audit_release("arrow", "misra-gries", runs=10, rng=InsecureSeededRandom(9))
    assert bad.contradicts and len(set(bad.totals)) == 1, str(bad)
