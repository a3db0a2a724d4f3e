"""``critical-path`` (the default): HLFET, highest level first, with the lanes' stalls weighed.

Adam, Chandy and Dickson's static list scheduler: a node's priority is its b-level (its own
mean cost plus the longest chain of mean costs below it), the ready node with the highest
level goes next, onto the lane where it can start earliest. Unlike the paper's HLFET it
may start in an idle gap between two nodes already on that lane (insertion, as HEFT and the
ISH variant of HLFET do). Appended only, a node of lower level waited behind every node of
higher level placed on its lane, even ones that could not start until much later: on E4B
at position 1023 the V projection queued on the GEMV lanes behind the scores and ·V of
every head while the weight ports idled, and the step was 5.9 % over the largest bound of
the time, 3.4 % with insertion (v002-spec, `benchmarks/bench_gap.py`).

Unlike HLFET, the levels weigh the stalls of the lanes the pools' users run on when those
lanes have the most work (`stall_levels`): a branch whose short weight stream is followed
by a long host and SFU chain goes ahead of a longer stream, so that its chain runs while
the ports work. On E4B that is LAuReL: with plain levels its two small GEMVs ran after the
O projection, and its norm then queued on the host and SFU lanes with the attention's own
norm before the FFN could start, ~12 k cycles a layer.

On a decode step this keeps the long weight-streaming GEMV chain of the main stream moving
while short side branches (LAuReL, PLE, constants) fill in around it. It is the cheapest of
the informed policies: a few passes for the levels, one heap pass to place.
"""

from __future__ import annotations

from collections.abc import Hashable

from pccx_flow.schedule.policies.base import Policy, mean_costs, static_priority_schedule
from pccx_flow.schedule.precedence import order_only_edges
from pccx_flow.schedule.problem import SchedulingProblem
from pccx_flow.schedule.timeline import Timeline

Node = Hashable

# The share of a first-stage node's stall added to its level (`stall_levels`). In a one-off
# sweep on bench_gap's E4B problems within L2 every weight tried gave a shorter schedule
# than plain levels (0.1, 0.2, 0.35 and 0.5 at positions 0, 1023, 2047, 4095 and 8191 on
# both profiles; 0.75 and 1 at 1023-4095); 0.5 gave the least mean gap to the largest
# bound over the ten points (0.35 the least at 1023 on v002-spec: 2.40 % against 2.48 %).
STALL_WEIGHT = 0.5


def pool_lanes(problem: SchedulingProblem) -> set[str]:
    """The lanes some pool's user can run on (the GEMV lanes of a decode step)."""
    return {lane for pool in problem.pools for n in problem.pool_users(pool)
            for lane in problem.costs[n]}  # fmt: skip


def stage_one_nodes(problem: SchedulingProblem) -> set[Node]:
    """Nodes that can run only on lanes some pool's user can run on: the first stage.

    On a decode step the pools are the weight ports and their users the weight-streaming
    GEMVs, so this is every GEMV (the attention's scores and ·V too: they queue on the same
    lanes). With no pool, or when the pools' users can run on every lane, it is every node.
    """
    lanes = pool_lanes(problem)
    if not lanes:
        return set(problem.order)
    return set(problem.confined_to(lanes))


def first_stage_binds(problem: SchedulingProblem, first: set[Node]) -> bool:
    """Whether the first stage has the most work: its pools' (work over instances) or its
    lanes' (the first-stage nodes' least costs over those lanes) is at least every other
    lane class's (the least costs of the nodes confined to it over its lanes).

    On E4B the weight ports bind (`v002-spec`: 120 M cycles of port work, the host 13-14 M);
    on the `tiny` test model the host lane does (1.8 M cycles, the ports 26 k)."""
    lanes = pool_lanes(problem)
    if not lanes:
        return False
    work = [problem.least_work(first) / len(lanes)]
    for pool, count in problem.pools.items():
        users = problem.pool_users(pool)
        if users and count:
            work.append(problem.least_work(users) / count)
    for names in problem.lanes_by_class().values():
        if names <= lanes:
            continue
        if problem.least_work(problem.confined_to(names)) / len(names) > max(work):
            return False
    return True


