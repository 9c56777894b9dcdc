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

Targets of their own modules: the set-union key discoveries (:mod:`.set_union`: ``weighted-gaussian`` tiled on
integer weight sums in grid units, ``policy-gaussian`` on ℓ2-descent weights, float noise), the two-stage release
(:mod:`.two_stage`: one ``prepare``/``run`` per release) and the blanket histogram ``pure-blanket`` (replace-one
pairs as the other pure mechanisms; its ``sigma_scale`` mutant runs the mechanism at ε/``sigma_scale``, i.e. with
its geometric noise's base α raised to the power 1/``sigma_scale``, while the claim stays ε), the vector sum
(:mod:`.vectors`: ``sparsedp.vector_sum`` itself per release; ``bound`` is its number of coordinates), the vector
mean (:mod:`.vector_mean`: ``sparsedp.vector_mean``, PLAN, per release) and the ALP
structure (:mod:`.alp`: ``sparsedp.alp`` itself per release, one key per unit).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from .. import _validate as v
from ..accounting.partition_selection import OPTIMAL_PARTITION
from ..errors import InvalidParameterError
from ..mechanisms import registry
from ..mechanisms.base import ReleaseRequest
from ..mechanisms.grouped_keys import GroupedHistogram
from ..mechanisms.public_keys import CorrelatedGaussian, public_keys
from ..mechanisms.thresholded import GSHM, Laplace, TopKCSH
from ..noise import default_source
from .histograms import arrow_engine, local_histogram, release_tiled, released_rows, size_estimate
from .mutants import scaled_calibration, scaled_law, scaled_public, shifted_calibration
from .adaptive_weighting import ROUNDS, release_rounds, rounds_calibration
from .set_union import POLICY, WEIGHTED, release_policy, shifted_weighted
from .two_stage import TWO_STAGE, release_two_stage, two_stage_calibration
from .alp import ALP_TARGET, ALPRelease, release_alp
from .vector_mean import VECTOR_MEAN, VectorMeanRelease, release_means
from .vectors import VECTOR_SUM, VectorSumRelease, release_vectors

__all__ = ["AUDITABLE", "Target", "auditable", "build_target", "default_bound", "release_many",
           "shifted_calibration", "scaled_calibration", "scaled_law", "scaled_public"]

#: audit names: every registered mechanism (``registry.names()``), the shifted top-k variant, and "csh" (CSH on a
#: k-sparse histogram: top-k CSH with at most k keys has cut-off 0, so it IS Algorithm 2 / rounded CSH)
AUDITABLE = (GSHM.name, Laplace.name, "csh", TopKCSH.name, "topk-csh-shifted", "pure-sparse", "compact", "basic",
             "stability", "pure-blanket", "misra-gries", "auto", "public-gaussian", "public-laplace",
             CorrelatedGaussian.name, "bounded-density", "grouped-correlated-gaussian", "keep-heavy", "kh-prime",
             "kh-double-prime", "sparse-histogram", TWO_STAGE, WEIGHTED, POLICY, VECTOR_SUM, OPTIMAL_PARTITION,
             VECTOR_MEAN, ALP_TARGET) + ROUNDS
#: the grouped correlated Gaussian (Lebeda (2024) Algorithm 2): audited on group 0 of two groups of ``d`` keys each
GROUPED = "grouped-correlated-gaussian"
#: public-key mechanisms (every listed key released, no threshold; σ scale applies)
PUBLIC = ("public-gaussian", "public-laplace", CorrelatedGaussian.name, "bounded-density", GROUPED)
#: public-key mechanisms releasing the size estimate ñ (the embedding ``(q·x − p·1, c)`` of Lebeda (2024))
EMBEDDING = (CorrelatedGaussian.name, "bounded-density", GROUPED)
#: the Balcer–Vadhan stepping stones (Balcer & Vadhan (2019) §6): replace-one, one key per unit, run on a small integer domain
STONES = ("keep-heavy", "kh-prime", "kh-double-prime", "sparse-histogram")
#: the linear-time pure-DP blanket histogram (Kerschbaum, Lee & Wu (2025), arXiv 2507.17017)
BLANKET = "pure-blanket"
_PURE = ("pure-sparse", "compact", "basic", "stability", BLANKET) + STONES
#: mechanisms with a thresholded per-key kernel (σ scale and margin shift apply; exact release laws known)
THRESHOLDED = (GSHM.name, Laplace.name, "csh", TopKCSH.name, "topk-csh-shifted")
#: targets whose noise scale and threshold an audit can break (``sigma_scale``, ``margin_shift``) besides the
#: thresholded ones: the public-key ones (σ only), Misra–Gries (σ of its CSH), the blanket histogram (ε only),
#: the set-union and two-stage ones (both)
SCALABLE = THRESHOLDED + PUBLIC + ("misra-gries", BLANKET, WEIGHTED, POLICY, TWO_STAGE, VECTOR_SUM, VECTOR_MEAN,
                                   ALP_TARGET) + ROUNDS
SHIFTABLE = THRESHOLDED + (WEIGHTED, POLICY, TWO_STAGE) + ROUNDS
#: the optimal l0 = 1 partition selection: one key per unit (bound 1), an independent exact bit per key (tiled);
#: its curve has no noise scale or margin to break (the rounding-up mutant is built in its tests)
_TILED = (GSHM.name, Laplace.name, "public-gaussian", "public-laplace", WEIGHTED, POLICY, OPTIMAL_PARTITION)
_CHUNK = 1 << 18  # keys per tiled release (bounds memory)
#: the bound each mechanism's contribution model is stated with, and its name in the report
BOUND_NAME = {GSHM.name: "l0", Laplace.name: "l0", "csh": "k", TopKCSH.name: "top_k", "topk-csh-shifted": "top_k",
              "misra-gries": "l0", "auto": "l0", VECTOR_SUM: "d", VECTOR_MEAN: "d", ALP_TARGET: "l0",
              **{m: "l0" for m in PUBLIC + _PURE + (WEIGHTED, POLICY, TWO_STAGE, OPTIMAL_PARTITION) + ROUNDS}}


def auditable() -> tuple[str, ...]:
    """The audit names: :data:`AUDITABLE` (the built-in ones, with their audit variants) and every other
    registered mechanism (a plug-in's, audited with its default options through the generic path: the
    worst-case count scenarios, released by its own ``run``)."""
    return AUDITABLE + tuple(n for n in registry.names() if n not in AUDITABLE)


@dataclass(frozen=True)
class Target:
    """A mechanism under audit.

    ``name``: the audit name (``auto`` resolved: ``picked`` is the registered name it chose); ``mechanism``: the
    registered mechanism object; ``request``: the claim; ``reference``: ``mechanism.calibrate(request)``;
    ``calibration``: what is run (``reference`` unless ``sigma_scale``/``margin_shift`` break it);
    ``bound``: l0 / k; ``tiled``: runs may be tiled into one release (independent noise per key);
    ``run_request``: the request the releases run with when it is not the claim (the blanket histogram's
    ``sigma_scale`` mutant: the claim at ε, the run at ε/``sigma_scale``).
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
    run_request: Any = None

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

    @property
    def runs_with(self) -> Any:
        """The request the releases run with (the claim unless a mutant changes it)."""
        return self.request if self.run_request is None else self.run_request


def _mechanism(name: str, bound: int, options: dict):
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
    if name == TWO_STAGE:  # the composition audited with GSHM as stage 1 (its scenarios shift GSHM's margin); the
        # default select="auto" picks the Weighted Gaussian or the l0 = 1 rule, each audited under its own name
        return registry.create(name, select=options.get("select", "gshm"))
    if name == VECTOR_SUM:  # not a registered mechanism: sparsedp.vector_sum on `bound` coordinates
        return VectorSumRelease(d=bound)
    if name == ALP_TARGET:  # not a registered mechanism: sparsedp.alp on a table of one key
        return ALPRelease()
    if name == VECTOR_MEAN:  # not a registered mechanism: sparsedp.vector_mean (PLAN) on `bound` coordinates
        return VectorMeanRelease(d=bound)
    return registry.create(name)


def default_bound(mechanism: str) -> int:
    """The bound an audit uses when none is given: 1 for the pure mechanisms (one key per unit: their model),
    and for the optimal partition selection and the ALP structure, 2 otherwise (l0, or k for CSH / top-k; small
    bounds give the most power)."""
    return 1 if mechanism in _PURE + (OPTIMAL_PARTITION, ALP_TARGET) else 2


def _broken(picked: str, mech, request, ref, scale: float, shift: int) -> tuple[Any, Any]:
    """``(calibration, run_request)`` of the mechanism run: the reference with its noise times ``scale`` and its
    margin moved by ``shift`` (each target's own reading of both); ``run_request`` None: the claim's request."""
    if picked not in SCALABLE and scale != 1.0 or picked not in SHIFTABLE and shift != 0:
        what = "margin_shift" if shift != 0 and picked not in SHIFTABLE else "sigma_scale"
        return_to = SHIFTABLE if what == "margin_shift" else SCALABLE
        raise InvalidParameterError(f"⟨{what}⟩ does not apply to {picked!r}: it applies to the thresholded "
                                    f"mechanisms and {', '.join(n for n in return_to if n not in THRESHOLDED)}",
                                    param=what)
    if picked in THRESHOLDED:
        return shifted_calibration(scaled_calibration(ref, scale), shift), None
    if picked in PUBLIC:
        return scaled_public(ref, scale), None
    if picked == "misra-gries":
        if getattr(ref, "csh", None) is None:
            if scale != 1.0:
                raise InvalidParameterError("sigma_scale applies to a Misra-Gries sketch released by CSH (the "
                                            "default release)", param="sigma_scale")
            return ref, None
        # the sketch is released by CSH: σ scale applies to that CSH (the σ/2 mutant of the acceptance test)
        return dataclasses.replace(ref, csh=scaled_calibration(ref.csh, scale)), None
    if picked == WEIGHTED:
        return shifted_weighted(scaled_calibration(ref, scale), shift), None
    if picked == POLICY:
        return shifted_calibration(scaled_calibration(ref, scale), shift), None
    if picked == TWO_STAGE:
        return two_stage_calibration(ref, scale, shift), None
    if picked in ROUNDS:
        return rounds_calibration(ref, scale, shift), None
    if picked in (VECTOR_SUM, VECTOR_MEAN):  # σ times scale: ρ over scale²
        return dataclasses.replace(ref, rho=ref.rho / scale ** 2,
                                   noise_std=tuple(x * scale for x in ref.noise_std)), None
    if picked == ALP_TARGET:  # built at ε/scale per entry change, u times scale: the same m columns
        return mech.calibrate(ref.epsilon / scale, ref.u * scale), None
    if picked == BLANKET and scale != 1.0:
        run = dataclasses.replace(request, epsilon=float(request.epsilon) / scale)
        return mech.calibrate(run), run
    return ref, None


def build_target(mechanism: str, *, epsilon, delta, bound: int | None = None, sigma_scale: float = 1.0,
                 margin_shift: int = 0, **options) -> Target:
    """The :class:`Target` of an audit (see the module docstring). ``bound``: l0 for the per-unit-bounded
    mechanisms (gshm, laplace, misra-gries, the set-union ones, two-stage's stage 1; 1 for the pure ones), k for
    csh / top-k. ``options``: ``sketch_size`` (misra-gries, default 4), ``domain_size`` (basic, default 64),
    ``d`` (public-key lists)."""
    name = v.choice("mechanism", mechanism, auditable())
    b = v.integer("bound", default_bound(name) if bound is None else bound, lo=1, hi=10_000)
    scale = v.real("sigma_scale", sigma_scale, lo=0.0, hi=100.0, lo_open=True)
    shift = v.integer("margin_shift", margin_shift, lo=-10_000, hi=10_000)
    pure = name in _PURE + (ALP_TARGET,)
    if pure and b != 1:
        raise InvalidParameterError(f"mechanism {name!r} assumes one key per unit: bound must be 1, got {b}")
    mech = _mechanism(name, b, options)
    l0 = None if name in ("csh", TopKCSH.name, "topk-csh-shifted") else b
    keys = None
    if name in PUBLIC:
        d = v.integer("d", options.get("d", 4 if name in EMBEDDING else b), lo=1, hi=10_000)
        keys = _grouped_keys(d) if name == GROUPED else public_keys(list(range(d)), ["key"])
    request = ReleaseRequest(epsilon=v.real("epsilon", epsilon, lo=0.0, lo_open=True),
                             delta=v.real("delta", delta, lo=0.0, hi=1.0, hi_open=True), max_groups_per_unit=l0,
                             keys=keys, insecure_float=name == POLICY)  # policy-gaussian has float noise only
    picked = name
    if name in (VECTOR_SUM, VECTOR_MEAN):
        ref = mech.calibrate(request.epsilon, request.delta, default_source())
    elif name == ALP_TARGET:
        ref = mech.calibrate(float(request.epsilon))
    elif name == "auto":
        mech, ref, _, _ = mech.resolve(request)
        picked = mech.name
    else:
        mech.check(request)
        ref = mech.calibrate(request)
    cal, run_request = _broken(picked, mech, request, ref, scale, shift)
    return Target(name=name, picked=picked, mechanism=mech, request=request, reference=ref, calibration=cal,
                  bound=b, sigma_scale=scale, margin_shift=shift, tiled=picked in _TILED, run_request=run_request)


#: the names the other modules of the audit and the worked examples use
_engine = arrow_engine
_histogram = local_histogram
_rows = released_rows
_n_tilde = size_estimate


#: the other group of the grouped target: every key at this count, this many units (it never changes)
_OTHER_COUNT, _OTHER_UNITS = 2, 4


def _grouped_keys(d: int):
    """The grouped target's public key list: ``(g, key)`` for ``g ∈ {0, 1}``, ``key ∈ 0..d−1``."""
    frame = pl.DataFrame({"g": np.repeat(np.arange(2, dtype=np.int64), d), "key": np.tile(np.arange(d), 2)})
    return public_keys(frame, ["g", "key"])


def _grouped_histogram(c: np.ndarray, units: int):
    """What the grouped mechanism's ``histogram`` step hands to ``prepare`` (one group per unit already enforced):
    group 0's keys at the audited counts ``c`` with ``units`` units, group 1's at :data:`_OTHER_COUNT` with
    :data:`_OTHER_UNITS` units. Only group 0 differs between neighbours (a unit lives in one group)."""
    d = c.size
    counts = np.concatenate([c, np.full(d, _OTHER_COUNT, np.int64)])
    g = np.repeat(np.arange(2, dtype=np.int64), d)
    key = np.tile(np.arange(d, dtype=np.int64), 2)
    live = counts > 0
    inner = local_histogram(counts[live], key[live], units=units + _OTHER_UNITS)
    inner = dataclasses.replace(inner, keys=pa.table({"g": pa.array(g[live]), "key": pa.array(key[live])}))
    per = pl.DataFrame({"g": np.arange(2, dtype=np.int64), "len": np.array([units, _OTHER_UNITS], np.uint32)})
    per = per.filter(pl.col("len") > 0)
    return GroupedHistogram(inner=inner, rows_in=int(counts.sum()), n_per_group=per)


def _group0(released, d: int) -> np.ndarray:
    """Group 0's ``d`` released values and its size estimate ñ_0 (exact: ``y_(D+1)`` is an integer, recovered
    from the note's 6 significant digits by rounding ñ·C) of a grouped release."""
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
    t = target
    d = c.size
    engine = arrow_engine()
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
        hist = t.mechanism.prepare(engine, local_histogram(cc[live], ids[live], units=units), request)
        reps = 1 if t.tiled else runs
        for _ in range(reps):
            rel = t.mechanism.run(engine, hist, t.calibration, disclosure, rng, request)
            keys, vals = released_rows(rel)
            if t.tiled:
                out.reshape(-1)[done * d + keys] = vals
            else:
                out[done, keys] = vals
                if t.embedding:
                    out[done, d] = size_estimate(rel)
                done += 1
        if t.tiled:
            done += r
    return out


def release_many(target: Target, counts, runs: int, rng, units: int | None = None) -> np.ndarray:
    """``(runs, n)`` released values of ``runs`` independent releases of the histogram ``counts`` (key i has
    count ``counts[i]``; 0 = not in the data) through ``Mechanism.run``; NaN where a key is not released.
    Public-key mechanisms: the keys are the listed ones, ``units`` the number of privacy units (default the total
    count), and the embedding ones add a last column, the released size estimate ñ."""
    if target.picked == POLICY:  # the counts are ℓ2-descent weights
        return release_policy(target, counts, int(runs), rng)
    if target.picked == VECTOR_SUM:  # the counts are the coordinates' true sums
        return release_vectors(target, counts, int(runs), rng)
    if target.picked in ROUNDS:  # the counts encode units (.adaptive_weighting.rounds_rows)
        return release_rounds(target, counts, int(runs), rng)
    if target.picked == VECTOR_MEAN:  # counts [0] = D, [1] = D'; columns: estimate, read-back noise, K
        return release_means(target, counts, int(runs), rng)
    if target.picked == ALP_TARGET:  # the counts of keys 0 and 1; columns (N_key, N_rest)
        return release_alp(target, counts, int(runs), rng)
    c = np.asarray(counts, dtype=np.int64)
    if target.picked == TWO_STAGE:
        return release_two_stage(target, c, int(c.sum()) if units is None else int(units), int(runs), rng)
    if target.public:
        return _release_public(target, c, int(c.sum()) if units is None else int(units), int(runs), rng)
    t = target
    request = t.runs_with
    runs = int(runs)
    if t.tiled:
        return release_tiled(t.mechanism, t.calibration, request, c, runs, rng,
                             lambda ids, vals: local_histogram(vals, ids))
    n = c.size
    out = np.full((runs, n), np.nan)
    live = np.flatnonzero(c > 0)
    if live.size == 0 or runs == 0:
        return out
    engine = arrow_engine()
    disclosure = t.mechanism.disclosure(request, t.calibration, "count")
    hist = t.mechanism.prepare(engine, local_histogram(c[live], live.astype(np.int64)), request)
    for i in range(runs):
        keys, vals = released_rows(t.mechanism.run(engine, hist, t.calibration, disclosure, rng, request))
        ok = (keys >= 0) & (keys < n)
        out[i, keys[ok]] = vals[ok]
    return out
