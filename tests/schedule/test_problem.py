"""The generic scheduling problem and its bridge from a decode graph and a profile."""

from __future__ import annotations

import random

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pccx_flow.errors import GraphError, InputError, ProfileError
from pccx_flow.hardware.cost import node_cycles, node_resources
from pccx_flow.hardware.profile import load_profile
from pccx_flow.schedule.model import Lane
from pccx_flow.schedule.problem import SchedulingProblem, pool_instance_names, problem_from_graph

LANES = [Lane("a0", "cpu"), Lane("a1", "cpu")]


def test_costs_lanes_and_order():
    g = nx.DiGraph()
    g.add_nodes_from(["z", "y"])
    g.add_edge("z", "y")
    p = SchedulingProblem(g, LANES, {"z": {"a1": 3, "a0": 4}, "y": {"a0": 1, "a1": None}})
    assert p.order == ("z", "y")
    assert p.lanes_for("z") == ("a0", "a1")  # lane order, not the order costs were given
    assert p.lanes_for("y") == ("a0",)
    assert p.cost("y", "a1") is None and p.cost("z", "a1") == 3
    assert p.mean_cost("z") == 3.5 and p.min_cost("z") == 3
    assert p.preds["y"] == ("z",) and p.succs["z"] == ("y",)
    assert p.comm("z", "y", "a0", "a1") == 0 and not p.has_comm


def test_program_order_repairs_a_non_topological_insertion_order():
    g = nx.DiGraph()
    g.add_nodes_from(["b", "c", "a"])
    g.add_edges_from([("a", "b"), ("a", "c")])
    p = SchedulingProblem(g, LANES, {n: {"a0": 1} for n in "abc"})
    assert p.order == ("a", "b", "c")


def test_order_edges_that_run_backwards_reorder_and_a_cycle_is_one_error():
    g = nx.DiGraph([("a", "b")])
    g.add_node("c")
    costs = {n: {"a0": 1} for n in "abc"}
    p = SchedulingProblem(g, LANES, costs, order_edges=[("c", "b")])
    assert p.order == ("a", "c", "b") and p.preds["b"] == ("a", "c")
    assert p.graph_preds["b"] == ("a",)  # the bounds' view: the graph's own edges
    with pytest.raises(GraphError, match="has a cycle through"):
        SchedulingProblem(g, LANES, costs, order_edges=[("b", "c"), ("c", "a")])
    g.add_edge("b", "a")
    with pytest.raises(GraphError, match="has a cycle through '[ab]'"):
        SchedulingProblem(g, LANES, costs)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(2, 30), seed=st.integers(0, 10_000))
def test_program_order_is_the_lexicographic_topological_order(n, seed):
    rng = random.Random(seed)
    dag = nx.gnp_random_graph(n, 0.2, seed=seed, directed=True)
    dag = nx.DiGraph((u, v) for u, v in dag.edges if u < v)
    dag.add_nodes_from(range(n))
    names = list(range(n))
    rng.shuffle(names)  # insertion order no longer topological
    g = nx.DiGraph()
    g.add_nodes_from(names)
    g.add_edges_from(dag.edges)
    pos = {x: i for i, x in enumerate(g.nodes)}
    want = tuple(nx.lexicographical_topological_sort(g, key=pos.__getitem__))
    assert SchedulingProblem(g, LANES, {x: {"a0": 1} for x in g}).order == want
    # order-only edges (forward in the DAG's numbering, so no cycle) bind the order too
    extra = [(u, v) for u in range(n) for v in range(u + 1, n) if rng.random() < 0.1]
    both = nx.DiGraph(g)
    both.add_edges_from(extra)
    want = tuple(nx.lexicographical_topological_sort(both, key=pos.__getitem__))
    p = SchedulingProblem(g, LANES, {x: {"a0": 1} for x in g}, order_edges=extra)
    assert p.order == want


def test_mean_comm_averages_over_different_lanes_only(heft_problem):
    # The HEFT paper charges an edge's full cost in rank_u: same-lane pairs are not averaged.
    assert heft_problem.mean_comm("n1", "n2") == 18
    assert heft_problem.comm("n1", "n2", "p1", "p1") == 0


