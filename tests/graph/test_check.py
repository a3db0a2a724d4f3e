"""check_graph accepts built graphs and names the invariant a broken graph violates."""

from __future__ import annotations

import copy

import pytest

from pccx_flow.errors import GraphError
from pccx_flow.graph.build import build_decode_graph
from pccx_flow.graph.check import check_graph
from pccx_flow.graph.nodes import tensor


@pytest.fixture(scope="module")
def tiny():
    return build_decode_graph("tiny", position=5)


@pytest.fixture
def g(tiny):
    return copy.deepcopy(tiny)


@pytest.fixture(scope="module")
def e4b():
    return build_decode_graph("e4b", position=1023)


@pytest.mark.parametrize("semantics", ["pccx", "gemma3n"])
@pytest.mark.parametrize(("position", "layers"), [(0, None), (9, None), (9, (2, 7)), (3, (6, 10))])
def test_built_tiny_graphs_pass(semantics, position, layers):
    check_graph(build_decode_graph("tiny", semantics=semantics, position=position, layers=layers))


def test_built_e4b_graph_passes_with_evidence_for_each_invariant(e4b):
    proofs = dict(check_graph(e4b))
    assert proofs["LAuReL ∥ attention"] == "no path between them in any of 35 layers (0-34)"
    assert proofs["KV sharing"] == (
        "layers 0-19 write their own K and V rows; layers 20-34 project no K/V and read the "
        "slots of 18 (local), 19 (global)"
    )
    assert proofs["sparse gate"].startswith("a Gaussian top-k cutoff on layers 0-9, on none")
    assert "1e6 on layers 4, 9, 14, 19, 24, 29, 34, 1e4 on the other 28" in proofs["RoPE θ cycle"]
    assert f"{e4b.number_of_nodes():,} nodes" in proofs["acyclic"]


def test_evidence_covers_only_the_layers_of_a_cut_graph():
    proofs = dict(check_graph(build_decode_graph("tiny", position=3, layers=(6, 8))))
    assert proofs["KV sharing"] == "layers 6-7 project no K/V and read the slots of 3 (local)"
    assert proofs["sparse gate"].startswith("no sparse layer here")
    assert proofs["RoPE θ cycle"].endswith("θ = 1e4 on all 2 layers")


def _raises(graph, *fragments):
    with pytest.raises(GraphError) as info:
        check_graph(graph)
    msg = str(info.value)
    assert "\n" not in msg
    for f in fragments:
        assert f in msg, msg
    return msg


def test_cycle_is_named(g):
    g.add_edge("L02.ffn.residual", "L02.altup_pred.router.t00")
    msg = _raises(g, "cycle of")
    assert "L02.ffn.residual" in msg and "L02.altup_pred.router.t00" in msg
    assert len(msg) < 400


def test_ple_writing_row_zero(g):
    g.nodes["L03.ple_mix.write"]["params"]["rows"] = [0, 1, 2]
    _raises(g, "L03.ple_mix.write", "never row 0")


def test_ple_adding_into_the_main_row(g):
    w = g.nodes["L03.ple_mix.write"]
    r0 = g.nodes["L03.altup_corr.correct.r0"]["outputs"][0]
    w["inputs"][-1] = r0  # row 3's slot now reads the main stream
    g.add_edge("L03.altup_corr.correct.r0", "L03.ple_mix.write", tensor=r0["name"],
               tensors=[r0["name"]], bytes=4)  # fmt: skip
    _raises(g, "L03.ple_mix.write", "not the corrected stream row 3")


def test_laurel_to_attention_edge(g):
    g.add_edge("L01.laurel.left.t00", "L01.attn.q_proj.h0", tensor="x", tensors=["x"], bytes=4)
    _raises(g, "layer 1", "LAuReL", "L01.attn.")


def test_attention_to_laurel_edge(g):
    g.add_edge(
        "L01.attn.o_proj.t00.c01", "L01.laurel.right.t00", tensor="x", tensors=["x"], bytes=4
    )
    _raises(g, "layer 1", "LAuReL", "path from attention")


def test_k_projection_on_a_kv_sharing_layer(e4b):
    g = e4b.copy()  # shallow: only a new node is added
    src = "L25.residual.input_norm.gamma"
    x = g.nodes[src]["outputs"][0]
    g.add_node(
        "L25.attn.k_proj.h0",
        **{**g.nodes["L18.attn.k_proj.h0"], "layer": 25, "inputs": [x], "outputs": [
            tensor("L25.attn.k_proj.h0", [256], "float32")],
           "weight": {"key": "layers.25.self_attn.k_proj.weight", "rows": [0, 256]}},
    )  # fmt: skip
    g.add_edge(src, "L25.attn.k_proj.h0", tensor=x["name"], tensors=[x["name"]], bytes=8192)
    _raises(g, "layer 25 shares the KV cache of layer 18", "L25.attn.k_proj.h0")


def test_kv_read_of_the_wrong_slot(g):
    g.nodes["L06.attn.k_read.g0"]["params"]["cache_layer"] = 4
    _raises(g, "L06.attn.k_read.g0", "layer 3's cache")


def test_kv_write_without_a_kv_head(g):
    del g.nodes["L00.attn.k_write.g1"]["params"]["kv_head"]
    _raises(g, "L00.attn.k_write.g1", "names no KV head")


def test_kv_read_of_another_kv_head(g):
    g.nodes["L06.attn.k_read.g1"]["params"]["kv_head"] = 0
    _raises(g, "KV head 1", "L06.attn.k_read.g1")


def test_sparse_gate_on_a_dense_layer(g):
    g.nodes["L05.ffn.residual"]["kernel"] = "cutoff"
    _raises(g, "dense layer 5", "L05.ffn.residual")


def test_sparse_layer_without_its_gate(g):
    g.nodes["L01.ffn.cutoff"]["kernel"] = "add"
    _raises(g, "sparse layer 1")


def test_wrong_theta(g):
    g.nodes["L04.const.theta"]["params"]["value"] = 10_000.0
    _raises(g, "L04.const.theta", "1000000.0")


def test_lane_that_cannot_run_the_op(g):
    g.nodes["L00.altup_pred.tanh"]["lane_class"] = "sfu"
    _raises(g, "L00.altup_pred.tanh", "cannot run a HOST node")


def test_host_op_given_to_the_sfu(g):
    a = g.nodes["L00.altup_pred.tanh"]
    a["op"], a["lane_class"] = "CVO", "sfu"
    _raises(g, "L00.altup_pred.tanh", "kernel 'tanh' is a HOST kernel")


def test_tensor_read_without_a_writer(g):
    g.nodes["L02.ffn.residual"]["inputs"].append(tensor("nowhere", [1], "float32"))
    _raises(g, "L02.ffn.residual", "nowhere", "no node writes")


def test_tensor_read_without_an_edge(g):
    g.remove_edge("L02.ffn.pre_norm.gamma", "L02.ffn.gate.t00")
    _raises(g, "L02.ffn.gate.t00", "without an edge")


def test_backward_edge_between_layers(g):
    g.add_edge("L07.const.theta", "L02.ffn.residual", tensor="x", tensors=["x"], bytes=4)
    _raises(g, "runs backwards", "layer 7", "layer 2")


def test_missing_attribute(g):
    del g.nodes["L02.ffn.residual"]["macs"]
    _raises(g, "L02.ffn.residual", "macs")


def test_unknown_config():
    g = build_decode_graph("tiny", layers=(0, 1))
    g.graph.pop("config_dict")
    g.graph["config"] = "nope"
    _raises(g, "does not say which model")
