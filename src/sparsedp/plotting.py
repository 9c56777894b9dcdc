"""Figures: release threshold against the contribution bound (like the papers' figures, for one user's choice).

Lebeda & Retschmeier (2024) (CSH) Fig. 2/4 and Karrer et al. (2022) (exact GSHM) Fig. 1 plot the smallest release threshold against k at a
fixed (ε, δ). :func:`threshold_curves` gives every mechanism and analysis of
:func:`sparsedp.accounting.compare` (secure discrete and/or the papers' continuous ones, for research);
:func:`plot_plan` (``sparsedp plan --plot``) draws only what a user choosing a bound needs: the secure
mechanisms ``auto`` chooses among (:func:`plan_curves`), the requested bound marked, the mechanism used there
highlighted. Needs matplotlib (``pip install 'sparsedp[plot]'``).
"""

from __future__ import annotations

import os
import tempfile
from typing import Any, Sequence

from . import _validate as v
from .accounting import compare
from .errors import InvalidParameterError
from .pipeline import plan

DEFAULT_KS = (1, 2, 3, 5, 8, 13, 20, 32, 50, 80, 128, 200, 320, 500, 800, 1000)


def threshold_curves(epsilon: float, delta: float, ks: Sequence[int] = DEFAULT_KS,
                     noise: str = "both") -> dict[str, tuple[list[int], list[float]]]:
    """``{label: (ks, absolute thresholds 1 + τ)}`` for every mechanism/analysis feasible at each k."""
    eps, dlt = v.epsilon(epsilon), v.delta(delta)
    noise = v.choice("noise", noise, ("discrete", "continuous", "both"))
    discrete = {"discrete": True, "continuous": False, "both": None}[noise]
    curves: dict[str, tuple[list[int], list[float]]] = {}
    for k in ks:
        k = v.integer("k", k, lo=1)
        for c in compare(epsilon=eps, delta=dlt, l0=k, top_k=k, discrete=discrete):
            label = f"{c.mechanism} ({c.analysis}, {'discrete' if c.discrete else 'continuous'})"
            xs, ys = curves.setdefault(label, ([], []))
            xs.append(k)
            ys.append(1.0 + float(c.tau))
    return curves


def check_plot_path(path: str | os.PathLike[str]) -> tuple[str, str]:
    """``(absolute path, extension)`` of a plot file, or an error naming the fix (checked before any work)."""
    path = os.path.abspath(os.fspath(path))
    ext = os.path.splitext(path)[1].lower().lstrip(".")
    if ext not in ("png", "pdf", "svg", "jpg", "jpeg"):
        raise InvalidParameterError(f"plot file must end in .png, .pdf, .svg or .jpg; got {path!r}")
    folder = os.path.dirname(path)
    if not os.path.isdir(folder):
        raise InvalidParameterError(f"cannot write {path!r}: its directory does not exist")
    if not os.access(folder, os.W_OK):
        raise InvalidParameterError(f"cannot write {path!r}: its directory is not writable")
    return path, ext


def plan_curves(epsilon: float, delta: float, ks: Sequence[int], bound: str = "l0"
                ) -> dict[str, tuple[list[int], list[float]]]:
    """``{mechanism: (ks, absolute thresholds 1 + τ)}`` of the secure (discrete-noise) calibrations
    :func:`sparsedp.plan` lists first, i.e. the mechanisms ``auto`` chooses among: with ``bound="l0"`` every
    auto candidate at ``max_groups_per_unit = k`` (GSHM, Laplace), with ``bound="top_k"`` top-k CSH
    (de-biased counts) at ``top_k = k``."""
    if bound not in ("l0", "top_k"):
        raise InvalidParameterError(f"bound must be 'l0' or 'top_k', got {bound!r}")
    curves: dict[str, tuple[list[int], list[float]]] = {}
    for k in ks:
        k = v.integer("k", k, lo=1)
        p = plan(epsilon, delta, max_groups_per_unit=k) if bound == "l0" else plan(epsilon, delta, top_k=k)
        for m, cal in zip(p.mechanisms, p):
            if bound == "top_k" and not getattr(m, "debias", True):  # the shifted variant is opt-in
                continue
            if getattr(m, "discovery", False):  # key discovery (weights, not counts): not an auto candidate
                continue
            xs, ys = curves.setdefault(m.name, ([], []))
            xs.append(k)
            ys.append(1.0 + float(cal.tau))
    return curves


