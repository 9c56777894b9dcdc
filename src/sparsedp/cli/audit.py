"""``sparsedp audit``: empirically test a mechanism's (ε, δ) claim on its worst-case neighbours."""

from __future__ import annotations

import json
from typing import Optional

import typer

from ..errors import SparsedpError
from ..noise import InsecureSeededRandom
from . import app
from ._errors import AUDIT_FLAGS, fail, interruptible


@app.command()
@interruptible
def audit(
    mechanism: str = typer.Argument(..., help="gshm, laplace, csh, topk-csh, topk-csh-shifted, pure-sparse, "
                                              "compact, basic, stability, pure-blanket, misra-gries, auto, "
                                              "public-gaussian, public-laplace, correlated-gaussian, "
                                              "bounded-density, grouped-correlated-gaussian, keep-heavy, kh-prime, "
                                              "kh-double-prime, sparse-histogram, two-stage, weighted-gaussian, "
                                              "policy-gaussian, vector-sum, vector-mean, alp, "
                                              "optimal-partition, mad or mad2r."),
    epsilon: float = typer.Option(..., "--epsilon", help="Claimed epsilon (> 0)."),
    delta: float = typer.Option(..., "--delta", help="Claimed delta (0 < delta < 1; 0 for the pure mechanisms)."),
    runs: Optional[int] = typer.Option(None, "--runs", help="Releases on each neighbour per scenario (default: "
                                                            "200000 for gshm/laplace, 50-100 for csh/top-k, ...)."),
    law_runs: Optional[int] = typer.Option(None, "--law-runs", help="Releases for the check of the released law "
                                                                    "against the calibrated one (0: skip)."),
    l0: Optional[int] = typer.Option(None, "--l0", help="Contribution bound: l0 (gshm, laplace, misra-gries) or "
                                                        "k (csh, topk-csh); default 2, and 1 for the pure "
                                                        "mechanisms (one key per unit)."),
    sigma_scale: float = typer.Option(1.0, "--sigma-scale",
                                      help="Multiply the noise scale (0.5 builds a deliberately broken "
                                           "mechanism the audit must flag; thresholded, public-key, "
                                           "misra-gries, set-union and two-stage mechanisms; pure-blanket runs "
                                           "at epsilon/S)."),
    margin_shift: int = typer.Option(0, "--margin-shift",
                                     help="Add this integer to the threshold margin (-3 builds a deliberately "
                                          "broken mechanism the audit must flag)."),
    scenario: Optional[list[str]] = typer.Option(None, "--scenario", help="Run only these privacy scenarios "
                                                                          "(repeatable): shared, new, mixed, "
                                                                          "topk-shift, new-1, shift."),
    confidence: float = typer.Option(0.95, "--confidence", help="Confidence of the reported bounds."),
    seed: Optional[int] = typer.Option(None, "--seed", help="Seed a reproducible (insecure) random source; "
                                                             "default: the secure source."),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> None:
    """Release MECHANISM many times through its real release path on worst-case neighbouring inputs; report an
    empirical lower bound on epsilon at the claimed delta (Clopper-Pearson) and a test of the released law
    against the calibrated mechanism's; exit code 1 on a contradiction."""
    from ..audit import audit as run_audit  # imports scipy.stats: not at start-up (``sparsedp --help`` stays light)

    try:
        rng = None if seed is None else InsecureSeededRandom(seed)
        res = run_audit(mechanism, epsilon=epsilon, delta=delta, bound=l0, runs=runs, law_runs=law_runs,
                        sigma_scale=sigma_scale, margin_shift=margin_shift, confidence=confidence,
                        scenarios=scenario or None, rng=rng)
    except SparsedpError as e:
        fail(e, AUDIT_FLAGS)
    typer.echo(json.dumps(res.to_dict(), default=str, indent=2) if as_json else str(res))
    if res.contradicts:
        raise typer.Exit(1)
