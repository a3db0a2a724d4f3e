"""Chain bounds: a resource's work added to the dependency chains around it.

`chain_bounds` makes ``pool_chain:<resource>`` (the users' work between two nodes, the
chains before and after it, over the data edges) and ``capacity_chain:<resource>`` (those
plus the KV reads L2 cannot hold ahead of their use, `_ForcedStarts`), for every pool and
for a lane class whose work can bind (`chain_resources`). Each is proved in its docstring
and checked against CP-SAT's optimum on small problems (`tests/compare/test_exact.py`);
`pccx_flow.schedule.metrics.step_bounds` reports them beside the other bounds.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from math import ceil, inf

from pccx_flow.schedule.precedence import Node, bit_mask, hardware_precedence
from pccx_flow.schedule.problem import SchedulingProblem

POOL_CHAIN_HOPS = 4  # 5 tightens E4B's bound by 0.3 % more for 50 % more time
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
    costs; more, the first of them starts no earlier than the shortest chain from m down to
    a user, and n no earlier than the shortest chain from a user down to n after the last
    (`_chains_around`), so both are added when there is a user in between. From time 0
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
    applies the starts `_ForcedStarts` proves (reads that L2 cannot hold ahead of
    their use), and the bound is named ``capacity_chain:<pool>``: a later start is still a
    lower bound of every valid schedule, so the longest-path argument above is unchanged.
    Asked for both, the ancestor sets and the pool work of every span are computed once and
    shared by the two passes (the costly part on a long-context step).
    """
    out: dict[str, int] = {}
    forced = _capacity_groups(problem) if capacity else []
    variants = [("pool_chain", False)] * plain + [("capacity_chain", True)] * capacity
    preds, succs = hardware_precedence(problem)
    cost = {n: problem.min_cost(n) for n in problem.order}
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
        bit = {n: 1 << i for i, n in enumerate(users)}
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

        anc: dict[Node, int] = {}
        for n in problem.order:
            a = 0
            for q in preds[n]:
                a |= anc[q] | bit.get(q, 0)
            anc[n] = a
        desc: dict[Node, int] = {}
        for n in reversed(problem.order):
            d = 0
            for q in succs[n]:
                d |= desc[q] | bit.get(q, 0)
            desc[n] = d
        # to_user[n]: n's nearest users above it (no user between), each with the longest
        # chain of least costs from its finish to n's start, shortest first; from_user[m]
        # likewise from m's finish down to its nearest users' starts (`_chains_around`
        # proves both, and why a pair m, n counts only users between them).
        to_user, from_user = _chains_around(
            problem, {n: i for i, n in enumerate(users)}, cost, preds, succs
        )
        before = {
            n: -(-work(anc[n]) // count) + (_least(to_user[n]) if anc[n] else 0)
            for n in problem.order
        }
        after = {
            n: -(-work(desc[n]) // count) + (_least(from_user[n]) if desc[n] else 0)
            for n in problem.order
        }
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
                    chains = _nearest(from_user[m], between) + _nearest(to_user[n], between)
                    row.append((m, -(-work(between) // count) + chains))
                elif m in direct:
                    row.append((m, 0))
            gaps[n] = row
        finishes = [{} for _ in variants]  # one longest-path pass per variant, side by side
        best_end = [0] * len(variants)
        view = PoolView(users, anc, cost, count, desc, work, to_user, from_user)
        late = [
            _ForcedStarts(problem, forced, (preds, succs), finish, view)
            if with_forced and forced
            else None
            for (_, with_forced), finish in zip(variants, finishes, strict=True)
        ]
        for n in problem.order:
            row, own, tail = gaps[n], cost[n], after[n]
            for v, finish in enumerate(finishes):
                start = before[n]
                for m, gap in row:
                    t = finish[m] + gap
                    if t > start:
                        start = t
                if late[v] is not None:
                    t = late[v].start_at_least(n)
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


def _chains_around(
    problem: SchedulingProblem, users: Mapping[Node, int], cost: Mapping[Node, int], preds, succs
) -> tuple[dict[Node, tuple], dict[Node, tuple]]:
    """Per node n, ``to_user[n]``: the users u above n with a path u -> ... -> n through no
    other user (n's *nearest* users above), each as ``(D(u, n), position of u)`` with D
    the longest chain of least costs from u's finish to n's start, shortest first;
    ``from_user[n]`` likewise for the nearest users below n, D from n's finish to the
    user's start. `users` maps each user to its position (its bit in the masks of
    `chain_bounds`; kept as a small int, a bit of a long step's mask is slow to hash).

    Claim (to_user; from_user is the mirror image): for a set S of users that are all
    ancestors of n, the last of S to finish, u*, is a nearest user of n if every user on a
    path from u* to n is in S, and n starts at least D(u*, n) after u*'s finish. Proof: a
    user w strictly inside a path u* -> ... -> n would be in S and finish after u*, so there
    is none: u* is nearest, and every path from it to n, the longest of D(u*, n) included,
    runs between u*'s finish and n's start. `chain_bounds` takes S as the users between m
    and n (descendants of m, ancestors of n: a user inside a path from one of them to n is
    one too), so ``start(n) >= last finish of S + min over nearest users of n in S of D``
    (`_nearest`); with S all users above n, the least D over every nearest user.

    Why `chain_bounds` adds them: the users between m and n run k at a time after m's
    finish plus the least chain from m to a nearest user below it among them, and n starts
    after the last of them finished plus the least chain from a nearest user above it among
    them. On a decode step these are the host and SFU chains around a block's weight
    streams (the norms after the O projection and before the FFN gate) that the work term
    alone, all weight bytes over two ports, does not count. Counting only users between m
    and n matters there: the layer's AltUp coefficient GEMV lies a short chain above the
    residual merge that ends the attention block, but it is above the block's start too,
    so it is not between them, and the block's chain is the longer one from the O
    projection through the post-attention norm.
    """
    to_user = _nearest_chains(problem.order, preds, users, cost)
    from_user = _nearest_chains(reversed(problem.order), succs, users, cost)
    return to_user, from_user


def _nearest_chains(order, inputs, users, cost) -> dict[Node, tuple[tuple, int]]:
    """The recurrence of `_chains_around` along `order`, `inputs` giving the neighbours
    already visited (preds in pass order for `to_user`, succs in reverse for `from_user`):
    D(u, n) is 0 for an input u that is a user, else the largest D(u, p) + cost(p) over
    the inputs p that are not users and have u among their nearest users.

    A node's chains are ``(row, shift)``: ``row`` holds ``(D - shift, position)`` by D, so a
    node of one input shares its input's row with a larger shift instead of copying it.
    Only the `NEAREST_KEPT` shortest chains of a node are kept, and a last entry for the
    position `ALL_USERS` stands for every user left out: each has a chain of at least that
    entry's (the shortest one dropped, or the least such entry of an input plus its cost),
    so `_nearest` never answers more than the true least chain. A user kept at one input
    and dropped at another is counted with the chain through the first alone: shorter, so
    still a lower bound. On an E4B step some nodes (the embedding below, the final norm
    above) have thousands of nearest users, of which a pair m, n only asks for the few
    between them."""
    chains: dict[Node, tuple[tuple, int]] = {}
    for n in order:
        near = inputs[n]
        if len(near) == 1:  # most nodes of a decode step: the input's row, shifted
            p = near[0]
            b = users.get(p)
            if b is not None:
                chains[n] = (((0, b),), 0)
            else:
                row, shift = chains[p]
                chains[n] = (row, shift + cost[p]) if row else _NO_USER
            continue
        tops = [b for b in map(users.get, near) if b is not None]
        rows: dict[int, tuple[tuple, int]] = {}  # per row object, its largest shift here
        for p in near:
            row, shift = chains[p]
            if row and p not in users:
                shift += cost[p]
                seen = rows.get(id(row))
                if seen is None or shift > seen[1]:
                    rows[id(row)] = (row, shift)
        if not tops and len(rows) <= 1:  # one input (the most common), or one row
            chains[n] = next(iter(rows.values())) if rows else _NO_USER
            continue
        d: dict[int, int] = dict.fromkeys(tops, 0)
        floor = inf
        for row, shift in rows.values():
            for x, u in row:
                x += shift
                if u == ALL_USERS:
                    if x < floor:
                        floor = x
                elif x > d.get(u, -1):
                    d[u] = x
        row = sorted((x, u) for u, x in d.items())
        if len(row) > NEAREST_KEPT:
            floor = min(floor, row[NEAREST_KEPT][0])
            row = row[:NEAREST_KEPT]
        if floor != inf:
            row = [e for e in row if e[0] < floor] + [(floor, ALL_USERS)]
        chains[n] = (tuple(row), 0)
    return chains


# How many nearest users (shortest chains first) `_nearest_chains` keeps per node. On E4B
# at 1023 keeping 16 gave the bounds of keeping all of them (up to 3,452 at the
# embedding) in a fraction of the time.
NEAREST_KEPT = 16
ALL_USERS = -1  # the position that stands for every user
_NO_USER: tuple = ((), 0)  # a node with no user on that side


def _nearest(chains: tuple[tuple, int], between: int) -> int:
    """The least chain of `chains` (`_nearest_chains`) to a user in `between`."""
    row, shift = chains
    for x, u in row:
        if u < 0 or between >> u & 1:
            return x + shift
    return 0  # unreachable for a set between two nodes (`_chains_around`); 0 is safe


def _least(chains: tuple[tuple, int]) -> int:
    """The least chain of `chains` to any user (0 with none)."""
    row, shift = chains
    return row[0][0] + shift if row else 0


@dataclass(frozen=True)
class CapacityGroup:
    """Nodes with no inputs whose outputs must wait in a capacity for their readers.

    ``late_work`` is the least lane time (over ``lanes`` lanes) the group's nodes must spend
    once the first of their bytes can be freed: what does not fit in ``capacity`` bytes
    cannot have been read ahead (`_ForcedStarts`). ``holds`` are the reader sets of the
    group's holds in that capacity: a hold's bytes are freed only when all of its readers
    finished.
    """

    sources: frozenset
    late_work: int
    lanes: int
    holds: tuple[tuple[Node, ...], ...]


# The exact 0/1 knapsack of `most_work_within` enumerates item kinds up to this many
# combinations; beyond, the fractional relaxation (an upper bound of it) is used.
KNAPSACK_COMBINATIONS = 100_000


def most_work_within(items: Iterable[tuple[int, int]], size: int) -> int:
    """An upper bound of the most work a subset of `items` (``(bytes, work)`` pairs) of at
    most `size` bytes carries: exact when the items are of few kinds.

    A decode step's KV reads of a layer are tiles of one size (the last one a row short),
    so the exact 0/1 answer is a few counts per kind: whole tiles only, where the
    fractional relaxation would count a part of one too. With more kinds than
    `KNAPSACK_COMBINATIONS` allows, the fractional relaxation (items by work per byte, the
    last one cut) is returned: it is at least the 0/1 optimum.
    """
    kinds: dict[tuple[int, int], int] = defaultdict(int)
    for nbytes, work in items:
        kinds[(nbytes, work)] += 1
    combos = 1
    for count in kinds.values():
        combos *= count + 1
    if combos <= KNAPSACK_COMBINATIONS:
        best = 0
        # a kind's count is bounded by what fits; depth-first over kinds, largest work first
        ordered = sorted(kinds.items(), key=lambda kv: -kv[0][1])

        def search(i: int, room: int, work: int) -> None:
            nonlocal best
            if i == len(ordered):
                best = max(best, work)
                return
            (nbytes, w), count = ordered[i]
            most = count if nbytes == 0 else min(count, room // nbytes)
            for c in range(most, -1, -1):
                search(i + 1, room - c * nbytes, work + c * w)

        search(0, size, 0)
        return best
    room, early = size, 0.0
    # by work per byte, items of no bytes first (they always fit)
    by_density = sorted(kinds.items(), key=lambda kv: -kv[0][1] / kv[0][0] if kv[0][0] else -inf)
    for (nbytes, work), count in by_density:
        take = count if nbytes == 0 else min(count, room // nbytes)
        room -= take * nbytes
        early += take * work
        if take < count:
            early += work * room / nbytes
            break
    return ceil(early)


def _capacity_groups(problem: SchedulingProblem) -> list[CapacityGroup]:
    """Per layer (the ``layer`` attribute of decode nodes; one group for nodes without one),
    the KV-like reads of each capacity.

    A source is a node with no data inputs that holds bytes of a capacity for readers (a
    decode step's KV tile reads). Reads of one layer form a group; the early work is the
    most lane time a set of the group's reads of at most the capacity's bytes, less what
    other holds must keep resident beside them (`_resident_beside`), can take
    (`most_work_within`), the late work the rest.
    """
    preds, succs = hardware_precedence(problem)
    groups: dict[tuple, dict] = {}
    for hold in problem.holds:
        n = hold.node
        if preds[n] or not hold.readers:
            continue
        for cap, nbytes in hold.row:
            key = (cap, problem.graph.nodes[n].get("layer"))
            g = groups.setdefault(key, {"bytes": {}, "holds": []})
            g["bytes"][n] = g["bytes"].get(n, 0) + nbytes
            g["holds"].append(tuple(hold.readers))
    beside = _resident_beside(problem, groups, preds, succs)
    out = []
    for key, g in sorted(groups.items(), key=lambda kv: str(kv[0])):
        cap = key[0]
        room = max(0, problem.capacities[cap] - beside.get(key, 0))
        work = {n: problem.min_cost(n) for n in g["bytes"]}
        early = most_work_within(((g["bytes"][n], work[n]) for n in work), room)
        late = sum(work.values()) - early
        lanes = {ln for n in g["bytes"] for ln in problem.costs[n]}
        if late > 0:
            out.append(CapacityGroup(frozenset(g["bytes"]), late, len(lanes), tuple(g["holds"])))
    return out


def _resident_beside(problem: SchedulingProblem, groups: dict, preds, succs) -> dict[tuple, int]:
    """Per group (`_capacity_groups`' key), the bytes of other holds that every valid
    schedule keeps in the group's capacity at the moment its first hold is freed.

    Claim: let G's sources hold more bytes than the capacity, F be the earliest time a hold
    of G is freed, and pick for every hold of G one reader of cost >= 1. A hold h (not a
    source's) in the same capacity whose node a is an ancestor of every picked reader, and
    which has a reader below every source of G, is resident at F - 1, beside the sources of
    G that started before F (`_ForcedStarts`), so those hold at most the capacity less h's
    bytes. Proof: the hold freed at F was freed when its last reader finished, its picked
    reader r too, so a, above r, started by start(r) <= F - cost(r) <= F - 1. The sources
    that started before F are all resident at F - 1, so not every source did: one starts
    at F or later, h's reader below it finishes no earlier, and h is freed at F or later,
    so it is resident at F - 1. On a decode step this is the main
    stream a layer's attention adds to (AltUp's first row as mixed for the layer; 8 KiB),
    and in a layer that reads another's KV the new K and V rows of the source layer,
    which its last tile reads: even a few bytes of them leave no room for a seventh 256 KiB
    tile beside six in 1,792 KiB of L2 (`capacity_chain` +0.65 % at 4095 on
    `v002-as-built`, +0.53 % at 8191 on `v002-spec`).
    """
    sbit: dict[Node, int] = {}  # every group's sources, and one reader per hold, as bits
    rbit: dict[Node, int] = {}
    masks: dict[tuple, tuple[int, int]] = {}
    for key, g in groups.items():
        if sum(g["bytes"].values()) <= problem.capacities[key[0]]:
            continue  # every source may be resident at once: the claim does not hold
        smask = rmask = 0
        for n in g["bytes"]:
            smask |= sbit.setdefault(n, 1 << len(sbit))
        for readers in g["holds"]:  # a reader of cost >= 1 of each hold (the claim's r)
            r = next((r for r in readers if problem.min_cost(r) >= 1), None)
            if r is None:
                break
            rmask |= rbit.setdefault(r, 1 << len(rbit))
        else:
            masks[key] = (smask, rmask)
    if not masks:
        return {}
    above: dict[Node, int] = {}  # the sources above each node
    for n in problem.order:
        a = 0
        for p in preds[n]:
            a |= above[p] | sbit.get(p, 0)
        above[n] = a
    below: dict[Node, int] = {}  # the readers below each node
    for n in reversed(problem.order):
        b = 0
        for q in succs[n]:
            b |= below[q] | rbit.get(q, 0)
        below[n] = b
    # A hold can be resident beside a group only if its node is above the group's readers
    # and a reader of it below its sources: on a decode step only groups of layers from
    # the node's to its readers' (a node of no layer: any) are tried.
    nodes = problem.graph.nodes
    unlayered = [k for k in masks if k[1] is None]
    layered = sorted((k for k in masks if k[1] is not None), key=lambda k: k[1])
    layers = [k[1] for k in layered]
    out: dict[tuple, int] = {}
    for hold in problem.holds:
        if hold.node in sbit:
            continue  # a source: counted in its group's knapsack, if any
        down = below[hold.node]
        if not down:
            continue
        lo = nodes[hold.node].get("layer")
        ends = [nodes[r].get("layer") for r in hold.readers]
        hi = None if None in ends else max(ends)
        first = 0 if lo is None else bisect_left(layers, lo)
        last = len(layers) if hi is None else bisect_right(layers, hi)
        for key in unlayered + layered[first:last]:
            smask, rmask = masks[key]
            if down & rmask != rmask:
                continue
            if any(above[r] & smask == smask for r in hold.readers):
                for cap, nbytes in hold.row:
                    if cap == key[0]:
                        out[key] = out.get(key, 0) + nbytes
    return out


_NO_PARTIAL: dict[int, int] = {}  # shared by the many nodes below no partly read group; read only


# How many of the latest pool users among a hold's readers' ancestors the release-time
# gate of `_ForcedStarts` looks at (a layer's Q projections: 8 heads on E4B).
RELEASE_USERS = 64
# How many of those users get their own chain to the readers (`_ForcedStarts._chains_to`);
# the rest count only a reader's cost after them.
TAIL_USERS = 16
# How many of a group's holds, lowest first, get their own longest chains; the rest are
# bounded by the group's shortest ones (`_ForcedStarts.freed_at_least`). 16 covers every
# KV tile of an E4B layer up to 2,047 tokens (a tile per KV head: 32 at 4095, 64 at 8191);
# with tiles of both heads, at 8191 (32 then) the bound was 0.1 % lower than with all of
# them, and its pass ~0.4 s shorter on v002-spec.
EXACT_HOLDS = 16
# At how many merges (nodes of several inputs) below a group, in pass order, its forced
# start is applied again, with the users between its last read and the merge: the first
# nodes below all of a layer's KV reads on E4B are the O projection's tiles of the second
# head group, and the merge below them (the post-attention norm) has all four behind it.
TAIL_MERGES = 8


@dataclass(frozen=True)
class PoolView:
    """What `_ForcedStarts` needs of one pool's pass: its users in pass order, each node's
    users among its ancestors and among its descendants as bit masks over them, every
    node's least cost, the pool's instances, the users' work of a mask, and each node's
    chains to its nearest users above and below (`_chains_around`)."""

    users: list
    anc: dict
    cost: dict
    count: int
    desc: dict
    work: Callable[[int], int]
    to_user: dict
    from_user: dict

    def gap(self, m: Node, n: Node) -> int:
        """The least time from m's finish to n's start that the users between them force
        (`chain_bounds`' gap of a pair): their work on the pool's instances and the
        chains from m down to the first of them and from the last up to n."""
        between = self.desc[m] & self.anc[n]
        if not between:
            return 0
        chains = _nearest(self.from_user[m], between) + _nearest(self.to_user[n], between)
        return -(-self.work(between) // self.count) + chains


class _ForcedStarts:
    """The starts the capacity forces, applied during a longest-path pass.

    Claim: let G be a group of sources (no inputs) holding bytes of a capacity of size C
    for their readers, t_f a lower bound of the earliest time any of G's holds is freed,
    W_late the group's late work on its k lanes (`_capacity_groups`: the work beyond the
    most a subset of at most C - B bytes carries, B the bytes of other holds resident at
    F - 1 below, `_resident_beside`). Then every node n that has all of G among its
    ancestors starts at or after ``t_f + ceil(W_late / k)``.

    Proof: let F be the earliest time a hold of G is freed in a valid schedule (F >= t_f).
    A source that started before F holds its bytes until its holds are freed, all at or
    after F, so at F - 1 every such source is resident at once, beside B bytes of other
    holds: their bytes are at most C - B, and their lane time at most the knapsack's early
    work. Every other source starts at F
    or later, and those carry at least W_late of lane time on k lanes, so the last of them
    finishes no earlier than F + ceil(W_late / k); each is an ancestor of n, so n starts
    after it. More: unless n reads a source of G itself, every path from a source s to n
    runs through one of s's readers (a source's data successors read it), so n starts at
    least ``min_s min_r cost(r)`` after the last source finished (``reader_floor``; a
    layer's scores or ·V GEMV on a decode step). And the pool users between the last
    source s* and n run after s* finished and before n starts, with the chains around
    them: n starts at least ``gap(s*, n)`` after s* (`PoolView.gap`, the gap of
    `chain_bounds`), so at least the least such gap over G's sources; the bound adds the
    larger of the two. On a decode step that is the last tile's ·V and, at the merge below
    the O projection's tiles of the head group read last, those tiles.

    t_f is the least, over G's holds, of a lower bound of when the hold is freed: the
    moment all of its readers R finished. That is at least the largest finish (from this
    pass) of a reader, and at least ``tau + ceil(W / k_P) + min_{u in U} D(u)`` for a pool P
    of k_P instances and a set U of P's users that are ancestors of some reader, each
    starting at tau or later (this pass) with W their least work, D(u) the longest chain of
    least costs from u's finish to the finish of a reader of R below u: they run k_P at a
    time after tau, the last of them, u*, finishes no earlier than tau + ceil(W / k_P), and
    the hold is freed only once every reader below u* finished, D(u*) or more later. D is
    computed (`_chains_to`) for the latest `TAIL_USERS` users; for the others the least
    cost of a reader stands in for it (u is above a reader, which ends every such chain). On a
    decode step D is a head's Q norm and RoPE on the host and SFU plus its scores: the
    time between the last Q projection and the first freed tile. U is taken among the latest
    `RELEASE_USERS` users in pass order (any U gives a bound; these give the best on a
    decode step: a KV tile, one KV head's rows, is freed only once its head group's Q
    projections ran and its scores after them). The term is applied at a node once every
    reader precedes it in the pass (so t_f is final) and all of G are its ancestors, is
    carried to descendants by the pass itself, and is applied again at the first
    `TAIL_MERGES` merges (nodes of several inputs) below G, where more users lie between.
    On E4B the O projection's tail took `capacity_chain` up 0.7-0.8 % on `v002-spec` at
    2047-8191 and made it the largest bound at 4095 and 8191 on `v002-as-built` (90.23 M
    and 108.63 M cycles, from 89.67 M and 107.98 M).
    """

    def __init__(
        self, problem: SchedulingProblem, groups, precedence, finish, pool: PoolView
    ) -> None:
        self.preds, self.succs = precedence
        self.finish, self.groups, self.index = finish, groups, problem.index
        self.pool = pool
        # the least cost of a reader of any source of each group (class docstring)
        self.reader_floor = [
            min((pool.cost[r] for n in g.sources for r in self.succs[n]), default=0)
            for g in groups
        ]
        self._latest: dict[tuple, list[Node]] = {}  # `_latest_users` per reader set
        # Which sources of which group are ancestors of a node: per group a bit per source
        # (local to the group), only while the group is partly covered; a fully covered
        # group moves to `covered`. Groups are a layer's KV reads, so partial sets live
        # only inside one attention block and no node carries a bit per read of the step.
        self.bits_of: dict[Node, list[tuple[int, int]]] = defaultdict(list)
        self.full: list[int] = []
        for i, g in enumerate(groups):
            ordered = sorted(g.sources, key=problem.index.__getitem__)
            for j, n in enumerate(ordered):
                self.bits_of[n].append((i, 1 << j))
            self.full.append((1 << len(ordered)) - 1)
        self.last_reader = [max(problem.index[r] for rs in g.holds for r in rs) for g in groups]
        self.t_f: list[int | None] = [None] * len(groups)
        self.partial: dict[Node, dict[int, int]] = {}  # group -> its sources among ancestors
        # Bit i set: group i. Sets of groups as ints: a step has a group per layer, and the
        # late nodes carry them all, so set operations on them must stay cheap.
        self.covered: dict[Node, int] = {}  # groups all of whose sources are ancestors
        self.applied: dict[Node, int] = {}  # groups whose start a node inherits
        self.merges = [0] * len(groups)  # merges below a group that applied it again

    def freed_at_least(self, i: int) -> int:
        """t_f of group `i` (class docstring); all of its readers are final in the pass."""
        t_f = self.t_f[i]
        if t_f is not None:
            return t_f
        holds = self.groups[i].holds
        # each hold bounded first with the group's shortest chains (one pass), then, from
        # the lowest, with its own longest ones until no lower bound below the best is left
        # (a hold's longest chains are at least the group's shortest: the least only rises)
        near = self._chains_to(holds, longest=False)
        best = None
        ranked = sorted((self._freed(r, near), k) for k, r in enumerate(holds))
        for n, (low, k) in enumerate(ranked):
            if best is not None and low >= best:
                break
            if n == EXACT_HOLDS:  # the rest are no lower than this one's first bound
                best = low
                break
            freed = self._freed(holds[k], self._chains_to((holds[k],), longest=True))
            best = freed if best is None or freed < best else best
        self.t_f[i] = t_f = best or 0
        return t_f

    def _latest_users(self, readers: tuple, count: int) -> list[Node]:
        """The latest `count` (at most `RELEASE_USERS`) pool users, in pass order from the
        last, among the readers' ancestors; kept per reader set (asked for several times)."""
        out = self._latest.get(readers)
        if out is None:
            pool = self.pool
            mask = 0
            for r in readers:
                mask |= pool.anc[r]
            out = self._latest[readers] = []
            while mask and len(out) < RELEASE_USERS:
                j = mask.bit_length() - 1
                mask ^= 1 << j
                out.append(pool.users[j])
        return out[:count]

    def _freed(self, readers: tuple, chains: dict) -> int:
        """A lower bound of when the hold read by `readers` is freed (class docstring);
        `chains` maps users to a lower bound of D (absent: the least reader cost)."""
        finish, pool = self.finish, self.pool
        freed = max(finish[r] for r in readers)
        floor = min(pool.cost[r] for r in readers)
        tail = None  # the least D over the users taken so far
        tau, work = None, 0
        for u in self._latest_users(readers, RELEASE_USERS):
            start = finish[u] - pool.cost[u]
            tau = start if tau is None or start < tau else tau
            work += pool.cost[u]
            d = chains.get(u, floor)
            tail = d if tail is None or d < tail else tail
            t = tau + -(-work // pool.count) + tail
            if t > freed:
                freed = t
        return freed

    def _chains_to(self, holds: tuple, longest: bool) -> dict:
        """Lower bounds of D(u) for each hold's latest `TAIL_USERS` pool users.

        With `longest` (one hold): D itself, the longest chain of least costs from u's
        finish to the finish of a reader of the hold below u. Without (a group's holds):
        the shortest chain to any reader of the group below u, a lower bound of every
        hold's D (a hold's longest chain to its own reader is at least the shortest to any
        reader); on a decode step the two mostly agree, a head's one chain of Q norm, RoPE
        and scores. One backward pass, in pass order, over the readers' ancestors from the
        earliest of those users on (an earlier node is no such user's descendant)."""
        index, succs, preds, cost = self.index, self.succs, self.preds, self.pool.cost
        users = {u for readers in holds for u in self._latest_users(readers, TAIL_USERS)}
        if not users:
            return {}
        first = min(index[u] for u in users)
        reader_set = {r for readers in holds for r in readers}
        between = set(reader_set)  # the readers' ancestors from `first` on
        stack = list(reader_set)
        while stack:
            for p in preds[stack.pop()]:
                if p not in between and index[p] >= first:
                    between.add(p)
                    stack.append(p)
        pick = max if longest else min
        chain: dict[Node, int] = {}  # from a node's start to the finish of a reader below
        for x in sorted(between, key=index.__getitem__, reverse=True):
            below = pick((chain[q] for q in succs[x] if q in chain), default=None)
            if x in reader_set and (below is None or not longest):
                below = 0  # a reader ends a chain (the longest may go on to another reader)
            if below is not None:
                chain[x] = cost[x] + below
        out = {}
        for u in users:
            d = pick((chain[q] for q in succs[u] if q in chain), default=None)
            if d is not None:
                out[u] = d
        return out

    def start_at_least(self, n: Node) -> int:
        """The largest forced start of `n` (0 if none); call once per node, in order."""
        preds = self.preds[n]
        covered = applied = 0
        partial: dict[int, int] = {}
        for p in preds:
            covered |= self.covered[p]
            applied |= self.applied[p]
            for i, m in self.partial[p].items():
                partial[i] = partial.get(i, 0) | m
            for i, bit in self.bits_of.get(p, ()):
                partial[i] = partial.get(i, 0) | bit
        if partial:
            done = [i for i, m in partial.items() if covered >> i & 1 or m == self.full[i]]
            for i in done:
                del partial[i]
                covered |= 1 << i
        self.partial[n], self.covered[n] = partial or _NO_PARTIAL, covered
        best, idx = 0, self.index[n]
        pending = covered & ~applied
        if len(preds) > 1:  # a merge: the users of several branches may lie behind it
            again = covered & applied
            while again:
                i = again.bit_length() - 1
                again ^= 1 << i
                if self.merges[i] < TAIL_MERGES:
                    self.merges[i] += 1
                    pending |= 1 << i
        while pending:
            i = pending.bit_length() - 1
            pending ^= 1 << i
            if idx <= self.last_reader[i]:
                continue
            g = self.groups[i]
            t = self.freed_at_least(i) + -(-g.late_work // g.lanes)
            tail = min(self.pool.gap(s, n) for s in g.sources)  # after the last source
            if not any(p in g.sources for p in preds):  # n reads no source itself
                tail = max(tail, self.reader_floor[i])
            t += tail
            if t > best:
                best = t
            applied |= 1 << i
        self.applied[n] = applied
        return best
