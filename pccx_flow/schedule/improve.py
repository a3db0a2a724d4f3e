"""Forward-backward improvement: tighten any list schedule by justifying it right, then left.

A list policy places nodes one at a time with a myopic rule, so its schedule often leaves a
lane or a weight port idle while a node that could have used it waits behind an early
choice. Double justification (Valls, Ballestín and Quintanilla, "Justification and RCPSP: A
technique that pays", EJOR 165, 2005; Li and Willis' forward-backward improvement, 1992)
repairs much of that without a model of why:

1. *Right-justify*: take the nodes in decreasing order of finish and place each, on the same
   lane, as *late* as its successors (already placed) and the lanes and pools allow, in a
   mirrored timeline. A node that finished early only because the policy happened to place
   it early slides right into the slack it really has.
2. *Left-justify*: take the nodes in increasing order of their right-justified start and
   place each, on the lane that finishes it earliest, at its earliest start on the real
   `Timeline` (gap filling on lanes and pools, comm, and the L2 capacity, exactly as a
   policy's placements). Nodes whose slack was used up by the right pass now come first.

The left pass is an ordinary list schedule: a start-time order is a topological order (an
edge's head starts no earlier than its tail finishes; ties go by program order), so every
placement obeys the same rules as a policy's and the result goes through the same validator.
Justification with single-instance resources never lengthens a schedule, but pools of
several instances (the two weight ports) can fragment and the L2 capacity can delay a node
that moved forward, so each round is kept only when it is shorter; the pass stops after
`rounds` rounds or the first round that does not help. A round whose order deadlocks on
memory (`ScheduleError`) ends the pass with the best schedule so far.

Justification converges to a local optimum in a few rounds. `noise` turns the pass into a
small randomised search: after a round that did not help, the next right-justified starts
are shifted at random before the left pass, so nodes whose slack overlaps are tried in
another order, and the best of all rounds is kept. The shift is seeded, so a run is
reproducible.

The right pass ignores the L2 capacity: it only proposes an order, and the left pass,
which enforces it, decides whether that order fits.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable, Hashable

from pccx_flow.errors import ScheduleError
from pccx_flow.schedule.model import Schedule
from pccx_flow.schedule.problem import SchedulingProblem
from pccx_flow.schedule.timeline import BusyIntervals, Timeline

Node = Hashable

DEFAULT_ROUNDS = 4


def right_justified_starts(schedule: Schedule, problem: SchedulingProblem) -> dict[Node, int]:
    """Start of every node when the schedule is packed as late as possible (lanes kept).

    Times are mirrored (a node's mirrored start is the makespan minus its finish), so the
    right pass is a left pass over the reversed graph with `BusyIntervals` doing the fitting.
    Returned starts are in real time, so they order nodes for the left pass.
    """
    slots = schedule.slots
    index = problem.index
    lanes = {lane.name: BusyIntervals() for lane in problem.lanes}
    pools = {pool: [BusyIntervals() for _ in range(count)] for pool, count in problem.pools.items()}
    has_comm = problem.has_comm
    mirrored_finish: dict[Node, int] = {}
    order = sorted(slots, key=lambda n: (-slots[n].finish, -index[n]))
    for n in order:
        lane = slots[n].lane
        d = problem.costs[n][lane]
        t = 0
        for s in problem.succs[n]:
            f = mirrored_finish[s]
            if has_comm:
                f += problem.comm(n, s, lane, slots[s].lane)
            if f > t:
                t = f
        t = _fit(t, d, lanes[lane], [pools[p] for p in problem.resources[n]])
        lanes[lane].add(t, t + d)
        for instances in (pools[p] for p in problem.resources[n]):
            for busy in instances:
                if busy.fit(t, d) == t:
                    busy.add(t, t + d)
                    break
        mirrored_finish[n] = t + d
    span = max(mirrored_finish.values(), default=0)
    return {n: span - f for n, f in mirrored_finish.items()}


def _fit(t: int, d: int, lane: BusyIntervals, pools: list[list[BusyIntervals]]) -> int:
    """Earliest time >= t free on the lane and on one instance of every pool (fixed point)."""
    while True:
        t2 = lane.fit(t, d)
        for instances in pools:
            t2 = min(busy.fit(t2, d) for busy in instances)
        if t2 == t:
            return t
        t = t2


def left_justified(
    problem: SchedulingProblem, starts: dict[Node, float], policy: str, profile: str
) -> Schedule:
    """List-schedule the nodes in order of `starts` (program order on ties), earliest finish.

    The order must be topological: with `right_justified_starts` it is (module doc); a
    perturbed order is repaired by taking, among nodes whose predecessors are placed, the
    one of smallest key.
    """
    index = problem.index
    timeline = Timeline(problem)
    heap = [(starts[n], index[n], n) for n in timeline.initial_ready()]
    heapq.heapify(heap)
    while heap:
        _, _, n = heapq.heappop(heap)
        lane, _ = timeline.best_lane(n, insertion=True, by="finish")
        timeline.place(n, lane, insertion=True)
        for s in timeline.released(n):
            heapq.heappush(heap, (starts[s], index[s], s))
    return timeline.to_schedule(policy, profile)


def improve_schedule(
    schedule: Schedule,
    problem: SchedulingProblem,
    *,
    rounds: int = DEFAULT_ROUNDS,
    noise: float = 0.0,
    seed: int = 0,
    on_round: Callable[[int, int], None] | None = None,
) -> Schedule:
    """The shortest of `schedule` and its forward-backward improvements (module doc).

    Without `noise` the pass stops at the first round that does not shorten the schedule.
    With `noise` > 0, a round that did not help is followed by one whose right-justified
    starts are each shifted by up to ``noise`` × makespan (uniform, from `seed`), which
    lets the left pass try a different order of nodes whose slack overlaps; every one of
    the `rounds` rounds is then tried and the shortest schedule kept. The result keeps the
    policy's name and profile; `on_round(round, makespan)` is told the makespan of every
    round tried, for a progress line.
    """
    if rounds < 0 or noise < 0:
        raise ValueError("rounds and noise must not be negative")
    rng = random.Random(seed)
    best = schedule
    current = schedule
    stale = False
    for k in range(rounds):
        starts: dict[Node, float] = dict(right_justified_starts(current, problem))
        if noise and stale:
            span = max(1, best.makespan)
            starts = {n: t + rng.random() * noise * span for n, t in starts.items()}
        try:
            candidate = left_justified(problem, starts, best.policy, best.profile)
        except ScheduleError:
            break
        if on_round is not None:
            on_round(k, candidate.makespan)
        stale = candidate.makespan >= current.makespan
        if stale and not noise:
            break
        current = candidate
        if candidate.makespan < best.makespan:
            best = candidate
    return best
