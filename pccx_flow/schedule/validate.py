"""Check a schedule against its problem, sharing no code with any policy or the timeline.

Every schedule a policy (built-in or plugin) produces passes through `validate_schedule`
before anyone measures it. The checks are written from the rules, not from how the timeline
enforces them, so a timeline bug shows up here instead of in a flattering makespan:

1. each node of the problem is scheduled exactly once, and nothing else is;
2. on a lane that can run it, for exactly its cost on that lane (finish - start);
3. no node starts before every predecessor has finished (plus the edge's comm cost);
4. no lane and no pool instance runs two nodes at once (zero-length slots overlap nothing);
5. each node holds exactly one instance of each pool it needs, and no other instance;
6. on each capacity (L2), the bytes resident at any moment - every demanding node from its
   start to the last finish of itself and its successors - never exceed the capacity.

The first violation found raises `ScheduleError` naming the nodes and times involved.
"""

from __future__ import annotations

from collections import defaultdict
from operator import attrgetter, itemgetter

from pccx_flow.errors import ScheduleError
from pccx_flow.schedule.model import Schedule
from pccx_flow.schedule.problem import SchedulingProblem


def validate_schedule(schedule: Schedule, problem: SchedulingProblem) -> None:
    """Raise `ScheduleError` at the first broken rule; return None for a valid schedule."""
    slots = schedule.slots
    expected = problem.index  # every node of the graph, and only those

    # 1. exactly the problem's nodes, each once (a dict cannot hold a node twice, so a
    #    duplicate shows up as a slot filed under one node that names another).
    for key, slot in slots.items():
        if slot.node != key:
            raise ScheduleError(
                f"slot filed under {key!r} is for node {slot.node!r}: a node is scheduled twice "
                f"or under the wrong name"
            )
        if key not in expected:
            raise ScheduleError(f"node {key!r} is scheduled but is not in the graph")
    for node in problem.order:
        if node not in slots:
            raise ScheduleError(f"node {node!r} is not scheduled")

    known_lanes = {lane.name for lane in problem.lanes}
    by_lane: dict[str, list] = defaultdict(list)
    by_instance: dict[str, list] = defaultdict(list)
    for node in problem.order:
        slot = slots[node]
        # 2. lane and duration
        if slot.lane not in known_lanes:
            raise ScheduleError(f"node {node!r} is on unknown lane {slot.lane!r}")
        cost = problem.costs[node].get(slot.lane)
        if cost is None:
            raise ScheduleError(
                f"node {node!r} is on lane {slot.lane!r}, which cannot run it "
                f"(it can run on {', '.join(problem.costs[node])})"
            )
        if not isinstance(slot.start, int) or slot.start < 0:
            raise ScheduleError(f"node {node!r} starts at {slot.start!r}; starts are ints >= 0")
        if slot.finish - slot.start != cost:
            raise ScheduleError(
                f"node {node!r} on {slot.lane!r} runs {slot.finish - slot.start} cycles "
                f"({slot.start}..{slot.finish}) but costs {cost}"
            )
        by_lane[slot.lane].append(slot)
        # 5. pool instances
        needed = problem.resources[node]
        if not needed and not slot.resources:  # most nodes: no pool
            continue
        needed = sorted(needed)
        held_pools = []
        for inst in slot.resources:
            pool = problem.pool_of_instance.get(inst)
            if pool is None:
                raise ScheduleError(f"node {node!r} holds unknown pool instance {inst!r}")
            held_pools.append(pool)
            by_instance[inst].append(slot)
        if sorted(held_pools) != needed:
            raise ScheduleError(
                f"node {node!r} holds {list(slot.resources)} but needs one instance each of "
                f"{needed}"
            )

    # 3. precedence
    comm = problem.comm if problem.has_comm else None
    for u, v in (*problem.graph.edges, *problem.order_edges):
        su, sv = slots[u], slots[v]
        ready = su.finish if comm is None else su.finish + comm(u, v, su.lane, sv.lane)
        if sv.start < ready:
            raise ScheduleError(
                f"node {v!r} starts at {sv.start} before its input from {u!r} is ready at "
                f"{ready} (finish {su.finish} + comm {ready - su.finish})"
            )

    # 4. one node at a time per lane and per pool instance
    by_start = attrgetter("start")
    for kind, groups in (("lane", by_lane), ("pool instance", by_instance)):
        for name in sorted(groups):
            busy = sorted((s for s in groups[name] if s.finish > s.start), key=by_start)
            for a, b in zip(busy, busy[1:], strict=False):
                if b.start < a.finish:
                    raise ScheduleError(
                        f"{kind} {name!r} runs {a.node!r} ({a.start}..{a.finish}) and "
                        f"{b.node!r} ({b.start}..{b.finish}) at the same time"
                    )

    # 6. capacities: sweep allocation events in time order (frees before allocations at the
    #    same instant, since [start, end) intervals that touch do not overlap)
    events: dict[str, list] = {cap: [] for cap in problem.capacities}
    for hold in problem.holds:
        node = hold.node
        start = slots[node].start
        end = max([slots[node].finish] + [slots[s].finish for s in hold.readers])
        if end <= start:
            continue
        for cap, nbytes in hold.row:
            if nbytes and cap in events:
                events[cap].append((start, 1, nbytes, node))
                events[cap].append((end, 0, -nbytes, node))
    for cap, size in problem.capacities.items():
        level = 0
        for t, _, delta, node in sorted(events[cap], key=itemgetter(0, 1)):
            level += delta
            if level > size:
                raise ScheduleError(
                    f"{cap!r} holds {level:,} bytes at cycle {t} (capacity {size:,}) once "
                    f"{node!r} allocates {delta:,}"
                )


def is_valid(schedule: Schedule, problem: SchedulingProblem) -> bool:
    """True when `validate_schedule` finds nothing wrong."""
    try:
        validate_schedule(schedule, problem)
    except ScheduleError:
        return False
    return True
