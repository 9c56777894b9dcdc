"""Simple entry point: pure ε-DP histogram of a list of items (one item per privacy unit, ``l0 = 1``).

>>> rel = pure_histogram(["a", "b", "a", …], epsilon=1, beta=0.05)          # doctest: +SKIP
>>> rel.to_dict()      # released keys with noisy counts; rel.calibration says what was guaranteed

Neighbouring relation. By default the number of items ``n`` is treated as **public** and neighbours
replace one item (the paper's bounded DP, Balcer & Vadhan (2019) §2). Pass ``max_items=N`` (a public bound on the
number of items) for add/remove-one-unit neighbours: the items are padded to ``N`` with a dummy label
that is never released, so adding or removing a unit is a replacement with the dummy in the padded data
and the same ε holds.

Domain. With ``domain_size=None`` items are strings or bytes, encoded injectively (UTF-8) as labels
of the finite domain of byte strings of length ``<= max_key_bytes``; released labels of empty bins are
random strings of that domain (decoded with ``surrogateescape``). With an integer ``domain_size`` the
items are integers in ``[0, domain_size)``. Running time never grows with ``|X|`` beyond its bit length
(except ``mechanism="basic"``/``"keep-heavy"``, which are dense and refuse domains above 2^20).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any, Callable, Iterable, Literal, Sequence, overload

import numpy as np

from ... import _validate as v
from ...accounting.calibration import Neighbours
from ...core.histogram import Release, SparseHistogram
from ...errors import InputDataError, InvalidParameterError, InvalidTypeError
from ...noise.clamped_geometric import FastSample, counting_sampler, unit_fraction
from ...noise.source import SecureRandom, default_source
from . import accuracy as acc
from .compact import CompactHistogram, choose_ell, compact_histogram
from .keep_heavy import basic_histogram, keep_heavy, kh_double_prime, kh_prime, sparse_histogram
from .pure_sparse import pure_sparse_histogram
from .stability import stability_histogram, stability_threshold

__all__ = ["PureCalibration", "PureOptions", "pure_histogram", "release_pure", "plan_pure", "MECHANISMS", "StringCodec"]

MECHANISMS = ("pure-sparse", "compact", "basic", "keep-heavy", "stability", "kh-prime", "kh-double-prime",
              "sparse-histogram")
DENSE_LIMIT = 1 << 20
#: KH′ and KH″ sample order statistics with exact binomials whose cost grows with |X| (ordstats, spec P5)
EXACT_ORDSTATS_LIMIT = 1 << 9
#: the Balcer–Vadhan stepping stones (Balcer & Vadhan (2019) §6): KeepHeavy (Alg 4), KH′ (Alg 5), KH″ (Alg 7),
#: SparseHistogram (Thm 6.5); all release the bins above the (n+1)-th largest noisy count
STEPPING_STONES = ("keep-heavy", "kh-prime", "kh-double-prime", "sparse-histogram")


@dataclass(frozen=True)
class PureCalibration:
    """What a pure histogram release guarantees.

    ``epsilon``: the guaranteed ε (the request rounded down to ``1/k``, ``k`` below); ``epsilon_realised``:
    the ε the noise actually sampled guarantees (``ε̃`` for GeoSample-based dense/keep-heavy releases, ε for
    mixtures, ``ε₁+ε₂+ε₃`` for compact); ``delta``: 0 except for ``"stability"``; ``neighbours``:
    replace-one with ``n`` public, or add/remove with the public bound ``n = max_items``; ``accuracy``: exact
    error bounds at ``beta`` (:class:`~sparsedp.mechanisms.pure.accuracy.Accuracy`).

    ``options``: the mechanism's public parameters (:class:`PureOptions`).
    """

    mechanism: str
    epsilon: float
    epsilon_realised: float
    delta: float
    beta: float
    neighbours: Neighbours
    n: int
    domain_size: int
    accuracy: acc.Accuracy
    options: "PureOptions"

    def __post_init__(self) -> None:
        object.__setattr__(self, "neighbours", Neighbours(self.neighbours))


class StringCodec:
    """Bijection between byte strings of length ``<= L`` and ``[0, (256^{L+1} − 1)/255)``, shortest first."""

    def __init__(self, max_bytes: int):
        self.L = v.integer("max_key_bytes", max_bytes, lo=1)
        self.domain_size = ((1 << (8 * (self.L + 1))) - 1) // 255

    def encode(self, item: object) -> int:
        if isinstance(item, str):
            b = item.encode("utf-8", "surrogateescape")
        elif isinstance(item, (bytes, bytearray)):
            b = bytes(item)
        else:
            raise InvalidTypeError(f"items must be str or bytes when domain_size is None, got "
                                   f"{type(item).__name__}; pass domain_size=… for integer items")
        if len(b) > self.L:
            raise InputDataError(f"an item is {len(b)} bytes long, above max_key_bytes={self.L}; "
                                 "raise max_key_bytes (a public bound) or truncate keys before release")
        return ((1 << (8 * len(b))) - 1) // 255 + int.from_bytes(b, "big")

    @overload
    def decode(self, label: int, as_str: Literal[True]) -> str: ...

    @overload
    def decode(self, label: int, as_str: Literal[False]) -> bytes: ...

    @overload
    def decode(self, label: int, as_str: bool) -> str | bytes: ...

    def decode(self, label: int, as_str: bool) -> str | bytes:
        length = 0
        while ((1 << (8 * (length + 1))) - 1) // 255 <= label:
            length += 1
        b = (label - ((1 << (8 * length)) - 1) // 255).to_bytes(length, "big")
        return b.decode("utf-8", "surrogateescape") if as_str else b


def _encode(items: Sequence[Any], domain_size: int | None,
            max_key_bytes: int) -> tuple[list[int], int, Callable[[int], Any]]:
    if domain_size is None:
        codec = StringCodec(max_key_bytes)
        as_str = all(isinstance(x, str) for x in items)
        return [codec.encode(x) for x in items], codec.domain_size, (lambda lab: codec.decode(lab, as_str))
    N = v.integer("domain_size", domain_size, lo=2)
    labels: list[int] = []
    for x in items:
        if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, np.integer)):
            raise InvalidTypeError(f"items must be integers in [0, domain_size) when domain_size is given, "
                                   f"got {type(x).__name__} {x!r}")
        x = int(x)
        if not 0 <= x < N:
            raise InputDataError(f"item {x} is outside [0, domain_size={N})")
        labels.append(x)
    return labels, N, (lambda lab: lab)


def _beta_unit(beta: Fraction, div: int) -> Fraction:
    """Largest unit fraction ``<= beta/div``."""
    return Fraction(1, unit_fraction("beta", beta / div))


def pure_histogram(items: Iterable[Any], epsilon: object, beta: object = Fraction(1, 20),
                   domain_size: int | None = None, mechanism: str = "pure-sparse", rng: SecureRandom | None = None, *,
                   max_items: int | None = None, delta: object | None = None, query_keys: Iterable[Any] | None = None,
                   max_key_bytes: int = 64) -> Release:
    """Release a pure ε-DP histogram of ``items`` (each unit contributes exactly one item).

    Args:
        items: sequence/array of items (ints in ``[0, domain_size)``, or str/bytes when ``domain_size``
            is None).
        epsilon: target ε in (0, 1], rounded down to ``1/⌈1/ε⌉``.
        beta: failure probability of the reported error bounds.
        domain_size: ``|X|``; None → all strings of at most ``max_key_bytes`` UTF-8 bytes.
        mechanism: ``"pure-sparse"`` (Alg 8, default; sparse output), ``"compact"`` (§7; counts for
            ``query_keys`` plus a :class:`CompactHistogram` in ``extra["histogram"]`` to query any key),
            ``"basic"`` (dense over the whole domain, ``|X| <= 2^20``), ``"keep-heavy"`` (Alg 4,
            ``|X| <= 2^20``), ``"stability"`` (``(ε, δ)``, needs ``delta``).
        rng: a :mod:`sparsedp.noise` source; None → the secure default.
        max_items: public bound on the number of items for add/remove neighbours (see module doc).

    Returns a :class:`~sparsedp.core.histogram.Release` (keys, int64 noisy counts,
    :class:`PureCalibration`). Bad input fails before any randomness is drawn.
    """
    items = list(items)
    mechanism = v.choice("mechanism", mechanism, MECHANISMS)
    labels, N, decode = _encode(items, domain_size, max_key_bytes)
    counts = Counter(labels)
    return _release(counts, N, decode, epsilon, beta, mechanism, rng, max_items, delta, query_keys,
                    n_rows=len(items), domain_given=domain_size is not None, max_key_bytes=max_key_bytes)


def release_pure(hist: SparseHistogram, *, epsilon: object, beta: object = Fraction(1, 20),
                 domain_size: int | None = None, mechanism: str = "pure-sparse", rng: SecureRandom | None = None,
                 max_items: int | None = None, delta: object | None = None, query_keys: Iterable[Any] | None = None,
                 max_key_bytes: int = 64) -> Release:
    """:func:`pure_histogram` for a :class:`SparseHistogram` of per-key unit counts (``l0 = 1``: the
    counts sum to the number of units). Keys must be ints (with ``domain_size``) or str/bytes."""
    mechanism = v.choice("mechanism", mechanism, MECHANISMS)
    keys = hist.keys.tolist() if isinstance(hist.keys, np.ndarray) else list(hist.keys)
    labels, N, decode = _encode(keys, domain_size, max_key_bytes)
    counts: Counter[int] = Counter()
    for lab, c in zip(labels, hist.counts.tolist()):
        counts[lab] += int(c)
    return _release(counts, N, decode, epsilon, beta, mechanism, rng, max_items, delta, query_keys,
                    n_rows=int(hist.counts.sum()), domain_given=domain_size is not None,
                    max_key_bytes=max_key_bytes)


@dataclass(frozen=True)
class _Units:
    """The neighbouring relation of a release: ``n`` units (public), the padded domain size ``NX`` and the
    dummy label the padding uses (``None``: replace-one neighbours with ``n`` public, no padding)."""

    n: int
    neighbours: Neighbours
    dummy: int | None
    NX: int


def _release(counts: Counter[int], N: int, decode: Callable[[int], Any], epsilon: object, beta: object,
             mechanism: str, rng: SecureRandom | None, max_items: int | None, delta: object | None,
             query_keys: Iterable[Any] | None, *, n_rows: int, domain_given: bool, max_key_bytes: int) -> Release:
    """Check every public parameter (before any randomness), configure the mechanism, draw, and decode."""
    k, beta_q, delta_q = _check_rates(mechanism, epsilon, beta, delta)
    if mechanism in ("basic", "keep-heavy") and N > DENSE_LIMIT:
        raise InvalidParameterError(f"mechanism={mechanism!r} runs in time linear in |X|={N}; use "
                                    f"'pure-sparse' or 'compact' for domains above 2^20")
    units = _units(counts, N, n_rows, max_items)
    _check_domain(mechanism, N, units.NX, units.n)
    qlabels = _query_labels(mechanism, query_keys, N if domain_given else None, max_key_bytes)
    cfg = _configure(mechanism, units.n, units.NX, k, beta_q, delta_q)  # public parameters only, no randomness yet
    out, histogram = _draw(mechanism, cfg, counts, units.NX, k, delta_q, qlabels,
                           default_source() if rng is None else rng)
    if units.dummy is not None:
        out = tuple((x, c) for x, c in out if x != units.dummy)
    keys = [decode(x) for x, _ in out]
    noisy = np.fromiter((c for _, c in out), dtype=np.int64, count=len(out))
    delta_f = 0.0 if delta_q is None else float(cfg.delta if cfg.delta is not None else delta_q)
    cal = PureCalibration(mechanism=mechanism, epsilon=float(Fraction(1, k)), epsilon_realised=cfg.realised,
                          delta=delta_f, beta=float(beta_q), neighbours=units.neighbours, n=units.n, domain_size=N,
                          accuracy=cfg.accuracy, options=cfg.options)
    extra = {"histogram": histogram} if mechanism == "compact" else {}
    n_in = len([x for x in counts if x != units.dummy])
    return Release(keys=keys, counts=noisy, calibration=cal, n_keys_in=n_in, n_keys_out=len(keys), extra=extra)


def _check_rates(mechanism: str, epsilon: object, beta: object,
                 delta: object | None) -> tuple[int, Fraction, Fraction | None]:
    """``(k, β, δ)``: ε = 1/k rounded down to a unit fraction, β in (0, 1), and δ in (0, 1) for the (ε, δ)
    mechanisms (``stability``, ``sparse-histogram``) and ``None`` for the pure ones (which refuse a δ)."""
    k = unit_fraction("epsilon", epsilon)
    beta_q = v.rational("beta", beta)
    if not 0 < beta_q < 1:
        raise InvalidParameterError(f"beta must be in (0, 1), got {beta_q}")
    if mechanism not in ("stability", "sparse-histogram"):
        if delta is not None:
            raise InvalidParameterError("delta is only used by mechanism='stability' (pure DP has delta=0)")
        return k, beta_q, None
    if delta is None:
        raise InvalidParameterError(f"mechanism={mechanism!r} needs delta (it is (epsilon, delta)-DP)")
    delta_q = v.rational("delta", delta)
    if not 0 < delta_q < 1:
        raise InvalidParameterError(f"delta must be in (0, 1), got {delta_q}")
    return k, beta_q, delta_q


def _units(counts: Counter[int], N: int, n_rows: int, max_items: int | None) -> _Units:
    """Neighbours: replace-one with ``n = n_rows`` public, or add/remove with the public bound ``max_items``
    (``counts`` is padded in place with ``max_items − n_rows`` dummy items of the label ``N``)."""
    if max_items is None:
        units = _Units(n=n_rows, neighbours=Neighbours.REPLACE_ONE, dummy=None, NX=N)
    else:
        n = v.integer("max_items", max_items, lo=1)
        if n_rows > n:
            raise InputDataError(f"{n_rows} items exceed max_items={n}")
        units = _Units(n=n, neighbours=Neighbours.ADD_REMOVE, dummy=N, NX=N + 1)
        if n > n_rows:
            counts[N] = n - n_rows
    if units.n < 1:
        raise InputDataError("no items: pass max_items=… (a public bound) to release an empty dataset")
    return units


def _check_domain(mechanism: str, N: int, NX: int, n: int) -> None:
    """The domain-size conditions of each mechanism (Balcer & Vadhan (2019): |X| ≥ 4n for pure-sparse, n + 1
    for KeepHeavy, 2n + 1 for KH′, 4n for KH″ and SparseHistogram; exact order statistics only for small |X|)."""
    if mechanism == "pure-sparse" and NX < 4 * n:
        raise InvalidParameterError(f"pure-sparse needs |X| >= 4n (|X|={NX}, n={n}); use mechanism='basic'")
    if mechanism == "keep-heavy" and NX < n + 1:
        raise InvalidParameterError(f"keep-heavy needs |X| >= n+1 (|X|={NX}, n={n}); use mechanism='basic'")
    if mechanism in ("kh-prime", "kh-double-prime") and N > EXACT_ORDSTATS_LIMIT:
        raise InvalidParameterError(f"mechanism={mechanism!r} samples exact binomials (cost grows with |X|={N}); "
                                    f"it is for |X| <= {EXACT_ORDSTATS_LIMIT}: use 'sparse-histogram' or "
                                    f"'pure-sparse' for larger domains")
    need = {"kh-prime": 2 * n + 1, "kh-double-prime": 4 * n, "sparse-histogram": 4 * n}.get(mechanism)
    if need is not None and NX < need:
        raise InvalidParameterError(f"{mechanism} needs |X| >= {need} (|X|={NX}, n={n}); use mechanism='basic'")


def _query_labels(mechanism: str, query_keys: Iterable[Any] | None, domain_size: int | None,
                  max_key_bytes: int) -> list[int]:
    """The labels of compact's ``query_keys`` (the keys whose counts it releases); refused for the others."""
    if mechanism != "compact":
        if query_keys is not None:
            raise InvalidParameterError("query_keys is only used by mechanism='compact'")
        return []
    qlabels, _, _ = _encode([] if query_keys is None else list(query_keys), domain_size, max_key_bytes)
    return qlabels


