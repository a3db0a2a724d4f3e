"""Node costs reproduce cycle counts computed by hand from pccx-v002.md's numbers.

Each expected value is worked out in the comment above it from the profile's stated numbers,
not from the cost module.
"""

from __future__ import annotations

import math
from decimal import Decimal

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pccx_flow.errors import GraphError, ProfileError
from pccx_flow.graph.nodes import CVO_FUNCS
from pccx_flow.hardware.cost import (
    annotate_costs,
    cycles_to_seconds,
    node_cycles,
    node_resources,
)
from pccx_flow.hardware.profile import load_profile

PROFILES = {name: load_profile(name) for name in ("v002-spec", "v002-as-built")}


@pytest.fixture(scope="module")
def spec():
    return load_profile("v002-spec")


@pytest.fixture(scope="module")
def built():
    return load_profile("v002-as-built")


def gemv(rows=512, cols=2048):
    # INT4: two weights per byte plus one float32 scale per output row.
    return {
        "id": "L00.ffn.gate.t00",
        "op": "GEMV",
        "lane_class": "gemv",
        "macs": rows * cols,
        "weight_bytes": rows * cols // 2 + 4 * rows,
        "act_bytes": 0,
        "elements": 0,
    }


def cvo(func, elements):
    return {"op": "CVO", "func": func, "lane_class": "sfu", "elements": elements, "macs": 0}


def memcpy(nbytes):
    return {"op": "MEMCPY", "func": "kv_write", "lane_class": "dma", "act_bytes": nbytes}


def host(func, elements):
    return {"op": "HOST", "func": func, "lane_class": "host", "elements": elements}


def test_gemv_tile_spec_is_weight_port_bound(spec):
    # 512 x 2048 INT4 tile: 1,048,576 MACs / 32 = 32,768 MAC cycles.
    # Weights 524,288 B + 2,048 B of scales = 526,336 B / 16 B per AXI clock = 32,896 AXI
    # clocks = 32,896 * 400/250 = 52,633.6 core cycles -> port bound; + latency 5 = 52,638.6,
    # rounded up: 52,639.
    assert node_cycles(gemv(), spec) == 52_639


def test_gemv_tile_as_built(built):
    # One clock for core and AXI: 32,896 port cycles vs 32,768 MAC cycles; + 5 = 32,901.
    assert node_cycles(gemv(), built) == 32_901


def test_gemv_tile_mac_bound_when_weights_are_few(spec):
    # 64 x 2048 tile with (as if) no weight bytes: 131,072 MACs / 32 = 4,096; + 5.
    node = {**gemv(64), "weight_bytes": 0}
    assert node_cycles(node, spec) == 4_101


def test_gemm_uses_two_ports_and_its_latency(spec):
    # 4,194,304 MACs / 2048 = 2,048 cycles; 1,048,576 B / (2 ports * 16 B) = 32,768 AXI
    # clocks * 1.6 = 52,428.8 core cycles -> port bound; + 64 = 52,492.8 -> 52,493.
    node = {"op": "GEMM", "lane_class": "gemm", "macs": 4_194_304, "weight_bytes": 1_048_576}
    assert node_cycles(node, spec) == 52_493


def test_cvo_exp_1024(spec, built):
    # 3.1 cycles/element * 1024 = 3,174.4 -> 3,175; + EXP latency 4 = 3,179 (same count in
    # both profiles: the bridge rate is per core clock in each).
    assert node_cycles(cvo("EXP", 1024), spec) == 3_179
    assert node_cycles(cvo("EXP", 1024), built) == 3_179


def test_cvo_reduce_sum_has_its_own_rate(spec):
    # 2.1 * 2048 = 4,300.8 -> 4,301; + assumed latency 5 = 4,306.
    assert node_cycles(cvo("REDUCE_SUM", 2048), spec) == 4_306


def test_cvo_over_2048_elements_costs_as_split_instructions(spec):
    # 5000 elements = 2048 + 2048 + 904: 2 * ceil(3.1*2048 = 6348.8) + ceil(3.1*904 = 2802.4)
    # = 2 * 6349 + 2803 = 15,501; plus 3 GELU latencies of 12 = 15,537.
    assert node_cycles(cvo("GELU", 5000), spec) == 15_537


def test_cvo_exact_rate_does_not_round_up_a_whole_product(spec):
    # 3.1 * 10 = 31 exactly (a float product would be 31.000000000000004 -> 32); + SQRT 3.
    assert node_cycles(cvo("SQRT", 10), spec) == 34


def test_memcpy_1kib(spec, built):
    # spec: 1024 B / 16 B = 64 AXI clocks * 1.6 = 102.4 core cycles; descriptor overhead
    # 200 ns * 400 MHz = 80; 182.4 -> 183.
    assert node_cycles(memcpy(1024), spec) == 183
    # as-built: 64 AXI clocks = 64 core cycles; 200 ns * 100 MHz = 20; 84.
    assert node_cycles(memcpy(1024), built) == 84


def test_memcpy_beyond_one_descriptor_pays_two_overheads(built):
    # 8,388,608 B needs 2 descriptors of < 8 MiB: 524,288 cycles + 2 * 20 = 524,328.
    assert node_cycles(memcpy(8 * 2**20), built) == 524_328


def test_memset_issue_cycles(spec):
    # 1 instruction per 3 words (a, b, c), 1 issue cycle each: 7 words -> 3 instructions.
    assert node_cycles({"op": "MEMSET", "lane_class": "ctrl", "elements": 7}, spec) == 3
    assert node_cycles({"op": "MEMSET", "lane_class": "ctrl", "elements": 0}, spec) == 1


