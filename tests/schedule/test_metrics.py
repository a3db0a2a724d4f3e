"""Schedule metrics on hand-made schedules whose answers are worked out by hand."""

from __future__ import annotations

import networkx as nx
import pytest

from pccx_flow.hardware.profile import load_profile
from pccx_flow.schedule.metrics import (
    dag_slack,
    latest_starts,
    laurel_overlap,
    min_cost_critical_path,
    ple_slack,
    pool_busy,
    pool_occupancy,
    problem_bounds,
    schedule_critical_path,
    schedule_metrics,
    utilisation,
)
from pccx_flow.schedule.model import Lane, Schedule, Slot
from pccx_flow.schedule.problem import SchedulingProblem, problem_from_graph
from pccx_flow.schedule.registry import BUILTIN_POLICIES, run_policy
from pccx_flow.schedule.validate import validate_schedule


def make(edges, nodes, costs, lanes, slots, *, attrs=None, resources=None, pools=None):
    g = nx.DiGraph()
    for n in nodes:
        g.add_node(n, **(attrs or {}).get(n, {}))
    g.add_edges_from(edges)
    problem = SchedulingProblem(
        g, [Lane(n, c) for n, c in lanes], costs, resources=resources, pools=pools
    )
    schedule = Schedule("hand", "test", problem.lanes, {s.node: s for s in slots})
    validate_schedule(schedule, problem)
    return problem, schedule


def test_critical_path_walks_back_through_data_and_lane_waits():
    # a and b share lane x (b waits 3 cycles for it); c needs b's output.
    problem, schedule = make(
        [("b", "c")],
        "abc",
        {"a": {"x": 3}, "b": {"x": 2}, "c": {"y": 4}},
        [("x", "cpu"), ("y", "cpu")],
        [Slot("a", "x", 0, 3), Slot("b", "x", 3, 5), Slot("c", "y", 5, 9)],
    )
    cp = schedule_critical_path(schedule, problem)
    assert cp["nodes"] == ["a", "b", "c"]
    assert [s["cause"] for s in cp["steps"]] == ["start", "lane", "data"]
    assert [s["waited_cycles"] for s in cp["steps"]] == [0, 3, 0]
    assert cp["blocked_cycles"] == {"lane": 3}
    assert cp["lanes"] == {"x": 5, "y": 4}


def test_a_node_of_no_length_blocks_no_lane_on_the_critical_path():
    """z takes no time at 5 on b's lane, between a and b: b waited for a, not for z (a
    node of no length holds no lane; z comes first in program order, where it was chosen)."""
    problem, schedule = make(
        [],
        "zab",
        {"z": {"x": 0}, "a": {"x": 5}, "b": {"x": 3}},
        [("x", "cpu")],
        [Slot("z", "x", 5, 5), Slot("a", "x", 0, 5), Slot("b", "x", 5, 8)],
    )
    cp = schedule_critical_path(schedule, problem)
    assert cp["nodes"] == ["a", "b"] and cp["blocked_cycles"] == {"lane": 5}


def test_critical_path_names_the_pool_instance_it_waited_for():
    problem, schedule = make(
        [],
        "ab",
        {"a": {"x": 3}, "b": {"y": 2}},
        [("x", "gemv"), ("y", "gemv")],
        [Slot("a", "x", 0, 3, ("port0",)), Slot("b", "y", 3, 5, ("port0",))],
        resources={"a": ("port",), "b": ("port",)},
        pools={"port": 1},
    )
    cp = schedule_critical_path(schedule, problem)
    assert cp["nodes"] == ["a", "b"]
    assert cp["steps"][1]["cause"] == "pool:port0"
    assert cp["blocked_cycles"] == {"pool": 3}


def _room_problem() -> SchedulingProblem:
    """a's 60 bytes of L2 stay until its reader c finishes; b needs 60 of the 100 too."""
    g = nx.DiGraph([("a", "c")])
    g.add_node("b")
    costs = {"a": {"x": 10}, "c": {"x": 20}, "b": {"y": 10}}
    demands = {"a": {"l2": 60}, "b": {"l2": 60}}
    lanes = [Lane("x", "cpu"), Lane("y", "cpu")]
    return SchedulingProblem(g, lanes, costs, capacities={"l2": 100}, demands=demands)


