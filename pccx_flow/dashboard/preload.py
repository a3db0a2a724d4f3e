"""Scheduler preload: the pccx lanes page in a scheduler's own dashboard.

    dask scheduler --host 127.0.0.1 --dashboard-address 127.0.0.1:8787 \\
        --preload pccx_flow.dashboard.preload
    # then open http://127.0.0.1:8787/pccx-lanes

Importing this module adds the page to `distributed.dashboard.scheduler.applications`, which
the scheduler reads when it starts its dashboard (after its preloads are imported, before
they run). The route has one path segment: the served page loads Bokeh from
``static/js/...`` relative to its own address. That dict is private to distributed (a
custom Bokeh page has no public API, dask/distributed#3503): the page is tested against
the pinned distributed version (tests/dashboard). `dask_setup` then installs the
`LaneRecorder` and the JSON counters at ``/pccx-lanes.json``.
"""

from __future__ import annotations

import json

from tornado import web

from pccx_flow.dashboard import JSON_ROUTE, ROUTE
from pccx_flow.dashboard.lanes import LaneRecorder, recorder_of
from pccx_flow.dashboard.page import lanes_doc


def register_page() -> None:
    """Add the page (and an entry in the dashboard's "More" list) to distributed's apps."""
    from distributed.dashboard.scheduler import applications

    applications[ROUTE] = lanes_doc
    applications["/individual-pccx-lanes"] = lanes_doc


class LaneCountsHandler(web.RequestHandler):
    def initialize(self, recorder: LaneRecorder) -> None:
        self.recorder = recorder

    def get(self) -> None:
        self.set_header("Content-Type", "application/json")
        self.write(json.dumps(self.recorder.snapshot()))


def install(scheduler) -> LaneRecorder:
    """Add a `LaneRecorder` to `scheduler` (once) and serve its counters at `JSON_ROUTE`."""
    recorder = recorder_of(scheduler)
    if recorder is not None:
        return recorder
    from pccx_flow.dashboard.running import register_on

    recorder = LaneRecorder()
    scheduler.add_plugin(recorder)
    register_on(scheduler)  # workers then report when a task really runs
    scheduler.http_application.add_handlers(
        r".*", [(JSON_ROUTE, LaneCountsHandler, {"recorder": recorder})]
    )
    return recorder


def dask_setup(scheduler) -> None:
    """Preload hook."""
    install(scheduler)


register_page()