def _draw(mechanism: str, cfg: "_Config", counts: Counter[int], NX: int, k: int, delta: Fraction | None,
          qlabels: list[int], rng: SecureRandom) -> tuple[tuple[tuple[int, int], ...], CompactHistogram | None]:
    """The private step: ``((label, noisy count), …)`` released by ``mechanism`` (and compact's queryable
    histogram), every random word drawn from ``rng``."""
    sampler, opts = cfg.sampler, cfg.options
    if mechanism == "compact":
        assert opts.q_min is not None and opts.ell is not None
        histogram = compact_histogram(sampler, counts, NX, rng, q_min=opts.q_min, ell=opts.ell)
        return tuple((lab, histogram.count(lab)) for lab in qlabels), histogram
    if mechanism == "basic":
        out = basic_histogram(sampler, counts, range(NX), rng)
    elif mechanism == "keep-heavy":
        out = keep_heavy(sampler, counts, NX, rng)
    elif mechanism == "kh-prime":
        out = kh_prime(sampler, counts, NX, rng)
    elif mechanism == "kh-double-prime":
        out = kh_double_prime(sampler, counts, NX, None, rng)
    elif mechanism == "sparse-histogram":
        assert delta is not None
        out = sparse_histogram(sampler, counts, NX, None, _sh_delta(delta, k), rng)
    elif mechanism == "pure-sparse":
        assert opts.beta1 is not None and opts.beta2 is not None
        out = pure_sparse_histogram(sampler, counts, NX, opts.beta1, opts.beta2, rng)
    else:
        assert delta is not None
        out = stability_histogram(sampler, counts, NX, delta, rng)
    return tuple(out), None


