"""Optional fusion: fold light nodes into the task of their only consumer.

A decode step has thousands of element-wise and scalar nodes (an RMSNorm alone is seven:
square, REDUCE_SUM, mean+eps, SQRT, RECIP, SCALE, ×γ) that each take microseconds, while a
Dask task costs tens of microseconds on the threaded scheduler and ~0.6 ms plus a batching
interval per dependency level on `distributed` (``dask-notes.md``). Fusion trades the
one-task-per-node picture for fewer, larger tasks; it is off unless asked for
(``execute(..., fuse=True)``), and the unfused path stays the default and stays tested.

Rule: a node is *light* unless it is a GEMV/GEMM (weight streaming is where parallelism
pays). A light node whose output goes to exactly one consumer is computed inside that
consumer's task. Applied transitively, every group is an in-tree rooted at a node that is
heavy or has several consumers, so no node is ever computed twice and no parallel GEMV work
is serialised.
"""

from __future__ import annotations

import networkx as nx

HEAVY_OPS = ("GEMV", "GEMM")


def fusion_groups(graph: nx.DiGraph, order: list[str]) -> dict[str, list[str]]:
    """``{root: [members in topological order, root last]}`` covering every node once.

    `order` is a topological order of the graph (the plan's order).
    """
    root_of: dict[str, str] = {}
    for node in reversed(order):
        succ = list(graph.successors(node))
        light = graph.nodes[node].get("op") not in HEAVY_OPS
        if light and len(succ) == 1:
            root_of[node] = root_of[succ[0]]
        else:
            root_of[node] = node
    groups: dict[str, list[str]] = {}
    for node in order:
        groups.setdefault(root_of[node], []).append(node)
    return groups
