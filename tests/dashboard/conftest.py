"""An in-process cluster whose scheduler runs the pccx lanes page, and helpers to read it."""

from __future__ import annotations

import urllib.request
from pathlib import Path
from types import SimpleNamespace

import pytest


@pytest.fixture(scope="module")
def lanes_cluster():
    """(cluster, client) with the lanes preload; every server on 127.0.0.1."""
    from pccx_flow.dashboard.cluster import loopback_cluster

    with loopback_cluster() as (cluster, client):
        yield cluster, client


@pytest.fixture
def handmade_report(lanes_cluster, tiny_config, tmp_path) -> Path:
    """``run.html`` in `tmp_path`: `run --report`'s writer around one handmade tiny step on
    the lanes cluster (its lanes page beside it)."""
    from pccx_flow.cli.run import _report
    from pccx_flow.execute.executor import execute_step
    from pccx_flow.execute.state import new_decode_state
    from tests.execute.test_executor_machinery import handmade_graph

    _, client = lanes_cluster
    report = tmp_path / "run.html"
    state = new_decode_state(tiny_config, "pccx")
    with _report(SimpleNamespace(report=str(report)), client):
        execute_step(handmade_graph(tiny_config, 0), None, state, kernels="handmade",
                     client=client)  # fmt: skip
    return report


def fetch(url: str) -> str:
    with urllib.request.urlopen(url, timeout=60) as resp:
        return resp.read().decode("utf-8")


def pull_document(url: str):
    """The live Bokeh document behind a served page, pulled over its websocket (what a
    browser receives after loading the page's HTML)."""
    from bokeh.client import pull_session

    session = pull_session(url=url)
    try:
        return session.document
    finally:
        session.close()


def named(doc, name: str):
    model = doc.select_one({"name": name})
    assert model is not None, f"no Bokeh model named {name!r} in the page"
    return model
