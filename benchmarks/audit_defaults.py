"""Benchmark: wall time and verdict of ``sparsedp audit`` at its default size for every audit target, calibrated
and with the mechanism's half-noise mutant (``sigma_scale=0.5`` where the target has one).

Run:  python benchmarks/audit_defaults.py [--only gshm,topk-csh] [--seed 1]

Target (issue 32): each audit finishes in <= 60 s at its default size, passes calibrated and fails at σ/2. One
run per row (the audits are long; the time is that of one run on the machine as it is, so state its load).
"""

from __future__ import annotations

import argparse
import time

from sparsedp.audit import audit
from sparsedp.audit.targets import AUDITABLE, SCALABLE
from sparsedp.errors import InvalidParameterError
from sparsedp.noise import InsecureSeededRandom

#: targets with a half-noise mutant (``sigma_scale`` applies; the blanket histogram's runs at 2ε)
MUTABLE = SCALABLE + ("auto",)


def _delta(name: str) -> float:
    try:
        audit(name, epsilon=1.0, delta=1e-3, runs=100, law_runs=0, scenarios=[], rng=InsecureSeededRandom(0))
    except InvalidParameterError as e:
        if "delta" in str(e) and "nothing to run" not in str(e):
            return 0.0
    return 1e-3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    names = [n for n in AUDITABLE if not a.only or n in a.only.split(",")]
    print(f"{'target':<30}{'mode':<12}{'seconds':>9}  verdict")
    for name in names:
        dlt = _delta(name)
        for scale in (1.0, 0.5):
            if scale != 1.0 and name not in MUTABLE:
                print(f"{name:<30}{'sigma/2':<12}{'-':>9}  no half-noise mutant")
                continue
            t = time.perf_counter()
            res = audit(name, epsilon=1.0, delta=dlt, sigma_scale=scale, rng=InsecureSeededRandom(a.seed))
            dt = time.perf_counter() - t
            verdict = "FAILS (contradiction)" if res.contradicts else "passes"
            print(f"{name:<30}{'calibrated' if scale == 1 else 'sigma/2':<12}{dt:>9.1f}  {verdict} "
                  f"(epsilon >= {res.epsilon_lower:.3g}{'' if res.law is None else f', law p = {res.law.p_value:.3g}'})",
                  flush=True)


if __name__ == "__main__":
    main()
