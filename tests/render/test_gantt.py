import re
import struct
import xml.etree.ElementTree as ET
from types import SimpleNamespace

import pytest
from bokeh.models import ColumnDataSource, FactorRange, Span

from pccx_flow.errors import RenderError
from pccx_flow.render import gantt
from pccx_flow.render.gantt import (
    OccupancyRow,
    gantt_data,
    gantt_from_payload,
    gantt_payload,
    trace_critical_path,
    write_gantt,
)
from pccx_flow.render.gantt_bokeh import schedule_figure

from .toys import TOY_LANES, Slot, make_toy_graph, make_toy_schedule

SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture
def toy():
    g = make_toy_graph(3, cycles=True)
    schedule, path = make_toy_schedule(g)
    return g, schedule, path


def _svg_texts(path) -> list[str]:
    return [t.text or "" for t in ET.parse(path).getroot().iter(f"{SVG}text")]


def _model(layout, name):
    return next(m for m in layout.references() if getattr(m, "name", None) == name)


def test_data_has_every_slot_once_in_its_lane_row(toy):
    g, schedule, path = toy
    data = gantt_data(schedule, g, metrics={"critical_path": {"nodes": path, "steps": []}})
    assert sorted(b["node"] for b in data.bars) == sorted(schedule.slots)
    names = [ln["name"] for ln in data.lanes]
    assert names == [lane.name for lane in TOY_LANES]
    for bar in data.bars:
        slot = schedule.slots[bar["node"]]
        assert names[bar["row"]] == slot.lane
        assert (bar["start"], bar["finish"]) == (slot.start, slot.finish)
        assert bar["block"] == g.nodes[bar["node"]]["block"]
        assert bar["op"] == g.nodes[bar["node"]]["op"]
    assert {b["node"] for b in data.bars if b["critical"]} == set(path)
    busy = {ln["name"]: ln["busy"] for ln in data.lanes}
    gemv0 = sum(s.finish - s.start for s in schedule.slots.values() if s.lane == "gemv0")
    assert busy["gemv0"] == pytest.approx(gemv0 / schedule.makespan)


def test_payload_round_trips(toy):
    g, schedule, _ = toy
    occ = [OccupancyRow("L2", [(0, 0), (10, 5)], 8, "KiB")]
    data = gantt_data(schedule, g, occupancy=occ)
    again = gantt_from_payload(gantt_payload(data))
    assert again == data


def test_profile_named_by_the_schedule_is_loaded_for_the_clock(toy):
    g, schedule, _ = toy
    schedule.profile = "v002-as-built"  # a real Schedule names its profile
    data = gantt.gantt_data(schedule, g)
    assert data.core_hz == 100e6 and data.profile == "v002-as-built"
    schedule.profile = "no-such-profile"
    data = gantt.gantt_data(schedule, g)
    assert data.core_hz is None and "µs" not in data.subtitle


def test_layer_boundaries_are_where_each_layer_starts(toy):
    g, schedule, _ = toy
    data = gantt.gantt_data(schedule, g)
    expected = {}
    for node, slot in schedule.slots.items():
        layer = g.nodes[node]["layer"]
        if layer >= 0 and g.in_degree(node):
            expected[layer] = min(expected.get(layer, slot.start), slot.start)
    assert dict(data.layers) == expected and sorted(expected) == [0, 1, 2]
    layout = schedule_figure(data)
    fig = _model(layout, "pccx-planned")
    spans = [s.location for s in fig.center if isinstance(s, Span)]
    assert sorted(spans) == sorted(expected.values())


def test_traced_critical_path_is_a_tight_chain_to_the_makespan(toy):
    g, schedule, toy_path = toy
    path = trace_critical_path(schedule, g)
    slots = schedule.slots
    assert slots[path[-1]].finish == schedule.makespan
    assert slots[path[0]].start == 0
    for a, b in zip(path, path[1:], strict=False):
        assert slots[a].finish == slots[b].start
        assert g.has_edge(a, b) or slots[a].lane == slots[b].lane
    assert path == toy_path  # the toy scheduler records what each node waited for


