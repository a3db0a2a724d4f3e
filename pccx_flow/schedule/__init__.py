"""List scheduling of a decode-step DAG onto pccx lanes, with pluggable policies.

A policy decides the order of nodes and the lane of each (`policies`); the shared
`timeline` turns those decisions into start times; `validate` checks the result against the
rules on its own; `metrics`, `report` and `trace` measure and show it. Every time is in
cycles of the profile's core clock and is a model estimate, never a measurement.

>>> from pccx_flow.schedule import Lane, SchedulingProblem, run_policy
>>> import networkx as nx
>>> g = nx.DiGraph([("load", "use")])
>>> p = SchedulingProblem(g, [Lane("x0", "cpu")], {"load": {"x0": 3}, "use": {"x0": 2}})
>>> run_policy(p, policy="critical-path").makespan
5
"""

from pccx_flow.schedule.metrics import schedule_metrics
from pccx_flow.schedule.model import Lane, Schedule, Slot
from pccx_flow.schedule.problem import SchedulingProblem, problem_from_graph
from pccx_flow.schedule.registry import (
    BUILTIN_POLICIES,
    DEFAULT_POLICY,
    list_policies,
    make_policy,
    run_policy,
)
from pccx_flow.schedule.timeline import Timeline
from pccx_flow.schedule.validate import validate_schedule

__all__ = [
    "BUILTIN_POLICIES",
    "DEFAULT_POLICY",
    "Lane",
    "Schedule",
    "SchedulingProblem",
    "Slot",
    "Timeline",
    "list_policies",
    "make_policy",
    "problem_from_graph",
    "run_policy",
    "schedule_metrics",
    "validate_schedule",
]
