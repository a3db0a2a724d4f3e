"""The pccx lanes page of the Dask dashboard: measured tasks by pccx lane beside the plan.

- `lanes`: a scheduler plugin that records every pccx task (lane, node, layer, block, op,
  kernel, compute interval), per-lane counters, progress and errors, plus the planned
  schedule the client announces per step;
- `page`: the Bokeh document served at ``/pccx-lanes`` on the scheduler's own dashboard, and
  the static builders it shares with the run report;
- `preload`: the scheduler preload that installs both (``dask scheduler --preload
  pccx_flow.dashboard.preload``);
- `client`: the client side: is the page there, announce each step's plan, fetch the data.
"""

ROUTE = "/pccx-lanes"
JSON_ROUTE = "/pccx-lanes.json"
PLUGIN_NAME = "pccx-lanes"
