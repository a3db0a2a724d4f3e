"""What the lanes page shows, recorded on the scheduler by a `SchedulerPlugin`.

`pccx-flow run` annotates every task with its ``lane_class``, with a policy its scheduled
``lane``, and its ``node``, ``layer``, ``block``, ``op`` and ``kernel``
(`pccx_flow.execute.dask_graph`). `LaneRecorder` keeps, per scheduler lifetime:

- one row per finished task (lane, node, ..., compute start and stop in epoch seconds), the
  measured task stream by lane, capped at `MAX_ROWS` (oldest dropped);
- per-lane counters: submitted, assigned (the scheduler's "processing": sent to a worker,
  queued there or running; kept as ``running`` for old readers), executing (what the
  workers report running, `pccx_flow.dashboard.running`), done, erred, busy seconds;
- progress through the current step (layers whose tasks all finished, of N) and, when the
  client announces it, through the generation (step k of M);
- erred tasks with node id and the error's first line;
- the planned schedule of the step being executed, as a `GanttData` payload the client
  sends (`receive_plan`);
- for a step run on a device (``run --backend device``), the plan beside the device's
  times (`receive_device`, payload of `pccx_flow.cluster.device_view`).

Everything runs on the scheduler's event loop (plugin hooks and the Bokeh page alike), so
no locking is needed.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from distributed.diagnostics.plugin import SchedulerPlugin

from pccx_flow.dashboard import PLUGIN_NAME

MAX_ROWS = 100_000
MAX_ERRORS = 200
INFO_FIELDS = ("node", "layer", "block", "op", "kernel")


def _counter() -> dict[str, float]:
    return {"submitted": 0, "running": 0, "executing": 0, "started": 0, "done": 0, "erred": 0,
            "busy_s": 0.0}  # fmt: skip


class LaneRecorder(SchedulerPlugin):
    """Records pccx tasks per lane for the lanes page (see the module docstring)."""

    name = PLUGIN_NAME

    def __init__(self) -> None:
        self.info: dict[Any, dict] = {}  # live task key -> lane, node, layer, ...
        self.counts: dict[str, dict[str, float]] = defaultdict(_counter)
        self.rows: list[dict] = []
        self.dropped = 0  # rows dropped from the front (a page's cursor counts from 0)
        self.errors: list[dict] = []
        self.plan: dict | None = None  # {"step", "steps", "n_layers", "gantt": payload|None}
        self.plan_version = 0
        self.device: dict | None = None  # the last step run on a device: plan vs device times
        self.device_version = 0
        self.graphs = 0  # pccx graphs submitted (steps seen)
        self.layer_total: dict[int, int] = {}
        self.layer_done: dict[int, int] = {}
        self.step_total = 0
        self.step_done = 0
        self.executing_reported = False  # a worker runs `running.RunningReporter`
        self.str_keys: dict[str, Any] = {}  # str(task key) -> key, for the workers' events

    # --- scheduler hooks -----------------------------------------------------------------

    def update_graph(self, scheduler, *, annotations=None, tasks=(), **kwargs) -> None:
        annotations = annotations or {}
        classes = annotations.get("lane_class") or {}
        if not classes:
            return
        lanes = annotations.get("lane") or {}
        extra = {f: annotations.get(f) or {} for f in INFO_FIELDS}
        self.graphs += 1
        self.layer_total, self.layer_done = {}, {}
        self.step_total = self.step_done = 0
        for key in tasks:
            lane_class = classes.get(key)
            if lane_class is None:
                continue
            lane = str(lanes.get(key) or lane_class)
            row = {"lane": lane, "lane_class": str(lane_class), "step": self.graphs}
            for f in INFO_FIELDS:
                row[f] = extra[f].get(key)
            self.info[key] = row
            self.str_keys[str(key)] = key
            self.counts[lane]["submitted"] += 1
            layer = row["layer"] if row["layer"] is not None else -1
            self.layer_total[layer] = self.layer_total.get(layer, 0) + 1
            self.step_total += 1

    def transition(self, key, start, finish, *args, **kwargs) -> None:
        row = self.info.get(key)
        if row is None:
            return
        count = self.counts[row["lane"]]
        if finish == "processing":
            count["running"] += 1
        elif start == "processing":
            count["running"] -= 1
            if finish == "memory":
                self._finished(key, row, count, kwargs)
            elif finish == "erred":
                self._erred(key, row, count, kwargs)
        if finish == "forgotten":
            self.info.pop(key, None)
            self.str_keys.pop(str(key), None)

    def log_event(self, topic: str, msg: Any) -> None:
        """A worker's task started or stopped executing (`pccx_flow.dashboard.running`)."""
        from pccx_flow.dashboard.running import TOPIC

        if topic != TOPIC:
            return
        self.executing_reported = True
        what, key = msg[0], msg[1]
        row = self.info.get(self.str_keys.get(key, key))
        if row is None:
            return
        count = self.counts[row["lane"]]
        if what == "start":
            count["executing"] += 1
            count["started"] += 1
        elif what == "stop":
            count["executing"] = max(count["executing"] - 1, 0)

    def _finished(self, key, row: dict, count: dict, kwargs: dict) -> None:
        count["done"] += 1
        compute = [s for s in kwargs.get("startstops") or () if s.get("action") == "compute"]
        if compute:
            start, stop = compute[0]["start"], compute[-1]["stop"]
            count["busy_s"] += sum(s["stop"] - s["start"] for s in compute)
            self.rows.append({**row, "key": str(key), "start": start, "stop": stop})
            if len(self.rows) > MAX_ROWS:
                cut = len(self.rows) - MAX_ROWS
                del self.rows[:cut]
                self.dropped += cut
        layer = row["layer"] if row["layer"] is not None else -1
        self.layer_done[layer] = self.layer_done.get(layer, 0) + 1
        self.step_done += 1

    def _erred(self, key, row: dict, count: dict, kwargs: dict) -> None:
        count["erred"] += 1
        text = kwargs.get("exception_text") or str(kwargs.get("exception") or "error")
        line = next((ln for ln in str(text).splitlines() if ln.strip()), "error")
        if len(self.errors) < MAX_ERRORS:
            node = row["node"] or str(key)
            self.errors.append({"node": node, "lane": row["lane"], "error": line})

    # --- what the client sends and the page reads -------------------------------------------

    def receive_plan(self, plan: dict) -> None:
        """Store the plan of the step about to run (see `pccx_flow.dashboard.client`)."""
        self.plan = plan
        self.plan_version += 1

    def receive_device(self, view: dict) -> None:
        """Store a device step's planned-vs-device view (`pccx_flow.cluster.device_view`)."""
        self.device = view
        self.device_version += 1

    def progress(self) -> dict:
        """Layers done of N, tasks done of total, step k of M.

        Layers 0..i-1 count as done when no task of theirs is left (a fused task counts for
        its first node's layer), so "layers done" is the first layer still running."""
        layers = [k for k in self.layer_total if k >= 0]
        n_layers = (self.plan or {}).get("n_layers") or (max(layers) + 1 if layers else 0)
        pending = [k for k in layers if self.layer_done.get(k, 0) < self.layer_total[k]]
        done = min(pending) if pending else n_layers
        plan = self.plan or {}
        return {
            "layers_done": done,
            "n_layers": n_layers,
            "tasks_done": self.step_done,
            "tasks": self.step_total,
            "step": plan.get("step") if plan else self.graphs,
            "steps": plan.get("steps"),
        }

    def snapshot(self, rows: bool = False) -> dict:
        """Counters, progress and errors (and with `rows` the task rows and the plan)."""
        out = {
            "lanes": {lane: dict(c) for lane, c in sorted(self.counts.items())},
            "executing_reported": self.executing_reported,
            "progress": self.progress(),
            "errors": list(self.errors),
        }
        if rows:
            out["rows"] = list(self.rows)
            out["plan"] = self.plan
            out["device"] = self.device
        return out


def recorder_of(scheduler) -> LaneRecorder | None:
    """The scheduler's `LaneRecorder`, if it was installed."""
    return scheduler.plugins.get(PLUGIN_NAME)


# Functions the client runs on the scheduler (`Client.run_on_scheduler`): plain data in and
# out, so they work on any scheduler that can import pccx_flow.


def has_recorder(dask_scheduler=None) -> bool:
    return recorder_of(dask_scheduler) is not None


def send_plan(plan: dict, dask_scheduler=None) -> bool:
    recorder = recorder_of(dask_scheduler)
    if recorder is None:
        return False
    recorder.receive_plan(plan)
    return True


def send_device(view: dict, dask_scheduler=None) -> bool:
    recorder = recorder_of(dask_scheduler)
    if recorder is None:
        return False
    recorder.receive_device(view)
    return True


def fetch_snapshot(dask_scheduler=None) -> dict | None:
    recorder = recorder_of(dask_scheduler)
    return None if recorder is None else recorder.snapshot(rows=True)
