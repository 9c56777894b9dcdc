"""Misra–Gries (thesis Algorithm 12): exactness of the fast kernel, Lemma 3.1 / Fact 3.1 by brute force
over all small streams, the §3.6 post-processing sensitivity, the [ACH+13] merge (Lemma 3.6 /
Corollary 3.2), serialisation and input formats. Golden values from shared/specs/seed-004b §1, §5."""

from __future__ import annotations

import functools
import itertools
from fractions import Fraction

import numpy as np
import pytest

from sparsedp.errors import InputDataError, InvalidParameterError
from sparsedp.sketches.misra_gries import MisraGries, key_code, reference_algorithm12


def full_state(mg: MisraGries) -> dict:
    """{key or ("dummy", j): counter} over all k slots."""
    codes, counts, dummy = mg.slot_arrays()
    return {(("dummy", c) if d else c): x for c, x, d in zip(codes.tolist(), counts.tolist(), dummy.tolist())}


# ---------------------------------------------------------------- kernel == literal algorithm
def test_kernel_matches_reference_on_random_streams():
    gen = np.random.default_rng(1)
    for _ in range(400):
        k, d, n = int(gen.integers(1, 7)), int(gen.integers(1, 15)), int(gen.integers(0, 120))
        s = gen.integers(0, d, n) * int(gen.choice([1, -7, 1000003]))  # negative keys and large gaps too
        T, g = reference_algorithm12(s.tolist(), k)
        mg = MisraGries(k).update(s)
        assert full_state(mg) == T
        assert mg.gamma == g and mg.n == n


def test_kernel_large_k_against_reference():
    gen = np.random.default_rng(2)
    s = gen.zipf(1.3, 20000) % 5000
    T, g = reference_algorithm12(s.tolist(), 64)
    mg = MisraGries(64).update(s)
    assert full_state(mg) == T and mg.gamma == g


def test_any_chunking_gives_the_sequential_sketch():
    gen = np.random.default_rng(3)
    s = gen.zipf(1.2, 30000)
    whole = MisraGries(50).update(s)
    for parts in (2, 7, 1000):
        mg = MisraGries(50)
        for part in np.array_split(s, parts):
            mg.update(part)
        assert mg == whole
    # an iterator of Python ints, consumed lazily in small chunks
    assert MisraGries(50).update(iter(s.tolist()), chunk_size=333) == whole
    # stopping, serialising, restoring and continuing is also exact
    half = MisraGries(50).update(s[:12345])
    restored = MisraGries.from_bytes(half.to_bytes()).update(s[12345:])
    assert restored == whole


def test_python_fallback_kernel_is_the_same_function():
    from sparsedp.sketches import misra_gries as mgmod
    kernel = mgmod._kernel()
    if not hasattr(kernel, "py_func"):
        pytest.skip("no numba: the interpreted kernel is the only one")
    gen = np.random.default_rng(4)
    s = gen.integers(0, 9, 300).astype(np.int64)
    a = MisraGries(3)
    b = MisraGries(3).update(s)
    kernel.py_func(s, a._keys, a._dummy, a._cnt, a._table, a._zl, a._meta, a._shift)
    assert a == b


# ---------------------------------------------------------------- brute force over all small streams
@functools.lru_cache(maxsize=None)
def all_sketches(k: int, d: int, n_max: int) -> dict:
    out = {}
    for n in range(n_max + 1):
        for s in itertools.product(range(d), repeat=n):
            mg = MisraGries(k, keys="int").update(np.array(s, dtype=np.int64))
            out[s] = (full_state(mg), mg.gamma)
    return out


def lemma_3_1_case(big: dict, small: dict) -> int:
    """Which case of Lemma 3.1 holds for T,c (stream S) vs T',c' (S minus one element); 0 if none/both."""
    T, Tp = set(big), set(small)
    assert len(T & Tp) >= len(T) - 2
    for key in T ^ Tp:
        assert big.get(key, 0) <= 1 and small.get(key, 0) <= 1
    keys = T | Tp
    c = {x: big.get(x, 0) for x in keys}
    cp = {x: small.get(x, 0) for x in keys}
    case1 = all(c[i] == cp[i] - 1 for i in Tp) and all(c[j] == 0 for j in keys - Tp)
    diff = [x for x in keys if c[x] != cp[x]]
    case2 = len(diff) == 1 and c[diff[0]] == cp[diff[0]] + 1
    assert case1 != case2
    return 1 if case1 else 2


