"""Every built-in policy: the HEFT paper's numbers, validity and bounds on many DAGs."""

from __future__ import annotations

import math

import networkx as nx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pccx_flow.errors import ScheduleError
from pccx_flow.hardware.profile import load_profile
from pccx_flow.schedule.chains import pool_chain_bounds
from pccx_flow.schedule.model import Lane
from pccx_flow.schedule.policies.base import (
    bottom_levels,
    downward_rank,
    mean_costs,
    static_priority_schedule,
    upward_rank,
)
from pccx_flow.schedule.policies.cpop import critical_path_nodes
from pccx_flow.schedule.policies.critical_path import (
    first_stage_binds,
    issue_order_edges,
    stage_one_nodes,
    stall_levels,
)
from pccx_flow.schedule.problem import SchedulingProblem, problem_from_graph
from pccx_flow.schedule.registry import BUILTIN_POLICIES, run_policy
from pccx_flow.schedule.timeline import Timeline
from pccx_flow.schedule.validate import validate_schedule

POLICIES = sorted(BUILTIN_POLICIES)


# --- Topcuoglu, Hariri and Wu 2002, Fig. 2 / Table 1 ---------------------------------------


def test_heft_paper_upward_ranks(heft_problem):
    # Table 2 of the paper gives rank_u per task (rounded to one decimal there).
    expected = {1: 108.0, 2: 77.0, 3: 80.0, 4: 80.0, 5: 69.0, 6: 63.333, 7: 42.667,
                8: 35.667, 9: 44.333, 10: 14.667}  # fmt: skip
    rank = upward_rank(heft_problem)
    for i, value in expected.items():
        assert rank[f"n{i}"] == pytest.approx(value, abs=1e-3)


def test_heft_paper_example_makespan_80(heft_problem):
    schedule = run_policy(heft_problem, policy="heft")
    assert schedule.makespan == 80
    # The paper's Fig. 4(a) schedule, task by task.
    expected = {"n1": ("p3", 0), "n3": ("p3", 9), "n4": ("p2", 18), "n2": ("p1", 27),
                "n5": ("p3", 28), "n6": ("p2", 26), "n7": ("p3", 38), "n9": ("p2", 56),
                "n8": ("p1", 57), "n10": ("p2", 73)}  # fmt: skip
    got = {n: (s.lane, s.start) for n, s in schedule.slots.items()}
    assert got == expected


def test_cpop_paper_example_makespan_86(heft_problem):
    up, down = upward_rank(heft_problem), downward_rank(heft_problem)
    priority = {n: up[n] + down[n] for n in up}
    assert priority["n1"] == pytest.approx(108.0)
    assert critical_path_nodes(heft_problem, priority) == ["n1", "n2", "n9", "n10"]
    schedule = run_policy(heft_problem, policy="cpop")
    assert schedule.makespan == 86
    assert {schedule.slots[n].lane for n in ("n1", "n2", "n9", "n10")} == {"p2"}


@pytest.mark.parametrize("policy", POLICIES)
def test_every_policy_is_valid_on_the_paper_example(heft_problem, policy):
    schedule = run_policy(heft_problem, policy=policy)
    validate_schedule(schedule, heft_problem)
    assert schedule.makespan >= oracle_lower_bound(heft_problem)


# --- an oracle lower bound, written independently of pccx_flow's metrics and bounds --------


def oracle_lower_bound(problem: SchedulingProblem) -> int:
    g = problem.graph
    cheapest = {n: min(problem.costs[n].values()) for n in g}
    finish = {}
    for n in nx.topological_sort(g):
        finish[n] = max((finish[p] for p in g.predecessors(n)), default=0) + cheapest[n]
    bound = max(finish.values())
    by_lane_set = {}
    for n in g:
        by_lane_set.setdefault(frozenset(problem.costs[n]), []).append(n)
    for lanes in by_lane_set:
        confined = [n for n in g if frozenset(problem.costs[n]) <= lanes]
        bound = max(bound, math.ceil(sum(cheapest[n] for n in confined) / len(lanes)))
    for pool, count in problem.pools.items():
        users = [n for n in g if pool in problem.resources[n]]
        bound = max(bound, math.ceil(sum(cheapest[n] for n in users) / count))
    return bound


# --- hypothesis: random layered DAGs, lane classes, costs, comm and pools -------------------


