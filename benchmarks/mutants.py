"""Mutation testing: deliberate privacy bugs, each of which the test suite (or the audit) must catch.

Each :class:`Mutant` is one small, exact source patch: ``Edit(file, old, new)`` replaces the text ``old``, which
must occur exactly once in ``src/sparsedp/<file>`` (the script fails loudly otherwise, so the list cannot rot
silently when the code moves). A mutant is applied to a fresh temporary COPY of ``src/`` (never to the working
tree); then, with ``PYTHONPATH`` pointing at the copy (checked: ``sparsedp.__file__`` must be in the copy),

1. its targeted tests (the tests covering the mutated code, listed with the mutant) run with
   ``pytest -n 0 -x`` (stop at the first failure);
2. if it lists audit arguments, ``python -m sparsedp audit …`` runs on it (exit 1 = contradiction = killed).

A mutant is KILLED when a listed test fails or the audit reports a contradiction, and SURVIVED otherwise. The
baseline (``--baseline``) runs every listed test and audit on the unmutated copy first: a kill only means
something if the same tests pass without the mutation (and the audit does not contradict the claim).

Why a script in ``benchmarks/`` and not ``tests/mutation/``: each mutant runs a pytest session in a subprocess
on a patched copy of the source (minutes in all on two cores), which must not be collected by the default
suite; the tests that kill the mutants are ordinary tests in ``tests/``.

Usage (from the repository root)::

    python benchmarks/mutants.py --check            # every anchor found exactly once (no test run)
    python benchmarks/mutants.py --list             # names and descriptions
    python benchmarks/mutants.py                    # all mutants: kill list (markdown) + runtime
    python benchmarks/mutants.py --only gshm-margin-1 spark-l0+1 --no-audit
    python benchmarks/mutants.py --baseline         # the listed tests/audits on the unmutated source first
    python benchmarks/mutants.py --baseline-only --skip-tag spark   # only that (here without the Spark tests)
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"


@dataclass(frozen=True)
class Edit:
    """Replace ``old`` (which must occur exactly once) by ``new`` in ``src/sparsedp/<file>``."""

    file: str
    old: str
    new: str


@dataclass(frozen=True)
class Mutant:
    name: str
    what: str
    edits: tuple[Edit, ...]
    tests: tuple[str, ...]
    audit: tuple[str, ...] = ()  # arguments of ``python -m sparsedp audit`` (empty: no audit)
    tags: tuple[str, ...] = field(default=())


#: the audit's arguments per mechanism: small bounds have the most power (runner docstring)
# the audit's default trial counts (privacy scenarios + law check; docs/audit.md's power table)
_AUDIT_GSHM = ("gshm", "--epsilon", "1", "--delta", "1e-5", "--l0", "2", "--seed", "7")
_AUDIT_LAPLACE = ("laplace", "--epsilon", "1", "--delta", "1e-5", "--l0", "2", "--seed", "7")
_AUDIT_TOPK = ("topk-csh", "--epsilon", "1", "--delta", "1e-3", "--l0", "4", "--seed", "7")

# test ids (files or nodes) reused by several mutants
T_LAW = "tests/mechanisms/test_mech_release_law.py"
T_CSH_ROUNDED = "tests/mechanisms/test_mech_csh_rounded.py"
T_CAL = "tests/accounting/test_calibrate.py"
T_API = "tests/api/test_api_release.py"
T_BOUND = "tests/engines/test_engines_bounding.py"
T_DUCK = "tests/engines/test_duckdb_sql_bounding.py"
T_SPARK = "tests/spark/test_spark_engine.py"
T_PURE_API = "tests/api/test_api_pure_mg.py"
T_LEDGER = "tests/ledger"
T_MUT = "tests/api/test_release_integrity.py"
T_OPTIMAL = "tests/mechanisms/test_optimal_partition.py"
T_LEDGER_OVERSPEND = "tests/ledger/test_ledger_overspend.py"
T_SPARK_MUTABLE = "tests/spark/test_spark_mutable_source.py"
T_MAD = "tests/mechanisms/test_adaptive_weighting.py"
T_PAIR_IDS = "tests/engines/test_pair_ids.py"
T_SORTED_RUNS = "tests/engines/test_sorted_runs.py"
T_ROUNDS_CACHE = "tests/accounting/test_rounds_cache.py"

MUTANTS: tuple[Mutant, ...] = (
    # ------------------------------------------------------------------ noise scale halved (σ/2)
    Mutant("gshm-sigma/2", "GSHM samples N_Z(0, s/4) (σ/2) while the calibration claims σ",
           (Edit("accounting/discrete_histograms.py", "noise=DiscreteGaussian(s), comparison=Comparison.GE, l0=k",
                 "noise=DiscreteGaussian(s / 4), comparison=Comparison.GE, l0=k"),),
           (T_LAW, T_MUT), _AUDIT_GSHM),
    Mutant("laplace-scale/2", "Laplace samples discrete Laplace(t/2) while the calibration claims t",
           (Edit("accounting/discrete_histograms.py", "noise=DiscreteLaplace(t), comparison=Comparison.GE, l0=k",
                 "noise=DiscreteLaplace(t / 2), comparison=Comparison.GE, l0=k"),),
           (T_LAW, T_MUT), _AUDIT_LAPLACE),
    Mutant("laplace-l0=1-tail/2", "the Laplace accountant's one-coordinate binomial tail I_p(1, 1) halved (δ at l0 = 1 "
           "understated)",
           (Edit("accounting/discrete_histograms.py", "else np.full(a.shape, float(p))",
                 "else np.full(a.shape, float(p) / 2)"),),
           ("tests/accounting/test_start_up_imports.py", "tests/accounting/test_laplace_acc.py",
            "tests/mechanisms/test_mech_discrete_accounting.py")),
    Mutant("csh-sigma/2", "rounded CSH / top-k CSH sample σ/2 (own and shared term) while claiming σ",
           (Edit("accounting/calibrate.py", "noise=laws.RoundedCorrelatedGaussian(sigma, sigma * k ** -0.25), "
                 "comparison=Comparison.GE,\n            tau_continuous=t - 0.5",
                 "noise=laws.RoundedCorrelatedGaussian(sigma / 2, sigma / 2 * k ** -0.25), "
                 "comparison=Comparison.GE,\n            tau_continuous=t - 0.5"),),
           (T_CSH_ROUNDED, T_LAW), _AUDIT_TOPK),
    Mutant("kernel-sigma/2", "the per-key kernel samples N_Z(0, σ²/4) for any discrete-Gaussian law",
           (Edit("mechanisms/kernel.py", 'self.family, self.scale = "gaussian", law.sigma2',
                 'self.family, self.scale = "gaussian", law.sigma2 / 4'),),
           (T_LAW,), _AUDIT_GSHM),
    # ------------------------------------------------------------------ margin − 1 per mechanism
    Mutant("gshm-margin-1", "GSHM calibrated margin one below the accountant's",
           (Edit("accounting/discrete_histograms.py", "sigma=math.sqrt(float(s)), tau=float(margin),",
                 "sigma=math.sqrt(float(s)), tau=float(margin - 1),"),),
           (T_CAL, T_LAW, T_MUT), _AUDIT_GSHM),
    Mutant("laplace-margin-1", "Laplace calibrated margin one below the accountant's",
           (Edit("accounting/discrete_histograms.py", "sigma=float(t), tau=float(margin),",
                 "sigma=float(t), tau=float(margin - 1),"),),
           (T_CAL, T_LAW, T_MUT), _AUDIT_LAPLACE),
    Mutant("topk-debiased-margin-1", "de-biased top-k CSH (the default) runs with margin − 1",
           (Edit("accounting/calibrate.py", 'analysis="rounded-exact", epsilon=eps, delta=dlt, sigma=sigma, tau=float(t),',
                 'analysis="rounded-exact", epsilon=eps, delta=dlt, sigma=sigma, '
                 "tau=float(t - (mechanism == 'topk-csh' and debias)),"),),
           (T_CAL, "tests/accounting/test_csh_rounded.py", T_CSH_ROUNDED, "tests/mechanisms/test_mech_topk.py"),
           _AUDIT_TOPK),
    Mutant("topk-shifted-margin-1", "shifted top-k CSH (debias=False) runs with margin − 1",
           (Edit("accounting/calibrate.py", 'analysis="rounded-exact", epsilon=eps, delta=dlt, sigma=sigma, tau=float(t),',
                 'analysis="rounded-exact", epsilon=eps, delta=dlt, sigma=sigma, '
                 "tau=float(t - (mechanism == 'topk-csh' and not debias)),"),),
           (T_CAL, "tests/accounting/test_csh_rounded.py", T_CSH_ROUNDED, "tests/mechanisms/test_mech_topk.py")),
    Mutant("topk-joint-margin-1", "de-biased top-k CSH with SUM/MEAN columns runs with margin − 1",
           (Edit("mechanisms/thresholded.py", "tau=float(j.margin), noise_std=_csh.csh_rounded_noise_std(j.sigma, k),",
                 "tau=float(j.margin - 1), noise_std=_csh.csh_rounded_noise_std(j.sigma, k),"),),
           ("tests/mechanisms/test_mech_gshm_aggregates.py", T_MUT)),
    Mutant("gshm-joint-margin-1", "GSHM with SUM/MEAN columns runs with margin − 1",
           (Edit("mechanisms/thresholded.py", "sigma=math.sqrt(float(j.count_sigma2)), tau=float(j.margin),",
                 "sigma=math.sqrt(float(j.count_sigma2)), tau=float(j.margin - 1),"),),
           ("tests/mechanisms/test_mech_gshm_aggregates.py", "tests/api/test_aggregates_release.py")),
    Mutant("stability-margin-1", "pure stability histogram releases counts > τ − 1",
           (Edit("mechanisms/pure/stability.py", "counts.keys(), rng) if c > tau)",
                 "counts.keys(), rng) if c > tau - 1)"),),
           ("tests/pure/test_pure_release.py", T_MUT)),
    Mutant("misra-gries-margin-1", "private Misra–Gries releases counters >= τ − 1",
           (Edit("sketches/private_mg.py", "keep = (noisy >= tau) & ~dummy", "keep = (noisy >= tau - 1) & ~dummy"),),
           ("tests/sketches/test_pmg_privacy.py", T_PURE_API)),
    # ------------------------------------------------------------------ CSH shared term
    Mutant("csh-no-shared-term", "rounded CSH releases round(G_i) with no shared term A (per-key noise only)",
           (Edit("mechanisms/kernel.py", "law: IntegerLaw = _rounded().RoundedShiftedGaussianLaw(self.sigma, shared)",
                 "law: IntegerLaw = _rounded().RoundedShiftedGaussianLaw(self.sigma, None)"),),
           (T_CSH_ROUNDED, T_LAW), _AUDIT_TOPK),
    Mutant("topk-no-debias-noise", "de-biased top-k releases t̃ = t (the cut-off's noise dropped)",
           (Edit("mechanisms/thresholded.py", "offset = cutoff + kernel.debias_noise(plan, rng)",
                 "offset = cutoff + 0 * kernel.debias_noise(plan, rng)"),),
           ("tests/mechanisms/test_mech_topk.py", T_MUT)),
    # ------------------------------------------------------------------ comparison
    Mutant("ge-to-gt", "discrete GSHM/Laplace rule c + Z > pre + margin instead of >=",
           (Edit("mechanisms/kernel.py", "thr = math.floor(threshold) + 1 if self.strict else math.ceil(threshold)",
                 "thr = math.floor(threshold) + 1 if not self.strict else math.ceil(threshold)"),),
           (T_LAW,)),
    Mutant("gt-to-ge", "Algorithm-4 CSH rule >= instead of the accounted strict >",
           (Edit("mechanisms/kernel.py", "base = math.floor(t2) + 1 if self.strict else math.ceil(t2)",
                 "base = math.floor(t2) + 1 if not self.strict else math.ceil(t2)"),),
           (T_LAW, T_MUT)),
    Mutant("rounded-ge-to-gt", "rounded CSH rule c + X > pre + margin instead of >=",
           (Edit("mechanisms/kernel.py", "return math.ceil(threshold) - counts",
                 "return math.floor(threshold) + 1 - counts"),),
           (T_CSH_ROUNDED,)),
    # ------------------------------------------------------------------ l0 + 1 keys kept (each engine)
    Mutant("polars-l0+1", "the Polars engine keeps l0 + 1 keys per unit",
           (Edit("engines/pair_ids.py", "keep = keep_smallest(seg, rank, ctx.pos[k], ctx.l0, heavy_n)",
                 "keep = keep_smallest(seg, rank, ctx.pos[k], ctx.l0 + 1, heavy_n)"),),
           (T_BOUND, T_DUCK)),
    Mutant("duckdb-sql-l0+1", "the DuckDB engine's bounding keeps l0 + 1 keys per unit",
           (Edit("engines/duckdb_engine.py", "bits_for(kdf.height - 1), l0, secret, privacy_unit,",
                 "bits_for(kdf.height - 1), None if l0 is None else l0 + 1, secret, privacy_unit,"),),
           (T_DUCK, T_BOUND)),
    Mutant("pandas-l0+1", "the pandas engine passes l0 + 1 to the bounding engine",
           (Edit("engines/pandas_engine.py",
                 "return fastest_embedded_engine(data).bounded_raw_counts(data, privacy_unit, by, l0, rng)",
                 "return fastest_embedded_engine(data).bounded_raw_counts(data, privacy_unit, by, "
                 "None if l0 is None else l0 + 1, rng)"),),
           (T_BOUND, T_DUCK)),
    Mutant("arrow-l0+1", "the Arrow engine passes l0 + 1 to the bounding engine",
           (Edit("engines/arrow_engine.py",
                 "return fastest_embedded_engine(data).bounded_raw_counts(data, privacy_unit, by, l0, rng)",
                 "return fastest_embedded_engine(data).bounded_raw_counts(data, privacy_unit, by, "
                 "None if l0 is None else l0 + 1, rng)"),),
           (T_BOUND, T_DUCK)),
    Mutant("bounding-core-l0+1", "the shared choice (keep_smallest) keeps l0 + 1 per unit",
           (Edit("engines/bounding.py", "    return pos < l0\n", "    return pos <= l0\n"),),
           ("tests/engines/test_select_pairs.py", T_BOUND)),
    Mutant("spark-l0+1", "Spark's bounding task keeps l0 + 1 keys per unit",
           (Edit("engines/spark_engine.py",
                 "counts = bounded_key_counts(pairs, self.unit, list(self.by), self.l0, self.secret).to_arrow()",
                 "counts = bounded_key_counts(pairs, self.unit, list(self.by), self.l0 + 1, self.secret).to_arrow()"),),
           (T_SPARK + "::test_binding_l0_matches_polars_with_the_same_source",), tags=("spark",)),
    # ------------------------------------------------------------------ the sort in runs (engines/sorted_runs.py)
    Mutant("runs-split-units", "buckets of the sorted runs cut inside a unit (its l0 bound applied per bucket)",
           (Edit("engines/sorted_runs.py", "splitters = np.unique((sample[at] >> b) << b)",
                 "splitters = np.unique(sample[at])"),),
           (T_SORTED_RUNS, T_PAIR_IDS + "::test_sorted_runs_in_threads_give_the_per_key_lists_result")),
    Mutant("runs-not-merged", "a bucket's segments of the runs concatenated but not merged",
           (Edit("engines/sorted_runs.py", 'out.sort(kind="stable")', "pass"),),
           (T_SORTED_RUNS, T_PAIR_IDS + "::test_sorted_runs_in_threads_give_the_per_key_lists_result")),
    # ------------------------------------------------------------------ no de-duplication of (unit, key)
    Mutant("polars-no-dedup", "the Polars engine's pair-id path counts repeated (unit, key) rows",
           (Edit("engines/pair_ids.py", "return srt[new_pair], (np.flatnonzero", "return srt, (np.flatnonzero"),),
           (T_BOUND,)),
    Mutant("per-key-lists-no-dedup", "the per-key-list grouping (Spark tasks) keeps repeated (unit, key) rows",
           (Edit("engines/bounding.py", "return lf.group_by(by).agg(pl.col(unit).unique())",
                 "return lf.group_by(by).agg(pl.col(unit))"),),
           ("tests/engines/test_pair_ids.py",)),
    Mutant("duckdb-no-dedup", "the DuckDB SQL bounding counts repeated (unit, key) rows",
           (Edit("engines/duckdb_engine.py", 'return f"SELECT DISTINCT {_U}, {_KI} FROM {joined}"',
                 'return f"SELECT {_U}, {_KI} FROM {joined}"'),),
           (T_DUCK,)),
    Mutant("duckdb-rows-no-dedup", "the DuckDB engine's in-memory route counts repeated (unit, key) rows",
           (Edit("engines/duckdb_engine.py", "return bound_pair_ids(ctx, pid, value_of, values)",
                 "return bound_pair_ids(__import__('dataclasses').replace(ctx, distinct=True), pid, value_of, "
                 "values)"),),
           (T_DUCK,)),
    Mutant("spark-topk-no-dedup", "Spark without an l0 bound (top-k) counts rows instead of distinct units",
           (Edit("engines/spark_engine.py", "F.countDistinct(unit).cast(\"long\").alias(COUNT)",
                 "F.count(unit).cast(\"long\").alias(COUNT)"),),
           (T_SPARK + "::test_release_schema_and_values_like_polars",), tags=("spark",)),
    # ------------------------------------------------------------------ noise reused across releases
    Mutant("fixed-noise-key", "K_noise is the same for every release (noise reused across releases)",
           (Edit("mechanisms/thresholded.py", "return bytes(rng.random_bytes(32))", "return bytes(32)"),),
           (T_API, T_MUT)),
    Mutant("fixed-shared-term", "the CSH shared term's secret is the same for every release",
           (Edit("noise/rounded.py", "return cls(sigma_c, bytes(checked_source(rng).random_bytes(32)))",
                 "return cls(sigma_c, bytes(32))"),),
           (T_CSH_ROUNDED, T_MUT)),
    Mutant("one-stream-for-all-chunks", "every noise chunk reuses the same keyed stream",
           (Edit("core/noise_chunks.py", 'return b"noise chunk " + int(chunk).to_bytes(8, "little", signed=True)',
                 'return b"noise chunk "'),),
           (T_API, T_MUT)),
    # ------------------------------------------------------------------ non-private values reaching Result
    Mutant("exact-histogram-in-result", "the exact bounded histogram is stored in Result.query",
           (Edit("execution.py", "curator=curator, query=released.query, row_laws=ctx.row_laws)",
                 "curator=curator, query=released.query or ctx.hists[-1], row_laws=ctx.row_laws)"),),
           (T_API,)),
    Mutant("exact-cutoff-in-report", "top-k's report note states the exact cut-off t, not the noisy t̃",
           (Edit("mechanisms/thresholded.py", 'f"released noisy cut-off t̃ = {task.offset:g}"',
                 'f"released noisy cut-off t̃ = {t:g}"'),),
           (T_API, T_MUT)),
    Mutant("mg-sketch-in-result", "the exact Misra–Gries sketch reaches the Result (query)",
           (Edit("mechanisms/misra_gries.py", "return Released(rows=table, disclosure=disclosure, in_process=True)",
                 "return Released(rows=table, disclosure=disclosure, in_process=True, query=hist)"),),
           (T_PURE_API, T_MUT)),
    # ------------------------------------------------------------------ ledger
    Mutant("release-not-charged", "release() skips the ledger charge (the pre-check only)",
           (Edit("execution.py", 'self.charge_id = self.ledger.charge(self.dataset, charge, note=f"{what} {source_name}")',
                 "self.charge_id = None"),),
           ("tests/ledger/test_ledger_release.py", T_LEDGER_OVERSPEND)),
    Mutant("grouped-two-groups-per-unit", "seed 002 Alg. 2 keeps two groups per unit (the accountant assumes one)",
           (Edit("engines/pairs.py", "select_pairs(rows.select(unit, group), unit, [group], 1, secret)",
                 "select_pairs(rows.select(unit, group), unit, [group], 2, secret)"),),
           ("tests/api/test_grouped_keys_release.py",)),
    Mutant("auto-bound-not-charged", "max_groups_per_unit='auto' skips the ledger charge",
           (Edit("execution.py", 'self.charge_id = self.ledger.charge(self.dataset, charge, note=f"{what} {source_name}")',
                 "self.charge_id = None"),),
           ("tests/api/test_auto_bound.py",)),
    Mutant("compose-drops-gaussian-parts", "composition keeps only the first release's discrete-Gaussian parts",
           (Edit("accounting/composition.py", "dgauss=self.dgauss + other.dgauss, dlaplace",
                 "dgauss=self.dgauss or other.dgauss, dlaplace"),),
           ("tests/ledger/test_ledger_composed.py", "tests/accounting/test_composition.py", T_LEDGER_OVERSPEND)),
    Mutant("compose-max-continuous", "composition takes the max of the Gaussian μ² instead of the sum",
           (Edit("accounting/composition.py", "gaussian_mu2=self.gaussian_mu2 + other.gaussian_mu2,",
                 "gaussian_mu2=max(self.gaussian_mu2, other.gaussian_mu2),"),),
           ("tests/ledger/test_ledger_composed.py", "tests/accounting/test_composition.py", T_LEDGER_OVERSPEND)),
    Mutant("compose-threshold-not-added", "composition keeps one release's threshold (infinite-loss) mass",
           (Edit("accounting/composition.py", "log_keep=(self.log_keep + other.log_keep) * (1.0 + _REL),",
                 "log_keep=min(self.log_keep, other.log_keep),"),),
           ("tests/ledger/test_ledger_composed.py", "tests/accounting/test_composition.py", T_LEDGER_OVERSPEND)),
    Mutant("basic-or-instead-of-and", "basic composition admits when ε OR δ fits",
           (Edit("ledger.py", "return self.eps <= b_eps * (1 + _SLACK) and self.dlt <= b_dlt * (1 + _SLACK)",
                 "return self.eps <= b_eps * (1 + _SLACK) or self.dlt <= b_dlt * (1 + _SLACK)"),),
           ("tests/ledger/test_ledger.py",)),
    Mutant("replace-one-no-conversion", "an add/remove charge counts as (ε, δ) on a replace-one budget",
           (Edit("ledger.py", "e2, d2 = 2.0 * r.epsilon, min(1.0, (1.0 + math.exp(r.epsilon)) * r.delta)",
                 "e2, d2 = r.epsilon, min(1.0, r.delta)"),),
           ("tests/ledger/test_ledger_composed.py", T_LEDGER_OVERSPEND)),
    Mutant("replace-one-admitted", "a replace-one charge is admitted on an add/remove budget",
           (Edit("ledger.py", "if rel is Neighbours.ADD_REMOVE and c.neighbours is Neighbours.REPLACE_ONE:",
                 "if False:"),),
           ("tests/ledger/test_ledger_composed.py", T_LEDGER_OVERSPEND)),
    Mutant("pure-charged-add-remove", "a replace-one (pure, no max_units) release is charged as add/remove",
           (Edit("mechanisms/pure/registered.py",
                 "return Charge(epsilon=float(calibration), delta=disclosure.delta, neighbours=self.neighbours,",
                 "return Charge(epsilon=float(calibration), delta=disclosure.delta, "
                 "neighbours=type(self.neighbours).ADD_REMOVE,"),),
           (T_LEDGER_OVERSPEND,)),
    Mutant("gshm-profile-one-key", "the ledger profile of GSHM counts one key instead of l0",
           (Edit("accounting/profiles.py", "return _composition.DominatingPair(dgauss=((self.sigma2, self.l0),),",
                 "return _composition.DominatingPair(dgauss=((self.sigma2, 1),),"),),
           ("tests/ledger/test_ledger_composed.py", T_LEDGER_OVERSPEND)),
    Mutant("pure-neighbours-always-add-remove", "pure DP without max_units claims add/remove neighbours",
           (Edit("mechanisms/pure/registered.py",
                 "return Neighbours.ADD_REMOVE if self.max_units is not None else Neighbours.REPLACE_ONE",
                 "return Neighbours.ADD_REMOVE"),),
           (T_LEDGER_OVERSPEND, T_PURE_API)),
    # ------------------------------------------------------------------ other contribution-model bugs
    Mutant("topk-cutoff-k+2", "top-k truncates at the (k+2)-th count: k + 1 keys survive",
           (Edit("mechanisms/thresholded.py", "t = engine.kth_largest(hist, self.k + 1)",
                 "t = engine.kth_largest(hist, self.k + 2)"),),
           ("tests/mechanisms/test_mech_topk.py", T_API)),
    Mutant("mg-no-group-privacy", "Misra–Gries runs at (ε, δ) although each unit adds l0 stream elements",
           (Edit("mechanisms/misra_gries.py",
                 "            eps_e, dlt_e = group_privacy_parameters(request.epsilon, request.delta, group)",
                 "            eps_e, dlt_e = request.epsilon, request.delta"),),
           (T_PURE_API,)),
    Mutant("fixed-bounding-secret", "the l0 choice uses a fixed secret (predictable, steerable drops)",
           (Edit("engines/bounding.py", "        out = bytes(rb(SECRET_BYTES))", "        out = bytes(SECRET_BYTES)"),),
           (T_BOUND,)),
    # ------------------------------------------------------------------ adaptive weighting (mad, mad2r)
    Mutant("mad-reweight-up", "a re-weighted unit gives its keys the weight of one key fewer (W_{t-1} > W_t: "
           "its l2 norm exceeds 1 after re-weighting)",
           (Edit("engines/pairs.py", 'pl.len().over(unit).cast(pl.Int64).alias("__t")',
                 '(pl.len().over(unit) - 1).clip(lower_bound=1).cast(pl.Int64).alias("__t")'),),
           (T_MAD + "::test_round_weights_are_the_largest_integers_of_unit_norm", T_MAD)),
    Mutant("mad-round-up", "the re-weighted weight is rounded up (floor(G/sqrt(t)) + 1 grid steps)",
           (Edit("engines/pairs.py", '"__w": np.asarray(weights, dtype=np.int64)})',
                 '"__w": np.asarray(weights, dtype=np.int64) + 1})'),),
           (T_MAD + "::test_round_weights_are_the_largest_integers_of_unit_norm", T_MAD)),
    Mutant("mad-fast-reweight-up", "the engines' later round (mad: round 1's choice kept) gives a unit left with t "
           "kept keys the weight W_{t-1} (its l2 norm exceeds 1 after re-weighting)",
           (Edit("engines/pair_ids.py", "w = np.repeat(ctx.degree_weights[np.maximum(t, 1) - 1], deg)[kept]",
                 "w = np.repeat(ctx.degree_weights[np.maximum(t - 1, 1) - 1], deg)[kept]"),),
           (T_MAD + "::test_round_weights_are_the_largest_integers_of_unit_norm", T_MAD)),
    Mutant("mad2r-fast-keeps-first-choice", "the engines' later round of mad2r drops the released keys after the "
           "choice (a unit whose kept keys were released gets no second chance)",
           (Edit("engines/pair_ids.py", "late = ctx.excluded is not None and ctx.choose_first",
                 "late = ctx.excluded is not None"),),
           (T_MAD + "::test_mad_keeps_round_ones_choice_and_mad2r_chooses_again", T_MAD)),
    Mutant("mad-fast-record-any-secret", "the engines' later round reads round 1's recorded choice under any "
           "secret (a choice keyed by another secret replaced by round 1's)",
           (Edit("engines/pair_ids.py", "first_choice=wp.first_choice if choose_first and first else None)",
                 "first_choice=wp.first_choice if choose_first else None)"),),
           (T_PAIR_IDS + "::test_mad_later_round_reads_round_ones_choice_back_and_ranks_nothing", T_PAIR_IDS)),
    Mutant("rounds-cache-trusts-composed-delta", "a rounds calibration read from the disk cache is used whatever its "
           "composed δ(ε) (an altered entry charged as meeting δ)",
           (Edit("accounting/rounds_cache.py", "0.0 < a <= 1.0 and max(parts) <= achieved <= dlt)",
                 "0.0 < a <= 1.0)"),),
           (T_ROUNDS_CACHE,)),
    Mutant("rounds-cache-no-round-recheck", "a rounds calibration read from the disk cache is not re-evaluated by the "
           "exact accountant round by round (an altered scale or threshold trusted)",
           (Edit("accounting/rounds_cache.py", "        if r.delta_achieved != d:", "        if False:"),
            Edit("accounting/rounds_cache.py", "    if len(fs) > 1 and any(new_key_term(", "    if False and any(new_key_term(")),
           (T_ROUNDS_CACHE,)),
    Mutant("mad-new-key-threshold-1", "each round's threshold one grid step below the new-key bound",
           (Edit("accounting/adaptive_weighting.py", "                            int(grid_weights(l0, grid)[0]) + 1)",
                 "                            int(grid_weights(l0, grid)[0]) + 1) - 1"),),
           (T_MAD,)),
    Mutant("wg-degree-weight-up", "the Weighted Gaussian's fast histogram gives a unit that keeps t keys the weight "
           "W_{t-1} (its l2 norm exceeds 1)",
           (Edit("engines/pair_ids.py", "w = np.repeat(ctx.degree_weights[np.minimum(deg, ctx.l0) - 1], deg)",
                 "w = np.repeat(ctx.degree_weights[np.maximum(np.minimum(deg, ctx.l0) - 2, 0)], deg)"),),
           ("tests/mechanisms/test_set_union.py::test_weighted_histogram_is_the_select_pairs_definition_with_the_same_secret",
            "tests/mechanisms/test_set_union.py")),
    Mutant("mad-threshold-floor-high", "the floor that lets auto skip the rounds uses a tenth of δ (above the "
           "calibrated last threshold: auto would drop a candidate that might win)",
           (Edit("accounting/adaptive_weighting.py", "    return new_key_threshold(s_last, k, g, dlt)",
                 "    return new_key_threshold(s_last, k, g, dlt / 10)"),),
           (T_MAD + "::test_last_threshold_floor_is_below_the_calibrated_threshold", T_MAD)),
    Mutant("wg-loss-boundary-floor", "the Weighted Gaussian's hockey stick takes the lower loss boundary rounded down "
           "(floor, not ceil: the set {L >= ε} one point too large under the shifted law)",
           (Edit("accounting/set_union.py", "    x1 = -((half - mid) // den)", "    x1 = (mid - half) // den"),),
           ("tests/mechanisms/test_set_union.py::test_hockey_stick_boundaries_are_the_exact_rational_ones",
            "tests/mechanisms/test_set_union.py")),
    Mutant("mad-one-round-2delta", "one round (mad at l0 = 1, shares=(1,)) calibrated at 2δ: its threshold and "
           "scale below the Weighted Gaussian's at the δ charged",
           (Edit("accounting/adaptive_weighting.py", "    wg = calibrate_weighted_gaussian(epsilon, delta, l0, grid)",
                 "    wg = dataclasses.replace(calibrate_weighted_gaussian(epsilon, 2 * delta, l0, grid), delta=delta)"),),
           (T_MAD + "::test_one_round_is_the_weighted_gaussians_calibration_and_charge", T_MAD)),
    # ------------------------------------------------------------------ optimal l0 = 1 partition selection
    Mutant("optimal-partition-round-up", "the optimal partition selection's curve rounds the e^eps constraint UP "
           "(ceil instead of floor on the dyadic grid)",
           (Edit("accounting/partition_selection.py", "        up = (a * two_q * dd + dn * one * hi) // (hi * dd)",
                 "        up = -(-(a * two_q * dd + dn * one * hi) // (hi * dd))"),),
           (T_OPTIMAL,)),
    Mutant("optimal-partition-count+1", "a key of count n is released with the probability of count n + 1",
           (Edit("mechanisms/partition_selection.py",
                 "        idx = np.minimum(c[live], len(self.curve.numerators)) - 1",
                 "        idx = np.minimum(c[live] + 1, len(self.curve.numerators)) - 1"),),
           (T_OPTIMAL,)),
    Mutant("dyadic-tie-dropped", "the exact dyadic Bernoulli never draws its low bits: a tie of the first 64-bit "
           "word is never released (probability a/2^b rounded down to 64 bits)",
           (Edit("noise/dyadic.py", "    if ties.size and low_bits:", "    if False:"),),
           (T_OPTIMAL,)),
    Mutant("canonical-rows-in-input-order", "the canonical key order replaced by the keys' row order (first "
           "appearance in the input): the tie-break of the l0 choice and the order the noise is drawn in then "
           "depend on the input's row order, not on the key values only",
           (Edit("core/key_order.py", "ranked.sort([*canonical_order(frame.schema, cols), pl.col(_ROW)])",
                 "ranked.sort([pl.col(_ROW)])"),),
           ("tests/engines/test_canonical_rows.py", "tests/engines/test_pair_ids.py")),
    Mutant("keys-objective-bucket-positions", "the keys objective's per-unit positions counted from the bucket's "
           "first ranked pair instead of each unit's (a unit's kept pairs then depend on other units: the "
           "statistic's sensitivity proof fails)",
           (Edit("engines/pair_ids.py", "within[order] = np.arange(hidx.size, dtype=np.int64) - (np.cumsum(hd) - hd)[seg[order]]",
                 "within[order] = np.arange(hidx.size, dtype=np.int64)"),),
           ("tests/api/test_auto_keys.py",)),
    # ------------------------------------------------------------------ Spark: one histogram per release
    Mutant("spark-hist-not-persisted", "Spark's bounded histogram is not persisted (recomputed per action)",
           (Edit("engines/spark_engine.py", "aggregates=tuple(aggregates))\n        hist = hist.persist(StorageLevel.MEMORY_AND_DISK)\n",
                 "aggregates=tuple(aggregates))\n"),),
           (T_SPARK_MUTABLE + "::test_every_read_of_the_histogram_sees_the_same_evaluation", T_SPARK_MUTABLE),
           tags=("spark",)),
)


class AnchorError(RuntimeError):
    pass


def apply(mutant: Mutant, root: Path) -> None:
    """Apply ``mutant`` to the source tree copy at ``root`` (``root/sparsedp/…``); raise AnchorError if an
    anchor is not found exactly once, and SyntaxError if the result does not compile."""
    for e in mutant.edits:
        path = root / "sparsedp" / e.file
        text = path.read_text()
        n = text.count(e.old)
        if n != 1:
            raise AnchorError(f"{mutant.name}: anchor found {n} times in {e.file}: {e.old!r}")
        text = text.replace(e.old, e.new)
        compile(text, str(path), "exec")
        path.write_text(text)


def _copy_src(dest: Path) -> None:
    shutil.copytree(SRC / "sparsedp", dest / "sparsedp", ignore=shutil.ignore_patterns("__pycache__"))


def _env(root: Path) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(root)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def _check_import(root: Path) -> None:
    out = subprocess.run([sys.executable, "-c", "import sparsedp; print(sparsedp.__file__)"], env=_env(root),
                         cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
    if not out.startswith(str(root)):
        raise RuntimeError(f"the mutated copy is not the imported package: {out}")


def run_tests(root: Path, tests: tuple[str, ...], timeout: float) -> tuple[bool, str]:
    """``(failed, first failing test id or reason)``."""
    cmd = [sys.executable, "-m", "pytest", "-n", "0", "-x", "-q", "-p", "no:cacheprovider", "-rf",
           "--no-header", *tests]
    try:
        p = subprocess.run(cmd, env=_env(root), cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return True, "TIMEOUT"
    if p.returncode == 0:
        return False, ""
    if p.returncode not in (1, 2):  # 3 internal error, 4 usage error, 5 nothing collected: not a kill
        raise RuntimeError(f"pytest exit {p.returncode} on {tests}: {p.stdout[-500:]} {p.stderr[-500:]}")
    m = re.search(r"^FAILED (.+?)(?: - .*)?$", p.stdout, re.M)
    if m:
        return True, m.group(1)
    m = re.search(r"^ERROR (.+?)(?: - .*)?$", p.stdout, re.M)  # e.g. the mutated package fails to import
    return True, f"collection error {m.group(1)}" if m else f"pytest exit {p.returncode}: {p.stdout[-300:]}"


def run_audit(root: Path, args: tuple[str, ...], timeout: float) -> tuple[bool, str]:
    cmd = [sys.executable, "-m", "sparsedp", "audit", *args, "--json"]
    try:
        p = subprocess.run(cmd, env=_env(root), cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return False, "audit TIMEOUT"
    if p.returncode not in (0, 1):
        return False, f"audit error (exit {p.returncode}): {p.stderr.strip()[-200:]}"
    try:
        lo = json.loads(p.stdout)["epsilon_lower"]
    except (ValueError, KeyError):
        lo = float("nan")
    return p.returncode == 1, f"audit eps_lower={lo:.3g}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", nargs="*", help="run only these mutants (names)")
    ap.add_argument("--skip-tag", nargs="*", default=[], help="skip mutants with these tags (e.g. spark)")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--check", action="store_true", help="check every anchor, run nothing")
    ap.add_argument("--no-audit", action="store_true")
    ap.add_argument("--baseline", action="store_true", help="first run the tests and audits on the unmutated copy")
    ap.add_argument("--baseline-only", action="store_true", help="only the baseline (no mutant)")
    ap.add_argument("--timeout", type=float, default=900.0)
    ap.add_argument("--json", type=Path, help="also write the kill list as JSON here")
    a = ap.parse_args(argv)
    names = [m.name for m in MUTANTS]
    if len(set(names)) != len(names):
        raise SystemExit("duplicate mutant names")
    chosen = [m for m in MUTANTS if (not a.only or m.name in a.only) and not set(m.tags) & set(a.skip_tag)]
    if a.only and len(chosen) != len(set(a.only)):
        raise SystemExit(f"unknown mutant(s): {sorted(set(a.only) - set(names))}")
    if a.list:
        for m in chosen:
            print(f"{m.name:30s} {m.what}")
        return 0
    with tempfile.TemporaryDirectory(prefix="sparsedp-mutants-") as tmp:
        base = Path(tmp) / "base"
        _copy_src(base)
        for m in chosen:  # every anchor and test path first: a rotten list fails before anything runs
            missing = [t for t in m.tests if not (ROOT / t.split("::")[0]).exists()]
            if missing:
                raise AnchorError(f"{m.name}: test path(s) not found: {missing}")
            root = Path(tmp) / "check"
            _copy_src(root)
            apply(m, root)
            shutil.rmtree(root)
        if a.check:
            print(f"{len(chosen)} mutants: every anchor found exactly once, every mutated file compiles")
            return 0
        t_all = time.perf_counter()
        if a.baseline or a.baseline_only:
            _check_import(base)
            tests = tuple(dict.fromkeys(t for m in chosen for t in m.tests))
            failed, why = run_tests(base, tests, a.timeout * 3)
            print(f"baseline tests ({len(tests)} ids): {'FAILED ' + why if failed else 'pass'}", flush=True)
            if not a.no_audit:
                for args in dict.fromkeys(m.audit for m in chosen if m.audit):
                    c, why = run_audit(base, args, a.timeout)
                    print(f"baseline audit {args[0]}: {'CONTRADICTION' if c else 'no contradiction'} ({why})",
                          flush=True)
            if failed:
                return 2
            if a.baseline_only:
                return 0
        rows = []
        for m in chosen:
            root = Path(tmp) / m.name.replace("/", "_")
            _copy_src(root)
            apply(m, root)
            _check_import(root)
            t = time.perf_counter()
            killed_t, by_t = run_tests(root, m.tests, a.timeout)
            killed_a, by_a = (False, "")
            if m.audit and not a.no_audit:
                killed_a, by_a = run_audit(root, m.audit, a.timeout)
            dt = time.perf_counter() - t
            shutil.rmtree(root)
            killers = ([by_t] if killed_t else []) + ([f"audit ({by_a})"] if killed_a else [])
            row = {"mutant": m.name, "what": m.what, "files": sorted({e.file for e in m.edits}),
                   "killed": bool(killers), "killed_by": killers, "audit": by_a, "seconds": round(dt, 1)}
            rows.append(row)
            status = "KILLED by " + "; ".join(killers) if killers else "SURVIVED" + (f" ({by_t})" if by_t else "")
            print(f"{m.name:30s} {status}  [{dt:.0f}s]" + (f"  ({by_a})" if by_a and not killed_a else ""),
                  flush=True)
        total = time.perf_counter() - t_all
    print("\n| mutant | how applied | killed by |\n|---|---|---|")
    for r in rows:
        print(f"| {r['mutant']} | {r['what']} ({', '.join(r['files'])}) | "
              f"{'; '.join(r['killed_by']) if r['killed'] else 'SURVIVED'} |")
    n_killed = sum(r["killed"] for r in rows)
    print(f"\n{n_killed}/{len(rows)} mutants killed in {total:.0f} s (loaded shared machine)")
    if a.json:
        a.json.write_text(json.dumps({"rows": rows, "seconds": round(total, 1)}, indent=2))
    return 0 if n_killed == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
