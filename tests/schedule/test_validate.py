"""The validator accepts a correct hand-made schedule and rejects each kind of breakage."""

from __future__ import annotations

import dataclasses

import networkx as nx
import pytest

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
    slots[node] = dataclasses.replace(slots[node], **changes)
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
    s.slots["c"] = dataclasses.replace(s.slots["b"])  # b twice, c never
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
