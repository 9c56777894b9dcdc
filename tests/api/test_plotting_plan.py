"""sparsedp.plotting: threshold against k for every mechanism (the papers' figures)."""

from __future__ import annotations

import pytest

from sparsedp.errors import InvalidParameterError
from sparsedp.plotting import plot_plan, threshold_curves


def test_curves_match_plan():
    import sparsedp as sd

    curves = threshold_curves(1.0, 1e-6, ks=(1, 10), noise="discrete")
    assert set(curves) == {"gshm (discrete-exact, discrete)", "laplace (discrete-exact, discrete)",
                           "topk-csh (rounded-exact, discrete)"}
    for label, (xs, ys) in curves.items():
        assert xs == [1, 10]
        mech, analysis = label.split()[0], label.split()[1].strip("(,")
        for k, y in zip(xs, ys):  # the plot draws top-k's shifted variant (analysis rounded-exact)
            cal = next(c for c in sd.plan(1.0, 1e-6, max_groups_per_unit=k, top_k=k)
                       if c.mechanism == mech and c.analysis == analysis and not c.debias)
            assert y == 1 + cal.tau
    # thresholds grow with k; Laplace grows fastest (linear in l0 vs sqrt for the Gaussian ones)
    lap, gshm = curves["laplace (discrete-exact, discrete)"][1], curves["gshm (discrete-exact, discrete)"][1]
    assert lap[1] / lap[0] > gshm[1] / gshm[0] > 1


def test_plot_writes_a_png(tmp_path):
    out = plot_plan(1.0, 1e-6, tmp_path / "plan.png", ks=(1, 4))
    with open(out, "rb") as fh:
        assert fh.read(8) == b"\x89PNG\r\n\x1a\n"
    assert [p.name for p in tmp_path.iterdir()] == ["plan.png"]


def test_plot_file_mode_follows_the_umask(tmp_path):
    """Issue 30 item 12: the PNG was written 0600 (mkstemp's mode); it is 0666 less the umask, like any file."""
    import os
    import stat

    old = os.umask(0o022)
    try:
        out = plot_plan(1.0, 1e-6, tmp_path / "a.png", ks=(1, 4))
        assert stat.S_IMODE(os.stat(out).st_mode) == 0o644
        os.umask(0o077)
        out = plot_plan(1.0, 1e-6, tmp_path / "b.png", ks=(1, 4))
        assert stat.S_IMODE(os.stat(out).st_mode) == 0o600
    finally:
        os.umask(old)


def test_plot_bad_path(tmp_path):
    with pytest.raises(InvalidParameterError, match="must end in"):
        plot_plan(1.0, 1e-6, tmp_path / "plan.txt", ks=(1,))
    with pytest.raises(InvalidParameterError, match="does not exist"):
        plot_plan(1.0, 1e-6, tmp_path / "no" / "plan.png", ks=(1,))


def test_cli_plan_plot(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    import sparsedp.plotting
    from sparsedp.cli import app

    monkeypatch.setattr(sparsedp.plotting, "DEFAULT_KS", (1, 3))
    out = tmp_path / "plan.png"
    r = CliRunner().invoke(app, ["plan", "--epsilon", "1", "--delta", "1e-6", "--max-groups", "10",
                                 "--noise", "discrete", "--plot", str(out)])
    assert r.exit_code == 0, r.output
    assert f"plot written to {out}" in r.stdout
    assert out.read_bytes()[:4] == b"\x89PNG"
    r = CliRunner().invoke(app, ["plan", "--epsilon", "1", "--delta", "1e-6", "--plot", str(tmp_path / "x.txt")])
    assert r.exit_code == 2 and "must end in" in r.stderr


def test_plan_curves_are_the_auto_candidates_as_plan_gives_them():
    import sparsedp as sd
    from sparsedp.plotting import plan_curves

    curves = plan_curves(1.0, 1e-6, (1, 10))
    assert set(curves) == {"gshm", "laplace"}
    for name, (xs, ys) in curves.items():
        for k, y in zip(xs, ys):
            p = sd.plan(1.0, 1e-6, max_groups_per_unit=k)
            assert y == 1 + next(c for m, c in zip(p.mechanisms, p) if m.name == name).tau
    assert set(plan_curves(1.0, 1e-6, (5,), "top_k")) == {"topk-csh"}


@pytest.mark.parametrize("kw,chosen,flag", [({"max_groups_per_unit": 10}, "gshm", "--max-groups 10"),
                                             ({"max_groups_per_unit": 1}, "laplace", "--max-groups 1"),
                                             ({"top_k": 20}, "topk-csh", "--top-k 20")])
def test_plan_figure_marks_the_bound_and_highlights_the_chosen_mechanism(kw, chosen, flag):
    """A figure read in five seconds: few curves, the requested bound a labelled vertical line, the mechanism
    plan() ranks first there drawn thickest with its threshold written, (epsilon, delta) in the title."""
    import sparsedp as sd
    from sparsedp.plotting import plan_figure

    fig = plan_figure(1.0, 1e-6, ks=(1, 3, 30), **kw)
    ax = fig.axes[0]
    b = next(iter(kw.values()))
    curves = [ln for ln in ax.get_lines() if len(ln.get_xdata()) > 1 and ln.get_linestyle() == "-"]
    assert len(curves) <= 3
    vertical = [ln for ln in ax.get_lines() if ln.get_linestyle() == "--"]
    assert len(vertical) == 1 and list(vertical[0].get_xdata()) == [b, b]
    texts = [t.get_text() for t in ax.texts]
    assert any(flag in t for t in texts)
    widest = max(curves, key=lambda ln: ln.get_linewidth())
    assert widest.get_label().startswith(f"{chosen}: used")
    p = sd.plan(1.0, 1e-6, **kw)
    assert p.mechanisms[0].name == chosen
    assert any(t == f"threshold {1 + p[0].tau:,.0f}" for t in texts)
    assert "ε = 1" in ax.get_title() and "δ = 1e-06" in ax.get_title()
    assert b in widest.get_xdata()  # the requested bound is on the curve even if not in ks
