"""GraphWriter: edges come from the tensors a node reads, one edge per writer."""

import networkx as nx
import pytest

from pccx_flow.graph.emit import GraphWriter, tensor_bytes


def writer_with_source() -> tuple[GraphWriter, list[dict]]:
    """A writer whose node ``a`` wrote two float32 vectors, ``x`` (4 elements) and ``y`` (2)."""
    w = GraphWriter(nx.DiGraph())
    outs = w.add(
        "a", kernel="gemv", layer=0, block="b", inputs=[], outputs=[("x", (4,)), ("y", (2,))]
    )
    return w, outs


def test_tensors_read_from_one_writer_share_one_edge_with_their_bytes_summed():
    w, (x, y) = writer_with_source()
    (z,) = w.add("b", kernel="gemv", layer=0, block="b", inputs=[x, y, x], outputs=[("z", (1,))])
    w.add("c", kernel="gemv", layer=0, block="b", inputs=[z, y], outputs=[("o", (1,))])
    g = w.graph
    assert list(g.edges) == [("a", "b"), ("a", "c"), ("b", "c")]
    # x read twice is one tensor on the edge, counted once
    assert g.edges["a", "b"] == {"tensor": "x", "tensors": ["x", "y"], "bytes": 16 + 8}
    assert list(g.pred["c"]) == ["b", "a"]  # in the order the node reads them
    assert g.edges["a", "c"]["bytes"] == tensor_bytes(y) == 8
    # act_bytes defaults to bytes read (each input as listed) plus written
    assert g.nodes["b"]["act_bytes"] == 16 + 8 + 16 + 4


def test_a_tensor_read_before_it_is_written_or_written_twice_is_a_build_bug():
    w, (x, _) = writer_with_source()
    ghost = {"name": "ghost", "shape": [1], "dtype": "float32"}
    with pytest.raises(RuntimeError, match="b reads ghost before any node writes it"):
        w.add("b", kernel="gemv", layer=0, block="b", inputs=[x, ghost], outputs=[("z", (1,))])
    with pytest.raises(RuntimeError, match="duplicate node id a"):
        w.add("a", kernel="gemv", layer=0, block="b", inputs=[], outputs=[("q", (1,))])
    with pytest.raises(RuntimeError, match="tensor x written twice"):
        w.add("d", kernel="gemv", layer=0, block="b", inputs=[], outputs=[("x", (1,))])


def test_a_tensor_written_twice_by_one_node_is_refused_and_a_refused_node_changes_nothing():
    w, (x, _) = writer_with_source()
    before = (list(w.graph.nodes), list(w.graph.edges), dict(w.writer))
    with pytest.raises(RuntimeError, match="tensor q written twice"):
        twice = [("q", (1,)), ("q", (2,))]
        w.add("b", kernel="gemv", layer=0, block="b", inputs=[x], outputs=twice)
    ghost = {"name": "ghost", "shape": [1], "dtype": "float32"}
    with pytest.raises(RuntimeError, match="reads ghost"):
        w.add("b", kernel="gemv", layer=0, block="b", inputs=[x, ghost], outputs=[("z", (1,))])
    assert (list(w.graph.nodes), list(w.graph.edges), dict(w.writer)) == before


def test_filling_a_digraph_directly_builds_the_graph_the_public_methods_build(monkeypatch):
    """The writer's own dict-of-dicts path against NetworkX's add_node / add_edges_from on a
    whole small decode step: same nodes, attributes, edges, neighbour order, and a graph
    the public methods go on editing (an edge's dict is the same object from both ends)."""
    from pccx_flow.graph.build import build_decode_graph

    assert GraphWriter(nx.DiGraph())._direct  # the builders' graphs take the direct path
    direct = build_decode_graph("tiny", position=3)
    init = GraphWriter.__init__

    def public_only(self, graph):
        init(self, graph)
        self._direct = False

    monkeypatch.setattr(GraphWriter, "__init__", public_only)
    public = build_decode_graph("tiny", position=3)
    assert len(direct) > 100
    assert list(direct.nodes(data=True)) == list(public.nodes(data=True))
    assert list(direct.edges(data=True)) == list(public.edges(data=True))
    for n in public:
        assert list(direct.succ[n]) == list(public.succ[n])
        assert list(direct.pred[n]) == list(public.pred[n])
    assert direct.graph == public.graph
    assert all(direct.succ[u][v] is direct.pred[v][u] for u, v in direct.edges)
    u, v = next(iter(direct.edges))
    direct.edges[u, v]["bytes"] = -1
    assert direct.pred[v][u]["bytes"] == -1
    direct.remove_node(v)
    assert v not in direct.succ[u] and v not in direct


def test_a_frozen_graph_is_written_through_the_public_methods_which_refuse_it():
    graph = nx.freeze(nx.DiGraph())
    w = GraphWriter(graph)
    with pytest.raises(nx.NetworkXError, match="Frozen graph"):
        w.add("a", kernel="gemv", layer=0, block="b", inputs=[], outputs=[("x", (1,))])
    assert len(graph) == 0 and not w.writer
