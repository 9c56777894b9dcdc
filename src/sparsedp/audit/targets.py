"""What an audit runs: a registered mechanism, its calibration, and many releases through ``Mechanism.run``.

:func:`build_target` turns an audit name into the registered mechanism object (``sparsedp.mechanisms.registry``),
the :class:`~sparsedp.mechanisms.base.ReleaseRequest` of the claim, the *reference* calibration
(``Mechanism.calibrate``, what the accountant certifies) and the calibration actually run (the reference with its
noise scale multiplied by ``sigma_scale`` and its integer margin moved by ``margin_shift``: the deliberately wrong
mechanisms the audit must catch).

:func:`release_many` runs the mechanism ``runs`` times on one tiny histogram through the pipeline's own release
step, ``Mechanism.run(engine, hist, calibration, disclosure, rng, request)`` on the Arrow embedded engine (so the
per-key step :class:`~sparsedp.mechanisms.key_noise.KeyNoise`, its keyed chunk streams, the exact inversion
samplers, the rounded CSH shared term :class:`~sparsedp.noise.rounded.SharedGaussianTerm`, top-k's cut-off and
de-biasing draw are all the code a release runs; no float stand-in). Mechanisms with independent noise per key
(GSHM, Laplace: ``tiled``) run ``r`` releases as ONE release of the histogram repeated ``r`` times over disjoint
keys: the released values of disjoint key blocks of one release are independent with the per-key law, so the
blocks are ``r`` independent releases, exactly. The others (CSH / top-k CSH: one shared term and one cut-off per
release; the pure and Misra–Gries mechanisms) run one release per run.

Public-key mechanisms (:data:`PUBLIC`, ``release(..., keys=…)``): the request carries a
:class:`~sparsedp.mechanisms.public_keys.PublicKeys` list of ``d`` integer keys (option ``d``; default ``bound``
for the independent ones, whose calibration depends on ``k = min(l0, d)`` only, and 4 for the embedding ones);
each release goes through the mechanism's own ``prepare`` (the join of the histogram to the list, ``n`` from the
histogram's unit count) and ``run``. The independent ones (public-gaussian, public-laplace) are tiled like GSHM
(a list of ``r·d`` keys, same calibration: their ``run`` reads only the list's length); the embedding ones
(correlated-gaussian, bounded-density: one shared size coordinate per release) run one release per run, and their
released size estimate ñ is part of the output (column ``d`` of :func:`release_many`, read exactly from the
release's ``y_(d+1)`` note).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from .. import _validate as v
from ..errors import InvalidParameterError
from ..mechanisms.public_keys import CorrelatedGaussian
from ..mechanisms.thresholded import GSHM, Laplace, TopKCSH

__all__ = ["AUDITABLE", "NO_TARGET_YET", "Target", "auditable", "build_target", "default_bound", "release_many",
           "shifted_calibration", "scaled_calibration", "scaled_law"]

#: audit names: every registered mechanism (``registry.names()``), the shifted top-k variant, and "csh" (CSH on a
#: k-sparse histogram: top-k CSH with at most k keys has cut-off 0, so it IS Algorithm 2 / rounded CSH)
AUDITABLE = (GSHM.name, Laplace.name, "csh", TopKCSH.name, "topk-csh-shifted", "pure-sparse", "compact", "basic",
             "stability", "misra-gries", "auto", "public-gaussian", "public-laplace", CorrelatedGaussian.name,
             "bounded-density", "grouped-correlated-gaussian", "keep-heavy", "kh-prime", "kh-double-prime",
             "sparse-histogram")
#: registered mechanisms without an audit target yet (``tests/audit/test_audit_coverage.py`` fails for any other
#: registered name missing from :data:`AUDITABLE`, and for a name listed here that gets one or leaves the
#: registry): the two-stage release (a thresholded selection then public-key counts), the set-union key
#: discoveries (their output is a key set, not counts), and the linear-time pure-DP blanket histogram (registered
#: after this list was written)
NO_TARGET_YET = ("two-stage", "weighted-gaussian", "policy-gaussian", "pure-blanket")
#: the grouped correlated Gaussian (Lebeda (2024) Algorithm 2): audited on group 0 of two groups of ``d`` keys each
GROUPED = "grouped-correlated-gaussian"
#: public-key mechanisms (every listed key released, no threshold; σ scale applies)
PUBLIC = ("public-gaussian", "public-laplace", CorrelatedGaussian.name, "bounded-density", GROUPED)
#: public-key mechanisms releasing the size estimate ñ (the embedding ``(q·x − p·1, c)`` of Lebeda (2024))
EMBEDDING = (CorrelatedGaussian.name, "bounded-density", GROUPED)
#: the Balcer–Vadhan stepping stones (Balcer & Vadhan (2019) §6): replace-one, one key per unit, run on a small integer domain
STONES = ("keep-heavy", "kh-prime", "kh-double-prime", "sparse-histogram")
_PURE = ("pure-sparse", "compact", "basic", "stability") + STONES
#: mechanisms with a thresholded per-key kernel (σ scale and margin shift apply; exact release laws known)
THRESHOLDED = (GSHM.name, Laplace.name, "csh", TopKCSH.name, "topk-csh-shifted")
_TILED = (GSHM.name, Laplace.name, "public-gaussian", "public-laplace")
_CHUNK = 1 << 18  # keys per tiled release (bounds memory)
#: the bound each mechanism's contribution model is stated with, and its name in the report
BOUND_NAME = {GSHM.name: "l0", Laplace.name: "l0", "csh": "k", TopKCSH.name: "top_k", "topk-csh-shifted": "top_k",
              "pure-sparse": "l0", "compact": "l0", "basic": "l0", "stability": "l0", "misra-gries": "l0",
              "auto": "l0", **{m: "l0" for m in PUBLIC + STONES}}


def auditable() -> tuple[str, ...]:
    """The audit names: :data:`AUDITABLE` (the built-in ones, with their audit variants) and every other
    registered mechanism (a plug-in's, audited with its default options through the generic path: the
    worst-case count scenarios, released by its own ``run``) except :data:`NO_TARGET_YET`, whose output is not a
    per-key count the generic scenarios fit."""
    from ..mechanisms import registry

    return AUDITABLE + tuple(n for n in registry.names() if n not in AUDITABLE and n not in NO_TARGET_YET)


@dataclass(frozen=True)
class Target:
    """A mechanism under audit.

    ``name``: the audit name (``auto`` resolved: ``picked`` is the registered name it chose); ``mechanism``: the
    registered mechanism object; ``request``: the claim; ``reference``: ``mechanism.calibrate(request)``;
    ``calibration``: what is run (``reference`` unless ``sigma_scale``/``margin_shift`` break it);
    ``bound``: l0 / k; ``tiled``: runs may be tiled into one release (independent noise per key).
    """

    name: str
    picked: str
    mechanism: Any
    request: Any
    reference: Any
    calibration: Any
    bound: int
    sigma_scale: float
    margin_shift: int
    tiled: bool

    @property
    def thresholded(self) -> bool:
        return self.picked in THRESHOLDED

    @property
    def correlated(self) -> bool:
        return self.picked in ("csh", TopKCSH.name, "topk-csh-shifted")

    @property
    def public(self) -> bool:
        return self.picked in PUBLIC

    @property
    def embedding(self) -> bool:
        return self.picked in EMBEDDING

    @property
    def pre(self) -> int:
        return int(getattr(self.mechanism, "pre_threshold", 1))


def scaled_calibration(cal, factor: float):
    """``cal`` with its noise scale multiplied by ``factor`` (threshold unchanged): a deliberately wrong
    mechanism for the audit to catch. Discrete scales stay exact rationals (σ² scales by factor²)."""
    if factor == 1.0:
        return cal
    return dataclasses.replace(cal, sigma=cal.sigma * factor, noise_std=cal.noise_std * factor,
                               noise=scaled_law(cal.noise, factor))


#: how each noise-law field scales when the noise is multiplied by ``factor`` (its power of factor);
#: fields not listed (the embedding weight c, the divisor) are kept
_SCALE_POWER = {"sigma2": 2, "shared_sigma2": 2, "scale": 1, "shared_scale": 1, "sigma": 1, "shared_sigma": 1}


def scaled_law(law, factor: float):
    """``law`` with its noise multiplied by ``factor``: variance parameters by factor², scales by factor;
    exact rationals stay exact (``Fraction(factor)``)."""
    f = Fraction(factor)
    changes = {}
    for fl in dataclasses.fields(law):
        power = _SCALE_POWER.get(fl.name)
        if power is None:
            continue
        x = getattr(law, fl.name)
        changes[fl.name] = x * f ** power if isinstance(x, Fraction) else float(x) * factor ** power
    return dataclasses.replace(law, **changes)


def scaled_public(cal, factor: float):
    """A public-key calibration (:class:`~sparsedp.accounting.public_keys.PublicKeysCalibration`) with its noise
    multiplied by ``factor``: the sampled scale (secure Gaussian: the exact rational ``s = σ²`` by factor²; Laplace
    and float Gaussian: by factor) and the stated stds."""
    if factor == 1.0:
        return cal
    f = Fraction(factor)
    power = 2 if (cal.secure and cal.family != Laplace.name) else 1
    scale = cal.scale * f ** power if isinstance(cal.scale, Fraction) else float(cal.scale) * factor ** power
    return dataclasses.replace(
        cal, scale=scale, noise_std=cal.noise_std * factor, shared_std=cal.shared_std * factor,
        independent_std=cal.independent_std * factor,
        n_noise_std=None if cal.n_noise_std is None else cal.n_noise_std * factor)


def shifted_calibration(cal, shift: int):
    """``cal`` with its integer margin moved by ``shift`` (release rule ``c + X >= pre + margin + shift``):
    a threshold error for the audit to catch. The margin must stay >= 0."""
    if shift == 0:
        return cal
    tau = cal.tau + shift
    if tau < 0:
        raise InvalidParameterError(f"⟨margin_shift={shift}⟩ would make the margin {tau:g} negative "
                                    f"(calibrated margin {cal.tau:g})", param="margin_shift")
    return dataclasses.replace(cal, tau=float(tau) if isinstance(cal.tau, float) else tau)


def _mechanism(name: str, bound: int, options: dict):
    from ..mechanisms import registry

    if name == "csh":
        return registry.create(TopKCSH.name, k=bound, debias=False)
    if name == TopKCSH.name:
        return registry.create(TopKCSH.name, k=bound, debias=True)
    if name == "topk-csh-shifted":
        return registry.create(TopKCSH.name, k=bound, debias=False)
    if name == "misra-gries":
        return registry.create("misra-gries", sketch_size=options.get("sketch_size", 4))
    if name == "basic":
        return registry.create("basic", domain_size=options.get("domain_size", 64))
    if name == "pure-sparse":  # short keys: a small domain, so a low threshold and small n (the time is ~n²)
        return registry.create("pure-sparse", max_key_bytes=options.get("max_key_bytes", 4))
    if name == "compact":
        return registry.create("compact", query_keys=tuple((i,) for i in range(8)))
    if name in STONES:
        return registry.create(name, domain_size=options.get("domain_size", 512))
    if name == GROUPED:
        return registry.create(name, group="g")
    return registry.create(name)


def default_bound(mechanism: str) -> int:
    """The bound an audit uses when none is given: 1 for the pure mechanisms (one key per unit: their model),
    2 otherwise (l0, or k for CSH / top-k; small bounds give the most power)."""
    return 1 if mechanism in _PURE else 2


def build_target(mechanism: str, *, epsilon, delta, bound: int | None = None, sigma_scale: float = 1.0,
                 margin_shift: int = 0, **options) -> Target:
    """The :class:`Target` of an audit (see the module docstring). ``bound``: l0 for the per-unit-bounded
    mechanisms (gshm, laplace, misra-gries; 1 for the pure ones), k for csh / top-k. ``options``: ``sketch_size``
    (misra-gries, default 4), ``domain_size`` (basic, default 64)."""
    from ..mechanisms.base import ReleaseRequest

    name = v.choice("mechanism", mechanism, auditable())
    b = v.integer("bound", default_bound(name) if bound is None else bound, lo=1, hi=10_000)
    scale = v.real("sigma_scale", sigma_scale, lo=0.0, hi=100.0, lo_open=True)
    shift = v.integer("margin_shift", margin_shift, lo=-10_000, hi=10_000)
    pure = name in _PURE
    if pure and b != 1:
        raise InvalidParameterError(f"mechanism {name!r} assumes one key per unit: bound must be 1, got {b}")
    mech = _mechanism(name, b, options)
    l0 = None if name in ("csh", TopKCSH.name, "topk-csh-shifted") else b
    keys = None
    if name in PUBLIC:
        from ..mechanisms.public_keys import public_keys

        d = v.integer("d", options.get("d", 4 if name in EMBEDDING else b), lo=1, hi=10_000)
        keys = _grouped_keys(d) if name == GROUPED else public_keys(list(range(d)), ["key"])
    request = ReleaseRequest(epsilon=v.real("epsilon", epsilon, lo=0.0, lo_open=True),
                             delta=v.real("delta", delta, lo=0.0, hi=1.0, hi_open=True), max_groups_per_unit=l0,
                             keys=keys)
    picked = name
    if name == "auto":
        mech, ref, _, _ = mech.resolve(request)
        picked = mech.name
    else:
        mech.check(request)
        ref = mech.calibrate(request)
    if picked in PUBLIC and shift != 0:
        raise InvalidParameterError(f"margin_shift does not apply to {picked!r} (no threshold)")
    if picked == "misra-gries" and shift == 0 and getattr(ref, "csh", None) is not None:
        # the sketch is released by CSH: σ scale applies to that CSH (the σ/2 mutant of the acceptance test)
        cal = dataclasses.replace(ref, csh=scaled_calibration(ref.csh, scale))
        return Target(name=name, picked=picked, mechanism=mech, request=request, reference=ref, calibration=cal,
                      bound=b, sigma_scale=scale, margin_shift=shift, tiled=False)
    if picked not in THRESHOLDED + PUBLIC and (scale != 1.0 or shift != 0):
        raise InvalidParameterError(f"sigma_scale and margin_shift apply to the thresholded mechanisms "
                                    f"({', '.join(THRESHOLDED)}), sigma_scale also to {', '.join(PUBLIC)}; "
                                    f"not to {picked!r}")
    if picked in THRESHOLDED:
        cal = shifted_calibration(scaled_calibration(ref, scale), shift)
    else:
        cal = scaled_public(ref, scale) if picked in PUBLIC else ref
    return Target(name=name, picked=picked, mechanism=mech, request=request, reference=ref, calibration=cal,
                  bound=b, sigma_scale=scale, margin_shift=shift, tiled=picked in _TILED)


def _engine():
    from ..engines import get_engine

    return get_engine("arrow")


def _histogram(counts: np.ndarray, ids: np.ndarray, units: int | None = None):
    """A bounded :class:`~sparsedp.core.bounded.LocalHistogram` of the given keys (int ids) and counts, as an
    embedded engine hands it to ``Mechanism.run`` (keys with a count below 1 are not in it); ``units``: the number
    of privacy units in the input (default: the total count, one key per unit)."""
    import pyarrow as pa

    from ..core.bounded import BoundingStats, LocalHistogram

    n = int(counts.size)
    u = int(counts.sum()) if units is None else int(units)
    stats = BoundingStats(rows_in=int(counts.sum()), units_in=u, pairs_in=int(counts.sum()),
                          units_over_l0=0, pairs_dropped_l0=0, keys_in=n, keys_bounded=n, keys_out=n, l0=None)
    return LocalHistogram(keys=pa.table({"key": pa.array(ids, type=pa.int64())}), counts=counts, stats=stats)


def _rows(released) -> tuple[np.ndarray, np.ndarray]:
    """(key ids, values) of a ``Released``: a LocalRelease (thresholded) or an Arrow table (in-process)."""
    rows = released.rows
    if hasattr(rows, "values") and hasattr(rows, "keys") and not hasattr(rows, "schema"):
        return np.asarray(rows.keys.column("key").to_numpy(), np.int64), np.asarray(rows.values, np.float64)
    value_col = released.disclosure.value_column
    keys = rows.column("key").to_pylist()
    vals = rows.column(value_col).to_numpy(zero_copy_only=False)
    ids, out = [], []
    for kk, vv in zip(keys, vals):
        kid = _key_id(kk)
        if kid is None:
            continue  # a random label of an empty bin that is not one of our integer keys
        ids.append(kid)
        out.append(float(vv))
    return np.asarray(ids, np.int64), np.asarray(out, np.float64)


def _key_id(key) -> int | None:
    """Our integer key id from a released key: an int, or the pure mechanisms' JSON label ``"[7]"``."""
    import json

    if isinstance(key, (int, np.integer)):
        return int(key)
    try:
        x = json.loads(key)
    except (TypeError, ValueError):
        return None
    if isinstance(x, list) and len(x) == 1:
        x = x[0]
    return int(x) if isinstance(x, int) else None


