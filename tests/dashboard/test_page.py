"""The /pccx-lanes page served by a scheduler with the preload, fetched over HTTP."""

from __future__ import annotations

import pytest

from pccx_flow.dashboard import ROUTE
from pccx_flow.dashboard.client import PlanAnnouncer, fetch, page_available, page_url
from pccx_flow.execute.generate import generate

from .conftest import fetch as http_get
from .conftest import named, pull_document


@pytest.fixture(scope="module")
def tiny_run(lanes_cluster, tiny_ckpt):
    """One `tiny` step scheduled by a policy, run fused on the cluster with the page on."""
    _, client = lanes_cluster
    before = {t["key"] for t in client.get_task_stream(start=0)}
    result = generate(
        tiny_ckpt, [2], 1, policy="critical-path", client=client, fuse=True,
        on_plan=PlanAnnouncer(client),
    )  # fmt: skip
    ran = [t for t in client.get_task_stream(start=0) if t["key"] not in before]
    return result, ran


def test_page_lists_lanes_and_tasks_of_every_lane_that_ran(lanes_cluster, tiny_run):
    cluster, client = lanes_cluster
    _, ran = tiny_run
    # What ran, by Dask's own task stream: keys lead with op and scheduled lane.
    lanes_ran = {str(t["key"]).split("-")[1] for t in ran if t.get("status") == "OK"}
    assert lanes_ran and all(lane[-1].isdigit() for lane in lanes_ran)
    url = page_url(client)
    assert url == f"http://127.0.0.1:{cluster.scheduler.http_server.port}{ROUTE}"
    page = http_get(url)  # the served page: Bokeh's loader and the document's root
    assert "<title>pccx lanes</title>" in page and "data-root-id" in page
    doc = pull_document(url)  # its document, as the page's websocket delivers it
    fig = named(doc, "pccx-measured")
    factors = list(fig.y_range.factors)
    assert lanes_ran <= set(factors)
    for lane in ("gemv0", "gemv1", "sfu0", "dma0", "host0"):  # the plan's lanes are rows
        assert lane in factors
    tasks = named(doc, "pccx-measured-tasks").data
    # a fused task is drawn on its heaviest member's lane (its key names its first node's)
    assert set(tasks["lane"]) <= set(factors)
    classes = {lane.rstrip("0123456789") for lane in tasks["lane"]}
    assert len(classes) >= 3 and "gemv" in classes
    fused = [n for n in tasks["node"] if "fused)" in n]
    assert fused and all(n.split(" (+")[0].count(".") >= 1 for n in fused)
    assert len(tasks["node"]) == len([t for t in ran if t.get("status") == "OK"])
    # The planned view is there, drawn by the Gantt builder, with the model-estimate label.
    planned = named(doc, "pccx-planned-bars").data
    assert len(planned["node"]) > len(tasks["node"])  # every node; the tasks were fused
    subtitle = named(doc, "pccx-planned-subtitle").text
    assert "model estimate from profile v002-spec, not measured" in subtitle
    assert "step 1 of 1" in named(doc, "pccx-progress").text
    counters = named(doc, "pccx-counters").text
    assert all(f"<td>{lane}</td>" in counters for lane in set(tasks["lane"]))


def test_counters_progress_and_json(lanes_cluster, tiny_run, tiny_config):
    _, client = lanes_cluster
    _, ran = tiny_run
    snap = fetch(client)
    assert page_available(client)
    done = sum(c["done"] for c in snap["lanes"].values())
    assert done >= len([t for t in ran if t.get("status") == "OK"])
    assert all(c["running"] == 0 and c["erred"] == 0 for c in snap["lanes"].values())
    progress = snap["progress"]
    assert progress["n_layers"] == tiny_config.n_layers
    assert progress["layers_done"] == progress["n_layers"]
    assert progress["tasks_done"] == progress["tasks"] > 0
    assert (progress["step"], progress["steps"]) == (1, 1)
    assert snap["plan"]["gantt"]["title"].startswith("critical-path schedule of one tiny")


def test_a_scheduler_without_the_preload_has_no_page(tmp_path):
    from distributed import Client, LocalCluster

    cluster = LocalCluster(
        processes=False, n_workers=1, threads_per_worker=1,
        dashboard_address="127.0.0.1:0", worker_dashboard_address="127.0.0.1:0",
    )  # fmt: skip
    try:
        with Client(cluster, set_as_default=False) as client:
            assert not page_available(client)
            assert fetch(client) is None
    finally:
        cluster.close()


def test_step_marks_and_planned_beside_measured_shares():
    from pccx_flow.dashboard.page import row_columns, shares_html, step_marks

    rows = [
        {"lane": "gemv0", "step": 1, "start": 10.0, "stop": 11.0},
        {"lane": "host0", "step": 1, "start": 11.0, "stop": 12.0},
        {"lane": "gemv0", "step": 2, "start": 20.0, "stop": 23.0},
        {"lane": "host0", "step": 2, "start": 23.0, "stop": 24.0},
    ]
    assert step_marks(row_columns(rows, 10.0)) == {"x": [0.0, 10.0], "step": [1, 2]}
    plan = {"gantt": {"lanes": [{"name": "gemv0", "busy": 0.9}, {"name": "host0",
                                                                  "busy": 0.1}]}}  # fmt: skip
    text = shares_html(rows, plan, ["gemv0", "host0", "sfu0"])
    assert "measured busy, step 2 (CPU wall time)" in text and "model estimate" in text
    # step 2 spans 4 s: gemv0 busy 3 s, host0 1 s; sfu0 neither planned nor measured
    assert "<td>gemv0</td><td>90.0%</td><td>75.0%</td>" in text
    assert "<td>host0</td><td>10.0%</td><td>25.0%</td>" in text and "sfu0" not in text
