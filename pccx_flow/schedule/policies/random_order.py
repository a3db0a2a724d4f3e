"""``random``: a seeded random list schedule, the floor an informed policy must beat.

At each step a uniformly random ready node goes to a uniformly random lane that can run it
(appended after that lane's last node). Same seed, same schedule. Within a capacity (L2),
a node whose bytes could never fit next to what placed nodes hold (the timeline's
`memory deadlock`) waits in the ready set until a placement frees room; only when every
ready node would deadlock does the order fail, with the first such error. (Without that
wait a random order of the E4B step at 8191 tokens placed the next layer's KV tiles while
the MLP they stream in beside still needed room, and stopped there.)
"""

from __future__ import annotations

import random

from pccx_flow.errors import ScheduleError
from pccx_flow.schedule.policies.base import Policy
from pccx_flow.schedule.problem import SchedulingProblem
from pccx_flow.schedule.timeline import Timeline


class RandomOrder(Policy):
    name = "random"
    description = "seeded random ready node on a random capable lane (--seed)"

    def schedule(self, problem: SchedulingProblem, timeline: Timeline) -> None:
        rng = random.Random(self.seed)
        ready = timeline.initial_ready()
        waiting: list[tuple] = []  # (node, its error): no room for it until a placement
        while ready:
            i = rng.randrange(len(ready))
            ready[i], ready[-1] = ready[-1], ready[i]
            node = ready.pop()
            lanes = problem.lanes_for(node)
            try:
                timeline.place(node, lanes[rng.randrange(len(lanes))])
            except ScheduleError as e:
                if not problem.capacities:
                    raise
                waiting.append((node, e))
                if not ready:
                    raise waiting[0][1] from None
                continue
            ready.extend(timeline.released(node))
            ready.extend(n for n, _ in waiting)
            waiting.clear()
