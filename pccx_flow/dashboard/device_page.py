"""The lanes page's device view: a step's plan beside the device's times, lane by lane.

Each lane gets two rows, ``planned`` (the schedule, model-estimate cycles at the profile's
clock) and ``device`` (what the device reported: modelled cycles on the fake device, kick
to DONE on a board; host steps by the host's clock), on one axis of milliseconds from the
step's start. Under it: both makespans, each lane's busy time on both sides, and the graph
nodes whose device time differs most from their plan. The payload is
`pccx_flow.cluster.device_view.device_view`'s.
"""

from __future__ import annotations

import html

from bokeh.layouts import column
from bokeh.models import ColumnDataSource, Div, FactorRange, HoverTool, Range1d
from bokeh.plotting import figure

ROW_PX = 18
COLOURS = {"planned": "#4c72b0", "device": "#dd8452"}


def _columns(view: dict) -> dict[str, list]:
    cols: dict[str, list] = {k: [] for k in ("row", "start", "stop", "node", "side", "colour",
                                             "ms")}  # fmt: skip
    for side, bars in (("planned", view["planned"]), ("device", view["measured"])):
        for b in bars:
            cols["row"].append((b["lane"], side))
            cols["start"].append(b["start"] * 1e3)
            cols["stop"].append(b["stop"] * 1e3)
            cols["node"].append(b["node"])
            cols["side"].append(side)
            cols["colour"].append(COLOURS[side])
            cols["ms"].append((b["stop"] - b["start"]) * 1e3)
    return cols


def device_figure(view: dict, width: int = 1300):
    """The two-rows-per-lane chart of one device step."""
    lanes = [row["lane"] for row in view["lanes"]]
    factors = [(lane, side) for lane in lanes for side in ("planned", "device")]
    # opened on the plan's span, where its bars are wider than a pixel; pan or zoom out
    # (as far as the device step's end) for the rest
    plan_ms = view["planned_makespan_s"] * 1e3
    end_ms = max(plan_ms, view["measured_makespan_s"] * 1e3)
    fig = figure(
        name="pccx-device",
        title=f"step {view['step']} (position {view['position']}): planned vs device, by lane "
        "(opened on the plan's span; scroll to zoom out, drag to pan)",
        width=width,
        height=80 + ROW_PX * max(len(factors), 1),
        y_range=FactorRange(*reversed(factors)),
        x_range=Range1d(0, 1.1 * plan_ms or 1.0, bounds=(0, 1.1 * end_ms or 1.0)),
        tools="xpan,xwheel_zoom,reset,save",
        active_scroll="xwheel_zoom",
        x_axis_label="milliseconds from the step's start",
    )
    fig.ygrid.grid_line_color = None
    source = ColumnDataSource(_columns(view), name="pccx-device-bars")
    bars = fig.hbar(y="row", left="start", right="stop", height=0.8, fill_color="colour",
                    line_color=None, source=source)  # fmt: skip
    fig.add_tools(HoverTool(renderers=[bars], tooltips=[
        ("node", "@node"), ("side", "@side"), ("duration", "@ms{0.0000} ms")]))  # fmt: skip
    return fig


def summary_html(view: dict) -> str:
    """Makespans, per-lane busy time and the largest deviations, as HTML."""
    plan_ms, dev_ms = view["planned_makespan_s"] * 1e3, view["measured_makespan_s"] * 1e3
    ratio = f" ({dev_ms / plan_ms:.2f}x the plan)" if plan_ms > 0 else ""
    head = (
        f"<b>device times: {html.escape(view['source'])}</b><br>"
        f"makespan planned {plan_ms:.3f} ms (model estimate, profile "
        f"{html.escape(str(view['profile']))}, policy {html.escape(str(view['policy']))}); "
        f"on the device {dev_ms:.3f} ms{ratio}"
    )
    lanes = "".join(
        f"<tr><td>{html.escape(r['lane'])}</td><td>{r['planned_s'] * 1e3:.4f}</td>"
        f"<td>{r['measured_s'] * 1e3:.4f}</td></tr>"
        for r in view["lanes"]
    )
    devs = "".join(
        f"<li><code>{html.escape(d['node'])}</code> ({html.escape(d['lane'])}): planned "
        f"{d['planned_s'] * 1e3:.4f} ms, device {d['measured_s'] * 1e3:.4f} ms</li>"
        for d in view["deviations"]
    )
    return (
        f"{head}"
        '<table class="pccx-device-lanes" style="border-collapse:collapse;font-size:12px" '
        'cellpadding="3" border="1"><tr><th>lane</th><th>planned busy ms</th>'
        f"<th>device busy ms</th></tr>{lanes}</table>"
        f'<b>largest deviations</b><ul class="pccx-device-deviations">{devs}</ul>'
    )


def device_view_layout(view: dict | None, width: int = 1300):
    """The device view of the last device step, or a line saying there is none."""
    if not view:
        return Div(text="device: no step has run on a device (run --backend device)",
                   name="pccx-device-none")  # fmt: skip
    return column(device_figure(view, width), Div(text=summary_html(view),
                                                  name="pccx-device-summary"))  # fmt: skip
