"""Throughput of sparsedp's exact discrete samplers against baselines measured in the same run.

For σ ∈ {1, 10, 1e3, 1e5} it prints, for ``sample_discrete_gaussian(σ², size)`` on the secure
default source (AES-256-CTR, see ``sparsedp.noise.source``):

* draws per second (median of ``--repeats`` runs, ``--size`` draws each, default 10^6);
* numpy's float ``Generator.normal`` (PCG64, not secure, not exact) on the same size, and the ratio;
* OpenDP 0.16 ``make_gaussian`` on an integer vector (its exact discrete Gaussian), run in its own
  virtual environment ``.venvs/opendp`` (created by this script with ``python -m venv`` and
  ``pip install opendp==0.16.*`` on first use; ``--opendp-size`` draws, default 10^5, because it is
  ~100× slower), and the ratio;
* random bytes consumed per draw (counted by a wrapping source);

the same for ``sample_discrete_laplace(scale)`` against numpy's float Laplace, and the raw
throughput of the random source next to ``os.urandom``.

Usage: ``python benchmarks/noise.py [--size N] [--repeats R] [--opendp-size M] [--no-opendp]``
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from sparsedp.noise import SecureRandom, default_source, sample_discrete_gaussian, sample_discrete_laplace

SIGMAS = [1, 10, 1_000, 100_000]
VENV = Path(__file__).resolve().parents[1] / ".venvs" / "opendp"

OPENDP_SCRIPT = r"""
import json, statistics, sys, time
import opendp.prelude as dp
dp.enable_features("contrib")
size, repeats, sigmas = int(sys.argv[1]), int(sys.argv[2]), json.loads(sys.argv[3])
space = dp.vector_domain(dp.atom_domain(T=int)), dp.l2_distance(T=int)
data = [0] * size
out = {}
for s in sigmas:
    m = dp.m.make_gaussian(*space, scale=float(s))
    times = []
    for _ in range(repeats):
        t = time.perf_counter(); m(data); times.append(time.perf_counter() - t)
    out[str(s)] = size / statistics.median(times)
print(json.dumps(out))
"""


class CountingSource(SecureRandom):
    """The secure source, counting the bytes it hands out."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def random_bytes(self, n):
        self.count += int(n)
        return super().random_bytes(n)

    def uint64(self, size):
        self.count += 8 * int(size)
        return super().uint64(size)


def median_rate(fn, size: int, repeats: int) -> float:
    fn(min(size, 10_000))  # warm-up (table construction, keying)
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn(size)
        times.append(time.perf_counter() - t)
    return size / statistics.median(times)


def bytes_per_draw(sampler, param, size: int) -> float:
    src = CountingSource()
    sampler(param, size, src)
    return src.count / size


def ensure_opendp_venv() -> Path:
    py = VENV / "bin" / "python"
    if not py.exists():
        print(f"creating {VENV} and installing opendp==0.16.* ...", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        subprocess.run([str(py), "-m", "pip", "install", "-q", "opendp==0.16.*"], check=True)
    return py


def opendp_rates(size: int, repeats: int) -> dict[str, float] | None:
    try:
        py = ensure_opendp_venv()
        res = subprocess.run([str(py), "-c", OPENDP_SCRIPT, str(size), str(repeats), json.dumps(SIGMAS)],
                             check=True, capture_output=True, text=True)
        return json.loads(res.stdout.strip().splitlines()[-1])
    except (subprocess.CalledProcessError, OSError, ValueError) as e:  # report, keep the rest
        print(f"OpenDP baseline unavailable: {e}", file=sys.stderr)
        return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--opendp-size", type=int, default=100_000)
    ap.add_argument("--no-opendp", action="store_true")
    args = ap.parse_args()
    size, reps = args.size, args.repeats
    gen = np.random.default_rng()
    src = default_source()

    print(f"random source: {size:,} draws per run, median of {reps} runs, one core")
    mb = 64 * 2**20
    rate_src = median_rate(lambda n: src.uint64(n // 8), mb, reps) / 2**20
    rate_os = median_rate(lambda n: os.urandom(n), mb, reps) / 2**20
    print(f"  SecureRandom (AES-256-CTR): {rate_src:8.0f} MiB/s   os.urandom: {rate_os:6.0f} MiB/s   "
          f"ratio {rate_src / rate_os:5.1f}x\n")

    odp = None if args.no_opendp else opendp_rates(args.opendp_size, max(1, reps - 2))

    print("exact discrete Gaussian N_Z(0, s^2), s = sigma")
    hdr = (f"{'sigma':>8} {'sparsedp M/s':>13} {'numpy float M/s':>16} {'vs numpy':>9} "
           f"{'OpenDP M/s':>11} {'vs OpenDP':>10} {'bytes/draw':>11}")
    print(hdr)
    for s in SIGMAS:
        ours = median_rate(lambda n, s=s: sample_discrete_gaussian(s * s, n), size, reps)
        base = median_rate(lambda n, s=s: gen.normal(0.0, s, n), size, reps)
        bpd = bytes_per_draw(sample_discrete_gaussian, s * s, size)
        o = odp.get(str(s)) if odp else None
        o_txt = f"{o / 1e6:11.3f} {ours / o:9.0f}x" if o else f"{'n/a':>11} {'n/a':>10}"
        print(f"{s:>8g} {ours / 1e6:13.2f} {base / 1e6:16.1f} {ours / base:8.2f}x {o_txt} {bpd:11.1f}")
    if odp:
        print(f"  (OpenDP 0.16 make_gaussian on a {args.opendp_size:,}-element integer vector, venv {VENV})")

    print("\nexact discrete Laplace, P[x] ~ exp(-|x|/scale)")
    print(f"{'scale':>8} {'sparsedp M/s':>13} {'numpy float M/s':>16} {'vs numpy':>9} {'bytes/draw':>11}")
    for s in SIGMAS:
        ours = median_rate(lambda n, s=s: sample_discrete_laplace(s, n), size, reps)
        base = median_rate(lambda n, s=s: gen.laplace(0.0, s, n), size, reps)
        bpd = bytes_per_draw(sample_discrete_laplace, s, size)
        print(f"{s:>8g} {ours / 1e6:13.2f} {base / 1e6:16.1f} {ours / base:8.2f}x {bpd:11.1f}")


if __name__ == "__main__":
    main()
