import json
import re
import shutil
import struct
import subprocess
import xml.etree.ElementTree as ET
from types import SimpleNamespace

import pytest

from pccx_flow.errors import RenderError
from pccx_flow.render import gantt
from pccx_flow.render.gantt import nice_ticks, trace_critical_path, write_gantt

from .toys import TOY_LANES, Slot, make_toy_graph, make_toy_schedule

SVG = "{http://www.w3.org/2000/svg}"
needs_neato = pytest.mark.skipif(shutil.which("neato") is None, reason="Graphviz not installed")
needs_node = pytest.mark.skipif(shutil.which("node") is None, reason="node.js not installed")


@pytest.fixture
def toy():
    g = make_toy_graph(3, cycles=True)
    schedule, path = make_toy_schedule(g)
    return g, schedule, path


def _bars(root):
    return [r for r in root.iter(f"{SVG}rect") if "bar" in (r.get("class") or "")]


def _bar_nodes(rect):
    """The schedule nodes one bar stands for: its data-nodes, else the id its title starts with."""
    if rect.get("data-nodes"):
        return rect.get("data-nodes").split(" ")
    return [rect.find(f"{SVG}title").text.split(" | ")[0]]


def test_svg_has_one_row_per_lane_and_draws_every_slot_once(tmp_path, toy):
    g, schedule, path = toy
    metrics = {"critical_path": {"nodes": path, "steps": []}}
    out = write_gantt(schedule, g, tmp_path / "g.svg", metrics=metrics)
    root = ET.parse(out).getroot()
    texts = [t.text for t in root.iter(f"{SVG}text")]
    for lane in TOY_LANES:
        assert sum(1 for t in texts if re.fullmatch(rf"{lane.name} \d+%", t or "")) == 1
    drawn = [(node, rect) for rect in _bars(root) for node in _bar_nodes(rect)]
    assert sorted(n for n, _ in drawn) == sorted(schedule.slots)
    # Bars sit in their lane's row: one y per lane, a different y for each lane.
    row_y = {}
    for node, rect in drawn:
        row_y.setdefault(schedule.slots[node].lane, set()).add(float(rect.get("y")))
    assert all(len(y) == 1 for y in row_y.values())
    assert len({y for ys in row_y.values() for y in ys}) == len(row_y)
    critical = {n for n, rect in drawn if "critical" in rect.get("class")}
    assert critical == set(path)


def test_touching_sub_pixel_bars_merge_and_wide_ones_do_not(tmp_path, toy):
    g, schedule, _ = toy
    root = ET.parse(write_gantt(schedule, g, tmp_path / "g.svg")).getroot()
    px_per_cycle = (gantt.WIDTH - gantt.LEFT - gantt.RIGHT) / schedule.makespan
    merged = [r for r in _bars(root) if r.get("data-nodes")]
    assert merged, "the toy's 2-cycle MEMSETs at cycles 0, 2, 4 are sub-pixel and touching"
    for rect in _bars(root):
        nodes = _bar_nodes(rect)
        slots = [schedule.slots[n] for n in nodes]
        assert len({s.lane for s in slots}) == 1
        assert len({g.nodes[n]["block"] for n in nodes}) == 1
        if len(nodes) > 1:
            assert all((s.finish - s.start) * px_per_cycle < 1.5 for s in slots)
            assert rect.find(f"{SVG}title").text.startswith(f"{len(nodes)} nodes ")
        start = min(s.start for s in slots)
        assert float(rect.get("x")) == pytest.approx(gantt.LEFT + start * px_per_cycle, abs=0.01)


def test_rows_are_in_lane_order(tmp_path, toy):
    g, schedule, _ = toy
    root = ET.parse(write_gantt(schedule, g, tmp_path / "g.svg")).getroot()
    label_y = {}
    for t in root.iter(f"{SVG}text"):
        m = re.fullmatch(r"(\w+) \d+%", t.text or "")
        if m:
            label_y[m.group(1)] = float(t.get("y"))
    assert list(label_y) == [lane.name for lane in TOY_LANES]
    assert sorted(label_y.values()) == list(label_y.values())


def test_title_names_the_profile_and_says_model_estimate(tmp_path, toy):
    g, schedule, _ = toy
    root = ET.parse(write_gantt(schedule, g, tmp_path / "g.svg")).getroot()
    texts = " ".join(t.text or "" for t in root.iter(f"{SVG}text"))
    us = schedule.makespan / 400e6 * 1e6
    assert f"makespan {schedule.makespan:,} cycles = {us:,.1f} µs at 400 MHz" in texts
    assert "model estimate from profile toy-profile, not measured" in texts
    assert "cycles (model estimate)" in texts and "µs" in texts


