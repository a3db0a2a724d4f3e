"""``lookahead``: PEFT, Predict Earliest Finish Time (Arabnejad and Barbosa, 2014).

This is PEFT's optimistic cost table, not HEFT with a one-step lookahead. OCT[n][p] is the
shortest possible time from n finishing on lane p to the end of the DAG, assuming every
descendant gets its best lane and pays mean comm only when it changes lane:

    OCT[n][p] = max over successors s of  min over lanes q of s:
                    OCT[s][q] + cost(s, q) + (mean comm(n, s) if q != p else 0)

Priority is the mean of OCT[n] over n's lanes; a node goes to the lane minimising its
insertion-based earliest finish plus OCT[n][lane], i.e. the lane that leaves its
descendants the shortest road home.
"""

from __future__ import annotations

from pccx_flow.schedule.policies.base import Policy, static_priority_schedule
from pccx_flow.schedule.problem import SchedulingProblem
from pccx_flow.schedule.timeline import Timeline


def optimistic_cost_table(problem: SchedulingProblem) -> dict:
    """OCT[n][lane] for every node and every lane that can run it."""
    oct_table: dict = {}
    for n in reversed(problem.order):
        row = {}
        for p in problem.costs[n]:
            worst = 0.0
            for s in problem.succs[n]:
                c = problem.mean_comm(n, s)
                best = min(
                    oct_table[s][q] + cost + (c if q != p else 0.0)
                    for q, cost in problem.costs[s].items()
                )
                if best > worst:
                    worst = best
            row[p] = worst
        oct_table[n] = row
    return oct_table


class Lookahead(Policy):
    name = "lookahead"
    description = "PEFT: optimistic cost table rank, insertion EFT + OCT lane choice"

    def schedule(self, problem: SchedulingProblem, timeline: Timeline) -> None:
        table = optimistic_cost_table(problem)
        rank = {n: sum(row.values()) / len(row) for n, row in table.items()}

        def lane_with_best_outlook(node):
            best, best_lane = None, ""
            for lane, cost in problem.costs[node].items():
                eft = timeline.earliest_start(node, lane, insertion=True) + cost
                value = eft + table[node][lane]
                if best is None or value < best:
                    best, best_lane = value, lane
            return best_lane

        static_priority_schedule(problem, timeline, rank, lane_with_best_outlook, insertion=True)
