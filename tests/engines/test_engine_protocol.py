"""The engine protocol's declared capabilities (``sparsedp.core.engine``): what an engine offers is what it declares,
not what attributes it happens to have, and a mechanism that needs the pair primitives refuses an engine that does
not declare them before anything is read or drawn."""

from __future__ import annotations

import polars as pl
import pytest

from sparsedp.core.engine import Capability, Engine
from sparsedp.engines import ENGINES, get_engine
from sparsedp.engines.spark_engine import SparkEngine
from sparsedp.errors import ColumnNotFoundError, InvalidParameterError
from sparsedp.mechanisms.set_union import policy_histogram


class Tripwire:
    """A random source that fails if anything is drawn."""

    def uint64(self, size):
        raise AssertionError("randomness drawn from an engine that was refused")

    random_bytes = getrandbits = randbelow = uint64


class RowsButNoCapability(Engine):
    """Has a ``rows_lazy`` method (what the old ``hasattr`` probes asked for) but declares no capability."""

    name = "rows-only"

    def rows_lazy(self, data):
        raise AssertionError("a refused engine's rows were read")

    def columns(self, data):
        return list(data.columns)

    def histogram(self, data, privacy_unit, by, l0, rng, pre_threshold=1, aggregates=()):
        raise AssertionError("not used")

    def kth_largest(self, hist, k):
        raise AssertionError("not used")

    def noise_keys(self, hist, task):
        raise AssertionError("not used")

    def collect(self, hist):
        raise AssertionError("not used")

    def to_arrow(self, released, by, value_column):
        raise AssertionError("not used")


DF = pl.DataFrame({"u": [1, 1, 2, 3], "k": ["a", "b", "a", "c"]})


def test_embedded_engines_declare_the_pair_primitives_and_spark_only_the_rounds():
    for name in ENGINES:
        eng = get_engine(name)
        assert eng.offers(Capability.PAIRS) and eng.offers(Capability.UNIT_KEY_COUNTS), name
        assert eng.offers(Capability.ROUNDS) and eng.embedded, name
    assert SparkEngine.capabilities == frozenset({Capability.ROUNDS})  # mad/mad2r's round_histogram


def test_an_engine_without_the_capability_is_refused_whatever_attributes_it_has():
    eng = RowsButNoCapability()
    assert not eng.offers(Capability.PAIRS) and not eng.embedded
    with pytest.raises(InvalidParameterError, match="set-union mechanisms run on the embedded engines"):
        policy_histogram(eng, DF, "u", ["k"], 2, 1.0, Tripwire())
    for call in (lambda: eng.distinct_pairs(DF, "u", ["k"]), lambda: eng.pair_ids(DF, "u", ["k"]),
                 lambda: eng.kept_pairs(DF, "u", ["k"], 2, Tripwire()),
                 lambda: eng.weighted_histogram(DF, "u", ["k"], 2, [1, 1], Tripwire()),
                 lambda: eng.one_group_per_unit(DF, "u", ["k"], "k", DF.select("k"), False, Tripwire())):
        with pytest.raises(InvalidParameterError, match="rows-only engine does not offer 'pairs'"):
            call()
    with pytest.raises(InvalidParameterError, match="not available on the rows-only engine"):
        eng.keys_per_unit_counts(DF, "u", ["k"], [1, 2])
    with pytest.raises(InvalidParameterError, match="rows-only engine does not offer 'weighted-rounds'"):
        eng.round_histogram(DF, "u", ["k"], 2, [1, 1], Tripwire())


def test_the_pair_primitives_check_the_input_before_drawing():
    eng = get_engine("polars")
    with pytest.raises(ColumnNotFoundError, match="'nope'"):
        eng.kept_pairs(DF, "nope", ["k"], 2, Tripwire())
    up = eng.distinct_pairs(pl.concat([DF, DF]), "u", ["k"])
    assert up.rows == 8 and up.pairs.height == 4
    ids = eng.pair_ids(DF, "u", ["k"])
    assert ids.keys.column("k").to_pylist() == ["a", "b", "c"] and ids.rows == 4 and ids.pairs == 4
    assert sorted(zip(ids.unit_ids.tolist(), ids.key_ids.tolist())) == [(1, 0), (1, 1), (2, 0), (3, 2)]


@pytest.mark.parametrize("mechanism, bound, extra", [
    ("weighted-gaussian", 2, {}),                           # set union: the distinct pairs
    ("policy-gaussian", 2, {"insecure_float": True}),       # (float noise only, by its own refusal)
    ("misra-gries-pamg", None, {}),                         # PAMG: the unit's pairs as integer codes
    ("gshm", "auto", {}),                                   # the automatic bound: keys per unit
])
def test_the_pipeline_refuses_a_missing_capability_when_it_opens_the_engine(tmp_path, mechanism, bound, extra):
    """One generic refusal (core.engine.lacks_error), raised when the engine is opened: before the ledger is
    touched, before any row is read (RowsButNoCapability fails on a read) or anything drawn (Tripwire)."""
    import sparsedp as sd
    from sparsedp.ledger import Ledger

    if mechanism == "misra-gries-pamg":
        mechanism = sd.MisraGries(sketch_size=4)
    ledger = Ledger(tmp_path / "budget.db")
    ledger.set_budget("d", epsilon=3.0, delta=1e-5)
    with pytest.raises(InvalidParameterError, match="needs the engine primitives .* which the 'rows-only' engine "
                                                    "does not offer; use an embedded engine") as err:
        sd.release(DF, "u", "k", epsilon=1.0, delta=1e-6, max_groups_per_unit=bound, mechanism=mechanism,
                   engine=RowsButNoCapability(), ledger=ledger, dataset="d", rng=Tripwire(), **extra)
    assert err.value.param == "engine"
    assert ledger.history("d") == []
