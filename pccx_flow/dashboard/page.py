"""The Bokeh side of the lanes page: the live document and the builders it shares.

`measured_figure` draws finished tasks as bars, one row per pccx lane, coloured by block
(`pccx_flow.render.style`, the Gantt chart's colours), seconds since the first task on the x
axis, hover with node id, layer, op, kernel and duration; every bar is at least
`MIN_BAR_PX` wide on screen (CPU tasks are far narrower than a pixel of a step), the chart
keeps the last `KEEP_ROWS` tasks and says so, and a dashed line marks where each step
starts. `shares_html` puts each lane's planned busy share (model estimate) beside the
measured one of the last step. The planned schedule is drawn by
the Gantt chart's own builder (`pccx_flow.render.gantt_bokeh.schedule_figure`) on its own
axis (model-estimate cycles) under it; a step run on a device adds the plan beside the
device's times (`pccx_flow.dashboard.device_page`). `lanes_doc` is the live document: it polls the
scheduler's `LaneRecorder` every `POLL_MS` and streams new rows in. `lanes_html` is the same
picture, fixed, for the run report.
"""

from __future__ import annotations

import html

from bokeh.layouts import column
from bokeh.models import ColumnDataSource, Div, FactorRange, HoverTool
from bokeh.plotting import figure

from pccx_flow.dashboard import ROUTE
from pccx_flow.dashboard.device_page import device_view_layout
from pccx_flow.render import style
from pccx_flow.render.gantt import gantt_from_payload

POLL_MS = 500
ROW_PX = 28
KEEP_ROWS = 20_000  # the measured chart keeps the last this many tasks (a few steps)
MIN_BAR_PX = 3  # every measured bar at least this wide on screen: most CPU tasks take
#                 0.1-1 ms of a 10-20 s step, far under a pixel
CLASS_ORDER = ("gemv", "gemm", "sfu", "dma", "ctrl", "host")
COLUMNS = ("lane", "start", "stop", "mid", "colour", "node", "layer", "block", "op", "kernel",
           "ms", "step")  # fmt: skip


def lane_order(lanes, plan: dict | None = None) -> list[str]:
    """Lane rows in a stable order: the plan's lanes first, then by lane class and name."""
    planned = [ln["name"] for ln in ((plan or {}).get("gantt") or {}).get("lanes", [])]
    rest = sorted(set(lanes) - set(planned), key=_class_rank)
    return planned + rest


def _class_rank(lane: str) -> tuple:
    cls = lane.rstrip("0123456789")
    rank = CLASS_ORDER.index(cls) if cls in CLASS_ORDER else len(CLASS_ORDER)
    return (rank, lane)


def row_columns(rows: list[dict], t0: float) -> dict[str, list]:
    """Task rows as Bokeh columns, times in seconds since `t0`."""
    cols: dict[str, list] = {c: [] for c in COLUMNS}
    for r in rows:
        cols["lane"].append(r["lane"])
        cols["start"].append(r["start"] - t0)
        cols["stop"].append(r["stop"] - t0)
        cols["mid"].append((r["start"] + r["stop"]) / 2 - t0)
        cols["step"].append(r.get("step") or 0)
        cols["colour"].append(style.block_colour(r.get("block")))
        cols["node"].append(r.get("node") or r.get("key"))
        cols["layer"].append(-1 if r.get("layer") is None else r["layer"])
        cols["block"].append(r.get("block") or "?")
        cols["op"].append(r.get("op") or "?")
        cols["kernel"].append(r.get("kernel") or "?")
        cols["ms"].append((r["stop"] - r["start"]) * 1e3)
    return cols


def measured_figure(lanes: list[str], width: int = 1300):
    """An empty measured task stream with one row per lane; returns (figure, source)."""
    source = ColumnDataSource({c: [] for c in COLUMNS}, name="pccx-measured-tasks")
    fig = figure(
        name="pccx-measured",
        title=f"measured on this CPU: the last {KEEP_ROWS:,} tasks by pccx lane (wall seconds"
        f" since the first task; every bar at least {MIN_BAR_PX} px wide; dashed: a step"
        " starts)",
        width=width,
        height=70 + ROW_PX * max(len(lanes), 1),
        y_range=FactorRange(*reversed(lanes)),
        tools="xpan,xwheel_zoom,reset,save",
        active_scroll="xwheel_zoom",
        x_axis_label="seconds (CPU wall time, not an NPU estimate)",
    )
    fig.ygrid.grid_line_color = None
    bars = fig.hbar(
        y="lane", left="start", right="stop", height=0.7, fill_color="colour", line_color=None,
        source=source,
    )  # fmt: skip
    # the same tasks again, MIN_BAR_PX wide on screen whatever the zoom: a 0.3 ms task in a
    # 15 s window is a visible tick, not a white gap (a long bar covers its own tick)
    ticks = fig.rect(
        x="mid", y="lane", width=MIN_BAR_PX, width_units="screen", height=0.7,
        fill_color="colour", line_color=None, source=source, name="pccx-measured-ticks",
    )  # fmt: skip
    marks = ColumnDataSource({"x": [], "step": []}, name="pccx-step-marks")
    fig.vspan(x="x", source=marks, line_color="#444444", line_dash="dashed", line_width=1)
    fig.add_tools(
        HoverTool(
            renderers=[bars, ticks],
            tooltips=[
                ("node", "@node"),
                ("lane", "@lane"),
                ("layer", "@layer"),
                ("block", "@block"),
                ("op / kernel", "@op / @kernel"),
                ("duration", "@ms{0.000} ms"),
                ("step", "@step"),
            ],
        )
    )
    return fig, source, marks


