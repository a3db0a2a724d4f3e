import networkx as nx
import pytest

from pccx_flow.errors import RenderError
from pccx_flow.render.collapse import (
    check_level,
    collapse,
    drop_fanout,
    group_of_node,
    pick_level,
    scope_of,
)

from .toys import LAYER_NODES, make_toy_graph

# What the toy graph holds, counted from its definition (not from the code under test):
# pre: embed.fetch, embed.ple_fetch, altup_init.proj x3 tiles, ple_pre.proj
# post: final.lm_head x6 tiles, final.softcap, final.read_back
PRE_NODES, PRE_FAMILIES, PRE_BLOCKS = 6, 4, 3
POST_NODES, POST_FAMILIES, POST_BLOCKS = 8, 3, 1
LAYER_NODE_COUNT = sum(max(tiles, 1) for *_, tiles in LAYER_NODES)
LAYER_FAMILIES = len(LAYER_NODES)
LAYER_BLOCKS = len({block for block, *_ in LAYER_NODES})


@pytest.mark.parametrize("n_layers", [1, 3])
def test_each_level_folds_to_the_expected_node_count(n_layers):
    g = make_toy_graph(n_layers)
    expected = {
        "none": PRE_NODES + POST_NODES + n_layers * LAYER_NODE_COUNT,
        "tiles": PRE_FAMILIES + POST_FAMILIES + n_layers * LAYER_FAMILIES,
        "blocks": PRE_BLOCKS + POST_BLOCKS + n_layers * LAYER_BLOCKS,
        "layers": 2 + n_layers,
    }
    counts = {level: collapse(g, level)[0].number_of_nodes() for level in expected}
    assert counts == expected
    assert counts["none"] > counts["tiles"] > counts["blocks"] > counts["layers"]


def test_tiles_fold_into_one_node_per_matrix_with_the_tile_count():
    g = make_toy_graph(1)
    folded, group_of = collapse(g, "tiles")
    gate = folded.nodes["L00.ffn.gate"]
    assert gate["tiles"] == 4 and gate["count"] == 4 and gate["op"] == "GEMV"
    assert gate["members"] == [f"L00.ffn.gate.t{i:02d}" for i in range(4)]
    assert group_of["L00.ffn.gate.t02"] == "L00.ffn.gate"
    # 4 gate tiles -> gelu were four edges; now one edge that counts them.
    assert folded.edges["L00.ffn.gate", "L00.ffn.gelu"]["count"] == 4
    # A non-tile node keeps its own id and attributes.
    assert folded.nodes["L00.ffn.gelu"]["func"] == "gelu_mul"
    assert nx.is_directed_acyclic_graph(folded)


def test_blocks_and_layers_record_their_op_mix_and_lane():
    g = make_toy_graph(1, cycles=True)
    folded, _ = collapse(g, "blocks")
    attn = folded.nodes["L00.attn"]
    assert attn["ops"] == {"CVO": 2, "GEMV": 5, "HOST": 1}
    assert attn["op"] is None and attn["mixed_lanes"]
    assert attn["lane_class"] == "gemv"  # 5 x 400 GEMV cycles outweigh the rest
    assert attn["cycles"] == 5 * 400 + 2 * 60 + 30
    layers, _ = collapse(g, "layers")
    assert sorted(layers.nodes) == ["L00", "post", "pre"]
    assert layers.nodes["L00"]["count"] == LAYER_NODE_COUNT
    assert set(layers.edges) == {("pre", "L00"), ("L00", "post")}


def test_a_group_id_that_names_another_node_is_renamed():
    g = nx.DiGraph()
    w = {"key": "k", "rows": [0, 1]}
    g.add_node("L00.ffn.gate", layer=0, block="ffn", op="HOST", lane_class="host", weight=None)
    for t in range(2):
        g.add_node(
            f"L00.ffn.gate.t{t:02d}", layer=0, block="ffn", op="GEMV", lane_class="gemv", weight=w
        )
        g.add_edge("L00.ffn.gate", f"L00.ffn.gate.t{t:02d}")
    folded, group_of = collapse(g, "tiles")
    assert set(folded.nodes) == {"L00.ffn.gate", "L00.ffn.gate[tiles]"}
    assert group_of["L00.ffn.gate.t01"] == "L00.ffn.gate[tiles]"
    assert folded.edges["L00.ffn.gate", "L00.ffn.gate[tiles]"]["count"] == 2


