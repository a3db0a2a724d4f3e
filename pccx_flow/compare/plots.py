"""The two pictures of a sweep, drawn with matplotlib into one SVG (or PNG/PDF) file.

- a performance profile (Dolan and Moré, 2002): for each policy, the fraction of instances
  on which its makespan is within a factor tau of the best policy's, against tau. A curve
  that rises earlier and higher is better; its value at tau = 1 is the share of wins.
- scheduling wall time against DAG size, log-log, per policy: how each policy scales.

Decode-step makespans are model estimates on the named profiles, and the title says so.
"""

from __future__ import annotations

from pathlib import Path

from pccx_flow import atomic
from pccx_flow.errors import RenderError

PLOT_FORMATS = ("svg", "png", "pdf")


def write_plots(rows: list[dict], policies: list[str], path: Path, *, title: str = "") -> None:
    """`rows` from `summary.instance_rows`; one figure with the two panels."""
    try:
        import matplotlib
    except ImportError:  # pragma: no cover - a dependency, but say what to do if missing
        raise RenderError("plots need matplotlib: pip install matplotlib") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    matplotlib.rcParams["svg.hashsalt"] = "pccx-flow"  # same data, same file
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.8), constrained_layout=True)
    colors = plt.get_cmap("tab10")
    n_inst = len({r["key"] for r in rows})
    worst = max((r["ratio_to_best"] for r in rows), default=1.0)
    tau_max = min(max(worst, 1.05), 3.0)
    for i, p in enumerate(policies):
        ratios = sorted(r["ratio_to_best"] for r in rows if r["policy"] == p)
        if not ratios:
            continue
        xs, ys = [1.0], [sum(x <= 1.0 for x in ratios) / n_inst]
        for k, x in enumerate(ratios):
            if x > 1.0:
                xs.append(x)
                ys.append((k + 1) / n_inst)
        xs.append(tau_max)
        ys.append(ys[-1])
        ax1.step(xs, ys, where="post", label=p, color=colors(i % 10), linewidth=1.6)
        sizes = [r["nodes"] for r in rows if r["policy"] == p]
        secs = [max(r["seconds"], 1e-6) for r in rows if r["policy"] == p]
        ax2.scatter(sizes, secs, s=10, alpha=0.6, color=colors(i % 10), label=p)
    ax1.set_xlim(1.0, tau_max)
    ax1.set_ylim(0, 1.02)
    ax1.set_xlabel("τ (makespan / best policy's makespan)")
    ax1.set_ylabel(f"fraction of {n_inst} instances within τ of the best")
    ax1.set_title("performance profile")
    ax1.grid(True, alpha=0.3)
    ax1.legend(loc="lower right", fontsize=8)
    ax2.set_xscale("log")
    ax2.set_yscale("log")
    ax2.set_xlabel("DAG size (nodes)")
    ax2.set_ylabel("wall seconds to schedule and validate")
    ax2.set_title("scheduling time vs DAG size")
    ax2.grid(True, which="both", alpha=0.3)
    if title:
        fig.suptitle(title, fontsize=10)
    fmt = path.suffix.lower().lstrip(".")
    with atomic.replacing(path) as tmp:
        fig.savefig(tmp, format=fmt, metadata={"Date": None} if fmt == "svg" else None)
    plt.close(fig)
