"""Figures: release threshold against the contribution bound, for every mechanism (like the papers' figures).

Seed 000 (CSH) Fig. 2/4 and seed 001 (exact GSHM) Fig. 1 plot the smallest release threshold against k at a
fixed (ε, δ). :func:`plot_plan` draws the same curves from :func:`sparsedp.accounting.compare`: for each k,
every mechanism valid with ``l0 = k`` (GSHM, Laplace) or ``top_k = k`` (top-k CSH), each of its analyses, with
secure discrete noise and/or the papers' continuous analyses. Needs matplotlib (``pip install 'sparsedp[plot]'``).
"""

from __future__ import annotations

import os
from typing import Sequence


from . import _validate as v
from .errors import InvalidParameterError

DEFAULT_KS = (1, 2, 3, 5, 8, 13, 20, 32, 50, 80, 128, 200, 320, 500, 800, 1000)


def threshold_curves(epsilon: float, delta: float, ks: Sequence[int] = DEFAULT_KS,
                     noise: str = "both") -> dict[str, tuple[list[int], list[float]]]:
    """``{label: (ks, absolute thresholds 1 + τ)}`` for every mechanism/analysis feasible at each k."""
    from .accounting import compare

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


def check_plot_path(path: str | os.PathLike) -> tuple[str, str]:
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


def plot_plan(epsilon: float, delta: float, path: str | os.PathLike, ks: Sequence[int] | None = None,
              noise: str = "both") -> str:
    """Save a log-log plot of threshold against k for every mechanism to ``path`` (png, pdf, svg…).

    ``ks``: the k values (default :data:`DEFAULT_KS`, 1 to 1000).
    Returns the path written. The file is written atomically (temporary file, then rename).
    """
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:  # pragma: no cover - depends on the installation
        raise InvalidParameterError("plotting needs matplotlib: pip install 'sparsedp[plot]'") from None
    path, ext = check_plot_path(path)
    curves = threshold_curves(epsilon, delta, DEFAULT_KS if ks is None else ks, noise)
    fig, ax = plt.subplots(figsize=(7.5, 5))
    for label, (xs, ys) in sorted(curves.items(), key=lambda kv: kv[1][1][-1]):
        style = "-" if "discrete" in label else "--"
        ax.plot(xs, ys, style, marker="o", markersize=3, label=label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("k (max keys per unit l0, or top-k)")
    ax.set_ylabel("release threshold (1 + margin τ)")
    ax.set_title(f"Smallest release threshold at ε = {epsilon:g}, δ = {delta:g}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    import tempfile
    fd, tmp = tempfile.mkstemp(prefix=".plot.", suffix="." + ext, dir=os.path.dirname(path))
    os.close(fd)
    try:
        fig.savefig(tmp, dpi=120)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    finally:
        plt.close(fig)
    return path


__all__ = ["DEFAULT_KS", "plot_plan", "threshold_curves"]
