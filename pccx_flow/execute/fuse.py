"""Optional fusion: fewer, larger Dask tasks for the same kernel calls.

A decode step has ~13,000 nodes on E4B. Most are element-wise or scalar steps that take
microseconds (an RMSNorm alone is seven: square, REDUCE_SUM, mean+eps, SQRT, RECIP, SCALE,
×γ), and even a 512-row INT4 GEMV tile takes only ~0.1-0.2 ms here, while a task costs
~50-100 µs on the threaded scheduler and ~0.6 ms plus a batching interval per dependency
level on `distributed` (``dask-notes.md``). Fusion is off unless asked for
(``execute(..., fuse=True)``); the one-task-per-node graph stays the default and is tested.

Two rules, both keeping every node computed exactly once:

1. *Sibling tiles*: GEMV tiles of the same weight that read exactly the same producers are
   cut, in order, into chunks of at most `tile_group` tiles; a chunk is one task. Siblings
   with identical predecessors can have no path between them (it would close a cycle
   through a shared predecessor), so a chunk never waits on itself.
2. *Light single-consumer nodes*: a non-GEMV node whose output goes to exactly one consumer
   is computed inside that consumer's task. Applied transitively, this folds in-trees of
   element-wise steps into the task that needs them.

On E4B this turns 13,565 tasks into 3,722 (2,461 of them GEMV chunks); on tiny 2,427 into 587.

With tile_group=1 rule 1 is off and GEMV tiles stay one task each.
"""

from __future__ import annotations

import networkx as nx

HEAVY_OPS = ("GEMV", "GEMM")


def _sibling_chunks(graph: nx.DiGraph, order: list[str], tile_group: int) -> dict[str, str]:
    """root_of for GEMV tiles merged into chunks (rule 1)."""
    classes: dict[tuple, list[str]] = {}
    for node in order:
        attrs = graph.nodes[node]
        weight = attrs.get("weight")
        if attrs.get("op") in HEAVY_OPS and weight:
            key = (attrs["op"], weight["key"], frozenset(graph.predecessors(node)))
            classes.setdefault(key, []).append(node)
    root_of: dict[str, str] = {}
    for members in classes.values():
        for i in range(0, len(members), tile_group):
            chunk = members[i : i + tile_group]
            for node in chunk:
                root_of[node] = chunk[-1]
    return root_of


def fusion_groups(graph: nx.DiGraph, order: list[str], tile_group: int = 8) -> dict[str, list[str]]:
    """``{root: [members in topological order]}`` covering every node exactly once.

    `order` is a topological order of the graph (the plan's order).
    """
    root_of = _sibling_chunks(graph, order, tile_group) if tile_group > 1 else {}
    for node in reversed(order):
        if node in root_of:
            continue
        succ = list(graph.successors(node))
        light = graph.nodes[node].get("op") not in HEAVY_OPS
        root_of[node] = root_of[succ[0]] if light and len(succ) == 1 else node
    groups: dict[str, list[str]] = {}
    for node in order:
        groups.setdefault(root_of[node], []).append(node)
    return groups


def group_graph(graph: nx.DiGraph, groups: dict[str, list[str]]) -> nx.DiGraph:
    """The graph between groups (for checks: it must be acyclic)."""
    root_of = {n: r for r, members in groups.items() for n in members}
    out = nx.DiGraph()
    out.add_nodes_from(groups)
    for u, v in graph.edges:
        if root_of[u] != root_of[v]:
            out.add_edge(root_of[u], root_of[v])
    return out