def _n_tilde(released) -> float:
    """The size estimate ñ = y_(d+1)/C of an embedding release, from its note (the exact integer ``y_(d+1)``)."""
    import re

    for note in released.disclosure.notes:
        m = re.search(r"y_\(d\+1\) = (\S+) with C = (\S+)\)", note)
        if m:
            return float(m.group(1)) / float(m.group(2))
    raise RuntimeError("the release carries no size estimate note")  # pragma: no cover


#: the other group of the grouped target: every key at this count, this many units (it never changes)
_OTHER_COUNT, _OTHER_UNITS = 2, 4


def _grouped_keys(d: int):
    """The grouped target's public key list: ``(g, key)`` for ``g ∈ {0, 1}``, ``key ∈ 0..d−1``."""
    import polars as pl

    from ..mechanisms.public_keys import public_keys

    frame = pl.DataFrame({"g": np.repeat(np.arange(2, dtype=np.int64), d), "key": np.tile(np.arange(d), 2)})
    return public_keys(frame, ["g", "key"])


def _grouped_histogram(c: np.ndarray, units: int):
    """What the grouped mechanism's ``histogram`` step hands to ``prepare`` (one group per unit already enforced):
    group 0's keys at the audited counts ``c`` with ``units`` units, group 1's at :data:`_OTHER_COUNT` with
    :data:`_OTHER_UNITS` units. Only group 0 differs between neighbours (a unit lives in one group)."""
    import polars as pl
    import pyarrow as pa

    from ..mechanisms.grouped_keys import GroupedHistogram

    d = c.size
    counts = np.concatenate([c, np.full(d, _OTHER_COUNT, np.int64)])
    g = np.repeat(np.arange(2, dtype=np.int64), d)
    key = np.tile(np.arange(d, dtype=np.int64), 2)
    live = counts > 0
    inner = _histogram(counts[live], key[live], units=units + _OTHER_UNITS)
    inner = dataclasses.replace(inner, keys=pa.table({"g": pa.array(g[live]), "key": pa.array(key[live])}))
    per = pl.DataFrame({"g": np.arange(2, dtype=np.int64), "len": np.array([units, _OTHER_UNITS], np.uint32)})
    per = per.filter(pl.col("len") > 0)
    return GroupedHistogram(inner=inner, rows_in=int(counts.sum()), n_per_group=per)


