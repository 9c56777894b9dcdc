"""Rounded CSH accounting: the continuous Thm 3.5 / 3.3 accountant at τ = margin − ½ (docs/proofs/rounded-csh.md)."""

from __future__ import annotations

import math

import pytest

from sparsedp.accounting import calibrate, compare
from sparsedp.accounting.laws import CorrelatedGaussian, RoundedCorrelatedGaussian
from sparsedp.accounting.csh import (csh_calibrate, csh_delta, csh_rounded_calibrate, csh_rounded_delta,
                                     csh_rounded_margin, csh_rounded_noise_std)
from sparsedp.errors import InvalidParameterError


@pytest.mark.parametrize("tau", [0.01, 0.5, 0.5000001, 1.0, 7.49999, 479.303, 1e6 + 0.5])
def test_margin_is_the_smallest_half_integer_above_tau(tau):
    m = csh_rounded_margin(tau)
    assert m - 0.5 >= tau and (m - 1) - 0.5 < tau


@pytest.mark.parametrize("mech,model", [("csh", {"k": 1}), ("csh", {"k": 37}), ("topk-csh", {"top_k": 1000})])
@pytest.mark.parametrize("eps,dlt", [(1.0, 1e-6), (0.5, 1e-9), (0.1, 1e-4)])
def test_secure_default_is_rounded_and_accounted_at_margin_minus_half(mech, model, eps, dlt):
    default = calibrate(mech, epsilon=eps, delta=dlt, **model)
    assert default.analysis == "rounded-exact" and isinstance(default.noise, RoundedCorrelatedGaussian)
    assert default.tau_continuous == default.tau - 0.5 and default.comparison == ">="
    cal = calibrate(mech, epsilon=eps, delta=dlt, analysis="tight", **model)  # Thm 3.5 at τ = margin − ½
    assert default.tau <= cal.tau
    k = next(iter(model.values()))
    assert isinstance(cal.noise, RoundedCorrelatedGaussian) and cal.discrete is True and cal.comparison == ">="
    m = int(cal.tau)
    assert cal.tau == m and cal.tau_continuous == m - 0.5 and cal.analysis == "rounded-tight"
    assert cal.delta_achieved == csh_delta(eps, cal.sigma, m - 0.5, k, "tight") <= dlt
    sigma_c, tau_c = csh_calibrate(eps, dlt, k, "tight")
    assert cal.sigma == sigma_c and m == csh_rounded_margin(tau_c) and m <= tau_c + 1.5
    assert cal.noise.shared_sigma == pytest.approx(cal.sigma * k ** -0.25, rel=1e-15)
    assert cal.noise_std == pytest.approx(math.sqrt(cal.sigma ** 2 * (1 + k ** -0.5) + 1 / 12), rel=1e-12)
    # never worse than Algorithm 4's zCDP account (absolute thresholds: rounded uses >=, Alg. 4 uses >)
    alg4 = calibrate(mech, epsilon=eps, delta=dlt, csh_noise="alg4", **model)
    assert alg4.analysis.startswith("discrete-")
    assert 1 + cal.tau <= math.floor(1 + alg4.tau) + 1


def test_top_k_1000_thresholds_meet_the_peer_target():
    """Issue 9: top-k CSH's absolute threshold at k = 1000 <= 0.6x the best peer (845 resp. 2462, keep50 of
    PipelineDP's Gaussian partition selection in docs/benchmarks.md)."""
    for eps, dlt, peer in ((1.0, 1e-6, 845), (0.5, 1e-9, 2462)):
        cal = calibrate("topk-csh", epsilon=eps, delta=dlt, top_k=1000)
        keep50 = 1 + cal.tau  # integer rule c + X >= 1 + margin, X symmetric: P[X >= 0] >= 1/2
        assert keep50 <= 0.6 * peer, (eps, dlt, keep50, peer)
        best = compare(eps, dlt, l0=1000, top_k=1000)[0]
        assert best.mechanism == "topk-csh" and isinstance(best.noise, RoundedCorrelatedGaussian)


def test_debias_uses_theorem_3_3_with_the_extra_coordinate():
    k, eps, dlt = 200, 1.0, 1e-6
    cal = calibrate("topk-csh", epsilon=eps, delta=dlt, top_k=k, debias=True, analysis="add")
    m = int(cal.tau)
    assert cal.analysis == "rounded-add" and cal.debias is True
    assert cal.delta_achieved == csh_delta(eps, cal.sigma, m - 0.5, k, "add", debias=True) <= dlt
    plain = calibrate("topk-csh", epsilon=eps, delta=dlt, top_k=k, analysis="add")
    assert plain.analysis == "rounded-add" and cal.tau > plain.tau


def test_rounded_helpers_and_options():
    sigma, m = csh_rounded_calibrate(1.0, 1e-6, 50)
    assert csh_rounded_delta(1.0, sigma, m, 50) <= 1e-6 < csh_rounded_delta(1.0, sigma, m - 2, 50)
    assert csh_rounded_noise_std(3.0, 4) == pytest.approx(math.sqrt(9 * 1.5 + 1 / 12))
    with pytest.raises(InvalidParameterError, match="csh_noise"):
        calibrate("csh", epsilon=1.0, delta=1e-6, k=5, csh_noise="float")
    with pytest.raises(InvalidParameterError, match="analysis"):  # Algorithm 4 has no continuous analyses
        calibrate("csh", epsilon=1.0, delta=1e-6, k=5, csh_noise="alg4", analysis="add")
    cont = calibrate("csh", epsilon=1.0, delta=1e-6, k=5, discrete=False)
    assert isinstance(cont.noise, CorrelatedGaussian) and cont.analysis == "exact"


@pytest.mark.parametrize("k,eps,dlt,debias", [
    (4, 1.0, 1e-3, False), (4, 1.0, 1e-4, True), (200, 1.0, 1e-6, True), (200, 1.0, 1e-6, False),
    # the de-biased calibration at k = 4, δ = 1e-3 takes ~75x as long as at δ = 1e-4: run with -m slow
    pytest.param(4, 1.0, 1e-3, True, marks=pytest.mark.slow),
])
def test_default_margin_is_the_smallest_the_certified_profile_accepts(k, eps, dlt, debias):
    """The default top-k calibration (issue 22, docs/proofs/csh-exact.md): its δ is the certified profile at the
    integer margin, within the target, and one margin less at the same σ exceeds the target."""
    from sparsedp.accounting.csh_exact import csh_exact_delta

    cal = calibrate("topk-csh", epsilon=eps, delta=dlt, top_k=k, debias=debias)
    m = int(cal.tau)
    assert cal.analysis == "rounded-exact" and cal.debias is debias
    assert cal.delta_achieved == csh_exact_delta(eps, cal.sigma, m, k, topk=True, debias=debias) <= dlt
    assert csh_exact_delta(eps, cal.sigma, m - 1, k, topk=True, debias=debias) > dlt