def test_bokeh_figure_rows_bars_hover_and_critical_strip(toy):
    g, schedule, path = toy
    data = gantt_data(schedule, g, metrics={"critical_path": path})
    layout = schedule_figure(data)
    fig = _model(layout, "pccx-planned")
    assert isinstance(fig.y_range, FactorRange)
    rows = list(reversed(fig.y_range.factors))  # first lane drawn on top
    assert [r.split(" ")[0] for r in rows] == [lane.name for lane in TOY_LANES]
    assert all(re.fullmatch(r"\w+ \d+%", r) for r in rows)
    bars = _model(layout, "pccx-planned-bars")
    assert isinstance(bars, ColumnDataSource)
    assert sorted(bars.data["node"]) == sorted(schedule.slots)
    for node, row, colour in zip(bars.data["node"], bars.data["row"], bars.data["colour"],
                                 strict=True):  # fmt: skip
        assert row.split(" ")[0] == schedule.slots[node].lane
        assert colour == gantt_colour(g.nodes[node]["block"])
    strip = _model(layout, "pccx-critical")
    assert set(strip.data["node"]) == set(path)
    for i, node in enumerate(strip.data["node"]):
        slot = schedule.slots[node]
        assert (strip.data["start"][i], strip.data["finish"][i]) == (slot.start, slot.finish)
    subtitle = _model(layout, "pccx-planned-subtitle").text
    assert "model estimate from profile toy-profile, not measured" in subtitle
    hover = [t for t in fig.tools if t.__class__.__name__ == "HoverTool"][0]
    assert {"node", "layer", "op / kernel", "cycles"} <= {name for name, _ in hover.tooltips}
    assert ("time", "@start{us} (model estimate)") in hover.tooltips  # µs at the toy's 400 MHz
    assert hover.formatters["@start"].args["hz"] == 400e6


def gantt_colour(block):
    from pccx_flow.render import style

    return style.block_colour(block)


def test_html_is_self_contained_bokeh(tmp_path, toy):
    g, schedule, path = toy
    out = write_gantt(schedule, g, tmp_path / "g.html", metrics={"critical_path": path})
    text = out.read_text()
    assert not re.search(r"<script[^>]*\bsrc=", text)
    assert not re.search(r"<link[^>]*\bhref=", text)
    assert "Bokeh" in text and "pccx-planned-bars" in text
    for node in path:
        assert node in text


def test_occupancy_rows_are_drawn_under_the_lanes(tmp_path, toy):
    g, schedule, _ = toy
    occ = OccupancyRow("L2", [(0, 0), (100, 300), (900, 50)], 512, "KiB")
    data = gantt_data(schedule, g, occupancy=[occ])
    layout = schedule_figure(data)
    lanes = _model(layout, "pccx-planned")
    row = _model(layout, "pccx-occupancy-L2")
    assert row.x_range is lanes.x_range  # zoom and pan move both
    assert layout.children.index(row) > layout.children.index(lanes)
    out = write_gantt(schedule, g, tmp_path / "g.svg", occupancy=[occ])
    assert "L2" in " ".join(_svg_texts(out)) and "(KiB)" in " ".join(_svg_texts(out))


def test_svg_has_lane_labels_titles_and_a_bar_group_per_lane(tmp_path, toy):
    g, schedule, path = toy
    out = write_gantt(schedule, g, tmp_path / "g.svg", metrics={"critical_path": path})
    texts = _svg_texts(out)
    for lane in TOY_LANES:
        assert sum(1 for t in texts if re.fullmatch(rf"{lane.name} \d+%", t)) == 1
    joined = " ".join(texts)
    us = schedule.makespan / 400e6 * 1e6
    assert f"makespan {schedule.makespan:,} cycles = {us:,.1f} µs at 400 MHz" in joined
    assert "model estimate from profile toy-profile, not measured" in joined
    assert "cycles (model estimate)" in joined and "µs at 400 MHz (model estimate)" in joined
    assert {"L0", "L1", "L2"} <= set(texts)
    assert "critical path" in texts
    root = ET.parse(out).getroot()
    groups = {el.get("id") for el in root.iter(f"{SVG}g")}
    used = {s.lane for s in schedule.slots.values()}
    assert {f"lane-{ln}" for ln in used} <= groups
    crit_lanes = {schedule.slots[n].lane for n in path}
    assert {f"critical-{ln}" for ln in crit_lanes} <= groups
    again = write_gantt(schedule, g, tmp_path / "h.svg", metrics={"critical_path": path})
    assert again.read_bytes() == out.read_bytes()  # no date, fixed ids: reproducible


def test_png_is_a_png(tmp_path, toy):
    g, schedule, _ = toy
    out = write_gantt(schedule, g, tmp_path / "g.png")
    head = out.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", head[16:24])
    assert width == 1500 and 200 < height < 800


