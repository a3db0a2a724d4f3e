"""On-chip memory as a scheduling resource: what a decode node keeps in L2, and occupancy.

Two jobs, both on plain data:

- `decode_demands` says how many bytes of L2 (and of the SFU's reach, where the profile
  limits it) each node of a decode graph allocates. A node that runs on the NPU writes its
  outputs to L2; they stay there from the node's start until its last consumer finishes
  (`SchedulingProblem` defines that lifetime for every capacity). Tensors that do not live
  in L2 allocate nothing: HOST nodes write host memory, MEMSET writes the constant cache,
  and the logits read-back writes DDR. KV rows of earlier positions enter L2 through their
  ``kv_read`` MEMCPY, so they count from that copy's start until their last reader finishes.
  On a profile whose SFU (CVO) addresses only the first ``l2_reach_bytes`` of L2, every
  tensor a CVO node reads or writes must also sit in that window: such tensors demand the
  ``l2_reach`` capacity as well.
- `kv_prefetch_edges` says when each KV tile read may be issued: just ahead of use, at most
  two tiles of K (or of V) of a layer in flight, so no policy can hoist a layer's whole
  cache into L2 and then find no room for the work that frees it.
- `occupancy` / `l2_occupancy` turn a finished schedule into the step function of bytes
  allocated over time, for metrics and the Gantt chart's L2 row.

>>> import networkx as nx
>>> from pccx_flow.schedule.model import Lane, Schedule, Slot
>>> from pccx_flow.schedule.problem import SchedulingProblem
>>> g = nx.DiGraph([("load", "use")])
>>> p = SchedulingProblem(g, [Lane("x0", "cpu")], {"load": {"x0": 3}, "use": {"x0": 2}},
...                       capacities={"l2": 100}, demands={"load": {"l2": 64}})
>>> s = Schedule("demo", "none", p.lanes, {"load": Slot("load", "x0", 0, 3),
...                                          "use": Slot("use", "x0", 3, 5)})
>>> l2_occupancy(s, p)
[(0, 64), (5, 0)]
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import networkx as nx

L2 = "l2"
L2_REACH = "l2_reach"

# Ops whose outputs are not in L2: host memory and the constant cache.
_NOT_IN_L2_OPS = ("HOST", "MEMSET")
# MEMCPY transfers whose destination is DDR / the host, not L2.
_TO_DDR_FUNCS = ("logits_readback",)

Node = Hashable


def _output_bytes(attrs: dict) -> int:
    from pccx_flow.graph.emit import tensor_bytes

    return sum(tensor_bytes(t) for t in attrs.get("outputs", ()))


def decode_capacities(profile: Any) -> dict[str, int]:
    """``{"l2": bytes}``, plus ``"l2_reach"`` when the SFU reaches less than all of L2."""
    caps = {L2: int(profile.memory.l2_bytes)}
    reach = int(profile.sfu.l2_reach_bytes)
    if reach < caps[L2]:
        caps[L2_REACH] = reach
    return caps


def decode_demands(graph: nx.DiGraph, capacities: dict[str, int]) -> dict[Node, dict[str, int]]:
    """Bytes each node of a decode graph keeps resident in each capacity (see module doc)."""
    out: dict[Node, dict[str, int]] = {}
    reach = L2_REACH in capacities
    for n, attrs in graph.nodes(data=True):
        op = attrs.get("op")
        if op in _NOT_IN_L2_OPS or (op == "MEMCPY" and attrs.get("func") in _TO_DDR_FUNCS):
            continue
        nbytes = _output_bytes(attrs)
        if not nbytes:
            continue
        row = {L2: nbytes}
        if reach and (
            op == "CVO" or any(graph.nodes[s].get("op") == "CVO" for s in graph.successors(n))
        ):
            row[L2_REACH] = nbytes
        out[n] = row
    return out


def kv_prefetch_edges(graph: nx.DiGraph) -> list[tuple[Node, Node]]:
    """Order-only edges that issue each layer's KV tile reads just ahead of their use.

    A ``kv_read`` has no inputs, so a list scheduler may place it at any time, and priority
    policies place long DMA reads early: the whole context of every layer would be
    resident at once. With these edges (per layer):

    - K tile t >= 2 waits for every reader of K tile t-2; K tiles 0 and 1 wait for the
      layer's attention input (the producers of the first Q projection's input);
    - V tile 0 waits for every reader of the last K tile (the scores are done, the softmax
      runs while V streams in); V tile t >= 1 waits for every reader of V tile t-1 (single
      buffering: the softmax of every head stays resident until ·V, so room is short).

    So, whatever the policy, a layer holds at most two K tiles, then one V tile.
    The edges carry no tensor: they go into the scheduling problem
    (`problem_from_graph(memory=True)`), not into the decode graph, and their sources
    count as readers for freeing memory, which only holds a few small vectors (scores,
    partial ·V, the normed input) a little longer.
    """
    reads: dict[tuple[int, str], list[Node]] = {}
    for n, a in graph.nodes(data=True):
        if a.get("kernel") == "kv_read":
            reads.setdefault((int(a["layer"]), a["params"]["kind"]), []).append(n)
    edges: list[tuple[Node, Node]] = []
    for (layer, kind), nodes in sorted(reads.items()):
        nodes.sort(key=lambda n: graph.nodes[n]["params"]["positions"][0])
        if kind == "k":
            q0 = f"L{layer:02d}.attn.q_proj.h0"  # node ids are stable (graph.nodes)
            start_nodes = sorted(graph.predecessors(q0), key=str) if q0 in graph else []
        else:
            last_k = max(
                reads.get((layer, "k"), []),
                key=lambda n: graph.nodes[n]["params"]["positions"][0],
                default=None,
            )
            start_nodes = sorted(graph.successors(last_k), key=str) if last_k else []
        depth = 2 if kind == "k" else 1
        for t, n in enumerate(nodes):
            prev = nodes[t - depth] if t >= depth else None
            after = sorted(graph.successors(prev), key=str) if prev else start_nodes
            edges.extend((u, n) for u in after if u != n)
    return edges


def occupancy(schedule: Any, problem: Any, capacity: str) -> list[tuple[int, int]]:
    """Bytes allocated on `capacity` over time: ``[(t, bytes from t on), ...]``.

    Each demanding node holds its bytes from its start until the last finish of itself and
    its successors. Only the times where the total changes are listed; the last entry is
    the drop to 0. An empty list means nothing demands this capacity.
    """
    finish = {n: s.finish for n, s in schedule.slots.items()}
    delta: dict[int, int] = {}
    for n, row in problem.demands.items():
        d = row.get(capacity)
        if not d:
            continue
        start = schedule.slots[n].start
        end = problem.held_until(n, finish)
        if end <= start:
            continue
        delta[start] = delta.get(start, 0) + d
        delta[end] = delta.get(end, 0) - d
    series: list[tuple[int, int]] = []
    level = 0
    for t in sorted(delta):
        if not delta[t]:
            continue
        level += delta[t]
        series.append((t, level))
    return series


def l2_occupancy(schedule: Any, problem: Any) -> list[tuple[int, int]]:
    """`occupancy` of the ``l2`` capacity (empty when the problem models no L2)."""
    return occupancy(schedule, problem, L2)


def occupancy_stats(series: list[tuple[int, int]], span: int) -> dict[str, float]:
    """Peak bytes and time-weighted mean bytes over [0, span) of an `occupancy` series."""
    peak = max((b for _, b in series), default=0)
    area = 0
    for (t0, b), (t1, _) in zip(series, series[1:], strict=False):
        area += b * (min(t1, span) - min(t0, span))
    return {"peak_bytes": peak, "mean_bytes": area / span if span > 0 else 0.0}
