"""The static Gantt chart (``.svg`` / ``.png``), drawn by matplotlib from `GanttData`.

The same picture as the Bokeh page (`pccx_flow.render.gantt_bokeh`) minus the interaction:
one row per lane with its busy share, bars coloured by block (no outline, so a bar a few
pixels wide keeps its colour), critical bars marked by a black strip under them, dashed
lines where layers start with labels that never collide, cycles below and µs above,
the model-estimate subtitle, a block legend, and one extra panel per occupancy row (the
weight ports first), each labelled with its capacity. The height follows the rows: each
lane gets at least `ROW_PX` and each occupancy panel `OCCUPANCY_PX`, so short lanes (sfu,
host) stay readable rows. SVG
keeps text as text (searchable, and testable) and is written without a date, so
regenerating an unchanged chart gives the same file.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display: files only

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Patch, Polygon  # noqa: E402

from pccx_flow import atomic  # noqa: E402
from pccx_flow.graph.nodes import BLOCKS  # noqa: E402
from pccx_flow.render import style  # noqa: E402
from pccx_flow.render.gantt_data import GanttData, lane_label  # noqa: E402

WIDTH_IN = 15.0
DPI = 100
ROW_PX = 32  # the least height of a lane's row, in pixels at DPI (points x 100/72 in SVG)
OCCUPANCY_PX = 90  # the least height of an occupancy row's panel
LAYER_LABEL_PT = 9  # layer labels ("L12") above the lanes: legible, not 7 pt
LAYER_LABEL_PX = 40  # at least this many pixels from one layer label to the next


def _amount(value: float) -> str:
    """A capacity as people write it: ``2``, ``1,792``, ``2.5``."""
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.3g}"


def blocks_present(data: GanttData) -> list[str]:
    """The blocks that have bars, in the step's block order (for the legend)."""
    present = {b["block"] for b in data.bars}
    return [b for b in BLOCKS if b in present] + sorted(present - set(BLOCKS))


def merge_thin_bars(bars: list[dict], cycles_per_px: float) -> list[dict]:
    """Touching bars narrower than 1.5 px with the same block and criticality, as one bar.

    They cannot be told apart at the picture's width; merging them keeps a whole E4B step's
    SVG near a megabyte instead of several.
    """
    out: list[dict] = []
    thin = 1.5 * cycles_per_px
    for bar in sorted(bars, key=lambda b: (b["start"], b["finish"])):
        if out:
            last = out[-1]
            if (
                bar["finish"] - bar["start"] < thin
                and last["finish"] - last["start"] < thin
                and (last["block"], last["critical"]) == (bar["block"], bar["critical"])
                and bar["start"] - last["finish"] <= 0.5 * cycles_per_px
            ):
                out[-1] = {**last, "finish": max(last["finish"], bar["finish"])}
                continue
        out.append(bar)
    return out


def thin_steps(points, cycles_per_px: float) -> list[tuple[float, float]]:
    """A step series with at most four points per pixel column: the first, the lowest, the
    highest and the last (in time order), so every peak and dip still shows.

    An E4B step's L2 series changes tens of thousands of times; drawn in full its filled
    area alone made the SVG larger than all the lanes together.
    """
    out: list[tuple[float, float]] = []
    column: list[tuple[float, float]] = []
    last_px = None
    for point in [*points, (float("inf"), 0.0)]:
        px = point[0] // cycles_per_px if point[0] != float("inf") else None
        if column and px != last_px:
            if len(column) <= 4:
                out.extend(column)
            else:
                keep = {0, len(column) - 1}
                keep.add(min(range(len(column)), key=lambda i: column[i][1]))
                keep.add(max(range(len(column)), key=lambda i: column[i][1]))
                out.extend(column[i] for i in sorted(keep))
            column = []
        column.append(point)
        last_px = px
    return out


def step_outline(points) -> list[tuple[float, float]]:
    """The outline of the area under a step series (each value holds until the next point),
    from the baseline up and back: one vertex per corner."""
    if not points:
        return []
    outline = [(points[0][0], 0.0)]
    for (x, y), (nx, _) in zip(points, [*points[1:], (points[-1][0], 0.0)], strict=True):
        outline.extend([(x, y), (nx, y)])
    outline.append((points[-1][0], 0.0))
    return outline