def test_critical_path_goes_on_through_a_wait_for_room_to_the_node_that_made_it():
    """b waits on a free lane until c, a's last reader, frees a's bytes at 30: the path
    runs a, c, b (it ended at b, "delay", before), and b's wait for the room overlaps
    c's 20 cycles."""
    from pccx_flow.schedule.timeline import Timeline

    problem = _room_problem()
    timeline = Timeline(problem)
    for node, lane in (("a", "x"), ("c", "x"), ("b", "y")):
        timeline.place(node, lane)
    schedule = timeline.to_schedule("hand", "test")
    validate_schedule(schedule, problem)
    assert schedule.slots["b"].start == 30 and schedule.memory_wait == {"b": 30}
    cp = schedule_critical_path(schedule, problem)
    assert cp["nodes"] == ["a", "c", "b"]
    assert [s["cause"] for s in cp["steps"]] == ["start", "data", "memory:l2"]
    assert cp["blocked_cycles"] == {"memory": 20}


def test_a_wait_for_room_that_no_freed_hold_explains_ends_the_path():
    """A schedule that says b waited for room, but no hold ends when b starts (a policy's
    own times): the walk cannot name what made the room and stops there, as before."""
    problem = _room_problem()
    slots = [Slot("a", "x", 0, 10), Slot("c", "x", 10, 30), Slot("b", "y", 35, 45)]
    schedule = Schedule("hand", "test", problem.lanes, {s.node: s for s in slots}, {"b": 35})
    validate_schedule(schedule, problem)
    cp = schedule_critical_path(schedule, problem)
    assert cp["nodes"] == ["b"] and cp["steps"][0]["cause"] == "delay"


def test_the_room_maker_is_a_freed_hold_on_a_demanded_capacity_earliest_in_program_order():
    """At 10, w (held back for room) could start: x finishes then but its bytes stay for y
    (not freed), h0 and h1 finish and free theirs (no readers: the holder frees them). The
    path goes through h0, the earlier of the two, and names only the capacity w demands."""
    g = nx.DiGraph([("x", "y")])
    g.add_nodes_from(["h0", "h1", "w"])
    costs = {"x": {"a": 10}, "y": {"a": 10}, "h0": {"b": 10}, "h1": {"c": 10}, "w": {"d": 15}}
    demands = {"x": {"l2": 30}, "h0": {"l2": 40, "l2_reach": 10}, "h1": {"l2": 60},
               "w": {"l2": 50}}  # fmt: skip
    caps = {"l2": 130, "l2_reach": 100}
    lanes = [Lane(n, "cpu") for n in "abcd"]
    problem = SchedulingProblem(g, lanes, costs, capacities=caps, demands=demands)
    slots = [Slot("x", "a", 0, 10), Slot("y", "a", 10, 20), Slot("h0", "b", 0, 10),
             Slot("h1", "c", 0, 10), Slot("w", "d", 10, 25)]  # fmt: skip
    schedule = Schedule("hand", "test", problem.lanes, {s.node: s for s in slots}, {"w": 10})
    validate_schedule(schedule, problem)
    cp = schedule_critical_path(schedule, problem)
    assert cp["nodes"] == ["h0", "w"]
    assert cp["steps"][1]["cause"] == "memory:l2"
    assert cp["blocked_cycles"] == {"memory": 10}


def test_a_wait_for_room_of_a_node_of_no_length_does_not_go_on_through_its_successor():
    """a costs nothing and waits for c's bytes until r, their reader, ends at 5; b (a's
    successor, no length either) also finishes at 5 but did not make the room."""
    from pccx_flow.schedule.timeline import Timeline

    g = nx.DiGraph()
    g.add_nodes_from("cabrd")  # b before r in program order: the earlier of the two
    g.add_edges_from([("c", "r"), ("a", "b"), ("b", "d")])
    costs = {"c": {"x": 2}, "r": {"x": 3}, "a": {"y": 0}, "b": {"z": 0}, "d": {"z": 1}}
    lanes = [Lane(n, n) for n in "xyz"]
    demands = {"c": {"l2": 10}, "a": {"l2": 1}}
    problem = SchedulingProblem(g, lanes, costs, capacities={"l2": 10}, demands=demands)
    timeline = Timeline(problem)
    for node in ("c", "r", "a", "b", "d"):
        timeline.place(node, next(iter(problem.costs[node])))
    schedule = timeline.to_schedule("hand", "test")
    assert schedule.memory_wait == {"a": 5}
    cp = schedule_critical_path(schedule, problem)
    assert cp["nodes"] == ["c", "r", "a", "b", "d"]
    assert cp["steps"][2]["cause"] == "memory:l2"


