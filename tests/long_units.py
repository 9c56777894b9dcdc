"""The order in which xdist workers take the long tests (used by tests/conftest.py)."""

from __future__ import annotations

import pytest

#: Work units that take over ~6 s on two cores, with their time in seconds (``pytest -n 3 --durations=60`` on a
#: fresh clone; an xdist group's time is the sum of its tests). A unit is an xdist group's name or a test's node id
#: without its parameters (then all its cases). Under ``--dist loadgroup`` a worker that frees up takes the next
#: unit of xdist's queue: the groups first, most tests first (xdist's default ``--loadscope-reorder``), then every
#: single test in collection order. A long test collected late (mypy's is collected last) then runs alone while
#: the other workers have finished: the suite's wall time grows by about its length. Sorting the collection longest
#: first (longest-processing-time-first) starts the long single tests right after the groups and leaves only short
#: tests for the end (and puts the long groups first where xdist keeps collection order). A renamed or removed test
#: merely loses its place (tests/test_long_units_first.py checks the names); every test still runs, and without
#: xdist the order is untouched.
LONG_UNITS: dict[str, float] = {
    "spark": 150.0,  # one JVM for every Spark test (tests/spark/conftest.py)
    "readme": 50.0,  # the README in a fresh venv (its dependencies linked from this environment)
    "docs": 110.0,  # every docs page's examples and the strict mkdocs build
    "topk-csh": 25.0,  # the audit's top-k CSH tests, sharing one calibration
    "tests/test_typecheck_strict.py::test_mypy_strict_passes_on_the_seams": 24.0,
    "tests/fuzz/test_fuzz_release.py::test_release_on_hostile_frames": 16.0,
    "tests/api/test_worked_examples.py::test_toy_mechanism_passes_the_audit_and_a_broken_one_fails": 15.0,
    "tests/fuzz/test_fuzz_release.py::test_release_on_valid_frames_always_succeeds": 19.0,
    "tests/api/test_grouped_keys_release.py::test_output_law_matches_calibration": 18.0,
    "tests/golden/test_plan_pipeline_golden.py::test_plan_matches_the_golden_calibrations": 19.0,  # its cases together
    "tests/accounting/test_csh_exact.py::test_per_shape_integral_against_brute_force": 16.0,
    "tests/ledger/test_ledger_release.py::test_sigkill_at_random_points_keeps_ledger_consistent": 15.0,
    "tests/api/test_auto_keys.py::test_selection_is_pure_eps1_dp_by_exact_enumeration": 14.0,
    "tests/fuzz/test_fuzz_cli.py::test_cli_release": 13.0,
    "tests/mechanisms/test_registry_lazy.py::test_names_keep_the_registration_order_whatever_is_asked_first": 12.0,
    "tests/api/test_public_keys_release.py::test_correlated_gaussian_covariance_matches_accountant": 11.0,
    "tests/fuzz/test_fuzz_cli.py::test_cli_ledger_and_audit": 14.0,
    "tests/accounting/test_column_shape.py::test_accountant_is_above_the_enumerated_delta_of_the_sampled_law": 10.0,
    "tests/ledger/test_ledger_composed.py::test_concurrent_composed_charges_cannot_overspend": 9.0,
    "tests/api/test_public_keys_release.py::test_bounded_density_noise_law": 9.0,
    "tests/engines/test_duckdb_out_of_core.py::test_passes_give_the_one_pass_histogram": 9.0,
    "tests/api/test_auto_keys.py::test_same_choice_and_table_on_every_embedded_engine": 8.0,
    "tests/ledger/test_ledger_events.py::test_sequence_event_charge_composes_its_parts": 8.0,
    "tests/ledger/test_ledger.py::test_eight_concurrent_processes_cannot_overspend": 7.5,
    "tests/accounting/test_csh_exact.py::test_never_above_theorem_3_5_or_3_3": 7.0,
    "tests/pure/test_stepping_stones_registered.py::test_kh_prime_and_double_prime_are_distributed_as_keep_heavy": 7.0,
    "layer-contract": 7.0,
    "tests/audit/test_vector_sum_target.py::test_vector_sum_passes_when_calibrated_and_half_sigma_is_refuted": 7.0,
    "tests/engines/test_duckdb_sql_bounding.py::test_pairs_in_batches_give_the_same_histogram": 7.0,
    "tests/pure/test_pure_blanket_registered.py::test_compact_integer_query_keys": 7.0,
}


def unit_of(item: pytest.Item) -> str:
    """The scheduling unit of a test: its xdist group, else its node id without the parameters."""
    for mark in item.iter_markers("xdist_group"):
        return str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
    return item.nodeid.split("[", 1)[0]


def longest_first(items: list[pytest.Item]) -> None:
    """Sort ``items`` in place: the long units first, longest first; ties (the rest) keep their order."""
    items.sort(key=lambda item: -LONG_UNITS.get(unit_of(item), 0.0))