def issue_order_edges(problem: SchedulingProblem) -> frozenset[tuple[Node, Node]]:
    """The problem's order-only edges whose two nodes run on the same lanes: an order of
    issue on those lanes, not a wait for a result (`stall_levels` leaves them out)."""
    costs = problem.costs
    return frozenset(
        (u, v) for u, v in order_only_edges(problem) if costs[u].keys() == costs[v].keys()
    )


def stall_levels(problem: SchedulingProblem, weight: float = STALL_WEIGHT) -> dict[Node, float]:
    """b-levels in which each first-stage node also counts `weight` times its stall, when
    the first stage binds (`first_stage_binds`); HLFET's levels otherwise.

    The stall of a first-stage node n (`stage_one_nodes`) is ``max(0, T(n) - cost(n))``,
    T(n) the longest chain of mean costs of other nodes from n's finish to its nearest
    first-stage descendant (or to the end): the time those lanes would idle after n if
    nothing else were ready. Johnson's rule for the two-machine flow shop (1954) puts a job
    whose first stage is shorter than its second first; a level that grows with that
    difference, and passes it on to the node's ancestors as a b-level does, starts such
    branches before longer first-stage work of the same level, so their second stage runs
    meanwhile. That pays only where the first stage is the bottleneck: where another lane
    has more work (the `tiny` model's host lane), a first-stage stall costs nothing, and
    weighing it made `tiny`'s steps 0.5 % (`v002-spec`) and 1.2 % (`v002-as-built`)
    longer. With no pools, or no first-stage node that differs from the rest, every
    stall is 0. HLFET's levels are `pccx_flow.schedule.policies.base.bottom_levels`.

    An order-only edge between two nodes that run on the same lanes (`issue_order_edges`:
    on a decode step one KV read issued after another, or a tile read before the write of
    the new row into it, all on the DMA lane) is left out of the levels, though the
    timeline keeps it: it says in which order the lanes take the two, not that the second
    needs the first's result, and counted, a stream's chain of reads stacked all of its
    read time onto its first read. Order-only edges from other lanes (a read waiting for
    the scores or ·V that free its room) still count. Under the fixed read-ahead rules
    (`pccx_flow.schedule.readahead.kv_prefetch_edges`, whose only such edge is the last V
    tile's wait for the read before it) E4B within L2 at 1023 / 2047 went from 1.41 / 1.47 %
    over the largest bound to 1.14 / 1.31 % on `v002-spec`, 0.66 -> 0.69 % at 1023 on
    `v002-as-built` (2047 there, and 4095 and 8191 on both, the same).
    """
    first = stage_one_nodes(problem)
    if not first_stage_binds(problem, first):
        weight = 0.0
    cost, succs = mean_costs(problem), problem.succs
    skipped: dict[Node, set[Node]] = {}  # per node, the successors `issue_order_edges` gives
    for u, v in issue_order_edges(problem):
        skipped.setdefault(u, set()).add(v)
    # what a node adds to the tail of a node before it: its cost and its own tail, or 0 for
    # a first-stage node (the tail runs to the nearest one)
    adds: dict[Node, float] = {}
    level: dict[Node, float] = {}
    for n in reversed(problem.order):
        t = below = 0.0
        skip = skipped.get(n)
        for s in succs[n]:
            if skip is not None and s in skip:
                continue
            x = adds[s]
            if x > t:
                t = x
            x = level[s]
            if x > below:
                below = x
        own = cost[n]
        if n in first:
            adds[n] = 0.0
            level[n] = own + weight * (t - own if t > own else 0.0) + below
        else:
            adds[n] = own + t
            level[n] = own + below
    return level


class CriticalPath(Policy):
    name = "critical-path"
    description = "HLFET: highest stall-weighted level first, gaps filled"

    def schedule(self, problem: SchedulingProblem, timeline: Timeline) -> None:
        level = stall_levels(problem)

        best_lane = timeline.best_lane

        def earliest_start_lane(node):
            return best_lane(node, True, "start")[0]  # insertion, by start

        static_priority_schedule(problem, timeline, level, earliest_start_lane, insertion=True)