def test_host_add_2048(spec, built):
    # 2048 / 250e6 elements/s = 8.192 us + 5 us overhead = 13.192 us.
    # spec: * 400 MHz = 5,276.8 -> 5,277; as-built: * 100 MHz = 1,319.2 -> 1,320.
    assert node_cycles(host("add", 2048), spec) == 5_277
    assert node_cycles(host("add", 2048), built) == 1_320


def test_resources_only_gemv_holds_a_weight_port(spec):
    assert node_resources(gemv(), spec) == ("weight_port",)
    for node in (cvo("EXP", 8), memcpy(64), host("tanh", 8)):
        assert node_resources(node, spec) == ()


def test_cycles_to_seconds(spec, built):
    assert cycles_to_seconds(400_000_000, spec) == 1.0
    assert cycles_to_seconds(52_639, built) == pytest.approx(526.39e-6)


def test_lane_class_missing_from_profile(tmp_path):
    path = tmp_path / "no-gemm.toml"
    path.write_text(
        "\n".join(
            line
            for line in load_profile_text("v002-spec").splitlines()
            if not line.startswith("gemm = ")
        ).replace('name = "v002-spec"', 'name = "no-gemm"')
    )
    no_gemm = load_profile(path)
    with pytest.raises(ProfileError, match=r"profile no-gemm has no 'gemm' lane for node"):
        node_cycles({"op": "GEMM", "lane_class": "gemm", "macs": 1, "weight_bytes": 1}, no_gemm)


def test_inconsistent_nodes_are_graph_errors(spec):
    with pytest.raises(GraphError, match="cannot run op 'CVO'"):
        node_cycles({**cvo("EXP", 8), "lane_class": "gemv"}, spec)
    with pytest.raises(GraphError, match="unknown lane class 'npu'"):
        node_cycles({**cvo("EXP", 8), "lane_class": "npu"}, spec)
    with pytest.raises(GraphError, match="CVO function 'TANH'"):
        node_cycles(cvo("TANH", 8), spec)
    with pytest.raises(GraphError, match="'elements' must be a non-negative int"):
        node_cycles(cvo("EXP", -1), spec)


def test_annotate_costs_sets_cycles_and_resources(spec):
    g = nx.DiGraph()
    g.add_node("a", **gemv())
    g.add_node("b", **cvo("EXP", 1024))
    g.add_edge("a", "b")
    annotate_costs(g, spec)
    assert g.nodes["a"]["cycles"] == 52_639 and g.nodes["a"]["resources"] == ["weight_port"]
    assert g.nodes["b"]["cycles"] == 3_179 and g.nodes["b"]["resources"] == []
    assert g.graph["profile"] == "v002-spec"


def load_profile_text(name: str) -> str:
    from importlib import resources

    return (resources.files("pccx_flow.hardware") / "profiles" / f"{name}.toml").read_text()


# --- an independent decimal oracle over many nodes ---------------------------------------------

D = Decimal


def _oracle(node: dict, p) -> int:
    """The module docstring's formulas, written again in decimal arithmetic from the TOML text."""
    core, axi = D(str(p.core_hz)), D(str(p.axi_hz))
    cls = node["lane_class"]
    if cls == "gemv":
        mac = D(node["macs"]) / p.gemv.macs_per_cycle
        port = D(node["weight_bytes"]) / p.gemv.port_bytes_per_axi_clock * core / axi
        return int(math.ceil(max(mac, port))) + p.gemv.latency_cycles
    if cls == "sfu":
        rate = D(str(p.sfu.reduce_sum_cycles_per_element if node["func"] == "REDUCE_SUM"
                     else p.sfu.cycles_per_element))  # fmt: skip
        chunks = [2048] * (node["elements"] // 2048) + [node["elements"] % 2048]
        body = sum(int(math.ceil(rate * n)) for n in chunks)
        count = max(1, -(-node["elements"] // 2048))
        return body + count * p.sfu.latency_cycles[node["func"]]
    if cls == "dma":
        n = node["act_bytes"]
        desc = max(1, -(-n // 8_388_607))
        total = D(n) / 16 * core / axi + desc * D(str(p.dma.descriptor_overhead_seconds)) * core
        return int(math.ceil(total))
    if cls == "host":
        seconds = D(node["elements"]) / D(str(p.host.elements_per_second))
        return int(math.ceil((seconds + D(str(p.host.op_overhead_seconds))) * core))
    raise AssertionError(cls)


nodes = st.one_of(
    st.builds(
        lambda rows, cols, w: {
            "op": "GEMV",
            "lane_class": "gemv",
            "macs": rows * cols,
            "weight_bytes": w,
        },  # fmt: skip
        st.integers(1, 512),
        st.integers(1, 16384),
        st.integers(0, 8 * 2**20),
    ),
    st.builds(
        lambda f, n: {"op": "CVO", "lane_class": "sfu", "func": f, "elements": n},
        st.sampled_from(CVO_FUNCS),
        st.integers(0, 20_000),
    ),
    st.builds(
        lambda n: {"op": "MEMCPY", "lane_class": "dma", "act_bytes": n},
        st.integers(0, 40 * 2**20),
    ),
    st.builds(
        lambda n: {"op": "HOST", "func": "add", "lane_class": "host", "elements": n},
        st.integers(0, 300_000),
    ),
)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(node=nodes, name=st.sampled_from(["v002-spec", "v002-as-built"]))
def test_costs_match_a_decimal_oracle(node, name):
    p = PROFILES[name]
    assert node_cycles(node, p) == max(1, _oracle(node, p))
