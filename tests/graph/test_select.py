"""Selecting and counting parts of a decode graph."""

from __future__ import annotations

import pytest

from pccx_flow.errors import InputError
from pccx_flow.graph.build import build_decode_graph
from pccx_flow.graph.select import count_by, edge_count_by_source, select, select_nodes


@pytest.fixture(scope="module")
def tiny():
    return build_decode_graph("tiny", position=2)


def test_select_by_layer_and_block(tiny):
    nodes = select_nodes(tiny, layers=[3], blocks=["laurel"])
    assert nodes and all(n.startswith("L03.laurel.") for n in nodes)
    assert len(nodes) == sum(1 for n in tiny if n.startswith("L03.laurel."))


def test_select_by_op_and_lane(tiny):
    host = select_nodes(tiny, ops=["HOST"])
    assert host == select_nodes(tiny, lane_classes=["host"])
    assert {tiny.nodes[n]["op"] for n in host} == {"HOST"}


def test_subgraph_keeps_inner_edges_only(tiny):
    sub = select(tiny, layers=[0])
    assert set(sub) == set(select_nodes(tiny, layers=[0]))
    assert all(tiny.has_edge(u, v) for u, v in sub.edges)
    assert sub.number_of_edges() == sum(
        1 for u, v in tiny.edges if tiny.nodes[u]["layer"] == 0 == tiny.nodes[v]["layer"]
    )


def test_empty_selection_is_an_input_error(tiny):
    with pytest.raises(InputError, match="no node of the graph matches"):
        select(tiny, blocks=["nope"])


def test_counts(tiny):
    by_op = count_by(tiny, "op")
    assert sum(by_op.values()) == tiny.number_of_nodes()
    assert list(by_op.values()) == sorted(by_op.values(), reverse=True)
    edges = edge_count_by_source(tiny, "op")
    assert sum(edges.values()) == tiny.number_of_edges()
    assert "MEMSET" in edges  # each θ MEMSET feeds its layer's RoPE phase
