"""``cpop``: Critical Path On a Processor (Topcuoglu, Hariri and Wu, 2002).

Priority is rank_u + rank_d, the length of the longest path through the node. The nodes
whose priority equals the entry's lie on the critical path; they all go to one "critical
path lane", the one that runs them in the least total time, and every other node goes to the
lane that finishes it earliest (insertion-based). The paper assumes every processor can run
every task; when lanes have classes (pccx), critical-path nodes are grouped by the set of
lanes that can run them and each group gets its own critical-path lane.
"""

from __future__ import annotations

import math

from pccx_flow.schedule.policies.base import (
    Policy,
    downward_rank,
    static_priority_schedule,
    upward_rank,
)
from pccx_flow.schedule.problem import SchedulingProblem
from pccx_flow.schedule.timeline import Timeline


def critical_path_nodes(problem: SchedulingProblem, priority: dict) -> list:
    """Walk from the highest-priority entry along successors of equal priority."""
    entries = [n for n in problem.order if not problem.preds[n]]
    if not entries:
        return []
    index = problem.index
    node = max(entries, key=lambda n: (priority[n], -index[n]))
    length = priority[node]
    path = [node]
    while problem.succs[node]:
        on_path = [
            s for s in problem.succs[node] if math.isclose(priority[s], length, rel_tol=1e-9)
        ]
        if not on_path:
            break
        node = min(on_path, key=index.__getitem__)
        path.append(node)
    return path


class Cpop(Policy):
    name = "cpop"
    description = "CPOP: rank_u + rank_d, critical path pinned to its fastest lane"

    def schedule(self, problem: SchedulingProblem, timeline: Timeline) -> None:
        up, down = upward_rank(problem), downward_rank(problem)
        priority = {n: up[n] + down[n] for n in problem.order}
        path = critical_path_nodes(problem, priority)
        groups: dict[tuple[str, ...], list] = {}
        for n in path:
            groups.setdefault(problem.lanes_for(n), []).append(n)
        pinned = {}
        for lanes, members in groups.items():
            best = min(lanes, key=lambda ln: sum(problem.costs[m][ln] for m in members))
            for m in members:
                pinned[m] = best

        def choose_lane(node):
            lane = pinned.get(node)
            if lane is not None:
                return lane
            return timeline.best_lane(node, insertion=True, by="finish")[0]

        static_priority_schedule(problem, timeline, priority, choose_lane, insertion=True)
