"""Accounting speed: O(k) accountants and joint calibration at large k.

Prints median wall times (several runs) with data sizes, and ratios against baselines measured in the
same run:

* ``gshm_delta(..., "exact")`` and ``csh_delta(..., "tight")`` at l0 = k = 51914 (targets: <= 10 ms), against
  the plain numpy reference implementations of ``shared/specs/seed-000-csh.md`` §4.8 (no validation, no
  chunking);
* joint calibration (σ, τ) at k = 1e6 (target: <= 1 s) and k = 1e7 (must complete with bounded memory),
  each in a fresh subprocess so its peak RSS is its own; the baseline RSS is a subprocess that only
  imports the library.

Run: ``python benchmarks/accounting.py`` (add ``--quick`` to skip k = 1e7).
"""

from __future__ import annotations

import math
import statistics
import subprocess
import sys
import time

import numpy as np
from scipy.special import log_ndtr, ndtr


def median_time(fn, repeat: int = 7) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


# ---- baselines: the spec's reference implementation (§4.8), straight numpy


def _bw(d, s, e):
    a = d / (2 * s)
    b = e * s / d
    return ndtr(a - b) - np.exp(e + log_ndtr(-a - b))


def ref_gshm_exact(eps, s, t, k):
    lp = log_ndtr(t / s)
    j = np.arange(1, k + 1.0)
    g = (k - j) * lp
    return max(-math.expm1(k * lp), np.max(-np.expm1(g) + np.exp(g) * _bw(np.sqrt(j), s, eps - g)),
               np.max(_bw(np.sqrt(j), s, eps + g)))


def ref_csh_tight(eps, s, t, k):
    x = t / (s * (1 + k ** -0.25))
    lp = log_ndtr(x)
    t1 = -math.expm1((k + 1) * lp)
    t2 = _bw(0.5 * math.sqrt(k + math.sqrt(k)), s, eps)
    j = np.arange(1, k, dtype=float)
    gam = np.minimum(np.sqrt(j), 0.5 * np.sqrt(j + math.sqrt(k)))
    lpsi = (k - j + 1) * lp
    return max(t1, t2, np.max(-np.expm1(lpsi) + _bw(gam, s, eps)), np.max(_bw(gam, s, eps + lpsi)))


CHILD = r"""
import resource, sys, time
k = int(sys.argv[1]); what = sys.argv[2]
from sparsedp import accounting as acc
t0 = time.perf_counter()
if what == "csh-tight":
    s, t = acc.csh_calibrate(0.35, 1e-5, k, "tight"); d = acc.csh_delta(0.35, s, t, k, "tight")
elif what == "csh-add":
    s, t = acc.csh_calibrate(0.35, 1e-5, k, "add"); d = acc.csh_delta(0.35, s, t, k, "add")
elif what == "gshm-exact":
    s, t = acc.gshm_calibrate(0.35, 1e-5, k, "exact"); d = acc.gshm_delta(0.35, s, t, k, "exact")
elif what == "import":
    s = t = d = 0.0
el = time.perf_counter() - t0
print(el, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, s, t, d)
"""


def child(k: int, what: str) -> tuple[float, float, float, float, float]:
    out = subprocess.run([sys.executable, "-c", CHILD, str(k), what], capture_output=True, text=True, check=True)
    return tuple(float(x) for x in out.stdout.split())  # type: ignore[return-value]


def main() -> None:
    from sparsedp import accounting as acc

    quick = "--quick" in sys.argv
    k = 51914
    args = (0.35, 1150.0, 7700.0, k)
    t_ref = median_time(lambda: ref_gshm_exact(*args))
    t_lib = median_time(lambda: acc.gshm_delta(*args, "exact"))
    print(f"gshm_delta exact, l0={k}: {1e3 * t_lib:.2f} ms median (target <= 10 ms); "
          f"spec §4.8 numpy reference {1e3 * t_ref:.2f} ms; ratio {t_lib / t_ref:.2f}")
    t_ref = median_time(lambda: ref_csh_tight(*args))
    t_lib = median_time(lambda: acc.csh_delta(*args, "tight"))
    print(f"csh_delta tight,  k={k}:  {1e3 * t_lib:.2f} ms median (target <= 10 ms); "
          f"spec §4.8 numpy reference {1e3 * t_ref:.2f} ms; ratio {t_lib / t_ref:.2f}")

    base = child(1, "import")
    print(f"baseline subprocess (import only): peak RSS {base[1]:.0f} MiB")
    sizes = [10**6] if quick else [10**6, 10**7]
    for kk in sizes:
        for what in ("csh-tight", "csh-add", "gshm-exact"):
            runs = [child(kk, what) for _ in range(3 if kk <= 10**6 else 1)]
            el = statistics.median(r[0] for r in runs)
            rss = max(r[1] for r in runs)
            _, _, s, t, d = runs[0]
            target = " (target <= 1 s)" if kk == 10**6 else " (must complete, bounded memory)"
            print(f"joint calibration {what:10s} k={kk:.0e}: {el:.3f} s median{target}; peak RSS {rss:.0f} MiB "
                  f"({rss / base[1]:.2f}x import-only); sigma={s:.4f} tau={t:.4f} delta={d:.3e}")


if __name__ == "__main__":
    main()
