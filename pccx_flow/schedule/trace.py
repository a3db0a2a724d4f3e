"""A schedule as Chrome trace JSON: one track per lane, viewable in Perfetto or chrome://tracing.

Each lane is one thread (``tid``) of one process named after the profile, in lane order; each
node is a complete event (``ph: "X"``) whose ``ts`` and ``dur`` are microseconds at the
profile's core clock (fractional, so single cycles stay visible) and whose ``args`` keep the
exact cycles. The process name says the times are a model estimate on the named profile:
nothing here was measured on a board.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pccx_flow import atomic
from pccx_flow.schedule.metrics import estimate_label
from pccx_flow.schedule.model import Schedule


def chrome_trace(schedule: Schedule, graph: Any = None, core_hz: float | None = None) -> dict:
    """The trace as a dict; times in µs when `core_hz` is known, else 1 cycle = 1 µs."""
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


def write_chrome_trace(
    schedule: Schedule, path: str | Path, graph: Any = None, core_hz: float | None = None
) -> Path:
    """Write `chrome_trace` to `path` and return the path."""
    path = Path(path)
    atomic.write_text(path, json.dumps(chrome_trace(schedule, graph, core_hz)) + "\n")
    return path
