"""PipelineDP (with Google's python-dp) peer.

Thresholds: python-dp's partition selection strategies at the full (ε, δ) and l0 = max_partitions_contributed:
``laplace`` and ``gaussian`` thresholding (their ``threshold`` attribute) and ``truncated_geometric`` (the
optimal selection-only rule of Desfontaines et al.; no threshold, only a keep probability).
Release: a real PipelineDP pipeline on the LocalBackend, PRIVACY_ID_COUNT per key with
max_partitions_contributed = l0, max_contributions_per_partition = 1, private partition selection with
``post_aggregation_thresholding=True`` (the count's own noise decides release, as in sparsedp; without it
PipelineDP splits the budget between selection and counting and both get worse).
"""

from __future__ import annotations

import pipeline_dp
import pydp.algorithms.partition_selection as ps

from _protocol import main, smallest_int

try:
    from importlib.metadata import version
    VERSION = f"pipeline-dp {version('pipeline-dp')}, python-dp {version('python-dp')}"
except Exception:  # pragma: no cover
    VERSION = "pipeline-dp"


def keep50(strategy) -> int:
    return smallest_int(lambda n: strategy.probability_of_keep(n) >= 0.5)


def thresholds(eps, delta, l0):
    out = []
    for name in ("laplace", "gaussian", "truncated_geometric"):
        s = ps.create_partition_strategy(name, eps, delta, l0)
        out.append({"epsilon": eps, "delta": delta, "l0": l0, "library": "PipelineDP/python-dp",
                    "mechanism": f"partition selection {name}",
                    "threshold": float(getattr(s, "threshold", float("nan"))), "keep50": float(keep50(s))})
    return out


def release(table, eps, delta, l0, noise):
    units = table.column("unit").to_pylist()
    keys = table.column("key").to_pylist()
    rows = list(zip(units, keys))
    acc = pipeline_dp.NaiveBudgetAccountant(total_epsilon=eps, total_delta=delta)
    engine = pipeline_dp.DPEngine(acc, pipeline_dp.LocalBackend())
    params = pipeline_dp.AggregateParams(
        metrics=[pipeline_dp.Metrics.PRIVACY_ID_COUNT],
        noise_kind=pipeline_dp.NoiseKind.LAPLACE if noise == "laplace" else pipeline_dp.NoiseKind.GAUSSIAN,
        max_partitions_contributed=l0, max_contributions_per_partition=1,
        partition_selection_strategy=(pipeline_dp.PartitionSelectionStrategy.LAPLACE_THRESHOLDING
                                      if noise == "laplace" else
                                      pipeline_dp.PartitionSelectionStrategy.GAUSSIAN_THRESHOLDING),
        post_aggregation_thresholding=True)
    ex = pipeline_dp.DataExtractors(privacy_id_extractor=lambda r: r[0], partition_extractor=lambda r: r[1],
                                    value_extractor=lambda r: 0)
    res = engine.aggregate(rows, params, ex)
    acc.compute_budgets()
    out = list(res)
    return [k for k, _ in out], [float(m.privacy_id_count) for _, m in out], {
        "version": VERSION, "mechanism": f"PRIVACY_ID_COUNT, {noise} thresholding (post-aggregation)"}


def aggregates(table, eps, delta, l0, lower, upper, noise):
    """PRIVACY_ID_COUNT, SUM and MEAN per key in one PipelineDP aggregation at the full (ε, δ).

    Contribution model matched to sparsedp's: the rows are first summed per (unit, key) (one row per pair, its
    value the unit's total for the key), then PipelineDP bounds with max_partitions_contributed = l0 (its own
    uniform sample of a unit's keys), max_contributions_per_partition = 1 (the single pre-summed row) and
    min_value / max_value = lower / upper, which clips that row, i.e. the unit's per-key total, exactly as
    sparsedp does. Partition selection by post-aggregation thresholding on the noisy PRIVACY_ID_COUNT (the
    count decides release, as in sparsedp). PipelineDP's NaiveBudgetAccountant splits ε evenly between its
    mechanisms and δ evenly between those that use δ: the thresholded privacy-id count, and MEAN's own noisy count and noisy normalised sum (SUM is
    derived from MEAN's, which PipelineDP shares when SUM and MEAN are both requested).

    NOISE ``laplace-sum`` / ``gaussian-sum``: the same but metrics PRIVACY_ID_COUNT and SUM only (two
    mechanisms; SUM by PipelineDP's SumCombiner, not re-centred) and MEAN = noisy SUM / noisy PRIVACY_ID_COUNT
    computed here (post-processing) — the cheaper way a user could get all three columns.
    """
    sum_only = noise.endswith("-sum")
    noise = noise.removesuffix("-sum")
    per_pair: dict = {}
    for u, k, x in zip(table.column("unit").to_pylist(), table.column("key").to_pylist(),
                       table.column("value").to_pylist()):
        per_pair[(u, k)] = per_pair.get((u, k), 0.0) + x
    rows = [(u, k, x) for (u, k), x in per_pair.items()]
    acc = pipeline_dp.NaiveBudgetAccountant(total_epsilon=eps, total_delta=delta)
    engine = pipeline_dp.DPEngine(acc, pipeline_dp.LocalBackend())
    params = pipeline_dp.AggregateParams(
        metrics=[pipeline_dp.Metrics.PRIVACY_ID_COUNT, pipeline_dp.Metrics.SUM,
                 *(() if sum_only else (pipeline_dp.Metrics.MEAN,))],
        noise_kind=pipeline_dp.NoiseKind.LAPLACE if noise == "laplace" else pipeline_dp.NoiseKind.GAUSSIAN,
        max_partitions_contributed=l0, max_contributions_per_partition=1, min_value=lower, max_value=upper,
        partition_selection_strategy=(pipeline_dp.PartitionSelectionStrategy.LAPLACE_THRESHOLDING
                                      if noise == "laplace" else
                                      pipeline_dp.PartitionSelectionStrategy.GAUSSIAN_THRESHOLDING),
        post_aggregation_thresholding=True)
    ex = pipeline_dp.DataExtractors(privacy_id_extractor=lambda r: r[0], partition_extractor=lambda r: r[1],
                                    value_extractor=lambda r: r[2])
    res = engine.aggregate(rows, params, ex)
    acc.compute_budgets()
    out = list(res)
    counts = [float(m.privacy_id_count) for _, m in out]
    sums = [float(m.sum) for _, m in out]
    means = [s / c for s, c in zip(sums, counts)] if sum_only else [float(m.mean) for _, m in out]
    what = "PRIVACY_ID_COUNT + SUM, MEAN = SUM / PRIVACY_ID_COUNT" if sum_only else "PRIVACY_ID_COUNT + SUM + MEAN"
    return ([k for k, _ in out], counts, sums, means,
            {"version": VERSION, "mechanism": f"{what}, {noise} noise, {noise} thresholding (post-aggregation)"})


