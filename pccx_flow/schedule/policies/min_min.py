"""``min-min``: the Min-Min heuristic (Ibarra and Kim 1977; Braun et al. 2001) on a DAG.

At every step each ready node's minimum completion time over its lanes is computed and the
node with the smallest one is placed there (appended). Short work goes first; it was made
for independent tasks, and on a DAG it ignores what lies below a node, so it is here as a
contrast to the level-based policies.
"""

from __future__ import annotations

from pccx_flow.schedule.policies.base import Policy, dynamic_pair_schedule
from pccx_flow.schedule.problem import SchedulingProblem
from pccx_flow.schedule.timeline import Timeline


class MinMin(Policy):
    name = "min-min"
    description = "Min-Min: ready node with the smallest earliest finish first"

    def schedule(self, problem: SchedulingProblem, timeline: Timeline) -> None:
        def earliest_finish(node):
            lane, start = timeline.best_lane(node, by="finish")
            return start + problem.costs[node][lane], lane

        dynamic_pair_schedule(problem, timeline, earliest_finish)
