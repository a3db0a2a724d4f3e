"""Chain bounds: a resource's work added to the dependency chains around it.

`chain_bounds` makes ``pool_chain:<resource>`` (the users' work between two nodes, the
chains before and after it, over the data edges: `pccx_flow.schedule.nearest`) and
``capacity_chain:<resource>`` (those plus the KV reads L2 cannot hold ahead of their use:
`pccx_flow.schedule.capacity`), for every pool and for a lane class whose work can bind
(`chain_resources`). Each is proved in its docstring and checked against CP-SAT's optimum
on small problems (`tests/compare/test_exact.py`); `pccx_flow.schedule.metrics.step_bounds`
reports them beside the other bounds.
"""

from __future__ import annotations

from collections import defaultdict

from pccx_flow.schedule.capacity import ForcedStarts, PoolView, capacity_groups
from pccx_flow.schedule.nearest import chains_around, least_chain
from pccx_flow.schedule.precedence import ONE, Node, bit_mask, hardware_precedence, masks_along
from pccx_flow.schedule.problem import SchedulingProblem

# How far above a node (in edges) `chain_bounds` takes the ancestors it pairs it with. Any
# depth gives a bound; a deeper one is at least as tight and costs more. On E4B 3 gives the
# bounds 4 gave at every position tried (0-8191, both profiles, with and without the L2
# limit, and the cuts of `benchmarks/bench_cut.py`) in 0.88x `step_bounds`' time at 8191;
# 2 loses 0.37 % (`pool_chain:weight_port` 125.98 M -> 125.52 M). Of `compare`'s 200
# random DAGs two have a lower largest bound under 3 than under 4 (by 1.2 and 1.6 %; neither
# is small enough for CP-SAT's optimum).
POOL_CHAIN_HOPS = 3
# A lane class is walked when its work plus the pools' proven idle comes this close to the
# pools' chain bounds (`chain_bounds`). On E4B v002-as-built the GEMV lanes' bound passed
# the ports' at 1023 (by 2.6 %, its estimate as much over) and at 2047 (by 0.3 %, its
# estimate 0.07 % under); at 4095 and 8191 its estimate is 5.1 % and 12.6 % under, and
# its pass (2.6 s at 8191) added nothing.
LANE_CHAIN_MARGIN = 0.03


def pool_chain_bounds(
    problem: SchedulingProblem, hops: int = POOL_CHAIN_HOPS, *, capacity: bool = False
) -> dict[str, int]:
    """``pool_chain:<pool>`` bounds, or with ``capacity=True`` ``capacity_chain:<pool>``
    (`chain_bounds`, which can make both in one pass, explains them)."""
    return chain_bounds(problem, hops, plain=not capacity, capacity=capacity)


def chain_resources(problem: SchedulingProblem) -> list[tuple[str, int, list[Node]]]:
    """``(name, instances, users in pass order)`` of each resource `chain_bounds` walks: every
    pool, and each lane class whose own work bound (`problem_bounds`' ``lane_class:C``) is at
    least every pool's (every class when there is no pool), as ``C_lanes``.

    A lane class of k lanes is a resource like a pool of k instances for the nodes that can
    run nowhere else (they hold one of its lanes while they run), so the chain argument
    holds for it unchanged. On `v002-as-built` the two GEMV lanes are also the two weight
    ports' lanes, and the attention GEMVs (scores, ·V) queue on them between the weight
    streams: the ports' chain misses that work, the lanes' counts it. Classes whose work is
    below a pool's are left out: their chain has not exceeded the pool's on a decode step,
    and each resource is a full pass (the costly part of the bounds at long contexts);
    `chain_bounds` also skips a class whose work plus the idle the pools' chains proved
    stays well below their bounds (`LANE_CHAIN_MARGIN`; `v002-as-built` at 4095 and 8191,
    where the KV reads bind).
    """
    out = []
    for pool, count in problem.pools.items():
        out.append((pool, count, problem.pool_users(pool)))
    pool_work = max(
        (problem.least_work(users) / count for _, count, users in out if count),
        default=0,
    )
    for cls, lanes in sorted(problem.lanes_by_class().items()):
        users = problem.confined_to(lanes)
        if users and problem.least_work(users) / len(lanes) >= pool_work:
            out.append((lane_resource(cls), len(lanes), users))
    return out