def test_bad_requests_are_render_errors(tmp_path, toy):
    g, schedule, _ = toy
    with pytest.raises(RenderError, match=r"end the file name with \.svg, \.png, \.html"):
        write_gantt(schedule, g, tmp_path / "g.pdf")
    empty = SimpleNamespace(slots={}, lanes=[], policy="x", profile="v002-spec")
    with pytest.raises(RenderError, match="the schedule is empty"):
        write_gantt(empty, g, tmp_path / "g.svg")


def test_real_schedule_of_a_cut_tiny_graph(tmp_path):
    """The scheduler's own Schedule and metrics: title, clock and critical path come through."""
    from pccx_flow.graph.build import build_decode_graph
    from pccx_flow.hardware.profile import load_profile
    from pccx_flow.schedule.metrics import schedule_metrics
    from pccx_flow.schedule.problem import problem_from_graph
    from pccx_flow.schedule.registry import make_policy, run_on_problem

    profile = load_profile("v002-as-built")
    graph = build_decode_graph("tiny", layers=(3, 5), position=7, profile=profile)
    problem = problem_from_graph(graph, profile)
    policy = make_policy("critical-path")
    schedule = run_on_problem(policy, problem, label="critical-path", profile=profile.name)
    metrics = schedule_metrics(schedule, problem, profile)
    data = gantt_data(schedule, graph, metrics=metrics)
    assert data.title == (
        "critical-path schedule of layers 3..4 of one tiny decode step on v002-as-built"
    )
    assert "at 100 MHz (model estimate from profile v002-as-built, not measured)" in data.subtitle
    assert sorted(b["node"] for b in data.bars) == sorted(schedule.slots)
    critical = {b["node"] for b in data.bars if b["critical"]}
    assert critical == set(metrics["critical_path"]["nodes"])
    assert [ln["name"] for ln in data.lanes] == [lane.name for lane in schedule.lanes]
    out = write_gantt(schedule, graph, tmp_path / "g.svg", metrics=metrics)
    assert data.title in " ".join(_svg_texts(out))


def test_a_schedule_of_zero_length_still_draws(tmp_path):
    g = make_toy_graph(1)
    node = next(iter(g))
    schedule = SimpleNamespace(
        slots={node: Slot(node, "gemv0", 0, 0, ())},
        lanes=list(TOY_LANES),
        policy="p",
        profile="toy",
    )
    assert [b["node"] for b in gantt_data(schedule, g).bars] == [node]
    write_gantt(schedule, g, tmp_path / "g.svg")
    assert "makespan 0 cycles" in write_gantt(schedule, g, tmp_path / "g.html").read_text()


def _tiny_schedule(profile_name: str = "v002-as-built"):
    """A real `critical-path` schedule of two `tiny` layers, its graph, metrics and profile."""
    from pccx_flow.graph.build import build_decode_graph
    from pccx_flow.hardware.profile import load_profile
    from pccx_flow.schedule.metrics import schedule_metrics
    from pccx_flow.schedule.problem import problem_from_graph
    from pccx_flow.schedule.registry import make_policy, run_on_problem

    profile = load_profile(profile_name)
    graph = build_decode_graph("tiny", layers=(3, 5), position=7, profile=profile)
    problem = problem_from_graph(graph, profile)
    policy = make_policy("critical-path")
    schedule = run_on_problem(policy, problem, label="critical-path", profile=profile.name)
    return schedule, graph, schedule_metrics(schedule, problem, profile), profile


def _value_at(points, t):
    """The step series' value at cycle `t` (each point holds until the next)."""
    value = 0
    for x, y in points:
        if x > t:
            break
        value = y
    return value