@st.composite
def random_problems(draw):
    n_classes = draw(st.integers(1, 3))
    lanes = [
        Lane(f"c{c}l{i}", f"c{c}") for c in range(n_classes) for i in range(draw(st.integers(1, 3)))
    ]
    pools = {f"pool{k}": draw(st.integers(1, 2)) for k in range(draw(st.integers(0, 2)))}
    g = nx.DiGraph()
    layers = []
    costs, resources = {}, {}
    for depth in range(draw(st.integers(1, 5))):
        layer = []
        for w in range(draw(st.integers(1, 4))):
            n = f"d{depth}w{w}"
            g.add_node(n)
            cls = f"c{draw(st.integers(0, n_classes - 1))}"
            same_cost = draw(st.booleans())
            base = draw(st.integers(0, 20))
            costs[n] = {
                ln.name: base if same_cost else draw(st.integers(0, 20))
                for ln in lanes
                if ln.lane_class == cls
            }
            resources[n] = tuple(p for p in pools if draw(st.booleans()))
            for earlier in (m for prev in layers for m in prev):
                if draw(st.integers(0, 3)) == 0:
                    g.add_edge(earlier, n)
            layer.append(n)
        layers.append(layer)
    comm = None
    if draw(st.booleans()):
        edge_cost = {e: draw(st.integers(0, 9)) for e in g.edges}
        comm = lambda u, v, a, b: 0 if a == b else edge_cost[(u, v)]  # noqa: E731
    return SchedulingProblem(g, lanes, costs, comm=comm, resources=resources, pools=pools)