def test_from_functions():
    g = nx.DiGraph([("a", "b")])
    p = SchedulingProblem.from_functions(
        g,
        LANES,
        lambda n, lane: 2 if lane.name == "a0" else None,
        resources=lambda n: ("port",) if n == "a" else (),
        pools={"port": 1},
    )
    assert p.costs == {"a": {"a0": 2}, "b": {"a0": 2}}
    assert p.resources == {"a": ("port",), "b": ()}


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"costs": {"a": {"a0": 1}}}, GraphError, "node 'b' has no lane that can run it"),
        ({"costs": {"a": {"a0": 1}, "b": {"a0": None}}}, GraphError, "'b' has no lane"),
        ({"costs": {"a": {"zz": 1}, "b": {"a0": 1}}}, ProfileError, "unknown lane 'zz'"),
        ({"costs": {"a": {"a0": -1}, "b": {"a0": 1}}}, GraphError, "is not an int >= 0"),
        ({"costs": {"a": {"a0": 1.5}, "b": {"a0": 1}}}, GraphError, "is not an int >= 0"),
        ({"resources": {"a": ("port",)}}, ProfileError, "needs pool 'port'"),
        ({"lanes": [*LANES, Lane("a0", "x")]}, ProfileError, "lane name 'a0' appears twice"),
    ],
)
def test_bad_problems_raise_typed_errors(kwargs, error, message):
    g = nx.DiGraph([("a", "b")])
    args = {"lanes": LANES, "costs": {"a": {"a0": 1}, "b": {"a0": 1}}} | kwargs
    with pytest.raises(error, match=message):
        SchedulingProblem(g, args.pop("lanes"), args.pop("costs"), **args)


def test_a_cycle_is_a_graph_error():
    g = nx.DiGraph([("a", "b"), ("b", "a")])
    with pytest.raises(GraphError, match="cycle"):
        SchedulingProblem(g, LANES, {"a": {"a0": 1}, "b": {"a0": 1}})


def test_pool_instance_names():
    assert pool_instance_names({"weight_port": 2, "l2": 1}) == {
        "weight_port0": "weight_port",
        "weight_port1": "weight_port",
        "l20": "l2",
    }
    with pytest.raises(ProfileError, match="'a10' is produced by pools"):
        pool_instance_names({"a1": 1, "a": 11})


@pytest.mark.parametrize("profile_name", ["v002-spec", "v002-as-built"])
def test_problem_from_graph_uses_the_cost_model(decode_graph, profile_name):
    profile = load_profile(profile_name)
    p = problem_from_graph(decode_graph, profile)
    lanes_of = {}
    for lane_id, cls in profile.lane_ids():
        lanes_of.setdefault(cls, []).append(lane_id)
    for n, attrs in decode_graph.nodes(data=True):
        cycles = node_cycles(attrs, profile)
        assert p.costs[n] == {lane: cycles for lane in lanes_of[attrs["lane_class"]]}
        assert p.resources[n] == node_resources(attrs, profile)
    assert p.pools == dict(profile.pools)
    assert p.source is decode_graph and not p.has_comm


def test_problem_from_graph_accepts_a_profile_name(decode_graph):
    assert problem_from_graph(decode_graph, "v002-spec").pools == {"weight_port": 2}


def test_problem_from_graph_without_a_lane_class():
    g = nx.DiGraph()
    g.add_node("x", op="GEMV", lane_class="npu", macs=1, weight_bytes=0)
    with pytest.raises(ProfileError, match="needs a 'npu' lane but profile 'v002-spec' has none"):
        problem_from_graph(g, load_profile("v002-spec"))


def test_a_node_the_cost_model_rejects_is_named():
    g = nx.DiGraph()
    g.add_node("L00.attn.bad", op="CVO", lane_class="sfu", func="TANH", elements=4)
    with pytest.raises(GraphError, match="L00.attn.bad"):
        problem_from_graph(g, load_profile("v002-spec"))


@pytest.mark.parametrize("bad", [2.5, -1, "3", float("nan")])
def test_a_fractional_or_negative_comm_cost_is_refused_not_truncated(bad):
    """As the DAG file reader refuses them: int(2.5) would schedule another problem."""
    from pccx_flow.schedule.problem import comm_between_lanes

    with pytest.raises(GraphError, match="communication cost of edge"):
        comm_between_lanes({("a", "b"): bad})
    g = nx.DiGraph([("a", "b")])
    lanes = [Lane("x0", "x"), Lane("x1", "x")]
    problem = SchedulingProblem(
        g, lanes, {"a": {"x0": 1, "x1": 1}, "b": {"x0": 1, "x1": 1}},
        comm=lambda u, v, lu, lv: bad,
    )  # fmt: skip
    with pytest.raises(GraphError, match=r"comm\('a', 'b', 'x0', 'x1'\)"):
        problem.comm("a", "b", "x0", "x1")
    assert comm_between_lanes({("a", "b"): 3.0})("a", "b", "x0", "x1") == 3  # whole is fine


