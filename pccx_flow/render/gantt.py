"""Gantt charts of a schedule: one row per lane, bars coloured by block, critical path marked.

`gantt_data` collects what every form of the chart draws as plain data (`GanttData`: lanes,
bars, layer starts, the critical path, the clock); `write_gantt` writes it in the form the
file suffix asks for:

- ``.html``: one self-contained page drawn by Bokeh (`pccx_flow.render.gantt_bokeh`, the
  same figure builder as the planned view of the live dashboard page), inline resources so it
  works offline: wheel zoom, pan, hover details;
- ``.svg`` / ``.png``: a static picture drawn by matplotlib (`pccx_flow.render.gantt_mpl`).

Extra *occupancy rows* (a named step series of ``(cycle, value)`` against a capacity) are
drawn under the lanes by both. One row per shared pool the schedule holds (the weight ports
on pccx: the resource that binds an E4B step) comes first, how many of its instances are
busy over time (`pool_rows`); rows passed to `gantt_data` / `write_gantt` as `OccupancyRow`s
(e.g. what L2 holds over the step) follow.

Every time shown is a model estimate from the schedule's hardware profile, and the title says
so and names the profile.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import networkx as nx

from pccx_flow.errors import PccxFlowError, RenderError
from pccx_flow.render.gantt_data import (  # noqa: F401  (the chart's data types, re-exported)
    GanttData,
    OccupancyRow,
    gantt_from_payload,
    gantt_payload,
)

GANTT_FORMATS = ("svg", "png", "html")

# Keys under which metrics may carry the schedule's critical path (`schedule_metrics` uses
# "critical_path": a dict whose "nodes" is the node list).
CRITICAL_PATH_KEYS = ("critical_path", "critical_path_nodes", "schedule_critical_path")


def write_gantt(
    schedule,
    graph: nx.DiGraph,
    path: str | Path,
    *,
    metrics: dict | None = None,
    profile=None,
    occupancy: Sequence[OccupancyRow] = (),
    pools: Mapping[str, int] | None = None,
) -> Path:
    """Write a Gantt chart of `schedule` to `path` (``.svg``, ``.png`` or ``.html``).

    `graph` gives each node's block and layer. The critical path is taken from `metrics`
    (as returned by `schedule_metrics`) when given, else traced back through the timeline.
    `profile` (a `Profile`) gives the core clock for the µs axis; without it the profile
    named by the schedule is loaded, and if that fails the chart shows cycles only.
    `occupancy` rows are drawn under the lanes, after a row per pool (`pool_rows`; `pools`
    as in `gantt_data`).
    """
    path = Path(path)
    fmt = path.suffix.lower().lstrip(".")
    if fmt not in GANTT_FORMATS:
        raise RenderError(
            f"cannot tell the Gantt format from {path.name!r}: end the file name with "
            + ", ".join(f".{f}" for f in GANTT_FORMATS)
        )
    data = gantt_data(
        schedule, graph, metrics=metrics, profile=profile, occupancy=occupancy, pools=pools
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "html":
        from pccx_flow.render.gantt_bokeh import write_gantt_html

        return write_gantt_html(data, path)
    from pccx_flow.render.gantt_mpl import write_gantt_static

    return write_gantt_static(data, path)


# --- data ---------------------------------------------------------------------------------


def gantt_data(
    schedule,
    graph: nx.DiGraph,
    *,
    metrics: dict | None = None,
    profile=None,
    occupancy: Sequence[OccupancyRow] = (),
    pools: Mapping[str, int] | None = None,
) -> GanttData:
    """Collect lanes, bars, layer starts, the critical path and the clock for a chart.

    `pools` (pool name -> instance count) gives the pool rows; None takes the profile's
    (`profile`, else the one the schedule names), so every chart of a pccx schedule shows
    its weight ports without the caller asking.
    """
    slots = dict(schedule.slots)
    if not slots:
        raise RenderError("the schedule is empty: nothing to draw in a Gantt chart")
    profile_name = _name(getattr(schedule, "profile", None)) or _name(profile) or "?"
    resolved = _profile(profile, getattr(schedule, "profile", None))
    core_hz = float(resolved.core_hz) if resolved is not None else None
    if pools is None:
        pools = getattr(resolved, "pools", None) or {}

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
                "op": attrs.get("op") or "?",
                "kernel": attrs.get("kernel") or "?",
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
        occupancy=[*pool_rows(schedule, pools), *occupancy],
    )


def pool_rows(schedule, pools: Mapping[str, int]) -> list[OccupancyRow]:
    """One occupancy row per pool some slot holds: how many of its instances are busy over
    time (`pccx_flow.schedule.metrics.pool_busy`), against the pool's size."""
    from pccx_flow.schedule.metrics import pool_busy

    return [
        OccupancyRow(f"{pool} busy", series, float(pools[pool]))
        for pool, series in pool_busy(schedule, pools).items()
        if any(busy for _, busy in series)
    ]


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


def _profile(profile, schedule_profile):
    """The profile that gives the clock and the pools: the first of `profile` and the
    schedule's that is one (has a clock), else the schedule's profile loaded by name; None
    when there is none (the chart then shows cycles only and no pool rows)."""
    for candidate in (profile, schedule_profile):
        if getattr(candidate, "core_hz", None):
            return candidate
    if isinstance(schedule_profile, str):
        from pccx_flow.hardware.profile import load_profile

        try:
            return load_profile(schedule_profile)
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