@pytest.mark.parametrize("k,d,n_max", [(1, 3, 7), (2, 3, 7), (2, 4, 6), (3, 4, 6)])
def test_lemma_3_1_and_fact_3_1_on_all_small_streams(k, d, n_max):
    sk = all_sketches(k, d, n_max)
    for s, (state, g) in sk.items():
        n = len(s)
        assert len(state) == k  # always exactly k keys
        assert g <= n // (k + 1)  # gamma <= floor(n/(k+1))
        for x in range(d):  # Fact 3.1 and c_x + gamma >= f(x)
            f, c = s.count(x), state.get(x, 0)
            assert f - Fraction(n, k + 1) <= c <= f and c + g >= f
        assert all(key in range(d) or key[0] == "dummy" for key in state)
        for i in range(n):  # every single-element deletion
            sp = s[:i] + s[i + 1:]
            state_p, g_p = sk[sp]
            case = lemma_3_1_case(state, state_p)
            assert g == g_p + (1 if case == 1 else 0)
            # hence the positive counters form a k-sparse monotonic histogram (seed 000 Def. 3.1): CSH applies
            pos = {x: c for x, c in state.items() if not isinstance(x, tuple) and c > 0}
            pos_p = {x: c for x, c in state_p.items() if not isinstance(x, tuple) and c > 0}
            diff = [pos.get(x, 0) - pos_p.get(x, 0) for x in set(pos) | set(pos_p)]
            assert len(pos) <= k and (all(t in (0, 1) for t in diff) or all(t in (0, -1) for t in diff))


def test_positive_counters_never_include_unseen_keys():
    gen = np.random.default_rng(5)
    for _ in range(200):
        s = gen.integers(0, 6, int(gen.integers(0, 40)))
        mg = MisraGries(3).update(s)
        assert set(mg.counters()) <= set(s.tolist())


