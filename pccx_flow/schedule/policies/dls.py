"""``dls``: Dynamic Level Scheduling (Sih and Lee, 1993).

The dynamic level of a node on a lane is its static level (mean-cost b-level) minus the
earliest time it can start there, plus how much faster that lane is than the node's mean
cost (Δ = mean - cost on the lane; 0 between identical lanes). At every step the ready
(node, lane) pair with the highest dynamic level is placed (appended). Unlike ETF it weighs
how urgent a node is against how long it would wait.
"""

from __future__ import annotations

from pccx_flow.schedule.policies.base import Policy, bottom_levels, dynamic_pair_schedule
from pccx_flow.schedule.problem import SchedulingProblem
from pccx_flow.schedule.timeline import Timeline


class Dls(Policy):
    name = "dls"
    description = "DLS: highest dynamic level (b-level - start + lane speed-up)"

    def schedule(self, problem: SchedulingProblem, timeline: Timeline) -> None:
        level = bottom_levels(problem)

        def negative_dynamic_level(node):
            mean = problem.mean_cost(node)
            best, best_lane = None, ""
            for lane, cost in problem.costs[node].items():
                dl = level[node] - timeline.earliest_start(node, lane) + (mean - cost)
                if best is None or dl > best:
                    best, best_lane = dl, lane
            return -best, best_lane

        dynamic_pair_schedule(problem, timeline, negative_dynamic_level)