def step_marks(cols: dict[str, list]) -> dict[str, list]:
    """Where each step's first task starts, from task columns: the chart's step markers."""
    first: dict[int, float] = {}
    for step, start in zip(cols["step"], cols["start"], strict=True):
        if step and (step not in first or start < first[step]):
            first[step] = start
    steps = sorted(first)
    return {"x": [first[k] for k in steps], "step": steps}


def shares_html(rows: list[dict], plan: dict | None, lanes: list[str]) -> str:
    """Per lane, the planned busy share of the step (model estimate) beside the measured
    one of the last step seen (CPU seconds of its tasks over that step's wall span).

    The two are not the same quantity (the plan is the NPU model, the measurement is this
    CPU running the same nodes), but side by side they show where the work lands."""
    planned = {ln["name"]: ln["busy"] for ln in ((plan or {}).get("gantt") or {}).get("lanes", [])}
    last = max((r.get("step") or 0 for r in rows), default=0)
    step_rows = [r for r in rows if (r.get("step") or 0) == last]
    span = (max(r["stop"] for r in step_rows) - min(r["start"] for r in step_rows)
            if step_rows else 0.0)  # fmt: skip
    busy: dict[str, float] = {}
    for r in step_rows:
        busy[r["lane"]] = busy.get(r["lane"], 0.0) + r["stop"] - r["start"]
    body = []
    for lane in lanes:
        if lane not in planned and lane not in busy:
            continue
        p = f"{planned[lane]:.1%}" if lane in planned else "-"
        m = f"{busy.get(lane, 0.0) / span:.1%}" if span > 0 else "-"
        body.append(f"<tr><td>{html.escape(lane)}</td><td>{p}</td><td>{m}</td></tr>")
    head = (
        "<tr><th>lane</th><th>planned busy (model estimate)</th>"
        f"<th>measured busy, step {last} (CPU wall time)</th></tr>"
    )
    return (
        '<table class="pccx-shares" style="border-collapse:collapse;font-size:12px" '
        f'cellpadding="3" border="1">{head}{"".join(body)}</table>'
    )


def counters_html(snapshot: dict, lanes: list[str]) -> str:
    """Per-lane counters as an HTML table."""
    cols = ("lane", "submitted", "assigned", "running", "done", "erred", "busy s")
    head = "".join(f"<th>{h}</th>" for h in cols)
    # assigned: sent to a worker (queued there or running); running: what the workers say
    # runs (`pccx_flow.dashboard.running`), "-" when no worker reports it
    reported = snapshot.get("executing_reported", False)
    body = []
    for lane in lanes:
        c = snapshot["lanes"].get(lane)
        if c is None:
            continue
        running = f"{c.get('executing', 0):.0f}" if reported else "-"
        body.append(
            f"<tr><td>{html.escape(lane)}</td><td>{c['submitted']:.0f}</td>"
            f"<td>{c['running']:.0f}</td><td>{running}</td>"
            f"<td>{c['done']:.0f}</td><td>{c['erred']:.0f}</td>"
            f"<td>{c['busy_s']:.3f}</td></tr>"
        )
    return (
        '<table class="pccx-counters" style="border-collapse:collapse;font-size:12px" '
        'cellpadding="3" border="1">'
        f"<tr>{head}</tr>{''.join(body)}</table>"
    )


def progress_html(progress: dict) -> str:
    step = progress.get("step")
    steps = progress.get("steps")
    step_text = f"step {step} of {steps}" if steps else f"step {step or 0}"
    return (
        f"<b>{step_text}</b> &middot; layers done {progress['layers_done']} of "
        f"{progress['n_layers']} &middot; tasks done {progress['tasks_done']} of "
        f"{progress['tasks']}"
    )


def errors_html(errors: list[dict]) -> str:
    if not errors:
        return "erred tasks: none"
    items = "".join(
        f"<li><code>{html.escape(str(e['node']))}</code> ({html.escape(e['lane'])}): "
        f"{html.escape(e['error'])}</li>"
        for e in errors[-50:]
    )
    return f'<b>erred tasks ({len(errors)})</b><ul class="pccx-errors">{items}</ul>'


