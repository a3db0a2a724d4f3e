"""The compare plot: coinciding profiles stay visible, both panels have a legend."""

from __future__ import annotations

import itertools

from pccx_flow.compare.plots import plot_figure, profile_points, write_plots


def _rows(policies):
    rows = []
    for k in range(20):
        for i, p in enumerate(policies):
            ratio = 1.0 if i < 5 or k % 3 else 1.0 + 0.05 * i  # five policies always tie
            rows.append({"key": f"i{k}", "policy": p, "ratio_to_best": ratio,
                         "nodes": 10 + k, "seconds": 0.001 * (i + 1)})  # fmt: skip
    return rows


POLICIES = ["heft", "cpop", "dls", "etf", "critical-path", "program-order", "random"]


def test_coinciding_profiles_differ_in_pattern_and_both_panels_have_legends():
    import matplotlib.pyplot as plt

    fig = plot_figure(_rows(POLICIES), POLICIES, title="t")
    profile, scatter = fig.axes[:2]
    lines = [ln for ln in profile.get_lines() if (ln.get_gid() or "").startswith("profile-")]
    assert len(lines) == len(POLICIES)
    # the five tied curves are drawn on top of each other: each pair differs in dashes
    looks = [(ln.get_color(), str(ln.get_linestyle()), str(ln._dash_pattern)) for ln in lines]
    for a, b in itertools.combinations(looks[:5], 2):
        assert a[2] != b[2], (a, b)
    assert profile.get_xscale() == "log"
    legend = [t.get_text() for t in profile.get_legend().get_texts()]
    assert legend[0].startswith(("heft", "cpop", "dls", "etf", "critical-path"))
    assert "best on 100%" in legend[0] and legend[-1].startswith("random")
    assert [t.get_text() for t in scatter.get_legend().get_texts()] == POLICIES
    plt.close(fig)


def test_profile_points_and_the_file(tmp_path):
    xs, ys = profile_points([1.0, 1.0, 1.2, 2.0], 4, 3.0)
    assert (xs, ys) == ([1.0, 1.2, 2.0, 3.0], [0.5, 0.75, 1.0, 1.0])
    out = tmp_path / "p.svg"
    write_plots(_rows(POLICIES[:3]), POLICIES[:3], out, title="x")
    again = tmp_path / "q.svg"
    write_plots(_rows(POLICIES[:3]), POLICIES[:3], again, title="x")
    assert out.read_bytes() == again.read_bytes() and b"heft" in out.read_bytes()
