"""What L2 capacity forces on a step: the KV-like reads that cannot all be held ahead of
their use, and the starts that follows for everything below them.

`capacity_groups` groups a layer's reads and finds, by a knapsack over the capacity less
what other holds must keep resident beside them (`resident_beside`), how much of their
lane time must come after the first of them is freed; `ForcedStarts` applies the start
that forces during `pccx_flow.schedule.chains.chain_bounds`' longest-path pass (the
``capacity_chain`` bounds). Both are proved in their docstrings.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from math import ceil, inf

from pccx_flow.schedule.nearest import nearest_chain
from pccx_flow.schedule.precedence import ONE, Node, hardware_precedence, masks_along
from pccx_flow.schedule.problem import SchedulingProblem


@dataclass(frozen=True)
class CapacityGroup:
    """Nodes with no inputs whose outputs must wait in a capacity for their readers.

    ``late_work`` is the least lane time (over ``lanes`` lanes) the group's nodes must spend
    once the first of their bytes can be freed: what does not fit in the capacity less the
    bytes `resident_beside` proves held beside them cannot have been read ahead
    (`ForcedStarts`). ``holds`` are the reader sets of the
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


def capacity_groups(problem: SchedulingProblem) -> list[CapacityGroup]:
    """Per layer (the ``layer`` attribute of decode nodes; one group for nodes without one),
    the KV-like reads of each capacity.

    A source is a node with no data inputs that holds bytes of a capacity for readers (a
    decode step's KV tile reads). Reads of one layer form a group; the early work is the
    most lane time a set of the group's reads of at most the capacity's bytes, less what
    other holds must keep resident beside them (`resident_beside`), can take
    (`most_work_within`), the late work the rest. Capacities a heuristic adds
    (``problem.order_capacities``) are left out: a bound holds for the hardware's problem.
    """
    preds, succs = hardware_precedence(problem)
    groups: dict[tuple, dict] = {}
    for hold in problem.holds:
        n = hold.node
        if preds[n] or not hold.readers:
            continue
        for cap, nbytes in hold.row:
            if cap in problem.order_capacities:  # a heuristic's pacing, not the hardware's
                continue
            key = (cap, problem.graph.nodes[n].get("layer"))
            g = groups.setdefault(key, {"bytes": {}, "holds": []})
            g["bytes"][n] = g["bytes"].get(n, 0) + nbytes
            g["holds"].append(tuple(hold.readers))
    beside = resident_beside(problem, groups, preds, succs)
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


