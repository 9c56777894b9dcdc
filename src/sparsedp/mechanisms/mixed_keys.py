"""Mixed public × private key sets: ``release(..., by=["country", "query"], keys={"country": [...]})``.

The ``keys=`` mapping lists the values of some ``by`` columns (the *public* columns: countries, days), fixed
without looking at the data; the other ``by`` columns (the *private* ones: queries) are selected from the data by a
DP threshold. The table holds every pair (public value, selected private value): a complete table, with a noisy
count for each, the combinations absent from the data included.

The release is a two-stage release (:class:`~sparsedp.mechanisms.two_stage.TwoStage`, ``docs/proofs/two-stage.md``)
whose stages see different keys (``docs/proofs/mixed-keys.md``):

1. **selection** (``select``, default GSHM, at ``split·ε``, ``delta_split·δ``): the histogram of the *projected*
   keys — each unit's distinct private values (its (unit, query) pairs, whatever the country), at most
   ``max_groups_per_unit`` of them per unit, 1 each — released by the threshold; only its key set S is used;
2. **counting** (``count``, default Lebeda (2024)'s correlated Gaussian, at the rest of (ε, δ)): the public-key
   release of the product list ``P × S`` (P: the product of the listed public values) on the histogram of the full
   keys, bounded to ``count_bound`` keys per unit (``None``: every (unit, key) pair counts once).

The product list depends on the data only through S, a DP output: stage 2 is a public-list release for every
fixed S, and the pair is (ε, δ)-DP by adaptive composition; one ledger charge, the sequence of the two stages'
events. Rejected alternatives (thresholding every (country, query) pair, selecting queries per country) and why:
``docs/proofs/mixed-keys.md``.

Input checks (before anything is charged or drawn): a mapping naming a column that is not a ``by`` column is
refused; one covering every ``by`` column is today's public list (the product of the listed values); an empty
mapping is today's private release; an empty list of values is refused.

Secrets, in order, from the release's source: stage 2's bounding secret (with a ``count_bound``; its histogram
checks every key column first), stage 1's bounding secret, stage 1's noise, stage 2's noise.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..core.key_order import canonical_exprs
from ..errors import InputDataError, InvalidParameterError, InvalidTypeError
from ..noise.source import SecureRandom
from .base import Disclosure, Mechanism, ReleaseRequest
from .public_keys import PublicKeys, public_keys
from .two_stage import TwoStage, TwoStageHistogram

if TYPE_CHECKING:
    from ..core.engine import Engine

__all__ = ["PartialKeys", "key_set", "MixedKeys", "mixed_mechanism"]


@dataclass(frozen=True, eq=False)
class PartialKeys:
    """A partial public key set: ``public`` (the product of the listed values of the public columns, a validated
    :class:`~sparsedp.mechanisms.public_keys.PublicKeys` over those columns, in ``by`` order), ``private`` (the
    ``by`` columns selected from the data) and ``by`` (all key columns, the release's order)."""

    public: PublicKeys
    private: tuple[str, ...]
    by: tuple[str, ...]

    def describe(self) -> str:
        cols = ", ".join(self.public.columns)
        return f"public {cols} ({self.public.d} listed), private {', '.join(self.private)}"


def _product(public: list[tuple[str, Any]]) -> Any:
    """The product (cross join) of the validated one-column lists, as a Polars frame."""
    frame = None
    for _, keys in public:
        part = _polars(keys.table)
        frame = part if frame is None else frame.join(part, how="cross")
    return frame


def _polars(table: Any) -> Any:
    import polars as pl

    frame = pl.from_arrow(table)
    assert isinstance(frame, pl.DataFrame)
    return frame


def key_set(spec: Any, by: list[str], *, from_text: bool = False) -> PublicKeys | PartialKeys | None:
    """``keys=`` given as a mapping ``{column: values}`` (no data read). Every name must be a ``by`` column; each
    list is validated as a one-column public list (no empty list, nulls, NaN, duplicates). All ``by`` columns
    named: the public list of their product (``release(keys=[…])``); none (``{}``): ``None`` (the private
    release); some: a :class:`PartialKeys`."""
    if not isinstance(spec, dict):
        raise InvalidTypeError(f"keys must be a list, frame or a mapping {{column: values}}, got "
                               f"{type(spec).__name__}")
    unknown = [c for c in spec if c not in by]
    if unknown:
        raise InvalidParameterError(
            f"⟨keys⟩ names {', '.join(map(repr, unknown))}, which is not a by column", param="keys",
            fix=f"name only key columns {by} (the columns whose values are public)")
    if not spec:
        return None
    lists: list[tuple[str, Any]] = []
    for col in [c for c in by if c in spec]:  # by's order
        values = spec[col]
        try:
            lists.append((col, values if isinstance(values, PublicKeys) and list(values.columns) == [col]
                          else public_keys(values, [col], from_text=from_text)))
        except (InvalidParameterError, InvalidTypeError) as e:
            raise type(e)(f"keys[{col!r}]: {e}") from None
    text = from_text or any(k.from_text for _, k in lists)
    cols = [c for c, _ in lists]
    pub = public_keys(_product(lists), cols, from_text=text)
    if len(cols) == len(by):
        return pub
    return PartialKeys(public=pub, private=tuple(c for c in by if c not in spec), by=tuple(by))


def mixed_mechanism(mech: Mechanism, keys: PartialKeys) -> "MixedKeys":
    """The mixed release for ``mechanism=`` with a partial key set: ``"auto"`` → GSHM selects, the correlated
    Gaussian counts (``sd.TwoStage()``'s own default selection is ``sd.Auto(objective="keys")``); a thresholded
    mechanism → the selection stage (``select``); a public-key mechanism → the counting stage (``count``);
    ``sd.TwoStage(…)`` → its options. Anything else is refused (no data read)."""
    if isinstance(mech, MixedKeys):
        return dataclasses.replace(mech, keys=keys)
    if isinstance(mech, TwoStage):
        return MixedKeys(select=mech.select, count=mech.count, count_bound=mech.count_bound, split=mech.split,
                         delta_split=mech.delta_split, keys=keys)
    if mech.name == "auto":  # GSHM selects the private columns (sd.TwoStage()'s own default is select="auto")
        return MixedKeys(select="gshm", keys=keys)
    if mech.public_keys:
        return MixedKeys(select="gshm", count=mech, keys=keys)
    try:
        return MixedKeys(select=mech, keys=keys)
    except InvalidParameterError:
        raise InvalidParameterError(
            f"⟨keys⟩ lists some key columns only ({keys.describe()}): the other columns are selected privately, "
            f"which ⟨mechanism={mech.describe()}⟩ cannot do", param="mechanism",
            fix="use mechanism='auto', a thresholded mechanism ('gshm', 'laplace'), a public-key mechanism for the "
                "counting stage, or sd.TwoStage(…)") from None


@dataclass(frozen=True, eq=False)
class MixedHistogram(TwoStageHistogram):
    """The two bounded histograms (``select``: the projected private keys; ``count``: the full keys) and the public
    values in the data's key types (``public``)."""

    public: Any = None


@dataclass(frozen=True)
class MixedKeys(TwoStage):
    """A two-stage release over a partial key set (module docstring). Not registered: built from ``keys={col:
    [...]}`` by :func:`sparsedp.request.build_request` (:func:`mixed_mechanism`), with ``mechanism=``'s stage
    or ``sd.TwoStage(…)``'s options."""

    keys: PartialKeys | None = None
    name = "mixed-keys"

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.keys, PartialKeys):
            raise InvalidParameterError("a mixed key set release needs keys={column: [values]} naming some of the "
                                        "by columns")

    def options(self) -> dict[str, Any]:
        assert self.keys is not None
        return {**super().options(), "public_columns": list(self.keys.public.columns),
                "public_keys": self.keys.public.d, "private_columns": list(self.keys.private)}

    def check(self, request: ReleaseRequest) -> None:
        if self.select_bound(request) is None and self.select.engine_bound(
                ReleaseRequest(request.epsilon, request.delta, 1)) is not None:
            raise InvalidParameterError("a mixed key set needs ⟨max_groups_per_unit=…⟩: the private values kept per "
                                        "unit by the selection", param="max_groups_per_unit")
        super().check(request)

    def disclosure(self, request: ReleaseRequest, calibration: Any, value_column: str) -> Disclosure:
        assert self.keys is not None
        d = super().disclosure(request, calibration, value_column)
        pub, priv = ", ".join(self.keys.public.columns), ", ".join(self.keys.private)
        bound = "no bound" if self.count_bound is None else f"at most {self.count_bound} keys per unit"
        contribution = (f"selection of {priv}: each unit's distinct {priv} values (whatever its {pub}), at most "
                        f"{self.select_bound(request)} per unit, 1 each; counts of the {pub} × selected {priv} "
                        f"keys: {bound}, 1 per key per unit")
        note = (f"mixed key set: {pub} public ({self.keys.public.d} listed value(s), fixed before the release); "
                f"{priv} selected privately by stage 1; every selected {priv} value gets a row for every listed "
                f"{pub} value (keys absent from the data get noise too; {pub} values outside the list are dropped)")
        return dataclasses.replace(d, contribution=contribution).with_notes(note)

    # ---------------------------------------------------------------- data

    def histogram(self, engine: Engine, data: Any, privacy_unit: str | None, by: list[str], request: ReleaseRequest,
                  rng: SecureRandom, **extra: Any) -> MixedHistogram:
        """The full keys' histogram first (every key column checked before anything is drawn), then the
        projected keys' one for the selection."""
        assert privacy_unit is not None and self.keys is not None
        sel, r1 = self.stage_one(request)
        h2 = engine.histogram(data, privacy_unit, by, self.count_bound, rng, 1)
        h1 = sel.histogram(engine, data, privacy_unit, list(self.keys.private), r1, rng)
        return MixedHistogram(select=h1, count=h2, by=tuple(by), stats=engine.stats(h1), public=self.keys.public)

    def prepare(self, engine: Engine, hist: Any, request: ReleaseRequest) -> MixedHistogram:
        """Stage 1's preparation, and the public values in the data's key types: a value type that differs from the
        data's is refused here, before the charge (text values of a keys file take the data's type)."""
        h = super().prepare(engine, hist, request)
        assert isinstance(h, MixedHistogram)
        try:
            typed = _typed(engine, h.count, h.public)
        except BaseException:
            engine.release_resources(h.select)
            engine.release_resources(h.count)
            raise
        return dataclasses.replace(h, public=typed)

    def select_columns(self, hist: TwoStageHistogram) -> list[str]:
        assert self.keys is not None
        return list(self.keys.private)

    def count_list(self, selected: Any, hist: TwoStageHistogram) -> Any:
        """The product list: every listed public value × every selected private value, in ``by``'s order."""
        assert isinstance(hist, MixedHistogram)
        frame = _polars(hist.public.table).join(_polars(selected), how="cross")
        return frame.select(list(hist.by)).to_arrow()


def _typed(engine: Engine, hist: Any, public: PublicKeys) -> PublicKeys:
    """``public`` with the data's key types (refused when they differ; text values cast to the data's type)."""
    import polars as pl

    cols = list(public.columns)
    data = _polars(engine.collect(hist).keys).select(cols)
    if data.height == 0:
        return public
    lst = _polars(public.table)
    if public.from_text:
        try:
            lst = lst.with_columns([pl.col(c).cast(data.schema[c], strict=True) for c in cols
                                    if lst.schema[c] == pl.String and data.schema[c] != pl.String])
        except pl.exceptions.PolarsError:
            raise InputDataError(f"the keys file holds values that are not of the data's key type "
                                 f"({', '.join(f'{c}: {data.schema[c]}' for c in cols)})") from None
        public = public_keys(lst, cols)
    have = lst.select(canonical_exprs(lst.schema, cols)).schema
    want = data.select(canonical_exprs(data.schema, cols)).schema
    for c in cols:
        if have[c] != want[c]:
            raise InputDataError(f"keys[{c!r}] holds {have[c]} values but the data's {c!r} is {want[c]}; give the "
                                 f"values with the data's type")
    return public