@settings(
    max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
@given(random_problems(), st.integers(0, 3))
def test_every_policy_valid_and_above_the_lower_bound(problem, seed):
    bound = oracle_lower_bound(problem)
    chain_bounds = pool_chain_bounds(problem, hops=3)
    for policy in POLICIES:
        schedule = run_policy(problem, policy=policy, seed=seed)
        validate_schedule(schedule, problem)
        assert schedule.makespan >= bound, policy
        for name, cycles in chain_bounds.items():  # the metric's bound holds on every schedule
            assert schedule.makespan >= cycles, (policy, name)


@settings(
    max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
@given(random_problems())
def test_levels_follow_their_definition(problem):
    """The levels average each cost row once and skip comm where there is none; here they
    are taken node by node from the definition (mean cost plus the largest successor's
    level, with the edge's mean comm for HEFT's rank)."""
    mean = {n: problem.mean_cost(n) for n in problem.order}
    assert mean_costs(problem) == mean

    def levels(with_comm: bool) -> dict:
        out: dict = {}
        for n in reversed(problem.order):
            below = [out[s] + (problem.mean_comm(n, s) if with_comm else 0.0)
                     for s in problem.succs[n]]  # fmt: skip
            out[n] = mean[n] + max(below, default=0.0)
        return out

    assert bottom_levels(problem) == levels(False)
    assert upward_rank(problem) == levels(True)


def test_random_policy_is_deterministic_per_seed(heft_problem):
    a = run_policy(heft_problem, policy="random", seed=5)
    b = run_policy(heft_problem, policy="random", seed=5)
    assert a.slots == b.slots


# --- the decode-shaped graph through the real cost model -----------------------------------


@pytest.mark.parametrize("profile_name", ["v002-spec", "v002-as-built"])
def test_every_policy_valid_on_decode_shaped_graph(decode_graph, profile_name):
    profile = load_profile(profile_name)
    problem = problem_from_graph(decode_graph, profile)
    bound = oracle_lower_bound(problem)
    spans = {}
    for policy in POLICIES:
        schedule = run_policy(problem, profile, policy=policy)
        validate_schedule(schedule, problem)
        assert schedule.makespan >= bound
        spans[policy] = schedule.makespan
    assert spans["critical-path"] <= spans["program-order"]


# --- the lazy heap of ETF / DLS / Min-Min against a plain re-evaluate-everything loop ------


def plain_dynamic(problem, value_of, tie=None):
    """Re-evaluate every ready node at every step; place the smallest (value, -tie, order)."""
    tie = tie or {}
    timeline = Timeline(problem)
    ready = set(timeline.initial_ready())
    while ready:
        scored = []
        for n in ready:
            value, lane = value_of(timeline, n)
            scored.append(((value, -tie.get(n, 0.0), problem.index[n]), n, lane))
        _, node, lane = min(scored)
        timeline.place(node, lane)
        ready.remove(node)
        ready.update(timeline.released(node))
    return timeline.slots


def etf_value(timeline, n):
    lane, start = timeline.best_lane(n, by="start")
    return start, lane


def min_min_value(timeline, n):
    lane, start = timeline.best_lane(n, by="finish")
    return start + timeline.problem.costs[n][lane], lane


def dls_value(timeline, n):
    problem = timeline.problem
    level = bottom_levels(problem)
    best = None
    for lane, cost in problem.costs[n].items():
        dl = level[n] - timeline.earliest_start(n, lane) + (problem.mean_cost(n) - cost)
        if best is None or dl > best[0]:
            best = (dl, lane)
    return -best[0], best[1]


@settings(
    max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
@given(random_problems())
def test_lazy_dynamic_policies_match_a_plain_loop(problem):
    level = bottom_levels(problem)
    assert run_policy(problem, policy="etf").slots == plain_dynamic(problem, etf_value, level)
    assert run_policy(problem, policy="min-min").slots == plain_dynamic(problem, min_min_value)
    assert run_policy(problem, policy="dls").slots == plain_dynamic(problem, dls_value)


def plain_static(problem, priority):
    """Place the ready node of highest priority, ties to the earliest in program order,
    found by a scan of the ready nodes at every step, on its earliest-finish lane."""
    timeline = Timeline(problem)
    ready = list(timeline.initial_ready())
    while ready:
        node = min(ready, key=lambda n: (-priority[n], problem.index[n]))
        ready.remove(node)
        timeline.place(node, timeline.best_lane(node, True, "finish")[0], True)
        ready.extend(timeline.released(node))
    return timeline.slots


@settings(
    max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
@given(random_problems(), st.sampled_from(["levels", "coarse", "flat"]))
def test_static_priority_schedule_matches_a_plain_loop(problem, kind):
    """The heap of ranks takes the nodes a scan of the ready set would, ties (many with
    coarse levels, every node with one priority) in program order."""
    level = bottom_levels(problem)
    priority = {"levels": level, "flat": dict.fromkeys(level, 1.0),
                "coarse": {n: float(v // 40) for n, v in level.items()}}[kind]  # fmt: skip
    timeline = Timeline(problem)

    def lane(n):
        return timeline.best_lane(n, True, "finish")[0]

    static_priority_schedule(problem, timeline, priority, lane, insertion=True)
    assert timeline.slots == plain_static(problem, priority)


# --- critical-path's stall-weighted levels --------------------------------------------------


def flow_shop_problem(tail_lane: str = "sfu0") -> SchedulingProblem:
    """Two branches from `fork` to `join`: a long weight stream (a1, a2) with a short host tail,
    and a short one (b) with a long tail on `tail_lane`. One port, one GEMV lane."""
    g = nx.DiGraph([("fork", "a1"), ("a1", "a2"), ("a2", "a_tail"), ("a_tail", "join"),
                    ("fork", "b"), ("b", "b_tail"), ("b_tail", "join")])  # fmt: skip
    lanes = [Lane("gemv0", "gemv"), Lane("host0", "host"), Lane("sfu0", "sfu")]
    on = {"a1": ("gemv0", 10), "a2": ("gemv0", 10), "b": ("gemv0", 2), "fork": ("host0", 1),
          "a_tail": ("host0", 5), "b_tail": (tail_lane, 20), "join": ("host0", 1)}  # fmt: skip
    costs = {n: {lane: c} for n, (lane, c) in on.items()}
    resources = {n: ("port",) for n in ("a1", "a2", "b")}
    return SchedulingProblem(g, lanes, costs, resources=resources, pools={"port": 1})


def test_stall_levels_by_hand():
    problem = flow_shop_problem()
    first = stage_one_nodes(problem)
    assert first == {"a1", "a2", "b"}
    assert first_stage_binds(problem, first)  # 22 cycles on the GEMV lane, 20 on the SFU
    # b stalls the GEMV lane for its tail: 20 + 1 after its 2 cycles, half of 19 counts;
    # a2's tail (5 + 1) is shorter than its own 10 cycles: no stall
    expected = {"join": 1, "b_tail": 21, "a_tail": 6, "a2": 16, "a1": 26,
                "b": 2 + 0.5 * 19 + 21, "fork": 1 + 32.5}  # fmt: skip
    assert stall_levels(problem, weight=0.5) == pytest.approx(expected)
    assert stall_levels(problem, weight=0.0) == pytest.approx(bottom_levels(problem))


def test_critical_path_starts_the_branch_with_the_long_tail_first():
    problem = flow_shop_problem()
    # plain HLFET levels: a1 (26) before b (23), so b's tail starts only after a1 and the
    # join waits for it: 1 + 10 + 2 + 20 + 1
    timeline = Timeline(problem)

    def lane(n):
        return timeline.best_lane(n, insertion=True)[0]

    static_priority_schedule(problem, timeline, bottom_levels(problem), lane, insertion=True)
    assert timeline.to_schedule("hlfet", "test").makespan == 34
    # weighed: b first, its tail overlaps both GEMVs: 1 + 2 + 10 + 10 + 5 + 1
    schedule = run_policy(problem, policy="critical-path")
    validate_schedule(schedule, problem)
    assert schedule.makespan == 29
    assert schedule.slots["b"].start < schedule.slots["a1"].start


def test_stalls_are_not_weighed_where_another_lane_binds():
    # b's tail on the host: 27 cycles of host work against 22 on the GEMV lane
    problem = flow_shop_problem(tail_lane="host0")
    assert not first_stage_binds(problem, stage_one_nodes(problem))
    assert stall_levels(problem) == pytest.approx(bottom_levels(problem))


def test_without_pools_critical_path_levels_are_hlfets(heft_problem):
    assert not heft_problem.pools
    assert not first_stage_binds(heft_problem, stage_one_nodes(heft_problem))
    assert stall_levels(heft_problem) == bottom_levels(heft_problem)


def test_an_order_edge_between_nodes_of_the_same_lanes_adds_nothing_to_a_level():
    """Reads r1 -> r2 on the DMA lane, each read by a GEMV: the order-only edge between the
    two reads orders their issue, so r2's long chain (r2, use2) is not r1's; the order
    edge from use1 to r3 makes r3 wait for a result of another lane and still counts."""
    g = nx.DiGraph([("r1", "use1"), ("r2", "use2"), ("r3", "use3")])
    lanes = [Lane("dma0", "dma"), Lane("gemv0", "gemv")]
    on = {"r1": ("dma0", 5), "r2": ("dma0", 5), "r3": ("dma0", 5),
          "use1": ("gemv0", 3), "use2": ("gemv0", 20), "use3": ("gemv0", 3)}  # fmt: skip
    costs = {n: {lane: c} for n, (lane, c) in on.items()}
    order = [("r1", "r2"), ("use1", "r3")]
    problem = SchedulingProblem(g, lanes, costs, order_edges=order)
    assert issue_order_edges(problem) == {("r1", "r2")}
    levels = stall_levels(problem)
    assert levels["use1"] == 3 + 5 + 3  # r3 and use3 below it
    assert levels["r1"] == 5 + levels["use1"]  # not 5 + r2's 25
    assert levels["r2"] == 25
    counted = SchedulingProblem(g, lanes, costs, order_edges=[("r1", "use2")])  # other lanes
    assert stall_levels(counted)["r1"] == 5 + 20


# --- program-order: in-order issue of what the timeline has released -----------------------


def in_program_order(problem: SchedulingProblem) -> dict:
    """The naive driver written out: every node in ``problem.order``, never before the
    previous one started."""
    timeline = Timeline(problem)
    last = 0
    for n in problem.order:
        lane, _ = timeline.best_lane(n, by="start", not_before=last)
        last = timeline.place(n, lane, not_before=last).start
    return timeline.slots


@settings(
    max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
@given(random_problems())
def test_program_order_without_admission_is_program_order_itself(problem):
    assert run_policy(problem, policy="program-order").slots == in_program_order(problem)


def test_program_order_issues_a_held_back_read_once_there_is_room_for_it():
    """Three 40-byte reads in 100 bytes of L2, all ahead of their readers in program order:
    issued there the third has no room and nothing placed frees any (a deadlock); with a
    20-byte reserve (`problem.admit`) it is issued after the first reader freed room."""
    g = nx.DiGraph()
    g.add_nodes_from(["r0", "r1", "r2"])
    g.add_edges_from((f"r{i}", f"u{i}") for i in range(3))
    lanes = [Lane("x0", "cpu")]
    costs = {n: {"x0": 10} for n in g}
    holds = {f"r{i}": [((f"u{i}",), {"l2": 40})] for i in range(3)}

    def problem(admit=None):
        return SchedulingProblem(
            g, lanes, costs, capacities={"l2": 100}, holds=holds, admit=admit
        )

    assert problem().order[:3] == ("r0", "r1", "r2")
    with pytest.raises(ScheduleError, match="memory deadlock"):
        in_program_order(problem())
    schedule = run_policy(problem({f"r{i}": 20 for i in range(3)}), policy="program-order")
    starts = sorted(schedule.slots, key=lambda n: schedule.slots[n].start)
    assert starts == ["r0", "r1", "u0", "r2", "u1", "u2"]