def _group0(released, d: int) -> np.ndarray:
    """Group 0's ``d`` released values and its size estimate ñ_0 (exact: ``y_(D+1)`` is an integer, recovered
    from the note's 6 significant digits by rounding ñ·C) of a grouped release."""
    import re

    rows = released.rows
    g = np.asarray(rows.column("g").to_numpy(), np.int64)
    key = np.asarray(rows.column("key").to_numpy(), np.int64)
    vals = np.asarray(rows.column(released.disclosure.value_column).to_numpy(zero_copy_only=False), np.float64)
    out = np.full(d + 1, np.nan)
    out[key[g == 0]] = vals[g == 0]
    for note in released.disclosure.notes:
        m = re.search(r"with C = (\S+)\): 0: (\S+?)(,|$)", note)
        if m:
            cc = float(m.group(1))
            out[d] = round(float(m.group(2)) * cc) / cc
            return out
    raise RuntimeError("the grouped release carries no size estimate of group 0")  # pragma: no cover


def _release_public(target: Target, c: np.ndarray, units: int, runs: int, rng) -> np.ndarray:
    """``(runs, d)`` (embedding: ``(runs, d + 1)``, the last column ñ) values of public-key releases of the counts
    ``c`` of the d listed keys with ``units`` privacy units, through ``prepare`` (the join to the list) and ``run``."""
    from ..mechanisms.public_keys import public_keys

    t = target
    d = c.size
    engine = _engine()
    disclosure = t.mechanism.disclosure(t.request, t.calibration, "count")
    if t.picked == GROUPED:
        hist = t.mechanism.prepare(engine, _grouped_histogram(c, units), t.request)
        return np.stack([_group0(t.mechanism.run(engine, hist, t.calibration, disclosure, rng, t.request), d)
                         for _ in range(runs)]) if runs else np.full((0, d + 1), np.nan)
    width = d + 1 if t.embedding else d
    out = np.full((runs, width), np.nan)
    per = max(1, _CHUNK // d) if t.tiled else 1
    done = 0
    while done < runs:
        r = min(per, runs - done) if t.tiled else 1
        ids = np.arange(r * d, dtype=np.int64)
        cc = np.tile(c, r)
        live = cc > 0
        request = dataclasses.replace(t.request, keys=public_keys(ids.tolist(), ["key"])) if t.tiled else t.request
        hist = t.mechanism.prepare(engine, _histogram(cc[live], ids[live], units=units), request)
        reps = 1 if t.tiled else runs
        for _ in range(reps):
            rel = t.mechanism.run(engine, hist, t.calibration, disclosure, rng, request)
            keys, vals = _rows(rel)
            if t.tiled:
                out.reshape(-1)[done * d + keys] = vals
            else:
                out[done, keys] = vals
                if t.embedding:
                    out[done, d] = _n_tilde(rel)
                done += 1
        if t.tiled:
            done += r
    return out


def release_many(target: Target, counts, runs: int, rng, units: int | None = None) -> np.ndarray:
    """``(runs, n)`` released values of ``runs`` independent releases of the histogram ``counts`` (key i has
    count ``counts[i]``; 0 = not in the data) through ``Mechanism.run``; NaN where a key is not released.
    Public-key mechanisms: the keys are the listed ones, ``units`` the number of privacy units (default the total
    count), and the embedding ones add a last column, the released size estimate ñ."""
    c = np.asarray(counts, dtype=np.int64)
    if target.public:
        return _release_public(target, c, int(c.sum()) if units is None else int(units), int(runs), rng)
    n = c.size
    runs = int(runs)
    out = np.full((runs, n), np.nan)
    live = np.flatnonzero(c > 0)
    if live.size == 0 or runs == 0:
        return out
    t = target
    engine = _engine()
    disclosure = t.mechanism.disclosure(t.request, t.calibration, "count")
    if t.tiled:
        per = max(1, _CHUNK // live.size)
        done = 0
        while done < runs:
            r = min(per, runs - done)
            ids = (np.arange(r)[:, None] * n + live[None, :]).reshape(-1)
            hist = _histogram(np.tile(c[live], r), ids)
            prepared = t.mechanism.prepare(engine, hist, t.request)  # as the pipeline hands it to run
            keys, vals = _rows(t.mechanism.run(engine, prepared, t.calibration, disclosure, rng, t.request))
            out.reshape(-1)[done * n + keys] = vals
            done += r
        return out
    hist = t.mechanism.prepare(engine, _histogram(c[live], live.astype(np.int64)), t.request)
    for i in range(runs):
        keys, vals = _rows(t.mechanism.run(engine, hist, t.calibration, disclosure, rng, t.request))
        ok = (keys >= 0) & (keys < n)
        out[i, keys[ok]] = vals[ok]
    return out
