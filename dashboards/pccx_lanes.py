"""The pccx lanes page for a Dask scheduler you start yourself, as a preload file.

    dask scheduler --host 127.0.0.1 --dashboard-address 127.0.0.1:8787 \\
        --preload dashboards/pccx_lanes.py        # or: --preload pccx_flow.dashboard.preload
    dask worker tcp://127.0.0.1:8786 --host 127.0.0.1 --dashboard-address 127.0.0.1:0
    pccx-flow run --synthetic tiny --scheduler tcp://127.0.0.1:8786 --policy heft
    # open http://127.0.0.1:8787/pccx-lanes (counters as JSON: /pccx-lanes.json)

Everything lives in `pccx_flow.dashboard`; this file only re-exports its preload.
"""

from pccx_flow.dashboard import JSON_ROUTE as ROUTE  # noqa: F401
from pccx_flow.dashboard.preload import dask_setup, install  # noqa: F401