# ---------------------------------------------------------------- §3.6 post-processing sensitivity
def postprocessed(state: dict, g: int, n: int, k: int, floor: bool) -> dict:
    sub = Fraction(n // (k + 1)) if floor else Fraction(n, k + 1)
    out = {}
    for key, c in state.items():
        if isinstance(key, tuple):
            continue
        val = c + g - sub
        if val > 0:
            out[key] = val
    return out


def max_l1_postprocessed(k, d, n_max, floor):
    sk = all_sketches(k, d, n_max)
    worst = Fraction(0)
    for s, (state, g) in sk.items():
        a = postprocessed(state, g, len(s), k, floor)
        for i in range(len(s)):
            sp = s[:i] + s[i + 1:]
            state_p, g_p = sk[sp]
            b = postprocessed(state_p, g_p, len(sp), k, floor)
            l1 = sum(abs(a.get(x, 0) - b.get(x, 0)) for x in set(a) | set(b))
            worst = max(worst, l1)
    return worst


@pytest.mark.parametrize("k,d,n_max,expected", [(1, 3, 8, Fraction(1, 2)), (2, 3, 8, Fraction(1))])
def test_section_3_6_sensitivity_exact_and_floor_regression(k, d, n_max, expected):
    # spec §1.7 item 3 [VERIFIED]: max l1 = 1/2, 1 for k = 1, 2 (all < 2); flooring n/(k+1) gives k
    assert max_l1_postprocessed(k, d, n_max, floor=False) == expected
    assert max_l1_postprocessed(k, d, n_max, floor=True) == k


@pytest.mark.slow
@pytest.mark.parametrize("k,d,n_max,expected", [(2, 4, 7, Fraction(1)), (3, 4, 7, Fraction(5, 4)),
                                                (4, 5, 6, Fraction(7, 5))])
def test_section_3_6_sensitivity_larger(k, d, n_max, expected):
    # spec §1.7 item 3 [VERIFIED]: 1, 5/4, 7/5 (< 1 + k/(k+1)); floored: k
    assert max_l1_postprocessed(k, d, n_max, floor=False) == expected
    assert max_l1_postprocessed(k, d, n_max, floor=True) == k


# ---------------------------------------------------------------- merge ([ACH+13], Lemma 3.6, Cor. 3.2)
def check_merge_guarantee(merged: MisraGries, streams):
    N = sum(len(s) for s in streams)
    f = {}
    for s in streams:
        for x in s:
            f[x] = f.get(x, 0) + 1
    k = merged.k
    assert len(merged.counters()) <= k
    for x in set(f) | set(merged.counters()):
        est = merged.estimate(x)
        assert f.get(x, 0) - Fraction(N, k + 1) <= est <= f.get(x, 0)


def tree_merge(sketches):
    while len(sketches) > 1:
        nxt = [sketches[i].merge(sketches[i + 1]) for i in range(0, len(sketches) - 1, 2)]
        if len(sketches) % 2:
            nxt.append(sketches[-1])
        sketches = nxt
    return sketches[0]


def test_merged_neighbours_differ_monotonically_in_at_most_k_counters():
    gen = np.random.default_rng(6)
    n_pairs = 0
    for _ in range(1500):
        k, d, m = int(gen.integers(1, 4)), int(gen.integers(2, 7)), int(gen.integers(2, 5))
        streams = [gen.integers(0, d, int(gen.integers(0, 15))).tolist() for _ in range(m)]
        j = int(gen.integers(0, m))
        if not streams[j]:
            continue
        i = int(gen.integers(0, len(streams[j])))
        streams_p = [list(s) for s in streams]
        del streams_p[j][i]
        for fold in (MisraGries.merge_all, tree_merge):
            a = fold([MisraGries(k).update(np.array(s, dtype=np.int64)) for s in streams])
            b = fold([MisraGries(k).update(np.array(s, dtype=np.int64)) for s in streams_p])
            assert a.merged and b.merged
            check_merge_guarantee(a, streams)
            ca, cb = a.counters(), b.counters()
            diff = {x: ca.get(x, 0) - cb.get(x, 0) for x in set(ca) | set(cb)}
            nz = [dv for dv in diff.values() if dv != 0]
            assert len(nz) <= k
            assert all(dv == 1 for dv in nz) or all(dv == -1 for dv in nz)  # Def. 3.1 monotonic
            # nesting of the supports (Lemma 3.6)
            assert set(cb) <= set(ca) or set(ca) <= set(cb)
            n_pairs += 1
    assert n_pairs > 1000


def test_merge_rejects_mismatched_sketches():
    with pytest.raises(InvalidParameterError):
        MisraGries(2).update([1]).merge(MisraGries(3).update([1]))
    with pytest.raises(InvalidParameterError):
        MisraGries(2).update([1]).merge(MisraGries(2).update(["a"]))
    with pytest.raises(InvalidParameterError):
        MisraGries(2).update([1]).merge(MisraGries(2).update([2])).update([3])


# ---------------------------------------------------------------- keys, formats, serialisation
def test_string_and_tuple_keys_and_roundtrip():
    stream = ["a", "b", "a", ("x", 1), "a", "c", ("x", 1), ("x", 1), None, 2.5] * 7
    mg = MisraGries(3).update(stream)
    assert mg.key_type == "hashed"
    T, g = reference_algorithm12([key_code(x) for x in stream], 3)
    assert mg.gamma == g
    c = mg.counters()
    assert 0 < c["a"] <= 21
    assert set(c) <= set(stream)
    back = MisraGries.from_bytes(mg.to_bytes())
    assert back == mg and back.counters() == c
    tbl = mg.to_arrow()
    assert MisraGries.from_arrow(tbl).counters() == c
    merged = mg.merge(MisraGries(3).update(["a", "z"]))
    assert MisraGries.from_bytes(merged.to_bytes()).counters() == merged.counters()


def test_arrow_polars_pandas_and_chunk_iterables():
    import pyarrow as pa
    import polars as pl
    gen = np.random.default_rng(7)
    s = gen.zipf(1.5, 5000).astype(np.int64)
    ref = MisraGries(20).update(s)
    assert MisraGries(20).update(pa.chunked_array([s[:100], s[100:]])) == ref
    assert MisraGries(20).update(pl.Series(s)) == ref
    frame = pl.DataFrame({"x": s})
    assert MisraGries(20).update_chunks(sl["x"] for sl in frame.iter_slices(700)) == ref
    assert MisraGries(20).update_chunks(b.column(0) for b in pa.table({"x": s}).to_batches(max_chunksize=999)) == ref
    strs = pl.Series([str(x) for x in s.tolist()])
    a = MisraGries(20).update(strs)
    b = MisraGries(20).update(pa.array(strs.to_list()))
    assert a == b and a.counters() == b.counters()


def test_bad_inputs_fail_with_clear_errors():
    with pytest.raises(InvalidParameterError):
        MisraGries(0)
    with pytest.raises(InputDataError):
        MisraGries(2).update([1, 2]).update(["a"])
    import pyarrow as pa
    with pytest.raises(InputDataError):
        MisraGries(2).update(pa.array([1, None]))
    with pytest.raises(InputDataError):
        MisraGries.from_bytes(b"not a sketch")
    with pytest.raises(InputDataError):
        MisraGries(2).update(np.array([2 ** 63 + 5], dtype=np.uint64))