def test_laurel_overlap_is_the_share_of_laurel_time_beside_attention():
    attrs = {
        "l1": {"layer": 0, "block": "laurel"},
        "l2": {"layer": 0, "block": "laurel"},
        "at": {"layer": 0, "block": "attn"},
        "l3": {"layer": 1, "block": "laurel"},
    }
    problem, schedule = make(
        [],
        ["l1", "l2", "at", "l3"],
        {"l1": {"g0": 4}, "l2": {"g0": 4}, "at": {"g1": 6}, "l3": {"g0": 5}},
        [("g0", "gemv"), ("g1", "gemv")],
        [
            Slot("l1", "g0", 0, 4),
            Slot("l2", "g0", 6, 10),
            Slot("at", "g1", 2, 8),
            Slot("l3", "g0", 10, 15),
        ],
        attrs=attrs,
    )
    lo = laurel_overlap(schedule, problem)
    # layer 0: LAuReL busy [0,4)+[6,10) = 8 cycles, of which [2,4)+[6,8) = 4 beside attention
    assert lo["per_layer"] == {0: 0.5, 1: 0.0}
    assert lo["mean"] == 0.25 and lo["min"] == 0.0


def test_ple_slack_by_hand():
    # a -> b (long, lane x) and a -> m (PLE mix, lane y): m may start as late as 10 - 1.
    attrs = {"m": {"layer": 0, "block": "ple_mix"}, "m2": {"layer": 1, "block": "ple_mix"}}
    problem, schedule = make(
        [("a", "b"), ("a", "m"), ("b", "m2")],
        ["a", "b", "m", "m2"],
        {"a": {"x": 2}, "b": {"x": 8}, "m": {"y": 1}, "m2": {"y": 1}},
        [("x", "cpu"), ("y", "cpu")],
        [
            Slot("a", "x", 0, 2),
            Slot("b", "x", 2, 10),
            Slot("m", "y", 2, 3),
            Slot("m2", "y", 10, 11),
        ],
        attrs=attrs,
    )
    slack = ple_slack(schedule, problem)
    assert slack["per_layer"] == {0: 7, 1: 0}
    assert slack["min"] == 0 and slack["zero_layers"] == [1]
    # in the graph alone (no lanes): the end is 11 and m could start as late as 10
    assert slack["dag_per_layer"] == {0: 8, 1: 0} and slack["dag_zero_layers"] == [1]


def test_dag_slack_is_the_graphs_not_the_l2_heuristics():
    """An order-only edge (the L2 read-ahead's) may delay a node in a schedule, but the
    graph alone does not: `m`'s slack in the DAG ignores the edge b -> m."""
    g = nx.DiGraph([("a", "b"), ("a", "m")])
    costs = {"a": {"x": 2}, "b": {"x": 8}, "m": {"x": 1}}
    problem = SchedulingProblem(g, [Lane("x", "cpu")], costs, order_edges=[("b", "m")])
    slack = dag_slack(problem)
    assert slack == {"a": 0, "b": 0, "m": 7}  # end 10; m could start as late as 9


def test_latest_starts_give_a_valid_schedule_no_longer_than_the_original(decode_graph):
    profile = load_profile("v002-spec")
    problem = problem_from_graph(decode_graph, profile)
    for policy in ("critical-path", "heft", "program-order"):
        schedule = run_policy(problem, profile, policy=policy)
        latest = latest_starts(schedule, problem)
        assert all(latest[n] >= s.start for n, s in schedule.slots.items())
        alap = Schedule(
            "alap",
            "t",
            schedule.lanes,
            {
                n: s._replace(start=latest[n], finish=latest[n] + s.duration)
                for n, s in schedule.slots.items()
            },
        )
        validate_schedule(alap, problem)
        assert alap.makespan == schedule.makespan


def test_utilisation_and_bounds_of_a_small_problem():
    problem, schedule = make(
        [("a", "b")],
        "ab",
        {"a": {"x": 3, "y": 5}, "b": {"x": 4, "y": 4}},
        [("x", "cpu"), ("y", "cpu")],
        [Slot("a", "x", 0, 3), Slot("b", "y", 3, 7)],
    )
    assert utilisation(schedule) == {"x": 3 / 7, "y": 4 / 7}
    assert min_cost_critical_path(problem) == 7
    assert problem_bounds(problem) == {"critical_path": 7, "lane_class:cpu": 4}