def planned_view(plan: dict | None, width: int = 1300):
    """The planned schedule of the announced step, or a line saying why there is none."""
    from pccx_flow.render.gantt_bokeh import schedule_figure

    if not plan:
        return Div(text="planned schedule: no step announced yet", name="pccx-planned-none")
    if not plan.get("gantt"):
        return Div(
            text="planned schedule: none (the run has no --policy; rows are lane classes)",
            name="pccx-planned-none",
        )
    data = gantt_from_payload(plan["gantt"])
    head = Div(
        text=f"<b>planned: {html.escape(data.title)} (step {plan.get('step')}, "
        f"position {plan.get('position')})</b>"
    )
    return column(head, schedule_figure(data, width=width, title=False))


def lanes_doc(scheduler, extra, doc) -> None:
    """The live page at `ROUTE` (a `distributed.dashboard` application function)."""
    from pccx_flow.dashboard.lanes import recorder_of

    recorder = recorder_of(scheduler)
    doc.title = "pccx lanes"
    if recorder is None:
        doc.add_root(Div(text="the pccx lane recorder is not installed on this scheduler"))
        return
    header = Div(text="", name="pccx-progress")
    counters = Div(text="", name="pccx-counters")
    errors = Div(text="", name="pccx-errors")
    lanes = lane_order(recorder.counts, recorder.plan)
    fig, source, marks = measured_figure(lanes)
    shares = Div(text="", name="pccx-shares")
    planned = column(planned_view(recorder.plan), name="pccx-planned-holder")
    device = column(device_view_layout(recorder.device), name="pccx-device-holder")
    state = {"cursor": recorder.dropped, "t0": None, "plan": recorder.plan_version,
             "device": recorder.device_version}  # fmt: skip
    status = extra.get("prefix", "/") + "status"
    title = Div(
        text=f'<h3 style="margin:4px 0">pccx lanes</h3><a href="{status}">Dask status page</a>'
        " &middot; bars: blocks, same colours as the Gantt charts"
    )

    def update() -> None:
        snap = recorder.snapshot()
        header.text = progress_html(snap["progress"])
        now_lanes = lane_order(recorder.counts, recorder.plan)
        if now_lanes != lanes:
            lanes[:] = now_lanes
            fig.y_range.factors = list(reversed(now_lanes))
            fig.height = 70 + ROW_PX * max(len(now_lanes), 1)
        counters.text = counters_html(snap, lanes)
        errors.text = errors_html(snap["errors"])
        start = max(state["cursor"] - recorder.dropped, 0)
        new = recorder.rows[start:]
        if new:
            if state["t0"] is None:
                state["t0"] = new[0]["start"]
            source.stream(row_columns(new, state["t0"]), rollover=KEEP_ROWS)
            state["cursor"] = recorder.dropped + len(recorder.rows)
            marks.data = step_marks(source.data)
            shares.text = shares_html(recorder.rows[-KEEP_ROWS:], recorder.plan, lanes)
        if recorder.plan_version != state["plan"]:
            state["plan"] = recorder.plan_version
            planned.children = [planned_view(recorder.plan)]
        if recorder.device_version != state["device"]:
            state["device"] = recorder.device_version
            device.children = [device_view_layout(recorder.device)]

    update()
    doc.add_root(
        column(title, header, fig, counters, shares, errors, device, planned, name="pccx-lanes")
    )
    doc.add_periodic_callback(update, POLL_MS)


def lanes_html(snapshot: dict) -> str:
    """The lanes page with the data of `snapshot` (`LaneRecorder.snapshot(rows=True)`), as
    one standalone HTML page with inline resources."""
    from bokeh.embed import file_html
    from bokeh.resources import INLINE

    rows = snapshot.get("rows") or []
    lanes = lane_order(snapshot["lanes"], snapshot.get("plan"))
    fig, source, marks = measured_figure(lanes)
    rows = rows[-KEEP_ROWS:]
    if rows:
        source.data = row_columns(rows, min(r["start"] for r in rows))
        marks.data = step_marks(source.data)
    layout = column(
        Div(text=f'<h3 style="margin:4px 0">pccx lanes of the run ({ROUTE})</h3>'),
        Div(text=progress_html(snapshot["progress"])),
        fig,
        Div(text=counters_html(snapshot, lanes)),
        Div(text=shares_html(rows, snapshot.get("plan"), lanes), name="pccx-shares"),
        Div(text=errors_html(snapshot["errors"])),
        device_view_layout(snapshot.get("device")),
        planned_view(snapshot.get("plan")),
    )
    return file_html(layout, INLINE, title="pccx lanes")
