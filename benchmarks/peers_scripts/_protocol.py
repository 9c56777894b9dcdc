"""The tiny protocol every peer script speaks (stdlib + pyarrow only; runs inside each peer's venv).

``script.py thresholds PARAMS.json OUT.json``: PARAMS is a list of ``{"epsilon", "delta", "l0"}``; OUT gets one
``{"epsilon", "delta", "l0", "mechanism", "threshold", "keep50", ...}`` row per (mechanism, parameters).
``threshold`` is the absolute value a noisy count of distinct units is compared with (NaN if the mechanism
has none), ``keep50`` the smallest true count released with probability >= 1/2.

``script.py release IN.parquet OUT.parquet META.json EPS DELTA L0 NOISE``: IN has columns ``unit`` (int64)
and ``key`` (string), one row per (unit, key) occurrence; OUT gets ``key``, ``count`` (float64); META gets
``{"seconds": release wall time, "version": ..., "mechanism": ...}``. Each unit may contribute to at most
``L0`` keys and at most 1 to each key (add/remove one unit).

``script.py aggregates IN.parquet OUT.parquet META.json EPS DELTA L0 LOWER UPPER NOISE``: IN has columns
``unit`` (int64), ``key`` (string) and ``value`` (float64), one row per event (a unit may have several rows
for a key); OUT gets ``key``, ``count``, ``sum``, ``mean`` (float64), the released keys only. Contribution
model (the one sparsedp enforces): each unit contributes to at most ``L0`` keys; its contribution to a key's
count is 1 and to the key's sum the sum of its rows' values for that key clipped to [LOWER, UPPER]; MEAN is
the per-key mean of those per-unit contributions. Each peer script sums a unit's rows per key itself (one row
per (unit, key), 1-stable under add/remove-one-unit) before handing the rows to its library.

``script.py quantiles IN.parquet OUT.parquet META.json EPS DELTA L0 LOWER UPPER CELLS``: IN as for ``aggregates``;
OUT gets ``key``, ``median`` (float64) for the keys the library releases (its own private key selection). Contribution
model: each unit contributes to at most ``L0`` keys and one row (value clipped to [LOWER, UPPER]) to each; the
candidates / grid are the midpoints of ``CELLS`` equal cells of [LOWER, UPPER] where the library takes candidates.

``script.py public_keys IN.parquet KEYS.parquet OUT.parquet META.json EPS DELTA L0 NOISE``: IN as for
``release``; KEYS has one column ``key`` (string), the public key list; OUT gets ``key``, ``count`` (float64)
for EVERY listed key (no threshold; keys absent from IN get noise too, keys of IN not listed are dropped).
Each unit contributes at most 1 to each key and to at most ``L0`` listed keys (add/remove one unit).
"""

from __future__ import annotations

import json
import sys
import time


def main(thresholds, release, aggregates=None, public_keys=None, quantiles=None) -> None:
    mode = sys.argv[1]
    if mode == "quantiles" and quantiles is not None:
        import pyarrow as pa
        import pyarrow.parquet as pq
        src, dst, meta_path = sys.argv[2:5]
        eps, delta, l0 = float(sys.argv[5]), float(sys.argv[6]), int(sys.argv[7])
        lower, upper, cells = float(sys.argv[8]), float(sys.argv[9]), int(sys.argv[10])
        table = pq.read_table(src)
        t0 = time.perf_counter()
        keys, medians, meta = quantiles(table, eps, delta, l0, lower, upper, cells)
        meta["seconds"] = time.perf_counter() - t0
        pq.write_table(pa.table({"key": pa.array(keys, pa.string()),
                                 "median": pa.array(medians, pa.float64())}), dst)
        json.dump(meta, open(meta_path, "w"))
        return
    if mode == "public_keys" and public_keys is not None:
        import pyarrow as pa
        import pyarrow.parquet as pq
        src, keys_path, dst, meta_path = sys.argv[2:6]
        eps, delta, l0, noise = float(sys.argv[6]), float(sys.argv[7]), int(sys.argv[8]), sys.argv[9]
        table = pq.read_table(src)
        listed = pq.read_table(keys_path).column("key").to_pylist()
        t0 = time.perf_counter()
        keys, counts, meta = public_keys(table, listed, eps, delta, l0, noise)
        meta["seconds"] = time.perf_counter() - t0
        pq.write_table(pa.table({"key": pa.array(keys, pa.string()),
                                 "count": pa.array(counts, pa.float64())}), dst)
        json.dump(meta, open(meta_path, "w"))
        return
    if mode == "thresholds":
        params = json.load(open(sys.argv[2]))
        rows = []
        for p in params:
            rows.extend(thresholds(float(p["epsilon"]), float(p["delta"]), int(p["l0"])))
        json.dump(rows, open(sys.argv[3], "w"))
    elif mode == "release":
        import pyarrow.parquet as pq
        src, dst, meta_path = sys.argv[2:5]
        eps, delta, l0, noise = float(sys.argv[5]), float(sys.argv[6]), int(sys.argv[7]), sys.argv[8]
        table = pq.read_table(src)
        t0 = time.perf_counter()
        keys, counts, meta = release(table, eps, delta, l0, noise)
        meta["seconds"] = time.perf_counter() - t0
        import pyarrow as pa
        pq.write_table(pa.table({"key": pa.array(keys, pa.string()),
                                 "count": pa.array(counts, pa.float64())}), dst)
        json.dump(meta, open(meta_path, "w"))
    elif mode == "aggregates" and aggregates is not None:
        import pyarrow as pa
        import pyarrow.parquet as pq
        src, dst, meta_path = sys.argv[2:5]
        eps, delta, l0 = float(sys.argv[5]), float(sys.argv[6]), int(sys.argv[7])
        lower, upper, noise = float(sys.argv[8]), float(sys.argv[9]), sys.argv[10]
        table = pq.read_table(src)
        t0 = time.perf_counter()
        keys, counts, sums, means, meta = aggregates(table, eps, delta, l0, lower, upper, noise)
        meta["seconds"] = time.perf_counter() - t0
        pq.write_table(pa.table({"key": pa.array(keys, pa.string()),
                                 "count": pa.array(counts, pa.float64()),
                                 "sum": pa.array(sums, pa.float64()),
                                 "mean": pa.array(means, pa.float64())}), dst)
        json.dump(meta, open(meta_path, "w"))
    else:
        raise SystemExit(f"unknown mode {mode!r}")


def smallest_int(ok, lo: int = 1, hi: int = 2) -> int:
    """Smallest integer t >= lo with ok(t), for ok monotone (False … False True … True)."""
    while not ok(hi):
        lo, hi = hi, hi * 2
        if hi > 1 << 40:
            return -1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return hi if not ok(lo) else lo
