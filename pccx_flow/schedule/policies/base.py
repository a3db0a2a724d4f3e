"""The one interface every policy implements, and the priorities several of them share.

A policy is a class with a ``name``, a one-line ``description`` and a method
``schedule(problem, timeline)`` that places every node through ``timeline.place`` and returns
None. It decides only the order of nodes and the lane of each; the timeline decides times.
(A policy that computes its own times may instead return ``{node: (lane, start)}``; that
schedule then goes through the same validator.) Ties are always broken by the node's position
in the problem's program order, so every policy is deterministic.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Hashable, Mapping

from pccx_flow.schedule.problem import SchedulingProblem
from pccx_flow.schedule.timeline import Timeline

Node = Hashable


class Policy:
    """Base class of scheduling policies (plugins need not subclass it, only match it)."""

    name: str = ""
    description: str = ""

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed

    def schedule(self, problem: SchedulingProblem, timeline: Timeline) -> None:
        raise NotImplementedError


# --- static priorities ---------------------------------------------------------------------


def mean_costs(problem: SchedulingProblem) -> dict[Node, float]:
    """Every node's mean cost over its lanes (`SchedulingProblem.mean_cost`), each cost row
    averaged once: the nodes of a step share a few rows (every tile of a matrix, say), and
    averaging per node took a fifth of the levels' time at position 8191."""
    by_row: dict[int, float] = {}  # id of a row object of ``problem.costs``, alive meanwhile
    out: dict[Node, float] = {}
    for n, row in problem.costs.items():
        mean = by_row.get(id(row))
        if mean is None:
            mean = by_row[id(row)] = sum(row.values()) / len(row)
        out[n] = mean
    return out


def bottom_levels(problem: SchedulingProblem, *, with_comm: bool = False) -> dict[Node, float]:
    """Static b-level: mean cost of the node plus the longest mean-cost path below it.

    HLFET, ETF and DLS use it without communication (as in their papers); with_comm=True adds
    each edge's mean comm, which is HEFT's upward rank (a problem without comm has none to
    add: the edges are not asked).
    """
    mean, succs = mean_costs(problem), problem.succs
    comm = problem.mean_comm if with_comm and problem.has_comm else None
    level: dict[Node, float] = {}
    for n in reversed(problem.order):
        below = 0.0
        if comm is None:
            for s in succs[n]:
                x = level[s]
                if x > below:
                    below = x
        else:
            for s in succs[n]:
                x = level[s] + comm(n, s)
                if x > below:
                    below = x
        level[n] = mean[n] + below
    return level


def upward_rank(problem: SchedulingProblem) -> dict[Node, float]:
    """HEFT's rank_u: mean cost plus the longest path (mean costs and mean comm) to an exit."""
    return bottom_levels(problem, with_comm=True)


def downward_rank(problem: SchedulingProblem) -> dict[Node, float]:
    """CPOP's rank_d: the longest path (mean costs and comm) from an entry up to the node."""
    rank: dict[Node, float] = {}
    for n in problem.order:
        above = 0.0
        for p in problem.preds[n]:
            x = rank[p] + problem.mean_cost(p) + problem.mean_comm(p, n)
            if x > above:
                above = x
        rank[n] = above
    return rank


# --- drivers -------------------------------------------------------------------------------


def static_priority_schedule(
    problem: SchedulingProblem,
    timeline: Timeline,
    priority: Mapping[Node, float],
    choose_lane: Callable[[Node], str],
    *,
    insertion: bool,
) -> None:
    """List scheduling with a static priority: always take the ready node of highest priority.

    With priorities that fall along every edge (b-level, rank_u) this is exactly the sorted
    list of the papers; the ready set only keeps zero-cost ties from breaking precedence.
    `priority` must give every node of the problem one (all are ranked before the first
    is placed), each comparable with the others.
    """
    # Every node's rank in (priority, program order), from one stable sort of the program
    # order by priority: the heap holds ranks, ints, and compares nothing else (heft and
    # critical-path at 8191: 0.987x the instructions of a heap of (-priority, position,
    # node) tuples, the same order)
    by_rank = sorted(problem.order, key=priority.__getitem__, reverse=True)  # stable
    rank = {n: i for i, n in enumerate(by_rank)}
    heap = [rank[n] for n in timeline.initial_ready()]
    heapq.heapify(heap)
    pop, push, place, released = heapq.heappop, heapq.heappush, timeline.place, timeline.released
    while heap:
        node = by_rank[pop(heap)]
        place(node, choose_lane(node), insertion)
        for s in released(node):
            push(heap, rank[s])


def dynamic_pair_schedule(
    problem: SchedulingProblem,
    timeline: Timeline,
    key: Callable[[Node], tuple[float, str]],
    tie: Mapping[Node, float] | None = None,
) -> None:
    """Greedy list scheduling that re-evaluates every ready node at every step.

    `key(node)` returns (value, lane) for the node's best lane right now; the ready node with
    the smallest value is placed next. Evaluating all ready nodes at every step is quadratic,
    but each value can only grow as placements fill lanes and pools (earliest starts never move
    earlier), so a lazy heap is exact: pop the smallest stale value, recompute it, and place
    the node if it did not change, else push it back. `tie` (larger first) breaks equal values
    before program order does.
    """
    index = problem.index
    tie = tie or {}
    timeline.remember_starts()

    def entry(n: Node) -> tuple:
        value, lane = key(n)
        return (value, -tie.get(n, 0.0), index[n], n, lane)

    heap = [entry(n) for n in timeline.initial_ready()]
    heapq.heapify(heap)
    while heap:
        value, neg_tie, idx, node, lane = heapq.heappop(heap)
        fresh = entry(node)
        if fresh[0] != value and heap and fresh[:3] > heap[0][:3]:
            heapq.heappush(heap, fresh)
            continue
        timeline.place(node, fresh[4])
        for s in timeline.released(node):
            heapq.heappush(heap, entry(s))
