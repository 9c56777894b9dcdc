"""Lebeda (2024) Algorithm 2 (grouped, "disjoint" queries) on a public key list: ``release(data, unit, by=[g, k],
keys=[(g, k), …], mechanism=sd.GroupedCorrelatedGaussian(group="g"))``.

**Setting** (After Lebeda (2024) S4.1): the listed keys fall into groups (the values of the
``group`` column, one of ``by``); each unit contributes to at most ONE group (S7.2 item 2: "at most one non-zero
row per unit"), then to at most 1 per key of that group (and, with ``max_groups_per_unit``, to at most that many
keys of it).

**Enforcement (the engine side, every embedded engine identically).** Before counting, the rows are restricted to
the listed groups (a public filter) and each unit keeps the rows of ONE of its groups: the group of smallest
keyed rank ``r(unit, group)`` (:func:`sparsedp.engines.bounding.select_pairs` with ``by=[group]``, ``l0 = 1``;
the AES rank of the unit's and the group's canonical fingerprints under a fresh 32-byte secret drawn from the
release's source after the input passed validation). The choice is a function of the unit's own value, its own
set of groups and the secret only: never of the row order, of other units, or of the counts. The engine's usual
bounding then applies inside that group (de-duplication of (unit, key) pairs, the ℓ0 bound).

**Release (add/remove, the spec's Lemma 4.2).** With one group per unit, adding or removing a unit changes one
group's counts ``f_j`` and its unit count ``n_j`` only: Algorithm 2 under add/remove is Algorithm 1 run
independently per group with ``n_j`` in place of n (C = the calibration's C, ≈ d^{1/4}). Every group is
calibrated with ``d = D``, the largest number of listed keys in one group (a group with fewer keys releases a
marginal of the D-key run — post-processing — so its privacy loss is at most the D-key one; docs/proofs/
public-keys.md §10). Per group j: ``y_{j,k} = 2 f_{j,k} − n_j + Z_{j,k}``, ``y_{j,D+1} = C n_j + Z_{j,D+1}``,
``f̃_{j,k} = y_{j,k}/2 + y_{j,D+1}/(2C)`` — the shared term ``η_j = Z_{j,D+1}/(2C)`` plus the independent
``z_{j,k} = Z_{j,k}/2`` — and ``ỹ_j = y_{j,D+1}/C`` (the estimate of ``n_j``, in the report's notes). Exact
integer noise ``N_Z(0, s)`` (:func:`~sparsedp.accounting.public_keys.calibrate_correlated_public`, exact discrete
δ at d = D). Groups are mutually independent: by parallel composition the whole release is (ε, δ)-DP, δ that of the
noise sampled. Per-key ``Z_{j,k}`` come from the key-list chunk streams (:mod:`sparsedp.core.noise_chunks`), the
``Z_{j,D+1}`` from ``SecretKeyedStream(K_noise, "grouped-shared")`` in canonical group order: every engine gives
the same table for the same seeded source.

Replacement neighbours (S4.1's ERRATUM, shared variance 1/μ²) are offered by the hand-callable
:func:`sparsedp.mechanisms.correlated.grouped_correlated_histogram`; ``release()`` charges add/remove.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..accounting.public_keys import calibrate_correlated_public
from ..core.bounded import BoundingStats
from ..core.engine import Capability
from ..core.key_order import canonical_exprs, canonical_order
from ..errors import InputDataError, InvalidParameterError, InvalidTypeError
from ..noise.source import SecretKeyedStream, SecureRandom
from .base import AutoRole, Disclosure, Mechanism, PlanQuery, Released, ReleaseRequest, UserRequest
from .public_keys import (PublicCounts, PublicKeyMechanism, PublicKeys, _arrow_frame, _draws, _independent, _need_keys,
                          _table, align, public_keys)
from .registry import register

if TYPE_CHECKING:
    from ..core.engine import Engine

__all__ = ["GroupedCorrelatedGaussian", "GroupedCounts", "group_sizes", "plan_grouped"]

_SHARED_LABEL = b"grouped-shared"


def group_sizes(keys: Any, group: str) -> tuple[Any, np.ndarray, np.ndarray]:
    """``(groups, index, sizes)`` of a public key list: the distinct group values (Polars frame, canonical
    order), each listed key's group index (aligned with ``keys.table``) and the number of keys per group."""
    import polars as pl

    df = _arrow_frame(keys.table).select(group)
    assert isinstance(df, pl.DataFrame)
    groups = df.unique().sort(canonical_order(df.schema, [group]))
    canon_g = groups.select(canonical_exprs(groups.schema, [group])).with_row_index("__g")
    idx = (df.select(canonical_exprs(df.schema, [group])).with_row_index("__i")
           .join(canon_g, on=group, how="left").sort("__i")["__g"].to_numpy().astype(np.int64))
    return groups, idx, np.bincount(idx, minlength=groups.height)


