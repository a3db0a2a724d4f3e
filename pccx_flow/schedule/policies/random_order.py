"""``random``: a seeded random list schedule, the floor an informed policy must beat.

At each step a uniformly random ready node goes to a uniformly random lane that can run it
(appended after that lane's last node). Same seed, same schedule.
"""

from __future__ import annotations

import random

from pccx_flow.schedule.policies.base import Policy
from pccx_flow.schedule.problem import SchedulingProblem
from pccx_flow.schedule.timeline import Timeline


class RandomOrder(Policy):
    name = "random"
    description = "seeded random ready node on a random capable lane (--seed)"

    def schedule(self, problem: SchedulingProblem, timeline: Timeline) -> None:
        rng = random.Random(self.seed)
        ready = timeline.initial_ready()
        while ready:
            i = rng.randrange(len(ready))
            ready[i], ready[-1] = ready[-1], ready[i]
            node = ready.pop()
            lanes = problem.lanes_for(node)
            timeline.place(node, lanes[rng.randrange(len(lanes))])
            ready.extend(timeline.released(node))