@dataclass(frozen=True)
class PureOptions:
    """The public parameters of one configured mechanism: ``k`` (ε = 1/k), ``sampler`` (repr of the counting
    sampler, Balcer & Vadhan (2019) §5), and, where the mechanism has them, ``beta1``/``beta2`` (pure-sparse, Figure 2),
    ``tau`` (the stability threshold), ``q_min``/``ell`` (compact, Cor. 7.3), ``gamma``/``t`` (FastSample's
    uniform weight and window)."""

    k: int
    sampler: str = ""
    beta1: Fraction | None = None
    beta2: Fraction | None = None
    tau: int | None = None
    q_min: int | None = None
    ell: int | None = None
    gamma: Fraction | None = None
    t: int | None = None


@dataclass(frozen=True)
class _Config:
    sampler: Any
    options: PureOptions
    accuracy: acc.Accuracy
    realised: float
    #: the δ actually guaranteed when it differs from the target (sparse-histogram: (e^ε̃ + 1)·δ_TV)
    delta: Fraction | None = None


def _sh_delta(delta: Fraction, k: int) -> Fraction:
    """SparseHistogram's statistical distance δ_TV for a target δ: Thm 6.5 gives (ε, (e^ε+1)δ_TV)-DP, so
    δ_TV = δ/(e^ε + 1), with e^ε bounded above by the rational 3 (ε ≤ 1 < ln 3): δ_TV = δ/4 (conservative)."""
    return Fraction(delta) / 4


