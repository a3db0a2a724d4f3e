"""The one Bokeh drawing of a planned schedule, shared by `schedule --gantt x.html` and the
planned view of the live dashboard page (`pccx_flow.dashboard`).

`schedule_figure` turns `GanttData` into a Bokeh layout: one row per lane (busy share in the
label), bars coloured by block (`pccx_flow.render.style`), the critical path marked by a
black strip under its bars, dashed lines where each layer starts, hover details, cycles
below and µs at the profile's clock above, the model-estimate label as subtitle, and one
extra row per `OccupancyRow` under the lanes. `write_gantt_html` writes it as one
self-contained page (Bokeh's JavaScript inline, no CDN), which works offline.
"""

from __future__ import annotations

from pathlib import Path

from bokeh.embed import file_html
from bokeh.layouts import column
from bokeh.models import (
    ColumnDataSource,
    CustomJSHover,
    CustomJSTickFormatter,
    Div,
    FactorRange,
    FixedTicker,
    HoverTool,
    Label,
    LinearAxis,
    Range1d,
    Span,
)
from bokeh.plotting import figure
from bokeh.resources import INLINE
from bokeh.transform import dodge

from pccx_flow import atomic
from pccx_flow.render import style
from pccx_flow.render.gantt_data import GanttData, OccupancyRow, lane_label

ROW_PX = 26  # per lane row
FRAME_PX = 170  # the lanes figure's axes, layer labels and the legend under it
OCCUPANCY_PX = 110
LABEL_GAP_PX = 22  # the least room between two layer labels


def bar_columns(data: GanttData) -> dict[str, list]:
    """The bars as Bokeh columns (one entry per scheduled node)."""
    labels = [lane_label(ln) for ln in data.lanes]
    cols: dict[str, list] = {
        k: []
        for k in (
            "node", "lane", "row", "start", "finish", "cycles", "block", "block_title",
            "colour", "layer", "op", "kernel", "critical",
        )
    }  # fmt: skip
    for b in data.bars:
        cols["node"].append(b["node"])
        cols["lane"].append(b["lane"])
        cols["row"].append(labels[b["row"]])
        cols["start"].append(b["start"])
        cols["finish"].append(b["finish"])
        cols["cycles"].append(b["finish"] - b["start"])
        cols["block"].append(b["block"])
        cols["block_title"].append(style.block_title(b["block"]))
        cols["colour"].append(style.block_colour(b["block"]))
        cols["layer"].append(b["layer"])
        cols["op"].append(b.get("op", "?"))
        cols["kernel"].append(b.get("kernel", "?"))
        cols["critical"].append("yes" if b["critical"] else "no")
    return cols


def schedule_figure(data: GanttData, *, width: int = 1300, title: bool = True):
    """A Bokeh layout of the planned schedule in `data` (see the module docstring).

    ``title=False`` leaves out the heading (the dashboard writes its own) but keeps the
    model-estimate subtitle.
    """
    labels = [lane_label(ln) for ln in data.lanes]
    span = max(data.makespan, 1)
    fig = figure(
        name="pccx-planned",
        width=width,
        height=FRAME_PX + ROW_PX * len(labels),
        y_range=FactorRange(*reversed(labels), range_padding=1.0, range_padding_units="absolute"),
        x_range=Range1d(0, span, bounds=(0, span)),
        tools="xpan,xwheel_zoom,reset,save",
        active_scroll="xwheel_zoom",
        toolbar_location="right",
        x_axis_label="cycles (model estimate)",
    )
    fig.ygrid.grid_line_color = None
    fig.xaxis.formatter = CustomJSTickFormatter(code="return tick.toLocaleString('en');")
    if data.core_hz:
        fig.add_layout(
            LinearAxis(
                axis_label=f"µs at {data.core_hz / 1e6:g} MHz (model estimate)",
                formatter=CustomJSTickFormatter(
                    args={"hz": data.core_hz},
                    code="return Number((tick / hz * 1e6).toPrecision(6)).toLocaleString('en');",
                ),
            ),
            "above",
        )
    source = ColumnDataSource(bar_columns(data), name="pccx-planned-bars")
    bars = fig.hbar(
        y="row",
        left="start",
        right="finish",
        height=0.72,
        fill_color="colour",
        line_color=None,
        source=source,
        legend_group="block_title",
    )
    critical = [i for i, c in enumerate(source.data["critical"]) if c == "yes"]
    strip = ColumnDataSource(  # only what the strip draws: the page carries every column once
        {k: [source.data[k][i] for i in critical] for k in ("node", "row", "start", "finish")},
        name="pccx-critical",
    )
    fig.hbar(
        y=dodge("row", -0.36, range=fig.y_range),
        left="start",
        right="finish",
        height=0.14,
        color="#000000",
        source=strip,
        legend_label="critical path",
    )
    tooltips = [
        ("node", "@node"),
        ("lane", "@lane"),
        ("layer", "@layer"),
        ("block", "@block_title"),
        ("op / kernel", "@op / @kernel"),
        ("cycles", "@start{0,0} - @finish{0,0} (@cycles{0,0})"),
        ("critical path", "@critical"),
    ]
    formatters = {}
    if data.core_hz:  # µs computed in the browser: a column of strings would add ~0.5 MB on E4B
        tooltips.insert(-1, ("time", "@start{us} (model estimate)"))
        formatters["@start"] = CustomJSHover(
            args={"hz": data.core_hz, "source": source},
            code="""
            if (format !== "us") { return value.toLocaleString("en"); }
            const i = special_vars.index;
            const us = (c) => (c / hz * 1e6).toLocaleString(
                "en", {minimumFractionDigits: 3, maximumFractionDigits: 3});
            return us(source.data.start[i]) + "-" + us(source.data.finish[i]) + " µs";
            """,
        )
    fig.add_tools(HoverTool(renderers=[bars], tooltips=tooltips, formatters=formatters))
    _layer_lines(fig, data, width)
    _legend_in_block_order(fig.legend[0])
    fig.legend.orientation = "horizontal"
    fig.legend.label_text_font_size = "9pt"
    fig.legend.click_policy = "hide"
    fig.add_layout(fig.legend[0], "below")
    parts = []
    if title:
        parts.append(Div(text=f"<b>{_escape(data.title)}</b>", name="pccx-planned-title"))
    parts.append(Div(text=_escape(data.subtitle), name="pccx-planned-subtitle"))
    parts.append(fig)
    parts.extend(occupancy_figure(row, fig, width) for row in data.occupancy)
    return column(*parts, name="pccx-planned-layout")