@pytest.mark.parametrize("profile_name", ["v002-spec", "v002-as-built"])
def test_schedule_metrics_on_the_decode_shaped_graph(decode_graph, profile_name):
    profile = load_profile(profile_name)
    problem = problem_from_graph(decode_graph, profile)
    schedule = run_policy(problem, profile, policy="critical-path")
    m = schedule_metrics(schedule, problem, profile)
    span = schedule.makespan
    assert m["makespan_cycles"] == span
    assert m["edges"] == decode_graph.number_of_edges() + len(problem.order_edges)
    assert m["estimate"] == f"model estimate, profile {profile_name}"
    assert m["tokens_per_second"] == pytest.approx(profile.core_hz / span)
    assert m["makespan_us"] == pytest.approx(span / profile.core_hz * 1e6)
    assert m["bounds_source"] == "pccx_flow.bounds"
    assert m["largest_bound_cycles"] == max(m["bounds_cycles"].values())
    assert span >= m["largest_bound_cycles"]
    assert m["gap_to_largest_bound"] == pytest.approx(span / m["largest_bound_cycles"] - 1)
    assert m["below_bounds"] == []
    busy = {}
    for s in schedule.slots.values():
        busy[s.lane] = busy.get(s.lane, 0) + s.duration
    for lane, share in m["utilisation"].items():
        assert share == pytest.approx(busy.get(lane, 0) / span)
    assert m["critical_path"]["nodes"][-1] in {
        n for n, s in schedule.slots.items() if s.finish == span
    }
    assert set(m["laurel_overlap"]["per_layer"]) == {0, 1, 2}
    assert set(m["ple_slack"]["per_layer"]) == {0, 1, 2}


def test_every_policy_reports_a_gap_of_at_least_zero(decode_graph):
    profile = load_profile("v002-as-built")
    problem = problem_from_graph(decode_graph, profile)
    for policy in BUILTIN_POLICIES:
        m = schedule_metrics(run_policy(problem, profile, policy=policy), problem, profile)
        assert m["gap_to_largest_bound"] >= 0, policy


def test_blocked_time_along_a_lane_queue_is_not_double_counted():
    # a, b, c all ready at 0 and queued on one lane: raw waits 0 + 2 + 4 = 6 > makespan 6 - 0,
    # but the path is blocked only while a and b run with c (or b) already waiting: 2 + 2.
    problem, schedule = make(
        [],
        "abc",
        {n: {"x": 2} for n in "abc"},
        [("x", "cpu")],
        [Slot("a", "x", 0, 2), Slot("b", "x", 2, 4), Slot("c", "x", 4, 6)],
    )
    cp = schedule_critical_path(schedule, problem)
    assert cp["nodes"] == ["a", "b", "c"]
    assert [s["waited_cycles"] for s in cp["steps"]] == [0, 2, 4]
    assert cp["blocked_cycles"] == {"lane": 4}


def test_pool_occupancy_by_hand():
    # port has 2 instances: a [0,4) and b [2,6) overlap on [2,4); nothing after 6 until 8.
    problem, schedule = make(
        [],
        "abc",
        {"a": {"x": 4}, "b": {"y": 4}, "c": {"x": 2}},
        [("x", "gemv"), ("y", "gemv")],
        [Slot("a", "x", 0, 4, ("p0",)), Slot("b", "y", 2, 6, ("p1",)), Slot("c", "x", 6, 8)],
        resources={"a": ("p",), "b": ("p",)},
        pools={"p": 2},
    )
    assert pool_occupancy(schedule, problem) == {"p": {0: 2, 1: 4, 2: 2}}
    assert pool_busy(schedule, problem.pools) == {"p": [(0, 1), (2, 2), (4, 1), (6, 0)]}
    assert pool_busy(schedule, {"p": 2, "q": 1}) == {"p": [(0, 1), (2, 2), (4, 1), (6, 0)],
                                                    "q": [(0, 0)]}  # fmt: skip


