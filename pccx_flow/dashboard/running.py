"""Which pccx tasks are running right now, told by the workers.

The scheduler knows a task is "processing" once it has sent it to a worker, where it may
wait in a queue; it never learns when the task starts. `RunningReporter`, a worker plugin
the lanes page's preload installs on every worker, sends an event when a task starts and
when it stops executing (`Worker.log_event`, topic `TOPIC`); the scheduler's
`LaneRecorder.log_event` counts them, so the page's "running" column is what runs.
"""

from __future__ import annotations

from distributed.diagnostics.plugin import WorkerPlugin

TOPIC = "pccx-running"
NAME = "pccx-running-reporter"


class RunningReporter(WorkerPlugin):
    """Sends ``["start", key]`` / ``["stop", key]`` when a task enters or leaves
    execution on this worker."""

    name = NAME

    def setup(self, worker) -> None:
        self.worker = worker

    def transition(self, key, start, finish, *args, **kwargs) -> None:
        if finish == "executing":
            self.worker.log_event(TOPIC, ["start", str(key)])
        elif start == "executing":
            self.worker.log_event(TOPIC, ["stop", str(key)])


def register_on(scheduler) -> None:
    """Have every worker that joins `scheduler` from now on run the reporter."""
    from distributed.protocol.pickle import dumps

    scheduler.worker_plugins.setdefault(NAME, dumps(RunningReporter()))