def test_scope_comes_from_the_id_or_the_layer():
    assert scope_of("L07.ffn.gate.t03", {"layer": 7}) == "L07"
    assert scope_of("pre.embed.fetch", {"layer": -1}) == "pre"
    assert scope_of("odd-name", {"layer": 4}) == "L04"
    assert scope_of("odd-name", {"layer": -1, "block": "final"}) == "post"
    assert scope_of("odd-name", {"layer": -1, "block": "embed"}) == "pre"
    assert group_of_node("L07.ffn.gate.t03", {"layer": 7, "block": "ffn"}, "blocks") == "L07.ffn"


def test_pick_level_is_the_finest_level_under_the_limit():
    g = make_toy_graph(2)
    sizes = {lvl: collapse(g, lvl)[0].number_of_nodes() for lvl in ("none", "macros", "blocks")}
    assert pick_level(g, max_nodes=sizes["none"]) == "none"
    assert pick_level(g, max_nodes=sizes["none"] - 1) == "macros"  # auto skips plain tiles
    assert pick_level(g, max_nodes=sizes["macros"] - 1) == "blocks"
    assert pick_level(g, max_nodes=sizes["blocks"] - 1) == "layers"


def test_macros_fold_each_norm_softmax_rope_and_sparse_gate_into_one_node():
    from pccx_flow.graph.build import build_decode_graph

    g = build_decode_graph("tiny", position=5, layers=(1, 2))  # layer 1: local, sparse
    folded, group_of = collapse(g, "macros")
    norm = folded.nodes["L01.ffn.pre_norm"]
    assert norm["macro"] == "RMSNorm" and norm["count"] == 7 and norm["copies"] == 1
    steps = [n for n in g if n.startswith("L01.ffn.pre_norm.")]
    assert len(steps) == 7 and {group_of[n] for n in steps} == {"L01.ffn.pre_norm"}
    q_norm = folded.nodes["L01.attn.q_norm"]  # one RMSNorm per query head
    assert (q_norm["macro"], q_norm["copies"], q_norm["count"]) == ("RMSNorm", 8, 56)
    assert folded.nodes["L01.attn.softmax"]["macro"] == "softmax"
    assert folded.nodes["L01.attn.rope"]["macro"] == "RoPE sin/cos"
    topk = folded.nodes["L01.ffn.topk"]
    assert topk["macro"] == "Gaussian top-k"
    assert {group_of[n] for n in g if ".ffn.cutoff" in n or ".ffn.var" in n} == {"L01.ffn.topk"}
    assert folded.nodes["L01.ffn.gate"].get("macro") is None  # a tile group stays tiles
    assert nx.is_directed_acyclic_graph(folded)


def test_drop_fanout_leaves_out_nodes_that_feed_too_many():
    g = make_toy_graph(1, fanout=30)
    kept, dropped = drop_fanout(g, limit=10)
    assert dropped == ["pre.const.scale"]
    assert "pre.const.scale" not in kept and "pre.const.scale" in g
    kept, dropped = drop_fanout(g, limit=10, keep={"pre.const.scale"})
    assert dropped == [] and kept is g


def test_unknown_level_is_a_render_error():
    with pytest.raises(RenderError, match="unknown collapse level 'pages'"):
        check_level("pages")


def test_blocks_view_has_no_two_way_arrows_and_stays_a_dag():
    """Folded whole, the residual block (input norm before attention, post-attention norm
    after it) and attention fed each other: two opposite arrows that read as a cycle."""
    import networkx as nx

    from pccx_flow.graph.build import build_decode_graph

    graph = build_decode_graph("tiny", position=7)
    folded, group_of = collapse(graph, "blocks")
    assert nx.is_directed_acyclic_graph(folded)
    assert not [(u, v) for u, v in folded.edges if folded.has_edge(v, u)]
    assert folded.has_edge("L03.residual.input_norm", "L03.attn")
    assert folded.has_edge("L03.attn", "L03.residual")
    assert group_of["L03.residual.input_norm.gamma"] == "L03.residual.input_norm"
    assert folded.nodes["L03.residual.input_norm"]["block"] == "residual"


def test_a_split_block_is_labelled_with_its_part(tmp_path):
    from pccx_flow.graph.build import build_decode_graph
    from pccx_flow.render.dag import build_dag_picture

    graph = build_decode_graph("tiny", layers=(3, 4), position=7)
    picture = build_dag_picture(graph, level="blocks")
    assert 'label="residual + merge: input norm' in picture.source