def public_keys(table, listed, eps, delta, l0, noise):
    """PRIVACY_ID_COUNT with ``public_partitions=listed`` (PipelineDP's public partitions: every listed key gets
    a noisy count, no selection), max_partitions_contributed = l0, max_contributions_per_partition = 1, the whole
    (ε, δ) on the one metric (NaiveBudgetAccountant)."""
    rows = list(zip(table.column("unit").to_pylist(), table.column("key").to_pylist()))
    acc = pipeline_dp.NaiveBudgetAccountant(total_epsilon=eps, total_delta=delta if noise != "laplace" else 0.0)
    engine = pipeline_dp.DPEngine(acc, pipeline_dp.LocalBackend())
    params = pipeline_dp.AggregateParams(
        metrics=[pipeline_dp.Metrics.PRIVACY_ID_COUNT],
        noise_kind=pipeline_dp.NoiseKind.LAPLACE if noise == "laplace" else pipeline_dp.NoiseKind.GAUSSIAN,
        max_partitions_contributed=l0, max_contributions_per_partition=1)
    ex = pipeline_dp.DataExtractors(privacy_id_extractor=lambda r: r[0], partition_extractor=lambda r: r[1],
                                    value_extractor=lambda r: 0)
    res = engine.aggregate(rows, params, ex, public_partitions=list(listed))
    acc.compute_budgets()
    out = dict(res)
    return list(listed), [float(out[k].privacy_id_count) for k in listed], {
        "version": VERSION, "mechanism": f"PRIVACY_ID_COUNT, {noise} noise, public partitions"}


def quantiles(table, eps, delta, l0, lower, upper, cells):
    """``Metrics.PERCENTILE(50)`` per key in one PipelineDP aggregation at the full (ε, δ): max_partitions_contributed
    = l0 (its own uniform sample of a unit's keys), max_contributions_per_partition = 1 (its own sample of a
    unit's rows per key), min_value / max_value = lower / upper; keys by PipelineDP's default private partition
    selection (NaiveBudgetAccountant: ε split evenly between the selection and the percentile). PipelineDP's
    percentile (python-dp's quantile tree) takes no candidate grid; ``cells`` is not used."""
    rows = list(zip(table.column("unit").to_pylist(), table.column("key").to_pylist(),
                    table.column("value").to_pylist()))
    acc = pipeline_dp.NaiveBudgetAccountant(total_epsilon=eps, total_delta=delta)
    engine = pipeline_dp.DPEngine(acc, pipeline_dp.LocalBackend())
    params = pipeline_dp.AggregateParams(
        metrics=[pipeline_dp.Metrics.PERCENTILE(50)], noise_kind=pipeline_dp.NoiseKind.LAPLACE,
        max_partitions_contributed=l0, max_contributions_per_partition=1, min_value=lower, max_value=upper)
    ex = pipeline_dp.DataExtractors(privacy_id_extractor=lambda r: r[0], partition_extractor=lambda r: r[1],
                                    value_extractor=lambda r: r[2])
    res = engine.aggregate(rows, params, ex)
    acc.compute_budgets()
    out = list(res)
    return [k for k, _ in out], [float(m.percentile_50) for _, m in out], {
        "version": VERSION, "mechanism": "PERCENTILE(50), Laplace, default partition selection"}


if __name__ == "__main__":
    main(thresholds, release, aggregates, public_keys, quantiles)