LANES_SUFFIX = "_lanes"


def lane_resource(lane_class: str) -> str:
    """The name `chain_resources` gives lane class `lane_class` as a resource (``C_lanes``)."""
    return lane_class + LANES_SUFFIX


def chain_bounds(
    problem: SchedulingProblem,
    hops: int = POOL_CHAIN_HOPS,
    *,
    plain: bool = True,
    capacity: bool = False,
) -> dict[str, int]:
    """A lower bound per resource (every pool, and a lane class that can bind:
    `chain_resources`) that adds its work to the dependency chains around it.

    Pool users (nodes holding an instance of pool P, which has ``k`` instances) between two
    nodes must all run inside the gap between them: if m is an ancestor of n, every user u
    with m -> ... -> u -> ... -> n runs within [finish(m), start(n)], and at most k users run
    at once, so ``start(n) >= finish(m) + ceil(W(m, n) / k)`` with W the users' cheapest
    costs; more, the first of them starts no earlier than the least, over m's nearest users
    below it among them, of the longest chain from m down to that user, and n no earlier
    than the least, over n's nearest users above it among them, of the longest chain from
    that user down to n after the last (`chains_around`), so both are added when there is
    a user in between. From time 0
    likewise ``start(n) >= ceil(W(ancestors of n) / k)`` plus that chain down to n, and after
    n ``makespan >= finish(n) + ceil(W(descendants of n) / k)`` plus the chain from n down to
    a user. A longest-path pass with these
    extra gaps, taking m among the ancestors of n at most `hops` edges up, gives an earliest
    possible finish per node that every valid schedule respects; the bound is the largest
    finish plus its descendants' pool work. On a decode step it counts the stretches of
    host and SFU work between layers during which no weight can stream, which the plain
    port-work bound (all weight bytes over all ports) leaves out. Ancestors and descendants
    are taken over the data edges only (`hardware_precedence`): an order-only edge of the
    L2 heuristic is not a constraint of the hardware.

    With `plain` the bound is named ``pool_chain:<pool>``. With `capacity` the pass also
    applies the starts `ForcedStarts` proves (reads that L2 cannot hold ahead of
    their use), and the bound is named ``capacity_chain:<pool>``: a later start is still a
    lower bound of every valid schedule, so the longest-path argument above is unchanged.
    Asked for both, the ancestor sets and the pool work of every span are computed once and
    shared by the two passes (the costly part on a long-context step).
    """
    out: dict[str, int] = {}
    forced = capacity_groups(problem) if capacity else []
    variants = [("pool_chain", False)] * plain + [("capacity_chain", True)] * capacity
    preds, succs = hardware_precedence(problem)
    cost = problem.min_costs
    reach: dict[Node, tuple[Node, ...]] = {}
    for n in problem.order:  # ancestors within `hops` edges (a node of one input needs none)
        if len(preds[n]) < 2:
            continue
        seen = set(preds[n])
        frontier = seen
        for _ in range(hops - 1):
            frontier = {r for q in frontier for r in preds[q]} - seen
            if not frontier:
                break
            seen |= frontier
        reach[n] = tuple(seen)
    # the most idle time a pool's chain proved beyond its work (its first variant: the
    # plain one when asked for, else the capacity one, which only walks more classes)
    idle = 0
    for pool, count, users in chain_resources(problem):
        if not users or count < 1:
            continue
        work_bound = -(-sum(cost[n] for n in users) // count)  # the resource's own bound
        # A lane class after the pools: walked only when its work plus the idle the pools'
        # chains proved comes within `LANE_CHAIN_MARGIN` of the largest chain bound so far
        # (the KV reads it waits for can add more than they added to the pools'). A
        # shortcut for time (the pass over its many users is the costliest part at long
        # contexts), not part of any bound: a skipped class only leaves its own bound out.
        if (
            pool not in problem.pools
            and out
            and work_bound + idle < (1 - LANE_CHAIN_MARGIN) * max(out.values())
        ):
            continue
        bit = {n: ONE << i for i, n in enumerate(users)}
        by_cost: dict[int, list[int]] = defaultdict(list)
        for i, u in enumerate(users):
            by_cost[cost[u]].append(i)
        masks = [(c, bit_mask(positions)) for c, positions in by_cost.items()]

        memo: dict[int, int] = {}  # the same member sets recur across nodes

        def work(members: int, masks=masks, memo=memo) -> int:
            w = memo.get(members)
            if w is None:
                w = memo[members] = sum(c * (members & m).bit_count() for c, m in masks)
            return w

        anc = masks_along(problem.order, preds, bit)
        desc = masks_along(reversed(problem.order), succs, bit)
        # to_user[n]: n's nearest users above it (no user between), each with the longest
        # chain of least costs from its finish to n's start, shortest first; from_user[m]
        # likewise from m's finish down to its nearest users' starts (`chains_around`
        # proves both, and why a pair m, n counts only users between them).
        to_user, from_user = chains_around(
            problem, {n: i for i, n in enumerate(users)}, cost, preds, succs
        )
        before = _work_and_chain(problem.order, anc, to_user, work, count)
        after = _work_and_chain(problem.order, desc, from_user, work, count)
        # The pool work between each node and its near ancestors, shared by the passes.
        # Only entries that can decide a start are kept. Induction on the pass order: every
        # m in reach[x] has start(x) >= finish(m) + gap(m, x). A farther ancestor m of n with
        # no pool work in between is covered by the input p of n on its way (m is p or in
        # reach[p], so finish(p) >= finish(m)). If n has one input p, every m in reach[n]
        # other than p is in reach[p], and the users between m and n are those between m
        # and p plus p itself, so gap(m, n) <= gap(m, p) + cost(p) and finish(p) covers it
        # (the chains too: n's nearest user above is p itself, 0 away, when p is a user,
        # else p's nearest users are n's, each cost(p) further):
        # only (p, 0) is kept (p's descendants and ancestors share no user).
        view = PoolView(users, anc, cost, count, desc, work, to_user, from_user)
        gaps: dict[Node, list[tuple[Node, int]]] = {}
        for n in problem.order:
            direct, a = preds[n], anc[n]
            if len(direct) == 1:
                gaps[n] = [(direct[0], 0)]
                continue
            row = []
            for m in reach.get(n, ()):
                between = desc[m] & a
                if between:  # the users' work, after m's head and before n's tail
                    row.append((m, view.gap_between(m, n, between)))
                elif m in direct:
                    row.append((m, 0))
            gaps[n] = row
        finishes = [{} for _ in variants]  # one longest-path pass per variant, side by side
        best_end = [0] * len(variants)
        late = [
            ForcedStarts(problem, forced, (preds, succs), finish, view)
            if with_forced and forced
            else None
            for (_, with_forced), finish in zip(variants, finishes, strict=True)
        ]
        passes = list(enumerate(zip(finishes, late, strict=True)))
        for n in problem.order:
            row, own, tail, first = gaps[n], cost[n], after[n], before[n]
            for v, (finish, forced_at) in passes:
                start = first
                for m, gap in row:
                    t = finish[m] + gap
                    if t > start:
                        start = t
                if forced_at is not None:
                    t = forced_at.start_at_least(n)
                    if t > start:
                        start = t
                f = finish[n] = start + own
                if f + tail > best_end[v]:
                    best_end[v] = f + tail
        for (name, _), end in zip(variants, best_end, strict=True):
            out[f"{name}:{pool}"] = end
        if pool in problem.pools:
            idle = max(idle, best_end[0] - work_bound)
    return out


def _work_and_chain(order, masks: dict, chains: dict, work, count: int) -> dict[Node, int]:
    """Per node n, ``ceil(work(masks[n]) / count)`` plus the least chain of ``chains[n]``
    when ``masks[n]`` has a user (`chain_bounds`' ``before`` and ``after``). The masks of
    `masks_along` are shared by a node of one input with it: the work is kept per mask
    object (by id: the masks outlive this call), which spares hashing a long step's mask
    per node."""
    by_mask: dict[int, int] = {}
    out: dict[Node, int] = {}
    for n in order:
        m = masks[n]
        if not m:
            out[n] = 0
            continue
        w = by_mask.get(id(m))
        if w is None:
            w = by_mask[id(m)] = -(-work(m) // count)
        out[n] = w + least_chain(chains[n])
    return out
