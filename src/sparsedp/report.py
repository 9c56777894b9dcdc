"""What a release returns: the table, the public :class:`Report`, and the :class:`Curator`'s private figures.

The split is the rule "nothing non-private reaches what a user would publish": ``Result.table`` and
``Result.report`` depend on the data only through the private release (plus public calibration facts);
``Result.curator`` holds what may NOT be published — rows, units and keys in, what bounding did, timings — and
no key that was not released and no exact count of any key is stored anywhere in a :class:`Result`.
"""

from __future__ import annotations

import functools
import html
import re

from fractions import Fraction
from dataclasses import dataclass, field
from typing import Any, Mapping

from .accounting.calibration import Neighbours
from .accounting.events import ApproxDPEvent, PrivacyEvent
from .accounting.intervals import RowLaws
from .accounting.profiles import PrivacyProfile
from .errors import InvalidParameterError, warn_at_caller
from .mechanisms.base import Disclosure

__all__ = ["Report", "Curator", "Result", "InsecureNoiseWarning", "PUBLIC_FIELDS"]

#: the public fields of a :class:`Report`, in the order of ``to_dict()`` (what a released file's reader and the
#: JSON output see)
PUBLIC_FIELDS = ("mechanism", "options", "reason", "analysis", "epsilon", "delta", "neighbours", "delta_achieved",
                 "delta_parts", "sigma", "noise_std", "threshold", "margin", "pre_threshold", "comparison",
                 "contribution", "value_column", "released_keys", "insecure_float", "notes", "candidates",
                 "version", "profile", "column_errors", "auto_bound")

INSECURE_LINE = ("WARNING: insecure float noise (insecure_float=True): this release is for research "
                 "reproduction only and is NOT a secure differentially private release")


class InsecureNoiseWarning(UserWarning):
    """A release or calibration used float noise (``insecure_float=True``)."""


def warn_insecure() -> None:
    warn_at_caller(INSECURE_LINE, InsecureNoiseWarning)


