"""A schedule as Chrome trace JSON: one track per lane, viewable in Perfetto or chrome://tracing.

Each lane is one thread (``tid``) of one process named after the profile, in lane order; each
node is a complete event (``ph: "X"``) whose ``ts`` and ``dur`` are microseconds at the
profile's core clock (fractional, so single cycles stay visible) and whose ``args`` keep the
exact cycles. The process name says the times are a model estimate on the named profile:
nothing here was measured on a board.

What Perfetto can show beside the slices: counter tracks (``ph: "C"``: how many weight ports
are busy, the bytes L2 holds) from `counters`; ``critical_path: true`` in the ``args`` (and a
``critical`` category) of every node on the schedule's critical path; and a flow arrow
(``ph: "s"`` / ``"f"``) along every data edge of `graph` from the producer's slice to the
consumer's, so clicking a node shows what it waited for.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pccx_flow import atomic
from pccx_flow.schedule.metrics import estimate_label
from pccx_flow.schedule.model import Schedule


def chrome_trace(
    schedule: Schedule,
    graph: Any = None,
    core_hz: float | None = None,
    *,
    counters: dict[str, list[tuple[float, float]]] | None = None,
    critical: Any = (),
    flows: bool = True,
) -> dict:
    """The trace as a dict; times in µs when `core_hz` is known, else 1 cycle = 1 µs.

    `counters` maps a track name to ``(cycle, value)`` steps; `critical` names the nodes of
    the critical path; `flows` draws the graph's data edges (order-only edges are not data)."""
    critical = set(critical)
    us_per_cycle = 1e6 / core_hz if core_hz else 1.0
    unit = "µs (model estimate)" if core_hz else "cycles shown as µs (no clock given)"
    pid = 1
    events: list[dict] = [
        {
            "ph": "M",
            "pid": pid,
            "name": "process_name",
            "args": {
                "name": f"pccx {schedule.policy} schedule - {estimate_label(schedule.profile)}"
            },
        }
    ]
    tid_of = {}
    for tid, lane in enumerate(schedule.lanes, start=1):
        tid_of[lane.name] = tid
        events.append(
            {"ph": "M", "pid": pid, "tid": tid, "name": "thread_name", "args": {"name": lane.name}}
        )
        events.append(
            {
                "ph": "M",
                "pid": pid,
                "tid": tid,
                "name": "thread_sort_index",
                "args": {"sort_index": tid},
            }
        )
    nodes = graph.nodes if graph is not None else {}
    for slot in schedule.order():
        attrs = nodes.get(slot.node, {})
        category = ",".join(str(x) for x in (attrs.get("op"), attrs.get("block")) if x)
        args = {"start_cycle": slot.start, "finish_cycle": slot.finish, "cycles": slot.duration}
        if slot.resources:
            args["resources"] = list(slot.resources)
        for key in ("layer", "block", "op", "func"):
            if attrs.get(key) is not None:
                args[key] = attrs[key]
        if slot.node in critical:
            args["critical_path"] = True
            category = f"{category},critical" if category else "critical"
        events.append(
            {
                "ph": "X",
                "pid": pid,
                "tid": tid_of[slot.lane],
                "name": str(slot.node),
                "cat": category or "node",
                "ts": slot.start * us_per_cycle,
                "dur": slot.duration * us_per_cycle,
                "args": args,
            }
        )
    for name, points in (counters or {}).items():
        key = name.split()[0]
        for cycle, value in points:
            events.append({"ph": "C", "pid": pid, "name": name, "ts": cycle * us_per_cycle,
                           "args": {key: value}})  # fmt: skip
    if flows and graph is not None:
        events += _flow_events(schedule, graph, tid_of, pid, us_per_cycle)
    return {
        "traceEvents": events,
        "displayTimeUnit": "ns",
        "otherData": {
            "policy": schedule.policy,
            "profile": schedule.profile,
            "time_unit": unit,
            "estimate": estimate_label(schedule.profile),
            "makespan_cycles": schedule.makespan,
        },
    }


def _flow_events(schedule: Schedule, graph: Any, tid_of: dict, pid: int, scale: float) -> list:
    """A flow arrow per data edge: it starts inside the producer's slice (at its start, so
    it binds to that slice) and ends at the consumer's start, bound to the consumer."""
    out = []
    slots = schedule.slots
    for n, (u, v, data) in enumerate(graph.edges(data=True), start=1):
        if data.get("order_only") or u not in slots or v not in slots:
            continue
        a, b = slots[u], slots[v]
        out.append({"ph": "s", "pid": pid, "tid": tid_of[a.lane], "id": n, "name": "data",
                    "cat": "dependency", "ts": a.start * scale})  # fmt: skip
        out.append({"ph": "f", "bp": "e", "pid": pid, "tid": tid_of[b.lane], "id": n,
                    "name": "data", "cat": "dependency", "ts": b.start * scale})  # fmt: skip
    return out


def write_chrome_trace(
    schedule: Schedule,
    path: str | Path,
    graph: Any = None,
    core_hz: float | None = None,
    **extra: Any,
) -> Path:
    """Write `chrome_trace` to `path` and return the path (`extra`: its keyword options)."""
    path = Path(path)
    atomic.write_text(path, json.dumps(chrome_trace(schedule, graph, core_hz, **extra)) + "\n")
    return path
