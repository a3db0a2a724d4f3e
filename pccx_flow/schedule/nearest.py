"""The chains between a node and its nearest pool users: the host and SFU work around a
block's weight streams that `pccx_flow.schedule.chains` adds to the streams' work.

`chains_around` gives, per node, its nearest users above and below (no other user on a
path between) with the longest chain of least costs to each; `nearest_chain` picks the
least of them among a set of users, `least_chain` among all. Proved in `chains_around`.
"""

from __future__ import annotations

from collections.abc import Mapping
from math import inf

from pccx_flow.schedule.precedence import Node
from pccx_flow.schedule.problem import SchedulingProblem


def chains_around(
    problem: SchedulingProblem, users: Mapping[Node, int], cost: Mapping[Node, int], preds, succs
) -> tuple[dict[Node, tuple], dict[Node, tuple]]:
    """Per node n, ``to_user[n]``: the users u above n with a path u -> ... -> n through no
    other user (n's *nearest* users above), each as ``(D(u, n), position of u)`` with D
    the longest chain of least costs from u's finish to n's start, shortest first;
    ``from_user[n]`` likewise for the nearest users below n, D from n's finish to the
    user's start. `users` maps each user to its position (its bit in the masks of
    `chain_bounds`; kept as a small int, a bit of a long step's mask is slow to hash).

    Claim (to_user; from_user is the mirror image): for a set S of users that are all
    ancestors of n, such that every user on a path from a user of S to n is in S, take u*
    among the users of S that finish last one with no user of S below it (a user below
    another finishes no earlier, so one exists); then u* is a nearest user of n and n
    starts at least D(u*, n) after u*'s finish. Proof: a user w strictly inside a path
    u* -> ... -> n would be in S and below u*, so there is none: u* is nearest, and every
    path from it to n, the longest of D(u*, n) included, runs between u*'s finish and n's
    start. (The first of S to start, for from_user, likewise: one with no user of S above
    it.) `chain_bounds` takes S as the users between m
    and n (descendants of m, ancestors of n: a user inside a path from one of them to n is
    one too), so ``start(n) >= last finish of S + min over nearest users of n in S of D``
    (`nearest_chain`); with S all users above n, the least D over every nearest user.

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
    to_user = _nearest_rows(problem.order, preds, users, cost)
    from_user = _nearest_rows(reversed(problem.order), succs, users, cost)
    return to_user, from_user


def _nearest_rows(order, inputs, users, cost) -> dict[Node, tuple[tuple, int]]:
    """The recurrence of `chains_around` along `order`, `inputs` giving the neighbours
    already visited (preds in pass order for `to_user`, succs in reverse for `from_user`):
    D(u, n) is the largest of 0 (when u is an input of n) and D(u, p) + cost(p) over the
    inputs p that are not users and have u among their nearest users.

    A node's chains are ``(row, shift)``: ``row`` holds ``(D - shift, position)`` by D, so a
    node of one input shares its input's row with a larger shift instead of copying it.
    Only the `NEAREST_KEPT` shortest chains of a node are kept, and a last entry for the
    position `ALL_USERS` stands for every user left out: each has a chain of at least that
    entry's (the shortest one dropped, or the least such entry of an input plus its cost),
    so `nearest_chain` never answers more than the true least chain. A user kept at one input
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
        d: dict[int, int] = {}  # per nearest user's position, its longest chain to n
        rows: dict[int, tuple[tuple, int]] = {}  # per row object, its largest shift here
        for p in near:
            b = users.get(p)
            if b is not None:  # an input that is a user: 0 away
                d[b] = 0
                continue
            row, shift = chains[p]
            if row:
                shift += cost[p]
                seen = rows.get(id(row))
                if seen is None or shift > seen[1]:
                    rows[id(row)] = (row, shift)
        if not d and len(rows) <= 1:  # one input (the most common), or one row
            chains[n] = next(iter(rows.values())) if rows else _NO_USER
            continue
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


# How many nearest users (shortest chains first) `_nearest_rows` keeps per node. On E4B
# at 1023 keeping 16 gave the bounds of keeping all of them (up to 3,452 at the
# embedding) in a fraction of the time.
NEAREST_KEPT = 16
ALL_USERS = -1  # the position that stands for every user
_NO_USER: tuple = ((), 0)  # a node with no user on that side


def nearest_chain(chains: tuple[tuple, int], between: int) -> int:
    """The least chain of `chains` (`_nearest_rows`) to a user in `between`."""
    row, shift = chains
    for x, u in row:
        if u < 0 or between >> u & 1:
            return x + shift
    return 0  # unreachable for a set between two nodes (`chains_around`); 0 is safe


def least_chain(chains: tuple[tuple, int]) -> int:
    """The least chain of `chains` to any user (0 with none)."""
    row, shift = chains
    return row[0][0] + shift if row else 0
