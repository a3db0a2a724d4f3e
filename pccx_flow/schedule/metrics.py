"""How good a schedule is, and where its time goes.

Everything here reads a validated `Schedule` and its `SchedulingProblem` and returns plain
data (dicts of numbers and names) that the report, the JSON output and the benchmark share:

- makespan in cycles, and in µs and tok/s at the profile's clock: **model estimates** on the
  named profile, never measurements;
- every lower bound (`pccx_flow.bounds` for a decode graph, the problem's own otherwise, plus
  `pool_chain_bounds`), the largest one, and the gap of the makespan to it; the gap to the
  largest bound without pool_chain is kept too (``reference_bound``);
- the schedule length ratio: makespan over the min-cost critical path;
- per-lane utilisation, and per pool the cycles with 0, 1, ... instances busy;
- the schedule's own critical path, walked back from the last node to finish through whatever
  fixed each start (an input arriving, the lane or a pool instance freeing up), with the
  cycles spent waiting for lanes and pools rather than for data;
- LAuReL overlap: per layer, the share of the ``laurel`` block's busy time that runs while the
  same layer's ``attn`` block is running (spec 003 §1: LAuReL runs in parallel to attention);
- PLE slack: per ``ple_mix`` node, how much later it could start without growing the makespan,
  keeping every lane's and pool instance's order (spec 003 §2: PLE is off the critical path).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass
from math import ceil, inf
from typing import Any

from pccx_flow.schedule.model import Schedule, Slot
from pccx_flow.schedule.problem import SchedulingProblem, pool_instance_names

Node = Hashable


def estimate_label(profile: Any) -> str:
    """The words every printed time carries."""
    name = getattr(profile, "name", profile)
    return f"model estimate, profile {name}"


# --- bounds --------------------------------------------------------------------------------


def bit_mask(positions: Iterable[int]) -> int:
    """The int with exactly the bits at `positions` set, built in one pass (summing or
    or-ing ``1 << j`` one at a time copies the growing int each time: quadratic)."""
    buf = bytearray()
    for j in positions:
        byte = j >> 3
        if byte >= len(buf):
            buf.extend(bytes(byte + 1 - len(buf)))
        buf[byte] |= 1 << (j & 7)
    return int.from_bytes(buf, "little")


def order_only_edges(problem: SchedulingProblem) -> frozenset[tuple[Node, Node]]:
    """The problem's order-only edges: given apart (``problem.order_edges``) or marked
    ``order_only=True`` on edges of its graph (a DAG given with them)."""
    cached = getattr(problem, "_order_only_edges", None)
    if cached is None:
        marked = [(u, v) for u, v, d in problem.graph.edges(data=True) if d.get("order_only")]
        cached = problem._order_only_edges = frozenset((*problem.order_edges, *marked))
    return cached


def hardware_precedence(problem: SchedulingProblem) -> tuple[dict, dict]:
    """``(preds, succs)`` of the problem without its order-only edges.

    Order-only edges (``order_only=True``, e.g. `pccx_flow.schedule.memory.
    kv_prefetch_edges`) are a heuristic's choice of when to issue a node, not something
    the hardware forces: a schedule that ignores them can be valid and shorter. A bound
    computed along them would bound that heuristic, not the hardware problem, so the
    bounds below walk only the data edges."""
    cached = getattr(problem, "_hardware_precedence", None)
    if cached is not None:
        return cached
    order_only = order_only_edges(problem)
    if not order_only:
        out = (problem.preds, problem.succs)
    else:
        preds = {n: tuple(p for p in problem.preds[n] if (p, n) not in order_only)
                 for n in problem.order}  # fmt: skip
        succs = {n: tuple(s for s in problem.succs[n] if (n, s) not in order_only)
                 for n in problem.order}  # fmt: skip
        out = (preds, succs)
    problem._hardware_precedence = out  # the problem's graph does not change once built
    return out


def min_cost_critical_path(problem: SchedulingProblem) -> int:
    """Longest path over the data edges (`hardware_precedence`) with every node at its
    cheapest lane and free communication."""
    preds, _ = hardware_precedence(problem)
    finish: dict[Node, int] = {}
    for n in problem.order:
        start = max((finish[p] for p in preds[n]), default=0)
        finish[n] = start + problem.min_cost(n)
    return max(finish.values(), default=0)


def problem_bounds(problem: SchedulingProblem) -> dict[str, int]:
    """Lower bounds any problem has: critical path, lane-set work, pool work.

    For each distinct set S of lanes some node can use, every node confined to S must run on
    S, so ceil(sum of their min costs / |S|) bounds the makespan; a pool with k instances
    likewise bounds by the work of its users over k.
    """
    bounds = {"critical_path": min_cost_critical_path(problem)}
    lane_sets = {frozenset(problem.costs[n]) for n in problem.order}
    for lanes in sorted(lane_sets, key=lambda s: sorted(s)):
        work = sum(problem.min_cost(n) for n in problem.order if set(problem.costs[n]) <= lanes)
        classes = sorted({problem.lane_by_name[ln].lane_class for ln in lanes})
        name = f"lanes:{'+'.join(classes)}" + (f"[{len(lanes)}]" if len(lanes) > 1 else "")
        if len(classes) == 1 and lanes == {
            ln.name for ln in problem.lanes if ln.lane_class == classes[0]
        }:
            name = f"lane_class:{classes[0]}"
        bounds[name] = max(bounds.get(name, 0), ceil(work / len(lanes)))
    for pool, count in problem.pools.items():
        work = sum(problem.min_cost(n) for n in problem.order if pool in problem.resources[n])
        if work:
            bounds[f"pool:{pool}"] = ceil(work / count)
    return bounds


def residency_bounds(problem: SchedulingProblem) -> dict[str, int]:
    """A lower bound per capacity from the byte-cycles its demands must spend resident.

    Claim: for every valid schedule of length T and each capacity c of size C,
    ``T >= ceil(sum_h d_h * (m_n + max_{s in readers(h)} m_s) / C)`` over the holds h of
    the problem (`SchedulingProblem.holds`: bytes d_h of node n freed when n and the hold's
    readers, all successors of n, finished), m_x the least cost of x on any lane (the max
    over no readers is 0).

    Proof: h's bytes are resident from start(n) to the last finish of n and its readers
    (the problem's rule, checked by the validator). n runs at least m_n, and every reader
    s starts no earlier than finish(n) and runs at least m_s, so each finishes no earlier
    than start(n) + m_n + m_s: h is resident for at least m_n + max_s m_s cycles, all
    within [0, T]. The occupancy of c is at most C at every moment, so its integral over
    [0, T] - the sum of d_h times h's residency - is at most C * T. Dividing by C gives
    the claim (T is an integer, hence the ceiling).

    It adds a constraint to the problem and removes none, so every bound without memory
    stays valid; this one binds when the capacity is small against long-lived bytes (KV
    tiles that stream in while their scores run).
    """
    out: dict[str, int] = {}
    for cap, size in problem.capacities.items():
        total = 0
        for hold in problem.holds:
            d = dict(hold.row).get(cap, 0)
            if d:
                after = max((problem.min_cost(s) for s in hold.readers), default=0)
                total += d * (problem.min_cost(hold.node) + after)
        if total and size:
            out[f"residency:{cap}"] = ceil(total / size)
    return out


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
        out.append((pool, count, [n for n in problem.order if pool in problem.resources[n]]))
    pool_work = max(
        (sum(problem.min_cost(n) for n in users) / count for _, count, users in out if count),
        default=0,
    )
    by_class: dict[str, set[str]] = defaultdict(set)
    for lane in problem.lanes:
        by_class[lane.lane_class].add(lane.name)
    for cls, lanes in sorted(by_class.items()):
        users = [n for n in problem.order if problem.costs[n].keys() <= lanes]
        if users and sum(problem.min_cost(n) for n in users) / len(lanes) >= pool_work:
            out.append((f"{cls}_lanes", len(lanes), users))
    return out


def chain_bounds(
    problem: SchedulingProblem,
    hops: int = POOL_CHAIN_HOPS,
    *,
    plain: bool = True,
    capacity: bool = False,
) -> dict[str, int]:
    """A lower bound per pool that adds the pool's work to the dependency chains around it.

    Pool users (nodes holding an instance of pool P, which has ``k`` instances) between two
    nodes must all run inside the gap between them: if m is an ancestor of n, every user u
    with m -> ... -> u -> ... -> n runs within [finish(m), start(n)], and at most k users run
    at once, so ``start(n) >= finish(m) + ceil(W(m, n) / k)`` with W the users' cheapest
    costs. From time 0 likewise ``start(n) >= ceil(W(ancestors of n) / k)``, and after n
    ``makespan >= finish(n) + ceil(W(descendants of n) / k)``. A longest-path pass with these
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
    for n in problem.order:  # ancestors within `hops` edges
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
        if pool not in problem.pools and out:
            # A lane class after the pools: walked only when its work plus the idle the
            # pools' chains proved comes within `LANE_CHAIN_MARGIN` of the largest chain
            # bound so far (the KV reads it waits for can add more than they added to the
            # pools'). A shortcut for time (the pass over its many users is the costliest
            # part at long contexts), not part of any bound: a skipped class only leaves
            # its own bound out.
            work_bound = -(-sum(cost[n] for n in users) // count)
            if work_bound + idle < (1 - LANE_CHAIN_MARGIN) * max(out.values()):
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
        # to_user[n]: the least, over users above n, of the longest chain of least costs from
        # that user's finish to n's start; from_user[m] likewise from m's finish down to a
        # user's start (`_chains_around` proves both).
        to_user, from_user = _chains_around(problem, bit, cost, preds, succs)
        before = {
            n: -(-work(anc[n]) // count) + (to_user[n] if anc[n] else 0) for n in problem.order
        }
        after = {
            n: -(-work(desc[n]) // count) + (from_user[n] if desc[n] else 0)
            for n in problem.order
        }
        # The pool work between each node and its near ancestors, shared by the passes.
        # Only entries that can decide a start are kept. Induction on the pass order: every
        # m in reach[x] has start(x) >= finish(m) + gap(m, x). A farther ancestor m of n with
        # no pool work in between is covered by the input p of n on its way (m is p or in
        # reach[p], so finish(p) >= finish(m)). If n has one input p, every m in reach[n]
        # other than p is in reach[p], and the users between m and n are those between m
        # and p plus p itself, so gap(m, n) <= gap(m, p) + cost(p) and finish(p) covers it:
        # only (p, 0) is kept (p's descendants and ancestors share no user).
        gaps: dict[Node, list[tuple[Node, int]]] = {}
        for n in problem.order:
            direct, a = preds[n], anc[n]
            if len(direct) == 1:
                gaps[n] = [(direct[0], 0)]
                continue
            row = []
            for m in reach[n]:
                between = desc[m] & a
                gap = -(-work(between) // count)
                if between:  # the users' work, after m's head and before n's tail
                    gap += from_user[m] + to_user[n]
                if gap or m in direct:
                    row.append((m, gap))
            gaps[n] = row
        finishes = [{} for _ in variants]  # one longest-path pass per variant, side by side
        best_end = [0] * len(variants)
        view = PoolView(users, anc, cost, count)
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
            idle = max(idle, best_end[0] - -(-sum(cost[n] for n in users) // count))
    return out


def _chains_around(
    problem: SchedulingProblem, users: Mapping[Node, int], cost: Mapping[Node, int], preds, succs
) -> tuple[dict[Node, int], dict[Node, int]]:
    """Per node n, ``to_user[n]``: a lower bound, over every pool user u above n, of the
    longest chain of least costs from u's finish to n's start; ``from_user[n]`` likewise
    from n's finish to the start of any user below n (0 where there is none).

    Claim: ``to_user[n] = min over inputs p of (0 if p is a user, else to_user[p] +
    cost(p))``, over inputs with a user above them. Proof by induction on the pass order:
    a user u above n reaches it through some input p; if p is a user the bound 0 holds;
    otherwise u is above p and the chain u -> p -> n is at least to_user[p] + cost(p).
    `from_user` is the mirror image over the outputs.

    Why `chain_bounds` adds them: the users between m and n run k at a time after m's
    finish plus ``from_user[m]`` (each is below m), and n starts after the last of them
    finished plus ``to_user[n]`` (it is above n). On a decode step these are the host and
    SFU chains around a block's weight streams (the norms after the O projection and before
    the FFN gate: ~63 k cycles at position 1023 on v002-spec) that the work term alone,
    all weight bytes over two ports, does not count.
    """
    to_user = _shortest_chains(problem.order, preds, users, cost)
    from_user = _shortest_chains(reversed(problem.order), succs, users, cost)
    return to_user, from_user


def _shortest_chains(order, inputs, users, cost) -> dict[Node, int]:
    """The recurrence of `_chains_around` along `order`, `inputs` giving the neighbours
    already visited (preds in pass order for `to_user`, succs in reverse for `from_user`)."""
    out: dict[Node, int] = {}
    reached: set[Node] = set()  # nodes with a user on that side of them
    for n in order:
        best = None
        for p in inputs[n]:
            if p in users:
                best = 0
                break
            if p in reached:
                t = out[p] + cost[p]
                best = t if best is None or t < best else best
        if best is not None:
            reached.add(n)
        out[n] = best or 0
    return out


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
    so the exact 0/1 answer is a few counts per kind: three 512 KiB tiles fit in 1.75 MiB,
    where the fractional relaxation counts three and a half. With more kinds than
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
    most lane time a set of the group's reads of at most the capacity's bytes can take
    (`most_work_within`), the late work the rest.
    """
    preds, _ = hardware_precedence(problem)
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
    out = []
    for (cap, _), g in sorted(groups.items(), key=lambda kv: str(kv[0])):
        work = {n: problem.min_cost(n) for n in g["bytes"]}
        early = most_work_within(((g["bytes"][n], work[n]) for n in work), problem.capacities[cap])
        late = sum(work.values()) - early
        lanes = {ln for n in g["bytes"] for ln in problem.costs[n]}
        if late > 0:
            out.append(CapacityGroup(frozenset(g["bytes"]), late, len(lanes), tuple(g["holds"])))
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
# KV tile of an E4B layer up to 4,095 tokens; at 8191 (32) the bound is 0.1 % lower than
# with all of them, and its pass ~0.4 s shorter on v002-spec.
EXACT_HOLDS = 16


@dataclass(frozen=True)
class PoolView:
    """What the release-time gate of `_ForcedStarts` needs of one pool's pass: its users
    in pass order, each node's users among its ancestors as a bit mask over them, every
    node's least cost, and the pool's instances."""

    users: list
    anc: dict
    cost: dict
    count: int


class _ForcedStarts:
    """The starts the capacity forces, applied during a longest-path pass.

    Claim: let G be a group of sources (no inputs) holding bytes of a capacity of size C
    for their readers, t_f a lower bound of the earliest time any of G's holds is freed,
    W_late the group's late work on its k lanes (`_capacity_groups`: the work beyond the
    most a subset of at most C bytes carries). Then every node n that has all of G among
    its ancestors starts at or after ``t_f + ceil(W_late / k)``.

    Proof: let F be the earliest time a hold of G is freed in a valid schedule (F >= t_f).
    A source that started before F holds its bytes until its holds are freed, all at or
    after F, so at F - 1 every such source is resident at once: their bytes are at most C,
    and their lane time at most the knapsack's early work. Every other source starts at F
    or later, and those carry at least W_late of lane time on k lanes, so the last of them
    finishes no earlier than F + ceil(W_late / k); each is an ancestor of n, so n starts
    after it. More: unless n reads a source of G itself, every path from a source s to n
    runs through one of s's readers (a source's data successors read it), so n starts at
    least ``min_s min_r cost(r)`` after the last source finished: the bound adds that
    (``reader_floor``; a layer's scores or ·V GEMV on a decode step).

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
    decode step: a KV tile is freed only once all heads' Q projections ran and its scores
    after them). The term is applied at a node once every reader precedes it in the pass
    (so t_f is final) and all of G are its ancestors, and is carried to descendants by the
    pass itself.
    """

    def __init__(
        self, problem: SchedulingProblem, groups, precedence, finish, pool: PoolView
    ) -> None:
        self.preds, self.succs = precedence
        self.finish, self.groups, self.index = finish, groups, problem.index
        self.pool, self.order = pool, problem.order
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
        self.covered: dict[Node, frozenset] = {}  # groups all of whose sources are ancestors
        self.applied: dict[Node, frozenset] = {}  # groups whose start a node inherits

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
        covered: frozenset = frozenset()
        applied: frozenset = frozenset()
        partial: dict[int, int] = {}
        for p in preds:
            c, a = self.covered[p], self.applied[p]
            if not c <= covered:  # shared with the input when it adds to nothing
                covered = covered | c if covered else c
            if not a <= applied:
                applied = applied | a if applied else a
            for i, m in self.partial[p].items():
                partial[i] = partial.get(i, 0) | m
            for i, bit in self.bits_of.get(p, ()):
                partial[i] = partial.get(i, 0) | bit
        if partial:
            done = [i for i, m in partial.items() if i in covered or m == self.full[i]]
            for i in done:
                del partial[i]
            covered = covered.union(done) if done else covered
        self.partial[n], self.covered[n] = partial or _NO_PARTIAL, covered
        best, added, idx = 0, [], self.index[n]
        if not covered <= applied:
            for i in covered - applied:
                if idx <= self.last_reader[i]:
                    continue
                g = self.groups[i]
                t = self.freed_at_least(i) + -(-g.late_work // g.lanes)
                if not any(p in g.sources for p in preds):  # n reads no source itself
                    t += self.reader_floor[i]
                if t > best:
                    best = t
                added.append(i)
        self.applied[n] = applied | frozenset(added) if added else applied
        return best


def graph_bounds(problem: SchedulingProblem, profile: Any) -> dict[str, int] | None:
    """`pccx_flow.bounds.lower_bounds` of the decode graph behind `problem`, flattened."""
    if problem.source is None or profile is None or isinstance(profile, str):
        return None
    from pccx_flow.bounds import lower_bounds

    lb = lower_bounds(problem.source, profile)
    out = {"critical_path": int(lb.critical_path_cycles)}
    for field, value in lb.to_dict().items():  # lane_class_cycles, pool_cycles, ...
        if field.endswith("_cycles") and isinstance(value, dict):
            prefix = field[: -len("_cycles")]
            out.update({f"{prefix}:{k}": int(v) for k, v in value.items()})
    out.setdefault(lb.largest_name, int(lb.largest_cycles))
    return out


# --- the schedule's own critical path --------------------------------------------------------


def schedule_critical_path(schedule: Schedule, problem: SchedulingProblem) -> dict:
    """Walk back from the last node to finish through whatever determined each start.

    At each node the cause of its start time is, in this order of preference: an input from a
    predecessor that arrived exactly then (``data``), the previous node on the same lane
    finishing exactly then (``lane``), the previous holder of one of its pool instances
    (``pool:<instance>``), or one node that was both (``lane+pool:<instance>``: a queue of
    port-bound GEMVs, where a free lane alone would not have helped). A start with no such
    cause (time 0, or a policy's own delay such as in-order issue) ends the walk.

    ``waited_cycles`` of a step is the time between its inputs being ready and its start.
    Those waits overlap one another along a chain of nodes queued on one lane, so the totals
    in ``blocked_cycles`` count only the part of the path's own timeline during which the
    next node was ready but blocked: the overlap of its wait with the node it waited for (by
    cause: ``lane``, ``pool``, ``lane+pool``, and ``delay`` before the first node). Their sum
    is at most the makespan.
    """
    slots = schedule.slots
    if not slots:
        return {"nodes": [], "steps": [], "lanes": {}, "blocked_cycles": {}}
    ends_on_lane: dict[tuple[str, int], list[Node]] = defaultdict(list)
    ends_on_inst: dict[tuple[str, int], list[Node]] = defaultdict(list)
    for n, s in slots.items():
        ends_on_lane[(s.lane, s.finish)].append(n)
        for inst in s.resources:
            ends_on_inst[(inst, s.finish)].append(n)
    index = problem.index
    last = max(slots.values(), key=lambda s: (s.finish, index[s.node])).node
    steps, seen = [], set()
    node: Node | None = last
    while node is not None and node not in seen:
        seen.add(node)
        s = slots[node]
        data_ready, from_pred = 0, None
        for p in problem.preds[node]:
            ps = slots[p]
            t = ps.finish + problem.comm(p, node, ps.lane, s.lane)
            if t > data_ready or (t == data_ready and from_pred is None):
                data_ready, from_pred = t, p
        cause, prev = "start", None
        if s.start > 0:
            if from_pred is not None and data_ready == s.start:
                cause, prev = "data", from_pred
            else:
                on_lane = [m for m in ends_on_lane.get((s.lane, s.start), ()) if m != node]
                lane_prev = min(on_lane, key=index.__getitem__) if on_lane else None
                pool_prev, pool_inst = None, ""
                for inst in s.resources:
                    holders = [m for m in ends_on_inst.get((inst, s.start), ()) if m != node]
                    if holders:
                        pool_prev, pool_inst = min(holders, key=index.__getitem__), inst
                        break
                if lane_prev is not None and lane_prev == pool_prev:
                    # the node before it on its lane also held its pool instance: both bind
                    cause, prev = f"lane+pool:{pool_inst}", lane_prev
                elif lane_prev is not None:
                    cause, prev = "lane", lane_prev
                elif pool_prev is not None:
                    cause, prev = f"pool:{pool_inst}", pool_prev
                else:
                    cause = "delay"
        wait = s.start - data_ready
        steps.append(
            {
                "node": node,
                "lane": s.lane,
                "start": s.start,
                "finish": s.finish,
                "cause": cause,
                "waited_cycles": wait,
            }
        )
        node = prev
    steps.reverse()
    blocked: dict[str, int] = defaultdict(int)
    lanes: dict[str, int] = defaultdict(int)
    for k, st in enumerate(steps):
        lanes[st["lane"]] += st["finish"] - st["start"]
        kind = st["cause"].split(":")[0]
        if st["waited_cycles"] <= 0 or kind in ("data", "start"):
            continue
        if k == 0:
            blocked[kind] += min(st["waited_cycles"], st["start"])
        else:
            before = steps[k - 1]
            blocked[kind] += min(st["waited_cycles"], before["finish"] - before["start"])
    return {
        "nodes": [st["node"] for st in steps],
        "steps": steps,
        "lanes": dict(sorted(lanes.items(), key=lambda kv: -kv[1])),
        "blocked_cycles": dict(blocked),
    }


# --- LAuReL overlap and PLE slack ------------------------------------------------------------


def _union(intervals: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for s, f in sorted(i for i in intervals if i[1] > i[0]):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], f)
        else:
            out.append([s, f])
    return [(s, f) for s, f in out]


def _intersection_length(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> int:
    i = j = total = 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if hi > lo:
            total += hi - lo
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def _by_layer_block(schedule: Schedule, problem: SchedulingProblem, block: str) -> dict:
    out: dict[int, list[Slot]] = defaultdict(list)
    attrs = problem.graph.nodes
    for n, slot in schedule.slots.items():
        a = attrs[n]
        if a.get("block") == block:
            out[a.get("layer", -1)].append(slot)
    return out


def laurel_overlap(schedule: Schedule, problem: SchedulingProblem) -> dict:
    """Per layer, the share of LAuReL busy time that overlaps the layer's attention block."""
    laurel = _by_layer_block(schedule, problem, "laurel")
    attn = _by_layer_block(schedule, problem, "attn")
    per_layer = {}
    for layer in sorted(laurel):
        busy = _union([(s.start, s.finish) for s in laurel[layer]])
        total = sum(f - s for s, f in busy)
        if total == 0:
            continue
        attn_busy = _union([(s.start, s.finish) for s in attn.get(layer, [])])
        both = _intersection_length(busy, attn_busy)
        per_layer[layer] = both / total
    shares = list(per_layer.values())
    return {
        "per_layer": per_layer,
        "mean": sum(shares) / len(shares) if shares else None,
        "min": min(shares) if shares else None,
    }


def latest_starts(schedule: Schedule, problem: SchedulingProblem) -> dict[Node, int]:
    """Latest start of every node that keeps the makespan, the lane orders and pool orders.

    The schedule's own order on each lane and pool instance is kept as extra edges; the latest
    finish of a node is the earliest latest start among its successors (minus comm) and among
    the next node on its lane and on each pool instance it holds.
    """
    slots = schedule.slots
    index = problem.index
    order = sorted(slots.values(), key=lambda s: (s.start, s.finish, index[s.node]))
    next_on: dict[Node, list[Node]] = defaultdict(list)
    last_on: dict[str, Node] = {}
    for s in order:
        for key in (("lane", s.lane), *(("inst", i) for i in s.resources)):
            prev = last_on.get(key)
            if prev is not None:
                next_on[prev].append(s.node)
            last_on[key] = s.node
    makespan = schedule.makespan
    latest: dict[Node, int] = {}
    for s in reversed(order):
        n = s.node
        lf = makespan
        for succ in problem.succs[n]:
            t = latest[succ] - problem.comm(n, succ, s.lane, slots[succ].lane)
            if t < lf:
                lf = t
        for succ in next_on.get(n, ()):
            if latest[succ] < lf:
                lf = latest[succ]
        latest[n] = lf - (s.finish - s.start)
    return latest


def dag_slack(problem: SchedulingProblem) -> dict[Node, int]:
    """Slack of every node in the DAG alone: unlimited lanes, cheapest costs, free comm.

    Zero means the node is on a min-cost critical path of the graph itself, so no schedule on
    any number of lanes can give it room; compare with the schedule's own slack.
    """
    cost = {n: problem.min_cost(n) for n in problem.order}
    earliest: dict[Node, int] = {}
    for n in problem.order:
        earliest[n] = max((earliest[p] + cost[p] for p in problem.preds[n]), default=0)
    end = max((earliest[n] + cost[n] for n in problem.order), default=0)
    latest_finish: dict[Node, int] = {}
    for n in reversed(problem.order):
        latest_finish[n] = min((latest_finish[s] - cost[s] for s in problem.succs[n]), default=end)
    return {n: latest_finish[n] - cost[n] - earliest[n] for n in problem.order}


def ple_slack(schedule: Schedule, problem: SchedulingProblem, latest: dict | None = None) -> dict:
    """Slack of the ``ple_mix`` nodes: per layer the minimum, overall minimum, zero layers.

    ``per_layer`` keeps the schedule's lane and pool orders (`latest_starts`); ``dag_per_layer``
    is the same minimum in the graph alone (`dag_slack`), which says whether the graph or the
    schedule put PLE on the critical path.
    """
    mix = _by_layer_block(schedule, problem, "ple_mix")
    if not mix:
        return {"per_layer": {}, "min": None, "zero_layers": [], "dag_per_layer": {}}
    latest = latest if latest is not None else latest_starts(schedule, problem)
    in_dag = dag_slack(problem)
    layers = sorted(mix.items())
    per_layer = {layer: min(latest[s.node] - s.start for s in slots) for layer, slots in layers}
    dag_per_layer = {layer: min(in_dag[s.node] for s in slots) for layer, slots in layers}
    return {
        "per_layer": per_layer,
        "min": min(per_layer.values()),
        "zero_layers": [layer for layer, v in per_layer.items() if v <= 0],
        "dag_per_layer": dag_per_layer,
        "dag_zero_layers": [layer for layer, v in dag_per_layer.items() if v <= 0],
    }


def pool_busy(schedule: Schedule, pools: Mapping[str, int]) -> dict[str, list[tuple[int, int]]]:
    """Per pool, how many of its instances are busy over time: ``[(t, busy from t on), ...]``.

    The series starts at cycle 0 and lists only the times where the count changes (the
    Gantt chart's weight-port row draws it). `pools` maps pool name to instance count, as
    `SchedulingProblem.pools` and `Profile.pools` do; slots name the instances they hold.
    """
    of_instance = pool_instance_names(pools)
    out = {}
    for pool in pools:
        delta: dict[int, int] = defaultdict(int)
        for slot in schedule.slots.values():
            held = sum(of_instance.get(i) == pool for i in slot.resources)
            if held and slot.finish > slot.start:
                delta[slot.start] += held
                delta[slot.finish] -= held
        series = [(0, 0)]
        for t in sorted(delta):
            if delta[t]:
                busy = series[-1][1] + delta[t]
                series[-1:] = [(t, busy)] if t == series[-1][0] else [series[-1], (t, busy)]
        out[pool] = series
    return out


def pool_occupancy(schedule: Schedule, problem: SchedulingProblem) -> dict[str, dict[int, int]]:
    """Per pool, cycles of the makespan with 0, 1, ..., count instances busy.

    When the largest bound is a pool's (the weight ports on pccx), the cycles with fewer than
    all instances busy are exactly where the makespan loses to that bound.
    """
    out = {}
    span = schedule.makespan
    for pool, series in pool_busy(schedule, problem.pools).items():
        count = problem.pools[pool]
        cycles = dict.fromkeys(range(count + 1), 0)
        for (t, busy), (end, _) in zip(series, [*series[1:], (span, 0)], strict=True):
            cycles[min(busy, count)] += end - t
        out[pool] = cycles
    return out


# --- everything together ---------------------------------------------------------------------


def utilisation(schedule: Schedule) -> dict[str, float]:
    """Busy share of the makespan per lane, in lane order."""
    span = schedule.makespan
    busy: dict[str, int] = {lane.name: 0 for lane in schedule.lanes}
    for s in schedule.slots.values():
        busy[s.lane] = busy.get(s.lane, 0) + s.finish - s.start
    return {lane: (b / span if span else 0.0) for lane, b in busy.items()}


def memory_metrics(schedule: Schedule, problem: SchedulingProblem) -> dict[str, Any]:
    """Per capacity (``l2``, ``l2_reach``): size, peak and time-mean bytes; memory waits.

    Keys are ``<capacity>_bytes``, ``<capacity>_peak_bytes``, ``<capacity>_mean_bytes``
    (over the makespan), plus ``memory_wait_cycles`` (sum over nodes of the cycles a node
    waited for room after its inputs were ready, as the timeline recorded) and
    ``memory_wait_nodes``. Empty when the problem models no capacity.
    """
    from pccx_flow.schedule.memory import occupancy, occupancy_stats

    if not problem.capacities:
        return {}
    out: dict[str, Any] = {}
    for cap, size in problem.capacities.items():
        stats = occupancy_stats(occupancy(schedule, problem, cap), schedule.makespan)
        out[f"{cap}_bytes"] = size
        out[f"{cap}_peak_bytes"] = stats["peak_bytes"]
        out[f"{cap}_mean_bytes"] = stats["mean_bytes"]
    out["memory_wait_cycles"] = sum(schedule.memory_wait.values())
    out["memory_wait_nodes"] = len(schedule.memory_wait)
    return out


def step_bounds(problem: SchedulingProblem, profile: Any = None) -> dict[str, Any]:
    """Every lower bound of a problem, the largest, and the largest of `pccx_flow.bounds`.

    One function for `schedule`'s summary and `check`, so both name the same binding bound.
    """
    bounds = graph_bounds(problem, profile)
    source = "pccx_flow.bounds"
    if bounds is None:
        bounds, source = problem_bounds(problem), "problem"
    reference = max(bounds, key=lambda k: bounds[k])
    bounds = {
        **bounds,
        **chain_bounds(problem, POOL_CHAIN_HOPS, capacity=bool(problem.capacities)),
        **residency_bounds(problem),
    }
    return {
        "bounds_cycles": bounds,
        "bounds_source": source,
        "largest_bound": max(bounds, key=lambda k: bounds[k]),
        "reference_bound": reference,
    }


def schedule_metrics(schedule: Schedule, problem: SchedulingProblem, profile: Any = None) -> dict:
    """Every metric of the module docstring as plain, JSON-compatible data."""
    span = schedule.makespan
    sb = step_bounds(problem, profile)
    bounds, bound_source = sb["bounds_cycles"], sb["bounds_source"]
    reference_name, largest_name = sb["reference_bound"], sb["largest_bound"]
    reference = bounds[reference_name]
    largest = bounds[largest_name]
    cp_min = min_cost_critical_path(problem)
    out: dict[str, Any] = {
        "policy": schedule.policy,
        "profile": schedule.profile,
        "nodes": len(problem),
        "edges": problem.graph.number_of_edges() + len(problem.order_edges),
        # edges the scheduler added for L2 (KV read-ahead), not data: `check` counts none
        "order_only_edges": len(order_only_edges(problem)),
        "lanes": len(problem.lanes),
        "makespan_cycles": span,
        "bounds_cycles": bounds,
        "bounds_source": bound_source,
        "largest_bound": largest_name,
        "largest_bound_cycles": largest,
        "gap_to_largest_bound": (span / largest - 1.0) if largest else None,
        # the largest of the bounds from `bounds_source` alone (without pool_chain)
        "reference_bound": reference_name,
        "reference_bound_cycles": reference,
        "gap_to_reference_bound": (span / reference - 1.0) if reference else None,
        "below_bounds": sorted(k for k, v in bounds.items() if span < v),
        "schedule_length_ratio": span / cp_min if cp_min else None,
        "utilisation": utilisation(schedule),
        "pool_occupancy": pool_occupancy(schedule, problem),
    }
    out.update(memory_metrics(schedule, problem))
    core_hz = getattr(profile, "core_hz", None)
    if core_hz:
        out["estimate"] = estimate_label(profile)
        out["core_hz"] = float(core_hz)
        out["makespan_us"] = span / core_hz * 1e6
        out["tokens_per_second"] = core_hz / span if span else None
        out["largest_bound_tokens_per_second"] = core_hz / largest if largest else None
    out["critical_path"] = schedule_critical_path(schedule, problem)
    has_blocks = any("block" in a for _, a in problem.graph.nodes(data=True))
    if has_blocks:
        out["laurel_overlap"] = laurel_overlap(schedule, problem)
        out["ple_slack"] = ple_slack(schedule, problem)
    return out
