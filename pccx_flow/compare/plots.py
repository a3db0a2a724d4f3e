"""The two pictures of a sweep, drawn with matplotlib into one SVG (or PNG/PDF) file.

- a performance profile (Dolan and Moré, 2002): for each policy, the fraction of instances
  on which its makespan is within a factor tau of the best policy's, against tau. A curve
  that rises earlier and higher is better; its value at tau = 1 is the share of wins.
  Tau is on a log scale (good policies differ by a few per cent, all near tau = 1), each
  curve has its own dash pattern as well as colour (coinciding curves stay visible), and
  the legend ranks the policies by their curve, with the share of wins and of instances
  within 1.1x of the best.
- scheduling wall time against DAG size, log-log, per policy, with its own legend (colour
  and marker per policy): how each policy scales.

Decode-step makespans are model estimates on the named profiles, and the title says so.
"""

from __future__ import annotations

from pathlib import Path

from pccx_flow import atomic
from pccx_flow.errors import RenderError

PLOT_FORMATS = ("svg", "png", "pdf")


# Dash patterns, so curves that coincide (the best policies often do near tau = 1) stay
# apart by pattern where colour alone would hide one under another.
DASHES = ("-", (0, (6, 2)), (0, (2, 1.5)), (0, (6, 2, 1.5, 2)), (0, (1, 1)),
          (0, (8, 2, 1.5, 2, 1.5, 2)), (0, (3, 3)), (0, (10, 3)), (0, (4, 1, 1, 1, 1, 1)),
          (0, (2, 4)))  # fmt: skip
TAU_TICKS = (1.0, 1.02, 1.05, 1.1, 1.2, 1.5, 2.0, 3.0)


def profile_points(ratios: list[float], n_inst: int, tau_max: float):
    """The step curve of one policy: fraction of instances within tau of the best."""
    ratios = sorted(ratios)
    xs, ys = [1.0], [sum(x <= 1.0 for x in ratios) / n_inst]
    for k, x in enumerate(ratios):
        if x > 1.0:
            xs.append(x)
            ys.append((k + 1) / n_inst)
    xs.append(tau_max)
    ys.append(ys[-1])
    return xs, ys


def plot_figure(rows: list[dict], policies: list[str], *, title: str = ""):
    """The two panels as a matplotlib `Figure` (`write_plots` saves it)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FixedLocator, NullFormatter, NullLocator

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 5.2), constrained_layout=True)
    colors = plt.get_cmap("tab10")
    n_inst = len({r["key"] for r in rows})
    worst = max((r["ratio_to_best"] for r in rows), default=1.0)
    tau_max = min(max(worst, 1.05), 3.0)
    curves = []
    for i, p in enumerate(policies):
        ratios = [r["ratio_to_best"] for r in rows if r["policy"] == p]
        if not ratios:
            continue
        xs, ys = profile_points(ratios, n_inst, tau_max)
        wins = ys[0]
        near = sum(x <= 1.1 for x in ratios) / n_inst
        label = f"{p} (best on {wins:.0%}, within 1.1x on {near:.0%})"
        ax1.step(xs, ys, where="post", label=label, color=colors(i % 10),
                 linestyle=DASHES[i % len(DASHES)], linewidth=1.8, gid=f"profile-{p}")  # fmt: skip
        curves.append((-sum(ys) / len(ys), p))
        sizes = [r["nodes"] for r in rows if r["policy"] == p]
        secs = [max(r["seconds"], 1e-6) for r in rows if r["policy"] == p]
        ax2.scatter(sizes, secs, s=12, alpha=0.6, color=colors(i % 10), label=p,
                    marker="osD^v<>ph*"[i % 10])  # fmt: skip
    # log tau: the profiles of good policies differ by a few per cent, all near tau = 1
    ax1.set_xscale("log")
    ax1.set_xlim(1.0, tau_max)
    ax1.xaxis.set_major_locator(FixedLocator([t for t in TAU_TICKS if t <= tau_max]))
    ax1.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    ax1.xaxis.set_minor_locator(NullLocator())
    ax1.xaxis.set_minor_formatter(NullFormatter())
    ax1.set_ylim(0, 1.02)
    ax1.set_xlabel("τ (makespan / best policy's makespan, log scale)")
    ax1.set_ylabel(f"fraction of {n_inst} instances within τ of the best")
    ax1.set_title("performance profile")
    ax1.grid(True, alpha=0.3)
    handles, labels = ax1.get_legend_handles_labels()
    order = [policies.index(p) for _, p in sorted(curves)]  # best profile first
    present = [p for p in policies if any(r["policy"] == p for r in rows)]
    by_policy = dict(zip(present, zip(handles, labels, strict=True), strict=True))
    ranked = [by_policy[policies[k]] for k in order]
    ax1.legend([h for h, _ in ranked], [lb for _, lb in ranked], loc="lower right",
               fontsize=8, handlelength=3.5)  # fmt: skip
    ax2.set_xscale("log")
    ax2.set_yscale("log")
    ax2.set_xlabel("DAG size (nodes)")
    ax2.set_ylabel("wall seconds to schedule and validate")
    ax2.set_title("scheduling time vs DAG size")
    ax2.grid(True, which="both", alpha=0.3)
    ax2.legend(loc="upper left", fontsize=8, markerscale=1.5)
    if title:
        fig.suptitle(title, fontsize=10)
    return fig


def write_plots(rows: list[dict], policies: list[str], path: Path, *, title: str = "") -> None:
    """`rows` from `summary.instance_rows`; one figure with the two panels."""
    try:
        import matplotlib
    except ImportError:  # pragma: no cover - a dependency, but say what to do if missing
        raise RenderError("plots need matplotlib: pip install matplotlib") from None
    import matplotlib.pyplot as plt

    matplotlib.rcParams["svg.hashsalt"] = "pccx-flow"  # same data, same file
    fig = plot_figure(rows, policies, title=title)
    fmt = path.suffix.lower().lstrip(".")
    with atomic.replacing(path) as tmp:
        fig.savefig(tmp, format=fmt, metadata={"Date": None} if fmt == "svg" else None)
    plt.close(fig)
