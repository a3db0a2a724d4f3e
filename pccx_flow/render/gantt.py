"""Gantt charts of a schedule: one row per lane, bars coloured by block, critical path marked.

`write_gantt` writes one of three forms, picked by the file suffix:

- ``.svg``: plain hand-written XML (no plotting library), each bar with a hover title;
- ``.png``: the same picture laid out by Graphviz's ``neato -n2`` (every shape pinned at its
  position), so PNG needs only the Graphviz that DAG renders already need;
- ``.html``: one self-contained page (data and script inline, no CDN, works offline) drawing
  on a canvas, with wheel zoom / drag pan along the time axis and hover details.

Every time shown is a model estimate from the schedule's hardware profile, and the title says
so and names the profile. The picture is first laid out as a list of primitives (`Rect`,
`Line`, `Text`) so the SVG and PNG forms cannot drift apart.
"""

from __future__ import annotations

import html
import json
import math
from dataclasses import dataclass, replace
from pathlib import Path

import networkx as nx

from pccx_flow.errors import PccxFlowError, RenderError
from pccx_flow.graph.nodes import BLOCKS
from pccx_flow.render import style
from pccx_flow.render.dot import DEFAULT_TIMEOUT_S, run_layout

GANTT_FORMATS = ("svg", "png", "html")

# Keys under which metrics may carry the schedule's critical path (`schedule_metrics` uses
# "critical_path": a dict whose "nodes" is the node list).
CRITICAL_PATH_KEYS = ("critical_path", "critical_path_nodes", "schedule_critical_path")

WIDTH = 1400
LEFT = 120  # lane labels
RIGHT = 24
ROW = 24
ROW_GAP = 6
FONT = "Helvetica, Arial, sans-serif"


@dataclass(frozen=True)
class Rect:
    x: float
    y: float
    w: float
    h: float
    fill: str
    stroke: str | None = None
    stroke_width: float = 0.0
    tip: str | None = None
    nodes: tuple[str, ...] = ()  # the schedule nodes a bar stands for
    css_class: str | None = None  # "bar" or "bar critical" for schedule bars


@dataclass(frozen=True)
class Line:
    x1: float
    y1: float
    x2: float
    y2: float
    colour: str = "#000000"
    width: float = 1.0
    dashed: bool = False


@dataclass(frozen=True)
class Text:
    x: float
    y: float  # baseline
    text: str
    size: float = 11.0
    anchor: str = "start"  # start | middle | end
    bold: bool = False
    colour: str = "#000000"


@dataclass(frozen=True)
class GanttData:
    """What every form of the chart draws, as plain data."""

    title: str
    subtitle: str
    lanes: list[dict]  # {"name", "lane_class", "busy"}
    bars: list[dict]  # {"node", "lane", "row", "start", "finish", "block", "layer", "critical"}
    layers: list[tuple[int, int]]  # (layer, first start cycle)
    makespan: int
    core_hz: float | None
    profile: str
    critical_source: str
    # L2 occupancy as [(t, bytes from t on)] (`schedule.memory.l2_occupancy`) and the
    # capacity it is drawn against; empty when the schedule was made without memory.
    memory: tuple = ()
    memory_capacity: int = 0


def write_gantt(
    schedule,
    graph: nx.DiGraph,
    path: str | Path,
    *,
    metrics: dict | None = None,
    profile=None,
    timeout: float = DEFAULT_TIMEOUT_S,
    memory: tuple[list[tuple[int, int]], int] | None = None,
) -> Path:
    """Write a Gantt chart of `schedule` to `path` (``.svg``, ``.png`` or ``.html``).

    `graph` gives each node's block and layer. The critical path is taken from `metrics`
    (as returned by `schedule_metrics`) when given, else traced back through the timeline.
    `profile` (a `Profile`) gives the core clock for the µs axis; without it the profile
    named by the schedule is loaded, and if that fails the chart shows cycles only.
    `memory` = (L2 occupancy series, capacity in bytes) adds an L2 row under the lanes
    (SVG and PNG).
    """
    path = Path(path)
    fmt = path.suffix.lower().lstrip(".")
    if fmt not in GANTT_FORMATS:
        raise RenderError(
            f"cannot tell the Gantt format from {path.name!r}: end the file name with "
            + ", ".join(f".{f}" for f in GANTT_FORMATS)
        )
    data = gantt_data(schedule, graph, metrics=metrics, profile=profile)
    if memory is not None and memory[0]:
        data = replace(data, memory=tuple(memory[0]), memory_capacity=int(memory[1]))
    path.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "html":
        path.write_text(gantt_html(data), encoding="utf-8")
        return path
    scene, height = layout(data)
    if fmt == "svg":
        path.write_text(scene_svg(scene, WIDTH, height, data.title), encoding="utf-8")
        return path
    source = scene_neato(scene, WIDTH, height)
    return run_layout(source, path, "png", program="neato", extra_args=("-n2",), timeout=timeout)


