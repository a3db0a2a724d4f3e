"""Lower bounds on small hand-built graphs equal values computed by hand.

Node costs used below (v002-spec, worked out from the profile's numbers):
- a MEMSET node of 3·k words is k instructions of 1 issue cycle: k cycles;
- a GEMV node with 32·k MACs and no weight bytes is k MAC cycles + latency 5: k + 5 cycles;
- GEMV weight bytes cross 2 ports x 16 B per 250 MHz AXI clock = 32 B per AXI clock, i.e.
  1.6 core cycles per 32 B at 400 MHz.
"""

from __future__ import annotations

import json

import networkx as nx
import pytest

from pccx_flow.bounds import format_bounds, lower_bounds, tokens_per_second
from pccx_flow.errors import GraphError, InputError, ProfileError
from pccx_flow.hardware.profile import load_profile


@pytest.fixture(scope="module")
def spec():
    return load_profile("v002-spec")


def memset(k: int) -> dict:
    return {"op": "MEMSET", "lane_class": "ctrl", "elements": 3 * k}


def gemv(k: int, weight_bytes: int = 0) -> dict:
    return {"op": "GEMV", "lane_class": "gemv", "macs": 32 * k, "weight_bytes": weight_bytes}


def graph(nodes: dict, edges: list) -> nx.DiGraph:
    g = nx.DiGraph()
    for name, attrs in nodes.items():
        g.add_node(name, **attrs)
    g.add_edges_from(edges)
    return g


def test_chain(spec):
    g = graph({"a": memset(2), "b": memset(5), "c": memset(1)}, [("a", "b"), ("b", "c")])
    lb = lower_bounds(g, spec)
    assert lb.critical_path == ["a", "b", "c"] and lb.critical_path_cycles == 8
    assert lb.lane_class_cycles == {"ctrl": 8}
    assert lb.bandwidth_cycles == {"weight_ports": 0, "ddr": 0}
    assert lb.largest_cycles == 8 and lb.largest_name == "critical_path"


def test_fork_join_takes_the_longer_branch(spec):
    #   s(1) -> x(4) -> j(2)
    #   s(1) -> y(7) -> j(2)      longest: s, y, j = 10
    nodes = {"s": memset(1), "x": memset(4), "y": memset(7), "j": memset(2)}
    edges = [("s", "x"), ("s", "y"), ("x", "j"), ("y", "j")]
    lb = lower_bounds(graph(nodes, edges), spec)
    assert lb.critical_path == ["s", "y", "j"] and lb.critical_path_cycles == 10
    # one ctrl lane: all work 1 + 4 + 7 + 2 = 14 is serial, larger than the path.
    assert lb.lane_class_cycles == {"ctrl": 14}
    assert (lb.largest_name, lb.largest_cycles) == ("lane_class:ctrl", 14)


def test_two_lane_classes(spec):
    # Four independent GEMVs of 100 + 5 = 105 cycles on 4 lanes, each followed by a MEMSET
    # of 10 cycles on the single ctrl lane.
    nodes = {f"g{i}": gemv(100) for i in range(4)}
    nodes.update({f"m{i}": memset(10) for i in range(4)})
    edges = [(f"g{i}", f"m{i}") for i in range(4)]
    lb = lower_bounds(graph(nodes, edges), spec)
    assert lb.critical_path_cycles == 115 and lb.critical_path == ["g0", "m0"]
    assert lb.lane_class_work == {"gemv": 420, "ctrl": 40}
    assert lb.lane_class_cycles == {"gemv": 105, "ctrl": 40}
    assert lb.pool_cycles == {}  # no weight bytes: no tile holds a port
    assert (lb.largest_name, lb.largest_cycles) == ("critical_path", 115)


def test_lane_class_bound_rounds_up(spec):
    # 5 GEMVs of 6 cycles on 4 lanes: 30 / 4 = 7.5 -> 8.
    lb = lower_bounds(graph({f"g{i}": gemv(1) for i in range(5)}, []), spec)
    assert lb.lane_class_cycles == {"gemv": 8}


def test_weight_port_and_ddr_bandwidth(spec):
    # Two independent GEMVs of 320,000 B each. One tile alone streams through one port:
    # 320,000 / 16 = 20,000 AXI clocks * 1.6 = 32,000 + 5 = 32,005 cycles (the critical path);
    # both on 4 lanes: 64,010 / 4 = 16,002.5 -> 16,003.
    # Weight ports: 640,000 B / 32 B per AXI clock = 20,000 AXI clocks * 1.6 = 32,000 cycles.
    # A MEMCPY of 360,000 B: 22,500 AXI clocks * 1.6 = 36,000 + 80 overhead = 36,080 cycles.
    # DDR: 1,000,000 B / 10 GB/s = 100 us * 400 MHz = 40,000 cycles, the binding bound.
    nodes = {
        "w0": gemv(1, 320_000),
        "w1": gemv(1, 320_000),
        "kv": {"op": "MEMCPY", "lane_class": "dma", "act_bytes": 360_000},
    }
    lb = lower_bounds(graph(nodes, []), spec)
    assert lb.critical_path_cycles == 36_080 and lb.critical_path == ["kv"]
    assert lb.lane_class_cycles == {"gemv": 16_003, "dma": 36_080}
    # Each tile holds one of the 2 weight ports for its 32,005 cycles: 64,010 / 2 = 32,005.
    assert lb.pool_cycles == {"weight_port": 32_005}
    assert lb.bandwidth_cycles == {"weight_ports": 32_000, "ddr": 40_000}
    assert lb.gemv_weight_bytes == 640_000 and lb.ddr_bytes == 1_000_000
    assert (lb.largest_name, lb.largest_cycles) == ("bandwidth:ddr", 40_000)


