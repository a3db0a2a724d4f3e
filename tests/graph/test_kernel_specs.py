"""The kernel contract covers every kernel a graph uses, with one op and one CVO function."""

from __future__ import annotations

from pccx_flow.graph.build import build_decode_graph
from pccx_flow.graph.kernel_specs import CVO_KERNEL_FUNCS, KERNEL_OPS, KERNELS, operand_counts
from pccx_flow.graph.nodes import CVO_FUNCS, OPS


def test_every_kernel_has_a_doc_an_op_and_a_cvo_function():
    assert set(KERNEL_OPS) == set(KERNELS)
    assert set(KERNEL_OPS.values()) <= set(OPS)
    for name, doc in KERNELS.items():
        assert len(doc) > 20, name
    for name, op in KERNEL_OPS.items():
        assert (name in CVO_KERNEL_FUNCS) == (op == "CVO"), name
    assert set(CVO_KERNEL_FUNCS.values()) == set(CVO_FUNCS)


def test_graphs_use_only_documented_kernels_and_consistent_operands():
    used = set()
    graphs = [
        build_decode_graph("tiny", semantics=semantics, position=20, layers=layers, tile_rows=8)
        for semantics in ("pccx", "gemma3n")
        for layers in (None, (6, 9))
    ]
    # E4B's sparse layer 0: an FFN wider than one CVO run sums its partials on the host
    graphs.append(build_decode_graph("e4b", position=0, layers=(0, 1)))
    for g in graphs:
        for n, a in g.nodes(data=True):
            used.add(a["kernel"])
            assert a["kernel"] in KERNELS, n
            counts = operand_counts(a["params"], len(a["inputs"]))
            assert sum(counts) == len(a["inputs"]), n
            if not a["inputs"]:
                assert a["params"].get("source") == "state" or a["op"] == "MEMSET", n
    assert used == set(KERNELS)  # and every documented kernel is used by some graph