def test_without_order_edges_keeps_everything_but_the_order_only_edges():
    """The hardware problem of a decode step within L2: the same lanes, costs, pools, L2
    and holds (bytes and data readers), no KV read-ahead edges, no reads held back, no KV
    tile slots (the read-ahead rule's), and the same bounds."""
    from pccx_flow.graph.build import build_decode_graph
    from pccx_flow.model.config import get_config
    from pccx_flow.schedule.metrics import step_bounds
    from pccx_flow.schedule.readahead import KV_SLOTS

    profile = load_profile("v002-spec")
    graph = build_decode_graph(get_config("tiny"), position=9, profile=profile)
    limited = problem_from_graph(graph, profile, memory=True)
    bare = limited.without_order_edges()
    assert limited.order_edges and not bare.order_edges
    assert limited.admit and not bare.admit
    assert limited.order_capacities == {KV_SLOTS} and not bare.order_capacities
    assert bare.source is graph and bare.name == limited.name
    assert bare.lanes == limited.lanes and bare.pools == limited.pools
    assert bare.costs == limited.costs and bare.resources == limited.resources
    assert bare.capacities == {c: b for c, b in limited.capacities.items() if c != KV_SLOTS}
    assert bare.demands == {
        n: {c: b for c, b in row.items() if c != KV_SLOTS} for n, row in limited.demands.items()
    }
    # decode holds' readers are data successors (listed in each problem's own order)
    assert {(h.node, h.readers, tuple((c, b) for c, b in h.row if c != KV_SLOTS))
            for h in limited.holds} == {(h.node, h.readers, h.row) for h in bare.holds}  # fmt: skip
    for n in bare.order:
        assert set(bare.succs[n]) == set(graph.successors(n))
    assert step_bounds(bare, profile) == step_bounds(limited, profile)
    assert bare.without_order_edges() is bare


@pytest.mark.parametrize("profile_name", ["v002-spec", "v002-as-built"])
def test_the_hardware_problem_built_directly_is_the_one_without_order_edges(profile_name):
    """`problem_from_graph(..., hardware=True)` skips the read-ahead rule and gives what
    `without_order_edges` makes of the problem within L2 (the bounds' child builds it)."""
    from pccx_flow.graph.build import build_decode_graph
    from pccx_flow.model.config import get_config

    profile = load_profile(profile_name)
    graph = build_decode_graph(get_config("tiny"), position=40, profile=profile)
    limited = problem_from_graph(graph, profile, memory=True)
    bare, direct = limited.without_order_edges(), problem_from_graph(
        graph, profile, memory=True, hardware=True
    )
    assert limited.order_edges and limited.order != direct.order  # the rule's edges moved it
    for field in ("order", "preds", "succs", "graph_preds", "costs", "resources", "pools",
                  "capacities", "demands", "holds", "admit", "order_edges", "order_capacities",
                  "lanes", "name"):  # fmt: skip
        assert getattr(direct, field) == getattr(bare, field), field
    assert direct.source is graph
    # without L2 there is no rule to skip: the same problem either way
    plain = problem_from_graph(graph, profile)
    assert problem_from_graph(graph, profile, hardware=True).order == plain.order


def test_a_hardware_problem_takes_no_read_ahead_rule():
    graph = nx.DiGraph()
    graph.add_node("a", lane_class="host", op="HOST")
    with pytest.raises(InputError, match="no read-ahead rule"):
        problem_from_graph(graph, "v002-spec", memory=True, hardware=True,
                           read_ahead={"rule": "fixed"})  # fmt: skip


def test_without_order_edges_drops_a_reader_only_an_order_edge_made():
    g = nx.DiGraph([("a", "b")])
    g.add_node("c")
    p = SchedulingProblem(
        g, LANES, {n: {"a0": 1} for n in "abc"}, capacities={"m": 8},
        demands={"a": {"m": 4}}, order_edges=[("a", "c")],
    )  # fmt: skip
    assert p.holds[0].readers == ("b", "c")
    bare = p.without_order_edges()
    assert bare.holds[0].readers == ("b",) and bare.demands == {"a": {"m": 4}}
