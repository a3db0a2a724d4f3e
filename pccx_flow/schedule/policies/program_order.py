"""``program-order``: the baseline a naive driver gives.

Nodes are issued one after another in program order (the order the graph builder emitted
them, which follows the specification's operator pipeline), each on the lane of its class
that can start it earliest, and never before the previous instruction started: an in-order
issue path with independent engines behind it, as pccx v002's single command FIFO is. Every
other policy is measured against this one.

"Next in program order" is among the nodes the timeline has released: the first node of
program order not yet placed is always ready (program order is topological), so without
``problem.admit`` this is program order itself. With it, a KV read the timeline holds back
until L2 has room (`Timeline.initial_ready`) is issued when it is released, after the work
that made the room, as a driver that waits for room would; issued where program order has
it, a step's reads filled L2 before the work that frees it and the step deadlocked.
"""

from __future__ import annotations

import heapq

from pccx_flow.schedule.policies.base import Policy
from pccx_flow.schedule.problem import SchedulingProblem
from pccx_flow.schedule.timeline import Timeline


class ProgramOrder(Policy):
    name = "program-order"
    description = "naive baseline: in-order issue in program order, earliest lane"

    def schedule(self, problem: SchedulingProblem, timeline: Timeline) -> None:
        index = problem.index
        ready = [(index[n], n) for n in timeline.initial_ready()]
        heapq.heapify(ready)
        last_start = 0
        while ready:
            _, node = heapq.heappop(ready)
            lane, _ = timeline.best_lane(node, by="start", not_before=last_start)
            last_start = timeline.place(node, lane, not_before=last_start).start
            for s in timeline.released(node):
                heapq.heappush(ready, (index[s], s))
