"""Many releases of one peer in one process (``benchmarks/set_union.py``): start-up paid once.

``sweep.py PEER IN.parquet PARAMS.json OUT.json``: PEER is ``opendp``, ``pipelinedp`` or ``tumult`` (the module
``<PEER>_peer`` of this folder, run inside that peer's venv); PARAMS a list of ``{"epsilon", "delta", "l0",
"noise", "rep"}``; OUT gets, per entry, the entry with ``keys`` (released keys), ``counts`` (their released
values, or null for a keys-only selection) and ``seconds``. ``noise``: the peer's release noise (``laplace`` /
``gaussian``: its ``release``), or for PipelineDP ``select-<strategy>`` (``laplace``, ``gaussian``,
``truncated_geometric``): its keys-only private partition selection (``DPEngine.select_partitions`` with
``max_partitions_contributed = l0``), which releases keys without counts.
"""

from __future__ import annotations

import importlib
import json
import sys
import time


def pipelinedp_select(table, eps, delta, l0, strategy):
    import pipeline_dp

    rows = list(zip(table.column("unit").to_pylist(), table.column("key").to_pylist()))
    acc = pipeline_dp.NaiveBudgetAccountant(total_epsilon=eps, total_delta=delta)
    engine = pipeline_dp.DPEngine(acc, pipeline_dp.LocalBackend())
    kind = {"laplace": pipeline_dp.PartitionSelectionStrategy.LAPLACE_THRESHOLDING,
            "gaussian": pipeline_dp.PartitionSelectionStrategy.GAUSSIAN_THRESHOLDING,
            "truncated_geometric": pipeline_dp.PartitionSelectionStrategy.TRUNCATED_GEOMETRIC}[strategy]
    params = pipeline_dp.SelectPartitionsParams(max_partitions_contributed=l0, partition_selection_strategy=kind)
    ex = pipeline_dp.DataExtractors(privacy_id_extractor=lambda r: r[0], partition_extractor=lambda r: r[1])
    res = engine.select_partitions(rows, params, ex)
    acc.compute_budgets()
    return list(res)


def main() -> None:
    peer, src, params_path, dst = sys.argv[1:5]
    import pyarrow.parquet as pq

    mod = importlib.import_module(f"{peer}_peer")
    table = pq.read_table(src)
    out = []
    for p in json.load(open(params_path)):
        t0 = time.perf_counter()
        eps, delta, l0, noise = float(p["epsilon"]), float(p["delta"]), int(p["l0"]), p["noise"]
        if noise.startswith("select-"):
            keys, counts = pipelinedp_select(table, eps, delta, l0, noise.removeprefix("select-")), None
        else:
            keys, counts, _ = mod.release(table, eps, delta, l0, noise)
        out.append(dict(p, keys=[str(k) for k in keys], counts=counts, seconds=time.perf_counter() - t0))
        print(f"{peer} {noise} eps={eps:g} l0={l0} rep={p.get('rep')}: {len(keys)} keys "
              f"({time.perf_counter() - t0:.1f} s)", file=sys.stderr, flush=True)
    json.dump(out, open(dst, "w"))


if __name__ == "__main__":
    main()
