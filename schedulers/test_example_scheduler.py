"""The example plugin works through every way pccx-flow can find it."""

from __future__ import annotations

from importlib.metadata import entry_points

import networkx as nx
import pytest

from pccx_flow.cli.main import main
from pccx_flow.schedule.model import Lane
from pccx_flow.schedule.problem import SchedulingProblem
from pccx_flow.schedule.registry import ENTRY_POINT_GROUP, list_policies, run_policy
from pccx_flow.schedule.validate import validate_schedule


def two_lane_problem() -> SchedulingProblem:
    # Four independent jobs of 5, 4, 3, 3 cycles on two identical lanes; one job of 1 after
    # the 5. LPT puts 5 and 4 first, then 3 and 3 on the lanes as they free up.
    g = nx.DiGraph([("j5", "tail")])
    g.add_nodes_from(["j3a", "j3b", "j4"])
    lanes = [Lane("a", "cpu"), Lane("b", "cpu")]
    cost = {"j3a": 3, "j3b": 3, "j4": 4, "j5": 5, "tail": 1}
    return SchedulingProblem(g, lanes, {n: {"a": c, "b": c} for n, c in cost.items()})


def test_longest_first_by_module_and_class():
    problem = two_lane_problem()
    schedule = run_policy(problem, policy="pccx_example_scheduler:LongestFirst")
    validate_schedule(schedule, problem)
    starts = {n: (s.lane, s.start) for n, s in schedule.slots.items()}
    assert starts["j5"] == ("a", 0) and starts["j4"] == ("b", 0)
    assert starts["j3a"] == ("b", 4) and starts["j3b"] == ("a", 5)
    assert schedule.makespan == 8


def installed() -> bool:
    return "longest-first" in {ep.name for ep in entry_points(group=ENTRY_POINT_GROUP)}


@pytest.mark.skipif(not installed(), reason="needs `pip install -e schedulers/` (make test does)")
def test_longest_first_by_entry_point_and_cli(capsys):
    assert ("longest-first", "plugin pccx_example_scheduler:LongestFirst") in {
        (name, origin) for name, origin, _ in list_policies()
    }
    problem = two_lane_problem()
    assert run_policy(problem, policy="longest-first").makespan == 8
    assert main(["schedule", "--list"]) == 0
    assert "longest-first" in capsys.readouterr().out
