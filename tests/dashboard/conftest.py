"""An in-process cluster whose scheduler runs the pccx lanes page, and helpers to read it."""

from __future__ import annotations

import urllib.request

import pytest


@pytest.fixture(scope="module")
def lanes_cluster():
    """(cluster, client) with the lanes preload; every server on 127.0.0.1."""
    from pccx_flow.dashboard.cluster import loopback_cluster

    with loopback_cluster() as (cluster, client):
        yield cluster, client


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