def _layer_lines(fig, data: GanttData, width: int) -> None:
    """A dashed line where each layer starts; labels thinned so they do not overlap."""
    per_px = max(data.makespan, 1) / max(width - 120, 1)
    last = -1e18
    for layer, start in data.layers:
        fig.add_layout(
            Span(location=start, dimension="height", line_dash="dashed", line_color="#777777",
                 line_width=0.8)
        )  # fmt: skip
        if (start - last) / per_px >= LABEL_GAP_PX:
            fig.add_layout(
                Label(x=start, y=len(data.lanes) + 0.05, x_offset=2, text=f"L{layer}",
                      text_font_size="8pt", text_color="#555555")
            )  # fmt: skip
            last = start


def occupancy_figure(row: OccupancyRow, lanes_fig, width: int):
    """One occupancy row under the lanes: a step line of ``row.points`` against its capacity,
    sharing the lanes' time axis."""
    xs = [p[0] for p in row.points]
    ys = [p[1] for p in row.points]
    top = max([row.capacity, *ys]) if ys else row.capacity
    fig = figure(
        name=f"pccx-occupancy-{row.name}",
        width=width,
        height=OCCUPANCY_PX,
        x_range=lanes_fig.x_range,
        y_range=Range1d(0, top * 1.05 or 1),
        tools="xpan,xwheel_zoom,reset",
        toolbar_location=None,
        y_axis_label=f"{row.name} ({row.unit})" if row.unit else row.name,
    )
    fig.yaxis.axis_label_text_font_size = "9pt"
    fig.xaxis.formatter = CustomJSTickFormatter(code="return tick.toLocaleString('en');")
    if float(row.capacity).is_integer() and 0 < row.capacity <= 8:  # a pool: whole instances
        fig.yaxis.ticker = FixedTicker(ticks=list(range(int(row.capacity) + 1)))
    # Filled, no outline (as in the static chart): the weight ports of an E4B step change
    # thousands of times, and a step line draws those strokes as dark bands.
    fig.varea_step(x=xs, y1=[0] * len(ys), y2=ys, step_mode="after", fill_color="#4e79a7",
                   fill_alpha=0.8)  # fmt: skip
    fig.add_layout(
        Span(location=row.capacity, dimension="width", line_dash="dashed", line_color="#e15759")
    )
    fig.add_layout(
        Label(x=0, y=row.capacity, text=f"capacity {row.capacity:,g} {row.unit}".rstrip(),
              text_font_size="8pt", y_offset=-14)
    )  # fmt: skip
    return fig


def write_gantt_html(data: GanttData, path: str | Path) -> Path:
    """`schedule_figure` as one standalone HTML page with inline resources (works offline)."""
    path = Path(path)
    layout = schedule_figure(data)
    atomic.write_text(path, file_html(layout, INLINE, title=data.title))
    return path


def _escape(text: str) -> str:
    import html

    return html.escape(text)


def _legend_in_block_order(legend) -> None:
    """Legend entries in the step's block order (Bokeh groups them alphabetically): the
    palette keeps neighbours in that order far apart (ΔE >= 20, `render.style`)."""
    from pccx_flow.graph.nodes import BLOCKS

    rank = {style.block_title(b): k for k, b in enumerate(BLOCKS)}

    def text(item) -> str:
        label = item.label
        return str(getattr(label, "value", None) or (label or {}).get("value", ""))

    legend.items = sorted(legend.items, key=lambda it: rank.get(text(it), len(rank)))