def test_critical_path_says_when_lane_and_pool_both_bind():
    problem, schedule = make(
        [],
        "ab",
        {"a": {"x": 3, "y": 3}, "b": {"x": 2, "y": 2}},
        [("x", "gemv"), ("y", "gemv")],
        [Slot("a", "x", 0, 3, ("port0",)), Slot("b", "x", 3, 5, ("port0",))],
        resources={"a": ("port",), "b": ("port",)},
        pools={"port": 1},
    )
    cp = schedule_critical_path(schedule, problem)
    assert [s["cause"] for s in cp["steps"]] == ["start", "lane+pool:port0"]
    assert cp["blocked_cycles"] == {"lane+pool": 3}


@pytest.mark.parametrize("profile_name", ["v002-spec", "v002-as-built"])
@pytest.mark.parametrize("position", [3, 31])
def test_no_bound_exceeds_a_valid_schedule_made_without_the_l2_limit(profile_name, position):
    """The bounds are bounds of the hardware problem, not of the L2 heuristic's graph.

    The L2-limited problem adds order-only KV-prefetch edges (a heuristic) and capacities.
    Every bound but the residency and capacity-chain bounds (which are about capacity) must
    therefore hold for schedules that ignore both; those two must hold for the L2-limited
    ones."""
    from pccx_flow.graph.build import build_decode_graph
    from pccx_flow.model.config import get_config
    from pccx_flow.schedule.metrics import step_bounds
    from pccx_flow.schedule.problem import problem_from_graph
    from pccx_flow.schedule.registry import run_policy
    from pccx_flow.schedule.validate import validate_schedule

    profile = load_profile(profile_name)
    graph = build_decode_graph(get_config("tiny"), position=position, profile=profile)
    limited = problem_from_graph(graph, profile, memory=True)
    free = problem_from_graph(graph, profile, memory=False)
    bounds = step_bounds(limited, profile)["bounds_cycles"]
    assert limited.order_edges and not free.order_edges
    for policy in ("heft", "critical-path", "cpop", "etf", "program-order"):
        unlimited = run_policy(free, profile, policy)
        validate_schedule(unlimited, free)
        within = run_policy(limited, profile, policy)
        for name, cycles in bounds.items():
            capacity = name.startswith(("residency:", "capacity_chain:"))
            ref = within if capacity else unlimited
            assert cycles <= ref.makespan, (policy, name, cycles, ref.makespan)


def _in_another_topological_order(graph: nx.DiGraph, seed: int) -> nx.DiGraph:
    """`graph` with its nodes (and edges) listed in a random topological order."""
    import random

    rng = random.Random(seed)
    waiting = {n: graph.in_degree(n) for n in graph}
    ready, order = [n for n, d in waiting.items() if d == 0], []
    while ready:
        n = ready.pop(rng.randrange(len(ready)))
        order.append(n)
        for s in graph.succ[n]:
            waiting[s] -= 1
            if not waiting[s]:
                ready.append(s)
    out = nx.DiGraph()
    out.graph.update(graph.graph)
    out.add_nodes_from((n, graph.nodes[n]) for n in order)
    edges = [(u, v, graph.edges[u, v]) for v in order for u in graph.pred[v]]
    rng.shuffle(edges)
    out.add_edges_from(edges)
    return out


@pytest.mark.parametrize("profile_name", ["v002-spec", "v002-as-built"])
def test_the_bounds_do_not_depend_on_the_order_the_nodes_are_listed_in(profile_name):
    """On a decode step the bounds are the same whatever topological order the problem
    walks (a ``capacity_chain`` bound follows the pass order in general): the hardware
    problem `schedule` computes them on (`problem_from_graph(..., hardware=True)`, whose
    order the read-ahead edges did not move) has the bounds of the problem it schedules."""
    from pccx_flow.graph.build import build_decode_graph
    from pccx_flow.model.config import get_config
    from pccx_flow.schedule.metrics import step_bounds

    profile = load_profile(profile_name)
    graph = build_decode_graph(get_config("tiny"), position=31, profile=profile)
    limited = problem_from_graph(graph, profile, memory=True)
    expected = step_bounds(limited, profile)
    hardware = problem_from_graph(graph, profile, memory=True, hardware=True)
    assert hardware.order != limited.order
    assert step_bounds(hardware, profile) == expected
    for seed in range(3):
        shuffled = _in_another_topological_order(graph, seed)
        problem = problem_from_graph(shuffled, profile, memory=True)
        assert problem.order != limited.order
        assert step_bounds(problem, profile) == expected
