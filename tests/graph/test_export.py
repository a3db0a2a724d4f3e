"""Graph files round-trip exactly and malformed files are refused with GraphError."""

from __future__ import annotations

import json

import pytest

from pccx_flow.errors import GraphError
from pccx_flow.graph.build import build_decode_graph
from pccx_flow.graph.check import check_graph
from pccx_flow.graph.export import read_graph, write_graph


def assert_same(g, h):
    assert list(g.nodes(data=True)) == list(h.nodes(data=True))
    assert list(g.edges(data=True)) == list(h.edges(data=True))
    assert g.graph == h.graph


@pytest.fixture(scope="module")
def tiny():
    return build_decode_graph("tiny", semantics="gemma3n", position=6)


def test_json_round_trip_is_exact(tiny, tmp_path):
    h = read_graph(write_graph(tiny, tmp_path / "step.json"))
    assert_same(tiny, h)
    check_graph(h)


def test_graphml_round_trip_is_exact(tmp_path):
    # a cut graph keeps the GraphML writer fast; it has every node and attribute kind
    g = build_decode_graph("tiny", position=6, layers=(0, 1))
    g.graph["note"] = None  # a None survives (GraphML itself has no null)
    h = read_graph(write_graph(g, tmp_path / "step.graphml"))
    assert_same(g, h)


def test_costed_graph_round_trips(tmp_path):
    from pccx_flow.hardware.profile import load_profile

    g = build_decode_graph("tiny", position=1, layers=(8, 10), profile=load_profile("v002-spec"))
    assert_same(g, read_graph(write_graph(g, tmp_path / "c.json")))


def test_explicit_format_overrides_the_suffix(tiny, tmp_path):
    p = write_graph(tiny, tmp_path / "step.txt", fmt="json")
    assert json.loads(p.read_text())["format"] == "pccx-flow-graph"
    assert_same(tiny, read_graph(p, fmt="json"))


@pytest.mark.parametrize(
    ("name", "text", "fragment"),
    [
        ("a.json", "{not json", "not valid JSON"),
        ("b.json", json.dumps({"nodes": []}), "not a pccx-flow graph file"),
        ("c.json", json.dumps({"format": "pccx-flow-graph", "version": 99, "graph": {}}),
         "version 99"),
        ("d.json", json.dumps({"format": "pccx-flow-graph", "version": 2, "graph": {"x": 1}}),
         "malformed node-link body"),
        ("g.json", json.dumps({"format": "pccx-flow-graph", "version": 1, "graph": {}}),
         "version 1; this pccx-flow reads version 2: re-export"),
        ("e.graphml", "<graphml><oops", "not a readable GraphML file"),
        ("f.graphml", '<?xml version="1.0"?><graphml xmlns="http://graphml.graphdrawing.org/xmlns">'
         '<graph edgedefault="directed"/></graphml>', "not a pccx-flow graph"),
    ],
)  # fmt: skip
def test_malformed_files_are_refused(tmp_path, name, text, fragment):
    p = tmp_path / name
    p.write_text(text)
    with pytest.raises(GraphError, match=fragment):
        read_graph(p)


def test_graphml_with_a_foreign_attribute_is_refused(tmp_path):
    g = build_decode_graph("tiny", layers=(9, 10))
    p = write_graph(g, tmp_path / "g.graphml")
    p.write_text(p.read_text().replace('json:"HOST"', "HOST", 1))
    with pytest.raises(GraphError, match="was not written by pccx-flow"):
        read_graph(p)


def test_missing_file_and_unknown_format(tmp_path):
    with pytest.raises(GraphError, match="no graph file"):
        read_graph(tmp_path / "none.json")
    with pytest.raises(GraphError, match="cannot tell the graph format"):
        read_graph(tmp_path / "x.yaml")
    with pytest.raises(GraphError, match="cannot tell the graph format"):
        write_graph(build_decode_graph("tiny", layers=(9, 10)), tmp_path / "x.csv")


def test_unwritable_path(tmp_path):
    with pytest.raises(GraphError, match="cannot write"):
        write_graph(build_decode_graph("tiny", layers=(9, 10)), tmp_path / "no" / "dir.json")


def test_a_fifo_or_a_device_is_named_for_what_it_is(tmp_path):
    import os

    from pccx_flow.errors import GraphError
    from pccx_flow.graph.export import read_graph

    fifo = tmp_path / "g.json"
    os.mkfifo(fifo)
    with pytest.raises(GraphError, match="is a FIFO .named pipe., not a graph file"):
        read_graph(fifo)  # and does not block on the pipe
    with pytest.raises(GraphError, match="/dev/zero is a character device"):
        read_graph("/dev/zero")
    with pytest.raises(GraphError, match="is a folder"):
        read_graph(tmp_path)
    with pytest.raises(GraphError, match="no graph file at"):
        read_graph(tmp_path / "missing.json")