def gantt_figure(data: GanttData):
    """The chart as a matplotlib `Figure`, tall enough for every row (`fit_rows`)."""
    rows = len(data.lanes)
    n_occ = len(data.occupancy)
    needed = [max(rows, 1) * ROW_PX] + [OCCUPANCY_PX] * n_occ
    fig, axes = plt.subplots(
        1 + n_occ, 1, figsize=(WIDTH_IN, (sum(needed) + 200) / DPI), dpi=DPI, sharex=True,
        squeeze=False, gridspec_kw={"height_ratios": needed}, layout="constrained",
    )  # fmt: skip
    ax = axes[0][0]
    span = max(data.makespan, 1)
    by_row: dict[int, list[dict]] = {}
    for bar in data.bars:
        by_row.setdefault(bar["row"], []).append(bar)
    min_w = span * 2e-4
    for row, bars in by_row.items():
        y = rows - 1 - row  # first lane on top
        bars = merge_thin_bars(bars, span / (WIDTH_IN * DPI * 0.85))
        ax.broken_barh(
            [(b["start"], max(b["finish"] - b["start"], min_w)) for b in bars],
            (y - 0.36, 0.72),
            facecolors=[style.block_colour(b["block"]) for b in bars],
            edgecolors="none",
            linewidths=0,
            gid=f"lane-{data.lanes[row]['name']}",
        )
        # The critical path is a strip under the bars, never an outline: a black outline
        # drowned the colour of bars a few pixels wide (sfu, dma, host) in black.
        crit = [b for b in bars if b["critical"]]
        if crit:
            ax.broken_barh(
                [(b["start"], max(b["finish"] - b["start"], min_w)) for b in crit],
                (y - 0.5, 0.1),
                facecolors="#000000",
                gid=f"critical-{data.lanes[row]['name']}",
            )
    ax.set_yticks(range(rows), [lane_label(ln) for ln in reversed(data.lanes)], fontsize=9)
    ax.set_ylim(-0.7, rows - 0.3)
    ax.set_xlim(0, span)
    for i in range(rows):
        if i % 2:
            ax.axhspan(i - 0.5, i + 0.5, color="#f2f2f2", zorder=0)
    # a label every few layers, spaced by its own width so none collides with the next
    per_label = span / (WIDTH_IN * DPI * 0.85) * LAYER_LABEL_PX
    last = -1e18
    for layer, start in data.layers:
        ax.axvline(start, color="#777777", linestyle=(0, (4, 3)), linewidth=0.7, zorder=1)
        if start - last >= per_label:
            ax.text(start, rows - 0.3, f"L{layer}", fontsize=LAYER_LABEL_PT, color="#333333",
                    va="bottom", ha="left", gid=f"layer-label-{layer}")  # fmt: skip
            last = start
    if data.core_hz:
        hz = data.core_hz
        top = ax.secondary_xaxis("top", functions=(lambda c: c / hz * 1e6, lambda u: u * 1e-6 * hz))
        top.xaxis.set_major_formatter(plt.FuncFormatter(lambda v, _: f"{v:,.6g}"))
        top.set_xlabel(f"µs at {hz / 1e6:g} MHz (model estimate)", fontsize=9)
    ax.ticklabel_format(axis="x", style="plain")
    ax.xaxis.set_major_formatter(plt.FuncFormatter(lambda v, _: f"{v:,.0f}"))
    for occ_ax, occ in zip((a[0] for a in axes[1:]), data.occupancy, strict=True):
        ys = [p[1] for p in occ.points]
        # Filled, no outline: a series that changes thousands of times (the weight ports
        # over an E4B step) would otherwise draw its up-and-down strokes as dark bands.
        outline = step_outline(thin_steps(occ.points, span / (WIDTH_IN * DPI * 0.85)))
        if outline:
            occ_ax.add_patch(Polygon(outline, closed=True, facecolor="#4e79a7", alpha=0.8,
                                     linewidth=0, gid=f"occupancy-{occ.name}"))  # fmt: skip
        occ_ax.axhline(occ.capacity, color="#e15759", linestyle="--", linewidth=0.8)
        occ_ax.text(span, occ.capacity, f"capacity {_amount(occ.capacity)} {occ.unit}".rstrip(),
                    fontsize=8, color="#b0282a", ha="right", va="top",
                    gid=f"capacity-{occ.name}")  # fmt: skip
        label = f"{occ.name}\n({occ.unit})" if occ.unit else occ.name.replace(" ", "\n", 1)
        label += f"\ncapacity {_amount(occ.capacity)}"
        occ_ax.set_ylabel(label, fontsize=9, rotation=0, ha="right", va="center")
        occ_ax.set_ylim(0, max([occ.capacity, *ys]) * 1.08 or 1)
    axes[-1][0].set_xlabel("cycles (model estimate)", fontsize=9)
    handles = [Patch(color=style.block_colour(b), label=style.block_title(b))
               for b in blocks_present(data)]  # fmt: skip
    handles.append(Patch(color="#000000", label="critical path"))
    # One row in the step's block order: neighbours in the legend are neighbours in the
    # palette's rules (ΔE ≥ 20), which a wrapped, column-filled grid would not keep.
    fig.legend(handles=handles, loc="outside lower center", ncol=len(handles), fontsize=8,
               frameon=False, handlelength=1.4, handletextpad=0.5, columnspacing=1.1,
               )  # fmt: skip
    fig.suptitle(f"{data.title}\n{data.subtitle}", fontsize=10, x=0.01, ha="left")
    fit_rows(fig, [a[0] for a in axes], needed)
    return fig


def fit_rows(fig, axes, needed: list[float]) -> None:
    """Make the figure just tall enough that each panel gets at least its `needed` pixels.

    The panels share the height left over by the titles, tick labels and legend in
    proportion to `needed` (the height ratios), so measuring that overhead once after a
    layout and setting the height to overhead + sum(needed) gives every lane its `ROW_PX`
    however many lanes, occupancy rows and legend lines there are (a short lane such as
    ``host`` is then a readable row, not a hairline). A second pass absorbs the small
    change of the layout's padding with the height.
    """
    for _ in range(2):
        fig.draw_without_rendering()
        heights = [ax.get_window_extent().height for ax in axes]
        if all(h >= n - 0.5 for h, n in zip(heights, needed, strict=True)):
            return
        overhead = fig.get_figheight() * fig.dpi - sum(heights)
        fig.set_figheight((overhead + sum(needed) + 1) / fig.dpi)


def write_gantt_static(data: GanttData, path: str | Path) -> Path:
    """Write the chart as ``.svg`` or ``.png`` (chosen by the suffix)."""
    path = Path(path)
    fig = gantt_figure(data)
    try:
        meta = {"Date": None} if path.suffix == ".svg" else None
        fmt = path.suffix.lstrip(".").lower()
        rc = {"svg.fonttype": "none", "svg.hashsalt": "pccx-gantt"}
        with plt.rc_context(rc), atomic.replacing(path) as tmp:
            fig.savefig(tmp, dpi=DPI, metadata=meta, format=fmt)
    finally:
        plt.close(fig)
    return path