def test_weight_port_row_is_how_many_ports_the_schedule_holds(tmp_path):
    schedule, graph, metrics, profile = _tiny_schedule()
    l2 = OccupancyRow("L2", [(0, 0), (50, 10)], 64, "KiB")
    data = gantt_data(schedule, graph, metrics=metrics, profile=profile, occupancy=[l2])
    assert [r.name for r in data.occupancy] == ["weight_port busy", "L2"]  # pools first
    row = data.occupancy[0]
    assert row.capacity == profile.pools["weight_port"] == 2
    # Independently of the code under test: at each sampled cycle, count the weight-port
    # instances (named weight_port0, weight_port1, ...) held by slots running then.
    slots = list(schedule.slots.values())
    times = sorted({s.start for s in slots} | {s.finish for s in slots}
                   | {(s.start + s.finish) // 2 for s in slots})  # fmt: skip
    peak = 0
    for t in times:
        busy = sum(
            1
            for s in slots
            if s.start <= t < s.finish
            for r in s.resources
            if r.rstrip("0123456789") == "weight_port"
        )
        assert _value_at(row.points, t) == busy, t
        peak = max(peak, busy)
    assert peak == 2  # both ports are used at some point: the row is not flat
    layout = schedule_figure(data)
    lanes = _model(layout, "pccx-planned")
    ports = _model(layout, "pccx-occupancy-weight_port busy")
    assert ports.x_range is lanes.x_range
    assert layout.children.index(ports) < layout.children.index(_model(layout, "pccx-occupancy-L2"))
    assert list(ports.yaxis[0].ticker.ticks) == [0, 1, 2]
    out = write_gantt(schedule, graph, tmp_path / "g.svg", metrics=metrics, profile=profile)
    assert "weight_port" in _svg_texts(out)


def test_pool_rows_follow_the_pools_given_or_the_profile(toy):
    g, schedule, _ = toy
    assert gantt_data(schedule, g).occupancy == []  # the toy profile has no pools
    held = dict(schedule.slots)
    node = next(n for n in held if n.endswith(".t00"))
    slot = held[node]
    schedule.slots = {**held, node: Slot(node, slot.lane, slot.start, slot.finish, ("port0",))}
    [row] = gantt_data(schedule, g, pools={"port": 3}).occupancy
    assert (row.name, row.capacity) == ("port busy", 3.0)
    assert list(row.points) == [(0, 0), (slot.start, 1), (slot.finish, 0)]
    assert gantt_data(schedule, g, pools={}).occupancy == []


def test_dashboard_plan_carries_the_weight_port_row():
    from pccx_flow.dashboard.client import plan_message

    schedule, graph, _, _ = _tiny_schedule("v002-spec")
    plan = plan_message(graph, schedule, 1, 1, 7)  # the schedule names its profile only
    assert [r["name"] for r in plan["gantt"]["occupancy"]] == ["weight_port busy"]


def _lane_row_px(svg_path, lane: str) -> float:
    """The height of `lane`'s row in pixels at the chart's DPI, from its first bar in the SVG
    (bars are 0.72 of a row; SVG lengths are points, 72 per inch)."""
    from pccx_flow.render.gantt_mpl import DPI

    group = next(el for el in ET.parse(svg_path).getroot().iter(f"{SVG}g")
                 if el.get("id") == f"lane-{lane}")  # fmt: skip
    ys = [float(v) for v in re.findall(r"[ML] [-\d.]+ ([-\d.]+)", group[0].get("d"))]
    return (max(ys) - min(ys)) / 0.72 * DPI / 72


def test_svg_rows_keep_their_minimum_height_however_many_rows(tmp_path, toy):
    from pccx_flow.render.gantt_mpl import OCCUPANCY_PX, ROW_PX

    g, schedule, _ = toy
    few = write_gantt(schedule, g, tmp_path / "few.svg")
    extra = [SimpleNamespace(name=f"gemv{i}", lane_class="gemv") for i in range(2, 20)]
    schedule.lanes = [*TOY_LANES[:2], *extra, *TOY_LANES[2:]]  # 24 lanes, host0 last
    occ = [OccupancyRow(f"row{i}", [(0, 0), (100, i)], 4) for i in range(3)]
    many = write_gantt(schedule, g, tmp_path / "many.svg", occupancy=occ)
    for path in (few, many):
        for lane in ("host0", "sfu0", "gemv0"):
            assert ROW_PX - 0.5 <= _lane_row_px(path, lane) <= 1.25 * ROW_PX, (path, lane)

    def height_px(path):
        return float(ET.parse(path).getroot().get("height").removesuffix("pt")) / 72 * 100

    grown = height_px(many) - height_px(few)  # 18 more lanes and 3 occupancy panels
    assert grown >= 18 * ROW_PX + 3 * OCCUPANCY_PX


def test_thin_steps_keep_each_pixels_first_lowest_highest_and_last_point():
    from pccx_flow.render.gantt_mpl import step_outline, thin_steps

    # pixel 0 (cycles 0..9): 6 points; pixel 1: 2 points, kept as they are
    points = [(0, 1), (2, 5), (3, 0), (5, 9), (7, 4), (8, 2), (10, 3), (15, 0)]
    assert thin_steps(points, 10) == [(0, 1), (3, 0), (5, 9), (8, 2), (10, 3), (15, 0)]
    assert thin_steps(points, 1) == points  # one point per pixel: nothing dropped
    assert step_outline([(0, 1), (4, 2), (6, 0)]) == [
        (0, 0.0), (0, 1), (4, 1), (4, 2), (6, 2), (6, 0), (6, 0), (6, 0.0),
    ]  # fmt: skip


def _whole_tiny_step(profile_name: str = "v002-spec"):
    """A `critical-path` schedule of a whole `tiny` step (all its layers and labels)."""
    from pccx_flow.graph.build import build_decode_graph
    from pccx_flow.hardware.profile import load_profile
    from pccx_flow.schedule.metrics import schedule_metrics
    from pccx_flow.schedule.problem import problem_from_graph
    from pccx_flow.schedule.registry import run_policy

    profile = load_profile(profile_name)
    graph = build_decode_graph("tiny", position=7, profile=profile)
    problem = problem_from_graph(graph, profile, memory=True)
    schedule = run_policy(problem, profile, "critical-path")
    return schedule, graph, schedule_metrics(schedule, problem, profile), profile


def test_small_lanes_keep_their_colour_no_black_blobs():
    """Image-level: in the bar band of the sfu, dma and host rows (bars a few pixels wide,
    many on the critical path), almost no drawn pixel is black. With critical bars outlined
    in black, as before, most of them were."""
    import numpy as np

    from pccx_flow.render.gantt_mpl import gantt_figure

    schedule, graph, metrics, profile = _whole_tiny_step()
    data = gantt_data(schedule, graph, metrics=metrics, profile=profile)
    fig = gantt_figure(data)
    fig.canvas.draw()
    img = np.asarray(fig.canvas.buffer_rgba())[:, :, :3].astype(int)
    ax = fig.axes[0]
    rows = len(data.lanes)
    checked = 0
    for row, lane in enumerate(data.lanes):
        if lane["lane_class"] not in ("sfu", "dma", "host"):
            continue
        if not any(b["row"] == row and b["critical"] for b in data.bars):
            continue
        y = rows - 1 - row
        (x0, top), (x1, bottom) = ax.transData.transform([(0, y + 0.3), (data.makespan, y - 0.3)])
        band = img[int(img.shape[0] - top) + 1 : int(img.shape[0] - bottom),
                   int(x0) + 1 : int(x1)]  # fmt: skip
        drawn = band[(band < 235).any(axis=2)]  # not the white or light-grey background
        black = (drawn.max(axis=1) < 60).sum()
        assert len(drawn) > 50, lane  # bars are there
        assert black / len(drawn) < 0.02, (lane["name"], black / len(drawn))
        checked += 1
    import matplotlib.pyplot as plt

    plt.close(fig)
    assert checked >= 2


def test_layer_labels_are_legible_and_never_overlap():
    from pccx_flow.render.gantt_mpl import LAYER_LABEL_PT, gantt_figure

    schedule, graph, metrics, profile = _whole_tiny_step()
    fig = gantt_figure(gantt_data(schedule, graph, metrics=metrics, profile=profile))
    fig.canvas.draw()
    labels = [t for t in fig.axes[0].texts if (t.get_gid() or "").startswith("layer-label-")]
    assert len(labels) >= 3 and LAYER_LABEL_PT >= 8
    legend = fig.legends[0]
    assert legend._ncols == len(legend.legend_handles)  # one row, in the legend's order
    assert legend.get_window_extent().width <= fig.bbox.width
    boxes = sorted((t.get_window_extent() for t in labels), key=lambda b: b.x0)
    for left, right in zip(boxes, boxes[1:], strict=False):
        assert left.x1 + 4 <= right.x0  # a gap between every two labels
    import matplotlib.pyplot as plt

    plt.close(fig)


def test_occupancy_rows_say_their_capacity(tmp_path):
    schedule, graph, metrics, profile = _tiny_schedule()
    l2 = OccupancyRow("L2", [(0, 0), (50, 10)], 1792, "KiB")
    out = write_gantt(schedule, graph, tmp_path / "g.svg", metrics=metrics, profile=profile,
                      occupancy=[l2])  # fmt: skip
    texts = _svg_texts(out)
    assert "capacity 2" in texts  # the weight ports
    assert "capacity 1,792 KiB" in texts and "capacity 1,792" in texts


def test_bokeh_legend_is_in_block_order_like_the_static_one():
    from pccx_flow.graph.nodes import BLOCKS
    from pccx_flow.render import style

    schedule, graph, metrics, profile = _whole_tiny_step()
    layout = schedule_figure(gantt_data(schedule, graph, metrics=metrics, profile=profile))
    items = _model(layout, "pccx-planned").legend[0].items
    titles = [getattr(i.label, "value", None) or i.label["value"] for i in items]
    blocks = [style.block_title(b) for b in BLOCKS]
    assert titles[-1] == "critical path"
    assert titles[:-1] == [t for t in blocks if t in titles]
    assert len(titles) >= 10