def resident_beside(problem: SchedulingProblem, groups: dict, preds, succs) -> dict[tuple, int]:
    """Per group (`capacity_groups`' key), the bytes of other holds that every valid
    schedule keeps in the group's capacity at the moment its first hold is freed.

    Claim: let G's sources hold more bytes than the capacity, F be the earliest time a hold
    of G is freed, and pick for every hold of G one reader of cost >= 1. A hold h (not one
    of G's own) in the same capacity whose node a is an ancestor of every picked reader, and
    which has a reader below every source of G, is resident at F - 1, beside the sources of
    G that started before F (`ForcedStarts`), so those hold at most the capacity less h's
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
            smask |= sbit.setdefault(n, ONE << len(sbit))
        for readers in g["holds"]:  # a reader of cost >= 1 of each hold (the claim's r)
            r = next((r for r in readers if problem.min_cost(r) >= 1), None)
            if r is None:
                break
            rmask |= rbit.setdefault(r, ONE << len(rbit))
        else:
            masks[key] = (smask, rmask)
    if not masks:
        return {}
    above = masks_along(problem.order, preds, sbit)  # the sources above each node
    below = masks_along(reversed(problem.order), succs, rbit)  # the readers below each node
    # A hold can be resident beside a group only if its node is above the group's readers
    # and a reader of it below its sources: on a decode step only groups of layers from
    # the node's to its readers' (a node of no layer: any) are tried.
    layer_of = dict(problem.graph.nodes(data="layer"))
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
        lo = layer_of[hold.node]
        ends = [layer_of[r] for r in hold.readers]
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
# gate of `ForcedStarts` looks at (a layer's Q projections: 8 heads on E4B).
RELEASE_USERS = 64
# How many of those users get their own chain to the readers (`ForcedStarts._chains_to`);
# the rest count only a reader's cost after them.
TAIL_USERS = 16
# How many of a group's holds, lowest first, get their own longest chains; the rest are
# bounded by the group's shortest ones (`ForcedStarts.freed_at_least`). 16 covers every
# KV tile of an E4B layer up to 2,047 tokens (a tile per KV head: 32 at 4095, 64 at 8191);
# with tiles of both heads, at 8191 (32 then) the bound was 0.1 % lower than with all of
# them, and its pass ~0.4 s shorter on v002-spec.
EXACT_HOLDS = 16
# At how many merges (nodes of several inputs) that inherit a group's forced start, after
# the group's last reader in pass order (over all branches), the start is applied again,
# with the users between its last read and the merge: the first
# nodes below all of a layer's KV reads on E4B are the O projection's tiles of the second
# head group, and the merge below them (the post-attention norm) has all four behind it.
TAIL_MERGES = 8


def chains_to_readers(
    users: Iterable[Node],
    readers: set[Node],
    preds: dict[Node, tuple[Node, ...]],
    index: dict[Node, int],
    cost: dict[Node, int],
    *,
    longest: bool,
) -> dict[Node, int]:
    """Per user u with a reader below it, the longest (with `longest`) or shortest chain
    of `cost` from u's finish to the finish of a reader: the most (least) cost along a
    path of u's descendants that ends at a reader, u itself not counted (`ForcedStarts`'
    D(u)). `index` is a topological position (the pass order).

    One backward pass over the readers' ancestors from the earliest user on (an earlier
    node is no user's descendant), in reverse pass order: a node's value is final when it
    is reached and is pushed up to its inputs, which are few, where its successors may be
    a whole layer's tiles, most of them not above these readers. Every user is among
    those ancestors, so it is pushed to by each successor with a chain."""
    users = set(users)
    if not users:
        return {}
    first = min(index[u] for u in users)
    between = set(readers)  # the readers' ancestors from `first` on
    stack = list(readers)
    while stack:
        for p in preds[stack.pop()]:
            if p not in between and index[p] >= first:
                between.add(p)
                stack.append(p)
    below: dict[Node, int] = {}  # from the start of a successor to a reader's finish
    for x in sorted(between, key=index.__getitem__, reverse=True):
        b = below.get(x)
        if x in readers and (b is None or not longest):
            b = 0  # a reader ends a chain (the longest may go on to another reader)
        if b is None:
            continue
        c = cost[x] + b  # from x's start
        for p in preds[x]:
            if p in between:
                q = below.get(p)
                if q is None or (c > q if longest else c < q):
                    below[p] = c
    return {u: below[u] for u in users if u in below}


@dataclass(frozen=True)
class PoolView:
    """What `ForcedStarts` needs of one pool's pass: its users in pass order, each node's
    users among its ancestors and among its descendants as bit masks over them, every
    node's least cost, the pool's instances, the users' work of a mask, and each node's
    chains to its nearest users above and below (`pccx_flow.schedule.nearest.chains_around`)."""

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
        return self.gap_between(m, n, between) if between else 0

    def gap_between(self, m: Node, n: Node, between: int) -> int:
        """`gap` given the users between m and n (a non-empty mask)."""
        chains = nearest_chain(self.from_user[m], between) + nearest_chain(self.to_user[n], between)
        return -(-self.work(between) // self.count) + chains


class ForcedStarts:
    """The starts the capacity forces, applied during a longest-path pass.

    Claim: let G be a group of sources (no inputs) holding bytes of a capacity of size C
    for their readers, t_f a lower bound of the earliest time any of G's holds is freed,
    W_late the group's late work on its k lanes (`capacity_groups`: the work beyond the
    most a subset of at most C - B bytes carries, B the bytes of other holds resident at
    F - 1 below, `resident_beside`). Then every node n that has all of G among its
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
    `TAIL_MERGES` merges (nodes of several inputs) that inherit it after G's last reader in
    pass order, where more users may lie between.
    On E4B the O projection's tail took `capacity_chain` up 0.7-0.8 % on `v002-spec` at
    2047-8191; on `v002-as-built` the largest bound went from 89.67 M cycles
    (`capacity_chain:gemv_lanes`) to 90.23 M (`capacity_chain:weight_port`) at 4095 and
    from 107.98 M to 108.63 M at 8191.
    """

    def __init__(
        self, problem: SchedulingProblem, groups, precedence, finish, pool: PoolView
    ) -> None:
        self.preds, succs = precedence
        self.finish, self.groups, self.index = finish, groups, problem.index
        self.pool = pool
        # the least cost of a reader of any source of each group (class docstring)
        self.reader_floor = [
            min((pool.cost[r] for n in g.sources for r in succs[n]), default=0)
            for g in groups
        ]
        # per group, one source for each distinct (users below it, chains down to them):
        # the gap from a source to a node depends on nothing else (`PoolView.gap`), and a
        # decode step's KV reads of a layer share four such pairs among 64 at 8191
        self.gap_sources: list[list[Node]] = [
            list({(pool.desc[s], pool.from_user[s]): s for s in g.sources}.values())
            for g in groups
        ]
        self._latest: dict[tuple, list[Node]] = {}  # `_latest_users` per reader set
        self._latest_of_mask: dict[int, list[Node]] = {}  # ... per users above them
        # Which sources of which group are ancestors of a node: per group a bit per source
        # (local to the group), only while the group is partly covered; a fully covered
        # group moves to `covered`. Groups are a layer's KV reads, so partial sets live
        # only inside one attention block and no node carries a bit per read of the step.
        self.bits_of: dict[Node, list[tuple[int, int]]] = defaultdict(list)
        self.full: list[int] = []
        for i, g in enumerate(groups):
            ordered = sorted(g.sources, key=problem.index.__getitem__)
            for j, n in enumerate(ordered):
                self.bits_of[n].append((i, ONE << j))
            self.full.append((ONE << len(ordered)) - 1)
        self.last_reader = [max(problem.index[r] for rs in g.holds for r in rs) for g in groups]
        self.t_f: list[int | None] = [None] * len(groups)
        self.partial: dict[Node, dict[int, int]] = {}  # group -> its sources among ancestors
        # Bit i set: group i. Sets of groups as ints: a step has a group per layer, and the
        # late nodes carry them all, so set operations on them must stay cheap.
        self.covered: dict[Node, int] = {}  # groups all of whose sources are ancestors
        self.applied: dict[Node, int] = {}  # groups whose start a node inherits
        self.merges = [0] * len(groups)  # merges below a group that applied it again
        self.merging = (ONE << len(groups)) - 1  # groups with merges left (`TAIL_MERGES`)

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
        gates: dict = {}  # holds whose readers have the same latest users share the gate
        ranked = sorted((self._freed(r, near, gates), k) for k, r in enumerate(holds))
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
            # one list per set of users above: the tiles of one KV head share it
            out = self._latest[readers] = self._latest_of_mask.get(mask)
            if out is None:
                out = self._latest_of_mask[mask] = []
                while mask and len(out) < RELEASE_USERS:
                    j = mask.bit_length() - 1
                    mask ^= ONE << j
                    out.append(pool.users[j])
        return out if count >= len(out) else out[:count]

    def _freed(self, readers: tuple, chains: dict, gates: dict | None = None) -> int:
        """A lower bound of when the hold read by `readers` is freed (class docstring);
        `chains` maps users to a lower bound of D (absent: the least reader cost).

        The bound is the larger of the readers' last finish and a gate that depends only
        on the latest users above them and the least reader cost: with `gates` (one dict
        per `chains`) holds that share both share the gate."""
        finish, pool = self.finish, self.pool
        floor = min(pool.cost[r] for r in readers)
        users = self._latest_users(readers, RELEASE_USERS)
        key = (id(users), floor)  # the lists live in `_latest_of_mask`: ids stay unique
        gate = None if gates is None else gates.get(key)
        if gate is None:
            gate = 0
            tail = None  # the least D over the users taken so far
            tau, work = None, 0
            for u in users:
                start = finish[u] - pool.cost[u]
                tau = start if tau is None or start < tau else tau
                work += pool.cost[u]
                d = chains.get(u, floor)
                tail = d if tail is None or d < tail else tail
                t = tau + -(-work // pool.count) + tail
                if t > gate:
                    gate = t
            if gates is not None:
                gates[key] = gate
        freed = max(finish[r] for r in readers)
        return freed if freed > gate else gate

    def _chains_to(self, holds: tuple, longest: bool) -> dict:
        """Lower bounds of D(u) for each hold's latest `TAIL_USERS` pool users.

        With `longest` (one hold): D itself, the longest chain of least costs from u's
        finish to the finish of a reader of the hold below u. Without (a group's holds):
        the shortest chain to any reader of the group below u, a lower bound of every
        hold's D (a hold's longest chain to its own reader is at least the shortest to any
        reader); on a decode step the two mostly agree, a head's one chain of Q norm, RoPE
        and scores (`chains_to_readers`)."""
        # the full lists are shared (`_latest_users`): each distinct one is read once
        lists = {id(x): x for x in (self._latest_users(r, RELEASE_USERS) for r in holds)}
        users = {u for x in lists.values() for u in x[:TAIL_USERS]}
        if not users:
            return {}
        reader_set = {r for readers in holds for r in readers}
        return chains_to_readers(users, reader_set, self.preds, self.index, self.pool.cost,
                                 longest=longest)  # fmt: skip

    def start_at_least(self, n: Node) -> int:
        """The largest forced start of `n` (0 if none); call once per node, in order."""
        preds = self.preds[n]
        if len(preds) == 1 and preds[0] not in self.bits_of:
            # one input that is no source: its sets unchanged (no group newly covered),
            # the partial one shared (never changed once stored)
            p = preds[0]
            covered, applied = self.covered[p], self.applied[p]
            self.partial[n], self.covered[n] = self.partial[p], covered
        else:
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
                    covered |= ONE << i
            self.partial[n], self.covered[n] = partial or _NO_PARTIAL, covered
        best, idx = 0, self.index[n]
        pending = covered & ~applied
        if len(preds) > 1:  # a merge: the users of several branches may lie behind it
            again = covered & applied & self.merging
            while again:
                i = again.bit_length() - 1
                again ^= ONE << i
                if idx > self.last_reader[i]:
                    pending |= ONE << i
                    self.merges[i] += 1
                    if self.merges[i] == TAIL_MERGES:
                        self.merging &= ~(ONE << i)
        while pending:
            i = pending.bit_length() - 1
            pending ^= ONE << i
            if idx <= self.last_reader[i]:
                continue
            g = self.groups[i]
            t = self.freed_at_least(i) + -(-g.late_work // g.lanes)
            tail = min(self.pool.gap(s, n) for s in self.gap_sources[i])  # after the last one
            if not any(p in g.sources for p in preds):  # n reads no source itself
                tail = max(tail, self.reader_floor[i])
            t += tail
            if t > best:
                best = t
            applied |= ONE << i
        self.applied[n] = applied
        return best