@dataclass(frozen=True)
class Report:
    """How a release was made — public: it may be published with the table. ``print(result.report)``.

    Built from what the release was charged and what its mechanism discloses, never restated field by field:

    * ``event`` — the charged :class:`~sparsedp.accounting.events.PrivacyEvent` (what the ledger composes): the
      guarantee ``epsilon``, ``delta``, ``neighbours`` and the privacy ``profile`` are read from it
      (``event.describe()`` states its noise parameters in one line);
    * ``disclosure`` — the mechanism's public :class:`~sparsedp.mechanisms.base.Disclosure` of its noise and
      threshold: ``analysis``, ``delta_achieved``, ``delta_parts``, ``sigma``, ``noise_std``, ``threshold``,
      ``margin``, ``pre_threshold``, ``comparison``, ``contribution``, ``value_column``, ``column_errors`` and
      its notes are read from it;
    * the facts of the run: ``mechanism`` and ``options`` (the registered mechanism used), ``reason`` (why),
      ``released_keys`` (rows in the table), ``insecure_float`` (float noise requested by name: not a secure
      release), ``advice`` (notes of the run, such as a risky δ), ``candidates`` (for ``mechanism="auto"``, every
      candidate with its margin), ``version`` and ``auto_bound`` (``max_groups_per_unit="auto"``: the chosen
      bound, the share of ε spent choosing it, the candidates and quantile,
      :meth:`sparsedp.auto_bound.BoundChoice.to_dict`; ``epsilon`` is then the total; None otherwise).

    Attributes read through: a key is released iff its noisy value ``comparison`` ``threshold`` (= pre-threshold +
    margin); ``delta_achieved`` is δ of the noise actually sampled (<= δ); ``column_errors``: for a release with
    SUM/MEAN aggregates, each such output column's expected error in value units (SUM: std of its noise; MEAN:
    worst-case RMSE at the release threshold, :func:`sparsedp.mechanisms.aggregate_noise.expected_errors`);
    ``notes``: the disclosure's public facts (top-k's released t̃, pure mechanisms' error bounds, fallbacks)
    then ``advice``.
    """

    event: PrivacyEvent
    disclosure: Disclosure
    mechanism: str
    options: Mapping[str, Any]
    reason: str
    released_keys: int
    insecure_float: bool = False
    advice: tuple[str, ...] = ()
    candidates: tuple[Mapping[str, Any], ...] = ()
    version: str = ""
    auto_bound: Mapping[str, Any] | None = None

    # -- the guarantee: the charged event --------------------------------------------------------------
    @property
    def epsilon(self) -> float:
        return self.event.epsilon

    @property
    def delta(self) -> float:
        return self.event.delta

    @property
    def neighbours(self) -> Neighbours:
        return self.event.neighbours

    @functools.cached_property
    def profile(self) -> PrivacyProfile | None:
        """The release's privacy profile (:mod:`sparsedp.accounting.profiles`: ``.delta(eps)``,
        ``.epsilon(delta)``, ``.tradeoff_curve(alpha)``): the charged event's, None for an event known only by
        its (ε, δ) (:class:`~sparsedp.accounting.events.ApproxDPEvent`) or without a single-release profile
        object; data-independent, public."""
        return None if isinstance(self.event, ApproxDPEvent) else self.event.profile()

    # -- the mechanism's disclosure --------------------------------------------------------------------
    @property
    def analysis(self) -> str:
        return self.disclosure.analysis

    @property
    def delta_achieved(self) -> float:
        return self.disclosure.delta_achieved

    @property
    def delta_parts(self) -> Mapping[str, float]:
        return self.disclosure.delta_parts

    @property
    def sigma(self) -> float | None:
        return self.disclosure.sigma

    @property
    def noise_std(self) -> float | None:
        return self.disclosure.noise_std

    @property
    def threshold(self) -> float | None:
        return self.disclosure.threshold

    @property
    def margin(self) -> float | None:
        return self.disclosure.margin

    @property
    def pre_threshold(self) -> int | None:
        return self.disclosure.pre_threshold

    @property
    def comparison(self) -> str:
        return self.disclosure.comparison

    @property
    def contribution(self) -> str:
        return self.disclosure.contribution

    @property
    def value_column(self) -> str:
        return self.disclosure.value_column

    @property
    def column_errors(self) -> Mapping[str, float]:
        return self.disclosure.column_errors

    @property
    def notes(self) -> tuple[str, ...]:
        return tuple(self.disclosure.notes) + self.advice

    def guarantee(self) -> str:
        return f"({self.epsilon:g}, {self.delta:g})-DP, {self.neighbours.value}"

    def to_dict(self) -> dict[str, Any]:
        """The public fields (:data:`PUBLIC_FIELDS`) as plain JSON-friendly values."""
        out = {k: getattr(self, k) for k in PUBLIC_FIELDS}
        out["neighbours"] = self.neighbours.value
        out["options"] = {k: _plain(x) for k, x in self.options.items()}
        out["delta_parts"] = dict(self.delta_parts)
        out["notes"] = list(self.notes)
        out["candidates"] = [dict(c) for c in self.candidates]
        out["profile"] = None if self.profile is None else self.profile.to_dict()
        out["column_errors"] = dict(self.column_errors)
        out["auto_bound"] = None if self.auto_bound is None else dict(self.auto_bound)
        return out

    def metadata(self) -> dict[str, Any]:
        """The guarantee a released file carries (Parquet metadata / CSV sidecar)."""
        return {"epsilon": self.epsilon, "delta": self.delta, "neighbours": self.neighbours.value,
                "mechanism": self.mechanism, "options": {k: _plain(x) for k, x in self.options.items()},
                "analysis": self.analysis, "noise_std": self.noise_std, "threshold": self.threshold,
                "comparison": self.comparison, "value_column": self.value_column, "contribution": self.contribution,
                "insecure_float": self.insecure_float, "sparsedp_version": self.version,
                "column_errors": dict(self.column_errors),
                **({"auto_bound": dict(self.auto_bound)} if self.auto_bound is not None else {})}

    def lines(self) -> list[str]:
        lines = [INSECURE_LINE] if self.insecure_float else []
        lines += [
            "sparsedp release",
            f"  guarantee     {self.guarantee()} (delta achieved {self.delta_achieved:.3g})",
            f"  mechanism     {self.mechanism} [{self.analysis}]: {self.reason}",
            f"  contribution  {self.contribution}",
        ]
        if self.auto_bound is not None:
            a = self.auto_bound
            why = (f"{a['quantile']:g}-quantile of keys per unit" if "quantile" in a else
                   f"most expected released keys, selection noise scale {a['noise_scale'] / a['utility_scale']:.3g}"
                   f" keys")
            lines.append(f"  l0 (auto)     {a['bound']}, chosen with {a['share']:.3g} of epsilon "
                         f"({a['epsilon_selection']:.4g}) among {a['candidates']} ({why}); release epsilon "
                         f"{a['epsilon_release']:.4g}")
        if self.noise_std is not None:
            sig = f"sigma = {self.sigma:.4g}; " if self.sigma is not None else ""
            lines.append(f"  noise         {sig}each released {self.value_column} is off by about "
                         f"±{self.noise_std:.3g} (noise std), ±{1.96 * self.noise_std:.3g} at 95%")
        if self.threshold is not None:
            margin = (f" (pre-threshold {self.pre_threshold} + margin {self.margin:.6g})"
                      if self.margin is not None and self.pre_threshold is not None else "")
            lines.append(f"  threshold     released iff noisy {self.value_column} {self.comparison} "
                         f"{self.threshold:.6g}{margin}")
        for name, err in self.column_errors.items():
            lines.append(f"  column        {name}: expected error ±{err:.3g} (value units)")
        if self.delta_parts:
            lines.append("  delta parts   " + ", ".join(f"{k} {val:.3g}" for k, val in self.delta_parts.items()))
        if self.profile is not None:
            pts = ", ".join(f"delta({e:g}) = {float(self.event.delta_at(e)):.3g}"
                            for e in (self.epsilon / 2, 2 * self.epsilon))
            lines.append(f"  profile       {pts} (the same noise at other epsilons)")
        lines += [f"  note          {n}" for n in self.notes]
        lines.append(f"  released      {self.released_keys} keys")
        return lines

    def __str__(self) -> str:
        return "\n".join(self.lines())

    def _repr_html_(self) -> str:
        """Jupyter: the report as a two-column HTML table (the lines of ``str(report)``)."""
        return _lines_table(self.lines())


