"""Fusion groups: every node once, members in order, an acyclic task graph, parallel work kept.

Random DAGs (hypothesis) try to break the acyclicity argument of `pccx_flow.execute.fuse`;
the decode graphs check the shapes that matter in practice.
"""

from __future__ import annotations

import networkx as nx
from hypothesis import given, settings
from hypothesis import strategies as st

from pccx_flow.execute.fuse import fusion_groups, group_graph
from pccx_flow.execute.plan import plan_graph
from pccx_flow.graph.build import build_decode_graph
from pccx_flow.model.config import get_config


def _assert_valid(graph: nx.DiGraph, order: list, groups: dict) -> None:
    position = {n: i for i, n in enumerate(order)}
    members = [n for ms in groups.values() for n in ms]
    assert sorted(members, key=position.get) == order  # every node exactly once
    for root, ms in groups.items():  # members run in a topological order, root first
        assert ms[0] == root
        assert [position[n] for n in ms] == sorted(position[n] for n in ms)
    assert nx.is_directed_acyclic_graph(group_graph(graph, groups))


@st.composite
def weighted_dags(draw):
    """A random DAG with random node costs and one of its topological orders."""
    n = draw(st.integers(1, 14))
    g = nx.DiGraph()
    sizes = st.sampled_from([0, 10, 1e4, 1e6, 1e7, 5e7])
    for i in range(n):
        g.add_node(i, weight_bytes=draw(sizes), act_bytes=draw(sizes))
    for j in range(n):
        for i in range(j):
            if draw(st.booleans()):
                g.add_edge(i, j)
    order = list(nx.lexicographical_topological_sort(g, key=lambda v: draw(st.integers(0, 9))))
    return g, order


@settings(max_examples=300, deadline=None)
@given(
    case=weighted_dags(),
    workers=st.integers(1, 6),
    grain=st.sampled_from([0.0, 1e-6, 1e-3, 1.0]),
)
def test_random_dags_give_valid_acyclic_groups(case, workers, grain):
    graph, order = case
    _assert_valid(graph, order, fusion_groups(graph, order, workers, grain))


def test_decode_graph_groups_for_one_to_eight_workers(tiny_config):
    g = build_decode_graph(tiny_config, semantics="gemma3n", position=5)
    order = list(plan_graph(g))
    sizes = {}
    for workers in (1, 2, 4, 8):
        groups = fusion_groups(g, order, workers)
        _assert_valid(g, order, groups)
        sizes[workers] = len(groups)
    assert sizes[1] == 1  # one thread: the whole step is one task
    assert all(1 < sizes[w] < len(order) for w in (2, 4, 8))
    # A grain of zero charges nothing for a task: more tasks than the default grain.
    assert len(fusion_groups(g, order, 2, grain=0.0)) > sizes[2]


def test_one_cut_per_producer_run_whatever_the_edge_order():
    """c needs p1 and p2, both in one open run on the other worker: that run is cut once,
    after the later of them, so p1 and p2 stay one task whichever edge was added first."""
    results = []
    for first, second in (("p1", "p2"), ("p2", "p1")):
        g = nx.DiGraph()
        g.add_node("big", weight_bytes=3.5e7)  # ~10 ms
        g.add_node("q", weight_bytes=7e7)  # ~20 ms
        for n in ("p1", "p2", "c"):
            g.add_node(n)
        g.add_edges_from([(first, "c"), (second, "c"), ("big", "c")])
        groups = fusion_groups(g, ["big", "p1", "p2", "q", "c"], 2, 1e-3)
        _assert_valid(g, ["big", "p1", "p2", "q", "c"], groups)
        results.append(groups)
    assert results[0] == results[1]
    assert any(ms[:2] == ["p1", "p2"] for ms in results[0].values())


def test_wide_e4b_gemvs_spread_over_the_workers():
    """The 32 tiles of one E4B FFN gate projection go to more than one task when there are
    two workers (tiny's tiles are too small to be worth a task of their own)."""
    g = build_decode_graph(get_config("e4b"), semantics="pccx", position=0)
    order = list(plan_graph(g))
    tiles = [n for n in order if n.startswith("L03.ffn.gate.t")]
    assert len(tiles) == 32
    tasks_of_tiles = {}
    for workers in (1, 2):
        root_of = {n: r for r, ms in fusion_groups(g, order, workers).items() for n in ms}
        tasks_of_tiles[workers] = len({root_of[n] for n in tiles})
    assert tasks_of_tiles[1] == 1
    assert 2 <= tasks_of_tiles[2] <= 8  # split, still several tiles per task


def test_degenerate_inputs():
    g = nx.DiGraph()
    assert fusion_groups(g, [], 2) == {}
    g.add_node("a")
    assert fusion_groups(g, ["a"], 3) == {"a": ["a"]}
    assert fusion_groups(g, ["a"], 0) == {"a": ["a"]}  # fewer than one worker means one
