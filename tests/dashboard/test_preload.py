"""The scheduler preload file `dashboards/pccx_lanes.py`: lane counters served as JSON."""

from __future__ import annotations

import importlib.util
import json
import urllib.request
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from pccx_flow.execute.executor import execute_step
from pccx_flow.execute.plan import plan_graph
from pccx_flow.execute.state import new_decode_state

PRELOAD = Path(__file__).resolve().parents[2] / "dashboards" / "pccx_lanes.py"


def _load_preload():
    spec = importlib.util.spec_from_file_location("pccx_lanes", PRELOAD)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_lane_counts_served_on_loopback(tiny_config):
    from pccx_flow.dashboard.cluster import loopback_cluster

    # The hand-made graph and its kernel table live in the machinery tests.
    from tests.execute.test_executor_machinery import expected_logits, handmade_graph

    pccx_lanes = _load_preload()
    with loopback_cluster(preload=(str(PRELOAD),)) as (cluster, client):
        g = handmade_graph(tiny_config, 0)
        calls = plan_graph(g)
        lanes = {n: f"{g.nodes[n]['lane_class']}0" for n in calls}
        sched = SimpleNamespace(
            slots={n: SimpleNamespace(lane=lanes[n], node=n) for n in calls},
            order=lambda: [SimpleNamespace(node=n) for n in calls],
        )
        state = new_decode_state(tiny_config, "pccx")
        out = execute_step(g, None, state, kernels="handmade", client=client, schedule=sched)
        np.testing.assert_array_equal(out.logits, expected_logits(tiny_config, 1))
        port = cluster.scheduler.http_server.port
        assert _listening_hosts(port) == {"127.0.0.1"}, "dashboard must bind loopback only"
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{pccx_lanes.ROUTE}") as resp:
            data = json.loads(resp.read())
    want: dict[str, int] = {}
    for lane in lanes.values():
        want[lane] = want.get(lane, 0) + 1
    got = {lane: row["done"] for lane, row in data["lanes"].items()}
    assert got == want
    assert all(row["running"] == 0 and row["erred"] == 0 for row in data["lanes"].values())


def _listening_hosts(port: int) -> set[str]:
    """IPv4 addresses with a socket listening on `port`, read from /proc/net/tcp (Linux)."""
    import ipaddress
    from pathlib import Path

    table = Path("/proc/net/tcp")
    if not table.exists():
        pytest.skip("needs /proc/net/tcp to see where the dashboard listens")
    hosts = set()
    for line in table.read_text().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        addr, hexport = local.split(":")
        if state == "0A" and int(hexport, 16) == port:  # 0A = LISTEN
            hosts.add(str(ipaddress.IPv4Address(bytes.fromhex(addr)[::-1])))
    return hosts
