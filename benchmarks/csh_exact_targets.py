"""Issue-22 top-k CSH threshold targets: the certified profile (accounting.csh_exact) against Thm 3.5/3.3.

Run: ``PYTHONPATH=src python benchmarks/csh_exact_targets.py``. Absolute threshold = 1 + margin (secure
rounded noise, rule ``count + X >= 1 + margin``). Prints today's calibration (``calibrate("topk-csh")``),
the certified one, its δ, the time it took, and whether the issue's target is met.
"""

from __future__ import annotations

import time

from sparsedp.accounting import calibrate
from sparsedp.accounting.csh_exact import csh_exact_calibrate, csh_exact_delta

TARGETS = [(0.349, 1e-5, 51914, False, 7000), (1.0, 1e-6, 1000, False, 450), (1.0, 1e-6, 1000, True, 480)]


def main() -> None:
    for eps, dlt, k, debias, target in TARGETS:
        today = calibrate("topk-csh", epsilon=eps, delta=dlt, top_k=k, **({"debias": True} if debias else {}))
        t0 = time.perf_counter()
        sigma, margin = csh_exact_calibrate(eps, dlt, k, topk=True, debias=debias)
        dt = time.perf_counter() - t0
        d = csh_exact_delta(eps, sigma, margin, k, topk=True, debias=debias)
        print(f"(eps={eps}, delta={dlt:g}, k={k}{', debias' if debias else ''}): today threshold "
              f"{1 + int(today.tau)} | certified sigma={sigma:.4f} margin={margin} threshold={1 + margin} "
              f"delta={d:.9g} [{dt:.2f}s] target <= {target}: {'met' if 1 + margin <= target else 'NOT MET'}")


if __name__ == "__main__":
    main()
