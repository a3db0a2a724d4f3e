"""``etf``: Earliest Task First (Hwang, Chow, Anger and Lee, 1989).

At every step, of all ready nodes on all their lanes, the pair that can start earliest is
placed (appended); equal starts go to the node with the higher static b-level. ETF keeps
every lane busy as soon as it can be, at the price of sometimes starting a short node that
is off the critical path ahead of one that is on it.
"""

from __future__ import annotations

from pccx_flow.schedule.policies.base import Policy, bottom_levels, dynamic_pair_schedule
from pccx_flow.schedule.problem import SchedulingProblem
from pccx_flow.schedule.timeline import Timeline


class Etf(Policy):
    name = "etf"
    description = "ETF: earliest (node, lane) start first, b-level breaks ties"

    def schedule(self, problem: SchedulingProblem, timeline: Timeline) -> None:
        level = bottom_levels(problem)

        def earliest_start(node):
            lane, start = timeline.best_lane(node, by="start")
            return start, lane

        dynamic_pair_schedule(problem, timeline, earliest_start, tie=level)
