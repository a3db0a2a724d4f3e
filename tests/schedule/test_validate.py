"""The validator accepts a correct hand-made schedule and rejects each kind of breakage."""

from __future__ import annotations

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pccx_flow.errors import ScheduleError
from pccx_flow.schedule.model import Lane, Schedule, Slot
from pccx_flow.schedule.problem import SchedulingProblem
from pccx_flow.schedule.validate import is_valid, validate_schedule


def small_problem() -> SchedulingProblem:
    """a -> b, a -> c on two GEMV lanes and one SFU lane; GEMVs hold one of two ports."""
    g = nx.DiGraph([("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")])
    lanes = [Lane("gemv0", "gemv"), Lane("gemv1", "gemv"), Lane("sfu0", "sfu")]
    costs = {
        "a": {"sfu0": 2},
        "b": {"gemv0": 5, "gemv1": 5},
        "c": {"gemv0": 4, "gemv1": 4},
        "d": {"sfu0": 1},
    }
    return SchedulingProblem(
        g, lanes, costs, resources={"b": ("port",), "c": ("port",)}, pools={"port": 2}
    )


def good_schedule(problem: SchedulingProblem) -> Schedule:
    slots = {
        "a": Slot("a", "sfu0", 0, 2),
        "b": Slot("b", "gemv0", 2, 7, ("port0",)),
        "c": Slot("c", "gemv1", 2, 6, ("port1",)),
        "d": Slot("d", "sfu0", 7, 8),
    }
    return Schedule("hand", "test", problem.lanes, slots)


def broken(schedule: Schedule, node: str, **changes) -> Schedule:
    slots = dict(schedule.slots)
    slots[node] = slots[node]._replace(**changes)
    return Schedule(schedule.policy, schedule.profile, schedule.lanes, slots)


def test_hand_made_schedule_is_valid():
    problem = small_problem()
    validate_schedule(good_schedule(problem), problem)
    assert is_valid(good_schedule(problem), problem)


def test_missing_node():
    problem = small_problem()
    s = good_schedule(problem)
    del s.slots["c"]
    with pytest.raises(ScheduleError, match="'c' is not scheduled"):
        validate_schedule(s, problem)


def test_duplicate_node_filed_under_another_name():
    problem = small_problem()
    s = good_schedule(problem)
    s.slots["c"] = s.slots["b"]  # b twice, c never
    with pytest.raises(ScheduleError, match="scheduled twice"):
        validate_schedule(s, problem)


def test_node_not_in_graph():
    problem = small_problem()
    s = good_schedule(problem)
    s.slots["zz"] = Slot("zz", "sfu0", 20, 21)
    with pytest.raises(ScheduleError, match="'zz' is scheduled but is not in the graph"):
        validate_schedule(s, problem)


def test_wrong_lane_class():
    problem = small_problem()
    s = broken(good_schedule(problem), "d", lane="gemv1")
    with pytest.raises(ScheduleError, match="lane 'gemv1', which cannot run it"):
        validate_schedule(s, problem)


def test_unknown_lane():
    problem = small_problem()
    s = broken(good_schedule(problem), "d", lane="gemv9")
    with pytest.raises(ScheduleError, match="unknown lane 'gemv9'"):
        validate_schedule(s, problem)


def test_wrong_duration():
    problem = small_problem()
    s = broken(good_schedule(problem), "b", finish=8)
    with pytest.raises(ScheduleError, match="runs 6 cycles .* but costs 5"):
        validate_schedule(s, problem)


def test_precedence_violation():
    problem = small_problem()
    s = broken(good_schedule(problem), "d", start=6, finish=7)  # b finishes at 7
    with pytest.raises(ScheduleError, match="'d' starts at 6 before its input from 'b'"):
        validate_schedule(s, problem)


def test_precedence_counts_comm():
    g = nx.DiGraph([("u", "v")])
    lanes = [Lane("p0", "cpu"), Lane("p1", "cpu")]
    costs = {"u": {"p0": 3, "p1": 3}, "v": {"p0": 2, "p1": 2}}
    problem = SchedulingProblem(g, lanes, costs, comm=lambda u, v, a, b: 0 if a == b else 10)
    same = Schedule(
        "hand", "t", problem.lanes, {"u": Slot("u", "p0", 0, 3), "v": Slot("v", "p0", 3, 5)}
    )
    validate_schedule(same, problem)
    moved = broken(same, "v", lane="p1")
    with pytest.raises(ScheduleError, match="ready at 13"):
        validate_schedule(moved, problem)