def plot_plan(epsilon: float, delta: float, path: str | os.PathLike[str], ks: Sequence[int] | None = None,
              max_groups_per_unit: int | None = None, top_k: int | None = None) -> str:
    """Save a figure of the release threshold against the contribution bound, read in five seconds.

    One curve per mechanism ``auto`` chooses among (:func:`plan_curves`: GSHM and Laplace against l0, or top-k
    CSH against k), secure discrete noise only (what a release samples); the requested bound
    (``max_groups_per_unit``, default 1, or ``top_k``) is a vertical line with its label, the mechanism
    :func:`sparsedp.plan` ranks first there (the one ``auto`` uses) is highlighted and its threshold written
    next to its point; the title states (ε, δ). ``ks``: the x values (default :data:`DEFAULT_KS`, 1 to 1000;
    the requested bound is always added). Written atomically (temporary file, then rename); returns the path.
    """
    path, ext = check_plot_path(path)
    fig = plan_figure(epsilon, delta, ks, max_groups_per_unit, top_k)
    fd, tmp = tempfile.mkstemp(prefix=".plot.", suffix="." + ext, dir=os.path.dirname(path))
    os.close(fd)
    try:
        fig.savefig(tmp, dpi=120)
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(tmp, 0o666 & ~mask)  # mkstemp makes it 0600: a figure is readable as any new file (umask)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def plan_figure(epsilon: float, delta: float, ks: Sequence[int] | None = None,
                max_groups_per_unit: int | None = None, top_k: int | None = None) -> Any:
    """The matplotlib ``Figure`` :func:`plot_plan` saves (drawn off-screen, no pyplot state)."""
    try:
        from matplotlib.figure import Figure
    except ImportError:  # pragma: no cover - depends on the installation
        raise InvalidParameterError("plotting needs matplotlib: pip install 'sparsedp[plot]'") from None
    eps, dlt = v.epsilon(epsilon), v.delta(delta)
    if max_groups_per_unit is not None and top_k is not None:
        raise InvalidParameterError("plot one contribution bound: max_groups_per_unit or top_k, not both")
    bound = "top_k" if top_k is not None else "l0"
    b = v.integer("top_k" if top_k is not None else "max_groups_per_unit",
                  top_k if top_k is not None else (max_groups_per_unit or 1), lo=1)
    xs_all = sorted(set(DEFAULT_KS if ks is None else ks) | {b})
    curves = plan_curves(eps, dlt, xs_all, bound)
    at_b = plan(eps, dlt, max_groups_per_unit=b) if bound == "l0" else plan(eps, dlt, top_k=b)
    chosen = at_b.mechanisms[0].name
    name = {"l0": "l0", "top_k": "k"}[bound]

    fig = Figure(figsize=(7.5, 4.8))
    ax = fig.subplots()
    others = iter(["#7f7f7f", "#bcbd22", "#17becf", "#8c564b"])
    for label, (xs, ys) in sorted(curves.items(), key=lambda kv: kv[0] == chosen):  # the chosen one on top
        y_b = ys[xs.index(b)] if b in xs else None
        at = f" ({y_b:,.0f} at {name} = {b})" if y_b is not None else ""
        if label == chosen:
            used = "used by auto" if bound == "l0" else "used with --top-k"
            ax.plot(xs, ys, "-", color="#d62728", lw=3, zorder=3, label=f"{label}: {used}{at}")
            if y_b is not None:
                ax.plot([b], [y_b], "o", color="#d62728", ms=9, zorder=4)
                ax.annotate(f"threshold {y_b:,.0f}", (b, y_b), textcoords="offset points", xytext=(10, -16),
                            color="#d62728", fontsize=10, fontweight="bold")
        else:
            ax.plot(xs, ys, "-", color=next(others), lw=1.8, zorder=2, label=f"{label}{at}")
            if y_b is not None:
                ax.plot([b], [y_b], "o", color="#7f7f7f", ms=5, zorder=2)
    lowest = min(y for _, ys in curves.values() for y in ys)
    ax.set_ylim(bottom=lowest / 1.8)  # room for the threshold label under the lowest point
    ax.axvline(b, color="black", ls="--", lw=1.2, zorder=1)
    ax.annotate(f"your bound: {'--max-groups' if bound == 'l0' else '--top-k'} {b}", (b, 1.0),
                xycoords=("data", "axes fraction"), textcoords="offset points", xytext=(6, -16), fontsize=10)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("max distinct keys per privacy unit (l0, --max-groups)" if bound == "l0"
                  else "keys released (top-k, --top-k)")
    ax.set_ylabel("release threshold (distinct units)" if bound == "l0"
                  else "release threshold above the (k+1)-th count")
    ax.set_title(f"Keys with fewer units than the threshold are not released (lower is better)\n"
                 f"secure noise, ε = {eps:g}, δ = {dlt:g}", fontsize=11)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(loc="lower right", fontsize=9)
    fig.tight_layout()
    return fig


__all__ = ["DEFAULT_KS", "plan_curves", "plan_figure", "plot_plan", "threshold_curves"]
