"""``critical-path`` (the default): HLFET, highest level first with estimated times.

Adam, Chandy and Dickson's static list scheduler: a node's priority is its b-level (its own
mean cost plus the longest chain of mean costs below it), the ready node with the highest
b-level goes next, onto the lane where it can start earliest. Unlike the paper's HLFET it
may start in an idle gap between two nodes already on that lane (insertion, as HEFT and the
ISH variant of HLFET do). Appended only, a node of lower level waited behind every node of
higher level placed on its lane, even ones that could not start until much later: on E4B
at position 1023 the V projection queued on the GEMV lanes behind the scores and ·V of
every head while the weight ports idled, and the step was 5.9 % over the largest bound of
the time, 3.4 % with insertion (v002-spec, `benchmarks/bench_gap.py`).
On a decode step this keeps the long weight-streaming GEMV chain of the main stream moving
while short side branches (LAuReL, PLE, constants) fill in around it. It is the cheapest of
the informed policies: one pass for the levels, one heap pass to place.
"""

from __future__ import annotations

from pccx_flow.schedule.policies.base import Policy, bottom_levels, static_priority_schedule
from pccx_flow.schedule.problem import SchedulingProblem
from pccx_flow.schedule.timeline import Timeline


class CriticalPath(Policy):
    name = "critical-path"
    description = "HLFET: highest static b-level first, earliest start (gaps filled)"

    def schedule(self, problem: SchedulingProblem, timeline: Timeline) -> None:
        level = bottom_levels(problem)

        def earliest_start_lane(node):
            return timeline.best_lane(node, insertion=True, by="start")[0]

        static_priority_schedule(problem, timeline, level, earliest_start_lane, insertion=True)