def test_lane_overlap():
    problem = small_problem()
    s = broken(good_schedule(problem), "c", lane="gemv0", start=3, finish=7)
    with pytest.raises(ScheduleError, match="lane 'gemv0' runs 'b' .* and 'c' .* at the same time"):
        validate_schedule(s, problem)


def test_pool_instance_overlap():
    problem = small_problem()
    s = broken(good_schedule(problem), "c", resources=("port0",))
    with pytest.raises(ScheduleError, match="pool instance 'port0' runs"):
        validate_schedule(s, problem)


def test_missing_pool_instance():
    problem = small_problem()
    s = broken(good_schedule(problem), "c", resources=())
    with pytest.raises(ScheduleError, match="'c' holds \\[\\] but needs one instance each of"):
        validate_schedule(s, problem)


def test_extra_or_unknown_pool_instance():
    problem = small_problem()
    s = broken(good_schedule(problem), "a", resources=("port1",))
    with pytest.raises(ScheduleError, match="'a' holds \\['port1'\\] but needs"):
        validate_schedule(s, problem)
    s = broken(good_schedule(problem), "b", resources=("port7",))
    with pytest.raises(ScheduleError, match="unknown pool instance 'port7'"):
        validate_schedule(s, problem)


def test_negative_start():
    problem = small_problem()
    s = broken(good_schedule(problem), "a", start=-2, finish=0)
    with pytest.raises(ScheduleError, match="starts at -2"):
        validate_schedule(s, problem)


def test_zero_length_slots_overlap_nothing():
    g = nx.DiGraph()
    g.add_nodes_from(["x", "y"])
    problem = SchedulingProblem(g, [Lane("c0", "ctrl")], {"x": {"c0": 0}, "y": {"c0": 4}})
    s = Schedule(
        "hand", "t", problem.lanes, {"x": Slot("x", "c0", 2, 2), "y": Slot("y", "c0", 0, 4)}
    )
    validate_schedule(s, problem)


@settings(max_examples=150, deadline=None, derandomize=True)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 12),  # the writer's start
            st.integers(0, 4),  # its cost
            st.integers(0, 4),  # the reader's delay after it
            st.integers(0, 4),  # the reader's cost
            st.integers(1, 9),  # bytes held
        ),
        min_size=1,
        max_size=6,
    ),
    st.integers(1, 20),
)
def test_capacity_check_agrees_with_every_instant_counted(pairs, size):
    """Pairs w_i -> r_i on lanes of their own, w_i holding bytes until both finished: the
    validator refuses the schedule exactly when, counted cycle by cycle, some cycle holds
    more than the capacity, and names the first such cycle."""
    g = nx.DiGraph([(f"w{i}", f"r{i}") for i in range(len(pairs))])
    lanes, costs, slots, holds = [], {}, {}, {}
    end = 0
    for i, (start, cost, delay, read_cost, nbytes) in enumerate(pairs):
        read_start = start + cost + delay
        for name, t, c in ((f"w{i}", start, cost), (f"r{i}", read_start, read_cost)):
            lanes.append(Lane(f"x_{name}", "cpu"))
            costs[name] = {f"x_{name}": c}
            slots[name] = Slot(name, f"x_{name}", t, t + c)
        holds[f"w{i}"] = [((f"r{i}",), {"l2": nbytes})]
        end = max(end, read_start + read_cost)
    p = SchedulingProblem(g, lanes, costs, capacities={"l2": size}, holds=holds)

    def held(t: int) -> int:  # the oracle: every hold resident at cycle t
        total = 0
        for start, cost, delay, read_cost, nbytes in pairs:
            freed = max(start + cost, start + cost + delay + read_cost)
            total += nbytes if start <= t < freed else 0
        return total

    over = [t for t in range(end + 1) if held(t) > size]
    schedule = Schedule("hand", "test", p.lanes, slots)
    if not over:
        validate_schedule(schedule, p)
        return
    with pytest.raises(ScheduleError, match=f"'l2' holds [0-9,]+ bytes at cycle {over[0]} ") as e:
        validate_schedule(schedule, p)
    level = int(str(e.value).split(" holds ")[1].split(" bytes")[0].replace(",", ""))
    assert size < level <= held(over[0])