def _lines_table(lines: list[str]) -> str:
    """``lines`` (a title line, then ``"  label   value"`` lines) as an HTML table: the title as caption, one row
    per line with the label in the first column (a line without a label spans both columns)."""
    caption, rows = "", []
    for line in lines:
        m = re.match(r"^ {2}(\S+(?: \S+)?) {2,}(.*)$", line)
        if m:
            rows.append(f"<tr><th style='text-align:left'>{html.escape(m.group(1))}</th>"
                        f"<td style='text-align:left'>{html.escape(m.group(2))}</td></tr>")
        elif not caption and not line.startswith(" "):
            caption = line
        else:
            rows.append(f"<tr><td colspan='2' style='text-align:left'>{html.escape(line.strip())}</td></tr>")
    cap = f"<caption style='text-align:left'><b>{html.escape(caption)}</b></caption>" if caption else ""
    return f"<table>{cap}{''.join(rows)}</table>"


def _plain(x: Any) -> Any:
    if isinstance(x, Fraction):
        return str(x)
    if isinstance(x, tuple):
        return [_plain(y) for y in x]
    return x


def _known(x: Any) -> str:
    """A statistic, or "?" where the engine did not compute it (Spark skips the extra passes)."""
    return "?" if x is None else str(x)


@dataclass(frozen=True)
class Curator:
    """Figures for the curator only — NOT differentially private, never publish them.

    ``bounding`` (:class:`~sparsedp.core.bounded.BoundingStats`: rows, units and keys in, what the contribution bound
    dropped), ``timings`` (seconds per stage), ``engine``, ``source``, ``output`` (where the table was written)
    and ``warnings`` (data-dependent advice such as :func:`sparsedp.advice.delta_units_note`).
    """

    engine: str
    source: str
    bounding: Any
    timings: Mapping[str, float] = field(default_factory=dict)
    output: str | None = None
    engine_choice: str | None = None
    #: warnings that depend on the data (e.g. δ against the exact number of units): curator only
    warnings: tuple[str, ...] = ()
    #: ``max_groups_per_unit="auto"``: the true counts the choice was made from
    #: (:class:`~sparsedp.core.unit_keys.UnitKeyCounts`: units, and units with at most each candidate's keys)
    auto_bound: Any = None

    def lines(self) -> list[str]:
        b = self.bounding
        why = f" ({self.engine_choice})" if self.engine_choice else ""
        lines = [
            "  -- for the curator only (not private, do not publish) --",
            f"  input         {self.source} via the {self.engine} engine{why}",
            f"  rows          {b.rows_in} in; {_known(b.duplicate_rows_removed)} duplicate (unit, key) rows removed",
            f"  units         {_known(b.units_in)} in; {_known(b.units_over_l0)} had more than l0={b.l0} keys "
            f"({_known(b.pairs_dropped_l0)} (unit, key) pairs dropped)" if b.l0 is not None
            else f"  units         {_known(b.units_in)} in (no l0 bound: de-duplication only)",
            f"  keys          {_known(b.keys_in)} in, {b.keys_bounded} after bounding, {b.keys_out} to the mechanism",
            "  time          " + ", ".join(f"{k} {t:.2f}s" for k, t in self.timings.items()),
        ]
        if self.auto_bound is not None:
            a = self.auto_bound
            if hasattr(a, "curator_line"):
                lines.append(a.curator_line())
            else:
                lines.append("  keys/unit     " + ", ".join(f"<= {c}: {n / a.units:.3f}" for c, n in
                                                           zip(a.candidates, a.at_most)) + " of units (true "
                                                                                            "fractions)")
        if self.output:
            lines.append(f"  output        {self.output}")
        lines += [f"  warning       {w}" for w in self.warnings]
        return lines

    def __str__(self) -> str:
        return "\n".join(self.lines())

    def _repr_html_(self) -> str:
        """Jupyter: the curator's figures as an HTML table, captioned as not private."""
        return _lines_table(["for the curator only (not private, do not publish)"] + self.lines()[1:])


