"""``program-order``: the baseline a naive driver gives.

Nodes are issued one after another in program order (the order the graph builder emitted
them, which follows the specification's operator pipeline), each on the lane of its class
that can start it earliest, and never before the previous instruction started: an in-order
issue path with independent engines behind it, as pccx v002's single command FIFO is. Every
other policy is measured against this one.
"""

from __future__ import annotations

from pccx_flow.schedule.policies.base import Policy
from pccx_flow.schedule.problem import SchedulingProblem
from pccx_flow.schedule.timeline import Timeline


class ProgramOrder(Policy):
    name = "program-order"
    description = "naive baseline: in-order issue in program order, earliest lane"

    def schedule(self, problem: SchedulingProblem, timeline: Timeline) -> None:
        last_start = 0
        for node in problem.order:
            lane, _ = timeline.best_lane(node, by="start", not_before=last_start)
            last_start = timeline.place(node, lane, not_before=last_start).start
