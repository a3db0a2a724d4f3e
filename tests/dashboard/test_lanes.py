"""The lane recorder: erred tasks, the report's lanes page, a scheduler without the page."""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest

from pccx_flow.dashboard.client import fetch
from pccx_flow.errors import ExecutionError
from pccx_flow.execute.executor import execute_step
from pccx_flow.execute.state import new_decode_state


def test_erred_task_is_listed_with_node_and_one_line(lanes_cluster, tiny_config):
    from tests.execute.test_executor_machinery import handmade_graph

    _, client = lanes_cluster
    state = new_decode_state(tiny_config, "pccx")
    graph = handmade_graph(tiny_config, 0, fail=True)
    with pytest.raises(ExecutionError):
        execute_step(graph, None, state, kernels="handmade", client=client)
    errors = fetch(client)["errors"]
    mine = [e for e in errors if e["node"] == "pre.host.add"]
    assert mine, errors
    assert mine[-1]["lane"] == "host"  # no policy: rows are lane classes
    assert "deliberate failure" in mine[-1]["error"] and "\n" not in mine[-1]["error"]
    lane = fetch(client)["lanes"]["host"]
    assert lane["erred"] >= 1 and lane["running"] == 0


def test_report_has_the_lanes_page_beside_it(capsys, handmade_report, tmp_path):
    # capsys first: it must be capturing when the fixture's writer prints "wrote"
    text = handmade_report.read_text()
    assert "run.lanes.html" in text and "Bokeh" in text
    assert not re.search(r"<script[^>]*\bsrc=", text)  # inline: works offline
    page = (tmp_path / "run.lanes.html").read_text()
    assert not re.search(r"<script[^>]*\bsrc=", page)
    assert "pccx-measured-tasks" in page and "pre.host.add" in page
    assert "wrote" in capsys.readouterr().err


def test_scheduler_without_the_page_is_one_line_and_the_run_goes_on(capsys):
    from distributed import LocalCluster

    from pccx_flow.cli.run import _dashboard_client

    cluster = LocalCluster(
        processes=False, n_workers=1, threads_per_worker=1, protocol="tcp", host="127.0.0.1",
        dashboard_address="127.0.0.1:0", worker_dashboard_address="127.0.0.1:0",
    )  # fmt: skip
    try:
        args = SimpleNamespace(
            scheduler=cluster.scheduler_address,
            dashboard=False,
            report=None,
            connect_timeout=2.0,
        )
        with _dashboard_client(args) as (client, announce):
            assert client is not None and announce is None
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "has no pccx lanes page" in err[0]
        assert "--preload pccx_flow.dashboard.preload" in err[0]
    finally:
        cluster.close()


def test_running_is_what_the_workers_report_running(lanes_cluster, tiny_config):
    """Every task the recorder saw finish or fail was first reported running by its worker
    (the reporter the preload installs); none is left running once the step is done."""
    import time

    from tests.execute.test_executor_machinery import handmade_graph

    _, client = lanes_cluster
    state = new_decode_state(tiny_config, "pccx")
    execute_step(handmade_graph(tiny_config, 0), None, state, kernels="handmade",
                 client=client)  # fmt: skip
    deadline = time.monotonic() + 30
    while True:  # the workers' events travel in batches: wait for the last ones
        snap = fetch(client)
        lanes = snap["lanes"].values()
        settled = all(c["executing"] == 0 and c["started"] == c["done"] + c["erred"]
                      for c in lanes)  # fmt: skip
        if settled or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert snap["executing_reported"] and settled, snap["lanes"]
    assert sum(c["started"] for c in lanes) > 0