# --- data ---------------------------------------------------------------------------------


def gantt_data(
    schedule, graph: nx.DiGraph, *, metrics: dict | None = None, profile=None
) -> GanttData:
    """Collect lanes, bars, layer starts, the critical path and the clock for a chart."""
    slots = dict(schedule.slots)
    if not slots:
        raise RenderError("the schedule is empty: nothing to draw in a Gantt chart")
    profile_name = _name(getattr(schedule, "profile", None)) or _name(profile) or "?"
    core_hz = _core_hz(profile, getattr(schedule, "profile", None))

    lanes = [{"name": ln.name, "lane_class": ln.lane_class} for ln in schedule.lanes]
    known = {ln["name"] for ln in lanes}
    for slot in slots.values():  # a lane that only appears in slots still gets a row
        if slot.lane not in known:
            lanes.append({"name": slot.lane, "lane_class": "?"})
            known.add(slot.lane)
    row_of = {ln["name"]: i for i, ln in enumerate(lanes)}
    makespan = max(int(s.finish) for s in slots.values())

    critical, source = _critical_path(schedule, graph, metrics)
    critical_set = set(critical)
    bars = []
    busy = dict.fromkeys(row_of, 0)
    first_start: dict[int, int] = {}
    for node, slot in slots.items():
        attrs = graph.nodes[node] if node in graph else {}
        layer = attrs.get("layer", -1)
        layer = -1 if layer is None else int(layer)
        bars.append(
            {
                "node": str(node),
                "lane": slot.lane,
                "row": row_of[slot.lane],
                "start": int(slot.start),
                "finish": int(slot.finish),
                "block": attrs.get("block") or "?",
                "layer": layer,
                "critical": node in critical_set,
            }
        )
        busy[slot.lane] += int(slot.finish) - int(slot.start)
        # A layer starts where its first node that waits on data starts: source nodes
        # (constants, cache fetches) are free to run long before their layer.
        if layer >= 0 and node in graph and graph.in_degree(node) > 0:
            first_start[layer] = min(first_start.get(layer, int(slot.start)), int(slot.start))
    bars.sort(key=lambda b: (b["row"], b["start"], b["finish"]))
    for ln in lanes:
        ln["busy"] = busy[ln["name"]] / makespan if makespan else 0.0

    title = f"{getattr(schedule, 'policy', '?')} schedule of {_what(graph)} on {profile_name}"
    span = f"makespan {makespan:,} cycles"
    if core_hz:
        span += f" = {makespan / core_hz * 1e6:,.1f} µs at {core_hz / 1e6:g} MHz"
    subtitle = f"{span} (model estimate from profile {profile_name}, not measured); {source}"
    return GanttData(
        title=title,
        subtitle=subtitle,
        lanes=lanes,
        bars=bars,
        layers=sorted(first_start.items()),
        makespan=makespan,
        core_hz=core_hz,
        profile=profile_name,
        critical_source=source,
    )


def _name(profile) -> str | None:
    """A profile's name, whether given as the name itself or as a `Profile`."""
    if profile is None or isinstance(profile, str):
        return profile or None
    return getattr(profile, "name", None)


def _what(graph: nx.DiGraph) -> str:
    """``one e4b decode step``, or ``layers 3..4 of one tiny decode step`` for a cut graph."""
    g = graph.graph
    step = f"one {g.get('config', '?')} decode step"
    layers = g.get("layers")
    n_layers = (g.get("config_dict") or {}).get("n_layers")
    if layers and n_layers and list(layers) != [0, n_layers]:
        a, b = layers
        return f"layer {a} of {step}" if b - a == 1 else f"layers {a}..{b - 1} of {step}"
    return step


