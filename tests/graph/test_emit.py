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