def test_profile_named_by_the_schedule_is_loaded_for_the_clock(tmp_path, toy):
    g, schedule, _ = toy
    schedule.profile = "v002-as-built"  # a real Schedule names its profile
    data = gantt.gantt_data(schedule, g)
    assert data.core_hz == 100e6 and data.profile == "v002-as-built"
    schedule.profile = "no-such-profile"
    data = gantt.gantt_data(schedule, g)
    assert data.core_hz is None and "µs" not in data.subtitle


def test_layer_boundaries_are_drawn_where_each_layer_starts(tmp_path, toy):
    g, schedule, _ = toy
    data = gantt.gantt_data(schedule, g)
    expected = {}
    for node, slot in schedule.slots.items():
        layer = g.nodes[node]["layer"]
        if layer >= 0 and g.in_degree(node):
            expected[layer] = min(expected.get(layer, slot.start), slot.start)
    assert dict(data.layers) == expected and sorted(expected) == [0, 1, 2]
    root = ET.parse(write_gantt(schedule, g, tmp_path / "g.svg")).getroot()
    dashed = [ln for ln in root.iter(f"{SVG}line") if ln.get("stroke-dasharray")]
    assert len(dashed) == 3
    labels = {t.text for t in root.iter(f"{SVG}text")}
    assert {"L0", "L1", "L2"} <= labels


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


def test_nice_ticks_are_round_and_cover_the_range():
    assert nice_ticks(1000, 5) == [0, 200, 400, 600, 800, 1000]
    assert nice_ticks(13_560, 8) == [i * 2000 for i in range(7)]
    assert nice_ticks(0) == [0.0]


@needs_neato
def test_png_is_the_same_picture_laid_out_by_neato(tmp_path, toy):
    g, schedule, _ = toy
    out = write_gantt(schedule, g, tmp_path / "g.png")
    head = out.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", head[16:24])
    _, expected_h = gantt.layout(gantt.gantt_data(schedule, g))
    assert abs(width - gantt.WIDTH) <= 2 and abs(height - expected_h) <= 2


def test_html_is_self_contained(tmp_path, toy):
    g, schedule, path = toy
    out = write_gantt(schedule, g, tmp_path / "g.html", metrics={"critical_path": path})
    text = out.read_text()
    assert not re.search(r"<script[^>]*\bsrc=", text)
    assert not re.search(r"<link[^>]*\bhref=", text)
    assert "http://" not in text and "https://" not in text
    data = json.loads(re.search(r'id="gantt-data">(.*?)</script>', text, re.S).group(1))
    assert {b[4] for b in data["bars"]} == set(schedule.slots)
    assert {b[4] for b in data["bars"] if b[5]} == set(path)
    assert [ln["name"] for ln in data["lanes"]] == [ln.name for ln in TOY_LANES]


HARNESS = r"""
const fs = require("fs");
const html = fs.readFileSync(process.argv[2], "utf8");
const want = JSON.parse(process.argv[3]);
const data = html.match(/id="gantt-data">([\s\S]*?)<\/script>/)[1];
const script = html.match(/<script>([\s\S]*?)<\/script>/)[1];
const handlers = {}, elements = {}, calls = {fillRect: 0}, texts = [];
const ctx = new Proxy({}, {
  get: (t, k) => (k in t ? t[k] : (...a) => {
    if (k in calls) calls[k]++;
    if (k === "fillText") texts.push(String(a[0]));
  }),
  set: (t, k, v) => { t[k] = v; return true; },
});
function el(id) {
  if (!elements[id]) elements[id] = {
    id, textContent: "", style: {}, innerHTML: "", children: [],
    appendChild(c) { this.children.push(c); },
    addEventListener(ev, f) { handlers[id + ":" + ev] = f; },
    getContext() { return ctx; },
    getBoundingClientRect() { return {left: 0, top: 0}; },
  };
  return elements[id];
}
el("gantt-data").textContent = data;
let made = 0;
global.document = {getElementById: el, createElement: () => el("made" + made++),
                   createTextNode: t => ({t})};
global.window = {innerWidth: 1230, devicePixelRatio: 1,
                 addEventListener(ev, f) { handlers["window:" + ev] = f; }};
eval(script);
const D = JSON.parse(data);
const W = 1200, LEFT = 120, RIGHT = 20, TOP = 56, ROW = 24, GAP = 6;
const t = (want.start + want.finish) / 2;
const ev = {clientX: LEFT + t / D.makespan * (W - LEFT - RIGHT),
            clientY: TOP + want.row * (ROW + GAP) + ROW / 2, preventDefault() {}};
const drawnFull = calls.fillRect;
handlers["chart:mousemove"](ev);
const before = el("tip").textContent;
for (let i = 0; i < 6; i++) handlers["chart:wheel"](Object.assign({deltaY: -1}, ev));
handlers["chart:mousemove"](ev);
const after = el("tip").textContent;
console.log(JSON.stringify({before, after, drawnFull, display: el("tip").style.display,
                            legend: el("legend").children.length, texts}));
"""