def _core_hz(profile, schedule_profile) -> float | None:
    for candidate in (profile, schedule_profile):
        hz = getattr(candidate, "core_hz", None)
        if hz:
            return float(hz)
    if isinstance(schedule_profile, str):
        from pccx_flow.hardware.profile import load_profile

        try:
            return float(load_profile(schedule_profile).core_hz)
        except (PccxFlowError, OSError):
            return None
    return None


def _critical_path(schedule, graph: nx.DiGraph, metrics: dict | None) -> tuple[list, str]:
    """The critical path from `metrics` (a node list, or a dict with ``nodes``), else traced."""
    for key in CRITICAL_PATH_KEYS:
        found = (metrics or {}).get(key)
        if isinstance(found, dict):
            found = found.get("nodes")
        if found:
            return list(found), "black strip: the schedule's critical path"
    return trace_critical_path(schedule, graph), "black strip: critical path traced in the timeline"


def trace_critical_path(schedule, graph: nx.DiGraph) -> list:
    """The chain of slots that fixes the makespan, traced back from the last finish.

    From a slot, step to the data predecessor or the previous slot on the same lane that
    finished last no later than this slot's start: the one it waited for.
    """
    slots = schedule.slots
    by_lane: dict[str, list] = {}
    for node, slot in slots.items():
        by_lane.setdefault(slot.lane, []).append(node)
    lane_prev = {}
    for nodes in by_lane.values():
        nodes.sort(key=lambda n: (slots[n].start, slots[n].finish))
        for a, b in zip(nodes, nodes[1:], strict=False):
            lane_prev[b] = a
    node = max(slots, key=lambda n: (slots[n].finish, slots[n].start))
    path = [node]
    seen = {node}
    while True:
        start = slots[node].start
        candidates = [p for p in graph.predecessors(node) if p in slots] if node in graph else []
        if node in lane_prev:
            candidates.append(lane_prev[node])
        candidates = [c for c in candidates if slots[c].finish <= start and c not in seen]
        if not candidates:
            break
        node = max(candidates, key=lambda c: slots[c].finish)
        path.append(node)
        seen.add(node)
    return path[::-1]


# --- static layout --------------------------------------------------------------------------


