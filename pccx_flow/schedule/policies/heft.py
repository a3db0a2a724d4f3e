"""``heft``: Heterogeneous Earliest Finish Time (Topcuoglu, Hariri and Wu, 2002).

Priority is the upward rank: a node's mean cost over the lanes that can run it, plus the
longest path to an exit counting mean costs and mean communication. Nodes go in decreasing
rank to the lane that finishes them earliest, filling idle gaps on a lane when a node fits
(the insertion-based policy). On pccx lanes of one class cost the same and comm is 0, so rank
is the b-level; the difference to `critical-path` (which fills gaps too) is finish-time
placement: on the E4B step the two reach the same makespan at every position measured
(0-8191, both profiles; `benchmarks/bench_gap.py`).
"""

from __future__ import annotations

from pccx_flow.schedule.policies.base import Policy, static_priority_schedule, upward_rank
from pccx_flow.schedule.problem import SchedulingProblem
from pccx_flow.schedule.timeline import Timeline


class Heft(Policy):
    name = "heft"
    description = "HEFT: upward rank (mean costs), insertion-based earliest finish"

    def schedule(self, problem: SchedulingProblem, timeline: Timeline) -> None:
        rank = upward_rank(problem)

        best_lane = timeline.best_lane

        def earliest_finish_lane(node):
            return best_lane(node, True, "finish")[0]  # insertion, by finish

        static_priority_schedule(problem, timeline, rank, earliest_finish_lane, insertion=True)