@needs_node
def test_html_viewer_script_runs_and_hover_survives_zoom(tmp_path, toy):
    """Run the page's script in node with a stub DOM: hover a bar, zoom at it, hover again."""
    g, schedule, path = toy
    out = write_gantt(schedule, g, tmp_path / "g.html", metrics={"critical_path": path})
    node = next(n for n in path if g.nodes[n]["op"] == "GEMV")
    slot = schedule.slots[node]
    row = [ln.name for ln in TOY_LANES].index(slot.lane)
    harness = tmp_path / "harness.js"
    harness.write_text(HARNESS)
    want = json.dumps({"row": row, "start": slot.start, "finish": slot.finish})
    proc = subprocess.run(
        ["node", str(harness), str(out), want], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    for tip in (result["before"], result["after"]):
        assert tip.startswith(node + "\n")
        assert f"lane  {slot.lane}" in tip
        assert f"start {slot.start:,}" in tip and f"finish {slot.finish:,}" in tip
        assert "on the critical path" in tip
    assert result["display"] == "block"
    assert result["drawnFull"] >= len(schedule.slots)  # every bar drawn at full zoom
    blocks = {g.nodes[n]["block"] for n in schedule.slots}
    assert result["legend"] == len(blocks) + 1  # blocks present + critical path
    # Both time axes: cycles below the rows, µs at the toy's 400 MHz above them.
    assert "cycles (model estimate)" in result["texts"] and "µs" in result["texts"]
    assert "L0" in result["texts"]
    for lane in TOY_LANES:
        assert sum(1 for t in result["texts"] if re.fullmatch(rf"{lane.name} \d+%", t)) >= 1


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
    out = write_gantt(schedule, graph, tmp_path / "g.svg", metrics=metrics)
    root = ET.parse(out).getroot()
    title = root.find(f"{SVG}title").text
    assert title == "critical-path schedule of layers 3..4 of one tiny decode step on v002-as-built"
    texts = " ".join(t.text or "" for t in root.iter(f"{SVG}text"))
    assert "at 100 MHz (model estimate from profile v002-as-built, not measured)" in texts
    drawn = [(n, r) for r in _bars(root) for n in _bar_nodes(r)]
    assert sorted(n for n, _ in drawn) == sorted(schedule.slots)
    critical = {n for n, r in drawn if "critical" in r.get("class")}
    assert critical == set(metrics["critical_path"]["nodes"])
    lanes = [
        t.text.split(" ")[0]
        for t in root.iter(f"{SVG}text")
        if re.fullmatch(r"\w+ \d+%", t.text or "")
    ]
    assert lanes == [lane.name for lane in schedule.lanes]


def test_a_schedule_of_zero_length_still_draws(tmp_path):
    g = make_toy_graph(1)
    node = next(iter(g))
    schedule = SimpleNamespace(
        slots={node: Slot(node, "gemv0", 0, 0, ())},
        lanes=list(TOY_LANES),
        policy="p",
        profile="toy",
    )
    root = ET.parse(write_gantt(schedule, g, tmp_path / "g.svg")).getroot()
    assert [_bar_nodes(r) for r in _bars(root)] == [[node]]
    assert "makespan 0 cycles" in write_gantt(schedule, g, tmp_path / "g.html").read_text()


def test_l2_row_draws_occupancy_against_the_capacity(tmp_path, toy):
    g, schedule, _ = toy
    span = schedule.makespan
    series = [(0, 300), (span // 2, 900), (span, 0)]
    out = write_gantt(schedule, g, tmp_path / "m.svg", memory=(series, 1000))
    root = ET.parse(out).getroot()
    texts = [t.text for t in root.iter(f"{SVG}text")]
    assert "peak 0.00 MiB" in texts and "capacity 0.00 MiB" in texts  # the row's labels
    tips = [r.find(f"{SVG}title") for r in root.iter(f"{SVG}rect")]
    levels = {t.text for t in tips if t is not None and t.text.startswith("L2 up to")}
    assert levels == {"L2 up to 300 bytes (0.00 MiB) here", "L2 up to 900 bytes (0.00 MiB) here"}
    plain = write_gantt(schedule, g, tmp_path / "p.svg")  # no memory: no L2 row
    assert "peak 0.00 MiB" not in [t.text for t in ET.parse(plain).getroot().iter(f"{SVG}text")]