def _configure(mechanism: str, n: int, NX: int, k: int, beta: Fraction, delta: Fraction | None) -> _Config:
    """Sampler, parameters, exact accuracy and realised ε of one mechanism (public quantities only)."""
    eps = Fraction(1, k)
    opts = PureOptions(k=k)
    delta_out = None
    if mechanism in ("basic",) + STEPPING_STONES:
        gamma = Fraction(1, unit_fraction("gamma", beta / (2 * NX)))  # Figure 1: gamma = beta/(2|X|)
        sampler = counting_sampler(n, eps, gamma)
        # KH′ is identically distributed to KeepHeavy (Prop 6.2); KH″ with exact distinct labels (β₁ = 0) is
        # KH′ (Thm 6.4); SparseHistogram is within TV δ_TV of KH″ (Thm 6.5): Thm 6.1's bounds (+ δ_TV)
        accuracy = (acc.basic_accuracy if mechanism == "basic" else acc.keep_heavy_accuracy)(sampler, beta, NX)
        realised = 2 * sampler.epsilon_count
        if mechanism == "sparse-histogram":
            assert delta is not None  # an (epsilon, delta) mechanism: checked by the callers
            delta_out = 4 * _sh_delta(delta, k)  # (e^ε+1)·δ_TV ≤ 4·δ_TV = δ
    elif mechanism == "pure-sparse":
        b12 = _beta_unit(beta, 6)  # Figure 2: beta1 = beta2 = beta/6, gamma = beta/(8|X|) (E3)
        sampler = counting_sampler(n, eps, Fraction(1, unit_fraction("gamma", beta / (8 * NX))))
        accuracy = acc.pure_sparse_accuracy(sampler, beta, NX, b12, b12)
        realised = float(eps)  # Lemma 3.1 mixing is calibrated to eps, not eps~
        opts = replace(opts, beta1=b12, beta2=b12)
    elif mechanism == "stability":
        assert delta is not None  # an (epsilon, delta) mechanism: checked by the callers
        # the uniform part of FastSample adds up to gamma to the release tail: keep it below delta/4
        gamma = Fraction(1, unit_fraction("gamma", min(beta / (2 * n), delta / 4)))
        sampler = counting_sampler(n, eps, gamma)
        tau = stability_threshold(sampler, delta)
        accuracy = acc.stability_accuracy(sampler, beta, tau)
        realised = 2 * sampler.epsilon_count
        opts = replace(opts, tau=tau)
    else:  # compact, Cor 7.3: eps' = 1/ceil(10/(9 eps)), gamma = beta/(2|X|), q >= ceil(20/eps)
        k1 = -((-10 * k) // 9)
        sampler = counting_sampler(n, Fraction(1, k1), Fraction(1, unit_fraction("gamma", beta / (2 * NX))))
        ell = choose_ell(NX, sampler.d, 20 * k, n)
        shape = CompactHistogram(sampler=sampler, ell=ell, coeffs=(0,) * (n + 1), domain_size=NX)
        accuracy = acc.compact_accuracy(shape, beta)  # depends on the public parameters only
        realised = shape.epsilon
        opts = replace(opts, q_min=20 * k, ell=ell)
    if realised > float(eps) * (1 + 1e-9):  # defensive: every branch above is calibrated to eps
        raise AssertionError(f"internal error: realised epsilon {realised} exceeds the target {float(eps)}")
    opts = replace(opts, sampler=repr(sampler))
    if isinstance(sampler, FastSample):
        opts = replace(opts, gamma=sampler.gamma, t=sampler.t)
    return _Config(sampler, opts, accuracy, realised, delta_out)


def plan_pure(n: int, epsilon: object, beta: object = Fraction(1, 20), domain_size: int | None = None,
              *, delta: object | None = None, max_key_bytes: int = 64,
              mechanisms: Iterable[str] | None = None) -> list[PureCalibration]:
    """What each applicable pure mechanism would guarantee for ``n`` items, without touching data.

    Returns one :class:`PureCalibration` per mechanism (dense ones only for ``|X| <= 2^20``,
    ``"stability"`` only with ``delta``, ``"pure-sparse"`` only for ``|X| >= 4n``), sorted by the
    per-query error threshold. Neighbours: replace-one with ``n`` public (use ``n = max_items`` and
    ``|X| + 1`` for the add/remove padding of :func:`pure_histogram`).
    """
    n = v.integer("n", n, lo=1)
    k = unit_fraction("epsilon", epsilon)
    beta = v.rational("beta", beta)
    if not 0 < beta < 1:
        raise InvalidParameterError(f"beta must be in (0, 1), got {beta}")
    N = StringCodec(max_key_bytes).domain_size if domain_size is None else v.integer("domain_size", domain_size, lo=2)
    delta_q = None if delta is None else v.rational("delta", delta)
    if delta_q is not None and not 0 < delta_q < 1:
        raise InvalidParameterError(f"delta must be in (0, 1), got {delta_q}")
    wanted = MECHANISMS[:5] if mechanisms is None else tuple(v.choice("mechanisms", m, MECHANISMS)
                                                             for m in mechanisms)
    need = {"pure-sparse": 4 * n, "keep-heavy": n + 1, "kh-prime": 2 * n + 1, "kh-double-prime": 4 * n,
            "sparse-histogram": 4 * n}
    approx = ("stability", "sparse-histogram")
    out = []
    for m in wanted:
        if (m in ("basic", "keep-heavy") and N > DENSE_LIMIT) or (m in approx and delta_q is None) \
                or N < need.get(m, 0) or (m in ("kh-prime", "kh-double-prime") and N > EXACT_ORDSTATS_LIMIT):
            continue
        cfg = _configure(m, n, N, k, beta, delta_q if m in approx else None)
        out.append(PureCalibration(mechanism=m, epsilon=1 / k, epsilon_realised=cfg.realised,
                                   delta=float(delta_q) if m in approx and delta_q is not None else 0.0,
                                   beta=float(beta),
                                   neighbours=Neighbours.REPLACE_ONE, n=n, domain_size=N,
                                   accuracy=cfg.accuracy, options=cfg.options))
    return sorted(out, key=lambda c: (c.accuracy.threshold, c.accuracy.per_query))
