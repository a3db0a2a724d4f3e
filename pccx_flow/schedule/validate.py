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
from operator import attrgetter

from pccx_flow.errors import ScheduleError
from pccx_flow.schedule.memory import occupancies
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
    starts: dict = {}  # per node, once its slot passed checks 1 and 2
    finishes: dict = {}
    costs, resources = problem.costs, problem.resources
    for node in problem.order:
        slot = slots[node]
        lane, start, finish = slot.lane, slot.start, slot.finish
        # 2. lane and duration
        if lane not in known_lanes:
            raise ScheduleError(f"node {node!r} is on unknown lane {lane!r}")
        cost = costs[node].get(lane)
        if cost is None:
            raise ScheduleError(
                f"node {node!r} is on lane {lane!r}, which cannot run it "
                f"(it can run on {', '.join(costs[node])})"
            )
        if not isinstance(start, int) or start < 0:
            raise ScheduleError(f"node {node!r} starts at {start!r}; starts are ints >= 0")
        if finish - start != cost:
            raise ScheduleError(
                f"node {node!r} on {lane!r} runs {finish - start} cycles "
                f"({start}..{finish}) but costs {cost}"
            )
        starts[node] = start
        finishes[node] = finish
        by_lane[lane].append(slot)
        # 5. pool instances
        needed = resources[node]
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
    for edges in (problem.graph.edges, problem.order_edges):
        for u, v in edges:
            ready = finishes[u]
            if comm is not None:
                ready += comm(u, v, slots[u].lane, slots[v].lane)
            if starts[v] < ready:
                raise ScheduleError(
                    f"node {v!r} starts at {starts[v]} before its input from {u!r} is ready "
                    f"at {ready} (finish {finishes[u]} + comm {ready - finishes[u]})"
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

    # 6. capacities: each one's occupancy over time (`memory.occupancies`, what the memory
    #    metrics report; no policy or timeline uses it), computed here and kept for them
    for cap, series in occupancies(schedule, problem, problem.capacities, keep=True).items():
        size = problem.capacities[cap]
        for t, level in series:
            if level > size:
                raise ScheduleError(_overflow(problem, starts, finishes, cap, size, t))


def _overflow(
    problem: SchedulingProblem, starts: dict, finishes: dict, cap: str, size: int, at: int
) -> str:
    """The message for capacity `cap` over `size` at cycle `at`: the bytes held once the
    first allocation at `at` that takes it over was made (frees at an instant first)."""
    level, over = 0, []
    for hold in problem.holds:
        start = starts[hold.node]
        end = problem.hold_end(hold, finishes)
        for c, nbytes in hold.row:  # each part of the row, as the occupancy counts them
            if c != cap or not nbytes or end <= start:
                continue
            if start < at < end:  # held across the instant
                level += nbytes
            elif start == at:  # allocated at it, in the holds' order
                over.append((nbytes, hold.node))
    for nbytes, node in over:
        level += nbytes
        if level > size:  # the cycle as the slot gives it
            return (
                f"{cap!r} holds {level:,} bytes at cycle {starts[node]} (capacity {size:,}) "
                f"once {node!r} allocates {nbytes:,}"
            )
    return f"{cap!r} holds {level:,} bytes at cycle {at} (capacity {size:,})"  # not reached


def is_valid(schedule: Schedule, problem: SchedulingProblem) -> bool:
    """True when `validate_schedule` finds nothing wrong."""
    try:
        validate_schedule(schedule, problem)
    except ScheduleError:
        return False
    return True
