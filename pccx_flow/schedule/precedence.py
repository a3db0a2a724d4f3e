"""Which edges of a scheduling problem the hardware forces, and bit masks over node sets.

A problem within L2 carries order-only edges (`pccx_flow.schedule.readahead.kv_stream_edges`):
a heuristic's choice of when to issue a node. Every lower bound walks the data edges only
(`hardware_precedence`), so it bounds the hardware problem, not the heuristic's graph.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping

from pccx_flow.schedule.problem import SchedulingProblem

Node = Hashable

# The int 1, imported as the left side of every shift of a module Cython compiles
# (`pccx_flow.compiled`): Cython computes ``1 << n`` in C when n has a C type (a
# ``len(...)``, or a comprehension's index over ``range(len(...))``), which wraps past 63
# bits where Python's int grows; ``ONE << n`` stays a Python int. As source the two are
# the same.
ONE = 1


def bit_mask(positions: Iterable[int]) -> int:
    """The int with exactly the bits at `positions` set, built in one pass (summing or
    or-ing ``1 << j`` one at a time copies the growing int each time: quadratic)."""
    buf = bytearray()
    for j in positions:
        byte = j >> 3
        if byte >= len(buf):
            buf.extend(bytes(byte + 1 - len(buf)))
        buf[byte] |= ONE << (j & 7)
    return int.from_bytes(buf, "little")


def masks_along(
    order: Iterable[Node], inputs: Mapping[Node, tuple[Node, ...]], bit: Mapping[Node, int]
) -> dict[Node, int]:
    """Per node, the or of `bit` over every node that reaches it through `inputs`, walked
    along `order` (preds in program order: the ancestors; succs in reverse: the
    descendants). A node of one input not in `bit` keeps that input's int itself: no copy
    of a long step's mask."""
    out: dict[Node, int] = {}
    for n in order:
        ins = inputs[n]
        if len(ins) == 1 and ins[0] not in bit:
            out[n] = out[ins[0]]
            continue
        m = 0
        for q in ins:
            m |= out[q]
            if q in bit:  # no `| 0`: it would copy a long step's mask
                m |= bit[q]
        out[n] = m
    return out


def order_only_edges(problem: SchedulingProblem) -> frozenset[tuple[Node, Node]]:
    """The problem's order-only edges: given apart (``problem.order_edges``) or marked
    ``order_only=True`` on edges of its graph (a DAG given with them)."""
    cached = getattr(problem, "_order_only_edges", None)
    if cached is None:
        # each node's neighbour dicts as `adjacency` yields them: a third faster than an
        # edge view over the ~60k edges of a long-context step
        marked = [
            (u, v)
            for u, nbrs in problem.graph.adjacency()
            for v, d in nbrs.items()
            if d.get("order_only")
        ]
        cached = problem._order_only_edges = frozenset((*problem.order_edges, *marked))
    return cached


def hardware_precedence(problem: SchedulingProblem) -> tuple[dict, dict]:
    """``(preds, succs)`` of the problem without its order-only edges.

    Order-only edges (``order_only=True``, e.g. `pccx_flow.schedule.readahead.
    kv_stream_edges`) are a heuristic's choice of when to issue a node, not something
    the hardware forces: a schedule that ignores them can be valid and shorter. A bound
    computed along them would bound that heuristic, not the hardware problem, so the
    bounds below walk only the data edges."""
    cached = getattr(problem, "_hardware_precedence", None)
    if cached is not None:
        return cached
    preds, succs = problem.graph_preds, problem.graph_succs  # without ``order_edges``
    marked = order_only_edges(problem).difference(problem.order_edges)
    if marked:
        preds, succs = dict(preds), dict(succs)
        for n in {v for _, v in marked}:
            preds[n] = tuple(p for p in preds[n] if (p, n) not in marked)
        for n in {u for u, _ in marked}:
            succs[n] = tuple(s for s in succs[n] if (n, s) not in marked)
    out = problem._hardware_precedence = (preds, succs)  # the graph does not change
    return out
