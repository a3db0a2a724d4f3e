"""A fused task is drawn on the lane of the member that does its work."""

from __future__ import annotations

import networkx as nx

from pccx_flow.execute.dask_graph import heaviest_member
from pccx_flow.execute.fuse import fusion_groups
from pccx_flow.execute.plan import plan_graph
from pccx_flow.graph.build import build_decode_graph


def test_heaviest_member_is_the_one_with_the_most_work():
    g = nx.DiGraph()
    g.add_node("emb", op="MEMCPY", lane_class="dma", macs=0, act_bytes=4096)
    g.add_node("gemv", op="GEMV", lane_class="gemv", macs=10**6, weight_bytes=10**6)
    g.add_node("add", op="HOST", lane_class="host", macs=0, act_bytes=64)
    assert heaviest_member(g, ["emb", "gemv", "add"]) == "gemv"
    assert heaviest_member(g, ["emb", "add"]) == "emb"  # bytes when no multiply-adds
    assert heaviest_member(g, ["add"]) == "add"


def test_a_steps_first_fused_group_is_not_drawn_as_its_first_node(tiny_config):
    graph = build_decode_graph(tiny_config, position=3)
    calls = plan_graph(graph)
    groups = fusion_groups(graph, list(calls), 2)
    moved = 0
    for root, members in groups.items():
        heavy = heaviest_member(graph, members)
        macs = [int(graph.nodes[n].get("macs") or 0) for n in members]
        assert int(graph.nodes[heavy].get("macs") or 0) == max(macs)
        moved += graph.nodes[heavy]["lane_class"] != graph.nodes[root]["lane_class"]
    assert moved >= 1  # some groups are drawn on another lane class than their first node