def test_gemm_ports_appear_only_with_gemm_weights(spec):
    # 64,000 B over HP0 + HP1 (32 B per AXI clock) = 2,000 AXI clocks * 1.6 = 3,200 cycles.
    g = graph({"m": {"op": "GEMM", "lane_class": "gemm", "macs": 0, "weight_bytes": 64_000}}, [])
    assert lower_bounds(g, spec).bandwidth_cycles["gemm_ports"] == 3_200


def test_to_dict_is_json(spec):
    lb = lower_bounds(graph({"a": memset(1)}, []), spec)
    d = json.loads(json.dumps(lb.to_dict()))
    assert d["critical_path"] == ["a"] and d["profile"] == "v002-spec"


def test_tokens_per_second(spec):
    assert tokens_per_second(100_000_000, spec) == 4.0
    with pytest.raises(InputError, match="must be positive"):
        tokens_per_second(0, spec)


def test_format_bounds_labels_every_time_with_the_profile(spec):
    g = graph({"g0": gemv(1, 320_000), "m": memset(4)}, [("g0", "m")])
    lb = lower_bounds(g, spec)
    text = format_bounds(lb, spec)
    # One tile holds one port: 32,005 cycles, then the MEMSET's 4: a 32,009-cycle critical
    # path, above the two-port bound of 16,000. 400e6 / 32,009 = 12,496.485... tok/s.
    assert lb.bandwidth_cycles["weight_ports"] == 16_000
    assert lb.largest_name == "critical_path" and lb.largest_cycles == 32_009
    assert "at most 12496.49 tok/s (model estimate, profile v002-spec)" in text
    lines = text.splitlines()
    # title, header, critical path, gemv lanes, ctrl lanes, weight_port pool, weight-port
    # bandwidth, DDR, binding bound
    assert len(lines) == 9
    assert all("model estimate, profile v002-spec" in line for line in lines)


def test_cycle_and_empty_graph_are_graph_errors(spec):
    with pytest.raises(GraphError, match="dependency cycle"):
        lower_bounds(graph({"a": memset(1), "b": memset(1)}, [("a", "b"), ("b", "a")]), spec)
    with pytest.raises(GraphError, match="no nodes"):
        lower_bounds(nx.DiGraph(), spec)


def test_lane_class_absent_from_profile(tmp_path):
    path = tmp_path / "no-dma.toml"
    from importlib import resources

    text = (resources.files("pccx_flow.hardware") / "profiles" / "v002-spec.toml").read_text()
    lines = [line for line in text.splitlines() if not line.startswith("dma = ")]
    path.write_text("\n".join(lines).replace('"v002-spec"', '"no-dma"', 1))
    g = graph({"kv": {"op": "MEMCPY", "lane_class": "dma", "act_bytes": 16}}, [])
    with pytest.raises(ProfileError, match="profile no-dma has no 'dma' lane"):
        lower_bounds(g, load_profile(path))


def _manifest_weight_bytes(config) -> tuple[int, int]:
    """Independent byte count from the tensor manifest: (INT4 matrices, float32 matrices).

    INT4: every used INT4 matrix once, except the per-layer embedding table (a row fetch by
    MEMCPY, not a GEMV); W_embed counts once, as the tied LM head. float32: every 2-D float32
    matrix (AltUp projections, per-layer PLE projections, routers, coefficients).
    """
    from pccx_flow.model.tensors import tensor_manifest

    int4 = f32 = 0
    for t in tensor_manifest(config):
        if not t.used or t.spec_name == "W_ple":
            continue
        if t.storage == "int4":
            int4 += t.stored_bytes
        elif len(t.shape) == 2:
            f32 += t.stored_bytes
    return int4, f32


def test_e4b_weight_port_ceiling_matches_pccx_v002_md(spec):
    # pccx-v002.md §3: ≈ 2.22 GB of dense INT4 weights per token over HP2 + HP3 at 250 MHz
    # (8 GB/s) gives ≈ 3.6 tok/s; as built (100 MHz, 2 ports, 3.2 GB/s) ≈ 1.4 tok/s.
    from pccx_flow.graph.build import build_decode_graph
    from pccx_flow.model.config import get_config

    config = get_config("e4b")
    g = build_decode_graph(config, semantics="pccx", position=0, profile=None, tile_rows=512)
    lb = lower_bounds(g, spec)

    int4, f32 = _manifest_weight_bytes(config)
    assert 2.20e9 < int4 < 2.25e9
    # The graph streams every matrix through the GEMV ports: all INT4 matrices, the float32
    # ones too, plus a little for per-tile row scales of column-split tiles.
    assert int4 + f32 <= lb.gemv_weight_bytes <= 1.01 * (int4 + f32)

    ceiling = tokens_per_second(lb.bandwidth_cycles["weight_ports"], spec)
    assert abs(ceiling - 3.6) <= 0.36
    # Tiles hold a port for their latency too, so the pool bound is a little above the
    # bandwidth bound; one of the two binds.
    assert lb.pool_cycles["weight_port"] >= lb.bandwidth_cycles["weight_ports"]
    assert lb.largest_name in ("pool:weight_port", "bandwidth:weight_ports")
    assert lb.largest_cycles <= 1.01 * lb.bandwidth_cycles["weight_ports"]

    built = load_profile("v002-as-built")
    ceiling_built = tokens_per_second(
        lower_bounds(g, built).bandwidth_cycles["weight_ports"], built
    )
    assert abs(ceiling_built - 1.4) <= 0.14
