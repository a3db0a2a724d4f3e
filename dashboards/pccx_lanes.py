"""Live pccx lane counters for a Dask scheduler, served as JSON next to the dashboard.

Load it into a scheduler you start yourself::

    dask scheduler --host 127.0.0.1 --dashboard-address 127.0.0.1:8787 \\
        --preload dashboards/pccx_lanes.py
    pccx-flow run --synthetic tiny --scheduler tcp://127.0.0.1:8786 --policy heft
    curl http://127.0.0.1:8787/pccx/lanes.json

`pccx-flow run` annotates every task with its ``lane_class`` and, when a policy scheduled
the step, its ``lane`` (for example ``gemv1``). `LaneCounter` counts, per lane (or per lane
class when a task has no lane), how many tasks were submitted, are running and have
finished, and the compute seconds the finished ones took: the measured side of the picture
a schedule plans. Counters are per scheduler lifetime. The JSON is served on the
scheduler's own HTTP server (bind that to 127.0.0.1 as above).
"""

from __future__ import annotations

import json
from collections import defaultdict

from distributed.diagnostics.plugin import SchedulerPlugin
from tornado import web

ROUTE = "/pccx/lanes.json"


class LaneCounter(SchedulerPlugin):
    """Counts tasks and compute seconds per pccx lane annotation."""

    name = "pccx-lanes"

    def __init__(self) -> None:
        self.lane_of: dict = {}
        self.counts: dict[str, dict[str, float]] = defaultdict(
            lambda: {"submitted": 0, "processing": 0, "finished": 0, "erred": 0, "seconds": 0.0}
        )

    def update_graph(self, scheduler, *, annotations=None, tasks=(), **kwargs) -> None:
        annotations = annotations or {}
        lanes = annotations.get("lane", {})
        classes = annotations.get("lane_class", {})
        for key in tasks:
            lane = lanes.get(key) or classes.get(key)
            if lane is None:
                continue
            self.lane_of[key] = str(lane)
            self.counts[str(lane)]["submitted"] += 1

    def transition(self, key, start, finish, *args, **kwargs) -> None:
        lane = self.lane_of.get(key)
        if lane is None:
            return
        row = self.counts[lane]
        if finish == "processing":
            row["processing"] += 1
        if start == "processing":
            row["processing"] -= 1
            if finish == "memory":
                row["finished"] += 1
                for ss in kwargs.get("startstops") or ():
                    if ss.get("action") == "compute":
                        row["seconds"] += ss["stop"] - ss["start"]
            elif finish == "erred":
                row["erred"] += 1
        if finish == "forgotten":
            self.lane_of.pop(key, None)

    def snapshot(self) -> dict:
        """``{"lanes": {lane: {submitted, processing, finished, erred, seconds}}}``."""
        return {"lanes": {lane: dict(row) for lane, row in sorted(self.counts.items())}}


class LaneCountsHandler(web.RequestHandler):
    def initialize(self, plugin: LaneCounter) -> None:
        self.plugin = plugin

    def get(self) -> None:
        self.set_header("Content-Type", "application/json")
        self.write(json.dumps(self.plugin.snapshot()))


def install(scheduler) -> LaneCounter:
    """Add a `LaneCounter` to `scheduler` and serve it at `ROUTE` on its HTTP server."""
    plugin = LaneCounter()
    scheduler.add_plugin(plugin)
    scheduler.http_application.add_handlers(r".*", [(ROUTE, LaneCountsHandler, {"plugin": plugin})])
    return plugin


def dask_setup(scheduler) -> None:
    """Preload hook: ``dask scheduler --preload dashboards/pccx_lanes.py``."""
    install(scheduler)
