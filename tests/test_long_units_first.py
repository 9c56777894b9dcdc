"""The xdist schedule (tests/long_units.py, applied in tests/conftest.py): every listed long unit exists, and a worker's order puts the long
units first, longest first, keeping every test and the collection order of the rest."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from long_units import LONG_UNITS, longest_first, unit_of

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("unit", sorted(LONG_UNITS))
def test_listed_unit_exists(unit):
    if "::" in unit:
        path, name = unit.split("::")
        assert re.search(rf"^def {re.escape(name)}\(", (ROOT / path).read_text(), re.M), unit
    else:
        marks = [p for p in (ROOT / "tests").rglob("*.py")
                 if f'xdist_group("{unit}")' in p.read_text(encoding="utf-8")]
        assert marks, f"no test is in the xdist group {unit!r}"


class _Item:
    def __init__(self, nodeid, group=None):
        self.nodeid, self.group = nodeid, group

    def iter_markers(self, name):
        assert name == "xdist_group"
        return iter([pytest.mark.xdist_group(self.group).mark] if self.group else [])


def test_worker_order_is_longest_unit_first_and_stable():
    long_test = "tests/test_typecheck_strict.py::test_mypy_strict_passes_on_the_seams"
    items = [_Item("tests/a.py::test_a"), _Item("tests/spark/b.py::test_b", "spark"), _Item(long_test),
             _Item("tests/c.py::test_c[1]"), _Item("tests/spark/b.py::test_d", "spark"), _Item("tests/a.py::test_e")]
    before = list(items)
    longest_first(items)
    assert [i.nodeid for i in items] == ["tests/spark/b.py::test_b", "tests/spark/b.py::test_d", long_test,
                                         "tests/a.py::test_a", "tests/c.py::test_c[1]", "tests/a.py::test_e"]
    assert sorted(map(id, items)) == sorted(map(id, before))
    assert unit_of(before[3]) == "tests/c.py::test_c" and unit_of(before[1]) == "spark"
