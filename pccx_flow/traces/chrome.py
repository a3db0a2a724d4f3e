"""A `Timeline` as Chrome trace JSON (Perfetto, chrome://tracing): one track per lane.

Events are complete events (``ph: "X"``) in microseconds at the timeline's clock, with the
exact cycles in ``args`` so `diff.read_chrome_trace` reads the cycles back unchanged; the
process name and ``otherData.estimate`` carry the timeline's source, which says the times are
a model estimate and on which profile.
"""

from __future__ import annotations

import json
from pathlib import Path

from pccx_flow import atomic
from pccx_flow.traces.timeline import EVENT_TYPE_NAMES, Timeline


def timeline_chrome_trace(timeline: Timeline) -> dict:
    """The trace as a dict (1 cycle shown as 1 µs when the timeline has no clock)."""
    us = 1e6 / timeline.clock_hz if timeline.clock_hz else 1.0
    pid = 1
    events: list[dict] = [
        {"ph": "M", "pid": pid, "name": "process_name", "args": {"name": timeline.source}}
    ]
    tid = {lane: i for i, lane in enumerate(timeline.lanes, start=1)}
    for lane, k in tid.items():
        events.append({"ph": "M", "pid": pid, "tid": k, "name": "thread_name",
                       "args": {"name": lane}})  # fmt: skip
        events.append({"ph": "M", "pid": pid, "tid": k, "name": "thread_sort_index",
                       "args": {"sort_index": k}})  # fmt: skip
    for e in sorted(timeline.events, key=lambda e: (e.start, tid[e.lane])):
        events.append(
            {
                "ph": "X",
                "pid": pid,
                "tid": tid[e.lane],
                "name": e.name,
                "cat": EVENT_TYPE_NAMES[e.kind],
                "ts": e.start * us,
                "dur": e.duration * us,
                "args": {"start_cycle": e.start, "cycles": e.duration},
            }
        )
    return {
        "traceEvents": events,
        "displayTimeUnit": "ns",
        "otherData": {
            "estimate": timeline.source,
            "clock_hz": timeline.clock_hz,
            "makespan_cycles": timeline.makespan,
        },
    }


def write_timeline_chrome(timeline: Timeline, path: str | Path) -> Path:
    """Write the Chrome trace JSON of `timeline` to `path`."""
    path = Path(path)
    atomic.write_text(path, json.dumps(timeline_chrome_trace(timeline)) + "\n")
    return path