@dataclass(frozen=True)
class Result:
    """A release: ``table`` (keys + the noisy value column, largest first, in the input's frame type),
    ``report`` (public), ``curator`` (NOT private) and, for the compact histogram, ``query(key)``."""

    table: Any
    report: Report
    curator: Curator
    query: Any = None
    #: the public error laws of the rows (:class:`~sparsedp.accounting.intervals.RowLaws`, from the calibration
    #: only), None when the mechanism states none; behind ``release(..., interval=…)`` and
    #: :meth:`release_probability`
    row_laws: RowLaws | None = None

    def release_probability(self, count: int) -> float:
        """The exact probability that a key whose true (bounded) count is ``count`` is released by this
        mechanism at this calibration: ``P[count >= pre and count + Z >= pre + margin]`` (1 for a public key
        list). Public: a function of the calibration only. Raises when the release of a key depends on more than
        its count (top-k: the cut-off) or the noise law is not exact (float noise)."""
        laws = self.row_laws
        if laws is not None and laws.every_key:
            return 1.0
        if laws is None or laws.release is None:
            raise InvalidParameterError(f"{self.report.mechanism}: the release of a key is not a function of its "
                                        f"count alone with an exact noise law here; no release probability")
        return laws.release.probability(count)

    def __repr__(self) -> str:
        return (f"Result({self.report.released_keys} keys released by {self.report.mechanism})\n{self.report}\n"
                f"(curator-only figures, not private: result.curator)")

    def __str__(self) -> str:
        return f"{self.report}\n{self.curator}"

    def _repr_html_(self) -> str:
        """Jupyter: the released table (its own HTML) and the public report; the curator's figures are left
        out, as in ``repr`` (display ``result.curator``)."""
        table = getattr(self.table, "_repr_html_", None)
        head = table() if callable(table) else f"<pre>{html.escape(repr(self.table))}</pre>"
        return (head + self.report._repr_html_() +
                "<p><i>curator-only figures (not private): <code>result.curator</code></i></p>")
