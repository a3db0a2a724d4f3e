"""The client side of the lanes page: find it, announce each step's plan, fetch its data.

All calls go through `Client.run_on_scheduler` with functions of
`pccx_flow.dashboard.lanes` and plain data, so a scheduler without the preload simply
answers "not installed" (`page_available` is False) and the run goes on without the page.
"""

from __future__ import annotations

from typing import Any

from pccx_flow.dashboard import ROUTE
from pccx_flow.dashboard.lanes import fetch_snapshot, has_recorder, send_device, send_plan


def page_available(client) -> bool:
    """Whether the client's scheduler runs the lane recorder (was started with the preload)."""
    try:
        return bool(client.run_on_scheduler(has_recorder))
    except Exception:  # noqa: BLE001 - a scheduler that cannot import pccx_flow has no page
        return False


def page_url(client) -> str | None:
    """The lanes page's address: the scheduler's dashboard port, on 127.0.0.1 for an
    in-process or loopback scheduler, else on the scheduler's host."""
    from distributed.comm import get_address_host

    info = client.scheduler_info()
    port = (info.get("services") or {}).get("dashboard")
    if not port:
        return None
    address = info.get("address") or ""
    host = "127.0.0.1"
    if address.startswith(("tcp://", "tls://")):
        host = get_address_host(address)
    return f"http://{host}:{port}{ROUTE}"


def plan_message(graph, schedule, step: int, steps: int, position: int) -> dict:
    """What the page is told before a step runs: where the generation is, the layer count,
    and with a schedule its Gantt data (the planned view)."""
    from pccx_flow.render.gantt import gantt_data, gantt_payload

    n_layers = (graph.graph.get("config_dict") or {}).get("n_layers")
    gantt = gantt_payload(gantt_data(schedule, graph)) if schedule is not None else None
    return {
        "step": step,
        "steps": steps,
        "position": position,
        "n_layers": n_layers,
        "gantt": gantt,
    }


class PlanAnnouncer:
    """``on_plan`` for `pccx_flow.execute.generate.generate`: sends each step's plan."""

    def __init__(self, client) -> None:
        self.client = client

    def __call__(self, position: int, n_positions: int, graph, schedule: Any) -> None:
        msg = plan_message(graph, schedule, position + 1, n_positions, position)
        self.client.run_on_scheduler(send_plan, msg)


class DeviceAnnouncer:
    """``on_view`` for `pccx_flow.cluster.device_steps.DeviceSteps`: sends each device step's
    plan-vs-device view to the page."""

    def __init__(self, client) -> None:
        self.client = client

    def __call__(self, view: dict) -> None:
        self.client.run_on_scheduler(send_device, view)


def fetch(client) -> dict | None:
    """The recorder's counters, progress, errors, task rows and plan (None without it)."""
    return client.run_on_scheduler(fetch_snapshot)
