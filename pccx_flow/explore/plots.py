"""The pictures of a design sweep, drawn with matplotlib into one SVG (or PNG/PDF) file.

- left: every point's tok/s against its cost (`pccx_flow.explore.params.design_cost`),
  coloured by the bound that binds it, with the Pareto front drawn through and the 5, 10 and
  20 tok/s targets as lines;
- right (when context curves were run): tok/s against the context position per chosen
  design, each marker coloured by its binding bound, so the position where KV traffic
  overtakes the weight stream shows as a change of colour.

Every tok/s is a model estimate on the named profile, and the title says so.
"""

from __future__ import annotations

from pathlib import Path

from pccx_flow.errors import RenderError
from pccx_flow.explore.analysis import TARGETS, ok, pareto_front

PLOT_FORMATS = ("svg", "png", "pdf")


def write_plots(records: list[dict], curves: dict[str, list[dict]], path: Path, *,
                title: str = "") -> None:  # fmt: skip
    """`records` with ``cost``; `curves` maps a design's label to its curve records."""
    try:
        import matplotlib
    except ImportError:  # pragma: no cover - a dependency, but say what to do if missing
        raise RenderError("plots need matplotlib: pip install matplotlib") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    matplotlib.rcParams["svg.hashsalt"] = "pccx-flow"  # same data, same file
    panels = 2 if curves else 1
    fig, axes = plt.subplots(1, panels, figsize=(6.4 * panels, 4.8), constrained_layout=True,
                             squeeze=False)  # fmt: skip
    good = ok(records)
    bounds = sorted(
        {r["binding_bound"] for r in good}
        | {r["binding_bound"] for c in curves.values() for r in ok(c)}
    )
    cmap = plt.get_cmap("tab10")
    color = {b: cmap(i % 10) for i, b in enumerate(bounds)}
    ax = axes[0][0]
    for b in bounds:
        pts = [r for r in good if r["binding_bound"] == b]
        if pts:
            ax.scatter([r["cost"] for r in pts], [r["tok_s"] for r in pts], s=9, alpha=0.55,
                       color=color[b], label=f"bound: {b}")  # fmt: skip
    front = pareto_front(good)
    if front:
        ax.step([r["cost"] for r in front], [r["tok_s"] for r in front], where="post",
                color="black", linewidth=1.2, label="Pareto front")  # fmt: skip
    for t in TARGETS:
        ax.axhline(t, color="grey", linestyle=":", linewidth=0.9)
    ax.set_xlabel("cost units (rough count of hardware changes; docs/explore.md)")
    ax.set_ylabel("tok/s (model estimate)")
    ax.set_yscale("log")
    ax.set_title(f"{len(good)} design points")
    ax.grid(True, alpha=0.3)
    if good:
        ax.legend(loc="lower right", fontsize=7)
    if curves:
        ax2 = axes[0][1]
        for i, (label, recs) in enumerate(curves.items()):
            rows = sorted(ok(recs), key=lambda r: r["point"].get("position", 0))
            if not rows:
                continue
            xs = [r["point"]["position"] + 1 for r in rows]
            ax2.plot(xs, [r["tok_s"] for r in rows], color="grey", linewidth=0.8,
                     linestyle=("-", "--", "-.", ":")[i % 4], label=label)  # fmt: skip
            ax2.scatter(xs, [r["tok_s"] for r in rows], s=22, zorder=3,
                        color=[color[r["binding_bound"]] for r in rows])  # fmt: skip
        ax2.set_xscale("log", base=2)
        ax2.set_yscale("log")
        ax2.set_xlabel("context length (tokens)")
        ax2.set_ylabel("tok/s (model estimate)")
        ax2.set_title("context length; marker colour = binding bound")
        ax2.grid(True, which="both", alpha=0.3)
        from matplotlib.lines import Line2D

        used = sorted({r["binding_bound"] for c in curves.values() for r in ok(c)})
        handles, _ = ax2.get_legend_handles_labels()
        handles += [Line2D([], [], marker="o", linestyle="", color=color[b], label=b)
                    for b in used]  # fmt: skip
        ax2.legend(handles=handles, loc="lower left", fontsize=7)
    if title:
        fig.suptitle(title, fontsize=9)
    fmt = path.suffix.lower().lstrip(".")
    fig.savefig(path, format=fmt, metadata={"Date": None} if fmt == "svg" else None)
    plt.close(fig)