def nice_ticks(limit: float, count: int = 8) -> list[float]:
    """Round tick values from 0 to `limit` (steps of 1, 2 or 5 × 10^k), about `count` of them."""
    if limit <= 0:
        return [0.0]
    raw = limit / max(count, 1)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    return [i * step for i in range(int(limit // step) + 1)]


def _fmt(value: float) -> str:
    return f"{value:,.0f}" if value >= 10 or value == int(value) else f"{value:g}"


def layout(data: GanttData) -> tuple[list, int]:
    """The chart as primitives in pixel coordinates; returns (primitives, height)."""
    plot_w = WIDTH - LEFT - RIGHT
    top = 92
    rows = len(data.lanes) + (2 if data.memory else 0)  # the L2 row is two rows tall
    plot_h = rows * (ROW + ROW_GAP)
    bottom = top + plot_h

    def x(t: float) -> float:
        return LEFT + t / max(data.makespan, 1) * plot_w

    out: list = [
        Text(LEFT, 22, data.title, 15, bold=True),
        Text(LEFT, 40, data.subtitle, 11, colour="#333333"),
    ]
    # Lane rows with labels (busy share of the makespan).
    for i, lane in enumerate(data.lanes):
        y = top + i * (ROW + ROW_GAP)
        out.append(Rect(LEFT, y - 2, plot_w, ROW + 4, "#f4f4f4" if i % 2 else "#fbfbfb"))
        out.append(Text(LEFT - 8, y + ROW * 0.7, f"{lane['name']} {lane['busy']:.0%}", 11, "end"))
    # Time axes: cycles below, µs above (when the clock is known).
    for t in nice_ticks(data.makespan):
        out.append(Line(x(t), bottom, x(t), bottom + 5, "#000000"))
        out.append(Text(x(t), bottom + 17, _fmt(t), 10, "middle"))
    out.append(Text(LEFT + plot_w / 2, bottom + 34, "cycles (model estimate)", 11, "middle"))
    out.append(Line(LEFT, bottom, LEFT + plot_w, bottom))
    if data.core_hz:
        span_us = data.makespan / data.core_hz * 1e6
        for us in nice_ticks(span_us):
            xx = x(us * 1e-6 * data.core_hz)
            out.append(Line(xx, top - 8, xx, top - 3, "#000000"))
            out.append(Text(xx, top - 12, _fmt(us), 10, "middle"))
        out.append(Text(LEFT - 8, top - 12, "µs", 10, "end"))
        out.append(Line(LEFT, top - 3, LEFT + plot_w, top - 3))
    # Layer boundaries: a dashed line where each layer's first node starts.
    last_label = -1e9
    for layer, start in data.layers:
        xx = x(start)
        out.append(Line(xx, top - 3, xx, bottom, "#777777", 0.8, dashed=True))
        if xx - last_label >= 22:
            out.append(Text(xx + 2, top - 24, f"L{layer}", 9, colour="#555555"))
            last_label = xx
    # Bars, then the critical-path strip under the critical bars. Bars narrower than a
    # pixel cannot be told apart at this width: touching runs of them (same lane, block and
    # criticality) become one rect that lists its nodes, which keeps a whole E4B step's
    # SVG around a megabyte instead of several.
    for run in _runs(data.bars, x, lambda b: (b["row"], b["block"], b["critical"])):
        first, last = run[0], run[-1]
        x0, x1 = x(first["start"]), x(last["finish"])
        w = max(x1 - x0, 0.6)
        outline = first["critical"] and w > 3
        out.append(
            Rect(
                x0,
                top + first["row"] * (ROW + ROW_GAP),
                w,
                ROW - 5,
                style.block_colour(first["block"]),
                "#000000" if outline else None,
                1.0 if outline else 0.0,
                _bar_tip(first, data.core_hz) if len(run) == 1 else _run_tip(run, data.core_hz),
                tuple(b["node"] for b in run),
                "bar critical" if first["critical"] else "bar",
            )
        )
    if data.memory:
        out.extend(_memory_row(data, x, top + len(data.lanes) * (ROW + ROW_GAP), plot_w))
    critical = [b for b in data.bars if b["critical"]]
    for run in _runs(critical, x, lambda b: b["row"]):
        x0, x1 = x(run[0]["start"]), x(run[-1]["finish"])
        y = top + run[0]["row"] * (ROW + ROW_GAP) + ROW - 4
        out.append(Rect(x0, y, max(x1 - x0, 0.8), 4, "#000000"))
    # Legend: blocks present, and the critical-path marker.
    y = bottom + 56
    xx = LEFT
    present = [b for b in BLOCKS if any(bar["block"] == b for bar in data.bars)]
    for block in present + ["critical"]:
        label = "critical path" if block == "critical" else style.block_title(block)
        width = 26 + 6.5 * len(label)
        if xx + width > WIDTH - RIGHT:
            xx, y = LEFT, y + 20
        fill = "#000000" if block == "critical" else style.block_colour(block)
        out.append(Rect(xx, y - 10, 14, 12 if block != "critical" else 4, fill))
        out.append(Text(xx + 18, y, label, 10))
        xx += width
    return out, int(y + 20)


def _memory_row(data: GanttData, x, y: float, plot_w: float) -> list:
    """The L2 row: bytes resident over time as a filled step, against the capacity line."""
    h = 2 * ROW + ROW_GAP
    cap = max(data.memory_capacity, max(b for _, b in data.memory), 1)
    peak = max(b for _, b in data.memory)
    out: list = [
        Rect(LEFT, y - 2, plot_w, h + 4, "#eef3f8"),
        Text(LEFT - 8, y + ROW * 0.7, "L2", 11, "end"),
        Text(LEFT - 8, y + ROW * 1.5, f"peak {peak / 2**20:.2f} MiB", 9, "end"),
    ]
    # The highest level in each pixel column, so a whole step stays a few hundred rects.
    steps = list(data.memory) + [(data.makespan, 0)]
    column: dict[int, int] = {}
    for (t0, b), (t1, _) in zip(steps, steps[1:], strict=False):
        if b > 0 and t1 > t0:
            for px in range(int(x(t0)), int(x(t1)) + 1):
                column[px] = max(column.get(px, 0), b)
    for px in sorted(column):
        b = column[px]
        bh = h * b / cap
        tip = f"L2 up to {b:,} bytes ({b / 2**20:.2f} MiB) here"
        out.append(Rect(px, y + h - bh, 1.0, bh, "#5b8db8", tip=tip))
    cy = y + h - h * data.memory_capacity / cap
    out.append(Line(LEFT, cy, LEFT + plot_w, cy, "#b22222", 1.0, dashed=True))
    out.append(Text(LEFT + plot_w - 2, cy - 2, f"capacity {data.memory_capacity / 2**20:.2f} MiB",
                    9, "end", colour="#b22222"))  # fmt: skip
    return out


def _runs(bars: list[dict], x, key, max_px: float = 1.5) -> list[list[dict]]:
    """Bars (sorted by row, then start) grouped into runs of touching sub-pixel bars."""
    runs: list[list[dict]] = []
    for bar in bars:
        narrow = x(bar["finish"]) - x(bar["start"]) < max_px
        if runs:
            last = runs[-1][-1]
            if (
                narrow
                and key(last) == key(bar)
                and x(last["finish"]) - x(last["start"]) < max_px
                and x(bar["start"]) - x(last["finish"]) <= 0.5
            ):
                runs[-1].append(bar)
                continue
        runs.append([bar])
    return runs


def _run_tip(run: list[dict], core_hz: float | None) -> str:
    first, last = run[0], run[-1]
    merged = {
        **first,
        "node": f"{len(run)} nodes {first['node']} .. {last['node']}",
        "finish": last["finish"],
    }
    return _bar_tip(merged, core_hz)


def _bar_tip(bar: dict, core_hz: float | None) -> str:
    tip = (
        f"{bar['node']} | lane {bar['lane']} | cycles {bar['start']:,}-{bar['finish']:,}"
        f" ({bar['finish'] - bar['start']:,})"
    )
    if core_hz:
        tip += f" | {bar['start'] / core_hz * 1e6:,.3f}-{bar['finish'] / core_hz * 1e6:,.3f} µs"
    tip += f" | block {bar['block']}"
    if bar["critical"]:
        tip += " | critical path"
    return tip


# --- SVG ---------------------------------------------------------------------------------


def scene_svg(scene: list, width: int, height: int, title: str) -> str:
    """Primitives as a standalone SVG document."""
    e = html.escape
    out = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="{FONT}">',
        f"<title>{e(title)}</title>",
        f'<rect x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>',
    ]
    for p in scene:
        if isinstance(p, Rect):
            attrs = (
                f'x="{p.x:.2f}" y="{p.y:.2f}" width="{p.w:.2f}" height="{p.h:.2f}" fill="{p.fill}"'
            )
            if p.stroke:
                attrs += f' stroke="{p.stroke}" stroke-width="{p.stroke_width:g}"'
            if p.tip:
                cls = f' class="{p.css_class}"' if p.css_class else ""
                if len(p.nodes) > 1:
                    attrs += f' data-nodes="{e(" ".join(p.nodes))}"'
                out.append(f"<rect{cls} {attrs}><title>{e(p.tip)}</title></rect>")
            else:
                out.append(f"<rect {attrs}/>")
        elif isinstance(p, Line):
            dash = ' stroke-dasharray="4,3"' if p.dashed else ""
            out.append(
                f'<line x1="{p.x1:.2f}" y1="{p.y1:.2f}" x2="{p.x2:.2f}" y2="{p.y2:.2f}" '
                f'stroke="{p.colour}" stroke-width="{p.width:g}"{dash}/>'
            )
        elif isinstance(p, Text):
            weight = ' font-weight="bold"' if p.bold else ""
            out.append(
                f'<text x="{p.x:.2f}" y="{p.y:.2f}" font-size="{p.size:g}" '
                f'text-anchor="{p.anchor}" fill="{p.colour}"{weight}>{e(p.text)}</text>'
            )
    out.append("</svg>")
    return "\n".join(out) + "\n"


# --- PNG through neato -n2 -------------------------------------------------------------------


def _dot_str(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def scene_neato(scene: list, width: int, height: int) -> str:
    """Primitives as DOT source for ``neato -n2``: every shape a node pinned at its position.

    Graphviz's y axis points up and positions are node centres, in points (dpi 72 makes one
    point one pixel).
    """
    lines = [
        "graph gantt {",
        f'  graph [dpi=72, bb="0,0,{width},{height}", splines=false, outputorder=nodesfirst,'
        ' bgcolor="white", pad=0];',
        '  node [label="", fixedsize=true, fontname="Helvetica", margin=0];',
    ]
    # Two invisible corner points keep the whole canvas (neato crops to what it draws).
    lines.append('  c0 [shape=point, width=0.01, style=invis, pos="0,0!"];')
    lines.append(f'  c1 [shape=point, width=0.01, style=invis, pos="{width},{height}!"];')
    n = 0
    for p in scene:
        if isinstance(p, Rect):
            cx, cy = p.x + p.w / 2, height - (p.y + p.h / 2)
            pen = (
                f", color={_dot_str(p.stroke)}, penwidth={p.stroke_width:g}"
                if p.stroke
                else (", penwidth=0")
            )
            lines.append(
                f'  n{n} [shape=box, style=filled, fillcolor="{p.fill}", width={p.w / 72:.4f}, '
                f'height={p.h / 72:.4f}, pos="{cx:.2f},{cy:.2f}!"{pen}];'
            )
            n += 1
        elif isinstance(p, Line):
            a, b = n, n + 1
            n += 2
            for k, (px, py) in ((a, (p.x1, p.y1)), (b, (p.x2, p.y2))):
                pos = f"{px:.2f},{height - py:.2f}"
                lines.append(f'  n{k} [shape=point, width=0.01, style=invis, pos="{pos}!"];')
            dash = ", style=dashed" if p.dashed else ""
            lines.append(
                f'  n{a} -- n{b} [color="{p.colour}", penwidth={p.width:g}, headclip=false, '
                f"tailclip=false{dash}];"
            )
        elif isinstance(p, Text):
            text_w = 0.55 * p.size * len(p.text)
            cx = {"start": p.x + text_w / 2, "middle": p.x, "end": p.x - text_w / 2}[p.anchor]
            cy = height - (p.y - 0.35 * p.size)
            font = ', fontname="Helvetica-Bold"' if p.bold else ""
            lines.append(
                f"  n{n} [shape=plaintext, fixedsize=false, label={_dot_str(p.text)}, "
                f"fontsize={p.size:g}, "
                f'fontcolor="{p.colour}", width={text_w / 72:.4f}, height={p.size * 1.2 / 72:.4f}, '
                f'pos="{cx:.2f},{cy:.2f}!"{font}];'
            )
            n += 1
    lines.append("}")
    return "\n".join(lines) + "\n"


# --- interactive HTML ------------------------------------------------------------------------


def gantt_html(data: GanttData) -> str:
    """One self-contained HTML page: the data as inline JSON and a small canvas viewer."""
    blocks = {b: {"title": style.block_title(b), "colour": style.block_colour(b)} for b in BLOCKS}
    payload = {
        "title": data.title,
        "subtitle": data.subtitle,
        "lanes": data.lanes,
        "bars": [
            [
                b["row"],
                b["start"],
                b["finish"],
                b["block"],
                b["node"],
                int(b["critical"]),
                b["layer"],
            ]
            for b in data.bars
        ],
        "layers": data.layers,
        "makespan": data.makespan,
        "core_hz": data.core_hz,
        "blocks": blocks,
    }
    # "</" must not appear inside a <script> element.
    text = json.dumps(payload, separators=(",", ":")).replace("</", "<\\/")
    return _HTML.replace("__TITLE__", html.escape(data.title)).replace("__DATA__", text)


_HTML = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>__TITLE__</title>
<style>
body { font-family: Helvetica, Arial, sans-serif; margin: 12px; color: #111; }
h1 { font-size: 16px; margin: 0 0 4px 0; }
#sub { font-size: 12px; color: #333; margin-bottom: 6px; }
#help { font-size: 11px; color: #666; margin-bottom: 6px; }
#chart { border: 1px solid #ccc; cursor: crosshair; display: block; }
#tip { position: fixed; pointer-events: none; background: #fffff0; border: 1px solid #999;
       padding: 4px 6px; font-size: 12px; display: none; white-space: pre; }
#legend span { display: inline-block; margin: 4px 12px 0 0; font-size: 12px; }
#legend i { display: inline-block; width: 12px; height: 12px; margin-right: 4px;
            vertical-align: -2px; }
</style>
</head>
<body>
<h1 id="title"></h1>
<div id="sub"></div>
<div id="help">wheel: zoom the time axis at the pointer &middot; drag: pan &middot;
double-click: show everything &middot; hover a bar for its node, lane and cycles</div>
<canvas id="chart"></canvas>
<div id="legend"></div>
<div id="tip"></div>
<script type="application/json" id="gantt-data">__DATA__</script>
<script>
"use strict";
const D = JSON.parse(document.getElementById("gantt-data").textContent);
const LEFT = 120, RIGHT = 20, TOP = 56, ROW = 24, GAP = 6, AXIS = 40;
const cv = document.getElementById("chart"), ctx = cv.getContext("2d");
const tip = document.getElementById("tip");
document.getElementById("title").textContent = D.title;
document.getElementById("sub").textContent = D.subtitle;
const SPAN = Math.max(D.makespan, 1);
let t0 = 0, t1 = SPAN, W = 0, H = 0;
const byRow = D.lanes.map(() => []);
for (const b of D.bars) byRow[b[0]].push(b);

function px(t) { return LEFT + (t - t0) / (t1 - t0) * (W - LEFT - RIGHT); }
function tOf(x) { return t0 + (x - LEFT) / (W - LEFT - RIGHT) * (t1 - t0); }
function rowY(r) { return TOP + r * (ROW + GAP); }
function ticks(lo, hi, n) {
  const raw = (hi - lo) / n, p = Math.pow(10, Math.floor(Math.log10(raw)));
  const step = [1, 2, 5, 10].map(m => m * p).find(s => s >= raw);
  const out = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi; v += step) out.push(v);
  return out;
}
function fmt(v) { return v >= 10 ? Math.round(v).toLocaleString("en") : String(+v.toPrecision(4)); }

function resize() {
  const dpr = window.devicePixelRatio || 1;
  W = Math.max(600, window.innerWidth - 30);
  H = TOP + D.lanes.length * (ROW + GAP) + AXIS;
  cv.width = W * dpr; cv.height = H * dpr;
  cv.style.width = W + "px"; cv.style.height = H + "px";
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  draw();
}

function draw() {
  ctx.clearRect(0, 0, W, H);
  ctx.font = "11px Helvetica, Arial, sans-serif";
  const bottom = TOP + D.lanes.length * (ROW + GAP);
  D.lanes.forEach((lane, r) => {
    ctx.fillStyle = r % 2 ? "#f4f4f4" : "#fbfbfb";
    ctx.fillRect(LEFT, rowY(r) - 2, W - LEFT - RIGHT, ROW + 4);
    ctx.fillStyle = "#000"; ctx.textAlign = "right";
    const label = lane.name + " " + Math.round(lane.busy * 100) + "%";
    ctx.fillText(label, LEFT - 8, rowY(r) + ROW * 0.7);
  });
  ctx.save();
  ctx.beginPath(); ctx.rect(LEFT, 0, W - LEFT - RIGHT, H); ctx.clip();
  ctx.strokeStyle = "#777"; ctx.setLineDash([4, 3]); ctx.lineWidth = 0.8;
  ctx.textAlign = "left"; ctx.fillStyle = "#555";
  let lastLabel = -1e9;
  for (const [layer, start] of D.layers) {
    const x = px(start);
    ctx.beginPath(); ctx.moveTo(x, TOP - 4); ctx.lineTo(x, bottom); ctx.stroke();
    if (x - lastLabel > 24) { ctx.fillText("L" + layer, x + 2, TOP - 30); lastLabel = x; }
  }
  ctx.setLineDash([]);
  for (let r = 0; r < byRow.length; r++) {
    const y = rowY(r);
    for (const b of byRow[r]) {
      if (b[2] < t0 || b[1] > t1) continue;
      const x = px(b[1]), w = Math.max(px(b[2]) - x, 0.6);
      ctx.fillStyle = (D.blocks[b[3]] || {colour: "#d9d9d9"}).colour;
      ctx.fillRect(x, y, w, ROW - 5);
      if (b[5]) {
        ctx.fillStyle = "#000"; ctx.fillRect(x, y + ROW - 4, Math.max(w, 0.8), 4);
        if (w > 3) {
          ctx.strokeStyle = "#000"; ctx.lineWidth = 1; ctx.strokeRect(x, y, w, ROW - 5);
        }
      }
    }
  }
  ctx.restore();
  ctx.strokeStyle = "#000"; ctx.fillStyle = "#000"; ctx.lineWidth = 1; ctx.textAlign = "center";
  ctx.beginPath(); ctx.moveTo(LEFT, bottom); ctx.lineTo(W - RIGHT, bottom); ctx.stroke();
  for (const t of ticks(t0, t1, 8)) {
    const x = px(t);
    ctx.beginPath(); ctx.moveTo(x, bottom); ctx.lineTo(x, bottom + 5); ctx.stroke();
    ctx.fillText(fmt(t), x, bottom + 17);
  }
  ctx.fillText("cycles (model estimate)", LEFT + (W - LEFT - RIGHT) / 2, bottom + 33);
  if (D.core_hz) {  // the same time in µs at the profile's core clock, above the rows
    const us = c => c / D.core_hz * 1e6;
    ctx.beginPath(); ctx.moveTo(LEFT, TOP - 4); ctx.lineTo(W - RIGHT, TOP - 4); ctx.stroke();
    for (const u of ticks(us(t0), us(t1), 8)) {
      const x = px(u * 1e-6 * D.core_hz);
      ctx.beginPath(); ctx.moveTo(x, TOP - 9); ctx.lineTo(x, TOP - 4); ctx.stroke();
      ctx.fillText(fmt(u), x, TOP - 12);
    }
    ctx.textAlign = "right";
    ctx.fillText("µs", LEFT - 8, TOP - 12);
  }
}

function hit(ev) {
  const rect = cv.getBoundingClientRect();
  const x = ev.clientX - rect.left, y = ev.clientY - rect.top;
  const r = Math.floor((y - TOP + 2) / (ROW + GAP));
  if (r < 0 || r >= byRow.length || x < LEFT) return null;
  const t = tOf(x), slack = (t1 - t0) / (W - LEFT - RIGHT) * 2;
  let best = null;
  for (const b of byRow[r]) {
    if (b[1] - slack <= t && t <= b[2] + slack) {
      if (!best || (b[2] - b[1]) < (best[2] - best[1])) best = b;
    }
  }
  return best;
}

function showTip(ev) {
  const b = hit(ev);
  if (!b) { tip.style.display = "none"; return; }
  const us = D.core_hz ? "\\nµs    " + (b[1] / D.core_hz * 1e6).toFixed(3) + " - "
    + (b[2] / D.core_hz * 1e6).toFixed(3) + " (model estimate)" : "";
  tip.textContent = b[4] + "\\nlane  " + D.lanes[b[0]].name
    + "\\nstart " + b[1].toLocaleString("en")
    + "\\nfinish " + b[2].toLocaleString("en") + " (" + (b[2] - b[1]).toLocaleString("en")
    + " cycles)" + us + "\\nblock " + b[3] + (b[6] >= 0 ? ", layer " + b[6] : "")
    + (b[5] ? "\\non the critical path" : "");
  tip.style.left = (ev.clientX + 14) + "px"; tip.style.top = (ev.clientY + 14) + "px";
  tip.style.display = "block";
}

let drag = null;
cv.addEventListener("wheel", ev => {
  ev.preventDefault();
  const rect = cv.getBoundingClientRect(), t = tOf(ev.clientX - rect.left);
  const k = ev.deltaY < 0 ? 0.8 : 1.25;
  const span = Math.min(SPAN, Math.max(4, (t1 - t0) * k));
  t0 = Math.max(0, t - (t - t0) * span / (t1 - t0));
  t1 = Math.min(SPAN, t0 + span); t0 = Math.max(0, t1 - span);
  draw();
}, {passive: false});
cv.addEventListener("mousedown", ev => { drag = {x: ev.clientX, t0: t0, t1: t1}; });
window.addEventListener("mouseup", () => { drag = null; });
cv.addEventListener("mousemove", ev => {
  if (drag) {
    const dt = (ev.clientX - drag.x) / (W - LEFT - RIGHT) * (drag.t1 - drag.t0);
    const span = drag.t1 - drag.t0;
    t0 = Math.min(Math.max(0, drag.t0 - dt), SPAN - span); t1 = t0 + span;
    draw();
  }
  showTip(ev);
});
cv.addEventListener("mouseleave", () => { tip.style.display = "none"; });
cv.addEventListener("dblclick", () => { t0 = 0; t1 = SPAN; draw(); });
window.addEventListener("resize", resize);

const legend = document.getElementById("legend");
const used = new Set(D.bars.map(b => b[3]));
for (const [name, b] of Object.entries(D.blocks)) {
  if (!used.has(name)) continue;
  const s = document.createElement("span");
  s.innerHTML = '<i style="background:' + b.colour + '"></i>';
  s.appendChild(document.createTextNode(b.title));
  legend.appendChild(s);
}
const crit = document.createElement("span");
crit.innerHTML = '<i style="background:#000;height:4px"></i>critical path';
legend.appendChild(crit);
resize();
</script>
</body>
</html>
"""