@dataclass(frozen=True, eq=False)
class GroupedHistogram:
    """The engine's bounded histogram of the one-group rows, plus the unit count of each listed group."""

    inner: Any
    #: rows of the input (before the one-group filter), for the curator's statistics
    rows_in: int
    #: Polars frame: the group value and ``len``, its number of units (groups without units absent)
    n_per_group: Any

    @property
    def stats(self) -> Any:
        if self.inner is None:  # no unit in a listed group
            return BoundingStats(rows_in=self.rows_in, units_in=0, pairs_in=0, units_over_l0=0, pairs_dropped_l0=0,
                                 keys_in=0, keys_bounded=0, keys_out=0, l0=None)
        import dataclasses

        return dataclasses.replace(self.inner.stats, rows_in=self.rows_in)


@dataclass(frozen=True, eq=False)
class GroupedCounts(PublicCounts):
    """:class:`PublicCounts` with the group of each listed key and each group's unit count ``n_j``."""

    group_index: np.ndarray = None  # type: ignore[assignment]
    n_per_group: np.ndarray = None  # type: ignore[assignment]
    groups: Any = None


@register
@dataclass(frozen=True)
class GroupedCorrelatedGaussian(PublicKeyMechanism):
    """Lebeda (2024) Algorithm 2 (grouped queries, add/remove: Algorithm 1 per group with the group's unit count) on
    a public key list whose ``group`` column is one of ``by`` (module docstring for the enforcement and the
    proof). Each key's error is its group's shared term ``η_j`` plus an independent ``z_{j,k}``; groups are
    independent; the per-group size estimates ``ỹ_j`` are released in the report's notes.

    Options:
        group: the grouping column (one of ``by``); each unit contributes to one group only (chosen by a keyed
            per-unit rank, independent of the row order).
        c: the embedding weight C (integer; default the per-key-error-optimal one, ≈ D^{1/4}).
    """

    group: str | None = None
    c: int | None = None
    name = "grouped-correlated-gaussian"

    def needs(self, request: UserRequest) -> frozenset[Capability]:
        return frozenset({Capability.PAIRS})  # one group per unit, chosen in this process
    auto_role = AutoRole.PUBLIC_KEYS
    auto_order = 4  # after the ungrouped public-key mechanisms
    #: ``group`` defaults to None (the object can be built before the key list is known) but a release needs it
    needs_options = ("group",)

    def __post_init__(self) -> None:
        if self.group is not None and not isinstance(self.group, str):
            raise InvalidTypeError(f"group must be a column name (str), got {self.group!r}")
        if self.c is not None and (isinstance(self.c, bool) or not isinstance(self.c, int) or self.c < 1):
            raise InvalidParameterError(f"c must be an integer >= 1, got {self.c!r}")

    def _group(self, request: ReleaseRequest) -> str:
        keys = _need_keys(self.name, request)
        if self.group is None:
            raise InvalidParameterError(f"⟨mechanism={self.name!r}⟩ needs ⟨group=…⟩ (the column of ⟨by⟩ whose "
                                        f"values are the groups; each unit contributes to one group)", param="group")
        if self.group not in keys.columns:
            raise InvalidParameterError(f"group={self.group!r} is not one of the by columns {list(keys.columns)}; "
                                        f"the keys must be full key tuples that include the group column")
        if len(keys.columns) < 2:
            raise InvalidParameterError(f"group={self.group!r} is the only by column: give by=[{self.group!r}, "
                                        f"<key column>] and keys as (group, key) tuples")
        return self.group

    @classmethod
    def auto_offer(cls, request: ReleaseRequest, group: str | None) -> "GroupedCorrelatedGaussian | None":
        """Offered by ``sd.Auto(group=…)`` with a public key list (``group``: the grouping column), else not."""
        return None if group is None else cls(group=group)

    @classmethod
    def plan_rows(cls, query: PlanQuery) -> list[tuple[Mechanism, Any, int]]:
        """With ``keys`` and ``group`` at δ > 0: the grouped mechanism's row (:func:`plan_grouped`), listed after
        the other public-key mechanisms."""
        if query.d is None or query.group is None or query.delta <= 0:
            return []
        request = query.request(keys=PublicKeys(table=None, d=query.d, columns=()))
        return [(*plan_grouped(query.keys, query.group, request), 0)]

    def check(self, request: ReleaseRequest) -> None:
        super().check(request)
        self._group(request)

    def calibrate(self, request: ReleaseRequest) -> Any:
        keys = _need_keys(self.name, request)
        group = self._group(request)
        if keys.table is None:
            raise InvalidParameterError("grouped-correlated-gaussian needs the key list itself (not its size)")
        _, _, sizes = group_sizes(keys, group)
        if request.insecure_float:
            raise InvalidParameterError(f"mechanism={self.name!r} uses exact integer noise only; drop "
                                        f"insecure_float=True")
        return calibrate_correlated_public(request.epsilon, request.delta, int(sizes.max()),
                                           request.max_groups_per_unit, c=self.c)

    def disclosure(self, request: ReleaseRequest, calibration: Any, value_column: str) -> Any:
        import dataclasses

        out = super().disclosure(request, calibration, value_column)
        d = _need_keys(self.name, request).d
        first = (f"public key list of {d} keys in {self.group!r} groups: absent keys get noise too, keys outside "
                 f"the list are dropped; the list must not be derived from the private data",)
        return dataclasses.replace(out, notes=first + tuple(out.notes[1:]))

    def _contribution(self, cal: Any) -> str:
        per = f"at most {cal.k} keys of it" if cal.k < cal.d else "any of its keys"
        return (f"every listed key released (no threshold); each unit in one {self.group!r} group only (keyed "
                f"per-unit choice), 1 per key, {per}")

    def _notes(self, cal: Any) -> tuple[str, ...]:
        return (f"grouped correlated noise (Lebeda (2024) Alg. 2, add/remove = Alg. 1 per {self.group!r} group, "
                f"calibrated at D = {cal.d} keys per group, C = {cal.c:g}): per-key error std {cal.noise_std:.4g} = "
                f"the group's shared term {cal.shared_std:.4g} + independent {cal.independent_std:.4g}; groups "
                f"are independent; each group's size estimate has std {cal.n_noise_std:.4g}",)

    def histogram(self, engine: Engine, data: Any, privacy_unit: str | None, by: list[str], request: ReleaseRequest,
                  rng: SecureRandom, **extra: Any) -> Any:
        keys = _need_keys(self.name, request)
        group = self._group(request)
        assert privacy_unit is not None  # no row units: refused by validate()
        groups, _, _ = group_sizes(keys, group)
        one = engine.one_group_per_unit(data, privacy_unit, list(by), group, groups, keys.from_text, rng)
        if len(one.rows) == 0:  # no unit in a listed group: every count is 0, n_j = 0
            inner = None
        else:
            inner = engine.histogram(one.rows, privacy_unit, list(by),
                                     self.engine_bound(request), rng, self.count_floor())
        return GroupedHistogram(inner=inner, rows_in=one.rows_in, n_per_group=one.n_per_group)

    def prepare(self, engine: Engine, hist: Any, request: ReleaseRequest) -> Any:
        import polars as pl

        keys = _need_keys(self.name, request)
        group = self._group(request)
        if hist.inner is None:
            counts, n = np.zeros(keys.d, dtype=np.int64), 0
        else:
            pc = align(engine, hist.inner, keys)  # keys read as text take the data's types here
            counts, n, keys = pc.counts, pc.n, pc.keys
        groups, gidx, _ = group_sizes(keys, group)
        per = hist.n_per_group
        canon = groups.select(canonical_exprs(groups.schema, [group])).with_row_index("__g")
        if per.height:
            per = per.select(*canonical_exprs(per.schema, [group]), pl.col("len"))
            per = canon.join(per, on=group, how="left").sort("__g")["len"].fill_null(0).to_numpy()
        else:
            per = np.zeros(groups.height)
        n_per_group = per.astype(np.int64)
        if int(n_per_group.sum()) != n:  # pragma: no cover - one group per unit by construction
            raise RuntimeError("the per-group unit counts do not add up to the units counted")
        return GroupedCounts(counts=counts, n=n, keys=keys, group_index=gidx, n_per_group=n_per_group,
                             groups=groups)

    def run(self, engine: Engine, hist: Any, calibration: Any, disclosure: Disclosure, rng: SecureRandom,
            request: ReleaseRequest) -> Released:
        gc: GroupedCounts = hist
        cal = calibration
        secret = self._secret(rng)
        m = gc.n_per_group.size
        shared = _draws(cal, m, SecretKeyedStream(secret, _SHARED_LABEL), False).astype(np.int64)
        y_last = cal.c * gc.n_per_group + shared                          # Z_{j,D+1}: one per group, exact
        z = _independent(cal, gc.keys.d, gc.keys, secret, False)
        nj = gc.n_per_group[gc.group_index]
        y = cal.q * gc.counts - cal.p * nj + z                            # exact integers
        values = (y + cal.p * (y_last[gc.group_index] / cal.c)) / cal.q  # f̃ = y/2 + y_{D+1}/(2C) per group
        est = y_last / cal.c
        labels = gc.groups[self.group].to_list()
        shown = ", ".join(f"{g!r}: {e:.6g}" for g, e in zip(labels[:20], est[:20]))
        more = f", … ({m - 20} more)" if m > 20 else ""
        disclosure = disclosure.with_notes(f"released size estimates per {self.group!r} group (std "
                                           f"{cal.n_noise_std:.4g}; y_(D+1)/C with C = {cal.c:g}): {shown}{more}")
        return Released(rows=_table(gc.keys, disclosure.value_column, values), disclosure=disclosure,
                        in_process=True)


def plan_grouped(keys: Any, group: str, request: ReleaseRequest) -> tuple[GroupedCorrelatedGaussian, Any]:
    """``plan(..., keys=<frame>, group=…)``'s row for the grouped mechanism: ``keys`` must be a frame (Polars,
    pandas or Arrow) whose columns are the key columns, ``group`` one of them."""
    import dataclasses

    import polars as pl

    mod = type(keys).__module__.split(".")[0]
    frame = keys if isinstance(keys, pl.DataFrame) else pl.from_pandas(keys) if mod == "pandas" and hasattr(
        keys, "columns") else pl.from_arrow(keys) if mod == "pyarrow" and hasattr(keys, "column_names") else None
    if not isinstance(frame, pl.DataFrame):
        raise InvalidParameterError("plan(group=…) needs keys as a frame with named columns (the group column "
                                    "among them), not a count or a list")
    if group not in frame.columns:
        raise InvalidParameterError(f"plan(group={group!r}): the keys frame has no column {group!r}")
    pub = public_keys(frame, list(frame.columns))
    mech = GroupedCorrelatedGaussian(group=group)
    req = dataclasses.replace(request, keys=pub)
    mech.check(req)
    return mech, mech.calibrate(req)
